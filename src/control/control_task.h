// One job of the control thread (config reload, neighbour resolution; health
// checks, route announcement, metrics export next), one file per task under
// src/control/. A task owns its state, registers its descriptors and timers
// on the control thread's EventLoop in Start(), and never blocks the loop:
// its I/O is non-blocking and anything slow runs on a helper thread that
// posts the result back (EventLoop::Post). A task whose state goes into the
// snapshots (next hops, backend health) is also a SnapshotInputSource
// (snapshot_inputs.h).
#ifndef MAGLB_CONTROL_CONTROL_TASK_H_
#define MAGLB_CONTROL_CONTROL_TASK_H_

#include <string_view>

#include "absl/status/status.h"
#include "control/event_loop.h"

namespace maglb {

class ControlTask {
 public:
  virtual ~ControlTask() = default;
  /// For log lines: "reload", "neighbor".
  virtual std::string_view name() const = 0;
  /// Registers the task's descriptors and timers on `loop`, on the loop's
  /// thread before it runs. A failure stops the daemon from starting.
  virtual absl::Status Start(EventLoop& loop) = 0;
  /// The loop has stopped (shutdown): end or abandon helper work, within a
  /// bound. Tasks are stopped in the reverse order of their Start.
  virtual void Stop() {}
};

}  // namespace maglb

#endif  // MAGLB_CONTROL_CONTROL_TASK_H_
