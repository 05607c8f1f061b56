// The configuration model: what an operator writes in the TOML file, validated.
// config/example.toml documents every key.
#ifndef MAGLB_CONFIG_H_
#define MAGLB_CONFIG_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "maglb/announce_config.h"
#include "maglb/conntrack_config.h"
#include "maglb/forwarding.h"
#include "maglb/health_config.h"
#include "maglb/ip_address.h"
#include "maglb/lookup_table.h"
#include "maglb/metrics_config.h"
#include "maglb/port_sizing.h"
#include "maglb/table_scheme.h"
#include "maglb/vip_spec.h"

namespace maglb {

// The small specs the packet path takes live in their own headers, which this
// one includes: Protocol and VipSpec (vip_spec.h), Forwarding, kDefaultMtu and
// kDefaultEncapTtl (forwarding.h), ConntrackConfig and its defaults
// (conntrack_config.h), Algorithm and the table limits (table_scheme.h).

inline constexpr uint64_t kDefaultHashSeed = 0;
// What the LB sends on its own, per worker and second (reply.h, TokenBucket):
// as Linux's icmp_msgs_per_sec / icmp_msgs_burst.
inline constexpr uint32_t kDefaultReplyRate = 1000;
inline constexpr uint32_t kDefaultReplyBurst = 50;
/// Bytes of one table slot (LookupTable stores uint16_t backend indices).
inline constexpr uint64_t kTableEntryBytes = 2;
/// Cap on the memory of all VIPs' tables of one snapshot, sum of table_size x
/// kTableEntryBytes ([lb] max_table_memory_mb). Without it 4096 VIPs could ask
/// for 4,194,301 slots each: 32 GiB. The default fits 4096 VIPs at the default
/// table size (512 MiB) or 128 at the largest. A reload briefly holds the old
/// snapshot's changed tables too.
inline constexpr uint32_t kDefaultMaxTableMemoryMb = 1024;
inline constexpr uint32_t kMaxMaxTableMemoryMb = 1u << 20;

/// Limits on the config text, checked before the TOML parser sees it, so that
/// no file can exhaust the daemon's memory or stack (the daemon parses on
/// every reload). The largest config the data plane takes (4096 VIPs, 65536
/// backends) is about 5 MiB of TOML.
inline constexpr size_t kMaxConfigBytes = 16u << 20;
/// Dotted parts of one key or table header ("vip.backend" has 2). toml++
/// recurses once per level of the tables these create, and bounds only arrays
/// and inline tables: ~35k parts overflowed an 8 MiB stack.
inline constexpr int kMaxConfigKeyParts = 16;
/// Levels of tables and arrays at any point of the file: a table header's
/// parts (+1 for [[array]]), each key's parts, and each enclosing [ ] or { }.
/// maglb's own schema needs 4.
inline constexpr int kMaxConfigNesting = 32;
/// toml++ 3.3 looks up arrays of tables, and tables created implicitly, by a
/// linear search of all such so far, once per part of each table header or
/// dotted key: unbounded, parsing is quadratic in the file (tens of seconds at
/// 16 MiB). These bound it to a fraction of a second at any size, and are what
/// maglb's schema can use: arrays of tables are [[vip]], [[neighbor]],
/// [[health_check]] and one [[vip.backend]] list per VIP (kMaxVips = 4096
/// VIPs); header parts are 1 per [[vip]], 2 per [[vip.backend]]
/// (kMaxBackendsTotal = 65536 backends), 1 per [[health_check]]
/// (kMaxHealthChecks), 2 per VIP's [vip.health_check], and 16384 for
/// [[neighbor]] and the rest; implicit tables come only from dotted keys
/// (lb.ipv4 = ...) and from the inner parts of [a.b.c] headers.
inline constexpr int kMaxConfigTableArrays = 4096 + 64;
inline constexpr int kMaxConfigHeaderParts =
    4096 + 2 * 65536 + static_cast<int>(kMaxHealthChecks) + 2 * 4096 + 16384;
inline constexpr int kMaxConfigImplicitTables = 256;

struct BackendConfig {
  std::string name;
  IpAddress address;
  uint32_t weight = 1;
  int line = 0;  // where it was declared, for messages
};

struct VipConfig {
  std::string name;
  IpAddress address;
  Protocol protocol = Protocol::kTcp;
  uint16_t port = 0;  // 0: every port
  Forwarding forwarding = Forwarding::kGre;
  Algorithm algorithm = Algorithm::kMaglev;
  uint32_t table_size = kDefaultTableSize;
  /// Ring points per unit of weight (algorithm = "ring" only).
  uint32_t ring_points = kDefaultRingPoints;
  /// The operator's explicit consent to algorithm = "modulo".
  bool allow_modulo = false;
  /// Bounded load for new flows (maglb/bounded_load.h): a backend at
  /// ceil((1 + epsilon) * average) active flows passes new flows on. Unset: off.
  std::optional<double> bounded_load_epsilon;
  std::vector<BackendConfig> backends;
  /// health_check = "NAME" (a [[health_check]], copied here, name kept) or
  /// an inline [vip.health_check] (name ""); unset: not checked (health
  /// "unchecked"), which is also what type = "none" gives: when set, its type
  /// is never kNone.
  std::optional<HealthCheckConfig> health_check;
  /// A backend that comes up (added by a reload, or recovered) ramps to its
  /// weight over this many seconds; 0: at once.
  uint32_t slow_start_s = kDefaultSlowStartS;
  AllDownPolicy all_down = AllDownPolicy::kKeepLast;
  DownFlows down_flows = DownFlows::kPin;
  int line = 0;

