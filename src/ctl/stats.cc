#include "stats.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "report.h"
#include "maglb/exit_codes.h"
#include "maglb/health.h"
#include "maglb/lb_state.h"
#include "maglb/metrics.h"
#include "nlohmann/json.hpp"

namespace maglb {
namespace {

constexpr int kReplyTimeoutMs = 2000;
constexpr size_t kMaxReply = 1 << 20;
constexpr int kMaxReplyDepth = 32;

// Replies keep their fields' order (the table lists reasons in it).
using Json = nlohmann::ordered_json;

// A number field (0 if absent or not a number: an older maglb), a string
// field ("" likewise).
// Counters are never negative: a negative or non-finite number reads as 0,
// one past 2^64 as the largest (no undefined float-to-integer cast).
uint64_t AsU64(const Json& x) {
  if (x.is_number_unsigned()) return x.get<uint64_t>();
  if (x.is_number_integer()) return std::max<int64_t>(x.get<int64_t>(), 0);
  if (!x.is_number_float()) return 0;
  const double d = x.get<double>();
  if (!(d > 0)) return 0;  // negative, zero or NaN
  return d >= 18446744073709551616.0 ? UINT64_MAX : static_cast<uint64_t>(d);
}
uint64_t U64(const Json& j, std::string_view key) {
  auto it = j.find(std::string(key));
  return it != j.end() ? AsU64(*it) : 0;
}
std::string Str(const Json& j, std::string_view key) {
  auto it = j.find(std::string(key));
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}
const Json* Get(const Json& j, std::string_view key) {
  auto it = j.find(std::string(key));
  return it != j.end() ? &*it : nullptr;
}
uint64_t U64(const Json& j, MetricId id) { return U64(j, GetMetric(id).name); }
// A VIP metric in a /maglb/vip reply.
uint64_t VipU64(const Json& j, MetricId id) { return U64(j, VipKey(GetMetric(id))); }

class TelemetryClient {
 public:
  ~TelemetryClient() {
    if (fd_ >= 0) close(fd_);
  }
  absl::Status Connect(const std::string& path) {
    fd_ = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    if (fd_ < 0) return absl::InternalError(absl::StrFormat("socket: %s", std::strerror(errno)));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof(addr.sun_path)) return absl::InvalidArgumentError("socket path too long");
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0) {
      return absl::UnavailableError(absl::StrFormat(
          "cannot connect to %s: %s (is maglb running with that --file-prefix?)", path,
          std::strerror(errno)));
    }
    // The server greets with its version and limits first.
    absl::StatusOr<std::string> hello = Read();
    if (!hello.ok()) return hello.status();
    return absl::OkStatus();
  }
  absl::StatusOr<Json> Query(const std::string& cmd, std::string* raw) {
    if (send(fd_, cmd.data(), cmd.size(), 0) < 0) {
      return absl::UnavailableError(absl::StrFormat("send %s: %s", cmd, std::strerror(errno)));
    }
    absl::StatusOr<std::string> reply = Read();
    if (!reply.ok()) return reply.status();
    // Nested deeper than any reply of maglb's is refused, as the hand-written
    // parser before nlohmann did: Dump (and the table) recurse per level.
    bool too_deep = false;
    Json j = Json::parse(
        *reply,
        [&too_deep](int depth, Json::parse_event_t, Json&) {
          too_deep |= depth > kMaxReplyDepth;
          return true;
        },
        /*allow_exceptions=*/false);
    if (too_deep || j.is_discarded() || !j.is_object() || j.empty()) {
      return absl::DataLossError(absl::StrFormat("unreadable reply to %s: %s", cmd, *reply));
    }
    // {"<cmd>": value}; value is null when the command failed or is unknown.
    const size_t colon = reply->find(':');
    if (raw != nullptr && colon != std::string::npos) {
      *raw = reply->substr(colon + 1, reply->size() - colon - 2);
    }
    return std::move(j.begin().value());
  }

 private:
  absl::StatusOr<std::string> Read() {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, kReplyTimeoutMs) <= 0) {
      return absl::DeadlineExceededError("no reply from maglb's telemetry socket within 2 s");
    }
    std::string buf(kMaxReply, '\0');
    ssize_t n = recv(fd_, buf.data(), buf.size(), 0);
    if (n <= 0) return absl::UnavailableError("telemetry socket closed");
    buf.resize(static_cast<size_t>(n));
    return buf;
  }
  int fd_ = -1;
};

std::string Num(uint64_t v) { return absl::StrFormat("%u", v); }

