// Writes frames produced by maglb's own packet code (encapsulation, ICMP
// too-big, fragmentation, ARP/ND/echo replies) to a pcap file, in a fixed
// order, for check_pcap.py to decode with tshark: a dissector nobody here
// wrote. The input frames come from the test packet builder.
//
// Usage: gen_pcap OUT.pcap
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "maglb/encap.h"
#include "maglb/packet.h"
#include "maglb/reply.h"
#include "packet_builder.h"
#include "pcap_writer.h"

namespace maglb {
namespace {

using testing::Bytes;
using testing::Ip;
using testing::Mac;
using testing::PcapWriter;

constexpr size_t kHeadroom = 128;
constexpr uint64_t kFlowHash = 0x0123456789abcdefULL;

VipSpec Vip(const char* addr, Protocol proto) {
  VipSpec v;
  v.address = Ip(addr);
  v.protocol = proto;
  return v;
}

int Main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.pcap\n", argv[0]);
    return 2;
  }
  PcapWriter pcap(argv[1]);
  if (!pcap.ok()) {
    std::perror(argv[1]);
    return 1;
  }
  const VipMatcher vips({Vip("10.0.0.1", Protocol::kTcp), Vip("2001:db8::1", Protocol::kTcp),
                         Vip("10.0.0.1", Protocol::kUdp)});
  LocalAddresses local;
  local.v4 = Ip("192.0.2.10");
  local.v6 = Ip("2001:db8:ff::10");
  const MacAddress our_mac = Mac("02:00:00:00:00:01");
  EncapConfig config;
  config.src_mac = our_mac;
  config.source_v4 = Ip("192.0.2.0");
  config.source_v6 = Ip("2001:db8:ff::");
  config.flow_bits_v4 = 8;
  config.flow_bits_v6 = 16;
  config.ttl = 61;
  config.mtu = 1500;
  const MacAddress gateway = Mac("02:66:00:00:00:01");

  auto classify = [&](const Bytes& frame, ParsedPacket* p) {
    const Verdict v = Classify(frame, vips, local, p);
    if (v.action == Action::kDrop) {
      std::fprintf(stderr, "gen_pcap: input dropped: %s\n", std::string(DropReasonName(v.reason)).c_str());
      std::exit(1);
    }
  };
  auto forward = [&](const Bytes& in, const EncapTarget& t) {
    ParsedPacket p;
    classify(in, &p);
    Bytes buf(kHeadroom + in.size());
    std::memcpy(buf.data() + kHeadroom, in.data(), in.size());
    const EncapResult r = Forward(buf.data() + kHeadroom, in.size(), kHeadroom, p, t, config, kFlowHash);
    if (r.status != EncapStatus::kOk) {
      std::fprintf(stderr, "gen_pcap: encapsulation failed: %d\n", static_cast<int>(r.status));
      std::exit(1);
    }
    // Where the worker sends by the backend's template (ForwardFast), that
    // frame is the one written, so that tshark checks it too; it must be
    // Forward's byte for byte.
    const Ipv4EncapTemplate tmpl = Ipv4EncapTemplate::Of(t, config);
    if (tmpl.valid()) {
      Bytes fast(kHeadroom + in.size());
      std::memcpy(fast.data() + kHeadroom, in.data(), in.size());
      EncapResult fr;
      if (!ForwardFast<false>(fast.data() + kHeadroom, in.size(), kHeadroom, p, tmpl, kFlowHash, &fr) ||
          fr.offset != r.offset || fr.length != r.length ||
          std::memcmp(fast.data() + kHeadroom + fr.offset, buf.data() + kHeadroom + r.offset, r.length) != 0) {
        std::fprintf(stderr, "gen_pcap: the template path's frame is not Forward's\n");
        std::exit(1);
      }
      pcap.Write(fast.data() + kHeadroom + fr.offset, fr.length);
      return;
    }
    pcap.Write(buf.data() + kHeadroom + r.offset, r.length);
  };

