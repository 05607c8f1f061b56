// DPDK port setup: one RX/TX queue pair per worker, RSS when the PMD has it.
#ifndef MAGLB_DATAPLANE_PORT_H_
#define MAGLB_DATAPLANE_PORT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "maglb/ip_address.h"
#include "maglb/toeplitz.h"

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
  rte_mempool* pool = nullptr;
  /// The largest lb.mtu whose frames the pool's buffers hold whole (sized
  /// from the MTU at start; a reload above it needs a restart).
  uint32_t max_mtu = 0;
};

/// Configures and starts `port_id` with up to `workers` queue pairs. Where the
/// PMD cannot spread flows over queues, uses one queue (and says so in
/// PortInfo::distribution): the caller then polls with one worker.
absl::StatusOr<PortInfo> SetUpPort(uint16_t port_id, uint16_t workers, uint32_t mtu);

/// Sets the port's MAC address (two-arm: both arms answer as one MAC).
absl::Status SetPortMac(uint16_t port_id, const MacAddress& mac);

/// Stops and closes the port.
void ShutDownPort(const PortInfo& port);

}  // namespace maglb

#endif  // MAGLB_DATAPLANE_PORT_H_
