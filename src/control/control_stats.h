// What the control plane counts. The tasks write it and telemetry reads it,
// both under SnapshotPublisher::mutex().
#ifndef MAGLB_CONTROL_CONTROL_STATS_H_
#define MAGLB_CONTROL_CONTROL_STATS_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "control/neighbor.h"
#include "control/reload_timing.h"
#include "maglb/health.h"
#include "maglb/ip_address.h"

namespace maglb {

/// One checked backend as the health task sees it (telemetry, maglbctl stats).
struct BackendHealthStatus {
  BackendHealth health = BackendHealth::kUnchecked;
  bool held_down = false;      ///< flapping: kept down until stable
  std::string reason;          ///< of the last transition (or the start state)
  uint64_t since_unix_ms = 0;  ///< when that was (wall clock)
  std::string last_probe;      ///< the last probe's detail
  uint64_t probes = 0, probe_failures = 0, transitions = 0;
  std::string check;           ///< "http via tunnel to 10.100.0.1:80 from port 61003"
};

/// Route announcement (announce_task.h), for telemetry and maglbctl.
struct AnnounceStatus {
  bool enabled = false;  ///< [announce] is set
  /// "off", "starting" (no quiescent round seen yet), "announcing",
  /// "stalled" (workers passed no quiescent point within stall_ms),
  /// "draining".
  std::string state = "off";
  uint32_t table = 0;
  uint64_t route_changes = 0;  ///< routes added or deleted
  uint64_t route_errors = 0;   ///< rtnetlink requests that failed
  uint64_t drain_until_unix_ms = 0;  ///< while draining: when maglb exits
  struct Prefix {
    std::string prefix;  ///< "10.100.0.1/32"
    bool announced = false;
    std::string reason;
  };
  std::vector<Prefix> prefixes;  ///< every VIP address, in config order
  bool Announced(const IpAddress& address) const {
    const std::string text = address.ToString();
    for (const Prefix& p : prefixes) {
      if (p.announced && p.prefix.compare(0, text.size(), text) == 0 && p.prefix.size() > text.size() &&
          p.prefix[text.size()] == '/') {
        return true;
      }
    }
    return false;
  }
  uint64_t routes() const {
    uint64_t n = 0;
    for (const Prefix& p : prefixes) n += p.announced;
    return n;
  }
};

struct ControlStats {
  uint64_t reloads_ok = 0;
  uint64_t reloads_refused = 0;
  uint64_t reloads_unchanged = 0;
  std::string last_refusal;  ///< empty if the last reload succeeded
  ReloadTimings reload_timings;  ///< each reload's way to the workers
  uint64_t neighbor_updates = 0;
  std::array<uint64_t, kNumNeighborIgnores> neighbor_ignored{};  ///< by NeighborIgnore
  uint64_t arp_requests_sent = 0;
  uint64_t nd_requests_sent = 0;
  uint64_t control_frames = 0;  ///< ARP/ND frames the workers passed up
  uint64_t started_ns = 0;
  uint64_t health_rebuilds = 0;     ///< snapshots rebuilt for health (not reloads)
  uint64_t health_transitions = 0;  ///< backends' up/down changes
  uint64_t health_probes = 0, health_probe_failures = 0;
  /// (VIP name, backend name) -> status, for every checked backend.
  std::map<std::pair<std::string, std::string>, BackendHealthStatus> backend_health;
  AnnounceStatus announce;
};

}  // namespace maglb

#endif  // MAGLB_CONTROL_CONTROL_STATS_H_