// JSON text of a value, as maglbctl has always printed it ({"k": v, ...},
// arrays as DPDK writes them): a VIP's pages, merged, are no one reply's text.
std::string Dump(const Json& j) {
  return report::InlineJson(j, {.array_separator = ",", .floats_as_nine_digits = false});
}

// The per-backend arrays of /maglb/vip: names and addresses, the texts of
// health, then every backend metric of the list.
const std::vector<std::string>& BackendArrays() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k(std::begin(kBackendTextKeys), std::end(kBackendTextKeys));
    for (const MetricInfo& m : Metrics()) {
      if (m.labels.kind == MetricLabels::kVipBackend) k.emplace_back(m.name);
    }
    return k;
  }();
  return keys;
}

// What a maglb from before health checks does not send. A reply without
// backend_health is from one: these arrays are not missing from it (its
// backends' health prints "?", JSON null); a reply with it lacks none.
bool IsHealthArray(std::string_view key) {
  using enum MetricId;
  for (std::string_view text : {kBackendHealthKey, kBackendHealthReasonsKey, kBackendHealthChecksKey,
                                kBackendLastProbesKey}) {
    if (key == text) return true;
  }
  for (MetricId id : {kBackendEffectiveWeights, kBackendHealthUp, kBackendHealthChecked, kBackendHealthHeldDown,
                      kBackendHealthSince, kBackendHealthProbes, kBackendHealthProbeFailures,
                      kBackendHealthTransitions}) {
    if (key == GetMetric(id).name) return true;
  }
  return false;
}
bool SendsHealth(const Json& vip) { return vip.contains(std::string(kBackendHealthKey)); }

constexpr int kPageAttempts = 3;

size_t ArraySize(const Json* a) { return a != nullptr && a->is_array() ? a->size() : 0; }

// One VIP with all its backends: /maglb/vip answers a page at a time
// (DPDK's reply holds 16 KB and an array 512 entries), so the pages are
// fetched and their arrays joined. A reload between pages (generation or
// fingerprint changed) starts over. Returns a null Json if the VIP is gone.
absl::StatusOr<Json> FetchVip(TelemetryClient& client, const std::string& name) {
  for (int attempt = 0; attempt < kPageAttempts; ++attempt) {
    absl::StatusOr<Json> first = client.Query(absl::StrCat("/maglb/vip,", name), nullptr);
    if (!first.ok() || !first->is_object()) return first;
    if (Get(*first, "backend_total") == nullptr) return first;  // an older maglb: one reply is all there is
    if (const uint64_t total = U64(*first, "backend_total"); total > kMaxBackendsTotal) {
      return absl::DataLossError(absl::StrFormat(
          "maglb's /maglb/vip,%s claims %u backends, more than any maglb serves (%u): not read", name,
          total, kMaxBackendsTotal));
    }
    Json merged = *std::move(first);
    size_t have = ArraySize(Get(merged, kBackendNamesKey));
    bool restart = false;
    while (have < U64(merged, "backend_total")) {
      absl::StatusOr<Json> page = client.Query(absl::StrFormat("/maglb/vip,%s,%u", name, have),
                                               nullptr);
      if (!page.ok()) return page.status();
      if (!page->is_object()) return Json{};  // removed by a reload meanwhile
      if (U64(*page, "generation") != U64(merged, "generation") ||
          Str(*page, "fingerprint") != Str(merged, "fingerprint") ||
          U64(*page, "backend_total") != U64(merged, "backend_total")) {
        restart = true;
        break;
      }
      const size_t page_rows = ArraySize(Get(*page, kBackendNamesKey));
      if (page_rows == 0) break;  // reported as short
      for (const std::string& key : BackendArrays()) {
        auto into = merged.find(key);
        const Json* from = Get(*page, key);
        // Missing or not arrays: reported as missing.
        if (into == merged.end() || !into->is_array() || from == nullptr || !from->is_array()) continue;
        into->insert(into->end(), from->begin(), from->end());
      }
      have += page_rows;
    }
    if (restart) continue;
    if (auto offset = merged.find("backend_offset"); offset != merged.end()) *offset = 0;
    return merged;
  }
  return absl::UnavailableError(absl::StrFormat(
      "vip \"%s\" changed while its backends were read, %d times: reloading fast? try again",
      name, kPageAttempts));
}

// Every VIP name. /maglb/vips answers a page at a time (DPDK's arrays hold
// 512 entries, its reply 16 KB), so the pages are fetched and joined; a
// reload between pages (generation or VIP count changed) starts over.
struct VipList {
  std::vector<std::string> names;
  std::string gap;  ///< what is missing, in words; "" if the list is whole
};

