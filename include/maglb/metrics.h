// The one list of maglb's metrics: every counter and gauge the daemon
// exports, with its name, type, unit, labels and help text, and how the
// daemon reads it. The DPDK telemetry endpoints (control/telemetry.cc) and
// `maglbctl stats` (ctl/stats.cc) are rendered from it; another exporter
// must be too, never naming a metric again.
//
// Adding a metric is one line in MAGLB_FOREACH_METRIC below.
//
// Pure C++ (maglbctl links it): the READ column is an expression compiled
// only by the daemon (control/metrics_view.cc), over `v`, a MetricsView (the
// running state, counter totals, control stats and options under the
// controller's lock), and `k`, a MetricKey (which label values).
#ifndef MAGLB_METRICS_H_
#define MAGLB_METRICS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "maglb/neighbor_ignore.h"
#include "maglb/packet.h"
#include "maglb/pipeline.h"

namespace maglb {

enum class MetricType : uint8_t {
  kCounter,  ///< only grows (until the daemon restarts)
  kGauge,    ///< a level: may go up and down
};

/// Which labels a metric's values carry, and where telemetry shows them.
enum class MetricLabels : uint8_t {
  kNone,        ///< one value; /maglb/stats NAME
  kReason,      ///< one value per reason; /maglb/stats NAME_REASON
  kWorker,      ///< one value per worker; /maglb/stats NAME (the sum) and NAME_per_worker
  kVip,         ///< one value per VIP; /maglb/vip: NAME without its "vip_" prefix
  kVipBackend,  ///< one value per backend of a VIP; /maglb/vip: the array NAME
};

/// A metric's label set as its line in the list spells it.
struct MetricLabelSet {
  MetricLabels kind = MetricLabels::kNone;
  /// kReason: the reasons (label values), from a list such as DropReason's,
  /// or `one` alone. Entries of one family (same name) may each bring some.
  std::span<const std::string_view> reasons;
  std::string_view one;
};

inline constexpr MetricLabelSet kNoLabels{MetricLabels::kNone, {}, {}};
inline constexpr MetricLabelSet kByWorker{MetricLabels::kWorker, {}, {}};
inline constexpr MetricLabelSet kByVip{MetricLabels::kVip, {}, {}};
inline constexpr MetricLabelSet kByBackend{MetricLabels::kVipBackend, {}, {}};
constexpr MetricLabelSet Reasons(std::span<const std::string_view> values) {
  return {MetricLabels::kReason, values, {}};
}
constexpr MetricLabelSet Reason(std::string_view value) { return {MetricLabels::kReason, {}, value}; }

/// The label values of the existing reason lists (their X-macros).
inline constexpr std::string_view kDropReasonLabels[] = {
#define MAGLB_METRIC_DROP_LABEL(name, str) str,
    MAGLB_FOREACH_DROP_REASON(MAGLB_METRIC_DROP_LABEL)
#undef MAGLB_METRIC_DROP_LABEL
};
inline constexpr std::string_view kNeighborIgnoreLabels[] = {
#define MAGLB_METRIC_NEIGHBOR_LABEL(name, str, why) str,
    MAGLB_FOREACH_NEIGHBOR_IGNORE(MAGLB_METRIC_NEIGHBOR_LABEL)
#undef MAGLB_METRIC_NEIGHBOR_LABEL
};
inline constexpr std::string_view kLocalCounterLabels[] = {
#define MAGLB_METRIC_LOCAL_LABEL(name, str) str,
    MAGLB_FOREACH_LOCAL_COUNTER(MAGLB_METRIC_LOCAL_LABEL)
#undef MAGLB_METRIC_LOCAL_LABEL
};
/// A local counter's metric name is its counter name (pipeline.h).
constexpr std::string_view LocalName(LocalCounter c) { return kLocalCounterLabels[static_cast<size_t>(c)]; }

// X(ID, NAME, TYPE, UNIT, LABELS, HELP, READ): MetricId::ID; NAME, legal in
// Prometheus too; kCounter or kGauge; the unit of a value; kNoLabels,
// kByWorker, kByVip, kByBackend, Reasons(list) or Reason("one"); one sentence
// of help; READ, an expression over `v` and `k` (see above). The order is
// telemetry's. VIP metrics' names start with "vip_", backend metrics' with
// "backend_".
#define MAGLB_FOREACH_METRIC(X)                                                                   \
  X(kGeneration, "generation", kGauge, "generations", kNoLabels,                                  \
    "Generation of the running configuration: one more at each reload", v.state.generation())     \
  X(kUptime, "uptime_s", kGauge, "seconds", kNoLabels, "Seconds since maglb started",             \
    (v.now_ns - v.control.started_ns) / 1'000'000'000u)                                           \
  X(kWorkers, "workers", kGauge, "workers", kNoLabels, "Polling workers", v.options.workers.size()) \
  X(kRxPackets, "rx_packets", kCounter, "packets", kNoLabels, "Frames received", v.totals.rx_packets) \
  X(kRxBytes, "rx_bytes", kCounter, "bytes", kNoLabels, "Bytes received", v.totals.rx_bytes)      \
  X(kTxPackets, "tx_packets", kCounter, "packets", kNoLabels, "Frames sent", v.totals.tx_packets) \
  X(kTxBytes, "tx_bytes", kCounter, "bytes", kNoLabels, "Bytes sent", v.totals.tx_bytes)          \
  X(kDropped, "dropped", kCounter, "packets", kNoLabels,                                          \
    "Frames lost anywhere, by the pipeline or the loop around it: every drop reason, tx_full, "   \
    "control_ring_full, extra_alloc_fail and kernel_queue_full",                                  \
    v.Sum(MetricId::kDrop) + v.Read(MetricId::kTxFull) + v.Read(MetricId::kControlRingFull) +     \
        v.Read(MetricId::kExtraAllocFail) + v.Read(MetricId::kKernelQueueFull))                   \
  X(kDrop, "drop", kCounter, "packets", Reasons(kDropReasonLabels), "Frames dropped, by reason",  \
    v.totals.drops[k.reason])                                                                     \
  X(kDropRxMultiseg, "drop", kCounter, "packets", Reason("rx_multiseg"),                          \
    "Frames dropped, by reason", v.Loop(&LoopCounters::rx_multiseg))                              \
  X(kDropNoSnapshot, "drop", kCounter, "packets", Reason("no_snapshot"),                          \
    "Frames dropped, by reason", v.Loop(&LoopCounters::no_snapshot))                              \
  X(kDropSteerRingFull, "drop", kCounter, "packets", Reason("steer_ring_full"),                   \
    "Frames dropped, by reason", v.Loop(&LoopCounters::steer_full))                               \
  X(kTxFull, "tx_full", kCounter, "packets", kNoLabels, "Frames the TX queue refused (freed)",    \
    v.Loop(&LoopCounters::tx_full))                                                               \
  X(kControlRingFull, "control_ring_full", kCounter, "packets", kNoLabels,                        \
    "ARP replies and neighbour advertisements lost because the control ring was full",            \
    v.Loop(&LoopCounters::control_full))                                                          \
  X(kExtraAllocFail, "extra_alloc_fail", kCounter, "packets", kNoLabels,                          \
    "Fragments, and copies (ARP/ND answers for the kernel interface, frames of another pool for a " \
    "fast-free TX queue), lost for want of a buffer",                                             \
    v.Loop(&LoopCounters::extra_alloc_fail))                                                      \
  X(kToKernelPackets, "to_kernel_packets", kCounter, "packets", kNoLabels,                        \
    "Frames passed up to the kernel interface", v.Loop(&LoopCounters::to_kernel))                 \
  X(kToKernelBytes, "to_kernel_bytes", kCounter, "bytes", kNoLabels,                              \
    "Bytes passed up to the kernel interface", v.Loop(&LoopCounters::to_kernel_bytes))            \
  X(kFromKernelPackets, "from_kernel_packets", kCounter, "packets", kNoLabels,                    \
    "Frames the kernel interface sent out through the port", v.Loop(&LoopCounters::from_kernel))  \
  X(kFromKernelBytes, "from_kernel_bytes", kCounter, "bytes", kNoLabels,                          \
    "Bytes the kernel interface sent out through the port", v.Loop(&LoopCounters::from_kernel_bytes)) \
  X(kKernelQueueFull, "kernel_queue_full", kCounter, "packets", kNoLabels,                        \
    "Frames for the kernel interface that its queue refused (dropped)",                           \
    v.Loop(&LoopCounters::kernel_full))                                                           \
  X(kArpReplies, LocalName(LocalCounter::kArpReplies), kCounter, "packets", kNoLabels,            \
    "ARP requests for the LB's address answered", v.Local(LocalCounter::kArpReplies))             \
  X(kNdReplies, LocalName(LocalCounter::kNdReplies), kCounter, "packets", kNoLabels,              \
    "Neighbour solicitations for the LB's address answered", v.Local(LocalCounter::kNdReplies))   \
  X(kEchoReplies, LocalName(LocalCounter::kEchoReplies), kCounter, "packets", kNoLabels,          \
    "ICMP and ICMPv6 echo requests answered", v.Local(LocalCounter::kEchoReplies))                \
  X(kIcmpTooBig, LocalName(LocalCounter::kIcmpTooBig), kCounter, "packets", kNoLabels,            \
    "ICMP too-big errors sent for packets too big for the tunnel",                                \
    v.Local(LocalCounter::kIcmpTooBig))                                                           \
  X(kFragmentsSent, LocalName(LocalCounter::kFragmentsSent), kCounter, "packets", kNoLabels,      \
    "IPv4 fragments sent for packets too big for the tunnel without DF",                          \
    v.Local(LocalCounter::kFragmentsSent))                                                        \
  X(kIcmpErrorsRouted, LocalName(LocalCounter::kIcmpErrorsRouted), kCounter, "packets",           \
    kNoLabels, "ICMP errors about a tracked flow forwarded to its backend",                       \
    v.Local(LocalCounter::kIcmpErrorsRouted))                                                     \
  X(kIcmpErrorsSteered, LocalName(LocalCounter::kIcmpErrorsSteered), kCounter, "packets",         \
    kNoLabels, "ICMP errors handed to the worker that owns their flow",                           \
    v.Local(LocalCounter::kIcmpErrorsSteered))                                                    \
  X(kTunnelProbesSent, LocalName(LocalCounter::kTunnelProbes), kCounter, "packets", kNoLabels,    \
    "Frames of tunnel health probes from the kernel interface sent to their backend like data",   \
    v.Local(LocalCounter::kTunnelProbes))                                                         \
  X(kConntrackUntracked, "conntrack_untracked", kCounter, "flows", kNoLabels,                     \
    "New flows forwarded without a conntrack entry", v.totals.untracked)                          \
  X(kConntrackEvictions, "conntrack_evictions", kCounter, "flows", kNoLabels,                     \
    "Live flows evicted from a full conntrack", v.totals.evictions)                               \
  X(kConntrackRepinned, "conntrack_repinned", kCounter, "flows", kNoLabels,                       \
    "Tracked flows moved because their backend was removed", v.totals.repinned)                   \
  X(kConntrackOccupied, "conntrack_occupied", kGauge, "flows", kByWorker,                         \
    "Conntrack entries in use", v.totals.conntrack_occupied[k.worker])                            \
  X(kWorkerPolls, "worker_polls", kCounter, "polls", kByWorker,                                   \
    "Passes of the worker's polling loop", v.LoopOf(k, &LoopCounters::polls))                     \
  X(kWorkerBusyPolls, "worker_busy_polls", kCounter, "polls", kByWorker,                          \
    "Passes of the worker's polling loop that found frames to process (over worker_polls: the "   \
    "busy ratio)",                                                                                \
    v.LoopOf(k, &LoopCounters::busy_polls))                                                       \
  X(kConntrackCapacity, "conntrack_capacity_per_worker", kGauge, "flows", kNoLabels,              \
    "Conntrack entries each worker has",                                                          \
    v.options.workers.empty() ? 0 : v.options.workers[0]->conntrack().capacity())                 \
  X(kReloadsOk, "reloads_ok", kCounter, "reloads", kNoLabels, "Configuration reloads published",  \
    v.control.reloads_ok)                                                                         \
  X(kReloadsRefused, "reloads_refused", kCounter, "reloads", kNoLabels,                           \
    "Configuration reloads refused (the running one stays)", v.control.reloads_refused)           \
  X(kNeighborUpdates, "neighbor_updates", kCounter, "updates", kNoLabels,                         \
    "Next-hop MACs learned or changed", v.control.neighbor_updates)                               \
  X(kNeighborIgnored, "neighbor_ignored", kCounter, "packets", Reasons(kNeighborIgnoreLabels),    \
    "ARP replies and neighbour advertisements that taught nothing, by reason",                    \
    v.control.neighbor_ignored[k.reason])                                                         \
  X(kArpRequestsSent, "arp_requests_sent", kCounter, "packets", kNoLabels,                        \
    "ARP requests sent for next hops", v.control.arp_requests_sent)                               \
  X(kNdRequestsSent, "nd_requests_sent", kCounter, "packets", kNoLabels,                          \
    "Neighbour solicitations sent for next hops", v.control.nd_requests_sent)                     \
  X(kHealthProbes, "health_probes", kCounter, "probes", kNoLabels,                                \
    "Health probes sent, to every checked backend", v.control.health_probes)                      \
  X(kHealthProbeFailures, "health_probe_failures", kCounter, "probes", kNoLabels,                 \
    "Health probes that failed", v.control.health_probe_failures)                                 \
  X(kHealthTransitions, "health_transitions", kCounter, "transitions", kNoLabels,                 \
    "Changes of a backend's health (up to down, down to up), every backend",                      \
    v.control.health_transitions)                                                                 \
  X(kHealthRebuilds, "health_rebuilds", kCounter, "rebuilds", kNoLabels,                          \
    "Snapshots rebuilt for health changes and slow starts (not for reloads)",                     \
    v.control.health_rebuilds)                                                                    \
  X(kAnnounceReady, "announce_ready", kGauge, "boolean", kNoLabels,                                \
    "1 while maglb may announce its VIPs: [announce] set, workers live, not draining",            \
    v.control.announce.state == "announcing")                                                     \
  X(kAnnounceDraining, "announce_draining", kGauge, "boolean", kNoLabels,                          \
    "1 while draining: every VIP withdrawn, tracked flows still forwarded until exit",            \
    v.control.announce.state == "draining")                                                       \
  X(kAnnounceWorkersStalled, "announce_workers_stalled", kGauge, "boolean", kNoLabels,             \
    "1 while a worker has passed no quiescent point within [announce] stall_ms (VIPs withdrawn)", \
    v.control.announce.state == "stalled")                                                        \
  X(kAnnounceRoutes, "announce_routes", kGauge, "routes", kNoLabels,                               \
    "VIP routes maglb has in its announce table now", v.control.announce.routes())                \
  X(kAnnounceRouteChanges, "announce_route_changes", kCounter, "changes", kNoLabels,               \
    "VIP routes added to or deleted from the announce table", v.control.announce.route_changes)   \
  X(kAnnounceRouteErrors, "announce_route_errors", kCounter, "errors", kNoLabels,                  \
    "Route requests to the kernel that failed (retried every interval)",                          \
    v.control.announce.route_errors)                                                              \
  X(kVipPackets, "vip_packets", kCounter, "packets", kByVip, "Packets to the VIP forwarded",      \
    v.Vip(k).counters.packets)                                                                    \
  X(kVipBytes, "vip_bytes", kCounter, "bytes", kByVip, "Bytes to the VIP forwarded",              \
    v.Vip(k).counters.bytes)                                                                      \
  X(kVipNewFlows, "vip_new_flows", kCounter, "flows", kByVip, "New flows to the VIP",             \
    v.Vip(k).counters.new_flows)                                                                  \
  X(kVipBoundedLoadPassed, "vip_bounded_load_passed", kCounter, "flows", kByVip,                  \
    "New flows bounded loads placed off their first choice", v.Vip(k).bounded_load_passed)        \
  X(kVipBoundedLoadOver, "vip_bounded_load_over", kCounter, "flows", kByVip,                      \
    "New flows that found no backend below the bounded-load capacity", v.Vip(k).bounded_load_over) \
  X(kVipAnnounced, "vip_announced", kGauge, "boolean", kByVip,                                     \
    "1 while the VIP's address is announced (its route is in the announce table)",                \
    v.control.announce.Announced(v.state.vips()[k.vip].address))                                  \
  X(kBackendWeights, "backend_weights", kGauge, "weight", kByBackend,                             \
    "The backend's configured weight", v.Backend(k).configured_weight)                            \
  X(kBackendEffectiveWeights, "backend_effective_weights", kGauge, "weight", kByBackend,          \
    "The weight the backend's table entries were built with: 0 while down, ramping up to the "    \
    "configured weight during a slow start",                                                      \
    v.Backend(k).weight)                                                                          \
  X(kBackendTableEntries, "backend_table_entries", kGauge, "entries", kByBackend,                 \
    "Lookup table entries the backend holds", v.TableEntries(k))                                  \
  X(kBackendPackets, "backend_packets", kCounter, "packets", kByBackend,                          \
    "Packets forwarded to the backend", v.BackendFlow(k).packets)                                 \
  X(kBackendBytes, "backend_bytes", kCounter, "bytes", kByBackend,                                \
    "Bytes forwarded to the backend", v.BackendFlow(k).bytes)                                     \
  X(kBackendNewFlows, "backend_new_flows", kCounter, "flows", kByBackend,                         \
    "New flows sent to the backend", v.BackendFlow(k).new_flows)                                  \
  X(kBackendNextHopResolved, "backend_next_hop_resolved", kGauge, "boolean", kByBackend,          \
    "1 when the MAC of the backend's next hop is known, else 0", v.Backend(k).next_hop_known)    \
  X(kBackendHealthUp, "backend_health_up", kGauge, "boolean", kByBackend,                         \
    "0 when the backend's health check has it down, 1 when up or unchecked (no check)",           \
    v.Health(k) != BackendHealth::kDown)                                                          \
  X(kBackendHealthChecked, "backend_health_checked", kGauge, "boolean", kByBackend,               \
    "1 when a health check watches the backend, 0 when it is unchecked",                          \
    v.Health(k) != BackendHealth::kUnchecked)                                                     \
  X(kBackendHealthHeldDown, "backend_health_held_down", kGauge, "boolean", kByBackend,            \
    "1 while the backend is held down for flapping (down until it is stable), else 0",            \
    v.HealthStatus(k).held_down)                                                                  \
  X(kBackendHealthSince, "backend_health_since_ms", kGauge, "milliseconds", kByBackend,           \
    "When the backend's health last changed (or its check began), Unix time; 0 when unchecked",   \
    v.HealthStatus(k).since_unix_ms)                                                              \
  X(kBackendHealthProbes, "backend_health_probes", kCounter, "probes", kByBackend,                \
    "Health probes sent to the backend (0 when unchecked)", v.HealthStatus(k).probes)             \
  X(kBackendHealthProbeFailures, "backend_health_probe_failures", kCounter, "probes", kByBackend, \
    "Health probes of the backend that failed", v.HealthStatus(k).probe_failures)                 \
  X(kBackendHealthTransitions, "backend_health_transitions", kCounter, "transitions", kByBackend, \
    "Changes of the backend's health (up to down, down to up)", v.HealthStatus(k).transitions)

enum class MetricId : uint16_t {
#define MAGLB_METRIC_ID(id, name, type, unit, labels, help, read) id,
  MAGLB_FOREACH_METRIC(MAGLB_METRIC_ID)
#undef MAGLB_METRIC_ID
};

inline constexpr size_t kNumMetrics = 0
#define MAGLB_METRIC_COUNT(id, name, type, unit, labels, help, read) +1
    MAGLB_FOREACH_METRIC(MAGLB_METRIC_COUNT)
#undef MAGLB_METRIC_COUNT
    ;

/// One line of the list.
struct MetricInfo {
  MetricId id;
  std::string_view name;
  MetricType type;
  std::string_view unit;
  MetricLabelSet labels;
  std::string_view help;

  /// kReason: this entry's reasons (label values).
  std::span<const std::string_view> reasons() const {
    return labels.one.empty() ? labels.reasons : std::span<const std::string_view>(&labels.one, 1);
  }
};

/// Which label values a value is for (the daemon's READ takes it).
struct MetricKey {
  size_t reason = 0;   ///< index into MetricInfo::reasons()
  size_t worker = 0;
  size_t vip = 0;      ///< index into LbState::vips()
  size_t backend = 0;  ///< index into VipState::backends
};

/// Every metric, in the list's order (MetricId order).
std::span<const MetricInfo> Metrics();
const MetricInfo& GetMetric(MetricId id);

/// Telemetry's name of one reason's value: "drop_no_vip".
std::string ReasonKey(const MetricInfo& m, std::string_view reason);
/// Telemetry's per-worker array of a kWorker metric: "conntrack_occupied_per_worker".
std::string PerWorkerKey(const MetricInfo& m);
/// The label names a kind's values carry, for exporters that write labels
/// (Prometheus): a worker polls one RX queue of the data port, so its values
/// carry the port and queue as well as the worker; a backend's carry its VIP.
std::span<const std::string_view> LabelNames(MetricLabels kind);

/// A kVip metric's name in /maglb/vip (the endpoint names the VIP): "packets".
std::string_view VipKey(const MetricInfo& m);

// What /maglb/vip shows per backend besides the metrics: parallel arrays of
// text, one entry per backend as the metric arrays are. A backend without a
// health check has "unchecked" and empty texts.
inline constexpr std::string_view kBackendNamesKey = "backend_names";
inline constexpr std::string_view kBackendAddressesKey = "backend_addresses";
/// "up", "down", "unchecked" (maglb/health.h HealthName).
inline constexpr std::string_view kBackendHealthKey = "backend_health";
/// The reason of the backend's last health transition (or of its first state).
inline constexpr std::string_view kBackendHealthReasonsKey = "backend_health_reasons";
/// What the check does: "http via tunnel to 10.100.0.1:80 from port 61003".
inline constexpr std::string_view kBackendHealthChecksKey = "backend_health_checks";
/// The last probe's detail: "connect timeout 500 ms".
inline constexpr std::string_view kBackendLastProbesKey = "backend_last_probes";
/// Every per-backend text array, in /maglb/vip's order.
inline constexpr std::string_view kBackendTextKeys[] = {
    kBackendNamesKey,         kBackendAddressesKey,    kBackendHealthKey,
    kBackendHealthReasonsKey, kBackendHealthChecksKey, kBackendLastProbesKey};
/// What exporters with labels (Prometheus) show per VIP besides the metrics:
/// an info metric, of value 1, whose labels are the VIP's settings and its
/// table's fingerprint (telemetry's /maglb/vip shows the same as fields).
/// Its value is its labels, which the list's numbers cannot carry.
inline constexpr std::string_view kVipInfoName = "vip_info";
inline constexpr std::string_view kVipInfoHelp =
    "The VIP's settings and its lookup table's fingerprint as labels; always 1";
inline constexpr std::string_view kVipInfoLabels[] = {"vip",        "address",   "protocol",   "port",
                                                      "forwarding", "algorithm", "fingerprint"};

/// Histograms, besides the list (Prometheus; telemetry has /maglb/latency
/// and /maglb/reloads): the time from receive to transmit per frame, per
/// worker, in one bucket per power of two of /maglb/latency's; and the time
/// from a reload's trigger to every worker using its tables.
inline constexpr std::string_view kPacketLatencyName = "packet_latency_seconds";
inline constexpr std::string_view kPacketLatencyHelp =
    "Time from receive to transmit of each frame sent, from the TSC, per worker";
inline constexpr std::string_view kReloadApplyName = "reload_apply_seconds";
inline constexpr std::string_view kReloadApplyHelp =
    "Time from a reload's trigger (config file change or SIGHUP) to every worker using its tables";

/// The longest text value telemetry sends: DPDK's RTE_TEL_MAX_STRING_LEN
/// less its NUL (DPDK cuts a longer one there, wherever that falls).
inline constexpr size_t kMaxTelemetryText = 127;

}  // namespace maglb

#endif  // MAGLB_METRICS_H_