  std::vector<BackendSpec> BackendSpecs() const;
  /// What VipMatcher needs of it: (address, protocol, port).
  VipSpec spec() const { return {address, protocol, port}; }
};

/// The VipSpec of each VIP, in order (VipMatcher's input: VIP i gets index i).
std::vector<VipSpec> VipSpecsOf(const std::vector<VipConfig>& vips);

/// Everything that decides a VIP's table, and nothing else. The data plane
/// builds every table from this alone (BuildLbState builds
/// BuildVipTable(input.ToVipConfig())), so equal inputs give equal tables, and
/// a reload keeps a VIP's table exactly when its input is unchanged: a field
/// the builders read cannot be left out of the reuse decision (issue 8: a
/// reload that changed only ring_points kept the old table, while a restarted
/// instance built a new one).
struct TableInput {
  Algorithm algorithm = Algorithm::kMaglev;
  uint32_t table_size = kDefaultTableSize;
  /// ring_points for algorithm = "ring"; 0 for the other schemes (unused).
  uint32_t ring_points = 0;
  /// (name, weight), sorted: placement ignores the order of listing.
  std::vector<std::pair<std::string, uint32_t>> backends;

  static TableInput Of(const VipConfig& vip);
  /// A VIP holding exactly this input, in name order (addresses unset).
  VipConfig ToVipConfig() const;
  friend bool operator==(const TableInput&, const TableInput&) = default;
};

/// This LB's own identity on the data plane, and how it encapsulates.
struct LbConfig {
  /// Seed of the flow hash. Every LB instance of one deployment must share it,
  /// so that a flow hashes identically wherever ECMP sends it.
  uint64_t hash_seed = kDefaultHashSeed;
  std::optional<IpAddress> ipv4;  // answers ARP and ping on it
  std::optional<IpAddress> ipv6;  // answers neighbour solicitation and ping
  std::optional<IpAddress> gateway_v4;  // next hop of encapsulated traffic
  std::optional<IpAddress> gateway_v6;
  /// Outer source of encapsulated packets; defaults to ipv4 / ipv6.
  std::optional<IpAddress> encap_source_v4;
  std::optional<IpAddress> encap_source_v6;
  /// Host bits of the outer source that vary per flow (0 = fixed source), so
  /// that backends' RSS spreads flows over their queues.
  uint8_t encap_source_v4_flow_bits = 0;
  uint8_t encap_source_v6_flow_bits = 0;
  uint8_t encap_ttl = kDefaultEncapTtl;
  uint32_t mtu = kDefaultMtu;  // egress MTU; larger encapsulated packets get ICMP
  int mtu_line = 0;  // where mtu was set (0: not set), for messages
  /// Replies the LB generates, per worker: echo replies and ICMP errors per
  /// second (0: none), and how many may go at once; ARP replies and neighbour
  /// advertisements have a bucket of their own with the same figures.
  uint32_t reply_rate = kDefaultReplyRate;
  uint32_t reply_burst = kDefaultReplyBurst;
  /// Cap on the sum of all VIPs' table memory (kDefaultMaxTableMemoryMb).
  uint32_t max_table_memory_mb = kDefaultMaxTableMemoryMb;
  /// Descriptors per queue and packet buffers per data port
  /// (rx_descriptors, tx_descriptors, mbufs; port_sizing.h): set at start.
  PortSizingConfig sizing;
};

/// A static neighbour entry: overrides ARP/ND for that address.
struct NeighborConfig {
  IpAddress address;
  MacAddress mac;
  int line = 0;
};

struct Config {
  std::string source;  // file name, for messages
  LbConfig lb;
  ConntrackConfig conntrack;
  std::vector<NeighborConfig> neighbors;
  /// [[health_check]]: named checks VIPs refer to (each VIP holds its copy).
  std::vector<HealthCheckConfig> health_checks;
  HealthSettings health;
  KernelConfig kernel;
  /// [announce]: VIP routes for the BGP daemon; off unless set.
  AnnounceConfig announce;
  /// [metrics]: the Prometheus exporter; off unless set.
  MetricsConfig metrics;
  std::vector<VipConfig> vips;

  const VipConfig* FindVip(std::string_view name) const;
};

/// Parses and validates TOML text. `source` names it in errors, which read
/// "SOURCE:LINE: KEY: what is wrong". Unknown keys are errors (a typo must not
/// silently fall back to a default). Text over kMaxConfigBytes, or nested past
/// kMaxConfigKeyParts / kMaxConfigNesting, or over the counts above, is
/// refused before it is parsed.
absl::StatusOr<Config> ParseConfig(std::string_view text, std::string_view source);

/// Reads and parses a file.
absl::StatusOr<Config> LoadConfig(const std::string& path);

}  // namespace maglb

#endif  // MAGLB_CONFIG_H_