absl::StatusOr<VipList> FetchVipNames(TelemetryClient& client) {
  constexpr size_t kDpdkArrayLimit = 512;  // RTE_TEL_MAX_ARRAY_ENTRIES
  for (int attempt = 0; attempt < kPageAttempts; ++attempt) {
    absl::StatusOr<Json> first = client.Query("/maglb/vips", nullptr);
    if (!first.ok()) return first.status();
    if (!first->is_object()) return absl::UnavailableError("maglb answered null to /maglb/vips (shutting down?)");
    VipList list;
    auto append = [&](const Json& page) {
      const Json* names = Get(page, "names");
      if (ArraySize(names) == 0) return size_t{0};
      for (const Json& n : *names) list.names.push_back(n.is_string() ? n.get<std::string>() : "");
      return names->size();
    };
    append(*first);
    if (Get(*first, "vip_total") == nullptr) {
      // An older maglb: one reply is all there is, cut silently at DPDK's limit.
      if (list.names.size() >= kDpdkArrayLimit) {
        list.gap = absl::StrFormat(
            "%u VIP names, DPDK's array limit: the list may be cut (this maglb does not page "
            "/maglb/vips)",
            list.names.size());
      }
      return list;
    }
    const uint64_t total = U64(*first, "vip_total");
    if (total > kMaxVips) {  // paged one name at a time, a lie would never end
      return absl::DataLossError(absl::StrFormat(
          "maglb's /maglb/vips claims %u VIPs, more than any maglb serves (%u): not read", total, kMaxVips));
    }
    bool restart = false;
    while (list.names.size() < total) {
      absl::StatusOr<Json> page =
          client.Query(absl::StrFormat("/maglb/vips,%u", list.names.size()), nullptr);
      if (!page.ok()) return page.status();
      if (!page->is_object() || U64(*page, "generation") != U64(*first, "generation") ||
          U64(*page, "vip_total") != total) {
        restart = true;
        break;
      }
      if (append(*page) == 0) break;  // reported as short
    }
    if (restart) continue;
    if (list.names.size() < total) {
      list.gap = absl::StrFormat("%u of %u VIP names", list.names.size(), total);
    }
    return list;
  }
  return absl::UnavailableError(absl::StrFormat(
      "the VIP list changed while it was read, %d times: reloading fast? try again",
      kPageAttempts));
}

