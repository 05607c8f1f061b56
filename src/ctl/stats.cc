#include "stats.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace maglb {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
constexpr int kReplyTimeoutMs = 2000;
constexpr size_t kMaxReply = 1 << 20;

// A JSON value, as much as telemetry replies need.
struct Json {
  enum Type { kNull, kBool, kNumber, kString, kArray, kObject } type = kNull;
  double number = 0;
  bool boolean = false;
  std::string str;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> fields;  // in order

  const Json* Get(std::string_view key) const {
    for (const auto& [k, v] : fields) {
      if (k == key) return &v;
    }
    return nullptr;
  }
  uint64_t U64(std::string_view key) const {
    const Json* v = Get(key);
    return v != nullptr && v->type == kNumber ? static_cast<uint64_t>(v->number) : 0;
  }
  std::string Str(std::string_view key) const {
    const Json* v = Get(key);
    return v != nullptr && v->type == kString ? v->str : "";
  }
};

class JsonParser {
 public:
  explicit JsonParser(std::string_view s) : s_(s) {}
  bool Parse(Json* out) {
    if (!Value(out, 0)) return false;
    Skip();
    return i_ == s_.size();
  }

 private:
  void Skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  bool Lit(std::string_view w) {
    if (s_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }
  bool String(std::string* out) {
    if (i_ >= s_.size() || s_[i_] != '"') return false;
    ++i_;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c == '\\' && i_ < s_.size()) {
        char e = s_[i_++];
        switch (e) {
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'u': c = '?'; i_ = std::min(s_.size(), i_ + 4); break;
          default: c = e;
        }
      }
      out->push_back(c);
    }
    if (i_ >= s_.size()) return false;
    ++i_;
    return true;
  }
  bool Value(Json* out, int depth) {
    if (depth > 32) return false;
    Skip();
    if (i_ >= s_.size()) return false;
    char c = s_[i_];
    if (c == '{') {
      out->type = Json::kObject;
      ++i_;
      Skip();
      if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
      while (true) {
        Skip();
        std::string key;
        if (!String(&key)) return false;
        Skip();
        if (i_ >= s_.size() || s_[i_++] != ':') return false;
        Json v;
        if (!Value(&v, depth + 1)) return false;
        out->fields.emplace_back(std::move(key), std::move(v));
        Skip();
        if (i_ < s_.size() && s_[i_] == ',') { ++i_; continue; }
        if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
        return false;
      }
    }
    if (c == '[') {
      out->type = Json::kArray;
      ++i_;
      Skip();
      if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
      while (true) {
        Json v;
        if (!Value(&v, depth + 1)) return false;
        out->items.push_back(std::move(v));
        Skip();
        if (i_ < s_.size() && s_[i_] == ',') { ++i_; continue; }
        if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
        return false;
      }
    }
    if (c == '"') {
      out->type = Json::kString;
      return String(&out->str);
    }
    if (Lit("true")) { out->type = Json::kBool; out->boolean = true; return true; }
    if (Lit("false")) { out->type = Json::kBool; return true; }
    if (Lit("null")) { out->type = Json::kNull; return true; }
    size_t start = i_;
    while (i_ < s_.size() && (std::strchr("+-0123456789.eE", s_[i_]) != nullptr)) ++i_;
    if (i_ == start) return false;
    out->type = Json::kNumber;
    out->number = std::strtod(std::string(s_.substr(start, i_ - start)).c_str(), nullptr);
    return true;
  }
  std::string_view s_;
  size_t i_ = 0;
};

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
    Json j;
    if (!JsonParser(*reply).Parse(&j) || j.type != Json::kObject || j.fields.empty()) {
      return absl::DataLossError(absl::StrFormat("unreadable reply to %s: %s", cmd, *reply));
    }
    // {"<cmd>": value}; value is null when the command failed or is unknown.
    const size_t colon = reply->find(':');
    if (raw != nullptr && colon != std::string::npos) {
      *raw = reply->substr(colon + 1, reply->size() - colon - 2);
    }
    return std::move(j.fields[0].second);
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

