#include "daemon/check.h"

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "dataplane/kernel_port.h"
#include "dataplane/offloads.h"
#include "dataplane/port.h"
#include "maglb/conntrack.h"
#include "maglb/exit_codes.h"

namespace maglb {

namespace {

std::string ReadFirstLine(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

// "port 0 0000:3b:00.0 (net_ice)".
std::string PortLabel(uint16_t port_id, const rte_eth_dev_info& dev) {
  char name[RTE_ETH_NAME_MAX_LEN] = {};
  rte_eth_dev_get_name_by_port(port_id, name);
  return absl::StrFormat("port %u %s (%s)", port_id, name,
                         dev.driver_name != nullptr ? dev.driver_name : "?");
}

// Hugepages not yet taken on a NUMA node (all page sizes): what DPDK's heap
// can still grow by.
uint64_t FreeHugepageBytes(int socket) {
  namespace fs = std::filesystem;
  uint64_t bytes = 0;
  std::error_code ec;
  const std::string dir = absl::StrFormat("/sys/devices/system/node/node%d/hugepages", socket);
  const fs::path base = fs::exists(dir, ec) ? fs::path(dir) : fs::path("/sys/kernel/mm/hugepages");
  for (const fs::directory_entry& e : fs::directory_iterator(base, ec)) {
    unsigned long long kb = 0;
    if (std::sscanf(e.path().filename().c_str(), "hugepages-%llukB", &kb) != 1) continue;
    const std::string free = ReadFirstLine((e.path() / "free_hugepages").string());
    bytes += std::strtoull(free.c_str(), nullptr, 10) * kb * 1024;
  }
  return bytes;
}

// What a "Key:   123 kB" line of a /proc file says, in bytes.
std::optional<uint64_t> ProcKilobytes(const std::string& path, const std::string& key) {
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      return std::strtoull(line.c_str() + key.size() + 1, nullptr, 10) * 1024;
    }
  }
  return std::nullopt;
}

// Ordinary memory this process may still take, and which limit says so: the
// smallest of the host's MemAvailable, the cgroup's memory.max less its use
// (systemd's MemoryMax=), RLIMIT_DATA less the data already mapped.
std::pair<uint64_t, std::string> OrdinaryMemoryAvailable() {
  uint64_t best = UINT64_MAX;
  std::string source = "no limit found";
  auto consider = [&](uint64_t bytes, std::string what) {
    if (bytes < best) {
      best = bytes;
      source = std::move(what);
    }
  };
  if (std::optional<uint64_t> avail = ProcKilobytes("/proc/meminfo", "MemAvailable")) {
    consider(*avail, "ordinary memory (MemAvailable in /proc/meminfo)");
  }
  // cgroup v2: "0::/system.slice/maglb.service".
  const std::string cgroup = ReadFirstLine("/proc/self/cgroup");
  if (cgroup.rfind("0::", 0) == 0) {
    const std::string dir = "/sys/fs/cgroup" + cgroup.substr(3);
    const std::string max = ReadFirstLine(dir + "/memory.max");
    if (!max.empty() && max != "max") {
      const uint64_t limit = std::strtoull(max.c_str(), nullptr, 10);
      const uint64_t used = std::strtoull(ReadFirstLine(dir + "/memory.current").c_str(), nullptr, 10);
      consider(limit > used ? limit - used : 0,
               absl::StrFormat("ordinary memory (cgroup %s memory.max %s)", cgroup.substr(3),
                               HumanBytes(limit)));
    }
  }
  rlimit data{};
  if (getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY) {
    const uint64_t used = ProcKilobytes("/proc/self/status", "VmData").value_or(0);
    const uint64_t limit = data.rlim_cur;
    consider(limit > used ? limit - used : 0,
             absl::StrFormat("ordinary memory (RLIMIT_DATA %s, %s mapped)", HumanBytes(limit),
                             HumanBytes(used)));
  }
  return {best, source};
}

}  // namespace

void DeploymentCheck::Add(CheckFinding f) {
  if (f.level == CheckFinding::Level::kError) ++errors_;
  if (f.level == CheckFinding::Level::kWarning) ++warnings_;
  std::printf("%s\n", f.ToString().c_str());
  std::fflush(stdout);
}

