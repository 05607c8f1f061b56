// The reload task: publishes the snapshots. Generation 1 at start; then a
// reload whenever the config file changes (inotify, ConfigWatch) or on
// request (SIGHUP), parsed and built on a helper thread (ReloadBuilder) so
// that the loop never waits for it; and the current snapshot again whenever
// a snapshot input changes (SnapshotInputs).
//
// Triggers that come while nothing is building start one build when the
// loop's pass ends (so the triggers of one pass make one build); triggers
// during a build make its result stale: only the newest is published (or
// refused), built once the running one ends.
//
// Each reload that ends (published or refused; not a superseded build) is
// timed into ControlStats::reload_timings (reload_timing.h) from the first
// trigger it serves: of the triggers coalesced into one build, or made
// stale by newer ones, the first, since its change waited the longest.
#ifndef MAGLB_CONTROL_RELOAD_TASK_H_
#define MAGLB_CONTROL_RELOAD_TASK_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "control/config_watch.h"
#include "control/control_stats.h"
#include "control/control_task.h"
#include "control/reload_builder.h"
#include "control/snapshot_inputs.h"
#include "dataplane/port.h"
#include "dataplane/snapshot.h"
#include "maglb/config.h"

namespace maglb {

/// How long a shutdown waits for a reload build in progress.
inline constexpr int kShutdownBuildWaitMs = 500;

class ReloadTask : public ControlTask {
 public:
  struct Options {
    std::string config_path;
    PortInfo port;  ///< mac, max_mtu (the largest MTU a reload may ask for)
    SnapshotPublisher* publisher = nullptr;
    ControlStats* stats = nullptr;     ///< written under publisher->mutex()
    SnapshotInputs* inputs = nullptr;  ///< what snapshots take beyond the config
    /// Parses and builds a reload on the helper thread; LoadAndBuild if empty.
    BuildFunction build;
  };
  explicit ReloadTask(Options options) : options_(std::move(options)) {}

  /// Publishes generation 1 from `config` (before the loop runs). Fails if its
  /// tables cannot be built.
  absl::Status PublishFirst(const Config& config);

  std::string_view name() const override { return "reload"; }
  /// Watches the config file (SIGHUP only, with a warning, if it cannot be
  /// watched) and the builder's results; republishes on input changes.
  absl::Status Start(EventLoop& loop) override;
  /// A build still running is asked to stop and waited for at most
  /// kShutdownBuildWaitMs, then abandoned.
  void Stop() override;

  /// Asks for a reload; `why` ("SIGHUP") goes into its log line. `event_ns`:
  /// when the trigger was read (MonotonicNs), the start of its timing.
  void Request(const char* why, uint64_t event_ns);
  /// Asks for the current config to be rebuilt with new inputs (health);
  /// after the build in progress, if any. `why` goes into its log line.
  void RequestRebuild(std::string why);

 private:
  void StartBuild();
  void StartRebuild();
  // After a build: the newest reload, else a wanted rebuild.
  void StartNext();
  // StartNext once this pass's events are handled (they make one build),
  // unless a build is running (its end starts the next).
  void StartNextAfterThisPass();
  // The helper thread's result: publish it, refuse it, or build again.
  void FinishBuild();
  void FinishRebuild(BuildResult result, const LbState& current);
  void RefuseReload(const std::string& why, const std::string& msg, const LbState& current,
                    uint64_t event_ns);
  void Republish();

  Options options_;
  EventLoop* loop_ = nullptr;
  std::optional<ConfigWatch> watch_;
  std::unique_ptr<ReloadBuilder> builder_;
  EventLoop::TimerId start_timer_ = 0;  // a build is to start at the pass's end
  uint64_t reload_seq_ = 0;             // reloads asked for; a build of an older one is stale
  std::string reload_why_;              // why the newest one was asked for
  bool build_wanted_ = false;           // the newest one is not being built yet
  uint64_t unserved_event_ns_ = 0;      // the first trigger no published or refused reload served (0: none)
  uint64_t build_inputs_version_ = 0;   // SnapshotInputs::version() the running build took
  bool rebuild_wanted_ = false;         // inputs changed tables: rebuild once the builder is free
  std::string rebuild_why_;
};

}  // namespace maglb

#endif  // MAGLB_CONTROL_RELOAD_TASK_H_
