// Parse and classify: every header combination, every drop reason Classify()
// can give, ICMP error routing, the fragment policy, and no read past a
// truncated frame (run under ASan in the fuzz build as well).
#include "maglb/packet.h"

#include <gtest/gtest.h>

#include "maglb/checksum.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <string>

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
using testing::Tcp;
using testing::Udp;

constexpr uint8_t kSyn = 0x02;
constexpr uint8_t kAck = 0x10;

VipSpec Vip(const char* addr, Protocol proto, uint16_t port) {
  VipSpec v;
  v.address = Ip(addr);
  v.protocol = proto;
  v.port = port;
  return v;
}

class ClassifyTest : public ::testing::Test {
 protected:
  ClassifyTest()
      : vips_({
            Vip("10.0.0.1", Protocol::kTcp, 80),      // 0
            Vip("10.0.0.1", Protocol::kTcp, 0),       // 1: every other TCP port
            Vip("10.0.0.1", Protocol::kUdp, 53),      // 2: the only UDP VIP there
            Vip("2001:db8::1", Protocol::kTcp, 443),  // 3
            Vip("2001:db8::1", Protocol::kUdp, 0),    // 4
            Vip("10.0.0.2", Protocol::kTcp, 80),      // 5: two ports, no wildcard
            Vip("10.0.0.2", Protocol::kTcp, 443),     // 6
            Vip("2001:db8::2", Protocol::kUdp, 500),  // 7
            Vip("2001:db8::2", Protocol::kUdp, 4500), // 8
        }) {
    local_.v4 = Ip("192.0.2.10");
    local_.v6 = Ip("2001:db8:ff::10");
  }

  Verdict Run(const Bytes& frame) {
    // An exact-size copy, so that ASan sees any read past the end.
    std::vector<uint8_t> copy(frame);
    return Classify(copy, vips_, local_, &p_, port_mac_);
  }

  void ExpectDrop(const Bytes& frame, DropReason want) {
    const Verdict v = Run(frame);
    EXPECT_EQ(v.action, Action::kDrop);
    EXPECT_EQ(DropReasonName(v.reason), DropReasonName(want));
  }

  static FlowKey Key(const char* src, const char* dst, uint8_t proto, uint16_t sport, uint16_t dport) {
    FlowKey k;
    IpAddress s = Ip(src);
    IpAddress d = Ip(dst);
    k.src = s.bytes;
    k.dst = d.bytes;
    k.src_port = sport;
    k.dst_port = dport;
    k.protocol = proto;
    k.is_v6 = s.is_v6;
    return k;
  }

  VipMatcher vips_;
  LocalAddresses local_;
  ParsedPacket p_;
  const MacAddress* port_mac_ = nullptr;  // Classify's destination MAC check: off unless set
};

// ------------------------------------------------------------ drop reasons

TEST(DropReasonTest, NamesAreUniqueSnakeCaseAndStable) {
  std::set<std::string> seen;
  for (size_t i = 0; i < kNumDropReasons; ++i) {
    const std::string name(DropReasonName(static_cast<DropReason>(i)));
    ASSERT_FALSE(name.empty());
    for (char c : name) EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') << name;
    EXPECT_TRUE(seen.insert(name).second) << "duplicate " << name;
  }
  EXPECT_EQ(DropReasonName(DropReason::kBadIhl), "bad_ihl");
  EXPECT_EQ(DropReasonName(DropReason::kNoBackend), "no_backend");
  EXPECT_EQ(DropReasonName(static_cast<DropReason>(kNumDropReasons)), "unknown");
}

// ---------------------------------------------------------------- checksum

TEST(ChecksumTest, Rfc1071Example) {
  // RFC 1071 section 3: these bytes sum to 0xddf2.
  const uint8_t data[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  EXPECT_EQ(ChecksumPartial(data, sizeof(data), 0), 0xddf2u);
  EXPECT_EQ(InternetChecksum(data, sizeof(data)), 0x220d);
}

TEST(ChecksumTest, MatchesTheTextbookLoopAtEveryLengthAndAlignment) {
  uint8_t buf[300];
  uint32_t x = 12345;
  for (uint8_t& b : buf) {
    x = x * 1103515245 + 12345;
    b = static_cast<uint8_t>(x >> 16);
  }
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t len = 0; len + offset <= sizeof(buf); len += (len < 70 ? 1 : 37)) {
      EXPECT_EQ(InternetChecksum(buf + offset, len), testing::RefChecksum({}, buf + offset, len))
          << "offset " << offset << " len " << len;
      // Chained: an even-length first piece, then the rest, with a carried sum.
      const size_t half = (len / 2) & ~size_t{1};
      EXPECT_EQ(ChecksumFinish(ChecksumPartial(buf + offset + half, len - half,
                                               ChecksumPartial(buf + offset, half, 0xFFFF0u))),
                testing::RefChecksum({0x00, 0x0F, 0xFF, 0xF0}, buf + offset, len));
    }
  }
  std::fill(std::begin(buf), std::end(buf), 0xFF);
  EXPECT_EQ(InternetChecksum(buf, sizeof(buf)), 0);
}

// -------------------------------------------------------------- VipMatcher

TEST_F(ClassifyTest, SpecificPortWinsOverWildcard) {
  const IpAddress a = Ip("10.0.0.1");
  EXPECT_EQ(vips_.Match(a.bytes.data(), false, 6, 80), 0);
  EXPECT_EQ(vips_.Match(a.bytes.data(), false, 6, 8080), 1);
  EXPECT_EQ(vips_.Match(a.bytes.data(), false, 17, 53), 2);
  EXPECT_EQ(vips_.Match(a.bytes.data(), false, 17, 54), VipMatcher::kNone);
  EXPECT_EQ(vips_.Match(a.bytes.data(), true, 6, 80), VipMatcher::kNone);  // v6 ::0a00:0001? no
  const IpAddress b = Ip("10.0.0.3");
  EXPECT_EQ(vips_.Match(b.bytes.data(), false, 6, 80), VipMatcher::kNone);
  EXPECT_TRUE(vips_.IsVipAddress(a.bytes.data(), false));
  EXPECT_FALSE(vips_.IsVipAddress(b.bytes.data(), false));
  EXPECT_EQ(vips_.size(), 9u);
}

TEST_F(ClassifyTest, MatchAnyPort) {
  bool ambiguous = true;
  EXPECT_EQ(vips_.MatchAnyPort(Ip("10.0.0.1").bytes.data(), false, 6, &ambiguous), 1);
  EXPECT_FALSE(ambiguous);
  EXPECT_EQ(vips_.MatchAnyPort(Ip("10.0.0.1").bytes.data(), false, 17, &ambiguous), 2);
  EXPECT_FALSE(ambiguous);
  EXPECT_EQ(vips_.MatchAnyPort(Ip("10.0.0.2").bytes.data(), false, 6, &ambiguous), VipMatcher::kNone);
  EXPECT_TRUE(ambiguous);
  EXPECT_EQ(vips_.MatchAnyPort(Ip("10.0.0.2").bytes.data(), false, 17, &ambiguous), VipMatcher::kNone);
  EXPECT_FALSE(ambiguous);
}

TEST(VipMatcherTest, ManyVipsAllFoundAndNothingElse) {
  std::vector<VipSpec> vips;
  for (int i = 0; i < 3000; ++i) {
    VipSpec v;
    v.address = (i % 2) ? IpAddress::V4(10, static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i), 1)
                        : *IpAddress::Parse("2001:db8::" + std::to_string(i));
    v.protocol = (i % 3) ? Protocol::kTcp : Protocol::kUdp;
    v.port = static_cast<uint16_t>(i % 5 == 0 ? 0 : 1000 + i);
    vips.push_back(v);
  }
  VipMatcher m(vips);
  for (int i = 0; i < 3000; ++i) {
    const VipSpec& v = vips[i];
    const uint8_t proto = static_cast<uint8_t>(v.protocol);
    EXPECT_EQ(m.Match(v.address.bytes.data(), v.address.is_v6, proto, v.port == 0 ? 7 : v.port), i);
    EXPECT_EQ(m.Match(v.address.bytes.data(), v.address.is_v6, proto == 6 ? 17 : 6, v.port), VipMatcher::kNone);
    if (v.port != 0) {
      EXPECT_EQ(m.Match(v.address.bytes.data(), v.address.is_v6, proto, 7), VipMatcher::kNone);
    }
  }
  const IpAddress other = Ip("10.200.200.1");
  EXPECT_FALSE(m.IsVipAddress(other.bytes.data(), false));
}

