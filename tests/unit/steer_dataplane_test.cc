// The ICMP steering of the real worker loop: two WorkerMain lcores on a
// two-queue net_ring port (EAL without hugepages), real steering rings and
// RCU snapshots. net_ring has no RSS, so the RssOwner is built from a given
// key and RETA (what port.cc reads from an RSS port); everything else is the
// daemon's own code. A flow pinned on worker A, a reload that moves its table
// slot, then an ICMP error about it received on worker B's queue: it must
// leave by A's queue toward the pinned backend. Then, A's ring full: B drops
// and counts such an error, and goes on serving. Throughout, each worker's
// latency histogram counts the frames it received from the port and sent,
// and nothing else: not the dropped, not the steered.
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "dataplane/snapshot.h"
#include "dataplane/worker_loop.h"
#include "gtest/gtest.h"
#include "test_eal.h"
#include "maglb/flow_hash.h"
#include "maglb/lb_state.h"
#include "maglb/pipeline.h"
#include "maglb/toeplitz.h"
#include "packet_builder.h"

namespace maglb {
namespace {

using testing::Bytes;
using testing::Ip;
using testing::Ip4;
using testing::Mac;

const MacAddress kPortMac = Mac("02:00:00:00:00:01");

Config TestConfig() {
  Config c;
  c.source = "steer_dataplane_test.toml";
  c.lb.ipv4 = Ip("192.0.2.10");
  c.lb.gateway_v4 = Ip("192.0.2.1");
  c.lb.mtu = 1500;
  c.neighbors.push_back({Ip("192.0.2.1"), Mac("02:00:00:00:00:fe"), 0});
  VipConfig v;
  v.name = "web";
  v.address = Ip("198.51.100.80");
  v.protocol = Protocol::kTcp;
  v.port = 80;
  v.forwarding = Forwarding::kGre;
  v.table_size = 251;
  for (int i = 1; i <= 3; ++i) v.backends.push_back({absl::StrCat("b", i), Ip(absl::StrCat("203.0.113.", i)), 1, 0});
  c.vips.push_back(v);
  return c;
}

FlowKey ClientKey(uint16_t sport) {
  FlowKey k;
  const IpAddress c = Ip("10.0.0.5"), v = Ip("198.51.100.80");
  std::memcpy(k.src.data(), c.bytes.data(), 4);
  std::memcpy(k.dst.data(), v.bytes.data(), 4);
  k.src_port = sport;
  k.dst_port = 80;
  k.protocol = 6;
  return k;
}

class SteerDataplaneTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { eal_ok_ = testing::StartTestEal("steer_test", 256, "(0-2)@(0-1)"); }

  static rte_mbuf* Mbuf(rte_mempool* pool, const Bytes& frame) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool);
    if (m == nullptr) return nullptr;
    std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size())), frame.data(), frame.size());
    return m;
  }
  // The next frame the port sent on TX queue `q`, waiting up to 20 s.
  static Bytes Sent(rte_ring* tx) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    void* m = nullptr;
    while (rte_ring_dequeue(tx, &m) != 0) {
      if (std::chrono::steady_clock::now() > deadline) return {};
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    rte_mbuf* mb = static_cast<rte_mbuf*>(m);
    const uint8_t* p = rte_pktmbuf_mtod(mb, const uint8_t*);
    Bytes out(p, p + rte_pktmbuf_data_len(mb));
    rte_pktmbuf_free(mb);
    return out;
  }
  static std::string OuterDst(const Bytes& f) {
    if (f.size() < 34) return "<none>";
    return absl::StrCat(f[30], ".", f[31], ".", f[32], ".", f[33]);
  }

  static bool eal_ok_;
};
bool SteerDataplaneTest::eal_ok_ = false;

