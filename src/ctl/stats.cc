#include "stats.h"

#include <cstdio>
#include <ctime>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "report.h"
#include "telemetry_client.h"
#include "maglb/exit_codes.h"
#include "maglb/health.h"
#include "maglb/metrics.h"
#include "nlohmann/json.hpp"

namespace maglb {
namespace {

using telemetry::ArraySize;
using telemetry::AsU64;
using telemetry::BackendRows;
using telemetry::Count;
using telemetry::Entry;
using telemetry::Get;
using telemetry::Json;
using telemetry::SendsHealth;
using telemetry::Shown;
using telemetry::Str;
using telemetry::Text;
using telemetry::U64;
using telemetry::VipDetail;
using telemetry::VipGaps;
using telemetry::VipU64;

std::string Num(uint64_t v) { return absl::StrFormat("%u", v); }
std::string ShownCount(std::optional<uint64_t> c) { return c ? Num(*c) : "?"; }

// JSON text of a value, as maglbctl has always printed it ({"k": v, ...},
// arrays as DPDK writes them): a VIP's pages, merged, are no one reply's text.
std::string Dump(const Json& j) {
  return report::InlineJson(j, {.array_separator = ",", .floats_as_nine_digits = false});
}

// "reason=value" for each non-zero value of a reason-labelled family.
std::string NonZeroReasons(const Json& stats, MetricId family) {
  std::vector<std::string> out;
  for (const MetricInfo& m : Metrics()) {
    if (m.name != GetMetric(family).name) continue;
    for (std::string_view reason : m.reasons()) {
      if (uint64_t v = U64(stats, ReasonKey(m, reason)); v != 0) {
        out.push_back(absl::StrFormat("%s=%u", reason, v));
      }
    }
  }
  return out.empty() ? "none" : absl::StrJoin(out, " ");
}

// Unix milliseconds as UTC ISO 8601 ("2026-12-01T18:30:02Z"); "?" for none
// (0) or what no clock says (past the year 9999).
std::string UtcTime(std::optional<uint64_t> unix_ms) {
  constexpr uint64_t kYear10000Ms = 253402300800000;
  if (!unix_ms || *unix_ms == 0 || *unix_ms >= kYear10000Ms) return "?";
  const time_t secs = static_cast<time_t>(*unix_ms / 1000);
  tm utc{};
  char buf[32];
  if (gmtime_r(&secs, &utc) == nullptr || std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &utc) == 0) {
    return "?";
  }
  return buf;
}

// What the check of backend i says, for the table: "be2: down since
// 2026-12-01T18:30:02Z (3 consecutive failures: connect timeout 500 ms);
// http via tunnel to 10.100.0.1:80; probes 40, failed 12, transitions 3;
// last probe: connection refused". Nullopt for a backend without a check,
// or whose health the reply lacks.
std::optional<std::string> HealthNote(const Json& v, size_t i) {
  using enum MetricId;
  const std::optional<std::string> health = Text(Entry(v, kBackendHealthKey, i));
  if (!health || *health == HealthName(BackendHealth::kUnchecked)) return std::nullopt;
  const std::string name = Text(Entry(v, kBackendNamesKey, i)).value_or("?");
  std::string note = absl::StrFormat("%s: %s", Shown(name), Shown(*health));
  if (Count(Entry(v, kBackendHealthHeldDown, i)).value_or(0) == 1) note += " (held down: flapping)";
  absl::StrAppend(&note, " since ", UtcTime(Count(Entry(v, kBackendHealthSince, i))));
  if (std::optional<std::string> reason = Text(Entry(v, kBackendHealthReasonsKey, i)); reason && !reason->empty()) {
    absl::StrAppend(&note, " (", Shown(*reason), ")");
  }
  absl::StrAppend(&note, "; ", Shown(Text(Entry(v, kBackendHealthChecksKey, i)).value_or("check ?")));
  absl::StrAppend(&note, absl::StrFormat("; probes %s, failed %s, transitions %s",
                                         ShownCount(Count(Entry(v, kBackendHealthProbes, i))),
                                         ShownCount(Count(Entry(v, kBackendHealthProbeFailures, i))),
                                         ShownCount(Count(Entry(v, kBackendHealthTransitions, i)))));
  if (std::optional<std::string> probe = Text(Entry(v, kBackendLastProbesKey, i)); probe && !probe->empty()) {
    absl::StrAppend(&note, "; last probe: ", Shown(*probe));
  }
  return note;
}

// The announce line of the totals: "announce: announcing, table 4242, 2 of 3
// routes (10.100.0.1/32 yes: web: 3 of 3 backends serving; ...); route
// changes 5, errors 0". The reply's parallel arrays are read entry by entry:
// one shorter than prefixes gives "?", one longer is not read.
std::string AnnounceLine(const Json& a, const std::string& error) {
  constexpr size_t kMaxListed = 32;  // the rest: --format json
  if (!error.empty()) return absl::StrCat("announce: unreadable (", Shown(error), ")");
  if (a.is_null()) return "announce: not reported (this maglb is older than route announcement)";
  const std::optional<std::string> state = Text(Get(a, "state"));
  if (state && *state == "off") return "announce: off (no [announce] in the config)";
  std::string line = absl::StrCat("announce: ", state ? Shown(*state) : "?");
  if (state && *state == "draining") {
    absl::StrAppend(&line, " until ", UtcTime(Count(Get(a, "drain_until_unix_ms"))));
  }
  absl::StrAppend(&line, absl::StrFormat(", table %u, %u of %u routes", U64(a, "table"), U64(a, "routes"),
                                         U64(a, "prefix_total")));
  const Json* prefixes = Get(a, "prefixes");
  const size_t listed = ArraySize(prefixes);
  std::vector<std::string> entries;
  for (size_t i = 0; i < listed && i < kMaxListed; ++i) {
    const std::optional<uint64_t> on = Count(Entry(a, "announced", i));
    const std::optional<std::string> reason = Text(Entry(a, "reasons", i));
    entries.push_back(absl::StrFormat("%s %s: %s", Shown(Text(&(*prefixes)[i]).value_or("?")),
                                      !on || *on > 1 ? "?" : *on == 1 ? "yes" : "no",
                                      reason ? Shown(*reason) : "?"));
  }
  if (listed > kMaxListed) entries.push_back(absl::StrFormat("%u more: see --format json", listed - kMaxListed));
  if (U64(a, "prefix_total") > listed) {
    entries.push_back(absl::StrFormat("the reply lists %u of %u", listed, U64(a, "prefix_total")));
  }
  if (!entries.empty()) absl::StrAppend(&line, " (", absl::StrJoin(entries, "; "), ")");
  absl::StrAppend(&line, absl::StrFormat("; route changes %u, errors %u", U64(a, "route_changes"),
                                         U64(a, "route_errors")));
  return line;
}

// Backend i as one JSON object, from the reply's parallel arrays. A value
// the reply lacks (an older maglb, a short or hostile reply) is null, never
// a made-up one.
Json BackendObject(const Json& v, size_t i) {
  using enum MetricId;
  auto text = [&](std::string_view key) {
    std::optional<std::string> t = Text(Entry(v, key, i));
    return t ? Json(*t) : Json(nullptr);
  };
  auto count = [&](MetricId id) {
    std::optional<uint64_t> c = Count(Entry(v, id, i));
    return c ? Json(*c) : Json(nullptr);
  };
  auto flag = [&](MetricId id) {  // a 0/1 gauge
    std::optional<uint64_t> c = Count(Entry(v, id, i));
    return c && *c <= 1 ? Json(*c == 1) : Json(nullptr);
  };
  Json b = Json::object();
  b["name"] = text(kBackendNamesKey);
  b["address"] = text(kBackendAddressesKey);
  b["weight"] = count(kBackendWeights);
  b["effective_weight"] = count(kBackendEffectiveWeights);
  b["health"] = text(kBackendHealthKey);
  b["health_reason"] = text(kBackendHealthReasonsKey);
  b["health_since_ms"] = count(kBackendHealthSince);
  b["health_held_down"] = flag(kBackendHealthHeldDown);
  b["entries"] = count(kBackendTableEntries);
  b["packets"] = count(kBackendPackets);
  b["bytes"] = count(kBackendBytes);
  b["new_flows"] = count(kBackendNewFlows);
  b["next_hop_resolved"] = flag(kBackendNextHopResolved);
  b["probes"] = count(kBackendHealthProbes);
  b["probe_failures"] = count(kBackendHealthProbeFailures);
  b["transitions"] = count(kBackendHealthTransitions);
  b["check"] = text(kBackendHealthChecksKey);
  b["last_probe"] = text(kBackendLastProbesKey);
  return b;
}

// The --format json output: /maglb/stats' reply as it came, and each VIP's
// (its pages merged) with "backends": one object per backend, for tools
// that read keys rather than parallel arrays.
void RenderJson(const std::string& stats_raw, const std::string& announce_raw, const std::vector<VipDetail>& vips) {
  std::vector<std::string> details;
  for (const auto& [name, v] : vips) {
    Json with_backends = v;
    Json& backends = with_backends["backends"] = Json::array();
    for (size_t i = 0; i < BackendRows(v); ++i) backends.push_back(BackendObject(v, i));
    details.push_back(absl::StrCat(Json(name).dump(), ": ", Dump(with_backends)));
  }
  // "announce": /maglb/announce's reply as it came; null from an older maglb.
  std::printf("{\"stats\": %s, \"announce\": %s, \"vips\": {%s}}\n", stats_raw.c_str(),
              announce_raw.empty() ? "null" : announce_raw.c_str(), absl::StrJoin(details, ", ").c_str());
}

// The table output, through maglbctl's report writer: the totals as one
// table of lines, then a table per VIP. Metric names come from the list
// (maglb/metrics.h).
report::Report TableReport(const telemetry::Snapshot& snap) {
  const Json& stats = snap.stats;
  const std::vector<VipDetail>& vips = snap.vips;
  const std::string& vip_gap = snap.vip_gap;
  using enum MetricId;
  report::Report out;
  out.blank_line_after_each = false;
  auto n = [&](MetricId id) { return U64(stats, id); };
  report::Table& totals = out.tables.emplace_back();
  totals.id = "totals";
  totals.title = absl::StrFormat("maglb: generation %u, up %us, %u worker(s); port %s", n(kGeneration),
                                 n(kUptime), n(kWorkers), Str(stats, "port"));
  totals.notes.push_back(absl::StrFormat("rx %u packets %u bytes; tx %u packets %u bytes; dropped %u",
                                         n(kRxPackets), n(kRxBytes), n(kTxPackets), n(kTxBytes),
                                         n(kDropped)));
  std::vector<std::string> local;  // what the LB answered or made itself, and TX losses
  std::vector<std::string_view> local_names(std::begin(kLocalCounterLabels), std::end(kLocalCounterLabels));
  local_names.push_back(GetMetric(kTxFull).name);
  for (std::string_view k : local_names) {
    if (uint64_t v = U64(stats, k); v != 0) local.push_back(absl::StrFormat("%s=%u", k, v));
  }
  totals.notes.push_back(absl::StrCat("drops: ", NonZeroReasons(stats, kDrop)));
  totals.notes.push_back(absl::StrCat("local: ", local.empty() ? "none" : absl::StrJoin(local, " ")));
  if (n(kToKernelPackets) != 0 || n(kFromKernelPackets) != 0 || n(kKernelQueueFull) != 0) {
    // The exception path (its rate-limit drops are on the drops line).
    totals.notes.push_back(absl::StrFormat(
        "kernel interface: %u frames %u bytes up to it, %u frames %u bytes from it; queue full %u",
        n(kToKernelPackets), n(kToKernelBytes), n(kFromKernelPackets), n(kFromKernelBytes),
        n(kKernelQueueFull)));
  }
  totals.notes.push_back(absl::StrFormat("neighbors: %u updates, %u ARP / %u ND requests sent; ignored: %s",
                                         n(kNeighborUpdates), n(kArpRequestsSent), n(kNdRequestsSent),
                                         NonZeroReasons(stats, kNeighborIgnored)));
  std::vector<std::string> per_worker;
  if (const Json* a = Get(stats, PerWorkerKey(GetMetric(kConntrackOccupied))); ArraySize(a) != 0) {
    for (const Json& v : *a) per_worker.push_back(Num(AsU64(v)));
  }
  totals.notes.push_back(absl::StrFormat(
      "conntrack: %u flows (per worker: %s; capacity %u each), evictions %u, untracked %u, repinned %u",
      n(kConntrackOccupied), absl::StrJoin(per_worker, " "), n(kConntrackCapacity), n(kConntrackEvictions),
      n(kConntrackUntracked), n(kConntrackRepinned)));
  const std::string last_refusal = Str(stats, "last_refusal");
  totals.notes.push_back(absl::StrFormat("reloads: %u ok, %u refused%s%s", n(kReloadsOk), n(kReloadsRefused),
                                         last_refusal.empty() ? "" : "; last refusal: ", Shown(last_refusal)));
  if (Get(stats, GetMetric(kHealthProbes).name) != nullptr) {
    totals.notes.push_back(absl::StrFormat("health: %u probes, %u failed, %u transitions, %u rebuilds",
                                           n(kHealthProbes), n(kHealthProbeFailures), n(kHealthTransitions),
                                           n(kHealthRebuilds)));
  } else {
    totals.notes.push_back("health: not reported (this maglb is older than health checks)");
  }
  totals.notes.push_back(AnnounceLine(snap.announce, snap.announce_error));
  for (const auto& [vip_name, vip] : vips) {
    const Json& v = vip;  // a plain reference: clang before 16 cannot capture a structured binding
    auto vn = [&](MetricId id) { return VipU64(v, id); };
    report::Table& t = out.tables.emplace_back();
    t.id = absl::StrCat("vip:", vip_name);
    // "announced yes|no" from a maglb that announces routes; "?" for a
    // value that is no 0/1.
    std::string announced;
    if (const Json* x = Get(v, VipKey(GetMetric(kVipAnnounced))); x != nullptr) {
      const std::optional<uint64_t> on = Count(x);
      announced = absl::StrCat("  announced ", !on || *on > 1 ? "?" : *on == 1 ? "yes" : "no");
    }
    t.title = absl::StrFormat("vip \"%s\" %s %s/%u %s  fingerprint %s%s  packets %u bytes %u new flows %u",
                              Str(v, "name"), Str(v, "address"), Str(v, "protocol"), U64(v, "port"),
                              Str(v, "forwarding"), Str(v, "fingerprint"), announced, vn(kVipPackets),
                              vn(kVipBytes), vn(kVipNewFlows));
    if (vn(kVipBoundedLoadPassed) != 0 || vn(kVipBoundedLoadOver) != 0) {
      t.notes.push_back(absl::StrFormat(
          "bounded load: %u new flows passed on from their first choice, %u found no backend below the bound",
          vn(kVipBoundedLoadPassed), vn(kVipBoundedLoadOver)));
    }
    using report::Align;
    t.columns = {report::FixedColumn("backend", Align::kLeft, 20),
                 report::FixedColumn("address", Align::kLeft, 28),
                 report::FixedColumn("health", Align::kLeft, 9),
                 report::FixedColumn("weight", Align::kRight, 7),
                 report::FixedColumn("eff_weight", Align::kRight, 10),
                 report::FixedColumn("entries", Align::kRight, 8),
                 report::FixedColumn("packets", Align::kRight, 12),
                 report::FixedColumn("bytes", Align::kRight, 14),
                 report::FixedColumn("new_flows", Align::kRight, 10),
                 report::FixedColumn("next_hop", Align::kRight, 9)};
    // A value the reply lacks prints as "?", never as a blank or a zero.
    auto at = [&](std::string_view key, size_t i) -> report::Cell {
      const Json* x = Entry(v, key, i);
      if (x == nullptr) return report::Str("?");
      return report::Str(x->is_string() ? Shown(x->get<std::string>()) : x->is_number() ? x->dump() : "?");
    };
    auto backend = [&](MetricId id, size_t i) { return at(GetMetric(id).name, i); };
    const size_t rows = BackendRows(v);
    for (size_t i = 0; i < rows; ++i) {
      const std::optional<uint64_t> nh = Count(Entry(v, kBackendNextHopResolved, i));
      const std::optional<std::string> health = Text(Entry(v, kBackendHealthKey, i));
      t.rows.push_back({at(kBackendNamesKey, i), at(kBackendAddressesKey, i),
                        report::Str(health ? Shown(*health) : "?"), backend(kBackendWeights, i),
                        backend(kBackendEffectiveWeights, i), backend(kBackendTableEntries, i),
                        backend(kBackendPackets, i), backend(kBackendBytes, i), backend(kBackendNewFlows, i),
                        report::Str(!nh || *nh > 1 ? "?" : *nh == 1 ? "resolved" : "PENDING")});
      if (std::optional<std::string> note = HealthNote(v, i)) t.footer.push_back(*std::move(note));
    }
    if (!SendsHealth(v)) t.footer.push_back("health: not reported (this maglb is older than health checks)");
    if (std::string gaps = VipGaps(v); !gaps.empty()) {
      t.footer.push_back(absl::StrFormat("INCOMPLETE: the reply lacks values (%s); \"?\" marks them", gaps));
    }
  }
  if (!vip_gap.empty()) {
    report::Table& missing = out.tables.emplace_back();
    missing.id = "vip_list";
    missing.title = absl::StrFormat("INCOMPLETE: VIPs are missing from this list (%s)", vip_gap);
  }
  return out;
}

}  // namespace

