#include "maglb/conntrack.h"

#include <bit>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "maglb/flow_hash.h"
#include "maglb/xxh64_internal.h"
#include "legacy_conntrack_hash.h"

namespace maglb {
namespace {

constexpr uint64_t kSec = 1'000'000'000ULL;
constexpr uint64_t kT0 = 1000 * kSec;  // an arbitrary monotonic start
constexpr ConntrackKey kKey = ConntrackKey::Fixed(1);  // deterministic tests

FlowKey Key(uint32_t client, uint16_t sport, uint8_t proto = 6) {
  FlowKey k;
  k.src = {10, static_cast<uint8_t>(client >> 16), static_cast<uint8_t>(client >> 8),
           static_cast<uint8_t>(client)};
  k.dst = {198, 51, 100, 1};
  k.src_port = sport;
  k.dst_port = 80;
  k.protocol = proto;
  return k;
}

ConntrackConfig SmallConfig(uint32_t capacity = 4096) {
  ConntrackConfig c;
  c.capacity = capacity;
  c.tcp_established_timeout_s = 3600;
  c.tcp_closing_timeout_s = 10;
  c.tcp_syn_timeout_s = 30;
  c.udp_timeout_s = 60;
  return c;
}

ConntrackEntry* Find(Conntrack& ct, const FlowKey& k, uint64_t now) {
  return ct.Lookup(k, ct.HashOf(k), now);
}

ConntrackEntry* Add(Conntrack& ct, const FlowKey& k, uint8_t flags, uint32_t backend, uint64_t now) {
  return ct.Insert(k, ct.HashOf(k), flags, backend, 0, now);
}

TEST(ConntrackTest, CapacityIsAtLeastConfigured) {
  Conntrack ct(SmallConfig(1000), kKey);
  EXPECT_GE(ct.capacity(), 1000u);
  Conntrack big(SmallConfig(kDefaultConntrackCapacity), kKey);
  EXPECT_GE(big.capacity(), kDefaultConntrackCapacity * 5 / 4);
  EXPECT_LT(big.capacity(), kDefaultConntrackCapacity * 5 / 4 + Conntrack::kWays);
}

// maglb --check sizes the tables before they exist: its figure must be what
// the constructor allocates.
TEST(ConntrackTest, MemoryBytesIsWhatATableAllocates) {
  for (uint32_t capacity : {1024u, 4096u, 100000u, 1u << 20}) {
    Conntrack table(SmallConfig(capacity));
    EXPECT_EQ(table.memory_bytes(), Conntrack::MemoryBytes(capacity)) << capacity;
  }
  // The default capacity (2^20 flows): 163840 buckets, 10 MiB of headers and
  // 80 MiB of entries (README, "Deploying on a NIC").
  EXPECT_EQ(Conntrack::MemoryBytes(1u << 20), size_t{90} << 20);
  // The largest (2^28): ~22.5 GiB, no overflow in the arithmetic.
  EXPECT_EQ(Conntrack::MemoryBytes(1u << 28), size_t{23040} << 20);
}

TEST(ConntrackTest, InsertThenLookupFindsTheFlowAndNothingElse) {
  Conntrack ct(SmallConfig(), kKey);
  const FlowKey a = Key(1, 1000), b = Key(1, 1001);
  ASSERT_EQ(Find(ct, a, kT0), nullptr);
  ConntrackEntry* e = Add(ct, a, kTcpSyn, 42, kT0);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(Find(ct, a, kT0), e);
  EXPECT_EQ(e->backend_id, 42u);
  EXPECT_EQ(e->key, a);
  EXPECT_EQ(Find(ct, b, kT0), nullptr);
  EXPECT_EQ(ct.occupied(), 1u);
  ct.Remove(e);
  EXPECT_EQ(Find(ct, a, kT0), nullptr);
  EXPECT_EQ(ct.occupied(), 0u);
}

TEST(ConntrackTest, TcpStateTransitions) {
  Conntrack ct(SmallConfig(), kKey);
  const FlowKey k = Key(2, 2000);
  ConntrackEntry* e = Add(ct, k, kTcpSyn, 1, kT0);
  EXPECT_EQ(ct.StateOf(e), FlowState::kSynSent);
  ct.Touch(e, kTcpSyn, kT0 + kSec);  // retransmitted SYN
  EXPECT_EQ(ct.StateOf(e), FlowState::kSynSent);
  ct.Touch(e, kTcpAck, kT0 + 2 * kSec);
  EXPECT_EQ(ct.StateOf(e), FlowState::kEstablished);
  ct.Touch(e, kTcpAck | 0x08 /*PSH*/, kT0 + 3 * kSec);
  EXPECT_EQ(ct.StateOf(e), FlowState::kEstablished);
  ct.Touch(e, kTcpFin | kTcpAck, kT0 + 4 * kSec);
  EXPECT_EQ(ct.StateOf(e), FlowState::kClosing);
  ct.Touch(e, kTcpAck, kT0 + 5 * kSec);  // a closing flow never reopens
  EXPECT_EQ(ct.StateOf(e), FlowState::kClosing);

  ConntrackEntry* r = Add(ct, Key(2, 2001), kTcpSyn, 1, kT0);
  ct.Touch(r, kTcpRst, kT0 + kSec);
  EXPECT_EQ(ct.StateOf(r), FlowState::kClosing);

  // First packets other than a SYN: mid-flow pickup is established; a FIN/RST closing.
  EXPECT_EQ(ct.StateOf(Add(ct, Key(2, 2002), kTcpAck, 1, kT0)), FlowState::kEstablished);
  EXPECT_EQ(ct.StateOf(Add(ct, Key(2, 2003), kTcpSyn | kTcpAck, 1, kT0)), FlowState::kEstablished);
  EXPECT_EQ(ct.StateOf(Add(ct, Key(2, 2006), kTcpFin | kTcpAck, 1, kT0)), FlowState::kClosing);
  EXPECT_EQ(Add(ct, Key(2, 2004), kTcpRst, 1, kT0), nullptr);  // a RST never inserts
  EXPECT_EQ(Add(ct, Key(2, 2007), kTcpRst | kTcpAck, 1, kT0), nullptr);
  EXPECT_EQ(ct.StateOf(Add(ct, Key(2, 2005, 17), 0, 1, kT0)), FlowState::kUdp);
}

// Each state lives for its own timeout after its last packet (ticks are
// ~17 ms, so one second of margin either side).
TEST(ConntrackTest, IdleTimeoutsPerProtocolAndState) {
  Conntrack ct(SmallConfig(), kKey);
  struct Case {
    const char* name;
    FlowKey key;
    uint8_t first_flags;
    uint8_t second_flags;  // 0xFF: no second packet
    uint64_t timeout_s;
  };
  const Case cases[] = {
      {"half-open SYN", Key(3, 1), kTcpSyn, 0xFF, 30},
      {"established", Key(3, 2), kTcpSyn, kTcpAck, 3600},
      // Unproven closing (a FIN straight after the SYN; a RST never proves).
      {"closing after FIN", Key(3, 3), kTcpSyn, kTcpFin | kTcpAck, 10},
      {"closing after RST", Key(3, 4), kTcpAck, kTcpRst, 10},
      {"closing after a first FIN", Key(3, 6), kTcpFin | kTcpAck, 0xFF, 10},
      {"udp", Key(3, 5, 17), 0, 0, 60},
  };
  for (const Case& c : cases) {
    ConntrackEntry* e = Add(ct, c.key, c.first_flags, 7, kT0);
    ASSERT_NE(e, nullptr) << c.name;
    uint64_t last = kT0;
    if (c.second_flags != 0xFF) {
      last = kT0 + kSec / 2;  // before a mid-flow entry proves itself by living
      ct.Touch(e, c.second_flags, last);
    }
    EXPECT_NE(Find(ct, c.key, last + (c.timeout_s - 1) * kSec), nullptr) << c.name;
    EXPECT_EQ(Find(ct, c.key, last + (c.timeout_s + 1) * kSec), nullptr) << c.name;
  }
}

TEST(ConntrackTest, TouchExtendsTheDeadline) {
  Conntrack ct(SmallConfig(), kKey);
  const FlowKey k = Key(4, 1, 17);
  ConntrackEntry* e = Add(ct, k, 0, 1, kT0);
  for (int i = 1; i <= 10; ++i) {
    ASSERT_NE(Find(ct, k, kT0 + i * 50 * kSec), nullptr) << i;
    ct.Touch(e, 0, kT0 + i * 50 * kSec);
  }
  EXPECT_EQ(Find(ct, k, kT0 + 500 * kSec + 61 * kSec), nullptr);
}

TEST(ConntrackTest, ExpiredWaysAreReusedWithoutEviction) {
  Conntrack ct(SmallConfig(8), kKey);  // 2 buckets x 8 ways: every flow can use all 16
  ASSERT_EQ(ct.capacity(), 16u);
  for (uint16_t i = 0; i < 16; ++i) ASSERT_NE(Add(ct, Key(5, i, 17), 0, i, kT0), nullptr);
  const uint64_t later = kT0 + 61 * kSec;  // all UDP flows dead
  for (uint16_t i = 0; i < 16; ++i) ASSERT_NE(Add(ct, Key(6, i, 17), 0, i, later), nullptr);
  EXPECT_EQ(ct.stats().evictions, 0u);
  EXPECT_EQ(ct.stats().expired_reused, 16u);
  EXPECT_EQ(ct.occupied(), 16u);
  EXPECT_EQ(ct.CountLive(later), 16u);
}

TEST(ConntrackTest, FullTableEvictsTheStalestAndTracksTheNewFlow) {
  Conntrack ct(SmallConfig(8), kKey);
  // 16 live UDP flows, flow i last seen at kT0 + i s; flow 5 refreshed late.
  for (uint16_t i = 0; i < 16; ++i) ASSERT_NE(Add(ct, Key(7, i, 17), 0, i, kT0 + i * kSec), nullptr);
  ct.Touch(Find(ct, Key(7, 0, 17), kT0 + 20 * kSec), 0, kT0 + 20 * kSec);
  const uint64_t now = kT0 + 30 * kSec;
  ConntrackEntry* e = Add(ct, Key(8, 1, 17), 0, 99, now);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(ct.stats().evictions, 1u);
  EXPECT_EQ(Find(ct, Key(8, 1, 17), now), e);
  // Flow 1 (seen at +1 s) was the stalest once flow 0 was refreshed.
  EXPECT_EQ(Find(ct, Key(7, 1, 17), now), nullptr);
  for (uint16_t i = 0; i < 16; ++i) {
    if (i != 1) {
      EXPECT_NE(Find(ct, Key(7, i, 17), now), nullptr) << i;
    }
  }
}

TEST(ConntrackTest, HalfOpenAndClosingFlowsAreEvictedBeforeEstablishedOnes) {
  Conntrack ct(SmallConfig(8), kKey);
  for (uint16_t i = 0; i < 15; ++i) ASSERT_NE(Add(ct, Key(9, i), kTcpAck, i, kT0), nullptr);
  // The newest flow, but half-open.
  ASSERT_NE(Add(ct, Key(9, 100), kTcpSyn, 100, kT0 + 5 * kSec), nullptr);
  ASSERT_NE(Add(ct, Key(9, 200), kTcpAck, 200, kT0 + 6 * kSec), nullptr);
  EXPECT_EQ(Find(ct, Key(9, 100), kT0 + 6 * kSec), nullptr);
  for (uint16_t i = 0; i < 15; ++i) EXPECT_NE(Find(ct, Key(9, i), kT0 + 6 * kSec), nullptr);
}

TEST(ConntrackTest, SynFloodCannotEvictEstablishedFlows) {
  Conntrack ct(SmallConfig(8), kKey);
  for (uint16_t i = 0; i < 16; ++i) {
    ConntrackEntry* e = Add(ct, Key(10, i), kTcpSyn, i, kT0);
    ASSERT_NE(e, nullptr);
    ct.Touch(e, kTcpAck, kT0);  // handshake completed: proven
  }
  // Nor can anything else that proves nothing (a RST does not even try).
  const uint8_t kinds[] = {kTcpSyn, kTcpAck, kTcpFin | kTcpAck, kTcpSyn | kTcpAck, 0, kTcpRst};
  for (uint16_t i = 0; i < 120; ++i) {
    const uint8_t f = kinds[i % std::size(kinds)];
    EXPECT_EQ(Add(ct, Key(11, i, f == 0 ? 17 : 6), f, 1, kT0 + kSec), nullptr);
  }
  EXPECT_EQ(ct.stats().untracked, 100u);
  EXPECT_EQ(ct.stats().evictions, 0u);
  for (uint16_t i = 0; i < 16; ++i) EXPECT_NE(Find(ct, Key(10, i), kT0 + kSec), nullptr);
}

TEST(ConntrackTest, RepinMovesTheFlowAndRestartsItsState) {
  Conntrack ct(SmallConfig(), kKey);
  const FlowKey k = Key(12, 1);
  ConntrackEntry* e = Add(ct, k, kTcpAck, 5, kT0);
  ct.Touch(e, kTcpFin, kT0 + kSec);
  ASSERT_EQ(ct.StateOf(e), FlowState::kClosing);
  ct.Repin(e, 6, 3, kTcpSyn, kT0 + 2 * kSec);
  EXPECT_EQ(Find(ct, k, kT0 + 2 * kSec), e);
  EXPECT_EQ(e->backend_id, 6u);
  EXPECT_EQ(e->backend_hint, 3u);
  EXPECT_EQ(ct.StateOf(e), FlowState::kSynSent);
}

TEST(ConntrackTest, BulkLookupEqualsSingleLookups) {
  Conntrack ct(SmallConfig(1 << 16), kKey);
  std::mt19937 rng(3);
  std::vector<FlowKey> present;
  for (uint32_t i = 0; i < 30000; ++i) {
    FlowKey k = Key(rng() & 0xFFFFFF, static_cast<uint16_t>(rng()), (rng() & 1) ? 6 : 17);
    if (Add(ct, k, kTcpAck, i, kT0) != nullptr) present.push_back(k);
  }
  std::vector<FlowKey> queries;
  for (size_t i = 0; i < 3200; ++i) {
    if (i % 3 == 0) {
      queries.push_back(Key(0x1000000 + static_cast<uint32_t>(i), 1));  // absent
    } else {
      queries.push_back(present[rng() % present.size()]);
    }
  }
  size_t hits = 0;
  for (size_t off = 0; off < queries.size(); off += 32) {
    const FlowKey* keys[32];
    uint64_t hashes[32];
    ConntrackEntry* out[32];
    for (int j = 0; j < 32; ++j) {
      keys[j] = &queries[off + j];
      hashes[j] = ct.HashOf(queries[off + j]);
    }
    ct.LookupBulk(keys, hashes, 32, kT0, out);
    for (int j = 0; j < 32; ++j) {
      ASSERT_EQ(out[j], Find(ct, queries[off + j], kT0)) << off + j;
      hits += out[j] != nullptr;
    }
  }
  EXPECT_GT(hits, 2000u);
}

// Two choices of 8-way buckets: the configured number of flows fits with
// (almost) no premature eviction.
TEST(ConntrackTest, HoldsItsConfiguredCapacity) {
  Conntrack ct(SmallConfig(1 << 16), kKey);
  const size_t n = 1 << 16;
  std::mt19937 rng(5);
  std::vector<FlowKey> keys;
  for (size_t i = 0; i < n; ++i) {
    FlowKey k = Key(static_cast<uint32_t>(i), static_cast<uint16_t>(rng()), 17);
    keys.push_back(k);
    ASSERT_NE(Add(ct, k, 0, 1, kT0), nullptr);
  }
  EXPECT_LE(ct.stats().evictions, n / 1000);
  size_t found = 0;
  for (const FlowKey& k : keys) found += Find(ct, k, kT0) != nullptr;
  EXPECT_EQ(found + ct.stats().evictions, n);
  EXPECT_EQ(ct.CountLive(kT0), found);
}

// Ticks are 32-bit (2^24 ns each) and wrap after ~2.3 years of uptime: a
// flow seen just before the wrap lives and expires across it as any other.
TEST(ConntrackTest, ExpiryIsRightAcrossTheTickWrap) {
  Conntrack ct(SmallConfig(), kKey);
  const uint64_t wrap = uint64_t{1} << 56;  // tick 2^32
  const uint64_t before = wrap - 5 * kSec;
  const FlowKey k = Key(13, 1, 17);
  ASSERT_NE(Add(ct, k, 0, 1, before), nullptr);
  EXPECT_NE(Find(ct, k, wrap + 50 * kSec), nullptr);  // 55 s after: alive (udp 60 s)
  EXPECT_EQ(Find(ct, k, wrap + 57 * kSec), nullptr);  // 62 s after: expired
  ct.Touch(Find(ct, k, wrap + 50 * kSec), 0, wrap + 50 * kSec);
  EXPECT_NE(Find(ct, k, wrap + 105 * kSec), nullptr);
}

// --- Issue 8.3: the bucket hash is keyed -----------------------------------

using testing::LegacyConntrackHash;

// An IPv6 source whose interface id zeroed the legacy hash's first multiply.
FlowKey ZeroingV6(uint64_t prefix, uint16_t sport) {
  FlowKey k;
  for (int i = 0; i < 8; ++i) k.src[i] = static_cast<uint8_t>((0x20010db800000000ULL | prefix) >> (56 - 8 * i));
  const uint64_t iid = 0xe7037ed1a0b428dbULL;  // little-endian in bytes 8..15
  std::memcpy(k.src.data() + 8, &iid, 8);
  k.dst = {0x20, 0x01, 0x0d, 0xb8, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80};
  k.src_port = sport;
  k.dst_port = 80;
  k.protocol = 6;
  k.is_v6 = 1;
  return k;
}

// Issue 8.3's attack: with the public hash, an attacker picks one source
// port whose (shared) buckets hold a live IPv4 flow, then 16 flows of
// distinct /64 prefixes (one hash for all) fill both buckets and evict it.
// Replayed through Insert's explicit hash: the legacy hash evicts, the
// table's keyed hash spreads the same 16 flows and evicts nothing.
TEST(ConntrackTest, SixteenChosenFlowsNoLongerEvictALiveFlow) {
  auto run = [](bool legacy) {
    Conntrack ct(SmallConfig(4096), kKey);
    auto hash = [&](const FlowKey& k) { return legacy ? LegacyConntrackHash(k) : ct.HashOf(k); };
    const FlowKey victim = Key(0x0a0101, 443, 17);  // live, unproven: UDP
    EXPECT_NE(ct.Insert(victim, hash(victim), 0, 1, 0, kT0), nullptr);
    const Conntrack::Probe target = ct.ProbeOf(LegacyConntrackHash(victim));
    uint16_t port = 1;
    for (;; ++port) {  // what the attacker computes offline
      const Conntrack::Probe p = ct.ProbeOf(LegacyConntrackHash(ZeroingV6(0, port)));
      if (p.primary == target.primary || p.secondary == target.primary) break;
    }
    for (uint64_t prefix = 0; prefix < 16; ++prefix) {
      const FlowKey k = ZeroingV6(prefix << 16, port);
      ct.Insert(k, hash(k), kTcpAck, 2, 0, kT0 + kSec);
    }
    return ct.Lookup(victim, hash(victim), kT0 + kSec) != nullptr;
  };
  EXPECT_FALSE(run(/*legacy=*/true));  // the attack, as it was
  EXPECT_TRUE(run(/*legacy=*/false));
}

// --- Issue 8.5: packets that prove nothing do not evict proven flows -------

TEST(ConntrackTest, FlowsBecomeProvenByHandshakeOrSustainedLife) {
  Conntrack ct(SmallConfig(), kKey);
  // SYN, then the client's handshake-completing ACK.
  ConntrackEntry* syn = Add(ct, Key(20, 1), kTcpSyn, 1, kT0);
  EXPECT_FALSE(ct.IsProven(syn));
  ct.Touch(syn, kTcpSyn, kT0 + kSec);  // a retransmitted SYN proves nothing
  EXPECT_FALSE(ct.IsProven(syn));
  ct.Touch(syn, kTcpAck, kT0 + kSec);
  EXPECT_TRUE(ct.IsProven(syn));
  // SYN then RST: never proven.
  ConntrackEntry* rst = Add(ct, Key(20, 2), kTcpSyn, 1, kT0);
  ct.Touch(rst, kTcpRst, kT0 + 5 * kSec);
  EXPECT_FALSE(ct.IsProven(rst));
  // Mid-flow ACK and UDP: proven by a packet at least kProofDelayNs later.
  for (const FlowKey& k : {Key(20, 3), Key(20, 4, 17)}) {
    ConntrackEntry* e = Add(ct, k, k.protocol == 6 ? kTcpAck : 0, 1, kT0);
    EXPECT_FALSE(ct.IsProven(e));
    ct.Touch(e, kTcpAck, kT0 + Conntrack::kProofDelayNs - 1);
    EXPECT_FALSE(ct.IsProven(e));
    ct.Touch(e, kTcpAck, kT0 + Conntrack::kProofDelayNs);
    EXPECT_TRUE(ct.IsProven(e));
  }
  // A RST, however late, proves nothing.
  ConntrackEntry* late_rst = Add(ct, Key(20, 5), kTcpAck, 1, kT0);
  ct.Touch(late_rst, kTcpRst, kT0 + 5 * kSec);
  EXPECT_FALSE(ct.IsProven(late_rst));
}

// Both buckets full of proven flows: floods of every kind of packet that
// proves nothing are forwarded untracked and evict none of them; unproven
// entries remain fair game.
TEST(ConntrackTest, FloodsOfUnprovenPacketsCannotEvictProvenFlows) {
  Conntrack ct(SmallConfig(8), kKey);  // 2 buckets x 8 ways: all flows share them
  for (uint16_t i = 0; i < 12; ++i) {
    ConntrackEntry* e = Add(ct, Key(21, i), kTcpSyn, i, kT0);
    ct.Touch(e, kTcpAck, kT0);  // proven by handshake
  }
  for (uint16_t i = 12; i < 14; ++i) {  // proven by sustained life
    ConntrackEntry* e = Add(ct, Key(21, i, 17), 0, i, kT0);
    ct.Touch(e, 0, kT0 + 2 * kSec);
  }
  ConntrackEntry* closing = Find(ct, Key(21, 0), kT0);
  ct.Touch(closing, kTcpFin | kTcpAck, kT0 + 2 * kSec);  // proven and closing: still protected
  // Two unproven ones.
  ASSERT_NE(Add(ct, Key(21, 100), kTcpAck, 100, kT0 + 2 * kSec), nullptr);
  ASSERT_NE(Add(ct, Key(21, 101, 17), 0, 101, kT0 + 2 * kSec), nullptr);
  const uint64_t now = kT0 + 3 * kSec;
  const uint8_t kinds[] = {kTcpAck, kTcpSyn, kTcpFin | kTcpAck, kTcpRst, kTcpSyn | kTcpAck, 0};
  int tracked = 0;
  for (uint16_t i = 0; i < 600; ++i) {
    const uint8_t f = kinds[i % std::size(kinds)];
    tracked += Add(ct, Key(22, i, f == 0 ? 17 : 6), f, 1, now) != nullptr;
  }
  EXPECT_EQ(tracked, 500);  // all but the RSTs, taking turns in the 2 unproven ways
  for (uint16_t i = 0; i < 12; ++i) EXPECT_NE(Find(ct, Key(21, i), now), nullptr) << i;
  for (uint16_t i = 12; i < 14; ++i) EXPECT_NE(Find(ct, Key(21, i, 17), now), nullptr) << i;
  EXPECT_EQ(ct.CountLive(now), 16u);
}

// --- Issue 8.6: one spoofed packet does not move a live connection ---------

ConntrackEntry* Established(Conntrack& ct, const FlowKey& k, uint32_t backend) {
  ConntrackEntry* e = Add(ct, k, kTcpSyn, backend, kT0);
  ct.Touch(e, kTcpAck, kT0);
  return e;
}

TEST(ConntrackTest, RstOnAProvenFlowKeepsItsLifeAndLaterPacketsRestoreEstablished) {
  Conntrack ct(SmallConfig(), kKey);
  const FlowKey k = Key(23, 1);
  ConntrackEntry* e = Established(ct, k, 7);
  ct.Touch(e, kTcpRst, kT0 + kSec);  // spoofed
  EXPECT_EQ(ct.StateOf(e), FlowState::kClosing);
  EXPECT_EQ(e->backend_id, 7u);
  EXPECT_TRUE(ct.IsProven(e));
  ct.Touch(e, kTcpAck, kT0 + 2 * kSec);  // the client goes on: it did not reset
  EXPECT_EQ(ct.StateOf(e), FlowState::kEstablished);
  EXPECT_NE(Find(ct, k, kT0 + 2 * kSec + 3000 * kSec), nullptr);  // the long timeout again
  EXPECT_EQ(e->backend_id, 7u);
}

TEST(ConntrackTest, FinOnAProvenFlowKeepsItsLifeAndDataRestoresEstablished) {
  Conntrack ct(SmallConfig(), kKey);
  const FlowKey k = Key(23, 2);
  ConntrackEntry* e = Established(ct, k, 7);
  ct.Touch(e, kTcpFin | kTcpAck, kT0 + kSec);
  EXPECT_EQ(ct.StateOf(e), FlowState::kClosing);
  ct.Touch(e, kTcpAck, kT0 + 2 * kSec);  // pure ACKs of a half-closed download
  EXPECT_EQ(ct.StateOf(e), FlowState::kClosing);
  // Proven: the established timeout after its last packet, closing or not.
  EXPECT_NE(Find(ct, k, kT0 + 2 * kSec + 3599 * kSec), nullptr);
  EXPECT_EQ(Find(ct, k, kT0 + 2 * kSec + 3601 * kSec), nullptr);
  ConntrackEntry* f = Established(ct, Key(23, 3), 8);
  ct.Touch(f, kTcpFin | kTcpAck, kT0 + kSec);  // spoofed
  ct.Touch(f, kTcpAck | 0x08, kT0 + 2 * kSec, /*payload=*/true);  // the client still sends data
  EXPECT_EQ(ct.StateOf(f), FlowState::kEstablished);
  EXPECT_EQ(f->backend_id, 8u);
}

// Issue 8 review B: one forged RST or FIN (and SYN) used to cut an idle
// proven flow's life to the closing (half-open) timeout; it must keep the
// established one. Unproven entries still take the short timeouts.
TEST(ConntrackTest, ForgedFinRstOrSynDoNotShortenAProvenFlowsLife) {
  Conntrack ct(SmallConfig(), kKey);
  const uint8_t forged[][2] = {{kTcpRst, 0}, {kTcpFin | kTcpAck, 0}, {kTcpRst, kTcpSyn},
                               {kTcpFin | kTcpAck, kTcpSyn}};
  for (uint16_t i = 0; i < std::size(forged); ++i) {
    const FlowKey k = Key(28, i);
    ConntrackEntry* e = Established(ct, k, 7);
    for (uint8_t f : forged[i]) {
      if (f != 0) ct.Touch(e, f, kT0 + kSec);
    }
    EXPECT_TRUE(ct.IsProven(e)) << i;
    // An idle SSH session: nothing for minutes, then its next packet.
    EXPECT_NE(Find(ct, k, kT0 + kSec + 3599 * kSec), nullptr) << i;
    EXPECT_EQ(Find(ct, k, kT0 + kSec + 3601 * kSec), nullptr) << i;
  }
  // Unproven (picked up mid-flow, half a second old): the closing timeout.
  const FlowKey u = Key(28, 100);
  ConntrackEntry* e = Add(ct, u, kTcpAck, 7, kT0);
  ct.Touch(e, kTcpFin | kTcpAck, kT0 + kSec / 2);
  ASSERT_FALSE(ct.IsProven(e));
  EXPECT_NE(Find(ct, u, kT0 + kSec / 2 + 9 * kSec), nullptr);
  EXPECT_EQ(Find(ct, u, kT0 + kSec / 2 + 11 * kSec), nullptr);
}

// ... but a proven flow that really closed still frees its way under
// pressure: once it has been closing (idle) longer than the closing timeout
// it is a victim, before idle established flows.
// A proven flow that closed keeps its way protected for proven_protect_s
// after its last packet, like any proven flow (a spoofed FIN/RST must not
// shorten that), and is then the first victim: before any live handshake or
// idle connection.
TEST(ConntrackTest, AClosedProvenFlowIsTheFirstVictimOnceItsWindowPassed) {
  Conntrack ct(SmallConfig(8), kKey);  // 2 buckets x 8 ways: all flows share them
  for (uint16_t i = 0; i < 16; ++i) Established(ct, Key(29, i), i);
  ct.Touch(Find(ct, Key(29, 3), kT0), kTcpFin | kTcpAck, kT0 + kSec);  // closes
  ct.Touch(Find(ct, Key(29, 3), kT0), kTcpAck, kT0 + kSec);           // last ACK
  EXPECT_EQ(Add(ct, Key(30, 1), kTcpSyn, 1, kT0 + 12 * kSec), nullptr);  // within 60 s: kept
  // 62 s on, every flow is past its window: the closed one goes first.
  ASSERT_NE(Add(ct, Key(30, 2), kTcpSyn, 1, kT0 + 62 * kSec), nullptr);
  EXPECT_EQ(Find(ct, Key(29, 3), kT0 + 62 * kSec), nullptr);
  for (uint16_t i = 0; i < 16; ++i) {
    if (i != 3) {
      EXPECT_NE(Find(ct, Key(29, i), kT0 + 62 * kSec), nullptr) << i;
    }
  }
}

// Review: one spoofed RST cut a just-active flow's protection to the closing
// timeout and made it the first proven victim, ahead of flows idle far longer.
TEST(ConntrackTest, ASpoofedRstDoesNotMakeAnActiveFlowTheFirstVictim) {
  ConntrackConfig c = SmallConfig(8);
  c.proven_protect_s = 60;
  Conntrack ct(c, kKey);
  for (uint16_t i = 0; i < 16; ++i) Established(ct, Key(40, i), i);  // all at kT0
  ConntrackEntry* a = Find(ct, Key(40, 5), kT0 + 40 * kSec);
  ASSERT_NE(a, nullptr);
  ct.Touch(a, kTcpAck, kT0 + 40 * kSec, true);  // the real client, at 40 s
  ct.Touch(a, kTcpRst, kT0 + 40 * kSec);        // spoofed RST
  // At 51 s all others are within their 60 s window too: nothing to evict.
  EXPECT_EQ(Add(ct, Key(41, 0), kTcpSyn, 1, kT0 + 51 * kSec), nullptr);
  EXPECT_NE(Find(ct, Key(40, 5), kT0 + 51 * kSec), nullptr);
  // At 70 s the others are idle 70 s, the reset one 30 s: it stays.
  ASSERT_NE(Add(ct, Key(41, 1), kTcpSyn, 1, kT0 + 70 * kSec), nullptr);
  EXPECT_NE(Find(ct, Key(40, 5), kT0 + 70 * kSec), nullptr);
}

// Review: real closes held their ways after their window and ranked after
// live handshakes, so a second SYN evicted the first instead of a connection
// that had closed long before.
TEST(ConntrackTest, LongClosedFlowsGoBeforeLiveHandshakes) {
  Conntrack ct(SmallConfig(8), kKey);
  for (uint16_t i = 0; i < 15; ++i) {
    ConntrackEntry* e = Established(ct, Key(42, i), i);
    ct.Touch(e, kTcpFin | kTcpAck, kT0 + kSec);
    ct.Touch(e, kTcpAck, kT0 + kSec);
  }
  ASSERT_NE(Add(ct, Key(43, 0), kTcpSyn, 1, kT0 + 100 * kSec), nullptr);
  ASSERT_NE(Add(ct, Key(43, 1), kTcpSyn, 1, kT0 + 100 * kSec), nullptr);
  EXPECT_NE(Find(ct, Key(43, 0), kT0 + 100 * kSec), nullptr);
  EXPECT_NE(Find(ct, Key(43, 1), kT0 + 100 * kSec), nullptr);
}

TEST(ConntrackTest, SynOnAClosingFlowKeepsItsBackendAndProof) {
  Conntrack ct(SmallConfig(), kKey);
  const FlowKey k = Key(23, 4);
  ConntrackEntry* e = Established(ct, k, 7);
  ct.Touch(e, kTcpRst, kT0 + kSec);  // spoofed RST
  ct.Touch(e, kTcpSyn, kT0 + kSec);  // spoofed SYN
  EXPECT_EQ(ct.StateOf(e), FlowState::kSynSent);
  EXPECT_EQ(e->backend_id, 7u);
  EXPECT_TRUE(ct.IsProven(e));
  ct.Touch(e, kTcpAck, kT0 + 2 * kSec);  // the real client's next segment
  EXPECT_EQ(ct.StateOf(e), FlowState::kEstablished);
  // A SYN on an established flow changes nothing.
  ct.Touch(e, kTcpSyn, kT0 + 3 * kSec);
  EXPECT_EQ(ct.StateOf(e), FlowState::kEstablished);
  EXPECT_EQ(e->backend_id, 7u);
}

// --- Issue 8 review C: proof buys protection only while it is paid for ----

ConntrackConfig ProtectConfig(uint32_t protect_s) {
  ConntrackConfig c = SmallConfig(8);  // 2 buckets x 8 ways: all flows share them
  c.proven_protect_s = protect_s;
  return c;
}

// A spoofed SYN then ACK proves a flow at once. Proven flows idle for longer
// than proven_protect_s are victims after every unproven one (nearest
// deadline first); until then they are not.
TEST(ConntrackTest, ProvenFlowsIdleLongerThanTheWindowAreEvictedAfterUnprovenOnes) {
  Conntrack ct(ProtectConfig(60), kKey);
  for (uint16_t i = 0; i < 14; ++i) Established(ct, Key(31, i), i);  // SYN + ACK each
  ASSERT_NE(Add(ct, Key(31, 100), kTcpAck, 1, kT0 + kSec), nullptr);  // unproven
  ASSERT_NE(Add(ct, Key(31, 101), kTcpAck, 1, kT0 + kSec), nullptr);
  ASSERT_EQ(ct.CountLive(kT0 + kSec), 16u);
  // Within the window: nothing proven goes, the unproven ways take turns.
  for (uint16_t i = 0; i < 10; ++i) EXPECT_NE(Add(ct, Key(32, i), kTcpAck, 1, kT0 + 59 * kSec), nullptr);
  for (uint16_t i = 0; i < 14; ++i) EXPECT_NE(Find(ct, Key(31, i), kT0 + 59 * kSec), nullptr) << i;
  // Past it: unproven ones first (the 2 newest still there), then the
  // stale proven ones, each new flow proven by its own handshake.
  const uint64_t now = kT0 + 61 * kSec;
  ConntrackEntry* u = Add(ct, Key(33, 0), kTcpAck, 1, now);
  ASSERT_NE(u, nullptr);
  for (uint16_t i = 0; i < 14; ++i) EXPECT_NE(Find(ct, Key(31, i), now), nullptr) << i;
  ct.Remove(u);
  int proven_left = 14;
  for (uint16_t i = 0; i < 16; ++i) {
    ConntrackEntry* e = Add(ct, Key(34, i), kTcpSyn, 1, now);
    ASSERT_NE(e, nullptr) << i;
    ct.Touch(e, kTcpAck, now);
  }
  for (uint16_t i = 0; i < 14; ++i) proven_left -= Find(ct, Key(31, i), now) == nullptr;
  EXPECT_EQ(proven_left, 0);
  // Now full of recently seen proven flows: the next new flow is untracked.
  EXPECT_EQ(Add(ct, Key(35, 0), kTcpSyn, 1, now), nullptr);
}

// A spoofer who keeps his entries protected must send each of them a packet
// within every window: refreshed ways hold, ways left alone for a window
// fall. Keeping W ways protected costs W packets per proven_protect_s.
TEST(ConntrackTest, KeepingProvenFlowsProtectedCostsOnePacketPerFlowPerWindow) {
  for (uint32_t window : {10u, 60u}) {
    Conntrack ct(ProtectConfig(window), kKey);
    const uint64_t w = window * kSec;
    for (uint16_t i = 0; i < 16; ++i) Established(ct, Key(36, i), i);
    // Refreshed, all of them, once per window (just inside it): protected.
    uint64_t t = kT0;
    for (int round = 0; round < 5; ++round) {
      t += w - kSec;
      for (uint16_t i = 0; i < 16; ++i) ct.Touch(Find(ct, Key(36, i), t), kTcpAck, t);
      EXPECT_EQ(Add(ct, Key(37, round), kTcpSyn, 1, t + w - kSec), nullptr) << window << " " << round;
    }
    EXPECT_EQ(ct.stats().evictions, 0u);
    // Half of them skip one refresh: those, and only those, can be evicted.
    t += w - kSec;
    for (uint16_t i = 0; i < 8; ++i) ct.Touch(Find(ct, Key(36, i), t), kTcpAck, t);
    const uint64_t later = t + 2 * kSec;  // a window and a second after the others' last packet
    for (uint16_t i = 0; i < 8; ++i) {  // new flows, each proven by its handshake
      ConntrackEntry* e = Add(ct, Key(38, i), kTcpSyn, 1, later);
      ASSERT_NE(e, nullptr) << window << " " << i;
      ct.Touch(e, kTcpAck, later);
    }
    EXPECT_EQ(Add(ct, Key(38, 8), kTcpSyn, 1, later), nullptr) << window;
    EXPECT_EQ(ct.stats().evictions, 8u);
    for (uint16_t i = 0; i < 8; ++i) EXPECT_NE(Find(ct, Key(36, i), later), nullptr) << i;
    for (uint16_t i = 8; i < 16; ++i) EXPECT_EQ(Find(ct, Key(36, i), later), nullptr) << i;
  }
}

// --- Issue 8.8: long uptimes ------------------------------------------------

constexpr uint64_t kTick = uint64_t{1} << 24;  // ns

// A flow that expired and whose way was never reused stays dead for ever:
// the clock runs past 2^31 ticks (where the signed comparison used to bring
// it back) and 2^32 ticks (the wrap), with Sweep called as the pipeline
// does (here once a simulated hour, traffic elsewhere).
TEST(ConntrackTest, DeadEntryStaysDeadPast2To31And2To32Ticks) {
  Conntrack ct(SmallConfig(4096), kKey);
  const FlowKey k = Key(24, 1);
  ct.Sweep(kT0);
  ASSERT_NE(Add(ct, k, kTcpSyn, 1, kT0), nullptr);
  const uint64_t hour = 3600 * kSec;
  bool seen_alive = false;
  uint64_t t = kT0;
  for (; t < kT0 + (uint64_t{1} << 32) * kTick + 400 * 24 * hour; t += hour) {
    ct.Sweep(t);
    if (t > kT0 + 31 * kSec) seen_alive |= Find(ct, k, t) != nullptr;
  }
  EXPECT_FALSE(seen_alive);
  EXPECT_EQ(ct.CountLive(t), 0u);
  EXPECT_EQ(ct.occupied(), 1u);  // still there, dead: reused by the next insert
}

// The worker was idle (no Sweep) for longer than the resurrection horizon:
// the first Sweep after the gap knows every entry is dead.
TEST(ConntrackTest, ALongGapWithoutSweepsKillsEverything) {
  Conntrack ct(SmallConfig(4096), kKey);
  ct.Sweep(kT0);
  for (uint16_t i = 0; i < 100; ++i) ASSERT_NE(Add(ct, Key(25, i), kTcpAck, 1, kT0), nullptr);
  for (uint64_t gap : {uint64_t{1} << 31, (uint64_t{1} << 32) - 100, (uint64_t{3} << 31)}) {
    const uint64_t now = kT0 + gap * kTick;
    ct.Sweep(now);
    EXPECT_EQ(ct.CountLive(now), 0u) << gap;
    for (uint16_t i = 0; i < 100; ++i) EXPECT_EQ(Find(ct, Key(25, i), now), nullptr) << i;
  }
}

// Inserting into buckets whose ways carry deadlines far in the "future"
// (a table never swept, as a direct user may leave it) must not overflow
// the victim ordering (UBSan: signed overflow in the old rem + 2^30).
TEST(ConntrackTest, VictimChoiceNeverOverflowsOnFarDeadlines) {
  Conntrack ct(SmallConfig(8), kKey);
  for (uint16_t i = 0; i < 16; ++i) ASSERT_NE(Add(ct, Key(26, i), kTcpAck, 1, kT0), nullptr);
  // ~1.75 years later, unswept, every deadline looks 2^30 + 2^20 ticks ahead
  // (falsely live): the old rem + 2^30 overflowed there.
  const uint64_t now = kT0 + ((uint64_t{1} << 32) - (uint64_t{1} << 30) - (uint64_t{1} << 20)) * kTick;
  EXPECT_NE(Add(ct, Key(27, 1), kTcpAck, 1, now), nullptr);
}

TEST(ConntrackTest, TimeoutsFromConfig) {
  ConntrackTimeouts t = ConntrackTimeouts::FromConfig(SmallConfig());
  EXPECT_EQ(t.tcp_established_ns, 3600 * kSec);
  EXPECT_EQ(t.tcp_closing_ns, 10 * kSec);
  EXPECT_EQ(t.tcp_syn_ns, 30 * kSec);
  EXPECT_EQ(t.udp_ns, 60 * kSec);
}

}  // namespace

// --- The way an insert takes, on chosen bucket contents --------------------

// Sets bucket contents directly and asks SelectSlot (vectorised) for the
// way; a model of the file comment's rules says which way it must be.
struct ConntrackTestPeer {
  static void SetWay(Conntrack& ct, uint32_t bucket, int way, uint32_t tag, uint32_t expires) {
    ct.headers_[bucket].tag[way] = tag;
    ct.headers_[bucket].expires[way] = expires;
  }
  static Conntrack::Slot SelectSlot(const Conntrack& ct, uint32_t primary, uint32_t secondary,
                                    uint32_t now_tick) {
    return ct.SelectSlot(Conntrack::Probe{primary, secondary, 0}, now_tick);
  }
};

namespace {

struct Way {
  uint32_t tag, expires;
};

// The file comment, literally: a free (empty or expired) way in the bucket
// with more of them, the primary on a tie, the lowest such way; else the
// lowest (class, remaining ticks clamped at 2^29, way) over both buckets
// among the unprotected ways; none if every way is protected.
Conntrack::Slot ModelSlot(const Way (&ways)[16], const uint32_t buckets[2], uint32_t now,
                          int32_t above_tcp, int32_t above_udp) {
  auto rem = [&](int i) { return static_cast<int32_t>(ways[i].expires - now); };
  auto is_free = [&](int i) { return (ways[i].tag & 0xFF) == 0 || rem(i) <= 0; };
  auto slot_at = [&](int i, Conntrack::Slot::Kind kind) {
    Conntrack::Slot s;
    s.index = int64_t{buckets[i / 8]} * 8 + i % 8;
    s.kind = kind;
    s.tag = ways[i].tag;
    s.expires = ways[i].expires;
    return s;
  };
  int free_count[2] = {0, 0};
  for (int i = 0; i < 16; ++i) free_count[i / 8] += is_free(i);
  if (free_count[0] + free_count[1] > 0) {
    const int k = free_count[1] > free_count[0] ? 1 : 0;
    for (int i = 8 * k; i < 8 * k + 8; ++i) {
      if (is_free(i)) {
        return slot_at(i, (ways[i].tag & 0xFF) == 0 ? Conntrack::Slot::kEmptyWay : Conntrack::Slot::kDead);
      }
    }
  }
  int best = -1;
  std::pair<int, int32_t> best_rank{};
  for (int i = 0; i < 16; ++i) {
    const auto state = static_cast<FlowState>(ways[i].tag & 7);
    const bool proven = (ways[i].tag & 0x80) != 0;
    const bool early = state == FlowState::kSynSent || state == FlowState::kClosing;
    if (proven && rem(i) > (state == FlowState::kUdp ? above_udp : above_tcp)) continue;  // protected
    const int victim_class = proven ? (early ? 0 : 3) : (early ? 1 : 2);
    const std::pair<int, int32_t> rank{victim_class, std::min<int32_t>(rem(i), int32_t{1} << 29)};
    if (best < 0 || rank < best_rank) {
      best = i;
      best_rank = rank;
    }
  }
  if (best < 0) return Conntrack::Slot{};
  return slot_at(best, Conntrack::Slot::kEvict);
}

TEST(ConntrackTest, SelectSlotTakesTheWayTheRulesSay) {
  ConntrackConfig config = SmallConfig(8);  // two buckets: 0 and 1
  Conntrack ct(config, kKey);
  auto ticks = [](uint64_t s) { return static_cast<int32_t>((s * kSec + kTick - 1) / kTick); };
  const int32_t window = ticks(config.proven_protect_s);
  const int32_t above_tcp = std::max(ticks(config.tcp_established_timeout_s) - window, 0);
  const int32_t above_udp = std::max(ticks(config.udp_timeout_s) - window, 0);
  std::mt19937_64 rng(7);
  // Remaining ticks around every boundary the choice has: dead/live, the
  // protection thresholds, the 2^29 clamp, far deadlines and the wrap.
  const int32_t boundaries[] = {0, above_tcp, above_udp, int32_t{1} << 29, INT32_MAX};
  auto remaining = [&]() -> int32_t {
    switch (rng() % 4) {
      case 0:  // boundary - 2 .. boundary + 2, wrapping
        return static_cast<int32_t>(static_cast<uint32_t>(boundaries[rng() % std::size(boundaries)]) +
                                    static_cast<uint32_t>(rng() % 5) - 2u);
      case 1: return static_cast<int32_t>(rng() % 64);  // near deadlines: many ties
      case 2: return static_cast<int32_t>(rng() % (2 * above_tcp));
      default: return static_cast<int32_t>(rng());
    }
  };
  int kinds[4] = {};
  for (int round = 0; round < 200000; ++round) {
    const uint32_t now = static_cast<uint32_t>(rng());
    // Few free ways, so that most rounds evict; some rounds (nearly) all
    // protected.
    const bool all_proven = round % 7 == 0;
    const unsigned free_odds = all_proven ? 1u << 30 : round % 3 == 0 ? 4 : 64;
    Way ways[16];
    for (Way& w : ways) {
      const uint32_t state = 1 + static_cast<uint32_t>(rng() % 4);
      uint32_t low = state;
      if (all_proven || rng() % 2) low |= 0x80;
      if (state == 3 && rng() % 2) low |= 0x40;  // closed by a RST
      if (rng() % free_odds == 0) low = rng() % 2 ? 0 : low;  // empty, or dead below
      int32_t rem = remaining();
      if (all_proven && rng() % 16 != 0) rem = std::max(above_tcp, above_udp) + 1 + static_cast<int32_t>(rng() % 1000);
      if (rng() % free_odds == 0) rem = -static_cast<int32_t>(rng() % 1000);
      w = {static_cast<uint32_t>(rng() << 8) | low, now + static_cast<uint32_t>(rem)};
    }
    const uint32_t buckets[2] = {static_cast<uint32_t>(round % 2), static_cast<uint32_t>(1 - round % 2)};
    for (int i = 0; i < 16; ++i) ConntrackTestPeer::SetWay(ct, buckets[i / 8], i % 8, ways[i].tag, ways[i].expires);
    const Conntrack::Slot want = ModelSlot(ways, buckets, now, above_tcp, above_udp);
    const Conntrack::Slot got = ConntrackTestPeer::SelectSlot(ct, buckets[0], buckets[1], now);
    ASSERT_EQ(got.kind, want.kind) << "round " << round;
    ASSERT_EQ(got.index, want.index) << "round " << round;
    ASSERT_EQ(got.tag, want.tag) << "round " << round;
    ASSERT_EQ(got.expires, want.expires) << "round " << round;
    ++kinds[got.kind];
  }
  // Every outcome was exercised, each many times.
  for (int k = 0; k < 4; ++k) EXPECT_GT(kinds[k], 1000) << "kind " << k;
}

}  // namespace
}  // namespace maglb

