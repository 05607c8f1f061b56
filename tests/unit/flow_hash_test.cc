#include "maglb/flow_hash.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "maglb/hash.h"
#include "maglb/lookup_table.h"
#include "legacy_conntrack_hash.h"

namespace maglb {
namespace {

FlowKey V4Key(uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport, uint8_t proto) {
  FlowKey k;
  for (int i = 0; i < 4; ++i) {
    k.src[i] = static_cast<uint8_t>(src >> (24 - 8 * i));
    k.dst[i] = static_cast<uint8_t>(dst >> (24 - 8 * i));
  }
  k.src_port = sport;
  k.dst_port = dport;
  k.protocol = proto;
  return k;
}

FlowKey V6Key(uint64_t src_hi, uint64_t src_lo, uint16_t sport, uint16_t dport) {
  FlowKey k;
  for (int i = 0; i < 8; ++i) {
    k.src[i] = static_cast<uint8_t>(src_hi >> (56 - 8 * i));
    k.src[8 + i] = static_cast<uint8_t>(src_lo >> (56 - 8 * i));
  }
  // VIP 2001:db8:ffff::80
  const uint8_t vip[16] = {0x20, 0x01, 0x0d, 0xb8, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80};
  for (int i = 0; i < 16; ++i) k.dst[i] = vip[i];
  k.src_port = sport;
  k.dst_port = dport;
  k.protocol = 6;
  k.is_v6 = 1;
  return k;
}

constexpr uint32_t kVip = 0xC6336464;  // 198.51.100.100

// The fixed-length specialisation is XXH64 on the key's bytes (this host is
// little-endian, so memory layout == the specified layout).
TEST(FlowHashTest, EqualsXxh64OfTheKeyBytes) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 10000; ++i) {
    FlowKey k;
    for (auto& b : k.src) b = static_cast<uint8_t>(rng());
    for (auto& b : k.dst) b = static_cast<uint8_t>(rng());
    k.src_port = static_cast<uint16_t>(rng());
    k.dst_port = static_cast<uint16_t>(rng());
    k.protocol = static_cast<uint8_t>(rng());
    k.is_v6 = static_cast<uint8_t>(rng() & 1);
    const uint64_t seed = rng();
    ASSERT_EQ(FlowHash(k, seed), Xxh64(&k, sizeof(k), seed)) << i;
  }
}