void PrintTable(const Json& stats, const std::vector<Json>& vips) {
  std::printf("maglb: generation %llu, up %llus, %llu worker(s); port %s\n",
              static_cast<unsigned long long>(stats.U64("generation")),
              static_cast<unsigned long long>(stats.U64("uptime_s")),
              static_cast<unsigned long long>(stats.U64("workers")), stats.Str("port").c_str());
  std::printf("  rx %llu packets %llu bytes; tx %llu packets %llu bytes; dropped %llu\n",
              static_cast<unsigned long long>(stats.U64("rx_packets")),
              static_cast<unsigned long long>(stats.U64("rx_bytes")),
              static_cast<unsigned long long>(stats.U64("tx_packets")),
              static_cast<unsigned long long>(stats.U64("tx_bytes")),
              static_cast<unsigned long long>(stats.U64("dropped")));
  std::vector<std::string> drops, local;
  for (const auto& [k, v] : stats.fields) {
    if (v.type != Json::kNumber || v.number == 0) continue;
    if (k.rfind("drop_", 0) == 0) drops.push_back(absl::StrFormat("%s=%.0f", k.substr(5), v.number));
  }
  for (const char* k : {"arp_replies", "nd_replies", "echo_replies", "icmp_too_big_sent",
                        "fragments_sent", "icmp_errors_routed", "tx_full"}) {
    uint64_t v = stats.U64(k);
    if (v != 0) local.push_back(absl::StrFormat("%s=%u", k, v));
  }
  std::printf("  drops: %s\n", drops.empty() ? "none" : absl::StrJoin(drops, " ").c_str());
  std::printf("  local: %s\n", local.empty() ? "none" : absl::StrJoin(local, " ").c_str());
  std::vector<std::string> per_worker;
  if (const Json* a = stats.Get("conntrack_occupied_per_worker")) {
    for (const Json& v : a->items) per_worker.push_back(Num(static_cast<uint64_t>(v.number)));
  }
  std::printf("  conntrack: %llu flows (per worker: %s; capacity %llu each), evictions %llu, "
              "untracked %llu, repinned %llu\n",
              static_cast<unsigned long long>(stats.U64("conntrack_occupied")),
              absl::StrJoin(per_worker, " ").c_str(),
              static_cast<unsigned long long>(stats.U64("conntrack_capacity_per_worker")),
              static_cast<unsigned long long>(stats.U64("conntrack_evictions")),
              static_cast<unsigned long long>(stats.U64("conntrack_untracked")),
              static_cast<unsigned long long>(stats.U64("conntrack_repinned")));
  std::printf("  reloads: %llu ok, %llu refused%s%s\n",
              static_cast<unsigned long long>(stats.U64("reloads_ok")),
              static_cast<unsigned long long>(stats.U64("reloads_refused")),
              stats.Str("last_refusal").empty() ? "" : "; last refusal: ",
              stats.Str("last_refusal").c_str());
  for (const Json& v : vips) {
    std::printf("\nvip \"%s\" %s %s/%llu %s  fingerprint %s  packets %llu bytes %llu new flows %llu\n",
                v.Str("name").c_str(), v.Str("address").c_str(), v.Str("protocol").c_str(),
                static_cast<unsigned long long>(v.U64("port")), v.Str("forwarding").c_str(),
                v.Str("fingerprint").c_str(), static_cast<unsigned long long>(v.U64("packets")),
                static_cast<unsigned long long>(v.U64("bytes")),
                static_cast<unsigned long long>(v.U64("new_flows")));
    if (v.U64("bounded_load_passed") != 0 || v.U64("bounded_load_over") != 0) {
      std::printf("  bounded load: %llu new flows passed on from their first choice, %llu found no "
                  "backend below the bound\n",
                  static_cast<unsigned long long>(v.U64("bounded_load_passed")),
                  static_cast<unsigned long long>(v.U64("bounded_load_over")));
    }
    std::printf("  %-20s %-28s %7s %8s %12s %14s %10s %9s\n", "backend", "address", "weight",
                "entries", "packets", "bytes", "new_flows", "next_hop");
    const Json* names = v.Get("backend_names");
    if (names == nullptr) continue;
    auto at = [&](const char* key, size_t i) -> uint64_t {
      const Json* a = v.Get(key);
      return a != nullptr && i < a->items.size() ? static_cast<uint64_t>(a->items[i].number) : 0;
    };
    const Json* addrs = v.Get("backend_addresses");
    for (size_t i = 0; i < names->items.size(); ++i) {
      std::printf("  %-20s %-28s %7llu %8llu %12llu %14llu %10llu %9s\n",
                  names->items[i].str.c_str(),
                  addrs != nullptr && i < addrs->items.size() ? addrs->items[i].str.c_str() : "",
                  static_cast<unsigned long long>(at("backend_weights", i)),
                  static_cast<unsigned long long>(at("backend_table_entries", i)),
                  static_cast<unsigned long long>(at("backend_packets", i)),
                  static_cast<unsigned long long>(at("backend_bytes", i)),
                  static_cast<unsigned long long>(at("backend_new_flows", i)),
                  at("backend_next_hop_resolved", i) ? "resolved" : "PENDING");
    }
  }
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
  std::string stats_raw, vips_raw;
  absl::StatusOr<Json> stats = client.Query("/maglb/stats", &stats_raw);
  absl::StatusOr<Json> vips = stats.ok() ? client.Query("/maglb/vips", &vips_raw) : stats;
  if (!vips.ok()) {
    std::fprintf(stderr, "maglbctl: %s\n", std::string(vips.status().message()).c_str());
    return kExitError;
  }
  if (stats->type != Json::kObject || vips->type != Json::kObject) {
    std::fprintf(stderr, "maglbctl: %s does not answer /maglb/stats: is it maglb?\n",
                 socket_path.c_str());
    return kExitError;
  }
  std::vector<Json> details;
  std::vector<std::string> details_raw;
  if (const Json* names = vips->Get("names")) {
    for (const Json& n : names->items) {
      std::string raw;
      absl::StatusOr<Json> v = client.Query("/maglb/vip," + n.str, &raw);
      if (!v.ok()) {
        std::fprintf(stderr, "maglbctl: %s\n", std::string(v.status().message()).c_str());
        return kExitError;
      }
      if (v->type != Json::kObject) continue;  // removed by a reload meanwhile
      details.push_back(*std::move(v));
      details_raw.push_back(absl::StrFormat("\"%s\": %s", n.str, raw));
    }
  }
  if (format == "json") {
    std::printf("{\"stats\": %s, \"vips\": {%s}}\n", stats_raw.c_str(),
                absl::StrJoin(details_raw, ", ").c_str());
  } else {
    PrintTable(*stats, details);
  }
  return kExitOk;
}

}  // namespace maglb