// What the reply of a VIP lacks for its backend count, in words; "" if none.
std::string VipGaps(const Json& v) {
  const uint64_t want = Get(v, "backend_total") != nullptr ? U64(v, "backend_total")
                                                           : ArraySize(Get(v, kBackendNamesKey));
  std::vector<std::string> gaps;
  const bool sends_health = SendsHealth(v);
  for (const std::string& key : BackendArrays()) {
    if (!sends_health && IsHealthArray(key)) continue;
    const Json* a = Get(v, key);
    if (a == nullptr || !a->is_array()) {
      gaps.push_back(absl::StrFormat("%s missing", key));
    } else if (a->size() < want) {
      gaps.push_back(absl::StrFormat("%s has %u of %u", key, a->size(), want));
    }
  }
  return absl::StrJoin(gaps, ", ");
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

// One VIP of the details: its name and its reply (pages merged).
using VipDetail = std::pair<std::string, Json>;

// The backends a VIP reply has rows for: backend_total, or (an older maglb)
// its names. FetchVip has refused a total past kMaxBackendsTotal.
size_t BackendRows(const Json& v) {
  return Get(v, "backend_total") != nullptr ? U64(v, "backend_total") : ArraySize(Get(v, kBackendNamesKey));
}

// Entry i of the reply's array `key`; null if it has none there.
const Json* Entry(const Json& v, std::string_view key, size_t i) {
  const Json* a = Get(v, key);
  return ArraySize(a) > i ? &(*a)[i] : nullptr;
}
const Json* Entry(const Json& v, MetricId id, size_t i) { return Entry(v, GetMetric(id).name, i); }
// A counter or gauge as maglb sends it, a non-negative integer; nullopt for
// anything else (absent, negative, a float, a string).
std::optional<uint64_t> Count(const Json* x) {
  if (x == nullptr || !x->is_number_integer()) return std::nullopt;
  if (x->is_number_unsigned()) return x->get<uint64_t>();
  const int64_t i = x->get<int64_t>();
  return i >= 0 ? std::optional<uint64_t>(static_cast<uint64_t>(i)) : std::nullopt;
}
std::optional<std::string> Text(const Json* x) {
  return x != nullptr && x->is_string() ? std::optional<std::string>(x->get<std::string>()) : std::nullopt;
}

// A text of the reply as the terminal gets it: printable ASCII, anything
// else '?' (no escape sequence of a hostile reply reaches the terminal; a
// real maglb sends nothing else), at most kMaxShownText bytes.
constexpr size_t kMaxShownText = 200;
std::string Shown(std::string_view s) {
  const bool cut = s.size() > kMaxShownText;
  std::string out;
  for (char ch : s.substr(0, cut ? kMaxShownText - 3 : s.size())) {
    out += ch >= 0x20 && ch < 0x7f ? ch : '?';
  }
  return cut ? out + "..." : out;
}
std::string ShownCount(std::optional<uint64_t> c) { return c ? Num(*c) : "?"; }

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
void RenderJson(const std::string& stats_raw, const std::vector<VipDetail>& vips) {
  std::vector<std::string> details;
  for (const auto& [name, v] : vips) {
    Json with_backends = v;
    Json& backends = with_backends["backends"] = Json::array();
    for (size_t i = 0; i < BackendRows(v); ++i) backends.push_back(BackendObject(v, i));
    details.push_back(absl::StrCat(Json(name).dump(), ": ", Dump(with_backends)));
  }
  std::printf("{\"stats\": %s, \"vips\": {%s}}\n", stats_raw.c_str(),
              absl::StrJoin(details, ", ").c_str());
}

// The table output, through maglbctl's report writer: the totals as one
// table of lines, then a table per VIP. Metric names come from the list
// (maglb/metrics.h).
report::Report TableReport(const Json& stats, const std::vector<VipDetail>& vips,
                           const std::string& vip_gap) {
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
  for (const auto& [vip_name, v] : vips) {
    auto vn = [&](MetricId id) { return VipU64(v, id); };
    report::Table& t = out.tables.emplace_back();
    t.id = absl::StrCat("vip:", vip_name);
    t.title = absl::StrFormat("vip \"%s\" %s %s/%u %s  fingerprint %s  packets %u bytes %u new flows %u",
                              Str(v, "name"), Str(v, "address"), Str(v, "protocol"), U64(v, "port"),
                              Str(v, "forwarding"), Str(v, "fingerprint"), vn(kVipPackets), vn(kVipBytes),
                              vn(kVipNewFlows));
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
  if (socket_path.empty()) socket_path = "/var/run/dpdk/" + prefix + "/dpdk_telemetry.v2";
  TelemetryClient client;
  if (absl::Status s = client.Connect(socket_path); !s.ok()) {
    std::fprintf(stderr, "maglbctl: %s\n", std::string(s.message()).c_str());
    return kExitError;
  }
  std::string stats_raw;
  absl::StatusOr<Json> stats = client.Query("/maglb/stats", &stats_raw);
  if (!stats.ok()) {
    std::fprintf(stderr, "maglbctl: %s\n", std::string(stats.status().message()).c_str());
    return kExitError;
  }
  if (!stats->is_object()) {
    std::fprintf(stderr, "maglbctl: %s does not answer /maglb/stats: is it maglb?\n",
                 socket_path.c_str());
    return kExitError;
  }
  absl::StatusOr<VipList> vips = FetchVipNames(client);
  if (!vips.ok()) {
    std::fprintf(stderr, "maglbctl: %s\n", std::string(vips.status().message()).c_str());
    return kExitError;
  }
  std::vector<VipDetail> details;
  int rc = kExitOk;
  if (!vips->gap.empty()) {
    // Never a silent exit 0 on a cut list.
    std::fprintf(stderr, "maglbctl: warning: incomplete VIP list from maglb: %s\n",
                 vips->gap.c_str());
    rc = kExitError;
  }
  for (const std::string& name : vips->names) {
    absl::StatusOr<Json> v = FetchVip(client, name);
    if (!v.ok()) {
      std::fprintf(stderr, "maglbctl: %s\n", std::string(v.status().message()).c_str());
      return kExitError;
    }
    if (v->is_null()) continue;  // removed by a reload meanwhile
    if (!v->is_object()) {
      std::fprintf(stderr, "maglbctl: unreadable reply to /maglb/vip,%s: not an object\n", name.c_str());
      return kExitError;
    }
    if (std::string gaps = VipGaps(*v); !gaps.empty()) {
      std::fprintf(stderr, "maglbctl: warning: vip \"%s\": incomplete reply from maglb: %s\n",
                   name.c_str(), gaps.c_str());
      rc = kExitError;
    }
    details.emplace_back(name, *std::move(v));
  }
  if (format == "json") {
    RenderJson(stats_raw, details);
  } else {
    report::Print(TableReport(*stats, details, vips->gap), report::Format::kText);
  }
  return rc;
}

}  // namespace maglb
