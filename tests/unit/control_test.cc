// The DPDK-free parts of the control plane: ARP / neighbour-solicitation
// builders (checked against the packet path's own parser and reply builder,
// and an independent checksum), the neighbour table's request schedule, the
// next hops a config needs, and the config-file watch.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "control/config_watch.h"
#include "control/neighbor.h"
#include "gtest/gtest.h"
#include "maglb/packet.h"
#include "maglb/reply.h"
#include "packet_builder.h"

namespace maglb {
namespace {

using testing::Ip;
using testing::Mac;

constexpr uint64_t kSecond = 1'000'000'000;

// Our addresses, as the packet path's LocalAddresses: one of each family.
LocalAddresses Local4(const char* v4) {
  LocalAddresses a;
  a.v4 = Ip(v4);
  return a;
}
LocalAddresses Local6(const char* v6) {
  LocalAddresses a;
  a.v6 = Ip(v6);
  return a;
}

TEST(BuildArpRequest, IsABroadcastWhoHas) {
  uint8_t f[kArpRequestLen];
  MacAddress mac = Mac("02:00:00:00:00:0a");
  ASSERT_EQ(BuildArpRequest(mac, Ip("10.0.0.10"), Ip("10.0.0.1"), f), kArpRequestLen);
  const uint8_t want_prefix[] = {
      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 0x0a, 0x08, 0x06,  // Ethernet
      0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01,                                // request
      0x02, 0, 0, 0, 0, 0x0a, 10, 0, 0, 10,                                    // sender
      0, 0, 0, 0, 0, 0, 10, 0, 0, 1};                                          // target
  EXPECT_EQ(0, std::memcmp(f, want_prefix, sizeof(want_prefix)));
  for (size_t i = sizeof(want_prefix); i < kArpRequestLen; ++i) EXPECT_EQ(f[i], 0) << i;
}

TEST(BuildArpRequest, RefusesIpv6AndShortBuffers) {
  uint8_t f[kArpRequestLen];
  MacAddress mac = Mac("02:00:00:00:00:0a");
  EXPECT_EQ(BuildArpRequest(mac, Ip("fd00::10"), Ip("10.0.0.1"), f), 0u);
  EXPECT_EQ(BuildArpRequest(mac, Ip("10.0.0.10"), Ip("fd00::1"), f), 0u);
  EXPECT_EQ(BuildArpRequest(mac, Ip("10.0.0.10"), Ip("10.0.0.1"), std::span<uint8_t>(f, 59)), 0u);
}

// The request, as the gateway would see it, is answered by the packet path's
// own ARP reply builder; the reply names the gateway's MAC.
TEST(BuildArpRequest, TheTargetAnswersIt) {
  uint8_t f[kArpRequestLen];
  ASSERT_EQ(BuildArpRequest(Mac("02:00:00:00:00:0a"), Ip("10.0.0.10"), Ip("10.0.0.1"), f),
            kArpRequestLen);
  const LocalAddresses gateway = Local4("10.0.0.1");
  VipMatcher no_vips;
  ParsedPacket p;
  Verdict v = Classify(std::span<const uint8_t>(f, kArpRequestLen), no_vips, gateway, &p);
  ASSERT_EQ(v.action, Action::kLocalArp);
  EXPECT_EQ(p.arp_op, 1);
  ASSERT_EQ(MakeArpReply(f, p, Ip("10.0.0.1"), Mac("02:00:00:00:00:01")), kArpRequestLen);
  ParsedPacket q;
  ASSERT_EQ(Classify(std::span<const uint8_t>(f, kArpRequestLen), no_vips,
                     Local4("10.0.0.10"), &q).action,
            Action::kLocalArp);
  std::optional<NeighborInfo> n = ExtractNeighbor(std::span<const uint8_t>(f, kArpRequestLen), q);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->address, Ip("10.0.0.1"));
  EXPECT_EQ(n->mac, Mac("02:00:00:00:00:01"));
}

TEST(BuildNeighborSolicit, SolicitedNodeMulticastWithValidChecksum) {
  uint8_t f[kNeighborSolicitLen];
  ASSERT_EQ(BuildNeighborSolicit(Mac("02:00:00:00:00:0a"), Ip("fd00::10"), Ip("fd00::1:2:3"), f),
            kNeighborSolicitLen);
  const uint8_t dst_mac[] = {0x33, 0x33, 0xff, 0x02, 0x00, 0x03};
  EXPECT_EQ(0, std::memcmp(f, dst_mac, 6));
  const uint8_t* ip = f + 14;
  EXPECT_EQ(ip[0] >> 4, 6);
  EXPECT_EQ(ip[6], 58);
  EXPECT_EQ(ip[7], 255);  // RFC 4861: hop limit 255 or the target ignores it
  const uint8_t dst_ip[16] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, 0x02, 0x00, 0x03};
  EXPECT_EQ(0, std::memcmp(ip + 24, dst_ip, 16));
  const uint8_t* icmp = ip + 40;
  EXPECT_EQ(icmp[0], 135);
  EXPECT_EQ(0, std::memcmp(icmp + 8, Ip("fd00::1:2:3").bytes.data(), 16));
  EXPECT_EQ(icmp[24], 1);  // source link-layer address option
  // Independent checksum: pseudo-header (src, dst, length, next header).
  testing::Bytes pseudo(40);
  std::memcpy(pseudo.data(), ip + 8, 32);
  pseudo[35] = 32;  // upper-layer length
  pseudo[39] = 58;  // next header
  EXPECT_EQ(testing::RefChecksum(pseudo, icmp, 32), 0);
}

