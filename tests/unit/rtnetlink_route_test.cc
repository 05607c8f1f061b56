// Rtnetlink's VIP routes ([announce]) against the real kernel, read back by
// iproute2 (`ip -j route show table N`), a dissector that is not ours. Each
// test runs in a fresh network namespace of its own: SetUp unshares the test
// process into one (threads and children it starts share it) and TearDown
// goes back to the original by setns, after which the fresh one, with every
// route in it, is gone. Needs root (CAP_NET_ADMIN); skipped without it.
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "dataplane/rtnetlink.h"
#include "gtest/gtest.h"

namespace maglb {
namespace {

constexpr uint32_t kTable = 4242;
constexpr uint8_t kProto = 249;

IpAddress Ip(const char* text) { return *IpAddress::Parse(text); }

// Runs a shell command; its standard output, and its exit status in *rc.
std::string Shell(const std::string& command, int* rc = nullptr) {
  FILE* p = popen((command + " 2>/dev/null").c_str(), "r");
  if (p == nullptr) return "";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  if (rc != nullptr) *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// A route as iproute2 shows it: dst, dev, protocol, scope ("" for universe,
// which ip leaves out: the only scope an IPv6 route has).
using Shown = std::tuple<std::string, std::string, std::string, std::string>;

// Every route of both families in `table`, read by iproute2. From a dump of
// every table: asked for one table that does not exist, ip fails.
std::set<Shown> RoutesIn(uint32_t table) {
  std::set<Shown> routes;
  for (const char* family : {"-4", "-6"}) {
    int rc = 0;
    const std::string out = Shell(std::string("ip -j ") + family + " route show table all", &rc);
    EXPECT_EQ(rc, 0) << "ip " << family << " route show table all";
    const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
    EXPECT_TRUE(j.is_array()) << out;
    if (!j.is_array()) continue;
    for (const auto& r : j) {
      // ip leaves out the main table's name, and names 253 .. 255.
      const std::string shown_table = r.value("table", "main");
      const std::string wanted = table == 254 ? "main" : std::to_string(table);
      if (shown_table != wanted) continue;
      routes.emplace(r.value("dst", ""), r.value("dev", ""), r.value("protocol", ""), r.value("scope", ""));
    }
  }
  return routes;
}

class RtnetlinkRouteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: routes are set in a network namespace of its own";
    original_ = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(original_, 0) << std::strerror(errno);
    if (unshare(CLONE_NEWNET) != 0) GTEST_SKIP() << "unshare(CLONE_NEWNET): " << std::strerror(errno);
    int rc = 0;
    Shell("ip link set lo up", &rc);
    ASSERT_EQ(rc, 0) << "ip link set lo up (is iproute2 installed?)";
    lo_ = static_cast<int>(if_nametoindex("lo"));
    ASSERT_GT(lo_, 0);
    absl::StatusOr<Rtnetlink> nl = Rtnetlink::Open();
    ASSERT_TRUE(nl.ok()) << nl.status();
    nl_.emplace(*std::move(nl));
  }
  void TearDown() override {
    nl_.reset();
    if (original_ >= 0) {
      EXPECT_EQ(setns(original_, CLONE_NEWNET), 0) << std::strerror(errno);
      close(original_);
    }
  }

  Rtnetlink& nl() { return *nl_; }

  int original_ = -1;
  int lo_ = 0;
  std::optional<Rtnetlink> nl_;
};

TEST_F(RtnetlinkRouteTest, ReplaceAddsARouteOfEachFamilyWithItsProtocolInItsTable) {
  ASSERT_TRUE(nl().ReplaceRoute(kTable, kProto, lo_, Ip("10.100.0.1"), 32).ok());
  ASSERT_TRUE(nl().ReplaceRoute(kTable, kProto, lo_, Ip("2001:db8::1"), 128).ok());
  EXPECT_EQ(RoutesIn(kTable), (std::set<Shown>{{"10.100.0.1", "lo", "249", "link"},
                                               {"2001:db8::1", "lo", "249", ""}}));
  // Nothing in the main table: these routes are for the BGP daemon only.
  EXPECT_TRUE(RoutesIn(254).empty());
}

TEST_F(RtnetlinkRouteTest, ReplaceIsIdempotent) {
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(nl().ReplaceRoute(kTable, kProto, lo_, Ip("10.100.0.1"), 32).ok());
    ASSERT_TRUE(nl().ReplaceRoute(kTable, kProto, lo_, Ip("2001:db8::1"), 128).ok());
  }
  EXPECT_EQ(RoutesIn(kTable).size(), 2u);
}

