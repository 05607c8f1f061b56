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

/// Whether the LB may answer a frame at all, whatever the answer (echo
/// reply, ICMP error, ARP reply, neighbour advertisement).
enum class ReplyCheck : uint8_t {
  kOk,
  /// The sender is no single host: a multicast/broadcast source MAC; for IP,
  /// a source of 0.0.0.0/8, 127.0.0.0/8, 224.0.0.0/4 multicast, 240.0.0.0/4
  /// and 255.255.255.255 broadcast, :: (IPv6 unspecified), ::1 or ff00::/8.
  /// An answer would go to a group (an amplifier for a spoofed source) or
  /// nowhere (RFC 1122 3.2.2 and 3.2.1.3, RFC 4443 2.4(e)).
  kGroupSource,
  /// An IP packet that came as link-layer broadcast/multicast, or to an IPv4
  /// broadcast/multicast or IPv6 multicast address: no ICMP error about it
  /// (RFC 1122 3.2.2, RFC 4443 2.4(e)), and no echo reply (RFC 1122 3.3.6:
  /// link-layer broadcast to a unicast IP is discarded).
  kGroupDestination,
};
/// ARP and neighbour solicitations (which legitimately go to broadcast or
/// solicited-node groups, and come from :: during duplicate address
/// detection) are checked on their source MAC only.
ReplyCheck CheckReplyAddresses(std::span<const uint8_t> frame, const ParsedPacket& p);

/// The rate limit of what the LB generates on its own, per worker (RFC 4443
/// 2.4(f), RFC 1812 4.3.2.8; [lb] reply_rate, reply_burst): echo replies and
/// ICMP errors share one bucket, ARP replies and neighbour advertisements
/// have another of the same size (so that a ping flood cannot starve
/// neighbour resolution).
///
/// A token bucket on the caller's clock (no system call): `rate_per_s`
/// tokens a second, at most `burst` saved. Starts full. The parameters are
/// passed at each use, so that a reloaded config applies at once; rate 0
/// (or burst 0) refuses every token.
class TokenBucket {
 public:
  bool Take(uint64_t now_ns, uint32_t rate_per_s, uint32_t burst) {
    if (rate_per_s == 0 || burst == 0) return false;
    // The credit is kept as time: one token costs `cost` ns.
    const uint64_t cost = rate_per_s >= 1'000'000'000u ? 1 : 1'000'000'000u / rate_per_s;
    const uint64_t cap = cost * burst;
    if (credit_ns_ > cap) credit_ns_ = cap;
    if (now_ns > last_ns_) {
      const uint64_t elapsed = now_ns - last_ns_;
      credit_ns_ = elapsed >= cap - credit_ns_ ? cap : credit_ns_ + elapsed;
    }
    last_ns_ = now_ns;  // a clock that went back only delays the refill
    if (credit_ns_ < cost) return false;
    credit_ns_ -= cost;
    return true;
  }

 private:
  uint64_t last_ns_ = 0;
  uint64_t credit_ns_ = ~uint64_t{0};  // clamped to the cap: full
};

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
