// Health-check and kernel-interface settings of the config ([[health_check]],
// a VIP's health keys, [health], [kernel]), without the rest of the model.
// README "Health checks" says how they act.
#ifndef MAGLB_HEALTH_CONFIG_H_
#define MAGLB_HEALTH_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>

namespace maglb {

enum class HealthCheckType : uint8_t {
  /// Not checked: health "unchecked", always serving. Only a [[health_check]]
  /// (Config::health_checks) holds it: a VIP whose check is type = "none" gets
  /// no check at all (VipConfig::health_check unset).
  kNone,
  kTcp,   ///< a TCP connect that completes
  kHttp,  ///< GET path: expected status (and body substring, if set)
  kUdp,   ///< send a payload: any reply, or the expected one
};

/// How a probe reaches a backend.
enum class HealthCheckVia : uint8_t {
  kDirect,  ///< to the backend's own address, from the LB's, over the kernel interface
  kTunnel,  ///< to the VIP, encapsulated toward that backend exactly like its data traffic
};

inline constexpr uint32_t kDefaultCheckIntervalMs = 2000;
inline constexpr uint32_t kDefaultCheckTimeoutMs = 1000;
inline constexpr uint32_t kDefaultCheckRise = 2;
inline constexpr uint32_t kDefaultCheckFall = 3;
inline constexpr uint32_t kDefaultCheckJitterPercent = 10;
inline constexpr uint16_t kDefaultHttpStatus = 200;
/// Bytes of an HTTP reply a probe reads at most (status line, headers, body).
inline constexpr uint32_t kMaxHttpProbeReplyBytes = 64 * 1024;
inline constexpr uint32_t kMaxUdpProbePayloadBytes = 1024;
/// [[health_check]] entries a config may declare (one per VIP, and more).
inline constexpr uint32_t kMaxHealthChecks = 4096;

/// One check: a [[health_check]] (named, shared by VIPs) or a VIP's inline
/// [vip.health_check] (name "").
struct HealthCheckConfig {
  std::string name;
  HealthCheckType type = HealthCheckType::kNone;
  HealthCheckVia via = HealthCheckVia::kDirect;
  uint16_t port = 0;  ///< 0: the VIP's port (a VIP on every port must set one)
  uint32_t interval_ms = kDefaultCheckIntervalMs;
  uint32_t timeout_ms = kDefaultCheckTimeoutMs;  ///< < interval_ms
  uint32_t rise = kDefaultCheckRise;  ///< consecutive successes: down -> up
  uint32_t fall = kDefaultCheckFall;  ///< consecutive failures: up -> down
  /// Each interval is drawn within +- this percentage, so the checks of many
  /// backends spread out instead of going in lockstep.
  uint32_t jitter_percent = kDefaultCheckJitterPercent;
  // http
  std::string http_path = "/";
  uint16_t http_status = kDefaultHttpStatus;
  std::string http_body_contains;  ///< empty: the body is not looked at
  std::string http_host;           ///< Host header; empty: the probed address
  // udp
  std::string udp_payload = "maglb-health";
  std::optional<std::string> udp_expect;  ///< unset: any reply counts
  int line = 0;

  bool operator==(const HealthCheckConfig&) const = default;
};

/// A VIP with every backend down.
enum class AllDownPolicy : uint8_t {
  kKeepLast,  ///< fail open: keep serving the last table (the default)
  kDrop,      ///< empty table: new flows dropped as no_backend
};

/// What a down backend's tracked flows do.
enum class DownFlows : uint8_t {
  kPin,   ///< stay on it (the default: the check may be wrong about them)
  kMove,  ///< move to the table's new choice on their next packet
};

inline constexpr uint32_t kDefaultSlowStartS = 0;  // off
/// A slow start ramps in at most this many steps (table rebuilds).
inline constexpr uint32_t kDefaultSlowStartSteps = 5;
/// slow_start_steps is from 1 to this: a ramp scales weights by the steps, and
/// kMaxWeight x this is what the table builders take (kMaxEffectiveWeight).
inline constexpr uint32_t kMaxSlowStartSteps = 20;

/// [health]: how health changes reach the tables.
inline constexpr uint32_t kDefaultRebuildIntervalMs = 1000;
inline constexpr uint32_t kDefaultFlapWindowS = 60;
inline constexpr uint32_t kDefaultFlapMaxTransitions = 4;
inline constexpr uint32_t kDefaultHoldDownS = 30;

struct HealthSettings {
  /// At most one health-driven rebuild per this interval: changes that come
  /// meanwhile (many backends at once) coalesce into the next one.
  uint32_t rebuild_interval_ms = kDefaultRebuildIntervalMs;
  /// A backend with more than flap_max_transitions up/down transitions within
  /// flap_window_s is held down: it stays out of the table until it has been
  /// up without a failure for hold_down_s.
  uint32_t flap_window_s = kDefaultFlapWindowS;
  uint32_t flap_max_transitions = kDefaultFlapMaxTransitions;
  uint32_t hold_down_s = kDefaultHoldDownS;
  /// Slow start in at most this many weight steps (1 .. kMaxSlowStartSteps).
  uint32_t slow_start_steps = kDefaultSlowStartSteps;

  bool operator==(const HealthSettings&) const = default;
};

/// [kernel]: the kernel interface on the data port (exception path).
inline constexpr uint32_t kDefaultKernelRate = 20000;   // frames/s per worker, to the kernel
inline constexpr uint32_t kDefaultKernelBurst = 2000;

struct KernelConfig {
  std::string interface;  ///< e.g. "maglb0"; empty: no kernel interface
  uint8_t ipv4_prefix_len = 24;  ///< [lb] ipv4 goes on it as ipv4/len
  uint8_t ipv6_prefix_len = 64;
  /// Frames each worker passes up to the kernel per second, and at once;
  /// over it they are dropped and counted (kernel_rate_limited).
  uint32_t rate = kDefaultKernelRate;
  uint32_t burst = kDefaultKernelBurst;
  int line = 0;

  bool enabled() const { return !interface.empty(); }
  bool operator==(const KernelConfig&) const = default;
};

}  // namespace maglb

#endif  // MAGLB_HEALTH_CONFIG_H_
