#include "top.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "maglb/exit_codes.h"
#include "maglb/metrics.h"
#include "report.h"
#include "telemetry_client.h"

namespace maglb {
namespace {

using telemetry::BackendRows;
using telemetry::Count;
using telemetry::Entry;
using telemetry::Get;
using telemetry::Json;
using telemetry::Shown;
using telemetry::Text;

volatile sig_atomic_t g_stop = 0;
void OnStopSignal(int) { g_stop = 1; }

double MonotonicSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// One read of maglb: what it answered, when (the read's start, on the
// monotonic clock: rates divide by the time between two starts) and which
// process answered (0: its greeting named none).
struct Sample {
  telemetry::Snapshot snap;
  double at = 0;
  int pid = 0;
};

absl::StatusOr<Sample> ReadSample(const std::string& socket_path) {
  Sample s;
  s.at = MonotonicSeconds();
  telemetry::TelemetryClient client;
  if (absl::Status st = client.Connect(socket_path); !st.ok()) return st;
  s.pid = telemetry::GreetingPid(client.greeting()).value_or(0);
  absl::StatusOr<telemetry::Snapshot> snap = telemetry::ReadSnapshot(client, socket_path);
  if (!snap.ok()) return snap.status();
  s.snap = *std::move(snap);
  return s;
}

// Whether nothing answers at the socket any more (maglb stopped): the
// connect is refused or the socket is gone. A maglb that is there but slow
// or answering nonsense is not stopped.
bool Gone(const std::string& socket_path) {
  telemetry::TelemetryClient client;
  return absl::IsUnavailable(client.Connect(socket_path));
}

// A rate as the view prints it: tenths below 100/s, whole numbers below
// 10^7, then three significant digits (a hostile 2^64 per second fits too).
std::string RateText(double per_second) {
  if (per_second < 100) return absl::StrFormat("%.1f", per_second);
  if (per_second < 1e7) return absl::StrFormat("%.0f", per_second);
  return absl::StrFormat("%.3g", per_second);
}

// The rates between two reads. A counter that either read lacks (or holds
// no non-negative integer) rates "?"; one that went back "-", and `went_back`
// is set: its owner was replaced or maglb restarted, and it starts over.
struct Rates {
  double seconds = 0;
  bool went_back = false;
  std::string Of(std::optional<uint64_t> before, std::optional<uint64_t> after) {
    if (!before || !after) return "?";
    if (*after < *before) {
      went_back = true;
      return "-";
    }
    return RateText(static_cast<double>(*after - *before) / seconds);
  }
  // The rate as a number, for the drops line: nullopt when "?" or "-".
  std::optional<double> Value(std::optional<uint64_t> before, std::optional<uint64_t> after) {
    if (!before || !after) return std::nullopt;
    if (*after < *before) {
      went_back = true;
      return std::nullopt;
    }
    return static_cast<double>(*after - *before) / seconds;
  }
};

std::optional<uint64_t> Global(const telemetry::Snapshot& s, std::string_view key) {
  return Count(Get(s.stats, key));
}
std::optional<uint64_t> Global(const telemetry::Snapshot& s, MetricId id) {
  return Global(s, GetMetric(id).name);
}
std::optional<uint64_t> VipCount(const Json& v, MetricId id) { return Count(Get(v, VipKey(GetMetric(id)))); }

// The counters that say how much this maglb has done since it started:
// every totals line of the view. One that went back means another process.
std::vector<std::string> GlobalCounterKeys() {
  std::vector<std::string> keys;
  using enum MetricId;
  for (MetricId id : {kRxPackets, kRxBytes, kTxPackets, kTxBytes, kDropped}) keys.emplace_back(GetMetric(id).name);
  for (const MetricInfo& m : Metrics()) {
    if (m.name != GetMetric(kDrop).name) continue;
    for (std::string_view reason : m.reasons()) keys.push_back(ReasonKey(m, reason));
  }
  for (MetricId id : {kTxFull, kControlRingFull, kExtraAllocFail, kKernelQueueFull}) {
    keys.emplace_back(GetMetric(id).name);
  }
  return keys;
}

// Why `cur` is from another maglb than `prev` (a restart under the same
// prefix), in words; "" if it is the same one.
std::string RestartReason(const Sample& prev, const Sample& cur) {
  if (prev.pid != 0 && cur.pid != 0 && prev.pid != cur.pid) {
    return absl::StrFormat("pid %d, was %d", cur.pid, prev.pid);
  }
  const std::optional<uint64_t> up0 = Global(prev.snap, MetricId::kUptime);
  const std::optional<uint64_t> up1 = Global(cur.snap, MetricId::kUptime);
  if (up0 && up1 && *up1 < *up0) return absl::StrFormat("up %us, was %us", *up1, *up0);
  for (const std::string& key : GlobalCounterKeys()) {
    const std::optional<uint64_t> a = Global(prev.snap, key), b = Global(cur.snap, key);
    if (a && b && *b < *a) return absl::StrFormat("%s went back from %u to %u", key, *a, *b);
  }
  return "";
}

const Json* FindVip(const telemetry::Snapshot& s, const std::string& name) {
  for (const auto& [n, v] : s.vips) {
    if (n == name) return &v;
  }
  return nullptr;
}
// The backend row named `name` in a VIP reply; nullopt if none.
std::optional<size_t> FindBackend(const Json& v, const std::string& name) {
  const size_t rows = BackendRows(v);
  for (size_t i = 0; i < rows; ++i) {
    if (Text(Entry(v, kBackendNamesKey, i)) == name) return i;
  }
  return std::nullopt;
}

std::string CountText(std::optional<uint64_t> c) { return c ? absl::StrFormat("%u", *c) : "?"; }
std::string Flag(const Json* x) {  // a 0/1 gauge
  const std::optional<uint64_t> c = Count(x);
  return !c || *c > 1 ? "?" : *c == 1 ? "yes" : "no";
}
std::string UtcNow() {
  const time_t now = time(nullptr);
  tm utc{};
  char buf[32];
  if (gmtime_r(&now, &utc) == nullptr || std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &utc) == 0) return "";
  return buf;
}

struct ViewOptions {
  std::string source;     ///< the prefix or socket, for the heading
  double interval = 1;
  size_t width = 0;       ///< a terminal's columns; 0: not a terminal, no fitting
  size_t height = 0;      ///< a terminal's rows; 0: no limit
};

// The view of `cur`, with rates since `prev` (none: "-" everywhere, the
// first read after a restart). `notes` come under the totals.
std::vector<std::string> RenderView(const Sample* prev, const Sample& cur, const ViewOptions& opt,
                                    std::vector<std::string> notes) {
  using enum MetricId;
  const telemetry::Snapshot& s = cur.snap;
  Rates rates;
  rates.seconds = prev != nullptr ? std::max(cur.at - prev->at, 1e-3) : 1;
  // Counters of the previous read; nullopt without one (the rate is "-").
  auto before = [&](std::string_view key) { return prev ? Global(prev->snap, key) : std::nullopt; };
  auto rate = [&](std::string_view key) {
    return prev ? rates.Of(Global(prev->snap, key), Global(s, key)) : std::string("-");
  };
  auto name = [](MetricId id) { return GetMetric(id).name; };

  report::Table t;
  t.title = absl::StrFormat("maglb %s%s: generation %s, up %ss, %s worker(s); every %gs; %s", Shown(opt.source),
                            cur.pid != 0 ? absl::StrFormat(" (pid %d)", cur.pid) : "",
                            CountText(Global(s, kGeneration)), CountText(Global(s, kUptime)),
                            CountText(Global(s, kWorkers)), opt.interval, UtcNow());
  t.notes.push_back(absl::StrFormat("rx %s pkts/s %s bytes/s; tx %s pkts/s %s bytes/s; conntrack %s flows",
                                    rate(name(kRxPackets)), rate(name(kRxBytes)), rate(name(kTxPackets)),
                                    rate(name(kTxBytes)), CountText(Global(s, kConntrackOccupied))));
  // Drops: the total, then each reason whose rate is not zero.
  std::vector<std::string> reasons;
  if (prev != nullptr) {
    for (const std::string& key : GlobalCounterKeys()) {
      if (key == name(kRxPackets) || key == name(kRxBytes) || key == name(kTxPackets) ||
          key == name(kTxBytes) || key == name(kDropped)) {
        continue;
      }
      const std::optional<double> r = rates.Value(before(key), Global(s, key));
      if (!r || *r == 0) continue;
      // "drop_no_vip" shows as "no_vip"; tx_full and the like as they are.
      const std::string shown = key.starts_with("drop_") ? key.substr(5) : key;
      reasons.push_back(absl::StrCat(shown, " ", RateText(*r)));
    }
  }
  t.notes.push_back(absl::StrCat("drops/s: ", rate(name(kDropped)),
                                 reasons.empty() ? "" : absl::StrCat(" (", absl::StrJoin(reasons, ", "), ")")));
  if (s.announce.is_object()) {
    const std::optional<std::string> state = Text(Get(s.announce, "state"));
    std::string line = absl::StrCat("announce: ", state ? Shown(*state) : "?");
    if (state != "off") {
      absl::StrAppend(&line, absl::StrFormat(", %s of %s routes", CountText(Count(Get(s.announce, "routes"))),
                                             CountText(Count(Get(s.announce, "prefix_total")))));
    }
    t.notes.push_back(std::move(line));
  }
  if (prev != nullptr) {
    const std::optional<uint64_t> g0 = Global(prev->snap, kGeneration), g1 = Global(s, kGeneration);
    if (g0 && g1 && *g0 != *g1) notes.push_back(absl::StrFormat("reloaded: generation %u, was %u", *g1, *g0));
  }
  for (const std::string& w : s.warnings) notes.push_back(absl::StrCat("warning: ", Shown(w)));
  for (std::string& n : notes) t.notes.push_back(std::move(n));

  using report::Align;
  t.columns = {report::FixedColumn("vip/backend", Align::kLeft, 0),
               report::FixedColumn("address", Align::kLeft, 0),
               report::FixedColumn("health", Align::kLeft, 0),
               report::FixedColumn("weight", Align::kRight, 0),
               report::FixedColumn("eff_weight", Align::kRight, 0),
               report::FixedColumn("pkts/s", Align::kRight, 8),
               report::FixedColumn("bytes/s", Align::kRight, 10),
               report::FixedColumn("flows/s", Align::kRight, 8),
               report::FixedColumn("announced", Align::kLeft, 0)};
  std::vector<std::string> went_back;  // rows whose counters started over
  for (const auto& [vip_name, vip] : s.vips) {
    const Json& v = vip;  // a plain reference: clang before 16 cannot capture a structured binding
    const Json* pv = prev ? FindVip(prev->snap, vip_name) : nullptr;
    Rates row_rates = rates;
    row_rates.went_back = false;
    auto vip_rate = [&](MetricId id) {
      return pv != nullptr ? row_rates.Of(VipCount(*pv, id), VipCount(v, id)) : std::string("-");
    };
    const size_t rows = BackendRows(v);
    size_t up = 0, known = 0;
    for (size_t i = 0; i < rows; ++i) {
      const std::optional<std::string> h = Text(Entry(v, kBackendHealthKey, i));
      if (!h) continue;
      ++known;
      if (*h != "down") ++up;
    }
    const Json* announced = Get(v, VipKey(GetMetric(kVipAnnounced)));
    std::vector<report::Cell> vip_row = {
        report::Str(Shown(vip_name)),
        report::Str(absl::StrFormat("%s %s/%s %s", Shown(telemetry::Str(v, "address")),
                                    Shown(telemetry::Str(v, "protocol")), CountText(Count(Get(v, "port"))),
                                    Shown(telemetry::Str(v, "forwarding")))),
        report::Str(known != 0 ? absl::StrFormat("%u/%u up", up, rows) : ""),
        report::Str(""),
        report::Str(""),
        report::Str(vip_rate(kVipPackets)),
        report::Str(vip_rate(kVipBytes)),
        report::Str(vip_rate(kVipNewFlows)),
        report::Str(announced != nullptr ? Flag(announced) : "")};
    if (row_rates.went_back) went_back.push_back(Shown(vip_name));
    t.rows.push_back(std::move(vip_row));
    for (size_t i = 0; i < rows; ++i) {
      const std::optional<std::string> be_name = Text(Entry(v, kBackendNamesKey, i));
      std::optional<size_t> pi = pv != nullptr && be_name ? FindBackend(*pv, *be_name) : std::nullopt;
      Rates be_rates = rates;
      be_rates.went_back = false;
      auto be_rate = [&](MetricId id) {
        return pi ? be_rates.Of(Count(Entry(*pv, id, *pi)), Count(Entry(v, id, i))) : std::string("-");
      };
      std::string health = Shown(Text(Entry(v, kBackendHealthKey, i)).value_or("?"));
      if (Count(Entry(v, kBackendHealthHeldDown, i)).value_or(0) == 1) health += " (held)";
      t.rows.push_back({report::Str(absl::StrCat("  ", Shown(be_name.value_or("?")))),
                        report::Str(Shown(Text(Entry(v, kBackendAddressesKey, i)).value_or("?"))),
                        report::Str(std::move(health)),
                        report::Str(CountText(Count(Entry(v, kBackendWeights, i)))),
                        report::Str(CountText(Count(Entry(v, kBackendEffectiveWeights, i)))),
                        report::Str(be_rate(kBackendPackets)), report::Str(be_rate(kBackendBytes)),
                        report::Str(be_rate(kBackendNewFlows)), report::Str("")});
      if (be_rates.went_back) went_back.push_back(absl::StrCat(Shown(vip_name), "/", Shown(be_name.value_or("?"))));
    }
  }
  if (s.vips.empty()) t.footer.push_back("no VIPs");
  if (!went_back.empty()) {
    t.footer.push_back(absl::StrFormat("counters went back for %s (replaced by a reload?): their rates start over",
                                       absl::StrJoin(went_back, ", ")));
  }

  report::Report r;
  r.fit_columns = true;
  r.blank_line_after_each = false;
  r.note_indent = "";
  r.tables.push_back(t);
  std::string text = report::RenderText(r);
  auto widest = [](const std::string& txt) {
    size_t w = 0;
    for (absl::string_view line : absl::StrSplit(txt, '\n')) w = std::max(w, line.size());
    return w;
  };
  // Too wide for the terminal: the addresses go first (the rest is what
  // changes), then every line is cut at its edge.
  if (opt.width != 0 && widest(text) > opt.width) {
    r.tables[0].columns.erase(r.tables[0].columns.begin() + 1);
    for (std::vector<report::Cell>& row : r.tables[0].rows) row.erase(row.begin() + 1);
    text = report::RenderText(r);
  }
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  for (std::string& line : lines) {
    if (opt.width != 0 && line.size() > opt.width) line.resize(opt.width);
    while (!line.empty() && line.back() == ' ') line.pop_back();  // the padding of the last column
  }
  if (opt.height > 1 && lines.size() > opt.height - 1) {
    const size_t more = lines.size() - (opt.height - 2);
    lines.resize(opt.height - 2);
    lines.push_back(absl::StrFormat("... %u more lines (a taller terminal shows them; or maglbctl top | less)", more));
    if (opt.width != 0 && lines.back().size() > opt.width) lines.back().resize(opt.width);
  }
  return lines;
}

// A terminal's size (TIOCGWINSZ, else $COLUMNS/$LINES); 0 for what is unknown.
void TerminalSize(size_t* width, size_t* height) {
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col != 0) {
    *width = ws.ws_col;
    *height = ws.ws_row;
    return;
  }
  auto env = [](const char* var) -> size_t {
    const char* v = std::getenv(var);
    size_t n = 0;
    return v != nullptr && absl::SimpleAtoi(v, &n) && n >= 10 && n <= 10000 ? n : 0;
  };
  *width = env("COLUMNS");
  *height = env("LINES");
}

