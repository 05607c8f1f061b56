// Publication of the configuration snapshot to the workers without locks:
// one atomic pointer, and DPDK's QSBR RCU (rte_rcu_qsbr) to know when every
// worker has moved past the old snapshot so that it can be freed.
#ifndef MAGLB_DATAPLANE_SNAPSHOT_H_
#define MAGLB_DATAPLANE_SNAPSHOT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "absl/status/statusor.h"
#include "maglb/lb_state.h"

struct rte_rcu_qsbr;

namespace maglb {

/// When a Publish swapped the snapshot in, and when every worker had passed
/// a quiescent point after it (none holds the old one: the new tables are
/// the workers'), CLOCK_MONOTONIC ns. The first snapshot replaces none and
/// waits for nobody: both are its swap's time.
struct PublishTimes {
  uint64_t swapped_ns = 0;
  uint64_t synchronized_ns = 0;
};

class SnapshotPublisher {
 public:
  /// `num_readers`: worker ids 0 .. num_readers-1.
  static absl::StatusOr<std::unique_ptr<SnapshotPublisher>> Create(uint32_t num_readers);
  ~SnapshotPublisher();
  SnapshotPublisher(const SnapshotPublisher&) = delete;
  SnapshotPublisher& operator=(const SnapshotPublisher&) = delete;

  // --- Worker side (lock-free, no system calls) ---
  /// Registers worker `id` and marks it online; call on the worker's lcore.
  void ReaderOnline(uint32_t id);
  /// Marks worker `id` offline (it holds no snapshot any more) and
  /// unregisters it: the writer stops waiting for it.
  void ReaderOffline(uint32_t id);
  /// The current snapshot; valid until this worker's next Quiescent().
  const LbState* Current() const { return current_.load(std::memory_order_acquire); }
  /// Worker `id` holds no snapshot pointer from before this call.
  void Quiescent(uint32_t id);

  // --- Control side ---
  /// Swaps in `next`, waits until every online worker has passed a quiescent
  /// point, then frees the old snapshot. Takes mutex() for the swap only:
  /// telemetry readers take the pointer under mutex(), so none holds the old
  /// one afterwards, and none waits while a stalled worker delays the free.
  /// Returns when the swap and the wait ended (before the free).
  PublishTimes Publish(std::unique_ptr<const LbState> next);
  /// Serialises control-side readers (telemetry) against Publish().
  std::mutex& mutex() { return mu_; }

  /// Worker liveness, on the same RCU: a worker passes a quiescent point
  /// every loop pass, so one that passes none is stuck. Neither call blocks,
  /// takes mutex() or disturbs Publish(); any thread may call them.
  ///
  /// Starts a liveness round: a token that every online worker passes at its
  /// next quiescent point (or by going offline).
  uint64_t StartLivenessRound();
  /// Whether every online worker has passed `token` since it was started.
  /// True with no worker online: whether the workers run at all is the
  /// caller's to know. A worker that comes online passes every round
  /// started before.
  bool LivenessRoundPassed(uint64_t token) const;
  /// Workers registered (online) now, of readers() (a round passes with
  /// none online).
  uint32_t ReadersRegistered() const;
  uint32_t readers() const { return num_readers_; }

 private:
  SnapshotPublisher() = default;

  std::atomic<const LbState*> current_{nullptr};
  rte_rcu_qsbr* qsbr_ = nullptr;
  uint32_t num_readers_ = 0;
  std::mutex mu_;
};

}  // namespace maglb

#endif  // MAGLB_DATAPLANE_SNAPSHOT_H_
