#include "neighbor.h"  // bare: the unit test compiles this file without -Isrc

#include <algorithm>
#include <cstring>

#include "maglb/checksum.h"

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

bool NeighborTable::Learn(const IpAddress& address, const MacAddress& mac, uint64_t now_ns) {
  auto it = entries_.find(address);
  if (it == entries_.end()) return false;
  bool changed = !it->second.mac || *it->second.mac != mac;
  it->second.mac = mac;
  it->second.learned_ns = now_ns;
  return changed;
}

std::optional<MacAddress> NeighborTable::Lookup(const IpAddress& address) const {
  auto it = entries_.find(address);
  if (it == entries_.end()) return std::nullopt;
  return it->second.mac;
}

std::vector<IpAddress> NeighborTable::DueRequests(uint64_t now_ns) {
  std::vector<IpAddress> due;
  for (auto& [address, e] : entries_) {
    bool unresolved_due = !e.mac && (!e.asked || now_ns - e.asked_ns >= kNeighborRetryNs);
    bool refresh_due = e.mac && now_ns - e.learned_ns >= kNeighborRefreshNs &&
                       now_ns - e.asked_ns >= kNeighborRetryNs;
    if (unresolved_due || refresh_due) {
      e.asked = true;
      e.asked_ns = now_ns;
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
  Put16(p + 12, 0x0806);
  uint8_t* a = p + 14;
  Put16(a, 1);        // hardware: Ethernet
  Put16(a + 2, 0x0800);
  a[4] = 6;
  a[5] = 4;
  Put16(a + 6, 1);    // request
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
  Put16(p + 12, 0x86DD);
  uint8_t* ip = p + 14;
  ip[0] = 0x60;
  Put16(ip + 4, 32);  // payload: ICMPv6 NS (24) + source link-layer option (8)
  ip[6] = 58;
  ip[7] = 255;
  std::memcpy(ip + 8, our_ip.bytes.data(), 16);
  std::memcpy(ip + 24, dst_ip, 16);
  uint8_t* icmp = ip + 40;
  icmp[0] = 135;
  std::memcpy(icmp + 8, target.bytes.data(), 16);
  icmp[24] = 1;  // source link-layer address option, 1 x 8 bytes
  icmp[25] = 1;
  std::memcpy(icmp + 26, our_mac.bytes.data(), 6);
  uint32_t sum = Ipv6PseudoHeaderSum(ip + 8, ip + 24, 32, 58);
  Put16(icmp + 2, ChecksumFinish(ChecksumPartial(icmp, 32, sum)));
  return kNeighborSolicitLen;
}

}  // namespace maglb