namespace maglb {
namespace {

// Flows that share one hash share both buckets and the signature: every way
// matches, and only the key tells them apart. Lookup and the burst path
// (PrefetchEntries, then LookupPrefetched) must each find its own entry in
// either bucket, and nothing for a key of the same hash that is not there.
TEST(ConntrackTest, FlowsOfOneHashAreToldApartByTheirKeys) {
  Conntrack ct(SmallConfig(4096), kKey);
  const uint64_t hash = 0x0123456789abcdefULL;
  std::vector<ConntrackEntry*> entries;
  for (uint16_t i = 0; i < 16; ++i) {
    ConntrackEntry* e = ct.Insert(Key(30, i), hash, kTcpAck, i, 0, kT0);
    ASSERT_NE(e, nullptr) << i;
    entries.push_back(e);
  }
  ASSERT_EQ(ct.stats().evictions, 0u);
  for (uint16_t i = 0; i < 16; ++i) {
    EXPECT_EQ(ct.Lookup(Key(30, i), hash, kT0), entries[i]) << i;
    Conntrack::Probe probe = ct.ProbeOf(hash);
    ct.PrefetchBuckets(probe);
    ASSERT_TRUE(ct.PrefetchEntries(probe));
    EXPECT_EQ(probe.matches, 0xFFFF);  // all 16 ways: one signature
    EXPECT_EQ(ct.LookupPrefetched(Key(30, i), probe, kT0), entries[i]) << i;
  }
  Conntrack::Probe probe = ct.ProbeOf(hash);
  ASSERT_TRUE(ct.PrefetchEntries(probe));
  EXPECT_EQ(ct.LookupPrefetched(Key(30, 99), probe, kT0), nullptr);
  EXPECT_EQ(ct.Lookup(Key(30, 99), hash, kT0), nullptr);
  // A removed flow's way no longer matches.
  ct.Remove(entries[3]);
  probe = ct.ProbeOf(hash);
  ASSERT_TRUE(ct.PrefetchEntries(probe));
  EXPECT_EQ(std::popcount(probe.matches), 15);
  EXPECT_EQ(ct.LookupPrefetched(Key(30, 3), probe, kT0), nullptr);
  EXPECT_EQ(ct.LookupPrefetched(Key(30, 4), probe, kT0), entries[4]);
}

// Signature 1: an empty way's tag (0) differs from it by 0x100 alone, which
// a "tag ^ (sig << 8) in 1..256" test takes for a match. A removed flow's way
// must match nothing, and never hand back its stale key: in the upper half of
// the tick range an empty way's expires (0) reads as ahead of now.
TEST(ConntrackTest, EmptyWaysNeverMatchSignatureOne) {
  Conntrack ct(SmallConfig(4096), kKey);
  const uint64_t hash = uint64_t{1} << 40 | 0x9876;  // SigOf = 1
  const uint64_t late = uint64_t{3} << 55;           // tick 3 * 2^31
  const FlowKey k = Key(31, 7);
  Conntrack::Probe probe = ct.ProbeOf(hash);
  EXPECT_FALSE(ct.PrefetchEntries(probe));  // a fresh table: all ways empty
  EXPECT_EQ(probe.matches, 0);
  ConntrackEntry* e = ct.Insert(k, hash, kTcpAck, 5, 0, late);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(ct.Lookup(k, hash, late), e);
  ct.Remove(e);
  EXPECT_EQ(ct.Lookup(k, hash, late + kSec), nullptr);
  probe = ct.ProbeOf(hash);
  EXPECT_FALSE(ct.PrefetchEntries(probe));
  EXPECT_EQ(ct.LookupPrefetched(k, probe, late + kSec), nullptr);
}

}  // namespace
}  // namespace maglb
