// What the control plane counts. The tasks write it and telemetry reads it,
// both under SnapshotPublisher::mutex().
#ifndef MAGLB_CONTROL_CONTROL_STATS_H_
#define MAGLB_CONTROL_CONTROL_STATS_H_

#include <array>
#include <cstdint>
#include <string>

#include "control/neighbor.h"

namespace maglb {

struct ControlStats {
  uint64_t reloads_ok = 0;
  uint64_t reloads_refused = 0;
  uint64_t reloads_unchanged = 0;
  std::string last_refusal;  ///< empty if the last reload succeeded
  uint64_t neighbor_updates = 0;
  std::array<uint64_t, kNumNeighborIgnores> neighbor_ignored{};  ///< by NeighborIgnore
  uint64_t arp_requests_sent = 0;
  uint64_t nd_requests_sent = 0;
  uint64_t control_frames = 0;  ///< ARP/ND frames the workers passed up
  uint64_t started_ns = 0;
};

}  // namespace maglb

#endif  // MAGLB_CONTROL_CONTROL_STATS_H_
