// The theory beside which `maglbctl analyze` prints its measurements: balance
// statistics and the closed forms (or bounds) of each scheme's disruption.
#ifndef MAGLB_CTL_ANALYZE_THEORY_H_
#define MAGLB_CTL_ANALYZE_THEORY_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace maglb::analyze {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Maglev's churn between surviving backends has no closed form; its theory
// cell is the bound that the unit tests hold it to (1% of the table).
inline constexpr double kMaglevChurnBound = 0.01;

// A backend's entries over what its weight share promises: 1.0 = exact.
// `avg` is the mean expected count, so that min * avg and max * avg read as
// entry counts when weights are equal.
struct Balance {
  double min = 0, max = 0, cv = 0, avg = 0;
};

Balance BalanceOf(const std::vector<double>& counts, const std::vector<double>& expected);

// Equal shares of `total` over n.
std::vector<double> EqualShares(double total, size_t n);

// The expected largest of N draws relative to the mean, for a spread of cv:
// Gaussian approximation 1 + cv * sqrt(2 ln N) (an upper estimate).
double MaxOverAvgApprox(double cv, size_t n);

// Jump hash over N buckets when bucket k (0-based, in the bucket order) is
// removed and the buckets after it are renumbered down by one; see the
// derivation in analyze_theory.cc.
struct JumpRemoval {
  double moved, between;
};
JumpRemoval JumpRemovalTheory(uint32_t n, uint32_t k);

// Theoretical sd/avg of a backend's entries (equal weights) in an M-slot
// table, by scheme.
double CvTheory(const std::string& scheme, uint32_t n, uint32_t m, uint32_t ring_points);

}  // namespace maglb::analyze

#endif  // MAGLB_CTL_ANALYZE_THEORY_H_