TEST_F(RtnetlinkRouteTest, ReplaceTakesOverARouteOfAnotherProtocol) {
  // The same prefix set by hand (proto static): replaced, one route left.
  ASSERT_EQ(system("ip route add 10.100.0.1/32 dev lo table 4242 proto static"), 0);
  ASSERT_TRUE(nl().ReplaceRoute(kTable, kProto, lo_, Ip("10.100.0.1"), 32).ok());
  EXPECT_EQ(RoutesIn(kTable), (std::set<Shown>{{"10.100.0.1", "lo", "249", "link"}}));
}

TEST_F(RtnetlinkRouteTest, DeleteRemovesItAndAGoneRouteIsNoError) {
  ASSERT_TRUE(nl().ReplaceRoute(kTable, kProto, lo_, Ip("10.100.0.1"), 32).ok());
  ASSERT_TRUE(nl().ReplaceRoute(kTable, kProto, lo_, Ip("10.100.0.2"), 32).ok());
  ASSERT_TRUE(nl().ReplaceRoute(kTable, kProto, lo_, Ip("2001:db8::1"), 128).ok());
  EXPECT_TRUE(nl().DeleteRoute(kTable, kProto, lo_, Ip("10.100.0.1"), 32).ok());
  EXPECT_TRUE(nl().DeleteRoute(kTable, kProto, lo_, Ip("2001:db8::1"), 128).ok());
  EXPECT_EQ(RoutesIn(kTable), (std::set<Shown>{{"10.100.0.2", "lo", "249", "link"}}));
  // Again: already gone.
  EXPECT_TRUE(nl().DeleteRoute(kTable, kProto, lo_, Ip("10.100.0.1"), 32).ok());
  EXPECT_TRUE(nl().DeleteRoute(kTable, kProto, lo_, Ip("2001:db8::1"), 128).ok());
  // In a table that does not exist.
  EXPECT_TRUE(nl().DeleteRoute(777, kProto, lo_, Ip("10.100.0.2"), 32).ok());
  EXPECT_TRUE(nl().DeleteRoute(777, kProto, lo_, Ip("2001:db8::1"), 128).ok());
  EXPECT_EQ(RoutesIn(kTable).size(), 1u);
}

TEST_F(RtnetlinkRouteTest, DeleteLeavesARouteOfAnotherProtocol) {
  ASSERT_EQ(system("ip route add 10.100.0.1/32 dev lo table 4242 proto static"), 0);
  ASSERT_EQ(system("ip -6 route add 2001:db8::1/128 dev lo table 4242 proto 250"), 0);
  EXPECT_TRUE(nl().DeleteRoute(kTable, kProto, lo_, Ip("10.100.0.1"), 32).ok());
  EXPECT_TRUE(nl().DeleteRoute(kTable, kProto, lo_, Ip("2001:db8::1"), 128).ok());
  EXPECT_EQ(RoutesIn(kTable), (std::set<Shown>{{"10.100.0.1", "lo", "static", "link"},
                                               {"2001:db8::1", "lo", "250", ""}}));
}

