#include "maglb/latency_histogram.h"

#include <algorithm>
#include <cmath>

namespace maglb {

std::array<uint64_t, kLatencyBounds> LatencyBucketUpperBoundsNs() {
  std::array<uint64_t, kLatencyBounds> out;
  for (size_t i = 0; i < kLatencyBounds; ++i) out[i] = LatencyBucketUpperNs(i);
  return out;
}

double LatencyQuantileNs(const std::array<uint64_t, kLatencyBuckets>& counts, double q) {
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  if (total == 0) return 0;
  q = std::isnan(q) ? 0 : std::clamp(q, 0.0, 1.0);
  // The rank of the wanted time, 1-based: at least the first one, at most
  // the last (a total past 2^53 can round up in the double).
  const uint64_t rank =
      std::clamp<uint64_t>(static_cast<uint64_t>(std::ceil(q * static_cast<double>(total))), 1, total);
  uint64_t below = 0;
  for (size_t i = 0; i < kLatencyBuckets; ++i) {
    if (below + counts[i] < rank) {
      below += counts[i];
      continue;
    }
    const double lower = static_cast<double>(LatencyBucketLowerNs(i));
    if (i == kLatencyBounds) return lower;  // overflow: no upper bound to interpolate to
    const double upper = static_cast<double>(LatencyBucketUpperNs(i));
    return lower + (upper - lower) * static_cast<double>(rank - below) / static_cast<double>(counts[i]);
  }
  return 0;  // not reached: the last bucket holds rank <= total
}

}  // namespace maglb
