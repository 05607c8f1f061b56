// The daemon's own port set-up (port.cc PlanPort, PlanPortPool, SetUpPort)
// on net_null ports under a real EAL (no hugepages): the pool DPDK makes has
// exactly the buffers PlanPool computed, or the count the config sets; the
// descriptors the config asks for are the ones the queues get; two-arm, each
// pool counts both ports' TX rings; with RSS over two workers, the steering
// rings; a count below the floor and one that does not fit DPDK's memory are
// refused with the config's file:line and key.
#include <rte_dev.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_mempool.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dataplane/port.h"
#include "dataplane/worker_loop.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pcap_writer.h"
#include "test_eal.h"

namespace maglb {
namespace {

using ::testing::HasSubstr;

class PortPoolTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { eal_ok_ = testing::StartTestEal("port_pool_test", 256, "0@0"); }

  // A fresh net_null port (names are not reused: a closed port's vdev stays).
  static uint16_t NullPort() {
    const std::string name = absl::StrCat("net_null_pool", next_++);
    EXPECT_EQ(rte_eal_hotplug_add("vdev", name.c_str(), "no-rx=1"), 0) << name;
    uint16_t id = UINT16_MAX;
    EXPECT_EQ(rte_eth_dev_get_port_by_name(name.c_str(), &id), 0) << name;
    return id;
  }

  // The buffers of a pool DPDK made, counted by DPDK.
  static uint32_t PoolObjects(rte_mempool* pool) {
    return rte_mempool_avail_count(pool) + rte_mempool_in_use_count(pool);
  }

  static bool eal_ok_;
  static inline int next_ = 0;
};
bool PortPoolTest::eal_ok_ = false;

TEST_F(PortPoolTest, TheComputedPoolIsWhatDpdkMakesWithTheConfiguredDescriptors) {
  ASSERT_TRUE(eal_ok_) << "rte_eal_init failed";
  PortSizingConfig sizing;
  sizing.rx_descriptors = 4096;
  sizing.tx_descriptors = 2048;
  const uint16_t id = NullPort();
  absl::StatusOr<PortPlan> plan = PlanPort(id, 1, 1500, sizing);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->queues, 1);
  EXPECT_EQ(plan->rx_descriptors, 4096);  // net_null takes 0..65535
  EXPECT_EQ(plan->tx_descriptors, 2048);
  absl::StatusOr<PortPool> pool = PlanPortPool(*plan, {*plan}, 1, sizing, "test.toml");
  ASSERT_TRUE(pool.ok()) << pool.status();
  // rx 4096 + tx 2048 + one worker's frames + two caches + two control rings.
  const uint64_t sum = 4096 + 2048 + kFramesHeldPerWorker + 2 * 384 + 2 * (kControlRingSize - 1);
  EXPECT_EQ(pool->plan.computed, sum + (sum + 7) / 8);
  EXPECT_FALSE(pool->plan.configured);

  absl::StatusOr<Port> port = SetUpPort(*plan, *pool, 1500, "", /*toward_backends=*/true);
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_EQ(port->info().mbufs, pool->plan.computed);
  EXPECT_EQ(port->info().pool->size, pool->plan.computed);
  EXPECT_EQ(PoolObjects(port->info().pool), pool->plan.computed);
  EXPECT_EQ(port->info().rx_descriptors, 4096);
  EXPECT_EQ(port->info().tx_descriptors, 2048);
  rte_eth_rxq_info rxq{};
  rte_eth_txq_info txq{};
  // net_null reports no queue info (-ENOTSUP); where a PMD does, it must agree.
  if (rte_eth_rx_queue_info_get(id, 0, &rxq) == 0 && rxq.nb_desc != 0) {
    EXPECT_EQ(rxq.nb_desc, 4096);
  }
  if (rte_eth_tx_queue_info_get(id, 0, &txq) == 0 && txq.nb_desc != 0) {
    EXPECT_EQ(txq.nb_desc, 2048);
  }
  EXPECT_THAT(port->info().pool_pages, HasSubstr("no hugepages"));
  EXPECT_THAT(port->info().sizing, HasSubstr(absl::StrCat("port ", id, ": 4096 RX and 2048 TX descriptors per queue, ",
                                                          pool->plan.computed, " packet buffers of 2176 bytes")));
  EXPECT_THAT(port->info().sizing, HasSubstr(pool->plan.Breakdown(pool->demand)));
}

