#include "maglb/health.h"

#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "maglb/hashing.h"
#include "maglb/maglev.h"

namespace maglb {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kS = 1'000'000'000;
constexpr char kTimeout[] = "connect timeout 500 ms";

HealthCheckConfig Check(uint32_t rise, uint32_t fall) {
  HealthCheckConfig c;
  c.type = HealthCheckType::kTcp;
  c.rise = rise;
  c.fall = fall;
  return c;
}

HealthSettings Settings(uint32_t flap_window_s = kDefaultFlapWindowS,
                        uint32_t flap_max_transitions = kDefaultFlapMaxTransitions,
                        uint32_t hold_down_s = kDefaultHoldDownS,
                        uint32_t slow_start_steps = kDefaultSlowStartSteps) {
  HealthSettings s;
  s.flap_window_s = flap_window_s;
  s.flap_max_transitions = flap_max_transitions;
  s.hold_down_s = hold_down_s;
  s.slow_start_steps = slow_start_steps;
  return s;
}

ProbeOutcome Ok() { return {.ok = true, .detail = "connected"}; }
ProbeOutcome Fail(std::string detail = kTimeout) { return {.ok = false, .detail = detail}; }

// Feeds one outcome and checks what every call must satisfy: a returned
// transition is exactly the change of health(), and no change returns none.
std::optional<HealthTransition> Feed(HealthTracker& t, const ProbeOutcome& o, uint64_t now) {
  const BackendHealth before = t.health();
  const uint64_t transitions = t.transitions();
  std::optional<HealthTransition> tr = t.Observe(o, now);
  if (tr.has_value()) {
    EXPECT_EQ(tr->from, before);
    EXPECT_EQ(tr->to, t.health());
    EXPECT_NE(tr->from, tr->to);
    EXPECT_EQ(t.reason(), tr->reason);
    EXPECT_EQ(t.since_ns(), now);
    EXPECT_EQ(t.transitions(), transitions + 1);
  } else {
    EXPECT_EQ(t.health(), before);
    EXPECT_EQ(t.transitions(), transitions);
  }
  return tr;
}

TEST(HealthNameTest, NamesAsStatsShowThem) {
  EXPECT_EQ(HealthName(BackendHealth::kUnchecked), "unchecked");
  EXPECT_EQ(HealthName(BackendHealth::kUp), "up");
  EXPECT_EQ(HealthName(BackendHealth::kDown), "down");
}

// ---------------------------------------------------------------------------
// Hysteresis.

TEST(HysteresisTest, StartsUpUncheckedAndServesAtOnce) {
  HealthTracker t(Check(2, 3), Settings(), 10, HealthStart::kUpUnchecked, 7 * kS);
  EXPECT_EQ(t.health(), BackendHealth::kUp);
  EXPECT_FALSE(t.held_down());
  EXPECT_EQ(t.reason(), "not yet checked");
  EXPECT_EQ(t.since_ns(), 7 * kS);
  // No slow start at daemon start, though the VIP has one.
  EXPECT_EQ(t.WeightSteps(7 * kS), t.steps());
  EXPECT_FALSE(t.Ramping(7 * kS));
  EXPECT_EQ(t.NextChangeNs(7 * kS), std::nullopt);
  EXPECT_EQ(t.transitions(), 0u);
}

TEST(HysteresisTest, ExactlyFallFailuresTakeItDown) {
  HealthTracker t(Check(2, 3), Settings(), 0, HealthStart::kUpUnchecked, 0);
  EXPECT_FALSE(Feed(t, Fail(), 1 * kS));
  EXPECT_FALSE(Feed(t, Fail(), 2 * kS));
  EXPECT_EQ(t.health(), BackendHealth::kUp);
  EXPECT_EQ(t.WeightSteps(2 * kS), t.steps());
  std::optional<HealthTransition> tr = Feed(t, Fail(), 3 * kS);
  ASSERT_TRUE(tr.has_value());
  EXPECT_EQ(tr->from, BackendHealth::kUp);
  EXPECT_EQ(tr->to, BackendHealth::kDown);
  EXPECT_EQ(tr->reason, "3 consecutive failures: connect timeout 500 ms");
  EXPECT_EQ(t.since_ns(), 3 * kS);
  EXPECT_EQ(t.WeightSteps(3 * kS), 0u);
  // Further failures change nothing, and are not reported again.
  EXPECT_FALSE(Feed(t, Fail("connection refused"), 4 * kS));
  EXPECT_EQ(t.reason(), "3 consecutive failures: connect timeout 500 ms");
  EXPECT_EQ(t.last_detail(), "connection refused");
  EXPECT_EQ(t.probes(), 4u);
  EXPECT_EQ(t.probe_failures(), 4u);
  EXPECT_EQ(t.transitions(), 1u);
}

TEST(HysteresisTest, ASuccessBetweenFailuresStartsTheCountAgain) {
  HealthTracker t(Check(2, 3), Settings(), 0, HealthStart::kUpUnchecked, 0);
  uint64_t now = 0;
  for (int round = 0; round < 20; ++round) {
    EXPECT_FALSE(Feed(t, Fail(), now += kS));
    EXPECT_FALSE(Feed(t, Fail(), now += kS));
    EXPECT_FALSE(Feed(t, Ok(), now += kS));
  }
  EXPECT_EQ(t.health(), BackendHealth::kUp);
  EXPECT_EQ(t.probe_failures(), 40u);
}

TEST(HysteresisTest, AlternatingResultsNeverTransitionWithRiseAndFallTwo) {
  for (bool start_down : {false, true}) {
    HealthTracker t(Check(2, 2), Settings(), 0, HealthStart::kUpUnchecked, 0);
    uint64_t now = 0;
    if (start_down) {
      Feed(t, Fail(), now += kS);
      ASSERT_TRUE(Feed(t, Fail(), now += kS));
    }
    const BackendHealth h = t.health();
    const uint64_t transitions = t.transitions();
    for (int i = 0; i < 200; ++i) {
      EXPECT_FALSE(Feed(t, i % 2 == 0 ? Ok() : Fail(), now += kS)) << i;
    }
    EXPECT_EQ(t.health(), h);
    EXPECT_EQ(t.transitions(), transitions);
  }
}

TEST(HysteresisTest, RiseSuccessesBringItBack) {
  HealthTracker t(Check(2, 3), Settings(), 0, HealthStart::kUpUnchecked, 0);
  for (int i = 1; i <= 3; ++i) Feed(t, Fail(), i * kS);
  ASSERT_EQ(t.health(), BackendHealth::kDown);
  EXPECT_FALSE(Feed(t, Ok(), 4 * kS));
  std::optional<HealthTransition> tr = Feed(t, Ok(), 5 * kS);
  ASSERT_TRUE(tr.has_value());
  EXPECT_EQ(tr->from, BackendHealth::kDown);
  EXPECT_EQ(tr->to, BackendHealth::kUp);
  EXPECT_EQ(tr->reason, "2 consecutive successes");
  EXPECT_FALSE(Feed(t, Ok(), 6 * kS));
  EXPECT_EQ(t.transitions(), 2u);
}

TEST(HysteresisTest, ReasonsForCountsOfOneAndWithoutDetail) {
  HealthTracker one(Check(1, 1), Settings(), 0, HealthStart::kUpUnchecked, 0);
  EXPECT_EQ(Feed(one, Fail("connection refused"), kS)->reason, "1 failure: connection refused");
  EXPECT_EQ(Feed(one, Ok(), 2 * kS)->reason, "1 success");

  HealthTracker bare(Check(2, 3), Settings(), 0, HealthStart::kUpUnchecked, 0);
  Feed(bare, Fail(""), kS);
  Feed(bare, Fail(""), 2 * kS);
  EXPECT_EQ(Feed(bare, Fail(""), 3 * kS)->reason, "3 consecutive failures");
}

TEST(HysteresisTest, ZeroRiseOrFallActsAsOne) {
  HealthTracker t(Check(0, 0), Settings(), 0, HealthStart::kUpUnchecked, 0);
  EXPECT_TRUE(Feed(t, Fail(), kS));
  EXPECT_TRUE(Feed(t, Ok(), 2 * kS));
}

TEST(HysteresisTest, NewBackendIsDownUntilItsFirstSuccessWhateverRise) {
  HealthTracker t(Check(3, 2), Settings(), 0, HealthStart::kDownNew, 5 * kS);
  EXPECT_EQ(t.health(), BackendHealth::kDown);
  EXPECT_EQ(t.reason(), "new backend, not yet checked");
  EXPECT_EQ(t.since_ns(), 5 * kS);
  EXPECT_EQ(t.WeightSteps(5 * kS), 0u);
  EXPECT_FALSE(Feed(t, Fail("connection refused"), 6 * kS));
  EXPECT_EQ(t.reason(), "new backend, no successful check yet");
  EXPECT_EQ(t.since_ns(), 5 * kS);  // nothing changed: still down since it came
  // Its first success, after a failure even, brings it up; rise is 3.
  std::optional<HealthTransition> tr = Feed(t, Ok(), 7 * kS);
  ASSERT_TRUE(tr.has_value());
  EXPECT_EQ(tr->from, BackendHealth::kDown);
  EXPECT_EQ(tr->to, BackendHealth::kUp);
  EXPECT_EQ(tr->reason, "first successful check");
  EXPECT_EQ(t.WeightSteps(7 * kS), t.steps());
  // From then on it is an ordinary backend: fall to go down, rise to come back.
  EXPECT_FALSE(Feed(t, Fail(), 8 * kS));
  EXPECT_TRUE(Feed(t, Fail(), 9 * kS));
  EXPECT_FALSE(Feed(t, Ok(), 10 * kS));
  EXPECT_FALSE(Feed(t, Ok(), 11 * kS));
  EXPECT_EQ(Feed(t, Ok(), 12 * kS)->reason, "3 consecutive successes");
}

TEST(HysteresisTest, ChangedRiseAndFallApplyFromTheNextProbe) {
  HealthTracker t(Check(2, 3), Settings(), 0, HealthStart::kUpUnchecked, 0);
  Feed(t, Fail(), kS);
  Feed(t, Fail(), 2 * kS);
  t.Reconfigure(Check(2, 2), Settings(), 0);
  EXPECT_EQ(t.health(), BackendHealth::kUp);  // not until a probe
  EXPECT_EQ(Feed(t, Fail(), 3 * kS)->reason, "3 consecutive failures: connect timeout 500 ms");
  // Raising rise while down: the successes so far still count.
  Feed(t, Ok(), 4 * kS);
  t.Reconfigure(Check(4, 2), Settings(), 0);
  EXPECT_FALSE(Feed(t, Ok(), 5 * kS));
  EXPECT_FALSE(Feed(t, Ok(), 6 * kS));
  EXPECT_EQ(Feed(t, Ok(), 7 * kS)->reason, "4 consecutive successes");
  // Counters carry over a reconfiguration.
  EXPECT_EQ(t.probes(), 7u);
  EXPECT_EQ(t.probe_failures(), 3u);
  EXPECT_EQ(t.transitions(), 2u);
}

TEST(HysteresisTest, TimeGoingBackwardsIsTakenAsTheLastTimeSeen) {
  HealthTracker t(Check(1, 1), Settings(), 0, HealthStart::kUpUnchecked, 100 * kS);
  ASSERT_TRUE(Feed(t, Fail(), 200 * kS));
  std::optional<HealthTransition> tr = t.Observe(Ok(), 50 * kS);
  ASSERT_TRUE(tr.has_value());
  EXPECT_EQ(t.since_ns(), 200 * kS);
}

// Random sequences against every setting: Feed checks, at every probe, that
// what Observe returns is exactly the change of the reported health.
TEST(HysteresisTest, TransitionsAreExactlyTheChangesOfReportedHealth) {
  std::mt19937 rng(10);
  for (int trial = 0; trial < 200; ++trial) {
    const uint32_t rise = 1 + rng() % 3;
    const uint32_t fall = 1 + rng() % 3;
    HealthSettings s;
    s.flap_window_s = rng() % 3 * 30;  // 0 (off), 30, 60
    s.flap_max_transitions = rng() % 5;
    s.hold_down_s = rng() % 3 * 10;
    s.slow_start_steps = 1 + rng() % 6;
    const uint32_t slow_start_s = rng() % 2 * 20;
    const HealthStart start = rng() % 2 ? HealthStart::kUpUnchecked : HealthStart::kDownNew;
    HealthTracker t(Check(rise, fall), s, slow_start_s, start, 0);
    uint64_t now = 0;
    uint64_t reported = 0;
    const int p_ok = static_cast<int>(rng() % 100);
    for (int i = 0; i < 500; ++i) {
      now += (1 + rng() % 3000) * kMs;
      std::optional<HealthTransition> tr;
      if (rng() % 10 == 0) {
        const BackendHealth before = t.health();
        tr = t.Advance(now);
        if (tr.has_value()) {
          EXPECT_EQ(tr->from, BackendHealth::kDown);
          EXPECT_EQ(tr->to, BackendHealth::kUp);
        } else {
          EXPECT_EQ(t.health(), before);
        }
      } else {
        tr = Feed(t, static_cast<int>(rng() % 100) < p_ok ? Ok() : Fail(), now);
      }
      reported += tr.has_value();
      ASSERT_EQ(t.transitions(), reported);
      if (t.health() == BackendHealth::kDown) { ASSERT_EQ(t.WeightSteps(now), 0u); }
      if (t.held_down()) { ASSERT_EQ(t.health(), BackendHealth::kDown); }
      std::optional<uint64_t> next = t.NextChangeNs(now);
      if (next.has_value()) { ASSERT_GE(*next, now); }
    }
  }
}

// ---------------------------------------------------------------------------
// Flap hold-down.

// A backend that fails for a second, then answers for a second, and so on,
// probed every 100 ms with rise 2 and fall 3: its hysteresis state changes
// every second (0.2 s down, 1.1 s up, 2.2 s down, ...).
struct Flapper {
  HealthTracker tracker;
  uint64_t probe = 0;  // probes sent, one per 100 ms from 0
  std::vector<std::pair<uint64_t, HealthTransition>> reported;

