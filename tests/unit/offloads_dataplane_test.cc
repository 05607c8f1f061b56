// The NIC offloads on the DPDK side (dataplane/offloads.h).
//
// Without the EAL: which offloads a port gets from its capabilities
// (ChooseOffloads), the RX checksum verdict read from an mbuf's flags
// (RxIpChecksum), and the marks a TX frame gets (RequestTxOffload).
//
// With the EAL (no hugepages), the real worker loop (WorkerMain) two-arm on
// two net_ring ports, each with a pool of its own: what it hands the
// backend port's PMD. With the outer IPv4 checksum offloaded, a GRE frame to
// an IPv4 backend, and each fragment, carries RTE_MBUF_F_TX_IPV4 |
// RTE_MBUF_F_TX_IP_CKSUM, l2_len 14 and l3_len 20, checksum field 0; DPDK's
// rte_ipv4_cksum at l2_len (the NIC's job) then gives the frame the software
// path builds, byte for byte. IPv6 outer and L2 DSR frames are not marked.
// With MBUF_FAST_FREE, every frame on a TX queue is of the front port's pool
// with refcnt 1: a reply to a frame received on the backend port (of the
// backend port's pool) leaves as a copy. net_ring itself ignores all of
// this: what is checked is what the loop gives the PMD.
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "dataplane/offloads.h"
#include "dataplane/snapshot.h"
#include "dataplane/worker_loop.h"
#include "gtest/gtest.h"
#include "maglb/lb_state.h"
#include "maglb/pipeline.h"
#include "packet_buf.h"
#include "packet_builder.h"
#include "test_eal.h"

