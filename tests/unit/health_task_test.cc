// The health task on a real EventLoop against real HTTP servers on loopback
// addresses (cpp-httplib), without DPDK: what it makes of probe results is
// what the snapshots get (RebuildForInputs with its inputs), how often it asks
// for rebuilds, the all-down policies, and what a reload keeps and stops.
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "control/event_loop.h"
#include "control/health_task.h"
#include "control/snapshot_inputs.h"
#include "gtest/gtest.h"
#include "maglb/config.h"
#include "maglb/lb_state.h"

namespace maglb {
namespace {

// An HTTP backend on 127.0.0.N:port that answers 200 "ok" or, when told to
// fail, 503; it counts the requests it saw.
class Backend {
 public:
  Backend(const std::string& address, int port) : address_(address) {
    server_.Get("/", [this](const httplib::Request&, httplib::Response& res) {
      ++requests_;
      res.status = healthy_ ? 200 : 503;
      res.set_content("ok", "text/plain");
    });
    bound_ = server_.bind_to_port(address.c_str(), port);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~Backend() {
    server_.stop();
    thread_.join();
  }
  bool bound() const { return bound_; }
  void set_healthy(bool h) { healthy_ = h; }
  int requests() const { return requests_; }

 private:
  std::string address_;
  httplib::Server server_;
  std::thread thread_;
  std::atomic<bool> healthy_{true};
  std::atomic<int> requests_{0};
  bool bound_ = false;
};

constexpr int kPort = 18080;

std::string ConfigText(const std::vector<std::string>& backends, const std::string& vip_extra = "",
                       int rebuild_interval_ms = 200) {
  std::string t = absl::StrFormat(R"([lb]
ipv4 = "127.0.0.1"
[kernel]
interface = "maglbtest0"
[health]
rebuild_interval_ms = %d
flap_window_s = 60
flap_max_transitions = 100
[[health_check]]
name = "web"
type = "http"
port = %d
interval_ms = 100
timeout_ms = 80
rise = 2
fall = 2
jitter_percent = 0
[[vip]]
name = "web"
address = "10.100.0.1"
port = 80
forwarding = "l2dsr"
table_size = 251
health_check = "web"
%s
)",
                                  rebuild_interval_ms, kPort, vip_extra);
  for (const std::string& b : backends) {
    absl::StrAppend(&t, "[[vip.backend]]\nname = \"", b, "\"\naddress = \"127.0.0.", b.substr(2), "\"\n");
  }
  return t;
}

// The task, the loop, and the snapshot it feeds: the test plays the reload
// task (it rebuilds when asked, and publishes configs).
class HealthTaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = EventLoop::Create();
    ASSERT_TRUE(loop.ok());
    loop_ = *std::move(loop);
    inputs_ = std::make_unique<SnapshotInputs>(MacAddress{}, /*kernel_interface=*/true);
    task_ = std::make_unique<HealthTask>(HealthTask::Options{
        .inputs = inputs_.get(), .stats_mutex = &mu_, .stats = &stats_, .tunnel_probes = &tunnel_, .now_ns = {}});
    inputs_->AddSource(task_.get());
    inputs_->SetRebuild([this](std::string why) {
      ++rebuilds_;
      whys_.push_back(why);
      auto next = RebuildForInputs(*state_, inputs_->Capture());
      ASSERT_TRUE(next.ok()) << next.status();
      state_ = std::shared_ptr<const LbState>(*std::move(next));
    });
  }
  void TearDown() override { task_->Stop(); }

  void Publish(const std::string& text, bool first) {
    auto config = ParseConfig(text, "test.toml");
    ASSERT_TRUE(config.ok()) << config.status();
    auto next = BuildLbState(*config, first ? nullptr : state_.get(), inputs_->Capture());
    ASSERT_TRUE(next.ok()) << next.status();
    state_ = std::shared_ptr<const LbState>(*std::move(next));
    task_->ConfigPublished(*state_);
    if (first) {
      ASSERT_TRUE(task_->Start(*loop_).ok());
    }
  }

