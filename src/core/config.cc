#include "maglb/config.h"

// Debian builds toml++ as a shared library with exceptions on, so parse errors
// arrive as toml::parse_error; it is caught right here and becomes a Status.
#include <toml++/toml.h>

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "maglb/bounded_load.h"
#include "maglb/hashing.h"
#include "maglb/lb_state.h"
#include "maglb/maglev.h"
#include "maglb/prime.h"

namespace maglb {

std::string_view ToString(Protocol p) { return p == Protocol::kTcp ? "tcp" : "udp"; }

std::string_view ToString(Forwarding f) {
  switch (f) {
    case Forwarding::kGre: return "gre";
    case Forwarding::kIpip: return "ipip";
    case Forwarding::kL2Dsr: return "l2dsr";
  }
  return "?";
}

std::string_view ToString(Algorithm a) {
  switch (a) {
    case Algorithm::kMaglev: return "maglev";
    case Algorithm::kRing: return "ring";
    case Algorithm::kRendezvous: return "rendezvous";
    case Algorithm::kJump: return "jump";
    case Algorithm::kModulo: return "modulo";
  }
  return "?";
}

std::vector<VipSpec> VipSpecsOf(const std::vector<VipConfig>& vips) {
  std::vector<VipSpec> specs;
  specs.reserve(vips.size());
  for (const VipConfig& v : vips) specs.push_back(v.spec());
  return specs;
}

std::vector<BackendSpec> VipConfig::BackendSpecs() const {
  std::vector<BackendSpec> specs;
  specs.reserve(backends.size());
  for (const BackendConfig& b : backends) specs.push_back({b.name, b.weight});
  return specs;
}

TableInput TableInput::Of(const VipConfig& vip) {
  TableInput in;
  in.algorithm = vip.algorithm;
  in.table_size = vip.table_size;
  in.ring_points = vip.algorithm == Algorithm::kRing ? vip.ring_points : 0;
  in.backends.reserve(vip.backends.size());
  for (const BackendConfig& b : vip.backends) in.backends.emplace_back(b.name, b.weight);
  std::sort(in.backends.begin(), in.backends.end());
  return in;
}

VipConfig TableInput::ToVipConfig() const {
  VipConfig v;
  v.algorithm = algorithm;
  v.table_size = table_size;
  if (algorithm == Algorithm::kRing) v.ring_points = ring_points;
  v.allow_modulo = algorithm == Algorithm::kModulo;  // consent, not placement
  v.backends.reserve(backends.size());
  for (const auto& [name, weight] : backends) v.backends.push_back({name, IpAddress{}, weight, 0});
  return v;
}

std::optional<MetricsListen> ParseMetricsListen(std::string_view text, std::string* why) {
  constexpr std::string_view kExample =
      "an IP address and a port, such as \"127.0.0.1:9469\" or \"[::1]:9469\"";
  for (char ch : text) {
    if (ch < 0x21 || ch > 0x7e) {
      *why = absl::StrFormat("must be %s (printable ASCII, no spaces)", kExample);
      return std::nullopt;
    }
  }
  if (text.empty() || text == "*" || text.starts_with("*:") || (text.front() == ':' && text.find(':', 1) == std::string_view::npos)) {
    *why = absl::StrFormat("\"%s\": the address to bind must be explicit: %s (0.0.0.0 or [::] "
                           "to serve on every address)",
                           text, kExample);
    return std::nullopt;
  }
  std::string_view host, port;
  if (text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) {
      *why = absl::StrFormat("\"%s\": no ']' after the IPv6 address: must be %s", text, kExample);
      return std::nullopt;
    }
    host = text.substr(1, close - 1);
    const std::string_view rest = text.substr(close + 1);
    if (rest.empty()) {
      *why = absl::StrFormat("\"%s\": the port is missing: must be %s", text, kExample);
      return std::nullopt;
    }
    if (rest.front() != ':') {
      *why = absl::StrFormat("\"%s\": expected ':' and the port after ']': must be %s", text,
                             kExample);
      return std::nullopt;
    }
    port = rest.substr(1);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      *why = absl::StrFormat("\"%s\": the port is missing: must be %s", text, kExample);
      return std::nullopt;
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      *why = absl::StrFormat("\"%s\": an IPv6 address takes brackets before its port: \"[%s]:%s\"",
                             text, host, port);
      return std::nullopt;
    }
  }
  std::optional<IpAddress> ip = IpAddress::Parse(host);
  if (!ip || (text.front() == '[') != ip->is_v6) {
    const bool bracketed_v4 = ip.has_value() && !ip->is_v6;
    *why = bracketed_v4
               ? absl::StrFormat("\"%s\": brackets are for IPv6 addresses: \"%s:%s\"", text, host, port)
               : absl::StrFormat("\"%s\": \"%s\" is not an IPv4 or IPv6 address (host names are not "
                                 "resolved): must be %s",
                                 text, host, kExample);
    return std::nullopt;
  }
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos) {
    *why = absl::StrFormat("\"%s\": \"%s\" is not a port number (1 to 65535): must be %s", text,
                           port, kExample);
    return std::nullopt;
  }
  const uint32_t number = static_cast<uint32_t>(std::stoul(std::string(port)));
  if (number == 0 || number > 65535) {
    *why = absl::StrFormat("\"%s\": port %u is out of range: must be from 1 to 65535%s", text,
                           number, number == 0 ? " (0 would let the kernel pick one no scraper knows)" : "");
    return std::nullopt;
  }
  return MetricsListen{*ip, static_cast<uint16_t>(number)};
}

