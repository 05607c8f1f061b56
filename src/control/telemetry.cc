#include "control/telemetry.h"

#include <rte_cycles.h>
#include <rte_telemetry.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <iterator>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "control/metrics_view.h"
#include "control/telemetry_text.h"
#include "control/reload_timing.h"
#include "maglb/health.h"
#include "maglb/latency_histogram.h"
#include "maglb/metrics.h"

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
// fit is left out without a word (a whole array at once). A /maglb/vips page
// keeps its VIP arrays within kVipListBudget, leaving the rest for the other
// fields and the keys; a /maglb/vip page counts its fields as it adds them
// (ReplyDict) and gives its backend rows what is left, less kReplySlack for
// the reply's wrapper ({"/maglb/vip": ...}).
constexpr size_t kReplyBytes = 16 * 1024;
constexpr size_t kVipListBudget = kReplyBytes - 2048;
constexpr size_t kReplySlack = 256;

// Every text goes through TelemetryText (telemetry_text.h): DPDK mangles
// bytes above 0x7f and cuts long strings anywhere.
void AddString(rte_tel_data* d, const char* name, std::string_view s) {
  rte_tel_data_add_dict_string(d, name, TelemetryText(s).c_str());
}

// A reply's dict, with the bytes its entries take so far.
class ReplyDict {
 public:
  explicit ReplyDict(rte_tel_data* d) : d_(d) {}
  size_t used() const { return used_; }
  void Str(const char* key, std::string_view value) {
    const std::string text = TelemetryText(value);
    used_ += std::strlen(key) + 3 + TelemetryStringCost(text);  // "key": and the value
    rte_tel_data_add_dict_string(d_, key, text.c_str());
  }
  void U64(const char* key, uint64_t value) {
    used_ += std::strlen(key) + 3 + TelemetryNumberCost(value);
    rte_tel_data_add_dict_u64(d_, key, value);
  }
  /// What an array's key and brackets take (its entries are counted by the caller).
  static size_t ArrayCost(std::string_view key) { return key.size() + 3 + 3; }

 private:
  rte_tel_data* d_;
  size_t used_ = 2;  // {}
};

// Labels whose values /maglb/stats shows; VIP and backend metrics are /maglb/vip's.
bool InStats(const MetricInfo& m) {
  return m.labels.kind != MetricLabels::kVip && m.labels.kind != MetricLabels::kVipBackend;
}

