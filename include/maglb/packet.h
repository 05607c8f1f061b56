// Parse and classify Ethernet frames on byte spans: the first step of the
// packet path. DPDK-free, allocation-free, no exceptions, bounded work.
//
// Classify() answers one question per frame: where does it go? To a VIP (with
// the flow key to hash), to this LB itself (ARP, neighbour discovery, ping),
// or nowhere, with the reason as a counter index.
//
// ## Fragment policy (read this before hashing a FlowKey)
//
// Every fragment of one datagram must reach the same backend, and a later
// fragment carries no L4 header, so no port can take part in its key. Like
// the Maglev paper, maglb hashes fragments on the 3-tuple: for EVERY fragment
// of a datagram, the first one included, Classify() sets the FlowKey's ports
// to 0 (src, dst, protocol remain). The first and the later fragments of a
// datagram therefore get byte-identical keys, whatever order they arrive in,
// on every LB instance, without any per-datagram state (which would break
// when fragments arrive out of order or ECMP splits them over instances).
//
// The price, stated plainly: a flow whose datagrams are sometimes fragmented
// and sometimes not can have its fragmented datagrams go to a different
// backend than its unfragmented ones (3-tuple vs 5-tuple hash). Hashing
// everything on the 3-tuple would avoid that but put all of a client's
// connections on one backend; tracking datagram ids needs per-datagram state
// that is lost on reordering. TCP sets DF and does path-MTU discovery (and the
// LB routes the ICMP errors for it, see below), so TCP flows practically
// never fragment; fragmented UDP datagrams are each complete messages after
// reassembly at the backend, which is what the 3-tuple keeps intact.
// An IPv6 "atomic fragment" (offset 0, M clear, RFC 6946) is no fragment: it
// is parsed through to its L4 header and hashed on the 5-tuple.
//
// Fragments and VIPs with ports: a later fragment shows no port, so fragments
// are matched to a VIP by (address, protocol) alone, and the first fragment
// the same way (so that first and later agree): the VIP with port 0 if there
// is one, else the only VIP on that address and protocol; if several VIPs
// share the address and protocol with distinct ports and none takes every
// port, the fragment is ambiguous and dropped (kFragmentAmbiguousVip).
//
// ## ICMP errors
//
// ICMPv4 destination unreachable (3, including fragmentation needed),
// time exceeded (11), parameter problem (12), and ICMPv6 destination
// unreachable (1), packet too big (2), time exceeded (3), parameter problem
// (4), addressed to a VIP, are about a packet a backend sent (source = VIP,
// direct server return). They are classified kToVip with the flow key of the
// embedded packet reversed: src = embedded dst (the client), dst = embedded
// src (the VIP), ports swapped, so the key equals the client's own flow key
// and the error reaches that flow's backend. Path-MTU discovery therefore
// works through the LB. ParsedPacket::is_icmp_error tells them apart.
//
// With more than one worker: the NIC's RSS spreads an ICMP error by its
// OUTER header (router -> VIP), not by the flow it quotes, so it usually
// lands on a worker whose conntrack does not hold that flow. The worker
// computes the port's RSS hash of the error's flow key (the embedded packet
// reversed, i.e. the client's own packets: toeplitz.h, with the key, hash
// types and RETA read from the port at start-up) and hands the error to the
// worker whose queue that flow's packets reach (pipeline.h kSteer, a ring
// per worker: worker_loop.h), which sends it to the flow's pinned backend,
// even when a reload moved the flow's table slot or bounded loads placed it
// off its first choice. Where no RSS spreads flows (one queue, or
// net_af_packet's kernel fanout, which keeps a flow on one socket by the
// kernel's own hash), nothing is handed over; an error about a flow the
// worker does not track (expired, or under kernel fanout) follows the table.
//
// ## TTL / hop limit
//
// The LB is not a routing hop for what it forwards: GRE / IP-in-IP carry the
// client's packet unchanged inside a new outer header, and L2 DSR rewrites
// only the Ethernet header, so the inner TTL / hop limit is neither
// decremented nor checked against 1 (as Maglev and Katran do), and the LB
// sends no ICMP time-exceeded. A packet that arrives with TTL / hop limit 0
// is invalid (no router may send it, RFC 1812 5.3.1; no host either, RFC
// 1122 3.2.1.7, RFC 8200 3): it is dropped as kTtlZero, whatever its
// destination, without an ICMP error. The outer header of an encapsulated
// packet gets [lb] encap_ttl.
//
// ## Ping to a VIP
//
// ICMP/ICMPv6 echo requests to a VIP address are answered by the LB itself
// (kLocalEcho), like echo requests to the LB's own addresses: operators ping
// VIPs, and no backend should see pings it would answer from the wrong source.
#ifndef MAGLB_PACKET_H_
#define MAGLB_PACKET_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "maglb/flow.h"
#include "maglb/ip_address.h"
#include "maglb/protocol_numbers.h"
#include "maglb/vip_spec.h"