const VipConfig* Config::FindVip(std::string_view name) const {
  for (const VipConfig& v : vips) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

namespace {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1,
                         prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// Reads one TOML table by key, remembering which keys it was asked for, so
// that whatever is left over can be reported as unknown.
class TableReader {
 public:
  TableReader(const toml::table& table, std::string source, std::string path)
      : table_(table), source_(std::move(source)), path_(std::move(path)) {}

  const std::string& path() const { return path_; }

  absl::Status Error(const toml::node* node, std::string_view key,
                     std::string_view message) const {
    int line = node != nullptr ? static_cast<int>(node->source().begin.line)
                               : static_cast<int>(table_.source().begin.line);
    return absl::InvalidArgumentError(
        absl::StrFormat("%s:%d: %s: %s", source_, line, KeyPath(key), message));
  }
  std::string KeyPath(std::string_view key) const {
    if (path_.empty()) return std::string(key);
    if (key.empty()) return path_;
    return absl::StrCat(path_, ".", std::string(key));
  }
  int line() const { return static_cast<int>(table_.source().begin.line); }

  const toml::node* Get(std::string_view key) {
    known_.insert(std::string(key));
    return table_.get(key);
  }

  absl::Status String(std::string_view key, bool required, std::string* out) {
    const toml::node* n = Get(key);
    if (n == nullptr) {
      return required ? Error(nullptr, key, "required key is missing") : absl::OkStatus();
    }
    if (!n->is_string()) return Error(n, key, "must be a string");
    *out = n->as_string()->get();
    return absl::OkStatus();
  }

  absl::Status Integer(std::string_view key, int64_t min, int64_t max, int64_t* out,
                       bool* present = nullptr) {
    const toml::node* n = Get(key);
    if (present != nullptr) *present = n != nullptr;
    if (n == nullptr) return absl::OkStatus();
    if (!n->is_integer()) return Error(n, key, "must be an integer");
    int64_t v = n->as_integer()->get();
    if (v < min || v > max) {
      return Error(n, key, absl::StrFormat("%d is out of range: must be from %d to %d", v,
                                           min, max));
    }
    *out = v;
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status Unsigned(std::string_view key, int64_t min, int64_t max, T* out) {
    int64_t v = static_cast<int64_t>(*out);
    if (absl::Status s = Integer(key, min, max, &v); !s.ok()) return s;
    *out = static_cast<T>(v);
    return absl::OkStatus();
  }

  absl::Status Address(std::string_view key, bool required, std::optional<IpAddress>* out) {
    std::string text;
    if (absl::Status s = String(key, required, &text); !s.ok()) return s;
    if (table_.get(key) == nullptr) return absl::OkStatus();
    std::optional<IpAddress> ip = IpAddress::Parse(text);
    if (!ip) {
      return Error(table_.get(key), key,
                   absl::StrFormat("\"%s\" is not an IPv4 or IPv6 address", text));
    }
    *out = ip;
    return absl::OkStatus();
  }

  template <typename E>
  absl::Status Enum(std::string_view key, std::initializer_list<std::pair<std::string_view, E>> choices,
                    E* out) {
    std::string text;
    if (absl::Status s = String(key, false, &text); !s.ok()) return s;
    if (table_.get(key) == nullptr) return absl::OkStatus();
    std::vector<std::string> names;
    for (const auto& [name, value] : choices) {
      if (name == text) {
        *out = value;
        return absl::OkStatus();
      }
      names.push_back(std::string(name));
    }
    return Error(table_.get(key), key,
                 absl::StrFormat("\"%s\" is not one of: %s", text, absl::StrJoin(names, ", ")));
  }

  // Refuses keys nobody asked for; suggests the closest known one.
  absl::Status CheckNoUnknownKeys() const {
    for (auto&& [key, node] : table_) {
      if (known_.count(std::string(key.str())) != 0) continue;
      std::string hint;
      size_t best = 3;
      for (const std::string& k : known_) {
        const size_t length_gap = key.str().size() > k.size() ? key.str().size() - k.size()
                                                              : k.size() - key.str().size();
        if (length_gap >= best) continue;  // the distance is at least the gap
        size_t d = EditDistance(key.str(), k);
        if (d < best) {
          best = d;
          hint = absl::StrFormat(" (did you mean \"%s\"?)", k);
        }
      }
      return Error(&node, key.str(), "unknown key" + hint);
    }
    return absl::OkStatus();
  }

 private:
  const toml::table& table_;
  std::string source_;
  std::string path_;
  std::set<std::string> known_;
};

#define MAGLB_RETURN_IF_ERROR(expr)            \
  do {                                         \
    if (absl::Status s_ = (expr); !s_.ok()) {  \
      return s_;                               \
    }                                          \
  } while (false)

// Iterates an array of tables ([[vip]], [[vip.backend]], [[neighbor]]).
absl::Status ArrayOfTables(TableReader& parent, std::string_view key, std::string_view toml_name,
                           std::vector<const toml::table*>* out) {
  const toml::node* n = parent.Get(key);
  if (n == nullptr) return absl::OkStatus();
  const toml::array* arr = n->as_array();
  if (arr == nullptr) {
    return parent.Error(n, key, absl::StrFormat("must be an array of tables ([[%s]])",
                                                std::string(toml_name)));
  }
  for (const toml::node& e : *arr) {
    if (!e.is_table()) {
      return parent.Error(&e, key, absl::StrFormat("must be an array of tables ([[%s]])",
                                                   std::string(toml_name)));
    }
    out->push_back(e.as_table());
  }
  return absl::OkStatus();
}

// Names travel into logs, telemetry JSON and `maglbctl table --dump` (one
// name per line): printable ASCII without spaces, and short.
constexpr size_t kMaxNameLength = 64;
bool IsPrintableName(std::string_view name) {
  for (char ch : name) {
    if (ch < 0x21 || ch > 0x7e) return false;
  }
  return true;
}
// Whether a name may appear in an error's key path as it is.
bool IsCleanName(std::string_view name) {
  return !name.empty() && name.size() <= kMaxNameLength && IsPrintableName(name);
}
absl::Status CheckName(TableReader& r, const toml::table& t, const std::string& name) {
  if (name.empty()) return r.Error(t.get("name"), "name", "must not be empty");
  if (name.size() > kMaxNameLength) {
    return r.Error(t.get("name"), "name",
                   absl::StrFormat("is %u bytes long: at most %u", name.size(), kMaxNameLength));
  }
  if (!IsPrintableName(name)) {
    return r.Error(t.get("name"), "name",
                   "must be printable ASCII without spaces (letters, digits, - _ . : and the "
                   "like)");
  }
  return absl::OkStatus();
}

// Where an array item is, for messages: `kind["name"]` once its name is
// clean, else `kind[index]`.
std::string ItemPath(const toml::table& t, std::string_view kind, size_t index) {
  if (const toml::node* n = t.get("name"); n != nullptr && n->is_string() &&
                                           IsCleanName(n->as_string()->get())) {
    return absl::StrFormat("%s[\"%s\"]", kind, n->as_string()->get());
  }
  return absl::StrFormat("%s[%d]", kind, index);
}

// The two keys every VIP and backend has.
absl::Status ReadNameAndAddress(TableReader& r, const toml::table& t, std::string* name, IpAddress* address) {
  MAGLB_RETURN_IF_ERROR(r.String("name", true, name));
  if (absl::Status st = CheckName(r, t, *name); !st.ok()) return st;
  std::optional<IpAddress> addr;
  MAGLB_RETURN_IF_ERROR(r.Address("address", true, &addr));
  *address = *addr;
  return absl::OkStatus();
}

// A sizing key of [lb]: 0 (or absent) leaves it to maglb, else min..max.
absl::Status SizingKey(TableReader& r, std::string_view key, uint32_t min,
                       uint32_t max, std::string_view zero_means, uint32_t* out, int* line) {
  const std::string range = absl::StrFormat("must be 0 (%s) or from %u to %u", zero_means, min, max);
  const toml::node* n = r.Get(key);
  if (n == nullptr) return absl::OkStatus();
  *line = static_cast<int>(n->source().begin.line);
  if (!n->is_integer()) return r.Error(n, key, absl::StrCat("must be an integer: ", range));
  const int64_t v = n->as_integer()->get();
  if (v != 0 && (v < min || v > max)) {
    return r.Error(n, key, absl::StrFormat("%d is out of range: %s", v, range));
  }
  *out = static_cast<uint32_t>(v);
  return absl::OkStatus();
}

absl::Status ParseLb(const toml::table& t, const std::string& source, LbConfig* lb) {
  TableReader r(t, source, "lb");
  int64_t seed = 0;
  bool has_seed = false;
  MAGLB_RETURN_IF_ERROR(r.Integer("hash_seed", 0, INT64_MAX, &seed, &has_seed));
  if (has_seed) lb->hash_seed = static_cast<uint64_t>(seed);
  MAGLB_RETURN_IF_ERROR(r.Address("ipv4", false, &lb->ipv4));
  MAGLB_RETURN_IF_ERROR(r.Address("ipv6", false, &lb->ipv6));
  MAGLB_RETURN_IF_ERROR(r.Address("gateway_v4", false, &lb->gateway_v4));
  MAGLB_RETURN_IF_ERROR(r.Address("gateway_v6", false, &lb->gateway_v6));
  MAGLB_RETURN_IF_ERROR(r.Address("encap_source_v4", false, &lb->encap_source_v4));
  MAGLB_RETURN_IF_ERROR(r.Address("encap_source_v6", false, &lb->encap_source_v6));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("encap_source_v4_flow_bits", 0, 16, &lb->encap_source_v4_flow_bits));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("encap_source_v6_flow_bits", 0, 64, &lb->encap_source_v6_flow_bits));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("encap_ttl", 1, 255, &lb->encap_ttl));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("mtu", 1280, 9216, &lb->mtu));
  if (const toml::node* n = t.get("mtu")) lb->mtu_line = static_cast<int>(n->source().begin.line);
  MAGLB_RETURN_IF_ERROR(r.Unsigned("reply_rate", 0, 1000000, &lb->reply_rate));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("reply_burst", 1, 100000, &lb->reply_burst));
  MAGLB_RETURN_IF_ERROR(
      r.Unsigned("max_table_memory_mb", 1, kMaxMaxTableMemoryMb, &lb->max_table_memory_mb));
  MAGLB_RETURN_IF_ERROR(SizingKey(r, "rx_descriptors", kMinDescriptors, kMaxDescriptors,
                                  "the port's choice (1024, or the driver's preferred ring if larger)",
                                  &lb->sizing.rx_descriptors, &lb->sizing.rx_descriptors_line));
  MAGLB_RETURN_IF_ERROR(SizingKey(r, "tx_descriptors", kMinDescriptors, kMaxDescriptors,
                                  "the port's choice (1024, or the driver's preferred ring if larger)",
                                  &lb->sizing.tx_descriptors, &lb->sizing.tx_descriptors_line));
  MAGLB_RETURN_IF_ERROR(SizingKey(r, "mbufs", kMinMbufs, kMaxMbufs,
                                  "computed from the ports, queues and descriptors", &lb->sizing.mbufs,
                                  &lb->sizing.mbufs_line));
  MAGLB_RETURN_IF_ERROR(r.CheckNoUnknownKeys());

  // Family checks: a v4 key must hold a v4 address, and so on.
  struct FamilyCheck {
    const char* key;
    const std::optional<IpAddress>* value;
    bool v6;
  };
  for (const FamilyCheck& c : {FamilyCheck{"ipv4", &lb->ipv4, false},
                               FamilyCheck{"ipv6", &lb->ipv6, true},
                               FamilyCheck{"gateway_v4", &lb->gateway_v4, false},
                               FamilyCheck{"gateway_v6", &lb->gateway_v6, true},
                               FamilyCheck{"encap_source_v4", &lb->encap_source_v4, false},
                               FamilyCheck{"encap_source_v6", &lb->encap_source_v6, true}}) {
    if (c.value->has_value() && (*c.value)->is_v6 != c.v6) {
      return r.Error(t.get(c.key), c.key,
                     absl::StrFormat("must be an %s address", c.v6 ? "IPv6" : "IPv4"));
    }
  }
  if (!lb->encap_source_v4) lb->encap_source_v4 = lb->ipv4;
  if (!lb->encap_source_v6) lb->encap_source_v6 = lb->ipv6;
  return absl::OkStatus();
}

