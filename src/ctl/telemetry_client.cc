#include "telemetry_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "maglb/lb_state.h"

namespace maglb::telemetry {
namespace {

constexpr int kReplyTimeoutMs = 2000;
constexpr size_t kMaxReply = 1 << 20;
constexpr int kMaxReplyDepth = 32;
constexpr int kPageAttempts = 3;
constexpr size_t kMaxShownText = 200;

}  // namespace

std::string SocketPath(std::string_view prefix) {
  return "/var/run/dpdk/" + std::string(prefix) + "/dpdk_telemetry.v2";
}


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

TelemetryClient::~TelemetryClient() {
  if (fd_ >= 0) close(fd_);
}
absl::Status TelemetryClient::Connect(const std::string& path) {
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
  // Kept for who asks (drain takes the pid from it); a greeting that is no
  // JSON object reads as an empty one: stats and fleet never needed it.
  Json parsed = Json::parse(
      *hello, [](int depth, Json::parse_event_t, Json&) { return depth <= kMaxReplyDepth; },
      /*allow_exceptions=*/false);
  greeting_ = parsed.is_object() ? std::move(parsed) : Json::object();
  return absl::OkStatus();
}

std::optional<pid_t> TelemetryClient::PeerPid() const {
  if (fd_ < 0) return std::nullopt;
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd_, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof(cred)) return std::nullopt;
  return cred.pid;
}

absl::StatusOr<int> GreetingPid(const Json& greeting) {
  constexpr int64_t kPidMaxLimit = 4 * 1024 * 1024;  // PID_MAX_LIMIT on 64-bit Linux
  const Json* pid = Get(greeting, "pid");
  if (pid == nullptr) return absl::DataLossError("the telemetry greeting names no pid");
  // Integers only: 1234.0 or "1234" is not what DPDK writes.
  if (pid->is_number_unsigned() && pid->get<uint64_t>() <= static_cast<uint64_t>(kPidMaxLimit) &&
      pid->get<uint64_t>() >= 1) {
    return static_cast<int>(pid->get<uint64_t>());
  }
  if (pid->is_number_integer() && !pid->is_number_unsigned()) {
    const int64_t v = pid->get<int64_t>();
    if (v >= 1 && v <= kPidMaxLimit) return static_cast<int>(v);
  }
  return absl::DataLossError(absl::StrFormat(
      "the telemetry greeting's pid is %s, not a process id (1 to %d)", Shown(pid->dump()), kPidMaxLimit));
}
absl::StatusOr<Json> TelemetryClient::Query(const std::string& cmd, std::string* raw) {
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
    // The reply shown as Shown does: cut, and no escape sequence reaches a terminal.
    return absl::DataLossError(
        absl::StrFormat("unreadable reply to %s (%u bytes): %s", Shown(cmd), reply->size(), Shown(*reply)));
  }
  // {"<cmd>": value}; value is null when the command failed or is unknown.
  const size_t colon = reply->find(':');
  if (raw != nullptr && colon != std::string::npos) {
    *raw = reply->substr(colon + 1, reply->size() - colon - 2);
  }
  return std::move(j.begin().value());
}

absl::StatusOr<std::string> TelemetryClient::Read() {
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
std::string Shown(std::string_view s) {
  const bool cut = s.size() > kMaxShownText;
  std::string out;
  for (char ch : s.substr(0, cut ? kMaxShownText - 3 : s.size())) {
    out += ch >= 0x20 && ch < 0x7f ? ch : '?';
  }
  return cut ? out + "..." : out;
}


absl::StatusOr<Snapshot> ReadSnapshot(const std::string& socket_path) {
  TelemetryClient client;
  if (absl::Status s = client.Connect(socket_path); !s.ok()) return s;
  return ReadSnapshot(client, socket_path);
}

absl::StatusOr<Snapshot> ReadSnapshot(TelemetryClient& client, const std::string& socket_path) {
  Snapshot snap;
  absl::StatusOr<Json> stats = client.Query("/maglb/stats", &snap.stats_raw);
  if (!stats.ok()) return stats.status();
  if (!stats->is_object()) {
    return absl::DataLossError(
        absl::StrFormat("%s does not answer /maglb/stats: is it maglb?", socket_path));
  }
  snap.stats = *std::move(stats);
  absl::StatusOr<VipList> vips = FetchVipNames(client);
  if (!vips.ok()) return vips.status();
  snap.vip_gap = vips->gap;
  if (!vips->gap.empty()) {
    snap.warnings.push_back(absl::StrCat("incomplete VIP list from maglb: ", vips->gap));
  }
  for (const std::string& name : vips->names) {
    absl::StatusOr<Json> v = FetchVip(client, name);
    if (!v.ok()) return v.status();
    if (v->is_null()) continue;  // removed by a reload meanwhile
    if (!v->is_object()) {
      return absl::DataLossError(
          absl::StrFormat("unreadable reply to /maglb/vip,%s: not an object", Shown(name)));
    }
    if (std::string gaps = VipGaps(*v); !gaps.empty()) {
      snap.warnings.push_back(
          absl::StrFormat("vip \"%s\": incomplete reply from maglb: %s", Shown(name), gaps));
    }
    snap.vips.emplace_back(name, *std::move(v));
  }
  // Last, and never fatal: the tables and counters above stand without it.
  absl::StatusOr<Json> announce = client.Query("/maglb/announce", &snap.announce_raw);
  if (!announce.ok()) {
    snap.announce_error = std::string(announce.status().message());
  } else if (!announce->is_null() && !announce->is_object()) {
    snap.announce_error = "unreadable reply to /maglb/announce: not an object";
  } else {
    snap.announce = *std::move(announce);
  }
  if (snap.announce.is_null()) snap.announce_raw.clear();
  return snap;
}

}  // namespace maglb::telemetry
