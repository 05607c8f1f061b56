#include "control/metrics_view.h"

#include <array>

namespace maglb {
namespace {

using Reader = uint64_t (*)(const MetricsView& v, const MetricKey& k);

// The list's READ column, one function per metric (MetricId order).
constexpr std::array<Reader, kNumMetrics> kReaders = {
#define MAGLB_METRIC_READER(id, name, type, unit, labels, help, read) \
  [](const MetricsView& v, [[maybe_unused]] const MetricKey& k) -> uint64_t { return (read); },
    MAGLB_FOREACH_METRIC(MAGLB_METRIC_READER)
#undef MAGLB_METRIC_READER
};

}  // namespace

MetricsView::MetricsView(const LbState& state_in, const CounterTotals& totals_in,
                         const ControlStats& control_in, const ControllerOptions& options_in,
                         uint64_t now)
    : state(state_in), totals(totals_in), control(control_in), options(options_in), now_ns(now) {}

uint64_t MetricsView::Read(MetricId id, const MetricKey& k) const {
  return kReaders[static_cast<size_t>(id)](*this, k);
}

uint64_t MetricsView::Sum(MetricId id) const {
  const std::string_view family = GetMetric(id).name;
  uint64_t sum = 0;
  for (const MetricInfo& m : Metrics()) {
    if (m.name != family) continue;
    MetricKey k;
    switch (m.labels.kind) {
      case MetricLabels::kNone:
        sum += Read(m.id);
        break;
      case MetricLabels::kReason:
        for (k.reason = 0; k.reason < m.reasons().size(); ++k.reason) sum += Read(m.id, k);
        break;
      case MetricLabels::kWorker:
        for (k.worker = 0; k.worker < worker_count(); ++k.worker) {
          sum += Read(m.id, k);
        }
        break;
      case MetricLabels::kVip:
      case MetricLabels::kVipBackend:
        break;  // not summed across VIPs
    }
  }
  return sum;
}

uint64_t MetricsView::Loop(Counter LoopCounters::*counter) const {
  uint64_t sum = 0;
  for (const LoopCounters* lc : options.loop_counters) sum += (lc->*counter).value();
  return sum;
}

uint64_t MetricsView::TableEntries(const MetricKey& k) const {
  const VipState& vip = state.vips()[k.vip];
  if (entries_vip_ != k.vip) {
    entries_ = vip.table->empty() ? std::vector<uint32_t>(vip.backends.size(), 0)
                                  : vip.table->EntryCounts();
    entries_vip_ = k.vip;
  }
  return k.backend < entries_.size() ? entries_[k.backend] : 0;
}

const BackendHealthStatus* MetricsView::FindHealthStatus(const MetricKey& k) const {
  // Each metric of a backend asks in turn: one map lookup per backend.
  if (health_vip_ != k.vip || health_backend_ != k.backend) {
    const VipState& vip = state.vips()[k.vip];
    auto it = control.backend_health.find({vip.name, vip.backends[k.backend].name});
    health_ = it != control.backend_health.end() ? &it->second : nullptr;
    health_vip_ = k.vip;
    health_backend_ = k.backend;
  }
  return health_;
}

const BackendHealthStatus& MetricsView::HealthStatus(const MetricKey& k) const {
  static const BackendHealthStatus kNone;
  const BackendHealthStatus* status = FindHealthStatus(k);
  return status != nullptr ? *status : kNone;
}

BackendHealth MetricsView::Health(const MetricKey& k) const {
  const BackendHealthStatus* status = FindHealthStatus(k);
  return status != nullptr ? status->health : Backend(k).health;
}

}  // namespace maglb