  explicit Flapper(HealthSettings s, uint32_t slow_start_s = 0)
      : tracker(Check(2, 3), s, slow_start_s, HealthStart::kUpUnchecked, 0) {}
  uint64_t now() const { return probe * 100 * kMs; }
  // Probes until `until_ns`, flapping (failing in even seconds) or healthy.
  void Run(uint64_t until_ns, bool flapping) {
    while (now() < until_ns) {
      const bool ok = !flapping || (probe / 10) % 2 == 1;
      std::optional<HealthTransition> tr = Feed(tracker, ok ? Ok() : Fail(), now());
      if (tr.has_value()) reported.emplace_back(now(), *tr);
      if (tracker.held_down()) { EXPECT_EQ(tracker.health(), BackendHealth::kDown); }
      ++probe;
    }
  }
};

TEST(FlapTest, ThirtySecondsOfFlappingCostFlapMaxPlusOneTransitionsThenOneAfterHoldDown) {
  // Defaults: window 60 s, 4 transitions, hold-down 30 s.
  Flapper f(Settings(60, 4, 30));
  f.Run(30 * kS, /*flapping=*/true);
  // max + 1 = 5: four allowed, the fifth (up -> down) is the hold-down.
  ASSERT_EQ(f.reported.size(), 5u);
  const uint64_t expected_at[] = {200 * kMs, 1100 * kMs, 2200 * kMs, 3100 * kMs, 4200 * kMs};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(f.reported[i].first, expected_at[i]) << i;
    EXPECT_EQ(f.reported[i].second.to, i % 2 == 0 ? BackendHealth::kDown : BackendHealth::kUp);
  }
  EXPECT_EQ(f.reported[0].second.reason, "3 consecutive failures: connect timeout 500 ms");
  EXPECT_EQ(f.reported[1].second.reason, "2 consecutive successes");
  EXPECT_EQ(f.reported[4].second.reason,
            "flapping: 5 transitions in 60 s; held down until up for 30 s "
            "(after 3 consecutive failures: connect timeout 500 ms)");
  EXPECT_TRUE(f.tracker.held_down());
  EXPECT_EQ(f.tracker.health(), BackendHealth::kDown);
  EXPECT_EQ(f.tracker.WeightSteps(f.now()), 0u);

