// Rtnetlink's VIP routes ([announce]) against the real kernel, read back by
// iproute2 (`ip -j route show table N`), a dissector that is not ours. Each
// test runs in a fresh network namespace of its own: SetUp unshares the test
// process into one (threads and children it starts share it) and TearDown
// goes back to the original by setns, after which the fresh one, with every
// route in it, is gone. Needs root (CAP_NET_ADMIN); skipped without it.
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataplane/rtnetlink.h"
#include "dataplane/rtnetlink_internal.h"
#include "gtest/gtest.h"
#include "kernel_routes.h"

namespace maglb {
namespace {

using testing::Shell;

constexpr uint32_t kTable = 4242;
constexpr uint8_t kProto = 249;

IpAddress Ip(const char* text) { return *IpAddress::Parse(text); }

// A route as iproute2 shows it: dst, dev, protocol, scope ("" for universe,
// which ip leaves out: the only scope an IPv6 route has).
using Shown = std::tuple<std::string, std::string, std::string, std::string>;

// Every route of both families in `table`, read by iproute2. From a dump of
// every table: asked for one table that does not exist, ip fails.
std::set<Shown> RoutesIn(uint32_t table) {
  std::set<Shown> routes;
  for (const nlohmann::json& r : testing::RouteObjectsIn(table)) {
    routes.emplace(r.value("dst", ""), r.value("dev", ""), r.value("protocol", ""), r.value("scope", ""));
  }
  return routes;
}

// Adds routes `prefix`.N/32 for N in 0 .. count-1 (count at most 65536) with
// iproute2, in one batch.
void AddRoutes(int count, const std::string& prefix, uint32_t table, const char* proto) {
  std::string batch;
  for (int i = 0; i < count; ++i) {
    batch += "route add " + prefix + "." + std::to_string(i / 256) + "." + std::to_string(i % 256) +
             "/32 dev lo table " + std::to_string(table) + " proto " + proto + "\n";
  }
  FILE* ip = popen("ip -batch -", "w");
  ASSERT_NE(ip, nullptr);
  fwrite(batch.data(), 1, batch.size(), ip);
  ASSERT_EQ(pclose(ip), 0);
}

// Sends a request of someone else's (sequence number `seq`, not Rtnetlink's)
// on Rtnetlink's own socket: its answer is then queued in Rtnetlink's way.
void SendForeign(int fd, uint16_t type, uint16_t flags, uint32_t seq, const char* dst, uint32_t table) {
  char buf[512] = {};
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf);
  nlh->nlmsg_type = type;
  nlh->nlmsg_flags = NLM_F_REQUEST | flags;
  nlh->nlmsg_seq = seq;
  auto* rtm = static_cast<rtmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(rtmsg)));
  rtm->rtm_family = dst == nullptr ? AF_UNSPEC : AF_INET;
  if (dst != nullptr) {
    rtm->rtm_dst_len = 32;
    rtm->rtm_protocol = kProto;
    rtm->rtm_type = RTN_UNICAST;
    rtm->rtm_scope = type == RTM_DELROUTE ? RT_SCOPE_NOWHERE : RT_SCOPE_LINK;
    mnl_attr_put_u32(nlh, RTA_TABLE, table);
    const IpAddress a = *IpAddress::Parse(dst);
    mnl_attr_put(nlh, RTA_DST, 4, a.bytes.data());
    mnl_attr_put_u32(nlh, RTA_OIF, if_nametoindex("lo"));
  }
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  ASSERT_EQ(sendto(fd, nlh, nlh->nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel)),
            static_cast<ssize_t>(nlh->nlmsg_len))
      << std::strerror(errno);
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
  AddRoutes(2000, "10.110", kTable, "249");
  ASSERT_EQ(RoutesIn(kTable).size(), 2000u);
  absl::StatusOr<int> flushed = nl().FlushRoutes(kTable, kProto);
  ASSERT_TRUE(flushed.ok()) << flushed.status();
  EXPECT_EQ(*flushed, 2000);
  EXPECT_TRUE(RoutesIn(kTable).empty());
}

