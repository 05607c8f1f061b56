// DPDK port setup: one RX/TX queue pair per worker, RSS when the PMD has it.
#ifndef MAGLB_DATAPLANE_PORT_H_
#define MAGLB_DATAPLANE_PORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "dataplane/dpdk_owners.h"
#include "dataplane/offloads.h"
#include "maglb/ip_address.h"
#include "maglb/toeplitz.h"

struct rte_eth_dev_info;
struct rte_mempool;

namespace maglb {

inline constexpr uint16_t kRxDescriptors = 1024;
inline constexpr uint16_t kTxDescriptors = 1024;
inline constexpr uint32_t kMbufsPerQueue = 4096;
inline constexpr uint32_t kMbufCacheSize = 256;

struct PortInfo {
  uint16_t port_id = 0;
  std::string driver;
  std::string name;
  MacAddress mac;
  uint16_t num_queues = 1;  ///< RX/TX queue pairs, one per polling worker
  /// How flows spread over queues: "rss", "kernel fanout" (net_af_packet
  /// spreads flows by the kernel's flow hash over its sockets), or "single
  /// queue".
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
};

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
  friend absl::StatusOr<Port> SetUpPort(uint16_t port_id, uint16_t workers, uint32_t mtu,
                                        bool toward_backends);
  explicit Port(uint16_t port_id) : owned_(true) { info_.port_id = port_id; }

  PortInfo info_;
  bool owned_ = false;    // closed by Close()
  bool started_ = false;  // stopped by Close()
  UniqueMempool pool_;    // info_.pool
};

/// What SetUpPort will make of a device (maglb --check sizes it before):
/// the queue pairs for `workers` (1 where flows cannot be spread) and how
/// flows are spread ("rss", "kernel fanout", "single queue").
uint16_t PlannedQueues(const rte_eth_dev_info& dev, const std::string& driver, uint16_t workers,
                       std::string* distribution);
/// The packet buffers of a port's pool: kMbufsPerQueue per queue, twice (RX
/// rings full while as many wait in TX rings), less one (a power of two
/// minus one is the mempool's best size).
constexpr uint32_t PortPoolMbufs(uint16_t queues) { return kMbufsPerQueue * queues * 2 - 1; }
/// The data room of each buffer for `mtu` (0: Ethernet's): whole frames.
uint32_t PortDataRoom(uint32_t mtu);

/// Configures and starts `port_id` with up to `workers` queue pairs. Where the
/// PMD cannot spread flows over queues, uses one queue (and says so in
/// PortInfo::distribution): the caller then polls with one worker. Enables
/// the offloads of ChooseOffloads (offloads.h); `toward_backends`: frames to
/// backends leave by this port. On failure the port is closed again and its
/// pool freed.
absl::StatusOr<Port> SetUpPort(uint16_t port_id, uint16_t workers, uint32_t mtu, bool toward_backends);

}  // namespace maglb

#endif  // MAGLB_DATAPLANE_PORT_H_