  // The flap's last second (29 s) answered, and from 30 s it keeps answering:
  // up again at 29.1 s, so the hold-down may end at 59.1 s.
  f.Run(40 * kS, /*flapping=*/false);
  EXPECT_EQ(f.reported.size(), 5u);
  EXPECT_EQ(f.tracker.NextChangeNs(f.now()), 59100 * kMs);
  f.Run(59100 * kMs, false);
  EXPECT_EQ(f.reported.size(), 5u);
  EXPECT_TRUE(f.tracker.held_down());
  f.Run(59200 * kMs, false);
  ASSERT_EQ(f.reported.size(), 6u);
  EXPECT_EQ(f.reported[5].first, 59100 * kMs);
  EXPECT_EQ(f.reported[5].second.to, BackendHealth::kUp);
  EXPECT_EQ(f.reported[5].second.reason, "stable for 30 s after flapping");
  EXPECT_FALSE(f.tracker.held_down());
  EXPECT_EQ(f.tracker.NextChangeNs(f.now()), std::nullopt);
  EXPECT_EQ(f.tracker.transitions(), 6u);
}

TEST(FlapTest, AnHourOfFlappingCostsNoMoreThanThirtySeconds) {
  Flapper f(Settings(60, 4, 30));
  f.Run(3600 * kS, true);
  EXPECT_EQ(f.reported.size(), 5u);  // held down since 4.2 s: failures keep it so
  f.Run(3700 * kS, false);
  EXPECT_EQ(f.reported.size(), 6u);
  EXPECT_EQ(f.reported.back().first, (3600 - 1 + 30) * kS + 100 * kMs);
}

