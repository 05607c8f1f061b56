// Builds reloads off the control thread. Parsing a config and building its
// tables (LbState) can take seconds for a big config; the control thread also
// answers ARP/ND, telemetry and signals, so it only starts a build here and
// picks the result up when fd() becomes readable (it polls fd() with its
// other descriptors). One build at a time. The result is published by the
// control thread as before (RCU publication stays there).
//
// Ownership: the helper thread holds what it reads (a copy of the previous
// snapshot, a neighbour resolver over a copy of the table), so the control
// thread may publish and free snapshots meanwhile, and a build that does not
// end in time at shutdown can be abandoned (the thread is detached).
#ifndef MAGLB_CONTROL_RELOAD_BUILDER_H_
#define MAGLB_CONTROL_RELOAD_BUILDER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "maglb/config.h"
#include "maglb/lb_state.h"

namespace maglb {

/// What one build is given.
struct BuildJob {
  uint64_t seq = 0;         ///< the controller's number for it (newest wins)
  std::string why;          ///< "SIGHUP", "file changed": for the log line
  std::string config_path;
  std::shared_ptr<const LbState> previous;  ///< lends tables and ids; owned here
  LbStateOptions options;  ///< its resolver must not read control-thread state
  /// Not a reload: `previous` rebuilt for new inputs (RebuildForInputs), the
  /// config file not read.
  bool inputs_only = false;
};

/// Loads the config at job.config_path and builds its snapshot. `cancel` is
/// set when the result is no longer wanted (shutdown): a build may check it
/// between steps and give up.
using BuildFunction = std::function<absl::StatusOr<std::unique_ptr<const LbState>>(
    const BuildJob& job, const std::atomic<bool>& cancel)>;

/// LoadConfig + BuildLbState, checking `cancel` in between.
absl::StatusOr<std::unique_ptr<const LbState>> LoadAndBuild(const BuildJob& job,
                                                            const std::atomic<bool>& cancel);

struct BuildResult {
  BuildJob job;
  absl::StatusOr<std::unique_ptr<const LbState>> state;
};

class ReloadBuilder {
 public:
  /// `build` runs on the helper thread; LoadAndBuild if empty.
  static absl::StatusOr<std::unique_ptr<ReloadBuilder>> Create(BuildFunction build = {});
  ~ReloadBuilder();  ///< Abandon(0) if a build is still running
  ReloadBuilder(const ReloadBuilder&) = delete;
  ReloadBuilder& operator=(const ReloadBuilder&) = delete;

  /// Readable while a finished build's result waits to be taken.
  int fd() const;
  /// A build is running or its result has not been taken.
  bool busy() const { return busy_; }
  /// Starts `job` on a new helper thread. Requires !busy().
  void Start(BuildJob job);
  /// The finished build's result (and !busy() after), or nothing if the build
  /// is still running.
  std::optional<BuildResult> Take();
  /// Shutdown: asks a running build to stop and waits up to `bound` for it.
  /// Returns false if it had to leave it running (detached; its result is
  /// dropped when it ends).
  bool Abandon(std::chrono::milliseconds bound);

 private:
  struct Shared;
  explicit ReloadBuilder(std::shared_ptr<Shared> shared, BuildFunction build)
      : shared_(std::move(shared)), build_(std::move(build)) {}
  void Join();

  std::shared_ptr<Shared> shared_;
  BuildFunction build_;
  bool busy_ = false;
  bool thread_running_ = false;
};

}  // namespace maglb

#endif  // MAGLB_CONTROL_RELOAD_BUILDER_H_
