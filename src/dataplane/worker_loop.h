// The loop each worker lcore runs: RX burst -> Worker::ProcessBurst (the
// DPDK-free pipeline) -> TX burst, on the worker's own queue pair. One-arm,
// everything goes back out of the port it came in on; two-arm, packets toward
// backends (and ARP/ND requests for next hops) leave by the backend port, and
// replies (ARP, ND, echo, ICMP) by the port their request came in on. No locks,
// no allocation outside DPDK's per-lcore mempool cache, no system calls
// (unless --idle-sleep-us asks the loop to sleep when its queue is empty).
//
// ICMP errors about a flow another worker owns (the NIC's RSS hashes an
// error by its outer header, the flow by its own tuple: pipeline.h kSteer)
// are handed to that worker over its steering ring, multi-producer and
// single-consumer, which it drains every pass and runs through
// Worker::ProcessSteered. A full ring drops the error and counts it
// (steer_ring_full); nothing ever waits. Without an RssOwner (one queue, or
// net_af_packet's kernel fanout) there are no rings and nothing changes.
#ifndef MAGLB_DATAPLANE_WORKER_LOOP_H_
#define MAGLB_DATAPLANE_WORKER_LOOP_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

#include "dataplane/snapshot.h"
#include "maglb/pipeline.h"

struct rte_mempool;
struct rte_ring;

namespace maglb {

inline constexpr uint16_t kRxBurst = 32;

/// Counters of the loop around the pipeline (the pipeline counts the rest).
struct alignas(64) LoopCounters {
  Counter tx_full;          ///< frames the TX queue refused (freed)
  Counter rx_multiseg;      ///< multi-segment frames (jumbo/LRO): dropped
  Counter to_control;       ///< ARP replies / neighbour adverts passed to the control thread
  Counter control_full;     ///< ... that found the control ring full
  Counter control_sent;     ///< frames the control thread asked us to send
  Counter extra_alloc_fail; ///< fragments lost for want of a buffer
  Counter no_snapshot;      ///< frames received before the first config snapshot: dropped
  Counter steer_full;       ///< ICMP errors whose owner's steering ring was full: dropped
};

/// Entries per steering ring: ICMP errors are rare; a burst that overflows
/// this is an attack or a storm, and dropping its excess is what we want.
inline constexpr unsigned kSteerRingSize = 1024;

/// One steering ring per worker (ring i is drained by worker i only).
class SteerRings {
 public:
  static absl::StatusOr<std::unique_ptr<SteerRings>> Create(uint32_t workers, int socket);
  ~SteerRings();
  SteerRings(const SteerRings&) = delete;
  SteerRings& operator=(const SteerRings&) = delete;
  rte_ring* const* rings() const { return rings_.data(); }

 private:
  SteerRings() = default;
  std::vector<rte_ring*> rings_;
};

struct WorkerContext {
  uint32_t index = 0;   ///< worker number, also its RCU reader id
  unsigned lcore = 0;
  uint16_t port_id = 0;          ///< the clients' side (and everything, one-arm)
  uint16_t backend_port_id = 0;  ///< where packets toward backends leave (== port_id one-arm)
  uint16_t queue = 0;            ///< this worker's RX/TX queue pair on both ports
  Worker* worker = nullptr;
  LoopCounters* counters = nullptr;
  SnapshotPublisher* publisher = nullptr;
  rte_mempool* pool = nullptr;
  rte_ring* to_control = nullptr;    ///< multi-producer, single-consumer
  rte_ring* from_control = nullptr;  ///< drained by worker 0 only (else null)
  /// The front port's RSS: which worker owns a flow. Null: no steering.
  const RssOwner* rss_owner = nullptr;
  rte_ring* const* steer_rings = nullptr;  ///< per worker; with rss_owner only
  const std::atomic<bool>* stop = nullptr;
  uint32_t idle_sleep_us = 0;  ///< 0: poll without pause (production)
};

/// rte_eal_remote_launch entry point; `arg` is a WorkerContext*.
int WorkerMain(void* arg);

/// Monotonic nanoseconds from the TSC (no system call).
uint64_t NowNs();

}  // namespace maglb

#endif  // MAGLB_DATAPLANE_WORKER_LOOP_H_