TEST(FlapTest, OddMaxIsHeldOnAnUpTransitionWhichIsNotReported) {
  Flapper f(Settings(60, 3, 30));
  f.Run(30 * kS, true);
  // Three reported (down, up, down); the fourth flap (up, at 3.1 s) holds it.
  ASSERT_EQ(f.reported.size(), 3u);
  EXPECT_TRUE(f.tracker.held_down());
  EXPECT_EQ(f.tracker.since_ns(), 2200 * kMs);
  EXPECT_EQ(f.tracker.reason(),
            "flapping: 4 transitions in 60 s; held down until up for 30 s "
            "(after 2 consecutive successes)");
}

TEST(FlapTest, AFailedProbeRestartsTheHoldDownClockEvenIfTooFewToTakeItDown) {
  // rise = fall = 1: every probe that differs is a transition.
  HealthTracker t(Check(1, 3), Settings(60, 1, 30), 0, HealthStart::kUpUnchecked, 0);
  Feed(t, Fail(), 1 * kS);
  Feed(t, Fail(), 2 * kS);
  ASSERT_TRUE(Feed(t, Fail(), 3 * kS));      // transition 1: down
  EXPECT_FALSE(Feed(t, Ok(), 4 * kS));       // transition 2: up, held
  ASSERT_TRUE(t.held_down());
  EXPECT_EQ(t.NextChangeNs(4 * kS), 34 * kS);
  EXPECT_FALSE(Feed(t, Ok(), 20 * kS));
  EXPECT_FALSE(Feed(t, Fail(), 24 * kS));    // one failure: still up, clock stops
  EXPECT_EQ(t.health(), BackendHealth::kDown);
  EXPECT_EQ(t.NextChangeNs(24 * kS), std::nullopt);
  EXPECT_FALSE(t.Advance(40 * kS));
  EXPECT_FALSE(Feed(t, Ok(), 41 * kS));      // the clock starts again here
  EXPECT_EQ(t.NextChangeNs(41 * kS), 71 * kS);
  EXPECT_FALSE(Feed(t, Ok(), 70 * kS));
  std::optional<HealthTransition> tr = Feed(t, Ok(), 71 * kS);
  ASSERT_TRUE(tr.has_value());
  EXPECT_EQ(tr->reason, "stable for 30 s after flapping");
}