namespace maglb {

// Header sizes and limits the packet code and its callers share (the
// protocols' own numbers are in protocol_numbers.h).
inline constexpr size_t kEthernetHeaderLen = 14;
inline constexpr size_t kVlanTagLen = 4;
inline constexpr size_t kMaxVlanTags = 2;
/// The IPv6 extension-header walk stops (and drops) after this many headers:
/// bounded work per packet, and legitimate packets carry one or two.
inline constexpr int kMaxIpv6ExtHeaders = 8;

/// Every reason a frame is not forwarded, as an X-macro: X(enum_name, "name").
/// The enum and the counter names are generated from this one list, so no
/// drop can lack a name. Names are stable: they are exported as counters.
#define MAGLB_FOREACH_DROP_REASON(X)                                                    \
  X(kTooShort, "too_short")                       /* frame ends inside a header */      \
  X(kNotOurMac, "not_our_mac")                   /* unicast to another MAC (flooded) */ \
  X(kBadEtherType, "bad_ethertype")               /* not IPv4, IPv6 or ARP */           \
  X(kTooManyVlans, "too_many_vlans")              /* more than two VLAN tags */         \
  X(kBadIpVersion, "bad_ip_version")              /* version nibble != ethertype */     \
  X(kBadIhl, "bad_ihl")                           /* IPv4 IHL < 5 */                    \
  X(kBadIpLength, "bad_ip_length")                /* length field vs header/frame */    \
  X(kBadIpv4Checksum, "bad_ipv4_checksum")        /* header checksum (NIC or software) */ \
  X(kTtlZero, "ttl_zero")                         /* TTL / hop limit 0: see "TTL" */    \
  X(kBadIp6ExtChain, "bad_ip6_ext_chain")         /* too long, truncated, misplaced */  \
  X(kBadFragment, "bad_fragment")                 /* impossible offset/length */        \
  X(kBadTcpOffset, "bad_tcp_offset")              /* data offset < 5 or past end */     \
  X(kNoVip, "no_vip")                             /* not to a VIP nor to us */          \
  X(kVipNoService, "vip_no_service")              /* VIP address, other proto/port */   \
  X(kFragmentAmbiguousVip, "fragment_ambiguous_vip") /* see fragment policy */          \
  X(kVipIcmpUnsupported, "vip_icmp_unsupported")  /* ICMP to a VIP, not error/echo */   \
  X(kBadIcmpError, "bad_icmp_error")              /* embedded packet unusable */        \
  X(kLocalUnsupported, "local_unsupported")       /* to our address, not ARP/ND/ping */ \
  X(kBadArp, "bad_arp")                           /* not Ethernet/IPv4 ARP */           \
  X(kNotForUs, "not_for_us")                      /* ARP/ND about another address */    \
  X(kBadNd, "bad_nd")                             /* hop limit != 255, truncated */     \
  X(kBadChecksum, "bad_checksum")                 /* locally answered ICMP */           \
  X(kIcmpRateLimited, "icmp_rate_limited")        /* echo reply / ICMP error over the limit */ \
  X(kArpNdRateLimited, "arp_nd_rate_limited")     /* ARP / NA reply over the limit */   \
  X(kBroadcastSource, "broadcast_source")         /* would answer a group/unspecified source */ \
  X(kBroadcastDestination, "broadcast_destination") /* no reply/error for a group destination */ \
  X(kNoBackend, "no_backend")                     /* VIP table empty (all draining) */  \
  X(kMtuExceeded, "mtu_exceeded")                 /* too big: answered with ICMP */     \
  X(kMtuExceededNoIcmp, "mtu_exceeded_no_icmp")   /* too big, ICMP not allowed */       \
  X(kNoEncapSource, "no_encap_source")            /* no outer source of that family */  \
  X(kNoHeadroom, "no_headroom")                   /* buffer cannot take outer headers */ \
  X(kNoNeighbor, "no_neighbor")                   /* next-hop MAC not resolved yet */ \
  X(kKernelRateLimited, "kernel_rate_limited")    /* to the kernel interface, over [kernel] rate */ \
  X(kTunnelProbeStale, "tunnel_probe_stale")      /* tunnel probe whose backend or VIP is gone */

enum class DropReason : uint8_t {
#define MAGLB_DROP_ENUM(name, str) name,
  MAGLB_FOREACH_DROP_REASON(MAGLB_DROP_ENUM)
#undef MAGLB_DROP_ENUM
};

inline constexpr size_t kNumDropReasons = 0
#define MAGLB_DROP_COUNT(name, str) +1
    MAGLB_FOREACH_DROP_REASON(MAGLB_DROP_COUNT)
#undef MAGLB_DROP_COUNT
    ;

/// The counter name of a drop reason, e.g. "bad_ihl".
std::string_view DropReasonName(DropReason r);

/// What to do with a frame.
enum class Action : uint8_t {
  kToVip,      ///< hash ParsedPacket::flow, pick a backend of Verdict::vip_index
  kLocalArp,   ///< ARP request for, or reply to, our IPv4 address
  kLocalNd,    ///< neighbour solicitation for our IPv6 address, or an advertisement
  kLocalEcho,  ///< ICMP/ICMPv6 echo request to our address or a VIP: reply in place
  /// To our address, not answered by maglb (TCP, UDP, other protocols, ICMP
  /// other than echo requests), with a kernel interface (LocalAddresses::
  /// kernel): up to the kernel. Without one these are kLocalUnsupported drops.
  kToKernel,
  kDrop,       ///< count Verdict::reason and free
};

struct Verdict {
  Action action = Action::kDrop;
  DropReason reason = DropReason::kTooShort;  // meaningful for kDrop only
  uint16_t vip_index = 0;                     // meaningful for kToVip only

