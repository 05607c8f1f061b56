// The neighbour task: resolves the next hops the snapshot needs by ARP/ND.
// Owns the NeighborTable; reads the ARP replies and neighbour advertisements
// the workers pass up (the ring has no descriptor: polled on a short periodic
// timer), sends requests for unresolved and stale next hops (through worker
// 0's transmit ring), and feeds what it learns into the snapshots as a
// SnapshotInputSource.
#ifndef MAGLB_CONTROL_NEIGHBOR_TASK_H_
#define MAGLB_CONTROL_NEIGHBOR_TASK_H_

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "control/control_stats.h"
#include "control/control_task.h"
#include "control/neighbor.h"
#include "control/snapshot_inputs.h"
#include "dataplane/port.h"
#include "dataplane/snapshot.h"

struct rte_ring;

namespace maglb {

/// How often the task passes ARP/ND frames on and asks for due next hops.
inline constexpr std::chrono::milliseconds kNeighborPollInterval{10};

class NeighborTask : public ControlTask, public SnapshotInputSource {
 public:
  struct Options {
    PortInfo port;  ///< mac (request source), pool (request frames)
    rte_ring* to_control = nullptr;
    rte_ring* from_control = nullptr;
    SnapshotPublisher* publisher = nullptr;  ///< the current snapshot's own addresses
    ControlStats* stats = nullptr;           ///< written under publisher->mutex()
    SnapshotInputs* inputs = nullptr;        ///< told when a MAC is learned
  };
  explicit NeighborTask(Options options) : options_(std::move(options)) {}

  std::string_view name() const override { return "neighbor"; }
  absl::Status Start(EventLoop& loop) override;

  void Fill(LbStateOptions& options) const override;
  /// Tracks the new config's next hops; asks for new ones at once.
  void ConfigPublished(const LbState& state) override;

 private:
  void Pass();
  void HandleControlFrames(uint64_t now_ns);
  void SendRequests(uint64_t now_ns);
  bool Transmit(const uint8_t* frame, size_t len);

  Options options_;
  NeighborTable table_;
  bool started_ = false;
};

}  // namespace maglb

#endif  // MAGLB_CONTROL_NEIGHBOR_TASK_H_
