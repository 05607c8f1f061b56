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
#include "maglb/table_scheme.h"

namespace maglb {

static_assert(kMaxEffectiveWeight == kMaxWeight * kMaxSlowStartSteps,
              "the table builders must take every weight a slow start can scale to");

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
  /// One of:
  ///   "3 consecutive failures: connect timeout 500 ms" (the last failure's
  ///     detail; "1 failure: ..." when fall = 1),
  ///   "2 consecutive successes" ("1 success" when rise = 1),
  ///   "first successful check" (a new backend, HealthStart::kDownNew),
  ///   "flapping: 5 transitions in 60 s; held down until up for 30 s (after
  ///     3 consecutive failures: connect timeout 500 ms)",
  ///   "stable for 30 s after flapping".
  std::string reason;
};

/// How a backend starts.
enum class HealthStart : uint8_t {
  kUpUnchecked,  ///< at daemon start: up until `fall` failures; no slow start
  kDownNew,      ///< added by a reload: down until its FIRST success (not `rise`)
};

/// One checked backend (the caller keeps none for an unchecked one: that one
/// is kUnchecked and serves its configured weight). Times are monotonic
/// nanoseconds, given by the caller; Observe() or Advance() with a time
/// earlier than the latest given before takes that latest one.
///
/// Two states: the hysteresis state (up/down after rise/fall), and the
/// reported health, which is the hysteresis state except while held down
/// (then kDown). Observe() and Advance() return a transition of the REPORTED
/// health only, once per change (never from == to).
///
/// Hold-down. Every change of the hysteresis state (a new backend's first
/// success included) is a flap transition. When one makes more than
/// flap_max_transitions within the last flap_window_s (a transition at t
/// counts at t' while t > t' - flap_window_s; flap_window_s = 0 turns
/// hold-down off), the backend is held down: reported down (a transition if
/// it was reported up, with the "flapping: ..." reason; if the transition
/// that triggers it is down -> up, the reported health simply stays down and
/// reason() says why). The checks and the hysteresis go on. The hold-down
/// ends once the backend has been continuously up for hold_down_s: the clock
/// starts at a successful probe that finds the hysteresis up (the one that
/// brings it up, or the first success after a failed probe) and stops at any
/// failed probe, even one too few to take it down. It ends at the first
/// successful probe, or Advance(), at or after that clock + hold_down_s
/// (NextChangeNs() says when, for a timer; a failure that comes first, even
/// late, restarts the wait); the flap history is then emptied and the
/// backend reported up ("stable for 30 s after flapping"), with a slow start.
///
/// The bound on reported transitions (so on health rebuilds), per backend:
/// starting from an empty flap history, at most flap_max_transitions + 1
/// reported transitions happen before the backend is held down: the
/// flap_max_transitions that are allowed, plus the hold-down itself when it
/// finds the backend reported up (the (max+1)-th flap transition is up ->
/// down). So exactly flap_max_transitions + 1 for a backend that starts
/// reported up and flaps with flap_max_transitions even, flap_max_transitions
/// when odd (the (max+1)-th is down -> up and is absorbed). Then none for as
/// long as it keeps failing probes, however long that is; then exactly one
/// (back up) hold_down_s after it stops failing, which empties the history.
/// A flap in which the backend never stays up for hold_down_s, of any length
/// and ending with the backend healthy, so costs at most
/// flap_max_transitions + 2 reported transitions, e.g. 6 with the defaults
/// (60 s, 4, 30 s) for a backend flapping every second for 30 s or for an
/// hour. A backend that alternates flapping with stable stretches of
/// hold_down_s: at most flap_max_transitions + 2 per cycle, each cycle longer
/// than hold_down_s. Slow start adds at most steps() - 1 weight changes
/// after each reported down -> up (see WeightSteps).
///
/// Slow start. When the reported health goes down -> up (rise successes, a
/// new backend's first success, or the end of a hold-down) and
/// slow_start_s > 0, the backend ramps from up_since (that moment): it serves
/// step k (1-based) from up_since + floor((k - 1) * slow_start_s / steps()),
/// so 1, 2, ..., steps(); the last step, steps() (its full weight), begins at
/// (steps() - 1) / steps() of slow_start_s, so it is full at the latest
/// slow_start_s after coming up. At daemon start (kUpUnchecked) there is no
/// ramp.
///
/// Reconfigure() keeps the state, the counters, the flap history and a ramp
/// under way (its step times follow the new slow_start_s and steps from
/// then on; slow_start_s = 0 ends it); a changed rise or fall applies from
/// the next probe, against the consecutive count so far.
class HealthTracker {
 public:
  HealthTracker(const HealthCheckConfig& check, const HealthSettings& settings,
                uint32_t slow_start_s, HealthStart start, uint64_t now_ns);

  /// A probe's result. Returns the transition of the reported health, if any.
  std::optional<HealthTransition> Observe(const ProbeOutcome& outcome, uint64_t now_ns);
  /// Time passed without a probe: ends a hold-down that is due (see
  /// NextChangeNs). Returns the transition (down -> up), if any.
  std::optional<HealthTransition> Advance(uint64_t now_ns);
  /// The check's settings changed (reload): counters and state carry over.
  void Reconfigure(const HealthCheckConfig& check, const HealthSettings& settings,
                   uint32_t slow_start_s);

