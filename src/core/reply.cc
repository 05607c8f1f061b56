#include "maglb/reply.h"

#include <algorithm>
#include <cstring>

#include "maglb/checksum.h"
#include "maglb/encap.h"
#include "wire.h"

namespace maglb {
namespace {

using wire::Load16;
using wire::Store16;
using wire::Store32;

constexpr uint8_t kReplyTtl = 64;

// Ethernet header of a reply to `frame`: back to its sender, from us, with
// the same VLAN tags. Returns the L3 offset (the request's).
size_t WriteReplyL2(const uint8_t* frame, const ParsedPacket& p, const MacAddress& dst_mac,
                    const MacAddress& our_mac, uint16_t ethertype, uint8_t* out) {
  std::memcpy(out, dst_mac.bytes.data(), 6);
  std::memcpy(out + 6, our_mac.bytes.data(), 6);
  // VLAN tags sit between the MACs and the final ethertype.
  std::memmove(out + 12, frame + 12, p.l3_offset - 14u);
  Store16(out + p.l3_offset - 2, ethertype);
  return p.l3_offset;
}

MacAddress SourceMac(const uint8_t* frame) {
  MacAddress m;
  std::memcpy(m.bytes.data(), frame + 6, 6);
  return m;
}

bool IsUnspecified(const uint8_t* a16) {
  return std::all_of(a16, a16 + 16, [](uint8_t b) { return b == 0; });
}

void FinishIcmpv4(uint8_t* icmp, size_t len) {
  Store16(icmp + 2, 0);
  Store16(icmp + 2, InternetChecksum(icmp, len));
}

void FinishIcmpv6(const uint8_t* ip6, uint8_t* icmp, size_t len) {
  Store16(icmp + 2, 0);
  const uint32_t sum = Ipv6PseudoHeaderSum(ip6 + 8, ip6 + 24, static_cast<uint32_t>(len), kIpProtoIcmpv6);
  Store16(icmp + 2, ChecksumFinish(ChecksumPartial(icmp, len, sum)));
}

void FinishIpv4Header(uint8_t* ip) {
  Store16(ip + 10, 0);
  Store16(ip + 10, InternetChecksum(ip, kIpv4HeaderLen));
}

}  // namespace

size_t MakeArpReply(std::span<uint8_t> frame, const ParsedPacket& p, const IpAddress& our_v4,
                    const MacAddress& our_mac) {
  uint8_t* f = frame.data();
  const size_t off = p.l3_offset;
  if (p.ethertype != kEtherTypeArp || p.arp_op != kArpRequest || our_v4.is_v6 ||
      frame.size() < off + 28 || off < kEthernetHeaderLen) {
    return 0;
  }
  uint8_t* a = f + off;
  if (Load16(a + 6) != kArpRequest || std::memcmp(a + 24, our_v4.bytes.data(), 4) != 0) return 0;
  uint8_t sender_mac[6];
  uint8_t sender_ip[4];
  std::memcpy(sender_mac, a + 8, 6);
  std::memcpy(sender_ip, a + 14, 4);
  std::memcpy(f, f + 6, 6);
  std::memcpy(f + 6, our_mac.bytes.data(), 6);
  Store16(a + 6, kArpReply);
  std::memcpy(a + 8, our_mac.bytes.data(), 6);
  std::memcpy(a + 14, our_v4.bytes.data(), 4);
  std::memcpy(a + 18, sender_mac, 6);
  std::memcpy(a + 24, sender_ip, 4);
  return frame.size();
}

size_t MakeEchoReply(std::span<uint8_t> frame, const ParsedPacket& p, const MacAddress& our_mac) {
  uint8_t* f = frame.data();
  const size_t off = p.l3_offset;
  const bool v6 = p.ip_version == 6;
  if ((p.ip_version != 4 && !v6) || p.is_fragment || p.l4_offset == 0 ||
      size_t{off} + p.l3_len > frame.size() || p.l4_offset < off || p.l4_offset + 8u > off + p.l3_len ||
      p.l4_protocol != (v6 ? kIpProtoIcmpv6 : kIpProtoIcmp) ||
      f[p.l4_offset] != (v6 ? kIcmpv6EchoRequest : kIcmpEchoRequest)) {
    return 0;
  }
  const size_t icmp_len = off + p.l3_len - p.l4_offset;
  std::memcpy(f, f + 6, 6);
  std::memcpy(f + 6, our_mac.bytes.data(), 6);
  uint8_t* ip = f + off;
  // Options and extension headers stay behind: they described the request's
  // path (record route, routing headers), not the reply's.
  const size_t hlen = v6 ? kIpv6HeaderLen : kIpv4HeaderLen;
  uint8_t* icmp = ip + hlen;
  std::memmove(icmp, f + p.l4_offset, icmp_len);
  uint8_t tmp[16];
  if (v6) {
    std::memcpy(tmp, ip + 8, 16);
    std::memcpy(ip + 8, ip + 24, 16);
    std::memcpy(ip + 24, tmp, 16);
    Store16(ip + 4, static_cast<uint16_t>(icmp_len));
    ip[6] = kIpProtoIcmpv6;
    ip[7] = kReplyTtl;
    icmp[0] = kIcmpv6EchoReply;
    FinishIcmpv6(ip, icmp, icmp_len);
  } else {
    std::memcpy(tmp, ip + 12, 4);
    std::memcpy(ip + 12, ip + 16, 4);
    std::memcpy(ip + 16, tmp, 4);
    ip[0] = 0x45;
    Store16(ip + 2, static_cast<uint16_t>(hlen + icmp_len));
    Store16(ip + 6, 0);
    ip[8] = kReplyTtl;
    FinishIpv4Header(ip);
    icmp[0] = kIcmpEchoReply;
    FinishIcmpv4(icmp, icmp_len);
  }
  return off + hlen + icmp_len;
}

size_t BuildNeighborAdvert(std::span<const uint8_t> frame, const ParsedPacket& p,
                           const IpAddress& our_v6, const MacAddress& our_mac,
                           std::span<uint8_t> out) {
  const uint8_t* f = frame.data();
  const size_t off = p.l3_offset;
  if (p.ip_version != 6 || p.is_fragment || p.l4_protocol != kIpProtoIcmpv6 || !our_v6.is_v6 ||
      p.l4_offset == 0 || p.l4_offset + 24u > off + size_t{p.l3_len} ||
      off + size_t{p.l3_len} > frame.size() || f[p.l4_offset] != kIcmpv6NeighborSolicitation ||
      std::memcmp(f + p.l4_offset + 8, our_v6.bytes.data(), 16) != 0) {
    return 0;
  }
  const size_t len = off + kIpv6HeaderLen + 32;
  if (out.size() < len) return 0;
  uint8_t* o = out.data();
  const uint8_t* req_ip = f + off;
  const bool dad = IsUnspecified(req_ip + 8);  // duplicate address detection
  MacAddress dst_mac = SourceMac(f);
  static constexpr uint8_t kAllNodes[16] = {0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  if (dad) dst_mac.bytes = {0x33, 0x33, 0, 0, 0, 1};
  WriteReplyL2(f, p, dst_mac, our_mac, kEtherTypeIpv6, o);
  uint8_t* ip = o + off;
  Store32(ip, 6u << 28);
  Store16(ip + 4, 32);
  ip[6] = kIpProtoIcmpv6;
  ip[7] = 255;  // RFC 4861: on-link proof
  std::memcpy(ip + 8, our_v6.bytes.data(), 16);
  std::memcpy(ip + 24, dad ? kAllNodes : req_ip + 8, 16);
  uint8_t* icmp = ip + kIpv6HeaderLen;
  icmp[0] = kIcmpv6NeighborAdvertisement;
  icmp[1] = 0;
  // Flags: solicited (not for DAD, RFC 4861 7.2.4), override.
  Store32(icmp + 4, (dad ? 0u : 0x40000000u) | 0x20000000u);
  std::memcpy(icmp + 8, our_v6.bytes.data(), 16);
  icmp[24] = kNdOptTargetLinkAddress;  // 8 bytes
  icmp[25] = 1;
  std::memcpy(icmp + 26, our_mac.bytes.data(), 6);
  FinishIcmpv6(ip, icmp, 32);
  return len;
}

size_t BuildIcmpTooBig(std::span<const uint8_t> frame, const ParsedPacket& p, uint32_t mtu,
                       const IpAddress& source, const MacAddress& our_mac, std::span<uint8_t> out) {
  const uint8_t* f = frame.data();
  const size_t off = p.l3_offset;
  const bool v6 = p.ip_version == 6;
  if (p.ip_version != 4 && !v6) return 0;
  if (source.is_v6 != v6 || off + size_t{p.l3_len} > frame.size() || off < kEthernetHeaderLen) return 0;
  // Never an error about an error or about a later fragment (RFC 1122
  // 3.2.2, RFC 4443 2.4).
  if (p.is_icmp_error || (p.is_fragment && !p.is_first_fragment)) return 0;
  if (!p.is_fragment && p.l4_protocol == (v6 ? kIpProtoIcmpv6 : kIpProtoIcmp)) {
    if (p.l4_offset == 0 || p.l4_offset >= off + size_t{p.l3_len}) return 0;
    const uint8_t type = f[p.l4_offset];
    // Only about informational messages (ICMPv6 types from 128; ICMP's echo and timestamp).
    if (v6 ? type < kIcmpv6FirstInformational
           : (type != kIcmpEchoReply && type != kIcmpEchoRequest && type != kIcmpTimestamp &&
              type != kIcmpTimestampReply)) {
      return 0;
    }
  }
  const size_t hlen = v6 ? kIpv6HeaderLen : kIpv4HeaderLen;
  const size_t headers = off + hlen + 8;
  if (out.size() < headers) return 0;
  const size_t max_total = v6 ? 1280 : 576;  // RFC 4443 2.4(c), RFC 1812 4.3.2.3
  size_t quoted = std::min({size_t{p.l3_len}, max_total - hlen - 8, out.size() - headers});
  const size_t min_quote = v6 ? kIpv6HeaderLen : size_t{f[off] & 0x0Fu} * 4 + 8;
  if (quoted < std::min(min_quote, size_t{p.l3_len})) return 0;
  const uint8_t* orig = f + off;
  uint8_t* o = out.data();
  WriteReplyL2(f, p, SourceMac(f), our_mac, v6 ? kEtherTypeIpv6 : kEtherTypeIpv4, o);
  uint8_t* ip = o + off;
  uint8_t* icmp = ip + hlen;
  const size_t icmp_len = 8 + quoted;
  std::memcpy(icmp + 8, orig, quoted);
  if (v6) {
    Store32(ip, 6u << 28);
    Store16(ip + 4, static_cast<uint16_t>(icmp_len));
    ip[6] = kIpProtoIcmpv6;
    ip[7] = kReplyTtl;
    std::memcpy(ip + 8, source.bytes.data(), 16);
    std::memcpy(ip + 24, orig + 8, 16);
    icmp[0] = kIcmpv6PacketTooBig;
    icmp[1] = 0;
    Store32(icmp + 4, std::max<uint32_t>(mtu, 1280));  // no IPv6 link is smaller
    FinishIcmpv6(ip, icmp, icmp_len);
  } else {
    ip[0] = 0x45;
    ip[1] = 0;
    Store16(ip + 2, static_cast<uint16_t>(hlen + icmp_len));
    Store16(ip + 4, 0);
    Store16(ip + 6, 0);
    ip[8] = kReplyTtl;
    ip[9] = kIpProtoIcmp;
    std::memcpy(ip + 12, source.bytes.data(), 4);
    std::memcpy(ip + 16, orig + 12, 4);
    FinishIpv4Header(ip);
    icmp[0] = kIcmpDestUnreachable;
    icmp[1] = kIcmpCodeFragmentationNeeded;  // and DF set
    Store16(icmp + 4, 0);
    Store16(icmp + 6, static_cast<uint16_t>(std::min<uint32_t>(mtu, 0xFFFF)));  // RFC 1191
    FinishIcmpv4(icmp, icmp_len);
  }
  return off + hlen + icmp_len;
}

namespace {

bool IsGroupMac(const uint8_t* mac) { return (mac[0] & 1) != 0; }  // the I/G bit

// Not a single host's address on the wire (RFC 1122 3.2.1.3 and 3.2.2:
// zero, loopback, broadcast, multicast, class E; RFC 4291 2.5.2-2.5.3, 2.7).
bool IsGroupOrUnspecifiedSource(const uint8_t* a, bool v6) {
  if (v6) {
    static constexpr uint8_t kLoopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    return a[0] == 0xFF || IsUnspecified(a) || std::memcmp(a, kLoopback, 16) == 0;
  }
  // 0/8 "this network", 127/8 loopback, 224/4 multicast, 240/4 and broadcast.
  return a[0] == 0 || a[0] == 127 || a[0] >= 224;
}

bool IsGroupDestination(const uint8_t* a, bool v6) {
  return v6 ? a[0] == 0xFF : a[0] >= 224;  // multicast, reserved, limited broadcast
}

}  // namespace

ReplyCheck CheckReplyAddresses(std::span<const uint8_t> frame, const ParsedPacket& p) {
  const uint8_t* f = frame.data();
  if (frame.size() < kEthernetHeaderLen) return ReplyCheck::kGroupSource;
  if (IsGroupMac(f + 6)) return ReplyCheck::kGroupSource;
  if (p.ip_version != 4 && p.ip_version != 6) return ReplyCheck::kOk;  // ARP: its MAC only
  const bool v6 = p.ip_version == 6;
  const size_t off = p.l3_offset;
  if (frame.size() < off + (v6 ? kIpv6HeaderLen : kIpv4HeaderLen)) return ReplyCheck::kGroupSource;
  const uint8_t* src = f + off + (v6 ? 8 : 12);
  const uint8_t* dst = f + off + (v6 ? 24 : 16);
  const bool nd = v6 && p.l4_protocol == kIpProtoIcmpv6 &&
                  (p.icmp_type == kIcmpv6NeighborSolicitation ||
                   p.icmp_type == kIcmpv6NeighborAdvertisement);
  if (nd) return ReplyCheck::kOk;  // DAD comes from ::, to a solicited-node group
  if (IsGroupOrUnspecifiedSource(src, v6)) return ReplyCheck::kGroupSource;
  if (IsGroupMac(f) || IsGroupDestination(dst, v6)) return ReplyCheck::kGroupDestination;
  return ReplyCheck::kOk;
}

std::optional<NeighborInfo> ExtractNeighbor(std::span<const uint8_t> frame, const ParsedPacket& p) {
  const uint8_t* f = frame.data();
  const size_t off = p.l3_offset;
  NeighborInfo n;
  if (p.ethertype == kEtherTypeArp) {
    if (frame.size() < off + 28 || (p.arp_op != kArpRequest && p.arp_op != kArpReply)) {
      return std::nullopt;
    }
    std::memcpy(n.mac.bytes.data(), f + off + 8, 6);
    std::memcpy(n.address.bytes.data(), f + off + 14, 4);
    if (n.address == IpAddress{}) return std::nullopt;  // ARP probe: sender 0.0.0.0
    return n;
  }
  if (p.ip_version != 6 || p.is_fragment || p.l4_protocol != kIpProtoIcmpv6 || p.l4_offset == 0) {
    return std::nullopt;
  }
  const size_t end = off + size_t{p.l3_len};
  if (end > frame.size() || p.l4_offset + 24u > end) return std::nullopt;
  const uint8_t type = f[p.l4_offset];
  if (type != kIcmpv6NeighborSolicitation && type != kIcmpv6NeighborAdvertisement) return std::nullopt;
  n.address.is_v6 = true;
  // A solicitation asks about its sender (the IPv6 source); an advertisement
  // names its target.
  const bool solicitation = type == kIcmpv6NeighborSolicitation;
  std::memcpy(n.address.bytes.data(), solicitation ? f + off + 8 : f + p.l4_offset + 8, 16);
  if (IsUnspecified(n.address.bytes.data())) return std::nullopt;
  const uint8_t wanted = solicitation ? kNdOptSourceLinkAddress : kNdOptTargetLinkAddress;
  for (size_t o = p.l4_offset + 24u; o + 2 <= end;) {
    const size_t len = size_t{f[o + 1]} * 8;
    if (len == 0 || o + len > end) break;
    if (f[o] == wanted && len >= 8) {
      std::memcpy(n.mac.bytes.data(), f + o + 2, 6);
      return n;
    }
    o += len;
  }
  return std::nullopt;
}

}  // namespace maglb
