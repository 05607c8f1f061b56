// The outer IPv4 header checksum left to the NIC (Worker::SetTxOuterIpv4Checksum):
// the same packets through a worker that computes it and one that leaves it
// to the NIC; the test then does the NIC's job with its own textbook
// checksum (RefChecksum, tests/support) and the frames must match byte for
// byte. Marked exactly where an outer IPv4 header was written: GRE and IPIP
// to IPv4 backends (inner IPv4 or IPv6, fragments included), never for an
// IPv6 outer header, L2 DSR or a reply.
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "maglb/encap.h"
#include "maglb/lb_state.h"
#include "maglb/pipeline.h"
#include "packet_buf.h"
#include "packet_builder.h"

namespace maglb {
namespace {

using testing::Bytes;
using testing::Ip;
using testing::Ip4;
using testing::Ip6;
using testing::Mac;

constexpr uint64_t kT0 = 5000ULL * 1'000'000'000ULL;
const MacAddress kPortMac = Mac("02:00:00:00:00:01");
const MacAddress kGatewayMac = Mac("02:00:00:00:00:fe");
constexpr uint8_t kSyn = 0x02, kAck = 0x10;

VipConfig Vip(const std::string& name, const std::string& addr, Protocol proto, Forwarding fwd,
              const std::vector<std::string>& backends) {
  VipConfig v;
  v.name = name;
  v.address = Ip(addr);
  v.protocol = proto;
  v.port = 80;
  v.forwarding = fwd;
  v.table_size = 251;
  for (const std::string& b : backends) v.backends.push_back({absl::StrCat(name, v.backends.size()), Ip(b), 1, 0});
  return v;
}

Config TestConfig() {
  Config c;
  c.source = "tx_offload_test.toml";
  c.lb.ipv4 = Ip("192.0.2.10");
  c.lb.ipv6 = Ip("2001:db8::10");
  c.lb.gateway_v4 = Ip("192.0.2.1");
  c.lb.gateway_v6 = Ip("2001:db8::1");
  c.lb.mtu = 1500;
  // The outer source varies per flow, so the checksum covers many headers.
  c.lb.encap_source_v4_flow_bits = 8;
  c.neighbors.push_back({Ip("192.0.2.1"), kGatewayMac, 0});
  c.neighbors.push_back({Ip("2001:db8::1"), kGatewayMac, 0});
  c.vips.push_back(Vip("gre4", "198.51.100.80", Protocol::kTcp, Forwarding::kGre,
                       {"203.0.113.1", "203.0.113.2", "203.0.113.3"}));
  c.vips.push_back(Vip("ipip4", "198.51.100.53", Protocol::kUdp, Forwarding::kIpip, {"203.0.114.1", "203.0.114.2"}));
  c.vips.push_back(Vip("gre6", "198.51.100.81", Protocol::kTcp, Forwarding::kGre, {"2001:db8:5::1"}));
  c.vips.push_back(Vip("ipip6", "198.51.100.82", Protocol::kTcp, Forwarding::kIpip, {"2001:db8:6::1"}));
  // An IPv6 VIP tunnelled to IPv4 backends (6in4): the inner header has no checksum.
  c.vips.push_back(Vip("v6in4", "2001:db8:80::80", Protocol::kTcp, Forwarding::kGre, {"203.0.115.1"}));
  VipConfig dsr = Vip("dsr", "198.51.100.90", Protocol::kTcp, Forwarding::kL2Dsr, {"198.51.100.201"});
  c.neighbors.push_back({dsr.backends[0].address, Mac("02:00:00:00:15:01"), 0});
  c.vips.push_back(dsr);
  return c;
}

Bytes Tcp4(const std::string& client, uint16_t sport, const std::string& vip, uint8_t flags, size_t payload = 0,
           bool df = true, uint8_t tos = 0) {
  Ip4 h;
  h.src = Ip(client);
  h.dst = Ip(vip);
  h.df = df;
  h.tos = tos;
  return testing::Frame4(h, testing::Tcp(sport, 80, flags, payload));
}

std::string Client(int i) { return absl::StrCat("10.0.", (i >> 8) & 255, ".", i & 255); }

// What one packet became: the action and the frames sent, with their marks.
struct Result {
  PacketAction action = PacketAction::kDrop;
  std::vector<Bytes> frames;
  std::vector<uint8_t> tx_offload;
};

Result RunPacket(Worker& w, const LbState& state, const Bytes& in) {
  testing::PacketBuf b(in);
  w.ProcessPacket(b.ref, state, kT0);
  Result r;
  r.action = b.ref.action;
  if (b.ref.action == PacketAction::kTransmit || b.ref.action == PacketAction::kReply) {
    r.frames.push_back(b.Out());
    // Only kTransmit frames carry the field; the data plane reads no other.
    r.tx_offload.push_back(b.ref.action == PacketAction::kTransmit ? b.ref.tx_offload : 0);
  } else if (b.ref.action == PacketAction::kExtra) {
    for (uint16_t i = 0; i < b.ref.extra_count; ++i) {
      const ExtraFrame& f = w.extra_frames()[b.ref.extra_first + i];
      r.frames.emplace_back(f.data, f.data + f.len);
      r.tx_offload.push_back(f.tx_offload);
    }
  }
  return r;
}

// What a NIC with IPv4 header checksum offload does to a marked frame:
// sums the 20 bytes after the 14-byte Ethernet header (field 0) and stores
// the complement.
Bytes NicJob(Bytes f) {
  EXPECT_GE(f.size(), 34u);
  EXPECT_EQ(f[24], 0);  // the field the NIC fills is left 0
  EXPECT_EQ(f[25], 0);
  const uint16_t c = testing::RefChecksum({}, f.data() + 14, 20);
  f[24] = static_cast<uint8_t>(c >> 8);
  f[25] = static_cast<uint8_t>(c);
  return f;
}

class TxOffloadTest : public ::testing::Test {
 protected:
  TxOffloadTest() : software_(Ct(), ConntrackKey::Fixed(1)), nic_(Ct(), ConntrackKey::Fixed(1)) {
    LbStateOptions opts;
    opts.port_mac = kPortMac;
    auto s = BuildLbState(TestConfig(), nullptr, opts);
    EXPECT_TRUE(s.ok()) << s.status();
    state_ = *std::move(s);
    nic_.SetTxOuterIpv4Checksum(true);
  }
  static ConntrackConfig Ct() {
    ConntrackConfig c;
    c.capacity = 1 << 12;
    return c;
  }

