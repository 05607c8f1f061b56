// The Prometheus exposition (control/prometheus.h) of a small running state:
// Prometheus' own checker (`promtool check metrics`, Debian's prometheus
// package) accepts it, names follow the conventions, each value is the one
// the metric list reads, and hostile VIP and backend names are escaped. The
// two histograms (packet latency per worker, reload apply time) are
// cumulative, in seconds, and agree with what was recorded.
#include "control/prometheus.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "control/metrics_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "maglb/config.h"
#include "maglb/lb_state.h"

namespace maglb {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A VIP and a backend whose names carry the two characters the format
// escapes that a config name may hold (" and \; names are printable ASCII,
// so no newline: EscapesNewlines covers it).
constexpr char kConfig[] = R"([lb]
ipv4 = "10.0.0.10"
[conntrack]
capacity = 4096
[[vip]]
name = 'we"b\x'
address = "10.100.0.1"
protocol = "tcp"
port = 80
forwarding = "gre"
table_size = 251
  [[vip.backend]]
  name = "be1"
  address = "10.0.0.11"
  [[vip.backend]]
  name = 'be"2\'
  address = "10.0.0.12"
  weight = 3
[[vip]]
name = "dns"
address = "fd00:100::1"
protocol = "udp"
port = 53
forwarding = "ipip"
algorithm = "rendezvous"
  [[vip.backend]]
  name = "be3"
  address = "10.0.0.13"
)";

