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

std::string_view VipKey(const MetricInfo& m) {
  return m.name.starts_with(kVipPrefix) ? m.name.substr(kVipPrefix.size()) : m.name;
}

}  // namespace maglb
