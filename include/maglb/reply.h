// Frames the LB sends on its own behalf: ARP replies, neighbour
// advertisements, echo replies, and ICMP "too big" errors when an
// encapsulated packet would exceed the egress MTU. Byte spans only, no
// allocation; every checksum is valid. Each reply goes back out of the port
// it came in on: Ethernet destination = the request's source MAC, source =
// ours, and the request's VLAN tags are kept.
#ifndef MAGLB_REPLY_H_
#define MAGLB_REPLY_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "maglb/ip_address.h"
#include "maglb/packet.h"

namespace maglb {

/// Turns an ARP request for our address (Action::kLocalArp, arp_op 1) into
/// the reply, in place. Returns the reply's length (the frame's), or 0 when
/// the frame is not such a request (then it is unchanged).
size_t MakeArpReply(std::span<uint8_t> frame, const ParsedPacket& p, const IpAddress& our_v4,
                    const MacAddress& our_mac);

/// Turns an ICMP or ICMPv6 echo request (Action::kLocalEcho) into the echo
/// reply, in place: addresses and MACs swapped, type changed, TTL/hop limit
/// 64, checksums valid. The source of the reply is the request's destination
/// (our address or the VIP pinged). Returns the reply length (the IP packet's
/// end: Ethernet padding dropped), or 0 if the frame is not an echo request.
size_t MakeEchoReply(std::span<uint8_t> frame, const ParsedPacket& p, const MacAddress& our_mac);

/// Builds into `out` the neighbour advertisement answering a neighbour
/// solicitation for `our_v6` (RFC 4861 7.2.4): solicited flag (unless the
/// solicitation came from :: for duplicate address detection; then to
/// ff02::1), override flag, target link-layer address option = our_mac, hop
/// limit 255. Returns its length, or 0 if `frame` is not such a solicitation
/// or `out` is too small (kNeighborAdvertLen + VLAN tags is enough).
size_t BuildNeighborAdvert(std::span<const uint8_t> frame, const ParsedPacket& p,
                           const IpAddress& our_v6, const MacAddress& our_mac,
                           std::span<uint8_t> out);
inline constexpr size_t kNeighborAdvertLen = 14 + 40 + 32;

/// Builds into `out` an ICMP destination-unreachable/fragmentation-needed
/// (type 3 code 4, RFC 1191) or ICMPv6 packet-too-big (type 2, RFC 4443)
/// telling the sender of `frame` to use `mtu` (IPv6: at least 1280). `source`
/// is the error's IP source (the LB's address of that family, or the VIP if
/// the LB has none). The error quotes as much of the original IP packet as
/// fits in 576 (IPv4, RFC 1812) / 1280 (IPv6) bytes and in `out`. Returns its
/// length, or 0 when no error may be sent: the original is itself an ICMP
/// error, a non-first fragment, or not IP (RFC 1122 / RFC 4443 2.4), or
/// `source` has the wrong family, or `out` is too small.
size_t BuildIcmpTooBig(std::span<const uint8_t> frame, const ParsedPacket& p, uint32_t mtu,
                       const IpAddress& source, const MacAddress& our_mac, std::span<uint8_t> out);
/// An `out` of this size always takes the largest BuildIcmpTooBig() result.
inline constexpr size_t kMaxIcmpTooBigLen = 14 + 2 * 4 + 1280;

/// A neighbour's address and MAC as an ARP packet (sender) or a neighbour
/// solicitation (source + source link-layer option) / advertisement (target +
/// target link-layer option) states it; the data plane learns the gateway's
/// MAC from these. nullopt when the frame states none.
struct NeighborInfo {
  IpAddress address;
  MacAddress mac;
};
std::optional<NeighborInfo> ExtractNeighbor(std::span<const uint8_t> frame, const ParsedPacket& p);

}  // namespace maglb

#endif  // MAGLB_REPLY_H_