TEST_F(SteerDataplaneTest, IcmpErrorAtTheWrongWorkerLeavesByTheOwnersQueueToThePinnedBackend) {
  ASSERT_TRUE(eal_ok_) << "rte_eal_init failed";
  ASSERT_GE(rte_lcore_count(), 3u);
  rte_ring* rx[2];
  rte_ring* tx[2];
  for (int q = 0; q < 2; ++q) {
    rx[q] = rte_ring_create(absl::StrCat("st_rx", q).c_str(), 256, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    tx[q] = rte_ring_create(absl::StrCat("st_tx", q).c_str(), 256, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    ASSERT_NE(rx[q], nullptr);
    ASSERT_NE(tx[q], nullptr);
  }
  const int port = rte_eth_from_rings("net_ring_steer", rx, 2, tx, 2, SOCKET_ID_ANY);
  ASSERT_GE(port, 0);
  rte_mempool* pool = rte_pktmbuf_pool_create("st_pool", 4095, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  ASSERT_NE(pool, nullptr);
  rte_eth_conf conf{};
  const uint16_t pid = static_cast<uint16_t>(port);
  ASSERT_EQ(rte_eth_dev_configure(pid, 2, 2, &conf), 0);
  for (uint16_t q = 0; q < 2; ++q) {
    ASSERT_EQ(rte_eth_rx_queue_setup(pid, q, 256, SOCKET_ID_ANY, nullptr, pool), 0);
    ASSERT_EQ(rte_eth_tx_queue_setup(pid, q, 256, SOCKET_ID_ANY, nullptr), 0);
  }
  ASSERT_EQ(rte_eth_dev_start(pid), 0);

  // Microsoft's key, a 128-entry RETA alternating the two queues.
  RssConfig rss;
  rss.key = {0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
             0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
             0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};
  rss.types = {.ipv4 = true, .ipv4_tcp = true, .ipv4_udp = true};
  for (int i = 0; i < 128; ++i) rss.reta.push_back(static_cast<uint16_t>(i % 2));
  absl::StatusOr<RssOwner> owner = RssOwner::Create(rss, 2);
  ASSERT_TRUE(owner.ok());
  absl::StatusOr<std::unique_ptr<SteerRings>> rings = SteerRings::Create(2, SOCKET_ID_ANY);
  ASSERT_TRUE(rings.ok()) << rings.status();
  rte_ring* to_control = rte_ring_create("st_ctl", 64, SOCKET_ID_ANY, RING_F_SC_DEQ);
  ASSERT_NE(to_control, nullptr);

  LbStateOptions opts;
  opts.port_mac = kPortMac;
  absl::StatusOr<std::unique_ptr<const LbState>> s1 = BuildLbState(TestConfig(), nullptr, opts);
  ASSERT_TRUE(s1.ok()) << s1.status();
  const LbState* first_state = s1->get();
  absl::StatusOr<std::unique_ptr<SnapshotPublisher>> publisher = SnapshotPublisher::Create(2);
  ASSERT_TRUE(publisher.ok());
  (*publisher)->Publish(*std::move(s1));

  ConntrackConfig ct;
  ct.capacity = 1 << 12;
  Worker a(ct), b(ct);
  LoopCounters lc[2];
  WorkerContext ctx[2];
  std::atomic<bool> stop{false};
  // Whatever happens below, the workers stop before what they use is freed.
  absl::Cleanup stop_workers = [&stop] {
    stop = true;
    rte_eal_mp_wait_lcore();
  };
  Worker* workers[2] = {&a, &b};
  unsigned lcore = rte_get_next_lcore(-1, 1, 0);
  for (uint32_t i = 0; i < 2; ++i) {
    WorkerContext& c = ctx[i];
    c.index = i;
    c.lcore = lcore;
    c.port_id = pid;
    c.backend_port_id = pid;
    c.queue = static_cast<uint16_t>(i);
    c.worker = workers[i];
    c.counters = &lc[i];
    c.publisher = publisher->get();
    c.pool = pool;
    c.to_control = to_control;
    c.rss_owner = &*owner;
    c.steer_rings = (*rings)->rings();
    c.stop = &stop;
    c.idle_sleep_us = 200;  // two workers and this thread share two CPUs
    ASSERT_EQ(rte_eal_remote_launch(WorkerMain, &c, lcore), 0);
    lcore = rte_get_next_lcore(lcore, 1, 0);
  }

  // A flow that RSS puts on queue 0 (worker A), pinned there by its SYN.
  uint16_t sport = 5000;
  while (owner->OwnerOf(ClientKey(sport)) != 0) ++sport;
  Ip4 h;
  h.src = Ip("10.0.0.5");
  h.dst = Ip("198.51.100.80");
  const Bytes syn = testing::Frame4(h, testing::Tcp(sport, 80, 0x02));
  Ip4 stray = h;
  stray.dst = Ip("198.51.100.81");  // no VIP: dropped, so not timed
  ASSERT_EQ(rte_ring_enqueue(rx[0], Mbuf(pool, testing::Frame4(stray, testing::Tcp(sport, 80, 0x02)))), 0);
  ASSERT_EQ(rte_ring_enqueue(rx[0], Mbuf(pool, syn)), 0);
  const std::string pinned = OuterDst(Sent(tx[0]));
  ASSERT_NE(pinned, "<none>");

  // Reload: the pinned backend at weight 0 moves the flow's slot.
  Config c = TestConfig();
  for (auto& be : c.vips[0].backends) {
    if (be.address.ToString() == pinned) be.weight = 0;
  }
  absl::StatusOr<std::unique_ptr<const LbState>> s2 = BuildLbState(c, first_state);
  ASSERT_TRUE(s2.ok()) << s2.status();
  const VipState& vip = *(*s2)->FindVip("web");
  const std::string table_choice =
      vip.backends[vip.table->Lookup(FlowHash(ClientKey(sport), vip.hash_seed))].target.backend.ToString();
  ASSERT_NE(table_choice, pinned);
  (*publisher)->Publish(*std::move(s2));

  // A router's fragmentation-needed about the backend's reply, received by B.
  Ip4 inner;
  inner.src = Ip("198.51.100.80");
  inner.dst = Ip("10.0.0.5");
  Bytes embedded = testing::Ipv4(inner, testing::Tcp(80, sport, 0x10, 100));
  embedded.resize(28);
  Ip4 outer;
  outer.src = Ip("192.0.2.77");
  outer.dst = Ip("198.51.100.80");
  outer.proto = 1;
  const Bytes error = testing::Frame4(outer, testing::Icmp(3, 4, 1400, embedded));
  ASSERT_EQ(rte_ring_enqueue(rx[1], Mbuf(pool, error)), 0);
  const Bytes out = Sent(tx[0]);
  EXPECT_EQ(OuterDst(out), pinned);
  ASSERT_GE(out.size(), 38u + 20u + 1u);
  EXPECT_EQ(out[38 + 9], 1);  // the inner packet is the ICMP error itself

  std::move(stop_workers).Invoke();
  EXPECT_EQ(rte_ring_count(tx[1]), 0u);  // B sent nothing itself
  auto local = [](const Worker& w, LocalCounter l) { return w.counters().local[static_cast<size_t>(l)].value(); };
  EXPECT_EQ(local(b, LocalCounter::kIcmpErrorsSteered), 1u);
  EXPECT_EQ(local(a, LocalCounter::kIcmpErrorsRouted), 1u);
  EXPECT_EQ(lc[0].steer_full.value() + lc[1].steer_full.value(), 0u);
  // A timed the SYN it sent (the stray frame it dropped, and the error B
  // handed it, not); B received only the error, and sent nothing itself.
  auto timed = [](const LoopCounters& l) {
    uint64_t n = 0;
    for (uint64_t count : l.latency.Counts()) n += count;
    return n;
  };
  EXPECT_EQ(a.counters().drops[static_cast<size_t>(DropReason::kNoVip)].value(), 1u);
  EXPECT_EQ(timed(lc[0]), 1u);
  EXPECT_GT(lc[0].latency.sum_ns(), 0u);  // receiving, processing and sending take time
  EXPECT_EQ(timed(lc[1]), 0u);

  // A's ring full (A stopped, its ring filled): B drops the next such error
  // and counts it, without waiting, and keeps serving its own traffic.
  rte_ring* a_ring = (*rings)->rings()[0];
  while (rte_ring_free_count(a_ring) > 0) {
    rte_mbuf* filler = rte_pktmbuf_alloc(pool);
    ASSERT_NE(filler, nullptr);
    ASSERT_EQ(rte_ring_enqueue(a_ring, filler), 0);
  }
  stop = false;
  absl::Cleanup stop_b = [&stop] {
    stop = true;
    rte_eal_mp_wait_lcore();
  };
  ASSERT_EQ(rte_eal_remote_launch(WorkerMain, &ctx[1], ctx[1].lcore), 0);
  ASSERT_EQ(rte_ring_enqueue(rx[1], Mbuf(pool, error)), 0);
  uint16_t b_port = static_cast<uint16_t>(sport + 1);
  while (owner->OwnerOf(ClientKey(b_port)) != 1) ++b_port;
  ASSERT_EQ(rte_ring_enqueue(rx[1], Mbuf(pool, testing::Frame4(h, testing::Tcp(b_port, 80, 0x02)))), 0);
  EXPECT_NE(OuterDst(Sent(tx[1])), "<none>");  // B's own flow, after the error
  std::move(stop_b).Invoke();
  EXPECT_EQ(lc[1].steer_full.value(), 1u);
  EXPECT_EQ(local(b, LocalCounter::kIcmpErrorsSteered), 2u);
  EXPECT_EQ(timed(lc[1]), 1u);  // its own SYN; the error it dropped is not timed
  EXPECT_EQ(timed(lc[0]), 1u);
  EXPECT_EQ(rte_ring_count(tx[0]), 0u);

  rings->reset();  // frees what is still in the rings
  EXPECT_EQ(rte_mempool_avail_count(pool), 4095u);  // the dropped error included: nothing leaked
  publisher->reset();
  rte_eth_dev_stop(pid);
  rte_eth_dev_close(pid);
  rte_ring_free(to_control);
  for (int q = 0; q < 2; ++q) {
    rte_ring_free(rx[q]);
    rte_ring_free(tx[q]);
  }
  rte_mempool_free(pool);
}

}  // namespace
}  // namespace maglb
