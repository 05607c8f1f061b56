// The packet buffer pool of a data port (port_sizing.h): every place a
// buffer can be is counted, the margin, a configured count taken as it is
// unless the port could not run on it, and the descriptors maglb asks for.
#include "maglb/port_sizing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace maglb {
namespace {

using ::testing::HasSubstr;

// maglb's own figures (port.cc PlanPortPool): one-arm, `workers` queue pairs
// of 1024 descriptors, caches of 256, two control rings of 1023 slots and,
// with RSS over several workers, a steering ring of 1023 per worker.
PoolDemand OneArm(uint32_t workers, uint32_t descriptors = 1024) {
  PoolDemand d;
  d.port = "port 0";
  d.rx_queues = workers;
  d.rx_descriptors = descriptors;
  d.tx_descriptors_total = uint64_t{workers} * descriptors;
  d.workers = workers;
  d.held_per_worker = 256;
  d.control_lcores = 1;
  d.cache_size = 256;
  d.ring_slots = 2 * 1023 + (workers > 1 ? workers * 1023 : 0);
  return d;
}

TEST(PortSizingTest, EveryPlaceABufferCanBeIsCounted) {
  absl::StatusOr<PoolPlan> p = PlanPool(OneArm(1), PortSizingConfig{}, "lb.toml");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->rx, 1024u);
  EXPECT_EQ(p->tx, 1024u);
  EXPECT_EQ(p->in_flight, 256u);
  EXPECT_EQ(p->caches, 2u * 384);  // the worker's and the main lcore's, 1.5 x 256 each
  EXPECT_EQ(p->rings, 2046u);
  const uint64_t sum = 1024 + 1024 + 256 + 768 + 2046;
  EXPECT_EQ(p->margin, (sum + 7) / 8);
  EXPECT_EQ(p->computed, sum + p->margin);
  EXPECT_EQ(p->mbufs, p->computed);
  EXPECT_FALSE(p->configured);
  EXPECT_FALSE(p->below_computed);
  EXPECT_EQ(p->Breakdown(OneArm(1)),
            "rx 1 x 1024 + tx 1024 + in flight 1 x 256 + lcore caches 2 x 384 + rings 2046 + margin 640 = 5758");
}

// A real NIC: 4 queues of 4096 descriptors each way, two-arm (both ports'
// TX rings can hold the front port's frames). The old fixed pool (4096 per
// queue, twice, less one: 32767) could not fill these rings.
TEST(PortSizingTest, FollowsQueuesDescriptorsAndTheOtherArmsTxRings) {
  PoolDemand d = OneArm(4, 4096);
  d.tx_descriptors_total = 2 * 4 * 4096;
  absl::StatusOr<PoolPlan> p = PlanPool(d, PortSizingConfig{}, "lb.toml");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->rx, 4u * 4096);
  EXPECT_EQ(p->tx, 8u * 4096);
  EXPECT_EQ(p->in_flight, 4u * 256);
  EXPECT_EQ(p->caches, 5u * 384);
  EXPECT_EQ(p->rings, 2046u + 4 * 1023);
  EXPECT_GT(p->computed, 4u * 4096 * 3);
  EXPECT_GT(p->computed, 32767u);
  // Each part grows the pool by what it adds (and its eighth of margin).
  PoolDemand more = d;
  more.rx_descriptors = 8192;
  absl::StatusOr<PoolPlan> q = PlanPool(more, PortSizingConfig{}, "lb.toml");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->rx - p->rx, 4u * 4096);
  EXPECT_GE(q->computed - p->computed, 4u * 4096);
}

TEST(PortSizingTest, TheMarginIsAnEighthAndAtLeastTheFloor) {
  PoolDemand tiny;
  tiny.port = "port 0";
  tiny.rx_queues = 1;
  tiny.rx_descriptors = 64;
  tiny.tx_descriptors_total = 64;
  tiny.workers = 1;
  tiny.control_lcores = 0;
  absl::StatusOr<PoolPlan> p = PlanPool(tiny, PortSizingConfig{}, "lb.toml");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->margin, kMinPoolMargin);
  EXPECT_EQ(p->computed, 128u + kMinPoolMargin);
}

