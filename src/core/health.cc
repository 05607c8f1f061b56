#include "maglb/health.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace maglb {

namespace {

constexpr uint64_t kNsPerS = 1'000'000'000;

// Monotonic times near the end of uint64 would wrap: stop at the end instead.
uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return b > std::numeric_limits<uint64_t>::max() - a ? std::numeric_limits<uint64_t>::max()
                                                      : a + b;
}

std::string FailureReason(uint32_t count, const std::string& detail) {
  std::string r = count == 1 ? std::string("1 failure")
                             : absl::StrFormat("%u consecutive failures", count);
  if (!detail.empty()) absl::StrAppend(&r, ": ", detail);
  return r;
}

std::string SuccessReason(uint32_t count) {
  return count == 1 ? std::string("1 success")
                    : absl::StrFormat("%u consecutive successes", count);
}

}  // namespace

std::string_view HealthName(BackendHealth h) {
  switch (h) {
    case BackendHealth::kUnchecked:
      return "unchecked";
    case BackendHealth::kUp:
      return "up";
    case BackendHealth::kDown:
      return "down";
  }
  return "unknown";
}

HealthTracker::HealthTracker(const HealthCheckConfig& check, const HealthSettings& settings,
                             uint32_t slow_start_s, HealthStart start, uint64_t now_ns)
    : check_(check), settings_(settings), slow_start_s_(slow_start_s) {
  if (start == HealthStart::kUpUnchecked) {
    up_ = true;
    reason_ = "not yet checked";
  } else {
    up_ = false;
    first_success_pending_ = true;
    reason_ = "new backend, not yet checked";
  }
  since_ns_ = now_ns;
  last_ns_ = now_ns;
}

void HealthTracker::Reconfigure(const HealthCheckConfig& check, const HealthSettings& settings,
                                uint32_t slow_start_s) {
  check_ = check;
  settings_ = settings;
  slow_start_s_ = slow_start_s;
  if (slow_start_s_ == 0) ramping_ = false;
}

BackendHealth HealthTracker::health() const {
  return up_ && !held_down_ ? BackendHealth::kUp : BackendHealth::kDown;
}

uint32_t HealthTracker::steps() const {
  return std::clamp<uint32_t>(settings_.slow_start_steps, 1, kMaxSlowStartSteps);
}

uint64_t HealthTracker::Clamp(uint64_t now_ns) {
  last_ns_ = std::max(last_ns_, now_ns);
  return last_ns_;
}

std::optional<HealthTransition> HealthTracker::Observe(const ProbeOutcome& outcome,
                                                       uint64_t now_ns) {
  now_ns = Clamp(now_ns);
  ++probes_;
  if (!outcome.ok) ++failures_;
  last_detail_ = outcome.detail;
  const BackendHealth before = health();
  // Zero would mean "no probe needed": a config that slipped through takes 1.
  const uint32_t rise = std::max<uint32_t>(check_.rise, 1);
  const uint32_t fall = std::max<uint32_t>(check_.fall, 1);

  bool flipped = false;  // the hysteresis state changed
  std::string flip_reason;
  if (outcome.ok) {
    ++consecutive_ok_;
    consecutive_fail_ = 0;
    if (!up_ && (first_success_pending_ || consecutive_ok_ >= rise)) {
      flip_reason = first_success_pending_ ? std::string("first successful check")
                                           : SuccessReason(consecutive_ok_);
      up_ = true;
      first_success_pending_ = false;
      flipped = true;
    }
  } else {
    ++consecutive_fail_;
    consecutive_ok_ = 0;
    if (up_ && consecutive_fail_ >= fall) {
      flip_reason = FailureReason(consecutive_fail_, outcome.detail);
      up_ = false;
      flipped = true;
    } else if (first_success_pending_) {
      reason_ = "new backend, no successful check yet";
    }
  }

  std::string hold_reason;
  if (flipped && !held_down_ && RecordFlap(now_ns)) {
    held_down_ = true;
    stable_clock_running_ = false;
    hold_reason = absl::StrFormat(
        "flapping: %u transitions in %u s; held down until up for %u s (after %s)",
        transition_times_.size(), settings_.flap_window_s, settings_.hold_down_s, flip_reason);
  }
  if (held_down_) {
    if (!outcome.ok) {
      stable_clock_running_ = false;
    } else if (up_ && !stable_clock_running_) {
      stable_clock_running_ = true;
      stable_since_ns_ = now_ns;
    }
  }
  const bool hold_ended = HoldDownDue(now_ns);
  if (hold_ended) EndHoldDown();

  const BackendHealth after = health();
  if (after == before) {
    // Held down while already reported down: say so, though nothing changed.
    if (!hold_reason.empty()) reason_ = hold_reason;
    return std::nullopt;
  }
  if (after == BackendHealth::kDown) {
    return Report(before, hold_reason.empty() ? flip_reason : hold_reason, now_ns);
  }
  return Report(before,
                hold_ended ? absl::StrFormat("stable for %u s after flapping",
                                             settings_.hold_down_s)
                           : flip_reason,
                now_ns);
}

