// The control plane's neighbour table: which next hops the data plane needs
// (the gateways of encapsulated VIPs, the backends of L2-DSR VIPs), what ARP /
// neighbour discovery learned about them, and the requests that resolve them.
// The workers never read this table: the control thread folds it into the
// next LbState snapshot (LbState::WithNeighbors) and publishes that.
#ifndef MAGLB_CONTROL_NEIGHBOR_H_
#define MAGLB_CONTROL_NEIGHBOR_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "maglb/config.h"
#include "maglb/ip_address.h"

namespace maglb {

/// How often an unresolved next hop is asked for, and how often a resolved
/// one is refreshed (its MAC may change).
inline constexpr uint64_t kNeighborRetryNs = 1'000'000'000;
inline constexpr uint64_t kNeighborRefreshNs = 30'000'000'000;

/// Addresses whose MACs forwarding needs under `config` and that no static
/// [[neighbor]] entry gives.
std::vector<IpAddress> WantedNeighbors(const Config& config);

struct IpAddressLess {
  bool operator()(const IpAddress& a, const IpAddress& b) const {
    return a.is_v6 != b.is_v6 ? a.is_v6 < b.is_v6 : a.bytes < b.bytes;
  }
};

class NeighborTable {
 public:
  /// Replaces the set of addresses to resolve (after a reload); keeps what is
  /// known about the ones that stay.
  void SetWanted(std::vector<IpAddress> wanted);

  /// Records what a frame stated. Returns true if a wanted address's MAC is
  /// new or changed (the snapshot must be republished).
  bool Learn(const IpAddress& address, const MacAddress& mac, uint64_t now_ns);

  std::optional<MacAddress> Lookup(const IpAddress& address) const;

  /// The wanted addresses that should be asked for now (unresolved and not
  /// asked within kNeighborRetryNs, or resolved longer than
  /// kNeighborRefreshNs ago); marks them asked.
  std::vector<IpAddress> DueRequests(uint64_t now_ns);

  size_t wanted() const { return entries_.size(); }
  size_t resolved() const;

 private:
  struct Entry {
    std::optional<MacAddress> mac;
    uint64_t learned_ns = 0;
    uint64_t asked_ns = 0;
    bool asked = false;
  };
  std::map<IpAddress, Entry, IpAddressLess> entries_;
};

/// Builds a broadcast ARP request "who has `target`? tell `our_ip`" into
/// `out` (at least kArpRequestLen bytes). Returns its length or 0.
inline constexpr size_t kArpRequestLen = 60;  // padded to the Ethernet minimum
size_t BuildArpRequest(const MacAddress& our_mac, const IpAddress& our_ip,
                       const IpAddress& target, std::span<uint8_t> out);

/// Builds a neighbour solicitation for `target` to its solicited-node
/// multicast address (RFC 4861 7.2.2) into `out`. Returns its length or 0.
inline constexpr size_t kNeighborSolicitLen = 14 + 40 + 32;
size_t BuildNeighborSolicit(const MacAddress& our_mac, const IpAddress& our_ip,
                            const IpAddress& target, std::span<uint8_t> out);

}  // namespace maglb

#endif  // MAGLB_CONTROL_NEIGHBOR_H_