// The solicitation is answered by the packet path's neighbour-advertisement
// builder, and the advertisement yields the target's MAC.
TEST(BuildNeighborSolicit, TheTargetAnswersIt) {
  uint8_t f[kNeighborSolicitLen];
  ASSERT_EQ(BuildNeighborSolicit(Mac("02:00:00:00:00:0a"), Ip("fd00::10"), Ip("fd00::1"), f),
            kNeighborSolicitLen);
  VipMatcher no_vips;
  ParsedPacket p;
  ASSERT_EQ(Classify(std::span<const uint8_t>(f, kNeighborSolicitLen), no_vips,
                     Local6("fd00::1"), &p).action,
            Action::kLocalNd);
  uint8_t na[kNeighborAdvertLen + 8];
  size_t len = BuildNeighborAdvert(std::span<const uint8_t>(f, kNeighborSolicitLen), p,
                                   Ip("fd00::1"), Mac("02:00:00:00:00:01"), na);
  ASSERT_GT(len, 0u);
  ParsedPacket q;
  ASSERT_EQ(Classify(std::span<const uint8_t>(na, len), no_vips,
                     Local6("fd00::10"), &q).action,
            Action::kLocalNd);
  std::optional<NeighborInfo> n = ExtractNeighbor(std::span<const uint8_t>(na, len), q);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->address, Ip("fd00::1"));
  EXPECT_EQ(n->mac, Mac("02:00:00:00:00:01"));
}

TEST(NeighborTable, AsksUnresolvedOncePerSecondAndRefreshesResolved) {
  NeighborTable t;
  t.SetWanted({Ip("10.0.0.1"), Ip("10.0.0.2")});
  const uint64_t t0 = 100;
  EXPECT_EQ(t.DueRequests(t0).size(), 2u);
  EXPECT_TRUE(t.DueRequests(t0 + kNeighborRetryNs - 1).empty());
  const uint64_t learned = t0 + kNeighborRetryNs - 1;
  // The answer to the request (policy: neighbor_test.cc).
  const MacAddress mac = Mac("02:00:00:00:00:01");
  EXPECT_TRUE(t.Observe({.address = Ip("10.0.0.1"), .mac = mac, .eth_source = mac}, learned).changed);
  EXPECT_EQ(t.resolved(), 1u);
  std::vector<IpAddress> due = t.DueRequests(t0 + kNeighborRetryNs);
  ASSERT_EQ(due.size(), 1u);  // only the unresolved one is asked again
  EXPECT_EQ(due[0], Ip("10.0.0.2"));
  due = t.DueRequests(learned + kNeighborRefreshNs - 1);
  ASSERT_EQ(due.size(), 1u);  // the resolved one is not refreshed yet
  EXPECT_EQ(due[0], Ip("10.0.0.2"));
  due = t.DueRequests(learned + kNeighborRefreshNs);
  ASSERT_EQ(due.size(), 1u);  // now it is; 10.0.0.2 was asked < 1 s ago
  EXPECT_EQ(due[0], Ip("10.0.0.1"));
  EXPECT_EQ(t.Lookup(Ip("10.0.0.1")), Mac("02:00:00:00:00:01"));  // still known meanwhile
}