int CmdStats(const char*, const char*, rte_tel_data* d) {
  ControllerRef ref;  // shutdown waits for it
  Controller* controller = ref.get();
  if (controller == nullptr) return -1;
  rte_tel_data_start_dict(d);
  controller->WithView([&](const LbState& state, const CounterTotals& t, const ControlStats& cs,
                             const ControllerOptions& opt) {
    const MetricsView view(state, t, cs, opt, NowNs());
    for (const MetricInfo& m : Metrics()) {
      if (!InStats(m)) continue;
      MetricKey k;
      switch (m.labels.kind) {
        case MetricLabels::kNone:
          rte_tel_data_add_dict_u64(d, std::string(m.name).c_str(), view.Read(m.id));
          break;
        case MetricLabels::kReason:
          for (k.reason = 0; k.reason < m.reasons().size(); ++k.reason) {
            rte_tel_data_add_dict_u64(d, ReasonKey(m, m.reasons()[k.reason]).c_str(),
                                      view.Read(m.id, k));
          }
          break;
        case MetricLabels::kWorker: {
          rte_tel_data* per_worker = rte_tel_data_alloc();
          rte_tel_data_start_array(per_worker, RTE_TEL_U64_VAL);
          for (k.worker = 0; k.worker < view.worker_count(); ++k.worker) {
            rte_tel_data_add_array_u64(per_worker, view.Read(m.id, k));
          }
          rte_tel_data_add_dict_u64(d, std::string(m.name).c_str(), view.Sum(m.id));
          rte_tel_data_add_dict_container(d, PerWorkerKey(m).c_str(), per_worker, 0);
          break;
        }
        case MetricLabels::kVip:
        case MetricLabels::kVipBackend:
          break;
      }
    }
    // Text, not metrics.
    AddString(d, "last_refusal", cs.last_refusal);
    auto describe = [](const PortInfo& p) {
      return absl::StrFormat("%u %s (%s) %s, %u queues, %s", p.port_id, p.name, p.driver, p.mac.ToString(),
                             p.num_queues, p.distribution);
    };
    AddString(d, "port", describe(opt.port));
    if (opt.backend_port) AddString(d, "backend_port", describe(*opt.backend_port));
    // The NIC offloads each port uses (dataplane/offloads.h), "0: none" or
    // "0: rx_ipv4_cksum, 1: rx_ipv4_cksum tx_ipv4_cksum".
    std::string offloads = absl::StrCat(opt.port.port_id, ": ", OffloadNames(opt.port.offloads));
    if (opt.backend_port) {
      absl::StrAppend(&offloads, ", ", opt.backend_port->port_id, ": ", OffloadNames(opt.backend_port->offloads));
    }
    AddString(d, "offloads", offloads);
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
      const size_t cost = TelemetryStringCost(v.name) + TelemetryStringCost(Hex(v.fingerprint()));
      if (count > 0 && used + cost > kVipListBudget) break;
      used += cost;
      ++count;
      rte_tel_data_add_array_string(names, TelemetryText(v.name).c_str());
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
  controller->WithView([&](const LbState& state, const CounterTotals& t, const ControlStats& cs,
                             const ControllerOptions& opt) {
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
      rc = 0;
      ReplyDict dict(d);
      dict.Str("name", v.name);
      dict.Str("address", v.address.ToString());
      dict.Str("protocol", ToString(v.protocol));
      dict.U64("port", v.port);
      dict.Str("forwarding", ToString(v.forwarding));
      dict.Str("algorithm", ToString(v.algorithm));
      dict.U64("table_size", v.table->size());
      dict.Str("fingerprint", Hex(v.fingerprint()));
      dict.U64("generation", state.generation());
      dict.U64("backend_total", v.backends.size());
      dict.U64("backend_offset", offset);
      const MetricsView view(state, t, cs, opt, NowNs());
      MetricKey k;
      k.vip = i;
      std::vector<const MetricInfo*> backend_metrics;
      for (const MetricInfo& m : Metrics()) {
        if (m.labels.kind == MetricLabels::kVip) {
          dict.U64(std::string(VipKey(m)).c_str(), view.Read(m.id, k));
        } else if (m.labels.kind == MetricLabels::kVipBackend) {
          backend_metrics.push_back(&m);
        }
      }
      // Per backend, parallel arrays: its texts (name, address, health and
      // what its check says), then one array per backend metric.
      constexpr auto& text_keys = kBackendTextKeys;
      constexpr size_t kTexts = std::size(text_keys);
      size_t arrays_cost = 0;
      std::vector<rte_tel_data*> texts, numbers;
      for (std::string_view key : text_keys) {
        texts.push_back(rte_tel_data_alloc());
        rte_tel_data_start_array(texts.back(), RTE_TEL_STRING_VAL);
        arrays_cost += ReplyDict::ArrayCost(key);
      }
      for (const MetricInfo* m : backend_metrics) {
        numbers.push_back(rte_tel_data_alloc());
        rte_tel_data_start_array(numbers.back(), RTE_TEL_U64_VAL);
        arrays_cost += ReplyDict::ArrayCost(m->name);
      }
      // One page of backends, from `offset`: as many as fit DPDK's array
      // limit and, by their printed length (texts included, escapes
      // counted), what the reply has left (beyond either DPDK silently drops
      // entries or whole arrays). Every text is at most kMaxTelemetryText,
      // so one backend always fits a page.
      const size_t fixed = dict.used() + arrays_cost + kReplySlack;
      const size_t budget = fixed < kReplyBytes ? kReplyBytes - fixed : 0;
      size_t used = 0, count = 0;
      std::array<std::string, kTexts> row_texts;
      std::vector<uint64_t> values(backend_metrics.size());
      for (k.backend = offset; k.backend < v.backends.size() && count < RTE_TEL_MAX_ARRAY_ENTRIES;
           ++k.backend) {
        const BackendState& bs = v.backends[k.backend];
        const BackendHealthStatus& health = view.HealthStatus(k);
        // In kBackendTextKeys' order.
        row_texts = {TelemetryText(bs.name),
                     TelemetryText(bs.target.backend.ToString()),
                     TelemetryText(HealthName(view.Health(k))),
                     TelemetryText(health.reason),
                     TelemetryText(health.check),
                     TelemetryText(health.last_probe)};
        size_t cost = 0;
        for (const std::string& text : row_texts) cost += TelemetryStringCost(text);
        for (size_t m = 0; m < backend_metrics.size(); ++m) {
          values[m] = view.Read(backend_metrics[m]->id, k);
          cost += TelemetryNumberCost(values[m]);
        }
        if (count > 0 && used + cost > budget) break;
        used += cost;
        ++count;
        for (size_t a = 0; a < kTexts; ++a) rte_tel_data_add_array_string(texts[a], row_texts[a].c_str());
        for (size_t m = 0; m < backend_metrics.size(); ++m) {
          rte_tel_data_add_array_u64(numbers[m], values[m]);
        }
      }
      for (size_t a = 0; a < kTexts; ++a) {
        rte_tel_data_add_dict_container(d, std::string(text_keys[a]).c_str(), texts[a], 0);
      }
      for (size_t m = 0; m < backend_metrics.size(); ++m) {
        rte_tel_data_add_dict_container(d, std::string(backend_metrics[m]->name).c_str(),
                                        numbers[m], 0);
      }
      break;
    }
  });
  return rc;
}

// Route announcement (announce_task.h): the state, and per VIP address
// whether it is announced and why, as parallel arrays within the reply's size.
int CmdAnnounce(const char*, const char*, rte_tel_data* d) {
  ControllerRef ref;  // shutdown waits for it
  Controller* controller = ref.get();
  if (controller == nullptr) return -1;
  rte_tel_data_start_dict(d);
  controller->WithView([&](const LbState&, const CounterTotals&, const ControlStats& cs,
                             const ControllerOptions&) {
    const AnnounceStatus& a = cs.announce;
    ReplyDict dict(d);
    dict.Str("state", a.state);
    dict.U64("table", a.table);
    dict.U64("routes", a.routes());
    dict.U64("route_changes", a.route_changes);
    dict.U64("route_errors", a.route_errors);
    dict.U64("drain_until_unix_ms", a.state == "draining" ? a.drain_until_unix_ms : 0);
    dict.U64("prefix_total", a.prefixes.size());
    rte_tel_data* prefixes = rte_tel_data_alloc();
    rte_tel_data* announced = rte_tel_data_alloc();
    rte_tel_data* reasons = rte_tel_data_alloc();
    rte_tel_data_start_array(prefixes, RTE_TEL_STRING_VAL);
    rte_tel_data_start_array(announced, RTE_TEL_U64_VAL);
    rte_tel_data_start_array(reasons, RTE_TEL_STRING_VAL);
    const size_t fixed = dict.used() + ReplyDict::ArrayCost("prefixes") + ReplyDict::ArrayCost("announced") +
                         ReplyDict::ArrayCost("reasons") + kReplySlack;
    const size_t budget = fixed < kReplyBytes ? kReplyBytes - fixed : 0;
    size_t used = 0, count = 0;
    for (const AnnounceStatus::Prefix& p : a.prefixes) {
      const std::string prefix = TelemetryText(p.prefix), reason = TelemetryText(p.reason);
      const size_t cost = TelemetryStringCost(prefix) + TelemetryStringCost(reason) + 2;
      if (count == RTE_TEL_MAX_ARRAY_ENTRIES || used + cost > budget) break;
      used += cost;
      ++count;
      rte_tel_data_add_array_string(prefixes, prefix.c_str());
      rte_tel_data_add_array_u64(announced, p.announced);
      rte_tel_data_add_array_string(reasons, reason.c_str());
    }
    rte_tel_data_add_dict_container(d, "prefixes", prefixes, 0);
    rte_tel_data_add_dict_container(d, "announced", announced, 0);
    rte_tel_data_add_dict_container(d, "reasons", reasons, 0);
  });
  return 0;
}

// Per worker, the receive-to-transmit histogram's counts since start
// (LoopCounters::latency): the bounds, then per worker (a dict keyed by its
// index: DPDK 22.11 nests no array of arrays in a dict) its counts, one more
// than the bounds (the last above them), and the sum of the times. As many
// workers from FIRST as fit the reply: all of them up to 16 unless most of
// 170 buckets hold counts of 10 digits or more; worker_total and
// worker_offset say which came.
int CmdLatency(const char*, const char* params, rte_tel_data* d) {
  ControllerRef ref;  // shutdown waits for it
  Controller* controller = ref.get();
  size_t first = 0;
  if (controller == nullptr || !ParseOffset(params, &first)) return -1;
  rte_tel_data_start_dict(d);
  controller->WithView([&](const LbState&, const CounterTotals&, const ControlStats&,
                             const ControllerOptions& opt) {
    ReplyDict dict(d);
    dict.U64("tsc_hz", rte_get_tsc_hz());
    dict.U64("worker_total", opt.loop_counters.size());
    dict.U64("worker_offset", first);
    rte_tel_data* bounds = rte_tel_data_alloc();
    rte_tel_data_start_array(bounds, RTE_TEL_U64_VAL);
    size_t used = dict.used() + ReplyDict::ArrayCost("bucket_upper_ns") + ReplyDict::ArrayCost("per_worker") +
                  ReplyDict::ArrayCost("per_worker_sum_ns") + kReplySlack;
    for (uint64_t b : LatencyBucketUpperBoundsNs()) {
      rte_tel_data_add_array_u64(bounds, b);
      used += TelemetryNumberCost(b);
    }
    rte_tel_data_add_dict_container(d, "bucket_upper_ns", bounds, 0);
    rte_tel_data* per_worker = rte_tel_data_alloc();
    rte_tel_data* sums = rte_tel_data_alloc();
    rte_tel_data_start_dict(per_worker);
    rte_tel_data_start_dict(sums);
    for (size_t w = first, count = 0; w < opt.loop_counters.size() && count < RTE_TEL_MAX_DICT_ENTRIES;
         ++w, ++count) {
      const LatencyHistogram& h = opt.loop_counters[w]->latency;
      const std::array<uint64_t, kLatencyBuckets> counts = h.Counts();
      const std::string key = absl::StrCat(w);
      // "key":[...], in both dicts.
      size_t cost = 2 * (key.size() + 3) + 2 + TelemetryNumberCost(h.sum_ns());
      for (uint64_t c : counts) cost += TelemetryNumberCost(c);
      if (count > 0 && used + cost > kReplyBytes) break;
      used += cost;
      rte_tel_data* array = rte_tel_data_alloc();
      rte_tel_data_start_array(array, RTE_TEL_U64_VAL);
      for (uint64_t c : counts) rte_tel_data_add_array_u64(array, c);
      rte_tel_data_add_dict_container(per_worker, key.c_str(), array, 0);
      rte_tel_data_add_dict_u64(sums, key.c_str(), h.sum_ns());
    }
    rte_tel_data_add_dict_container(d, "per_worker", per_worker, 0);
    rte_tel_data_add_dict_container(d, "per_worker_sum_ns", sums, 0);
  });
  return 0;
}

// The last kRecentReloads reloads, oldest first, as parallel arrays (DPDK
// 22.11 nests no array of dicts in a dict), and the totals of those that
// reached the workers: from the trigger (file change or SIGHUP) to every
// worker past the new snapshot. At most ~6.2 KB: always one reply.
int CmdReloads(const char*, const char*, rte_tel_data* d) {
  ControllerRef ref;  // shutdown waits for it
  Controller* controller = ref.get();
  if (controller == nullptr) return -1;
  rte_tel_data_start_dict(d);
  controller->WithView([&](const LbState&, const CounterTotals&, const ControlStats& cs,
                             const ControllerOptions&) {
    const ReloadTimings& t = cs.reload_timings;
    rte_tel_data* recent = rte_tel_data_alloc();
    rte_tel_data_start_dict(recent);
    rte_tel_data* generation = rte_tel_data_alloc();
    rte_tel_data* outcome = rte_tel_data_alloc();
    rte_tel_data* event = rte_tel_data_alloc();
    rte_tel_data* published = rte_tel_data_alloc();
    rte_tel_data* workers = rte_tel_data_alloc();
    rte_tel_data_start_array(generation, RTE_TEL_U64_VAL);
    rte_tel_data_start_array(outcome, RTE_TEL_STRING_VAL);
    rte_tel_data_start_array(event, RTE_TEL_U64_VAL);
    rte_tel_data_start_array(published, RTE_TEL_U64_VAL);
    rte_tel_data_start_array(workers, RTE_TEL_U64_VAL);
    for (const ReloadTiming& r : t.Recent()) {
      rte_tel_data_add_array_u64(generation, r.generation);
      rte_tel_data_add_array_string(outcome, std::string(ReloadOutcomeName(r.outcome)).c_str());
      rte_tel_data_add_array_u64(event, r.event_ns);
      rte_tel_data_add_array_u64(published, r.published_ns);
      rte_tel_data_add_array_u64(workers, r.workers_ns);
    }
    rte_tel_data_add_dict_container(recent, "generation", generation, 0);
    rte_tel_data_add_dict_container(recent, "outcome", outcome, 0);
    rte_tel_data_add_dict_container(recent, "event_ns", event, 0);
    rte_tel_data_add_dict_container(recent, "published_ns", published, 0);
    rte_tel_data_add_dict_container(recent, "workers_ns", workers, 0);
    rte_tel_data_add_dict_container(d, "recent", recent, 0);
    rte_tel_data_add_dict_u64(d, "applied", t.applied());
    rte_tel_data_add_dict_u64(d, "unchanged", t.unchanged());
    rte_tel_data_add_dict_u64(d, "refused", t.refused());
    rte_tel_data_add_dict_u64(d, "file_to_workers_ns_max", t.to_workers_max_ns());
    rte_tel_data_add_dict_u64(d, "file_to_workers_ns_sum", t.to_workers_sum_ns());
    rte_tel_data_add_dict_u64(d, "file_to_workers_count", t.to_workers_count());
  });
  return 0;
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
  rte_telemetry_register_cmd("/maglb/announce", CmdAnnounce,
                             "maglb route announcement: state, and per VIP address whether its route "
                             "is announced and why");
  rte_telemetry_register_cmd("/maglb/latency", CmdLatency,
                             "maglb receive-to-transmit time per frame: bucket bounds (ns), counts per "
                             "worker since start. Parameters: [first worker]");
  rte_telemetry_register_cmd("/maglb/reloads", CmdReloads,
                             "maglb reloads: the last 64 (outcome; CLOCK_MONOTONIC ns of trigger, swap, "
                             "workers past it) and totals");
}

}  // namespace maglb
