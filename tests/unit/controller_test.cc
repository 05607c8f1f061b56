// The control thread as the daemon runs it (Controller::Run on its own
// thread, with DPDK's EAL in memory, no hugepages, no NIC): reloads are built
// on a helper thread while the control loop keeps answering, only the newest
// change is published, every failed reload attempt is logged and counted,
// and a write in progress is never loaded. Each reload that ends is timed
// from its trigger (the first of those it serves) to the workers.
#include <fcntl.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "control/controller.h"
#include "control/reload_timing.h"
#include "dataplane/snapshot.h"
#include "gtest/gtest.h"
#include "packet_builder.h"

namespace maglb {
namespace {

using testing::Ip;
using testing::Mac;

const MacAddress kOurMac = Mac("02:00:00:00:00:0a");
const MacAddress kGatewayMac = Mac("02:00:00:00:00:01");

class EalEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    // Signals reach the controller through its signalfd only: blocked in
    // every thread, EAL's included (they inherit the mask).
    sigset_t s;
    sigemptyset(&s);
    for (int sig : {SIGHUP, SIGINT, SIGTERM}) sigaddset(&s, sig);
    pthread_sigmask(SIG_BLOCK, &s, nullptr);
    // Nothing on disk, nothing shared: other test runs may be going on.
    const std::string prefix = absl::StrCat("--file-prefix=maglb-ctltest-", getpid());
    const char* args[] = {"controller_test", "--no-huge", "--no-pci",      "--no-shconf",
                          prefix.c_str(),    "-l",        "0",             "-m",
                          "128",             "--no-telemetry", "--log-level=*:error"};
    ok = rte_eal_init(std::size(args), const_cast<char**>(args)) >= 0;
    if (!ok) error = rte_strerror(rte_errno);
  }
  void TearDown() override {
    if (!ok) return;
    std::string runtime_dir = rte_eal_get_runtime_dir();
    rte_eal_cleanup();
    std::filesystem::remove_all(runtime_dir);  // EAL leaves its (empty) directory
  }
  static inline bool ok = false;
  static inline std::string error;
};
const auto* const kEal = ::testing::AddGlobalTestEnvironment(new EalEnvironment);

// A config with the VIPs named; GRE through a gateway the LB must resolve.
std::string ConfigText(const std::vector<std::string>& vips) {
  std::string t = R"([lb]
ipv4 = "10.0.0.10"
gateway_v4 = "10.0.0.1"
)";
  int i = 1;
  for (const std::string& v : vips) {
    absl::StrAppend(&t, "[[vip]]\nname = \"", v, "\"\naddress = \"10.100.0.", i++,
                    "\"\nprotocol = \"tcp\"\nport = 80\nforwarding = \"gre\"\ntable_size = 251\n",
                    "  [[vip.backend]]\n  name = \"b\"\n  address = \"10.0.0.11\"\n");
  }
  return t;
}

// A build the test holds until it opens the gate (deterministic "slow build").
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  int started = 0;
  bool open = true;
  bool honor_cancel = true;

  BuildFunction Wrap(std::shared_ptr<Gate> self) {
    return [self](const BuildJob& job, const std::atomic<bool>& cancel) {
      {
        std::unique_lock<std::mutex> lock(self->mu);
        ++self->started;
        self->cv.notify_all();
        while (!self->open && !(self->honor_cancel && cancel.load())) {
          self->cv.wait_for(lock, std::chrono::milliseconds(5));
        }
      }
      return LoadAndBuild(job, cancel);
    };
  }
  void Set(bool o) {
    std::lock_guard<std::mutex> lock(mu);
    open = o;
    cv.notify_all();
  }
  int Started() {
    std::lock_guard<std::mutex> lock(mu);
    return started;
  }
  bool WaitStarted(int n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(30), [&] { return started >= n; });
  }
};