  static Verdict Drop(DropReason r) { return {Action::kDrop, r, 0}; }
  static Verdict ToVip(uint16_t index) { return {Action::kToVip, DropReason::kTooShort, index}; }
  static Verdict Local(Action a) { return {a, DropReason::kTooShort, 0}; }
};

/// What the parser learned about a frame. Offsets are from the start of the
/// frame (the Ethernet destination MAC). Classify() zeroes everything first,
/// so fields of layers it did not reach (or that do not apply) read 0.
struct ParsedPacket {
  FlowKey flow;           ///< the key to hash (see fragment policy, ICMP errors)
  uint16_t l3_offset = 0;  ///< Ethernet + VLAN tags; where ARP/IP starts
  uint16_t l4_offset = 0;  ///< TCP/UDP/ICMP header; 0 when absent (later fragment)
  uint16_t l3_len = 0;     ///< IP packet length from its header (frame padding excluded)
  uint16_t ethertype = 0;  ///< after the VLAN tags, host order
  std::array<uint16_t, kMaxVlanTags> vlan_tci{};  ///< outer first, host order
  uint8_t vlan_count = 0;
  uint8_t ip_version = 0;  ///< 4, 6, or 0 (ARP / not IP)
  uint8_t l4_protocol = 0; ///< IP protocol / last next-header (also for fragments)
  uint8_t tcp_flags = 0;   ///< TCP only, unfragmented only (FIN=0x01 SYN=0x02 RST=0x04 ACK=0x10)
  uint8_t ttl = 0;         ///< IPv4 TTL / IPv6 hop limit
  bool dont_fragment = false;     ///< IPv4 DF bit (IPv6: always true, routers never fragment)
  bool is_fragment = false;       ///< part of a fragmented datagram
  bool is_first_fragment = false; ///< offset 0 (only with is_fragment)
  bool is_icmp_error = false;     ///< flow is the embedded packet's, reversed
  uint8_t icmp_type = 0;          ///< ICMP/ICMPv6 type (l4_protocol ICMP only)
  uint8_t icmp_code = 0;
  uint16_t arp_op = 0;            ///< 1 request, 2 reply (ARP only)
  uint32_t fragment_id = 0;       ///< IPv4 identification / IPv6 fragment id
};

/// Addresses of this LB on the data plane: ARP, ND and ping answer for them.
///
/// With a kernel interface (`kernel`, the exception path: dataplane/
/// kernel_port.h), what is addressed to them and that maglb does not answer
/// itself goes up to the kernel (Action::kToKernel), and the kernel's
/// link-local address joins them: maglb answers neighbour solicitations and
/// pings for it as for `v6`, and passes the rest addressed to it up. ARP
/// requests and solicitations stay maglb's alone, so that one stack answers.
struct LocalAddresses {
  std::optional<IpAddress> v4;
  std::optional<IpAddress> v6;
  /// The kernel interface's fe80::/64 address (LinkLocalOf the port MAC);
  /// set only with `kernel` and `v6`.
  std::optional<IpAddress> v6_link_local;
  bool kernel = false;  ///< a kernel interface exists
};

/// The secret of VipMatcher's address hash (two 64-bit words).
struct VipHashKey {
  uint64_t k0 = 0;
  uint64_t k1 = 0;
};

/// Maps (destination address, protocol, destination port) to a VIP index.
///
/// Built on the control path; Match() is allocation-free and O(1) in the
/// worst case, for any set of VIP addresses. Layout: an index of 4-byte
/// slots (16-bit hash tag, 16-bit group number; power-of-two size, at most a
/// quarter full) probed linearly from the address's hash, over dense address
/// groups keyed by (address, family, protocol); each group names its wildcard
/// VIP (port 0) and a contiguous run of (port, index) entries in a packed
/// array, scanned linearly (a group rarely holds more than a few ports).
///
/// Why it stays O(1) whatever the operator configures and whatever an
/// attacker sends: the hash is keyed (VipHashKey, random per process) and
/// mixes all 128 address bits, so no address pattern (VIPs differing only in
/// their last bytes, one /64 per VIP) shares a probe run by construction;
/// and the build verifies that every group sits within kMaxProbe slots of
/// its home slot (else it re-keys and rebuilds, and past a few tries doubles
/// the index), so a lookup, of a VIP or of any other address, reads at most
/// kMaxProbe slots: one or two cache lines. A specific port wins over port 0.
class VipMatcher {
 public:
  static constexpr uint16_t kNone = 0xFFFF;
  /// Longest probe a lookup makes, in index slots (16 slots = 64 bytes).
  static constexpr uint32_t kMaxProbe = 16;