  // Runs `in` through both workers. `outer_v4`: the frames sent get an
  // outer IPv4 header (then marked), else none is marked. Returns what the
  // software path did.
  Result ExpectSameFrames(const Bytes& in, bool outer_v4, const std::string& what) {
    SCOPED_TRACE(what);
    const Result sw = RunPacket(software_, *state_, in);
    const Result hw = RunPacket(nic_, *state_, in);
    EXPECT_EQ(sw.action, hw.action);
    EXPECT_EQ(sw.frames.size(), hw.frames.size());
    if (sw.frames.size() != hw.frames.size()) return sw;
    for (size_t i = 0; i < sw.frames.size(); ++i) {
      SCOPED_TRACE(absl::StrCat("frame ", i));
      EXPECT_EQ(sw.tx_offload[i], 0) << "the software path leaves nothing to the NIC";
      if (outer_v4) {
        if (sw.frames[i].size() < 34) {
          ADD_FAILURE() << "no outer IPv4 header";
          continue;
        }
        EXPECT_EQ(sw.frames[i][12], 0x08);  // IPv4 outer
        EXPECT_EQ(sw.frames[i][13], 0x00);
        EXPECT_EQ(testing::RefChecksum({}, sw.frames[i].data() + 14, 20), 0) << "software checksum invalid";
        EXPECT_EQ(hw.tx_offload[i], kTxOffloadOuterIpv4Checksum);
        EXPECT_EQ(NicJob(hw.frames[i]), sw.frames[i]);
      } else {
        EXPECT_EQ(hw.tx_offload[i], 0);
        EXPECT_EQ(hw.frames[i], sw.frames[i]);
      }
    }
    return sw;
  }
  size_t Compared(const Bytes& in, bool outer_v4, const std::string& what) {
    return ExpectSameFrames(in, outer_v4, what).frames.size();
  }

