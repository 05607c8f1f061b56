#include "dataplane/port.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_memory.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "dataplane/worker_loop.h"
#include "maglb/deploy_check.h"
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
  if (queues > 1 && driver == "net_pcap") {
    // One queue per rx_pcap file or rx_iface interface: which flows a queue
    // carries is what its source holds (bench/fullpath.py splits its capture
    // by flow). With one queue the PMD would read the first source only.
    *distribution = "one source per queue";
    return queues;
  }
  *distribution = "single queue";
  return 1;
}

uint32_t PortDataRoom(uint32_t mtu) {
  return PacketBufferDataRoom(mtu > 0 ? mtu : RTE_ETHER_MTU, RTE_PKTMBUF_HEADROOM,
                              RTE_MBUF_DEFAULT_BUF_SIZE);
}

absl::StatusOr<PortPlan> PlanPort(uint16_t port_id, uint16_t workers, uint32_t mtu,
                                  const PortSizingConfig& sizing) {
  if (!rte_eth_dev_is_valid_port(port_id)) {
    return absl::NotFoundError(absl::StrFormat("no DPDK port %u", port_id));
  }
  rte_eth_dev_info dev{};
  int rc = rte_eth_dev_info_get(port_id, &dev);
  if (rc != 0) return PortError(port_id, "rte_eth_dev_info_get", rc);
  PortPlan plan;
  plan.port_id = port_id;
  plan.driver = dev.driver_name != nullptr ? dev.driver_name : "?";
  char name[RTE_ETH_NAME_MAX_LEN] = {};
  rte_eth_dev_get_name_by_port(port_id, name);
  plan.label = absl::StrFormat("port %u %s (%s)", port_id, name, plan.driver);
  plan.queues = PlannedQueues(dev, plan.driver, workers, &plan.distribution);
  plan.rx_wanted = static_cast<uint16_t>(WantedDescriptors(sizing.rx_descriptors, dev.default_rxportconf.ring_size));
  plan.tx_wanted = static_cast<uint16_t>(WantedDescriptors(sizing.tx_descriptors, dev.default_txportconf.ring_size));
  plan.rx_descriptors = plan.rx_wanted;
  plan.tx_descriptors = plan.tx_wanted;
  // Within the device's limits (min, max, alignment), as DPDK adjusts them;
  // the pool is sized for what the port really takes.
  rc = rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &plan.rx_descriptors, &plan.tx_descriptors);
  if (rc != 0) return PortError(port_id, "rte_eth_dev_adjust_nb_rx_tx_desc", rc);
  plan.data_room = PortDataRoom(mtu);
  const int socket = rte_eth_dev_socket_id(port_id);
  plan.socket = socket < 0 ? 0 : socket;
  return plan;
}

absl::StatusOr<PortPool> PlanPortPool(const PortPlan& port, const std::vector<PortPlan>& all, uint32_t workers,
                                      const PortSizingConfig& sizing, std::string_view source) {
  PortPool pool;
  PoolDemand& d = pool.demand;
  d.port = absl::StrFormat("port %u", port.port_id);
  d.rx_queues = port.queues;
  d.rx_descriptors = port.rx_descriptors;
  for (const PortPlan& p : all) d.tx_descriptors_total += uint64_t{p.queues} * p.tx_descriptors;
  d.workers = workers;
  d.held_per_worker = kFramesHeldPerWorker;
  d.control_lcores = 1;
  d.cache_size = kMbufCacheSize;
  // rte_ring_create(count) holds count - 1.
  d.ring_slots = 2 * (kControlRingSize - 1);
  if (workers > 1 && !all.empty() && all.front().distribution == "rss") {
    d.ring_slots += uint64_t{workers} * (kSteerRingSize - 1);
  }
  absl::StatusOr<PoolPlan> plan = PlanPool(d, sizing, source);
  if (!plan.ok()) return plan.status();
  pool.plan = *plan;
  return pool;
}

std::string MbufsOrigin(const PortSizingConfig& sizing, std::string_view source) {
  if (sizing.mbufs == 0) return "";
  return absl::StrFormat("%s:%d: lb.mbufs %u", source, sizing.mbufs_line, sizing.mbufs);
}

uint64_t PoolPageSize(int socket) {
  const uint64_t system_page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (rte_eal_has_hugepages() == 0) return system_page;
  struct Walk {
    int socket;
    uint64_t smallest;
  } walk{socket, 0};
  rte_memseg_list_walk(
      [](const rte_memseg_list* msl, void* arg) {
        auto* w = static_cast<Walk*>(arg);
        if (msl->socket_id == w->socket && msl->page_sz != 0 && (w->smallest == 0 || msl->page_sz < w->smallest)) {
          w->smallest = msl->page_sz;
        }
        return 0;
      },
      &walk);
  return walk.smallest != 0 ? walk.smallest : system_page;
}

uint64_t PoolBytes(uint32_t n, uint32_t data_room, uint64_t page_size) {
  rte_mempool_objsz sz{};
  const uint64_t obj = rte_mempool_calc_obj_size(sizeof(rte_mbuf) + data_room, 0, &sz);
  // As rte_mempool_op_calc_mem_size_helper lays them out: no object crosses
  // a page (a pool's buffers must each be IOVA-contiguous), so a page holds
  // page / obj of them, and an object larger than a page takes whole pages.
  // With 2 MiB hugepages that wastes nothing; on 4 KiB pages (--no-huge) a
  // 2.4 KB buffer takes a page of its own.
  uint64_t objects = uint64_t{n} * obj;
  if (page_size != 0) {
    const uint64_t per_page = page_size / obj;
    objects = per_page > 0 ? (uint64_t{n} + per_page - 1) / per_page * page_size
                           : uint64_t{n} * ((obj + page_size - 1) / page_size * page_size);
  }
  const ssize_t ring = rte_ring_get_memsize(rte_align32pow2(n + 1));
  return objects + static_cast<uint64_t>(std::max<ssize_t>(ring, 0)) + sizeof(rte_mempool) +
         uint64_t{RTE_MAX_LCORE} * sizeof(rte_mempool_cache) + sizeof(rte_pktmbuf_pool_private);
}