// Goldens from an independent implementation (python3-xxhash):
//   xxhash.xxh64_intdigest(key_bytes, seed)
// with key_bytes built field by field (ports as little-endian u16). If one of
// these fails, placement changed for every deployment: that is never an
// accident to accept.
TEST(FlowHashTest, GoldenValues) {
  FlowKey k4 = V4Key(0xC0000201, 51234, 0xC633640A, 443, 6);  // 192.0.2.1 -> 198.51.100.10
  EXPECT_EQ(FlowHash(k4, 0), 0x4258dcb6838e9809ULL);
  EXPECT_EQ(FlowHash(k4, 0x123456789abcdef0ULL), 0xfebffb040a3c680bULL);

  FlowKey k6;
  const uint8_t src[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  const uint8_t dst[16] = {0x20, 0x01, 0x0d, 0xb8, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80};
  for (int i = 0; i < 16; ++i) k6.src[i] = src[i], k6.dst[i] = dst[i];
  k6.src_port = 40000;
  k6.dst_port = 80;
  k6.protocol = 17;
  k6.is_v6 = 1;
  EXPECT_EQ(FlowHash(k6, 42), 0xa5fdc4ff25d06f6cULL);
}

// Chi-square of the slot counts over an M-slot table, as a z-score: for a
// uniform hash, X^2 ~ chi2(M-1) ~ Normal(M-1, 2(M-1)), so |z| stays within a
// few units; a weak hash on structured input gives z in the hundreds.
struct Uniformity {
  double z;
  double max_rel_dev;  // max |count - mean| / mean
};

Uniformity SlotUniformity(const std::vector<FlowKey>& keys, uint64_t seed, uint32_t m) {
  std::vector<uint32_t> counts(m, 0);
  for (const FlowKey& k : keys) ++counts[LookupTable::SlotOf(FlowHash(k, seed), m)];
  const double expected = static_cast<double>(keys.size()) / m;
  double x2 = 0, max_dev = 0;
  for (uint32_t c : counts) {
    x2 += (c - expected) * (c - expected) / expected;
    max_dev = std::max(max_dev, std::abs(c - expected) / expected);
  }
  const double df = m - 1;
  return {(x2 - df) / std::sqrt(2 * df), max_dev};
}

std::vector<FlowKey> SequentialV4Clients(size_t n) {
  std::vector<FlowKey> keys;
  for (uint32_t i = 0; i < n; ++i) keys.push_back(V4Key(0x0A000000 + i, 40000, kVip, 80, 6));
  return keys;
}

std::vector<FlowKey> SequentialV6ClientsLow(size_t n) {
  std::vector<FlowKey> keys;
  for (uint64_t i = 0; i < n; ++i) keys.push_back(V6Key(0x20010db800000000ULL, i + 1, 40000, 443));
  return keys;
}

std::vector<FlowKey> SequentialV6ClientsHigh(size_t n) {
  std::vector<FlowKey> keys;  // one /64 per client, same interface id
  for (uint64_t i = 0; i < n; ++i) keys.push_back(V6Key(0x20010db800000000ULL + i, 1, 40000, 443));
  return keys;
}

std::vector<FlowKey> OneClientManyPorts() {
  std::vector<FlowKey> keys;
  for (uint32_t p = 1024; p <= 65535; ++p) {
    keys.push_back(V4Key(0xC0000201, static_cast<uint16_t>(p), kVip, 443, 6));
  }
  return keys;
}

class FlowHashUniformityTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(FlowHashUniformityTest, RealisticAddressSetsSpreadEvenlyOverSlots) {
  const uint32_t m = GetParam();
  // ~20 keys per slot for the large table, more for the small ones.
  const size_t n = std::max<size_t>(20 * m, 200000);
  struct Set {
    const char* name;
    std::vector<FlowKey> keys;
  };
  const Set sets[] = {
      {"sequential IPv4 clients, fixed port", SequentialV4Clients(n)},
      {"sequential IPv6 clients (low 64 bits)", SequentialV6ClientsLow(n)},
      {"sequential IPv6 /64s (high 64 bits)", SequentialV6ClientsHigh(n)},
      {"one client, ports 1024-65535", OneClientManyPorts()},
  };
  for (const Set& set : sets) {
    for (uint64_t seed : {uint64_t{0}, uint64_t{0xfeedface}}) {
      Uniformity u = SlotUniformity(set.keys, seed, m);
      EXPECT_LT(std::abs(u.z), 5.0) << set.name << " seed " << seed << " M " << m;
      const double mean = static_cast<double>(set.keys.size()) / m;
      // Max deviation: within 6 standard deviations of a Poisson count (where
      // the mean is large enough for that bound to mean something).
      if (mean >= 10) {
        EXPECT_LT(u.max_rel_dev, 6.0 / std::sqrt(mean)) << set.name << " seed " << seed << " M " << m;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TableSizes, FlowHashUniformityTest, ::testing::Values(251u, 4099u, 65537u));

// Strict avalanche on the bits that choose the slot: flipping any one input
// bit flips each of the high 32 output bits with probability ~1/2.
TEST(FlowHashTest, EveryInputBitAvalanchesIntoTheHigh32Bits) {
  std::mt19937_64 rng(11);
  constexpr int kSamples = 2000;
  std::vector<std::array<int, 32>> flips(320);
  for (int s = 0; s < kSamples; ++s) {
    FlowKey k;
    for (auto& b : k.src) b = static_cast<uint8_t>(rng());
    for (auto& b : k.dst) b = static_cast<uint8_t>(rng());
    k.src_port = static_cast<uint16_t>(rng());
    k.dst_port = static_cast<uint16_t>(rng());
    k.protocol = static_cast<uint8_t>(rng());
    k.is_v6 = static_cast<uint8_t>(rng());
    k.reserved = static_cast<uint16_t>(rng());
    const uint64_t h = FlowHash(k, 0);
    for (int bit = 0; bit < 320; ++bit) {
      FlowKey f = k;
      reinterpret_cast<uint8_t*>(&f)[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      const uint64_t d = (h ^ FlowHash(f, 0)) >> 32;
      for (int o = 0; o < 32; ++o) flips[bit][o] += static_cast<int>((d >> o) & 1);
    }
  }
  for (int bit = 0; bit < 320; ++bit) {
    for (int o = 0; o < 32; ++o) {
      const double p = static_cast<double>(flips[bit][o]) / kSamples;
      // sd of p is ~0.011 at 2000 samples; 0.44..0.56 is > 5 sd.
      ASSERT_NEAR(p, 0.5, 0.06) << "input bit " << bit << " output bit " << (32 + o);
    }
  }
}

TEST(FlowHashTest, DifferentSeedsGiveIndependentPlacement) {
  const std::vector<FlowKey> keys = SequentialV4Clients(200000);
  constexpr uint32_t kM = 65537;
  size_t same = 0;
  for (const FlowKey& k : keys) {
    same += LookupTable::SlotOf(FlowHash(k, 1), kM) == LookupTable::SlotOf(FlowHash(k, 2), kM);
  }
  // Independent placements agree on ~1/M of the keys (~3 here).
  EXPECT_LT(same, 20u);
  // And with 2 backends' worth of half tables: ~50% agreement, not 100%.
  size_t same_half = 0;
  for (const FlowKey& k : keys) {
    same_half += (FlowHash(k, 1) >> 63) == (FlowHash(k, 2) >> 63);
  }
  EXPECT_NEAR(static_cast<double>(same_half) / keys.size(), 0.5, 0.01);
}

TEST(FlowHashTest, Ipv6AddressesCountIn128Bits) {
  // Differ only in the low 64 bits, and only in the high 64 bits.
  const FlowKey base = V6Key(0x20010db800000001ULL, 0x0000000000000001ULL, 1000, 80);
  const FlowKey low = V6Key(0x20010db800000001ULL, 0x0000000000000002ULL, 1000, 80);
  const FlowKey high = V6Key(0x20010db800000002ULL, 0x0000000000000001ULL, 1000, 80);
  EXPECT_NE(FlowHash(base, 0), FlowHash(low, 0));
  EXPECT_NE(FlowHash(base, 0), FlowHash(high, 0));
  EXPECT_NE(FlowHash(low, 0), FlowHash(high, 0));
  // Every byte of both addresses takes part.
  for (int i = 0; i < 32; ++i) {
    FlowKey k = base;
    reinterpret_cast<uint8_t*>(&k)[i] ^= 0x80;
    EXPECT_NE(FlowHash(k, 0), FlowHash(base, 0)) << "byte " << i;
  }
}

TEST(FlowHashTest, DeterministicAndSeedSensitive) {
  const FlowKey k = V4Key(0x0A000001, 1234, kVip, 80, 17);
  EXPECT_EQ(FlowHash(k, 99), FlowHash(k, 99));
  EXPECT_NE(FlowHash(k, 99), FlowHash(k, 100));
}

constexpr ConntrackKey kCtKey = ConntrackKey::Fixed(42);

// The conntrack hash decides no placement, but it must spread flows evenly
// over buckets (its low 32 bits, multiply-shifted) and be stable.
TEST(FlowHashTest, ConntrackHashSpreadsEvenlyAndIsStable) {
  const FlowKey k = V4Key(0x0A000001, 1234, kVip, 80, 17);
  EXPECT_EQ(ConntrackHash(k, kCtKey), ConntrackHash(k, kCtKey));
  for (const auto& keys : {SequentialV4Clients(400000), SequentialV6ClientsLow(400000),
                           SequentialV6ClientsHigh(400000), OneClientManyPorts()}) {
    constexpr uint32_t kBuckets = 4099;
    std::vector<uint32_t> low(kBuckets, 0), mid(kBuckets, 0), sig(256, 0);
    for (const FlowKey& key : keys) {
      const uint64_t h = ConntrackHash(key, kCtKey);
      ++low[(uint64_t{static_cast<uint32_t>(h)} * kBuckets) >> 32];
      ++mid[(uint64_t{static_cast<uint32_t>(h >> 16)} * kBuckets) >> 32];
      ++sig[h >> 56];
    }
    for (const auto* counts : {&low, &mid, &sig}) {
      const double expected = static_cast<double>(keys.size()) / counts->size();
      double x2 = 0;
      for (uint32_t c : *counts) x2 += (c - expected) * (c - expected) / expected;
      const double df = static_cast<double>(counts->size() - 1);
      EXPECT_LT(std::abs((x2 - df) / std::sqrt(2 * df)), 5.0);
    }
  }
}

using testing::LegacyConntrackHash;

// Issue 8.3: an IPv6 source whose interface id equals the public constant
// zeroed the first multiply, so every /64 prefix with that id hashed alike.
// Keyed, the same sources spread like any others.
TEST(FlowHashTest, ConntrackHashHasNoPublicZeroingInterfaceId) {
  const uint64_t iid = __builtin_bswap64(0xe7037ed1a0b428dbULL);  // bytes 8..15 = kS1, LE
  std::vector<FlowKey> keys;
  for (uint64_t prefix = 0; prefix < 4096; ++prefix) {
    keys.push_back(V6Key(0x20010db800000000ULL | prefix << 8, iid, 40000, 443));
  }
  std::set<uint64_t> legacy, keyed, buckets;
  for (const FlowKey& k : keys) {
    legacy.insert(LegacyConntrackHash(k));
    const uint64_t h = ConntrackHash(k, kCtKey);
    keyed.insert(h);
    buckets.insert((uint64_t{static_cast<uint32_t>(h)} * 1024) >> 32);
  }
  EXPECT_EQ(legacy.size(), 1u);  // the attack, as it was
  EXPECT_EQ(keyed.size(), keys.size());
  EXPECT_GT(buckets.size(), 900u);  // 4096 balls in 1024 bins: ~1006 bins used
}

// Another key (another worker, another start) gives other buckets: what one
// instance's collisions are says nothing of another's.
TEST(FlowHashTest, ConntrackKeysGiveDifferentBuckets) {
  const ConntrackKey other = ConntrackKey::Fixed(43);
  int same = 0;
  constexpr int kFlows = 10000;
  for (int i = 0; i < kFlows; ++i) {
    const FlowKey k = V4Key(0x0A000000 + static_cast<uint32_t>(i), 5555, kVip, 80, 6);
    const auto bucket = [](uint64_t h) { return (uint64_t{static_cast<uint32_t>(h)} * 4096) >> 32; };
    same += bucket(ConntrackHash(k, kCtKey)) == bucket(ConntrackHash(k, other));
  }
  EXPECT_LT(same, kFlows / 100);  // ~kFlows / 4096 by chance
  // Fixed keys are reproducible; random ones differ.
  EXPECT_EQ(ConntrackHash(V4Key(1, 2, 3, 4, 6), ConntrackKey::Fixed(7)),
            ConntrackHash(V4Key(1, 2, 3, 4, 6), ConntrackKey::Fixed(7)));
  ConntrackKey r1, r2;
  ASSERT_TRUE(RandomConntrackKey(&r1));
  ASSERT_TRUE(RandomConntrackKey(&r2));
  EXPECT_NE(ConntrackHash(V4Key(1, 2, 3, 4, 6), r1), ConntrackHash(V4Key(1, 2, 3, 4, 6), r2));
}

}  // namespace
}  // namespace maglb
