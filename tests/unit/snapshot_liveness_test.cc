// SnapshotPublisher's worker liveness rounds on a real EAL (no hugepages) and
// real worker lcores: a worker that passes its quiescent points passes every
// round; one that stops (but stays online) holds every later round up, and
// lets it pass as soon as it goes on; an offline worker holds nothing up;
// Publish goes on beside the rounds.
#include <rte_eal.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_pause.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dataplane/snapshot.h"
#include "gtest/gtest.h"
#include "test_eal.h"
#include "maglb/config.h"
#include "maglb/lb_state.h"

namespace maglb {
namespace {

// What the test tells a worker to do.
enum class Mode : int { kRun, kStall, kOffline, kStop };

struct Worker {
  SnapshotPublisher* publisher = nullptr;
  uint32_t id = 0;
  std::atomic<Mode> mode{Mode::kRun};
  std::atomic<Mode> in_mode{Mode::kRun};  // the mode the worker is in now
  std::atomic<uint64_t> passes{0};
};

// A worker loop reduced to its RCU part: Quiescent every pass while running;
// spinning online without a quiescent point while stalled (a worker stuck in
// a pass); offline, as a worker that stops polling.
int WorkerMain(void* arg) {
  auto* w = static_cast<Worker*>(arg);
  w->publisher->ReaderOnline(w->id);
  bool online = true;
  for (;;) {
    const Mode mode = w->mode.load(std::memory_order_acquire);
    if (mode == Mode::kStop) break;
    if (mode == Mode::kOffline && online) {
      w->publisher->ReaderOffline(w->id);
      online = false;
    } else if (mode != Mode::kOffline && !online) {
      w->publisher->ReaderOnline(w->id);
      online = true;
    }
    if (mode == Mode::kRun) {
      (void)w->publisher->Current();
      w->publisher->Quiescent(w->id);
      w->passes.fetch_add(1, std::memory_order_relaxed);
    }
    w->in_mode.store(mode, std::memory_order_release);
    rte_pause();
  }
  if (online) w->publisher->ReaderOffline(w->id);
  return 0;
}

// Sets a worker's mode and waits until it is in it (one pass).
void Switch(Worker& w, Mode mode) {
  w.mode.store(mode, std::memory_order_release);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (w.in_mode.load(std::memory_order_acquire) != mode) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the worker did not switch";
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// Whether the round passes within a generous 20 s (a loaded build machine).
bool PassesSoon(const SnapshotPublisher& p, uint64_t token) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!p.LivenessRoundPassed(token)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

// Whether the round stays unpassed for all of 200 ms (checked throughout).
bool StaysUnpassed(const SnapshotPublisher& p, uint64_t token) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (std::chrono::steady_clock::now() < until) {
    if (p.LivenessRoundPassed(token)) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

class SnapshotLivenessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { eal_ok_ = testing::StartTestEal("liveness_test", 64, "(0-2)@(0-1)"); }

  void SetUp() override {
    ASSERT_TRUE(eal_ok_) << "rte_eal_init failed";
    ASSERT_GE(rte_lcore_count(), 3u);
    absl::StatusOr<std::unique_ptr<SnapshotPublisher>> p = SnapshotPublisher::Create(2);
    ASSERT_TRUE(p.ok()) << p.status();
    publisher_ = *std::move(p);
  }
  void TearDown() override {
    for (Worker& w : workers_) w.mode.store(Mode::kStop, std::memory_order_release);
    rte_eal_mp_wait_lcore();
  }

  void Launch(Worker& w, unsigned lcore) {
    w.publisher = publisher_.get();
    w.id = static_cast<uint32_t>(&w - workers_);
    ASSERT_EQ(rte_eal_remote_launch(WorkerMain, &w, lcore), 0);
    // Online and through its first pass.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (w.passes.load() == 0) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the worker did not start";
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  static bool eal_ok_;
  std::unique_ptr<SnapshotPublisher> publisher_;
  Worker workers_[2];  // ids 0 and 1, on lcores 1 and 2; stopped in TearDown
};
bool SnapshotLivenessTest::eal_ok_ = false;

TEST_F(SnapshotLivenessTest, WithNoWorkerOnlineEveryRoundPasses) {
  EXPECT_TRUE(publisher_->LivenessRoundPassed(publisher_->StartLivenessRound()));
}

TEST_F(SnapshotLivenessTest, RunningWorkersPassEveryRound) {
  Worker& a = workers_[0];
  Worker& b = workers_[1];
  ASSERT_NO_FATAL_FAILURE(Launch(a, 1));
  ASSERT_NO_FATAL_FAILURE(Launch(b, 2));
  for (int round = 0; round < 100; ++round) {
    const uint64_t token = publisher_->StartLivenessRound();
    ASSERT_TRUE(PassesSoon(*publisher_, token)) << "round " << round;
  }
  // Tokens grow: a later round is not passed by an earlier pass.
  const uint64_t t1 = publisher_->StartLivenessRound();
  const uint64_t t2 = publisher_->StartLivenessRound();
  EXPECT_GT(t2, t1);
}

TEST_F(SnapshotLivenessTest, AStalledWorkerHoldsUpLaterRoundsUntilItGoesOn) {
  Worker& a = workers_[0];
  Worker& b = workers_[1];
  ASSERT_NO_FATAL_FAILURE(Launch(a, 1));
  ASSERT_NO_FATAL_FAILURE(Launch(b, 2));
  const uint64_t before = publisher_->StartLivenessRound();
  ASSERT_TRUE(PassesSoon(*publisher_, before));
  ASSERT_NO_FATAL_FAILURE(Switch(b, Mode::kStall));  // online, no quiescent point
  const uint64_t stalled = publisher_->StartLivenessRound();
  EXPECT_TRUE(StaysUnpassed(*publisher_, stalled));
  // The round before the stall stays passed; a yet later one is held up too.
  EXPECT_TRUE(publisher_->LivenessRoundPassed(before));
  const uint64_t later = publisher_->StartLivenessRound();
  EXPECT_FALSE(publisher_->LivenessRoundPassed(later));
  EXPECT_GT(a.passes.load(), 0u);
  ASSERT_NO_FATAL_FAILURE(Switch(b, Mode::kRun));
  EXPECT_TRUE(PassesSoon(*publisher_, stalled));
  EXPECT_TRUE(PassesSoon(*publisher_, later));
}

TEST_F(SnapshotLivenessTest, AnOfflineWorkerHoldsNothingUp) {
  Worker& a = workers_[0];
  Worker& b = workers_[1];
  ASSERT_NO_FATAL_FAILURE(Launch(a, 1));
  ASSERT_NO_FATAL_FAILURE(Launch(b, 2));
  ASSERT_NO_FATAL_FAILURE(Switch(b, Mode::kStall));
  const uint64_t stalled = publisher_->StartLivenessRound();
  EXPECT_TRUE(StaysUnpassed(*publisher_, stalled));
  // Going offline (without a quiescent point) lets the round pass.
  ASSERT_NO_FATAL_FAILURE(Switch(b, Mode::kOffline));
  EXPECT_TRUE(PassesSoon(*publisher_, stalled));
  EXPECT_TRUE(PassesSoon(*publisher_, publisher_->StartLivenessRound()));
  // Every worker offline: rounds pass.
  ASSERT_NO_FATAL_FAILURE(Switch(a, Mode::kOffline));
  EXPECT_TRUE(publisher_->LivenessRoundPassed(publisher_->StartLivenessRound()));
  // A worker that comes online has passed the rounds started before, even
  // stalled from the start.
  const uint64_t while_offline = publisher_->StartLivenessRound();
  ASSERT_NO_FATAL_FAILURE(Switch(a, Mode::kStall));
  EXPECT_TRUE(publisher_->LivenessRoundPassed(while_offline));
  EXPECT_TRUE(StaysUnpassed(*publisher_, publisher_->StartLivenessRound()));
  ASSERT_NO_FATAL_FAILURE(Switch(a, Mode::kOffline));
  // Back online, stalled: held up again.
  ASSERT_NO_FATAL_FAILURE(Switch(b, Mode::kStall));
  const uint64_t again = publisher_->StartLivenessRound();
  EXPECT_TRUE(StaysUnpassed(*publisher_, again));
  ASSERT_NO_FATAL_FAILURE(Switch(b, Mode::kRun));
  EXPECT_TRUE(PassesSoon(*publisher_, again));
}

TEST_F(SnapshotLivenessTest, PublishGoesOnBesideTheRounds) {
  Worker& a = workers_[0];
  Worker& b = workers_[1];
  ASSERT_NO_FATAL_FAILURE(Launch(a, 1));
  ASSERT_NO_FATAL_FAILURE(Launch(b, 2));
  std::atomic<bool> done{false};
  std::atomic<int> rounds{0};
  std::atomic<bool> round_failed{false};
  // A second control thread checking rounds while this one publishes.
  std::thread checker([&] {
    while (!done.load()) {
      if (!PassesSoon(*publisher_, publisher_->StartLivenessRound())) round_failed = true;
      ++rounds;
    }
  });
  Config config;
  for (int i = 0; i < 200; ++i) {
    absl::StatusOr<std::unique_ptr<const LbState>> s = BuildLbState(config, nullptr, LbStateOptions{});
    ASSERT_TRUE(s.ok()) << s.status();
    const LbState* next = s->get();
    publisher_->Publish(*std::move(s));
    ASSERT_EQ(publisher_->Current(), next);
  }
  done = true;
  checker.join();
  EXPECT_FALSE(round_failed.load());
  EXPECT_GT(rounds.load(), 0);
}

}  // namespace
}  // namespace maglb
