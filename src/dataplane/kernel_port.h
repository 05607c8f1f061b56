// The kernel interface on the data port (the exception path): with DPDK
// owning the NIC, the host's kernel cannot talk on that network; this gives
// it an interface there ([kernel] interface, e.g. maglb0) that carries the
// LB's addresses. It is a net_tap device hot-plugged at start: DPDK sees a
// port, the kernel a tap interface, both with the front port's MAC (the
// kernel must answer as the same MAC as the data port, or the segment would
// see the LB's address at two MACs). One queue pair per worker, each a file
// descriptor of the tap (net_tap takes at most 16). What the pipeline passes
// up (packet.h, Action::kToKernel; ARP and ND answers) is written to it; what
// the kernel sends is read from it and leaves by the front port
// (worker_loop.h).
//
// Addresses ([lb] ipv4 / ipv6 with [kernel] ipv4_prefix_len /
// ipv6_prefix_len) go on it by rtnetlink, IPv6 without duplicate address
// detection (maglb answers for it on the wire already). IPv6 address
// generation is off on it (addr_gen_mode none, and no router advertisements
// taken), and its link-local address is fe80::/64 + the MAC's EUI-64
// (LinkLocalOf), added like the others: so maglb knows every IPv6 address
// the kernel may speak from. The kernel needs a link-local address (Linux
// sends neighbour solicitations for which it has no packet's own source
// from it), and maglb answers solicitations for it and passes up what is
// addressed to it. No address the kernel invents on its own (a SLAAC address
// from a router advertisement) could be answered for.
//
// ARP requests and neighbour solicitations for these addresses are answered
// by maglb alone (the kernel never sees them: one answer, one MAC); ARP
// replies and neighbour advertisements go to both maglb's control thread and
// the kernel, so both resolve the same neighbours from the same answers.
#ifndef MAGLB_DATAPLANE_KERNEL_PORT_H_
#define MAGLB_DATAPLANE_KERNEL_PORT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "dataplane/dpdk_owners.h"
#include "maglb/config.h"
#include "maglb/ip_address.h"

struct rte_mempool;

namespace maglb {

/// net_tap's own limit on queue pairs (TAP_MAX_QUEUES in DPDK 22.11).
inline constexpr uint16_t kKernelMaxQueues = 16;
/// Receive descriptors per tap queue: net_tap holds this many buffers per
/// queue and reads one frame per read(2) into the first.
inline constexpr uint16_t kKernelRxDescriptors = 64;
inline constexpr uint16_t kKernelTxDescriptors = 256;
/// The tap pool's per-lcore cache.
inline constexpr uint32_t kKernelMbufCacheSize = 32;

/// The buffers of the tap's pool for `queues` queue pairs (one per worker):
/// its receive buffers, the frames from the kernel that wait in the front
/// port's TX queues (`front_tx_descriptors` each) and in the workers'
/// buffers, the workers' caches, and a margin (PlanPool, port_sizing.h).
uint32_t KernelPoolMbufs(uint16_t queues, uint16_t front_tx_descriptors);

struct KernelPortInfo {
  std::string interface;  ///< the kernel's name for it ([kernel] interface)
  std::string device;     ///< the DPDK device ("net_tap_" + interface)
  uint16_t port_id = 0;
  int ifindex = 0;
  MacAddress mac;
  uint16_t num_queues = 0;
  uint32_t mtu = 0;
  uint32_t mbufs = 0;  ///< packet buffers of its pool
  /// "10.0.0.10/24 fd00::10/64 fe80::.../64", as put on it.
  std::vector<std::string> addresses;
  /// A note on what differs from the config (an MTU the tap cannot take).
  std::string note;
};

/// The kernel interface, created and started: on destruction (or Close) the
/// port stops, the device is removed (the kernel's interface disappears
/// with it) and its pool freed. Destroy it after the workers have stopped,
/// and before the EAL.
class KernelPort {
 public:
  /// Creates interface `kernel.interface` with `mac` and `queues` queue
  /// pairs (one per worker), its pool sized for the front port's
  /// `front_tx_descriptors` per TX queue (KernelPoolMbufs), MTU lb.mtu (at most what net_tap takes, said in
  /// info().note), and the LB's addresses. Errors name the interface and
  /// what to do ("cannot create kernel interface maglb0: ..."); on failure
  /// nothing is left behind.
  static absl::StatusOr<KernelPort> Create(const KernelConfig& kernel, const LbConfig& lb,
                                           const MacAddress& mac, uint16_t queues,
                                           uint16_t front_tx_descriptors);

  KernelPort(KernelPort&& other) noexcept
      : info_(std::move(other.info_)),
        plugged_(std::exchange(other.plugged_, false)),
        started_(std::exchange(other.started_, false)),
        pool_(std::move(other.pool_)) {}
  KernelPort& operator=(KernelPort&&) = delete;
  ~KernelPort() { Close(); }

  const KernelPortInfo& info() const { return info_; }

  /// Stops the port and removes the device, then frees the pool. Once only.
  void Close();

  /// One line for the log: "kernel interface maglb0: port 1 net_tap_maglb0,
  /// mac ..., mtu 1500, 2 queue pairs, addresses ...".
  std::string Describe() const;

 private:
  KernelPort() = default;

  KernelPortInfo info_;
  bool plugged_ = false;  // the vdev exists: removed by Close()
  bool started_ = false;
  UniqueMempool pool_;
};

}  // namespace maglb

#endif  // MAGLB_DATAPLANE_KERNEL_PORT_H_
