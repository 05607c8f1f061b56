// A per-worker histogram of the time a frame spends inside maglb (from the
// RX burst that brought it to the TX burst that sent it: dataplane/
// worker_loop.cc), and the bucket arithmetic it rests on. Pure C++: the
// worker feeds it TSC deltas converted with TscToNs; telemetry
// (/maglb/latency) and Prometheus (maglb_packet_latency_seconds) read it.
//
// Buckets are log-linear in nanoseconds: bucket 0 holds [0, 64 ns); then
// each power of two from 64 ns to 2^27 ns (~134 ms) is cut into 8 equal
// sub-buckets (12.5% wide at their low end, 6.7% at the top), and one
// overflow bucket holds everything from 2^27 ns on. Bucket i counts the
// times t with LatencyBucketLowerNs(i) <= t < LatencyBucketUpperNs(i): the
// upper bound is exclusive (Prometheus' `le` is inclusive: at nanosecond
// resolution the two differ by one nanosecond).
#ifndef MAGLB_LATENCY_HISTOGRAM_H_
#define MAGLB_LATENCY_HISTOGRAM_H_

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace maglb {

inline constexpr unsigned kLatencySubBucketBits = 3;  ///< 8 sub-buckets per power of two
inline constexpr unsigned kLatencySubBuckets = 1u << kLatencySubBucketBits;
inline constexpr unsigned kLatencyMinLog2 = 6;   ///< the first bound: 64 ns
inline constexpr unsigned kLatencyMaxLog2 = 27;  ///< the last: 2^27 ns = 134.2 ms
/// Buckets with a finite upper bound (bucket 0 and the log-linear ones).
inline constexpr size_t kLatencyBounds = 1 + (kLatencyMaxLog2 - kLatencyMinLog2) * kLatencySubBuckets;
/// Every bucket: the finite ones and the overflow bucket (the last).
inline constexpr size_t kLatencyBuckets = kLatencyBounds + 1;

/// The bucket of `ns`. Branch-free (a bit width, shifts, a conditional move
/// and a mask): the worker calls it once a burst.
constexpr size_t LatencyBucket(uint64_t ns) {
  constexpr uint64_t kMin = uint64_t{1} << kLatencyMinLog2;
  // Or-ing in the first bound changes the bit width of times under it only:
  // the exponent is >= kLatencyMinLog2 and the shift below defined; those
  // times are masked to bucket 0 at the end.
  const unsigned exponent = static_cast<unsigned>(std::bit_width(ns | kMin)) - 1;
  const size_t sub = static_cast<size_t>(ns >> (exponent - kLatencySubBucketBits)) & (kLatencySubBuckets - 1);
  const size_t i = 1 + static_cast<size_t>(exponent - kLatencyMinLog2) * kLatencySubBuckets + sub;
  const size_t capped = i < kLatencyBounds ? i : kLatencyBounds;
  const size_t keep = size_t{0} - static_cast<size_t>(ns >= kMin);  // all ones, or 0 under kMin
  return capped & keep;
}

/// The exclusive upper bound of bucket `i` < kLatencyBounds, in ns.
constexpr uint64_t LatencyBucketUpperNs(size_t i) {
  if (i == 0) return uint64_t{1} << kLatencyMinLog2;
  const size_t octave = (i - 1) / kLatencySubBuckets, sub = (i - 1) % kLatencySubBuckets;
  const uint64_t base = uint64_t{1} << (kLatencyMinLog2 + octave);
  const uint64_t width = base >> kLatencySubBucketBits;
  return base + (sub + 1) * width;
}

/// The inclusive lower bound of bucket `i` <= kLatencyBounds (the overflow
/// bucket's is the last finite upper bound), in ns.
constexpr uint64_t LatencyBucketLowerNs(size_t i) { return i == 0 ? 0 : LatencyBucketUpperNs(i - 1); }

/// The finite upper bounds, in order (what /maglb/latency sends as bucket_upper_ns).
std::array<uint64_t, kLatencyBounds> LatencyBucketUpperBoundsNs();

/// The `q`-quantile (0 <= q <= 1) of the times counted in `counts` (one per
/// bucket), in ns: the bucket holding the
/// ceil(q * total)-th smallest time, linearly interpolated within it. A
/// quantile in the overflow bucket is its lower bound (2^27 ns: "at
/// least"). 0 with no count. A q outside [0, 1] is clamped.
double LatencyQuantileNs(const std::array<uint64_t, kLatencyBuckets>& counts, double q);

/// TSC cycles to nanoseconds, by a multiply and a shift (no division on the
/// hot path): short by at most 1 ns, plus 1 ns per 2^32 cycles (1.4 s at
/// 3 GHz), at any rate; a time past 2^64 - 1 ns is that (below 1 GHz the
/// product can exceed 64 bits, and its low bits would be a small time).
class TscToNs {
 public:
  /// `hz`: the TSC's rate (rte_get_tsc_hz). 0 is taken as 1 Hz rather than
  /// dividing by it.
  explicit TscToNs(uint64_t hz)
      : mult_(static_cast<uint64_t>((static_cast<unsigned __int128>(1'000'000'000u) << 32) /
                                    (hz == 0 ? 1 : hz))) {}
  uint64_t operator()(uint64_t cycles) const {
    const unsigned __int128 ns = (static_cast<unsigned __int128>(cycles) * mult_) >> 32;
    return ns > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(ns);
  }
  /// The time from TSC reading `start` to `end`; 0 if `end` is earlier (a
  /// TSC that went backwards: an lcore floating over CPUs whose TSCs differ,
  /// a VM's clock stepped back), not the ~2^64 cycles of the wrapped
  /// difference.
  uint64_t Between(uint64_t start, uint64_t end) const { return (*this)(end >= start ? end - start : 0); }

 private:
  uint64_t mult_;  // ns per cycle, fixed point with 32 fraction bits
};

/// One worker's histogram: relaxed counters written by that worker only
/// (plain load, add, store, like Counter: no read-modify-write), readable
/// from any thread without tearing. A reader's copy is not one instant
/// across buckets, but each count only grows: the difference of two reads
/// is never negative.
class alignas(64) LatencyHistogram {
 public:
  /// Counts `frames` frames that each spent `ns`.
  void Record(uint64_t ns, uint64_t frames) {
    std::atomic<uint64_t>& c = counts_[LatencyBucket(ns)];
    c.store(c.load(std::memory_order_relaxed) + frames, std::memory_order_relaxed);
    sum_ns_.store(sum_ns_.load(std::memory_order_relaxed) + ns * frames, std::memory_order_relaxed);
  }
  uint64_t count(size_t bucket) const { return counts_[bucket].load(std::memory_order_relaxed); }
  /// The sum of the recorded times, ns (Prometheus' _sum; wraps after
  /// ~584 years of frame-time).
  uint64_t sum_ns() const { return sum_ns_.load(std::memory_order_relaxed); }
  std::array<uint64_t, kLatencyBuckets> Counts() const {
    std::array<uint64_t, kLatencyBuckets> out;
    for (size_t i = 0; i < kLatencyBuckets; ++i) out[i] = count(i);
    return out;
  }

 private:
  std::array<std::atomic<uint64_t>, kLatencyBuckets> counts_{};
  std::atomic<uint64_t> sum_ns_{0};
};

}  // namespace maglb

#endif  // MAGLB_LATENCY_HISTOGRAM_H_