TEST_F(PortPoolTest, AConfiguredPoolGetsThatManyBuffers) {
  ASSERT_TRUE(eal_ok_) << "rte_eal_init failed";
  PortSizingConfig sizing;
  sizing.mbufs = 20000;
  sizing.mbufs_line = 4;
  const uint16_t id = NullPort();
  absl::StatusOr<PortPlan> plan = PlanPort(id, 1, 1500, sizing);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->rx_descriptors, kDefaultDescriptors);
  absl::StatusOr<PortPool> pool = PlanPortPool(*plan, {*plan}, 1, sizing, "test.toml");
  ASSERT_TRUE(pool.ok()) << pool.status();
  rte_malloc_socket_stats before{}, after{};
  ASSERT_EQ(rte_malloc_get_socket_stats(plan->socket, &before), 0);
  absl::StatusOr<Port> port = SetUpPort(*plan, *pool, 1500, MbufsOrigin(sizing, "test.toml"), /*toward_backends=*/true);
  ASSERT_TRUE(port.ok()) << port.status();
  ASSERT_EQ(rte_malloc_get_socket_stats(plan->socket, &after), 0);
  // What maglb --check counts for it (4 KiB pages here: one 2.4 KB buffer a
  // page) against what DPDK's heap gave the pool (and the port's queues):
  // on the side of what it takes, and close.
  const uint64_t taken = after.heap_allocsz_bytes - before.heap_allocsz_bytes;
  const uint64_t estimate = PoolBytes(20000, plan->data_room, PoolPageSize(plan->socket));
  EXPECT_EQ(PoolPageSize(plan->socket), static_cast<uint64_t>(sysconf(_SC_PAGESIZE)));
  EXPECT_GE(estimate, taken - taken / 50) << "taken " << taken;
  EXPECT_LE(estimate, taken + taken / 10) << "taken " << taken;
  EXPECT_EQ(port->info().pool->size, 20000u);
  EXPECT_EQ(PoolObjects(port->info().pool), 20000u);
  EXPECT_THAT(port->info().sizing, HasSubstr("20000 packet buffers"));
  EXPECT_THAT(port->info().sizing, HasSubstr("test.toml:4: lb.mbufs 20000 (computed: rx 1 x 1024"));
}

TEST_F(PortPoolTest, TwoArmEachPoolCountsBothPortsTxRings) {
  ASSERT_TRUE(eal_ok_) << "rte_eal_init failed";
  PortSizingConfig sizing;
  sizing.tx_descriptors = 512;
  absl::StatusOr<PortPlan> front = PlanPort(NullPort(), 1, 1500, sizing);
  absl::StatusOr<PortPlan> back = PlanPort(NullPort(), 1, 1500, sizing);
  ASSERT_TRUE(front.ok() && back.ok());
  const std::vector<PortPlan> both = {*front, *back};
  absl::StatusOr<PortPool> one_arm = PlanPortPool(*front, {*front}, 1, sizing, "test.toml");
  absl::StatusOr<PortPool> two_arm = PlanPortPool(*front, both, 1, sizing, "test.toml");
  ASSERT_TRUE(one_arm.ok() && two_arm.ok());
  EXPECT_EQ(one_arm->plan.tx, 512u);
  EXPECT_EQ(two_arm->plan.tx, 1024u);
  EXPECT_GT(two_arm->plan.computed, one_arm->plan.computed);
}

