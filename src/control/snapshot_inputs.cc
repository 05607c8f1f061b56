#include "control/snapshot_inputs.h"

namespace maglb {

void SnapshotInputs::Changed() {
  ++version_;
  if (republish_) republish_();
}

LbStateOptions SnapshotInputs::Capture() const {
  LbStateOptions options;
  options.port_mac = port_mac_;
  options.kernel_interface = kernel_interface_;
  for (const SnapshotInputSource* s : sources_) s->Fill(options);
  return options;
}

std::unique_ptr<const LbState> SnapshotInputs::Reapply(const LbState& state) const {
  // Next hops are the only input a snapshot takes after it is built so far.
  return state.WithNeighbors(Capture().resolve);
}

void SnapshotInputs::ConfigPublished(const LbState& state) {
  for (SnapshotInputSource* s : sources_) s->ConfigPublished(state);
}

}  // namespace maglb
