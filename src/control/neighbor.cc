#include "neighbor.h"  // bare: the unit test compiles this file without -Isrc

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "maglb/checksum.h"
#include "maglb/protocol_numbers.h"
#include "maglb/reply.h"

namespace maglb {

std::vector<IpAddress> WantedNeighbors(const Config& config) {
  std::vector<IpAddress> out;
  auto add = [&](const IpAddress& a) {
    for (const NeighborConfig& n : config.neighbors) {
      if (n.address == a) return;
    }
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  };
  for (const VipConfig& vip : config.vips) {
    for (const BackendConfig& b : vip.backends) {
      if (vip.forwarding == Forwarding::kL2Dsr) {
        add(b.address);
        continue;
      }
      const std::optional<IpAddress>& gw = b.address.is_v6 ? config.lb.gateway_v6 : config.lb.gateway_v4;
      add(gw ? *gw : b.address);
    }
  }
  return out;
}

void NeighborTable::SetWanted(std::vector<IpAddress> wanted) {
  std::map<IpAddress, Entry, IpAddressLess> next;
  for (const IpAddress& a : wanted) {
    auto it = entries_.find(a);
    next[a] = it != entries_.end() ? it->second : Entry{};
  }
  entries_ = std::move(next);
}

namespace {

constexpr std::string_view kIgnoreNames[] = {
#define MAGLB_NEIGHBOR_IGNORE_NAME(name, str, why) str,
    MAGLB_FOREACH_NEIGHBOR_IGNORE(MAGLB_NEIGHBOR_IGNORE_NAME)
#undef MAGLB_NEIGHBOR_IGNORE_NAME
};
constexpr std::string_view kIgnoreWhy[] = {
#define MAGLB_NEIGHBOR_IGNORE_WHY(name, str, why) why,
    MAGLB_FOREACH_NEIGHBOR_IGNORE(MAGLB_NEIGHBOR_IGNORE_WHY)
#undef MAGLB_NEIGHBOR_IGNORE_WHY
};
static_assert(std::size(kIgnoreNames) == kNumNeighborIgnores);

constexpr uint8_t kNaSolicited = 0x40;  // RFC 4861 4.4 flags byte
constexpr uint8_t kNaOverride = 0x20;

// Bit 0 of the first octet: group (multicast; broadcast is all ones).
bool UsableMac(const MacAddress& m) {
  return (m.bytes[0] & 1) == 0 && m != MacAddress{};
}

}  // namespace

std::string_view NeighborIgnoreName(NeighborIgnore r) {
  const size_t i = static_cast<size_t>(r);
  return i < kNumNeighborIgnores ? kIgnoreNames[i] : std::string_view("unknown");
}

std::optional<NeighborClaim> ReadNeighborClaim(std::span<const uint8_t> frame, const ParsedPacket& p) {
  if (frame.size() < 14) return std::nullopt;
  const bool arp_reply = p.ethertype == kEtherTypeArp && p.arp_op == kArpReply;
  const bool advert = p.ip_version == 6 && p.l4_protocol == kIpProtoIcmpv6 &&
                      p.icmp_type == kIcmpv6NeighborAdvertisement &&
                      p.ttl == 255;  // RFC 4861 7.1.2, as Classify checks
  if (!arp_reply && !advert) return std::nullopt;
  std::optional<NeighborInfo> info = ExtractNeighbor(frame, p);
  if (!info) return std::nullopt;  // no link-layer address: nothing to learn
  NeighborClaim c;
  c.address = info->address;
  c.mac = info->mac;
  std::memcpy(c.eth_source.bytes.data(), frame.data() + 6, 6);
  if (advert) {
    const uint8_t flags = frame[p.l4_offset + 4];  // ExtractNeighbor checked the length
    c.is_nd = true;
    c.solicited = (flags & kNaSolicited) != 0;
    c.override_flag = (flags & kNaOverride) != 0;
    c.to_multicast = frame[p.l3_offset + 24] == 0xFF;
  }
  return c;
}

void NeighborTable::SetConfig(const Config& config) {
  static_.clear();
  for (const NeighborConfig& n : config.neighbors) static_.insert(n.address);
  SetWanted(WantedNeighbors(config));
}

NeighborOutcome NeighborTable::Ignore(const NeighborClaim& claim, NeighborIgnore why,
                                      uint64_t now_ns, std::string_view detail) {
  const size_t i = static_cast<size_t>(why);
  ++ignored_[i];
  NeighborOutcome out;
  out.ignored = why;
  if (logged_once_[i] && now_ns - last_log_ns_[i] < kNeighborLogIntervalNs) {
    ++unlogged_[i];
    return out;
  }
  const bool unasked = why == NeighborIgnore::kNotAsked || why == NeighborIgnore::kUnsolicited;
  const char* what = !claim.is_nd       ? (unasked ? "unsolicited ARP reply" : "ARP reply")
                     : claim.solicited ? "neighbour advertisement (S set)"
                                       : "unsolicited neighbour advertisement";
  out.log = absl::StrFormat(
      "neighbor %s: ignored %s from %s%s: %s (neighbor_ignored_%s)%s", claim.address.ToString(),
      what, claim.eth_source.ToString(),
      claim.mac != claim.eth_source ? absl::StrFormat(" claiming %s", claim.mac.ToString()) : "",
      detail.empty() ? kIgnoreWhy[i] : detail, kIgnoreNames[i],
      unlogged_[i] != 0 ? absl::StrFormat("; %u more since the last line of this kind",
                                          unlogged_[i])
                        : "");
  logged_once_[i] = true;
  last_log_ns_[i] = now_ns;
  unlogged_[i] = 0;
  return out;
}

// `other` by value: it may name e.mac, which this resets.
NeighborOutcome NeighborTable::Conflict(const NeighborClaim& claim, Entry& e, MacAddress other,
                                        uint64_t now_ns) {
  // Two hosts answer for one address: at least one lies, and the LB cannot
  // tell which; the MAC it had before this request is the safer bet (a
  // forger must not win by answering faster). A change made by this request
  // is undone when the MAC it replaced answers too; a third MAC does not
  // undo it (it answered neither of the two requests alone). A resolution
  // made by this request had nothing before it: it is undone by any second
  // MAC, and the address stays unresolved (the data plane drops rather than
  // send to either) until one MAC answers a window alone (`contested`).
  bool reverted = false;
  if (e.changed_by_last && (!e.previous || e.previous == claim.mac)) {
    e.mac = e.previous;
    e.changed_by_last = false;
    reverted = true;
    if (!e.mac) e.contested = true;
  }
  if (e.mac && claim.mac == *e.mac) e.learned_ns = now_ns;  // the kept MAC answered: confirmed
  e.conflict = true;
  e.candidate.reset();
  NeighborOutcome out = Ignore(
      claim, NeighborIgnore::kConflict, now_ns,
      e.mac ? absl::StrFormat("%s answered the same request; kept %s", other.ToString(), e.mac->ToString())
            : absl::StrFormat("%s answered the same request; unresolved (dropped) until one MAC "
                              "alone answers a request and the next one",
                              other.ToString()));
  out.changed = reverted;
  return out;
}

NeighborOutcome NeighborTable::Observe(const NeighborClaim& claim, uint64_t now_ns) {
  // What the frame itself gets wrong, whoever it names.
  if (!UsableMac(claim.mac) || !UsableMac(claim.eth_source)) {
    return Ignore(claim, NeighborIgnore::kBadMac, now_ns);
  }
  // A host answers for itself from its own MAC, and so does a proxy (RFC 4861
  // 7.2.8, proxy ARP): a frame naming a MAC it was not sent from is a third
  // party pointing the LB at someone else, which is what a forger does.
  if (claim.mac != claim.eth_source) return Ignore(claim, NeighborIgnore::kMacMismatch, now_ns);
  // RFC 4861 7.1.2: an advertisement to a multicast group has S clear.
  if (claim.is_nd && claim.solicited && claim.to_multicast) {
    return Ignore(claim, NeighborIgnore::kBadFlags, now_ns);
  }
  if (static_.count(claim.address) != 0) return Ignore(claim, NeighborIgnore::kStatic, now_ns);
  auto it = entries_.find(claim.address);
  if (it == entries_.end()) return Ignore(claim, NeighborIgnore::kNotAsked, now_ns);
  Entry& e = it->second;
  // An answer: within the window of the LB's last request; for ND, only an
  // advertisement that says it answers a solicitation (S set, RFC 4861
  // 7.2.4) -- stricter than 7.2.5, which lets an unsolicited one fill an
  // INCOMPLETE entry: the real neighbour answers our solicitation anyway.
  // The window stays open after the first answer, so that a second host
  // answering the same request shows up as a conflict.
  const bool answer = e.asked && now_ns - e.asked_ns < kNeighborAnswerWindowNs &&
                      (!claim.is_nd || claim.solicited);
  NeighborOutcome out;
  if (!e.mac) {
    if (!answer) return Ignore(claim, NeighborIgnore::kNotAsked, now_ns);
    // RFC 4861 7.2.5: the O flag does not matter for an INCOMPLETE entry.
    if (e.first_answer) {  // this window had an answer already
      if (*e.first_answer == claim.mac) return out;  // the same MAC again
      return Conflict(claim, e, *e.first_answer, now_ns);
    }
    e.first_answer = claim.mac;
    // Never disputed: the first answer resolves at once (start-up is not
    // delayed), undone by Conflict if another MAC answers this window.
    // Disputed before: only a MAC that answered a whole window alone and
    // then answers the next request, as for a change of a known MAC below.
    if (!e.contested || (e.candidate == claim.mac && e.candidate_asked_ns != e.asked_ns)) {
      e.Adopt(claim.mac, std::nullopt, now_ns);
      out.changed = true;
      return out;
    }
    e.candidate = claim.mac;
    e.candidate_asked_ns = e.asked_ns;
    return Ignore(claim, NeighborIgnore::kUnconfirmed, now_ns);
  }
  // A second MAC in the window whose first answer resolved the address
  // undoes that, whatever its flags.
  if (answer && e.changed_by_last && !e.previous && claim.mac != *e.mac) {
    return Conflict(claim, e, *e.mac, now_ns);
  }
  // RFC 4861 7.2.5: without the O flag an advertisement does not replace a
  // known link-layer address (the entry goes STALE and gets probed: here,
  // asked again).
  if (*e.mac != claim.mac && !claim.override_flag) {
    e.recheck = true;
    return Ignore(claim, NeighborIgnore::kNoOverride, now_ns);
  }
  if (!answer) {
    if (*e.mac == claim.mac) return out;  // harmless
    // One frame never moves a known next hop: the LB asks, and the answers
    // decide (below).
    e.recheck = true;
    return Ignore(claim, NeighborIgnore::kUnsolicited, now_ns);
  }
  if (e.conflict && *e.mac == claim.mac) {  // the window already had two MACs: the kept one again
    e.learned_ns = now_ns;
    return out;
  }
  if (e.first_answer && *e.first_answer != claim.mac) {
    return Conflict(claim, e, *e.first_answer, now_ns);
  }
  if (e.conflict) return Conflict(claim, e, *e.mac, now_ns);
  e.first_answer = claim.mac;
  if (*e.mac == claim.mac) {  // a confirmation
    e.learned_ns = now_ns;
    e.recheck = false;
    e.candidate.reset();  // the known MAC answers again
    return out;
  }
  // Another MAC answers alone. Taken only if it already answered the
  // previous request's whole window alone (a host that changed its MAC, e.g.
  // a VRRP failover); otherwise remembered, and the LB asks again once this
  // window has closed.
  if (e.candidate == claim.mac && e.candidate_asked_ns != e.asked_ns) {
    e.Adopt(claim.mac, e.mac, now_ns);
    out.changed = true;
    return out;
  }
  e.candidate = claim.mac;
  e.candidate_asked_ns = e.asked_ns;
  e.recheck = true;
  return Ignore(claim, NeighborIgnore::kUnconfirmed, now_ns);
}

std::optional<MacAddress> NeighborTable::Lookup(const IpAddress& address) const {
  auto it = entries_.find(address);
  if (it == entries_.end()) return std::nullopt;
  return it->second.mac;
}

std::vector<IpAddress> NeighborTable::DueRequests(uint64_t now_ns) {
  std::vector<IpAddress> due;
  for (auto& [address, e] : entries_) {
    // A candidate's confirming request waits for the window that proposed it
    // to close, so that a late answer from the known MAC still counts there;
    // so does the next request after a change, which a second MAC answering
    // that window must still be able to undo, and every request for a
    // disputed address (whose answers count only per whole window).
    const uint64_t gap =
        e.candidate || e.changed_by_last || e.contested ? kNeighborAnswerWindowNs : kNeighborRetryNs;
    const bool unresolved_due = !e.mac && (!e.asked || now_ns - e.asked_ns >= gap);
    const bool refresh_due = e.mac && (e.recheck || now_ns - e.learned_ns >= kNeighborRefreshNs) &&
                             now_ns - e.asked_ns >= gap;
    if (unresolved_due || refresh_due) {
      // A candidate from before the last request that did not answer it is stale.
      if (e.candidate && e.candidate_asked_ns != e.asked_ns) e.candidate.reset();
      e.asked = true;
      e.recheck = false;
      e.asked_ns = now_ns;
      e.first_answer.reset();
      e.conflict = false;
      e.changed_by_last = false;
      e.previous.reset();
      due.push_back(address);
    }
  }
  return due;
}

size_t NeighborTable::resolved() const {
  return std::count_if(entries_.begin(), entries_.end(),
                       [](const auto& kv) { return kv.second.mac.has_value(); });
}

namespace {

void Put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}

}  // namespace