TEST(FlapTest, AdvanceEndsADueHoldDownWithoutAProbeOnceAndEmptiesTheHistory) {
  HealthTracker t(Check(1, 1), Settings(60, 2, 30), 0, HealthStart::kUpUnchecked, 0);
  Feed(t, Fail(), 1 * kS);
  Feed(t, Ok(), 2 * kS);
  std::optional<HealthTransition> held = Feed(t, Fail(), 3 * kS);
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->reason.rfind("flapping: 3 transitions in 60 s", 0), 0u) << held->reason;
  EXPECT_EQ(t.NextChangeNs(3 * kS), std::nullopt);  // down: nothing until a probe
  EXPECT_FALSE(Feed(t, Ok(), 4 * kS));
  EXPECT_EQ(t.NextChangeNs(5 * kS), 34 * kS);
  EXPECT_FALSE(t.Advance(34 * kS - 1));
  EXPECT_EQ(t.NextChangeNs(34 * kS - 1), 34 * kS);
  EXPECT_EQ(t.NextChangeNs(40 * kS), 40 * kS);  // overdue: now
  std::optional<HealthTransition> tr = t.Advance(40 * kS);
  ASSERT_TRUE(tr.has_value());
  EXPECT_EQ(tr->from, BackendHealth::kDown);
  EXPECT_EQ(tr->to, BackendHealth::kUp);
  EXPECT_EQ(t.since_ns(), 40 * kS);
  EXPECT_FALSE(t.Advance(41 * kS));
  EXPECT_FALSE(t.held_down());
  // History emptied: two more transitions are allowed, the third holds again,
  // though all are within 60 s of the first flaps.
  EXPECT_TRUE(Feed(t, Fail(), 42 * kS));
  EXPECT_TRUE(Feed(t, Ok(), 43 * kS));
  EXPECT_FALSE(t.held_down());
  EXPECT_TRUE(Feed(t, Fail(), 44 * kS));
  EXPECT_TRUE(t.held_down());
}

TEST(FlapTest, TheWindowCountsTransitionsOfTheLastFlapWindowSeconds) {
  // max 4 in 60 s, rise = fall = 1: a transition every 15 s keeps 4 in any 60
  // s (the one 60 s back has left the window); every 14 s makes 5.
  for (uint64_t spacing : {15u, 14u}) {
    HealthTracker t(Check(1, 1), Settings(60, 4, 30), 0, HealthStart::kUpUnchecked, 0);
    int reported = 0;
    for (int i = 0; i < 40 && !t.held_down(); ++i) {
      reported += Feed(t, i % 2 == 0 ? Fail() : Ok(), (1 + i * spacing) * kS).has_value();
    }
    if (spacing == 15) {
      EXPECT_FALSE(t.held_down());
      EXPECT_EQ(reported, 40);
    } else {
      EXPECT_TRUE(t.held_down());
      EXPECT_EQ(reported, 5);
    }
  }
}

TEST(FlapTest, WindowZeroTurnsHoldDownOff) {
  HealthTracker t(Check(1, 1), Settings(0, 0, 30), 0, HealthStart::kUpUnchecked, 0);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(Feed(t, i % 2 == 0 ? Fail() : Ok(), i * kS));
  EXPECT_FALSE(t.held_down());
}

TEST(FlapTest, NewBackendsFirstSuccessIsAFlapTransition) {
  HealthTracker t(Check(1, 1), Settings(60, 1, 30), 0, HealthStart::kDownNew, 0);
  EXPECT_TRUE(Feed(t, Ok(), kS));                  // 1: first success
  std::optional<HealthTransition> tr = Feed(t, Fail(), 2 * kS);  // 2: held
  ASSERT_TRUE(tr.has_value());
  EXPECT_TRUE(t.held_down());
  EXPECT_EQ(tr->reason, "flapping: 2 transitions in 60 s; held down until up for 30 s "
                        "(after 1 failure: connect timeout 500 ms)");
}

TEST(FlapTest, HoldDownZeroEndsAtTheFirstUp) {
  HealthTracker t(Check(1, 1), Settings(60, 1, 0), 0, HealthStart::kUpUnchecked, 0);
  EXPECT_TRUE(Feed(t, Fail(), kS));
  std::optional<HealthTransition> tr = Feed(t, Ok(), 2 * kS);  // held and freed at once
  ASSERT_TRUE(tr.has_value());
  EXPECT_EQ(tr->reason, "stable for 0 s after flapping");
  EXPECT_FALSE(t.held_down());
}

// ---------------------------------------------------------------------------
// Slow start.

