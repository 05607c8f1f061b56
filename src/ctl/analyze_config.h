// `maglbctl analyze --config`: per VIP of a config file, what every scheme
// would do with its backends: balance by weight, and single failures.
#ifndef MAGLB_CTL_ANALYZE_CONFIG_H_
#define MAGLB_CTL_ANALYZE_CONFIG_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analyze_theory.h"
#include "maglb/config.h"
#include "report.h"

namespace maglb::analyze {

// Failures simulated per VIP at most (evenly spaced among serving backends).
inline constexpr size_t kMaxFailuresAnalyzed = 50;

struct VipFigures {
  std::string vip, scheme;
  bool configured = false;
  std::string unavailable;  // why this scheme cannot serve the VIP
  Balance balance;          // of entries relative to each backend's weight share
  double fail_mean_moved = 0, fail_mean_ideal = 0, fail_worst_moved = 0,
         fail_worst_between = 0;
  size_t failures = 0;
};

// Every scheme's figures for the VIP, in AllSchemes order.
absl::StatusOr<std::vector<VipFigures>> AnalyzeVip(const VipConfig& vip);

// The VIP's figures as a table.
report::Table VipTable(const VipConfig& vip, const std::vector<VipFigures>& figures);

}  // namespace maglb::analyze

#endif  // MAGLB_CTL_ANALYZE_CONFIG_H_
