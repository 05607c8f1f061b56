#include "control/reload_timing.h"

#include <time.h>

#include <algorithm>

#include "absl/strings/str_format.h"

namespace maglb {

uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

std::string_view ReloadOutcomeName(ReloadOutcome outcome) {
  switch (outcome) {
    case ReloadOutcome::kApplied:
      return "applied";
    case ReloadOutcome::kUnchanged:
      return "unchanged";
    case ReloadOutcome::kRefused:
      return "refused";
  }
  return "?";
}

void ReloadTimings::Add(const ReloadTiming& t) {
  ring_[added_ % kRecentReloads] = t;
  ++added_;
  switch (t.outcome) {
    case ReloadOutcome::kApplied:
      ++applied_;
      break;
    case ReloadOutcome::kUnchanged:
      ++unchanged_;
      break;
    case ReloadOutcome::kRefused:
      ++refused_;
      return;  // never reached the workers
  }
  if (t.event_ns == 0 || t.workers_ns < t.event_ns) return;  // no trigger time (or a careless record)
  const uint64_t ns = t.ToWorkersNs();
  ++to_workers_count_;
  to_workers_sum_ns_ += ns;
  to_workers_max_ns_ = std::max(to_workers_max_ns_, ns);
  const auto* bucket = std::lower_bound(std::begin(kReloadApplyBoundsNs), std::end(kReloadApplyBoundsNs), ns);
  ++buckets_[static_cast<size_t>(bucket - std::begin(kReloadApplyBoundsNs))];
}

std::vector<ReloadTiming> ReloadTimings::Recent() const {
  const size_t n = static_cast<size_t>(std::min<uint64_t>(added_, kRecentReloads));
  std::vector<ReloadTiming> out;
  out.reserve(n);
  for (uint64_t i = added_ - n; i < added_; ++i) out.push_back(ring_[i % kRecentReloads]);
  return out;
}

std::string FormatDurationNs(uint64_t ns) {
  const double v = static_cast<double>(ns);
  if (ns < 10'000) return absl::StrFormat("%.1f us", v / 1e3);
  if (ns < 1'000'000) return absl::StrFormat("%.0f us", v / 1e3);
  if (ns < 1'000'000'000) return absl::StrFormat("%.1f ms", v / 1e6);
  return absl::StrFormat("%.2f s", v / 1e9);
}

}  // namespace maglb
