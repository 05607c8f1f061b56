// The data plane's view of the configuration: one immutable snapshot.
//
// The control path builds an LbState from a validated Config (BuildLbState),
// publishes a pointer to it, and frees it only after every worker has moved on
// (RCU, in the data plane). Workers only read it. Nothing in it changes after
// construction, so a worker never sees half a reload.
//
// Backend identity. Backend indices (positions in VipState::backends) change
// when a reload adds or removes backends, so connection tracking stores a
// stable id instead: every (VIP name, backend name) gets a 32-bit id when it
// first appears, keeps it in every later generation while it stays configured
// (whatever its weight or address), and the id is never given to anything else
// in this process. A tracked flow stores (id, index hint); VipState::Resolve
// checks backends[hint].id == id and falls back to a binary search, so a flow
// stays with its backend while that backend is configured (weight 0 included)
// and learns that it is gone when it is removed.
//
// Table reuse. Every table is built from its VIP's TableInput alone
// (config.h: algorithm, table size, ring points for "ring", backends' names
// and weights), and a VIP whose TableInput is unchanged keeps the previous
// generation's LookupTable object (shared, not rebuilt); only the VIPs whose
// input changed get new tables. So the tables after any reload are those a
// fresh start from the same config builds, whatever else changed.
#ifndef MAGLB_LB_STATE_H_
#define MAGLB_LB_STATE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "maglb/config.h"
#include "maglb/encap.h"
#include "maglb/health.h"
#include "maglb/ip_address.h"
#include "maglb/lookup_table.h"
#include "maglb/packet.h"

namespace maglb {

/// Limits of one snapshot, so that per-worker counters can be preallocated.
inline constexpr uint32_t kMaxVips = 4096;
inline constexpr uint32_t kMaxBackendsTotal = 65536;  // over all VIPs

/// One backend of one VIP, as the packet path needs it.
struct BackendState {
  uint32_t id = 0;            ///< stable, see the file comment
  uint32_t counter_slot = 0;  ///< index into per-worker backend counters (< kMaxBackendsTotal)
  /// The weight the table was built with: the configured one, or what
  /// health made of it (0 while down; scaled during a slow start, see
  /// health.h EffectiveWeight). 0 = no new flows; tracked flows stay.
  uint32_t weight = 0;
  uint32_t configured_weight = 0;  ///< as the config says
  BackendHealth health = BackendHealth::kUnchecked;
  /// Down, on a VIP with down_flows = "move": its tracked flows take the
  /// table's new choice on their next packet (Resolve says it is gone).
  bool flows_move = false;
  /// Where packets go: forwarding mode, backend address, next-hop MAC (the
  /// gateway's for kGre/kIpip when one is configured, else the backend's).
  EncapTarget target;
  bool next_hop_known = false;  ///< next_hop_mac resolved (static or ARP/ND)
  /// `target`'s outer headers under the snapshot's encap() (Worker::Send's
  /// common case), rebuilt with every next-hop resolution, so whenever the
  /// target or the EncapConfig changes.
  Ipv4EncapTemplate encap_template;
  std::string name;
};

/// One VIP and its table.
struct VipState {
  static constexpr uint16_t kNoBackend = 0xFFFF;

  std::string name;
  uint32_t id = 0;            ///< stable per VIP name, like backend ids
  uint32_t counter_slot = 0;  ///< index into per-worker VIP counters (< kMaxVips)
  IpAddress address;
  Protocol protocol = Protocol::kTcp;
  uint16_t port = 0;
  Forwarding forwarding = Forwarding::kGre;
  Algorithm algorithm = Algorithm::kMaglev;
  uint32_t table_size = 0;  ///< as configured (table->size() is 0 when empty)
  uint64_t hash_seed = 0;  ///< flow-hash seed (LbConfig::hash_seed)
  /// Bounded loads for new flows (bounded_load.h): VipConfig's
  /// bounded_load_epsilon, 0 when unset (off: new flows take the table's
  /// choice, no flow is counted).
  double bounded_load_epsilon = 0;
  uint64_t total_weight = 0;  ///< sum of the backends' weights
  /// Shared with earlier/later generations while unchanged. Never null; empty()
  /// when every backend weighs 0.
  std::shared_ptr<const LookupTable> table;
  /// In the table's index order: table->Lookup(h) indexes this vector.
  std::vector<BackendState> backends;
  /// (id, index) sorted by id, for Resolve's fallback.
  std::vector<std::pair<uint32_t, uint16_t>> id_index;

  uint64_t fingerprint() const { return table->fingerprint(); }

  /// Index of the backend with `id`, trying `hint` first; kNoBackend if that
  /// backend is no longer configured on this VIP.
  uint16_t Resolve(uint32_t id, uint16_t hint) const {
    if (hint < backends.size() && backends[hint].id == id) {
      return backends[hint].flows_move ? kNoBackend : hint;
    }
    return ResolveSlow(id);
  }
  uint16_t ResolveSlow(uint32_t id) const;
  /// Index of the backend with `id` whatever its health (probes), or kNoBackend.
  uint16_t ResolveAny(uint32_t id) const;
};

/// What a reload changed, for the daemon's one-line log.
struct LbStateChange {
  struct VipChange {
    std::string name;
    std::vector<std::string> backends_added, backends_removed, backends_reweighted;
    double moved = 0;  ///< fraction of the VIP's hash space whose backend changed
    uint64_t old_fingerprint = 0, new_fingerprint = 0;
  };
  uint64_t generation = 0;
  std::vector<std::string> vips_added, vips_removed;
  std::vector<VipChange> vips_changed;  ///< tables rebuilt (and VIPs whose fields changed)
  /// Rebuilt for its inputs (health), not for a new config: same generation.
  bool inputs_only = false;
  uint32_t tables_reused = 0;
  uint32_t tables_built = 0;