  std::unique_ptr<const LbState> state_;
  Worker software_;
  Worker nic_;
};

TEST_F(TxOffloadTest, GreAndIpipOverIpv4GiveTheSameFramesOnceTheNicHasDoneItsPart) {
  size_t compared = 0;
  for (int i = 0; i < 64; ++i) {
    const uint16_t sport = static_cast<uint16_t>(20000 + i);
    const uint8_t tos = static_cast<uint8_t>(i * 4 + (i & 3));  // DSCP and ECN reach the outer header
    // New flow, then the tracked flow's path.
    compared += Compared(Tcp4(Client(i), sport, "198.51.100.80", kSyn, 0, true, tos), true, "gre4 syn");
    compared += Compared(Tcp4(Client(i), sport, "198.51.100.80", kAck, 100, true, tos), true, "gre4 ack");
    Ip4 u;
    u.src = Ip(Client(i));
    u.dst = Ip("198.51.100.53");
    u.proto = 17;
    u.tos = tos;
    compared += Compared(testing::Frame4(u, testing::Udp(sport, 80, 40)), true, "ipip4 udp");
    Ip6 h6;
    h6.src = Ip(absl::StrCat("2001:db8:99::", i + 1));
    h6.dst = Ip("2001:db8:80::80");
    compared += Compared(testing::Frame6(h6, testing::Tcp(sport, 80, kSyn)), true, "6in4 gre");
  }
  EXPECT_EQ(compared, 4u * 64u);
}

TEST_F(TxOffloadTest, Ipv6OuterAndL2DsrAreNeverMarked) {
  size_t compared = 0;
  for (int i = 0; i < 16; ++i) {
    const uint16_t sport = static_cast<uint16_t>(21000 + i);
    compared += Compared(Tcp4(Client(i), sport, "198.51.100.81", kSyn), false, "gre over ipv6");
    compared += Compared(Tcp4(Client(i), sport, "198.51.100.82", kSyn), false, "ipip over ipv6");
    compared += Compared(Tcp4(Client(i), sport, "198.51.100.90", kSyn), false, "l2 dsr");
  }
  EXPECT_EQ(compared, 3u * 16u);
}

TEST_F(TxOffloadTest, FragmentsAreMarkedLikeWholePackets) {
  // DF clear and over the tunnel's MTU: each fragment encapsulated (or, L2
  // DSR, given the frame's L2 header). Inner fragment headers are always
  // computed here; only an IPv4 outer header is the NIC's.
  for (const auto& [vip, outer_v4] : std::vector<std::pair<std::string, bool>>{
           {"198.51.100.80", true}, {"198.51.100.81", false}, {"198.51.100.90", false}}) {
    const Result sw = ExpectSameFrames(Tcp4("10.1.2.3", 4000, vip, kAck, 3000, /*df=*/false), outer_v4,
                                       "fragments to " + vip);
    EXPECT_EQ(sw.action, PacketAction::kExtra) << vip;
    EXPECT_EQ(sw.frames.size(), 3u) << vip;  // 3020 bytes of TCP in pieces of at most 1456
  }
}

TEST_F(TxOffloadTest, IcmpErrorsToBackendsAreMarkedRepliesAreNot) {
  // A router's fragmentation-needed about a tracked flow goes to its
  // backend through the tunnel: marked like data.
  EXPECT_EQ(Compared(Tcp4("10.0.0.5", 5555, "198.51.100.80", kSyn), true, "pin the flow"), 1u);
  Ip4 inner;
  inner.src = Ip("198.51.100.80");
  inner.dst = Ip("10.0.0.5");
  Bytes embedded = testing::Ipv4(inner, testing::Tcp(80, 5555, kAck, 100));
  embedded.resize(28);
  Ip4 outer;
  outer.src = Ip("192.0.2.77");
  outer.dst = Ip("198.51.100.80");
  outer.proto = 1;
  const Bytes icmp = testing::Frame4(outer, testing::Icmp(3, 4, 1400, embedded));
  EXPECT_EQ(ExpectSameFrames(icmp, true, "icmp error to the backend").action, PacketAction::kTransmit);

  // The LB's own replies stay software, and whole.
  Ip4 ping;
  ping.src = Ip("10.0.0.7");
  ping.dst = Ip("192.0.2.10");
  ping.proto = 1;
  const Bytes echo = testing::Frame4(ping, testing::Echo(false, 7, 1));
  EXPECT_EQ(ExpectSameFrames(echo, false, "echo reply").action, PacketAction::kReply);
  // Too big with DF: ICMP fragmentation-needed back to the client.
  const Bytes big = Tcp4("10.0.0.8", 6000, "198.51.100.80", kAck, 1600, /*df=*/true);
  EXPECT_EQ(ExpectSameFrames(big, false, "icmp too big").action, PacketAction::kReply);
}

TEST(TxOffloadEncap, EncapsulateLeavesTheFieldZeroAndSaysSo) {
  // Every outer header field that enters the checksum, varied: source bits,
  // TOS, TTL, length; the offloaded header differs from the software one in
  // the checksum field only.
  for (uint8_t ttl : {uint8_t{1}, uint8_t{64}, uint8_t{255}}) {
    EncapConfig config;
    config.src_mac = kPortMac;
    config.source_v4 = Ip("192.0.2.10");
    config.source_v6 = Ip("2001:db8::10");
    config.flow_bits_v4 = 16;
    config.ttl = ttl;
    for (Forwarding fwd : {Forwarding::kGre, Forwarding::kIpip}) {
      for (uint64_t hash = 0; hash < 4096; hash += 37) {
        Ip4 h;
        h.src = Ip("10.0.0.1");
        h.dst = Ip("198.51.100.80");
        h.tos = static_cast<uint8_t>(hash);
        const Bytes ip = testing::Ipv4(h, testing::Tcp(1000, 80, kAck, hash % 200));
        const EncapTarget t{fwd, Ip("203.0.113.9"), kGatewayMac};
        std::vector<uint8_t> a(128 + ip.size()), b(128 + ip.size());
        std::memcpy(a.data() + 128, ip.data(), ip.size());
        std::memcpy(b.data() + 128, ip.data(), ip.size());
        const EncapResult ra = Encapsulate(a.data() + 128, ip.size(), 128, t, config, hash);
        const EncapResult rb = Encapsulate(b.data() + 128, ip.size(), 128, t, config, hash, /*nic_ipv4_checksum=*/true);
        ASSERT_EQ(ra.status, EncapStatus::kOk);
        ASSERT_EQ(rb.status, EncapStatus::kOk);
        EXPECT_EQ(ra.tx_offload, 0);
        EXPECT_EQ(rb.tx_offload, kTxOffloadOuterIpv4Checksum);
        ASSERT_EQ(ra.offset, rb.offset);
        ASSERT_EQ(ra.length, rb.length);
        const Bytes fa(a.data() + 128 + ra.offset, a.data() + 128 + ra.offset + ra.length);
        const Bytes fb(b.data() + 128 + rb.offset, b.data() + 128 + rb.offset + rb.length);
        EXPECT_EQ(NicJob(fb), fa) << "hash " << hash;
      }
    }
    // IPv6 outer: no header checksum, nothing to mark.
    const EncapTarget t6{Forwarding::kGre, Ip("2001:db8:5::1"), kGatewayMac};
    Ip4 h;
    h.src = Ip("10.0.0.1");
    h.dst = Ip("198.51.100.80");
    const Bytes ip = testing::Ipv4(h, testing::Tcp(1000, 80, kAck));
    std::vector<uint8_t> buf(128 + ip.size());
    std::memcpy(buf.data() + 128, ip.data(), ip.size());
    const EncapResult r = Encapsulate(buf.data() + 128, ip.size(), 128, t6, config, 5, /*nic_ipv4_checksum=*/true);
    ASSERT_EQ(r.status, EncapStatus::kOk);
    EXPECT_EQ(r.tx_offload, 0);
  }
}

}  // namespace
}  // namespace maglb