  const Bytes client4 = testing::Frame4({.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1"), .tos = 0xb9},
                                        testing::Tcp(40000, 80, 0x18, 100));
  const Bytes client6 = testing::Frame6(
      {.src = Ip("2001:db8:c::7"), .dst = Ip("2001:db8::1"), .traffic_class = 0xb9}, testing::Tcp(40000, 443, 0x18, 100));
  const IpAddress backend4 = Ip("172.16.0.5");
  const IpAddress backend6 = Ip("2001:db8:b::5");

  // 1-8: GRE then IP-in-IP; inner 4, 6; outer 4, 6.
  for (Forwarding f : {Forwarding::kGre, Forwarding::kIpip}) {
    for (bool inner_v6 : {false, true}) {
      for (bool outer_v6 : {false, true}) {
        forward(inner_v6 ? client6 : client4,
                {.forwarding = f, .backend = outer_v6 ? backend6 : backend4, .next_hop_mac = gateway});
      }
    }
  }
  // 9: L2 DSR.
  forward(client4, {.forwarding = Forwarding::kL2Dsr, .backend = {}, .next_hop_mac = Mac("02:bb:00:00:00:05")});

  // 10, 11: too big -> ICMP fragmentation needed (VLAN 42) / packet too big.
  {
    const Bytes big4 = testing::Frame4({.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1")},
                                       testing::Tcp(40000, 80, 0x18, 1460), {.vlans = {42}});
    ParsedPacket p;
    classify(big4, &p);
    Bytes out(kMaxIcmpTooBigLen);
    const size_t n = BuildIcmpTooBig(big4, p, 1476, *local.v4, our_mac, out);
    pcap.Write(out.data(), n);
    const Bytes big6 = testing::Frame6({.src = Ip("2001:db8:c::7"), .dst = Ip("2001:db8::1")},
                                       testing::Tcp(40000, 443, 0x18, 1440));
    classify(big6, &p);
    const size_t n6 = BuildIcmpTooBig(big6, p, 1456, *local.v6, our_mac, out);
    pcap.Write(out.data(), n6);
  }
  // 12: ARP reply.
  {
    Bytes arp = testing::Frame({.dst = Mac("ff:ff:ff:ff:ff:ff"), .src = Mac("02:aa:00:00:00:01")}, kEtherTypeArp,
                               testing::Arp(1, Mac("02:aa:00:00:00:01"), Ip("192.0.2.1"), {}, Ip("192.0.2.10")));
    ParsedPacket p;
    classify(arp, &p);
    pcap.Write(arp.data(), MakeArpReply(arp, p, *local.v4, our_mac));
  }
  // 13, 14: echo replies (IPv4 with options, IPv6 with a hop-by-hop header).
  {
    Bytes e4 = testing::Frame4(
        {.src = Ip("198.51.100.7"), .dst = Ip("192.0.2.10"), .proto = 1, .options = {1, 1, 1, 0}},
        testing::Echo(false, 0x1234, 5, 32));
    ParsedPacket p;
    classify(e4, &p);
    pcap.Write(e4.data(), MakeEchoReply(e4, p, our_mac));
    Bytes e6 = testing::Frame6(
        {.src = Ip("2001:db8:c::7"), .dst = Ip("2001:db8::1"), .proto = 58, .ext = {testing::Ext6{.type = 0}}},
        testing::Echo(true, 0x4321, 6, 32));
    classify(e6, &p);
    pcap.Write(e6.data(), MakeEchoReply(e6, p, our_mac));
  }
  // 15: neighbour advertisement.
  {
    const IpAddress target = *local.v6;
    Bytes body(target.bytes.begin(), target.bytes.end());
    for (uint8_t b : {1, 1, 2, 0xaa, 0, 0, 0, 1}) body.push_back(b);
    const Bytes ns = testing::Frame6(
        {.src = Ip("2001:db8:ff::1"), .dst = Ip("ff02::1:ff00:10"), .proto = 58, .hop_limit = 255},
        testing::Icmp(135, 0, 0, body), {.dst = Mac("33:33:ff:00:00:10"), .src = Mac("02:aa:00:00:00:01")});
    ParsedPacket p;
    classify(ns, &p);
    Bytes out(kNeighborAdvertLen);
    pcap.Write(out.data(), BuildNeighborAdvert(ns, p, *local.v6, our_mac, out));
  }
  // 16-18: a UDP datagram with DF clear, too big: fragmented, each fragment
  // GRE-encapsulated.
  {
    const Bytes dgram = testing::Frame4({.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1"), .proto = 17, .df = false,
                                         .id = 0x4242},
                                        testing::Udp(5353, 7777, 3000));
    ParsedPacket p;
    classify(dgram, &p);
    const EncapTarget t{.forwarding = Forwarding::kGre, .backend = backend4, .next_hop_mac = gateway};
    const uint8_t* ip = dgram.data() + p.l3_offset;
    const size_t count = Ipv4FragmentCount(ip, p.l3_len, 1476);
    for (size_t i = 0; i < count; ++i) {
      Bytes buf(kHeadroom + 1500);
      const size_t n = WriteIpv4Fragment(ip, p.l3_len, 1476, i, buf.data() + kHeadroom, 1500);
      const EncapResult r = Encapsulate(buf.data() + kHeadroom, n, kHeadroom, t, config, kFlowHash);
      if (n == 0 || r.status != EncapStatus::kOk) return 1;
      pcap.Write(buf.data() + kHeadroom + r.offset, r.length);
    }
  }
  // 19-21: the same with 802.1ad + 802.1Q tags to an L2 DSR backend: the
  // fragments keep both tags.
  {
    const Bytes dgram = testing::Frame4({.src = Ip("198.51.100.7"), .dst = Ip("10.0.0.1"), .proto = 17, .df = false,
                                         .id = 0x4343},
                                        testing::Udp(5353, 7777, 3000), {.vlans = {100, 42}, .qinq = true});
    ParsedPacket p;
    classify(dgram, &p);
    const EncapTarget t{.forwarding = Forwarding::kL2Dsr, .backend = {}, .next_hop_mac = Mac("02:bb:00:00:00:05")};
    const uint8_t* ip = dgram.data() + p.l3_offset;
    const size_t count = Ipv4FragmentCount(ip, p.l3_len, config.mtu);
    for (size_t i = 0; i < count; ++i) {
      Bytes buf(kHeadroom + 1500);
      const size_t n = WriteIpv4Fragment(ip, p.l3_len, config.mtu, i, buf.data() + kHeadroom, 1500);
      if (n == 0) return 1;
      const uint8_t* frame = WriteL2DsrHeader(buf.data() + kHeadroom, dgram.data(), p.l3_offset, t, config);
      pcap.Write(frame, p.l3_offset + n);
    }
  }
  std::printf("gen_pcap: wrote %u frames to %s\n", pcap.count(), argv[1]);
  return 0;
}

}  // namespace
}  // namespace maglb

int main(int argc, char** argv) { return maglb::Main(argc, argv); }