TEST(VipMatcherTest, EmptyMatchesNothing) {
  VipMatcher m;
  const IpAddress a = Ip("10.0.0.1");
  EXPECT_EQ(m.Match(a.bytes.data(), false, 6, 80), VipMatcher::kNone);
  EXPECT_FALSE(m.IsVipAddress(a.bytes.data(), false));
  bool amb;
  EXPECT_EQ(m.MatchAnyPort(a.bytes.data(), false, 6, &amb), VipMatcher::kNone);
  m.Add(a, 6, 0, 42);
  EXPECT_EQ(m.Match(a.bytes.data(), false, 6, 80), 42);
}

// Address sets an operator may configure that the old unkeyed hash put on one
// probe run (issue 8, point 2): every VIP must sit within kMaxProbe slots of
// its home, so that a lookup of any address reads at most that many.
std::vector<VipSpec> AdversarialVips(const std::string& kind) {
  std::vector<VipSpec> vips;
  for (uint32_t i = 0; i < 4096; ++i) {
    VipSpec v;
    v.protocol = Protocol::kTcp;
    v.port = 443;
    IpAddress a;
    if (kind == "v6_last_two_bytes") {  // 2001:db8::0000 .. 2001:db8::0fff
      a = Ip("2001:db8::");
      a.bytes[14] = static_cast<uint8_t>(i >> 8);
      a.bytes[15] = static_cast<uint8_t>(i);
    } else if (kind == "v6_one_per_64") {  // 2001:db8:0:i::1
      a = Ip("2001:db8::1");
      a.bytes[6] = static_cast<uint8_t>(i >> 8);
      a.bytes[7] = static_cast<uint8_t>(i);
    } else if (kind == "v6_high_bytes") {  // i:db8::1: only the first bytes vary
      a = Ip("2001:db8::1");
      a.bytes[0] = static_cast<uint8_t>(i >> 8);
      a.bytes[1] = static_cast<uint8_t>(i);
    } else if (kind == "v4_sequence") {  // 10.0.0.0 ..
      a = IpAddress::V4(10, 0, static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i));
    } else {  // v4_stride_256: 10.i.0.1
      a = IpAddress::V4(10, static_cast<uint8_t>(i >> 4), static_cast<uint8_t>(i << 4), 1);
    }
    v.address = a;
    vips.push_back(v);
  }
  return vips;
}

class VipMatcherAdversarialTest : public ::testing::TestWithParam<const char*> {};