TEST(WantedNeighbors, GatewaysForTunnelsBackendsForL2DsrStaticExcluded) {
  absl::StatusOr<Config> c = ParseConfig(R"(
[lb]
ipv4 = "10.0.0.10"
gateway_v4 = "10.0.0.1"
[[neighbor]]
address = "10.0.0.13"
mac = "02:00:00:00:00:13"
[[vip]]
name = "t"
address = "10.100.0.1"
protocol = "tcp"
port = 80
forwarding = "gre"
  [[vip.backend]]
  name = "a"
  address = "10.0.0.11"
  [[vip.backend]]
  name = "b"
  address = "fd00::12"
[[vip]]
name = "d"
address = "10.100.0.2"
protocol = "tcp"
port = 80
forwarding = "l2dsr"
  [[vip.backend]]
  name = "a"
  address = "10.0.0.11"
  [[vip.backend]]
  name = "c"
  address = "10.0.0.13"
)", "test.toml");
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<IpAddress> w = WantedNeighbors(*c);
  // gre: the v4 gateway; the IPv6 backend has no v6 gateway, so itself.
  // l2dsr: backend a; backend c has a static entry.
  std::vector<IpAddress> want = {Ip("10.0.0.1"), Ip("fd00::12"), Ip("10.0.0.11")};
  EXPECT_EQ(w, want);
}

class ConfigWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/maglb-watch-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/maglb.toml";
    Write(path_, "a");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  static void Write(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
  }
  std::string dir_, path_;
};

TEST_F(ConfigWatchTest, SeesInPlaceWritesAndRenamesOfTheFileOnly) {
  absl::StatusOr<ConfigWatch> w = ConfigWatch::Create(path_);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_FALSE(w->ConsumeEvents());
  Write(dir_ + "/other.toml", "x");
  EXPECT_FALSE(w->ConsumeEvents());
  Write(path_, "b");  // in place
  EXPECT_TRUE(w->ConsumeEvents());
  EXPECT_FALSE(w->ConsumeEvents());
  Write(dir_ + "/maglb.toml.new", "c");
  EXPECT_FALSE(w->ConsumeEvents());
  ASSERT_EQ(std::rename((dir_ + "/maglb.toml.new").c_str(), path_.c_str()), 0);  // editor-style
  EXPECT_TRUE(w->ConsumeEvents());
}

// An editor writing in place, pausing mid-write: nothing until it closes the
// file, then one event. A new file created at the path likewise waits for
// its close; a symlink or a directory created there is complete at once.
TEST_F(ConfigWatchTest, OnlyCompleteWritesCount) {
  absl::StatusOr<ConfigWatch> w = ConfigWatch::Create(path_);
  ASSERT_TRUE(w.ok()) << w.status();
  int fd = open(path_.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "[lb]\n", 5), 5);
  EXPECT_FALSE(w->ConsumeEvents());  // a prefix: not yet
  ASSERT_EQ(write(fd, "hash_seed = 1\n", 14), 14);
  EXPECT_FALSE(w->ConsumeEvents());
  close(fd);
  EXPECT_TRUE(w->ConsumeEvents());
  EXPECT_FALSE(w->ConsumeEvents());

  ASSERT_EQ(unlink(path_.c_str()), 0);
  EXPECT_TRUE(w->ConsumeEvents());  // gone: a reload attempt (refused, logged)
  fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(w->ConsumeEvents());  // created, still empty
  ASSERT_EQ(write(fd, "[lb]\n", 5), 5);
  EXPECT_FALSE(w->ConsumeEvents());
  close(fd);
  EXPECT_TRUE(w->ConsumeEvents());

  ASSERT_EQ(unlink(path_.c_str()), 0);
  w->ConsumeEvents();
  std::filesystem::create_symlink("missing.toml", path_);  // dangling, still an attempt
  EXPECT_TRUE(w->ConsumeEvents());
  ASSERT_EQ(unlink(path_.c_str()), 0);
  w->ConsumeEvents();
  std::filesystem::create_directory(path_);
  EXPECT_TRUE(w->ConsumeEvents());
}

