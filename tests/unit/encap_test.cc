// Encapsulation toward backends (every family combination, GRE and IP-in-IP,
// L2 DSR), the MTU rule (ICMP too-big / inner fragmentation), and the frames
// the LB answers with itself (ARP, echo, neighbour advertisement). Checksums
// are verified with the test builder's own RFC 1071 loop; tests/wire checks
// the same frames with tshark.
#include "maglb/encap.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>

#include "maglb/config.h"
#include "maglb/packet.h"
#include "maglb/reply.h"
#include "packet_builder.h"

namespace maglb {
namespace {

using testing::Bytes;
using testing::Echo;
using testing::Eth;
using testing::Ext6;
using testing::Frame;
using testing::Frame4;
using testing::Frame6;
using testing::Icmp;
using testing::Ip;
using testing::Ip4;
using testing::Ip6;
using testing::Mac;
using testing::RefChecksum;
using testing::Tcp;
using testing::Udp;

uint16_t Get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
uint32_t Get32(const uint8_t* p) { return uint32_t{Get16(p)} << 16 | Get16(p + 2); }

constexpr size_t kHeadroom = 128;

const MacAddress kOurMac = Mac("02:00:00:00:00:01");
const MacAddress kClientSideMac = Mac("02:00:00:00:00:02");
const MacAddress kGatewayMac = Mac("02:66:00:00:00:01");

// A frame in a buffer with headroom, as an mbuf holds it.
struct Buffer {
  // Appended, not copied over a filled vector: GCC 12 at -O3 saw a negative
  // length in that copy (-Wstringop-overflow, a false positive).
  explicit Buffer(const Bytes& frame) : len(frame.size()) {
    bytes.reserve(kHeadroom + frame.size() + 64);
    bytes.assign(kHeadroom, 0xEE);
    bytes.insert(bytes.end(), frame.begin(), frame.end());
    bytes.resize(bytes.size() + 64, 0xEE);
  }
  uint8_t* frame() { return bytes.data() + kHeadroom; }
  Bytes Out(const EncapResult& r) {
    const uint8_t* start = frame() + r.offset;
    return Bytes(start, start + r.length);
  }
  Bytes bytes;
  size_t len;
};

VipSpec Vip(const char* addr, Protocol proto, uint16_t port) {
  VipSpec v;
  v.address = Ip(addr);
  v.protocol = proto;
  v.port = port;
  return v;
}

class EncapTest : public ::testing::Test {
 protected:
  EncapTest() : vips_({Vip("10.0.0.1", Protocol::kTcp, 0), Vip("2001:db8::1", Protocol::kTcp, 0),
                       Vip("10.0.0.1", Protocol::kUdp, 0), Vip("2001:db8::1", Protocol::kUdp, 0)}) {
    local_.v4 = Ip("192.0.2.10");
    local_.v6 = Ip("2001:db8:ff::10");
    config_.src_mac = kOurMac;
    config_.source_v4 = Ip("192.0.2.10");
    config_.source_v6 = Ip("2001:db8:ff::10");
    config_.ttl = 61;
    config_.mtu = 1500;
  }

  ParsedPacket Parse(const Bytes& frame) {
    ParsedPacket p;
    const Verdict v = Classify(frame, vips_, local_, &p);
    EXPECT_NE(v.action, Action::kDrop) << DropReasonName(v.reason);
    return p;
  }