// What the tests look at, read through the telemetry path (WithView).
struct View {
  uint64_t generation = 0;
  std::vector<std::string> vips;
  bool next_hops_known = true;
  ControlStats stats;
};

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Like the e2e tests without root: say why, do not fail on the machine.
    if (!EalEnvironment::ok) GTEST_SKIP() << "DPDK EAL did not start: " << EalEnvironment::error;
    char tmpl[] = "/tmp/maglb-controller-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/maglb.toml";
    ReplaceWith(ConfigText({"a"}));
    static int n = 0;
    ++n;
    auto publisher = SnapshotPublisher::Create(1);
    ASSERT_TRUE(publisher.ok()) << publisher.status();
    publisher_ = *std::move(publisher);
    to_control_ = rte_ring_create(absl::StrCat("ct_to", n).c_str(), 64, 0, RING_F_SC_DEQ);
    from_control_ = rte_ring_create(absl::StrCat("ct_from", n).c_str(), 1024, 0,
                                    RING_F_SP_ENQ | RING_F_SC_DEQ);
    pool_ = rte_pktmbuf_pool_create(absl::StrCat("ct_pool", n).c_str(), 2047, 0, 0,
                                    RTE_MBUF_DEFAULT_BUF_SIZE, 0);
    ASSERT_NE(to_control_, nullptr);
    ASSERT_NE(from_control_, nullptr);
    ASSERT_NE(pool_, nullptr);
    sigset_t s;
    sigemptyset(&s);
    for (int sig : {SIGHUP, SIGINT, SIGTERM}) sigaddset(&s, sig);
    signal_fd_ = signalfd(-1, &s, SFD_NONBLOCK | SFD_CLOEXEC);
    ASSERT_GE(signal_fd_, 0);
    // The controller's log lines, to read back.
    log_path_ = dir_ + ".log";
    fflush(stderr);
    saved_stderr_ = dup(STDERR_FILENO);
    int log = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(log, 0);
    dup2(log, STDERR_FILENO);
    close(log);
  }

  void Begin() {
    ControllerOptions o;
    o.config_path = path_;
    o.port.mac = kOurMac;
    o.port.pool = pool_;
    o.publisher = publisher_.get();
    o.to_control = to_control_;
    o.from_control = from_control_;
    o.signal_fd = signal_fd_;
    o.build = gate_->Wrap(gate_);
    controller_ = std::make_unique<Controller>(std::move(o));
    absl::StatusOr<Config> c = LoadConfig(path_);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE(controller_->Start(*c).ok());
    run_ = std::thread([this] { stopped_by_ = controller_->Run(); });
  }

  std::string Stop() {
    if (run_.joinable()) {
      kill(getpid(), SIGTERM);
      run_.join();
    }
    return stopped_by_;
  }

  void TearDown() override {
    if (!EalEnvironment::ok) return;
    Stop();
    gate_->Set(true);  // a build left running (abandoned) may end
    controller_.reset();
    publisher_.reset();
    for (void* m; rte_ring_dequeue(from_control_, &m) == 0;) {
      rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
    }
    rte_ring_free(to_control_);
    rte_ring_free(from_control_);
    rte_mempool_free(pool_);
    close(signal_fd_);
    fflush(stderr);
    dup2(saved_stderr_, STDERR_FILENO);
    close(saved_stderr_);
    std::filesystem::remove_all(dir_);
    std::filesystem::remove(log_path_);
  }

  // Writes `text` to a temporary file and renames it over the config.
  void ReplaceWith(const std::string& text) {
    std::string tmp = dir_ + "/.maglb.toml.tmp";
    std::ofstream(tmp) << text;
    ASSERT_EQ(std::rename(tmp.c_str(), path_.c_str()), 0);
  }

  View Look() {
    View v;
    controller_->WithView([&](const LbState& s, const CounterTotals&, const ControlStats& cs,
                              const ControllerOptions&) {
      v.generation = s.generation();
      for (const VipState& vip : s.vips()) {
        v.vips.push_back(vip.name);
        for (const BackendState& b : vip.backends) v.next_hops_known &= b.next_hop_known;
      }
      v.stats = cs;
    });
    return v;
  }

  // Waits (up to 30 s: a deadline for a hung loop, not a timing check) until
  // `done` holds of what the controller shows.
  bool WaitFor(const std::function<bool(const View&)>& done) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      if (done(Look())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }

  bool SignalPending(int sig) {
    sigset_t s;
    sigpending(&s);
    return sigismember(&s, sig) == 1;
  }

  std::vector<std::string> LogLines(const std::string& containing) {
    fflush(stderr);
    std::ifstream in(log_path_);
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) {
      if (l.find(containing) != std::string::npos) out.push_back(l);
    }
    return out;
  }

  // An ARP reply from the gateway to the LB, as a worker passes it up.
  void GatewayAnswers() {
    testing::Bytes arp = testing::Arp(2, kGatewayMac, Ip("10.0.0.1"), kOurMac, Ip("10.0.0.10"));
    testing::Bytes f = testing::Frame({kOurMac, kGatewayMac}, 0x0806, arp);
    rte_mbuf* m = rte_pktmbuf_alloc(pool_);
    ASSERT_NE(m, nullptr);
    std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(f.size())), f.data(), f.size());
    ASSERT_EQ(rte_ring_enqueue(to_control_, m), 0);
  }

  std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
  std::string dir_, path_, log_path_;
  std::unique_ptr<SnapshotPublisher> publisher_;
  rte_ring* to_control_ = nullptr;
  rte_ring* from_control_ = nullptr;
  rte_mempool* pool_ = nullptr;
  int signal_fd_ = -1;
  int saved_stderr_ = -1;
  std::unique_ptr<Controller> controller_;
  std::thread run_;
  std::string stopped_by_;
};