int CmdStats(int argc, char** argv) {
  std::string prefix = "rte", socket_path, format = "table";
  for (int i = 0; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--prefix" && i + 1 < argc) {
      prefix = argv[++i];
    } else if (a == "--socket" && i + 1 < argc) {
      socket_path = argv[++i];
    } else if (a == "--format" && i + 1 < argc) {
      format = argv[++i];
      if (format != "table" && format != "json") {
        std::fprintf(stderr, "maglbctl stats: --format is table or json, not '%s'\n", format.c_str());
        return kExitUsage;
      }
    } else {
      std::fprintf(stderr, "maglbctl stats: unexpected argument '%s'\n%s", argv[i], kStatsUsage);
      return kExitUsage;
    }
  }
  if (socket_path.empty()) socket_path = telemetry::SocketPath(prefix);
  absl::StatusOr<telemetry::Snapshot> snap = telemetry::ReadSnapshot(socket_path);
  if (!snap.ok()) {
    std::fprintf(stderr, "maglbctl: %s\n", std::string(snap.status().message()).c_str());
    return kExitError;
  }
  // Never a silent exit 0 on an incomplete reply.
  for (const std::string& w : snap->warnings) std::fprintf(stderr, "maglbctl: warning: %s\n", w.c_str());
  if (!snap->announce_error.empty()) {
    std::fprintf(stderr, "maglbctl: warning: route announcement: %s\n", snap->announce_error.c_str());
  }
  const int rc = snap->warnings.empty() && snap->announce_error.empty() ? kExitOk : kExitError;
  if (format == "json") {
    RenderJson(snap->stats_raw, snap->announce_raw, snap->vips);
  } else {
    report::Print(TableReport(*snap), report::Format::kText);
  }
  return rc;
}

}  // namespace maglb