TEST(SlowStartTest, RampStepsAndNextChangeAfterRecovery) {
  HealthTracker t(Check(1, 1), Settings(60, 10, 30, 5), 50, HealthStart::kUpUnchecked, 0);
  ASSERT_TRUE(Feed(t, Fail(), 0));
  EXPECT_EQ(t.WeightSteps(0), 0u);
  EXPECT_EQ(t.NextChangeNs(0), std::nullopt);
  const uint64_t up = 100 * kS;
  ASSERT_TRUE(Feed(t, Ok(), up));
  // Step k from up + (k - 1) x 50 s / 5.
  for (uint32_t k = 1; k <= 4; ++k) {
    const uint64_t from = up + (k - 1) * 10 * kS;
    EXPECT_EQ(t.WeightSteps(from), k);
    EXPECT_EQ(t.WeightSteps(from + 10 * kS - 1), k);
    EXPECT_TRUE(t.Ramping(from));
    EXPECT_EQ(t.NextChangeNs(from), from + 10 * kS);
    EXPECT_EQ(t.NextChangeNs(from + 3 * kS), from + 10 * kS);
  }
  EXPECT_EQ(t.WeightSteps(up + 40 * kS), 5u);
  EXPECT_FALSE(t.Ramping(up + 40 * kS));
  EXPECT_EQ(t.NextChangeNs(up + 40 * kS), std::nullopt);
  EXPECT_EQ(t.WeightSteps(up + 500 * kS), 5u);
  // Probes during the ramp do not restart it.
  EXPECT_FALSE(Feed(t, Ok(), up + 15 * kS));
  EXPECT_EQ(t.WeightSteps(up + 15 * kS), 2u);
}

