#include "maglb/metrics.h"

#include <array>

namespace maglb {
namespace {

// The list without its READ column, which only the daemon compiles.
constexpr MetricInfo kMetrics[] = {
#define MAGLB_METRIC_INFO(id, name, type, unit, labels, help, read) \
  {MetricId::id, name, MetricType::type, unit, labels, help},
    MAGLB_FOREACH_METRIC(MAGLB_METRIC_INFO)
#undef MAGLB_METRIC_INFO
};
static_assert(std::size(kMetrics) == kNumMetrics);

constexpr std::string_view kVipPrefix = "vip_";

}  // namespace

std::span<const MetricInfo> Metrics() { return kMetrics; }

const MetricInfo& GetMetric(MetricId id) { return kMetrics[static_cast<size_t>(id)]; }

std::string ReasonKey(const MetricInfo& m, std::string_view reason) {
  std::string key(m.name);
  key += '_';
  key += reason;
  return key;
}

std::string PerWorkerKey(const MetricInfo& m) { return std::string(m.name) + "_per_worker"; }

std::span<const std::string_view> LabelNames(MetricLabels kind) {
  static constexpr std::string_view kReasonLabels[] = {"reason"};
  static constexpr std::string_view kWorkerLabels[] = {"worker", "port", "queue"};
  static constexpr std::string_view kVipLabels[] = {"vip"};
  static constexpr std::string_view kBackendLabels[] = {"vip", "backend"};
  switch (kind) {
    case MetricLabels::kNone: return {};
    case MetricLabels::kReason: return kReasonLabels;
    case MetricLabels::kWorker: return kWorkerLabels;
    case MetricLabels::kVip: return kVipLabels;
    case MetricLabels::kVipBackend: return kBackendLabels;
  }
  return {};
}

std::string_view VipKey(const MetricInfo& m) {
  return m.name.starts_with(kVipPrefix) ? m.name.substr(kVipPrefix.size()) : m.name;
}

}  // namespace maglb
