// The latency histogram's arithmetic (maglb/latency_histogram.h): every
// bucket's bounds, the bucket of each time against a plain reference
// (floor of log2, then the sub-bucket by division), quantiles from counts,
// and the TSC conversion.
#include "maglb/latency_histogram.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "gtest/gtest.h"

namespace maglb {
namespace {

// The bucket of `ns` the slow, obvious way.
size_t ReferenceBucket(uint64_t ns) {
  if (ns < 64) return 0;
  if (ns >= (uint64_t{1} << 27)) return kLatencyBounds;
  int e = 0;
  while ((ns >> (e + 1)) != 0) ++e;  // floor(log2(ns))
  const uint64_t base = uint64_t{1} << e;
  const uint64_t sub = (ns - base) / (base / 8);
  return 1 + static_cast<size_t>(e - 6) * 8 + static_cast<size_t>(sub);
}

TEST(LatencyHistogram, BoundsRiseFrom64NsTo2To27WithEightStepsPerPowerOfTwo) {
  EXPECT_EQ(kLatencyBounds, 169u);
  EXPECT_EQ(kLatencyBuckets, 170u);
  const auto bounds = LatencyBucketUpperBoundsNs();
  EXPECT_EQ(bounds.front(), 64u);
  EXPECT_EQ(bounds[1], 72u);
  EXPECT_EQ(bounds[8], 128u);
  EXPECT_EQ(bounds[9], 144u);
  EXPECT_EQ(bounds.back(), uint64_t{1} << 27);
  for (size_t i = 1; i < bounds.size(); ++i) {
    ASSERT_GT(bounds[i], bounds[i - 1]) << i;
    // Each step is an eighth of the power of two below it.
    const uint64_t octave_base = std::bit_floor(bounds[i - 1]);
    EXPECT_EQ(bounds[i] - bounds[i - 1], i == 1 ? 8u : octave_base / 8) << i;
  }
  for (size_t i = 0; i <= kLatencyBounds; ++i) {
    EXPECT_EQ(LatencyBucketLowerNs(i), i == 0 ? 0 : bounds[i - 1]) << i;
  }
}

TEST(LatencyHistogram, EveryTimeFallsInTheBucketItsBoundsSay) {
  // Every bound, one below and one above.
  for (size_t i = 0; i < kLatencyBounds; ++i) {
    const uint64_t upper = LatencyBucketUpperNs(i);
    EXPECT_EQ(LatencyBucket(upper - 1), i) << upper;
    EXPECT_EQ(LatencyBucket(upper), i + 1) << upper;
    EXPECT_EQ(LatencyBucket(LatencyBucketLowerNs(i)), i) << i;
  }
  EXPECT_EQ(LatencyBucket(0), 0u);
  EXPECT_EQ(LatencyBucket(63), 0u);
  EXPECT_EQ(LatencyBucket(64), 1u);
  EXPECT_EQ(LatencyBucket(uint64_t{1} << 27), kLatencyBounds);
  EXPECT_EQ(LatencyBucket(std::numeric_limits<uint64_t>::max()), kLatencyBounds);
  // Against the reference, and monotonic, over every time to 2^16 and
  // random ones to 2^40.
  size_t last = 0;
  for (uint64_t ns = 0; ns < (1u << 16); ++ns) {
    const size_t b = LatencyBucket(ns);
    ASSERT_EQ(b, ReferenceBucket(ns)) << ns;
    ASSERT_GE(b, last) << ns;
    last = b;
  }
  std::mt19937_64 rng(7);
  for (int k = 0; k < 200000; ++k) {
    const uint64_t ns = rng() >> (24 + rng() % 40);
    const size_t b = LatencyBucket(ns);
    ASSERT_EQ(b, ReferenceBucket(ns)) << ns;
    ASSERT_GE(ns, LatencyBucketLowerNs(b)) << ns;
    if (b < kLatencyBounds) {
      ASSERT_LT(ns, LatencyBucketUpperNs(b)) << ns;
    }
  }
  static_assert(LatencyBucket(100) == 5);  // [96, 104): usable at compile time
}

TEST(LatencyHistogram, QuantilesInterpolateWithinTheirBucket) {
  std::array<uint64_t, kLatencyBuckets> counts{};
  EXPECT_EQ(LatencyQuantileNs(counts, 0.5), 0.0);  // nothing counted
  // 100 times in [1024, 1152) (bucket 33), 900 in [2048, 2304) (bucket 41).
  const size_t low = LatencyBucket(1024), high = LatencyBucket(2048);
  ASSERT_EQ(LatencyBucketUpperNs(low), 1152u);
  ASSERT_EQ(LatencyBucketUpperNs(high), 2304u);
  counts[low] = 100;
  counts[high] = 900;
  EXPECT_DOUBLE_EQ(LatencyQuantileNs(counts, 0.05), 1024 + 128 * 50 / 100.0);
  EXPECT_DOUBLE_EQ(LatencyQuantileNs(counts, 0.1), 1152);  // the 100th: the top of the first
  EXPECT_DOUBLE_EQ(LatencyQuantileNs(counts, 0.5), 2048 + 256 * 400 / 900.0);
  EXPECT_DOUBLE_EQ(LatencyQuantileNs(counts, 1.0), 2304);
  EXPECT_DOUBLE_EQ(LatencyQuantileNs(counts, 0.0), 1024 + 128 / 100.0);  // the first time
  // Out of range, and NaN: clamped, not read past the counts.
  EXPECT_DOUBLE_EQ(LatencyQuantileNs(counts, 7.0), 2304);
  EXPECT_DOUBLE_EQ(LatencyQuantileNs(counts, -1.0), LatencyQuantileNs(counts, 0.0));
  EXPECT_DOUBLE_EQ(LatencyQuantileNs(counts, std::nan("")), LatencyQuantileNs(counts, 0.0));
  // Quantiles rise with q.
  double last = 0;
  for (double q = 0; q <= 1.0; q += 0.001) {
    const double v = LatencyQuantileNs(counts, q);
    ASSERT_GE(v, last) << q;
    last = v;
  }
  // The overflow bucket says "at least 2^27 ns".
  counts[kLatencyBounds] = 9000;
  EXPECT_DOUBLE_EQ(LatencyQuantileNs(counts, 0.999), static_cast<double>(uint64_t{1} << 27));
  EXPECT_DOUBLE_EQ(LatencyQuantileNs(counts, 0.05), 2048 + 256 * 400 / 900.0);  // rank 500
}

TEST(LatencyHistogram, RecordCountsFramesAndTheirTime) {
  LatencyHistogram h;
  h.Record(100, 32);
  h.Record(101, 1);
  h.Record(5'000'000'000, 2);  // 5 s: overflow
  h.Record(0, 4);
  EXPECT_EQ(h.count(LatencyBucket(100)), 33u);
  EXPECT_EQ(h.count(kLatencyBounds), 2u);
  EXPECT_EQ(h.count(0), 4u);
  EXPECT_EQ(h.sum_ns(), 100u * 32 + 101 + 10'000'000'000u);
  uint64_t total = 0;
  for (uint64_t c : h.Counts()) total += c;
  EXPECT_EQ(total, 39u);
}

TEST(LatencyHistogram, TscToNsAtUsualAndOddRates) {
  for (uint64_t hz : {uint64_t{1'000'000'000}, uint64_t{2'100'000'000}, uint64_t{2'994'374'000},
                      uint64_t{3'700'000'000}, uint64_t{25'000'000}, uint64_t{1'000'000}}) {
    const TscToNs to_ns(hz);
    for (uint64_t cycles : {uint64_t{0}, uint64_t{1}, uint64_t{1000}, uint64_t{123'456'789}, hz, 10 * hz}) {
      const long double exact = static_cast<long double>(cycles) * 1e9L / static_cast<long double>(hz);
      const uint64_t got = to_ns(cycles);
      // Short by at most 1 ns plus 1 ns per 2^32 cycles, never over.
      EXPECT_LE(static_cast<long double>(got), exact) << hz << " " << cycles;
      EXPECT_GE(static_cast<long double>(got), exact - 1 - static_cast<long double>(cycles) / 4294967296.0L)
          << hz << " " << cycles;
    }
  }
  EXPECT_EQ(TscToNs(0)(3), 3'000'000'000u);  // a rate of 0 read as 1 Hz, not a division by zero
}

// A delta past what 64-bit nanoseconds hold (a slow counter, or the wrapped
// difference of a TSC that went backwards) is the largest time, in the
// overflow bucket, not the low bits of the product in some small bucket.
TEST(LatencyHistogram, TscToNsSaturatesInsteadOfWrapping) {
  const TscToNs at_1mhz(1'000'000);  // 1000 ns a cycle
  EXPECT_EQ(at_1mhz(uint64_t{1} << 40), (uint64_t{1} << 40) * 1000);
  EXPECT_EQ(at_1mhz(uint64_t{1} << 60), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(LatencyBucket(at_1mhz(uint64_t{1} << 60)), kLatencyBounds);
  EXPECT_EQ(TscToNs(25'000'000)(std::numeric_limits<uint64_t>::max()), std::numeric_limits<uint64_t>::max());
}

// The end read before the start (TSCs of two CPUs a floating lcore ran on,
// a VM's clock stepped back) is no time at all: unsigned, the difference
// would be ~2^64 cycles, a frame counted in the overflow bucket and ~2^63 ns
// added to the sum that Prometheus reads as a counter.
TEST(LatencyHistogram, TscGoingBackwardsCountsZero) {
  const TscToNs to_ns(3'000'000'000);
  EXPECT_EQ(to_ns.Between(1'000'000, 999'999), 0u);
  EXPECT_EQ(to_ns.Between(std::numeric_limits<uint64_t>::max(), 0), 0u);
  EXPECT_EQ(to_ns.Between(5, 5), 0u);
  EXPECT_EQ(to_ns.Between(1000, 1000 + 3'000'000'000), 1'000'000'000u - 1);  // short by at most 1 ns
  LatencyHistogram h;
  h.Record(to_ns.Between(2'000'000, 1'000'000), 32);
  EXPECT_EQ(h.count(0), 32u);
  EXPECT_EQ(h.sum_ns(), 0u);
}

// The rank ceil(q x total) is computed in a double: where the total is not
// exact there it can round above the total, and no bucket holds that rank.
TEST(LatencyHistogram, QuantileOfACountPastADoublesPrecision) {
  std::array<uint64_t, kLatencyBuckets> counts{};
  counts[5] = (uint64_t{1} << 54) - 1;  // as a double: 2^54
  EXPECT_DOUBLE_EQ(LatencyQuantileNs(counts, 1.0), static_cast<double>(LatencyBucketUpperNs(5)));
}

}  // namespace
}  // namespace maglb
