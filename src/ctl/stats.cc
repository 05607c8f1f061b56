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
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "maglb/exit_codes.h"

namespace maglb {
namespace {

constexpr int kReplyTimeoutMs = 2000;
constexpr size_t kMaxReply = 1 << 20;

// A JSON value, as much as telemetry replies need.
struct Json {
  enum Type { kNull, kBool, kNumber, kString, kArray, kObject } type = kNull;
  double number = 0;
  bool boolean = false;
  std::string str;  // a string's value; a number's text, exact when printed again
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
    out->str = std::string(s_.substr(start, i_ - start));
    out->number = std::strtod(out->str.c_str(), nullptr);
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

void AppendQuoted(const std::string& s, std::string* out) {
  out->push_back('"');
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppend(out, absl::StrFormat("\\u%04x", c));
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

// Prints a value back as JSON (a VIP's pages, merged, are no one reply's text).
void AppendJson(const Json& j, std::string* out) {
  switch (j.type) {
    case Json::kNull: *out += "null"; break;
    case Json::kBool: *out += j.boolean ? "true" : "false"; break;
    case Json::kNumber: *out += j.str; break;
    case Json::kString: AppendQuoted(j.str, out); break;
    case Json::kArray:
      out->push_back('[');
      for (size_t i = 0; i < j.items.size(); ++i) {
        if (i > 0) out->push_back(',');
        AppendJson(j.items[i], out);
      }
      out->push_back(']');
      break;
    case Json::kObject:
      out->push_back('{');
      for (size_t i = 0; i < j.fields.size(); ++i) {
        if (i > 0) *out += ", ";
        AppendQuoted(j.fields[i].first, out);
        *out += ": ";
        AppendJson(j.fields[i].second, out);
      }
      out->push_back('}');
      break;
  }
}

// The per-backend arrays of /maglb/vip, in the order the table prints them.
constexpr const char* kBackendArrays[] = {
    "backend_names",   "backend_addresses", "backend_weights",   "backend_table_entries",
    "backend_packets", "backend_bytes",     "backend_new_flows", "backend_next_hop_resolved"};
constexpr int kPageAttempts = 3;

// One VIP with all its backends: /maglb/vip answers a page at a time
// (DPDK's reply holds 16 KB and an array 512 entries), so the pages are
// fetched and their arrays joined. A reload between pages (generation or
// fingerprint changed) starts over. Returns a null Json if the VIP is gone.
absl::StatusOr<Json> FetchVip(TelemetryClient& client, const std::string& name) {
  for (int attempt = 0; attempt < kPageAttempts; ++attempt) {
    absl::StatusOr<Json> first = client.Query(absl::StrCat("/maglb/vip,", name), nullptr);
    if (!first.ok() || first->type != Json::kObject) return first;
    const Json* total = first->Get("backend_total");
    if (total == nullptr) return first;  // an older maglb: one reply is all there is
    Json merged = *std::move(first);
    const Json* names = merged.Get("backend_names");
    size_t have = names != nullptr ? names->items.size() : 0;
    bool restart = false;
    while (have < merged.U64("backend_total")) {
      absl::StatusOr<Json> page = client.Query(absl::StrFormat("/maglb/vip,%s,%u", name, have),
                                               nullptr);
      if (!page.ok()) return page.status();
      if (page->type != Json::kObject) return Json{};  // removed by a reload meanwhile
      if (page->U64("generation") != merged.U64("generation") ||
          page->Str("fingerprint") != merged.Str("fingerprint") ||
          page->U64("backend_total") != merged.U64("backend_total")) {
        restart = true;
        break;
      }
      const Json* page_names = page->Get("backend_names");
      if (page_names == nullptr || page_names->items.empty()) break;  // reported as short
      for (const char* key : kBackendArrays) {
        Json* into = nullptr;
        for (auto& [k, v] : merged.fields) {
          if (k == key) into = &v;
        }
        const Json* from = page->Get(key);
        if (into == nullptr || from == nullptr) continue;  // reported as missing
        into->items.insert(into->items.end(), from->items.begin(), from->items.end());
      }
      have += page_names->items.size();
    }
    if (restart) continue;
    // assign(1, '0'), not = "0": GCC 12 at -O3 warns -Wrestrict on the latter (a false positive).
    for (auto& [k, v] : merged.fields) {
      if (k == "backend_offset") v.str.assign(1, '0'), v.number = 0;
    }
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
    if (first->type != Json::kObject) return absl::UnavailableError("maglb answered null to /maglb/vips (shutting down?)");
    VipList list;
    auto append = [&](const Json& page) {
      const Json* names = page.Get("names");
      if (names == nullptr) return size_t{0};
      for (const Json& n : names->items) list.names.push_back(n.str);
      return names->items.size();
    };
    append(*first);
    if (first->Get("vip_total") == nullptr) {
      // An older maglb: one reply is all there is, cut silently at DPDK's limit.
      if (list.names.size() >= kDpdkArrayLimit) {
        list.gap = absl::StrFormat(
            "%u VIP names, DPDK's array limit: the list may be cut (this maglb does not page "
            "/maglb/vips)",
            list.names.size());
      }
      return list;
    }
    const uint64_t total = first->U64("vip_total");
    bool restart = false;
    while (list.names.size() < total) {
      absl::StatusOr<Json> page =
          client.Query(absl::StrFormat("/maglb/vips,%u", list.names.size()), nullptr);
      if (!page.ok()) return page.status();
      if (page->type != Json::kObject || page->U64("generation") != first->U64("generation") ||
          page->U64("vip_total") != total) {
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
  const Json* names = v.Get("backend_names");
  const uint64_t want = v.Get("backend_total") != nullptr ? v.U64("backend_total")
                        : names != nullptr              ? names->items.size()
                                                        : 0;
  std::vector<std::string> gaps;
  for (const char* key : kBackendArrays) {
    const Json* a = v.Get(key);
    if (a == nullptr || a->type != Json::kArray) {
      gaps.push_back(absl::StrFormat("%s missing", key));
    } else if (a->items.size() < want) {
      gaps.push_back(absl::StrFormat("%s has %u of %u", key, a->items.size(), want));
    }
  }
  return absl::StrJoin(gaps, ", ");
}

void PrintTable(const Json& stats, const std::vector<Json>& vips, const std::string& vip_gap) {
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
                        "fragments_sent", "icmp_errors_routed", "icmp_errors_steered", "tx_full"}) {
    uint64_t v = stats.U64(k);
    if (v != 0) local.push_back(absl::StrFormat("%s=%u", k, v));
  }
  std::printf("  drops: %s\n", drops.empty() ? "none" : absl::StrJoin(drops, " ").c_str());
  std::printf("  local: %s\n", local.empty() ? "none" : absl::StrJoin(local, " ").c_str());
  std::vector<std::string> ignored;  // neighbour claims not learned, by reason
  for (const auto& [k, v] : stats.fields) {
    if (v.type == Json::kNumber && v.number != 0 && k.rfind("neighbor_ignored_", 0) == 0) {
      ignored.push_back(absl::StrFormat("%s=%.0f", k.substr(17), v.number));
    }
  }
  std::printf("  neighbors: %llu updates, %llu ARP / %llu ND requests sent; ignored: %s\n",
              static_cast<unsigned long long>(stats.U64("neighbor_updates")),
              static_cast<unsigned long long>(stats.U64("arp_requests_sent")),
              static_cast<unsigned long long>(stats.U64("nd_requests_sent")),
              ignored.empty() ? "none" : absl::StrJoin(ignored, " ").c_str());
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
    // A value the reply lacks prints as "?", never as a blank or a zero.
    auto at = [&](const char* key, size_t i) -> std::string {
      const Json* a = v.Get(key);
      if (a == nullptr || i >= a->items.size()) return "?";
      const Json& x = a->items[i];
      return x.type == Json::kString || x.type == Json::kNumber ? x.str : "?";
    };
    const Json* names = v.Get("backend_names");
    size_t rows = names != nullptr ? names->items.size() : 0;
    if (const Json* total = v.Get("backend_total"); total != nullptr) rows = v.U64("backend_total");
    for (size_t i = 0; i < rows; ++i) {
      std::string nh = at("backend_next_hop_resolved", i);
      std::printf("  %-20s %-28s %7s %8s %12s %14s %10s %9s\n", at("backend_names", i).c_str(),
                  at("backend_addresses", i).c_str(), at("backend_weights", i).c_str(),
                  at("backend_table_entries", i).c_str(), at("backend_packets", i).c_str(),
                  at("backend_bytes", i).c_str(), at("backend_new_flows", i).c_str(),
                  nh == "?" ? "?" : nh != "0" ? "resolved" : "PENDING");
    }
    if (std::string gaps = VipGaps(v); !gaps.empty()) {
      std::printf("  INCOMPLETE: the reply lacks values (%s); \"?\" marks them\n", gaps.c_str());
    }
  }
  if (!vip_gap.empty()) {
    std::printf("\nINCOMPLETE: VIPs are missing from this list (%s)\n", vip_gap.c_str());
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
  std::string stats_raw;
  absl::StatusOr<Json> stats = client.Query("/maglb/stats", &stats_raw);
  if (!stats.ok()) {
    std::fprintf(stderr, "maglbctl: %s\n", std::string(stats.status().message()).c_str());
    return kExitError;
  }
  if (stats->type != Json::kObject) {
    std::fprintf(stderr, "maglbctl: %s does not answer /maglb/stats: is it maglb?\n",
                 socket_path.c_str());
    return kExitError;
  }
  absl::StatusOr<VipList> vips = FetchVipNames(client);
  if (!vips.ok()) {
    std::fprintf(stderr, "maglbctl: %s\n", std::string(vips.status().message()).c_str());
    return kExitError;
  }
  std::vector<Json> details;
  std::vector<std::string> details_raw;
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
    if (v->type != Json::kObject) continue;  // removed by a reload meanwhile
    if (std::string gaps = VipGaps(*v); !gaps.empty()) {
      std::fprintf(stderr, "maglbctl: warning: vip \"%s\": incomplete reply from maglb: %s\n",
                   name.c_str(), gaps.c_str());
      rc = kExitError;
    }
    std::string raw;
    AppendQuoted(name, &raw);
    raw += ": ";
    AppendJson(*v, &raw);
    details_raw.push_back(std::move(raw));
    details.push_back(*std::move(v));
  }
  if (format == "json") {
    std::printf("{\"stats\": %s, \"vips\": {%s}}\n", stats_raw.c_str(),
                absl::StrJoin(details_raw, ", ").c_str());
  } else {
    PrintTable(*stats, details, vips->gap);
  }
  return rc;
}

}  // namespace maglb
