// DPDK port setup: one RX/TX queue pair per worker, RSS when the PMD has it.
#ifndef MAGLB_DATAPLANE_PORT_H_
#define MAGLB_DATAPLANE_PORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "dataplane/dpdk_owners.h"
#include "dataplane/offloads.h"
#include "maglb/ip_address.h"
#include "maglb/port_sizing.h"
#include "maglb/toeplitz.h"

struct rte_eth_dev_info;
struct rte_mempool;

namespace maglb {

/// Each port pool's per-lcore cache (mbufs).
inline constexpr uint32_t kMbufCacheSize = 256;

struct PortInfo {
  uint16_t port_id = 0;
  std::string driver;
  std::string name;
  MacAddress mac;
  uint16_t num_queues = 1;  ///< RX/TX queue pairs, one per polling worker
  /// How flows spread over queues: "rss", "kernel fanout" (net_af_packet
  /// spreads flows by the kernel's flow hash over its sockets), "one source
  /// per queue" (net_pcap: a queue per rx_pcap file or rx_iface), or
  /// "single queue".
  std::string distribution;
  /// With "rss": the key, hash types and RETA the port applies, read back
  /// after start (ICMP errors are steered by them, worker_loop.h); empty if
  /// the PMD would not say (rss_note says why).
  std::optional<RssConfig> rss;
  std::string rss_note;
  /// The NIC offloads enabled (offloads.h), and those the port offers.
  PortOffloads offloads;
  PortOffloads offered;
  rte_mempool* pool = nullptr;
  /// The largest lb.mtu whose frames the pool's buffers hold whole (sized
  /// from the MTU at start; a reload above it needs a restart).
  uint32_t max_mtu = 0;
  /// Descriptors per RX / TX queue, as the port took them.
  uint16_t rx_descriptors = 0;
  uint16_t tx_descriptors = 0;
  /// Packet buffers of the pool (rte_mempool size), and where its memory is:
  /// "2 MiB hugepages", "4 KiB pages (--no-huge)".
  uint32_t mbufs = 0;
  std::string pool_pages;
  /// The start-up line's account of the pool: its buffers, part by part.
  std::string sizing;
};

/// What SetUpPort will make of a device, decided before any port is
/// configured, so that the pool can count every port's TX rings (two-arm),
/// and so that `maglb --check` reports exactly what a start would make.
struct PortPlan {
  uint16_t port_id = 0;
  std::string label;  ///< "port 0 net_null0 (net_null)"
  std::string driver;
  uint16_t queues = 1;       ///< queue pairs (PlannedQueues)
  std::string distribution;  ///< as PlannedQueues says
  /// Per queue: what maglb asks for (config or default), and what the port
  /// takes (rte_eth_dev_adjust_nb_rx_tx_desc: the device's limits).
  uint16_t rx_wanted = 0, tx_wanted = 0;
  uint16_t rx_descriptors = 0, tx_descriptors = 0;
  uint32_t data_room = 0;  ///< PortDataRoom(mtu)
  int socket = 0;          ///< NUMA socket its pool goes on
};

/// Plans `port_id` for up to `workers` queue pairs, `mtu` and the config's
/// descriptors.
absl::StatusOr<PortPlan> PlanPort(uint16_t port_id, uint16_t workers, uint32_t mtu,
                                  const PortSizingConfig& sizing);

/// A port pool's plan, and what it was computed from (for the log).
struct PortPool {
  PoolDemand demand;
  PoolPlan plan;
};

/// The pool of `port` among the data ports `all` (one-arm: just it; two-arm:
/// the front port first), polled by `workers` workers (the queue pairs every
/// port has). Counts every port's TX rings, the control rings and, with RSS
/// over several workers, the ICMP steering rings. With the config's `mbufs`
/// when set (refused below the floor, naming `source`:line).
absl::StatusOr<PortPool> PlanPortPool(const PortPlan& port, const std::vector<PortPlan>& all, uint32_t workers,
                                      const PortSizingConfig& sizing, std::string_view source);

/// "FILE:LINE: lb.mbufs 2000000" when the config sets mbufs, else "".
std::string MbufsOrigin(const PortSizingConfig& sizing, std::string_view source);

/// The bytes rte_pktmbuf_pool_create takes for `n` buffers of `data_room`
/// in pages of `page_size`: the objects with their mempool header and
/// trailer, laid out so that none crosses a page, the ring that holds them,
/// the pool's header with a cache per lcore.
uint64_t PoolBytes(uint32_t n, uint32_t data_room, uint64_t page_size);
/// The pages a pool on `socket` gets: the smallest hugepage size EAL has
/// there, or the system's page size without hugepages (--no-huge).
uint64_t PoolPageSize(int socket);

/// A port this process set up, with its packet buffer pool: stopped and
/// closed when destroyed (or on Close()), then its pool freed (the port's
/// queues hold the pool's buffers until it closes). Destroy it after the
/// workers polling it have stopped, and before the EAL.
class Port {
 public:
  Port(Port&& other) noexcept
      : info_(std::move(other.info_)),
        owned_(std::exchange(other.owned_, false)),
        started_(std::exchange(other.started_, false)),
        pool_(std::move(other.pool_)) {}
  Port& operator=(Port&&) = delete;
  ~Port() { Close(); }

  const PortInfo& info() const { return info_; }
  const PortInfo* operator->() const { return &info_; }

  /// Sets the port's MAC address (two-arm: both arms answer as one MAC).
  absl::Status SetMac(const MacAddress& mac);

  /// Stops and closes the port, then frees its pool. Once only; later calls
  /// do nothing.
  void Close();

 private:
  friend absl::StatusOr<Port> SetUpPort(const PortPlan& plan, const PortPool& pool, uint32_t mtu,
                                        const std::string& mbufs_origin, bool toward_backends);
  explicit Port(uint16_t port_id) : owned_(true) { info_.port_id = port_id; }

  PortInfo info_;
  bool owned_ = false;    // closed by Close()
  bool started_ = false;  // stopped by Close()
  UniqueMempool pool_;    // info_.pool
};

/// The queue pairs for `workers` (1 where flows cannot be spread) and how
/// flows are spread ("rss", "kernel fanout", "one source per queue",
/// "single queue").
uint16_t PlannedQueues(const rte_eth_dev_info& dev, const std::string& driver, uint16_t workers,
                       std::string* distribution);
/// The data room of each buffer for `mtu` (0: Ethernet's): whole frames.
uint32_t PortDataRoom(uint32_t mtu);

/// Configures and starts the port of `plan` with its pool of `pool.mbufs`
/// buffers. Where the PMD cannot spread flows over queues, the plan has one
/// queue (and says so in distribution): the caller then polls with one
/// worker. `mbufs_origin` names the config's mbufs key ("FILE:LINE: lb.mbufs
/// 2000000") in a refusal, empty when computed. Enables the offloads of
/// ChooseOffloads (offloads.h); `toward_backends`: frames to backends leave
/// by this port. On failure the port is closed again and its pool freed.
absl::StatusOr<Port> SetUpPort(const PortPlan& plan, const PortPool& pool, uint32_t mtu,
                               const std::string& mbufs_origin, bool toward_backends);

}  // namespace maglb

#endif  // MAGLB_DATAPLANE_PORT_H_
