#include "dataplane/port.h"

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "maglb/encap.h"
#include "maglb/packet_buffer.h"

namespace maglb {

namespace {

// The flows RSS spreads over queues, where the PMD hashes them.
constexpr uint64_t kRssTypes = RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP;

// Encapsulation writes the outer headers in front of the frame, in place.
static_assert(RTE_PKTMBUF_HEADROOM >= kMaxEncapPrepend, "mbuf headroom too small to encapsulate");

absl::Status PortError(uint16_t port_id, const char* what, int rc) {
  return absl::InternalError(
      absl::StrFormat("port %u: %s failed: %s", port_id, what, std::strerror(rc < 0 ? -rc : rc)));
}

// The RSS the started port applies, as the software hash needs it: key,
// hash types, RETA. Fails where the PMD cannot report them.
absl::StatusOr<RssConfig> ReadRss(uint16_t port_id) {
  rte_eth_dev_info dev{};
  int rc = rte_eth_dev_info_get(port_id, &dev);
  if (rc != 0) return PortError(port_id, "rte_eth_dev_info_get", rc);
  RssConfig rss;
  rss.key.resize(dev.hash_key_size != 0 ? dev.hash_key_size : 40);
  rte_eth_rss_conf conf{};
  conf.rss_key = rss.key.data();
  conf.rss_key_len = static_cast<uint8_t>(rss.key.size());
  rc = rte_eth_dev_rss_hash_conf_get(port_id, &conf);
  if (rc != 0) return PortError(port_id, "rte_eth_dev_rss_hash_conf_get", rc);
  rss.key.resize(conf.rss_key_len);
  const uint64_t hf = conf.rss_hf;
  // Fragments have their own type; the software hash does not tell them apart.
  rss.types.ipv4 = (hf & (RTE_ETH_RSS_IPV4 | RTE_ETH_RSS_FRAG_IPV4)) != 0;
  rss.types.ipv4_tcp = (hf & RTE_ETH_RSS_NONFRAG_IPV4_TCP) != 0;
  rss.types.ipv4_udp = (hf & RTE_ETH_RSS_NONFRAG_IPV4_UDP) != 0;
  rss.types.ipv6 = (hf & (RTE_ETH_RSS_IPV6 | RTE_ETH_RSS_FRAG_IPV6)) != 0;
  rss.types.ipv6_tcp = (hf & RTE_ETH_RSS_NONFRAG_IPV6_TCP) != 0;
  rss.types.ipv6_udp = (hf & RTE_ETH_RSS_NONFRAG_IPV6_UDP) != 0;
  if (dev.reta_size == 0) return absl::UnimplementedError(absl::StrFormat("port %u: no RETA", port_id));
  std::vector<rte_eth_rss_reta_entry64> groups((dev.reta_size + RTE_ETH_RETA_GROUP_SIZE - 1) /
                                               RTE_ETH_RETA_GROUP_SIZE);
  for (auto& g : groups) g.mask = ~uint64_t{0};
  rc = rte_eth_dev_rss_reta_query(port_id, groups.data(), dev.reta_size);
  if (rc != 0) return PortError(port_id, "rte_eth_dev_rss_reta_query", rc);
  rss.reta.resize(dev.reta_size);
  for (uint16_t i = 0; i < dev.reta_size; ++i) {
    rss.reta[i] = groups[i / RTE_ETH_RETA_GROUP_SIZE].reta[i % RTE_ETH_RETA_GROUP_SIZE];
  }
  return rss;
}

}  // namespace

uint16_t PlannedQueues(const rte_eth_dev_info& dev, const std::string& driver, uint16_t workers,
                       std::string* distribution) {
  const uint16_t max_queues = std::min(dev.max_rx_queues, dev.max_tx_queues);
  const uint16_t queues = std::min<uint16_t>(workers, max_queues);
  if (queues > 1 && (dev.flow_type_rss_offloads & kRssTypes) != 0) {
    *distribution = "rss";
    return queues;
  }
  if (queues > 1 && driver == "net_af_packet") {
    // Its queues are AF_PACKET sockets in one PACKET_FANOUT_HASH group: the
    // kernel keeps each flow on one queue.
    *distribution = "kernel fanout";
    return queues;
  }
  *distribution = "single queue";
  return 1;
}

uint32_t PortDataRoom(uint32_t mtu) {
  return PacketBufferDataRoom(mtu > 0 ? mtu : RTE_ETHER_MTU, RTE_PKTMBUF_HEADROOM,
                              RTE_MBUF_DEFAULT_BUF_SIZE);
}

absl::StatusOr<Port> SetUpPort(uint16_t port_id, uint16_t workers, uint32_t mtu, bool toward_backends) {
  if (!rte_eth_dev_is_valid_port(port_id)) {
    return absl::NotFoundError(absl::StrFormat("no DPDK port %u", port_id));
  }
  // Closed again (and its pool freed) by `port` on any failure below.
  Port port(port_id);
  PortInfo& info = port.info_;
  rte_eth_dev_info dev{};
  int rc = rte_eth_dev_info_get(port_id, &dev);
  if (rc != 0) return PortError(port_id, "rte_eth_dev_info_get", rc);
  info.driver = dev.driver_name != nullptr ? dev.driver_name : "?";
  char name[RTE_ETH_NAME_MAX_LEN] = {};
  rte_eth_dev_get_name_by_port(port_id, name);
  info.name = name;

  rte_eth_conf conf{};
  const uint16_t queues = PlannedQueues(dev, info.driver, workers, &info.distribution);
  if (info.distribution == "rss") {
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_key = nullptr;  // the PMD's default key
    conf.rx_adv_conf.rss_conf.rss_hf = dev.flow_type_rss_offloads & kRssTypes;
  }
  info.num_queues = queues;
  if (mtu > 0) {
    // A port that cannot take the configured MTU would truncate or drop the
    // frames the config promises to carry: refuse to start rather than lose
    // them silently.
    // As rte_eth_dev_configure judges it: the frame (mtu + the PMD's
    // overhead) must not pass max_rx_pktlen either.
    const uint32_t overhead = dev.max_mtu != UINT16_MAX && dev.max_rx_pktlen > dev.max_mtu
                                  ? dev.max_rx_pktlen - dev.max_mtu
                                  : RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
    const uint32_t max_mtu = std::min<uint32_t>(
        dev.max_mtu, dev.max_rx_pktlen > overhead ? dev.max_rx_pktlen - overhead : 0);
    if (mtu < dev.min_mtu || mtu > max_mtu) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "port %u %s (%s): lb.mtu %u is outside what the port accepts (%u..%u); lower mtu or use "
          "a port that takes larger frames (test mode: net_pcap, see README)",
          port_id, info.name, info.driver, mtu, dev.min_mtu, max_mtu));
    }
    conf.rxmode.mtu = mtu;
  }
  // Checksums and buffer recycling the NIC does for us where it can
  // (offloads.h): the worker reads the RX verdicts from each mbuf, marks the
  // frames whose outer checksum the NIC computes, and sends on a fast-free
  // queue only buffers of one pool with refcnt 1.
  info.offered = OfferedOffloads(dev);
  info.offloads = ChooseOffloads(dev, toward_backends);
  conf.rxmode.offloads |= RxOffloadBits(info.offloads);
  conf.txmode.offloads |= TxOffloadBits(info.offloads);

  rc = rte_eth_dev_configure(port_id, queues, queues, &conf);
  if (rc != 0) return PortError(port_id, "rte_eth_dev_configure", rc);
  uint16_t rx_desc = kRxDescriptors, tx_desc = kTxDescriptors;
  rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &rx_desc, &tx_desc);

  int socket = rte_eth_dev_socket_id(port_id);
  if (socket < 0) socket = 0;
  std::string pool_name = absl::StrFormat("maglb_mbufs_%u", port_id);
  // One buffer holds a whole frame of the MTU (the packet path takes single
  // segments only): 2 KB buffers would drop every fragment over ~2 KB.
  const uint32_t data_room = PortDataRoom(mtu);
  if (data_room > UINT16_MAX) {
    return absl::InvalidArgumentError(
        absl::StrFormat("port %u: lb.mtu %u needs %u-byte packet buffers, more than DPDK's %u",
                        port_id, mtu, data_room, UINT16_MAX));
  }
  port.pool_.reset(rte_pktmbuf_pool_create(pool_name.c_str(), PortPoolMbufs(queues),
                                            kMbufCacheSize, 0, static_cast<uint16_t>(data_room),
                                            socket));
  info.pool = port.pool_.get();
  if (info.pool == nullptr) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "port %u: cannot allocate %u packet buffers of %u bytes: %s (give EAL more memory with -m)",
        port_id, PortPoolMbufs(queues), data_room, rte_strerror(rte_errno)));
  }
  info.max_mtu = MaxMtuForDataRoom(data_room, RTE_PKTMBUF_HEADROOM);
  for (uint16_t q = 0; q < queues; ++q) {
    rc = rte_eth_rx_queue_setup(port_id, q, rx_desc, socket, nullptr, info.pool);
    if (rc != 0) return PortError(port_id, "rte_eth_rx_queue_setup", rc);
    rc = rte_eth_tx_queue_setup(port_id, q, tx_desc, socket, nullptr);
    if (rc != 0) return PortError(port_id, "rte_eth_tx_queue_setup", rc);
  }
  rc = rte_eth_dev_start(port_id);
  if (rc != 0) return PortError(port_id, "rte_eth_dev_start", rc);
  port.started_ = true;
  // Unicast to our MAC is enough for ARP/ND/VIP traffic, but L2 setups that
  // flood (bridges before learning) need promiscuous mode; some PMDs refuse.
  rte_eth_promiscuous_enable(port_id);
  if (info.distribution == "rss") {
    absl::StatusOr<RssConfig> rss = ReadRss(port_id);
    if (rss.ok()) {
      info.rss = *std::move(rss);
    } else {
      info.rss_note = std::string(rss.status().message());
    }
  }
  rte_ether_addr mac{};
  rte_eth_macaddr_get(port_id, &mac);
  std::memcpy(info.mac.bytes.data(), mac.addr_bytes, 6);
  return port;
}

absl::Status Port::SetMac(const MacAddress& mac) {
  const uint16_t port_id = info_.port_id;
  rte_ether_addr addr;
  std::memcpy(addr.addr_bytes, mac.bytes.data(), 6);
  // Already ours (net_pcap with phy_mac=1 on an interface given that MAC):
  // nothing to set, and such a PMD could not set it anyway.
  rte_ether_addr current{};
  if (rte_eth_macaddr_get(port_id, &current) == 0 && rte_is_same_ether_addr(&current, &addr)) {
    info_.mac = mac;
    return absl::OkStatus();
  }
  int rc = rte_eth_dev_default_mac_addr_set(port_id, &addr);
  if (rc != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "port %u: cannot set its MAC to %s (%s); two-arm mode needs a port whose MAC can be set",
        port_id, mac.ToString(), std::strerror(rc < 0 ? -rc : rc)));
  }
  info_.mac = mac;
  return absl::OkStatus();
}

void Port::Close() {
  if (started_) rte_eth_dev_stop(info_.port_id);
  if (owned_) rte_eth_dev_close(info_.port_id);
  started_ = owned_ = false;
  // After the close: the port's queues held buffers of the pool.
  pool_.reset();
  info_.pool = nullptr;
}

}  // namespace maglb