TEST_P(VipMatcherAdversarialTest, BoundedProbeAllMatchNonVipsMiss) {
  const std::vector<VipSpec> vips = AdversarialVips(GetParam());
  // Several fixed keys (a test must not depend on the process's random one),
  // and the process's own.
  std::vector<VipMatcher> matchers;
  for (uint64_t k : {0ull, 1ull, 0x0123456789ABCDEFull}) {
    matchers.emplace_back(vips, VipHashKey{k, ~k});
  }
  matchers.emplace_back(vips);
  for (const VipMatcher& m : matchers) {
    EXPECT_LE(m.max_probe(), VipMatcher::kMaxProbe);
    EXPECT_GE(m.index_slots(), 4 * vips.size());
    EXPECT_LE(m.build_attempts(), 8u);  // converges (load <= 1/4): one or two keys
    for (size_t i = 0; i < vips.size(); ++i) {
      const IpAddress& a = vips[i].address;
      ASSERT_EQ(m.Match(a.bytes.data(), a.is_v6, kIpProtoTcp, 443), i);
      ASSERT_TRUE(m.IsVipAddress(a.bytes.data(), a.is_v6));
      ASSERT_EQ(m.Match(a.bytes.data(), a.is_v6, kIpProtoUdp, 443), VipMatcher::kNone);
      ASSERT_EQ(m.Match(a.bytes.data(), a.is_v6, kIpProtoTcp, 80), VipMatcher::kNone);
      // Neighbours of the set in the same pattern (last byte past the set,
      // another prefix) are no VIPs.
      IpAddress other = a;
      other.bytes[a.is_v6 ? 4 : 0] ^= 0x40;
      ASSERT_EQ(m.Match(other.bytes.data(), other.is_v6, kIpProtoTcp, 443), VipMatcher::kNone);
      ASSERT_FALSE(m.IsVipAddress(other.bytes.data(), other.is_v6));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sets, VipMatcherAdversarialTest,
                         ::testing::Values("v6_last_two_bytes", "v6_one_per_64", "v6_high_bytes",
                                           "v4_sequence", "v4_stride_256"));

TEST(VipMatcherTest, KeyChangesLayoutNotAnswers) {
  const std::vector<VipSpec> vips = AdversarialVips("v6_last_two_bytes");
  const VipMatcher a(vips, VipHashKey{1, 2});
  const VipMatcher b(vips, VipHashKey{3, 4});
  for (size_t i = 0; i < vips.size(); i += 97) {
    const IpAddress& v = vips[i].address;
    EXPECT_EQ(a.Match(v.bytes.data(), true, kIpProtoTcp, 443), b.Match(v.bytes.data(), true, kIpProtoTcp, 443));
  }
  // The process key is drawn once and is not the fixed test key.
  EXPECT_EQ(&VipMatcher::DefaultKey(), &VipMatcher::DefaultKey());
  EXPECT_FALSE(VipMatcher::DefaultKey().k0 == 0 && VipMatcher::DefaultKey().k1 == 0);
}

TEST(VipMatcherTest, DuplicateKeepsFirstAndGroupsAcrossOrder) {
  // Specs of one address interleaved with others: grouped whatever the order.
  VipMatcher m({Vip("10.0.0.1", Protocol::kTcp, 80), Vip("10.0.0.2", Protocol::kTcp, 80),
                Vip("10.0.0.1", Protocol::kTcp, 80), Vip("10.0.0.1", Protocol::kTcp, 0),
                Vip("10.0.0.1", Protocol::kTcp, 0), Vip("10.0.0.1", Protocol::kTcp, 443)},
               VipHashKey{5, 6});
  const IpAddress a = Ip("10.0.0.1");
  EXPECT_EQ(m.Match(a.bytes.data(), false, kIpProtoTcp, 80), 0);
  EXPECT_EQ(m.Match(a.bytes.data(), false, kIpProtoTcp, 443), 5);
  EXPECT_EQ(m.Match(a.bytes.data(), false, kIpProtoTcp, 7), 3);
  EXPECT_EQ(m.size(), 4u);  // 80, 443, wildcard of .1; 80 of .2
}

// ---------------------------------------------------- header combinations

struct Combo {
  int vlans;           // 0, 1, 2 (802.1ad outer + 802.1Q inner)
  int l3;              // see kL3Names
  bool udp;
};
constexpr const char* kL3Names[] = {"ipv4", "ipv4_options", "ipv6", "ipv6_hbh", "ipv6_routing",
                                    "ipv6_dstopts", "ipv6_atomic_frag", "ipv6_chain"};

class HeaderComboTest : public ClassifyTest, public ::testing::WithParamInterface<Combo> {};

TEST_P(HeaderComboTest, ParsesToVipWithFlowAndOffsets) {
  const Combo c = GetParam();
  Eth eth;
  if (c.vlans >= 1) eth.vlans.push_back(0x0064);
  if (c.vlans >= 2) {
    eth.vlans.push_back(0x2123);
    eth.qinq = true;
  }
  const uint8_t proto = c.udp ? 17 : 6;
  const bool v6 = c.l3 >= 2;
  const char* client = v6 ? "2001:db8:c::7" : "198.51.100.7";
  const char* vip = v6 ? "2001:db8::1" : "10.0.0.1";
  const uint16_t dport = c.udp ? 53 : (v6 ? 443 : 80);
  const Bytes l4 = c.udp ? Udp(40000, dport, 10) : Tcp(40000, dport, kSyn | kAck, 10);
  Bytes frame;
  size_t l3_hdr = 0;  // IP header + extension headers
  if (!v6) {
    Ip4 h{.src = Ip(client), .dst = Ip(vip), .proto = proto};
    if (c.l3 == 1) h.options = {0x94, 0x04, 0x00, 0x00, 0x01, 0x01, 0x01, 0x00};  // router alert, NOPs, EOL
    l3_hdr = 20 + h.options.size();
    frame = Frame4(h, l4, eth);
  } else {
    Ip6 h{.src = Ip(client), .dst = Ip(vip), .proto = proto};
    switch (c.l3) {
      case 3: h.ext = {Ext6{.type = 0}}; break;
      case 4: h.ext = {Ext6{.type = 43, .len = 24}}; break;
      case 5: h.ext = {Ext6{.type = 60, .len = 16}}; break;
      case 6: h.ext = {Ext6{.type = 44}}; break;  // offset 0, M clear
      case 7: h.ext = {Ext6{.type = 0}, Ext6{.type = 60}, Ext6{.type = 43}, Ext6{.type = 44}, Ext6{.type = 60}}; break;
      default: break;
    }
    l3_hdr = 40;
    for (const Ext6& e : h.ext) l3_hdr += e.len;
    frame = Frame6(h, l4, eth);
  }
  const Verdict v = Run(frame);
  ASSERT_EQ(v.action, Action::kToVip) << DropReasonName(v.reason);
  EXPECT_EQ(v.vip_index, c.udp ? (v6 ? 4 : 2) : (v6 ? 3 : 0));
  EXPECT_EQ(p_.flow, Key(client, vip, proto, 40000, dport));
  EXPECT_EQ(p_.vlan_count, c.vlans);
  if (c.vlans >= 1) {
    EXPECT_EQ(p_.vlan_tci[0], 0x0064);
  }
  if (c.vlans >= 2) {
    EXPECT_EQ(p_.vlan_tci[1], 0x2123);
  }
  EXPECT_EQ(p_.l3_offset, 14 + 4 * c.vlans);
  EXPECT_EQ(p_.l4_offset, p_.l3_offset + l3_hdr);
  EXPECT_EQ(p_.l3_len, l3_hdr + l4.size());
  EXPECT_EQ(p_.ethertype, v6 ? kEtherTypeIpv6 : kEtherTypeIpv4);
  EXPECT_EQ(p_.ip_version, v6 ? 6 : 4);
  EXPECT_EQ(p_.l4_protocol, proto);
  EXPECT_EQ(p_.tcp_flags, c.udp ? 0 : (kSyn | kAck));
  EXPECT_EQ(p_.ttl, 64);
  EXPECT_FALSE(p_.is_fragment);
  EXPECT_FALSE(p_.is_icmp_error);
}

std::vector<Combo> AllCombos() {
  std::vector<Combo> out;
  for (int vlans = 0; vlans <= 2; ++vlans) {
    for (int l3 = 0; l3 < 8; ++l3) {
      for (bool udp : {false, true}) out.push_back({vlans, l3, udp});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, HeaderComboTest, ::testing::ValuesIn(AllCombos()),
                         [](const ::testing::TestParamInfo<Combo>& i) {
                           return std::string(kL3Names[i.param.l3]) + "_" + (i.param.udp ? "udp" : "tcp") +
                                  "_vlan" + std::to_string(i.param.vlans);
                         });

TEST_F(ClassifyTest, TcpWithOptionsUsesDataOffset) {
  const Verdict v = Run(Frame4({.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1")}, Tcp(1, 80, kSyn, 4, 15)));
  ASSERT_EQ(v.action, Action::kToVip);
  EXPECT_EQ(p_.tcp_flags, kSyn);
}

TEST_F(ClassifyTest, EthernetPaddingIsNotPartOfThePacket) {
  // 20 + 8 bytes of IP: the frame is padded to 60 bytes.
  const Bytes f = Frame4({.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1"), .proto = 17}, Udp(5, 53));
  ASSERT_EQ(f.size(), 60u);
  ASSERT_EQ(Run(f).action, Action::kToVip);
  EXPECT_EQ(p_.l3_len, 28);
}

// ----------------------------------------------------------- local traffic

TEST_F(ClassifyTest, EchoToUsAndToVipIsLocal) {
  EXPECT_EQ(Run(Frame4({.src = Ip("198.51.100.7"), .dst = Ip("192.0.2.10"), .proto = 1}, Echo(false, 7, 1)))
                .action,
            Action::kLocalEcho);
  EXPECT_EQ(p_.flow.src_port, 7);  // identifier
  EXPECT_EQ(p_.icmp_type, 8);
  EXPECT_EQ(Run(Frame4({.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.2"), .proto = 1}, Echo(false, 7, 1))).action,
            Action::kLocalEcho);
  EXPECT_EQ(Run(Frame6({.src = Ip("2001:db8:c::7"), .dst = Ip("2001:db8:ff::10"), .proto = 58}, Echo(true, 9, 1)))
                .action,
            Action::kLocalEcho);
  EXPECT_EQ(Run(Frame6({.src = Ip("2001:db8:c::7"), .dst = Ip("2001:db8::1"), .proto = 58}, Echo(true, 9, 1)))
                .action,
            Action::kLocalEcho);
  EXPECT_EQ(p_.icmp_type, 128);
}

TEST_F(ClassifyTest, Arp) {
  const MacAddress peer = Mac("02:aa:00:00:00:01");
  Bytes req = Frame({}, kEtherTypeArp, testing::Arp(1, peer, Ip("192.0.2.1"), {}, Ip("192.0.2.10")));
  EXPECT_EQ(Run(req).action, Action::kLocalArp);
  EXPECT_EQ(p_.arp_op, 1);
  EXPECT_EQ(p_.ip_version, 0);
  EXPECT_EQ(Run(Frame({}, kEtherTypeArp, testing::Arp(2, peer, Ip("192.0.2.1"), {}, Ip("192.0.2.10")))).action,
            Action::kLocalArp);
  EXPECT_EQ(p_.arp_op, 2);
  ExpectDrop(Frame({}, kEtherTypeArp, testing::Arp(1, peer, Ip("192.0.2.1"), {}, Ip("192.0.2.11"))),
             DropReason::kNotForUs);
  ExpectDrop(Frame({}, kEtherTypeArp, testing::Arp(3, peer, Ip("192.0.2.1"), {}, Ip("192.0.2.10"))),
             DropReason::kBadArp);
  Bytes bad_hlen = testing::Arp(1, peer, Ip("192.0.2.1"), {}, Ip("192.0.2.10"));
  bad_hlen[4] = 8;
  ExpectDrop(Frame({}, kEtherTypeArp, bad_hlen), DropReason::kBadArp);
  ExpectDrop(Frame({}, kEtherTypeArp, Bytes(27, 0), false), DropReason::kTooShort);
  LocalAddresses none;
  ParsedPacket p;
  EXPECT_EQ(Classify(req, vips_, none, &p).reason, DropReason::kNotForUs);
}

Bytes NeighborSolicit(const char* target, uint8_t hop_limit = 255, const char* src = "2001:db8:ff::1") {
  const IpAddress target_ip = Ip(target);
  Bytes body(target_ip.bytes.begin(), target_ip.bytes.end());
  // Source link-layer address option.
  for (uint8_t b : {1, 1, 2, 0xaa, 0, 0, 0, 1}) body.push_back(b);
  return Frame6({.src = Ip(src), .dst = Ip("ff02::1:ff00:10"), .proto = 58, .hop_limit = hop_limit},
                Icmp(135, 0, 0, body));
}

TEST_F(ClassifyTest, NeighborDiscovery) {
  EXPECT_EQ(Run(NeighborSolicit("2001:db8:ff::10")).action, Action::kLocalNd);
  EXPECT_EQ(p_.icmp_type, 135);
  ExpectDrop(NeighborSolicit("2001:db8:ff::11"), DropReason::kNotForUs);
  ExpectDrop(NeighborSolicit("2001:db8:ff::10", 64), DropReason::kBadNd);
  Bytes bad = NeighborSolicit("2001:db8:ff::10");
  bad[bad.size() - 1] ^= 1;  // inside the option: checksum breaks
  ExpectDrop(bad, DropReason::kBadChecksum);
  const IpAddress peer = Ip("2001:db8:ff::1");
  const Bytes target(peer.bytes.begin(), peer.bytes.end());
  const Bytes na = Frame6({.src = Ip("2001:db8:ff::1"), .dst = Ip("2001:db8:ff::10"), .proto = 58, .hop_limit = 255},
                          Icmp(136, 0, 0x60000000, target));
  EXPECT_EQ(Run(na).action, Action::kLocalNd);
  const Bytes na_other = Frame6({.src = Ip("2001:db8:ff::1"), .dst = Ip("2001:db8:ff::99"), .proto = 58,
                                 .hop_limit = 255},
                                Icmp(136, 0, 0x60000000, target));
  ExpectDrop(na_other, DropReason::kNotForUs);
  ExpectDrop(Frame6({.src = Ip("2001:db8:ff::1"), .dst = Ip("ff02::1:ff00:10"), .proto = 58, .hop_limit = 255},
                    Icmp(135, 0, 0, Bytes(8, 0))),
             DropReason::kBadNd);  // 16 bytes: shorter than a solicitation
}

// ------------------------------------------------------ destination MAC

TEST_F(ClassifyTest, UnicastToAnotherMacIsDroppedOursBroadcastAndMulticastPass) {
  const MacAddress ours = Mac("02:00:00:00:00:01");  // Eth{}.dst
  port_mac_ = &ours;
  const Ip4 h4{.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1")};
  const Ip6 h6{.src = Ip("2001:db8:c::7"), .dst = Ip("2001:db8::1")};

  // Ours: to the VIP, both families, tagged or not.
  EXPECT_EQ(Run(Frame4(h4, Tcp(1, 80))).action, Action::kToVip);
  EXPECT_EQ(Run(Frame6(h6, Tcp(1, 443))).action, Action::kToVip);
  EXPECT_EQ(Run(Frame4(h4, Tcp(1, 80), {.vlans = {7}})).action, Action::kToVip);

  // Flooded unicast for another host or LB instance: a difference in any
  // byte, the locally administered bit included, and the zero MAC.
  for (const char* other : {"02:00:00:00:00:02", "02:00:00:00:01:01", "12:00:00:00:00:01",
                            "00:00:00:00:00:01", "02:00:00:00:00:00", "00:00:00:00:00:00"}) {
    SCOPED_TRACE(other);
    ExpectDrop(Frame4(h4, Tcp(1, 80), {.dst = Mac(other)}), DropReason::kNotOurMac);
    ExpectDrop(Frame6(h6, Tcp(1, 443), {.dst = Mac(other), .vlans = {7}}), DropReason::kNotOurMac);
    // Even what would be ours at L3: ARP for our address, ping to us.
    ExpectDrop(Frame({.dst = Mac(other)}, kEtherTypeArp,
                     testing::Arp(1, Mac("02:00:00:00:00:02"), h4.src, {}, Ip("192.0.2.10"))),
               DropReason::kNotOurMac);
  }

  // Broadcast: an ARP request for our address.
  EXPECT_EQ(Run(Frame({.dst = Mac("ff:ff:ff:ff:ff:ff")}, kEtherTypeArp,
                      testing::Arp(1, Mac("02:00:00:00:00:02"), h4.src, {}, Ip("192.0.2.10"))))
                .action,
            Action::kLocalArp);
  // IPv6 multicast (33:33 + low 32 bits of the group): a neighbour
  // solicitation to our solicited-node group.
  Bytes ns = NeighborSolicit("2001:db8:ff::10");
  const MacAddress group = Mac("33:33:ff:00:00:10");
  std::copy(group.bytes.begin(), group.bytes.end(), ns.begin());
  EXPECT_EQ(Run(ns).action, Action::kLocalNd);
  // IPv4 multicast (01:00:5e + low 23 bits of the group): passes the MAC
  // check and is classified by its IP header like any frame.
  EXPECT_EQ(Run(Frame4(h4, Tcp(1, 80), {.dst = Mac("01:00:5e:00:00:fb")})).action, Action::kToVip);
  ExpectDrop(Frame4({.src = h4.src, .dst = Ip("224.0.0.251"), .proto = 17}, Udp(5353, 5353),
                    {.dst = Mac("01:00:5e:00:00:fb")}),
             DropReason::kNoVip);

  // Without a port MAC (null) nothing is checked.
  port_mac_ = nullptr;
  EXPECT_EQ(Run(Frame4(h4, Tcp(1, 80), {.dst = Mac("02:00:00:00:00:02")})).action, Action::kToVip);
}

// ---------------------------------------------------- every drop reason

TEST_F(ClassifyTest, EveryClassifyDropReason) {
  const Ip4 h4{.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1")};
  const Ip6 h6{.src = Ip("2001:db8:c::7"), .dst = Ip("2001:db8::1")};
  const Bytes syn4 = Frame4(h4, Tcp(1, 80));
  std::set<DropReason> covered;
  auto check = [&](const Bytes& f, DropReason want) {
    SCOPED_TRACE(std::string(DropReasonName(want)));
    ExpectDrop(f, want);
    covered.insert(want);
  };

  check(Bytes(13, 0), DropReason::kTooShort);
  check(Bytes(syn4.begin(), syn4.begin() + 14 + 19), DropReason::kTooShort);
  check(Frame({}, 0x88CC, Bytes(46, 0)), DropReason::kBadEtherType);  // LLDP
  const MacAddress ours = Mac("02:00:00:00:00:01");
  port_mac_ = &ours;
  check(Frame4(h4, Tcp(1, 80), {.dst = Mac("02:00:00:00:00:03")}), DropReason::kNotOurMac);
  port_mac_ = nullptr;
  check(Frame({.vlans = {1, 2, 3}}, kEtherTypeIpv4, testing::Ipv4(h4, Tcp(1, 80))), DropReason::kTooManyVlans);
  Bytes f = syn4;
  f[14] = 0x65;  // version 6 in an IPv4 ethertype
  check(f, DropReason::kBadIpVersion);
  f = syn4;
  f[14] = 0x44;
  check(f, DropReason::kBadIhl);
  f = syn4;
  f[16] = 0x01;  // total length 256+: past the frame
  check(f, DropReason::kBadIpLength);
  f = syn4;
  f[16] = 0;
  f[17] = 19;  // shorter than the header
  check(f, DropReason::kBadIpLength);
  f = syn4;
  f[14 + 10] ^= 0x01;  // header checksum
  check(f, DropReason::kBadIpv4Checksum);
  check(Frame4({.src = h4.src, .dst = h4.dst, .ttl = 0}, Tcp(1, 80)), DropReason::kTtlZero);
  Ip6 deep = h6;
  for (int i = 0; i < 9; ++i) deep.ext.push_back(Ext6{.type = 60});
  check(Frame6(deep, Tcp(1, 443)), DropReason::kBadIp6ExtChain);
  Ip6 late_hbh = h6;
  late_hbh.ext = {Ext6{.type = 60}, Ext6{.type = 0}};
  check(Frame6(late_hbh, Tcp(1, 443)), DropReason::kBadIp6ExtChain);
  Ip6 truncated_ext = h6;
  truncated_ext.ext = {Ext6{.type = 60, .len = 64}};
  Bytes te = Frame6(truncated_ext, {});
  te[14 + 41] = 200;  // header claims 1608 bytes
  check(te, DropReason::kBadIp6ExtChain);
  Ip4 pod = h4;  // "ping of death": offset + length past 65535
  pod.df = false;
  pod.frag_offset = 65528;
  check(Frame4(pod, Bytes(16, 0)), DropReason::kBadFragment);
  Ip6 pod6 = h6;
  pod6.ext = {Ext6{.type = 44, .frag_offset = 65528, .more = false}};
  check(Frame6(pod6, Bytes(16, 0)), DropReason::kBadFragment);
  Bytes bad_off = Tcp(1, 80);
  bad_off[12] = 0x40;  // 4 words
  check(Frame4(h4, bad_off), DropReason::kBadTcpOffset);
  bad_off[12] = 0x60;  // 6 words, only 5 present
  check(Frame4(h4, bad_off), DropReason::kBadTcpOffset);
  check(Frame4({.src = h4.src, .dst = Ip("10.9.9.9")}, Tcp(1, 80)), DropReason::kNoVip);
  check(Frame4({.src = h4.src, .dst = Ip("10.0.0.1"), .proto = 17}, Udp(1, 54)), DropReason::kVipNoService);
  check(Frame4({.src = h4.src, .dst = Ip("10.0.0.1"), .proto = 47}, Bytes(8, 0)), DropReason::kVipNoService);
  check(Frame4({.src = h4.src, .dst = Ip("10.0.0.2"), .df = false, .mf = true}, Tcp(1, 80)),
        DropReason::kFragmentAmbiguousVip);
  check(Frame4({.src = h4.src, .dst = Ip("10.0.0.1"), .proto = 1}, Icmp(13, 0, 0, Bytes(12, 0))),
        DropReason::kVipIcmpUnsupported);  // timestamp request
  check(Frame4({.src = h4.src, .dst = Ip("10.0.0.1"), .proto = 1}, Icmp(3, 4, 1400, Bytes(10, 0))),
        DropReason::kBadIcmpError);
  check(Frame4({.src = h4.src, .dst = Ip("192.0.2.10")}, Tcp(1, 22)), DropReason::kLocalUnsupported);
  check(Frame({}, kEtherTypeArp, testing::Arp(9, {}, h4.src, {}, h4.dst)), DropReason::kBadArp);
  check(Frame({}, kEtherTypeArp, testing::Arp(1, {}, h4.src, {}, Ip("192.0.2.99"))), DropReason::kNotForUs);
  check(NeighborSolicit("2001:db8:ff::10", 254), DropReason::kBadNd);
  Bytes echo = Frame4({.src = h4.src, .dst = Ip("192.0.2.10"), .proto = 1}, Echo(false, 1, 1));
  echo[14 + 20 + 8] ^= 0xFF;
  check(echo, DropReason::kBadChecksum);

  // The rest are decided after classification (pipeline, encapsulation) and
  // are tested there (encap_test, pipeline tests).
  const std::set<DropReason> later = {DropReason::kIcmpRateLimited, DropReason::kArpNdRateLimited,
                                      DropReason::kBroadcastSource, DropReason::kBroadcastDestination,
                                      DropReason::kNoBackend, DropReason::kMtuExceeded,
                                      DropReason::kMtuExceededNoIcmp, DropReason::kNoEncapSource,
                                      DropReason::kNoHeadroom, DropReason::kNoNeighbor,
                                      // the kernel interface's (kernel_path_test)
                                      DropReason::kKernelRateLimited, DropReason::kTunnelProbeStale};
  for (size_t i = 0; i < kNumDropReasons; ++i) {
    const DropReason r = static_cast<DropReason>(i);
    EXPECT_TRUE(covered.count(r) || later.count(r)) << "untested: " << DropReasonName(r);
  }
}

// ------------------------------------------------ IPv4 header checksum

// Classify with the NIC's verdict on the header checksum.
TEST_F(ClassifyTest, Ipv4HeaderChecksumSoftwareAndNicHint) {
  const Ip4 h4{.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1")};
  const Bytes good = Frame4(h4, Tcp(1, 80));
  Bytes bad = good;
  bad[14 + 10] ^= 0x80;
  // With IP options too: the software check covers the whole IHL.
  Bytes opts = Frame4({.src = h4.src, .dst = h4.dst, .options = Bytes{1, 1, 1, 0}}, Tcp(1, 80));
  Bytes opts_bad = opts;
  opts_bad[14 + 21] ^= 0x04;  // an option byte, checksum unchanged
  auto run = [&](const Bytes& f, RxChecksum hint) {
    std::vector<uint8_t> copy(f);
    return Classify(copy, vips_, local_, &p_, nullptr, hint);
  };
  // Unknown (no offload): software decides.
  EXPECT_EQ(run(good, RxChecksum::kUnknown).action, Action::kToVip);
  EXPECT_EQ(run(opts, RxChecksum::kUnknown).action, Action::kToVip);
  for (const Bytes* f : {&bad, &opts_bad}) {
    const Verdict v = run(*f, RxChecksum::kUnknown);
    EXPECT_EQ(v.action, Action::kDrop);
    EXPECT_EQ(DropReasonName(v.reason), "bad_ipv4_checksum");
  }
  // Good: the NIC checked; software trusts it (a frame whose bytes differ from
  // what the NIC saw cannot happen, so the hint alone decides).
  EXPECT_EQ(run(good, RxChecksum::kGood).action, Action::kToVip);
  EXPECT_EQ(run(bad, RxChecksum::kGood).action, Action::kToVip);
  // Bad: dropped, whatever the bytes say.
  const Verdict v = run(good, RxChecksum::kBad);
  EXPECT_EQ(v.action, Action::kDrop);
  EXPECT_EQ(DropReasonName(v.reason), "bad_ipv4_checksum");
  // Structural errors keep their own reason; IPv6 has no header checksum
  // (a kBad hint cannot concern it).
  Bytes short_ihl = bad;
  short_ihl[14] = 0x44;
  EXPECT_EQ(DropReasonName(run(short_ihl, RxChecksum::kUnknown).reason), "bad_ihl");
  const Bytes v6 = Frame6({.src = Ip("2001:db8:c::7"), .dst = Ip("2001:db8::1")}, Tcp(1, 443));
  EXPECT_EQ(run(v6, RxChecksum::kBad).action, Action::kToVip);
  // A checksum of 0xFFFF vs 0x0000 (the same in ones' complement): a header
  // whose checksum field holds the other zero still verifies.
  for (uint16_t id = 0; id < 2048; ++id) {
    Bytes f = Frame4({.src = h4.src, .dst = h4.dst, .id = id}, Tcp(1, 80));
    ASSERT_EQ(run(f, RxChecksum::kUnknown).action, Action::kToVip) << id;
    f[14 + 4] ^= 0x10;
    ASSERT_EQ(run(f, RxChecksum::kUnknown).action, Action::kDrop) << id;
  }
}

// ------------------------------------------------------- TTL / hop limit

TEST_F(ClassifyTest, TtlZeroDroppedTtlOnePassesUnchanged) {
  for (uint8_t ttl : {0, 1}) {
    SCOPED_TRACE(int{ttl});
    const Bytes f4 = Frame4({.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1"), .ttl = ttl}, Tcp(1, 80));
    const Bytes f6 = Frame6({.src = Ip("2001:db8:c::7"), .dst = Ip("2001:db8::1"), .hop_limit = ttl}, Tcp(1, 443));
    const Bytes ping = Frame4({.src = Ip("198.51.100.7"), .dst = Ip("192.0.2.10"), .proto = 1, .ttl = ttl},
                              Echo(false, 1, 1));
    for (const Bytes* f : {&f4, &f6, &ping}) {
      const Verdict v = Run(*f);
      if (ttl == 0) {
        EXPECT_EQ(v.action, Action::kDrop);
        EXPECT_EQ(DropReasonName(v.reason), "ttl_zero");
      } else {
        EXPECT_NE(v.action, Action::kDrop) << DropReasonName(v.reason);
        EXPECT_EQ(p_.ttl, 1);  // parsed as is; forwarding does not decrement it
      }
    }
  }
}

// ------------------------------------------------------------- ICMP errors

TEST_F(ClassifyTest, IcmpErrorsRouteByTheEmbeddedFlowReversed) {
  // The client's flow, as the LB sees it.
  ASSERT_EQ(Run(Frame4({.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1")}, Tcp(40000, 80))).action, Action::kToVip);
  const FlowKey client_flow = p_.flow;
  // The backend's reply (source = VIP, DSR) as quoted by a router.
  const Bytes reply = testing::Ipv4({.src = Ip("10.0.0.1"), .dst = Ip("198.51.100.7")}, Tcp(80, 40000, kSyn | kAck, 1400));
  for (auto [type, code] : {std::pair{3, 4}, {3, 1}, {11, 0}, {12, 0}}) {
    SCOPED_TRACE(type);
    const Bytes quoted(reply.begin(), reply.begin() + 28);  // header + 8 bytes, the minimum
    const Verdict v = Run(Frame4({.src = Ip("203.0.113.1"), .dst = Ip("10.0.0.1"), .proto = 1},
                                 Icmp(static_cast<uint8_t>(type), static_cast<uint8_t>(code), 1400, quoted)));
    ASSERT_EQ(v.action, Action::kToVip) << DropReasonName(v.reason);
    EXPECT_EQ(v.vip_index, 0);
    EXPECT_TRUE(p_.is_icmp_error);
    EXPECT_EQ(p_.icmp_type, type);
    EXPECT_EQ(p_.flow, client_flow);
  }
  // Wildcard VIP, UDP.
  const Bytes udp_reply = testing::Ipv4({.src = Ip("10.0.0.1"), .dst = Ip("198.51.100.8"), .proto = 17}, Udp(53, 5353, 100));
  ASSERT_EQ(Run(Frame4({.src = Ip("203.0.113.1"), .dst = Ip("10.0.0.1"), .proto = 1}, Icmp(3, 3, 0, udp_reply)))
                .action,
            Action::kToVip);
  EXPECT_EQ(p_.flow, Key("198.51.100.8", "10.0.0.1", 17, 5353, 53));
}

TEST_F(ClassifyTest, Icmpv6ErrorsRouteByTheEmbeddedFlowReversed) {
  ASSERT_EQ(Run(Frame6({.src = Ip("2001:db8:c::7"), .dst = Ip("2001:db8::1")}, Tcp(40000, 443))).action,
            Action::kToVip);
  const FlowKey client_flow = p_.flow;
  // Quoted with an extension header, as much as fits.
  const Bytes reply = testing::Ipv6({.src = Ip("2001:db8::1"), .dst = Ip("2001:db8:c::7"), .ext = {Ext6{.type = 60}}},
                                    Tcp(443, 40000, kAck, 1400));
  for (uint8_t type : {1, 2, 3, 4}) {
    SCOPED_TRACE(type);
    const Bytes quoted(reply.begin(), reply.begin() + 1232);
    const Verdict v = Run(Frame6({.src = Ip("2001:db8:77::1"), .dst = Ip("2001:db8::1"), .proto = 58},
                                 Icmp(type, 0, 1280, quoted)));
    ASSERT_EQ(v.action, Action::kToVip) << DropReasonName(v.reason);
    EXPECT_EQ(v.vip_index, 3);
    EXPECT_TRUE(p_.is_icmp_error);
    EXPECT_EQ(p_.flow, client_flow);
  }
}

TEST_F(ClassifyTest, IcmpErrorsThatCannotBeRoutedAreDropped) {
  const Bytes reply = testing::Ipv4({.src = Ip("10.0.0.1"), .dst = Ip("198.51.100.7")}, Tcp(80, 40000));
  auto err = [](const Bytes& quoted) {
    return Frame4({.src = Ip("203.0.113.1"), .dst = Ip("10.0.0.1"), .proto = 1}, Icmp(3, 4, 1400, quoted));
  };
  // Quoted packet not from the VIP the error was sent to.
  const Bytes spoofed = testing::Ipv4({.src = Ip("10.0.0.9"), .dst = Ip("198.51.100.7")}, Tcp(80, 40000));
  ExpectDrop(err(spoofed), DropReason::kBadIcmpError);
  // Truncated before the ports.
  ExpectDrop(err(Bytes(reply.begin(), reply.begin() + 22)), DropReason::kBadIcmpError);
  // IPv6 quoted in ICMPv4.
  const Bytes v6 = testing::Ipv6({.src = Ip("2001:db8::1"), .dst = Ip("2001:db8:c::7")}, Tcp(443, 40000));
  ExpectDrop(err(v6), DropReason::kBadIcmpError);
  // Quoted packet of a port no VIP serves.
  const Bytes other = testing::Ipv4({.src = Ip("10.0.0.1"), .dst = Ip("198.51.100.7"), .proto = 17}, Udp(99, 40000));
  ExpectDrop(err(other), DropReason::kVipNoService);
  // Errors to an address that is no VIP are other traffic.
  ExpectDrop(Frame4({.src = Ip("203.0.113.1"), .dst = Ip("10.9.9.9"), .proto = 1}, Icmp(3, 4, 1400, reply)),
             DropReason::kNoVip);
}

// --------------------------------------------------------------- fragments

TEST_F(ClassifyTest, Ipv4FragmentsOfOneDatagramShareTheKey) {
  const Bytes whole = Udp(5353, 53, 3000);
  const Ip4 base{.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1"), .proto = 17, .df = false, .id = 77};
  Ip4 first = base;
  first.mf = true;
  Ip4 middle = base;
  middle.mf = true;
  middle.frag_offset = 1480;
  Ip4 last = base;
  last.frag_offset = 2960;
  const Bytes f1 = Frame4(first, Bytes(whole.begin(), whole.begin() + 1480));
  const Bytes f2 = Frame4(middle, Bytes(whole.begin() + 1480, whole.begin() + 2960));
  const Bytes f3 = Frame4(last, Bytes(whole.begin() + 2960, whole.end()));

  // Out of order, as the network may deliver them.
  ASSERT_EQ(Run(f3).action, Action::kToVip);
  const FlowKey k3 = p_.flow;
  EXPECT_TRUE(p_.is_fragment);
  EXPECT_FALSE(p_.is_first_fragment);
  EXPECT_EQ(p_.l4_offset, 0);
  EXPECT_EQ(p_.fragment_id, 77u);
  Verdict v = Run(f1);
  ASSERT_EQ(v.action, Action::kToVip);
  EXPECT_EQ(v.vip_index, 2);  // the only UDP VIP on 10.0.0.1
  EXPECT_TRUE(p_.is_first_fragment);
  EXPECT_EQ(p_.l4_offset, 14 + 20);
  EXPECT_EQ(p_.flow, k3);
  v = Run(f2);
  ASSERT_EQ(v.action, Action::kToVip);
  EXPECT_EQ(v.vip_index, 2);
  EXPECT_EQ(p_.flow, k3);
  // The policy's key: the 3-tuple, ports 0.
  EXPECT_EQ(k3, Key("198.51.100.7", "10.0.0.1", 17, 0, 0));
  // TCP fragments of the wildcard VIP.
  Ip4 tcp_first{.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1"), .df = false, .mf = true};
  const Bytes syn = Tcp(1, 80, kSyn, 64);
  ASSERT_EQ(Run(Frame4(tcp_first, Bytes(syn.begin(), syn.begin() + 24))).vip_index, 1);
  EXPECT_EQ(p_.tcp_flags, 0);  // a fragment's TCP header is not interpreted
  // A tiny first fragment whose L4 header is cut short is still routed: no
  // port is read from any fragment.
  ASSERT_EQ(Run(Frame4(tcp_first, Bytes(8, 0))).action, Action::kToVip);
}

TEST_F(ClassifyTest, Ipv6FragmentsOfOneDatagramShareTheKey) {
  const Bytes whole = Udp(5353, 4500, 3000);
  const Ip6 base{.src = Ip("2001:db8:c::7"), .dst = Ip("2001:db8::1"), .proto = 17};
  Ip6 first = base;
  first.ext = {Ext6{.type = 0}, Ext6{.type = 44, .frag_offset = 0, .more = true, .id = 0xdeadbeef}};
  Ip6 later = base;
  later.ext = {Ext6{.type = 44, .frag_offset = 1448, .more = false, .id = 0xdeadbeef}};
  ASSERT_EQ(Run(Frame6(later, Bytes(whole.begin() + 1448, whole.end()))).action, Action::kToVip);
  const FlowKey k = p_.flow;
  EXPECT_TRUE(p_.is_fragment);
  EXPECT_FALSE(p_.is_first_fragment);
  EXPECT_EQ(p_.fragment_id, 0xdeadbeefu);
  const Verdict v = Run(Frame6(first, Bytes(whole.begin(), whole.begin() + 1448)));
  ASSERT_EQ(v.action, Action::kToVip);
  EXPECT_EQ(v.vip_index, 4);
  EXPECT_TRUE(p_.is_first_fragment);
  EXPECT_EQ(p_.l4_offset, 14 + 40 + 8 + 8);
  EXPECT_EQ(p_.flow, k);
  EXPECT_EQ(k, Key("2001:db8:c::7", "2001:db8::1", 17, 0, 0));
  // Two port-specific UDP VIPs on 2001:db8::2 and no wildcard: ambiguous.
  Ip6 amb = later;
  amb.dst = Ip("2001:db8::2");
  ExpectDrop(Frame6(amb, Bytes(16, 0)), DropReason::kFragmentAmbiguousVip);
}

// ------------------------------------------------------------- robustness

TEST_F(ClassifyTest, EveryTruncationIsDroppedWithoutReadingPastTheEnd) {
  std::vector<Bytes> frames = {
      Frame4({.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1"), .options = {1, 1, 1, 0}}, Tcp(1, 80, kSyn, 0, 8),
             {.vlans = {5, 6}, .qinq = true}),
      Frame6({.src = Ip("2001:db8:c::7"), .dst = Ip("2001:db8::1"), .proto = 17,
              .ext = {Ext6{.type = 0}, Ext6{.type = 43, .len = 24}, Ext6{.type = 60}}},
             Udp(1, 53), {.vlans = {9}}),
      Frame4({.src = Ip("203.0.113.1"), .dst = Ip("10.0.0.1"), .proto = 1},
             Icmp(3, 4, 1400, testing::Ipv4({.src = Ip("10.0.0.1"), .dst = Ip("198.51.100.7")}, Tcp(80, 4)))),
      NeighborSolicit("2001:db8:ff::10"),
  };
  for (const Bytes& full : frames) {
    ASSERT_NE(Run(full).action, Action::kDrop) << DropReasonName(Run(full).reason);
    const size_t ip_end = p_.ip_version ? size_t{p_.l3_offset} + p_.l3_len : full.size();
    for (size_t len = 0; len < ip_end; ++len) {
      const Verdict v = Run(Bytes(full.begin(), full.begin() + len));
      EXPECT_EQ(v.action, Action::kDrop) << "prefix " << len;
    }
  }
}

// ------------------------------------ the common case against the general parser

// Classify decides the common case (untagged Ethernet, IPv4 without options
// or fragmentation, TCP or UDP) on a short path of its own, and every other
// frame with the general parser. A VLAN tag sends a frame to the general
// parser and changes nothing else but the offsets and the tag fields, so the
// tagged copy of a frame is an oracle for it: same verdict, same ParsedPacket
// but for those. Checked on frames mutated from valid ones (bytes flipped,
// lengths, IHL, flags, TTL, protocol, TCP offset, ethertype, destination MAC,
// truncation and padding), under every checksum hint and MAC check.

// `f` with an 802.1Q tag (TCI 0x0123) after the MACs.
Bytes Tagged(const Bytes& f) {
  Bytes t(f.begin(), f.begin() + 12);
  t.insert(t.end(), {0x81, 0x00, 0x01, 0x23});
  t.insert(t.end(), f.begin() + 12, f.end());
  return t;
}

// What Classify of Tagged(f) gives, from what Classify of f gave.
ParsedPacket AsTagged(ParsedPacket p, const Verdict& v) {
  if (v.action == Action::kDrop && v.reason == DropReason::kNotOurMac) return p;  // before the tags
  p.vlan_count = 1;
  p.vlan_tci[0] = 0x0123;
  p.l3_offset += 4;
  if (p.l4_offset != 0) p.l4_offset += 4;
  return p;
}

bool SameBytes(const ParsedPacket& a, const ParsedPacket& b) {
  // Field by field (padding is not part of the contract).
  return a.flow == b.flow && a.l3_offset == b.l3_offset && a.l4_offset == b.l4_offset && a.l3_len == b.l3_len &&
         a.ethertype == b.ethertype && a.vlan_tci == b.vlan_tci && a.vlan_count == b.vlan_count &&
         a.ip_version == b.ip_version && a.l4_protocol == b.l4_protocol && a.tcp_flags == b.tcp_flags &&
         a.ttl == b.ttl && a.dont_fragment == b.dont_fragment && a.is_fragment == b.is_fragment &&
         a.is_first_fragment == b.is_first_fragment && a.is_icmp_error == b.is_icmp_error &&
         a.icmp_type == b.icmp_type && a.icmp_code == b.icmp_code && a.arp_op == b.arp_op &&
         a.fragment_id == b.fragment_id;
}

std::string Describe(const Verdict& v) {
  if (v.action == Action::kDrop) return "drop " + std::string(DropReasonName(v.reason));
  return "action " + std::to_string(static_cast<int>(v.action)) + " vip " + std::to_string(v.vip_index);
}

// Sets a header's checksum right after a mutation, half of the time: so that
// the software check (hint kUnknown) passes often enough to reach the rest.
void FixIpv4Checksum(Bytes& f) {
  if (f.size() < 34 || f[12] != 0x08 || f[13] != 0x00) return;
  const size_t ihl = size_t{f[14] & 0x0Fu} * 4;
  if (ihl < 20 || f.size() < 14 + ihl) return;
  f[24] = f[25] = 0;
  const uint16_t sum = ChecksumFinish(ChecksumPartial(f.data() + 14, ihl, 0));
  f[24] = static_cast<uint8_t>(sum >> 8);
  f[25] = static_cast<uint8_t>(sum);
}

TEST_F(ClassifyTest, CommonCaseAgreesWithTheGeneralParserOnMutatedFrames) {
  const Ip4 h{.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1")};
  const std::vector<Bytes> seeds = {
      Frame4(h, Tcp(40000, 80, kAck, 6)),                                            // VIP 0
      Frame4(h, Tcp(40000, 8080, kSyn)),                                             // wildcard VIP 1
      Frame4({.src = h.src, .dst = h.dst, .proto = 17}, Udp(5353, 53, 3)),           // VIP 2, padded
      Frame4({.src = h.src, .dst = Ip("10.0.0.2")}, Tcp(1, 443, kSyn, 0, 8)),        // VIP 6, TCP options
      Frame4({.src = h.src, .dst = Ip("10.0.0.2")}, Tcp(1, 81)),                     // VIP address, no service
      Frame4({.src = h.src, .dst = Ip("192.0.2.10"), .proto = 17}, Udp(1, 2)),       // to us
      Frame4({.src = h.src, .dst = Ip("203.0.113.9")}, Tcp(1, 80)),                  // nobody's
      Frame4({.src = h.src, .dst = h.dst, .options = {1, 1, 1, 0}}, Tcp(1, 80)),     // IPv4 options
      Frame4({.src = h.src, .dst = h.dst, .proto = 17, .mf = true}, Udp(1, 53, 16)), // first fragment
      Frame4({.src = h.src, .dst = h.dst, .proto = 1}, Echo(false, 7, 1)),           // ping a VIP
      Frame6({.src = Ip("2001:db8:c::7"), .dst = Ip("2001:db8::1")}, Tcp(1, 443)),
  };
  const MacAddress ours = Mac("02:00:00:00:00:01");
  LocalAddresses with_kernel = local_;
  with_kernel.kernel = true;
  std::mt19937 rng(13);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  std::map<std::string, int> outcomes;
  size_t compared = 0;
  for (int iter = 0; iter < 40000; ++iter) {
    Bytes f = seeds[pick(seeds.size())];
    const int mutations = 1 + static_cast<int>(pick(3));
    for (int m = 0; m < mutations; ++m) {
      // Header bytes that a truncation took away stay away.
      auto set = [&f](size_t i, unsigned v) {
        if (i < f.size()) f[i] = static_cast<uint8_t>(v);
      };
      auto at = [&f](size_t i) -> unsigned { return i < f.size() ? f[i] : 0; };
      switch (pick(12)) {
        case 0: f[pick(std::min<size_t>(f.size(), 64))] ^= static_cast<uint8_t>(1u << pick(8)); break;
        case 1: f[pick(f.size())] = static_cast<uint8_t>(rng()); break;
        case 2: set(14, pick(3) == 0 ? rng() : 0x40 | pick(16)); break;  // version, IHL
        case 3: {  // total length: near the truth or anything
          const unsigned len = (at(16) << 8 | at(17)) + static_cast<unsigned>(pick(9)) - 4;
          const unsigned v = pick(4) == 0 ? rng() : len;
          set(16, v >> 8);
          set(17, v);
          break;
        }
        case 4: set(20, rng()); set(21, pick(2) ? 0 : rng()); break;  // flags, fragment offset
        case 5: set(22, pick(3)); break;                                // TTL 0, 1, 2
        case 6: set(23, std::array<uint8_t, 6>{6, 17, 1, 0, 41, 58}[pick(6)]); break;
        case 7: set(46, pick(16) << 4 | pick(16)); break;  // TCP data offset
        case 8: {  // ethertype
          const uint16_t et = std::array<uint16_t, 5>{0x0800, 0x86DD, 0x0806, 0x88CC, 0x0801}[pick(5)];
          f[12] = static_cast<uint8_t>(et >> 8);
          f[13] = static_cast<uint8_t>(et);
          break;
        }
        case 9: f[0] = std::array<uint8_t, 3>{0x02, 0x03, 0xFF}[pick(3)]; break;  // ours, another, broadcast
        case 10: f.resize(14 + pick(f.size() - 13)); break;  // truncated (never below 14 bytes)
        default: f.resize(f.size() + pick(40), 0); break;    // padded
      }
    }
    if (pick(2)) FixIpv4Checksum(f);
    if ((f[12] == 0x81 || f[12] == 0x88) && (f[13] == 0x00 || f[13] == 0xA8)) continue;  // already tagged
    const Bytes tagged = Tagged(f);
    for (RxChecksum hint : {RxChecksum::kGood, RxChecksum::kUnknown, RxChecksum::kBad}) {
      for (const MacAddress* mac : {static_cast<const MacAddress*>(nullptr), &ours}) {
        for (const LocalAddresses* local : {&local_, &with_kernel}) {
          ParsedPacket plain;
          ParsedPacket general;
          std::vector<uint8_t> a(f);  // exact size: ASan sees a read past the end
          std::vector<uint8_t> b(tagged);
          const Verdict va = Classify(a, vips_, *local, &plain, mac, hint);
          const Verdict vb = Classify(b, vips_, *local, &general, mac, hint);
          ASSERT_EQ(Describe(va), Describe(vb)) << "iteration " << iter;
          ASSERT_TRUE(SameBytes(AsTagged(plain, va), general)) << "iteration " << iter;
          ++outcomes[Describe(va)];
          ++compared;
        }
      }
    }
  }
  // Not vacuous: the mutations reach VIPs (the common case) and many drops.
  EXPECT_GT(compared, 400000u);
  EXPECT_GT(outcomes["action 0 vip 0"], 10000);
  EXPECT_GT(outcomes["action 0 vip 2"], 1000);
  EXPECT_GT(outcomes["drop no_vip"], 1000);
  EXPECT_GT(outcomes["drop vip_no_service"], 1000);
  EXPECT_GT(outcomes["drop bad_ipv4_checksum"], 10000);
  EXPECT_GT(outcomes["drop bad_ip_length"], 1000);
  EXPECT_GT(outcomes["drop bad_tcp_offset"], 100);
  EXPECT_GT(outcomes["drop ttl_zero"], 100);
  EXPECT_GT(outcomes["drop not_our_mac"], 1000);
  EXPECT_GT(outcomes["drop too_short"], 1000);
  EXPECT_GT(outcomes["drop local_unsupported"], 100);
  EXPECT_GT(outcomes["action 4 vip 0"], 100);  // kToKernel
  EXPECT_GE(outcomes.size(), 15u);
}

// The common case's ParsedPacket, field by field (every field the general
// parser writes), for TCP and UDP.
TEST_F(ClassifyTest, CommonCaseFillsEveryField) {
  const Bytes tcp = Frame4({.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1"), .ttl = 9, .df = false, .id = 0xBEEF},
                           Tcp(40000, 80, kSyn | kAck, 4));
  ASSERT_EQ(Run(tcp).action, Action::kToVip);
  ParsedPacket want;
  want.flow = Key("198.51.100.7", "10.0.0.1", 6, 40000, 80);
  want.l3_offset = 14;
  want.l4_offset = 34;
  want.l3_len = 44;
  want.ethertype = kEtherTypeIpv4;
  want.ip_version = 4;
  want.l4_protocol = 6;
  want.tcp_flags = kSyn | kAck;
  want.ttl = 9;
  want.fragment_id = 0xBEEF;
  EXPECT_TRUE(SameBytes(p_, want));

  const Bytes udp = Frame4({.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1"), .proto = 17}, Udp(5, 53));
  ASSERT_EQ(Run(udp).vip_index, 2);
  want.flow = Key("198.51.100.7", "10.0.0.1", 17, 5, 53);
  want.l3_len = 28;
  want.l4_protocol = 17;
  want.tcp_flags = 0;
  want.ttl = 64;
  want.dont_fragment = true;
  want.fragment_id = 0x1234;
  EXPECT_TRUE(SameBytes(p_, want));
  // A frame of the common shape that is not a VIP's leaves the same fields.
  const Bytes other = Frame4({.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.2"), .proto = 17}, Udp(5, 53));
  ExpectDrop(other, DropReason::kVipNoService);
  want.flow = Key("198.51.100.7", "10.0.0.2", 17, 5, 53);
  EXPECT_TRUE(SameBytes(p_, want));
}

// ------------------------------------------- frames built by scapy (oracle)

// The fuzz seed corpus is written by scapy (tests/fuzz/make_corpus.py), not by
// maglb's builder: classifying it checks the parser against an independent
// encoder. VIPs and local addresses as in tests/fuzz/packet_fuzzer.cc.
TEST(ScapyCorpusTest, EveryFrameClassifiesAsItsNameSays) {
  auto vip = [](const char* addr, Protocol proto, uint16_t port) {
    VipSpec v;
    v.address = Ip(addr);
    v.protocol = proto;
    v.port = port;
    return v;
  };
  const VipMatcher vips({vip("198.51.100.80", Protocol::kTcp, 80), vip("198.51.100.80", Protocol::kTcp, 0),
                         vip("198.51.100.53", Protocol::kUdp, 53), vip("2001:db8:5::80", Protocol::kTcp, 443),
                         vip("2001:db8:5::80", Protocol::kUdp, 0), vip("198.51.100.90", Protocol::kTcp, 80),
                         vip("198.51.100.91", Protocol::kUdp, 0)});
  LocalAddresses local;
  local.v4 = Ip("192.0.2.10");
  local.v6 = Ip("2001:db8::10");
  struct Want {
    Action action;
    int vip_or_reason;  // VIP index for kToVip, DropReason for kDrop
  };
  auto to = [](int vip) { return Want{Action::kToVip, vip}; };
  auto drop = [](DropReason r) { return Want{Action::kDrop, static_cast<int>(r)}; };
  const std::map<std::string, Want> want = {
      {"tcp4_syn", to(0)}, {"tcp4_ack_data", to(0)}, {"tcp4_fin", to(0)}, {"tcp4_rst", to(0)},
      {"tcp4_wildcard_port", to(1)}, {"tcp4_options", to(0)}, {"udp4_dns", to(2)}, {"tcp4_dsr", to(5)},
      {"udp4_draining_vip", to(6)}, {"vlan1_tcp4", to(0)}, {"vlan2_tcp4", to(0)}, {"tcp6_syn", to(3)},
      {"udp6_any_port", to(4)}, {"tcp6_hbh", to(3)}, {"tcp6_routing", to(3)}, {"tcp6_dstopts", to(3)},
      {"tcp6_atomic_frag", to(3)}, {"vlan1_udp6", to(4)}, {"tcp4_big_df", to(0)}, {"udp4_big_nodf", to(2)},
      {"tcp6_big", to(3)}, {"frag4_first", to(2)}, {"frag4_later", to(2)}, {"frag6_first", to(4)},
      {"frag6_later", to(4)}, {"icmp4_frag_needed", to(0)}, {"icmp4_time_exceeded", to(2)},
      {"icmp6_too_big", to(3)}, {"icmp6_unreach", to(4)}, {"icmp6_time_exceeded", to(4)},
      {"arp_request", {Action::kLocalArp, 0}}, {"arp_reply", {Action::kLocalArp, 0}},
      {"nd_ns", {Action::kLocalNd, 0}}, {"nd_ns_dad", {Action::kLocalNd, 0}}, {"nd_na", {Action::kLocalNd, 0}},
      {"echo4_local", {Action::kLocalEcho, 0}}, {"echo4_vip_options", {Action::kLocalEcho, 0}},
      {"echo6_local", {Action::kLocalEcho, 0}}, {"echo6_vip_hbh", {Action::kLocalEcho, 0}},
      {"other_dst", drop(DropReason::kNoVip)}, {"gre_to_us", drop(DropReason::kLocalUnsupported)},
      {"lldp", drop(DropReason::kBadEtherType)}, {"three_vlans", drop(DropReason::kTooManyVlans)},
      {"trunc_eth", drop(DropReason::kTooShort)}, {"trunc_ip", drop(DropReason::kTooShort)},
      {"trunc_tcp", drop(DropReason::kBadIpLength)},  // the IP length claims the whole segment
      {"bad_ihl", drop(DropReason::kBadIhl)}, {"bad_version", drop(DropReason::kBadIpVersion)},
      {"bad_total_length", drop(DropReason::kBadIpLength)}, {"bad_tcp_offset", drop(DropReason::kBadTcpOffset)},
      {"bad_ip6_ext_len", drop(DropReason::kBadIp6ExtChain)},
      {"ip6_ext_chain_too_long", drop(DropReason::kBadIp6ExtChain)},
      {"ping_of_death_frag", drop(DropReason::kBadFragment)},
      {"icmp_error_truncated", drop(DropReason::kBadIpLength)},
      {"echo_bad_checksum", drop(DropReason::kBadChecksum)}, {"nd_bad_hop_limit", drop(DropReason::kBadNd)},
      {"arp_bad_hlen", drop(DropReason::kBadArp)},
  };
  size_t seen = 0;
  for (const auto& [name, w] : want) {
    SCOPED_TRACE(name);
    std::ifstream in("tests/fuzz/corpus/" + name + ".bin", std::ios::binary);
    ASSERT_TRUE(in.good()) << "missing corpus file (run from the source root)";
    const std::vector<uint8_t> frame((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ParsedPacket p;
    const Verdict v = Classify(frame, vips, local, &p);
    EXPECT_EQ(v.action, w.action) << DropReasonName(v.reason);
    if (w.action == Action::kToVip) {
      EXPECT_EQ(v.vip_index, w.vip_or_reason);
    }
    if (w.action == Action::kDrop) {
      EXPECT_EQ(DropReasonName(v.reason), DropReasonName(static_cast<DropReason>(w.vip_or_reason)));
    }
    ++seen;
  }
  EXPECT_EQ(seen, 57u);
}

}  // namespace
}  // namespace maglb
