// Encapsulate or rewrite a classified packet toward its backend, on byte
// buffers with headroom. DPDK-free, allocation-free.
//
// Forwarding modes (Forwarding, forwarding.h; [[vip]] forwarding):
//  - kGre: outer IPv4/IPv6 + GRE (RFC 2784: 4 bytes, no checksum, no key),
//    protocol type 0x0800 / 0x86DD by the inner family, as in the Maglev paper.
//  - kIpip: IP-in-IP, RFC 2003 / RFC 2473: 4in4 (protocol 4), 6in4 (41),
//    4in6 (next header 4), 6in6 (41), as in Katran.
//  - kL2Dsr: no encapsulation; destination MAC := backend's, source MAC :=
//    ours; VLAN tags and the IP packet are untouched (the backend is on the
//    segment the packet came from and owns the VIP on a loopback).
// The outer family is the backend address's family.
//
// Outer header fields:
//  - source: EncapConfig::source_v4/v6, with its low flow_bits_v4/v6 bits
//    replaced by the low bits of the flow hash, so that backends' RSS (which
//    hashes the outer header) spreads flows over their queues; IPv6 also puts
//    the low 20 bits of the flow hash in the flow label (RFC 6438).
//  - TTL / hop limit: EncapConfig::ttl.
//  - IPv4: DF set (we check the MTU ourselves and never want a router to
//    fragment the tunnel), identification 0 (atomic datagram, RFC 6864),
//    valid header checksum, or 0 where the NIC that sends the frame computes
//    it (`nic_ipv4_checksum`: EncapResult::tx_offload says so).
//  - DSCP/ECN: copied from the inner header (RFC 6040 "normal mode").
//  - Ethernet: destination = next hop (EncapTarget::next_hop_mac: the gateway,
//    or the backend when on-link), source = EncapConfig::src_mac, no VLAN tag.
//
// MTU: the outer IP packet (outer IP + GRE + inner IP packet) must fit in
// EncapConfig::mtu. When it does not, Encapsulate() leaves the buffer
// untouched and says what to do instead:
//  - kMtuExceeded: answer the client with ICMP fragmentation-needed (IPv4
//    inner with DF set) or ICMPv6 packet-too-big (IPv6 inner: only sources
//    fragment IPv6), carrying EncapResult::usable_mtu = mtu - overhead; see
//    BuildIcmpTooBig() in reply.h. Count DropReason::kMtuExceeded.
//  - kFragmentInner: IPv4 inner with DF clear. The sender has asked routers to
//    fragment and may not do path-MTU discovery at all, so an ICMP error
//    would black-hole its traffic. We do what a router does: fragment the
//    inner datagram (Ipv4FragmentCount/WriteIpv4Fragment) to fit
//    usable_mtu, and encapsulate each fragment (Encapsulate on the fragment).
//    The backend reassembles the inner datagram; all fragments share one flow
//    hash (the caller reuses the original packet's), so they go to one backend.
//    Fragmenting the inner rather than the outer packet keeps the outer DF
//    set, and the backend's tunnel decapsulation never has to reassemble.
#ifndef MAGLB_ENCAP_H_
#define MAGLB_ENCAP_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>

#include "maglb/forwarding.h"
#include "maglb/ip_address.h"
#include "maglb/packet.h"

namespace maglb {

struct LbConfig;  // config.h: only EncapConfig::FromLbConfig reads it

inline constexpr size_t kIpv4HeaderLen = 20;
inline constexpr size_t kIpv6HeaderLen = 40;
inline constexpr size_t kGreHeaderLen = 4;
/// The most bytes Encapsulate() may prepend before the inner IP packet
/// (Ethernet + IPv6 + GRE). A buffer with this much room before the IP
/// packet (headroom + the frame's own L2 header) never fails with kNoHeadroom.
inline constexpr size_t kMaxEncapPrepend = kEthernetHeaderLen + kIpv6HeaderLen + kGreHeaderLen;

/// The per-LB part of encapsulation, built once from the config.
struct EncapConfig {
  MacAddress src_mac;                    ///< our data-plane port's MAC
  std::optional<IpAddress> source_v4;    ///< outer source toward IPv4 backends
  std::optional<IpAddress> source_v6;    ///< outer source toward IPv6 backends
  uint8_t flow_bits_v4 = 0;              ///< 0..32 host bits varied per flow
  uint8_t flow_bits_v6 = 0;              ///< 0..64 (the flow hash has 64 bits)
  uint8_t ttl = kDefaultEncapTtl;
  uint32_t mtu = kDefaultMtu;            ///< egress MTU: largest outer IP packet