void DeploymentCheck::CheckPortsAndMemory(const Config& config, uint16_t port, int backend_port,
                                          const std::vector<unsigned>& worker_lcores) {
  std::vector<uint16_t> ports = {port};
  if (backend_port >= 0 && backend_port != port) ports.push_back(static_cast<uint16_t>(backend_port));
  const uint16_t lcores = static_cast<uint16_t>(worker_lcores.size());
  uint32_t workers = lcores;
  std::map<int, uint64_t> pool_bytes;  // by NUMA socket
  std::map<int, std::vector<std::string>> pool_text;
  // The ports as a start plans them (port.h PlanPort): the same queues,
  // descriptors and pools.
  std::vector<PortPlan> plans;
  for (uint16_t p : ports) {
    if (!rte_eth_dev_is_valid_port(p)) {
      Error(absl::StrFormat("no DPDK port %u (%u available): bind the NIC to vfio-pci "
                            "(dpdk-devbind.py) and allow it with -a PCI, or fix --port/--backend-port",
                            p, rte_eth_dev_count_avail()));
      continue;
    }
    rte_eth_dev_info dev{};
    if (int rc = rte_eth_dev_info_get(p, &dev); rc != 0) {
      Error(absl::StrFormat("port %u: rte_eth_dev_info_get failed: %s", p, rte_strerror(-rc)));
      continue;
    }
    absl::StatusOr<PortPlan> plan = PlanPort(p, lcores, config.lb.mtu, config.lb.sizing);
    if (!plan.ok()) {
      Error(std::string(plan.status().message()));
      continue;
    }
    PortFacts facts;
    facts.label = PortLabel(p, dev);
    facts.numa_node = rte_eth_dev_socket_id(p);
    facts.max_rx_queues = dev.max_rx_queues;
    facts.max_tx_queues = dev.max_tx_queues;
    const uint16_t queues = plan->queues;
    facts.rss = plan->distribution == "rss" ||
                (dev.flow_type_rss_offloads & (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP)) != 0;
    facts.kernel_fanout = plan->distribution == "kernel fanout";
    facts.source_per_queue = plan->distribution == "one source per queue";
    facts.rx = {dev.rx_desc_lim.nb_min, dev.rx_desc_lim.nb_max, dev.rx_desc_lim.nb_align};
    facts.tx = {dev.tx_desc_lim.nb_min, dev.tx_desc_lim.nb_max, dev.tx_desc_lim.nb_align};
    // As SetUpPort chooses them: frames to backends leave by the last port
    // (the backend port two-arm, the only one one-arm).
    const bool toward_backends = p == ports.back();
    Ok(absl::StrFormat("%s: found; NUMA node %s; %s", facts.label,
                       facts.numa_node < 0 ? "unknown" : absl::StrCat(facts.numa_node),
                       DescribeOffloads(ChooseOffloads(dev, toward_backends), OfferedOffloads(dev))));
    for (const CheckFinding& f : CheckQueues(facts, lcores, queues, plan->rx_wanted, plan->tx_wanted)) Add(f);
    std::vector<LcoreSocket> polling;
    for (uint16_t i = 0; i < queues && i < worker_lcores.size(); ++i) {
      polling.push_back({worker_lcores[i], static_cast<int>(rte_lcore_to_socket_id(worker_lcores[i]))});
    }
    const std::string node_cpus =
        facts.numa_node < 0
            ? ""
            : ReadFirstLine(absl::StrFormat("/sys/devices/system/node/node%d/cpulist", facts.numa_node));
    Add(CheckNuma(facts, polling, node_cpus));
    workers = std::min<uint32_t>(workers, queues);
    plans.push_back(*std::move(plan));
  }
  if (failed()) return;
  const std::string origin = MbufsOrigin(config.lb.sizing, config.source);
  for (const PortPlan& plan : plans) {
    absl::StatusOr<PortPool> pool = PlanPortPool(plan, plans, workers, config.lb.sizing, config.source);
    if (!pool.ok()) {
      Error(std::string(pool.status().message()));
      continue;
    }
    const uint32_t mbufs = pool->plan.mbufs;
    if (pool->plan.below_computed) {
      Warning(absl::StrFormat("%s: %s, below the %u packet buffers its rings and caches can hold (%s): under "
                              "load, frames waiting in TX rings can leave RX without buffers (counted as "
                              "rx_nombuf by the port); raise it, or set 0 to compute",
                              plan.label, origin, pool->plan.computed, pool->plan.Breakdown(pool->demand)));
    }
    pool_bytes[plan.socket] += PoolBytes(mbufs, plan.data_room, PoolPageSize(plan.socket));
    pool_text[plan.socket].push_back(
        absl::StrFormat("port %u: %u x %u B, %s", plan.port_id, mbufs, plan.data_room,
                        pool->plan.configured ? origin : pool->plan.Breakdown(pool->demand)));
  }
  if (failed()) return;
  if (config.kernel.enabled() && workers > 0) {  // 0 workers (no queue): no pool to size
    const int socket = static_cast<int>(rte_socket_id());
    const uint32_t mbufs = KernelPoolMbufs(static_cast<uint16_t>(workers), plans.front().tx_descriptors);
    pool_bytes[socket] += PoolBytes(mbufs, RTE_MBUF_DEFAULT_BUF_SIZE, PoolPageSize(socket));
    pool_text[socket].push_back(absl::StrFormat("[kernel] interface: %u x %u B", mbufs,
                                                RTE_MBUF_DEFAULT_BUF_SIZE));
  }
  const bool huge = rte_eal_has_hugepages() != 0;
  const std::string lower =
      config.lb.sizing.mbufs != 0
          ? absl::StrFormat("lb.mbufs (%s), [lb] mtu or the worker count", origin)
          : std::string("[lb] mtu, rx_descriptors / tx_descriptors or the worker count");
  for (const auto& [socket, need] : pool_bytes) {
    rte_malloc_socket_stats stats{};
    rte_malloc_get_socket_stats(socket, &stats);
    uint64_t available = stats.heap_freesz_bytes;
    std::string pool;
    std::string fix;
    if (huge) {
      const uint64_t free_pages = FreeHugepageBytes(socket);
      available += free_pages;
      pool = absl::StrFormat("hugepages on NUMA node %d (%s free in DPDK's heap + %s not yet taken)", socket,
                             HumanBytes(stats.heap_freesz_bytes), HumanBytes(free_pages));
      fix = absl::StrFormat("reserve more hugepages on node %d (dpdk-hugepages.py --node %d --reserve "
                            "SIZE, or /sys/devices/system/node/node%d/hugepages/*/nr_hugepages), or "
                            "lower %s",
                            socket, socket, socket, lower);
    } else {
      pool = absl::StrFormat("--no-huge: DPDK's fixed memory (-m) on socket %d", socket);
      fix = absl::StrCat("give EAL more memory with -m (test mode), or lower ", lower);
    }
    Add(CheckMemory(absl::StrFormat("packet buffers (%s)", absl::StrJoin(pool_text[socket], ", ")), need,
                    pool, available, fix));
  }
  // The conntrack tables are ordinary memory, one per worker.
  const uint64_t per_worker = Conntrack::MemoryBytes(config.conntrack.capacity);
  auto [available, source] = OrdinaryMemoryAvailable();
  Add(CheckMemory(absl::StrFormat("conntrack (%u worker%s x %s for [conntrack] capacity %u)", workers,
                                  workers == 1 ? "" : "s", HumanBytes(per_worker),
                                  config.conntrack.capacity),
                  per_worker * workers, source, available,
                  absl::StrFormat("lower [conntrack] capacity in %s (~90 bytes a flow per worker) or the "
                                  "worker count, or free memory",
                                  config.source)));
}

