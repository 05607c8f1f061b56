#include "analyze_theory.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace maglb::analyze {

Balance BalanceOf(const std::vector<double>& counts, const std::vector<double>& expected) {
  Balance b;
  if (counts.empty()) return b;
  std::vector<double> x(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) x[i] = counts[i] / expected[i];
  b.min = *std::min_element(x.begin(), x.end());
  b.max = *std::max_element(x.begin(), x.end());
  double var = 0;
  for (double v : x) var += (v - 1) * (v - 1);
  b.cv = std::sqrt(var / static_cast<double>(x.size()));
  b.avg = std::accumulate(expected.begin(), expected.end(), 0.0) / static_cast<double>(x.size());
  return b;
}

std::vector<double> EqualShares(double total, size_t n) {
  return std::vector<double>(n, total / static_cast<double>(n));
}

double MaxOverAvgApprox(double cv, size_t n) {
  return 1 + cv * std::sqrt(2 * std::log(static_cast<double>(n)));
}

// Jump hash over N buckets when bucket k (0-based, in the bucket order) is
// removed and the buckets after it are renumbered down by one. A key's bucket
// among N - 1 is b' = jump(key, N - 1), uniform; jump(key, N) equals b' except
// with probability 1/N, when it is N - 1. A key keeps its server when
//  - jump(key, N) = b' < k (probability (N-1)/N * k/(N-1) = k/N), or
//  - jump(key, N) = N - 1 and b' = N - 2, which after renumbering is the old
//    bucket N - 1 again (probability 1/N * 1/(N-1); needs k < N - 1).
// So `moved` = 1 - k/N - 1/(N(N-1)) for k < N - 1, and 1/N for k = N - 1 (only
// the last bucket's keys); `between` = moved - 1/N, the part not forced by
// the removed bucket's own keys.
JumpRemoval JumpRemovalTheory(uint32_t n, uint32_t k) {
  double dn = n;
  if (k + 1 >= n) return {1 / dn, 0};
  double moved = 1 - k / dn - 1 / (dn * (dn - 1));
  return {moved, moved - 1 / dn};
}

double CvTheory(const std::string& scheme, uint32_t n, uint32_t m, uint32_t ring_points) {
  double sampling = std::sqrt((n - 1.0) / m);
  if (scheme == "maglev") {
    // Perfect up to rounding: entries are floor or ceil of M/N.
    double avg = static_cast<double>(m) / n, frac = avg - std::floor(avg);
    return std::sqrt(frac * (1 - frac)) / avg;
  }
  if (scheme == "ring") return std::sqrt(1.0 / ring_points + sampling * sampling);
  return sampling;
}

}  // namespace maglb::analyze
