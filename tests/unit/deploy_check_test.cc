#include "maglb/deploy_check.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace maglb {
namespace {

using ::testing::HasSubstr;
using Level = CheckFinding::Level;

PortFacts Nic() {
  PortFacts p;
  p.label = "port 0 0000:3b:00.0 (net_ice)";
  p.numa_node = 1;
  p.max_rx_queues = p.max_tx_queues = 64;
  p.rss = true;
  p.rx = p.tx = {.min = 64, .max = 4096, .align = 32};
  return p;
}

TEST(DeployCheckTest, WorkersOnThePortsNodeAreOk) {
  CheckFinding f = CheckNuma(Nic(), {{2, 1}, {3, 1}}, "1-3");
  EXPECT_EQ(f.level, Level::kOk);
  EXPECT_EQ(f.ToString(), "ok: port 0 0000:3b:00.0 (net_ice): NUMA node 1; all 2 worker lcores on it");
}

TEST(DeployCheckTest, AWorkerOnAnotherNodeIsNamedWithTheNodesCpus) {
  CheckFinding f = CheckNuma(Nic(), {{2, 1}, {40, 0}}, "16-31,48-63");
  EXPECT_EQ(f.level, Level::kWarning);
  EXPECT_THAT(f.ToString(), HasSubstr("worker lcore 40 (node 0) on another node"));
  EXPECT_THAT(f.text, HasSubstr("give -l with lcores of node 1 (CPUs 16-31,48-63)"));
}

TEST(DeployCheckTest, AVirtualDeviceHasNoNodeToCheck) {
  PortFacts p = Nic();
  p.numa_node = -1;
  CheckFinding f = CheckNuma(p, {{1, 0}}, "");
  EXPECT_EQ(f.level, Level::kOk);
  EXPECT_THAT(f.text, HasSubstr("lcore placement not checked"));
}

TEST(DeployCheckTest, QueuesAndDescriptorsWithinLimits) {
  std::vector<CheckFinding> f = CheckQueues(Nic(), 4, 4, 1024, 1024);
  ASSERT_EQ(f.size(), 3u);
  for (const CheckFinding& x : f) EXPECT_EQ(x.level, Level::kOk) << x.text;
  EXPECT_THAT(f[0].text, HasSubstr("4 queue pairs, one per worker lcore (RSS; device: up to 64)"));
}

TEST(DeployCheckTest, MoreWorkersThanQueuesSaysHowManyLcoresToGive) {
  PortFacts p = Nic();
  p.max_tx_queues = 2;
  std::vector<CheckFinding> f = CheckQueues(p, 6, 2, 1024, 1024);
  EXPECT_EQ(f[0].level, Level::kWarning);
  EXPECT_THAT(f[0].text, HasSubstr("at most 2 queue pairs, 6 worker lcores given: 4 would idle (give -l 3 lcores"));
}

TEST(DeployCheckTest, NoRssMeansOneWorker) {
  PortFacts p = Nic();
  p.rss = false;
  std::vector<CheckFinding> f = CheckQueues(p, 3, 1, 1024, 1024);
  EXPECT_EQ(f[0].level, Level::kWarning);
  EXPECT_THAT(f[0].text, HasSubstr("no RSS for IP/TCP/UDP flows: one queue, one worker; 2 of 3"));
  // One worker lcore needs no RSS.
  EXPECT_EQ(CheckQueues(p, 1, 1, 1024, 1024)[0].level, Level::kOk);
}

// net_pcap with one capture file per queue: each worker reads its own file.
TEST(DeployCheckTest, OneSourcePerQueueNeedsNoRss) {
  PortFacts p = Nic();
  p.rss = false;
  p.source_per_queue = true;
  p.max_rx_queues = p.max_tx_queues = 2;
  std::vector<CheckFinding> f = CheckQueues(p, 2, 2, 1024, 1024);
  EXPECT_EQ(f[0].level, Level::kOk) << f[0].text;
  EXPECT_THAT(f[0].text, HasSubstr("2 queue pairs, one per worker lcore (one source per queue; device: up to 2)"));
  // More workers than files: the extra ones idle, as with any port.
  f = CheckQueues(p, 3, 2, 1024, 1024);
  EXPECT_EQ(f[0].level, Level::kWarning);
  EXPECT_THAT(f[0].text, HasSubstr("at most 2 queue pairs, 3 worker lcores given"));
}

TEST(DeployCheckTest, DescriptorsOutsideTheLimitsAreAdjustedAsDpdkDoes) {
  PortFacts p = Nic();
  p.rx = {.min = 64, .max = 512, .align = 32};
  p.tx = {.min = 2048, .max = 4096, .align = 1};
  std::vector<CheckFinding> f = CheckQueues(p, 1, 1, 1024, 1024);
  EXPECT_EQ(f[1].level, Level::kWarning);
  EXPECT_THAT(f[1].text, HasSubstr("1024 RX descriptors per queue are outside the device's 64..512 "
                                   "(multiple of 32): maglb uses 512"));
  EXPECT_EQ(f[2].level, Level::kWarning);
  EXPECT_THAT(f[2].text, HasSubstr("maglb uses 2048"));
}

TEST(DeployCheckTest, MemoryFitsTightOrNot) {
  const uint64_t mib = 1 << 20;
  EXPECT_EQ(CheckMemory("pools", 50 * mib, "hugepages", 100 * mib, "fix").level, Level::kOk);
  CheckFinding tight = CheckMemory("pools", 95 * mib, "hugepages", 100 * mib, "reserve more");
  EXPECT_EQ(tight.level, Level::kWarning);
  EXPECT_THAT(tight.text, HasSubstr("less than 10% to spare; reserve more"));
  CheckFinding over = CheckMemory("conntrack (2 workers x 90 MiB)", 180 * mib, "ordinary memory (MemAvailable)",
                                  64 * mib, "lower [conntrack] capacity");
  EXPECT_EQ(over.level, Level::kError);
  EXPECT_EQ(over.ToString(),
            "error: conntrack (2 workers x 90 MiB) needs 180 MiB; ordinary memory (MemAvailable): 64 MiB "
            "available: does not fit; lower [conntrack] capacity");
}

TEST(DeployCheckTest, HumanBytes) {
  EXPECT_EQ(HumanBytes(512), "512 B");
  EXPECT_EQ(HumanBytes(90u << 20), "90 MiB");
  EXPECT_EQ(HumanBytes(uint64_t{3} << 29), "1.5 GiB");
}

}  // namespace
}  // namespace maglb
