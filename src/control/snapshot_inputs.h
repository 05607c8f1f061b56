// What a snapshot is built from beyond the config: next-hop MACs
// (NeighborTask) and backend health (HealthTask). The tasks that own such state are
// SnapshotInputSources; everything that builds or publishes a snapshot (the
// reload task) goes through SnapshotInputs alone, not through each source:
// it asks for the inputs to build with, and is asked to publish again when
// one of them changes.
//
// Loop thread only.
#ifndef MAGLB_CONTROL_SNAPSHOT_INPUTS_H_
#define MAGLB_CONTROL_SNAPSHOT_INPUTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "maglb/ip_address.h"
#include "maglb/lb_state.h"

namespace maglb {

class SnapshotInputSource {
 public:
  virtual ~SnapshotInputSource() = default;
  /// Adds the source's current state to `options`, as a copy: a build on a
  /// helper thread reads it while the source goes on changing.
  virtual void Fill(LbStateOptions& options) const = 0;
  /// `state` was just published (at start or by a reload): its config says
  /// what to track now (next hops to resolve, backends to check).
  virtual void ConfigPublished(const LbState& state) = 0;
};

class SnapshotInputs {
 public:
  /// `kernel_interface`: the daemon made one (LbStateOptions).
  explicit SnapshotInputs(MacAddress port_mac, bool kernel_interface = false)
      : port_mac_(port_mac), kernel_interface_(kernel_interface) {}
  SnapshotInputs(const SnapshotInputs&) = delete;
  SnapshotInputs& operator=(const SnapshotInputs&) = delete;

  /// `source` (not owned) must outlive this object.
  void AddSource(SnapshotInputSource* source) { sources_.push_back(source); }

  // --- For sources ---
  /// The source's state changed: the current snapshot is published again
  /// with it, at once (and a build under way picks it up when it ends).
  /// For inputs that need no table rebuilt (next hops).
  void Changed();
  /// The source's state changed tables (backend health): the current config
  /// is rebuilt with it off the loop thread (same generation), and published
  /// when done; a reload under way is rebuilt after it. The caller limits how
  /// often it asks (health.h RebuildLimiter).
  void TablesChanged(std::string why);

  // --- For the publisher ---
  /// Who publishes again when an input changes.
  void SetRepublish(std::function<void()> republish) { republish_ = std::move(republish); }
  /// Who rebuilds when an input changes tables.
  void SetRebuild(std::function<void(std::string why)> rebuild) { rebuild_ = std::move(rebuild); }
  /// The options to build a snapshot with: every source's current state,
  /// copied (safe to read on a helper thread).
  LbStateOptions Capture() const;
  /// Counts Changed() calls: a build that started at another version missed
  /// a change and needs Reapply.
  uint64_t version() const { return version_; }
  /// `state` with the inputs applied again (same generation, tables shared).
  std::unique_ptr<const LbState> Reapply(const LbState& state) const;
  /// Tells every source that `state` was just published.
  void ConfigPublished(const LbState& state);

 private:
  MacAddress port_mac_;
  bool kernel_interface_ = false;
  std::vector<SnapshotInputSource*> sources_;
  std::function<void()> republish_;
  std::function<void(std::string)> rebuild_;
  uint64_t version_ = 0;
};

}  // namespace maglb

#endif  // MAGLB_CONTROL_SNAPSHOT_INPUTS_H_
