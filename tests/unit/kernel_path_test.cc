// The kernel interface's side of the pipeline (the exception path): what
// goes up to the kernel (Action::kToKernel, PacketAction::kToKernel and
// kToControlAndKernel) and what the kernel sends (Worker::ProcessFromKernel,
// tunnel probes), on frames built byte by byte.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "maglb/lb_state.h"
#include "maglb/pipeline.h"
#include "maglb/tunnel_probe.h"
#include "packet_buf.h"
#include "packet_builder.h"

namespace maglb {
namespace {

using testing::Bytes;
using testing::Eth;
using testing::Ip;
using testing::Ip4;
using testing::Ip6;
using testing::Mac;

constexpr uint64_t kSec = 1'000'000'000ULL;
constexpr uint64_t kT0 = 5000 * kSec;
const MacAddress kPortMac = Mac("02:00:00:00:00:01");  // Eth{}.dst: frames arrive for us
const MacAddress kGatewayMac = Mac("02:00:00:00:00:fe");
const MacAddress kDsrBackendMac = Mac("02:00:00:00:15:01");
// fe80::/64 + the EUI-64 of kPortMac (02 ^ 02 = 00).
const IpAddress kLinkLocal = Ip("fe80::ff:fe00:1");

VipConfig Vip(std::string name, std::string addr, Protocol proto, uint16_t port, Forwarding fwd,
              std::vector<std::string> backends, int subnet) {
  VipConfig v;
  v.name = std::move(name);
  v.address = Ip(addr);
  v.protocol = proto;
  v.port = port;
  v.forwarding = fwd;
  v.table_size = 251;
  for (const std::string& n : backends) {
    v.backends.push_back({n, Ip(absl::StrCat("203.0.", subnet, ".", v.backends.size() + 1)), 1, 0});
  }
  return v;
}

Config BaseConfig() {
  Config c;
  c.source = "kernel_path_test.toml";
  c.lb.ipv4 = Ip("192.0.2.10");
  c.lb.ipv6 = Ip("2001:db8::10");
  c.lb.gateway_v4 = Ip("192.0.2.1");
  c.lb.mtu = 1500;
  c.kernel.interface = "maglb0";
  c.neighbors.push_back({Ip("192.0.2.1"), kGatewayMac, 0});
  c.vips.push_back(Vip("web", "198.51.100.80", Protocol::kTcp, 80, Forwarding::kGre, {"a", "b", "c"}, 113));
  c.vips.push_back(Vip("dns", "198.51.100.53", Protocol::kUdp, 53, Forwarding::kIpip, {"d1", "d2"}, 114));
  VipConfig dsr = Vip("dsr", "198.51.100.90", Protocol::kTcp, 80, Forwarding::kL2Dsr, {"l1", "l2"}, 115);
  c.neighbors.push_back({dsr.backends[0].address, kDsrBackendMac, 0});
  c.neighbors.push_back({dsr.backends[1].address, Mac("02:00:00:00:15:02"), 0});
  c.vips.push_back(dsr);
  return c;
}

std::unique_ptr<const LbState> Build(const Config& c, bool kernel, const LbState* prev = nullptr) {
  LbStateOptions opts;
  opts.port_mac = kPortMac;
  opts.kernel_interface = kernel;
  auto s = BuildLbState(c, prev, opts);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

using Buf = testing::PacketBuf;

Bytes Tcp4(const std::string& src, uint16_t sport, const std::string& dst, uint16_t dport,
           const Eth& eth = {}) {
  Ip4 h;
  h.src = Ip(src);
  h.dst = Ip(dst);
  h.proto = 6;
  return testing::Frame4(h, testing::Tcp(sport, dport, 0x02), eth);
}

Bytes Udp4(const std::string& src, uint16_t sport, const std::string& dst, uint16_t dport,
           const Eth& eth = {}) {
  Ip4 h;
  h.src = Ip(src);
  h.dst = Ip(dst);
  h.proto = 17;
  return testing::Frame4(h, testing::Udp(sport, dport, 10), eth);
}

Bytes Tcp6(const std::string& src, const std::string& dst, uint16_t dport) {
  Ip6 h;
  h.src = Ip(src);
  h.dst = Ip(dst);
  h.proto = 6;
  return testing::Frame6(h, testing::Tcp(40000, dport, 0x02));
}

Bytes Icmp4(const std::string& dst, uint8_t type, uint8_t code, const Bytes& body = {}) {
  Ip4 h;
  h.src = Ip("192.0.2.1");
  h.dst = Ip(dst);
  h.proto = 1;
  return testing::Frame4(h, testing::Icmp(type, code, 0, body));
}

// An IPv4 packet of another protocol (GRE, 47) to `dst`.
Bytes Other4(const std::string& dst) {
  Ip4 h;
  h.src = Ip("192.0.2.1");
  h.dst = Ip(dst);
  h.proto = 47;
  return testing::Frame4(h, Bytes(8, 0));
}

Bytes Fragment4(const std::string& dst) {
  Ip4 h;
  h.src = Ip("192.0.2.1");
  h.dst = Ip(dst);
  h.proto = 17;
  h.df = false;
  h.mf = true;
  return testing::Frame4(h, testing::Udp(5000, 5001, 40));
}

Bytes ArpRequest() {
  return testing::Frame({.dst = Mac("ff:ff:ff:ff:ff:ff")}, 0x0806,
                        testing::Arp(1, Mac("02:00:00:00:00:02"), Ip("192.0.2.1"), MacAddress{},
                                     Ip("192.0.2.10")));
}

Bytes ArpReply() {
  return testing::Frame({}, 0x0806,
                        testing::Arp(2, Mac("02:00:00:00:00:02"), Ip("192.0.2.1"), kPortMac,
                                     Ip("192.0.2.10")));
}

// A neighbour solicitation for `target` from 2001:db8::99.
Bytes NeighborSolicitation(const IpAddress& target) {
  Ip6 h6;
  h6.src = Ip("2001:db8::99");
  h6.dst = Ip("ff02::1:ff00:10");
  h6.proto = 58;
  h6.hop_limit = 255;
  Bytes body(target.bytes.begin(), target.bytes.end());
  const Bytes opt = {1, 1, 0x02, 0, 0, 0, 0, 0x99};
  body.insert(body.end(), opt.begin(), opt.end());
  return testing::Frame6(h6, testing::Icmp(135, 0, 0, body), {.dst = Mac("33:33:ff:00:00:10")});
}

// A solicited advertisement of 2001:db8::99 to `dst`.
Bytes NeighborAdvertisement(const IpAddress& dst) {
  Ip6 h6;
  h6.src = Ip("2001:db8::99");
  h6.dst = dst;
  h6.proto = 58;
  h6.hop_limit = 255;
  const IpAddress target = Ip("2001:db8::99");
  Bytes body(target.bytes.begin(), target.bytes.end());
  const Bytes opt = {2, 1, 0x02, 0, 0, 0, 0, 0x99};
  body.insert(body.end(), opt.begin(), opt.end());
  return testing::Frame6(h6, testing::Icmp(136, 0, 0x60000000u, body));
}

class KernelPathTest : public ::testing::Test {
 protected:
  KernelPathTest() : worker_(CtConfig(), ConntrackKey::Fixed(1)) {}

  static ConntrackConfig CtConfig() {
    ConntrackConfig c;
    c.capacity = 1 << 12;
    return c;
  }

  PacketRef Run(Buf& b, const LbState& state, uint64_t now = kT0) {
    worker_.ProcessPacket(b.ref, state, now);
    return b.ref;
  }
  PacketRef FromKernel(Buf& b, const LbState& state, const TunnelProbeTable* probes = nullptr,
                       uint64_t now = kT0) {
    worker_.ProcessFromKernel(&b.ref, 1, state, now, probes);
    return b.ref;
  }
  uint64_t Drops(DropReason r) const { return worker_.counters().drops[static_cast<size_t>(r)].value(); }
  uint64_t Local(LocalCounter l) const { return worker_.counters().local[static_cast<size_t>(l)].value(); }

  Worker worker_;
  std::unique_ptr<const LbState> kernel_ = Build(BaseConfig(), true);
  std::unique_ptr<const LbState> plain_ = Build(BaseConfig(), false);
};

TEST(LinkLocalOf, IsTheModifiedEui64OfTheMac) {
  EXPECT_EQ(LinkLocalOf(Mac("02:4d:4c:00:00:0a")), Ip("fe80::4d:4cff:fe00:a"));
  EXPECT_EQ(LinkLocalOf(Mac("00:11:22:33:44:55")), Ip("fe80::211:22ff:fe33:4455"));
  EXPECT_EQ(LinkLocalOf(kPortMac), kLinkLocal);
}

TEST(KernelLocalAddresses, ComeFromTheDaemonNotTheConfig) {
  const auto with = Build(BaseConfig(), true);
  EXPECT_TRUE(with->local().kernel);
  EXPECT_EQ(with->local().v6_link_local, kLinkLocal);
  // [kernel] in the config alone makes no kernel interface (a reload adding
  // it applies at the next start).
  const auto without = Build(BaseConfig(), false);
  EXPECT_FALSE(without->local().kernel);
  EXPECT_FALSE(without->local().v6_link_local.has_value());
  // Without [lb] ipv6 the interface has no IPv6 at all.
  Config v4_only = BaseConfig();
  v4_only.lb.ipv6.reset();
  const auto v4 = Build(v4_only, true);
  EXPECT_TRUE(v4->local().kernel);
  EXPECT_FALSE(v4->local().v6_link_local.has_value());
  // A snapshot made again for new neighbours keeps it.
  EXPECT_TRUE(with->WithNeighbors({})->local().kernel);
}

// Every kind of frame to our address that maglb does not answer, and what
// Classify makes of it with and without a kernel interface.
TEST_F(KernelPathTest, UnansweredTrafficToOurAddressGoesToTheKernelElseIsDropped) {
  const std::vector<std::pair<std::string, Bytes>> frames = {
      {"tcp", Tcp4("10.1.1.1", 40000, "192.0.2.10", 22)},
      {"udp", Udp4("10.1.1.1", 40000, "192.0.2.10", 53)},
      {"other protocol", Other4("192.0.2.10")},
      {"fragment", Fragment4("192.0.2.10")},
      {"echo reply", Icmp4("192.0.2.10", 0, 0, Bytes(8, 0))},
      {"icmp error", Icmp4("192.0.2.10", 3, 3, Bytes(28, 0))},
      {"tcp6", Tcp6("2001:db8::99", "2001:db8::10", 22)},
      {"tcp6 to the link-local", Tcp6("fe80::99", "fe80::ff:fe00:1", 22)},
  };
  for (const auto& [what, frame] : frames) {
    ParsedPacket p;
    const Verdict with = Classify(frame, kernel_->matcher(), kernel_->local(), &p, &kPortMac);
    EXPECT_EQ(with.action, Action::kToKernel) << what;
    const Verdict without = Classify(frame, plain_->matcher(), plain_->local(), &p, &kPortMac);
    EXPECT_EQ(without.action, Action::kDrop) << what;
    // The link-local address is ours only with a kernel interface.
    EXPECT_EQ(without.reason, what == "tcp6 to the link-local" ? DropReason::kNoVip
                                                               : DropReason::kLocalUnsupported)
        << what;

    Buf b(frame);
    const PacketRef up = Run(b, *kernel_);
    ASSERT_EQ(up.action, PacketAction::kToKernel) << what;
    EXPECT_EQ(up.offset, 0) << what;
    EXPECT_EQ(b.Out(), frame) << what << ": passed up unchanged";
    Buf d(frame);
    EXPECT_EQ(Run(d, *plain_).action, PacketAction::kDrop) << what;
  }
  EXPECT_EQ(Drops(DropReason::kLocalUnsupported), frames.size() - 1);
  EXPECT_EQ(Drops(DropReason::kNoVip), 1u);
  // Not to our address: the same drops as ever.
  Buf elsewhere(Tcp4("10.1.1.1", 40000, "192.0.2.77", 22));
  Run(elsewhere, *kernel_);
  EXPECT_EQ(elsewhere.ref.action, PacketAction::kDrop);
  EXPECT_EQ(elsewhere.ref.reason, DropReason::kNoVip);
  // VIP traffic still goes to its backends.
  Buf vip(Tcp4("10.1.1.1", 40000, "198.51.100.80", 80));
  EXPECT_EQ(Run(vip, *kernel_).action, PacketAction::kTransmit);
}

TEST_F(KernelPathTest, MaglbStillAnswersArpEchoAndSolicitationsAlone) {
  Buf arp(ArpRequest());
  ASSERT_EQ(Run(arp, *kernel_).action, PacketAction::kReply);
  EXPECT_EQ(arp.Out()[21], 2);  // ARP reply, from maglb: the kernel never sees the request

  Ip4 h;
  h.src = Ip("10.0.0.1");
  h.dst = Ip("192.0.2.10");
  h.proto = 1;
  Buf echo(testing::Frame4(h, testing::Echo(false, 7, 1)));
  ASSERT_EQ(Run(echo, *kernel_).action, PacketAction::kReply);
  EXPECT_EQ(echo.Out()[34], 0);  // echo reply

  Buf ns(NeighborSolicitation(Ip("2001:db8::10")));
  ASSERT_EQ(Run(ns, *kernel_).action, PacketAction::kReply);
  EXPECT_EQ(ns.Out()[54], 136);
  // A solicitation for the kernel interface's link-local address: answered
  // by maglb too, for that address, with our MAC.
  Buf ns_ll(NeighborSolicitation(kLinkLocal));
  ASSERT_EQ(Run(ns_ll, *kernel_).action, PacketAction::kReply);
  const Bytes na = ns_ll.Out();
  ASSERT_GE(na.size(), 86u);
  EXPECT_EQ(na[54], 136);
  EXPECT_EQ(Bytes(na.begin() + 22, na.begin() + 38), Bytes(kLinkLocal.bytes.begin(), kLinkLocal.bytes.end()))
      << "source: the link-local address";
  EXPECT_EQ(Bytes(na.begin() + 62, na.begin() + 78), Bytes(kLinkLocal.bytes.begin(), kLinkLocal.bytes.end()))
      << "target: the link-local address";
  EXPECT_EQ(Bytes(na.begin() + 80, na.begin() + 86), Bytes(kPortMac.bytes.begin(), kPortMac.bytes.end()));
  EXPECT_EQ(Local(LocalCounter::kNdReplies), 2u);
  // Without a kernel interface there is no link-local address to answer for.
  Buf ns_plain(NeighborSolicitation(kLinkLocal));
  Run(ns_plain, *plain_);
  EXPECT_EQ(ns_plain.ref.action, PacketAction::kDrop);
  EXPECT_EQ(ns_plain.ref.reason, DropReason::kNotForUs);
}

TEST_F(KernelPathTest, ArpRepliesAndAdvertisementsGoToTheControlThreadAndTheKernel) {
  for (const Bytes& frame : {ArpReply(), NeighborAdvertisement(Ip("2001:db8::10")),
                             NeighborAdvertisement(kLinkLocal), NeighborAdvertisement(Ip("ff02::1"))}) {
    Buf with(frame);
    EXPECT_EQ(Run(with, *kernel_).action, PacketAction::kToControlAndKernel);
    EXPECT_EQ(with.Out(), frame);
    Buf without(frame);
    const PacketAction plain = Run(without, *plain_).action;
    // The advertisement to the link-local address is not ours without a kernel interface.
    if (frame != NeighborAdvertisement(kLinkLocal)) {
      EXPECT_EQ(plain, PacketAction::kToControl);
    } else {
      EXPECT_EQ(plain, PacketAction::kDrop);
    }
  }
}

TEST_F(KernelPathTest, FramesToTheKernelAreRateLimitedPerWorker) {
  Config c = BaseConfig();
  c.kernel.rate = 10;
  c.kernel.burst = 5;
  const auto state = Build(c, true);
  int up = 0, limited = 0;
  for (int i = 0; i < 20; ++i) {
    Buf b(Udp4("10.1.1.1", static_cast<uint16_t>(1000 + i), "192.0.2.10", 53));
    const PacketRef r = Run(b, *state);
    if (r.action == PacketAction::kToKernel) ++up;
    if (r.action == PacketAction::kDrop && r.reason == DropReason::kKernelRateLimited) ++limited;
  }
  EXPECT_EQ(up, 5);  // the burst
  EXPECT_EQ(limited, 15);
  EXPECT_EQ(Drops(DropReason::kKernelRateLimited), 15u);
  // The kernel's copies of ARP/ND answers have a budget of their own: the
  // flood above does not cost the kernel its neighbours.
  Buf arp(ArpReply());
  EXPECT_EQ(Run(arp, *state).action, PacketAction::kToControlAndKernel);
  EXPECT_EQ(Drops(DropReason::kKernelRateLimited), 15u);
  // Nor does it starve the replies to health probes: TCP/UDP to a mapped
  // probe port from exactly the peer it probes.
  TunnelProbeTable probes;
  const IpAddress backend = *IpAddress::Parse("10.1.1.7");
  probes.SetPeer(kTunnelProbePortBase + 5, backend.bytes.data(), false, 80);
  worker_.SetProbeTable(&probes);
  Buf reply(Tcp4("10.1.1.7", 80, "192.0.2.10", kTunnelProbePortBase + 5));
  EXPECT_EQ(Run(reply, *state).action, PacketAction::kToKernel);
  // A forged one (another source, or another source port) is not one.
  Buf forged(Tcp4("10.1.1.8", 80, "192.0.2.10", kTunnelProbePortBase + 5));
  EXPECT_EQ(Run(forged, *state).reason, DropReason::kKernelRateLimited);
  Buf forged_port(Tcp4("10.1.1.7", 81, "192.0.2.10", kTunnelProbePortBase + 5));
  EXPECT_EQ(Run(forged_port, *state).reason, DropReason::kKernelRateLimited);
  worker_.SetProbeTable(nullptr);
  // ARP requests and pings are not the kernel's: answered within [lb] reply_rate.
  Buf req(ArpRequest());
  EXPECT_EQ(Run(req, *state).action, PacketAction::kReply);
  // 300 ms later: 3 more tokens (10 a second).
  for (int i = 0; i < 4; ++i) {
    Buf b(Udp4("10.1.1.1", static_cast<uint16_t>(2000 + i), "192.0.2.10", 53));
    EXPECT_EQ(Run(b, *state, kT0 + 300'000'000).action, i < 3 ? PacketAction::kToKernel : PacketAction::kDrop)
        << i;
  }
  // Rate 0: nothing goes up.
  c.kernel.rate = 0;
  const auto none = Build(c, true);
  Worker w(CtConfig(), ConntrackKey::Fixed(2));
  Buf b(Udp4("10.1.1.1", 3000, "192.0.2.10", 53));
  w.ProcessPacket(b.ref, *none, kT0);
  EXPECT_EQ(b.ref.action, PacketAction::kDrop);
  EXPECT_EQ(b.ref.reason, DropReason::kKernelRateLimited);
}

// ---------------------------------------------------------- from the kernel

const Eth kFromKernelEth{.dst = kGatewayMac, .src = kPortMac};

TEST(TunnelProbeTableTest, MapsOnlyItsRangeAndNeverIdZero) {
  TunnelProbeTable t;
  EXPECT_FALSE(t.Get(kTunnelProbePortBase).has_value());
  EXPECT_TRUE(t.Set(kTunnelProbePortBase, 3, 7));
  EXPECT_EQ(t.Get(kTunnelProbePortBase), (TunnelProbeTable::Target{3, 7}));
  const uint16_t last = kTunnelProbePortBase + kTunnelProbePorts - 1;
  EXPECT_TRUE(t.Set(last, 0xFFFFFFFFu, 0xFFFFFFFEu));
  EXPECT_EQ(t.Get(last), (TunnelProbeTable::Target{0xFFFFFFFFu, 0xFFFFFFFEu}));
  EXPECT_FALSE(t.Set(kTunnelProbePortBase - 1, 3, 7));
  EXPECT_FALSE(t.Set(last + 1, 3, 7));
  EXPECT_FALSE(t.Get(kTunnelProbePortBase - 1).has_value());
  EXPECT_FALSE(t.Get(last + 1).has_value());
  EXPECT_FALSE(t.Set(kTunnelProbePortBase + 1, 0, 7));
  EXPECT_FALSE(t.Set(kTunnelProbePortBase + 1, 3, 0));
  EXPECT_FALSE(t.Get(kTunnelProbePortBase + 1).has_value());
  t.Clear(kTunnelProbePortBase);
  EXPECT_FALSE(t.Get(kTunnelProbePortBase).has_value());
  t.Clear(1);  // outside: nothing
}

TEST_F(KernelPathTest, KernelFramesLeaveUnchanged) {
  TunnelProbeTable probes;
  const VipState& web = *kernel_->FindVip("web");
  probes.Set(61000, web.id, web.backends[0].id);
  const std::vector<std::pair<std::string, Bytes>> frames = {
      {"to a backend", Tcp4("192.0.2.10", 40000, "203.0.113.1", 80, kFromKernelEth)},
      {"to the client", Tcp4("192.0.2.10", 8080, "10.1.1.1", 40000, kFromKernelEth)},
      {"to a VIP, ephemeral port", Tcp4("192.0.2.10", 40000, "198.51.100.80", 80, kFromKernelEth)},
      {"to a VIP, unmapped probe port", Tcp4("192.0.2.10", 61001, "198.51.100.80", 80, kFromKernelEth)},
      {"mapped port, not from our address", Tcp4("192.0.2.99", 61000, "198.51.100.80", 80, kFromKernelEth)},
      {"mapped port, to no VIP", Tcp4("192.0.2.10", 61000, "198.51.100.81", 80, kFromKernelEth)},
      {"an ARP request", testing::Frame({.dst = Mac("ff:ff:ff:ff:ff:ff"), .src = kPortMac}, 0x0806,
                                        testing::Arp(1, kPortMac, Ip("192.0.2.10"), MacAddress{},
                                                     Ip("192.0.2.1")))},
      {"garbage", Bytes(20, 0xAB)},
  };
  for (const auto& [what, frame] : frames) {
    Buf b(frame);
    const PacketRef r = FromKernel(b, *kernel_, &probes);
    EXPECT_EQ(r.action, PacketAction::kFromKernel) << what;
    EXPECT_EQ(b.Out(), frame) << what;
  }
  // Without a table nothing is even looked at.
  Buf b(Tcp4("192.0.2.10", 61000, "198.51.100.80", 80, kFromKernelEth));
  EXPECT_EQ(FromKernel(b, *kernel_, nullptr).action, PacketAction::kFromKernel);
  const WorkerCounters& c = worker_.counters();
  EXPECT_EQ(c.rx_packets.value(), 0u) << "counted by the data plane as from the kernel";
  EXPECT_EQ(c.tx_packets.value(), frames.size() + 1);
  EXPECT_EQ(Local(LocalCounter::kTunnelProbes), 0u);
}

// The backend whose address is the outer destination of a GRE/IPIP frame.
std::string OuterBackend(const VipState& vip, const Bytes& out) {
  for (const BackendState& b : vip.backends) {
    if (out.size() >= 34 && std::memcmp(out.data() + 30, b.target.backend.bytes.data(), 4) == 0) return b.name;
  }
  return "<none>";
}

TEST_F(KernelPathTest, TunnelProbeIsEncapsulatedToItsMappedBackendGre) {
  TunnelProbeTable probes;
  const VipState& web = *kernel_->FindVip("web");
  // Many probe ports, each mapped to each backend in turn: every one reaches
  // its own backend, whatever the table would choose for its flow.
  for (uint16_t i = 0; i < 30; ++i) {
    const uint16_t port = static_cast<uint16_t>(kTunnelProbePortBase + i);
    const BackendState& want = web.backends[i % web.backends.size()];
    ASSERT_TRUE(probes.Set(port, web.id, want.id));
    const Bytes frame = Tcp4("192.0.2.10", port, "198.51.100.80", 80, kFromKernelEth);
    Buf b(frame);
    const PacketRef r = FromKernel(b, *kernel_, &probes);
    ASSERT_EQ(r.action, PacketAction::kTransmit) << port;
    const Bytes out = b.Out();
    EXPECT_EQ(OuterBackend(web, out), want.name) << port;
    ASSERT_EQ(out.size(), 14u + 20 + 4 + 40);
    EXPECT_EQ(Bytes(out.begin(), out.begin() + 6), Bytes(kGatewayMac.bytes.begin(), kGatewayMac.bytes.end()));
    EXPECT_EQ(Bytes(out.begin() + 6, out.begin() + 12), Bytes(kPortMac.bytes.begin(), kPortMac.bytes.end()));
    EXPECT_EQ(out[23], 47) << "GRE";
    EXPECT_EQ(out[36], 0x08);  // GRE protocol type: IPv4
    EXPECT_EQ(out[37], 0x00);
    EXPECT_EQ(Bytes(out.begin() + 38, out.end()), Bytes(frame.begin() + 14, frame.begin() + 54))
        << "the kernel's IP packet, whole, inside";
  }
  EXPECT_EQ(Local(LocalCounter::kTunnelProbes), 30u);
  // Not tracked: no conntrack entry for a probe.
  EXPECT_EQ(worker_.conntrack().occupied(), 0u);
  // Counted as sent to that backend.
  const WorkerCounters& c = worker_.counters();
  EXPECT_EQ(c.backend[web.backends[0].counter_slot].packets.value(), 10u);
  // UDP probes too, on an IP-in-IP VIP.
  const VipState& dns = *kernel_->FindVip("dns");
  probes.Set(62000, dns.id, dns.backends[1].id);
  Buf u(Udp4("192.0.2.10", 62000, "198.51.100.53", 53, kFromKernelEth));
  ASSERT_EQ(FromKernel(u, *kernel_, &probes).action, PacketAction::kTransmit);
  EXPECT_EQ(OuterBackend(dns, u.Out()), "d2");
  EXPECT_EQ(u.Out()[23], 4) << "IP-in-IP";
}

TEST_F(KernelPathTest, TunnelProbeToAnL2DsrVipGoesToTheBackendsMac) {
  TunnelProbeTable probes;
  const VipState& dsr = *kernel_->FindVip("dsr");
  ASSERT_EQ(dsr.backends[0].name, "l1");
  for (size_t k = 0; k < dsr.backends.size(); ++k) {
    const uint16_t port = static_cast<uint16_t>(63000 + k);
    probes.Set(port, dsr.id, dsr.backends[k].id);
    const Bytes frame = Tcp4("192.0.2.10", port, "198.51.100.90", 80, kFromKernelEth);
    Buf b(frame);
    ASSERT_EQ(FromKernel(b, *kernel_, &probes).action, PacketAction::kTransmit);
    const Bytes out = b.Out();
    const MacAddress& want = dsr.backends[k].target.next_hop_mac;
    EXPECT_EQ(Bytes(out.begin(), out.begin() + 6), Bytes(want.bytes.begin(), want.bytes.end()))
        << "to the backend's MAC, not the router's";
    EXPECT_EQ(Bytes(out.begin() + 6, out.begin() + 12), Bytes(kPortMac.bytes.begin(), kPortMac.bytes.end()));
    EXPECT_EQ(Bytes(out.begin() + 12, out.end()), Bytes(frame.begin() + 12, frame.end()))
        << "the rest as the kernel sent it";
  }
  EXPECT_EQ(Local(LocalCounter::kTunnelProbes), 2u);
}

TEST_F(KernelPathTest, StaleTunnelProbeMappingIsDroppedAndCounted) {
  TunnelProbeTable probes;
  const VipState& web = *kernel_->FindVip("web");
  const BackendState& b = *std::find_if(web.backends.begin(), web.backends.end(),
                                        [](const BackendState& x) { return x.name == "b"; });
  probes.Set(61000, web.id, b.id);
  // Reload without backend "b": the probe must not go to another backend.
  Config c = BaseConfig();
  c.vips[0].backends.erase(c.vips[0].backends.begin() + 1);
  const auto reloaded = Build(c, true, kernel_.get());
  Buf gone(Tcp4("192.0.2.10", 61000, "198.51.100.80", 80, kFromKernelEth));
  const PacketRef r = FromKernel(gone, *reloaded, &probes);
  EXPECT_EQ(r.action, PacketAction::kDrop);
  EXPECT_EQ(r.reason, DropReason::kTunnelProbeStale);
  EXPECT_EQ(Drops(DropReason::kTunnelProbeStale), 1u);
  // Mapped to one VIP, sent to another (the health task's view is old).
  const VipState& dns = *reloaded->FindVip("dns");
  probes.Set(61001, dns.id, dns.backends[0].id);
  Buf other(Tcp4("192.0.2.10", 61001, "198.51.100.80", 80, kFromKernelEth));
  EXPECT_EQ(FromKernel(other, *reloaded, &probes).action, PacketAction::kDrop);
  EXPECT_EQ(Drops(DropReason::kTunnelProbeStale), 2u);
  // A cleared port is no probe any more: out unchanged.
  probes.Clear(61000);
  Buf cleared(Tcp4("192.0.2.10", 61000, "198.51.100.80", 80, kFromKernelEth));
  EXPECT_EQ(FromKernel(cleared, *reloaded, &probes).action, PacketAction::kFromKernel);
  EXPECT_EQ(Local(LocalCounter::kTunnelProbes), 0u);
}

TEST_F(KernelPathTest, TunnelProbeToAnUnresolvedBackendIsDroppedAsNoNeighbor) {
  Config c = BaseConfig();
  c.neighbors.erase(c.neighbors.begin() + 1);  // l1's MAC unknown
  const auto state = Build(c, true);
  TunnelProbeTable probes;
  const VipState& dsr = *state->FindVip("dsr");
  probes.Set(61000, dsr.id, dsr.backends[0].id);
  Buf b(Tcp4("192.0.2.10", 61000, "198.51.100.90", 80, kFromKernelEth));
  EXPECT_EQ(FromKernel(b, *state, &probes).action, PacketAction::kDrop);
  EXPECT_EQ(b.ref.reason, DropReason::kNoNeighbor);
}

}  // namespace
}  // namespace maglb