namespace maglb {
namespace {

using testing::Bytes;
using testing::Ip;
using testing::Ip4;
using testing::Mac;

// ----------------------------------------------------------- without the EAL

rte_eth_dev_info Capa(uint64_t rx, uint64_t tx) {
  rte_eth_dev_info dev{};
  dev.rx_offload_capa = rx;
  dev.tx_offload_capa = tx;
  return dev;
}

TEST(ChooseOffloads, EnablesWhatThePortOffersAndTheTxChecksumOnlyTowardBackends) {
  const uint64_t all_rx = RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM | RTE_ETH_RX_OFFLOAD_TCP_CKSUM;
  const uint64_t all_tx = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE |
                          RTE_ETH_TX_OFFLOAD_MULTI_SEGS | RTE_ETH_TX_OFFLOAD_TCP_TSO;
  // A NIC with everything (mlx5, ice, i40e): all three toward backends; the
  // TX checksum off on a front port, where no encapsulated frame leaves.
  EXPECT_EQ(ChooseOffloads(Capa(all_rx, all_tx), true), (PortOffloads{true, true, true}));
  EXPECT_EQ(ChooseOffloads(Capa(all_rx, all_tx), false), (PortOffloads{true, false, true}));
  // net_null, net_pcap: nothing.
  EXPECT_EQ(ChooseOffloads(Capa(0, 0), true), PortOffloads{});
  // net_memif, net_ring, net_af_packet: others than ours only.
  EXPECT_EQ(ChooseOffloads(Capa(RTE_ETH_RX_OFFLOAD_VLAN_STRIP | RTE_ETH_RX_OFFLOAD_SCATTER,
                                RTE_ETH_TX_OFFLOAD_MULTI_SEGS | RTE_ETH_TX_OFFLOAD_VLAN_INSERT),
                           true),
            PortOffloads{});
  // net_tap: the checksums, no fast free.
  const rte_eth_dev_info tap = Capa(all_rx | RTE_ETH_RX_OFFLOAD_SCATTER,
                                    RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM |
                                        RTE_ETH_TX_OFFLOAD_TCP_CKSUM | RTE_ETH_TX_OFFLOAD_MULTI_SEGS);
  EXPECT_EQ(ChooseOffloads(tap, true), (PortOffloads{true, true, false}));
  // Each one alone.
  EXPECT_EQ(ChooseOffloads(Capa(RTE_ETH_RX_OFFLOAD_IPV4_CKSUM, 0), true), (PortOffloads{true, false, false}));
  EXPECT_EQ(ChooseOffloads(Capa(0, RTE_ETH_TX_OFFLOAD_IPV4_CKSUM), true), (PortOffloads{false, true, false}));
  EXPECT_EQ(ChooseOffloads(Capa(0, RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE), false), (PortOffloads{false, false, true}));
  // Offered is what the capabilities say, whatever the port's role.
  EXPECT_EQ(OfferedOffloads(Capa(all_rx, all_tx)), (PortOffloads{true, true, true}));
  // And the bits for rte_eth_conf are exactly those.
  const PortOffloads on{true, true, true};
  EXPECT_EQ(RxOffloadBits(on), RTE_ETH_RX_OFFLOAD_IPV4_CKSUM);
  EXPECT_EQ(TxOffloadBits(on), RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE);
  EXPECT_EQ(RxOffloadBits(PortOffloads{}), 0u);
  EXPECT_EQ(TxOffloadBits(PortOffloads{}), 0u);
}

TEST(ChooseOffloads, TheLogSaysWhatIsOnWhatIsMissingAndWhatIsUnused) {
  EXPECT_EQ(DescribeOffloads({}, {}),
            "offloads none (the port offers none of rx_ipv4_cksum tx_ipv4_cksum mbuf_fast_free; checksums in "
            "software)");
  EXPECT_EQ(DescribeOffloads({true, true, false}, {true, true, false}),
            "offloads rx_ipv4_cksum tx_ipv4_cksum; not offered: mbuf_fast_free");
  EXPECT_EQ(DescribeOffloads({true, false, true}, {true, true, true}),
            "offloads rx_ipv4_cksum mbuf_fast_free; tx_ipv4_cksum offered, unused: no encapsulated frame leaves "
            "by this port");
  EXPECT_EQ(DescribeOffloads({true, true, true}, {true, true, true}),
            "offloads rx_ipv4_cksum tx_ipv4_cksum mbuf_fast_free");
}

TEST(RxIpChecksum, MapsTheNicsVerdictAndDistrustsItForTunnels) {
  const uint32_t plain = RTE_PTYPE_L2_ETHER | RTE_PTYPE_L3_IPV4 | RTE_PTYPE_L4_TCP;
  EXPECT_EQ(RxIpChecksum(RTE_MBUF_F_RX_IP_CKSUM_GOOD, plain), RxChecksum::kGood);
  EXPECT_EQ(RxIpChecksum(RTE_MBUF_F_RX_IP_CKSUM_NONE, plain), RxChecksum::kGood);
  EXPECT_EQ(RxIpChecksum(RTE_MBUF_F_RX_IP_CKSUM_BAD, plain), RxChecksum::kBad);
  EXPECT_EQ(RxIpChecksum(RTE_MBUF_F_RX_IP_CKSUM_UNKNOWN, plain), RxChecksum::kUnknown);
  EXPECT_EQ(RxIpChecksum(0, 0), RxChecksum::kUnknown);  // a PMD that says nothing
  // Other flags do not change it.
  EXPECT_EQ(RxIpChecksum(RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_RSS_HASH | RTE_MBUF_F_RX_L4_CKSUM_BAD, plain),
            RxChecksum::kGood);
  // A frame the NIC parsed as a tunnel (GRE, IPIP, VXLAN to a VIP): its
  // IP_CKSUM flags are about the inner header, not the one Classify checks.
  for (uint32_t tunnel : {RTE_PTYPE_TUNNEL_GRE, RTE_PTYPE_TUNNEL_IP, RTE_PTYPE_TUNNEL_VXLAN}) {
    const uint32_t t = RTE_PTYPE_L2_ETHER | RTE_PTYPE_L3_IPV4 | tunnel | RTE_PTYPE_INNER_L3_IPV4;
    EXPECT_EQ(RxIpChecksum(RTE_MBUF_F_RX_IP_CKSUM_GOOD, t), RxChecksum::kUnknown) << tunnel;
    EXPECT_EQ(RxIpChecksum(RTE_MBUF_F_RX_IP_CKSUM_BAD, t), RxChecksum::kUnknown) << tunnel;
    EXPECT_EQ(RxIpChecksum(RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_OUTER_IP_CKSUM_BAD, t), RxChecksum::kBad)
        << tunnel;
  }
}

TEST(RequestTxOffload, MarksTheOuterHeaderOnlyWhenAsked) {
  rte_mbuf m{};
  m.ol_flags = RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_RSS_HASH;  // as received
  m.tx_offload = ~uint64_t{0};  // whatever the buffer's last use left
  RequestTxOffload(&m, 0);
  EXPECT_EQ(m.ol_flags, RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_RSS_HASH);
  EXPECT_EQ(m.tx_offload, ~uint64_t{0});
  RequestTxOffload(&m, kTxOffloadOuterIpv4Checksum);
  EXPECT_EQ(m.ol_flags & (RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM), RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM);
  // No tunnel, L4 or segmentation request: only the outer IPv4 header.
  EXPECT_EQ(m.ol_flags & (RTE_MBUF_F_TX_TUNNEL_MASK | RTE_MBUF_F_TX_L4_MASK | RTE_MBUF_F_TX_TCP_SEG |
                          RTE_MBUF_F_TX_OUTER_IP_CKSUM | RTE_MBUF_F_TX_IPV6),
            0u);
  EXPECT_EQ(m.l2_len, 14u);
  EXPECT_EQ(m.l3_len, 20u);
  EXPECT_EQ(m.l4_len, 0u);
  EXPECT_EQ(m.outer_l2_len, 0u);
  EXPECT_EQ(m.outer_l3_len, 0u);
  EXPECT_EQ(m.tso_segsz, 0u);
}

// ------------------------------------------------------------- the real loop

const MacAddress kPortMac = Mac("02:00:00:00:00:01");
const MacAddress kGatewayMac = Mac("02:00:00:00:00:fe");
const MacAddress kBackendHostMac = Mac("02:00:00:00:15:01");

Config LoopConfig() {
  Config c;
  c.source = "offloads_dataplane_test.toml";
  c.lb.ipv4 = Ip("192.0.2.10");
  c.lb.ipv6 = Ip("2001:db8::10");
  c.lb.gateway_v4 = Ip("192.0.2.1");
  c.lb.gateway_v6 = Ip("2001:db8::1");
  c.lb.mtu = 1500;
  c.lb.encap_source_v4_flow_bits = 8;
  c.neighbors.push_back({Ip("192.0.2.1"), kGatewayMac, 0});
  c.neighbors.push_back({Ip("2001:db8::1"), kGatewayMac, 0});
  auto vip = [](const std::string& name, const std::string& addr, Forwarding fwd, const std::string& backend) {
    VipConfig v;
    v.name = name;
    v.address = Ip(addr);
    v.protocol = Protocol::kTcp;
    v.port = 80;
    v.forwarding = fwd;
    v.table_size = 251;
    v.backends.push_back({name + "_b", Ip(backend), 1, 0});
    return v;
  };
  c.vips.push_back(vip("gre4", "198.51.100.80", Forwarding::kGre, "203.0.113.1"));
  c.vips.push_back(vip("gre6", "198.51.100.81", Forwarding::kGre, "2001:db8:5::1"));
  c.vips.push_back(vip("dsr", "198.51.100.90", Forwarding::kL2Dsr, "192.0.2.201"));
  c.neighbors.push_back({Ip("192.0.2.201"), kBackendHostMac, 0});
  return c;
}

Bytes Tcp4(const std::string& client, uint16_t sport, const std::string& vip, uint8_t flags, size_t payload = 0,
           bool df = true) {
  Ip4 h;
  h.src = Ip(client);
  h.dst = Ip(vip);
  h.df = df;
  return testing::Frame4(h, testing::Tcp(sport, 80, flags, payload));
}

// The backend segment's host asking for the LB's address (a broadcast ARP request).
Bytes BackendHostArpRequest() {
  return testing::Frame({.dst = Mac("ff:ff:ff:ff:ff:ff"), .src = kBackendHostMac}, 0x0806,
                        testing::Arp(1, kBackendHostMac, Ip("192.0.2.201"), MacAddress{}, Ip("192.0.2.10")));
}

// A frame as the PMD got it from the loop: its bytes and the mbuf's marks.
struct TxFrame {
  Bytes bytes;
  uint64_t ol_flags = 0;
  uint16_t l2_len = 0, l3_len = 0;
  const rte_mempool* pool = nullptr;
  uint16_t refcnt = 0;
  bool got = false;
};

class OffloadLoopTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { eal_ok_ = testing::StartTestEal("offloads_test", 256, "(0-1)@(0-1)"); }