// While a reload's build is held, the control loop still learns a neighbour
// (and republishes), and takes a second reload trigger; the first build's
// result is then stale: only the newest file is published, with the
// neighbour learned meanwhile.
TEST_F(ControllerTest, BuildsOffTheControlThreadAndPublishesOnlyTheNewest) {
  gate_->open = false;
  Begin();
  const uint64_t before_first = MonotonicNs();
  ReplaceWith(ConfigText({"a", "b"}));  // rename into place
  ASSERT_TRUE(gate_->WaitStarted(1));

  GatewayAnswers();
  ASSERT_TRUE(WaitFor([](const View& v) { return v.stats.neighbor_updates == 1; }))
      << "the control loop stalled behind the build";
  View during = Look();
  EXPECT_EQ(during.generation, 1u);
  EXPECT_TRUE(during.next_hops_known);  // republished with the gateway's MAC

  const uint64_t before_second = MonotonicNs();
  ReplaceWith(ConfigText({"a", "b", "c"}));
  kill(getpid(), SIGHUP);  // a second trigger too, while the build is held
  ASSERT_TRUE(WaitFor([&](const View&) { return !SignalPending(SIGHUP); }));

  gate_->Set(true);
  ASSERT_TRUE(WaitFor([](const View& v) { return v.stats.reloads_ok >= 1; }));
  View after = Look();
  EXPECT_EQ(after.vips, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(after.generation, 2u);  // the stale build was never published
  EXPECT_EQ(after.stats.reloads_ok, 1u);
  EXPECT_EQ(after.stats.reloads_refused, 0u);
  EXPECT_TRUE(after.next_hops_known);  // learned during the build, kept
  EXPECT_GE(gate_->Started(), 2);
  EXPECT_EQ(LogLines("superseded").size(), 1u);
  // One reload ended (the superseded build is none), timed from the first
  // trigger: the change it brought waited the longest.
  const std::vector<ReloadTiming> timed = after.stats.reload_timings.Recent();
  ASSERT_EQ(timed.size(), 1u);
  EXPECT_EQ(timed[0].outcome, ReloadOutcome::kApplied);
  EXPECT_EQ(timed[0].generation, 2u);
  EXPECT_GE(timed[0].event_ns, before_first);
  EXPECT_LT(timed[0].event_ns, before_second);
  EXPECT_GE(timed[0].published_ns, timed[0].event_ns);
  EXPECT_GE(timed[0].workers_ns, timed[0].published_ns);
  EXPECT_EQ(Stop(), "SIGTERM");
}

// Every reload that ends is timed, whatever its trigger and outcome: when
// the trigger was read, the swap, the workers past it (here: none
// registered, so at once), each within the window the test saw it happen
// in; refused ones with their trigger only. The totals count the reloads
// that reached the workers; the log line says how long it took.
TEST_F(ControllerTest, EachReloadIsTimedFromItsTrigger) {
  Begin();
  struct Step {
    std::function<void()> trigger;
    ReloadOutcome outcome;
    uint64_t generation;
  };
  const std::vector<Step> steps = {
      {[&] { ReplaceWith(ConfigText({"a", "b"})); }, ReloadOutcome::kApplied, 2},
      {[&] { ReplaceWith(ConfigText({"a", "b"})); }, ReloadOutcome::kUnchanged, 3},
      {[&] { ReplaceWith("[lb\n"); }, ReloadOutcome::kRefused, 3},  // still serving 3
      {[&] { ReplaceWith(ConfigText({"a", "b", "c"})); }, ReloadOutcome::kApplied, 4},
      {[&] { kill(getpid(), SIGHUP); }, ReloadOutcome::kUnchanged, 5},
  };
  uint64_t reached = 0, sum = 0, max = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const uint64_t before = MonotonicNs();
    steps[i].trigger();
    ASSERT_TRUE(WaitFor([&](const View& v) { return v.stats.reload_timings.Recent().size() == i + 1; }))
        << "step " << i;
    const uint64_t after = MonotonicNs();
    const ReloadTiming r = Look().stats.reload_timings.Recent().back();
    EXPECT_EQ(r.outcome, steps[i].outcome) << i;
    EXPECT_EQ(r.generation, steps[i].generation) << i;
    EXPECT_GE(r.event_ns, before) << i;
    EXPECT_LE(r.event_ns, after) << i;
    if (r.outcome == ReloadOutcome::kRefused) {
      EXPECT_EQ(r.published_ns, 0u) << i;
      EXPECT_EQ(r.workers_ns, 0u) << i;
      continue;
    }
    EXPECT_GE(r.published_ns, r.event_ns) << i;
    EXPECT_GE(r.workers_ns, r.published_ns) << i;
    EXPECT_LE(r.workers_ns, after) << i;
    ++reached;
    sum += r.ToWorkersNs();
    max = std::max(max, r.ToWorkersNs());
  }
  const ReloadTimings t = Look().stats.reload_timings;
  EXPECT_EQ(t.applied(), 2u);
  EXPECT_EQ(t.unchanged(), 2u);
  EXPECT_EQ(t.refused(), 1u);
  EXPECT_EQ(t.to_workers_count(), reached);
  EXPECT_EQ(t.to_workers_sum_ns(), sum);
  EXPECT_EQ(t.to_workers_max_ns(), max);
  const std::vector<std::string> lines = LogLines("applied to workers ");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[0].find("reload (file changed): generation 2: +vip b;"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(" after the file change"), std::string::npos) << lines[0];
  EXPECT_NE(lines[3].find("reload (SIGHUP): "), std::string::npos) << lines[3];
  EXPECT_NE(lines[3].find(" after SIGHUP"), std::string::npos) << lines[3];
}