size_t BuildArpRequest(const MacAddress& our_mac, const IpAddress& our_ip,
                       const IpAddress& target, std::span<uint8_t> out) {
  if (out.size() < kArpRequestLen || our_ip.is_v6 || target.is_v6) return 0;
  uint8_t* p = out.data();
  std::memset(p, 0, kArpRequestLen);
  std::memset(p, 0xFF, 6);
  std::memcpy(p + 6, our_mac.bytes.data(), 6);
  Put16(p + 12, kEtherTypeArp);
  uint8_t* a = p + 14;
  Put16(a, kArpHardwareEthernet);
  Put16(a + 2, kEtherTypeIpv4);
  a[4] = 6;
  a[5] = 4;
  Put16(a + 6, kArpRequest);
  std::memcpy(a + 8, our_mac.bytes.data(), 6);
  std::memcpy(a + 14, our_ip.bytes.data(), 4);
  // target MAC stays zero
  std::memcpy(a + 24, target.bytes.data(), 4);
  return kArpRequestLen;
}

size_t BuildNeighborSolicit(const MacAddress& our_mac, const IpAddress& our_ip,
                            const IpAddress& target, std::span<uint8_t> out) {
  if (out.size() < kNeighborSolicitLen || !our_ip.is_v6 || !target.is_v6) return 0;
  uint8_t* p = out.data();
  std::memset(p, 0, kNeighborSolicitLen);
  // Solicited-node multicast: ff02::1:ffXX:XXXX, MAC 33:33:ff:XX:XX:XX.
  uint8_t dst_ip[16] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff,
                        target.bytes[13], target.bytes[14], target.bytes[15]};
  uint8_t dst_mac[6] = {0x33, 0x33, 0xff, target.bytes[13], target.bytes[14], target.bytes[15]};
  std::memcpy(p, dst_mac, 6);
  std::memcpy(p + 6, our_mac.bytes.data(), 6);
  Put16(p + 12, kEtherTypeIpv6);
  uint8_t* ip = p + 14;
  ip[0] = 0x60;
  Put16(ip + 4, 32);  // payload: ICMPv6 NS (24) + source link-layer option (8)
  ip[6] = kIpProtoIcmpv6;
  ip[7] = 255;
  std::memcpy(ip + 8, our_ip.bytes.data(), 16);
  std::memcpy(ip + 24, dst_ip, 16);
  uint8_t* icmp = ip + 40;
  icmp[0] = kIcmpv6NeighborSolicitation;
  std::memcpy(icmp + 8, target.bytes.data(), 16);
  icmp[24] = kNdOptSourceLinkAddress;  // 1 x 8 bytes
  icmp[25] = 1;
  std::memcpy(icmp + 26, our_mac.bytes.data(), 6);
  uint32_t sum = Ipv6PseudoHeaderSum(ip + 8, ip + 24, 32, kIpProtoIcmpv6);
  Put16(icmp + 2, ChecksumFinish(ChecksumPartial(icmp, 32, sum)));
  return kNeighborSolicitLen;
}

}  // namespace maglb