  VipMatcher() = default;
  /// VIP i of `vips` gets index i. Duplicate (address, protocol, port) keep
  /// the first (config validation rejects them before this). Hashes with the
  /// process's key (DefaultKey()). From a config: VipSpecsOf(config.vips).
  explicit VipMatcher(const std::vector<VipSpec>& vips);
  /// Same with a given key (tests, benchmarks: a fixed layout).
  VipMatcher(const std::vector<VipSpec>& vips, const VipHashKey& key);

  /// Adds one VIP; rebuilds the table (control path only).
  void Add(const IpAddress& address, uint8_t protocol, uint16_t port, uint16_t index);

  /// VIP index for a destination, or kNone. `addr` points at the address in
  /// network order: 4 bytes for IPv4, 16 for IPv6 (a FlowKey's or the
  /// packet's own; only that many bytes are read).
  uint16_t Match(const uint8_t* addr, bool is_v6, uint8_t protocol, uint16_t port) const;

  /// For fragments (no port): the wildcard VIP, else the only VIP of that
  /// address and protocol, else kNone; `*ambiguous` is set when several
  /// port-specific VIPs share them.
  uint16_t MatchAnyPort(const uint8_t* addr, bool is_v6, uint8_t protocol, bool* ambiguous) const;

  /// True if any VIP (any protocol, any port) has this address.
  bool IsVipAddress(const uint8_t* addr, bool is_v6) const;

  size_t size() const { return ports_.size() + num_wildcards_; }

  /// Longest displacement from its home slot of any group in the built
  /// index, plus one: the slots a lookup of a VIP reads at most (<= kMaxProbe).
  uint32_t max_probe() const { return max_probe_; }
  /// Index slots (a power of two; 0 when empty).
  size_t index_slots() const { return slots_.size(); }
  /// How many keys the last build tried before every run fit kMaxProbe.
  uint32_t build_attempts() const { return build_attempts_; }

