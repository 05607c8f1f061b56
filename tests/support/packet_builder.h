// Builds test frames byte by byte, with valid lengths and checksums unless a
// test breaks them on purpose afterwards. Independent of src/core's packet
// code except for the checksum routine (itself tested against known values).
#ifndef MAGLB_TESTS_SUPPORT_PACKET_BUILDER_H_
#define MAGLB_TESTS_SUPPORT_PACKET_BUILDER_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "maglb/ip_address.h"

namespace maglb::testing {

using Bytes = std::vector<uint8_t>;

/// RFC 1071 checksum over `pseudo` then `data` (a textbook loop: the tests'
/// oracle). 0 when the region, checksum field included, verifies.
uint16_t RefChecksum(const Bytes& pseudo, const uint8_t* data, size_t len);

IpAddress Ip(std::string_view text);    // aborts on a bad literal
MacAddress Mac(std::string_view text);  // likewise

Bytes Tcp(uint16_t sport, uint16_t dport, uint8_t flags = 0x02, size_t payload = 0,
          uint8_t data_offset_words = 5);
Bytes Udp(uint16_t sport, uint16_t dport, size_t payload = 0);
/// ICMP/ICMPv6 header: type, code, checksum 0, then `rest` (4 bytes: id/seq,
/// MTU, unused) and `body`.
Bytes Icmp(uint8_t type, uint8_t code, uint32_t rest, const Bytes& body = {});
Bytes Echo(bool v6, uint16_t id, uint16_t seq, size_t payload = 8);

struct Ip4 {
  IpAddress src{};
  IpAddress dst{};
  uint8_t proto = 6;
  uint8_t ttl = 64;
  uint8_t tos = 0;
  bool df = true;
  bool mf = false;
  uint16_t frag_offset = 0;  // bytes, multiple of 8
  uint16_t id = 0x1234;
  Bytes options{};             // multiple of 4
};
/// IPv4 header + `payload`; header checksum valid; TCP/UDP/ICMP checksum in
/// `payload` filled when the packet is not a fragment.
Bytes Ipv4(const Ip4& h, const Bytes& payload);

struct Ext6 {
  uint8_t type = 0;  // 0 hop-by-hop, 43 routing, 60 destination options, 44 fragment
  size_t len = 8;  // bytes, multiple of 8 (fragment: 8)
  uint16_t frag_offset = 0;  // fragment only, bytes
  bool more = false;         // fragment only
  uint32_t id = 0xabcd;      // fragment only
};
struct Ip6 {
  IpAddress src{};
  IpAddress dst{};
  uint8_t proto = 6;  // the upper-layer protocol after the extension headers
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0;
  std::vector<Ext6> ext{};
};
/// IPv6 header + extension headers + `payload`; TCP/UDP/ICMPv6 checksum
/// filled unless a fragment header fragments it.
Bytes Ipv6(const Ip6& h, const Bytes& payload);

Bytes Arp(uint16_t op, MacAddress sha, IpAddress spa, MacAddress tha, IpAddress tpa);

struct Eth {
  MacAddress dst = Mac("02:00:00:00:00:01");
  MacAddress src = Mac("02:00:00:00:00:02");
  std::vector<uint16_t> vlans{};  // TCIs, outer first
  bool qinq = false;            // outer tag 0x88a8 instead of 0x8100
};
/// Ethernet header (with tags) + `l3`, padded to 60 bytes like a real NIC.
Bytes Frame(const Eth& e, uint16_t ethertype, const Bytes& l3, bool pad = true);

/// Shorthands: a default frame around an IPv4 or IPv6 packet.
Bytes Frame4(const Ip4& h, const Bytes& l4, const Eth& e = {});
Bytes Frame6(const Ip6& h, const Bytes& l4, const Eth& e = {});

}  // namespace maglb::testing

#endif  // MAGLB_TESTS_SUPPORT_PACKET_BUILDER_H_
