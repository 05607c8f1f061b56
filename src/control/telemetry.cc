#include "control/telemetry.h"

#include <rte_telemetry.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "absl/strings/str_format.h"

namespace maglb {

namespace {

// Telemetry callbacks take no user pointer; this is the one they read. Null
// once the daemon is shutting down (the commands then answer null).
std::atomic<Controller*> g_controller{nullptr};
// Callbacks between taking the pointer and their last use of it.
std::atomic<int> g_in_flight{0};

// A callback's hold on the controller. Counted before the pointer is read
// (both seq_cst), so UnregisterTelemetry either sees the count or the
// callback sees null.
class ControllerRef {
 public:
  ControllerRef() {
    g_in_flight.fetch_add(1);
    controller_ = g_controller.load();
  }
  ~ControllerRef() { g_in_flight.fetch_sub(1); }
  ControllerRef(const ControllerRef&) = delete;
  ControllerRef& operator=(const ControllerRef&) = delete;
  Controller* get() const { return controller_; }

 private:
  Controller* controller_;
};

std::string Hex(uint64_t v) { return absl::StrFormat("%016x", v); }

// DPDK's reply buffer is 16 KB (MAX_OUTPUT_LEN, not exported); what does not
// fit is left out without a word. A /maglb/vip page keeps its backend arrays
// (a /maglb/vips page its VIP arrays) within this, leaving the rest for the
// other fields and the keys.
constexpr size_t kVipBackendBudget = 16 * 1024 - 2048;

size_t Digits(uint64_t v) {
  size_t n = 1;
  while (v >= 10) v /= 10, ++n;
  return n;
}

void AddString(rte_tel_data* d, const char* name, const std::string& s) {
  // Telemetry strings are limited to RTE_TEL_MAX_STRING_LEN (with the NUL).
  rte_tel_data_add_dict_string(d, name, s.substr(0, RTE_TEL_MAX_STRING_LEN - 1).c_str());
}

int CmdStats(const char*, const char*, rte_tel_data* d) {
  ControllerRef ref;  // shutdown waits for it
  Controller* controller = ref.get();
  if (controller == nullptr) return -1;
  rte_tel_data_start_dict(d);
  controller->WithView([&](const LbState& state, const CounterTotals& t, const ControlStats& cs,
                             const ControllerOptions& opt) {
    rte_tel_data_add_dict_u64(d, "generation", state.generation());
    rte_tel_data_add_dict_u64(d, "uptime_s", (NowNs() - cs.started_ns) / 1'000'000'000u);
    rte_tel_data_add_dict_u64(d, "workers", opt.workers.size());
    rte_tel_data_add_dict_u64(d, "rx_packets", t.rx_packets);
    rte_tel_data_add_dict_u64(d, "rx_bytes", t.rx_bytes);
    rte_tel_data_add_dict_u64(d, "tx_packets", t.tx_packets);
    rte_tel_data_add_dict_u64(d, "tx_bytes", t.tx_bytes);
    uint64_t dropped = 0;
    for (uint64_t v : t.drops) dropped += v;
    uint64_t tx_full = 0, multiseg = 0, control_full = 0, extra_alloc_fail = 0, no_snapshot = 0;
    uint64_t steer_full = 0;
    for (const LoopCounters* lc : opt.loop_counters) {
      tx_full += lc->tx_full.value();
      multiseg += lc->rx_multiseg.value();
      control_full += lc->control_full.value();
      extra_alloc_fail += lc->extra_alloc_fail.value();
      no_snapshot += lc->no_snapshot.value();
      steer_full += lc->steer_full.value();
    }
    // Every frame lost anywhere, by the pipeline or by the loop around it.
    rte_tel_data_add_dict_u64(d, "dropped", dropped + multiseg + no_snapshot + tx_full + control_full +
                                                extra_alloc_fail + steer_full);
    for (size_t i = 0; i < kNumDropReasons; ++i) {
      std::string name = "drop_" + std::string(DropReasonName(static_cast<DropReason>(i)));
      rte_tel_data_add_dict_u64(d, name.c_str(), t.drops[i]);
    }
    rte_tel_data_add_dict_u64(d, "drop_rx_multiseg", multiseg);
    rte_tel_data_add_dict_u64(d, "drop_no_snapshot", no_snapshot);
    rte_tel_data_add_dict_u64(d, "drop_steer_ring_full", steer_full);  // ICMP errors for a busy worker
    rte_tel_data_add_dict_u64(d, "tx_full", tx_full);
    rte_tel_data_add_dict_u64(d, "control_ring_full", control_full);
    rte_tel_data_add_dict_u64(d, "extra_alloc_fail", extra_alloc_fail);
    for (size_t i = 0; i < kNumLocalCounters; ++i) {
      rte_tel_data_add_dict_u64(d, std::string(LocalCounterName(static_cast<LocalCounter>(i))).c_str(),
                                t.local[i]);
    }
    rte_tel_data_add_dict_u64(d, "conntrack_untracked", t.untracked);
    rte_tel_data_add_dict_u64(d, "conntrack_evictions", t.evictions);
    rte_tel_data_add_dict_u64(d, "conntrack_repinned", t.repinned);
    uint64_t occupied = 0;
    rte_tel_data* per_worker = rte_tel_data_alloc();
    rte_tel_data_start_array(per_worker, RTE_TEL_U64_VAL);
    for (uint64_t v : t.conntrack_occupied) {
      occupied += v;
      rte_tel_data_add_array_u64(per_worker, v);
    }
    rte_tel_data_add_dict_u64(d, "conntrack_occupied", occupied);
    rte_tel_data_add_dict_u64(d, "conntrack_capacity_per_worker",
                              opt.workers.empty() ? 0 : opt.workers[0]->conntrack().capacity());
    rte_tel_data_add_dict_container(d, "conntrack_occupied_per_worker", per_worker, 0);
    rte_tel_data_add_dict_u64(d, "reloads_ok", cs.reloads_ok);
    rte_tel_data_add_dict_u64(d, "reloads_refused", cs.reloads_refused);
    AddString(d, "last_refusal", cs.last_refusal);
    rte_tel_data_add_dict_u64(d, "neighbor_updates", cs.neighbor_updates);
    for (size_t i = 0; i < kNumNeighborIgnores; ++i) {
      std::string name = "neighbor_ignored_" +
                         std::string(NeighborIgnoreName(static_cast<NeighborIgnore>(i)));
      rte_tel_data_add_dict_u64(d, name.c_str(), cs.neighbor_ignored[i]);
    }
    rte_tel_data_add_dict_u64(d, "arp_requests_sent", cs.arp_requests_sent);
    rte_tel_data_add_dict_u64(d, "nd_requests_sent", cs.nd_requests_sent);
    AddString(d, "port", absl::StrFormat("%u %s (%s) %s, %u queues, %s", opt.port.port_id,
                                         opt.port.name, opt.port.driver, opt.port.mac.ToString(),
                                         opt.port.num_queues, opt.port.distribution));
    AddString(d, "config", opt.config_path);
  });
  return 0;
}

// "", "OFFSET": the first VIP of a page. False on anything else.
bool ParseOffset(const char* params, size_t* offset) {
  *offset = 0;
  if (params == nullptr || *params == '\0') return true;
  std::string p = params;
  if (p.size() > 9 || p.find_first_not_of("0123456789") != std::string::npos) return false;
  *offset = std::stoul(p);
  return true;
}

// One page of VIP names and fingerprints from OFFSET, with vip_total and
// vip_offset: within DPDK's array limit and, by printed length, its reply
// limit (beyond either DPDK silently drops entries), as /maglb/vip pages
// backends.
int CmdVips(const char*, const char* params, rte_tel_data* d) {
  ControllerRef ref;  // shutdown waits for it
  Controller* controller = ref.get();
  size_t offset = 0;
  if (controller == nullptr || !ParseOffset(params, &offset)) return -1;
  rte_tel_data_start_dict(d);
  controller->WithView([&](const LbState& state, const CounterTotals&, const ControlStats&,
                             const ControllerOptions&) {
    rte_tel_data_add_dict_u64(d, "generation", state.generation());
    rte_tel_data* names = rte_tel_data_alloc();
    rte_tel_data* fps = rte_tel_data_alloc();
    rte_tel_data_start_array(names, RTE_TEL_STRING_VAL);
    rte_tel_data_start_array(fps, RTE_TEL_STRING_VAL);
    size_t used = 0, count = 0;
    for (size_t i = offset; i < state.vips().size() && count < RTE_TEL_MAX_ARRAY_ENTRIES; ++i) {
      const VipState& v = state.vips()[i];
      const size_t cost = v.name.size() + 3 + 16 + 3;
      if (count > 0 && used + cost > kVipBackendBudget) break;
      used += cost;
      ++count;
      rte_tel_data_add_array_string(names, v.name.c_str());
      rte_tel_data_add_array_string(fps, Hex(v.fingerprint()).c_str());
    }
    rte_tel_data_add_dict_u64(d, "vip_total", state.vips().size());
    rte_tel_data_add_dict_u64(d, "vip_offset", offset);
    rte_tel_data_add_dict_container(d, "names", names, 0);
    rte_tel_data_add_dict_container(d, "fingerprints", fps, 0);
  });
  return 0;
}

int CmdVip(const char*, const char* params, rte_tel_data* d) {
  ControllerRef ref;  // shutdown waits for it
  Controller* controller = ref.get();
  if (params == nullptr || *params == '\0' || controller == nullptr) return -1;
  std::string wanted = params;
  size_t offset = 0;
  int rc = -1;
  rte_tel_data_start_dict(d);
  controller->WithView([&](const LbState& state, const CounterTotals& t, const ControlStats&,
                             const ControllerOptions&) {
    // "NAME" or "NAME,OFFSET"; a name that itself ends in ",digits" is
    // matched whole first.
    bool whole = false;
    for (const VipState& v : state.vips()) whole |= v.name == wanted;
    if (size_t comma = wanted.rfind(','); !whole && comma != std::string::npos &&
                                          comma + 1 < wanted.size() &&
                                          wanted.find_first_not_of("0123456789", comma + 1) ==
                                              std::string::npos &&
                                          wanted.size() - comma - 1 <= 9) {
      offset = std::stoul(wanted.substr(comma + 1));
      wanted.resize(comma);
    }
    for (size_t i = 0; i < state.vips().size(); ++i) {
      const VipState& v = state.vips()[i];
      if (v.name != wanted) continue;
      const CounterTotals::Vip& c = t.vips[i];
      rc = 0;
      AddString(d, "name", v.name);
      AddString(d, "address", v.address.ToString());
      AddString(d, "protocol", std::string(ToString(v.protocol)));
      rte_tel_data_add_dict_u64(d, "port", v.port);
      AddString(d, "forwarding", std::string(ToString(v.forwarding)));
      AddString(d, "algorithm", std::string(ToString(v.algorithm)));
      rte_tel_data_add_dict_u64(d, "table_size", v.table->size());
      AddString(d, "fingerprint", Hex(v.fingerprint()));
      rte_tel_data_add_dict_u64(d, "generation", state.generation());
      rte_tel_data_add_dict_u64(d, "packets", c.counters.packets);
      rte_tel_data_add_dict_u64(d, "bytes", c.counters.bytes);
      rte_tel_data_add_dict_u64(d, "new_flows", c.counters.new_flows);
      rte_tel_data_add_dict_u64(d, "bounded_load_passed", c.bounded_load_passed);
      rte_tel_data_add_dict_u64(d, "bounded_load_over", c.bounded_load_over);
      std::vector<uint32_t> entries = v.table->empty() ? std::vector<uint32_t>(v.backends.size(), 0)
                                                       : v.table->EntryCounts();
      rte_tel_data* names = rte_tel_data_alloc();
      rte_tel_data* addrs = rte_tel_data_alloc();
      rte_tel_data* weights = rte_tel_data_alloc();
      rte_tel_data* slots = rte_tel_data_alloc();
      rte_tel_data* pkts = rte_tel_data_alloc();
      rte_tel_data* bytes = rte_tel_data_alloc();
      rte_tel_data* flows = rte_tel_data_alloc();
      rte_tel_data* nh = rte_tel_data_alloc();
      rte_tel_data_start_array(names, RTE_TEL_STRING_VAL);
      rte_tel_data_start_array(addrs, RTE_TEL_STRING_VAL);
      for (rte_tel_data* a : {weights, slots, pkts, bytes, flows, nh}) {
        rte_tel_data_start_array(a, RTE_TEL_U64_VAL);
      }
      // One page of backends, from `offset`: as many as fit DPDK's array
      // limit and, by their printed length, its reply limit (beyond either
      // DPDK silently drops entries or whole arrays).
      size_t used = 0, count = 0;
      for (size_t b = offset; b < v.backends.size() && count < RTE_TEL_MAX_ARRAY_ENTRIES; ++b) {
        const BackendState& bs = v.backends[b];
        const CounterTotals::Flow& f = c.backends[b].counters;
        const std::string address = bs.target.backend.ToString();
        const uint64_t slot = b < entries.size() ? entries[b] : 0;
        size_t cost = bs.name.size() + 3 + address.size() + 3;
        for (uint64_t x : {uint64_t{bs.weight}, slot, f.packets, f.bytes, f.new_flows, uint64_t{1}}) {
          cost += Digits(x) + 2;
        }
        if (count > 0 && used + cost > kVipBackendBudget) break;
        used += cost;
        ++count;
        rte_tel_data_add_array_string(names, bs.name.c_str());
        rte_tel_data_add_array_string(addrs, address.c_str());
        rte_tel_data_add_array_u64(weights, bs.weight);
        rte_tel_data_add_array_u64(slots, slot);
        rte_tel_data_add_array_u64(pkts, f.packets);
        rte_tel_data_add_array_u64(bytes, f.bytes);
        rte_tel_data_add_array_u64(flows, f.new_flows);
        rte_tel_data_add_array_u64(nh, bs.next_hop_known ? 1 : 0);
      }
      rte_tel_data_add_dict_u64(d, "backend_total", v.backends.size());
      rte_tel_data_add_dict_u64(d, "backend_offset", offset);
      rte_tel_data_add_dict_container(d, "backend_names", names, 0);
      rte_tel_data_add_dict_container(d, "backend_addresses", addrs, 0);
      rte_tel_data_add_dict_container(d, "backend_weights", weights, 0);
      rte_tel_data_add_dict_container(d, "backend_table_entries", slots, 0);
      rte_tel_data_add_dict_container(d, "backend_packets", pkts, 0);
      rte_tel_data_add_dict_container(d, "backend_bytes", bytes, 0);
      rte_tel_data_add_dict_container(d, "backend_new_flows", flows, 0);
      rte_tel_data_add_dict_container(d, "backend_next_hop_resolved", nh, 0);
      break;
    }
  });
  return rc;
}

}  // namespace

void UnregisterTelemetry() {
  g_controller.store(nullptr);
  // A callback that took the pointer just before may still be reading the
  // controller's state; what it reads is freed once we return.
  while (g_in_flight.load() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void RegisterTelemetry(Controller* controller) {
  g_controller.store(controller);
  rte_telemetry_register_cmd("/maglb/stats", CmdStats,
                             "maglb totals: packets, drops by reason, conntrack, reloads");
  rte_telemetry_register_cmd("/maglb/vips", CmdVips,
                             "A page of maglb VIP names and table fingerprints (vip_offset, "
                             "vip_total), with the config generation. Parameters: [first VIP]");
  rte_telemetry_register_cmd("/maglb/vip", CmdVip,
                             "One maglb VIP and a page of its backends' counters (backend_offset, "
                             "backend_total). Parameters: VIP name[,first backend]");
}

}  // namespace maglb