struct Fixture {
  Fixture() {
    absl::StatusOr<Config> c = ParseConfig(kConfig, "test.toml");
    EXPECT_TRUE(c.ok()) << c.status();
    config = *c;
    absl::StatusOr<std::unique_ptr<const LbState>> s = BuildLbState(config, nullptr);
    EXPECT_TRUE(s.ok()) << s.status();
    state = *std::move(s);
    for (int i = 0; i < 2; ++i) {
      workers.push_back(std::make_unique<Worker>(config.conntrack));
      loops.push_back(std::make_unique<LoopCounters>());
      options.workers.push_back(workers.back().get());
      options.loop_counters.push_back(loops.back().get());
    }
    options.port.port_id = 3;
    loops[0]->polls.Add(1000);
    loops[0]->busy_polls.Add(250);
    loops[1]->polls.Add(7);
    loops[1]->tx_full.Add(5);
    control.started_ns = 1;
    control.reloads_refused = 2;
    // Latency: 32 frames at 100 ns and 2 at 3 us on worker 0; one at 200 ms
    // (above every bound) on worker 1.
    loops[0]->latency.Record(100, 32);
    loops[0]->latency.Record(3'000, 2);
    loops[1]->latency.Record(200'000'000, 1);
    // Reloads: one applied 1.5 ms after its trigger, one refused (not timed).
    control.reload_timings.Add({.generation = 2, .outcome = ReloadOutcome::kApplied, .event_ns = 1'000,
                                .published_ns = 2'000, .workers_ns = 1'501'000});
    control.reload_timings.Add({.generation = 2, .outcome = ReloadOutcome::kRefused, .event_ns = 9'000,
                                .published_ns = 0, .workers_ns = 0});
    BackendHealthStatus& h = control.backend_health[{"dns", "be3"}];
    h.health = BackendHealth::kUp;
    h.since_unix_ms = 1'700'000'000'123;
    h.probes = 9;
  }

  std::string Render() {
    CounterTotals totals = SumCounters(*state, options.workers);
    for (CounterTotals::Backend& b : totals.vips[0].backends) {
      if (b.name == "be\"2\\") b.counters.packets = 42;
    }
    totals.vips[0].counters.bytes = 4242;
    totals.drops[static_cast<size_t>(DropReason::kNoVip)] = 17;
    const MetricsView view(*state, totals, control, options, 5'000'000'001);
    return RenderPrometheus(view);
  }

  Config config;
  std::unique_ptr<const LbState> state;
  std::vector<std::unique_ptr<Worker>> workers;
  std::vector<std::unique_ptr<LoopCounters>> loops;
  ControlStats control;
  ControllerOptions options;
};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Runs `promtool check metrics` on `text`: its exit code and what it said.
std::pair<int, std::string> Promtool(const std::string& text) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    absl::StrFormat("maglb-prom-test-%d", getpid());
  std::filesystem::create_directories(dir);
  const std::string in = (dir / "metrics.txt").string(), out = (dir / "promtool.txt").string();
  std::ofstream(in) << text;
  const int status = std::system(absl::StrFormat("promtool check metrics < %s > %s 2>&1", in, out).c_str());
  std::ifstream said(out);
  std::stringstream s;
  s << said.rdbuf();
  std::filesystem::remove_all(dir);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, s.str()};
}

TEST(Prometheus, PromtoolAcceptsTheExposition) {
  ASSERT_EQ(std::system("command -v promtool > /dev/null"), 0)
      << "promtool is not installed (Debian's prometheus package; scripts/install-deps.sh installs it)";
  Fixture f;
  const std::string text = f.Render();
  auto [rc, said] = Promtool(text);
  EXPECT_EQ(rc, 0) << said << "\n---\n" << text;
  EXPECT_EQ(said, "") << text;  // not even a lint warning
  // It does refuse what is wrong: a counter without _total, an unescaped quote.
  EXPECT_NE(Promtool("# HELP x_packets p\n# TYPE x_packets counter\nx_packets 1\n").first, 0);
  EXPECT_NE(Promtool("# HELP x_info i\n# TYPE x_info gauge\nx_info{vip=\"a\"b\"} 1\n").first, 0);
}

TEST(Prometheus, EveryListEntryIsAFamilyOnceWithHelpAndType) {
  Fixture f;
  const std::string text = f.Render();
  std::map<std::string, int> types;
  std::set<std::string> sampled;
  for (const std::string& line : Lines(text)) {
    std::smatch m;
    if (std::regex_match(line, m, std::regex("# TYPE (\\S+) (counter|gauge|histogram)"))) {
      ++types[m[1]];
    } else if (std::regex_match(line, m, std::regex("([a-z_]+)(\\{.*\\})? [0-9]+(\\.[0-9]+)?"))) {
      sampled.insert(m[1]);
    } else {
      EXPECT_TRUE(line.starts_with("# HELP ")) << line;
    }
  }
  for (const MetricInfo& m : Metrics()) {
    const std::string name = PrometheusName(m);
    EXPECT_EQ(types[name], 1) << name;
    EXPECT_TRUE(sampled.count(name)) << name;
    EXPECT_TRUE(name.starts_with("maglb_")) << name;
    EXPECT_EQ(name.ends_with("_total"), m.type == MetricType::kCounter) << name;
    if (m.unit == "seconds" || m.unit == "milliseconds") {
      EXPECT_TRUE(name.ends_with("_seconds")) << name;
      EXPECT_THAT(name, Not(HasSubstr("_ms"))) << name;
    }
    if (m.unit == "bytes") {
      EXPECT_THAT(name, HasSubstr("_bytes")) << name;
    }
  }
  EXPECT_EQ(types["maglb_vip_info"], 1);
  for (const char* histogram : {"maglb_packet_latency_seconds", "maglb_reload_apply_seconds"}) {
    EXPECT_EQ(types[histogram], 1) << histogram;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      EXPECT_TRUE(sampled.count(std::string(histogram) + suffix)) << histogram << suffix;
    }
  }
  // One family of drops, every reason in it (from two lists: the pipeline's
  // and the loop's), once each.
  std::set<std::string> reasons;
  for (const std::string& line : Lines(text)) {
    std::smatch m;
    if (std::regex_match(line, m, std::regex("maglb_drop_total\\{reason=\"([a-z0-9_]+)\"\\} [0-9]+"))) {
      EXPECT_TRUE(reasons.insert(m[1]).second) << line;
    }
  }
  for (const MetricInfo& m : Metrics()) {
    if (m.name != "drop") continue;
    for (std::string_view r : m.reasons()) EXPECT_TRUE(reasons.count(std::string(r))) << r;
  }
  EXPECT_TRUE(reasons.count("rx_multiseg"));
}

TEST(Prometheus, ValuesAndLabelsAreTheListsReads) {
  Fixture f;
  const std::string text = f.Render();
  // Per backend, hostile names escaped; per VIP; per reason.
  EXPECT_THAT(text, HasSubstr("maglb_backend_packets_total{vip=\"we\\\"b\\\\x\",backend=\"be\\\"2\\\\\"} 42\n"));
  EXPECT_THAT(text, HasSubstr("maglb_backend_packets_total{vip=\"we\\\"b\\\\x\",backend=\"be1\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("maglb_backend_weights{vip=\"we\\\"b\\\\x\",backend=\"be\\\"2\\\\\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("maglb_vip_bytes_total{vip=\"we\\\"b\\\\x\"} 4242\n"));
  EXPECT_THAT(text, HasSubstr("maglb_drop_total{reason=\"no_vip\"} 17\n"));
  // Per worker: worker i polls queue i of the data port.
  EXPECT_THAT(text, HasSubstr("maglb_worker_polls_total{worker=\"0\",port=\"3\",queue=\"0\"} 1000\n"));
  EXPECT_THAT(text, HasSubstr("maglb_worker_busy_polls_total{worker=\"0\",port=\"3\",queue=\"0\"} 250\n"));
  EXPECT_THAT(text, HasSubstr("maglb_worker_polls_total{worker=\"1\",port=\"3\",queue=\"1\"} 7\n"));
  EXPECT_THAT(text, HasSubstr("maglb_conntrack_occupied{worker=\"1\",port=\"3\",queue=\"1\"} 0\n"));
  // Plain ones, in base units: seconds, and milliseconds as seconds.
  EXPECT_THAT(text, HasSubstr("\nmaglb_tx_full_total 5\n"));
  EXPECT_THAT(text, HasSubstr("\nmaglb_reloads_refused_total 2\n"));
  EXPECT_THAT(text, HasSubstr("\nmaglb_generation 1\n"));
  EXPECT_THAT(text, HasSubstr("\nmaglb_uptime_seconds 5\n"));
  EXPECT_THAT(text, HasSubstr("maglb_backend_health_since_seconds{vip=\"dns\",backend=\"be3\"} 1700000000.123\n"));
  EXPECT_THAT(text, HasSubstr("maglb_backend_health_since_seconds{vip=\"we\\\"b\\\\x\",backend=\"be1\"} 0\n"))
      << "unchecked: 0";
  EXPECT_THAT(text, Not(HasSubstr("backend=\"be1\",vip=")));  // labels in LabelNames' order
  EXPECT_THAT(text, HasSubstr("maglb_backend_health_probes_total{vip=\"dns\",backend=\"be3\"} 9\n"));
  // The VIP info: settings and fingerprint as labels.
  const std::string fp0 = absl::StrFormat("%016x", f.state->vips()[0].fingerprint());
  const std::string fp1 = absl::StrFormat("%016x", f.state->vips()[1].fingerprint());
  EXPECT_THAT(text, HasSubstr("maglb_vip_info{vip=\"we\\\"b\\\\x\",address=\"10.100.0.1\",protocol=\"tcp\",port=\"80\","
                              "forwarding=\"gre\",algorithm=\"maglev\",fingerprint=\"" + fp0 + "\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("maglb_vip_info{vip=\"dns\",address=\"fd00:100::1\",protocol=\"udp\",port=\"53\","
                              "forwarding=\"ipip\",algorithm=\"rendezvous\",fingerprint=\"" + fp1 + "\"} 1\n"));
}

TEST(Prometheus, HistogramsAreCumulativeInSeconds) {
  Fixture f;
  const std::string text = f.Render();
  const std::string w0 = "maglb_packet_latency_seconds_bucket{worker=\"0\",port=\"3\",queue=\"0\",le=";
  EXPECT_THAT(text, HasSubstr(w0 + "\"0.000000064\"} 0\n"));
  EXPECT_THAT(text, HasSubstr(w0 + "\"0.000000128\"} 32\n"));  // the 100 ns frames
  EXPECT_THAT(text, HasSubstr(w0 + "\"0.000002048\"} 32\n"));
  EXPECT_THAT(text, HasSubstr(w0 + "\"0.000004096\"} 34\n"));  // and the 3 us ones
  EXPECT_THAT(text, HasSubstr(w0 + "\"0.134217728\"} 34\n"));  // the last bound, 2^27 ns
  EXPECT_THAT(text, HasSubstr(w0 + "\"+Inf\"} 34\n"));
  EXPECT_THAT(text, Not(HasSubstr(w0 + "\"0.000000072\"")));  // one bucket per power of two
  EXPECT_THAT(text, HasSubstr("maglb_packet_latency_seconds_sum{worker=\"0\",port=\"3\",queue=\"0\"} 0.0000092\n"));
  EXPECT_THAT(text, HasSubstr("maglb_packet_latency_seconds_count{worker=\"0\",port=\"3\",queue=\"0\"} 34\n"));
  const std::string w1 = "maglb_packet_latency_seconds_bucket{worker=\"1\",port=\"3\",queue=\"1\",le=";
  EXPECT_THAT(text, HasSubstr(w1 + "\"0.134217728\"} 0\n"));
  EXPECT_THAT(text, HasSubstr(w1 + "\"+Inf\"} 1\n"));  // 200 ms: above every bound
  EXPECT_THAT(text, HasSubstr("maglb_packet_latency_seconds_sum{worker=\"1\",port=\"3\",queue=\"1\"} 0.2\n"));
  // 22 bounds and +Inf a worker.
  size_t buckets = 0;
  for (const std::string& line : Lines(text)) buckets += line.starts_with(w0);
  EXPECT_EQ(buckets, 23u);
  // The applied reload, 1.5 ms; the refused one is not timed.
  EXPECT_THAT(text, HasSubstr("maglb_reload_apply_seconds_bucket{le=\"0.0001\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("maglb_reload_apply_seconds_bucket{le=\"0.001\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("maglb_reload_apply_seconds_bucket{le=\"0.0025\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("maglb_reload_apply_seconds_bucket{le=\"10\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("maglb_reload_apply_seconds_bucket{le=\"+Inf\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("\nmaglb_reload_apply_seconds_sum 0.0015\n"));
  EXPECT_THAT(text, HasSubstr("\nmaglb_reload_apply_seconds_count 1\n"));
}

TEST(Prometheus, NoLabelIsLeftEmpty) {
  // Every label name of every kind has its value (LabelValue knows them all).
  Fixture f;
  for (const std::string& line : Lines(f.Render())) {
    EXPECT_THAT(line, Not(HasSubstr("=\"\""))) << line;
  }
}

TEST(Prometheus, EscapesNewlinesQuotesAndBackslashes) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
  EXPECT_EQ(EscapeHelp("say \"x\" \\ then\nmore"), "say \"x\" \\\\ then\\nmore");
  // promtool reads the escapes back to one sample with the hostile value.
  auto [rc, said] = Promtool("# HELP maglb_x_info Help \\\\ with\\nescapes\n# TYPE maglb_x_info gauge\n"
                             "maglb_x_info{vip=\"" + EscapeLabelValue("a\"}\n b\\ 2") + "\"} 1\n");
  EXPECT_EQ(rc, 0) << said;
}

TEST(Prometheus, NamesOfFamiliesDoNotCollide) {
  std::set<std::string> names;
  for (const MetricInfo& m : Metrics()) {
    if (&m != &Metrics().front() && (&m - 1)->name == m.name) continue;  // one family
    EXPECT_TRUE(names.insert(PrometheusName(m)).second) << PrometheusName(m);
  }
  EXPECT_FALSE(names.count("maglb_vip_info"));
  for (const char* histogram : {"maglb_packet_latency_seconds", "maglb_reload_apply_seconds"}) {
    for (const char* suffix : {"", "_bucket", "_sum", "_count"}) {
      EXPECT_FALSE(names.count(std::string(histogram) + suffix)) << histogram << suffix;
    }
  }
}

}  // namespace
}  // namespace maglb
