#include "maglb/conntrack.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "maglb/flow_hash.h"

namespace maglb {
namespace {

constexpr uint64_t kSec = 1'000'000'000ULL;
constexpr uint64_t kT0 = 1000 * kSec;  // an arbitrary monotonic start

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
  return ct.Lookup(k, ConntrackHash(k), now);
}

ConntrackEntry* Add(Conntrack& ct, const FlowKey& k, uint8_t flags, uint32_t backend, uint64_t now) {
  return ct.Insert(k, ConntrackHash(k), flags, backend, 0, now);
}

TEST(ConntrackTest, CapacityIsAtLeastConfigured) {
  Conntrack ct(SmallConfig(1000));
  EXPECT_GE(ct.capacity(), 1000u);
  Conntrack big(SmallConfig(kDefaultConntrackCapacity));
  EXPECT_GE(big.capacity(), kDefaultConntrackCapacity * 5 / 4);
  EXPECT_LT(big.capacity(), kDefaultConntrackCapacity * 5 / 4 + Conntrack::kWays);
}

TEST(ConntrackTest, InsertThenLookupFindsTheFlowAndNothingElse) {
  Conntrack ct(SmallConfig());
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
  Conntrack ct(SmallConfig());
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
  EXPECT_EQ(ct.StateOf(Add(ct, Key(2, 2004), kTcpRst, 1, kT0)), FlowState::kClosing);
  EXPECT_EQ(ct.StateOf(Add(ct, Key(2, 2005, 17), 0, 1, kT0)), FlowState::kUdp);
}

// Each state lives for its own timeout after its last packet (ticks are
// ~17 ms, so one second of margin either side).
TEST(ConntrackTest, IdleTimeoutsPerProtocolAndState) {
  Conntrack ct(SmallConfig());
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
      {"closing after FIN", Key(3, 3), kTcpSyn, kTcpFin | kTcpAck, 10},
      {"closing after RST", Key(3, 4), kTcpAck, kTcpRst, 10},
      {"udp", Key(3, 5, 17), 0, 0, 60},
  };
  for (const Case& c : cases) {
    ConntrackEntry* e = Add(ct, c.key, c.first_flags, 7, kT0);
    ASSERT_NE(e, nullptr) << c.name;
    uint64_t last = kT0;
    if (c.second_flags != 0xFF) {
      last = kT0 + 5 * kSec;
      ct.Touch(e, c.second_flags, last);
    }
    EXPECT_NE(Find(ct, c.key, last + (c.timeout_s - 1) * kSec), nullptr) << c.name;
    EXPECT_EQ(Find(ct, c.key, last + (c.timeout_s + 1) * kSec), nullptr) << c.name;
  }
}

TEST(ConntrackTest, TouchExtendsTheDeadline) {
  Conntrack ct(SmallConfig());
  const FlowKey k = Key(4, 1, 17);
  ConntrackEntry* e = Add(ct, k, 0, 1, kT0);
  for (int i = 1; i <= 10; ++i) {
    ASSERT_NE(Find(ct, k, kT0 + i * 50 * kSec), nullptr) << i;
    ct.Touch(e, 0, kT0 + i * 50 * kSec);
  }
  EXPECT_EQ(Find(ct, k, kT0 + 500 * kSec + 61 * kSec), nullptr);
}

TEST(ConntrackTest, ExpiredWaysAreReusedWithoutEviction) {
  Conntrack ct(SmallConfig(8));  // 2 buckets x 8 ways: every flow can use all 16
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
  Conntrack ct(SmallConfig(8));
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
  Conntrack ct(SmallConfig(8));
  for (uint16_t i = 0; i < 15; ++i) ASSERT_NE(Add(ct, Key(9, i), kTcpAck, i, kT0), nullptr);
  // The newest flow, but half-open.
  ASSERT_NE(Add(ct, Key(9, 100), kTcpSyn, 100, kT0 + 5 * kSec), nullptr);
  ASSERT_NE(Add(ct, Key(9, 200), kTcpAck, 200, kT0 + 6 * kSec), nullptr);
  EXPECT_EQ(Find(ct, Key(9, 100), kT0 + 6 * kSec), nullptr);
  for (uint16_t i = 0; i < 15; ++i) EXPECT_NE(Find(ct, Key(9, i), kT0 + 6 * kSec), nullptr);
}

TEST(ConntrackTest, SynFloodCannotEvictEstablishedFlows) {
  Conntrack ct(SmallConfig(8));
  for (uint16_t i = 0; i < 16; ++i) ASSERT_NE(Add(ct, Key(10, i), kTcpAck, i, kT0), nullptr);
  for (uint16_t i = 0; i < 100; ++i) {
    EXPECT_EQ(Add(ct, Key(11, i), kTcpSyn, 1, kT0 + kSec), nullptr);
  }
  EXPECT_EQ(ct.stats().untracked, 100u);
  for (uint16_t i = 0; i < 16; ++i) EXPECT_NE(Find(ct, Key(10, i), kT0 + kSec), nullptr);
  // The same new flow's next packet (not a SYN) is tracked, evicting one.
  EXPECT_NE(Add(ct, Key(11, 0), kTcpAck, 1, kT0 + 2 * kSec), nullptr);
  EXPECT_EQ(ct.stats().evictions, 1u);
}

TEST(ConntrackTest, RepinMovesTheFlowAndRestartsItsState) {
  Conntrack ct(SmallConfig());
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
  Conntrack ct(SmallConfig(1 << 16));
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
      hashes[j] = ConntrackHash(queries[off + j]);
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
  Conntrack ct(SmallConfig(1 << 16));
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
  Conntrack ct(SmallConfig());
  const uint64_t wrap = uint64_t{1} << 56;  // tick 2^32
  const uint64_t before = wrap - 5 * kSec;
  const FlowKey k = Key(13, 1, 17);
  ASSERT_NE(Add(ct, k, 0, 1, before), nullptr);
  EXPECT_NE(Find(ct, k, wrap + 50 * kSec), nullptr);  // 55 s after: alive (udp 60 s)
  EXPECT_EQ(Find(ct, k, wrap + 57 * kSec), nullptr);  // 62 s after: expired
  ct.Touch(Find(ct, k, wrap + 50 * kSec), 0, wrap + 50 * kSec);
  EXPECT_NE(Find(ct, k, wrap + 105 * kSec), nullptr);
}

TEST(ConntrackTest, TimeoutsFromConfig) {
  ConntrackTimeouts t = ConntrackTimeouts::FromConfig(SmallConfig());
  EXPECT_EQ(t.tcp_established_ns, 3600 * kSec);
  EXPECT_EQ(t.tcp_closing_ns, 10 * kSec);
  EXPECT_EQ(t.tcp_syn_ns, 30 * kSec);
  EXPECT_EQ(t.udp_ns, 60 * kSec);
}

}  // namespace
}  // namespace maglb