  void SetUp() override {
    ASSERT_TRUE(eal_ok_) << "rte_eal_init failed";
    ASSERT_GE(rte_lcore_count(), 2u);
    static int instance = 0;
    const std::string tag = absl::StrCat(instance++);
    for (int p = 0; p < 2; ++p) {
      const std::string n = absl::StrCat("ol", tag, "_", p);
      rx_[p] = rte_ring_create((n + "rx").c_str(), 256, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
      tx_[p] = rte_ring_create((n + "tx").c_str(), 256, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
      ASSERT_NE(rx_[p], nullptr);
      ASSERT_NE(tx_[p], nullptr);
      pool_[p] = rte_pktmbuf_pool_create((n + "pool").c_str(), 1023, 0, 0, 4096, SOCKET_ID_ANY);
      ASSERT_NE(pool_[p], nullptr);
      const int port = rte_eth_from_rings(("net_ring_" + n).c_str(), &rx_[p], 1, &tx_[p], 1, SOCKET_ID_ANY);
      ASSERT_GE(port, 0);
      port_[p] = static_cast<uint16_t>(port);
      rte_eth_conf conf{};
      ASSERT_EQ(rte_eth_dev_configure(port_[p], 1, 1, &conf), 0);
      ASSERT_EQ(rte_eth_rx_queue_setup(port_[p], 0, 256, SOCKET_ID_ANY, nullptr, pool_[p]), 0);
      ASSERT_EQ(rte_eth_tx_queue_setup(port_[p], 0, 256, SOCKET_ID_ANY, nullptr), 0);
      ASSERT_EQ(rte_eth_dev_start(port_[p]), 0);
    }
    to_control_ = rte_ring_create(("ol" + tag + "ctl").c_str(), 64, SOCKET_ID_ANY, RING_F_SC_DEQ);
    ASSERT_NE(to_control_, nullptr);
    LbStateOptions opts;
    opts.port_mac = kPortMac;
    absl::StatusOr<std::unique_ptr<const LbState>> s = BuildLbState(LoopConfig(), nullptr, opts);
    ASSERT_TRUE(s.ok()) << s.status();
    state_ = s->get();
    absl::StatusOr<std::unique_ptr<SnapshotPublisher>> publisher = SnapshotPublisher::Create(1);
    ASSERT_TRUE(publisher.ok());
    publisher_ = *std::move(publisher);
    publisher_->Publish(*std::move(s));
  }

  void TearDown() override {
    Stop();
    for (int p = 0; p < 2; ++p) {
      if (port_[p] != UINT16_MAX) {
        rte_eth_dev_stop(port_[p]);
        rte_eth_dev_close(port_[p]);
      }
      for (rte_ring* r : {rx_[p], tx_[p]}) {
        void* m;
        while (r != nullptr && rte_ring_dequeue(r, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
        rte_ring_free(r);
      }
    }
    rte_ring_free(to_control_);
    publisher_.reset();
    for (rte_mempool* p : pool_) rte_mempool_free(p);
  }

  // Starts WorkerMain on the worker lcore, two-arm: port 0 front, port 1
  // toward backends, with these offloads.
  void Launch(bool tx_checksum, bool fast_free) {
    ctx_ = WorkerContext{};
    ctx_.index = 0;
    ctx_.lcore = rte_get_next_lcore(-1, 1, 0);
    ctx_.port_id = port_[0];
    ctx_.backend_port_id = port_[1];
    ctx_.queue = 0;
    ctx_.worker = &worker_;
    ctx_.counters = &counters_;
    ctx_.publisher = publisher_.get();
    ctx_.pool = pool_[0];
    ctx_.backend_tx_ipv4_checksum = tx_checksum;
    ctx_.front_fast_free = fast_free;
    ctx_.backend_fast_free = fast_free;
    ctx_.to_control = to_control_;
    ctx_.stop = &stop_;
    ctx_.idle_sleep_us = 200;  // this thread and the worker share two CPUs
    stop_ = false;
    ASSERT_EQ(rte_eal_remote_launch(WorkerMain, &ctx_, ctx_.lcore), 0);
    running_ = true;
  }
  void Stop() {
    if (!running_) return;
    stop_ = true;
    rte_eal_mp_wait_lcore();
    running_ = false;
  }

  // Puts `frame` on port `p`'s RX ring, in a buffer of that port's pool.
  void Receive(int p, const Bytes& frame) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool_[p]);
    ASSERT_NE(m, nullptr);
    std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size())), frame.data(), frame.size());
    ASSERT_EQ(rte_ring_enqueue(rx_[p], m), 0);
  }
  // The next frame port `p` was given to send, waiting up to 20 s.
  TxFrame Sent(int p) {
    TxFrame f;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    void* v = nullptr;
    while (rte_ring_dequeue(tx_[p], &v) != 0) {
      if (std::chrono::steady_clock::now() > deadline) return f;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    rte_mbuf* m = static_cast<rte_mbuf*>(v);
    const uint8_t* d = rte_pktmbuf_mtod(m, const uint8_t*);
    f.bytes.assign(d, d + rte_pktmbuf_data_len(m));
    f.ol_flags = m->ol_flags;
    f.l2_len = m->l2_len;
    f.l3_len = m->l3_len;
    f.pool = m->pool;
    f.refcnt = rte_mbuf_refcnt_read(m);
    f.got = true;
    rte_pktmbuf_free(m);
    return f;
  }

  // What the software path sends for `in` (a worker of its own, computing
  // every checksum): one frame, or the fragments.
  std::vector<Bytes> Reference(const Bytes& in) {
    testing::PacketBuf b(in);
    reference_.ProcessPacket(b.ref, *state_, NowNs());
    if (b.ref.action == PacketAction::kExtra) {
      std::vector<Bytes> out;
      for (uint16_t i = 0; i < b.ref.extra_count; ++i) {
        const ExtraFrame& e = reference_.extra_frames()[b.ref.extra_first + i];
        out.emplace_back(e.data, e.data + e.len);
      }
      return out;
    }
    return {b.Out()};
  }

  // The NIC's part for a frame marked for it: rte_ipv4_cksum at l2_len.
  static Bytes NicJob(const TxFrame& f) {
    Bytes b = f.bytes;
    EXPECT_EQ(f.ol_flags & (RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM), RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM);
    EXPECT_EQ(f.l2_len, 14);
    EXPECT_EQ(f.l3_len, 20);
    if (b.size() < size_t{f.l2_len} + sizeof(rte_ipv4_hdr)) {
      ADD_FAILURE() << "frame too short for its l2_len";
      return b;
    }
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(b.data() + f.l2_len);
    EXPECT_EQ(ip->hdr_checksum, 0) << "the field the NIC fills is left 0";
    EXPECT_EQ(rte_ipv4_hdr_len(ip), f.l3_len);
    ip->hdr_checksum = rte_ipv4_cksum(ip);
    return b;
  }
  static bool Marked(const TxFrame& f) { return (f.ol_flags & (RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_IPV4)) != 0; }

  static ConntrackConfig Ct() {
    ConntrackConfig c;
    c.capacity = 1 << 12;
    return c;
  }

  static bool eal_ok_;
  uint16_t port_[2] = {UINT16_MAX, UINT16_MAX};
  rte_ring* rx_[2] = {};
  rte_ring* tx_[2] = {};
  rte_mempool* pool_[2] = {};
  rte_ring* to_control_ = nullptr;
  std::unique_ptr<SnapshotPublisher> publisher_;
  const LbState* state_ = nullptr;
  Worker worker_{Ct(), ConntrackKey::Fixed(1)};
  Worker reference_{Ct(), ConntrackKey::Fixed(1)};
  LoopCounters counters_;
  WorkerContext ctx_;
  std::atomic<bool> stop_{false};
  bool running_ = false;
};
bool OffloadLoopTest::eal_ok_ = false;

TEST_F(OffloadLoopTest, MarkedFramesBecomeTheSoftwareFramesOnceTheNicHasSummedThem) {
  Launch(/*tx_checksum=*/true, /*fast_free=*/true);
  // GRE to an IPv4 backend, new flows and a tracked one.
  for (int i = 0; i < 8; ++i) {
    const Bytes in = Tcp4(absl::StrCat("10.0.0.", i + 1), static_cast<uint16_t>(7000 + i), "198.51.100.80", 0x02);
    Receive(0, in);
    const TxFrame f = Sent(1);
    ASSERT_TRUE(f.got) << "client " << i;
    EXPECT_EQ(NicJob(f), Reference(in).at(0)) << "client " << i;
    EXPECT_EQ(f.pool, pool_[0]);
    EXPECT_EQ(f.refcnt, 1);
  }
  // IPv6 outer and L2 DSR: nothing for the NIC, the software frame as is.
  for (const char* vip : {"198.51.100.81", "198.51.100.90"}) {
    const Bytes in = Tcp4("10.0.1.1", 7100, vip, 0x02);
    Receive(0, in);
    const TxFrame f = Sent(1);
    ASSERT_TRUE(f.got) << vip;
    EXPECT_FALSE(Marked(f)) << vip;
    EXPECT_EQ(f.bytes, Reference(in).at(0)) << vip;
  }
  // Fragments (DF clear, over the MTU): each one marked, in the worker's pool.
  const Bytes big = Tcp4("10.0.2.1", 7200, "198.51.100.80", 0x10, 3000, /*df=*/false);
  Receive(0, big);
  const std::vector<Bytes> fragments = Reference(big);
  ASSERT_EQ(fragments.size(), 3u);
  for (size_t i = 0; i < fragments.size(); ++i) {
    const TxFrame f = Sent(1);
    ASSERT_TRUE(f.got) << "fragment " << i;
    EXPECT_EQ(NicJob(f), fragments[i]) << "fragment " << i;
    EXPECT_EQ(f.pool, pool_[0]);
    EXPECT_EQ(f.refcnt, 1);
  }
  EXPECT_EQ(counters_.extra_alloc_fail.value(), 0u);
}

TEST_F(OffloadLoopTest, FastFreeQueuesGetOnlyTheWorkersPool) {
  Launch(/*tx_checksum=*/true, /*fast_free=*/true);
  // An ARP request from a backend's segment (a buffer of the backend port's
  // pool): the reply leaves by that port, as a copy in the worker's pool.
  const Bytes arp = BackendHostArpRequest();
  Receive(1, arp);
  const TxFrame reply = Sent(1);
  ASSERT_TRUE(reply.got);
  EXPECT_EQ(reply.bytes, Reference(arp).at(0));
  EXPECT_EQ(reply.pool, pool_[0]) << "a frame of another pool on a fast-free queue";
  EXPECT_EQ(reply.refcnt, 1);
  EXPECT_FALSE(Marked(reply));
  // A ping from there too; and data to a VIP from the backend side.
  Ip4 ping;
  ping.src = Ip("192.0.2.201");
  ping.dst = Ip("192.0.2.10");
  ping.proto = 1;
  const Bytes echo = testing::Frame4(ping, testing::Echo(false, 9, 1), {.src = kBackendHostMac});
  Receive(1, echo);
  const TxFrame pong = Sent(1);
  ASSERT_TRUE(pong.got);
  EXPECT_EQ(pong.bytes, Reference(echo).at(0));
  EXPECT_EQ(pong.pool, pool_[0]);
  const Bytes data = Tcp4("10.0.3.1", 7300, "198.51.100.80", 0x02);
  Receive(1, data);
  const TxFrame fwd = Sent(1);
  ASSERT_TRUE(fwd.got);
  EXPECT_EQ(NicJob(fwd), Reference(data).at(0));
  EXPECT_EQ(fwd.pool, pool_[0]);
  // The front port's frames were never copied: their buffers go out as received.
  const Bytes front = Tcp4("10.0.3.2", 7301, "198.51.100.80", 0x02);
  Receive(0, front);
  EXPECT_EQ(Sent(1).pool, pool_[0]);
  EXPECT_EQ(counters_.extra_alloc_fail.value(), 0u);
  EXPECT_EQ(rte_mempool_in_use_count(pool_[1]), 0u) << "the backend port's buffers were all freed";
}

TEST_F(OffloadLoopTest, WithoutOffloadsFramesAreCompleteAndLeaveInTheirOwnBuffers) {
  Launch(/*tx_checksum=*/false, /*fast_free=*/false);
  const Bytes in = Tcp4("10.0.4.1", 7400, "198.51.100.80", 0x02);
  Receive(0, in);
  const TxFrame f = Sent(1);
  ASSERT_TRUE(f.got);
  EXPECT_FALSE(Marked(f));
  EXPECT_EQ(f.bytes, Reference(in).at(0));
  EXPECT_EQ(testing::RefChecksum({}, f.bytes.data() + 14, 20), 0);
  // The reply to the backend side goes in the buffer it came in (no copy).
  const Bytes arp = BackendHostArpRequest();
  Receive(1, arp);
  const TxFrame reply = Sent(1);
  ASSERT_TRUE(reply.got);
  EXPECT_EQ(reply.bytes, Reference(arp).at(0));
  EXPECT_EQ(reply.pool, pool_[1]);
}

// Waits up to 20 s for `counter` to reach `want` (the worker runs on its own lcore).
bool Reaches(const Counter& counter, uint64_t want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (counter.value() < want) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return counter.value() == want;
}

// The loop's own drops (worker_loop.cc Process): before the first snapshot
// every frame is counted (no_snapshot, or rx_multiseg for a chained one) and
// freed, none sent; once there is one, a burst that mixes chained frames,
// frames to forward, a reply and frames the pipeline drops sends each one
// where it goes, counts each drop under its reason, and frees the rest.
TEST_F(OffloadLoopTest, EveryFrameOfABurstIsSentOrCountedAndFreedBeforeAndAfterTheFirstSnapshot) {
  std::unique_ptr<SnapshotPublisher> with_state = std::move(publisher_);
  absl::StatusOr<std::unique_ptr<SnapshotPublisher>> empty = SnapshotPublisher::Create(1);
  ASSERT_TRUE(empty.ok());
  publisher_ = *std::move(empty);
  Launch(/*tx_checksum=*/false, /*fast_free=*/false);
  // Frames in buffers of port 0's pool, queued at once so that the worker
  // takes them in one burst (or a few: any split must give the same result).
  auto single = [&](const Bytes& frame) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool_[0]);
    EXPECT_NE(m, nullptr);
    std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size())), frame.data(), frame.size());
    return m;
  };
  auto chained = [&](const Bytes& frame) {
    rte_mbuf* head = single(Bytes(frame.begin(), frame.begin() + 30));
    rte_mbuf* tail = single(Bytes(frame.begin() + 30, frame.end()));
    EXPECT_EQ(rte_pktmbuf_chain(head, tail), 0);
    return head;
  };
  auto receive_all = [&](std::vector<rte_mbuf*> burst) {
    ASSERT_EQ(rte_ring_enqueue_bulk(rx_[0], reinterpret_cast<void**>(burst.data()),
                                    static_cast<unsigned>(burst.size()), nullptr),
              burst.size());
  };
  const Bytes to_vip = Tcp4("10.0.5.1", 7500, "198.51.100.80", 0x02);
  const Bytes to_nowhere = Tcp4("10.0.5.2", 7501, "198.51.100.99", 0x02);  // no such VIP
  const Bytes arp = testing::Frame({.dst = Mac("ff:ff:ff:ff:ff:ff"), .src = kGatewayMac}, 0x0806,
                                   testing::Arp(1, kGatewayMac, Ip("192.0.2.1"), MacAddress{}, Ip("192.0.2.10")));

  // No snapshot yet: 5 frames counted as such, the chained one as chained.
  receive_all({single(to_vip), single(to_vip), chained(to_vip), single(arp), single(to_nowhere),
               single(to_vip)});
  ASSERT_TRUE(Reaches(counters_.no_snapshot, 5));
  ASSERT_TRUE(Reaches(counters_.rx_multiseg, 1));
  EXPECT_EQ(rte_mempool_in_use_count(pool_[0]), 0u) << "every buffer freed (the chain's two as well)";
  EXPECT_EQ(rte_ring_count(tx_[0]) + rte_ring_count(tx_[1]), 0u) << "nothing sent without a snapshot";

  // With one: forwarded, replied, dropped by reason, chained, in one burst.
  LbStateOptions opts;
  opts.port_mac = kPortMac;
  absl::StatusOr<std::unique_ptr<const LbState>> s = BuildLbState(LoopConfig(), nullptr, opts);
  ASSERT_TRUE(s.ok()) << s.status();
  publisher_->Publish(*std::move(s));
  const uint64_t no_vip = worker_.counters().drops[static_cast<size_t>(DropReason::kNoVip)].value();
  // Sent before this burst so that the worker has the snapshot when it comes.
  receive_all({single(to_vip)});
  const TxFrame first = Sent(1);
  ASSERT_TRUE(first.got);
  EXPECT_EQ(first.bytes, Reference(to_vip).at(0));
  const Bytes to_vip2 = Tcp4("10.0.5.3", 7502, "198.51.100.80", 0x10, 100);
  receive_all({single(to_vip), chained(to_vip), single(to_nowhere), single(arp), single(to_vip2),
               single(to_nowhere), single(to_vip)});
  // Toward the backends (port 1), in order: the three to the VIP.
  for (const Bytes* in : {&to_vip, &to_vip2, &to_vip}) {
    const TxFrame f = Sent(1);
    ASSERT_TRUE(f.got);
    EXPECT_EQ(f.bytes, Reference(*in).at(0));
    EXPECT_EQ(f.pool, pool_[0]);
  }
  // The ARP reply by the port it came in on.
  const TxFrame reply = Sent(0);
  ASSERT_TRUE(reply.got);
  EXPECT_EQ(reply.bytes, Reference(arp).at(0));
  EXPECT_TRUE(Reaches(worker_.counters().drops[static_cast<size_t>(DropReason::kNoVip)], no_vip + 2));
  EXPECT_TRUE(Reaches(counters_.rx_multiseg, 2));
  EXPECT_EQ(counters_.no_snapshot.value(), 5u);
  EXPECT_EQ(rte_ring_count(tx_[0]) + rte_ring_count(tx_[1]), 0u) << "nothing else sent";
  // Every buffer back in the pool (the worker may still hold none: it frees
  // drops at the end of the burst, and sent frames were freed by Sent).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (rte_mempool_in_use_count(pool_[0]) != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(rte_mempool_in_use_count(pool_[0]), 0u);
  Stop();  // before `with_state` goes (state_, which Reference reads, is its)
}

}  // namespace
}  // namespace maglb
