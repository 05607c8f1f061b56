// What the metric list (maglb/metrics.h) reads in the daemon: the controller's
// state, counter totals, control stats and options, for one request, under
// the controller's lock (Controller::WithView). Every exporter reads values
// through ReadMetric, never a field by hand.
#ifndef MAGLB_CONTROL_METRICS_VIEW_H_
#define MAGLB_CONTROL_METRICS_VIEW_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "control/control_stats.h"
#include "control/controller.h"
#include "maglb/metrics.h"

namespace maglb {

class MetricsView {
 public:
  MetricsView(const LbState& state, const CounterTotals& totals, const ControlStats& control,
              const ControllerOptions& options, uint64_t now_ns);

  /// One value of metric `id` for the label values in `k`.
  uint64_t Read(MetricId id, const MetricKey& k = {}) const;
  /// Every value of a family (the entries named as `id`'s), summed over
  /// their reasons and workers (not VIPs or backends).
  uint64_t Sum(MetricId id) const;

  // For the list's READ expressions.
  const LbState& state;
  const CounterTotals& totals;
  const ControlStats& control;
  const ControllerOptions& options;
  const uint64_t now_ns;
  size_t worker_count() const { return totals.conntrack_occupied.size(); }
  /// A loop counter summed over the workers.
  uint64_t Loop(Counter LoopCounters::*counter) const;
  /// A loop counter of worker k.worker.
  uint64_t LoopOf(const MetricKey& k, Counter LoopCounters::*counter) const {
    return k.worker < options.loop_counters.size() ? (options.loop_counters[k.worker]->*counter).value() : 0;
  }
  uint64_t Local(LocalCounter c) const { return totals.local[static_cast<size_t>(c)]; }
  const CounterTotals::Vip& Vip(const MetricKey& k) const { return totals.vips[k.vip]; }
  const BackendState& Backend(const MetricKey& k) const {
    return state.vips()[k.vip].backends[k.backend];
  }
  const CounterTotals::Flow& BackendFlow(const MetricKey& k) const {
    return totals.vips[k.vip].backends[k.backend].counters;
  }
  /// Lookup table entries of a backend; one pass over the VIP's table per request.
  uint64_t TableEntries(const MetricKey& k) const;
  /// What the health task says of the backend (ControlStats::backend_health):
  /// for an unchecked backend, or one it has not seen yet, an empty status
  /// (unchecked, no texts, zeros).
  const BackendHealthStatus& HealthStatus(const MetricKey& k) const;
  /// The backend's health: the check's verdict when the health task has one
  /// (the table follows within a rebuild: see effective_weight), else what
  /// the snapshot was built with.
  BackendHealth Health(const MetricKey& k) const;

 private:
  const BackendHealthStatus* FindHealthStatus(const MetricKey& k) const;  // null: none

  mutable size_t health_vip_ = SIZE_MAX, health_backend_ = SIZE_MAX;  // whose status health_ is
  mutable const BackendHealthStatus* health_ = nullptr;
  mutable size_t entries_vip_ = SIZE_MAX;  // whose counts entries_ holds
  mutable std::vector<uint32_t> entries_;
};

}  // namespace maglb

#endif  // MAGLB_CONTROL_METRICS_VIEW_H_
