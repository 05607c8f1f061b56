// The control thread: owns the running configuration, reloads it when the
// file changes (inotify) or on SIGHUP (parsed and built on a helper thread,
// ReloadBuilder, so that nothing else waits), resolves next hops by ARP/ND,
// and publishes every new snapshot to the workers (SnapshotPublisher). It also
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
#include "control/reload_builder.h"
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
  /// Parses and builds a reload on the helper thread; LoadAndBuild if empty
  /// (tests pass one they can hold).
  BuildFunction build;
};

class Controller {
 public:
  explicit Controller(ControllerOptions options);

  /// Publishes generation 1 from `config`. Fails if its tables cannot be built.
  absl::Status Start(const Config& config);

  /// Runs until SIGINT/SIGTERM. Returns the name of the signal that stopped it.
  /// A reload build still running then is asked to stop and waited for at
  /// most kShutdownBuildWaitMs, then abandoned.
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
  // A reload was asked for: built at the end of the loop's pass, or after
  // the running build (whose result is then stale and dropped).
  void RequestReload(const char* why);
  void StartBuild();
  // The helper thread's result: publish it, refuse it, or build again.
  void FinishBuild();
  void RefuseReload(const std::string& why, const std::string& msg, const LbState& current);
  void HandleControlFrames(uint64_t now_ns);
  void SendNeighborRequests(uint64_t now_ns);
  void RepublishNeighbors();
  NeighborResolver Resolver();
  bool Transmit(const uint8_t* frame, size_t len);

  ControllerOptions options_;
  std::optional<ConfigWatch> watch_;
  NeighborTable neighbors_;
  ControlStats stats_;  // written under the publisher's mutex
  std::unique_ptr<ReloadBuilder> builder_;
  uint64_t reload_seq_ = 0;      // reloads asked for; a build of an older one is stale
  std::string reload_why_;       // why the newest one was asked for
  bool build_wanted_ = false;    // the newest one is not being built yet
  uint64_t neighbor_changes_ = 0;        // neighbour MACs learned or changed
  uint64_t build_neighbor_changes_ = 0;  // ... when the running build copied the table
};

/// How long a shutdown waits for a reload build in progress.
inline constexpr int kShutdownBuildWaitMs = 500;

}  // namespace maglb

#endif  // MAGLB_CONTROL_CONTROLLER_H_