// A Kubernetes ConfigMap volume: maglb.toml -> ..data/maglb.toml, ..data ->
// ..v1; an update writes ..v2 and renames a new symlink over ..data. No event
// names maglb.toml in the watched directory, yet the file changed.
TEST_F(ConfigWatchTest, SeesASymlinkSwapAndWritesAtTheTarget) {
  namespace fs = std::filesystem;
  fs::create_directory(dir_ + "/..v1");
  Write(dir_ + "/..v1/maglb.toml", "v1");
  fs::create_directory_symlink("..v1", dir_ + "/..data");
  fs::remove(path_);
  fs::create_symlink("..data/maglb.toml", path_);
  absl::StatusOr<ConfigWatch> w = ConfigWatch::Create(path_);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_FALSE(w->ConsumeEvents());
  Write(dir_ + "/..v1/other.toml", "x");
  EXPECT_FALSE(w->ConsumeEvents());
  Write(dir_ + "/..v1/maglb.toml", "v1b");  // in place, at the target
  EXPECT_TRUE(w->ConsumeEvents());

  fs::create_directory(dir_ + "/..v2");
  Write(dir_ + "/..v2/maglb.toml", "v2");
  EXPECT_FALSE(w->ConsumeEvents());  // not yet what the path resolves to
  fs::create_directory_symlink("..v2", dir_ + "/..data_tmp");
  fs::rename(dir_ + "/..data_tmp", dir_ + "/..data");
  EXPECT_TRUE(w->ConsumeEvents());
  fs::remove_all(dir_ + "/..v1");
  w->ConsumeEvents();  // the old target's deletion: either answer is fine
  Write(dir_ + "/..v2/other.toml", "x");
  EXPECT_FALSE(w->ConsumeEvents());
  Write(dir_ + "/..v2/maglb.toml", "v2b");  // the new target is watched
  EXPECT_TRUE(w->ConsumeEvents());
  std::ifstream in(path_);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "v2b");
}

// When the kernel's queue overflows, events (perhaps the config file's) were
// dropped: the watch must answer "reload".
TEST_F(ConfigWatchTest, QueueOverflowMeansReload) {
  long max_events = 16384;
  if (std::FILE* f = std::fopen("/proc/sys/fs/inotify/max_queued_events", "r")) {
    if (std::fscanf(f, "%ld", &max_events) != 1) max_events = 16384;
    std::fclose(f);
  }
  if (max_events > 200000) GTEST_SKIP() << "max_queued_events " << max_events << " too large";
  absl::StatusOr<ConfigWatch> w = ConfigWatch::Create(path_);
  ASSERT_TRUE(w.ok()) << w.status();
  // Writes closed in two other files, alternating (the kernel merges
  // identical consecutive events): more than the queue holds.
  for (long i = 0; i < max_events + 100; ++i) {
    int fd = open((dir_ + (i % 2 == 0 ? "/a.toml" : "/b.toml")).c_str(),
                  O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    close(fd);
  }
  EXPECT_TRUE(w->ConsumeEvents());
  EXPECT_FALSE(w->ConsumeEvents());
}

TEST(ConfigWatch, ReportsAMissingDirectory) {
  absl::StatusOr<ConfigWatch> w = ConfigWatch::Create("/nonexistent-maglb-dir/maglb.toml");
  ASSERT_FALSE(w.ok());
  EXPECT_NE(std::string(w.status().message()).find("/nonexistent-maglb-dir"), std::string::npos);
}

}  // namespace
}  // namespace maglb