  VipMatcher vips_;
  LocalAddresses local_;
  EncapConfig config_;
};

Bytes ClientPacket(bool v6, size_t payload, uint8_t tos = 0x2e << 2 | 1) {
  if (v6) {
    return Frame6({.src = Ip("2001:db8:c::7"), .dst = Ip("2001:db8::1"), .proto = 17, .traffic_class = tos},
                  Tcp(40000, 443, 0x18, payload));
  }
  return Frame4({.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1"), .tos = tos}, Tcp(40000, 80, 0x18, payload),
                {.vlans = {7}});
}

// ------------------------------------------------------ every combination

struct EncapCase {
  Forwarding forwarding;
  bool inner_v6;
  bool outer_v6;
};

class EncapFamilyTest : public EncapTest, public ::testing::WithParamInterface<EncapCase> {};

TEST_P(EncapFamilyTest, OuterHeadersAreExactAndTheInnerPacketIsKept) {
  const EncapCase c = GetParam();
  const Bytes in = ClientPacket(c.inner_v6, 100);
  const ParsedPacket p = Parse(in);
  const Bytes inner_ip(in.begin() + p.l3_offset, in.begin() + p.l3_offset + p.l3_len);
  Buffer buf(in);
  EncapTarget target{.forwarding = c.forwarding,
                     .backend = c.outer_v6 ? Ip("2001:db8:b::5") : Ip("172.16.0.5"),
                     .next_hop_mac = kGatewayMac};
  const uint64_t hash = 0x0123456789abcdefULL;
  const EncapResult r = Forward(buf.frame(), buf.len, kHeadroom, p, target, config_, hash);
  ASSERT_EQ(r.status, EncapStatus::kOk);
  const bool gre = c.forwarding == Forwarding::kGre;
  const size_t outer_ip_len = c.outer_v6 ? 40 : 20;
  const size_t overhead = outer_ip_len + (gre ? 4 : 0);
  EXPECT_EQ(r.length, 14 + overhead + inner_ip.size());
  EXPECT_EQ(r.usable_mtu, 1500 - overhead);
  EXPECT_EQ(EncapOverhead(c.forwarding, c.outer_v6), overhead);
  const Bytes out = buf.Out(r);
  // Ethernet: to the next hop, from us, untagged.
  EXPECT_EQ(Bytes(out.begin(), out.begin() + 6), Bytes(kGatewayMac.bytes.begin(), kGatewayMac.bytes.end()));
  EXPECT_EQ(Bytes(out.begin() + 6, out.begin() + 12), Bytes(kOurMac.bytes.begin(), kOurMac.bytes.end()));
  EXPECT_EQ(Get16(&out[12]), c.outer_v6 ? 0x86DD : 0x0800);
  const uint8_t* o = &out[14];
  const uint8_t inner_proto = gre ? 47 : (c.inner_v6 ? 41 : 4);
  const uint8_t tos = 0x2e << 2 | 1;  // EF, ECT(1): copied
  if (c.outer_v6) {
    EXPECT_EQ(Get32(o) >> 28, 6u);
    EXPECT_EQ((Get32(o) >> 20) & 0xFF, tos);
    EXPECT_EQ(Get32(o) & 0xFFFFF, hash & 0xFFFFF);  // flow label
    EXPECT_EQ(Get16(o + 4), overhead - 40 + inner_ip.size());
    EXPECT_EQ(o[6], inner_proto);
    EXPECT_EQ(o[7], 61);
    EXPECT_EQ(Bytes(o + 8, o + 24), Bytes(config_.source_v6->bytes.begin(), config_.source_v6->bytes.end()));
    EXPECT_EQ(Bytes(o + 24, o + 40), Bytes(target.backend.bytes.begin(), target.backend.bytes.end()));
  } else {
    EXPECT_EQ(o[0], 0x45);
    EXPECT_EQ(o[1], tos);
    EXPECT_EQ(Get16(o + 2), overhead + inner_ip.size());
    EXPECT_EQ(Get16(o + 6), 0x4000);  // DF, no offset
    EXPECT_EQ(o[8], 61);
    EXPECT_EQ(o[9], inner_proto);
    EXPECT_EQ(RefChecksum({}, o, 20), 0);
    EXPECT_EQ(Bytes(o + 12, o + 16), Bytes(config_.source_v4->bytes.begin(), config_.source_v4->bytes.begin() + 4));
    EXPECT_EQ(Bytes(o + 16, o + 20), Bytes(target.backend.bytes.begin(), target.backend.bytes.begin() + 4));
  }
  if (gre) {
    const uint8_t* g = o + outer_ip_len;
    EXPECT_EQ(Get16(g), 0);  // RFC 2784: C=0, reserved 0, version 0
    EXPECT_EQ(Get16(g + 2), c.inner_v6 ? 0x86DD : 0x0800);
  }
  EXPECT_EQ(Bytes(out.begin() + 14 + overhead, out.end()), inner_ip);
}

INSTANTIATE_TEST_SUITE_P(
    All, EncapFamilyTest,
    ::testing::Values(EncapCase{Forwarding::kGre, false, false}, EncapCase{Forwarding::kGre, false, true},
                      EncapCase{Forwarding::kGre, true, false}, EncapCase{Forwarding::kGre, true, true},
                      EncapCase{Forwarding::kIpip, false, false}, EncapCase{Forwarding::kIpip, false, true},
                      EncapCase{Forwarding::kIpip, true, false}, EncapCase{Forwarding::kIpip, true, true}),
    [](const ::testing::TestParamInfo<EncapCase>& i) {
      return std::string(i.param.forwarding == Forwarding::kGre ? "gre_" : "ipip_") +
             (i.param.inner_v6 ? "6in" : "4in") + (i.param.outer_v6 ? "6" : "4");
    });

TEST_F(EncapTest, L2DsrRewritesOnlyTheMacs) {
  for (bool v6 : {false, true}) {
    const Bytes in = ClientPacket(v6, 50);
    const ParsedPacket p = Parse(in);
    Buffer buf(in);
    const MacAddress backend_mac = Mac("02:bb:00:00:00:05");
    const EncapResult r = Forward(buf.frame(), buf.len, kHeadroom, p,
                                  {.forwarding = Forwarding::kL2Dsr, .backend = {}, .next_hop_mac = backend_mac},
                                  config_, 1);
    ASSERT_EQ(r.status, EncapStatus::kOk);
    EXPECT_EQ(r.offset, 0);
    const Bytes out = buf.Out(r);
    ASSERT_EQ(out.size(), in.size());
    EXPECT_EQ(Bytes(out.begin(), out.begin() + 6), Bytes(backend_mac.bytes.begin(), backend_mac.bytes.end()));
    EXPECT_EQ(Bytes(out.begin() + 6, out.begin() + 12), Bytes(kOurMac.bytes.begin(), kOurMac.bytes.end()));
    EXPECT_EQ(Bytes(out.begin() + 12, out.end()), Bytes(in.begin() + 12, in.end()));
  }
}

TEST_F(EncapTest, OuterSourceVariesOnlyInTheFlowBits) {
  const IpAddress base4 = Ip("192.0.2.0");
  EXPECT_EQ(OuterSource(base4, 0, 0xFFFFFFFF), base4);
  EXPECT_EQ(OuterSource(base4, 8, 0x1234), Ip("192.0.2.52"));
  EXPECT_EQ(OuterSource(base4, 4, 0xFF), Ip("192.0.2.15"));
  EXPECT_EQ(OuterSource(Ip("192.0.2.255"), 4, 0x0), Ip("192.0.2.240"));
  EXPECT_EQ(OuterSource(base4, 12, 0xABC), Ip("192.0.10.188"));
  EXPECT_EQ(OuterSource(base4, 40, 0x01020304), Ip("1.2.3.4"));  // clamped to 32
  EXPECT_EQ(OuterSource(Ip("2001:db8::"), 16, 0xBEEF), Ip("2001:db8::beef"));
  EXPECT_EQ(OuterSource(Ip("2001:db8::"), 64, 0x1111222233334444ULL), Ip("2001:db8::1111:2222:3333:4444"));
  EXPECT_EQ(OuterSource(Ip("2001:db8::"), 100, 0x1111222233334444ULL), Ip("2001:db8::1111:2222:3333:4444"));

  // Through Encapsulate: two flows, two sources within the /24.
  config_.source_v4 = base4;
  config_.flow_bits_v4 = 8;
  const Bytes in = ClientPacket(false, 10);
  const ParsedPacket p = Parse(in);
  const EncapTarget t{.forwarding = Forwarding::kGre, .backend = Ip("172.16.0.5"), .next_hop_mac = kGatewayMac};
  Buffer a(in);
  Buffer b(in);
  const Bytes oa = a.Out(Forward(a.frame(), a.len, kHeadroom, p, t, config_, 0x11));
  const Bytes ob = b.Out(Forward(b.frame(), b.len, kHeadroom, p, t, config_, 0x22));
  EXPECT_EQ(oa[14 + 15], 0x11);
  EXPECT_EQ(ob[14 + 15], 0x22);
  EXPECT_EQ(RefChecksum({}, &oa[14], 20), 0);
  EXPECT_EQ(RefChecksum({}, &ob[14], 20), 0);
}

TEST_F(EncapTest, FromLbConfig) {
  LbConfig lb;
  lb.ipv4 = Ip("192.0.2.10");
  lb.ipv6 = Ip("2001:db8:ff::10");
  lb.encap_source_v6 = Ip("2001:db8:e::");
  lb.encap_source_v6_flow_bits = 16;
  lb.encap_ttl = 33;
  lb.mtu = 9000;
  const EncapConfig c = EncapConfig::FromLbConfig(lb, kOurMac);
  EXPECT_EQ(c.source_v4, lb.ipv4);
  EXPECT_EQ(c.source_v6, lb.encap_source_v6);
  EXPECT_EQ(c.flow_bits_v6, 16);
  EXPECT_EQ(c.ttl, 33);
  EXPECT_EQ(c.mtu, 9000u);
  EXPECT_EQ(c.src_mac, kOurMac);
}

TEST_F(EncapTest, FailuresLeaveTheBufferUntouched) {
  const Bytes in = ClientPacket(false, 10);
  const ParsedPacket p = Parse(in);
  EncapTarget t{.forwarding = Forwarding::kIpip, .backend = Ip("2001:db8:b::5"), .next_hop_mac = kGatewayMac};
  Buffer buf(in);
  const Bytes before = buf.bytes;
  config_.source_v6.reset();
  EXPECT_EQ(Forward(buf.frame(), buf.len, kHeadroom, p, t, config_, 1).status, EncapStatus::kNoSource);
  config_.source_v6 = Ip("2001:db8:ff::10");
  // 14 (frame's L2) + 4 (VLAN) + 35 < 14 + 40.
  EXPECT_EQ(Forward(buf.frame(), buf.len, 35, p, t, config_, 1).status, EncapStatus::kNoHeadroom);
  EXPECT_EQ(Forward(buf.frame(), buf.len, 36, p, t, config_, 1).status, EncapStatus::kOk);
  buf.bytes = before;
  ParsedPacket arp;
  arp.l3_offset = 14;
  EXPECT_EQ(Forward(buf.frame(), buf.len, kHeadroom, arp, t, config_, 1).status, EncapStatus::kBadPacket);
  EXPECT_EQ(buf.bytes, before);
  uint8_t junk[40] = {0x70};
  EXPECT_EQ(Encapsulate(junk, sizeof(junk), 0, t, config_, 1).status, EncapStatus::kBadPacket);
}

// --------------------------------------------------------------------- MTU

TEST_F(EncapTest, MtuBoundaryForEveryOverhead) {
  for (bool outer_v6 : {false, true}) {
    for (Forwarding f : {Forwarding::kGre, Forwarding::kIpip}) {
      const size_t overhead = EncapOverhead(f, outer_v6);
      const EncapTarget t{.forwarding = f, .backend = outer_v6 ? Ip("2001:db8:b::5") : Ip("172.16.0.5"),
                          .next_hop_mac = kGatewayMac};
      // Inner IPv4 + TCP (40 bytes of headers): exactly usable, then one more.
      for (size_t extra : {0, 1}) {
        const size_t payload = 1500 - overhead - 40 + extra;
        const Bytes in = Frame4({.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1")}, Tcp(1, 80, 0x10, payload));
        const ParsedPacket p = Parse(in);
        Buffer buf(in);
        const Bytes before = buf.bytes;
        const EncapResult r = Forward(buf.frame(), buf.len, kHeadroom, p, t, config_, 1);
        EXPECT_EQ(r.usable_mtu, 1500 - overhead);
        if (extra == 0) {
          ASSERT_EQ(r.status, EncapStatus::kOk);
          EXPECT_EQ(r.length, 14u + 1500);
        } else {
          EXPECT_EQ(r.status, EncapStatus::kMtuExceeded);
          EXPECT_EQ(buf.bytes, before);
        }
      }
    }
  }
}

TEST_F(EncapTest, TooBigIpv4WithDfIsAnsweredWithFragmentationNeeded) {
  const Bytes in = Frame4({.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1")}, Tcp(40000, 80, 0x18, 1460),
                          {.vlans = {42}});
  const ParsedPacket p = Parse(in);
  Buffer buf(in);
  const EncapResult r = Forward(buf.frame(), buf.len, kHeadroom, p,
                                {.forwarding = Forwarding::kGre, .backend = Ip("172.16.0.5"), .next_hop_mac = kGatewayMac},
                                config_, 1);
  ASSERT_EQ(r.status, EncapStatus::kMtuExceeded);
  ASSERT_EQ(r.usable_mtu, 1476u);
  Bytes out(kMaxIcmpTooBigLen);
  const size_t n = BuildIcmpTooBig(in, p, r.usable_mtu, *local_.v4, kOurMac, out);
  ASSERT_GT(n, 0u);
  out.resize(n);
  // Back to the sender's MAC, same VLAN.
  EXPECT_EQ(Bytes(out.begin(), out.begin() + 6), Bytes(in.begin() + 6, in.begin() + 12));
  EXPECT_EQ(Bytes(out.begin() + 6, out.begin() + 12), Bytes(kOurMac.bytes.begin(), kOurMac.bytes.end()));
  EXPECT_EQ(Get16(&out[12]), 0x8100);
  EXPECT_EQ(Get16(&out[14]), 42);
  EXPECT_EQ(Get16(&out[16]), 0x0800);
  const uint8_t* ip = &out[18];
  EXPECT_EQ(ip[0], 0x45);
  EXPECT_EQ(Get16(ip + 2), n - 18);
  EXPECT_EQ(n - 18, 576u);  // RFC 1812: as much as fits in 576 bytes
  EXPECT_EQ(ip[9], 1);
  EXPECT_EQ(RefChecksum({}, ip, 20), 0);
  EXPECT_EQ(Bytes(ip + 12, ip + 16), Bytes(local_.v4->bytes.begin(), local_.v4->bytes.begin() + 4));
  EXPECT_EQ(Bytes(ip + 16, ip + 20), Bytes(in.begin() + 18 + 12, in.begin() + 18 + 16));
  const uint8_t* icmp = ip + 20;
  EXPECT_EQ(icmp[0], 3);
  EXPECT_EQ(icmp[1], 4);
  EXPECT_EQ(Get16(icmp + 4), 0);
  EXPECT_EQ(Get16(icmp + 6), 1476);
  EXPECT_EQ(RefChecksum({}, icmp, n - 18 - 20), 0);
  EXPECT_EQ(Bytes(icmp + 8, static_cast<const uint8_t*>(out.data() + n)), Bytes(in.begin() + 18, in.begin() + 18 + 548));
}

TEST_F(EncapTest, TooBigIpv6IsAnsweredWithPacketTooBig) {
  const Bytes in = Frame6({.src = Ip("2001:db8:c::7"), .dst = Ip("2001:db8::1"), .ext = {Ext6{.type = 0}}},
                          Tcp(40000, 443, 0x18, 1400));
  const ParsedPacket p = Parse(in);
  Buffer buf(in);
  const EncapResult r = Forward(buf.frame(), buf.len, kHeadroom, p,
                                {.forwarding = Forwarding::kIpip, .backend = Ip("2001:db8:b::5"), .next_hop_mac = kGatewayMac},
                                config_, 1);
  ASSERT_EQ(r.status, EncapStatus::kMtuExceeded);
  ASSERT_EQ(r.usable_mtu, 1460u);
  Bytes out(kMaxIcmpTooBigLen);
  const size_t n = BuildIcmpTooBig(in, p, r.usable_mtu, *local_.v6, kOurMac, out);
  ASSERT_GT(n, 0u);
  out.resize(n);
  EXPECT_EQ(n - 14, 1280u);  // RFC 4443: as much as fits in the minimum MTU
  const uint8_t* ip = &out[14];
  EXPECT_EQ(Get32(ip) >> 28, 6u);
  EXPECT_EQ(Get16(ip + 4), n - 14 - 40);
  EXPECT_EQ(ip[6], 58);
  EXPECT_EQ(Bytes(ip + 8, ip + 24), Bytes(local_.v6->bytes.begin(), local_.v6->bytes.end()));
  EXPECT_EQ(Bytes(ip + 24, ip + 40), Bytes(in.begin() + 14 + 8, in.begin() + 14 + 24));
  const uint8_t* icmp = ip + 40;
  EXPECT_EQ(icmp[0], 2);
  EXPECT_EQ(icmp[1], 0);
  EXPECT_EQ(Get32(icmp + 4), 1460u);
  Bytes pseudo(ip + 8, ip + 40);
  const size_t icmp_len = n - 14 - 40;
  for (uint8_t b : {0, 0, static_cast<int>(icmp_len >> 8), static_cast<int>(icmp_len & 0xFF), 0, 0, 0, 58}) {
    pseudo.push_back(b);
  }
  EXPECT_EQ(RefChecksum(pseudo, icmp, icmp_len), 0);
  EXPECT_EQ(Bytes(icmp + 8, static_cast<const uint8_t*>(out.data() + n)), Bytes(in.begin() + 14, in.begin() + 14 + 1232));
  // A tiny usable MTU is reported as the IPv6 minimum.
  ASSERT_GT(BuildIcmpTooBig(in, p, 1000, *local_.v6, kOurMac, out), 0u);
  EXPECT_EQ(Get32(&out[14 + 40 + 4]), 1280u);
}

TEST_F(EncapTest, NoIcmpAboutIcmpErrorsLaterFragmentsOrWithTheWrongSource) {
  Bytes out(kMaxIcmpTooBigLen);
  const Bytes big = Frame4({.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1")}, Tcp(40000, 80, 0x18, 1460));
  ParsedPacket p = Parse(big);
  EXPECT_EQ(BuildIcmpTooBig(big, p, 1476, *local_.v6, kOurMac, out), 0u);  // family
  EXPECT_EQ(BuildIcmpTooBig(big, p, 1476, *local_.v4, kOurMac, std::span<uint8_t>(out).first(40)), 0u);
  // An ICMP error routed to a VIP.
  const Bytes reply = testing::Ipv4({.src = Ip("10.0.0.1"), .dst = Ip("198.51.100.7")}, Tcp(80, 40000, 0x10, 1400));
  const Bytes err = Frame4({.src = Ip("203.0.113.1"), .dst = Ip("10.0.0.1"), .proto = 1}, Icmp(3, 4, 1400, reply));
  p = Parse(err);
  ASSERT_TRUE(p.is_icmp_error);
  EXPECT_EQ(BuildIcmpTooBig(err, p, 1476, *local_.v4, kOurMac, out), 0u);
  // A later fragment.
  const Bytes later = Frame4({.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1"), .df = false, .frag_offset = 1480},
                             Bytes(1400, 0));
  p = Parse(later);
  EXPECT_EQ(BuildIcmpTooBig(later, p, 1476, *local_.v4, kOurMac, out), 0u);
  // The first fragment does get one.
  const Bytes first = Frame4({.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1"), .df = false, .mf = true},
                             Bytes(1480, 0));
  p = Parse(first);
  EXPECT_GT(BuildIcmpTooBig(first, p, 1476, *local_.v4, kOurMac, out), 0u);
}

TEST_F(EncapTest, TooBigIpv4WithoutDfIsFragmentedThenEncapsulated) {
  const Ip4 h{.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1"), .proto = 17, .df = false, .id = 999,
              .options = {0x94, 0x04, 0x00, 0x00,    // router alert: copied
                          0x07, 0x07, 0x04, 0, 0, 0, 0, 0}};  // record route: not copied
  const Bytes in = Frame4(h, Udp(5353, 53, 3000));
  const ParsedPacket p = Parse(in);
  const EncapTarget t{.forwarding = Forwarding::kGre, .backend = Ip("172.16.0.5"), .next_hop_mac = kGatewayMac};
  Buffer buf(in);
  const EncapResult r = Forward(buf.frame(), buf.len, kHeadroom, p, t, config_, 7);
  ASSERT_EQ(r.status, EncapStatus::kFragmentInner);
  ASSERT_EQ(r.usable_mtu, 1476u);
  const uint8_t* ip = in.data() + p.l3_offset;
  const size_t count = Ipv4FragmentCount(ip, p.l3_len, r.usable_mtu);
  ASSERT_EQ(count, 3u);  // 3008 bytes of UDP in 1440 + 1448 + 120
  Bytes reassembled;
  FlowKey key{};
  for (size_t i = 0; i < count; ++i) {
    SCOPED_TRACE(i);
    Bytes frag(kHeadroom + 1600);
    uint8_t* fip = frag.data() + kHeadroom;
    const size_t n = WriteIpv4Fragment(ip, p.l3_len, r.usable_mtu, i, fip, 1600);
    ASSERT_GT(n, 0u);
    EXPECT_LE(n, r.usable_mtu);
    const size_t hlen = size_t{fip[0] & 0xFu} * 4;
    EXPECT_EQ(hlen, i == 0 ? 32u : 24u);  // later: only the copied option (4) + pad
    if (i > 0) {
      EXPECT_EQ(Bytes(fip + 20, fip + 24), Bytes({0x94, 0x04, 0x00, 0x00}));
    }
    EXPECT_EQ(Get16(fip + 2), n);
    EXPECT_EQ(Get16(fip + 4), 999);
    const uint16_t fo = Get16(fip + 6);
    EXPECT_EQ((fo & 0x1FFF) * 8u, reassembled.size());
    EXPECT_EQ((fo & 0x2000) != 0, i + 1 < count);
    EXPECT_EQ(fo & 0x4000, 0);
    EXPECT_EQ(RefChecksum({}, fip, hlen), 0);
    if (i + 1 < count) {
      EXPECT_EQ((n - hlen) % 8, 0u);
    }
    reassembled.insert(reassembled.end(), fip + hlen, fip + n);
    // Each fragment classifies to the same key (fragment policy) and fits.
    const Bytes fframe = Frame({}, 0x0800, Bytes(fip, fip + n));
    const ParsedPacket fp = Parse(fframe);
    if (i == 0) key = fp.flow;
    EXPECT_EQ(fp.flow, key);
    const EncapResult e = Encapsulate(fip, n, kHeadroom, t, config_, 7);
    ASSERT_EQ(e.status, EncapStatus::kOk);
    EXPECT_LE(e.length - 14, config_.mtu);
  }
  EXPECT_EQ(reassembled, Bytes(ip + 32, ip + p.l3_len));
  // DF set: not ours to fragment.
  const Bytes df = Frame4({.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1"), .proto = 17}, Udp(5353, 53, 3000));
  EXPECT_EQ(Ipv4FragmentCount(df.data() + 14, 3028, 1476), 0u);
  EXPECT_EQ(Ipv4FragmentCount(df.data() + 14, 3028, 4000), 1u);
  EXPECT_EQ(Ipv4FragmentCount(ip, p.l3_len, 39), 0u);  // no room for header + 8 bytes
}

TEST_F(EncapTest, L2DsrMtu) {
  config_.mtu = 1000;
  const Bytes in = ClientPacket(true, 1000);
  const ParsedPacket p = Parse(in);
  Buffer buf(in);
  const EncapResult r = Forward(buf.frame(), buf.len, kHeadroom, p,
                                {.forwarding = Forwarding::kL2Dsr, .backend = {}, .next_hop_mac = kGatewayMac},
                                config_, 1);
  EXPECT_EQ(r.status, EncapStatus::kMtuExceeded);
  EXPECT_EQ(r.usable_mtu, 1000u);
}

// --------------------------------------------- the template's fast path

TEST_F(EncapTest, TemplateOnlyForIpv4OuterWithAnIpv4Source) {
  const EncapTarget gre4{.forwarding = Forwarding::kGre, .backend = Ip("172.16.0.5"), .next_hop_mac = kGatewayMac};
  EXPECT_TRUE(Ipv4EncapTemplate::Of(gre4, config_).valid());
  EncapTarget t = gre4;
  t.forwarding = Forwarding::kIpip;
  EXPECT_TRUE(Ipv4EncapTemplate::Of(t, config_).valid());
  t.forwarding = Forwarding::kL2Dsr;
  EXPECT_FALSE(Ipv4EncapTemplate::Of(t, config_).valid());
  t = gre4;
  t.backend = Ip("2001:db8:b::5");
  EXPECT_FALSE(Ipv4EncapTemplate::Of(t, config_).valid());
  EncapConfig c = config_;
  c.source_v4.reset();
  EXPECT_FALSE(Ipv4EncapTemplate::Of(gre4, c).valid());
  c.source_v4 = Ip("2001:db8:ff::10");  // the wrong family: Encapsulate says kNoSource
  EXPECT_FALSE(Ipv4EncapTemplate::Of(gre4, c).valid());
  c = config_;
  c.mtu = 100000;  // past what an IPv4 total length holds
  EXPECT_EQ(Ipv4EncapTemplate::Of(gre4, c).max_ip_len, 65535 - 24);
  c.mtu = 24 + 20;  // the smallest IPv4 packet fits
  EXPECT_EQ(Ipv4EncapTemplate::Of(gre4, c).max_ip_len, 20);
  c.mtu = 24 + 19;  // none fits: Forward answers every packet
  EXPECT_FALSE(Ipv4EncapTemplate::Of(gre4, c).valid());
}

// ForwardFast against Forward on random packets, targets and configs: where
// the fast path takes a packet, the same frame byte for byte (the header
// checksum also verified on its own), nothing written beyond its spare bytes
// in the headroom; where it declines, nothing written at all, and Forward
// fails or lacks only the fast path's fixed-size room.
TEST_F(EncapTest, FastPathWritesTheGeneralPathsFramesByteForByte) {
  std::mt19937_64 rng(20261202);
  auto below = [&](uint64_t n) { return static_cast<size_t>(rng() % n); };
  auto random_mac = [&] {
    MacAddress m;
    for (uint8_t& b : m.bytes) b = static_cast<uint8_t>(rng());
    return m;
  };
  auto random_v4 = [&] {
    const uint32_t a = static_cast<uint32_t>(rng());
    return IpAddress::V4(static_cast<uint8_t>(a >> 24), static_cast<uint8_t>(a >> 16), static_cast<uint8_t>(a >> 8),
                         static_cast<uint8_t>(a));
  };
  size_t fast = 0, declined = 0, declined_but_forwarded = 0;
  constexpr size_t kRoom = 64;  // real bytes before the frame; `headroom` passes less
  for (int iteration = 0; iteration < 6000; ++iteration) {
    const bool inner_v6 = below(2) == 1;
    const uint8_t tos = static_cast<uint8_t>(rng());
    const size_t payload = below(4) == 0 ? below(64) : below(1600);
    Eth eth;
    for (size_t i = below(3); i > 0; --i) eth.vlans.push_back(static_cast<uint16_t>(below(4095) + 1));
    const Bytes in = inner_v6 ? Frame6({.src = Ip("2001:db8:c::7"), .dst = Ip("2001:db8::1"), .proto = 17, .traffic_class = tos},
                                       Udp(40000, 53, payload), eth)
                              : Frame4({.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1"), .proto = 17, .tos = tos,
                                        .df = below(2) == 1},
                                       Udp(40000, 53, payload), eth);
    ParsedPacket p;
    const Verdict v = Classify(in, vips_, local_, &p);
    ASSERT_EQ(v.action, Action::kToVip) << iteration << " " << DropReasonName(v.reason);

    EncapConfig config;
    config.src_mac = random_mac();
    config.source_v4 = random_v4();
    config.flow_bits_v4 = static_cast<uint8_t>(below(33));
    config.ttl = static_cast<uint8_t>(below(256));
    const size_t overhead_guess = 24 - 4 * below(2);
    config.mtu = static_cast<uint32_t>(below(3) == 0 ? p.l3_len + overhead_guess + below(3) - 1 : 68 + below(9000));
    const EncapTarget target{.forwarding = below(2) == 0 ? Forwarding::kGre : Forwarding::kIpip,
                             .backend = random_v4(),
                             .next_hop_mac = random_mac()};
    const uint64_t flow_hash = rng();
    const bool nic = below(2) == 1;
    size_t headroom = below(kRoom + 1);

    Bytes original(kRoom + in.size() + 16);
    for (uint8_t& b : original) b = static_cast<uint8_t>(rng());
    std::copy(in.begin(), in.end(), original.begin() + kRoom);
    uint8_t* ip_of_original = original.data() + kRoom + p.l3_offset;
    switch (below(16)) {  // what the fast path must leave to Forward (or, for a version, treat alike)
      case 0: p.ip_version = 0; break;
      case 1: p.l3_len = static_cast<uint16_t>(in.size() - p.l3_offset + 1 + below(4)); break;
      case 2: p.l3_len = static_cast<uint16_t>(below(48)); break;
      case 3: ip_of_original[0] = static_cast<uint8_t>(below(16) << 4 | (ip_of_original[0] & 0x0F)); break;
      case 4: headroom = 38 - p.l3_offset + below(4); break;  // around both the GRE room and the copy's
      default: break;
    }

    const Ipv4EncapTemplate t = Ipv4EncapTemplate::Of(target, config);
    ASSERT_TRUE(t.valid());
    Bytes general = original;
    const EncapResult want =
        Forward(general.data() + kRoom, in.size(), headroom, p, target, config, flow_hash, nic);
    Bytes fast_buf = original;
    EncapResult got;
    const bool taken = nic ? ForwardFast<true>(fast_buf.data() + kRoom, in.size(), headroom, p, t, flow_hash, &got)
                           : ForwardFast<false>(fast_buf.data() + kRoom, in.size(), headroom, p, t, flow_hash, &got);
    if (!taken) {
      ++declined;
      EXPECT_EQ(fast_buf, original) << iteration;
      if (want.status == EncapStatus::kOk) {
        ++declined_but_forwarded;
        EXPECT_LT(headroom + p.l3_offset, Ipv4EncapTemplate::kCopy) << iteration;
      }
      continue;
    }
    ++fast;
    ASSERT_EQ(want.status, EncapStatus::kOk) << iteration;
    ASSERT_EQ(got.status, EncapStatus::kOk);
    EXPECT_EQ(got.offset, want.offset) << iteration;
    ASSERT_EQ(got.length, want.length) << iteration;
    EXPECT_EQ(got.tx_offload, want.tx_offload) << iteration;
    EXPECT_EQ(got.usable_mtu, want.usable_mtu) << iteration;
    const size_t start = kRoom + want.offset;
    const size_t spare = Ipv4EncapTemplate::kCopy - (p.l3_offset - want.offset);
    // Outside the new frame only the spare bytes before it may differ.
    for (size_t i = 0; i < original.size(); ++i) {
      if (i >= start - spare && i < start) continue;
      ASSERT_EQ(fast_buf[i], general[i]) << "iteration " << iteration << " byte " << i;
    }
    // On its own: the outer header's checksum, tos, length and source bits.
    const uint8_t* o = fast_buf.data() + start + 14;
    const uint8_t* inner = o + (target.forwarding == Forwarding::kGre ? 24 : 20);
    const uint8_t inner_version = inner[0] >> 4;
    const uint8_t want_tos = inner_version == 6 ? static_cast<uint8_t>(Get16(inner) >> 4) : inner[1];
    EXPECT_EQ(o[1], want_tos) << iteration;
    EXPECT_EQ(Get16(o + 2), want.length - 14) << iteration;
    if (nic) {
      EXPECT_EQ(Get16(o + 10), 0) << iteration;
      EXPECT_EQ(got.tx_offload, kTxOffloadOuterIpv4Checksum);
    } else {
      EXPECT_EQ(RefChecksum({}, o, 20), 0) << iteration;
    }
    const uint32_t mask = config.flow_bits_v4 == 32 ? ~0u : (1u << config.flow_bits_v4) - 1;
    EXPECT_EQ(Get32(o + 12), (Get32(config.source_v4->bytes.data()) & ~mask) |
                                 (static_cast<uint32_t>(flow_hash) & mask)) << iteration;
  }
  // Both sides of every condition were reached.
  EXPECT_GT(fast, 2000u);
  EXPECT_GT(declined, 1000u);
  EXPECT_GT(declined_but_forwarded, 20u);
}

// ----------------------------------------------------------------- replies

TEST_F(EncapTest, ArpReply) {
  const MacAddress peer = Mac("02:aa:00:00:00:01");
  Bytes f = Frame({.dst = Mac("ff:ff:ff:ff:ff:ff"), .src = peer, .vlans = {3}}, kEtherTypeArp,
                  testing::Arp(1, peer, Ip("192.0.2.1"), {}, Ip("192.0.2.10")));
  const ParsedPacket p = Parse(f);
  ASSERT_EQ(MakeArpReply(f, p, *local_.v4, kOurMac), f.size());
  const Bytes want = Frame({.dst = peer, .src = kOurMac, .vlans = {3}}, kEtherTypeArp,
                           testing::Arp(2, kOurMac, Ip("192.0.2.10"), peer, Ip("192.0.2.1")));
  EXPECT_EQ(f, want);
  // A reply is not answered.
  Bytes reply = want;
  ParsedPacket rp;
  EXPECT_EQ(Classify(reply, vips_, local_, &rp).reason, DropReason::kNotForUs);
  EXPECT_EQ(MakeArpReply(reply, rp, *local_.v4, kOurMac), 0u);
  EXPECT_EQ(reply, want);
}

TEST_F(EncapTest, EchoReplies) {
  // IPv4 with options (stripped), to a VIP.
  Bytes f = Frame4({.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1"), .proto = 1, .ttl = 9,
                    .options = {0x01, 0x01, 0x01, 0x00}},
                   Echo(false, 0x1234, 5, 20), {.vlans = {8}});
  ParsedPacket p = Parse(f);
  size_t n = MakeEchoReply(f, p, kOurMac);
  ASSERT_EQ(n, 18u + 20 + 28);
  f.resize(n);
  const Bytes echo4 = Echo(false, 0x1234, 5, 20);
  Bytes want = Frame4({.src = Ip("10.0.0.1"), .dst = Ip("198.51.100.7"), .proto = 1, .df = false},
                      Icmp(0, 0, 0x12340005, Bytes(echo4.begin() + 8, echo4.end())),
                      {.dst = kClientSideMac, .src = kOurMac, .vlans = {8}});
  // The builder sets id 0x1234 and DF; the reply keeps the request's id.
  ASSERT_EQ(want.size(), n);
  EXPECT_EQ(Bytes(f.begin(), f.begin() + 18), Bytes(want.begin(), want.begin() + 18));
  EXPECT_EQ(f[18], 0x45);
  EXPECT_EQ(f[18 + 8], 64);
  EXPECT_EQ(Bytes(f.begin() + 18 + 12, f.begin() + 18 + 20), Bytes(want.begin() + 18 + 12, want.begin() + 18 + 20));
  EXPECT_EQ(RefChecksum({}, &f[18], 20), 0);
  EXPECT_EQ(Bytes(f.begin() + 38, f.end()), Bytes(want.begin() + 38, want.end()));  // ICMP incl. checksum

  // IPv6 with a hop-by-hop header (dropped), to us.
  Bytes f6 = Frame6({.src = Ip("2001:db8:c::7"), .dst = Ip("2001:db8:ff::10"), .proto = 58, .ext = {Ext6{.type = 0}}},
                    Echo(true, 0x4321, 6, 30));
  p = Parse(f6);
  n = MakeEchoReply(f6, p, kOurMac);
  ASSERT_EQ(n, 14u + 40 + 38);
  f6.resize(n);
  const Bytes echo6 = Echo(true, 0x4321, 6, 30);
  const Bytes body(echo6.begin() + 8, echo6.end());
  want = Frame6({.src = Ip("2001:db8:ff::10"), .dst = Ip("2001:db8:c::7"), .proto = 58},
                Icmp(129, 0, 0x43210006, body), {.dst = kClientSideMac, .src = kOurMac});
  EXPECT_EQ(Bytes(f6.begin(), f6.begin() + 14), Bytes(want.begin(), want.begin() + 14));
  EXPECT_EQ(Get16(&f6[14 + 4]), 38);
  EXPECT_EQ(f6[14 + 6], 58);
  EXPECT_EQ(f6[14 + 7], 64);
  EXPECT_EQ(Bytes(f6.begin() + 22, f6.end()), Bytes(want.begin() + 22, want.end()));
  // Not an echo request.
  Bytes tcp = ClientPacket(false, 0);
  EXPECT_EQ(MakeEchoReply(tcp, Parse(tcp), kOurMac), 0u);
}

TEST_F(EncapTest, CheckReplyAddresses) {
  // ARP request to broadcast, solicitation to a solicited-node group, DAD
  // from ::, echo from a unicast host: all may be answered.
  const MacAddress peer = Mac("02:aa:00:00:00:01");
  const Bytes arp = Frame({.dst = Mac("ff:ff:ff:ff:ff:ff"), .src = peer}, kEtherTypeArp,
                          testing::Arp(1, peer, Ip("192.0.2.1"), {}, Ip("192.0.2.10")));
  EXPECT_EQ(CheckReplyAddresses(arp, Parse(arp)), ReplyCheck::kOk);
  const Bytes arp_group = Frame({.dst = Mac("ff:ff:ff:ff:ff:ff"), .src = Mac("01:00:5e:00:00:01")},
                                kEtherTypeArp, testing::Arp(1, peer, Ip("192.0.2.1"), {}, Ip("192.0.2.10")));
  EXPECT_EQ(CheckReplyAddresses(arp_group, Parse(arp_group)), ReplyCheck::kGroupSource);
  const IpAddress target = Ip("2001:db8:ff::10");
  for (const char* src : {"2001:db8:ff::1", "::"}) {
    const Bytes ns = Frame6({.src = Ip(src), .dst = Ip("ff02::1:ff00:10"), .proto = 58, .hop_limit = 255},
                            Icmp(135, 0, 0, Bytes(target.bytes.begin(), target.bytes.end())),
                            {.dst = Mac("33:33:ff:00:00:10"), .src = peer});
    EXPECT_EQ(CheckReplyAddresses(ns, Parse(ns)), ReplyCheck::kOk) << src;
  }
  auto echo4 = [&](const char* src, const char* dst, const MacAddress& dst_mac) {
    Bytes f = Frame4({.src = Ip(src), .dst = Ip(dst), .proto = 1}, Echo(false, 1, 1), {.dst = dst_mac, .src = peer});
    ParsedPacket p;
    Classify(f, vips_, local_, &p);  // the addresses are what is checked, not the verdict
    return CheckReplyAddresses(f, p);
  };
  EXPECT_EQ(echo4("198.51.100.7", "192.0.2.10", kOurMac), ReplyCheck::kOk);
  EXPECT_EQ(echo4("198.51.100.7", "192.0.2.10", Mac("ff:ff:ff:ff:ff:ff")), ReplyCheck::kGroupDestination);
  EXPECT_EQ(echo4("198.51.100.7", "224.0.0.1", kOurMac), ReplyCheck::kGroupDestination);
  EXPECT_EQ(echo4("198.51.100.7", "255.255.255.255", kOurMac), ReplyCheck::kGroupDestination);
  EXPECT_EQ(echo4("223.255.255.255", "192.0.2.10", kOurMac), ReplyCheck::kOk);  // the last unicast /8
  EXPECT_EQ(echo4("1.0.0.0", "192.0.2.10", kOurMac), ReplyCheck::kOk);
  for (const char* src : {"0.0.0.0", "127.0.0.1", "224.0.0.1", "240.0.0.1", "255.255.255.255"}) {
    EXPECT_EQ(echo4(src, "192.0.2.10", kOurMac), ReplyCheck::kGroupSource) << src;
  }
  // A group source wins over a group destination: either way, no answer.
  EXPECT_EQ(echo4("224.0.0.1", "224.0.0.2", Mac("01:00:5e:00:00:02")), ReplyCheck::kGroupSource);
}

Bytes Solicit(const char* src, const char* target) {
  const IpAddress t = Ip(target);
  Bytes body(t.bytes.begin(), t.bytes.end());
  if (std::string(src) != "::") {
    for (uint8_t b : {1, 1, 2, 0xaa, 0, 0, 0, 1}) body.push_back(b);
  }
  return Frame6({.src = Ip(src), .dst = Ip("ff02::1:ff00:10"), .proto = 58, .hop_limit = 255},
                Icmp(135, 0, 0, body), {.dst = Mac("33:33:ff:00:00:10"), .src = Mac("02:aa:00:00:00:01")});
}

TEST_F(EncapTest, NeighborAdvertisement) {
  for (const char* src : {"2001:db8:ff::1", "::"}) {
    SCOPED_TRACE(src);
    const bool dad = std::string(src) == "::";
    const Bytes ns = Solicit(src, "2001:db8:ff::10");
    const ParsedPacket p = Parse(ns);
    Bytes out(kNeighborAdvertLen);
    ASSERT_EQ(BuildNeighborAdvert(ns, p, *local_.v6, kOurMac, out), kNeighborAdvertLen);
    Bytes body(local_.v6->bytes.begin(), local_.v6->bytes.end());
    for (uint8_t b : {2, 1}) body.push_back(b);
    body.insert(body.end(), kOurMac.bytes.begin(), kOurMac.bytes.end());
    const Bytes want = Frame6({.src = *local_.v6, .dst = Ip(dad ? "ff02::1" : src), .proto = 58, .hop_limit = 255},
                              Icmp(136, 0, dad ? 0x20000000 : 0x60000000, body),
                              {.dst = dad ? Mac("33:33:00:00:00:01") : Mac("02:aa:00:00:00:01"), .src = kOurMac});
    ASSERT_EQ(want.size(), out.size());
    // Everything but the flow label the test builder sets.
    EXPECT_EQ(Bytes(out.begin(), out.begin() + 14), Bytes(want.begin(), want.begin() + 14));
    EXPECT_EQ(out[14] >> 4, 6);
    EXPECT_EQ(Bytes(out.begin() + 18, out.end()), Bytes(want.begin() + 18, want.end()));
  }
  Bytes out(kNeighborAdvertLen);
  const Bytes other = Solicit("2001:db8:ff::1", "2001:db8:ff::11");
  ParsedPacket p;
  Classify(other, vips_, local_, &p);
  EXPECT_EQ(BuildNeighborAdvert(other, p, *local_.v6, kOurMac, out), 0u);
  const Bytes ns = Solicit("2001:db8:ff::1", "2001:db8:ff::10");
  EXPECT_EQ(BuildNeighborAdvert(ns, Parse(ns), *local_.v6, kOurMac, std::span<uint8_t>(out).first(85)), 0u);
}

TEST_F(EncapTest, ExtractNeighbor) {
  const MacAddress peer = Mac("02:aa:00:00:00:01");
  const Bytes arp = Frame({}, kEtherTypeArp, testing::Arp(2, peer, Ip("192.0.2.1"), kOurMac, Ip("192.0.2.10")));
  auto n = ExtractNeighbor(arp, Parse(arp));
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->address, Ip("192.0.2.1"));
  EXPECT_EQ(n->mac, peer);
  const Bytes ns = Solicit("2001:db8:ff::1", "2001:db8:ff::10");
  n = ExtractNeighbor(ns, Parse(ns));
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->address, Ip("2001:db8:ff::1"));
  EXPECT_EQ(n->mac, Mac("02:aa:00:00:00:01"));
  const Bytes dad = Solicit("::", "2001:db8:ff::10");
  EXPECT_FALSE(ExtractNeighbor(dad, Parse(dad)).has_value());
  const IpAddress gw = Ip("2001:db8:ff::1");
  Bytes body(gw.bytes.begin(), gw.bytes.end());
  for (uint8_t b : {2, 1, 2, 0x66, 0, 0, 0, 1}) body.push_back(b);
  const Bytes na = Frame6({.src = gw, .dst = *local_.v6, .proto = 58, .hop_limit = 255}, Icmp(136, 0, 0x60000000, body));
  n = ExtractNeighbor(na, Parse(na));
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->address, gw);
  EXPECT_EQ(n->mac, kGatewayMac);
}

}  // namespace
}  // namespace maglb
