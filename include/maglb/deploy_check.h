// `maglb --check`: judgments on facts the daemon gathered about the host
// (EAL, the port, memory), one finding per line with what to change. Plain
// C++ so that every verdict is unit-tested, NUMA mismatches included, which
// no virtual device can produce.
#ifndef MAGLB_DEPLOY_CHECK_H_
#define MAGLB_DEPLOY_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

namespace maglb {

struct CheckFinding {
  enum class Level { kOk, kWarning, kError };
  Level level;
  std::string text;
  /// "ok: ...", "warning: ...", "error: ...".
  std::string ToString() const;
};

/// A port's limits, from rte_eth_dev_info.
struct DescriptorLimits {
  uint16_t min = 0, max = UINT16_MAX, align = 1;
};
struct PortFacts {
  std::string label;        ///< "port 0 0000:3b:00.0 (net_ice)"
  int numa_node = -1;       ///< rte_eth_dev_socket_id; -1: unknown (virtual devices)
  uint16_t max_rx_queues = 1, max_tx_queues = 1;
  bool rss = false;         ///< hashes IP/TCP/UDP flows over queues
  bool kernel_fanout = false;  ///< net_af_packet: the kernel spreads flows
  bool source_per_queue = false;  ///< net_pcap: each rx_pcap/rx_iface source is one queue
  DescriptorLimits rx, tx;
};

struct LcoreSocket {
  unsigned lcore;
  int socket;  ///< rte_lcore_to_socket_id
};

/// Queue pairs against the worker lcores, descriptor rings against the
/// device's limits (maglb asks for `rx_descriptors` / `tx_descriptors`).
/// `queues`: what maglb will set up (min of workers and the device's
/// queues, 1 without RSS).
std::vector<CheckFinding> CheckQueues(const PortFacts& port, uint32_t worker_lcores,
                                      uint16_t queues, uint16_t rx_descriptors,
                                      uint16_t tx_descriptors);

/// The workers that poll the port (the first `workers` lcores) against the
/// port's NUMA node; `node_cpus` lists that node's CPUs (sysfs cpulist,
/// "0-15,32-47") for the advice, empty if unknown.
CheckFinding CheckNuma(const PortFacts& port, const std::vector<LcoreSocket>& workers,
                       const std::string& node_cpus);

/// `need` bytes of `what` against `available` bytes of `pool`; `fix` is the
/// advice when it does not fit. Under 10% to spare is a warning.
CheckFinding CheckMemory(const std::string& what, uint64_t need, const std::string& pool,
                         uint64_t available, const std::string& fix);

/// "1.5 GiB", "90 MiB", "512 KiB": sizes for the findings.
std::string HumanBytes(uint64_t bytes);

}  // namespace maglb

#endif  // MAGLB_DEPLOY_CHECK_H_
