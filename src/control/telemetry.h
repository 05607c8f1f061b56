// DPDK telemetry commands, so that dpdk-telemetry.py and `maglbctl stats`
// read the LB over /var/run/dpdk/<prefix>/dpdk_telemetry.v2:
//   /maglb/stats       totals: packets, bytes, drops by reason, local replies,
//                      conntrack occupancy per worker, reloads, generation
//   /maglb/vips[,OFFSET]
//                      generation, VIP names and table fingerprints: one page
//                      from OFFSET, with vip_total and vip_offset
//   /maglb/vip,NAME[,OFFSET]
//                      one VIP: its settings, fingerprint, counters, and per
//                      backend (parallel arrays) name, address, health and
//                      the texts of its check (maglb/metrics.h
//                      kBackendHealthKey...), then every backend metric
//                      (weights, entries, packets, ..., health counters);
//                      one page of backends from OFFSET, with backend_total
//                      and backend_offset (replies are capped at 16 KB)
//   /maglb/latency[,FIRST]
//                      receive-to-transmit time per frame (LoopCounters::
//                      latency): tsc_hz, bucket_upper_ns (169 exclusive
//                      upper bounds, ns), per_worker {"0": [170 counts, the
//                      last above the bounds], ...} and per_worker_sum_ns
//                      {"0": ns, ...}, cumulative since start; as many
//                      workers from FIRST as fit 16 KB (worker_total,
//                      worker_offset)
//   /maglb/reloads     the last 64 reloads, oldest first, as parallel arrays
//                      under "recent" (generation, outcome, event_ns,
//                      published_ns, workers_ns: CLOCK_MONOTONIC, 0 where not
//                      reached), applied / unchanged / refused, and
//                      file_to_workers_ns_max / _sum / _count over those that
//                      reached the workers (control/reload_timing.h)
// Their counters and gauges are the metric list's (maglb/metrics.h), named
// and read from it.
#ifndef MAGLB_CONTROL_TELEMETRY_H_
#define MAGLB_CONTROL_TELEMETRY_H_

#include "control/controller.h"

namespace maglb {

/// Registers the /maglb/... commands; they read `controller` until exit.
void RegisterTelemetry(Controller* controller);
/// The commands answer null from now on (shutdown). DPDK cannot unregister them.
void UnregisterTelemetry();

}  // namespace maglb

#endif  // MAGLB_CONTROL_TELEMETRY_H_