void DeploymentCheck::CheckLink(uint16_t port_id) {
  // A NIC's link comes up a few seconds after the port starts (autonegotiation).
  constexpr int kWaitMs = 9000, kStepMs = 100;
  rte_eth_link link{};
  int rc = 0;
  for (int waited = 0;; waited += kStepMs) {
    rc = rte_eth_link_get_nowait(port_id, &link);
    if (rc != 0 || link.link_status == RTE_ETH_LINK_UP || waited >= kWaitMs) break;
    usleep(kStepMs * 1000);
  }
  if (rc != 0) {
    Warning(absl::StrFormat("port %u: the driver reports no link status (%s): cannot tell whether it has link",
                            port_id, rte_strerror(-rc)));
  } else if (link.link_status != RTE_ETH_LINK_UP) {
    Error(absl::StrFormat("port %u: link down %u s after the port started: check the cable, the "
                          "transceiver and the switch port (ip link shows nothing: the NIC is DPDK's)",
                          port_id, kWaitMs / 1000));
  } else {
    // (rte_eth_link_to_str is still experimental in 22.11.)
    const std::string speed = link.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN ||
                                      link.link_speed == RTE_ETH_SPEED_NUM_NONE
                                  ? "speed unknown"
                                  : absl::StrFormat("%u Mbps", link.link_speed);
    Ok(absl::StrFormat("port %u: link up, %s, %s-duplex", port_id, speed,
                       link.link_duplex == RTE_ETH_LINK_FULL_DUPLEX ? "full" : "half"));
  }
}

int DeploymentCheck::Finish() {
  std::printf("check: %d error%s, %d warning%s: %s\n", errors_, errors_ == 1 ? "" : "s", warnings_,
              warnings_ == 1 ? "" : "s",
              errors_ == 0 ? "maglb can start with these arguments" : "maglb would not start as it is");
  std::fflush(stdout);
  return errors_ == 0 ? kExitOk : kExitError;
}

}  // namespace maglb
