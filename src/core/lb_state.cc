#include "maglb/lb_state.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "maglb/table_builder.h"
#include "maglb/table_diff.h"

namespace maglb {
namespace {

std::vector<BackendSpec> SpecsOf(const VipState& v) {
  std::vector<BackendSpec> specs;
  specs.reserve(v.backends.size());
  for (const BackendState& b : v.backends) specs.push_back({b.name, b.weight});
  return specs;
}

// Lowest slots not in `used`, handed out in order.
class SlotAllocator {
 public:
  SlotAllocator(std::vector<bool> used) : used_(std::move(used)) {}
  std::optional<uint32_t> Next() {
    while (next_ < used_.size() && used_[next_]) ++next_;
    if (next_ >= used_.size()) return std::nullopt;
    used_[next_] = true;
    return static_cast<uint32_t>(next_++);
  }

 private:
  std::vector<bool> used_;
  size_t next_ = 0;
};

// A VIP or backend that was there before keeps its id and counter slot (its
// counters go on); a new one gets a fresh id and the lowest free slot.
template <typename Item>
void KeepOrAssignIdentity(const Item* previous, Item& item, uint32_t& next_id, SlotAllocator& slots) {
  if (previous != nullptr) {
    item.id = previous->id;
    item.counter_slot = previous->counter_slot;
  } else {
    item.id = next_id++;
    item.counter_slot = *slots.Next();  // the caller bounded the count by the slots
  }
}

// A previous VIP's backends by name: reloads of VIPs with thousands of
// backends stay linear.
absl::flat_hash_map<std::string_view, const BackendState*> ByName(const VipState* v) {
  absl::flat_hash_map<std::string_view, const BackendState*> m;
  if (v == nullptr) return m;
  m.reserve(v->backends.size());
  for (const BackendState& b : v->backends) m[b.name] = &b;
  return m;
}

const BackendState* Find(const absl::flat_hash_map<std::string_view, const BackendState*>& m,
                         std::string_view name) {
  auto it = m.find(name);
  return it == m.end() ? nullptr : it->second;
}

}  // namespace

uint16_t VipState::ResolveAny(uint32_t id) const {
  auto it = std::lower_bound(id_index.begin(), id_index.end(), std::make_pair(id, uint16_t{0}));
  if (it != id_index.end() && it->first == id) return it->second;
  return kNoBackend;
}

uint16_t VipState::ResolveSlow(uint32_t id) const {
  const uint16_t i = ResolveAny(id);
  return i != kNoBackend && backends[i].flows_move ? kNoBackend : i;
}

std::string LbStateChange::ToString() const {
  std::vector<std::string> parts;
  for (const std::string& v : vips_added) parts.push_back(absl::StrCat("+vip ", v));
  for (const std::string& v : vips_removed) parts.push_back(absl::StrCat("-vip ", v));
  for (const VipChange& c : vips_changed) {
    std::vector<std::string> what;
    for (const std::string& b : c.backends_added) what.push_back(absl::StrCat("+", b));
    for (const std::string& b : c.backends_removed) what.push_back(absl::StrCat("-", b));
    for (const std::string& b : c.backends_reweighted) what.push_back(absl::StrCat("~", b));
    what.push_back(absl::StrFormat("moved %.1f%%", 100.0 * c.moved));
    what.push_back(absl::StrFormat("fingerprint %016x -> %016x", c.old_fingerprint, c.new_fingerprint));
    parts.push_back(absl::StrCat("~vip ", c.name, " (", absl::StrJoin(what, ", "), ")"));
  }
  if (parts.empty()) parts.push_back("no VIP changed");
  return absl::StrCat("generation ", generation, inputs_only ? " (health)" : "", ": ",
                      absl::StrJoin(parts, ", "), "; ",
                      tables_built, " tables built, ", tables_reused, " reused");
}

const VipState* LbState::FindVip(std::string_view name) const {
  for (const VipState& v : vips_) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

void LbState::ResolveNeighbors(const NeighborResolver& resolve) {
  auto lookup = [&](const IpAddress& ip) -> std::optional<MacAddress> {
    for (const NeighborConfig& n : config_.neighbors) {
      if (n.address == ip) return n.mac;
    }
    if (resolve) return resolve(ip);
    return std::nullopt;
  };
  for (VipState& v : vips_) {
    for (BackendState& b : v.backends) {
      IpAddress next_hop = b.target.backend;
      if (b.target.forwarding != Forwarding::kL2Dsr) {
        const std::optional<IpAddress>& gw =
            b.target.backend.is_v6 ? config_.lb.gateway_v6 : config_.lb.gateway_v4;
        if (gw.has_value()) next_hop = *gw;
      }
      std::optional<MacAddress> mac = lookup(next_hop);
      b.next_hop_known = mac.has_value();
      b.target.next_hop_mac = mac.value_or(MacAddress{});
      b.encap_template = Ipv4EncapTemplate::Of(b.target, encap_);
    }
  }
}

std::unique_ptr<const LbState> LbState::WithNeighbors(const NeighborResolver& resolve) const {
  auto copy = std::make_unique<LbState>(*this);
  copy->options_.resolve = resolve;
  ++copy->neighbor_version_;
  copy->ResolveNeighbors(resolve);
  return copy;
}

absl::StatusOr<std::unique_ptr<const LbState>> BuildLbState(const Config& config,
                                                            const LbState* previous) {
  return BuildLbState(config, previous, previous != nullptr ? previous->options() : LbStateOptions{});
}

absl::StatusOr<std::unique_ptr<const LbState>> BuildLbState(const Config& config,
                                                            const LbState* previous,
                                                            const LbStateOptions& options) {
  return BuildLbStateImpl(config, previous, options, false);
}

absl::StatusOr<std::unique_ptr<const LbState>> RebuildForInputs(const LbState& current,
                                                                const LbStateOptions& options) {
  return BuildLbStateImpl(current.config(), &current, options, true);
}

absl::StatusOr<std::unique_ptr<const LbState>> BuildLbStateImpl(const Config& config,
                                                                const LbState* previous,
                                                                const LbStateOptions& options,
                                                                bool inputs_only) {
  const std::string where = config.source.empty() ? std::string("config") : config.source;
  if (config.vips.size() > kMaxVips) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %u VIPs configured, the data plane takes at most %u; the new config was not applied",
        where, config.vips.size(), kMaxVips));
  }
  size_t total_backends = 0;
  for (const VipConfig& v : config.vips) total_backends += v.backends.size();
  if (total_backends > kMaxBackendsTotal) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %u backends configured over all VIPs, the data plane takes at most %u; the new "
        "config was not applied",
        where, total_backends, kMaxBackendsTotal));
  }

  auto state = std::make_unique<LbState>();
  state->generation_ = previous == nullptr ? 1 : previous->generation() + (inputs_only ? 0 : 1);
  state->neighbor_version_ = previous != nullptr && inputs_only ? previous->neighbor_version_ : 0;
  state->config_ = config;
  state->options_ = options;
  state->next_id_ = previous != nullptr ? previous->next_id_ : 1;
  LbStateChange& change = state->change_;
  change.generation = state->generation_;
  change.inputs_only = inputs_only;

  // The previous snapshot's VIPs by name (linear in the number of VIPs).
  absl::flat_hash_map<std::string_view, const VipState*> previous_vips;
  if (previous != nullptr) {
    for (const VipState& v : previous->vips()) previous_vips[v.name] = &v;
  }
  auto find_previous = [&](std::string_view name) -> const VipState* {
    auto it = previous_vips.find(name);
    return it == previous_vips.end() ? nullptr : it->second;
  };

  // Counter slots held by VIPs/backends that survive keep them; newcomers
  // take the lowest free ones.
  std::vector<bool> vip_slots_used(kMaxVips, false);
  std::vector<bool> backend_slots_used(kMaxBackendsTotal, false);
  for (const VipConfig& vc : config.vips) {
    const VipState* pv = find_previous(vc.name);
    if (pv == nullptr) continue;
    vip_slots_used[pv->counter_slot] = true;
    const auto prev_by_name = ByName(pv);
    for (const BackendConfig& bc : vc.backends) {
      if (const BackendState* pb = Find(prev_by_name, bc.name)) backend_slots_used[pb->counter_slot] = true;
    }
  }
  SlotAllocator vip_slots(std::move(vip_slots_used));
  SlotAllocator backend_slots(std::move(backend_slots_used));

  state->vips_.reserve(config.vips.size());
  state->table_inputs_.reserve(config.vips.size());
  for (const VipConfig& vc : config.vips) {
    const VipState* pv = find_previous(vc.name);
    VipState v;
    v.name = vc.name;
    v.address = vc.address;
    v.protocol = vc.protocol;
    v.port = vc.port;
    v.forwarding = vc.forwarding;
    v.algorithm = vc.algorithm;
    v.table_size = vc.table_size;
    v.hash_seed = config.lb.hash_seed;
    v.bounded_load_epsilon = vc.bounded_load_epsilon.value_or(0.0);
    KeepOrAssignIdentity(pv, v, state->next_id_, vip_slots);  // bounded by kMaxVips above

    const auto prev_by_name = ByName(pv);
    // Health decides each backend's table weight (see BuildLbState).
    // Checks run only over a kernel interface the daemon started with.
    const bool checked = vc.health_check.has_value() && vc.health_check->type != HealthCheckType::kNone &&
                         options.kernel_interface;
    absl::flat_hash_map<std::string_view, BackendHealthInput> health;
    size_t newcomers = 0;
    for (const BackendConfig& bc : vc.backends) {
      BackendHealthInput h{BackendHealth::kUnchecked, bc.weight, false, std::nullopt};
      if (checked) {
        std::optional<BackendHealthInput> known =
            options.health ? options.health(vc.name, bc.name) : std::nullopt;
        // A backend that moved to another address is a new one too: what was
        // known of it was about the old address.
        const BackendState* was = Find(prev_by_name, bc.name);
        const bool newcomer = pv != nullptr && (was == nullptr || !(was->target.backend == bc.address));
        if (known.has_value() && !(newcomer && was != nullptr)) {
          h = *known;
          if (h.for_configured_weight && *h.for_configured_weight != bc.weight) {
            // Re-weighted by this reload: the same share of the new weight
            // (from 0, a share of nothing: all of it, if it is not down).
            const uint32_t old_weight = *h.for_configured_weight;
            const uint64_t scaled =
                old_weight == 0 ? (h.health == BackendHealth::kDown ? 0 : bc.weight)
                                : (uint64_t{h.effective_weight} * bc.weight + old_weight - 1) / old_weight;
            h.effective_weight = static_cast<uint32_t>(std::min<uint64_t>(scaled, kMaxEffectiveWeight));
          }
        } else if (newcomer) {
          h = {BackendHealth::kDown, 0, false, std::nullopt};
          ++newcomers;
        } else {
          h = {BackendHealth::kUp, bc.weight, false, std::nullopt};
        }
      }
      health[bc.name] = h;
      v.total_weight += h.effective_weight;
    }
    if (checked && v.total_weight == 0 && newcomers == vc.backends.size() && newcomers > 0 &&
        vc.all_down == AllDownPolicy::kKeepLast) {
      // A reload replaced every backend: nothing is known to be down, and
      // failing open (keep_last) serves them as a new VIP's until checked.
      for (const BackendConfig& bc : vc.backends) {
        health[bc.name] = {BackendHealth::kUp, bc.weight, false, std::nullopt};
        v.total_weight += bc.weight;
      }
    }

    // The table is a function of its TableInput alone, built from nothing
    // else, so reusing it on an equal input is exactly what a fresh start
    // would build.
    TableInput input = TableInput::Of(vc);
    for (auto& [name, weight] : input.backends) weight = health.at(name).effective_weight;
    const TableInput* previous_input =
        pv != nullptr ? &previous->table_inputs_[pv - previous->vips().data()] : nullptr;
    const bool reuse = previous_input != nullptr && *previous_input == input;
    if (reuse) {
      v.table = pv->table;
      ++change.tables_reused;
    } else {
      absl::StatusOr<LookupTable> table = BuildVipTable(input.ToVipConfig());
      if (!table.ok()) {
        return absl::Status(table.status().code(),
                            absl::StrFormat("%s:%d: VIP %s: cannot build its table: %s; the new "
                                            "config was not applied",
                                            where, vc.line, vc.name,
                                            std::string(table.status().message())));
      }
      v.table = std::make_shared<const LookupTable>(*std::move(table));
      ++change.tables_built;
    }

    // Backends in the table's index order.
    absl::flat_hash_map<std::string, const BackendConfig*> by_name;
    for (const BackendConfig& bc : vc.backends) by_name[bc.name] = &bc;
    std::vector<std::string> order = v.table->backend_names();
    if (order.size() != vc.backends.size()) {  // a table built from nothing
      order.clear();
      for (const BackendConfig& bc : vc.backends) order.push_back(bc.name);
    }
    for (const std::string& name : order) {
      const BackendConfig& bc = *by_name.at(name);
      const BackendState* pb = Find(prev_by_name, name);
      BackendState b;
      b.name = name;
      const BackendHealthInput& h = health.at(name);
      b.weight = h.effective_weight;
      b.configured_weight = bc.weight;
      b.health = h.health;
      // Only a down backend's flows move: a draining one (weight 0) keeps them.
      b.flows_move = h.flows_move && h.health == BackendHealth::kDown && h.effective_weight == 0;
      b.target.forwarding = vc.forwarding;
      b.target.backend = bc.address;
      KeepOrAssignIdentity(pb, b, state->next_id_, backend_slots);  // bounded by kMaxBackendsTotal above
      v.backends.push_back(std::move(b));
    }
    for (size_t i = 0; i < v.backends.size(); ++i) {
      v.id_index.emplace_back(v.backends[i].id, static_cast<uint16_t>(i));
    }
    std::sort(v.id_index.begin(), v.id_index.end());

    if (pv == nullptr) {
      change.vips_added.push_back(v.name);
    } else {
      LbStateChange::VipChange c;
      c.name = v.name;
      for (const BackendState& b : v.backends) {
        const BackendState* pb = Find(prev_by_name, b.name);
        if (pb == nullptr) {
          c.backends_added.push_back(b.name);
        } else if (pb->weight != b.weight) {
          c.backends_reweighted.push_back(b.name);
        }
      }
      for (const BackendState& pb : pv->backends) {
        if (by_name.find(pb.name) == by_name.end()) c.backends_removed.push_back(pb.name);
      }
      bool fields_changed = pv->address != v.address || pv->protocol != v.protocol ||
                            pv->port != v.port || pv->forwarding != v.forwarding ||
                            pv->bounded_load_epsilon != v.bounded_load_epsilon;
      for (const BackendState& b : v.backends) {
        const BackendState* pb = Find(prev_by_name, b.name);
        if (pb != nullptr && !(pb->target.backend == b.target.backend)) fields_changed = true;
      }
      if (!reuse || fields_changed) {
        c.old_fingerprint = pv->fingerprint();
        c.new_fingerprint = v.fingerprint();
        if (!reuse) {
          std::vector<BackendSpec> old_specs = SpecsOf(*pv);
          std::vector<BackendSpec> new_specs = SpecsOf(v);
          c.moved = DiffTables(*pv->table, old_specs, *v.table, new_specs).moved;
        }
        change.vips_changed.push_back(std::move(c));
      }
    }
    state->vips_.push_back(std::move(v));
    state->table_inputs_.push_back(std::move(input));
  }
  if (previous != nullptr) {
    absl::flat_hash_map<std::string_view, bool> configured;
    for (const VipConfig& vc : config.vips) configured[vc.name] = true;
    for (const VipState& pv : previous->vips()) {
      if (!configured.contains(pv.name)) change.vips_removed.push_back(pv.name);
    }
  }

  state->matcher_ = VipMatcher(VipSpecsOf(config.vips));
  state->local_.v4 = config.lb.ipv4;
  state->local_.v6 = config.lb.ipv6;
  state->local_.kernel = options.kernel_interface;
  if (options.kernel_interface && config.lb.ipv6) state->local_.v6_link_local = LinkLocalOf(options.port_mac);
  state->encap_ = EncapConfig::FromLbConfig(config.lb, options.port_mac);
  state->ResolveNeighbors(options.resolve);  // after encap_: the templates take it
  return std::unique_ptr<const LbState>(std::move(state));
}

}  // namespace maglb