// After a flush of many batches the socket is clean: the requests that
// follow get their own answers.
TEST_F(RtnetlinkRouteTest, RequestsAfterAFlushOfManyBatchesGetTheirOwnAnswers) {
  AddRoutes(3000, "10.110", kTable, "249");
  absl::StatusOr<int> flushed = nl().FlushRoutes(kTable, kProto);
  ASSERT_TRUE(flushed.ok()) << flushed.status();
  EXPECT_EQ(*flushed, 3000);
  ASSERT_TRUE(nl().ReplaceRoute(kTable, kProto, lo_, Ip("10.100.0.1"), 32).ok());
  EXPECT_FALSE(nl().ReplaceRoute(kTable, kProto, 999999, Ip("10.100.0.2"), 32).ok());
  ASSERT_TRUE(nl().ReplaceRoute(kTable, kProto, lo_, Ip("10.100.0.3"), 32).ok());
  ASSERT_TRUE(nl().DeleteRoute(kTable, kProto, lo_, Ip("10.100.0.1"), 32).ok());
  EXPECT_EQ(RoutesIn(kTable), (std::set<Shown>{{"10.100.0.3", "lo", "249", "link"}}));
}

// Answers to requests that are not Rtnetlink's (an acknowledgement, an error)
// wait in its socket: each request still reads its own answer, not theirs.
TEST_F(RtnetlinkRouteTest, ForeignAnswersInTheSocketAreNotTakenForOurs) {
  const int fd = nl().fd_for_test();
  // A success (a route added in another table) and an error (ESRCH: deleting
  // a route that is not there), both acknowledged with a sequence number of
  // their own.
  SendForeign(fd, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK, 1, "10.100.0.50", 4243);
  SendForeign(fd, RTM_DELROUTE, NLM_F_ACK, 2, "10.100.0.51", 4243);
  // Fails on its own: the success queued before it is not its answer.
  absl::Status s = nl().ReplaceRoute(kTable, kProto, 999999, Ip("10.100.0.1"), 32);
  EXPECT_NE(s.message().find("No such device"), std::string::npos) << s;
  SendForeign(fd, RTM_DELROUTE, NLM_F_ACK, 3, "10.100.0.51", 4243);
  SendForeign(fd, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK, 4, "10.100.0.52", 4243);
  // Succeeds on its own: the error queued before it is not its answer.
  s = nl().ReplaceRoute(kTable, kProto, lo_, Ip("10.100.0.1"), 32);
  EXPECT_TRUE(s.ok()) << s;
  SendForeign(fd, RTM_DELROUTE, NLM_F_ACK, 5, "10.100.0.51", 4243);
  s = nl().ReplaceRoute(kTable, kProto, lo_, Ip("10.100.0.2"), 32);
  EXPECT_TRUE(s.ok()) << s;
  s = nl().DeleteRoute(kTable, kProto, lo_, Ip("10.100.0.1"), 32);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(RoutesIn(kTable), (std::set<Shown>{{"10.100.0.2", "lo", "249", "link"}}));
  EXPECT_EQ(RoutesIn(4243), (std::set<Shown>{{"10.100.0.50", "lo", "249", "link"},
                                             {"10.100.0.52", "lo", "249", "link"}}));
}

