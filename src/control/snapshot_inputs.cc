#include "control/snapshot_inputs.h"

namespace maglb {

void SnapshotInputs::Changed() {
  ++version_;
  if (republish_) republish_();
}

void SnapshotInputs::TablesChanged(std::string why) {
  ++version_;
  if (rebuild_) rebuild_(std::move(why));
}

LbStateOptions SnapshotInputs::Capture() const {
  LbStateOptions options;
  options.port_mac = port_mac_;
  options.kernel_interface = kernel_interface_;
  for (const SnapshotInputSource* s : sources_) s->Fill(options);
  return options;
}

std::unique_ptr<const LbState> SnapshotInputs::Reapply(const LbState& state) const {
  // Next hops only: an input that changes tables asks for a rebuild
  // (TablesChanged), which the publisher runs after the build in progress.
  return state.WithNeighbors(Capture().resolve);
}

void SnapshotInputs::ConfigPublished(const LbState& state) {
  for (SnapshotInputSource* s : sources_) s->ConfigPublished(state);
}

}  // namespace maglb