  bool empty() const { return vips_added.empty() && vips_removed.empty() && vips_changed.empty(); }
  /// e.g. "generation 3: +vip web6, -vip old, ~vip web (+b4; moved 24.8%), 5 tables reused".
  std::string ToString() const;
};

/// Resolves a next-hop IP address to a MAC (ARP/ND cache of the data plane).
using NeighborResolver = std::function<std::optional<MacAddress>(const IpAddress&)>;

/// What health checking makes of one backend (control/health_task.h).
struct BackendHealthInput {
  BackendHealth health = BackendHealth::kUnchecked;
  uint32_t effective_weight = 0;
  bool flows_move = false;
  /// The configured weight effective_weight was made from (unset: the
  /// config's, whatever it is). A reload that changes the weight scales it:
  /// health says what share serves, the config says of what.
  std::optional<uint32_t> for_configured_weight;
};
/// The health of (VIP name, backend name); nullopt: the health task does not
/// know the backend (yet): see BuildLbState.
using HealthResolver =
    std::function<std::optional<BackendHealthInput>(std::string_view vip, std::string_view backend)>;

struct LbStateOptions {
  MacAddress port_mac;       ///< our data-plane port's MAC (outer Ethernet source)
  NeighborResolver resolve;  ///< may be empty; Config::neighbors always win
  HealthResolver health;     ///< may be empty: every backend at its configured weight
  /// The daemon created a kernel interface at start (dataplane/kernel_port.h):
  /// LocalAddresses::kernel, and its link-local address (LinkLocalOf
  /// port_mac) when [lb] ipv6 is set. From the daemon, not from the config: a
  /// reload that adds or removes [kernel] interface applies at the next start.
  bool kernel_interface = false;
};

class LbState {
 public:
  /// Config generation: 1 for the first snapshot, +1 per successful build.
  uint64_t generation() const { return generation_; }
  const std::vector<VipState>& vips() const { return vips_; }
  const VipMatcher& matcher() const { return matcher_; }
  const LocalAddresses& local() const { return local_; }
  const EncapConfig& encap() const { return encap_; }
  const Config& config() const { return config_; }
  const LbStateChange& change() const { return change_; }
  /// Next-hop MACs as resolved when this snapshot was made.
  uint64_t neighbor_version() const { return neighbor_version_; }
  const LbStateOptions& options() const { return options_; }

  const VipState* FindVip(std::string_view name) const;

  /// A copy with every next-hop MAC resolved again (static neighbors first,
  /// then `resolve`); same generation, tables shared. For the control thread
  /// when ARP/ND learns an address.
  std::unique_ptr<const LbState> WithNeighbors(const NeighborResolver& resolve) const;

 private:
  friend absl::StatusOr<std::unique_ptr<const LbState>> BuildLbStateImpl(const Config&,
                                                                        const LbState*,
                                                                        const LbStateOptions&,
                                                                        bool inputs_only);
  // Next-hop MACs, and with them every backend's encap_template (from encap_).
  void ResolveNeighbors(const NeighborResolver& resolve);

  uint64_t generation_ = 0;
  uint64_t neighbor_version_ = 0;
  Config config_;
  LbStateOptions options_;
  std::vector<VipState> vips_;
  /// What each table of vips_ was built from (same index): the reuse key.
  std::vector<TableInput> table_inputs_;
  VipMatcher matcher_;
  LocalAddresses local_;
  EncapConfig encap_;
  LbStateChange change_;
  // Identity bookkeeping carried from generation to generation.
  uint32_t next_id_ = 1;
};

/// Builds a snapshot from a validated config. `previous` (may be null) lends
/// its tables for VIPs that did not change, its backend/VIP ids and counter
/// slots, and its generation (+1). The result's change() says what changed.
/// Fails (leaving nothing half-built) if a table cannot be built or a limit
/// above is exceeded.
///
/// Health: each backend's table weight is what options.health says. A checked
/// backend it does not know yet is a newcomer: down ("new, not yet checked")
/// when a reload adds it to a VIP that was already serving, up at its weight
/// otherwise (at start, or on a new VIP: serving before any check answers).
absl::StatusOr<std::unique_ptr<const LbState>> BuildLbState(const Config& config,
                                                            const LbState* previous,
                                                            const LbStateOptions& options);
/// As above, with the previous snapshot's options (none for the first).
absl::StatusOr<std::unique_ptr<const LbState>> BuildLbState(const Config& config,
                                                            const LbState* previous);

/// `current` rebuilt for new inputs (health): same config, same generation,
/// only the tables whose weights changed rebuilt; change().inputs_only.
absl::StatusOr<std::unique_ptr<const LbState>> RebuildForInputs(const LbState& current,
                                                                const LbStateOptions& options);

}  // namespace maglb

#endif  // MAGLB_LB_STATE_H_
