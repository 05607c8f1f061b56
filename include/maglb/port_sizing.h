// How many packet buffers (mbufs) a data port's pool holds, and the
// descriptor rings they fill: `[lb] rx_descriptors`, `tx_descriptors` and
// `mbufs` of the config, and the pool computed from the ports, queues and
// descriptors when `mbufs` is 0. DPDK-free so that the arithmetic is
// unit-tested without a port; the daemon (src/dataplane/port.cc) fills a
// PoolDemand from the ports as DPDK sets them up, and `maglb --check`
// reports the same PoolPlan.
//
// A buffer of a port's pool is, at any moment, in one of these places, and
// the pool must hold all of them at once or a receive queue runs dry
// (the NIC then drops, counted as rx_nombuf / imissed by the port):
//  - the port's RX rings: every descriptor of every queue holds one, all the
//    time (the PMD refills a descriptor as it hands a frame over);
//  - TX rings: a sent frame stays in its TX descriptor until the NIC has
//    sent it and the PMD frees it, in any data port's TX ring (two-arm, the
//    front port's frames leave by the backend port, and replies by either);
//  - in flight in a worker: the burst it is processing and its TX buffers;
//  - the mempool's per-lcore caches: each lcore that allocates or frees
//    (every polling worker, and the main lcore, where the control thread
//    builds ARP/ND frames and frees what the workers hand it) keeps up to
//    1.5 x the cache size (DPDK's flush threshold) for itself;
//  - rings between threads: workers -> control thread, control thread ->
//    worker 0, and the ICMP steering rings (one per worker, with RSS);
//  - a margin for what the PMDs keep beyond their descriptors (some keep a
//    burst of spare buffers per queue) and for rounding.
#ifndef MAGLB_PORT_SIZING_H_
#define MAGLB_PORT_SIZING_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace maglb {

/// Descriptors per queue when the config leaves them to maglb (0): this,
/// or the PMD's preferred ring size where that is larger, within the
/// port's limits.
inline constexpr uint32_t kDefaultDescriptors = 1024;
/// `rx_descriptors` / `tx_descriptors`: 0, or from kMinDescriptors to
/// kMaxDescriptors. DPDK's descriptor counts are 16-bit and rounded up to the
/// port's alignment, so the largest is a power of two (65535 would round to 0).
inline constexpr uint32_t kMinDescriptors = 64;
inline constexpr uint32_t kMaxDescriptors = 32768;
/// `mbufs`: 0 (computed), or from kMinMbufs to kMaxMbufs per data port
/// (2^26 buffers of 2 KB are ~150 GB: beyond that it is a typo).
inline constexpr uint32_t kMinMbufs = 1024;
inline constexpr uint32_t kMaxMbufs = 1u << 26;
/// The margin: an eighth of the rest, and at least this many buffers.
inline constexpr uint32_t kMinPoolMargin = 512;

/// The config's say in it ([lb] keys); 0 leaves the value to maglb. Lines
/// (0: not set) are for messages only and not compared.
struct PortSizingConfig {
  uint32_t rx_descriptors = 0;
  uint32_t tx_descriptors = 0;
  uint32_t mbufs = 0;
  int rx_descriptors_line = 0;
  int tx_descriptors_line = 0;
  int mbufs_line = 0;

  /// The values only: a reload that moves the keys to other lines changes
  /// nothing.
  bool SameValues(const PortSizingConfig& o) const {
    return rx_descriptors == o.rx_descriptors && tx_descriptors == o.tx_descriptors && mbufs == o.mbufs;
  }
};

/// The descriptors maglb asks a port for (before DPDK adjusts them to the
/// port's limits): the configured count, else kDefaultDescriptors or the
/// PMD's preferred ring size (`pmd_preferred`, 0: none) if larger.
uint32_t WantedDescriptors(uint32_t configured, uint32_t pmd_preferred);

/// Where one port pool's buffers can be, as counts (see the file comment).
struct PoolDemand {
  std::string port;              ///< "port 0", for messages
  uint32_t rx_queues = 1;        ///< RX queues of this port (each set up, polled or not)
  uint32_t rx_descriptors = 0;   ///< per RX queue, as the port takes them
  /// TX descriptors of every data port whose TX queues can hold this pool's
  /// frames, all queues together.
  uint64_t tx_descriptors_total = 0;
  uint32_t workers = 1;          ///< polling workers (one queue pair each)
  uint32_t held_per_worker = 0;  ///< frames a worker holds: its burst and TX buffers
  uint32_t control_lcores = 1;   ///< other lcores with a cache: the main lcore
  uint32_t cache_size = 0;       ///< the pool's per-lcore cache
  uint64_t ring_slots = 0;       ///< slots of the rings between threads
};

/// The pool, part by part, and what it gets.
struct PoolPlan {
  uint64_t rx = 0;         ///< rx_queues x rx_descriptors
  uint64_t tx = 0;         ///< tx_descriptors_total
  uint64_t in_flight = 0;  ///< workers x held_per_worker
  uint64_t caches = 0;     ///< (workers + control_lcores) x 1.5 x cache_size
  uint64_t rings = 0;
  uint64_t margin = 0;
  uint64_t computed = 0;  ///< the sum of all the above
  /// What the pool is made with: `computed`, or the configured `mbufs`.
  uint32_t mbufs = 0;
  bool configured = false;
  /// Configured below `computed`: the port works, but under load frames
  /// waiting in TX rings can starve its RX rings (said in the log and by
  /// --check).
  bool below_computed = false;

  /// Buffers without which the port cannot run at all: its RX rings full,
  /// the workers' bursts, the caches.
  uint64_t floor() const { return rx + in_flight + caches; }
  /// "rx 1 x 1024 + tx 1024 + in flight 1 x 256 + lcore caches 2 x 384 +
  /// rings 2046 + margin 640 = 5814".
  std::string Breakdown(const PoolDemand& demand) const;
};

/// The objects a per-lcore cache of `cache_size` may hold (DPDK's flush
/// threshold, 1.5 x its size).
constexpr uint64_t MempoolCacheHeld(uint32_t cache_size) { return uint64_t{cache_size} * 3 / 2; }

/// The pool for `demand`, or the configured `mbufs` of `sizing`. Refused,
/// naming `source`:line and the key: a configured count below the floor (the
/// port could not fill its RX rings), or a computed one above kMaxMbufs.
absl::StatusOr<PoolPlan> PlanPool(const PoolDemand& demand, const PortSizingConfig& sizing,
                                  std::string_view source);

}  // namespace maglb

#endif  // MAGLB_PORT_SIZING_H_