TEST_F(RtnetlinkRouteTest, FlushDeletesOnlyThatProtocolInThatTable) {
  for (const char* a : {"10.100.0.1", "10.100.0.2", "10.100.0.3"}) {
    ASSERT_TRUE(nl().ReplaceRoute(kTable, kProto, lo_, Ip(a), 32).ok());
  }
  ASSERT_TRUE(nl().ReplaceRoute(kTable, kProto, lo_, Ip("2001:db8::1"), 128).ok());
  ASSERT_TRUE(nl().ReplaceRoute(kTable, kProto, lo_, Ip("2001:db8::2"), 128).ok());
  // A shorter prefix and a route of a type other than unicast (what an
  // earlier or a future run might leave): flushed too.
  ASSERT_TRUE(nl().ReplaceRoute(kTable, kProto, lo_, Ip("10.101.0.0"), 16).ok());
  ASSERT_EQ(system("ip route add blackhole 10.102.0.0/24 table 4242 proto 249"), 0);
  // Others': another protocol in the table, the protocol in other tables.
  ASSERT_EQ(system("ip route add 10.100.0.9/32 dev lo table 4242 proto static"), 0);
  ASSERT_EQ(system("ip -6 route add 2001:db8::9/128 dev lo table 4242 proto 250"), 0);
  ASSERT_TRUE(nl().ReplaceRoute(4243, kProto, lo_, Ip("10.100.0.1"), 32).ok());
  ASSERT_TRUE(nl().ReplaceRoute(42, kProto, lo_, Ip("10.100.0.1"), 32).ok());
  ASSERT_EQ(system("ip route add 10.100.0.1/32 dev lo proto 249"), 0);  // main

  absl::StatusOr<int> flushed = nl().FlushRoutes(kTable, kProto);
  ASSERT_TRUE(flushed.ok()) << flushed.status();
  EXPECT_EQ(*flushed, 7);
  EXPECT_EQ(RoutesIn(kTable), (std::set<Shown>{{"10.100.0.9", "lo", "static", "link"},
                                               {"2001:db8::9", "lo", "250", ""}}));
  EXPECT_EQ(RoutesIn(4243), (std::set<Shown>{{"10.100.0.1", "lo", "249", "link"}}));
  EXPECT_EQ(RoutesIn(42), (std::set<Shown>{{"10.100.0.1", "lo", "249", "link"}}));
  EXPECT_EQ(RoutesIn(254), (std::set<Shown>{{"10.100.0.1", "lo", "249", "link"}}));
  // Nothing left of it; a table that does not exist has none.
  flushed = nl().FlushRoutes(kTable, kProto);
  ASSERT_TRUE(flushed.ok()) << flushed.status();
  EXPECT_EQ(*flushed, 0);
  flushed = nl().FlushRoutes(777, kProto);
  ASSERT_TRUE(flushed.ok()) << flushed.status();
  EXPECT_EQ(*flushed, 0);
}

TEST_F(RtnetlinkRouteTest, FlushDeletesMoreThanOneDumpBatch) {
  // ~100 bytes a route: 2000 routes are several 32 KiB batches.
  std::string batch;
  for (int i = 0; i < 2000; ++i) {
    batch += "route add 10.110." + std::to_string(i / 256) + "." + std::to_string(i % 256) +
             "/32 dev lo table 4242 proto 249\n";
  }
  FILE* ip = popen("ip -batch -", "w");
  ASSERT_NE(ip, nullptr);
  fwrite(batch.data(), 1, batch.size(), ip);
  ASSERT_EQ(pclose(ip), 0);
  ASSERT_EQ(RoutesIn(kTable).size(), 2000u);
  absl::StatusOr<int> flushed = nl().FlushRoutes(kTable, kProto);
  ASSERT_TRUE(flushed.ok()) << flushed.status();
  EXPECT_EQ(*flushed, 2000);
  EXPECT_TRUE(RoutesIn(kTable).empty());
}

TEST_F(RtnetlinkRouteTest, TableIdsPastRtmTableTravelInRtaTable) {
  // rtm_table holds 8 bits: 298 and 65578 are 42 there, a table of their own.
  const uint32_t tables[] = {1, 252, 256, 298, 65578, 4294967295};
  for (uint32_t table : tables) {
    SCOPED_TRACE(table);
    ASSERT_TRUE(nl().ReplaceRoute(table, kProto, lo_, Ip("10.100.0.1"), 32).ok());
    ASSERT_TRUE(nl().ReplaceRoute(table, kProto, lo_, Ip("2001:db8::1"), 128).ok());
    EXPECT_EQ(RoutesIn(table).size(), 2u);
  }
  EXPECT_TRUE(RoutesIn(42).empty());
  for (uint32_t table : tables) {
    absl::StatusOr<int> flushed = nl().FlushRoutes(table, kProto);
    ASSERT_TRUE(flushed.ok()) << flushed.status();
    EXPECT_EQ(*flushed, 2) << table;
    EXPECT_TRUE(RoutesIn(table).empty()) << table;
  }
}