// A dump someone else started on the socket (thousands of routes: many
// batches, the kernel queues each as the previous one is read) is read past
// by requests and waited out by a flush (the kernel runs one dump at a time
// on a socket: it answers EBUSY to the second).
TEST_F(RtnetlinkRouteTest, AForeignDumpInTheSocketIsSkippedAndOutwaited) {
  AddRoutes(2000, "10.110", kTable, "249");
  AddRoutes(2000, "10.120", 4243, "250");
  const int fd = nl().fd_for_test();
  SendForeign(fd, RTM_GETROUTE, NLM_F_DUMP, 7, nullptr, 0);
  absl::StatusOr<int> flushed = nl().FlushRoutes(kTable, kProto);
  ASSERT_TRUE(flushed.ok()) << flushed.status();
  EXPECT_EQ(*flushed, 2000);
  SendForeign(fd, RTM_GETROUTE, NLM_F_DUMP, 8, nullptr, 0);
  absl::Status s = nl().ReplaceRoute(kTable, kProto, lo_, Ip("10.100.0.1"), 32);
  EXPECT_TRUE(s.ok()) << s;
  s = nl().ReplaceRoute(kTable, kProto, 999999, Ip("10.100.0.2"), 32);
  EXPECT_NE(s.message().find("No such device"), std::string::npos) << s;
  s = nl().ReplaceRoute(kTable, kProto, lo_, Ip("10.100.0.3"), 32);
  EXPECT_TRUE(s.ok()) << s;
  s = nl().DeleteRoute(kTable, kProto, lo_, Ip("10.100.0.3"), 32);
  EXPECT_TRUE(s.ok()) << s;
  // The foreign dump may still be running here: the flush outwaits it.
  flushed = nl().FlushRoutes(4243, 250);
  ASSERT_TRUE(flushed.ok()) << flushed.status();
  EXPECT_EQ(*flushed, 2000);
  EXPECT_EQ(RoutesIn(kTable), (std::set<Shown>{{"10.100.0.1", "lo", "249", "link"}}));
  EXPECT_TRUE(RoutesIn(4243).empty());
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

// --- What the socket receives, read from hand-built datagrams: no root, no
// kernel. The messages a kernel would not send, or sends rarely
// (NLM_F_DUMP_INTR), are made here.

using rtnetlink_internal::Dump;
using rtnetlink_internal::FindAck;
using rtnetlink_internal::ParseRoute;
using rtnetlink_internal::ReadDumpBatch;

constexpr uint32_t kSeq = 1000;
constexpr uint32_t kPort = 77;

// One datagram of netlink messages, each padded to NLMSG_ALIGNTO as the
// kernel puts them.
class Datagram {
 public:
  // A message of `type` with `payload` bytes of payload (zeros unless given).
  nlmsghdr* Add(uint16_t type, uint32_t seq, size_t payload, const void* data = nullptr, uint16_t flags = 0,
                uint32_t port = kPort) {
    const size_t at = bytes_.size();
    bytes_.resize(at + NLMSG_ALIGN(NLMSG_HDRLEN + payload), 0);
    auto* nlh = reinterpret_cast<nlmsghdr*>(bytes_.data() + at);
    nlh->nlmsg_len = static_cast<uint32_t>(NLMSG_HDRLEN + payload);
    nlh->nlmsg_type = type;
    nlh->nlmsg_flags = flags;
    nlh->nlmsg_seq = seq;
    nlh->nlmsg_pid = port;
    if (data != nullptr) std::memcpy(bytes_.data() + at + NLMSG_HDRLEN, data, payload);
    return nlh;
  }
  // A route of kProto in kTable, 10.100.0.<last>/32.
  void Route(uint32_t seq, uint8_t last, uint16_t flags = NLM_F_MULTI) {
    char buf[256] = {};
    nlmsghdr* nlh = mnl_nlmsg_put_header(buf);
    auto* rtm = static_cast<rtmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(rtmsg)));
    rtm->rtm_family = AF_INET;
    rtm->rtm_dst_len = 32;
    rtm->rtm_protocol = kProto;
    rtm->rtm_type = RTN_UNICAST;
    rtm->rtm_table = RT_TABLE_UNSPEC;
    mnl_attr_put_u32(nlh, RTA_TABLE, kTable);
    const uint8_t dst[4] = {10, 100, 0, last};
    mnl_attr_put(nlh, RTA_DST, 4, dst);
    mnl_attr_put_u32(nlh, RTA_OIF, 1);
    Add(RTM_NEWROUTE, seq, nlh->nlmsg_len - NLMSG_HDRLEN, buf + NLMSG_HDRLEN, flags);
  }
  void Done(uint32_t seq, int error, uint16_t flags = NLM_F_MULTI) { Add(NLMSG_DONE, seq, sizeof(error), &error, flags); }
  void Error(uint32_t seq, int error, uint32_t port = kPort) {
    nlmsgerr e{};
    e.error = error;
    Add(NLMSG_ERROR, seq, sizeof(e), &e, 0, port);
  }
  const char* data() const { return bytes_.data(); }
  size_t size() const { return bytes_.size(); }

 private:
  std::vector<char> bytes_;
};

Dump NewDump() {
  Dump d;
  d.seq = kSeq;
  d.port_id = kPort;
  d.table = kTable;
  d.protocol = kProto;
  return d;
}