// net_null spreads nothing, but it offers RSS hash types: two workers get two
// queues, and their steering rings count.
TEST_F(PortPoolTest, TwoQueuesWithRssCountTheirRingsAndSteering) {
  ASSERT_TRUE(eal_ok_) << "rte_eal_init failed";
  absl::StatusOr<PortPlan> plan = PlanPort(NullPort(), 2, 1500, PortSizingConfig{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  if (plan->distribution != "rss") GTEST_SKIP() << "net_null without RSS here: " << plan->distribution;
  EXPECT_EQ(plan->queues, 2);
  absl::StatusOr<PortPool> pool = PlanPortPool(*plan, {*plan}, 2, PortSizingConfig{}, "test.toml");
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_EQ(pool->plan.rx, 2u * 1024);
  EXPECT_EQ(pool->plan.tx, 2u * 1024);
  EXPECT_EQ(pool->plan.caches, 3u * 384);
  EXPECT_EQ(pool->plan.rings, 2u * (kControlRingSize - 1) + 2 * (kSteerRingSize - 1));
  absl::StatusOr<Port> port = SetUpPort(*plan, *pool, 1500, "", /*toward_backends=*/true);
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_EQ(PoolObjects(port->info().pool), pool->plan.computed);
}

// net_pcap with two capture files: a queue per file, each queue reading its
// own file, so each worker gets the flows its file holds.
TEST_F(PortPoolTest, PcapGivesEachCaptureFileItsOwnQueue) {
  ASSERT_TRUE(eal_ok_) << "rte_eal_init failed";
  std::string files[2];
  for (int f = 0; f < 2; ++f) {
    files[f] = absl::StrCat(::testing::TempDir(), "port_pool_test_", getpid(), "_", f, ".pcap");
    testing::PcapWriter out(files[f].c_str());
    ASSERT_TRUE(out.ok()) << files[f];
    for (int i = 0; i < 3 + f; ++i) {  // 3 frames in the first file, 4 in the second
      uint8_t frame[60] = {};
      frame[12] = 0x08;
      frame[59] = static_cast<uint8_t>(f);  // which file it came from
      out.Write(frame, sizeof(frame));
    }
  }
  const std::string name = absl::StrCat("net_pcap_pool", next_++);
  ASSERT_EQ(rte_eal_hotplug_add("vdev", name.c_str(),
                                absl::StrCat("rx_pcap=", files[0], ",rx_pcap=", files[1]).c_str()),
            0);
  uint16_t id = UINT16_MAX;
  ASSERT_EQ(rte_eth_dev_get_port_by_name(name.c_str(), &id), 0);
  absl::StatusOr<PortPlan> plan = PlanPort(id, 2, 1500, PortSizingConfig{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->queues, 2);
  EXPECT_EQ(plan->distribution, "one source per queue");
  // Three workers, two files: two queues (the third worker's lcore idles).
  absl::StatusOr<PortPlan> three = PlanPort(id, 3, 1500, PortSizingConfig{});
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(three->queues, 2);
  absl::StatusOr<PortPool> pool = PlanPortPool(*plan, {*plan}, 2, PortSizingConfig{}, "test.toml");
  ASSERT_TRUE(pool.ok()) << pool.status();
  absl::StatusOr<Port> port = SetUpPort(*plan, *pool, 1500, "", /*toward_backends=*/true);
  ASSERT_TRUE(port.ok()) << port.status();
  for (uint16_t q = 0; q < 2; ++q) {
    rte_mbuf* got[16];
    uint16_t n = 0;
    for (int tries = 0; tries < 100 && n < 3 + q; ++tries) n += rte_eth_rx_burst(id, q, got + n, 16 - n);
    EXPECT_EQ(n, 3 + q) << "queue " << q;
    for (uint16_t i = 0; i < n; ++i) {
      EXPECT_EQ(rte_pktmbuf_mtod(got[i], const uint8_t*)[59], q) << "queue " << q << " frame " << i;
      rte_pktmbuf_free(got[i]);
    }
  }
  for (const std::string& f : files) std::remove(f.c_str());
}

TEST_F(PortPoolTest, TooFewForTheRingsIsRefusedWithTheKeysLine) {
  ASSERT_TRUE(eal_ok_) << "rte_eal_init failed";
  PortSizingConfig sizing;
  sizing.rx_descriptors = 4096;
  sizing.mbufs = 4096;  // every one in the RX ring, none for a burst
  sizing.mbufs_line = 9;
  absl::StatusOr<PortPlan> plan = PlanPort(NullPort(), 1, 1500, sizing);
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<PortPool> pool = PlanPortPool(*plan, {*plan}, 1, sizing, "/etc/maglb.toml");
  ASSERT_FALSE(pool.ok());
  EXPECT_THAT(std::string(pool.status().message()),
              HasSubstr("/etc/maglb.toml:9: lb.mbufs: 4096 packet buffers are too few for port"));
}

// 2^26 buffers (~150 GB) against -m 256: DPDK refuses, and so does the port,
// saying how much, which key, and what to do.
TEST_F(PortPoolTest, APoolThatDoesNotFitIsRefusedNamingTheKey) {
  ASSERT_TRUE(eal_ok_) << "rte_eal_init failed";
  PortSizingConfig sizing;
  sizing.mbufs = kMaxMbufs;
  sizing.mbufs_line = 5;
  const uint16_t id = NullPort();
  absl::StatusOr<PortPlan> plan = PlanPort(id, 1, 1500, sizing);
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<PortPool> pool = PlanPortPool(*plan, {*plan}, 1, sizing, "lb.toml");
  ASSERT_TRUE(pool.ok()) << pool.status();
  absl::StatusOr<Port> port = SetUpPort(*plan, *pool, 1500, MbufsOrigin(sizing, "lb.toml"), /*toward_backends=*/true);
  ASSERT_FALSE(port.ok());
  EXPECT_EQ(port.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string msg(port.status().message());
  EXPECT_THAT(msg, HasSubstr(absl::StrCat("port ", id, ": cannot allocate 67108864 packet buffers of 2176 bytes (")));
  EXPECT_THAT(msg, HasSubstr("GiB, lb.toml:5: lb.mbufs 67108864, on NUMA socket 0)"));
  EXPECT_THAT(msg, HasSubstr("give EAL more memory with -m, or lower lb.mbufs (0: computed)"));
}

}  // namespace
}  // namespace maglb
