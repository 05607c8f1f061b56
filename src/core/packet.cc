#include "maglb/packet.h"

#include <sys/random.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstring>

#include "maglb/checksum.h"
#include "wire.h"

namespace maglb {
namespace {

using wire::Load16;
using wire::Load32;

constexpr std::string_view kDropReasonNames[] = {
#define MAGLB_DROP_NAME(name, str) str,
    MAGLB_FOREACH_DROP_REASON(MAGLB_DROP_NAME)
#undef MAGLB_DROP_NAME
};
static_assert(std::size(kDropReasonNames) == kNumDropReasons);

constexpr uint8_t kIpv6HopByHop = 0;
constexpr uint8_t kIpv6Routing = 43;
constexpr uint8_t kIpv6Fragment = 44;
constexpr uint8_t kIpv6DestOpts = 60;

// Not placement-deciding (it only finds a VIP), but it must not let any
// address pattern share a probe run (VipMatcher in packet.h): keyed, and
// every one of the 128 address bits reaches the result. One 64x64->128
// multiply of the two keyed halves, folded (the "mum" step of wyhash): the
// high half of the product depends on every bit of both factors, and an
// attacker who does not know the key cannot choose addresses that collide.
// Reads 4 bytes for IPv4 and 16 for IPv6, so that the packet path can pass
// the address in the frame itself.
inline uint64_t AddressHash(const uint8_t* addr, bool is_v6, const VipHashKey& key) {
  uint64_t lo;
  uint64_t hi = 0;
  if (is_v6) {
    std::memcpy(&lo, addr, 8);
    std::memcpy(&hi, addr + 8, 8);
  } else {
    uint32_t a;
    std::memcpy(&a, addr, 4);
    lo = a;
  }
  const unsigned __int128 product =
      static_cast<unsigned __int128>(lo ^ key.k0) * (hi ^ key.k1 ^ (uint64_t{is_v6} << 63));
  return static_cast<uint64_t>(product) ^ static_cast<uint64_t>(product >> 64);
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

bool SameGroupAddress(const std::array<uint8_t, 16>& group, const uint8_t* addr, bool is_v6) {
  return is_v6 ? std::memcmp(group.data(), addr, 16) == 0 : std::memcmp(group.data(), addr, 4) == 0;
}

// The IPv4 header at `h`, `ihl` bytes (IHL already checked: 20..60 bytes, in
// the frame), sums to 0xFFFF in ones' complement, checksum field included.
// Native-order 32-bit words: the folded sum is byte-order independent when it
// is 0xFFFF.
inline bool Ipv4HeaderChecksumOk(const uint8_t* h, size_t ihl) {
  uint64_t s = 0;
  for (size_t i = 0; i < ihl; i += 4) {
    uint32_t w;
    std::memcpy(&w, h + i, 4);
    s += w;
  }
  // At most 15 words: s < 2^36; three folds bring it to 16 bits.
  s = (s & 0xFFFF) + (s >> 16);
  s = (s & 0xFFFF) + (s >> 16);
  s = (s & 0xFFFF) + (s >> 16);
  return s == 0xFFFF;
}

// What the IPv4/IPv6 header parser found; offsets into the frame. Passed by
// value to the rare paths so that on the common one it stays in registers.
struct IpInfo {
  size_t l4 = 0;      // L4 header offset; 0 for a later fragment
  size_t end = 0;     // end of the IP packet's bytes present in the buffer
  size_t ip_len = 0;  // length from the header
  const uint8_t* src = nullptr;
  const uint8_t* dst = nullptr;
  uint8_t proto = 0;  // for fragments: the protocol every fragment shows
  uint8_t ttl = 0;
  bool df = false;
  bool frag = false;
  bool first = false;
  uint32_t id = 0;
};

// `limit`: end of the bytes available. `embedded`: the packet quoted in an
// ICMP error, which is truncated, so its length field is not checked against
// `limit`. Always inlined: called out of line, the caller's reads of the
// IpInfo bytes it just stored stall on store forwarding (measured: half of
// Classify's time).
[[gnu::always_inline]] inline bool ParseIpv4(const uint8_t* d, size_t off, size_t limit, bool embedded, IpInfo* ip,
               DropReason* why) {
  if (limit < off + 20) return *why = DropReason::kTooShort, false;
  const uint8_t* h = d + off;
  if ((h[0] >> 4) != 4) return *why = DropReason::kBadIpVersion, false;
  const size_t ihl = size_t{h[0] & 0x0Fu} * 4;
  if (ihl < 20) return *why = DropReason::kBadIhl, false;
  if (limit < off + ihl) return *why = DropReason::kTooShort, false;
  const size_t total = Load16(h + 2);
  if (total < ihl) return *why = DropReason::kBadIpLength, false;
  if (!embedded && limit < off + total) return *why = DropReason::kBadIpLength, false;
  const uint16_t frag = Load16(h + 6);
  const size_t frag_offset = size_t{frag & 0x1FFFu} * 8;
  // A datagram ends at 65535 bytes; a fragment reaching past that is the
  // "ping of death".
  if (frag_offset + (total - ihl) > 65535) return *why = DropReason::kBadFragment, false;
  ip->ip_len = total;
  ip->end = std::min(limit, off + total);
  ip->src = h + 12;
  ip->dst = h + 16;
  ip->proto = h[9];
  ip->ttl = h[8];
  ip->df = (frag & 0x4000) != 0;
  ip->frag = (frag & 0x3FFF) != 0;  // MF or an offset
  ip->first = ip->frag && frag_offset == 0;
  ip->id = Load16(h + 4);
  ip->l4 = (ip->frag && !ip->first) ? 0 : off + ihl;
  return true;
}

[[gnu::always_inline]] inline bool ParseIpv6(const uint8_t* d, size_t off, size_t limit, bool embedded, IpInfo* ip,
               DropReason* why) {
  if (limit < off + 40) return *why = DropReason::kTooShort, false;
  const uint8_t* h = d + off;
  if ((h[0] >> 4) != 6) return *why = DropReason::kBadIpVersion, false;
  const size_t total = 40 + size_t{Load16(h + 4)};
  if (!embedded && limit < off + total) return *why = DropReason::kBadIpLength, false;
  ip->ip_len = total;
  ip->end = std::min(limit, off + total);
  ip->src = h + 8;
  ip->dst = h + 24;
  ip->ttl = h[7];
  ip->df = true;
  const size_t end = ip->end;
  uint8_t nh = h[6];
  size_t pos = off + 40;
  // Bounded walk: at most kMaxIpv6ExtHeaders headers, each at least 8 bytes.
  for (int i = 0;; ++i) {
    if (nh != kIpv6HopByHop && nh != kIpv6Routing && nh != kIpv6DestOpts && nh != kIpv6Fragment) {
      ip->proto = ip->frag ? ip->proto : nh;
      ip->l4 = pos;
      return true;
    }
    if (i == kMaxIpv6ExtHeaders) return *why = DropReason::kBadIp6ExtChain, false;
    // Hop-by-hop options must come first (RFC 8200 4.1).
    if (nh == kIpv6HopByHop && i != 0) return *why = DropReason::kBadIp6ExtChain, false;
    if (end < pos + 8) return *why = DropReason::kBadIp6ExtChain, false;
    if (nh == kIpv6Fragment) {
      const uint16_t fo = Load16(d + pos + 2);
      const size_t frag_offset = size_t{fo & 0xFFF8u};
      const bool more = (fo & 1) != 0;
      const uint8_t next = d[pos];
      pos += 8;
      if (frag_offset == 0 && !more) {  // atomic fragment: no fragment at all
        nh = next;
        continue;
      }
      if (ip->frag) return *why = DropReason::kBadIp6ExtChain, false;  // two fragment headers
      if (frag_offset + (ip->end - pos) > 65535) return *why = DropReason::kBadFragment, false;
      ip->frag = true;
      ip->first = frag_offset == 0;
      ip->id = Load32(d + pos - 4);
      ip->proto = next;  // what every fragment of the datagram shows
      if (!ip->first) {
        ip->l4 = 0;
        return true;
      }
      nh = next;  // the first fragment goes on to its L4 header
      continue;
    }
    const size_t len = (size_t{d[pos + 1]} + 1) * 8;
    if (end < pos + len) return *why = DropReason::kBadIp6ExtChain, false;
    nh = d[pos];
    pos += len;
  }
}

// A FlowKey as five 64-bit words, stored whole: the flow hash and conntrack
// read the key back as 8-byte words, and a word assembled from narrower
// stores would stall on store forwarding (measured: ~5 ns per packet).
class KeyWords {
 public:
  KeyWords(const uint8_t* src, const uint8_t* dst, bool is_v6) {
    if (is_v6) {
      std::memcpy(&w_[0], src, 8);
      std::memcpy(&w_[1], src + 8, 8);
      std::memcpy(&w_[2], dst, 8);
      std::memcpy(&w_[3], dst + 8, 8);
    } else {
      w_[0] = Widen(src);
      w_[1] = 0;
      w_[2] = Widen(dst);
      w_[3] = 0;
    }
  }
  void Store(FlowKey* k, uint16_t src_port, uint16_t dst_port, uint8_t protocol, bool is_v6) const {
    const uint64_t w[5] = {w_[0], w_[1], w_[2], w_[3], LastWord(src_port, dst_port, protocol, is_v6)};
    static_assert(sizeof(w) == sizeof(FlowKey));
    std::memcpy(static_cast<void*>(k), w, sizeof(w));
  }
  // An IPv4 key into a FlowKey that is all zero: only its three words that
  // are not, each a single 8-byte store. (Five words from registers would be
  // paired into vector stores assembled on the stack.)
  static void StoreIpv4(FlowKey* k, const uint8_t* src, const uint8_t* dst, uint16_t src_port,
                        uint16_t dst_port, uint8_t protocol) {
    auto* out = static_cast<unsigned char*>(static_cast<void*>(k));
    const uint64_t s = Widen(src);
    const uint64_t d = Widen(dst);
    const uint64_t last = LastWord(src_port, dst_port, protocol, false);
    std::memcpy(out + offsetof(FlowKey, src), &s, 8);
    std::memcpy(out + offsetof(FlowKey, dst), &d, 8);
    std::memcpy(out + offsetof(FlowKey, src_port), &last, 8);
  }

 private:
  // src_port, dst_port (host order), protocol, is_v6, reserved = 0.
  static uint64_t LastWord(uint16_t src_port, uint16_t dst_port, uint8_t protocol, bool is_v6) {
    if constexpr (std::endian::native == std::endian::little) {
      return uint64_t{src_port} | uint64_t{dst_port} << 16 | uint64_t{protocol} << 32 | uint64_t{is_v6} << 40;
    } else {
      return uint64_t{src_port} << 48 | uint64_t{dst_port} << 32 | uint64_t{protocol} << 24 | uint64_t{is_v6} << 16;
    }
  }
  // 4 address bytes followed by 4 zero bytes, as a native word.
  static uint64_t Widen(const uint8_t* a) {
    uint32_t v;
    std::memcpy(&v, a, 4);
    return std::endian::native == std::endian::little ? uint64_t{v} : uint64_t{v} << 32;
  }
  uint64_t w_[4];
};

bool SameAddress(const uint8_t* a, const std::optional<IpAddress>& b, bool is_v6) {
  return b.has_value() && b->is_v6 == is_v6 && std::memcmp(a, b->bytes.data(), is_v6 ? 16 : 4) == 0;
}

// One of our own addresses (the kernel interface's link-local included, when
// there is one).
bool ToLocal(const uint8_t* a, const LocalAddresses& local, bool is_v6) {
  if (!is_v6) return SameAddress(a, local.v4, false);
  return SameAddress(a, local.v6, true) || SameAddress(a, local.v6_link_local, true);
}

// Traffic to our address that maglb does not answer: up to the kernel
// interface if there is one, else dropped.
Verdict Unanswered(const LocalAddresses& local) {
  return local.kernel ? Verdict::Local(Action::kToKernel) : Verdict::Drop(DropReason::kLocalUnsupported);
}

// Not ICMP and no VIP's (protocol, port): to us, to a VIP's address on another
// protocol or port, or to nobody.
Verdict NoVipService(const uint8_t* dst, bool is_v6, const VipMatcher& vips, const LocalAddresses& local) {
  if (ToLocal(dst, local, is_v6)) return Unanswered(local);
  if (vips.IsVipAddress(dst, is_v6)) return Verdict::Drop(DropReason::kVipNoService);
  return Verdict::Drop(DropReason::kNoVip);
}

// ICMPv4 (IPv4) / ICMPv6 (IPv6, with the pseudo-header) checksum over
// [l4, end) verifies.
bool IcmpChecksumOk(const uint8_t* d, IpInfo ip, bool is_v6) {
  const size_t len = ip.end - ip.l4;
  uint32_t sum = is_v6 ? Ipv6PseudoHeaderSum(ip.src, ip.dst, static_cast<uint32_t>(len), kIpProtoIcmpv6) : 0;
  return ChecksumFinish(ChecksumPartial(d + ip.l4, len, sum)) == 0;
}

bool IsIcmpErrorType(uint8_t type, bool is_v6) {
  return is_v6 ? (type >= kIcmpv6DestUnreachable && type <= kIcmpv6ParameterProblem)
               : (type == kIcmpDestUnreachable || type == kIcmpTimeExceeded ||
                  type == kIcmpParameterProblem);
}

Verdict ClassifyArp(const uint8_t* d, size_t n, const LocalAddresses& local, ParsedPacket* p) {
  const size_t off = p->l3_offset;
  if (n < off + 28) return Verdict::Drop(DropReason::kTooShort);
  const uint8_t* a = d + off;
  const uint16_t op = Load16(a + 6);
  // Ethernet hardware (6-byte addresses), IPv4 protocol (4-byte addresses).
  if (Load16(a) != kArpHardwareEthernet || Load16(a + 2) != kEtherTypeIpv4 || a[4] != 6 ||
      a[5] != 4 || (op != kArpRequest && op != kArpReply)) {
    return Verdict::Drop(DropReason::kBadArp);
  }
  p->arp_op = op;
  if (!SameAddress(a + 24, local.v4, false)) return Verdict::Drop(DropReason::kNotForUs);
  return Verdict::Local(Action::kLocalArp);
}

Verdict ClassifyNd(const uint8_t* d, IpInfo ip, const LocalAddresses& local, ParsedPacket* p) {
  // RFC 4861 7.1.1: hop limit 255 proves the sender is on-link.
  if (ip.ttl != 255 || p->icmp_code != 0 || ip.end < ip.l4 + 24) {
    return Verdict::Drop(DropReason::kBadNd);
  }
  if (!IcmpChecksumOk(d, ip, true)) return Verdict::Drop(DropReason::kBadChecksum);
  if (p->icmp_type == kIcmpv6NeighborSolicitation) {
    if (!ToLocal(d + ip.l4 + 8, local, true)) return Verdict::Drop(DropReason::kNotForUs);
    return Verdict::Local(Action::kLocalNd);
  }
  // Advertisements: to us or to a multicast group, so the data plane (and
  // the kernel interface, if any) can learn neighbours from them.
  if (local.v6.has_value() && (ip.dst[0] == 0xFF || ToLocal(ip.dst, local, true))) {
    return Verdict::Local(Action::kLocalNd);
  }
  return Verdict::Drop(DropReason::kNotForUs);
}

// An ICMP error to a VIP: key it by the quoted packet, reversed.
Verdict ClassifyIcmpError(const uint8_t* d, IpInfo ip, bool is_v6, const VipMatcher& vips,
                          ParsedPacket* p) {
  const size_t e = ip.l4 + 8;  // the quoted packet
  IpInfo q;
  DropReason ignored;
  const bool ok = is_v6 ? ParseIpv6(d, e, ip.end, true, &q, &ignored)
                        : ParseIpv4(d, e, ip.end, true, &q, &ignored);
  if (!ok) return Verdict::Drop(DropReason::kBadIcmpError);
  const size_t alen = is_v6 ? 16 : 4;
  // The quoted packet was sent from the VIP (direct server return), and the
  // error went back to its source.
  if (std::memcmp(q.src, ip.dst, alen) != 0) return Verdict::Drop(DropReason::kBadIcmpError);
  if (q.proto != kIpProtoTcp && q.proto != kIpProtoUdp) return Verdict::Drop(DropReason::kBadIcmpError);
  // Reversed: the client (the quoted destination) is the source.
  const KeyWords key(q.dst, q.src, is_v6);
  uint16_t index;
  if (q.l4 == 0) {
    // A later fragment quotes no ports: best effort with the 3-tuple.
    bool ambiguous = false;
    key.Store(&p->flow, 0, 0, q.proto, is_v6);
    index = vips.MatchAnyPort(q.src, is_v6, q.proto, &ambiguous);
  } else {
    if (ip.end < q.l4 + 4) return Verdict::Drop(DropReason::kBadIcmpError);
    const uint16_t vip_port = Load16(d + q.l4);
    key.Store(&p->flow, Load16(d + q.l4 + 2), vip_port, q.proto, is_v6);
    index = vips.Match(q.src, is_v6, q.proto, vip_port);
  }
  if (index == VipMatcher::kNone) return Verdict::Drop(DropReason::kVipNoService);
  p->is_icmp_error = true;
  return Verdict::ToVip(index);
}

}  // namespace

std::string_view DropReasonName(DropReason r) {
  const size_t i = static_cast<size_t>(r);
  return i < kNumDropReasons ? kDropReasonNames[i] : std::string_view("unknown");
}

// ---------------------------------------------------------------- VipMatcher

const VipHashKey& VipMatcher::DefaultKey() {
  // Function-local and trivially destructible: drawn on the first build.
  static const VipHashKey key = [] {
    VipHashKey k;
    uint64_t words[2];
    if (getrandom(words, sizeof(words), 0) == static_cast<ssize_t>(sizeof(words))) {
      k.k0 = words[0];
      k.k1 = words[1];
    } else {
      // No entropy (very early boot): still keyed, by the time and this
      // object's address, rather than by nothing.
      const uint64_t t = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
      k.k0 = SplitMix64(t);
      k.k1 = SplitMix64(t ^ reinterpret_cast<uintptr_t>(&k));
    }
    return k;
  }();
  return key;
}

VipMatcher::VipMatcher(const std::vector<VipSpec>& vips) : VipMatcher(vips, DefaultKey()) {}

VipMatcher::VipMatcher(const std::vector<VipSpec>& vips, const VipHashKey& key)
    : base_key_(key), has_key_(true) {
  specs_.reserve(vips.size());
  for (size_t i = 0; i < vips.size(); ++i) {
    specs_.push_back({vips[i].address, static_cast<uint8_t>(vips[i].protocol), vips[i].port,
                      static_cast<uint16_t>(i)});
  }
  Rebuild();
}

void VipMatcher::Add(const IpAddress& address, uint8_t protocol, uint16_t port, uint16_t index) {
  if (!has_key_) {
    base_key_ = DefaultKey();
    has_key_ = true;
  }
  specs_.push_back({address, protocol, port, index});
  Rebuild();
}

void VipMatcher::Rebuild() {
  // Group the specs by (family, address, protocol) with a stable sort: linear
  // after the sort whatever the number of VIPs, and within a group the specs
  // keep their order, so that a duplicate (address, protocol, port) keeps
  // the first.
  std::vector<Spec> sorted = specs_;
  for (Spec& s : sorted) {
    if (!s.address.is_v6) std::fill(s.address.bytes.begin() + 4, s.address.bytes.end(), 0);
  }
  std::stable_sort(sorted.begin(), sorted.end(), [](const Spec& x, const Spec& y) {
    if (x.address.is_v6 != y.address.is_v6) return x.address.is_v6 < y.address.is_v6;
    if (x.address.bytes != y.address.bytes) return x.address.bytes < y.address.bytes;
    return x.protocol < y.protocol;
  });
  groups_.clear();
  ports_.clear();
  num_wildcards_ = 0;
  for (size_t i = 0; i < sorted.size();) {
    const Spec& head = sorted[i];
    Group g;
    g.addr = head.address.bytes;
    g.is_v6 = head.address.is_v6;
    g.protocol = head.protocol;
    g.first_port = static_cast<uint16_t>(ports_.size());
    size_t j = i;
    for (; j < sorted.size() && sorted[j].address == head.address && sorted[j].protocol == head.protocol; ++j) {
      const Spec& s = sorted[j];
      if (s.port == 0) {
        if (g.wildcard == kNone) g.wildcard = s.index;
      } else if (std::none_of(ports_.begin() + g.first_port, ports_.end(),
                              [&](const PortEntry& e) { return e.port == s.port; })) {
        ports_.push_back({s.port, s.index});
      }
    }
    g.num_ports = static_cast<uint16_t>(ports_.size() - g.first_port);
    if (g.wildcard != kNone) ++num_wildcards_;
    groups_.push_back(g);
    i = j;
  }

  slots_.clear();
  mask_ = 0;
  max_probe_ = 0;
  build_attempts_ = 0;
  if (groups_.empty()) return;
  // At most a quarter full: a run longer than kMaxProbe is then rare enough
  // (well under one per build at kMaxVips groups) that a fresh key almost
  // always fits at the first or second try. Doubling after a few tries
  // bounds the work whatever happens.
  constexpr uint32_t kKeysPerSize = 4;
  uint32_t capacity = 16;
  while (capacity < 4 * groups_.size()) capacity *= 2;
  // Never reached with a hash worth the name (the tests check that it is
  // not), but the build must end: past this size the layout is taken as it
  // comes, and lookups still stop after max_probe_ slots.
  constexpr uint32_t kGiveUpCapacity = 1u << 20;
  for (;; capacity *= 2) {
    for (uint32_t attempt = 0; attempt < kKeysPerSize; ++attempt) {
      // The first try uses the key as given; later ones derive from it.
      key_ = build_attempts_ == 0
                 ? base_key_
                 : VipHashKey{SplitMix64(base_key_.k0 + build_attempts_), SplitMix64(base_key_.k1 ^ build_attempts_)};
      ++build_attempts_;
      if (PlaceGroups(capacity, capacity >= kGiveUpCapacity ? capacity : kMaxProbe)) return;
    }
  }
}

// Linear probing from each group's home slot; false when one lands `bound`
// or more slots away from it.
bool VipMatcher::PlaceGroups(uint32_t capacity, uint32_t bound) {
  slots_.assign(capacity, Slot{0, kNone});
  mask_ = capacity - 1;
  max_probe_ = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const Group& g = groups_[gi];
    const uint64_t h = AddressHash(g.addr.data(), g.is_v6, key_);
    uint32_t i = static_cast<uint32_t>(h) & mask_;
    uint32_t distance = 0;
    while (slots_[i].group != kNone) {
      i = (i + 1) & mask_;
      if (++distance == bound) return false;
    }
    slots_[i] = Slot{static_cast<uint16_t>(h >> 48), static_cast<uint16_t>(gi)};
    max_probe_ = std::max(max_probe_, distance + 1);
  }
  return true;
}

template <bool kIsV6, typename Accept>
[[gnu::always_inline]] inline const VipMatcher::Group* VipMatcher::Probe(const uint8_t* addr,
                                                                        Accept accept) const {
  // Empty: max_probe_ is 0 and nothing is read.
  const uint64_t h = AddressHash(addr, kIsV6, key_);
  const uint16_t tag = static_cast<uint16_t>(h >> 48);
  // No group lies further than max_probe_ slots from its home (the groups of
  // one address, one per protocol, share it): a lookup stops there even when
  // the run goes on, and at an empty slot before.
  uint32_t i = static_cast<uint32_t>(h) & mask_;
  for (uint32_t n = 0; n < max_probe_; ++n, i = (i + 1) & mask_) {
    const Slot s = slots_[i];
    if (s.group == kNone) return nullptr;
    if (s.tag != tag) continue;
    const Group& g = groups_[s.group];
    if (g.is_v6 == kIsV6 && SameGroupAddress(g.addr, addr, kIsV6) && accept(g)) return &g;
  }
  return nullptr;
}

template <bool kIsV6>
[[gnu::always_inline]] inline const VipMatcher::Group* VipMatcher::FindGroup(const uint8_t* addr,
                                                                            uint8_t protocol) const {
  return Probe<kIsV6>(addr, [protocol](const Group& g) { return g.protocol == protocol; });
}

template <bool kIsV6>
[[gnu::always_inline]] inline uint16_t VipMatcher::MatchFamily(const uint8_t* addr, uint8_t protocol,
                                                              uint16_t port) const {
  const Group* g = FindGroup<kIsV6>(addr, protocol);
  if (g == nullptr) return kNone;
  const PortEntry* e = ports_.data() + g->first_port;
  for (uint16_t i = 0; i < g->num_ports; ++i) {
    if (e[i].port == port) return e[i].index;
  }
  return g->wildcard;
}

uint16_t VipMatcher::Match(const uint8_t* addr, bool is_v6, uint8_t protocol, uint16_t port) const {
  return is_v6 ? MatchFamily<true>(addr, protocol, port) : MatchFamily<false>(addr, protocol, port);
}

uint16_t VipMatcher::MatchAnyPort(const uint8_t* addr, bool is_v6, uint8_t protocol,
                                  bool* ambiguous) const {
  *ambiguous = false;
  const Group* g = is_v6 ? FindGroup<true>(addr, protocol) : FindGroup<false>(addr, protocol);
  if (g == nullptr) return kNone;
  if (g->wildcard != kNone) return g->wildcard;
  if (g->num_ports == 1) return ports_[g->first_port].index;
  *ambiguous = g->num_ports > 1;
  return kNone;
}

bool VipMatcher::IsVipAddress(const uint8_t* addr, bool is_v6) const {
  const auto any = [](const Group&) { return true; };
  return (is_v6 ? Probe<true>(addr, any) : Probe<false>(addr, any)) != nullptr;
}

// Match() for IPv4, inlined into Classify's common case: no family dispatch,
// no call (VipMatcher's friend).
struct InlineIpv4Match {
  [[gnu::always_inline]] static uint16_t Match(const VipMatcher& vips, const uint8_t* addr, uint8_t protocol,
                                               uint16_t port) {
    return vips.MatchFamily<false>(addr, protocol, port);
  }
};

// ------------------------------------------------------------------ Classify

namespace {

// A unicast destination MAC that is not the port's (see Classify in
// packet.h). `d` holds at least the Ethernet header.
inline bool ForeignUnicast(const uint8_t* d, const MacAddress* port_mac) {
  // The I/G bit (first byte, bit 0) marks broadcast and multicast: those pass.
  return port_mac != nullptr && (d[0] & 1) == 0 &&
         std::memcmp(d, port_mac->bytes.data(), port_mac->bytes.size()) != 0;
}

// Every frame: the general parser (VLAN tags, IPv6, options, fragments, ICMP,
// ARP/ND, every drop). Out of line, so that its register pressure does not
// lengthen the prologue of the common case (ClassifyPlainIpv4).
[[gnu::noinline]] Verdict ClassifyGeneral(const uint8_t* d, size_t n, const VipMatcher& vips,
                                          const LocalAddresses& local, ParsedPacket* out,
                                          const MacAddress* port_mac, RxChecksum ip_checksum) {
  *out = ParsedPacket{};
  ParsedPacket& p = *out;
  if (n < kEthernetHeaderLen) return Verdict::Drop(DropReason::kTooShort);
  if (ForeignUnicast(d, port_mac)) return Verdict::Drop(DropReason::kNotOurMac);

  size_t off = 12;
  uint16_t ethertype = Load16(d + off);
  while (ethertype == kEtherTypeVlan || ethertype == kEtherTypeQinQ) {
    if (p.vlan_count == kMaxVlanTags) return Verdict::Drop(DropReason::kTooManyVlans);
    if (n < off + 6) return Verdict::Drop(DropReason::kTooShort);
    p.vlan_tci[p.vlan_count++] = Load16(d + off + 2);
    off += kVlanTagLen;
    ethertype = Load16(d + off);
  }
  off += 2;
  p.ethertype = ethertype;
  p.l3_offset = static_cast<uint16_t>(off);

  IpInfo ip;
  DropReason why = DropReason::kTooShort;
  bool is_v6;
  if (ethertype == kEtherTypeIpv4) {
    is_v6 = false;
    if (!ParseIpv4(d, off, n, false, &ip, &why)) return Verdict::Drop(why);
    // After the structural checks (so that a malformed header keeps its own
    // reason), before anything is looked up by its fields.
    if (ip_checksum != RxChecksum::kGood &&
        (ip_checksum == RxChecksum::kBad || !Ipv4HeaderChecksumOk(d + off, size_t{d[off] & 0x0Fu} * 4))) [[unlikely]] {
      return Verdict::Drop(DropReason::kBadIpv4Checksum);
    }
  } else if (ethertype == kEtherTypeIpv6) {
    is_v6 = true;
    if (!ParseIpv6(d, off, n, false, &ip, &why)) return Verdict::Drop(why);
  } else if (ethertype == kEtherTypeArp) {
    return ClassifyArp(d, n, local, &p);
  } else {
    return Verdict::Drop(DropReason::kBadEtherType);
  }

  // TTL / hop limit (packet.h): only 0 is refused; the LB does not decrement.
  if (ip.ttl == 0) [[unlikely]] return Verdict::Drop(DropReason::kTtlZero);

  p.ip_version = is_v6 ? 6 : 4;
  p.l3_len = static_cast<uint16_t>(ip.ip_len);
  p.l4_offset = static_cast<uint16_t>(ip.l4);
  p.l4_protocol = ip.proto;
  p.ttl = ip.ttl;
  p.dont_fragment = ip.df;
  p.is_fragment = ip.frag;
  p.is_first_fragment = ip.first;
  p.fragment_id = ip.id;
  const KeyWords key(ip.src, ip.dst, is_v6);
  key.Store(&p.flow, 0, 0, ip.proto, is_v6);

  if (ip.frag) {
    // Fragment policy (packet.h): ports 0, VIP by address and protocol.
    bool ambiguous = false;
    const uint16_t index = vips.MatchAnyPort(ip.dst, is_v6, ip.proto, &ambiguous);
    if (index != VipMatcher::kNone) return Verdict::ToVip(index);
    if (ambiguous) return Verdict::Drop(DropReason::kFragmentAmbiguousVip);
    if (vips.IsVipAddress(ip.dst, is_v6)) return Verdict::Drop(DropReason::kVipNoService);
    if (ToLocal(ip.dst, local, is_v6)) return Unanswered(local);
    return Verdict::Drop(DropReason::kNoVip);
  }

  const size_t l4 = ip.l4;
  const uint8_t* h = d + l4;
  if (ip.proto == kIpProtoTcp || ip.proto == kIpProtoUdp) {
    if (ip.proto == kIpProtoTcp) {
      if (ip.end < l4 + 20) return Verdict::Drop(DropReason::kTooShort);
      const size_t data_offset = size_t{h[12]} >> 4 << 2;
      if (data_offset < 20 || ip.end < l4 + data_offset) {
        return Verdict::Drop(DropReason::kBadTcpOffset);
      }
      p.tcp_flags = h[13];
    } else if (ip.end < l4 + 8) {
      return Verdict::Drop(DropReason::kTooShort);
    }
    const uint16_t dst_port = Load16(h + 2);
    key.Store(&p.flow, Load16(h), dst_port, ip.proto, is_v6);
    const uint16_t index = vips.Match(ip.dst, is_v6, ip.proto, dst_port);
    if (index != VipMatcher::kNone) return Verdict::ToVip(index);
  }

  if (ip.proto == (is_v6 ? kIpProtoIcmpv6 : kIpProtoIcmp)) {
    const bool to_local = ToLocal(ip.dst, local, is_v6);
    if (ip.end < l4 + 4) return Verdict::Drop(DropReason::kTooShort);
    p.icmp_type = h[0];
    p.icmp_code = h[1];
    if (is_v6 && (p.icmp_type == kIcmpv6NeighborSolicitation ||
                  p.icmp_type == kIcmpv6NeighborAdvertisement)) {
      return ClassifyNd(d, ip, local, &p);
    }
    const bool to_vip = !to_local && vips.IsVipAddress(ip.dst, is_v6);
    if (!to_local && !to_vip) return Verdict::Drop(DropReason::kNoVip);
    if (p.icmp_type == (is_v6 ? kIcmpv6EchoRequest : kIcmpEchoRequest) && p.icmp_code == 0) {
      if (ip.end < l4 + 8) return Verdict::Drop(DropReason::kTooShort);
      if (!IcmpChecksumOk(d, ip, is_v6)) return Verdict::Drop(DropReason::kBadChecksum);
      key.Store(&p.flow, Load16(h + 4), 0, ip.proto, is_v6);  // the echo identifier stands in the source port
      return Verdict::Local(Action::kLocalEcho);
    }
    if (to_vip && IsIcmpErrorType(p.icmp_type, is_v6)) {
      if (ip.end < l4 + 8) return Verdict::Drop(DropReason::kBadIcmpError);
      return ClassifyIcmpError(d, ip, is_v6, vips, &p);
    }
    // Errors about the kernel's own connections, replies to its pings.
    return to_local ? Unanswered(local) : Verdict::Drop(DropReason::kVipIcmpUnsupported);
  }
  return NoVipService(ip.dst, is_v6, vips, local);
}

// Bytes of a frame as the native word they load as (endian-neutral masks).
constexpr uint32_t Native32(uint8_t b0, uint8_t b1, uint8_t b2, uint8_t b3) {
  return std::bit_cast<uint32_t>(std::array<uint8_t, 4>{b0, b1, b2, b3});
}
inline uint32_t LoadNative32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The common case's fixed layout: Ethernet without tags, IPv4 without
// options, L4 header right after.
constexpr size_t kPlainL3 = kEthernetHeaderLen;
constexpr size_t kPlainL4 = kPlainL3 + 20;
// Bytes 12..15: ethertype IPv4, version 4 and IHL 5 (the TOS byte ignored).
constexpr uint32_t kPlainIpv4Mask = Native32(0xFF, 0xFF, 0xFF, 0x00);
constexpr uint32_t kPlainIpv4 = Native32(0x08, 0x00, 0x45, 0x00);
// Bytes 18..21: identification, flags and offset: MF or an offset set.
constexpr uint32_t kFragmentBits = Native32(0x00, 0x00, 0x3F, 0xFF);

// Whether `d` (n bytes) is the common case that ClassifyPlainIpv4 decides:
// untagged Ethernet, IPv4 with IHL 5, no fragment, length within the frame,
// TTL not 0, TCP with a valid data offset or UDP, its header within the
// packet, a header checksum the NIC vouched for or that verifies. For such a
// frame the general parser's every check passes and only the VIP lookup
// remains; anything else (or in doubt) is left to ClassifyGeneral, from the
// start. Reads only; each byte read is checked to be within `n` first.
[[gnu::always_inline]] inline bool IsPlainIpv4TcpUdp(const uint8_t* d, size_t n, RxChecksum ip_checksum) {
  if (n < kPlainL4 + 8) return false;  // up to the UDP header / the TCP ports
  if ((LoadNative32(d + 12) & kPlainIpv4Mask) != kPlainIpv4) return false;
  if ((LoadNative32(d + 18) & kFragmentBits) != 0) return false;
  const uint8_t* h = d + kPlainL3;
  const size_t total = Load16(h + 2);
  if (n < kPlainL3 + total) return false;  // the frame may be longer (padding)
  if (h[8] == 0) return false;             // TTL 0
  if (h[9] == kIpProtoTcp) {
    if (total < 20 + 20) return false;
    // In the frame: n >= 14 + total >= 54.
    const size_t data_offset = size_t{d[kPlainL4 + 12]} >> 4 << 2;
    if (data_offset < 20 || total < 20 + data_offset) return false;
  } else if (h[9] != kIpProtoUdp || total < 20 + 8) {
    return false;
  }
  return ip_checksum == RxChecksum::kGood || (ip_checksum == RxChecksum::kUnknown && Ipv4HeaderChecksumOk(h, 20));
}

// Classify of a frame IsPlainIpv4TcpUdp accepted, destination MAC checked:
// the same verdict and the same ParsedPacket as ClassifyGeneral's, straight
// through.
[[gnu::always_inline]] inline Verdict ClassifyPlainIpv4(const uint8_t* d, const VipMatcher& vips,
                                                        const LocalAddresses& local, ParsedPacket* out) {
  const uint8_t* h = d + kPlainL3;
  const uint8_t* l4 = d + kPlainL4;
  const uint8_t proto = h[9];
  const uint16_t dst_port = Load16(l4 + 2);
  // Looked up before `out` is written: the frame could alias it, and the
  // lookup's reads would then be made again after the stores.
  const uint16_t index = InlineIpv4Match::Match(vips, h + 16, proto, dst_port);
  *out = ParsedPacket{};
  ParsedPacket& p = *out;
  KeyWords::StoreIpv4(&p.flow, h + 12, h + 16, Load16(l4), dst_port, proto);
  p.l3_offset = kPlainL3;
  p.l4_offset = kPlainL4;
  p.l3_len = Load16(h + 2);
  p.ethertype = kEtherTypeIpv4;
  p.ip_version = 4;
  p.l4_protocol = proto;
  p.tcp_flags = proto == kIpProtoTcp ? l4[13] : 0;
  p.ttl = h[8];
  p.dont_fragment = (h[6] & 0x40) != 0;
  p.fragment_id = Load16(h + 4);
  if (index != VipMatcher::kNone) [[likely]] return Verdict::ToVip(index);
  return NoVipService(h + 16, false, vips, local);
}

}  // namespace

Verdict Classify(std::span<const uint8_t> frame, const VipMatcher& vips,
                 const LocalAddresses& local, ParsedPacket* out, const MacAddress* port_mac,
                 RxChecksum ip_checksum) {
  const uint8_t* d = frame.data();
  // No frame is longer than 64 KiB; ignoring bytes past it keeps every
  // offset in ParsedPacket's 16 bits.
  const size_t n = std::min<size_t>(frame.size(), 0xFFFF);
  if (IsPlainIpv4TcpUdp(d, n, ip_checksum) && !ForeignUnicast(d, port_mac)) [[likely]] {
    return ClassifyPlainIpv4(d, vips, local, out);
  }
  return ClassifyGeneral(d, n, vips, local, out, port_mac, ip_checksum);
}

}  // namespace maglb