TEST(PortSizingTest, AConfiguredCountIsTakenAsItIs) {
  PortSizingConfig sizing;
  sizing.mbufs = 1'000'000;
  sizing.mbufs_line = 7;
  absl::StatusOr<PoolPlan> p = PlanPool(OneArm(1), sizing, "lb.toml");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->mbufs, 1'000'000u);
  EXPECT_TRUE(p->configured);
  EXPECT_FALSE(p->below_computed);
  EXPECT_EQ(p->computed, 5758u);  // still computed, for the log
  // Below what the rings can hold, but above the floor: taken, and flagged.
  sizing.mbufs = static_cast<uint32_t>(p->floor());
  absl::StatusOr<PoolPlan> low = PlanPool(OneArm(1), sizing, "lb.toml");
  ASSERT_TRUE(low.ok()) << low.status();
  EXPECT_EQ(low->mbufs, 1024u + 256 + 768);
  EXPECT_TRUE(low->below_computed);
}

// Fewer than the RX rings, bursts and caches take: the port could not even
// fill its rings. Refused with where the key is and what would do.
TEST(PortSizingTest, AConfiguredCountBelowTheFloorIsRefusedWithItsLine) {
  PortSizingConfig sizing;
  sizing.mbufs = 2047;
  sizing.mbufs_line = 12;
  absl::StatusOr<PoolPlan> p = PlanPool(OneArm(1), sizing, "/etc/maglb.toml");
  ASSERT_FALSE(p.ok());
  const std::string msg(p.status().message());
  EXPECT_EQ(msg.rfind("/etc/maglb.toml:12: lb.mbufs: 2047 packet buffers are too few for port 0", 0), 0u) << msg;
  EXPECT_THAT(msg, HasSubstr("take 2048 (rx 1 x 1024 + in flight 1 x 256 + lcore caches 2 x 384)"));
  EXPECT_THAT(msg, HasSubstr("set at least 2048, or 0 for the computed 5758"));
  sizing.mbufs = 2048;
  EXPECT_TRUE(PlanPool(OneArm(1), sizing, "/etc/maglb.toml").ok());
}

TEST(PortSizingTest, AComputedPoolPastTheLimitIsRefused) {
  PoolDemand d = OneArm(1024, 32768);  // 1024 queues of the largest rings
  absl::StatusOr<PoolPlan> p = PlanPool(d, PortSizingConfig{}, "lb.toml");
  ASSERT_FALSE(p.ok());
  // 2 x 1024 x 32768 descriptors + 1024 x 256 in flight + 1025 x 384 cached
  // + 2046 + 1024 x 1023 ring slots = 68814206, and an eighth more.
  EXPECT_THAT(std::string(p.status().message()),
              HasSubstr("port 0: its pool would need 77415982 packet buffers"));
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("more than maglb makes (67108864)"));
}

TEST(PortSizingTest, WantedDescriptors) {
  EXPECT_EQ(WantedDescriptors(0, 0), kDefaultDescriptors);
  EXPECT_EQ(WantedDescriptors(0, 256), kDefaultDescriptors);  // a PMD's smaller preference
  EXPECT_EQ(WantedDescriptors(0, 4096), 4096u);                // ... or larger one
  EXPECT_EQ(WantedDescriptors(0, 65535), kMaxDescriptors);
  EXPECT_EQ(WantedDescriptors(64, 4096), 64u);  // the operator's count wins
  EXPECT_EQ(WantedDescriptors(32768, 0), 32768u);
}

TEST(PortSizingTest, CacheHoldsItsFlushThreshold) {
  EXPECT_EQ(MempoolCacheHeld(256), 384u);
  EXPECT_EQ(MempoolCacheHeld(32), 48u);
  EXPECT_EQ(MempoolCacheHeld(0), 0u);
}

TEST(PortSizingTest, SameValuesIgnoresLines) {
  PortSizingConfig a, b;
  a.mbufs = b.mbufs = 9000;
  a.mbufs_line = 3;
  b.mbufs_line = 30;
  EXPECT_TRUE(a.SameValues(b));
  b.rx_descriptors = 2048;
  EXPECT_FALSE(a.SameValues(b));
}

}  // namespace
}  // namespace maglb