TEST(RtnetlinkParse, ARouteMessageTooShortForItsRtmsgIsSkipped) {
  for (size_t payload : {size_t{0}, size_t{1}, sizeof(rtmsg) - 1}) {
    SCOPED_TRACE(payload);
    // Exactly as long as the message, so that a read past its end leaves it.
    std::vector<char> bytes(NLMSG_HDRLEN + payload, 0);
    auto* nlh = reinterpret_cast<nlmsghdr*>(bytes.data());
    nlh->nlmsg_len = static_cast<uint32_t>(bytes.size());
    nlh->nlmsg_type = RTM_NEWROUTE;
    EXPECT_FALSE(ParseRoute(nlh, kTable, kProto).has_value());
  }
  // In a dump: skipped, the routes around it taken.
  Datagram d;
  d.Route(kSeq, 1);
  const rtmsg half{};
  d.Add(RTM_NEWROUTE, kSeq, sizeof(rtmsg) / 2, &half, NLM_F_MULTI);
  d.Route(kSeq, 2);
  d.Done(kSeq, 0);
  Dump dump = NewDump();
  ReadDumpBatch(d.data(), d.size(), &dump);
  ASSERT_EQ(dump.routes.size(), 2u);
  EXPECT_EQ(dump.routes[0].dst[3], 1);
  EXPECT_EQ(dump.routes[1].dst[3], 2);
  EXPECT_TRUE(dump.done);
  EXPECT_EQ(dump.error, 0);
}

TEST(RtnetlinkParse, ARouteIsParsed) {
  Datagram d;
  d.Route(kSeq, 9);
  std::optional<rtnetlink_internal::DumpedRoute> r =
      ParseRoute(reinterpret_cast<const nlmsghdr*>(d.data()), kTable, kProto);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->has_dst);
  EXPECT_EQ(r->dst[0], 10);
  EXPECT_EQ(r->dst[3], 9);
  EXPECT_EQ(r->oif, 1u);
  EXPECT_EQ(r->table, kTable);
  EXPECT_FALSE(ParseRoute(reinterpret_cast<const nlmsghdr*>(d.data()), kTable + 1, kProto).has_value());
  EXPECT_FALSE(ParseRoute(reinterpret_cast<const nlmsghdr*>(d.data()), kTable, kProto + 1).has_value());
}

TEST(RtnetlinkParse, ADumpSkipsOthersMessagesAndEndsOnlyAtItsOwnDone) {
  Datagram d;
  d.Route(kSeq - 1, 1);  // an earlier dump's
  d.Route(kSeq, 2);
  d.Done(kSeq - 1, 0);  // an earlier dump's end: not ours
  d.Error(kSeq + 1, -EBUSY);
  d.Route(kSeq, 3);
  Dump dump = NewDump();
  ReadDumpBatch(d.data(), d.size(), &dump);
  ASSERT_EQ(dump.routes.size(), 2u);
  EXPECT_FALSE(dump.done);
  EXPECT_EQ(dump.error, 0);
  // Our message from another port is not ours either.
  Datagram other_port;
  other_port.Add(NLMSG_DONE, kSeq, sizeof(int), nullptr, NLM_F_MULTI, kPort + 1);
  ReadDumpBatch(other_port.data(), other_port.size(), &dump);
  EXPECT_FALSE(dump.done);
  Datagram end;
  end.Route(kSeq, 4);
  end.Done(kSeq, 0);
  end.Route(kSeq, 5);  // past the end: not read
  ReadDumpBatch(end.data(), end.size(), &dump);
  EXPECT_TRUE(dump.done);
  EXPECT_EQ(dump.error, 0);
  EXPECT_EQ(dump.routes.size(), 3u);
  EXPECT_FALSE(dump.interrupted);
}

TEST(RtnetlinkParse, AnInterruptedDumpIsReadToItsEndAndSaysSo) {
  Datagram d;
  d.Route(kSeq, 1);
  d.Route(kSeq, 2, NLM_F_MULTI | NLM_F_DUMP_INTR);
  d.Route(kSeq, 3);
  Dump dump = NewDump();
  ReadDumpBatch(d.data(), d.size(), &dump);
  EXPECT_TRUE(dump.interrupted);
  EXPECT_FALSE(dump.done);
  Datagram end;
  end.Done(kSeq, 0, NLM_F_MULTI | NLM_F_DUMP_INTR);
  ReadDumpBatch(end.data(), end.size(), &dump);
  EXPECT_TRUE(dump.done);
  EXPECT_EQ(dump.error, 0);
  EXPECT_EQ(dump.routes.size(), 3u);
  // Flagged on the end alone.
  Dump dump2 = NewDump();
  ReadDumpBatch(end.data(), end.size(), &dump2);
  EXPECT_TRUE(dump2.interrupted);
  EXPECT_TRUE(dump2.done);
}