// A real slow build (a big config) and a newer small file right behind it:
// whichever way the two builds interleave, the newest file is what ends up
// published, and nothing older is published after it.
TEST_F(ControllerTest, ABigBuildThenANewerFileEndsOnTheNewest) {
  Begin();
  std::vector<std::string> big;
  for (int i = 0; i < 200; ++i) big.push_back(absl::StrCat("big-", i));
  std::string text = ConfigText(big);
  for (size_t at = 0; (at = text.find("table_size = 251", at)) != std::string::npos;) {
    text.replace(at, 16, "table_size = 65537");
  }
  ReplaceWith(text);
  ASSERT_TRUE(gate_->WaitStarted(1));  // the gate is open: the big build is under way
  ReplaceWith(ConfigText({"x", "y"}));
  kill(getpid(), SIGHUP);
  ASSERT_TRUE(WaitFor([](const View& v) {
    return v.vips == std::vector<std::string>{"x", "y"} && v.stats.reloads_ok >= 1;
  }));
  GatewayAnswers();  // the loop goes on; and a later event publishes nothing older
  ASSERT_TRUE(WaitFor([](const View& v) { return v.stats.neighbor_updates == 1; }));
  EXPECT_EQ(Look().vips, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(Look().stats.reloads_refused, 0u);
}

// SIGTERM during a build that never ends: Run returns anyway (the build is
// abandoned after a bounded wait).
TEST_F(ControllerTest, SigtermDuringABuildStops) {
  gate_->open = false;
  gate_->honor_cancel = false;
  Begin();
  ReplaceWith(ConfigText({"a", "b"}));
  ASSERT_TRUE(gate_->WaitStarted(1));
  EXPECT_EQ(Stop(), "SIGTERM");
  EXPECT_EQ(LogLines("still building: abandoned").size(), 1u);
  EXPECT_EQ(Look().generation, 1u);
}

// Same, with a build that checks its cancel flag: it ends within the wait.
TEST_F(ControllerTest, SigtermCancelsABuild) {
  gate_->open = false;
  Begin();
  ReplaceWith(ConfigText({"a", "b"}));
  ASSERT_TRUE(gate_->WaitStarted(1));
  EXPECT_EQ(Stop(), "SIGTERM");
  EXPECT_TRUE(LogLines("abandoned").empty());
}

// A config replaced by something unreadable: every attempt is refused, with
// one log line naming the problem, and counted; then a good file is loaded.
TEST_F(ControllerTest, EveryFailedReloadIsLoggedAndCounted) {
  namespace fs = std::filesystem;
  Begin();
  struct Case {
    std::function<void()> make;
    const char* says;
  };
  const std::string tmp = dir_ + "/.tmp";
  std::vector<Case> cases = {
      {[&] {  // a symlink loop renamed into place
         fs::create_symlink("maglb.toml", tmp);
         fs::rename(tmp, path_);
       },
       "Too many levels of symbolic links"},
      {[&] {  // a dangling symlink renamed into place
         fs::create_symlink("missing.toml", tmp);
         fs::rename(tmp, path_);
       },
       "No such file or directory"},
      {[&] { ReplaceWith(ConfigText({"a", "b"})); }, ""},  // good again
      {[&] { fs::remove(path_); }, "No such file or directory"},
      {[&] { fs::create_directory(path_); }, "not a regular file"},
  };
  if (geteuid() != 0) {  // root reads a mode-000 file anyway
    cases.push_back({[&] { fs::remove(path_); }, "No such file or directory"});
    cases.push_back({[&] {
                       std::ofstream(tmp) << ConfigText({"a"});
                       chmod(tmp.c_str(), 0);
                       fs::rename(tmp, path_);
                     },
                     "Permission denied"});
  }
  uint64_t refused = 0, ok = 0;
  for (const Case& c : cases) {
    c.make();
    *(*c.says ? &refused : &ok) += 1;
    ASSERT_TRUE(WaitFor([&](const View& v) {
      return v.stats.reloads_refused == refused && v.stats.reloads_ok == ok;
    })) << "after the case expecting '" << c.says << "': refused " << Look().stats.reloads_refused
        << " ok " << Look().stats.reloads_ok;
    if (*c.says) {
      EXPECT_NE(Look().stats.last_refusal.find(c.says), std::string::npos)
          << Look().stats.last_refusal;
      std::vector<std::string> lines = LogLines("refused");
      ASSERT_EQ(lines.size(), refused);
      EXPECT_NE(lines.back().find(c.says), std::string::npos) << lines.back();
      EXPECT_NE(lines.back().find(absl::StrCat("still serving generation ", Look().generation)),
                std::string::npos)
          << lines.back();
    }
  }
  fs::remove_all(path_);  // no file: refused too
  ASSERT_TRUE(WaitFor([&](const View& v) { return v.stats.reloads_refused == refused + 1; }));
  ReplaceWith(ConfigText({"a", "b", "c"}));
  ASSERT_TRUE(WaitFor([&](const View& v) { return v.stats.reloads_ok == ok + 1; }));
  EXPECT_EQ(Look().vips, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(Look().stats.reloads_refused, refused + 1);
  EXPECT_TRUE(Look().stats.last_refusal.empty());
}

// A Kubernetes ConfigMap update: the new version is written in full in a
// new directory, and a symlink is renamed over ..data. One reload, of it.
TEST_F(ControllerTest, ASymlinkSwapIsOneReload) {
  namespace fs = std::filesystem;
  fs::create_directory(dir_ + "/..v1");
  std::ofstream(dir_ + "/..v1/maglb.toml") << ConfigText({"a"});
  fs::create_directory_symlink("..v1", dir_ + "/..data");
  fs::remove(path_);
  fs::create_symlink("..data/maglb.toml", path_);
  Begin();
  fs::create_directory(dir_ + "/..v2");
  std::ofstream(dir_ + "/..v2/maglb.toml") << ConfigText({"a", "b"});
  fs::create_directory_symlink("..v2", dir_ + "/..data_tmp");
  fs::rename(dir_ + "/..data_tmp", dir_ + "/..data");
  fs::remove_all(dir_ + "/..v1");
  ASSERT_TRUE(WaitFor([](const View& v) { return v.stats.reloads_ok == 1; }));
  EXPECT_EQ(Look().vips, (std::vector<std::string>{"a", "b"}));
  // A marker change: nothing else was attempted before it.
  std::ofstream(dir_ + "/..v2/maglb.toml") << ConfigText({"a", "b", "c"});  // in place, closed
  ASSERT_TRUE(WaitFor([](const View& v) { return v.vips.size() == 3; }));
  EXPECT_EQ(Look().stats.reloads_ok, 2u);
  EXPECT_EQ(Look().stats.reloads_refused, 0u);
}

// Conntrack tables are sized and timed at start: a reload that changes any
// [conntrack] key says the change waits for a restart; one that changes none
// does not.
TEST_F(ControllerTest, AConntrackChangeIsSaidToWaitForARestart) {
  Begin();
  const char* kWaits = "[conntrack] changes apply at the next restart";
  ReplaceWith(ConfigText({"a", "b"}));
  ASSERT_TRUE(WaitFor([](const View& v) { return v.stats.reloads_ok == 1; }));
  EXPECT_TRUE(LogLines(kWaits).empty());
  const char* keys[] = {"capacity = 4096", "tcp_established_timeout_s = 100",
                        "tcp_closing_timeout_s = 5", "tcp_syn_timeout_s = 7", "udp_timeout_s = 9",
                        "proven_protect_s = 11"};
  uint64_t reloads = 1;
  for (const char* key : keys) {
    const size_t said = LogLines(kWaits).size();
    ReplaceWith(ConfigText({"a", "b"}) + "[conntrack]\n" + key + "\n");
    ++reloads;
    ASSERT_TRUE(WaitFor([&](const View& v) { return v.stats.reloads_ok == reloads; })) << key;
    EXPECT_EQ(LogLines(kWaits).size(), said + 1) << key;
    ReplaceWith(ConfigText({"a", "b"}));  // back to the defaults, also said to wait
    ++reloads;
    ASSERT_TRUE(WaitFor([&](const View& v) { return v.stats.reloads_ok == reloads; })) << key;
    EXPECT_EQ(LogLines(kWaits).size(), said + 2) << key;
  }
  ReplaceWith(ConfigText({"a", "b", "c"}));  // no [conntrack] change
  ASSERT_TRUE(WaitFor([&](const View& v) { return v.stats.reloads_ok == reloads + 1; }));
  EXPECT_EQ(LogLines(kWaits).size(), 2 * std::size(keys));
}

// Descriptor rings and packet buffer pools are made at start: a reload that
// changes [lb] rx_descriptors, tx_descriptors or mbufs is published and
// says the change waits for a restart; one that only moves such a key to
// another line (same value) says nothing.
TEST_F(ControllerTest, APortSizingChangeIsSaidToWaitForARestart) {
  Begin();
  const char* kWaits = "[lb] rx_descriptors, tx_descriptors and mbufs apply at the next restart";
  auto with = [](const std::string& lb_keys) {
    std::string t = ConfigText({"a", "b"});
    return t.replace(t.find("[lb]\n"), 5, "[lb]\n" + lb_keys);
  };
  uint64_t reloads = 0;
  for (const char* key : {"rx_descriptors = 4096\n", "tx_descriptors = 2048\n", "mbufs = 100000\n"}) {
    const size_t said = LogLines(kWaits).size();
    ReplaceWith(with(key));
    ++reloads;
    ASSERT_TRUE(WaitFor([&](const View& v) { return v.stats.reloads_ok == reloads; })) << key;
    EXPECT_EQ(LogLines(kWaits).size(), said + 1) << key;
    ReplaceWith(with(std::string("# moved down a line\n") + key));  // same value: nothing waits
    ++reloads;
    ASSERT_TRUE(WaitFor([&](const View& v) { return v.stats.reloads_ok == reloads; })) << key;
    EXPECT_EQ(LogLines(kWaits).size(), said + 1) << key;
    ReplaceWith(with(""));  // back to 0 (computed): waits too
    ++reloads;
    ASSERT_TRUE(WaitFor([&](const View& v) { return v.stats.reloads_ok == reloads; })) << key;
    EXPECT_EQ(LogLines(kWaits).size(), said + 2) << key;
  }
}

// An editor that writes in place and pauses mid-write (longer than any
// debounce): the prefix, itself a valid config with fewer VIPs, is never
// loaded; the close loads the whole file, once.
TEST_F(ControllerTest, AWriteInProgressIsNotLoaded) {
  Begin();
  const std::string full = ConfigText({"a", "b", "c"});
  const std::string prefix = ConfigText({"a", "b"});
  ASSERT_EQ(full.compare(0, prefix.size(), prefix), 0);
  int fd = open(path_.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, prefix.data(), prefix.size()), static_cast<ssize_t>(prefix.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // the old code reloaded here
  ASSERT_EQ(write(fd, full.data() + prefix.size(), full.size() - prefix.size()),
            static_cast<ssize_t>(full.size() - prefix.size()));
  close(fd);
  ASSERT_TRUE(WaitFor(
      [](const View& v) { return v.stats.reloads_ok + v.stats.reloads_refused >= 1; }));
  // A later change, as a marker: what came before it is all counted by then.
  ReplaceWith(ConfigText({"a", "b", "c", "d"}));
  ASSERT_TRUE(WaitFor([](const View& v) { return v.vips.size() == 4; }));
  View v = Look();
  EXPECT_EQ(v.stats.reloads_ok, 2u);
  EXPECT_EQ(v.stats.reloads_refused, 0u);
  EXPECT_EQ(v.generation, 3u);
  std::vector<std::string> reloads = LogLines("reload (file changed)");
  ASSERT_EQ(reloads.size(), 2u);
  EXPECT_NE(reloads[0].find("generation 2: +vip b, +vip c;"), std::string::npos) << reloads[0];
  EXPECT_NE(reloads[1].find("generation 3: +vip d;"), std::string::npos) << reloads[1];
}

}  // namespace
}  // namespace maglb
