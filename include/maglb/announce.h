// What maglb asks its routing daemon to announce (README "Fleet"): one host
// route per VIP address, while this instance can forward (its tables are
// published, its workers pass their quiescent points, it is not draining)
// and some VIP on that address has a backend that can take a new flow.
// Every instance of a fleet decides alone, from its own state: the router
// stops sending a VIP to an instance that cannot serve it.
#ifndef MAGLB_ANNOUNCE_H_
#define MAGLB_ANNOUNCE_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "maglb/ip_address.h"
#include "maglb/lb_state.h"

namespace maglb {

struct AnnounceReadiness {
  /// Every worker passed a quiescent point within [announce] stall_ms, at
  /// least once since the start.
  bool workers_live = false;
  /// Withdrawing for a drain or a shutdown; `why` goes into the reason.
  bool draining = false;
  std::string why_not_live;  ///< "workers stalled for 1200 ms", "starting"
  std::string drain_reason;  ///< "drain (SIGUSR1)"
  /// A backend whose health check has given no verdict yet (at start a
  /// checked backend is up until `fall` failures): it does not count as
  /// serving, so that a restarted instance does not announce a table with a
  /// backend the others already have down. Empty: none pending.
  std::function<bool(std::string_view vip, std::string_view backend)> first_check_pending;
};

struct AddressAnnouncement {
  IpAddress address;
  bool announce = false;
  /// For the log line of a change and for telemetry: "web-gre: 3 of 3
  /// backends serving", "draining on SIGTERM", "no serving backend
  /// (web-gre: be1 down, be2 next hop unresolved)".
  std::string reason;
  std::vector<std::string> vips;  ///< the VIPs on the address, in config order

  /// "10.100.0.1/32", "fd00:100::1/128"
  std::string Prefix() const;
  uint8_t prefix_len() const { return address.is_v6 ? 128 : 32; }
};

/// Why a backend does not take new flows ("down", "weight 0", "next hop
/// unresolved"), or "" when it does: in the table (weight > 0), its next hop
/// resolved, not down by its health check.
std::string WhyNotServing(const BackendState& backend);

/// One entry per distinct VIP address of `state`, in the order the addresses
/// first appear. An address is announced when `readiness` allows and at
/// least one of its VIPs (any protocol or port) has a serving backend: a
/// route cannot tell TCP/80 from UDP/53, and withdrawing it for one of them
/// would take the others down too.
std::vector<AddressAnnouncement> DecideAnnouncements(const LbState& state,
                                                     const AnnounceReadiness& readiness);

}  // namespace maglb

#endif  // MAGLB_ANNOUNCE_H_