absl::Status ParseConntrack(const toml::table& t, const std::string& source,
                            ConntrackConfig* ct) {
  TableReader r(t, source, "conntrack");
  MAGLB_RETURN_IF_ERROR(r.Unsigned("capacity", 1024, 1 << 28, &ct->capacity));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("tcp_established_timeout_s", 1, 86400 * 7, &ct->tcp_established_timeout_s));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("tcp_closing_timeout_s", 1, 3600, &ct->tcp_closing_timeout_s));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("tcp_syn_timeout_s", 1, 3600, &ct->tcp_syn_timeout_s));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("udp_timeout_s", 1, 86400, &ct->udp_timeout_s));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("proven_protect_s", 1, 86400 * 7, &ct->proven_protect_s));
  return r.CheckNoUnknownKeys();
}

// [health]: how health changes reach the tables (health_config.h).
absl::Status ParseHealthSettings(const toml::table& t, const std::string& source,
                                 HealthSettings* h) {
  TableReader r(t, source, "health");
  MAGLB_RETURN_IF_ERROR(r.Unsigned("rebuild_interval_ms", 0, 60000, &h->rebuild_interval_ms));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("flap_window_s", 1, 3600, &h->flap_window_s));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("flap_max_transitions", 1, 1000, &h->flap_max_transitions));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("hold_down_s", 0, 86400, &h->hold_down_s));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("slow_start_steps", 1, 20, &h->slow_start_steps));
  return r.CheckNoUnknownKeys();
}

// Linux's own rule for interface names (dev_valid_name: under IFNAMSIZ = 16
// bytes, not "." or "..", no '/', ':' or whitespace), narrowed to printable
// ASCII since the name goes into logs and telemetry.
constexpr size_t kMaxInterfaceNameLength = 15;
absl::Status CheckInterfaceName(TableReader& r, const toml::node* n, const std::string& name) {
  if (name.empty()) {
    return r.Error(n, "interface",
                   "must not be empty (leave [kernel] interface out for no kernel interface)");
  }
  if (name.size() > kMaxInterfaceNameLength) {
    return r.Error(n, "interface",
                   absl::StrFormat("is %u bytes long: Linux interface names have at most %u",
                                   name.size(), kMaxInterfaceNameLength));
  }
  if (name == "." || name == "..") {
    return r.Error(n, "interface", absl::StrFormat("\"%s\" is not a valid interface name", name));
  }
  for (char ch : name) {
    if (ch < 0x21 || ch > 0x7e || ch == '/' || ch == ':') {
      return r.Error(n, "interface",
                     "must be printable ASCII without spaces, '/' or ':' (a Linux interface "
                     "name such as \"maglb0\")");
    }
  }
  return absl::OkStatus();
}

// [kernel]: the kernel interface on the data port. Needs [lb], parsed first:
// the interface carries the LB's addresses.
absl::Status ParseKernel(const toml::table& t, const std::string& source, const LbConfig& lb,
                         KernelConfig* k) {
  TableReader r(t, source, "kernel");
  k->line = r.line();
  MAGLB_RETURN_IF_ERROR(r.String("interface", false, &k->interface));
  if (const toml::node* n = t.get("interface"); n != nullptr) {
    MAGLB_RETURN_IF_ERROR(CheckInterfaceName(r, n, k->interface));
  }
  MAGLB_RETURN_IF_ERROR(r.Unsigned("ipv4_prefix_len", 0, 32, &k->ipv4_prefix_len));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("ipv6_prefix_len", 0, 128, &k->ipv6_prefix_len));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("rate", 0, 10000000, &k->rate));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("burst", 1, 1000000, &k->burst));
  MAGLB_RETURN_IF_ERROR(r.CheckNoUnknownKeys());
  if (k->enabled() && !lb.ipv4 && !lb.ipv6) {
    return r.Error(t.get("interface"), "interface",
                   "the kernel interface carries the LB's addresses, and [lb] sets neither ipv4 "
                   "nor ipv6: set one, or leave [kernel] interface out");
  }
  return absl::OkStatus();
}

// rtm_protocol values maglb's routes must not carry: the kernel's own, and
// those routing daemons take for theirs. BIRD deletes routes of its protocol
// that it does not know at start; FRR's zebra sweeps those of its protocols.
struct ReservedRouteProtocol {
  uint8_t first, last;
  const char* why;
};
constexpr ReservedRouteProtocol kReservedRouteProtocols[] = {
    {0, 4, "0 to 4 belong to the kernel (unspec, redirect, kernel, boot, static)"},
    {11, 11, "11 is FRR's zebra's: zebra would take maglb's routes for its own and delete them"},
    {12, 12, "12 is BIRD's: BIRD would take maglb's routes for its own and delete them"},
    {42, 42, "42 is babel's (FRR's babeld): FRR would take maglb's routes for its own and delete them"},
    {186, 198, "186 to 198 are FRR's (bgp, isis, ospf, rip, ...): FRR would take maglb's routes for "
               "its own and delete them"},
};

// [announce]: VIP routes for a BGP daemon (announce_config.h). Needs [kernel],
// parsed first: the routes go on its interface.
absl::Status ParseAnnounce(const toml::table& t, const std::string& source, const KernelConfig& kernel,
                           AnnounceConfig* a) {
  TableReader r(t, source, "announce");
  a->line = r.line();
  int64_t table = 0;
  bool has_table = false;
  int64_t protocol = a->route_protocol;
  MAGLB_RETURN_IF_ERROR(r.Integer("table", 0, UINT32_MAX, &table, &has_table));
  MAGLB_RETURN_IF_ERROR(r.Integer("route_protocol", 0, 255, &protocol));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("interval_ms", 10, 10000, &a->interval_ms));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("stall_ms", 10, 60000, &a->stall_ms));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("drain_s", 0, 3600, &a->drain_s));
  // Before the missing table: a misspelt "table" is better told as such.
  MAGLB_RETURN_IF_ERROR(r.CheckNoUnknownKeys());
  if (!has_table) {
    return r.Error(nullptr, "table",
                   "required key is missing: the kernel routing table maglb writes the announced "
                   "VIPs' routes into, for the BGP daemon to learn (e.g. 4242)");
  }
  if (table == 0) {
    return r.Error(t.get("table"), "table",
                   "0 names no table (RT_TABLE_UNSPEC): set the kernel routing table the VIP "
                   "routes go into, or leave [announce] out to announce nothing");
  }
  if (table >= 253 && table <= 255) {
    return r.Error(t.get("table"), "table",
                   absl::StrFormat("%d is the kernel's %s table: the VIP routes need a table of "
                                   "their own (1 to 252, or 256 and up), which the BGP daemon "
                                   "learns and nothing else routes by",
                                   table, table == 253 ? "default" : table == 254 ? "main" : "local"));
  }
  a->table = static_cast<uint32_t>(table);
  for (const ReservedRouteProtocol& p : kReservedRouteProtocols) {
    if (protocol >= p.first && protocol <= p.last) {
      return r.Error(t.get("route_protocol"), "route_protocol",
                     absl::StrFormat("%d is reserved: %s; use one no other routing software "
                                     "claims (the default is %u)",
                                     protocol, p.why, kDefaultAnnounceRouteProtocol));
    }
  }
  a->route_protocol = static_cast<uint8_t>(protocol);
  if (a->stall_ms < 2 * a->interval_ms) {
    // The defaults pass, so one of the two was set: point at stall_ms if it was.
    const char* key = t.get("stall_ms") != nullptr ? "stall_ms" : "interval_ms";
    return r.Error(t.get(key), key,
                   absl::StrFormat("stall_ms = %u is under 2 x interval_ms = %u: the workers are "
                                   "checked once per interval (%u ms), so a stall must span at "
                                   "least two checks; raise stall_ms or lower interval_ms",
                                   a->stall_ms, 2 * a->interval_ms, a->interval_ms));
  }
  if (!kernel.enabled()) {
    return r.Error(nullptr, "",
                   "needs [kernel] interface: the VIP routes go on the kernel interface, and "
                   "vanish with it when maglb dies, so a dead maglb announces nothing; set "
                   "[kernel] interface, or leave [announce] out");
  }
  return absl::OkStatus();
}

