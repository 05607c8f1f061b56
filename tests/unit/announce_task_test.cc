// AnnounceTask against real parts: the kernel's routing tables in a network
// namespace of the test's own (read back by iproute2, a dissector not ours),
// the real Rtnetlink, a real EventLoop driven from the test's thread, and a
// real SnapshotPublisher on DPDK's EAL (no hugepages) with a worker lcore
// that passes its quiescent points, or stops passing them (a stall), as the
// test says. Each test unshares into a fresh namespace and goes back by setns
// in TearDown; the fresh one, with every route in it, is gone after that.
// Needs root (CAP_NET_ADMIN); skipped without it.
#include <fcntl.h>
#include <net/if.h>
#include <rte_eal.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <sched.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "control/announce_task.h"
#include "control/control_stats.h"
#include "control/event_loop.h"
#include "dataplane/snapshot.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_eal.h"
#include "kernel_routes.h"
#include "maglb/config.h"
#include "maglb/lb_state.h"

namespace maglb {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

using testing::Shell;

constexpr uint32_t kTable = 4242;
constexpr uint8_t kProto = 249;
// Generous: a loaded build machine. Every wait is bounded polling on what
// the kernel or the stats show, never a duration asserted.
constexpr auto kPatience = std::chrono::seconds(20);

IpAddress Ip(std::string_view s) { return *IpAddress::Parse(s); }

// A route as iproute2 shows it: dst, dev, protocol.
using Shown = std::tuple<std::string, std::string, std::string>;

// Every route of both families in `table`, read by iproute2 (from a dump of
// every table: asked for one table that does not exist, ip fails).
std::set<Shown> RoutesIn(uint32_t table) {
  std::set<Shown> routes;
  for (const nlohmann::json& r : testing::RouteObjectsIn(table)) routes.emplace(r.value("dst", ""), r.value("dev", ""), r.value("protocol", ""));
  return routes;
}

std::set<Shown> Served(const std::string& dev = "lo", const std::string& proto = "249") {
  return {{"198.51.100.1", dev, proto}, {"2001:db8::1", dev, proto}};
}

// Threads of this process now (the stall watch is one).
int ThreadCount() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

// --- The worker: a worker loop reduced to its RCU part ---

enum class Mode : int { kOffline, kRun, kStall, kStop };

struct Worker {
  SnapshotPublisher* publisher = nullptr;
  std::atomic<Mode> mode{Mode::kOffline};
  std::atomic<Mode> in_mode{Mode::kStop};  // the mode the worker is in now
};

// Offline (not registered) until told to run; running: a quiescent point
// every pass; stalled: online, no quiescent point (a worker stuck in a
// pass). It sleeps a little each pass: the build machine's cores are shared.
int WorkerMain(void* arg) {
  auto* w = static_cast<Worker*>(arg);
  bool online = false;
  for (;;) {
    const Mode mode = w->mode.load(std::memory_order_acquire);
    if (mode == Mode::kStop) break;
    if (mode == Mode::kOffline && online) {
      w->publisher->ReaderOffline(0);
      online = false;
    } else if (mode != Mode::kOffline && !online) {
      w->publisher->ReaderOnline(0);
      online = true;
    }
    if (mode == Mode::kRun) {
      (void)w->publisher->Current();
      w->publisher->Quiescent(0);
    }
    w->in_mode.store(mode, std::memory_order_release);
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (online) w->publisher->ReaderOffline(0);
  return 0;
}

// Sets the worker's mode and waits until it is in it (one pass).
void Switch(Worker& w, Mode mode) {
  w.mode.store(mode, std::memory_order_release);
  const auto deadline = Clock::now() + kPatience;
  while (w.in_mode.load(std::memory_order_acquire) != mode) {
    ASSERT_LT(Clock::now(), deadline) << "the worker did not switch";
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// --- The config: four addresses, two of which can serve ---

VipConfig Vip(std::string name, std::string addr, Forwarding fwd, uint16_t port,
              std::vector<std::string> backends, bool checked = false) {
  VipConfig v;
  v.name = std::move(name);
  v.address = Ip(addr);
  v.protocol = Protocol::kTcp;
  v.port = port;
  v.forwarding = fwd;
  v.table_size = 251;
  int i = 1;
  for (std::string& b : backends) v.backends.push_back({b, Ip(absl::StrCat("192.0.2.", 10 + i++)), 1, 0});
  if (checked) {
    HealthCheckConfig check;
    check.type = HealthCheckType::kTcp;
    v.health_check = check;
  }
  return v;
}

// web (198.51.100.1) and v6 (2001:db8::1) serve; dsr (198.51.100.2, L2 DSR)
// has no next hop resolved; gone (198.51.100.3) has every backend down by
// its check; checked (198.51.100.4), only with `with_checked`, has a checked
// backend that is up.
Config TestConfig(AnnounceConfig announce, bool with_checked = false) {
  Config c;
  c.source = "announce_task_test.toml";
  c.lb.ipv4 = Ip("192.0.2.10");
  c.lb.gateway_v4 = Ip("192.0.2.1");
  c.neighbors.push_back({Ip("192.0.2.1"), *MacAddress::Parse("02:00:00:00:00:01"), 0});
  c.kernel.interface = "lo";
  c.vips.push_back(Vip("web", "198.51.100.1", Forwarding::kGre, 80, {"a", "b"}));
  c.vips.push_back(Vip("dsr", "198.51.100.2", Forwarding::kL2Dsr, 80, {"d1", "d2"}));
  c.vips.push_back(Vip("gone", "198.51.100.3", Forwarding::kGre, 80, {"g1", "g2"}, true));
  c.vips.push_back(Vip("v6", "2001:db8::1", Forwarding::kGre, 443, {"a"}));
  if (with_checked) c.vips.push_back(Vip("checked", "198.51.100.4", Forwarding::kGre, 80, {"x"}, true));
  c.announce = announce;
  return c;
}

AnnounceConfig Announce(uint32_t table = kTable, uint32_t drain_s = 0) {
  AnnounceConfig a;
  a.table = table;
  a.route_protocol = kProto;
  a.interval_ms = 10;
  a.stall_ms = 100;
  a.drain_s = drain_s;
  a.line = 1;
  return a;
}

std::unique_ptr<const LbState> Build(const Config& c, const LbState* previous) {
  LbStateOptions o;
  o.kernel_interface = true;  // checks need one
  o.resolve = [](const IpAddress&) -> std::optional<MacAddress> { return std::nullopt; };
  o.health = [](std::string_view vip, std::string_view) -> std::optional<BackendHealthInput> {
    if (vip == "gone") return BackendHealthInput{BackendHealth::kDown, 0, false, std::nullopt};
    return BackendHealthInput{BackendHealth::kUp, 1, false, std::nullopt};
  };
  auto s = BuildLbState(c, previous, o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

const AnnounceStatus::Prefix* FindPrefix(const AnnounceStatus& s, const std::string& prefix) {
  for (const AnnounceStatus::Prefix& p : s.prefixes) {
    if (p.prefix == prefix) return &p;
  }
  return nullptr;
}

class AnnounceTaskTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (geteuid() == 0) eal_ok_ = testing::StartTestEal("announce_task_test", 64, "(0-1)@(0-1)");
  }

  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: routes are set in a network namespace of its own";
    ASSERT_TRUE(eal_ok_) << "rte_eal_init failed";
    ASSERT_GE(rte_lcore_count(), 2u);
    original_ = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(original_, 0) << std::strerror(errno);
    if (unshare(CLONE_NEWNET) != 0) GTEST_SKIP() << "unshare(CLONE_NEWNET): " << std::strerror(errno);
    int rc = 0;
    Shell("ip link set lo up", &rc);
    ASSERT_EQ(rc, 0) << "ip link set lo up (is iproute2 installed?)";

    absl::StatusOr<std::unique_ptr<SnapshotPublisher>> p = SnapshotPublisher::Create(1);
    ASSERT_TRUE(p.ok()) << p.status();
    publisher_ = *std::move(p);
    absl::StatusOr<std::unique_ptr<EventLoop>> loop = EventLoop::Create();
    ASSERT_TRUE(loop.ok()) << loop.status();
    loop_ = *std::move(loop);
    worker_.publisher = publisher_.get();
    ASSERT_EQ(rte_eal_remote_launch(WorkerMain, &worker_, 1), 0);
    launched_ = true;
    ASSERT_NO_FATAL_FAILURE(Switch(worker_, Mode::kOffline));
  }

  void TearDown() override {
    task_.reset();  // joins the stall watch
    loop_.reset();
    if (launched_) {
      worker_.mode.store(Mode::kStop, std::memory_order_release);
      rte_eal_wait_lcore(1);
    }
    publisher_.reset();
    if (original_ >= 0) {
      EXPECT_EQ(setns(original_, CLONE_NEWNET), 0) << std::strerror(errno);
      close(original_);
    }
  }

  // Publishes `config` (the worker must not be stalled) and starts the task on it.
  void StartWith(const Config& config, const std::string& interface = "lo") {
    config_ = config;
    publisher_->Publish(Build(config_, publisher_->Current()));
    task_ = std::make_unique<AnnounceTask>(AnnounceTask::Options{
        .publisher = publisher_.get(), .stats = &stats_, .kernel_interface = interface});
    absl::Status s = task_->Start(*loop_);
    ASSERT_TRUE(s.ok()) << s;
  }

  void Publish(const Config& config) {
    config_ = config;
    publisher_->Publish(Build(config_, publisher_->Current()));
  }

  AnnounceStatus Stats() {
    std::lock_guard<std::mutex> lock(publisher_->mutex());
    return stats_.announce;
  }

  // Runs the loop until `done` holds; false if it did not within kPatience.
  bool RunUntil(const std::function<bool()>& done) {
    const auto deadline = Clock::now() + kPatience;
    while (!done()) {
      if (Clock::now() > deadline) return false;
      loop_->RunOnce(std::chrono::milliseconds(5));
    }
    return true;
  }

  // Runs the loop for `how_long`, checking `always` after every pass; false
  // (at once) if it did not hold.
  bool RunFor(std::chrono::milliseconds how_long, const std::function<bool()>& always) {
    const auto until = Clock::now() + how_long;
    while (Clock::now() < until) {
      loop_->RunOnce(std::chrono::milliseconds(5));
      if (!always()) return false;
    }
    return true;
  }

  // Announcing both serving addresses, from a running worker.
  void StartAnnouncing(const Config& config, const std::string& interface = "lo") {
    ASSERT_NO_FATAL_FAILURE(Switch(worker_, Mode::kRun));
    ASSERT_NO_FATAL_FAILURE(StartWith(config, interface));
    ASSERT_TRUE(RunUntil([&] {
      return RoutesIn(kTable) == Served(interface) && Stats().state == "announcing";
    })) << "announced: " << ::testing::PrintToString(RoutesIn(kTable)) << ", state " << Stats().state;
  }

  // Liveness rounds the stall watch started since the last call (each call
  // starts one of its own: tokens count every start).
  uint64_t RoundsSinceLastLook() {
    const uint64_t token = publisher_->StartLivenessRound();
    const uint64_t rounds = last_token_ == 0 ? 0 : token - last_token_ - 1;
    last_token_ = token;
    return rounds;
  }

  static bool eal_ok_;
  int original_ = -1;
  bool launched_ = false;
  Worker worker_;
  std::unique_ptr<SnapshotPublisher> publisher_;
  std::unique_ptr<EventLoop> loop_;
  ControlStats stats_;
  Config config_;
  std::unique_ptr<AnnounceTask> task_;
  uint64_t last_token_ = 0;
};
bool AnnounceTaskTest::eal_ok_ = false;

TEST_F(AnnounceTaskTest, NothingUntilTheWorkerPassesARoundBegunOnlineThenEveryServingAddress) {
  ASSERT_NO_FATAL_FAILURE(StartWith(TestConfig(Announce())));
  EXPECT_EQ(Stats().state, "starting");
  EXPECT_TRUE(Stats().enabled);
  // The worker offline: every round passes, but none began with it online.
  RoundsSinceLastLook();
  uint64_t rounds = 0;
  ASSERT_TRUE(RunUntil([&] {
    rounds += RoundsSinceLastLook();
    return rounds >= 3;
  })) << "the watch started no rounds";
  ASSERT_TRUE(RunUntil([&] { return !Stats().prefixes.empty(); })) << "no Tick";
  EXPECT_TRUE(RoutesIn(kTable).empty());
  EXPECT_EQ(Stats().state, "starting");
  // Online but stalled from the start: it passes the rounds begun before it
  // came online, never one begun after.
  ASSERT_NO_FATAL_FAILURE(Switch(worker_, Mode::kStall));
  EXPECT_TRUE(RunFor(std::chrono::milliseconds(300), [&] { return Stats().routes() == 0; }));
  EXPECT_TRUE(RoutesIn(kTable).empty());
  AnnounceStatus s = Stats();
  EXPECT_EQ(s.state, "starting") << "a stall before the first live round is no stall";
  for (const AnnounceStatus::Prefix& p : s.prefixes) EXPECT_FALSE(p.announced) << p.prefix;
  // The addresses that could serve say why they do not.
  ASSERT_EQ(s.prefixes.size(), 4u);
  EXPECT_THAT(s.prefixes[0].reason, HasSubstr("starting"));
  EXPECT_THAT(s.prefixes[3].reason, HasSubstr("starting"));

  ASSERT_NO_FATAL_FAILURE(Switch(worker_, Mode::kRun));
  ASSERT_TRUE(RunUntil([&] { return RoutesIn(kTable) == Served(); }))
      << ::testing::PrintToString(RoutesIn(kTable));
  ASSERT_TRUE(RunUntil([&] { return Stats().state == "announcing"; })) << Stats().state;
  EXPECT_TRUE(RoutesIn(254).empty()) << "nothing in the main table";
  s = Stats();
  EXPECT_TRUE(s.enabled);
  EXPECT_EQ(s.table, kTable);
  EXPECT_EQ(s.routes(), 2u);
  EXPECT_EQ(s.route_changes, 2u);
  EXPECT_EQ(s.route_errors, 0u);
  ASSERT_EQ(s.prefixes.size(), 4u);
  EXPECT_EQ(s.prefixes[0].prefix, "198.51.100.1/32");
  EXPECT_TRUE(s.prefixes[0].announced);
  EXPECT_EQ(s.prefixes[0].reason, "web: 2 of 2 backends serving");
  EXPECT_EQ(s.prefixes[1].prefix, "198.51.100.2/32");
  EXPECT_FALSE(s.prefixes[1].announced);
  EXPECT_THAT(s.prefixes[1].reason, HasSubstr("next hop unresolved"));
  EXPECT_EQ(s.prefixes[2].prefix, "198.51.100.3/32");
  EXPECT_FALSE(s.prefixes[2].announced);
  EXPECT_THAT(s.prefixes[2].reason, HasSubstr("g1 down"));
  EXPECT_EQ(s.prefixes[3].prefix, "2001:db8::1/128");
  EXPECT_TRUE(s.prefixes[3].announced);
  EXPECT_TRUE(s.Announced(Ip("2001:db8::1")));
  EXPECT_FALSE(s.Announced(Ip("198.51.100.3")));
  EXPECT_TRUE(task_->AnnouncedRecently());
}

TEST_F(AnnounceTaskTest, StartDeletesOurStaleRoutesAndLeavesOthers) {
  ASSERT_EQ(system("ip route add 198.51.100.9/32 dev lo table 4242 proto 249"), 0);
  ASSERT_EQ(system("ip route add 198.51.100.8/32 dev lo table 4242 proto static"), 0);
  ASSERT_NO_FATAL_FAILURE(StartWith(TestConfig(Announce())));
  EXPECT_EQ(RoutesIn(kTable), (std::set<Shown>{{"198.51.100.8", "lo", "static"}}));
}

TEST_F(AnnounceTaskTest, DrainWithdrawsAtOnceAndIsDoneOnTheNextPass) {
  ASSERT_NO_FATAL_FAILURE(StartAnnouncing(TestConfig(Announce(kTable, 0))));
  bool done = false;
  task_->Drain("SIGUSR1", [&] { done = true; });
  EXPECT_TRUE(RoutesIn(kTable).empty()) << "withdrawn before Drain returns";
  EXPECT_FALSE(done) << "posted, not called inside Drain";
  EXPECT_TRUE(task_->draining());
  AnnounceStatus s = Stats();
  EXPECT_EQ(s.state, "draining");
  EXPECT_EQ(s.routes(), 0u);
  for (const AnnounceStatus::Prefix& p : s.prefixes) EXPECT_FALSE(p.announced) << p.prefix;
  ASSERT_EQ(s.prefixes.size(), 4u);
  EXPECT_EQ(s.prefixes[0].reason, "draining on SIGUSR1");
  EXPECT_EQ(s.prefixes[3].reason, "draining on SIGUSR1");
  EXPECT_FALSE(task_->AnnouncedRecently()) << "drain_s 0: nothing in flight";
  loop_->RunOnce(std::chrono::milliseconds(1000));
  EXPECT_TRUE(done) << "the next loop pass runs it";
  // The loop goes on (the controller would stop it here): nothing comes back.
  EXPECT_TRUE(RunFor(std::chrono::milliseconds(200), [&] { return Stats().state == "draining"; }));
  EXPECT_TRUE(RoutesIn(kTable).empty());
}

TEST_F(AnnounceTaskTest, DrainCallsDoneDrainSLaterWithTheRoutesGoneMeanwhile) {
  ASSERT_NO_FATAL_FAILURE(StartAnnouncing(TestConfig(Announce(kTable, 1))));
  bool done = false;
  const auto before = Clock::now();
  Clock::time_point done_at;
  task_->Drain("SIGTERM", [&] {
    done = true;
    done_at = Clock::now();
  });
  EXPECT_TRUE(RoutesIn(kTable).empty());
  EXPECT_EQ(Stats().state, "draining");
  EXPECT_GT(Stats().drain_until_unix_ms, 0u);
  bool stayed_withdrawn = true;
  ASSERT_TRUE(RunUntil([&] {
    stayed_withdrawn = stayed_withdrawn && Stats().routes() == 0;
    return done;
  }));
  EXPECT_TRUE(stayed_withdrawn);
  EXPECT_TRUE(RoutesIn(kTable).empty());
  // Not before drain_s (a lower bound only: timers never fire early).
  EXPECT_GE(done_at - before, std::chrono::milliseconds(990));
}

TEST_F(AnnounceTaskTest, AStalledWorkerEmptiesTheTableFromTheWatchWhileTheLoopDoesNotRun) {
  ASSERT_NO_FATAL_FAILURE(StartAnnouncing(TestConfig(Announce())));
  ASSERT_NO_FATAL_FAILURE(Switch(worker_, Mode::kStall));
  // The loop's thread does not run here: only the watch can withdraw.
  const auto deadline = Clock::now() + kPatience;
  while (!RoutesIn(kTable).empty()) {
    ASSERT_LT(Clock::now(), deadline) << "the watch did not withdraw";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(Stats().state, "announcing") << "no Tick ran";
  ASSERT_TRUE(RunUntil([&] { return Stats().state == "stalled"; })) << Stats().state;
  AnnounceStatus s = Stats();
  EXPECT_EQ(s.routes(), 0u);
  for (const AnnounceStatus::Prefix& p : s.prefixes) EXPECT_FALSE(p.announced) << p.prefix;
  ASSERT_EQ(s.prefixes.size(), 4u);
  EXPECT_THAT(s.prefixes[0].reason, HasSubstr("workers stalled"));
  EXPECT_THAT(s.prefixes[3].reason, HasSubstr("workers stalled"));
  EXPECT_TRUE(RunFor(std::chrono::milliseconds(200), [&] { return Stats().routes() == 0; }));
  EXPECT_TRUE(RoutesIn(kTable).empty());
  // It goes on: everything comes back.
  ASSERT_NO_FATAL_FAILURE(Switch(worker_, Mode::kRun));
  ASSERT_TRUE(RunUntil([&] { return RoutesIn(kTable) == Served() && Stats().state == "announcing"; }))
      << ::testing::PrintToString(RoutesIn(kTable)) << " " << Stats().state;
  EXPECT_EQ(Stats().routes(), 2u);
}

TEST_F(AnnounceTaskTest, AStallThatBlocksPublishOnTheLoopThreadStillWithdraws) {
  ASSERT_NO_FATAL_FAILURE(StartAnnouncing(TestConfig(Announce())));
  ASSERT_NO_FATAL_FAILURE(Switch(worker_, Mode::kStall));
  // A reload on the loop's thread waits for the stalled worker; meanwhile a
  // second thread sees the table emptied, then lets the worker go on.
  std::atomic<bool> withdrawn{false}, readable{false};
  std::thread watcher([&] {
    const auto deadline = Clock::now() + kPatience;
    while (Clock::now() < deadline) {
      if (RoutesIn(kTable).empty()) {
        withdrawn = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    // Telemetry and /metrics read under the publisher's mutex: a stalled
    // worker must not hold it through the blocked Publish.
    while (Clock::now() < deadline && !readable) {
      std::unique_lock<std::mutex> lock(publisher_->mutex(), std::try_to_lock);
      readable = lock.owns_lock() && publisher_->Current() != nullptr;
      if (!readable) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    Switch(worker_, Mode::kRun);
  });
  Publish(TestConfig(Announce()));  // blocks until the worker goes on
  watcher.join();
  EXPECT_TRUE(withdrawn.load()) << "the table was not emptied while Publish was blocked";
  EXPECT_TRUE(readable.load()) << "readers were locked out while Publish was blocked";
  ASSERT_TRUE(RunUntil([&] { return RoutesIn(kTable) == Served() && Stats().state == "announcing"; }))
      << ::testing::PrintToString(RoutesIn(kTable)) << " " << Stats().state;
}

TEST_F(AnnounceTaskTest, AReloadMovesTheRoutesToTheNewTableAndWithoutAnnounceWithdrawsThem) {
  ASSERT_NO_FATAL_FAILURE(StartAnnouncing(TestConfig(Announce())));
  Publish(TestConfig(Announce(4343)));
  ASSERT_TRUE(RunUntil([&] { return RoutesIn(4343) == Served() && RoutesIn(kTable).empty(); }))
      << ::testing::PrintToString(RoutesIn(kTable)) << " " << ::testing::PrintToString(RoutesIn(4343));
  ASSERT_TRUE(RunUntil([&] { return Stats().table == 4343u && Stats().routes() == 2u; }));

  Publish(TestConfig(AnnounceConfig{}));
  ASSERT_TRUE(RunUntil([&] { return RoutesIn(4343).empty() && Stats().state == "off"; }))
      << ::testing::PrintToString(RoutesIn(4343)) << " " << Stats().state;
  EXPECT_TRUE(RoutesIn(kTable).empty());
  AnnounceStatus s = Stats();
  EXPECT_FALSE(s.enabled);
  EXPECT_EQ(s.routes(), 0u);
  EXPECT_FALSE(task_->enabled());

  // And back on: announced again, in the table it names.
  Publish(TestConfig(Announce()));
  ASSERT_TRUE(RunUntil([&] { return RoutesIn(kTable) == Served() && Stats().state == "announcing"; }))
      << ::testing::PrintToString(RoutesIn(kTable)) << " " << Stats().state;
  EXPECT_TRUE(RoutesIn(4343).empty());
}

TEST_F(AnnounceTaskTest, AReloadThatAddsAnnounceToAConfigThatStartedWithoutIt) {
  ASSERT_NO_FATAL_FAILURE(Switch(worker_, Mode::kRun));
  ASSERT_NO_FATAL_FAILURE(StartWith(TestConfig(AnnounceConfig{})));
  EXPECT_FALSE(task_->enabled());
  EXPECT_EQ(Stats().state, "off");
  // An earlier run's route, and one of another protocol.
  ASSERT_EQ(system("ip route add 198.51.100.9/32 dev lo table 4242 proto 249"), 0);
  ASSERT_EQ(system("ip route add 198.51.100.8/32 dev lo table 4242 proto static"), 0);
  Publish(TestConfig(Announce()));
  std::set<Shown> expected = Served();
  expected.insert({"198.51.100.8", "lo", "static"});
  ASSERT_TRUE(RunUntil([&] { return RoutesIn(kTable) == expected && Stats().state == "announcing"; }))
      << ::testing::PrintToString(RoutesIn(kTable)) << " " << Stats().state;
  EXPECT_TRUE(task_->enabled());
  EXPECT_EQ(Stats().table, kTable);
  EXPECT_EQ(Stats().route_errors, 0u);
}

TEST_F(AnnounceTaskTest, StopWithdrawsEverythingAndJoinsTheWatch) {
  ASSERT_NO_FATAL_FAILURE(Switch(worker_, Mode::kRun));
  const int threads_before = ThreadCount();
  ASSERT_NO_FATAL_FAILURE(StartWith(TestConfig(Announce())));
  EXPECT_EQ(ThreadCount(), threads_before + 1) << "the stall watch";
  ASSERT_TRUE(RunUntil([&] { return RoutesIn(kTable) == Served(); }));
  task_->Stop();
  EXPECT_TRUE(RoutesIn(kTable).empty());
  EXPECT_EQ(ThreadCount(), threads_before) << "the watch is joined";
}

TEST_F(AnnounceTaskTest, ARouteDeletedBehindItsBackComesBack) {
  ASSERT_NO_FATAL_FAILURE(StartAnnouncing(TestConfig(Announce())));
  ASSERT_EQ(system("ip route del 198.51.100.1/32 table 4242"), 0);
  ASSERT_EQ(system("ip -6 route del 2001:db8::1/128 table 4242"), 0);
  ASSERT_EQ(RoutesIn(kTable).size(), 0u);
  ASSERT_TRUE(RunUntil([&] { return RoutesIn(kTable) == Served(); }))
      << ::testing::PrintToString(RoutesIn(kTable));
  EXPECT_EQ(Stats().routes(), 2u);
}

TEST_F(AnnounceTaskTest, RoutesComeBackWhenTheirInterfaceComesBackUp) {
  if (system("ip link add mlba0 type veth peer name mlba1 2>/dev/null") != 0) {
    GTEST_SKIP() << "cannot create a veth pair here";
  }
  ASSERT_EQ(system("ip link set mlba1 up && ip link set mlba0 up"), 0);
  ASSERT_NO_FATAL_FAILURE(StartAnnouncing(TestConfig(Announce()), "mlba0"));
  const uint64_t errors = Stats().route_errors;
  ASSERT_EQ(system("ip link set mlba0 down"), 0);
  EXPECT_TRUE(RoutesIn(kTable).empty()) << "the kernel drops them with the link";
  // A refresh while it is down fails (counted), and is tried again.
  ASSERT_TRUE(RunUntil([&] { return Stats().route_errors > errors; }));
  ASSERT_EQ(system("ip link set mlba0 up"), 0);
  ASSERT_TRUE(RunUntil([&] { return RoutesIn(kTable) == Served("mlba0"); }))
      << ::testing::PrintToString(RoutesIn(kTable));
}

TEST_F(AnnounceTaskTest, ACheckedBackendServesOnlyAfterItsFirstProbe) {
  {
    std::lock_guard<std::mutex> lock(publisher_->mutex());
    stats_.backend_health[{"checked", "x"}].probes = 0;
    stats_.backend_health[{"gone", "g1"}].probes = 3;
  }
  ASSERT_NO_FATAL_FAILURE(StartAnnouncing(TestConfig(Announce(), /*with_checked=*/true)));
  // The others are announced; checked waits for x's first verdict.
  EXPECT_TRUE(RunFor(std::chrono::milliseconds(200), [&] { return !Stats().Announced(Ip("198.51.100.4")); }));
  EXPECT_EQ(RoutesIn(kTable), Served());
  const AnnounceStatus s = Stats();
  const AnnounceStatus::Prefix* checked = FindPrefix(s, "198.51.100.4/32");
  ASSERT_NE(checked, nullptr);
  EXPECT_FALSE(checked->announced);
  EXPECT_THAT(checked->reason, HasSubstr("x first check pending"));
  {
    std::lock_guard<std::mutex> lock(publisher_->mutex());
    stats_.backend_health[{"checked", "x"}].probes = 1;
  }
  std::set<Shown> all = Served();
  all.insert({"198.51.100.4", "lo", "249"});
  ASSERT_TRUE(RunUntil([&] { return RoutesIn(kTable) == all; }))
      << ::testing::PrintToString(RoutesIn(kTable));
  EXPECT_TRUE(Stats().Announced(Ip("198.51.100.4")));
}

}  // namespace
}  // namespace maglb
