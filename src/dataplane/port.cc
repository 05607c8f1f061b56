#include "dataplane/port.h"

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"

namespace maglb {

namespace {

absl::Status PortError(uint16_t port_id, const char* what, int rc) {
  return absl::InternalError(
      absl::StrFormat("port %u: %s failed: %s", port_id, what, std::strerror(rc < 0 ? -rc : rc)));
}

}  // namespace

absl::StatusOr<PortInfo> SetUpPort(uint16_t port_id, uint16_t workers, uint32_t mtu) {
  if (!rte_eth_dev_is_valid_port(port_id)) {
    return absl::NotFoundError(absl::StrFormat("no DPDK port %u", port_id));
  }
  PortInfo info;
  info.port_id = port_id;
  rte_eth_dev_info dev{};
  int rc = rte_eth_dev_info_get(port_id, &dev);
  if (rc != 0) return PortError(port_id, "rte_eth_dev_info_get", rc);
  info.driver = dev.driver_name != nullptr ? dev.driver_name : "?";
  char name[RTE_ETH_NAME_MAX_LEN] = {};
  rte_eth_dev_get_name_by_port(port_id, name);
  info.name = name;

  rte_eth_conf conf{};
  uint16_t max_queues = std::min(dev.max_rx_queues, dev.max_tx_queues);
  uint16_t queues = std::min<uint16_t>(workers, max_queues);
  uint64_t rss_hf = dev.flow_type_rss_offloads &
                    (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP);
  if (queues > 1 && rss_hf != 0) {
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_key = nullptr;  // the PMD's default key
    conf.rx_adv_conf.rss_conf.rss_hf = rss_hf;
    info.distribution = "rss";
  } else if (queues > 1 && info.driver == "net_af_packet") {
    // Its queues are AF_PACKET sockets in one PACKET_FANOUT_HASH group: the
    // kernel keeps each flow on one queue.
    info.distribution = "kernel fanout";
  } else {
    queues = 1;
    info.distribution = "single queue";
  }
  info.num_queues = queues;
  if (mtu > 0 && mtu >= dev.min_mtu && mtu <= dev.max_mtu) conf.rxmode.mtu = mtu;
  // The NIC verifies IPv4 header checksums where it can; the worker reads its
  // verdict from each mbuf (RTE_MBUF_F_RX_IP_CKSUM_*), and the core verifies
  // in software whatever the NIC left unknown (packet.h, Classify).
  if ((dev.rx_offload_capa & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM) != 0) {
    conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_IPV4_CKSUM;
  }

  rc = rte_eth_dev_configure(port_id, queues, queues, &conf);
  if (rc != 0) return PortError(port_id, "rte_eth_dev_configure", rc);
  uint16_t rx_desc = kRxDescriptors, tx_desc = kTxDescriptors;
  rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &rx_desc, &tx_desc);

  int socket = rte_eth_dev_socket_id(port_id);
  if (socket < 0) socket = 0;
  std::string pool_name = absl::StrFormat("maglb_mbufs_%u", port_id);
  info.pool = rte_pktmbuf_pool_create(pool_name.c_str(), kMbufsPerQueue * queues * 2 - 1,
                                      kMbufCacheSize, 0, RTE_MBUF_DEFAULT_BUF_SIZE, socket);
  if (info.pool == nullptr) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "port %u: cannot allocate %u packet buffers: %s (give EAL more memory with -m)", port_id,
        kMbufsPerQueue * queues * 2 - 1, rte_strerror(rte_errno)));
  }
  for (uint16_t q = 0; q < queues; ++q) {
    rc = rte_eth_rx_queue_setup(port_id, q, rx_desc, socket, nullptr, info.pool);
    if (rc != 0) return PortError(port_id, "rte_eth_rx_queue_setup", rc);
    rc = rte_eth_tx_queue_setup(port_id, q, tx_desc, socket, nullptr);
    if (rc != 0) return PortError(port_id, "rte_eth_tx_queue_setup", rc);
  }
  rc = rte_eth_dev_start(port_id);
  if (rc != 0) return PortError(port_id, "rte_eth_dev_start", rc);
  // Unicast to our MAC is enough for ARP/ND/VIP traffic, but L2 setups that
  // flood (bridges before learning) need promiscuous mode; some PMDs refuse.
  rte_eth_promiscuous_enable(port_id);
  rte_ether_addr mac{};
  rte_eth_macaddr_get(port_id, &mac);
  std::memcpy(info.mac.bytes.data(), mac.addr_bytes, 6);
  return info;
}

absl::Status SetPortMac(uint16_t port_id, const MacAddress& mac) {
  rte_ether_addr addr;
  std::memcpy(addr.addr_bytes, mac.bytes.data(), 6);
  int rc = rte_eth_dev_default_mac_addr_set(port_id, &addr);
  if (rc != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "port %u: cannot set its MAC to %s (%s); two-arm mode needs a port whose MAC can be set",
        port_id, mac.ToString(), std::strerror(rc < 0 ? -rc : rc)));
  }
  return absl::OkStatus();
}

void ShutDownPort(const PortInfo& port) {
  rte_eth_dev_stop(port.port_id);
  rte_eth_dev_close(port.port_id);
}

}  // namespace maglb
