// [announce]: which VIPs a BGP daemon beside maglb announces. maglb writes one
// route per announced VIP address (/32, /128) into a dedicated kernel routing
// table, on the kernel interface ([kernel] interface), and deletes it to
// withdraw; the daemon learns that table and exports it (BIRD: protocol kernel
// { kernel table N; learn; }). Without the section, maglb announces nothing.
#ifndef MAGLB_ANNOUNCE_CONFIG_H_
#define MAGLB_ANNOUNCE_CONFIG_H_

#include <cstdint>

namespace maglb {

/// rtm_protocol of maglb's routes, unless set: 249 is unassigned in
/// /etc/iproute2/rt_protos, so no other routing software claims it.
inline constexpr uint8_t kDefaultAnnounceRouteProtocol = 249;
inline constexpr uint32_t kDefaultAnnounceIntervalMs = 100;
inline constexpr uint32_t kDefaultAnnounceStallMs = 1000;
inline constexpr uint32_t kDefaultAnnounceDrainS = 10;

struct AnnounceConfig {
  /// Kernel routing table of the VIP routes (not 253 default, 254 main, 255
  /// local); 0: announcing off (no [announce] section).
  uint32_t table = 0;
  /// rtm_protocol of maglb's routes (5..255, not 12: BIRD's own); maglb
  /// flushes the routes of this protocol in `table` at start.
  uint8_t route_protocol = kDefaultAnnounceRouteProtocol;
  /// How often maglb re-evaluates what it announces.
  uint32_t interval_ms = kDefaultAnnounceIntervalMs;
  /// Workers that pass no quiescent point for this long: every VIP withdrawn.
  /// At least 2 x interval_ms, since the check samples once per interval.
  uint32_t stall_ms = kDefaultAnnounceStallMs;
  /// Drain / SIGTERM: withdraw, keep forwarding this long, then exit.
  uint32_t drain_s = kDefaultAnnounceDrainS;
  int line = 0;

  bool enabled() const { return table != 0; }
  bool operator==(const AnnounceConfig&) const = default;
};

}  // namespace maglb

#endif  // MAGLB_ANNOUNCE_CONFIG_H_