// [metrics]: the Prometheus exporter's address (metrics_config.h).
absl::Status ParseMetrics(const toml::table& t, const std::string& source, MetricsConfig* m) {
  TableReader r(t, source, "metrics");
  std::string listen;
  MAGLB_RETURN_IF_ERROR(r.String("listen", false, &listen));
  MAGLB_RETURN_IF_ERROR(r.CheckNoUnknownKeys());
  const toml::node* n = t.get("listen");
  if (n == nullptr) {
    return r.Error(nullptr, "listen",
                   "required key is missing: the address and port /metrics is served on, such as "
                   "\"127.0.0.1:9469\" or \"[::1]:9469\"; leave [metrics] out for no exporter");
  }
  std::string why;
  std::optional<MetricsListen> address = ParseMetricsListen(listen, &why);
  if (!address) return r.Error(n, "listen", why);
  m->listen = std::move(listen);
  m->address = *address;
  m->line = static_cast<int>(n->source().begin.line);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Health checks: [[health_check]] and a VIP's health_check.

constexpr size_t kMaxHttpPathBytes = 1024;
constexpr size_t kMaxHttpBodyContainsBytes = 1024;
constexpr size_t kMaxHttpHostBytes = 255;

const char* CheckTypeName(HealthCheckType t) {
  switch (t) {
    case HealthCheckType::kNone: return "none";
    case HealthCheckType::kTcp: return "tcp";
    case HealthCheckType::kHttp: return "http";
    case HealthCheckType::kUdp: return "udp";
  }
  return "?";
}

// The path goes into the request line as it is: a space, CR or LF would let
// the config rewrite the request (header injection), so printable ASCII only.
absl::Status CheckHttpPath(TableReader& r, const toml::node* n, const std::string& path) {
  if (path.empty() || path[0] != '/') {
    return r.Error(n, "http_path", "must start with '/', e.g. \"/healthz\"");
  }
  if (path.size() > kMaxHttpPathBytes) {
    return r.Error(n, "http_path", absl::StrFormat("is %u bytes long: at most %u", path.size(),
                                                   kMaxHttpPathBytes));
  }
  if (!IsPrintableName(path)) {
    return r.Error(n, "http_path",
                   "must be printable ASCII without spaces (percent-encode anything else, e.g. "
                   "%20): it goes into the request line as it is");
  }
  return absl::OkStatus();
}

// The Host header's value: a host name or address, optionally :port.
absl::Status CheckHttpHost(TableReader& r, const toml::node* n, const std::string& host) {
  if (host.empty()) {
    return r.Error(n, "http_host", "must not be empty (leave it out to send the probed address)");
  }
  if (host.size() > kMaxHttpHostBytes) {
    return r.Error(n, "http_host", absl::StrFormat("is %u bytes long: at most %u", host.size(),
                                                   kMaxHttpHostBytes));
  }
  for (char ch : host) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_' ||
                    ch == ':' || ch == '[' || ch == ']';
    if (!ok) {
      return r.Error(n, "http_host",
                     "must be a host name (letters, digits, . - _), optionally with :port or an "
                     "[IPv6] address; it goes into the Host header as it is");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckBodyContains(TableReader& r, const toml::node* n, const std::string& text) {
  if (text.empty()) {
    return r.Error(n, "http_body_contains",
                   "must not be empty (leave it out not to look at the body)");
  }
  if (text.size() > kMaxHttpBodyContainsBytes) {
    return r.Error(n, "http_body_contains",
                   absl::StrFormat("is %u bytes long: at most %u", text.size(),
                                   kMaxHttpBodyContainsBytes));
  }
  for (char ch : text) {
    if ((ch >= 0 && ch < 0x20) || ch == 0x7f) {
      return r.Error(n, "http_body_contains", "must not hold control characters");
    }
  }
  return absl::OkStatus();
}

// The keys of one check, for a [[health_check]] (`named`) or a VIP's inline
// health_check. Keys of another type are refused, not ignored: with a typo in
// type ("tpc"), http_path would otherwise silently check nothing.
absl::Status ParseCheckKeys(TableReader& r, const toml::table& t, bool named,
                            HealthCheckConfig* c) {
  c->line = r.line();
  if (named) {
    MAGLB_RETURN_IF_ERROR(r.String("name", true, &c->name));
    MAGLB_RETURN_IF_ERROR(CheckName(r, t, c->name));
  } else if (const toml::node* n = r.Get("name"); n != nullptr) {
    return r.Error(n, "name",
                   "a VIP's own check has no name; to share one check among VIPs, declare it as "
                   "a [[health_check]] with this name and write health_check = \"NAME\" in the "
                   "[[vip]]");
  }
  if (t.get("type") == nullptr) {
    return r.Error(nullptr, "type", "required key is missing (one of: none, tcp, http, udp)");
  }
  MAGLB_RETURN_IF_ERROR(r.Enum<HealthCheckType>("type",
                                                {{"none", HealthCheckType::kNone},
                                                 {"tcp", HealthCheckType::kTcp},
                                                 {"http", HealthCheckType::kHttp},
                                                 {"udp", HealthCheckType::kUdp}},
                                                &c->type));
  MAGLB_RETURN_IF_ERROR(r.Enum<HealthCheckVia>(
      "via", {{"direct", HealthCheckVia::kDirect}, {"tunnel", HealthCheckVia::kTunnel}}, &c->via));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("port", 0, 65535, &c->port));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("interval_ms", 100, 3600000, &c->interval_ms));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("timeout_ms", 10, 3600000 - 1, &c->timeout_ms));
  if (c->timeout_ms >= c->interval_ms) {
    const toml::node* tn = t.get("timeout_ms");
    const bool timeout_set = tn != nullptr;
    return r.Error(timeout_set ? tn : t.get("interval_ms"), timeout_set ? "timeout_ms" : "interval_ms",
                   absl::StrFormat("timeout_ms (%u%s) must be less than interval_ms (%u): a probe "
                                   "must end before the next one is due",
                                   c->timeout_ms, timeout_set ? "" : ", the default",
                                   c->interval_ms));
  }
  MAGLB_RETURN_IF_ERROR(r.Unsigned("rise", 1, 100, &c->rise));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("fall", 1, 100, &c->fall));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("jitter_percent", 0, 50, &c->jitter_percent));
  // The next probe may come that much early: it must still find this one done.
  if (uint64_t{c->timeout_ms} * 100 >= uint64_t{c->interval_ms} * (100 - c->jitter_percent)) {
    const toml::node* tn = t.get("timeout_ms");
    return r.Error(tn != nullptr ? tn : t.get("interval_ms"), tn != nullptr ? "timeout_ms" : "interval_ms",
                   absl::StrFormat("timeout_ms (%u) must be less than the shortest interval, interval_ms "
                                   "(%u) less jitter_percent (%u%%): %u ms, so that a probe ends before "
                                   "the next one is due",
                                   c->timeout_ms, c->interval_ms, c->jitter_percent,
                                   static_cast<uint32_t>(uint64_t{c->interval_ms} * (100 - c->jitter_percent) / 100)));
  }

  MAGLB_RETURN_IF_ERROR(r.String("http_path", false, &c->http_path));
  if (const toml::node* n = t.get("http_path")) MAGLB_RETURN_IF_ERROR(CheckHttpPath(r, n, c->http_path));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("http_status", 100, 599, &c->http_status));
  MAGLB_RETURN_IF_ERROR(r.String("http_body_contains", false, &c->http_body_contains));
  if (const toml::node* n = t.get("http_body_contains")) {
    MAGLB_RETURN_IF_ERROR(CheckBodyContains(r, n, c->http_body_contains));
  }
  MAGLB_RETURN_IF_ERROR(r.String("http_host", false, &c->http_host));
  if (const toml::node* n = t.get("http_host")) MAGLB_RETURN_IF_ERROR(CheckHttpHost(r, n, c->http_host));

  // UDP payloads are data, not text: any bytes (\u0000 and the like), sized.
  MAGLB_RETURN_IF_ERROR(r.String("udp_payload", false, &c->udp_payload));
  if (c->udp_payload.size() > kMaxUdpProbePayloadBytes) {
    return r.Error(t.get("udp_payload"), "udp_payload",
                   absl::StrFormat("is %u bytes long: at most %u", c->udp_payload.size(),
                                   kMaxUdpProbePayloadBytes));
  }
  if (const toml::node* n = r.Get("udp_expect"); n != nullptr) {
    if (!n->is_string()) return r.Error(n, "udp_expect", "must be a string");
    const std::string& expect = n->as_string()->get();
    if (expect.empty()) {
      return r.Error(n, "udp_expect", "must not be empty (leave it out to take any reply)");
    }
    if (expect.size() > kMaxUdpProbePayloadBytes) {
      return r.Error(n, "udp_expect", absl::StrFormat("is %u bytes long: at most %u", expect.size(),
                                                      kMaxUdpProbePayloadBytes));
    }
    c->udp_expect = expect;
  }
  MAGLB_RETURN_IF_ERROR(r.CheckNoUnknownKeys());

  struct TypedKeys {
    HealthCheckType type;
    std::initializer_list<const char*> keys;
  };
  for (const TypedKeys& tk :
       {TypedKeys{HealthCheckType::kHttp, {"http_path", "http_status", "http_body_contains", "http_host"}},
        TypedKeys{HealthCheckType::kUdp, {"udp_payload", "udp_expect"}}}) {
    if (c->type == tk.type) continue;
    for (const char* key : tk.keys) {
      if (const toml::node* n = t.get(key); n != nullptr) {
        return r.Error(n, key,
                       absl::StrFormat("is for type = \"%s\" checks, and this one is type = \"%s\"",
                                       CheckTypeName(tk.type), CheckTypeName(c->type)));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ParseNamedCheck(const toml::table& t, const std::string& source, size_t index,
                             HealthCheckConfig* c) {
  TableReader r(t, source, ItemPath(t, "health_check", index));
  return ParseCheckKeys(r, t, /*named=*/true, c);
}

// What a VIP's health keys are checked against.
struct HealthContext {
  const std::vector<HealthCheckConfig>* checks;
  const absl::flat_hash_map<std::string, size_t>* check_index;  // name -> index in *checks
  const KernelConfig* kernel;
  const LbConfig* lb;
};

// health_check = "NAME": the named check, or an error that suggests one.
absl::Status LookUpCheck(TableReader& r, const toml::node* n, const std::string& name,
                         const HealthContext& ctx, HealthCheckConfig* out) {
  if (auto it = ctx.check_index->find(name); it != ctx.check_index->end()) {
    *out = (*ctx.checks)[it->second];
    return absl::OkStatus();
  }
  if (!IsCleanName(name)) {
    return r.Error(n, "health_check",
                   "is not the name of a [[health_check]] (names are 1 to 64 printable ASCII "
                   "characters without spaces)");
  }
  std::string hint;
  size_t best = 3;
  for (const HealthCheckConfig& c : *ctx.checks) {
    const size_t d = EditDistance(name, c.name);  // both at most kMaxNameLength
    if (d < best) {
      best = d;
      hint = absl::StrFormat(" (did you mean \"%s\"?)", c.name);
    }
  }
  if (ctx.checks->empty()) hint = " (the file declares no [[health_check]])";
  return r.Error(n, "health_check",
                 absl::StrFormat("no [[health_check]] is named \"%s\"%s", name, hint));
}

// A VIP's health keys (issue 10): health_check, slow_start_s, all_down,
// down_flows. Needs the VIP's address, protocol, port, algorithm and backends.
absl::Status ParseVipHealth(TableReader& r, const toml::table& t, const std::string& source,
                            const HealthContext& ctx, VipConfig* v) {
  MAGLB_RETURN_IF_ERROR(r.Unsigned("slow_start_s", 0, 3600, &v->slow_start_s));
  if (v->algorithm == Algorithm::kJump && v->slow_start_s != 0) {
    return r.Error(t.get("slow_start_s"), "slow_start_s",
                   "algorithm \"jump\" has no weights (every serving backend gets an equal "
                   "share), so a slow start cannot ramp a backend in; set slow_start_s = 0 or "
                   "choose another algorithm");
  }
  MAGLB_RETURN_IF_ERROR(r.Enum<AllDownPolicy>(
      "all_down", {{"keep_last", AllDownPolicy::kKeepLast}, {"drop", AllDownPolicy::kDrop}},
      &v->all_down));
  MAGLB_RETURN_IF_ERROR(r.Enum<DownFlows>(
      "down_flows", {{"pin", DownFlows::kPin}, {"move", DownFlows::kMove}}, &v->down_flows));

  const toml::node* n = r.Get("health_check");
  if (n == nullptr) return absl::OkStatus();
  HealthCheckConfig check;
  if (n->is_string()) {
    MAGLB_RETURN_IF_ERROR(LookUpCheck(r, n, n->as_string()->get(), ctx, &check));
  } else if (n->is_table()) {
    TableReader cr(*n->as_table(), source, r.KeyPath("health_check"));
    MAGLB_RETURN_IF_ERROR(ParseCheckKeys(cr, *n->as_table(), /*named=*/false, &check));
  } else {
    return r.Error(n, "health_check",
                   "must be the name of a [[health_check]] (a string) or a table "
                   "([vip.health_check] or { type = \"tcp\", ... })");
  }
  if (check.type == HealthCheckType::kNone) return absl::OkStatus();  // unchecked

  // Where to set what an error asks for: the named check, or this VIP's own.
  const std::string check_place =
      check.name.empty() ? std::string("set health_check.port in this [[vip]]")
                         : absl::StrFormat("set port in [[health_check]] \"%s\" (line %d)",
                                           check.name, check.line);
  if (check.port == 0 && v->port == 0) {
    return r.Error(n, "health_check",
                   absl::StrFormat("this VIP takes every port (port = 0), so the check has no "
                                   "VIP port to probe: %s",
                                   check_place));
  }
  const bool udp_check = check.type == HealthCheckType::kUdp;
  if (check.port == 0 && udp_check != (v->protocol == Protocol::kUdp)) {
    return r.Error(n, "health_check",
                   absl::StrFormat("a type = \"%s\" check on a %s VIP cannot probe the VIP's port (the "
                                   "backends serve it over %s): %s",
                                   CheckTypeName(check.type), ToString(v->protocol),
                                   ToString(v->protocol), check_place));
  }
  const std::string which =
      check.name.empty() ? std::string("this VIP's health_check")
                         : absl::StrFormat("[[health_check]] \"%s\" (line %d)", check.name,
                                           check.line);
  if (!ctx.kernel->enabled()) {
    return r.Error(n, "health_check",
                   absl::StrFormat("%s needs [kernel] interface: probes (direct or tunnel) go out "
                                   "through the kernel interface on the data port, and without "
                                   "one the host has no path to the backends; set [kernel] "
                                   "interface, or remove the check",
                                   which));
  }
  // A tunnel probe is matched to its VIP by the VIP's own address, protocol
  // and port: one to another port or over the other protocol would be no
  // traffic of this VIP (sent out unchanged, dropped as vip_no_service).
  const bool tunnel = check.via == HealthCheckVia::kTunnel;
  if (tunnel && ((check.port != 0 && v->port != 0 && check.port != v->port) ||
                 udp_check != (v->protocol == Protocol::kUdp))) {
    return r.Error(n, "health_check",
                   absl::StrFormat("%s goes via = \"tunnel\", so it probes this VIP's own service "
                                   "(%s port %u): it needs type = \"%s\" and no other port; probe "
                                   "another port or protocol via = \"direct\"",
                                   which, ToString(v->protocol), v->port,
                                   v->protocol == Protocol::kUdp ? "udp" : "tcp\" or \"http"));
  }
  // Probes come from the LB's own address: of each backend's family when
  // direct, of the VIP's when tunnelled (the inner packet is to the VIP).
  for (const BackendConfig& b : v->backends) {
    const bool v6 = tunnel ? v->address.is_v6 : b.address.is_v6;
    if (v6 ? ctx.lb->ipv6.has_value() : ctx.lb->ipv4.has_value()) continue;
    return r.Error(n, "health_check",
                   absl::StrFormat("%s probes %s from the LB's own IPv%d address, and [lb] sets "
                                   "no %s: set it",
                                   which,
                                   tunnel ? absl::StrFormat("this IPv%d VIP", v6 ? 6 : 4)
                                          : absl::StrFormat("backend \"%s\" (line %d)", b.name,
                                                            b.line),
                                   v6 ? 6 : 4, v6 ? "ipv6" : "ipv4"));
  }
  v->health_check = std::move(check);
  return absl::OkStatus();
}

absl::Status ParseNeighbor(const toml::table& t, const std::string& source, size_t index,
                           NeighborConfig* n) {
  TableReader r(t, source, absl::StrFormat("neighbor[%d]", index));
  n->line = r.line();
  std::optional<IpAddress> addr;
  MAGLB_RETURN_IF_ERROR(r.Address("address", true, &addr));
  n->address = *addr;
  std::string mac;
  MAGLB_RETURN_IF_ERROR(r.String("mac", true, &mac));
  std::optional<MacAddress> parsed = MacAddress::Parse(mac);
  if (!parsed) {
    return r.Error(t.get("mac"), "mac",
                   absl::StrFormat("\"%s\" is not a MAC address like 02:00:00:00:00:01", mac));
  }
  n->mac = *parsed;
  return r.CheckNoUnknownKeys();
}

absl::Status ParseBackend(const toml::table& t, const std::string& source,
                          const std::string& vip_path, size_t index, BackendConfig* b) {
  TableReader r(t, source, ItemPath(t, absl::StrCat(vip_path, ".backend"), index));
  b->line = r.line();
  MAGLB_RETURN_IF_ERROR(ReadNameAndAddress(r, t, &b->name, &b->address));
  int64_t weight = 1;
  const toml::node* wn = r.Get("weight");
  if (wn != nullptr) {
    if (!wn->is_integer()) return r.Error(wn, "weight", "must be an integer");
    weight = wn->as_integer()->get();
    if (weight < 0) {
      return r.Error(wn, "weight",
                     absl::StrFormat("%d is negative: weights are from 0 (draining) to %u",
                                     weight, kMaxWeight));
    }
    if (weight > kMaxWeight) {
      return r.Error(wn, "weight",
                     absl::StrFormat("%d is absurd: weights are relative, from 0 (draining) "
                                     "to %u", weight, kMaxWeight));
    }
  }
  b->weight = static_cast<uint32_t>(weight);
  return r.CheckNoUnknownKeys();
}

// The hashing-scheme keys of a VIP (issue 5): the consent that modulo needs,
// ring points, and bounded load.
absl::Status ParseHashingKeys(TableReader& r, const toml::table& t, VipConfig* v) {
  if (const toml::node* n = r.Get("allow_modulo"); n != nullptr) {
    if (!n->is_boolean()) return r.Error(n, "allow_modulo", "must be true or false");
    v->allow_modulo = n->as_boolean()->get();
  }
  if (v->algorithm == Algorithm::kModulo && !v->allow_modulo) {
    return r.Error(t.get("algorithm"), "algorithm",
                   "\"modulo\" reshuffles almost every flow (1 - 1/(N+1) of them) whenever a "
                   "backend is added or removed; it exists for comparison. The VIP was refused; "
                   "choose \"maglev\" or another consistent scheme, or add allow_modulo = true to "
                   "this [[vip]] to insist");
  }
  MAGLB_RETURN_IF_ERROR(r.Unsigned("ring_points", 1, kMaxRingPointsPerWeight, &v->ring_points));
  if (const toml::node* n = r.Get("bounded_load_epsilon"); n != nullptr) {
    if (!n->is_floating_point() && !n->is_integer()) {
      return r.Error(n, "bounded_load_epsilon", "must be a number, e.g. 0.25");
    }
    double e = n->is_integer() ? static_cast<double>(n->as_integer()->get())
                               : n->as_floating_point()->get();
    if (!(e >= kMinBoundedLoadEpsilon && e <= kMaxBoundedLoadEpsilon)) {
      return r.Error(n, "bounded_load_epsilon",
                     absl::StrFormat("%g is out of range: must be from %g to %g (0.25 lets a "
                                     "backend take 25%% above the average before new flows "
                                     "move on)",
                                     e, kMinBoundedLoadEpsilon, kMaxBoundedLoadEpsilon));
    }
    v->bounded_load_epsilon = e;
  }
  return absl::OkStatus();
}

absl::Status ParseVip(const toml::table& t, const std::string& source, size_t index,
                      const HealthContext& health, VipConfig* v) {
  const std::string path = ItemPath(t, "vip", index);
  TableReader r(t, source, path);
  v->line = r.line();
  MAGLB_RETURN_IF_ERROR(ReadNameAndAddress(r, t, &v->name, &v->address));
  MAGLB_RETURN_IF_ERROR(r.Enum<Protocol>("protocol", {{"tcp", Protocol::kTcp}, {"udp", Protocol::kUdp}},
                                         &v->protocol));
  MAGLB_RETURN_IF_ERROR(r.Unsigned("port", 0, 65535, &v->port));
  MAGLB_RETURN_IF_ERROR(r.Enum<Forwarding>(
      "forwarding",
      {{"gre", Forwarding::kGre}, {"ipip", Forwarding::kIpip}, {"l2dsr", Forwarding::kL2Dsr}},
      &v->forwarding));
  MAGLB_RETURN_IF_ERROR(r.Enum<Algorithm>("algorithm",
                                          {{"maglev", Algorithm::kMaglev},
                                           {"ring", Algorithm::kRing},
                                           {"rendezvous", Algorithm::kRendezvous},
                                           {"jump", Algorithm::kJump},
                                           {"modulo", Algorithm::kModulo}},
                                          &v->algorithm));
  MAGLB_RETURN_IF_ERROR(ParseHashingKeys(r, t, v));
  const toml::node* size_node = r.Get("table_size");
  if (size_node != nullptr) {
    if (!size_node->is_integer()) return r.Error(size_node, "table_size", "must be an integer");
    int64_t m = size_node->as_integer()->get();
    if (m < kMinTableSize || m > kMaxTableSize || !IsPrime(static_cast<uint64_t>(m))) {
      return r.Error(size_node, "table_size",
                     absl::StrFormat("%d must be a prime from %u to %u (65537 is the usual "
                                     "choice)", m, kMinTableSize, kMaxTableSize));
    }
    v->table_size = static_cast<uint32_t>(m);
  }

  std::vector<const toml::table*> backends;
  MAGLB_RETURN_IF_ERROR(ArrayOfTables(r, "backend", "vip.backend", &backends));
  absl::flat_hash_map<std::string, int> names;
  for (size_t i = 0; i < backends.size(); ++i) {
    BackendConfig b;
    MAGLB_RETURN_IF_ERROR(ParseBackend(*backends[i], source, path, i, &b));
    auto [it, inserted] = names.emplace(b.name, b.line);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s:%d: %s.backend[\"%s\"].name: duplicate backend name (first declared at line "
          "%d); names identify backends and must be unique within a VIP",
          source, b.line, path, b.name, it->second));
    }
    if (v->forwarding == Forwarding::kL2Dsr && b.address.is_v6 != v->address.is_v6) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s:%d: %s.backend[\"%s\"].address: l2dsr forwarding keeps the packet's IP header, "
          "so the backend must be the same address family as the VIP",
          source, b.line, path, b.name));
    }
    v->backends.push_back(std::move(b));
  }
  MAGLB_RETURN_IF_ERROR(ParseVipHealth(r, t, source, health, v));
  MAGLB_RETURN_IF_ERROR(r.CheckNoUnknownKeys());
  if (v->backends.size() > v->table_size) {
    return r.Error(size_node, "table_size",
                   absl::StrFormat("%u slots are fewer than the %u backends", v->table_size,
                                   v->backends.size()));
  }
  if (absl::Status s = ValidateTableInput(v->BackendSpecs(), v->table_size); !s.ok()) {
    return r.Error(nullptr, "", std::string(s.message()));
  }
  // Scheme-specific rules, reported at the `algorithm` key (or the VIP).
  absl::Status scheme = absl::OkStatus();
  if (v->algorithm == Algorithm::kJump) scheme = ValidateJumpInput(v->BackendSpecs());
  if (v->algorithm == Algorithm::kRendezvous) {
    scheme = ValidateRendezvousInput(v->BackendSpecs(), v->table_size);
  }
  if (v->algorithm == Algorithm::kRing) {
    scheme = ValidateRingInput(v->BackendSpecs(), v->ring_points);
  }
  if (!scheme.ok()) return r.Error(t.get("algorithm"), "algorithm", std::string(scheme.message()));
  return absl::OkStatus();
}

