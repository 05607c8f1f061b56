// The reload timing record (control/reload_timing.h): the last 64 reloads
// oldest first, outcomes counted, trigger-to-workers totals and buckets
// over the reloads that reached the workers only, and careless records
// (no trigger time, a clock gone backwards) left out of the times. The
// reload task's use of it, with a real ReloadTask, is controller_test's.
#include "control/reload_timing.h"

#include <time.h>

#include "gtest/gtest.h"

namespace maglb {
namespace {

ReloadTiming Applied(uint64_t generation, uint64_t event_ns, uint64_t to_workers_ns) {
  return {.generation = generation,
          .outcome = ReloadOutcome::kApplied,
          .event_ns = event_ns,
          .published_ns = event_ns + to_workers_ns / 2,
          .workers_ns = event_ns + to_workers_ns};
}

TEST(ReloadTimings, KeepsTheLast64OldestFirst) {
  ReloadTimings t;
  EXPECT_TRUE(t.Recent().empty());
  for (uint64_t g = 2; g < 2 + 100; ++g) t.Add(Applied(g, g * 1'000'000, 1'000));
  const std::vector<ReloadTiming> recent = t.Recent();
  ASSERT_EQ(recent.size(), kRecentReloads);
  EXPECT_EQ(recent.front().generation, 2u + 100 - 64);
  EXPECT_EQ(recent.back().generation, 101u);
  for (size_t i = 1; i < recent.size(); ++i) EXPECT_EQ(recent[i].generation, recent[i - 1].generation + 1);
  EXPECT_EQ(t.applied(), 100u);
  EXPECT_EQ(t.to_workers_count(), 100u);
  EXPECT_EQ(t.to_workers_sum_ns(), 100'000u);
  EXPECT_EQ(t.to_workers_max_ns(), 1'000u);
}

TEST(ReloadTimings, OnlyReloadsThatReachedTheWorkersAreTimed) {
  ReloadTimings t;
  t.Add(Applied(2, 1'000, 1'500'000));  // 1.5 ms
  t.Add({.generation = 2, .outcome = ReloadOutcome::kRefused, .event_ns = 5'000'000, .published_ns = 0,
         .workers_ns = 0});
  t.Add({.generation = 3, .outcome = ReloadOutcome::kUnchanged, .event_ns = 9'000'000,
         .published_ns = 9'100'000, .workers_ns = 9'250'000});  // 250 us: reached the workers too
  t.Add(Applied(4, 0, 7));  // no trigger time: counted, not timed
  ReloadTiming backwards = Applied(5, 50'000'000, 0);
  backwards.workers_ns = 40'000'000;  // careless: before its trigger
  t.Add(backwards);
  t.Add(Applied(6, 100'000'000, 20'000'000'000));  // 20 s: above every bound
  EXPECT_EQ(t.applied(), 4u);
  EXPECT_EQ(t.refused(), 1u);
  EXPECT_EQ(t.unchanged(), 1u);
  EXPECT_EQ(t.to_workers_count(), 3u);
  EXPECT_EQ(t.to_workers_sum_ns(), 1'500'000u + 250'000u + 20'000'000'000u);
  EXPECT_EQ(t.to_workers_max_ns(), 20'000'000'000u);
  const auto& b = t.to_workers_buckets();
  ASSERT_EQ(b.size(), std::size(kReloadApplyBoundsNs) + 1);
  EXPECT_EQ(b[1], 1u);  // 250 us <= 250 us: the bound holds its own value
  EXPECT_EQ(b[4], 1u);  // 1.5 ms in (1 ms, 2.5 ms]
  EXPECT_EQ(b.back(), 1u);
  uint64_t sum = 0;
  for (uint64_t n : b) sum += n;
  EXPECT_EQ(sum, t.to_workers_count());
  // The refused one is recorded with its trigger, never as reaching the workers.
  const std::vector<ReloadTiming> recent = t.Recent();
  ASSERT_EQ(recent.size(), 6u);
  EXPECT_EQ(recent[1].outcome, ReloadOutcome::kRefused);
  EXPECT_EQ(recent[1].ToWorkersNs(), 0u);
  EXPECT_EQ(recent[4].ToWorkersNs(), 0u);
  EXPECT_EQ(ReloadOutcomeName(recent[0].outcome), "applied");
  EXPECT_EQ(ReloadOutcomeName(recent[1].outcome), "refused");
  EXPECT_EQ(ReloadOutcomeName(recent[2].outcome), "unchanged");
}

TEST(ReloadTimings, MonotonicNsIsClockMonotonic) {
  timespec before;
  clock_gettime(CLOCK_MONOTONIC, &before);
  const uint64_t ns = MonotonicNs();
  timespec after;
  clock_gettime(CLOCK_MONOTONIC, &after);
  EXPECT_GE(ns, static_cast<uint64_t>(before.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(before.tv_nsec));
  EXPECT_LE(ns, static_cast<uint64_t>(after.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(after.tv_nsec));
}

TEST(ReloadTimings, DurationsForTheLogLine) {
  EXPECT_EQ(FormatDurationNs(0), "0.0 us");
  EXPECT_EQ(FormatDurationNs(4'260), "4.3 us");

  EXPECT_EQ(FormatDurationNs(850'000), "850 us");
  EXPECT_EQ(FormatDurationNs(1'200'000), "1.2 ms");
  EXPECT_EQ(FormatDurationNs(2'350'000'000), "2.35 s");
}

}  // namespace
}  // namespace maglb