// Prints a view: on a terminal over the previous one (home, each line
// cleared to its end, the rest of the screen cleared: no flicker over a
// slow ssh), else as a block and a blank line.
void Show(const std::vector<std::string>& lines, bool tty) {
  std::string out = tty ? "\x1b[H" : "";
  for (const std::string& line : lines) absl::StrAppend(&out, line, tty ? "\x1b[K\n" : "\n");
  out += tty ? "\x1b[J" : "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

// Sleeps until `deadline` on the monotonic clock, in short steps: a stop
// signal ends it within one step however it raced the check.
void SleepUntil(double deadline) {
  while (g_stop == 0) {
    const double left = deadline - MonotonicSeconds();
    if (left <= 0) return;
    const double step = std::min(left, 0.2);
    timespec ts{static_cast<time_t>(step), static_cast<long>((step - std::floor(step)) * 1e9)};
    nanosleep(&ts, nullptr);  // EINTR: a signal; the loop looks at g_stop
  }
}

}  // namespace

int CmdTop(int argc, char** argv) {
  std::string prefix = "rte", socket_path;
  double interval = 1;
  uint64_t iterations = 0;  // 0: until stopped
  for (int i = 0; i < argc; ++i) {
    std::string_view a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--prefix" && has_value) {
      prefix = argv[++i];
    } else if (a == "--socket" && has_value) {
      socket_path = argv[++i];
    } else if (a == "--interval-s" && has_value) {
      ++i;
      if (!absl::SimpleAtod(argv[i], &interval) || !(interval >= 0.05 && interval <= 3600)) {
        std::fprintf(stderr, "maglbctl top: --interval-s is seconds from 0.05 to 3600, not '%s'\n", argv[i]);
        return kExitUsage;
      }
    } else if (a == "--iterations" && has_value) {
      ++i;
      if (!absl::SimpleAtoi(argv[i], &iterations) || iterations == 0) {
        std::fprintf(stderr, "maglbctl top: --iterations is a count of refreshes from 1, not '%s'\n", argv[i]);
        return kExitUsage;
      }
    } else {
      std::fprintf(stderr, "maglbctl top: unexpected argument '%s'\n%s", argv[i], kTopUsage);
      return kExitUsage;
    }
  }
  ViewOptions opt;
  opt.interval = interval;
  opt.source = socket_path.empty() ? prefix : socket_path;
  if (socket_path.empty()) socket_path = telemetry::SocketPath(prefix);

  // Ctrl-C and SIGTERM end the view between refreshes (no SA_RESTART: a
  // read under way is cut short): exit 0, the terminal as it was (the view
  // never changes its modes).
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  const bool tty = isatty(STDOUT_FILENO) == 1;
  absl::StatusOr<Sample> first = ReadSample(socket_path);
  if (!first.ok()) {
    if (g_stop != 0) return kExitOk;
    std::fprintf(stderr, "maglbctl top: %s\n", std::string(first.status().message()).c_str());
    return kExitError;
  }
  std::optional<Sample> prev = *std::move(first);
  if (tty) {
    std::fputs("\x1b[H\x1b[2J", stdout);
    std::printf("maglbctl top: reading %s every %gs (Ctrl-C ends)\n", Shown(socket_path).c_str(), interval);
    std::fflush(stdout);
  }
  double next = prev->at + interval;
  for (uint64_t shown = 0; iterations == 0 || shown < iterations; ++shown) {
    SleepUntil(next);
    if (g_stop != 0) break;
    // Fallen behind (a slow read, a stopped process): the next refresh
    // is one interval from now, not a burst to catch up.
    next = std::max(next + interval, MonotonicSeconds() + interval / 2);
    if (tty) TerminalSize(&opt.width, &opt.height);
    absl::StatusOr<Sample> cur = ReadSample(socket_path);
    if (g_stop != 0) break;
    if (!cur.ok()) {
      if (Gone(socket_path)) {
        std::printf("maglb stopped: nothing answers at %s\n", Shown(socket_path).c_str());
        return kExitOk;
      }
      // Slow, or an answer that is no reply: said, and the last good read
      // stays the base of the next rates.
      const std::string error = absl::StrCat("error: ", Shown(std::string(cur.status().message())),
                                             " (the figures are from the last good read)");
      Show(RenderView(nullptr, *prev, opt, {error}), tty);
      continue;
    }
    if (const std::string why = RestartReason(*prev, *cur); !why.empty()) {
      Show(RenderView(nullptr, *cur, opt, {absl::StrCat("restarted (", why, "): rates start over")}), tty);
    } else {
      Show(RenderView(&*prev, *cur, opt, {}), tty);
    }
    prev = *std::move(cur);
  }
  return kExitOk;
}

}  // namespace maglb
