// Backend health as a pure state machine (no I/O, no clock of its own): what
// the health task (src/control/health_task.*) feeds probe results into, and
// what decides the weight a backend serves with. README "Health checks".
//
// Per backend:
//  - rise/fall hysteresis: `fall` consecutive failures take an up backend
//    down, `rise` consecutive successes bring a down one up;
//  - flap hold-down: more than flap_max_transitions transitions within
//    flap_window_s hold the backend down (out of the table) until it has been
//    up, without a failed probe, for hold_down_s; the checks go on meanwhile;
//  - slow start: a backend that comes up (recovered, or added by a reload)
//    serves a growing share of its weight over slow_start_s, in at most
//    slow_start_steps steps, so the ramp costs a bounded number of rebuilds.
// A backend's first state: up ("not yet checked") when the daemon starts, so
// that it serves at once; down ("new, not yet checked") when a reload adds
// it, so that a backend nobody has seen answer takes no flows until its first
// successful probe.
#ifndef MAGLB_HEALTH_H_
#define MAGLB_HEALTH_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "maglb/health_config.h"

namespace maglb {

enum class BackendHealth : uint8_t {
  kUnchecked,  ///< no check configured: always serving at its weight
  kUp,
  kDown,
};
/// "unchecked", "up", "down": as telemetry and `maglbctl stats` show it.
std::string_view HealthName(BackendHealth h);

/// What one probe found. `detail` says why it failed, in an operator's words
/// ("connect timeout 500 ms", "connection refused", "HTTP status 503, expected
/// 200", "body did not contain \"ok\"", "port unreachable"); for a success,
/// what it saw ("connected", "HTTP status 200", "reply of 12 bytes").
struct ProbeOutcome {
  bool ok = false;
  std::string detail;
};

/// A change of a backend's reported health, to log once and count.
struct HealthTransition {
  BackendHealth from = BackendHealth::kUnchecked;
  BackendHealth to = BackendHealth::kUnchecked;
  /// e.g. "3 consecutive failures: connect timeout 500 ms",
  /// "2 consecutive successes", "flapping: 5 transitions in 60 s, held down
  /// until up for 30 s".
  std::string reason;
};

/// How a backend starts.
enum class HealthStart : uint8_t {
  kUpUnchecked,  ///< at daemon start: up until `fall` failures
  kDownNew,      ///< added by a reload: down until its first success
};

/// One checked backend. Times are monotonic nanoseconds, given by the caller.
class HealthTracker {
 public:
  HealthTracker(const HealthCheckConfig& check, const HealthSettings& settings,
                uint32_t slow_start_s, HealthStart start, uint64_t now_ns);

  /// A probe's result. Returns the transition of the reported health, if any.
  std::optional<HealthTransition> Observe(const ProbeOutcome& outcome, uint64_t now_ns);
  /// The check's settings changed (reload): counters and state carry over.
  void Reconfigure(const HealthCheckConfig& check, const HealthSettings& settings,
                   uint32_t slow_start_s);

  /// Reported health: kDown while held down too.
  BackendHealth health() const;
  bool held_down() const;
  /// The reason of the last transition (or of the start state) and when.
  const std::string& reason() const { return reason_; }
  uint64_t since_ns() const { return since_ns_; }

  /// The backend's share of its configured weight at `now_ns`, in
  /// 1 / slow_start_steps: 0 while down, slow_start_steps when fully up;
  /// in between during slow start (step k of the ramp serves k).
  uint32_t WeightSteps(uint64_t now_ns) const;
  /// When WeightSteps next changes (the next ramp step or the end of a
  /// hold-down), or nullopt if it will not change without a probe.
  std::optional<uint64_t> NextChangeNs(uint64_t now_ns) const;
  uint32_t steps() const;  ///< slow_start_steps in force (>= 1)

  // Check counters, as shown per backend.
  uint64_t probes() const { return probes_; }
  uint64_t probe_failures() const { return failures_; }
  uint64_t transitions() const { return transitions_; }
  const std::string& last_detail() const { return last_detail_; }

 private:
  // ... state owned by the implementation
  HealthCheckConfig check_;
  HealthSettings settings_;
  uint32_t slow_start_s_ = 0;
  bool up_ = true;               // the hysteresis state
  uint32_t consecutive_ok_ = 0;
  uint32_t consecutive_fail_ = 0;
  bool held_down_ = false;
  uint64_t held_since_ns_ = 0;
  uint64_t up_since_ns_ = 0;     // start of the slow-start ramp
  bool ramping_ = false;
  std::deque<uint64_t> transition_times_;  // within the flap window
  std::string reason_;
  uint64_t since_ns_ = 0;
  uint64_t probes_ = 0, failures_ = 0, transitions_ = 0;
  std::string last_detail_;
};

/// At most one rebuild per `interval_ns`: Request() marks one as wanted;
/// Due(now) says whether it may run now, else NextNs() says when.
class RebuildLimiter {
 public:
  explicit RebuildLimiter(uint64_t interval_ns) : interval_ns_(interval_ns) {}
  void set_interval_ns(uint64_t ns) { interval_ns_ = ns; }
  void Request() { wanted_ = true; }
  bool wanted() const { return wanted_; }
  /// A rebuild is wanted and the interval since the last one has passed.
  bool Due(uint64_t now_ns) const;
  /// When a wanted rebuild may run.
  uint64_t NextNs() const;
  /// The rebuild ran at `now_ns`.
  void Done(uint64_t now_ns);

 private:
  uint64_t interval_ns_;
  bool wanted_ = false;
  bool ran_ = false;
  uint64_t last_ns_ = 0;
};

/// A backend's effective weight: `configured` x `steps_served` when any
/// backend of its VIP is ramping (all of the VIP's weights are then scaled by
/// the steps, which leaves the table of the fully-up ones unchanged: placement
/// depends on weight ratios), else `configured` or 0.
uint32_t EffectiveWeight(uint32_t configured, uint32_t steps_served, uint32_t steps,
                         bool vip_ramping);

}  // namespace maglb

#endif  // MAGLB_HEALTH_H_