  /// source_v4/v6 := encap_source_v4/v6, else ipv4/ipv6.
  static EncapConfig FromLbConfig(const LbConfig& lb, const MacAddress& port_mac);
};

/// What a frame leaves to the NIC that sends it (EncapResult::tx_offload,
/// PacketRef::tx_offload, ExtraFrame::tx_offload): bits. 0: nothing, the
/// frame is complete.
/// The outer IPv4 header (after an untagged Ethernet header, kIpv4HeaderLen
/// bytes, no options: the one Encapsulate wrote) has checksum 0; the NIC
/// computes it. Inner headers are complete.
inline constexpr uint8_t kTxOffloadOuterIpv4Checksum = 1;

/// The per-packet part: where this flow's backend is.
struct EncapTarget {
  Forwarding forwarding = Forwarding::kGre;
  IpAddress backend;           ///< outer destination (unused for kL2Dsr)
  MacAddress next_hop_mac;     ///< gateway, or the backend itself (kL2Dsr, on-link)
};

enum class EncapStatus : uint8_t {
  kOk,
  kMtuExceeded,    ///< send ICMP too-big with usable_mtu instead (buffer untouched)
  kFragmentInner,  ///< IPv4 DF clear: fragment to usable_mtu, encapsulate each
  kNoSource,       ///< no outer source of the backend's family configured
  kNoHeadroom,     ///< room_before too small (buffer untouched)
  kBadPacket,      ///< not an IPv4/IPv6 packet of the length given
};

struct EncapResult {
  EncapStatus status = EncapStatus::kBadPacket;
  uint8_t tx_offload = 0;   ///< kTxOffload* bits of the new frame (kOk only)
  /// The new frame starts at (input pointer + offset); offset <= 0 for
  /// encapsulation (prepended), and 0 for L2 DSR.
  int32_t offset = 0;
  uint32_t length = 0;      ///< of the new frame, Ethernet header included
  uint32_t usable_mtu = 0;  ///< largest inner IP packet that fits (all statuses)
};

/// Outer IP + GRE bytes added in front of the inner IP packet (0 for kL2Dsr).
size_t EncapOverhead(Forwarding forwarding, bool outer_is_v6);

/// The outer source for a flow: `base` with its low `flow_bits` bits taken
/// from `flow_hash`.
IpAddress OuterSource(const IpAddress& base, uint8_t flow_bits, uint64_t flow_hash);

/// Encapsulates the IP packet at `ip` (`ip_len` bytes, its header's length,
/// without Ethernet padding) for kGre or kIpip: writes Ethernet + outer IP
/// (+ GRE) into the `room_before` bytes before `ip`. The result's offset is
/// relative to `ip`. `flow_hash` varies the outer source and IPv6 flow label.
/// `nic_ipv4_checksum`: the NIC computes an outer IPv4 header's checksum
/// (the field is left 0 and the result says kTxOffloadOuterIpv4Checksum);
/// an IPv6 outer header has none.
EncapResult Encapsulate(uint8_t* ip, size_t ip_len, size_t room_before, const EncapTarget& target,
                        const EncapConfig& config, uint64_t flow_hash, bool nic_ipv4_checksum = false);

/// The per-packet forwarding step for a classified frame (Action::kToVip):
/// kGre/kIpip encapsulate the IP packet (reusing the frame's own L2 header
/// bytes plus `headroom` before `frame`); kL2Dsr rewrites the MACs in place
/// (and leaves nothing to the NIC). The result's offset is relative to
/// `frame`. `nic_ipv4_checksum`: as Encapsulate.
inline EncapResult Forward(uint8_t* frame, size_t frame_len, size_t headroom, const ParsedPacket& p,
                           const EncapTarget& target, const EncapConfig& config, uint64_t flow_hash,
                           bool nic_ipv4_checksum = false);

/// Forward's two bodies (encap.cc instantiates both): the flag is resolved
/// where Forward is inlined, so that each path runs code made for it alone
/// (a runtime flag inside cost the software path ~30 instructions a packet).
template <bool kNicIpv4Checksum>
EncapResult ForwardAs(uint8_t* frame, size_t frame_len, size_t headroom, const ParsedPacket& p,
                      const EncapTarget& target, const EncapConfig& config, uint64_t flow_hash);
extern template EncapResult ForwardAs<false>(uint8_t*, size_t, size_t, const ParsedPacket&, const EncapTarget&,
                                             const EncapConfig&, uint64_t);
extern template EncapResult ForwardAs<true>(uint8_t*, size_t, size_t, const ParsedPacket&, const EncapTarget&,
                                            const EncapConfig&, uint64_t);

inline EncapResult Forward(uint8_t* frame, size_t frame_len, size_t headroom, const ParsedPacket& p,
                           const EncapTarget& target, const EncapConfig& config, uint64_t flow_hash,
                           bool nic_ipv4_checksum) {
  return nic_ipv4_checksum ? ForwardAs<true>(frame, frame_len, headroom, p, target, config, flow_hash)
                           : ForwardAs<false>(frame, frame_len, headroom, p, target, config, flow_hash);
}

/// The outer headers toward one backend in the common case: kGre or kIpip to
/// an IPv4 backend with an IPv4 outer source configured. Everything in them
/// but a few fields is the same for every packet, so it is built once
/// (LbState does, into BackendState::encap_template, whenever the target or
/// the EncapConfig changes) and the packet path (ForwardFast) copies it and
/// patches the rest: DSCP/ECN, total length, the source's flow bits, the
/// header checksum, and the inner family's word (GRE protocol type, or IPIP's
/// TTL/protocol). Any other target has none (!valid()): Forward serves it;
/// so does an MTU too small for any packet.
struct Ipv4EncapTemplate {
  /// Bytes copied per packet: the headers, right-aligned, after spare bytes
  /// that land in the headroom before the new frame (one fixed-size copy
  /// for both overheads).
  static constexpr size_t kCopy = 40;
  static_assert(kCopy >= kEthernetHeaderLen + kIpv4HeaderLen + kGreHeaderLen);

