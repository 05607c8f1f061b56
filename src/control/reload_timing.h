// How long reloads take to reach the workers: per reload, when the trigger
// that led to it was read (the config file's inotify event, or SIGHUP; of
// triggers that made one reload, the first), when the new snapshot was
// swapped in, and when every worker had passed a quiescent point after it
// (SnapshotPublisher::Publish: none holds the old tables any more). The
// reload task records each reload it ends (applied, unchanged, refused);
// telemetry (/maglb/reloads) and Prometheus (maglb_reload_apply_seconds)
// read the record under the publisher's mutex. Times are CLOCK_MONOTONIC
// ns, the clock of Python's time.monotonic_ns(), so that a harness can set
// its own write time beside them. Plain C++.
#ifndef MAGLB_CONTROL_RELOAD_TIMING_H_
#define MAGLB_CONTROL_RELOAD_TIMING_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace maglb {

/// CLOCK_MONOTONIC, ns.
uint64_t MonotonicNs();

enum class ReloadOutcome : uint8_t {
  kApplied,    ///< published, with changes
  kUnchanged,  ///< published, nothing changed (a new generation all the same)
  kRefused,    ///< not published: the old state serves on
};
/// "applied", "unchanged", "refused".
std::string_view ReloadOutcomeName(ReloadOutcome outcome);

struct ReloadTiming {
  /// The generation published; refused: the one that serves on.
  uint64_t generation = 0;
  ReloadOutcome outcome = ReloadOutcome::kApplied;
  uint64_t event_ns = 0;      ///< the trigger was read
  uint64_t published_ns = 0;  ///< the snapshot swapped in (0: refused)
  uint64_t workers_ns = 0;    ///< every worker past it (0: refused)
  /// From the trigger to the workers, ns; 0 where either is missing.
  uint64_t ToWorkersNs() const {
    return event_ns != 0 && workers_ns >= event_ns ? workers_ns - event_ns : 0;
  }
};

/// How many reloads /maglb/reloads keeps.
inline constexpr size_t kRecentReloads = 64;
/// The upper bounds (inclusive) of maglb_reload_apply_seconds' buckets, ns:
/// 100 us to 10 s, 1-2.5-5 a decade.
inline constexpr uint64_t kReloadApplyBoundsNs[] = {
    100'000,     250'000,     500'000,       1'000'000,     2'500'000,     5'000'000,
    10'000'000,  25'000'000,  50'000'000,    100'000'000,   250'000'000,   500'000'000,
    1'000'000'000, 2'500'000'000, 5'000'000'000, 10'000'000'000};
inline constexpr size_t kReloadApplyBuckets = std::size(kReloadApplyBoundsNs) + 1;  // and above

class ReloadTimings {
 public:
  void Add(const ReloadTiming& t);
  /// The last kRecentReloads recorded, oldest first.
  std::vector<ReloadTiming> Recent() const;

  uint64_t applied() const { return applied_; }
  uint64_t unchanged() const { return unchanged_; }
  uint64_t refused() const { return refused_; }
  /// Reloads that reached the workers (applied or unchanged) with a trigger
  /// time: how many, the sum and the largest of their trigger-to-workers
  /// times, and how many fell in each bucket of kReloadApplyBoundsNs (t <=
  /// bound, the first that holds it; the last: above every bound).
  uint64_t to_workers_count() const { return to_workers_count_; }
  uint64_t to_workers_sum_ns() const { return to_workers_sum_ns_; }
  uint64_t to_workers_max_ns() const { return to_workers_max_ns_; }
  const std::array<uint64_t, kReloadApplyBuckets>& to_workers_buckets() const { return buckets_; }

 private:
  std::array<ReloadTiming, kRecentReloads> ring_{};
  uint64_t added_ = 0;  // ever; the next goes to ring_[added_ % kRecentReloads]
  uint64_t applied_ = 0, unchanged_ = 0, refused_ = 0;
  uint64_t to_workers_count_ = 0, to_workers_sum_ns_ = 0, to_workers_max_ns_ = 0;
  std::array<uint64_t, kReloadApplyBuckets> buckets_{};
};

/// A duration for a log line: "850 us", "1.2 ms", "2.35 s".
std::string FormatDurationNs(uint64_t ns);

}  // namespace maglb

#endif  // MAGLB_CONTROL_RELOAD_TIMING_H_
