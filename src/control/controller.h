// The control thread: owns the running configuration, reloads it when the
// file changes (inotify) or on SIGHUP, resolves next hops by ARP/ND, and
// publishes every new snapshot to the workers (SnapshotPublisher). It also
// answers telemetry (telemetry.h) from what it owns.
#ifndef MAGLB_CONTROL_CONTROLLER_H_
#define MAGLB_CONTROL_CONTROLLER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "control/config_watch.h"
#include "control/neighbor.h"
#include "dataplane/port.h"
#include "dataplane/snapshot.h"
#include "dataplane/worker_loop.h"
#include "maglb/config.h"
#include "maglb/pipeline.h"

struct rte_ring;

namespace maglb {

/// What the control plane counts (guarded by SnapshotPublisher::mutex()).
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

struct ControllerOptions {
  std::string config_path;
  PortInfo port;
  SnapshotPublisher* publisher = nullptr;
  rte_ring* to_control = nullptr;
  rte_ring* from_control = nullptr;
  std::vector<const Worker*> workers;  ///< one per polling worker
  std::vector<const LoopCounters*> loop_counters;
  int signal_fd = -1;  ///< SIGHUP, SIGINT, SIGTERM
};

class Controller {
 public:
  explicit Controller(ControllerOptions options);

  /// Publishes generation 1 from `config`. Fails if its tables cannot be built.
  absl::Status Start(const Config& config);

  /// Runs until SIGINT/SIGTERM. Returns the name of the signal that stopped it.
  std::string Run();

  // --- For telemetry (any thread). Each takes the publisher's mutex. ---
  /// Calls f(state, totals, control stats) under the lock.
  template <typename F>
  void WithView(F&& f) {
    std::lock_guard<std::mutex> lock(options_.publisher->mutex());
    const LbState* state = options_.publisher->Current();
    if (state == nullptr) return;
    CounterTotals totals = SumCounters(*state, options_.workers);
    f(*state, totals, stats_, options_);
  }

 private:
  void Reload(const char* why);
  void RefuseReload(const char* why, const std::string& msg, const LbState& current);
  void HandleControlFrames(uint64_t now_ns);
  void SendNeighborRequests(uint64_t now_ns);
  void RepublishNeighbors();
  NeighborResolver Resolver();
  bool Transmit(const uint8_t* frame, size_t len);

  ControllerOptions options_;
  std::optional<ConfigWatch> watch_;
  NeighborTable neighbors_;
  ControlStats stats_;  // written under the publisher's mutex
};

}  // namespace maglb

#endif  // MAGLB_CONTROL_CONTROLLER_H_