TEST(SlowStartTest, UnevenStepsRoundDown) {
  HealthTracker t(Check(1, 1), Settings(60, 10, 30, 3), 7, HealthStart::kDownNew, 0);
  ASSERT_TRUE(Feed(t, Ok(), kS));  // a new backend ramps from its first success
  EXPECT_EQ(t.WeightSteps(kS), 1u);
  EXPECT_EQ(t.NextChangeNs(kS), kS + 2'333'333'333);
  EXPECT_EQ(t.WeightSteps(kS + 2'333'333'332), 1u);
  EXPECT_EQ(t.WeightSteps(kS + 2'333'333'333), 2u);
  EXPECT_EQ(t.NextChangeNs(kS + 2'333'333'333), kS + 4'666'666'666);
  EXPECT_EQ(t.WeightSteps(kS + 4'666'666'666), 3u);
}

TEST(SlowStartTest, LongestRampHasNoOverflow) {
  HealthTracker t(Check(1, 1), Settings(60, 10, 30, kMaxSlowStartSteps), UINT32_MAX,
                  HealthStart::kDownNew, 0);
  ASSERT_TRUE(Feed(t, Ok(), kS));
  const uint64_t ramp = uint64_t{UINT32_MAX} * kS;  // 4.29e18 ns
  EXPECT_EQ(t.NextChangeNs(kS), kS + ramp / 20);
  EXPECT_EQ(t.WeightSteps(kS + ramp / 20 * 19 - 1), 19u);
  EXPECT_EQ(t.WeightSteps(kS + ramp / 20 * 19), 20u);
}

TEST(SlowStartTest, OffServesAllStepsWhenUpAndNoneWhenDown) {
  HealthTracker t(Check(1, 1), Settings(), 0, HealthStart::kDownNew, 0);
  EXPECT_EQ(t.WeightSteps(0), 0u);
  ASSERT_TRUE(Feed(t, Ok(), kS));
  EXPECT_EQ(t.WeightSteps(kS), t.steps());
  EXPECT_FALSE(t.Ramping(kS));
  EXPECT_EQ(t.NextChangeNs(kS), std::nullopt);
}

TEST(SlowStartTest, GoingDownMidRampStopsItAndComingBackStartsAfresh) {
  HealthTracker t(Check(1, 1), Settings(60, 10, 30, 4), 40, HealthStart::kDownNew, 0);
  Feed(t, Ok(), 0);
  EXPECT_EQ(t.WeightSteps(25 * kS), 3u);
  Feed(t, Fail(), 25 * kS);
  EXPECT_EQ(t.WeightSteps(25 * kS), 0u);
  EXPECT_EQ(t.NextChangeNs(25 * kS), std::nullopt);
  Feed(t, Ok(), 100 * kS);
  EXPECT_EQ(t.WeightSteps(100 * kS), 1u);
  EXPECT_EQ(t.NextChangeNs(100 * kS), 110 * kS);
}

TEST(SlowStartTest, ReconfigureRetimesARampUnderWay) {
  HealthTracker t(Check(1, 1), Settings(60, 10, 30, 5), 50, HealthStart::kDownNew, 0);
  Feed(t, Ok(), 0);
  EXPECT_EQ(t.WeightSteps(25 * kS), 3u);
  t.Reconfigure(Check(1, 1), Settings(60, 10, 30, 10), 50);  // 10 steps of 5 s
  EXPECT_EQ(t.steps(), 10u);
  EXPECT_EQ(t.WeightSteps(25 * kS), 6u);
  EXPECT_EQ(t.NextChangeNs(25 * kS), 30 * kS);
  t.Reconfigure(Check(1, 1), Settings(60, 10, 30, 10), 0);  // slow start off: full
  EXPECT_EQ(t.WeightSteps(25 * kS), 10u);
  EXPECT_EQ(t.NextChangeNs(25 * kS), std::nullopt);
}

TEST(SlowStartTest, StepsAreClampedToTheirRange) {
  HealthTracker zero(Check(1, 1), Settings(60, 4, 30, 0), 10, HealthStart::kUpUnchecked, 0);
  EXPECT_EQ(zero.steps(), 1u);
  EXPECT_EQ(zero.WeightSteps(0), 1u);
  HealthTracker many(Check(1, 1), Settings(60, 4, 30, 1000), 10, HealthStart::kUpUnchecked, 0);
  EXPECT_EQ(many.steps(), kMaxSlowStartSteps);
}

TEST(SlowStartTest, TheEndOfAHoldDownRamps) {
  HealthTracker t(Check(1, 1), Settings(60, 1, 30, 5), 50, HealthStart::kUpUnchecked, 0);
  Feed(t, Fail(), kS);
  Feed(t, Ok(), 2 * kS);  // held, clock from 2 s
  EXPECT_EQ(t.WeightSteps(2 * kS), 0u);
  EXPECT_FALSE(t.Ramping(2 * kS));
  ASSERT_TRUE(t.Advance(32 * kS));
  EXPECT_EQ(t.WeightSteps(32 * kS), 1u);
  EXPECT_EQ(t.NextChangeNs(32 * kS), 42 * kS);
}

// ---------------------------------------------------------------------------
// Rebuild limiter.

TEST(RebuildLimiterTest, FirstAtOnceThenOnePerInterval) {
  RebuildLimiter l(1 * kS);
  EXPECT_FALSE(l.wanted());
  EXPECT_FALSE(l.Due(0));
  l.Request();
  EXPECT_TRUE(l.wanted());
  EXPECT_EQ(l.NextNs(), 0u);
  EXPECT_TRUE(l.Due(5 * kS));
  l.Done(5 * kS);
  EXPECT_FALSE(l.wanted());
  EXPECT_FALSE(l.Due(10 * kS));  // not wanted
  l.Request();
  l.Request();  // coalesces
  EXPECT_EQ(l.NextNs(), 6 * kS);
  EXPECT_FALSE(l.Due(5 * kS + 200 * kMs));
  EXPECT_FALSE(l.Due(6 * kS - 1));
  EXPECT_TRUE(l.Due(6 * kS));
  l.Done(6 * kS + 500 * kMs);
  l.Request();
  EXPECT_EQ(l.NextNs(), 7 * kS + 500 * kMs);
  l.set_interval_ns(3 * kS);  // applies to the rebuild already wanted
  EXPECT_EQ(l.NextNs(), 9 * kS + 500 * kMs);
  EXPECT_FALSE(l.Due(9 * kS));
}

TEST(RebuildLimiterTest, IntervalZeroIsAlwaysDueWhenWanted) {
  RebuildLimiter l(0);
  l.Request();
  EXPECT_TRUE(l.Due(3 * kS));
  l.Done(3 * kS);
  EXPECT_FALSE(l.Due(3 * kS));
  l.Request();
  EXPECT_TRUE(l.Due(3 * kS));
  EXPECT_TRUE(l.Due(1 * kS));  // even a time before the last rebuild
}

// ---------------------------------------------------------------------------
// Effective weights, and what the table builders make of them.

TEST(EffectiveWeightTest, EveryCase) {
  EXPECT_EQ(EffectiveWeight(10, 0, 5, false), 0u);
  EXPECT_EQ(EffectiveWeight(10, 0, 5, true), 0u);
  EXPECT_EQ(EffectiveWeight(10, 5, 5, false), 10u);
  EXPECT_EQ(EffectiveWeight(10, 5, 5, true), 50u);
  EXPECT_EQ(EffectiveWeight(10, 2, 5, true), 20u);
  EXPECT_EQ(EffectiveWeight(0, 5, 5, true), 0u);  // draining stays draining
  EXPECT_EQ(EffectiveWeight(kMaxWeight, kMaxSlowStartSteps, kMaxSlowStartSteps, true),
            kMaxEffectiveWeight);
  // Not ramping but partial (a scheme that cannot scale): rounded up, never 0.
  EXPECT_EQ(EffectiveWeight(10, 1, 5, false), 2u);
  EXPECT_EQ(EffectiveWeight(7, 3, 5, false), 5u);
  EXPECT_EQ(EffectiveWeight(1, 1, 5, false), 1u);
  // Out of range: served above steps is full; steps 0 is 1.
  EXPECT_EQ(EffectiveWeight(10, 9, 5, true), 50u);
  EXPECT_EQ(EffectiveWeight(10, 9, 5, false), 10u);
  EXPECT_EQ(EffectiveWeight(10, 1, 0, false), 10u);
  EXPECT_EQ(EffectiveWeight(UINT32_MAX, 20, 20, true), UINT32_MAX);  // saturates
}

LookupTable MustBuild(absl::StatusOr<LookupTable> t) {
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : LookupTable();
}

std::vector<BackendSpec> Scaled(std::vector<BackendSpec> b, uint32_t factor) {
  for (BackendSpec& s : b) s.weight *= factor;
  return b;
}

// What slow start relies on: scaling every weight of a VIP by the same factor
// (the steps) leaves its table exactly as it was, so the fully-up backends'
// slots do not move when a ramp begins, and the ramp's end moves nothing.
// Weight sets for both of Maglev's schedules (round robin for even weights,
// the heap for skewed ones), with the largest configured weight.
TEST(SlowStartTablesTest, ScalingEveryWeightLeavesMaglevAndRendezvousTablesIdentical) {
  std::vector<std::vector<BackendSpec>> sets = {
      {{"a", 1}, {"b", 1}, {"c", 1}, {"d", 0}},
      {{"web-1", 3}, {"web-2", 5}, {"web-3", 3}, {"web-4", 7}, {"web-5", 1}},
      {{"big", kMaxWeight}, {"tiny", 1}, {"mid", 300}, {"odd", 7}},
  };
  // One heavy backend among many light ones: Maglev's heap schedule.
  std::vector<BackendSpec> skewed = {{"heavy", kMaxWeight}};
  for (uint32_t i = 0; i < 50; ++i) skewed.push_back({absl::StrFormat("light-%u", i), 1 + i % 3});
  sets.push_back(skewed);
  for (const std::vector<BackendSpec>& b : sets) {
    const LookupTable maglev = MustBuild(BuildMaglevTable(b, 65537));
    const LookupTable rendezvous = MustBuild(BuildRendezvousTable(b, 65537));
    for (uint32_t factor = 2; factor <= kMaxSlowStartSteps; ++factor) {
      const std::vector<BackendSpec> s = Scaled(b, factor);
      EXPECT_EQ(MustBuild(BuildMaglevTable(s, 65537)).fingerprint(), maglev.fingerprint())
          << b[0].name << " x" << factor;
      EXPECT_EQ(MustBuild(BuildRendezvousTable(s, 65537)).fingerprint(),
                rendezvous.fingerprint())
          << b[0].name << " x" << factor;
    }
  }
}

// A ramp as the health task runs it: the ramping backend's share grows step
// by step, and at the last step the VIP's table is the one without a ramp.
TEST(SlowStartTablesTest, ARampThroughMaglevEndsOnTheUnrampedTable) {
  const std::vector<BackendSpec> configured = {{"a", 2}, {"b", 3}, {"c", 1}, {"new", 2}};
  const uint32_t steps = 5;
  const LookupTable final_table = MustBuild(BuildMaglevTable(configured));
  uint32_t last_entries = 0;
  for (uint32_t k = 1; k <= steps; ++k) {
    // Still "ramping" at the last step: the VIP's flag drops only after it.
    std::vector<BackendSpec> b = configured;
    for (BackendSpec& s : b) {
      s.weight = EffectiveWeight(s.weight, s.name == "new" ? k : steps, steps, true);
    }
    const LookupTable t = MustBuild(BuildMaglevTable(b));
    const uint32_t entries = t.EntryCounts()[3];
    EXPECT_GT(entries, last_entries) << "step " << k;
    last_entries = entries;
    if (k == steps) { EXPECT_EQ(t.fingerprint(), final_table.fingerprint()); }
  }
  // Step 1 of 5 serves 2 of (10 + 15 + 5 + 2): a sixteenth, not a quarter.
  std::vector<BackendSpec> first = configured;
  for (BackendSpec& s : first) {
    s.weight = EffectiveWeight(s.weight, s.name == "new" ? 1 : steps, steps, true);
  }
  EXPECT_NEAR(MustBuild(BuildMaglevTable(first)).EntryCounts()[3], 65537.0 / 16,
              65537.0 / 16 * 0.05);
}

TEST(SlowStartTablesTest, BuildersTakeScaledWeightsExceptTheRing) {
  const std::vector<BackendSpec> top = {{"a", kMaxEffectiveWeight}, {"b", 1}, {"c", 20}};
  for (auto build : {BuildMaglevTable, BuildRendezvousTable, BuildModuloTable}) {
    const LookupTable t = MustBuild(build(top, 65537));
    // Shares follow the weights: b and c get their few slots, a the rest.
    std::vector<uint32_t> counts = t.EntryCounts();
    EXPECT_GT(counts[0], 65400u);
    EXPECT_LT(counts[1], 10u);
  }
  const std::vector<BackendSpec> over = {{"a", kMaxEffectiveWeight + 1}, {"b", 1}};
  for (auto build : {BuildMaglevTable, BuildRendezvousTable, BuildModuloTable}) {
    absl::StatusOr<LookupTable> t = build(over, 65537);
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find("above the maximum 1310700"), std::string::npos)
        << t.status();
  }
  absl::StatusOr<LookupTable> ring =
      BuildRingTable(std::vector<BackendSpec>{{"a", kMaxWeight + 1}, {"b", 1}}, 65537, 1);
  ASSERT_FALSE(ring.ok());
  EXPECT_NE(ring.status().message().find("above 65535, the most a ring takes"),
            std::string::npos)
      << ring.status();
  EXPECT_TRUE(BuildRingTable(std::vector<BackendSpec>{{"a", kMaxWeight}, {"b", 1}}, 65537, 1).ok());
}

}  // namespace
}  // namespace maglb
