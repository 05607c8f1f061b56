// The control thread: an event loop (event_loop.h) running one task per job
// (control_task.h): ReloadTask publishes the snapshots (generation 1, then a
// reload when the config file changes or on SIGHUP, built on a helper
// thread), NeighborTask resolves next hops by ARP/ND and HealthTask checks
// backends; both feed the snapshots through SnapshotInputs; AnnounceTask
// puts the routes of the VIPs this instance can serve where the BGP daemon
// learns them; MetricsTask serves /metrics to Prometheus ([metrics]), from
// WithView. The controller owns the loop, the tasks and what they count,
// routes the signals (SIGHUP: reload; SIGUSR1, SIGTERM: drain; SIGINT:
// stop), and answers telemetry (telemetry.h) from what it owns.
#ifndef MAGLB_CONTROL_CONTROLLER_H_
#define MAGLB_CONTROL_CONTROLLER_H_

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "control/announce_task.h"
#include "control/control_stats.h"
#include "control/control_task.h"
#include "control/event_loop.h"
#include "control/health_task.h"
#include "control/metrics_task.h"
#include "control/neighbor_task.h"
#include "control/reload_builder.h"
#include "control/reload_task.h"
#include "control/snapshot_inputs.h"
#include "dataplane/port.h"
#include "dataplane/snapshot.h"
#include "dataplane/worker_loop.h"
#include "maglb/config.h"
#include "maglb/pipeline.h"
#include "maglb/tunnel_probe.h"

struct rte_ring;

namespace maglb {

struct ControllerOptions {
  std::string config_path;
  PortInfo port;
  std::optional<PortInfo> backend_port;  ///< two-arm: toward backends
  SnapshotPublisher* publisher = nullptr;
  rte_ring* to_control = nullptr;
  rte_ring* from_control = nullptr;
  std::vector<const Worker*> workers;  ///< one per polling worker
  std::vector<const LoopCounters*> loop_counters;
  int signal_fd = -1;  ///< SIGHUP, SIGINT, SIGTERM, SIGUSR1
  /// The kernel interface's name (dataplane/kernel_port.h); empty: none.
  /// Snapshots then pass up to it what maglb does not answer.
  std::string kernel_interface;
  /// With a kernel interface: which tunnel probe (by its source port) goes
  /// to which backend. The health task maps its probes' ports here; the
  /// workers read it. Owned by the daemon; null without a kernel interface.
  TunnelProbeTable* tunnel_probes = nullptr;
  /// Parses and builds a reload on the helper thread; LoadAndBuild if empty
  /// (tests pass one they can hold).
  BuildFunction build;
};

class Controller {
 public:
  explicit Controller(ControllerOptions options);

  /// Publishes generation 1 from `config`. Fails if its tables cannot be built.
  absl::Status Start(const Config& config);

  /// Runs the loop until SIGINT/SIGTERM, then stops the tasks. Returns the
  /// name of the signal that stopped it. A reload build still running then is
  /// asked to stop and waited for at most kShutdownBuildWaitMs, then abandoned.
  std::string Run();

  // --- For telemetry (any thread). Each takes the publisher's mutex. ---
  /// Calls f(state, totals, control stats, options) under the lock.
  template <typename F>
  void WithView(F&& f) {
    std::lock_guard<std::mutex> lock(options_.publisher->mutex());
    const LbState* state = options_.publisher->Current();
    if (state == nullptr) return;
    CounterTotals totals = SumCounters(*state, options_.workers);
    f(*state, totals, stats_, options_);
  }

 private:
  // Reads the signalfd: SIGHUP asks for a reload; SIGUSR1 drains (with
  // [announce]: withdraw, forward drain_s more, stop; ignored while
  // draining); SIGTERM drains too when something was announced within
  // drain_s, else stops; SIGINT, or SIGTERM during a drain, stops at once.
  void HandleSignals();
  void StopLoop(std::string why);

  ControllerOptions options_;
  ControlStats stats_;  // written under the publisher's mutex
  std::unique_ptr<EventLoop> loop_;
  SnapshotInputs inputs_;
  NeighborTask neighbor_task_;
  HealthTask health_task_;
  ReloadTask reload_task_;
  AnnounceTask announce_task_;
  MetricsTask metrics_task_;
  std::vector<ControlTask*> tasks_;  // in the order they start
  std::string stopped_by_;           // the signal that stopped the loop
};

}  // namespace maglb

#endif  // MAGLB_CONTROL_CONTROLLER_H_