  /// The process-wide key: drawn from getrandom() once, on first use (the
  /// control thread's first build); a fixed fallback if that fails.
  static const VipHashKey& DefaultKey();

 private:
  struct Group {
    std::array<uint8_t, 16> addr{};
    uint8_t is_v6 = 0;
    uint8_t protocol = 0;
    uint16_t wildcard = kNone;
    uint16_t first_port = 0;  // into ports_
    uint16_t num_ports = 0;
  };
  struct Slot {
    uint16_t tag;    // hash bits not used for the home slot
    uint16_t group;  // into groups_; kNone: empty
  };
  struct PortEntry {
    uint16_t port;
    uint16_t index;
  };
  struct Spec {
    IpAddress address;
    uint8_t protocol;
    uint16_t port;
    uint16_t index;
  };
  void Rebuild();
  bool PlaceGroups(uint32_t capacity, uint32_t bound);
  // Classify's common case (packet.cc) inlines the IPv4 lookup.
  friend struct InlineIpv4Match;
  // One family at a time (a compile-time constant), so that the IPv4
  // lookup of the packet path compiles to a straight line.
  template <bool kIsV6>
  const Group* FindGroup(const uint8_t* addr, uint8_t protocol) const;
  template <bool kIsV6>
  uint16_t MatchFamily(const uint8_t* addr, uint8_t protocol, uint16_t port) const;
  // The group of `addr` that `accept` takes, probing at most max_probe_ slots.
  template <bool kIsV6, typename Accept>
  const Group* Probe(const uint8_t* addr, Accept accept) const;

  std::vector<Spec> specs_;  // control-path copy, in insertion order
  std::vector<Slot> slots_;
  std::vector<Group> groups_;
  std::vector<PortEntry> ports_;
  VipHashKey key_;  // the key the index was built with
  VipHashKey base_key_;  // the key given; re-keying derives from it
  bool has_key_ = false;  // false: default-constructed, DefaultKey() on first Add
  uint32_t mask_ = 0;
  uint32_t max_probe_ = 0;
  uint32_t build_attempts_ = 0;
  size_t num_wildcards_ = 0;
};

/// What the NIC said about a received frame's IPv4 header checksum (DPDK's
/// RTE_MBUF_F_RX_IP_CKSUM_* flags, mapped by the data plane so that the core
/// stays DPDK-free).
enum class RxChecksum : uint8_t {
  kUnknown,  ///< not checked (no offload, or not IPv4 to the NIC): verify in software
  kGood,     ///< the NIC verified it (or vouches for the header: CKSUM_NONE)
  kBad,      ///< the NIC found it wrong: drop
};

/// Parses `frame` and decides what to do with it. `*out` is fully rewritten.
/// Reads only within `frame`; never writes it.
///
/// `port_mac`, when given, is the MAC of the port the frame came in on. The
/// port is promiscuous, and a switch floods unknown unicast to every port of
/// the segment, so a frame addressed to another host (another LB instance
/// included) would otherwise be forwarded here too: duplicated. Such frames
/// (destination unicast and not `*port_mac`) are dropped as kNotOurMac.
/// Broadcast and multicast destinations pass (ARP requests, neighbour
/// solicitations to solicited-node groups). Null: no check (callers that
/// classify frames already accepted, and tests of the layers above).
///
/// IPv4 header checksum: `ip_checksum` is the NIC's verdict; kUnknown (the
/// default) verifies it in software (about 2 ns for a 20-byte header), kBad
/// drops. Either way a bad header is dropped as kBadIpv4Checksum, before
/// anything is looked up: the LB would otherwise forward it inside a tunnel
/// with a fresh, valid outer checksum, hiding the corruption from the
/// backend. The header quoted in an ICMP error is not checked (routers may
/// quote it as they saw it).
Verdict Classify(std::span<const uint8_t> frame, const VipMatcher& vips,
                 const LocalAddresses& local, ParsedPacket* out,
                 const MacAddress* port_mac = nullptr,
                 RxChecksum ip_checksum = RxChecksum::kUnknown);

}  // namespace maglb

#endif  // MAGLB_PACKET_H_
