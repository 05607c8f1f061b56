#include "dataplane/kernel_port.h"

#include <net/if.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_log.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "dataplane/rtnetlink.h"
#include "dataplane/worker_loop.h"
#include "maglb/port_sizing.h"

namespace maglb {
namespace {

absl::Status Cannot(const std::string& interface, const std::string& why) {
  return absl::FailedPreconditionError(
      absl::StrFormat("cannot create kernel interface %s: %s", interface, why));
}

// DPDK's log lines while it lives, held back: net_tap reports, at error
// level, that it cannot set up the traffic-control queues of rte_flow (which
// maglb does not use) where the kernel lacks the multiq qdisc.
class HeldDpdkLog {
 public:
  HeldDpdkLog() {
    previous_ = rte_log_get_stream();
    file_ = open_memstream(&text_, &size_);
    if (file_ != nullptr) rte_openlog_stream(file_);
  }
  HeldDpdkLog(const HeldDpdkLog&) = delete;
  HeldDpdkLog& operator=(const HeldDpdkLog&) = delete;
  ~HeldDpdkLog() { Release(); }

  // The lines, and DPDK logs where it did before (maglb's JSON log, or its default).
  std::vector<std::string> Release() {
    std::vector<std::string> lines;
    if (file_ == nullptr) return lines;
    rte_openlog_stream(previous_);
    std::fclose(file_);
    file_ = nullptr;
    for (absl::string_view l : absl::StrSplit(absl::string_view(text_, size_), '\n', absl::SkipWhitespace())) {
      lines.emplace_back(l);
    }
    std::free(text_);
    text_ = nullptr;
    return lines;
  }