  const BackendState& Of(const std::string& name) const {
    for (const BackendState& b : state_->FindVip("web")->backends) {
      if (b.name == name) return b;
    }
    ADD_FAILURE() << "no backend " << name;
    return state_->FindVip("web")->backends[0];
  }

  // Runs the loop until `done` or `timeout`; false on timeout.
  bool RunUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      if (done()) return true;
      loop_->RunOnce(std::chrono::milliseconds(10));
    }
    return done();
  }
  void RunFor(std::chrono::milliseconds d) {
    RunUntil([] { return false; }, d);
  }

  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<SnapshotInputs> inputs_;
  std::mutex mu_;
  ControlStats stats_;
  TunnelProbeTable tunnel_;
  std::unique_ptr<HealthTask> task_;
  std::shared_ptr<const LbState> state_;
  int rebuilds_ = 0;
  std::vector<std::string> whys_;
};

TEST_F(HealthTaskTest, AFailingBackendLeavesTheTableAndComesBack) {
  Backend be2("127.0.0.2", kPort), be3("127.0.0.3", kPort);
  ASSERT_TRUE(be2.bound() && be3.bound());
  Publish(ConfigText({"be2", "be3"}), true);
  EXPECT_EQ(Of("be2").health, BackendHealth::kUp);
  ASSERT_TRUE(RunUntil([&] { return be2.requests() >= 2 && be3.requests() >= 2; }, std::chrono::seconds(5)));
  EXPECT_EQ(rebuilds_, 0) << "nothing changed: no rebuild";

  be2.set_healthy(false);
  ASSERT_TRUE(RunUntil([&] { return Of("be2").health == BackendHealth::kDown; }, std::chrono::seconds(5)));
  EXPECT_EQ(Of("be2").weight, 0u);
  EXPECT_EQ(Of("be2").configured_weight, 1u);
  EXPECT_EQ(state_->FindVip("web")->table->EntryCounts()[0] + state_->FindVip("web")->table->EntryCounts()[1],
            251u);
  {
    std::lock_guard<std::mutex> lock(mu_);
    const BackendHealthStatus& s = stats_.backend_health.at({"web", "be2"});
    EXPECT_EQ(s.health, BackendHealth::kDown);
    EXPECT_NE(s.reason.find("2 consecutive failures"), std::string::npos) << s.reason;
    EXPECT_NE(s.reason.find("503"), std::string::npos) << s.reason;
    EXPECT_EQ(stats_.backend_health.at({"web", "be3"}).health, BackendHealth::kUp);
  }
  EXPECT_EQ(Of("be3").health, BackendHealth::kUp);
  EXPECT_EQ(state_->generation(), 1u) << "health rebuilds keep the config generation";

  be2.set_healthy(true);
  ASSERT_TRUE(RunUntil([&] { return Of("be2").health == BackendHealth::kUp; }, std::chrono::seconds(5)));
  EXPECT_EQ(Of("be2").weight, 1u);
}

TEST_F(HealthTaskTest, ManyBackendsFailingAtOnceMakeOneRebuild) {
  std::vector<std::unique_ptr<Backend>> servers;
  std::vector<std::string> names;
  for (int i = 2; i <= 9; ++i) {
    servers.push_back(std::make_unique<Backend>(absl::StrCat("127.0.0.", i), kPort));
    ASSERT_TRUE(servers.back()->bound());
    names.push_back(absl::StrCat("be", i));
  }
  // A long interval between rebuilds: everything failing within it coalesces.
  Publish(ConfigText(names, "", 2000), true);
  ASSERT_TRUE(RunUntil([&] { return servers[0]->requests() >= 2; }, std::chrono::seconds(5)));
  for (size_t i = 0; i < 6; ++i) servers[i]->set_healthy(false);
  // The first transition rebuilds at once; the rest wait for the interval.
  ASSERT_TRUE(RunUntil([&] {
    int down = 0;
    for (size_t i = 0; i < 6; ++i) down += Of(names[i]).health == BackendHealth::kDown;
    return down == 6;
  }, std::chrono::seconds(8)));
  EXPECT_LE(rebuilds_, 2) << "6 backends down: one rebuild for the first, one for the others";
}