TEST(RtnetlinkParse, ADumpThatFailsEndsWithItsErrno) {
  struct Case {
    const char* what;
    void (*make)(Datagram&);
    int error;
  };
  const Case cases[] = {
      {"DONE with -EINTR", [](Datagram& d) { d.Done(kSeq, -EINTR); }, EINTR},
      {"NLMSG_ERROR -EBUSY", [](Datagram& d) { d.Error(kSeq, -EBUSY); }, EBUSY},
      {"NLMSG_ERROR -EINVAL", [](Datagram& d) { d.Error(kSeq, -EINVAL); }, EINVAL},
      // Hostile: no errno a kernel sends.
      {"DONE with INT_MIN", [](Datagram& d) { d.Done(kSeq, INT32_MIN); }, EPROTO},
      {"DONE with 5", [](Datagram& d) { d.Done(kSeq, 5); }, EPROTO},
      {"an NLMSG_ERROR too short", [](Datagram& d) { d.Add(NLMSG_ERROR, kSeq, 2); }, EBADMSG},
      // A DONE without its errno (older kernels): a dump that ended well.
      {"DONE without payload", [](Datagram& d) { d.Add(NLMSG_DONE, kSeq, 0, nullptr, NLM_F_MULTI); }, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Datagram d;
    d.Route(kSeq, 1);
    c.make(d);
    Dump dump = NewDump();
    ReadDumpBatch(d.data(), d.size(), &dump);
    EXPECT_TRUE(dump.done);
    EXPECT_EQ(dump.error, c.error);
  }
}

TEST(RtnetlinkParse, AMessageLongerThanItsDatagramEndsTheReading) {
  Datagram d;
  nlmsghdr* nlh = d.Add(RTM_NEWROUTE, kSeq, sizeof(rtmsg));
  nlh->nlmsg_len = 1 << 20;
  Dump dump = NewDump();
  ReadDumpBatch(d.data(), d.size(), &dump);
  EXPECT_TRUE(dump.routes.empty());
  EXPECT_FALSE(dump.done);
  Datagram ack;
  nlh = ack.Add(NLMSG_ERROR, kSeq, sizeof(nlmsgerr));
  nlh->nlmsg_len = 1 << 20;
  EXPECT_FALSE(FindAck(ack.data(), ack.size(), kSeq, kPort).has_value());
}

TEST(RtnetlinkParse, AnAckIsFoundAmongOthersAnswers) {
  {
    Datagram d;
    d.Error(kSeq - 1, 0);                // an earlier request's success
    d.Error(kSeq, -ENODEV, kPort + 1);   // another port's
    d.Route(kSeq - 2, 1);                // an earlier dump's
    EXPECT_FALSE(FindAck(d.data(), d.size(), kSeq, kPort).has_value());
    d.Error(kSeq, -ENODEV);
    EXPECT_EQ(FindAck(d.data(), d.size(), kSeq, kPort), ENODEV);
  }
  {
    Datagram d;
    d.Error(kSeq - 1, -ESRCH);
    d.Error(kSeq, 0);
    EXPECT_EQ(FindAck(d.data(), d.size(), kSeq, kPort), 0);
  }
  {
    Datagram d;  // the kernel's answers on some old paths carry port 0
    d.Error(kSeq, -EEXIST, 0);
    EXPECT_EQ(FindAck(d.data(), d.size(), kSeq, kPort), EEXIST);
  }
  {
    Datagram d;
    d.Error(kSeq, INT32_MIN);
    EXPECT_EQ(FindAck(d.data(), d.size(), kSeq, kPort), EPROTO);
  }
  {
    Datagram d;
    d.Add(NLMSG_ERROR, kSeq, sizeof(int));  // too short for its nlmsgerr
    EXPECT_EQ(FindAck(d.data(), d.size(), kSeq, kPort), EBADMSG);
  }
}

}  // namespace
}  // namespace maglb