  /// Ethernet + IPv4 (+ GRE), ending at bytes + kCopy, as for an IPv4 inner
  /// packet with DSCP/ECN 0 and length 0, the flow bits of the source 0, and
  /// the checksum 0.
  uint8_t bytes[kCopy] = {};
  /// By inner family (0: IPv4, 1: IPv6): the 16-bit word at family_word_at
  /// (from the frame's start), and the unfolded checksum sum of every field
  /// that does not vary per packet.
  uint16_t family_word[2] = {};
  uint32_t checksum_base[2] = {};
  uint32_t source = 0;            ///< outer source, host order, flow bits 0
  uint32_t source_flow_mask = 0;  ///< the low flow_bits_v4 bits, host order
  uint16_t max_ip_len = 0;        ///< EncapResult::usable_mtu (>= kIpv4HeaderLen)
  uint8_t prepend = 0;            ///< Ethernet + IPv4 (+ GRE) bytes; 0: no template
  uint8_t family_word_at = 0;

  bool valid() const { return prepend != 0; }
  friend bool operator==(const Ipv4EncapTemplate&, const Ipv4EncapTemplate&) = default;
  /// The template for `target` under `config`, or an invalid one where the
  /// common case does not apply.
  static Ipv4EncapTemplate Of(const EncapTarget& target, const EncapConfig& config);
};

namespace encap_internal {
// Big-endian stores of whole words (one store each, where byte stores would
// be several and make the compiler reload what it read through `t`).
inline void StoreBe16(uint8_t* p, uint16_t v) {
  if constexpr (std::endian::native == std::endian::little) v = static_cast<uint16_t>(v << 8 | v >> 8);
  std::memcpy(p, &v, 2);
}
inline void StoreBe32(uint8_t* p, uint32_t v) {
  if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap32(v);
  std::memcpy(p, &v, 4);
}
}  // namespace encap_internal

/// Forward() for a target with a valid template `t` (made from that target
/// and `config`), in the common case only: an IPv4 or IPv6 packet that fits
/// the MTU, with Ipv4EncapTemplate::kCopy bytes of room before it. Then it
/// writes exactly the frame Forward writes (it may also write the kCopy -
/// prepend bytes before that frame's start, headroom), sets *r as Forward
/// would, and returns true. Otherwise it writes nothing and returns false:
/// Forward decides (malformed, too big, no headroom; an invalid template
/// takes nothing).
template <bool kNicIpv4Checksum>
inline bool ForwardFast(uint8_t* frame, size_t frame_len, size_t headroom, const ParsedPacket& p,
                        const Ipv4EncapTemplate& t, uint64_t flow_hash, EncapResult* r) {
  using encap_internal::StoreBe16;
  using encap_internal::StoreBe32;
  const size_t l3 = p.l3_offset;
  const size_t ip_len = p.l3_len;
  if (p.ip_version == 0 || l3 + ip_len > frame_len || ip_len < kIpv4HeaderLen || ip_len > t.max_ip_len ||
      headroom + l3 < Ipv4EncapTemplate::kCopy) {
    return false;
  }
  uint8_t* ip = frame + l3;
  const uint8_t version = ip[0] >> 4;
  const bool inner_v6 = version == 6;
  if (version != 4 && !(inner_v6 && ip_len >= kIpv6HeaderLen)) return false;
  // RFC 6040 normal mode: the outer header carries the inner DSCP and ECN.
  const uint8_t tos = inner_v6 ? static_cast<uint8_t>(ip[0] << 4 | ip[1] >> 4) : ip[1];
  // Everything read from `t` before the first store into the packet.
  const size_t prepend = t.prepend;
  const size_t word_at = t.family_word_at;
  const uint16_t word = t.family_word[inner_v6];
  const uint32_t flow_bits = static_cast<uint32_t>(flow_hash) & t.source_flow_mask;
  const uint32_t src = t.source | flow_bits;
  const uint32_t total = static_cast<uint32_t>(prepend - kEthernetHeaderLen + ip_len);
  const uint32_t sum_base = t.checksum_base[inner_v6];

  std::memcpy(ip - Ipv4EncapTemplate::kCopy, t.bytes, Ipv4EncapTemplate::kCopy);
  uint8_t* f = ip - prepend;
  uint8_t* o = f + kEthernetHeaderLen;
  StoreBe32(o, 0x45u << 24 | uint32_t{tos} << 16 | total);  // version/IHL, DSCP/ECN, total length
  StoreBe32(o + 12, src);
  StoreBe16(f + word_at, word);
  if constexpr (kNicIpv4Checksum) {
    r->tx_offload = kTxOffloadOuterIpv4Checksum;  // the template's checksum field is 0
  } else {
    // The flow bits and the source's other bits never share a bit, so the
    // source's words sum as the template's plus the flow bits'.
    uint32_t sum = sum_base + tos + total + (flow_bits >> 16) + (flow_bits & 0xFFFF);
    sum = (sum & 0xFFFF) + (sum >> 16);  // < 2^20 before: two folds suffice
    sum = (sum & 0xFFFF) + (sum >> 16);
    StoreBe16(o + 10, static_cast<uint16_t>(~sum));
    r->tx_offload = 0;
  }
  r->status = EncapStatus::kOk;
  r->offset = static_cast<int32_t>(l3 - prepend);
  r->length = static_cast<uint32_t>(prepend + ip_len);
  r->usable_mtu = t.max_ip_len;
  return true;
}

/// How many IPv4 fragments of at most `max_ip_len` bytes each the IPv4
/// packet at `ip` needs (1 if it fits; 0 if it cannot be fragmented: DF set,
/// malformed, or `max_ip_len` too small for its header plus 8 bytes).
size_t Ipv4FragmentCount(const uint8_t* ip, size_t ip_len, size_t max_ip_len);

/// Writes fragment `index` (< Ipv4FragmentCount) of the IPv4 packet at `ip`
/// as a complete IPv4 packet to `out` (`out_cap` bytes; must not overlap
/// `ip`). RFC 791: data in multiples of 8 bytes, the first fragment keeps all
/// options, later ones only those with the copied flag; an already-fragmented
/// input keeps its offset base and MF. Returns the fragment's length, or 0.
size_t WriteIpv4Fragment(const uint8_t* ip, size_t ip_len, size_t max_ip_len, size_t index,
                         uint8_t* out, size_t out_cap);

/// L2 DSR for a frame the LB built around an IP packet (a fragment): writes
/// the original frame's L2 header (`frame`, `l3_offset` bytes: Ethernet and
/// its VLAN tags, which L2 DSR keeps) into the `l3_offset` bytes before `ip`,
/// with the MACs of Forward()'s kL2Dsr. Returns where the new frame starts.
uint8_t* WriteL2DsrHeader(uint8_t* ip, const uint8_t* frame, size_t l3_offset,
                          const EncapTarget& target, const EncapConfig& config);

}  // namespace maglb

#endif  // MAGLB_ENCAP_H_