// IPv6 hosts never send packets below 1280 bytes (RFC 8200), so if the tunnel
// overhead pushes a 1280-byte IPv6 packet past the egress MTU, packet-too-big
// can only say 1280 again and the flow is black-holed. Refuse such an MTU.
absl::Status CheckIpv6TunnelMtu(const toml::table& root, const std::string& source,
                                const Config& config) {
  constexpr uint32_t kIpv6MinMtu = 1280;
  for (const VipConfig& v : config.vips) {
    if (!v.address.is_v6 || v.forwarding == Forwarding::kL2Dsr) continue;
    for (const BackendConfig& b : v.backends) {
      const uint32_t overhead =
          (b.address.is_v6 ? 40 : 20) + (v.forwarding == Forwarding::kGre ? 4 : 0);
      if (config.lb.mtu >= kIpv6MinMtu + overhead) continue;
      const toml::node* lb = root.get("lb");
      const toml::node* mtu = lb != nullptr && lb->is_table() ? lb->as_table()->get("mtu") : nullptr;
      const int line = mtu != nullptr ? static_cast<int>(mtu->source().begin.line) : v.line;
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s:%d: lb.mtu: %u leaves %u bytes for the IPv6 packets of vip \"%s\" once %s over "
          "IPv%d is added (backend \"%s\"), below IPv6's minimum of 1280: those flows would be "
          "black-holed; set mtu to at least %u",
          source, line, config.lb.mtu, config.lb.mtu - overhead, v.name,
          v.forwarding == Forwarding::kGre ? "GRE" : "IP-in-IP", b.address.is_v6 ? 6 : 4, b.name,
          kIpv6MinMtu + overhead));
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Nesting guard. toml++ builds (and later destroys) the tables that a dotted
// key or table header names by recursion, one frame per level, and bounds
// only the nesting of arrays and inline tables: `[a.a.a...]` with ~35k parts
// overflowed the stack (SIGSEGV in `maglbctl table`, and in the daemon on
// reload). So before parsing, one pass over the text follows TOML's lexical
// structure (strings of all four kinds, comments, headers, keys, values,
// arrays and inline tables) just far enough to count dotted parts and depth.
//
// On valid TOML the pass sees what the parser sees. Where the text is not
// valid TOML the pass may lose track, but only after the first error, and the
// parser (one pass, throwing at its first error) never builds past it.

// The index just past the string that opens at text[i] (a ' or "), counting
// newlines into *line. A single-line string stops before a newline (invalid
// TOML, which the parser reports).
size_t SkipTomlString(std::string_view text, size_t i, int* line) {
  const char q = text[i];
  const bool basic = q == '"';
  const std::string_view delimiter = basic ? R"(""")" : "'''";
  const bool multi = text.substr(i, 3) == delimiter;
  size_t j = i + (multi ? 3 : 1);
  while (j < text.size()) {
    const char c = text[j];
    if (c == '\n') {
      if (!multi) return j;
      ++*line;
    } else if (basic && c == '\\') {
      ++j;  // escaped character (a backslash-newline in a multi-line string too)
      if (j < text.size() && text[j] == '\n') {
        if (!multi) return j;
        ++*line;
      }
    } else if (c == q) {
      if (!multi) return j + 1;
      if (text.substr(j, 3) == delimiter) {
        // Up to two quotes may end the content before the delimiter: the
        // delimiter is the last three of the run.
        while (j < text.size() && text[j] == q) ++j;
        return j;
      }
    }
    ++j;
  }
  return text.size();
}

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// "a.b.c" as written, shortened for a message.
std::string KeyExcerpt(std::string_view text, size_t begin, size_t end) {
  std::string_view key = text.substr(begin, end - begin);
  constexpr size_t kMax = 40;
  std::string out;
  for (char c : key.substr(0, kMax)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
  while (!out.empty() && (out.front() == ' ' || out.front() == '\t')) out.erase(0, 1);
  if (key.size() > kMax) out += "...";
  return out;
}

static_assert(kMaxConfigTableArrays >= kMaxVips + 3,
              "[[vip]], [[neighbor]], [[health_check]], a backend list per VIP");
static_assert(kMaxConfigHeaderParts >=
                  kMaxVips + 2 * kMaxBackendsTotal + kMaxHealthChecks + 2 * kMaxVips + 4096,
              "the largest config the data plane takes must pass: [[vip]], [[vip.backend]], "
              "[[health_check]], a [vip.health_check] per VIP, and room for the rest");

absl::Status CheckTomlNesting(std::string_view text, const std::string& source) {
  enum class Mode { kLineStart, kKey, kValue, kTrailing };
  struct Frame {
    char open;  // '[' array, '{' inline table
    int depth;  // of the values directly inside it
  };
  std::vector<Frame> stack;  // never deeper than kMaxConfigNesting
  Mode mode = Mode::kLineStart;
  int line = 1;
  int header_depth = 0;  // of keys under the last [table] / [[array]] header
  int value_depth = 0;   // of the value being read
  // The key (or header) being read.
  bool header = false, array_header = false;
  int parts = 0, key_line = 1;
  size_t key_begin = 0;

  auto nested_too_deep = [&](size_t end, int depth, std::string_view what) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s:%d: %s: %s nested %d levels deep (tables, arrays and dotted keys): maglb accepts "
        "at most %d (its own schema needs 4), since deeper nesting could exhaust the TOML "
        "parser's stack; the file was refused",
        source, key_line, KeyExcerpt(text, key_begin, end), what, depth, kMaxConfigNesting));
  };
  auto start_key = [&](size_t begin, bool is_header, bool is_array) {
    mode = Mode::kKey;
    header = is_header;
    array_header = is_array;
    parts = 1;
    key_line = line;
    key_begin = begin;
  };
  auto inner_depth = [&]() { return stack.empty() ? header_depth : stack.back().depth; };

  // toml++ 3.3 finds an existing array of tables, implicit table or
  // dotted-key table by a linear search of every one created so far
  // (parser.inl: table_arrays, implicit_tables, dotted_key_tables), at most
  // once per part of a table header or dotted key. Unbounded, that is
  // quadratic in the file: 4 MiB of [[vip]] / [[vip.backend]] took 2 s, 16 MiB
  // tens of seconds. Bounding what the lists may hold (by what maglb's schema
  // can use) and the header parts that search them bounds the parse at
  // kMaxConfigHeaderParts x (kMaxConfigTableArrays + kMaxConfigImplicitTables)
  // comparisons, plus time linear in the file. The counts over-estimate, never
  // under-estimate, what the parser creates: a key is taken as existing only
  // when written exactly as before (quoting or spaces aside, it is the same).
  int header_parts = 0, table_arrays = 0, implicit_tables = 0;
  absl::flat_hash_set<std::string_view> root_names;  // first parts of the headers so far
  std::string_view last_header;
  bool last_header_array = false;
  size_t first_dot = 0;  // of the key being read, when parts > 1
  auto refuse_count = [&](size_t end, std::string what) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s:%d: %s: %s; beyond that, the TOML parser's time grows with the square of the file "
        "(minutes under the size cap), so the file was refused before parsing",
        source, key_line, KeyExcerpt(text, key_begin, end), what));
  };
  // Charges a table header, or a dotted key (parts > 1), that ends at `end`.
  auto count_key = [&](size_t end) -> absl::Status {
    if (!header) {
      implicit_tables += parts - 1;  // each part but the last may create a table
    } else {
      const std::string_view path =
          TrimBlanks(text.substr(key_begin, end - key_begin));
      const std::string_view first =
          parts > 1 ? TrimBlanks(text.substr(key_begin, first_dot - key_begin))
                    : path;
      const bool first_exists = root_names.contains(first);
      // The parts between the first and the last may each create a table.
      if (parts > 1) implicit_tables += parts - 1 - (first_exists ? 1 : 0);
      // [[a]] adds an element to an existing array a; [[a.b]] does too when
      // the header before was the same: nothing since could change what "a"
      // leads to. Otherwise take it as a new array.
      if (array_header &&
          (parts == 1 ? !first_exists : !(last_header_array && last_header == path))) {
        ++table_arrays;
      }
      root_names.insert(first);
      last_header = path;
      last_header_array = array_header;
      header_parts += parts;
      if (header_parts > kMaxConfigHeaderParts) {
        return refuse_count(end, absl::StrFormat(
            "table headers of more than %d dotted parts in all ([[vip]] counts 1, "
            "[[vip.backend]] 2), more than %d VIPs with %d backends, %d [[health_check]], a "
            "[vip.health_check] per VIP and %d other headers need, while the parser searches "
            "the arrays of tables once per part",
            kMaxConfigHeaderParts, kMaxVips, kMaxBackendsTotal, kMaxHealthChecks,
            kMaxConfigHeaderParts - 3 * kMaxVips - 2 * kMaxBackendsTotal - kMaxHealthChecks));
      }
      if (table_arrays > kMaxConfigTableArrays) {
        return refuse_count(end, absl::StrFormat(
            "more than %d arrays of tables ([[vip]], [[neighbor]], [[health_check]], and one "
            "list of [[vip.backend]] per VIP): the data plane takes at most %d VIPs, while the "
            "parser "
            "searches them once per header",
            kMaxConfigTableArrays, kMaxVips));
      }
    }
    if (implicit_tables > kMaxConfigImplicitTables) {
      return refuse_count(end, absl::StrFormat(
          "more than %d tables created by dotted keys or by the inner parts of table headers "
          "(maglb's schema needs none; a dotted key such as lb.ipv4 = ... makes one), while the "
          "parser searches them once per dotted key",
          kMaxConfigImplicitTables));
    }
    return absl::OkStatus();
  };

  // The parser skips a UTF-8 byte order mark; so must the scan, or a header
  // right after it would read as a key.
  size_t i = text.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"' || c == '\'') {
      if (mode == Mode::kLineStart) start_key(i, false, false);
      i = SkipTomlString(text, i, &line);
      continue;
    }
    if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    if (c == '\n') {
      ++line;
      if (stack.empty()) mode = Mode::kLineStart;
      ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
      continue;
    }
    switch (mode) {
      case Mode::kLineStart:
        if (c == '[') {
          const bool is_array = i + 1 < text.size() && text[i + 1] == '[';
          i += is_array ? 2 : 1;
          start_key(i, true, is_array);
          continue;
        }
        start_key(i, false, false);
        continue;  // the same character, read as part of the key
      case Mode::kKey:
        if (c == '.') {
          if (++parts == 2) first_dot = i;
          if (parts > kMaxConfigKeyParts) {
            return absl::InvalidArgumentError(absl::StrFormat(
                "%s:%d: %s: %s of more than %d dotted parts (maglb's own have at most 2, as in "
                "[[vip.backend]]); deeper nesting could exhaust the TOML parser's stack, so the "
                "file was refused",
                source, line, KeyExcerpt(text, key_begin, i) + ".(...)",
                header ? "a table header" : "a key", kMaxConfigKeyParts));
          }
        } else if (c == '=' && !header) {
          value_depth = inner_depth() + parts;
          if (value_depth > kMaxConfigNesting) return nested_too_deep(i, value_depth, "a key");
          if (parts > 1) MAGLB_RETURN_IF_ERROR(count_key(i));
          mode = Mode::kValue;
        } else if (c == ']' && header) {
          header_depth = parts + (array_header ? 1 : 0);
          if (header_depth > kMaxConfigNesting) {
            return nested_too_deep(i, header_depth, "a table header");
          }
          MAGLB_RETURN_IF_ERROR(count_key(i));
          if (array_header && i + 1 < text.size() && text[i + 1] == ']') ++i;
          mode = Mode::kTrailing;
        } else if (c == '}' && !stack.empty() && stack.back().open == '{') {
          stack.pop_back();  // {} or a trailing comma
          mode = Mode::kValue;
        }
        break;
      case Mode::kValue:
        if (c == '[' || c == '{') {
          const int depth = value_depth + 1;
          if (depth > kMaxConfigNesting) {
            key_line = line;
            return nested_too_deep(i + 1, depth, c == '[' ? "an array" : "an inline table");
          }
          stack.push_back({c, depth});
          value_depth = depth;
          if (c == '{') start_key(i + 1, false, false);
        } else if ((c == ']' || c == '}') && !stack.empty() &&
                   stack.back().open == (c == ']' ? '[' : '{')) {
          stack.pop_back();
          value_depth = inner_depth();
        } else if (c == ',' && !stack.empty()) {
          if (stack.back().open == '{') {
            start_key(i + 1, false, false);
          } else {
            value_depth = stack.back().depth;
          }
        }
        break;
      case Mode::kTrailing:
        break;
    }
    ++i;
  }
  return absl::OkStatus();
}

// Every table of a snapshot lives at once (and a reload adds the changed
// ones): refuse a config whose tables together exceed [lb]
// max_table_memory_mb, at the VIP that crosses it.
absl::Status CheckTableMemory(const std::vector<const toml::table*>& vip_tables,
                              const std::string& source, const Config& config) {
  const uint64_t limit = uint64_t{config.lb.max_table_memory_mb} << 20;
  uint64_t total = 0, grand_total = 0;
  for (const VipConfig& v : config.vips) grand_total += v.table_size * kTableEntryBytes;
  for (size_t i = 0; i < config.vips.size(); ++i) {
    const VipConfig& v = config.vips[i];
    const uint64_t bytes = v.table_size * kTableEntryBytes;
    total += bytes;
    if (total <= limit) continue;
    const toml::node* size_node = vip_tables[i]->get("table_size");
    const int line = size_node != nullptr ? static_cast<int>(size_node->source().begin.line) : v.line;
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s:%d: vip[\"%s\"].table_size: this VIP's table (%u slots, %.1f MiB) brings the "
        "tables of the first %u VIPs to %.1f MiB, over [lb] max_table_memory_mb = %u (all %u "
        "VIPs ask for %.1f MiB); use smaller tables or raise the limit; the file was refused",
        source, line, v.name, v.table_size, bytes / 1048576.0, i + 1, total / 1048576.0,
        config.lb.max_table_memory_mb, config.vips.size(), grand_total / 1048576.0));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Config> ParseConfig(std::string_view text, std::string_view source_view) {
  std::string source(source_view);
  if (text.size() > kMaxConfigBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %u bytes: maglb refuses config files over %u bytes (%u MiB); the file was not "
        "parsed",
        source, text.size(), kMaxConfigBytes, kMaxConfigBytes >> 20));
  }
  MAGLB_RETURN_IF_ERROR(CheckTomlNesting(text, source));
  toml::table root;
  try {
    root = toml::parse(text, source_view);
  } catch (const toml::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s:%d:%d: not valid TOML: %s", source, e.source().begin.line, e.source().begin.column,
        std::string(e.description())));
  }
  TableReader r(root, source, "");
  Config config;
  config.source = source;

  if (const toml::node* n = r.Get("lb"); n != nullptr) {
    if (!n->is_table()) return r.Error(n, "lb", "must be a table ([lb])");
    MAGLB_RETURN_IF_ERROR(ParseLb(*n->as_table(), source, &config.lb));
  }
  if (const toml::node* n = r.Get("conntrack"); n != nullptr) {
    if (!n->is_table()) return r.Error(n, "conntrack", "must be a table ([conntrack])");
    MAGLB_RETURN_IF_ERROR(ParseConntrack(*n->as_table(), source, &config.conntrack));
  }
  std::vector<const toml::table*> neighbors;
  MAGLB_RETURN_IF_ERROR(ArrayOfTables(r, "neighbor", "neighbor", &neighbors));
  for (size_t i = 0; i < neighbors.size(); ++i) {
    NeighborConfig n;
    MAGLB_RETURN_IF_ERROR(ParseNeighbor(*neighbors[i], source, i, &n));
    config.neighbors.push_back(n);
  }
  if (const toml::node* n = r.Get("health"); n != nullptr) {
    if (!n->is_table()) return r.Error(n, "health", "must be a table ([health])");
    MAGLB_RETURN_IF_ERROR(ParseHealthSettings(*n->as_table(), source, &config.health));
  }
  if (const toml::node* n = r.Get("kernel"); n != nullptr) {
    if (!n->is_table()) return r.Error(n, "kernel", "must be a table ([kernel])");
    MAGLB_RETURN_IF_ERROR(ParseKernel(*n->as_table(), source, config.lb, &config.kernel));
  }
  if (const toml::node* n = r.Get("announce"); n != nullptr) {
    if (!n->is_table()) return r.Error(n, "announce", "must be a table ([announce])");
    MAGLB_RETURN_IF_ERROR(ParseAnnounce(*n->as_table(), source, config.kernel, &config.announce));
  }
  if (const toml::node* n = r.Get("metrics"); n != nullptr) {
    if (!n->is_table()) return r.Error(n, "metrics", "must be a table ([metrics])");
    MAGLB_RETURN_IF_ERROR(ParseMetrics(*n->as_table(), source, &config.metrics));
  }
  std::vector<const toml::table*> checks;
  MAGLB_RETURN_IF_ERROR(ArrayOfTables(r, "health_check", "health_check", &checks));
  if (checks.size() > kMaxHealthChecks) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s:%d: health_check[%u]: more than %u [[health_check]]; VIPs can share a named check, "
        "and a VIP can have its own ([vip.health_check]); the file was refused",
        source, checks[kMaxHealthChecks]->source().begin.line, kMaxHealthChecks,
        kMaxHealthChecks));
  }
  absl::flat_hash_map<std::string, size_t> check_index;
  config.health_checks.reserve(checks.size());
  for (size_t i = 0; i < checks.size(); ++i) {
    HealthCheckConfig c;
    MAGLB_RETURN_IF_ERROR(ParseNamedCheck(*checks[i], source, i, &c));
    auto [it, inserted] = check_index.emplace(c.name, config.health_checks.size());
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s:%d: health_check[\"%s\"].name: duplicate check name (first declared at line %d)",
          source, c.line, c.name, config.health_checks[it->second].line));
    }
    config.health_checks.push_back(std::move(c));
  }
  const HealthContext health{&config.health_checks, &check_index, &config.kernel, &config.lb};
  std::vector<const toml::table*> vips;
  MAGLB_RETURN_IF_ERROR(ArrayOfTables(r, "vip", "vip", &vips));
  absl::flat_hash_map<std::string, int> vip_names;
  // (address, protocol, port) -> index in config.vips. A scan of the VIPs
  // before each one made parsing quadratic: 6.7 s for 40k VIPs.
  using ServiceKey = std::tuple<std::array<uint8_t, 16>, bool, Protocol, uint16_t>;
  absl::flat_hash_map<ServiceKey, size_t> services;
  config.vips.reserve(vips.size());
  vip_names.reserve(vips.size());
  services.reserve(vips.size());
  for (size_t i = 0; i < vips.size(); ++i) {
    VipConfig v;
    MAGLB_RETURN_IF_ERROR(ParseVip(*vips[i], source, i, health, &v));
    auto [it, inserted] = vip_names.emplace(v.name, v.line);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s:%d: vip[\"%s\"].name: duplicate VIP name (first declared at line %d)", source,
          v.line, v.name, it->second));
    }
    auto [sit, new_service] = services.emplace(
        ServiceKey{v.address.bytes, v.address.is_v6, v.protocol, v.port}, config.vips.size());
    if (!new_service) {
      const VipConfig& other = config.vips[sit->second];
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s:%d: vip[\"%s\"]: %s %s port %u is already served by vip \"%s\" (line %d)",
          source, v.line, v.name, ToString(v.protocol), v.address.ToString(), v.port,
          other.name, other.line));
    }
    config.vips.push_back(std::move(v));
  }
  MAGLB_RETURN_IF_ERROR(r.CheckNoUnknownKeys());
  MAGLB_RETURN_IF_ERROR(CheckIpv6TunnelMtu(root, source, config));
  MAGLB_RETURN_IF_ERROR(CheckTableMemory(vips, source, config));
  return config;
}

absl::StatusOr<Config> LoadConfig(const std::string& path) {
  // A directory or a device would read as an empty file: an empty config that
  // removes every VIP. Refuse anything but a regular file, and an empty one.
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(
        absl::StrFormat("%s: cannot read config file: %s", path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: not a regular file; the config must be a TOML file", path));
  }
  // Checked again on the text (ParseConfig), should the file grow meanwhile.
  if (static_cast<uint64_t>(st.st_size) > kMaxConfigBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %d bytes: maglb refuses config files over %u bytes (%u MiB); the file was not read",
        path, static_cast<int64_t>(st.st_size), kMaxConfigBytes, kMaxConfigBytes >> 20));
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in || in.bad()) {
    return absl::UnavailableError(
        absl::StrFormat("%s: cannot read config file: %s", path, std::strerror(errno)));
  }
  const std::string text = ss.str();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: the file is empty (an editor mid-write?); refusing it rather than serving no "
        "VIPs", path));
  }
  return ParseConfig(text, path);
}

}  // namespace maglb