std::optional<HealthTransition> HealthTracker::Advance(uint64_t now_ns) {
  now_ns = Clamp(now_ns);
  if (!HoldDownDue(now_ns)) return std::nullopt;
  const BackendHealth before = health();
  EndHoldDown();
  return Report(before, absl::StrFormat("stable for %u s after flapping", settings_.hold_down_s),
                now_ns);
}

std::optional<HealthTransition> HealthTracker::Report(BackendHealth before,
                                                      const std::string& reason,
                                                      uint64_t now_ns) {
  const BackendHealth after = health();
  ++transitions_;
  reason_ = reason;
  since_ns_ = now_ns;
  if (after == BackendHealth::kUp && slow_start_s_ > 0) {
    ramping_ = true;
    up_since_ns_ = now_ns;
  } else {
    ramping_ = false;
  }
  return HealthTransition{.from = before, .to = after, .reason = reason};
}

bool HealthTracker::RecordFlap(uint64_t now_ns) {
  if (settings_.flap_window_s == 0) return false;
  const uint64_t window_ns = uint64_t{settings_.flap_window_s} * kNsPerS;
  while (!transition_times_.empty() &&
         SaturatingAdd(transition_times_.front(), window_ns) <= now_ns) {
    transition_times_.pop_front();
  }
  transition_times_.push_back(now_ns);
  return transition_times_.size() > settings_.flap_max_transitions;
}

bool HealthTracker::HoldDownDue(uint64_t now_ns) const {
  return held_down_ && up_ && stable_clock_running_ &&
         now_ns >= SaturatingAdd(stable_since_ns_, uint64_t{settings_.hold_down_s} * kNsPerS);
}

void HealthTracker::EndHoldDown() {
  held_down_ = false;
  stable_clock_running_ = false;
  transition_times_.clear();
}

uint64_t HealthTracker::StepStartNs(uint32_t k) const {
  // floor((k - 1) * S / steps) without the product: S in ns reaches 4.3e18,
  // and 20 times that does not fit in 64 bits.
  const uint64_t ramp_ns = uint64_t{slow_start_s_} * kNsPerS;
  const uint32_t n = steps();
  const uint64_t offset = ramp_ns / n * (k - 1) + ramp_ns % n * (k - 1) / n;
  return SaturatingAdd(up_since_ns_, offset);
}

uint32_t HealthTracker::WeightSteps(uint64_t now_ns) const {
  if (health() != BackendHealth::kUp) return 0;
  const uint32_t n = steps();
  if (!ramping_ || slow_start_s_ == 0) return n;
  for (uint32_t k = n; k > 1; --k) {
    if (now_ns >= StepStartNs(k)) return k;
  }
  return 1;
}

bool HealthTracker::Ramping(uint64_t now_ns) const {
  const uint32_t served = WeightSteps(now_ns);
  return served > 0 && served < steps();
}

std::optional<uint64_t> HealthTracker::NextChangeNs(uint64_t now_ns) const {
  if (held_down_) {
    if (!up_ || !stable_clock_running_) return std::nullopt;
    return std::max(now_ns,
                    SaturatingAdd(stable_since_ns_, uint64_t{settings_.hold_down_s} * kNsPerS));
  }
  if (!Ramping(now_ns)) return std::nullopt;
  return std::max(now_ns, StepStartNs(WeightSteps(now_ns) + 1));
}

bool RebuildLimiter::Due(uint64_t now_ns) const {
  if (!wanted_) return false;
  return interval_ns_ == 0 || now_ns >= NextNs();
}

uint64_t RebuildLimiter::NextNs() const {
  return ran_ ? SaturatingAdd(last_ns_, interval_ns_) : 0;
}

void RebuildLimiter::Done(uint64_t now_ns) {
  last_ns_ = ran_ ? std::max(last_ns_, now_ns) : now_ns;
  ran_ = true;
  wanted_ = false;
}

uint32_t EffectiveWeight(uint32_t configured, uint32_t steps_served, uint32_t steps,
                         bool vip_ramping) {
  steps = std::max<uint32_t>(steps, 1);
  steps_served = std::min(steps_served, steps);
  if (steps_served == 0 || configured == 0) return 0;
  if (vip_ramping) {
    return static_cast<uint32_t>(std::min<uint64_t>(uint64_t{configured} * steps_served,
                                                    std::numeric_limits<uint32_t>::max()));
  }
  if (steps_served == steps) return configured;
  return static_cast<uint32_t>((uint64_t{configured} * steps_served + steps - 1) / steps);
}

}  // namespace maglb
