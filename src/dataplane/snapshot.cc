#include "dataplane/snapshot.h"

#include <rte_errno.h>
#include <rte_malloc.h>
#include <rte_rcu_qsbr.h>
#include <time.h>

#include "absl/strings/str_format.h"

namespace maglb {
namespace {

uint64_t Monotonic() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SnapshotPublisher>> SnapshotPublisher::Create(uint32_t num_readers) {
  std::unique_ptr<SnapshotPublisher> p(new SnapshotPublisher());
  size_t size = rte_rcu_qsbr_get_memsize(num_readers);
  p->qsbr_ = static_cast<rte_rcu_qsbr*>(rte_zmalloc("maglb_rcu", size, RTE_CACHE_LINE_SIZE));
  if (p->qsbr_ == nullptr) {
    return absl::ResourceExhaustedError("cannot allocate the RCU state (EAL memory)");
  }
  if (rte_rcu_qsbr_init(p->qsbr_, num_readers) != 0) {
    return absl::InternalError(
        absl::StrFormat("rte_rcu_qsbr_init(%u) failed: %s", num_readers, rte_strerror(rte_errno)));
  }
  p->num_readers_ = num_readers;
  return p;
}

SnapshotPublisher::~SnapshotPublisher() {
  delete current_.exchange(nullptr);
  rte_free(qsbr_);
}

void SnapshotPublisher::ReaderOnline(uint32_t id) {
  rte_rcu_qsbr_thread_register(qsbr_, id);
  rte_rcu_qsbr_thread_online(qsbr_, id);
}

void SnapshotPublisher::ReaderOffline(uint32_t id) {
  rte_rcu_qsbr_thread_offline(qsbr_, id);
  rte_rcu_qsbr_thread_unregister(qsbr_, id);
}

void SnapshotPublisher::Quiescent(uint32_t id) { rte_rcu_qsbr_quiescent(qsbr_, id); }

PublishTimes SnapshotPublisher::Publish(std::unique_ptr<const LbState> next) {
  const LbState* old;
  PublishTimes times;
  {
    // Control-side readers take the pointer under mu_ (telemetry, the
    // exporter): once the swap is done none can reach `old` any more.
    std::lock_guard<std::mutex> lock(mu_);
    old = current_.exchange(next.release(), std::memory_order_acq_rel);
  }
  times.swapped_ns = Monotonic();
  if (old == nullptr) {
    times.synchronized_ns = times.swapped_ns;
    return times;
  }
  // Every worker that could hold `old` passes a quiescent point within one
  // loop iteration (a few microseconds). Not under mu_: a stalled worker
  // would hold every telemetry and /metrics reader with it, and hide the
  // stall it is there to show.
  rte_rcu_qsbr_synchronize(qsbr_, RTE_QSBR_THRID_INVALID);
  times.synchronized_ns = Monotonic();
  delete old;  // not timed: the workers had the new tables before
  return times;
}

// rte_rcu_qsbr_start and rte_rcu_qsbr_check are lock-free and multi-thread
// safe (rte_rcu_qsbr.h), so they run beside Publish's rte_rcu_qsbr_synchronize
// (itself a start and a waiting check): a round only moves the shared token
// on, and each check compares the workers' counters with its own token.
uint64_t SnapshotPublisher::StartLivenessRound() { return rte_rcu_qsbr_start(qsbr_); }

uint32_t SnapshotPublisher::ReadersRegistered() const {
  return __atomic_load_n(&qsbr_->num_threads, __ATOMIC_ACQUIRE);
}

bool SnapshotPublisher::LivenessRoundPassed(uint64_t token) const {
  return rte_rcu_qsbr_check(qsbr_, token, /*wait=*/false) == 1;
}

}  // namespace maglb