namespace {

// The page sizes of the memory a pool's objects are in (its memory chunks'
// memseg lists): "2 MiB hugepages" where EAL has them, else the system's
// pages. Several sizes are listed smallest first.
std::string PoolPages(rte_mempool* pool) {
  std::vector<uint64_t> sizes;
  rte_mempool_mem_iter(
      pool,
      [](rte_mempool*, void* opaque, rte_mempool_memhdr* memhdr, unsigned) {
        const rte_memseg_list* msl = rte_mem_virt2memseg_list(memhdr->addr);
        auto* out = static_cast<std::vector<uint64_t>*>(opaque);
        const uint64_t size = msl != nullptr ? msl->page_sz : 0;
        if (std::find(out->begin(), out->end(), size) == out->end()) out->push_back(size);
      },
      &sizes);
  std::sort(sizes.begin(), sizes.end());
  std::vector<std::string> names;
  for (uint64_t size : sizes) {
    if (size == 0) {
      names.push_back("memory outside DPDK's segments");
    } else if (rte_eal_has_hugepages() != 0 && size > static_cast<uint64_t>(sysconf(_SC_PAGESIZE))) {
      names.push_back(absl::StrFormat("%s hugepages", HumanBytes(size)));
    } else {
      names.push_back(absl::StrFormat("%s pages (no hugepages: --no-huge)", HumanBytes(size)));
    }
  }
  return names.empty() ? "no memory" : absl::StrJoin(names, " and ");
}

}  // namespace

absl::StatusOr<Port> SetUpPort(const PortPlan& plan, const PortPool& pool, uint32_t mtu,
                               const std::string& mbufs_origin, bool toward_backends) {
  const uint16_t port_id = plan.port_id;
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
  const uint16_t queues = plan.queues;
  info.distribution = plan.distribution;
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
  info.rx_descriptors = plan.rx_descriptors;
  info.tx_descriptors = plan.tx_descriptors;

  std::string pool_name = absl::StrFormat("maglb_mbufs_%u", port_id);
  // One buffer holds a whole frame of the MTU (the packet path takes single
  // segments only): 2 KB buffers would drop every fragment over ~2 KB.
  const uint32_t data_room = plan.data_room;
  if (data_room > UINT16_MAX) {
    return absl::InvalidArgumentError(
        absl::StrFormat("port %u: lb.mtu %u needs %u-byte packet buffers, more than DPDK's %u",
                        port_id, mtu, data_room, UINT16_MAX));
  }
  const uint32_t mbufs = pool.plan.mbufs;
  port.pool_.reset(rte_pktmbuf_pool_create(pool_name.c_str(), mbufs, kMbufCacheSize, 0,
                                            static_cast<uint16_t>(data_room), plan.socket));
  info.pool = port.pool_.get();
  if (info.pool == nullptr) {
    const bool huge = rte_eal_has_hugepages() != 0;
    return absl::ResourceExhaustedError(absl::StrFormat(
        "port %u: cannot allocate %u packet buffers of %u bytes (%s%s%s, on NUMA socket %d): %s; %s%s",
        port_id, mbufs, data_room, HumanBytes(PoolBytes(mbufs, data_room, PoolPageSize(plan.socket))),
        mbufs_origin.empty() ? ", computed: " : ", ", mbufs_origin.empty() ? pool.plan.Breakdown(pool.demand) : mbufs_origin,
        plan.socket, rte_strerror(rte_errno),
        huge ? "reserve more hugepages on that node" : "give EAL more memory with -m",
        mbufs_origin.empty() ? ", or lower [lb] rx_descriptors / tx_descriptors or the worker count"
                             : ", or lower lb.mbufs (0: computed)"));
  }
  info.max_mtu = MaxMtuForDataRoom(data_room, RTE_PKTMBUF_HEADROOM);
  info.mbufs = mbufs;
  info.pool_pages = PoolPages(info.pool);
  info.sizing = absl::StrFormat(
      "port %u: %u RX and %u TX descriptors per queue%s, %u packet buffers of %u bytes (%s) in %s: %s", port_id,
      plan.rx_descriptors, plan.tx_descriptors,
      plan.rx_descriptors != plan.rx_wanted || plan.tx_descriptors != plan.tx_wanted
          ? absl::StrFormat(" (asked %u and %u: the device's limits)", plan.rx_wanted, plan.tx_wanted)
          : std::string(),
      mbufs, data_room, HumanBytes(PoolBytes(mbufs, data_room, PoolPageSize(plan.socket))), info.pool_pages,
      pool.plan.configured
          ? absl::StrFormat("%s%s (computed: %s)", mbufs_origin,
                            pool.plan.below_computed ? ", BELOW the computed need: under load, frames waiting "
                                                       "in TX rings can leave RX without buffers"
                                                     : "",
                            pool.plan.Breakdown(pool.demand))
          : pool.plan.Breakdown(pool.demand));
  for (uint16_t q = 0; q < queues; ++q) {
    rc = rte_eth_rx_queue_setup(port_id, q, plan.rx_descriptors, plan.socket, nullptr, info.pool);
    if (rc != 0) return PortError(port_id, "rte_eth_rx_queue_setup", rc);
    rc = rte_eth_tx_queue_setup(port_id, q, plan.tx_descriptors, plan.socket, nullptr);
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