// maglb's routes are on its kernel interface: when the interface goes (maglb
// died), they go with it, both families.
TEST_F(RtnetlinkRouteTest, RoutesGoWithTheirInterface) {
  if (system("ip link add mlbt0 type veth peer name mlbt1 2>/dev/null") != 0) {
    GTEST_SKIP() << "cannot create a veth pair here";
  }
  ASSERT_EQ(system("ip link set mlbt0 up && ip link set mlbt1 up"), 0);
  const int ifindex = static_cast<int>(if_nametoindex("mlbt0"));
  ASSERT_GT(ifindex, 0);
  ASSERT_TRUE(nl().ReplaceRoute(kTable, kProto, ifindex, Ip("10.100.0.1"), 32).ok());
  ASSERT_TRUE(nl().ReplaceRoute(kTable, kProto, ifindex, Ip("2001:db8::1"), 128).ok());
  ASSERT_TRUE(nl().ReplaceRoute(kTable, kProto, lo_, Ip("10.100.0.2"), 32).ok());
  EXPECT_EQ(RoutesIn(kTable).size(), 3u);
  ASSERT_EQ(system("ip link del mlbt0"), 0);
  EXPECT_EQ(RoutesIn(kTable), (std::set<Shown>{{"10.100.0.2", "lo", "249", "link"}}));
}

// The kernel refuses a route on an interface that is down (and drops those it
// had when the interface goes down): the caller adds them once it is up.
TEST_F(RtnetlinkRouteTest, ARouteNeedsItsInterfaceUp) {
  ASSERT_TRUE(nl().ReplaceRoute(kTable, kProto, lo_, Ip("10.100.0.1"), 32).ok());
  ASSERT_EQ(system("ip link set lo down"), 0);
  EXPECT_TRUE(RoutesIn(kTable).empty());
  absl::Status s = nl().ReplaceRoute(kTable, kProto, lo_, Ip("10.100.0.2"), 32);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("10.100.0.2/32"), std::string::npos) << s;
  EXPECT_FALSE(nl().ReplaceRoute(kTable, kProto, lo_, Ip("2001:db8::1"), 128).ok());
  // An interface that does not exist.
  s = nl().ReplaceRoute(kTable, kProto, 999999, Ip("10.100.0.1"), 32);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("No such device"), std::string::npos) << s;
}

TEST_F(RtnetlinkRouteTest, RefusesHostileArgumentsBeforeAskingTheKernel) {
  struct Bad {
    uint32_t table;
    uint8_t protocol;
    int ifindex;
    const char* address;
    uint8_t prefix_len;
    const char* needle;
  };
  const Bad bad[] = {
      {0, kProto, 1, "10.100.0.1", 32, "routing table 0 names no table"},
      {kTable, 0, 1, "10.100.0.1", 32, "route protocol 0 is the kernel's"},
      {kTable, 4, 1, "10.100.0.1", 32, "route protocol 4 is the kernel's"},
      {kTable, kProto, 0, "10.100.0.1", 32, "interface index 0 names no interface"},
      {kTable, kProto, -1, "10.100.0.1", 32, "interface index -1"},
      {kTable, kProto, 1, "10.100.0.1", 128, "10.100.0.1/128: an IPv4 prefix has at most 32 bits"},
      {kTable, kProto, 1, "10.100.0.1", 33, "at most 32 bits"},
      {kTable, kProto, 1, "2001:db8::1", 129, "an IPv6 prefix has at most 128 bits"},
      {kTable, kProto, 1, "2001:db8::1", 255, "at most 128 bits"},
      {kTable, kProto, 1, "10.100.0.1", 24, "10.100.0.1/24: the address has bits set past the prefix"},
      {kTable, kProto, 1, "2001:db8::1", 64, "bits set past the prefix"},
      {kTable, kProto, 1, "0.0.0.1", 0, "bits set past the prefix"},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.needle);
    for (bool del : {false, true}) {
      absl::Status s = del ? nl().DeleteRoute(b.table, b.protocol, b.ifindex, Ip(b.address), b.prefix_len)
                           : nl().ReplaceRoute(b.table, b.protocol, b.ifindex, Ip(b.address), b.prefix_len);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      EXPECT_NE(s.message().find(b.needle), std::string::npos) << s;
    }
  }
  absl::StatusOr<int> flushed = nl().FlushRoutes(0, kProto);
  EXPECT_EQ(flushed.status().code(), absl::StatusCode::kInvalidArgument);
  flushed = nl().FlushRoutes(kTable, 2);  // would delete the kernel's own routes
  EXPECT_EQ(flushed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(flushed.status().message().find("route protocol 2 is the kernel's"), std::string::npos);
  EXPECT_TRUE(RoutesIn(kTable).empty());
}

}  // namespace
}  // namespace maglb