  /// Reported health: kUp or kDown (kDown while held down too).
  BackendHealth health() const;
  bool held_down() const { return held_down_; }
  /// Why the reported health is what it is: the reason of the last reported
  /// transition, or of the start state, or the hold-down's when one began
  /// while the backend was already reported down, or, for a new backend that
  /// failed before it ever succeeded, "new backend, no successful check yet".
  const std::string& reason() const { return reason_; }
  /// When the reported health last changed (or the tracker started).
  uint64_t since_ns() const { return since_ns_; }

  /// The backend's share of its configured weight at `now_ns`, in
  /// 1 / steps(): 0 while reported down, steps() when fully up; in between
  /// during slow start (step k of the ramp serves k).
  uint32_t WeightSteps(uint64_t now_ns) const;
  /// In slow start: reported up and serving fewer than steps() at `now_ns`.
  bool Ramping(uint64_t now_ns) const;
  /// When WeightSteps next changes (the next ramp step) or a hold-down may
  /// end (call Advance then), or nullopt if nothing will change without a
  /// probe. Never earlier than `now_ns`.
  std::optional<uint64_t> NextChangeNs(uint64_t now_ns) const;
  /// settings.slow_start_steps clamped to 1 .. kMaxSlowStartSteps.
  uint32_t steps() const;

  // Check counters, as shown per backend.
  uint64_t probes() const { return probes_; }
  uint64_t probe_failures() const { return failures_; }
  uint64_t transitions() const { return transitions_; }  ///< of the reported health
  const std::string& last_detail() const { return last_detail_; }

 private:
  // The reported health changed from `before`: count it, start or stop a ramp.
  std::optional<HealthTransition> Report(BackendHealth before, const std::string& reason,
                                         uint64_t now_ns);
  bool HoldDownDue(uint64_t now_ns) const;
  void EndHoldDown();
  // Records a change of the hysteresis state; true if it starts a hold-down.
  bool RecordFlap(uint64_t now_ns);
  uint64_t StepStartNs(uint32_t k) const;  // 1-based ramp step k
  uint64_t Clamp(uint64_t now_ns);         // never earlier than the last time seen

  HealthCheckConfig check_;
  HealthSettings settings_;
  uint32_t slow_start_s_ = 0;
  bool up_ = true;                    // the hysteresis state
  bool first_success_pending_ = false;  // kDownNew until its first success
  uint32_t consecutive_ok_ = 0;
  uint32_t consecutive_fail_ = 0;
  bool held_down_ = false;
  bool stable_clock_running_ = false;  // while held: up with no failure since
  uint64_t stable_since_ns_ = 0;
  uint64_t up_since_ns_ = 0;  // start of the slow-start ramp
  bool ramping_ = false;      // a ramp began (it may have reached its last step)
  // Flap transitions within the window; at most flap_max_transitions + 1.
  std::deque<uint64_t> transition_times_;
  std::string reason_;
  uint64_t since_ns_ = 0;
  uint64_t last_ns_ = 0;
  uint64_t probes_ = 0, failures_ = 0, transitions_ = 0;
  std::string last_detail_;
};

/// At most one rebuild per `interval_ns`: Request() marks one as wanted;
/// Due(now) says whether it may run now, else NextNs() says when. The first
/// rebuild is due at once; interval 0: due whenever wanted.
class RebuildLimiter {
 public:
  explicit RebuildLimiter(uint64_t interval_ns) : interval_ns_(interval_ns) {}
  /// Applies to the next Due()/NextNs(), measured from the last rebuild.
  void set_interval_ns(uint64_t ns) { interval_ns_ = ns; }
  void Request() { wanted_ = true; }
  bool wanted() const { return wanted_; }
  /// A rebuild is wanted and the interval since the last one has passed.
  bool Due(uint64_t now_ns) const;
  /// The earliest time a rebuild may run: last + interval, or 0 (at once)
  /// before the first. Meant for when wanted() (a timer to set).
  uint64_t NextNs() const;
  /// A rebuild ran at `now_ns` (the health task's, or one that took the
  /// current health into account): clears wanted().
  void Done(uint64_t now_ns);

 private:
  uint64_t interval_ns_;
  bool wanted_ = false;
  bool ran_ = false;
  uint64_t last_ns_ = 0;
};

/// A backend's effective weight, for the table builders:
///  - steps_served == 0 (down): 0;
///  - vip_ramping (some backend of the VIP serves 0 < steps < steps()):
///    `configured` x `steps_served`, for every backend of the VIP (the fully
///    up ones serve steps x configured). Maglev and rendezvous placement
///    depend on weight ratios only, so the fully-up backends' table is what
///    it would be unscaled, and the ramp's end (back to `configured`) moves
///    nothing. At most kMaxWeight x kMaxSlowStartSteps = kMaxEffectiveWeight.
///  - not ramping and steps_served == steps: `configured`;
///  - not ramping and 0 < steps_served < steps: ceil(configured x
///    steps_served / steps), never 0 for configured > 0. This is how to ramp
///    a VIP whose scheme cannot take scaled weights (ring: a smaller weight
///    gives the backend a subset of its full weight's points, so its ramp
///    moves flows only to it; it is coarse for small weights: configured 1
///    serves 1 at every step). Jump has no weights: it cannot ramp at all.
/// steps_served above steps is taken as steps; steps 0 as 1.
uint32_t EffectiveWeight(uint32_t configured, uint32_t steps_served, uint32_t steps,
                         bool vip_ramping);

}  // namespace maglb

#endif  // MAGLB_HEALTH_H_
