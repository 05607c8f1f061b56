#include "maglb/encap.h"

#include <algorithm>
#include <cstring>

#include "maglb/checksum.h"
#include "maglb/config.h"
#include "wire.h"

namespace maglb {
namespace {

using wire::Load16;
using wire::Store16;
using wire::Store32;

void WriteEthernet(uint8_t* f, const MacAddress& dst, const MacAddress& src, uint16_t ethertype) {
  std::memcpy(f, dst.bytes.data(), 6);
  std::memcpy(f + 6, src.bytes.data(), 6);
  Store16(f + 12, ethertype);
}

// The length of an IPv4 packet's options that later fragments must carry
// (RFC 791: those with the copied flag), written to `out` padded to 4 bytes.
size_t CopiedOptions(const uint8_t* ip, size_t ihl, uint8_t* out) {
  size_t n = 0;
  for (size_t i = 20; i < ihl;) {
    const uint8_t type = ip[i];
    if (type == 0) break;  // end of option list
    if (type == 1) {       // no-operation
      ++i;
      continue;
    }
    if (i + 1 >= ihl) break;
    const size_t len = ip[i + 1];
    if (len < 2 || i + len > ihl) break;  // malformed: copy nothing more
    if (type & 0x80) {
      std::memcpy(out + n, ip + i, len);
      n += len;
    }
    i += len;
  }
  while (n % 4 != 0) out[n++] = 0;
  return n;
}

struct FragmentPlan {
  size_t ihl = 0;
  size_t payload = 0;
  size_t first_data = 0;  // data bytes in fragment 0
  size_t later_data = 0;  // data bytes in each later fragment
  size_t later_hlen = 0;
  size_t count = 0;
  uint8_t later_options[40] = {};
};

bool PlanFragments(const uint8_t* ip, size_t ip_len, size_t max_ip_len, FragmentPlan* plan) {
  if (ip_len < 20 || (ip[0] >> 4) != 4) return false;
  const size_t ihl = size_t{ip[0] & 0x0Fu} * 4;
  if (ihl < 20 || ihl > ip_len || Load16(ip + 2) != ip_len) return false;
  plan->ihl = ihl;
  plan->payload = ip_len - ihl;
  if (ip_len <= max_ip_len) {
    plan->count = 1;
    return true;
  }
  if (Load16(ip + 6) & 0x4000) return false;  // DF: not ours to fragment
  plan->later_hlen = 20 + CopiedOptions(ip, ihl, plan->later_options);
  if (max_ip_len < ihl + 8 || max_ip_len < plan->later_hlen + 8) return false;
  plan->first_data = (max_ip_len - ihl) & ~size_t{7};
  plan->later_data = (max_ip_len - plan->later_hlen) & ~size_t{7};
  plan->count = 1 + (plan->payload - plan->first_data + plan->later_data - 1) / plan->later_data;
  return true;
}

}  // namespace

EncapConfig EncapConfig::FromLbConfig(const LbConfig& lb, const MacAddress& port_mac) {
  EncapConfig c;
  c.src_mac = port_mac;
  c.source_v4 = lb.encap_source_v4.has_value() ? lb.encap_source_v4 : lb.ipv4;
  c.source_v6 = lb.encap_source_v6.has_value() ? lb.encap_source_v6 : lb.ipv6;
  c.flow_bits_v4 = lb.encap_source_v4_flow_bits;
  c.flow_bits_v6 = lb.encap_source_v6_flow_bits;
  c.ttl = lb.encap_ttl;
  c.mtu = lb.mtu;
  return c;
}

size_t EncapOverhead(Forwarding forwarding, bool outer_is_v6) {
  if (forwarding == Forwarding::kL2Dsr) return 0;
  return (outer_is_v6 ? kIpv6HeaderLen : kIpv4HeaderLen) +
         (forwarding == Forwarding::kGre ? kGreHeaderLen : 0);
}

namespace {

// Low `bits` bits set (bits may be 0 or the whole width).
constexpr uint32_t LowMask32(unsigned bits) { return bits >= 32 ? ~uint32_t{0} : (uint32_t{1} << bits) - 1; }
constexpr uint64_t LowMask64(unsigned bits) { return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1; }

uint64_t Load64(const uint8_t* p) { return uint64_t{wire::Load32(p)} << 32 | wire::Load32(p + 4); }
void Store64(uint8_t* p, uint64_t v) {
  Store32(p, static_cast<uint32_t>(v >> 32));
  Store32(p + 4, static_cast<uint32_t>(v));
}

}  // namespace

// Whole-word arithmetic rather than byte edits: the packet path stores the
// result straight into the outer header, and byte stores read back as words
// would stall on store forwarding.
IpAddress OuterSource(const IpAddress& base, uint8_t flow_bits, uint64_t flow_hash) {
  IpAddress a = base;
  if (a.is_v6) {
    const uint64_t m = LowMask64(flow_bits);
    Store64(a.bytes.data() + 8, (Load64(a.bytes.data() + 8) & ~m) | (flow_hash & m));
  } else {
    const uint32_t m = LowMask32(flow_bits);
    Store32(a.bytes.data(), (wire::Load32(a.bytes.data()) & ~m) | (static_cast<uint32_t>(flow_hash) & m));
  }
  return a;
}

namespace {

// One instantiation per checksum owner: see ForwardAs in encap.h.
template <bool kNicIpv4Checksum>
EncapResult EncapsulateAs(uint8_t* ip, size_t ip_len, size_t room_before, const EncapTarget& target,
                          const EncapConfig& config, uint64_t flow_hash) {
  EncapResult r;
  if (ip_len < kIpv4HeaderLen || target.forwarding == Forwarding::kL2Dsr) return r;
  const uint8_t version = ip[0] >> 4;
  if (version != 4 && version != 6) return r;
  const bool inner_v6 = version == 6;
  if (inner_v6 && ip_len < kIpv6HeaderLen) return r;

  const bool outer_v6 = target.backend.is_v6;
  const std::optional<IpAddress>& base = outer_v6 ? config.source_v6 : config.source_v4;
  const size_t overhead = EncapOverhead(target.forwarding, outer_v6);
  const size_t limit = std::min<size_t>(config.mtu, outer_v6 ? 65535 + kIpv6HeaderLen : 65535);
  r.usable_mtu = static_cast<uint32_t>(limit > overhead ? limit - overhead : 0);
  if (!base.has_value() || base->is_v6 != outer_v6) {
    r.status = EncapStatus::kNoSource;
    return r;
  }
  if (ip_len > r.usable_mtu) {
    const bool df = inner_v6 || (ip[6] & 0x40) != 0;
    r.status = df ? EncapStatus::kMtuExceeded : EncapStatus::kFragmentInner;
    return r;
  }
  const size_t prepend = kEthernetHeaderLen + overhead;
  if (room_before < prepend) {
    r.status = EncapStatus::kNoHeadroom;
    return r;
  }

  const bool gre = target.forwarding == Forwarding::kGre;
  const uint16_t inner_ethertype = inner_v6 ? kEtherTypeIpv6 : kEtherTypeIpv4;
  // RFC 6040 normal mode: the outer header carries the inner DSCP and ECN.
  const uint8_t tos = inner_v6 ? static_cast<uint8_t>(Load16(ip) >> 4) : ip[1];
  const uint8_t outer_proto = gre ? kIpProtoGre : (inner_v6 ? kIpProtoIpv6 : kIpProtoIpip);

  uint8_t* f = ip - prepend;
  WriteEthernet(f, target.next_hop_mac, config.src_mac, outer_v6 ? kEtherTypeIpv6 : kEtherTypeIpv4);
  uint8_t* o = f + kEthernetHeaderLen;
  const size_t after_ip = (gre ? kGreHeaderLen : 0) + ip_len;  // outer IP payload
  if (outer_v6) {
    Store32(o, 6u << 28 | uint32_t{tos} << 20 | static_cast<uint32_t>(flow_hash & 0xFFFFF));
    Store16(o + 4, static_cast<uint16_t>(after_ip));
    o[6] = outer_proto;
    o[7] = config.ttl;
    std::memcpy(o + 8, base->bytes.data(), 8);
    const uint64_t m = LowMask64(config.flow_bits_v6);
    Store64(o + 16, (Load64(base->bytes.data() + 8) & ~m) | (flow_hash & m));
    std::memcpy(o + 24, target.backend.bytes.data(), 16);
  } else {
    const uint32_t m = LowMask32(config.flow_bits_v4);
    const uint32_t src = (wire::Load32(base->bytes.data()) & ~m) | (static_cast<uint32_t>(flow_hash) & m);
    const uint32_t dst = wire::Load32(target.backend.bytes.data());
    const uint16_t total = static_cast<uint16_t>(kIpv4HeaderLen + after_ip);
    o[0] = 0x45;
    o[1] = tos;
    Store16(o + 2, total);
    Store16(o + 4, 0);       // identification: atomic datagram (RFC 6864)
    Store16(o + 6, 0x4000);  // DF
    o[8] = config.ttl;
    o[9] = outer_proto;
    if constexpr (kNicIpv4Checksum) {
      // 0, as DPDK's rte_net_intel_cksum_prepare leaves it for the NIC.
      Store16(o + 10, 0);
      r.tx_offload = kTxOffloadOuterIpv4Checksum;
    } else {
      // From the field values, not by reading back the bytes just written
      // (store forwarding again).
      const uint32_t sum = (0x4500u | tos) + total + 0x4000u + (uint32_t{config.ttl} << 8 | outer_proto) +
                           (src >> 16) + (src & 0xFFFF) + (dst >> 16) + (dst & 0xFFFF);
      Store16(o + 10, ChecksumFinish(sum));
    }
    Store32(o + 12, src);
    Store32(o + 16, dst);
  }
  if (gre) {
    uint8_t* g = o + (outer_v6 ? kIpv6HeaderLen : kIpv4HeaderLen);
    Store16(g, 0);  // no checksum, no key, no sequence, version 0
    Store16(g + 2, inner_ethertype);
  }
  r.status = EncapStatus::kOk;
  r.offset = -static_cast<int32_t>(prepend);
  r.length = static_cast<uint32_t>(prepend + ip_len);
  return r;
}

}  // namespace

Ipv4EncapTemplate Ipv4EncapTemplate::Of(const EncapTarget& target, const EncapConfig& config) {
  Ipv4EncapTemplate t;
  if (target.forwarding == Forwarding::kL2Dsr || target.backend.is_v6 || !config.source_v4.has_value() ||
      config.source_v4->is_v6) {
    return t;
  }
  // As EncapsulateAs writes them, for an IPv4 inner packet.
  const bool gre = target.forwarding == Forwarding::kGre;
  const size_t overhead = EncapOverhead(target.forwarding, false);
  const size_t limit = std::min<size_t>(config.mtu, 65535);
  // An MTU that no IPv4 packet fits: every packet is Forward's (kMtuExceeded).
  if (limit < overhead + kIpv4HeaderLen) return t;
  t.max_ip_len = static_cast<uint16_t>(limit - overhead);
  t.prepend = static_cast<uint8_t>(kEthernetHeaderLen + overhead);
  t.source_flow_mask = LowMask32(config.flow_bits_v4);
  t.source = wire::Load32(config.source_v4->bytes.data()) & ~t.source_flow_mask;
  const uint32_t dst = wire::Load32(target.backend.bytes.data());

  uint8_t* f = t.bytes + kCopy - t.prepend;
  WriteEthernet(f, target.next_hop_mac, config.src_mac, kEtherTypeIpv4);
  uint8_t* o = f + kEthernetHeaderLen;
  o[0] = 0x45;
  Store16(o + 6, 0x4000);  // DF; identification 0; tos, length, checksum 0
  o[8] = config.ttl;
  o[9] = gre ? kIpProtoGre : kIpProtoIpip;
  Store32(o + 12, t.source);
  Store32(o + 16, dst);
  if (gre) {
    Store16(o + kIpv4HeaderLen + 2, kEtherTypeIpv4);
    t.family_word_at = static_cast<uint8_t>(kEthernetHeaderLen + kIpv4HeaderLen + 2);
    t.family_word[0] = kEtherTypeIpv4;
    t.family_word[1] = kEtherTypeIpv6;
  } else {
    t.family_word_at = static_cast<uint8_t>(kEthernetHeaderLen + 8);
    t.family_word[0] = static_cast<uint16_t>(uint32_t{config.ttl} << 8 | kIpProtoIpip);
    t.family_word[1] = static_cast<uint16_t>(uint32_t{config.ttl} << 8 | kIpProtoIpv6);
  }
  const uint32_t fixed = 0x4500u + 0x4000u + (t.source >> 16) + (t.source & 0xFFFF) + (dst >> 16) + (dst & 0xFFFF);
  for (size_t family = 0; family < 2; ++family) {
    // The TTL/protocol word: IPIP's is the family word, GRE's is the same for both.
    const uint32_t ttl_proto = gre ? (uint32_t{config.ttl} << 8 | kIpProtoGre) : t.family_word[family];
    t.checksum_base[family] = fixed + ttl_proto;
  }
  return t;
}

template <bool kNicIpv4Checksum>
EncapResult ForwardAs(uint8_t* frame, size_t frame_len, size_t headroom, const ParsedPacket& p,
                      const EncapTarget& target, const EncapConfig& config, uint64_t flow_hash) {
  EncapResult r;
  if (p.ip_version == 0 || size_t{p.l3_offset} + p.l3_len > frame_len) return r;
  uint8_t* ip = frame + p.l3_offset;
  if (target.forwarding != Forwarding::kL2Dsr) {
    r = EncapsulateAs<kNicIpv4Checksum>(ip, p.l3_len, headroom + p.l3_offset, target, config, flow_hash);
    if (r.status == EncapStatus::kOk) r.offset += p.l3_offset;
    return r;
  }
  // L2 direct server return: the IP packet leaves as it came.
  r.usable_mtu = config.mtu;
  if (p.l3_len > config.mtu) {
    const bool df = p.ip_version == 6 || (ip[6] & 0x40) != 0;
    r.status = df ? EncapStatus::kMtuExceeded : EncapStatus::kFragmentInner;
    return r;
  }
  std::memcpy(frame, target.next_hop_mac.bytes.data(), 6);
  std::memcpy(frame + 6, config.src_mac.bytes.data(), 6);
  r.status = EncapStatus::kOk;
  r.offset = 0;
  r.length = static_cast<uint32_t>(frame_len);
  return r;
}

template EncapResult ForwardAs<false>(uint8_t*, size_t, size_t, const ParsedPacket&, const EncapTarget&,
                                      const EncapConfig&, uint64_t);
template EncapResult ForwardAs<true>(uint8_t*, size_t, size_t, const ParsedPacket&, const EncapTarget&,
                                     const EncapConfig&, uint64_t);

EncapResult Encapsulate(uint8_t* ip, size_t ip_len, size_t room_before, const EncapTarget& target,
                        const EncapConfig& config, uint64_t flow_hash, bool nic_ipv4_checksum) {
  return nic_ipv4_checksum ? EncapsulateAs<true>(ip, ip_len, room_before, target, config, flow_hash)
                           : EncapsulateAs<false>(ip, ip_len, room_before, target, config, flow_hash);
}

uint8_t* WriteL2DsrHeader(uint8_t* ip, const uint8_t* frame, size_t l3_offset,
                          const EncapTarget& target, const EncapConfig& config) {
  uint8_t* eth = ip - l3_offset;
  std::memmove(eth, frame, l3_offset);  // tags and ethertype as they came
  std::memcpy(eth, target.next_hop_mac.bytes.data(), 6);
  std::memcpy(eth + 6, config.src_mac.bytes.data(), 6);
  return eth;
}

size_t Ipv4FragmentCount(const uint8_t* ip, size_t ip_len, size_t max_ip_len) {
  FragmentPlan plan;
  return PlanFragments(ip, ip_len, max_ip_len, &plan) ? plan.count : 0;
}

size_t WriteIpv4Fragment(const uint8_t* ip, size_t ip_len, size_t max_ip_len, size_t index,
                         uint8_t* out, size_t out_cap) {
  FragmentPlan plan;
  if (!PlanFragments(ip, ip_len, max_ip_len, &plan) || index >= plan.count) return 0;
  if (plan.count == 1) {
    if (out_cap < ip_len) return 0;
    std::memcpy(out, ip, ip_len);
    return ip_len;
  }
  size_t hlen;
  size_t data_start;
  size_t data_len;
  if (index == 0) {
    hlen = plan.ihl;
    data_start = 0;
    data_len = plan.first_data;
  } else {
    hlen = plan.later_hlen;
    data_start = plan.first_data + (index - 1) * plan.later_data;
    data_len = std::min(plan.later_data, plan.payload - data_start);
  }
  const size_t total = hlen + data_len;
  if (out_cap < total) return 0;
  std::memcpy(out, ip, kIpv4HeaderLen);
  if (index == 0) {
    std::memcpy(out + kIpv4HeaderLen, ip + kIpv4HeaderLen, plan.ihl - kIpv4HeaderLen);
  } else {
    std::memcpy(out + kIpv4HeaderLen, plan.later_options, hlen - kIpv4HeaderLen);
  }
  const uint16_t frag = Load16(ip + 6);
  const size_t base_offset = size_t{frag & 0x1FFFu} * 8;  // the input may be a fragment itself
  const bool last = data_start + data_len == plan.payload;
  const bool more = !last || (frag & 0x2000) != 0;
  out[0] = static_cast<uint8_t>(0x40 | hlen / 4);
  Store16(out + 2, static_cast<uint16_t>(total));
  Store16(out + 6, static_cast<uint16_t>((more ? 0x2000 : 0) | (((base_offset + data_start) / 8) & 0x1FFF)));
  Store16(out + 10, 0);
  Store16(out + 10, InternetChecksum(out, hlen));
  std::memcpy(out + hlen, ip + plan.ihl + data_start, data_len);
  return total;
}

}  // namespace maglb