TEST_F(HealthTaskTest, EveryBackendDownKeepsTheLastTableOrDrops) {
  Backend be2("127.0.0.2", kPort), be3("127.0.0.3", kPort);
  Publish(ConfigText({"be2", "be3"}, "all_down = \"keep_last\""), true);
  be2.set_healthy(false);
  ASSERT_TRUE(RunUntil([&] { return Of("be2").health == BackendHealth::kDown && Of("be2").weight == 0; },
                       std::chrono::seconds(5)));
  const uint64_t last_fingerprint = state_->FindVip("web")->fingerprint();
  be3.set_healthy(false);
  ASSERT_TRUE(RunUntil([&] {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_.backend_health.at({"web", "be3"}).health == BackendHealth::kDown;
  }, std::chrono::seconds(5)));
  RunFor(std::chrono::milliseconds(400));
  EXPECT_EQ(state_->FindVip("web")->fingerprint(), last_fingerprint) << "keep_last: the last table stays";
  EXPECT_FALSE(state_->FindVip("web")->table->empty());

  // The same with all_down = "drop": the table empties.
  Publish(ConfigText({"be2", "be3"}, "all_down = \"drop\""), false);
  ASSERT_TRUE(RunUntil([&] { return state_->FindVip("web")->table->empty(); }, std::chrono::seconds(5)));
}

TEST_F(HealthTaskTest, AReloadKeepsStateAndARemovedBackendsChecksStop) {
  Backend be2("127.0.0.2", kPort), be3("127.0.0.3", kPort);
  Publish(ConfigText({"be2", "be3"}), true);
  be2.set_healthy(false);
  ASSERT_TRUE(RunUntil([&] { return Of("be2").health == BackendHealth::kDown; }, std::chrono::seconds(5)));
  uint64_t probes_before;
  {
    std::lock_guard<std::mutex> lock(mu_);
    probes_before = stats_.backend_health.at({"web", "be2"}).probes;
  }
  // be3 removed; be2 unchanged: still down after the reload, counters go on.
  Publish(ConfigText({"be2"}), false);
  EXPECT_EQ(Of("be2").health, BackendHealth::kDown);
  EXPECT_EQ(task_->checked(), 1u);
  {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_GE(stats_.backend_health.at({"web", "be2"}).probes, probes_before);
    EXPECT_EQ(stats_.backend_health.count({"web", "be3"}), 0u);
  }
  // A probe already on the wire at the reload may still land (a loaded
  // machine delays the server's thread); after that, nothing more comes.
  RunFor(std::chrono::milliseconds(200));
  const int be3_requests = be3.requests();
  RunFor(std::chrono::milliseconds(500));
  EXPECT_EQ(be3.requests(), be3_requests) << "a removed backend is probed no more";
}

TEST_F(HealthTaskTest, ABackendAddedByAReloadWaitsForItsFirstCheckThenRampsIn) {
  Backend be2("127.0.0.2", kPort), be3("127.0.0.3", kPort);
  Publish(ConfigText({"be2"}, "slow_start_s = 1"), true);
  Publish(ConfigText({"be2", "be3"}, "slow_start_s = 1"), false);
  EXPECT_EQ(Of("be3").health, BackendHealth::kDown) << "new on a serving VIP: down until checked";
  EXPECT_EQ(Of("be3").weight, 0u);
  // Up after its first check, then a reduced share, then all of it.
  bool saw_ramp = false;
  ASSERT_TRUE(RunUntil([&] {
    const BackendState& b3 = Of("be3");
    const BackendState& b2 = Of("be2");
    if (b3.health == BackendHealth::kUp && b3.weight > 0 && b3.weight < b2.weight) saw_ramp = true;
    return b3.health == BackendHealth::kUp && b3.weight == b2.weight && b3.weight == 1;
  }, std::chrono::seconds(5)));
  EXPECT_TRUE(saw_ramp) << "slow start serves a reduced share first";
}

}  // namespace
}  // namespace maglb