 private:
  FILE* previous_ = nullptr;
  FILE* file_ = nullptr;
  char* text_ = nullptr;
  size_t size_ = 0;
};

// What net_tap says about rte_flow (not used by maglb) is no news.
bool AboutFlowSupport(const std::string& line) {
  return line.find("qdisc") != std::string::npos || line.find("rte flow") != std::string::npos ||
         line.find("flow support") != std::string::npos;
}

// Writes a sysctl of the interface, e.g. net/ipv6/conf/maglb0/accept_ra.
absl::Status WriteSysctl(const std::string& path, const char* value) {
  std::ofstream f("/proc/sys/" + path);
  f << value;
  f.close();
  if (!f) return absl::UnavailableError(absl::StrFormat("cannot write /proc/sys/%s", path));
  return absl::OkStatus();
}

}  // namespace

uint32_t KernelPoolMbufs(uint16_t queues, uint16_t front_tx_descriptors) {
  PoolDemand d;
  d.port = "kernel interface";
  d.rx_queues = queues;
  d.rx_descriptors = kKernelRxDescriptors;
  d.tx_descriptors_total = uint64_t{queues} * front_tx_descriptors;
  d.workers = queues;
  d.held_per_worker = kFramesHeldPerWorker;
  d.control_lcores = 0;  // the control thread neither takes nor frees the tap's frames
  d.cache_size = kKernelMbufCacheSize;
  // Computed (no configured count): fails only past kMaxMbufs, which 16
  // queues of at most 32768 descriptors never reach.
  absl::StatusOr<PoolPlan> plan = PlanPool(d, PortSizingConfig{}, "");
  return plan.ok() ? plan->mbufs : kMaxMbufs;
}

absl::StatusOr<KernelPort> KernelPort::Create(const KernelConfig& kernel, const LbConfig& lb,
                                              const MacAddress& mac, uint16_t queues,
                                              uint16_t front_tx_descriptors) {
  const std::string& name = kernel.interface;
  if (queues == 0 || queues > kKernelMaxQueues) {
    return Cannot(name, absl::StrFormat("net_tap takes at most %u queue pairs, one per worker, and "
                                        "maglb runs %u workers; give it at most %u worker lcores",
                                        kKernelMaxQueues, queues, kKernelMaxQueues));
  }
  if (if_nametoindex(name.c_str()) != 0) {
    return Cannot(name, "an interface of that name already exists in this network namespace "
                        "(another maglb's? remove it, or choose another [kernel] interface)");
  }
  KernelPort port;
  KernelPortInfo& info = port.info_;
  info.interface = name;
  info.device = "net_tap_" + name;
  info.mac = mac;
  info.num_queues = queues;

  // Hot-plugged, not an EAL --vdev: it exists only with [kernel], and goes
  // when maglb stops.
  const std::string args = absl::StrFormat("iface=%s,mac=%s", name, mac.ToString());
  std::vector<std::string> log;
  {
    HeldDpdkLog held;
    const int rc = rte_eal_hotplug_add("vdev", info.device.c_str(), args.c_str());
    log = held.Release();
    if (rc != 0) {
      log.erase(std::remove_if(log.begin(), log.end(), AboutFlowSupport), log.end());
      return Cannot(name, absl::StrFormat("net_tap (%s) failed: %s%s%s (is /dev/net/tun there, and "
                                          "may this process create interfaces: CAP_NET_ADMIN?)",
                                          args, std::strerror(rc < 0 ? -rc : rc),
                                          log.empty() ? "" : ": ", absl::StrJoin(log, "; ")));
    }
  }
  port.plugged_ = true;
  for (const std::string& l : log) {
    if (!AboutFlowSupport(l)) std::fprintf(rte_log_get_stream(), "%s\n", l.c_str());  // DPDK's lines, to its log
  }
  if (rte_eth_dev_get_port_by_name(info.device.c_str(), &info.port_id) != 0) {
    return Cannot(name, absl::StrFormat("DPDK made no port of %s", info.device));
  }
  info.ifindex = static_cast<int>(if_nametoindex(name.c_str()));
  if (info.ifindex == 0) {
    return Cannot(name, absl::StrFormat("net_tap made no interface of that name: %s", std::strerror(errno)));
  }
  const uint16_t port_id = info.port_id;
  auto port_error = [&](const char* what, int rc) {
    return Cannot(name, absl::StrFormat("port %u: %s failed: %s", port_id, what,
                                        std::strerror(rc < 0 ? -rc : rc)));
  };

  rte_eth_dev_info dev{};
  int rc = rte_eth_dev_info_get(port_id, &dev);
  if (rc != 0) return port_error("rte_eth_dev_info_get", rc);
  if (queues > dev.max_rx_queues || queues > dev.max_tx_queues) {
    return Cannot(name, absl::StrFormat("net_tap takes %u queue pairs and maglb runs %u workers",
                                        std::min(dev.max_rx_queues, dev.max_tx_queues), queues));
  }
  // net_tap takes frames of at most max_rx_pktlen (1522 on 22.11): a jumbo
  // [lb] mtu stays the data port's, and the kernel's frames are smaller.
  const uint32_t overhead = RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
  const uint32_t tap_max_mtu = dev.max_rx_pktlen > overhead ? dev.max_rx_pktlen - overhead : RTE_ETHER_MTU;
  info.mtu = std::min<uint32_t>(lb.mtu, std::min<uint32_t>(tap_max_mtu, dev.max_mtu));
  if (info.mtu < lb.mtu) {
    info.note = absl::StrFormat("mtu %u, not [lb] mtu %u: net_tap takes frames of at most %u bytes",
                                info.mtu, lb.mtu, dev.max_rx_pktlen);
  }
  rte_eth_conf conf{};
  conf.rxmode.mtu = info.mtu;
  rc = rte_eth_dev_configure(port_id, queues, queues, &conf);
  if (rc != 0) return port_error("rte_eth_dev_configure", rc);

  // Its own pool: the tap's receive buffers must not eat the data port's.
  const std::string pool_name = absl::StrFormat("maglb_kernel_%u", port_id);
  const uint32_t mbufs = KernelPoolMbufs(queues, front_tx_descriptors);
  port.pool_.reset(rte_pktmbuf_pool_create(pool_name.c_str(), mbufs, kKernelMbufCacheSize, 0,
                                            RTE_MBUF_DEFAULT_BUF_SIZE, rte_socket_id()));
  if (port.pool_ == nullptr) {
    return Cannot(name, absl::StrFormat("cannot allocate %u packet buffers: %s (give EAL more memory "
                                        "with -m)", mbufs, rte_strerror(rte_errno)));
  }
  info.mbufs = mbufs;
  for (uint16_t q = 0; q < queues; ++q) {
    rc = rte_eth_rx_queue_setup(port_id, q, kKernelRxDescriptors, rte_socket_id(), nullptr,
                                port.pool_.get());
    if (rc != 0) return port_error("rte_eth_rx_queue_setup", rc);
    rc = rte_eth_tx_queue_setup(port_id, q, kKernelTxDescriptors, rte_socket_id(), nullptr);
    if (rc != 0) return port_error("rte_eth_tx_queue_setup", rc);
  }
  rc = rte_eth_dev_set_mtu(port_id, static_cast<uint16_t>(info.mtu));  // the kernel interface's MTU
  if (rc != 0) return port_error("rte_eth_dev_set_mtu", rc);

  absl::StatusOr<Rtnetlink> nl = Rtnetlink::Open();
  if (!nl.ok()) return Cannot(name, std::string(nl.status().message()));
  // Before the link comes up, or the kernel makes a link-local address of
  // its own choosing (kernel_port.h: maglb must know every one).
  const std::string ipv6_conf = "net/ipv6/conf/" + name + "/";
  const bool has_ipv6 = std::ifstream("/proc/sys/" + ipv6_conf + "accept_ra").good();
  if (lb.ipv6 && !has_ipv6) {
    return Cannot(name, absl::StrFormat("[lb] ipv6 is set, but the kernel has IPv6 off for it (no "
                                        "/proc/sys/%s)", ipv6_conf));
  }
  if (has_ipv6) {
    absl::Status s = nl->DisableIpv6AddressGeneration(info.ifindex);
    // Router advertisements never reach it (maglb passes up no multicast
    // but neighbour advertisements); refuse them anyway, so that no address
    // or route appears that maglb does not know of.
    if (s.ok()) s = WriteSysctl(ipv6_conf + "accept_ra", "0");
    if (s.ok()) s = WriteSysctl(ipv6_conf + "autoconf", "0");
    if (!lb.ipv6 && s.ok()) s = WriteSysctl(ipv6_conf + "disable_ipv6", "1");
    if (!s.ok()) return Cannot(name, std::string(s.message()));
  }

  rc = rte_eth_dev_start(port_id);  // the kernel interface comes up
  if (rc != 0) return port_error("rte_eth_dev_start", rc);
  port.started_ = true;

  std::vector<std::pair<IpAddress, uint8_t>> addresses;
  if (lb.ipv4) addresses.emplace_back(*lb.ipv4, kernel.ipv4_prefix_len);
  if (lb.ipv6) {
    addresses.emplace_back(*lb.ipv6, kernel.ipv6_prefix_len);
    addresses.emplace_back(LinkLocalOf(mac), 64);
  }
  for (const auto& [address, prefix_len] : addresses) {
    absl::Status s = nl->AddAddress(info.ifindex, address, prefix_len);
    if (!s.ok()) return Cannot(name, std::string(s.message()));
    info.addresses.push_back(absl::StrFormat("%s/%u", address.ToString(), prefix_len));
  }
  return port;
}

void KernelPort::Close() {
  if (started_) rte_eth_dev_stop(info_.port_id);
  started_ = false;
  if (plugged_) {
    // Closes the port and the tap's descriptors: the interface goes with them.
    rte_eth_dev_close(info_.port_id);
    rte_eal_hotplug_remove("vdev", info_.device.c_str());
  }
  plugged_ = false;
  pool_.reset();  // after the close: the tap's queues held its buffers
}

std::string KernelPort::Describe() const {
  return absl::StrFormat("kernel interface %s: port %u %s, mac %s, mtu %u, %u queue pair%s, %u packet buffers, "
                         "addresses %s%s%s",
                         info_.interface, info_.port_id, info_.device, info_.mac.ToString(), info_.mtu,
                         info_.num_queues, info_.num_queues == 1 ? "" : "s", info_.mbufs,
                         info_.addresses.empty() ? "-" : absl::StrJoin(info_.addresses, " "),
                         info_.note.empty() ? "" : "; ", info_.note);
}

}  // namespace maglb
