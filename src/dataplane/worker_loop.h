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
//
// The kernel interface (kernel_port.h), when there is one: each worker has
// its own queue pair on it (a file descriptor of the tap each), so again no
// locks. Frames the pipeline passes up (kToKernel, and a copy of each
// kToControlAndKernel) go to the worker's tap TX queue, flushed every pass; a
// full queue drops and counts (kernel_full), never waits. The worker reads
// what the kernel sent from its tap RX queue and runs it through
// Worker::ProcessFromKernel, but not every pass: a tap read is a system call
// per frame, so the hot path polls it only when kKernelPollIntervalNs passed
// since the last poll, or when the pass found nothing to do (an idle worker
// has time). What the kernel sends leaves by the front port, unchanged: the
// kernel interface stands on the front segment, where the LB's own address
// is and where the kernel's routes point (two-arm, its next hops are on the
// front side). Only tunnel probes, encapsulated like data, leave toward the
// backends (by the backend port, two-arm), since they must take exactly the
// data path.
#ifndef MAGLB_DATAPLANE_WORKER_LOOP_H_
#define MAGLB_DATAPLANE_WORKER_LOOP_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

#include "dataplane/snapshot.h"
#include "maglb/latency_histogram.h"
#include "maglb/pipeline.h"

struct rte_mempool;
struct rte_ring;

namespace maglb {

inline constexpr uint16_t kRxBurst = 32;
/// Frames a worker's TX buffer for one port holds (a burst plus the
/// fragments or control frames that join it); flushed early when full.
inline constexpr uint16_t kTxCapacity = kRxBurst * 2;
/// Frames one worker may hold at once, of any pool: the burst it processes,
/// another it takes from its steering or control ring, and its three TX
/// buffers (front port, backend port, kernel interface). Port pools count
/// them (port.cc).
inline constexpr uint32_t kFramesHeldPerWorker = 2 * kRxBurst + 3 * kTxCapacity;
/// Slots of each ring between the workers and the control thread
/// (main.cc: to the control thread, and from it to worker 0).
inline constexpr unsigned kControlRingSize = 1024;

/// Counters of the loop around the pipeline (the pipeline counts the rest).
struct alignas(64) LoopCounters {
  Counter tx_full;          ///< frames the TX queue refused (freed)
  Counter rx_multiseg;      ///< multi-segment frames (jumbo/LRO): dropped
  Counter to_control;       ///< ARP replies / neighbour adverts passed to the control thread
  Counter control_full;     ///< ... that found the control ring full
  Counter control_sent;     ///< frames the control thread asked us to send
  Counter extra_alloc_fail; ///< fragments, and copies (kernel's ARP/ND, fast-free queues), lost for want of a buffer
  Counter no_snapshot;      ///< frames received before the first config snapshot: dropped
  Counter steer_full;       ///< ICMP errors whose owner's steering ring was full: dropped
  Counter to_kernel;        ///< frames written to the kernel interface
  Counter to_kernel_bytes;
  Counter kernel_full;      ///< ... that its queue refused: dropped
  Counter from_kernel;      ///< frames the kernel interface sent (read from its queue)
  Counter from_kernel_bytes;
  /// Passes of the loop, and those that found work (frames from the ports,
  /// its steering ring or the kernel interface): the ratio of their rates is
  /// how busy the worker is, since it polls without pause.
  Counter polls;
  Counter busy_polls;
  /// Receive to transmit, per frame: for each pass of the loop whose bursts
  /// from a port (front, and backend two-arm) put frames on the TX buffers,
  /// the TSC time from the pass's start (just before its first
  /// rte_eth_rx_burst, which is included) to the next pass's start (just
  /// after this pass's last rte_eth_tx_burst, and its RCU quiescent mark),
  /// counted once per frame it queued for the wire (fragments included;
  /// dropped frames and those for the control thread or the kernel
  /// interface not). One TSC read a pass serves as both ends and as the
  /// pipeline's clock. Approximations, for a counter cheap enough to be
  /// always on: a frame sent early in the pass (a TX buffer that filled)
  /// counts the pass's end; one the TX queue then refused (tx_full) still
  /// counts; two-arm, a frame from the backend port also counts the front
  /// port's burst before it. Frames from the kernel interface and ICMP
  /// errors steered from another worker are not timed.
  LatencyHistogram latency;
};

/// How often a busy worker reads its kernel-interface queue (an idle one
/// reads it every pass). Measured on net_tap (DPDK 22.11, a shared 2-vCPU
/// EPYC VM): a poll costs ~7 ns while the kernel sent nothing (net_tap skips
/// the system call until the tap's signal says data came, on any of its
/// queues), ~0.4-0.5 us once it did (a readv(2) that finds the queue
/// empty), and ~0.6-0.8 us per frame read. So a busy worker pays at most
/// ~1% of its time for polls that find nothing, and the kernel's frames
/// wait at most 50 us; a poll takes at most kRxBurst frames. (Writing a
/// frame up costs ~2 us with the kernel's receive path: [kernel] rate bounds
/// that.)
inline constexpr uint64_t kKernelPollIntervalNs = 50'000;

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
  /// Fragments and copies come from it (the front port's pool); the only
  /// pool whose buffers go on a fast-free TX queue (offloads.h).
  rte_mempool* pool = nullptr;
  /// NIC offloads (offloads.h): the backend port (one-arm: the port)
  /// computes outer IPv4 header checksums; the front / backend port's TX
  /// queues free buffers without checks (MBUF_FAST_FREE; one-arm both
  /// flags are the port's).
  bool backend_tx_ipv4_checksum = false;
  bool front_fast_free = false;
  bool backend_fast_free = false;
  rte_ring* to_control = nullptr;    ///< multi-producer, single-consumer
  rte_ring* from_control = nullptr;  ///< drained by worker 0 only (else null)
  /// The front port's RSS: which worker owns a flow. Null: no steering.
  const RssOwner* rss_owner = nullptr;
  rte_ring* const* steer_rings = nullptr;  ///< per worker; with rss_owner only
  const std::atomic<bool>* stop = nullptr;
  uint32_t idle_sleep_us = 0;  ///< 0: poll without pause (production)
  /// The kernel interface's port (queue `queue` is this worker's), or -1.
  int kernel_port_id = -1;
  /// Which tunnel probe goes to which backend (null: none).
  const TunnelProbeTable* tunnel_probes = nullptr;
};

/// rte_eal_remote_launch entry point; `arg` is a WorkerContext*.
int WorkerMain(void* arg);

/// Monotonic nanoseconds from the TSC (no system call).
uint64_t NowNs();
/// NowNs of an earlier TSC reading (rte_rdtsc): a TSC read costs ~20 ns
/// in some VMs, so the loop reads it once a pass and uses it for everything
/// the pass times.
uint64_t TscToMonotonicNs(uint64_t tsc);

}  // namespace maglb

#endif  // MAGLB_DATAPLANE_WORKER_LOOP_H_
