// The metric list (maglb/metrics.h): every name an exporter derives from it
// is unique and legal in Prometheus, every entry is described, and every
// reason of the existing lists has its value.
#include "maglb/metrics.h"

#include <regex>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace maglb {
namespace {

// What telemetry names the values of `m` (/maglb/stats, /maglb/vip).
std::vector<std::string> TelemetryNames(const MetricInfo& m) {
  switch (m.labels.kind) {
    case MetricLabels::kNone:
    case MetricLabels::kVipBackend:
      return {std::string(m.name)};
    case MetricLabels::kReason: {
      std::vector<std::string> out;
      for (std::string_view r : m.reasons()) out.push_back(ReasonKey(m, r));
      return out;
    }
    case MetricLabels::kWorker:
      return {std::string(m.name), PerWorkerKey(m)};
    case MetricLabels::kVip:
      return {std::string(VipKey(m))};
  }
  return {};
}

TEST(Metrics, IdsAreIndexes) {
  ASSERT_EQ(Metrics().size(), kNumMetrics);
  for (size_t i = 0; i < kNumMetrics; ++i) {
    EXPECT_EQ(static_cast<size_t>(Metrics()[i].id), i);
    EXPECT_EQ(&GetMetric(Metrics()[i].id), &Metrics()[i]);
  }
}

TEST(Metrics, NamesAreUniqueAcrossLabelExpansions) {
  std::set<std::string> stats, vip;  // the two endpoints' keys
  for (const MetricInfo& m : Metrics()) {
    const bool in_vip = m.labels.kind == MetricLabels::kVip || m.labels.kind == MetricLabels::kVipBackend;
    for (const std::string& name : TelemetryNames(m)) {
      EXPECT_TRUE((in_vip ? vip : stats).insert(name).second) << "twice: " << name;
    }
  }
  // What /maglb/vip shows besides metrics.
  for (const char* setting : {"name", "address", "protocol", "port", "forwarding", "algorithm",
                              "table_size", "fingerprint", "generation", "backend_total",
                              "backend_offset"}) {
    EXPECT_FALSE(vip.count(setting)) << setting;
  }
  // Its per-backend texts.
  for (std::string_view text : kBackendTextKeys) EXPECT_FALSE(vip.count(std::string(text))) << text;
  for (const char* text : {"last_refusal", "port", "backend_port", "offloads", "config"}) {
    EXPECT_FALSE(stats.count(text)) << text;
  }
}

TEST(Metrics, FamiliesAgreeAndAreAdjacent) {
  // Entries sharing a name are one family (its reasons spread over them):
  // next to each other, with one type, unit, label kind and help.
  std::set<std::string_view> seen;
  for (size_t i = 0; i < Metrics().size(); ++i) {
    const MetricInfo& m = Metrics()[i];
    if (i > 0 && Metrics()[i - 1].name == m.name) {
      const MetricInfo& p = Metrics()[i - 1];
      EXPECT_EQ(m.labels.kind, MetricLabels::kReason) << m.name;
      EXPECT_EQ(p.type, m.type) << m.name;
      EXPECT_EQ(p.unit, m.unit) << m.name;
      EXPECT_EQ(p.labels.kind, m.labels.kind) << m.name;
      EXPECT_EQ(p.help, m.help) << m.name;
      continue;
    }
    EXPECT_TRUE(seen.insert(m.name).second) << "family not contiguous: " << m.name;
  }
}

TEST(Metrics, NamesAndLabelValuesAreLegalInPrometheus) {
  const std::regex metric_name("[a-zA-Z_:][a-zA-Z0-9_:]*");
  for (const MetricInfo& m : Metrics()) {
    for (const std::string& name : TelemetryNames(m)) {
      EXPECT_TRUE(std::regex_match(name, metric_name)) << name;
    }
    EXPECT_TRUE(std::regex_match(std::string("maglb_") + std::string(m.name), metric_name)) << m.name;
    for (std::string_view r : m.reasons()) {
      EXPECT_TRUE(std::regex_match(std::string(r), std::regex("[a-z0-9_]+"))) << r;
    }
  }
}

// Every labelled kind names its labels legally and once; a worker's values
// say which port and queue it polls.
TEST(Metrics, LabelNamesAreLegalAndDistinct) {
  const std::regex label_name("[a-zA-Z_][a-zA-Z0-9_]*");
  for (const MetricInfo& m : Metrics()) {
    std::span<const std::string_view> names = LabelNames(m.labels.kind);
    EXPECT_EQ(names.empty(), m.labels.kind == MetricLabels::kNone) << m.name;
    std::set<std::string_view> seen(names.begin(), names.end());
    EXPECT_EQ(seen.size(), names.size()) << m.name;
    for (std::string_view n : names) {
      EXPECT_TRUE(std::regex_match(std::string(n), label_name)) << n;
      EXPECT_FALSE(n.starts_with("__")) << n;  // reserved in Prometheus
    }
  }
  EXPECT_THAT(LabelNames(MetricLabels::kWorker), ::testing::ElementsAre("worker", "port", "queue"));
  EXPECT_THAT(LabelNames(MetricLabels::kVipBackend), ::testing::ElementsAre("vip", "backend"));
  EXPECT_THAT(LabelNames(MetricLabels::kReason), ::testing::ElementsAre("reason"));
}

TEST(Metrics, EveryEntryHasHelpAndUnit) {
  for (const MetricInfo& m : Metrics()) {
    EXPECT_FALSE(m.help.empty()) << m.name;
    EXPECT_FALSE(m.unit.empty()) << m.name;
    EXPECT_EQ(m.labels.kind == MetricLabels::kReason, !m.reasons().empty()) << m.name;
    if (m.labels.kind == MetricLabels::kVip) {
      EXPECT_TRUE(m.name.starts_with("vip_")) << m.name;
    }
    if (m.labels.kind == MetricLabels::kVipBackend) {
      EXPECT_TRUE(m.name.starts_with("backend_")) << m.name;
    }
  }
}

// The label values a family has, over all its entries.
std::set<std::string_view> FamilyReasons(MetricId id) {
  std::set<std::string_view> out;
  for (const MetricInfo& m : Metrics()) {
    if (m.name == GetMetric(id).name) out.insert(m.reasons().begin(), m.reasons().end());
  }
  return out;
}

TEST(Metrics, EveryReasonHasAValue) {
  const std::set<std::string_view> drops = FamilyReasons(MetricId::kDrop);
  for (size_t i = 0; i < kNumDropReasons; ++i) {
    EXPECT_TRUE(drops.count(DropReasonName(static_cast<DropReason>(i)))) << i;
  }
  // The loop's own losses are drop reasons too (drop_rx_multiseg, ...).
  for (const char* loop : {"rx_multiseg", "no_snapshot", "steer_ring_full"}) {
    EXPECT_TRUE(drops.count(loop)) << loop;
  }
  EXPECT_EQ(FamilyReasons(MetricId::kNeighborIgnored).size(), kNumNeighborIgnores);
  EXPECT_TRUE(FamilyReasons(MetricId::kNeighborIgnored).count("bad_mac"));
}

TEST(Metrics, EveryLocalCounterIsAMetric) {
  std::set<std::string_view> names;
  for (const MetricInfo& m : Metrics()) names.insert(m.name);
  for (size_t i = 0; i < kNumLocalCounters; ++i) {
    const auto c = static_cast<LocalCounter>(i);
    EXPECT_EQ(LocalName(c), LocalCounterName(c));
    EXPECT_TRUE(names.count(LocalName(c))) << LocalName(c);
  }
}

// The VIP info (for exporters with labels) is no entry's name, and its
// labels are legal, distinct, and include the VIP's.
TEST(Metrics, VipInfoIsNoMetricsName) {
  for (const MetricInfo& m : Metrics()) EXPECT_NE(m.name, kVipInfoName);
  const std::regex label_name("[a-zA-Z_][a-zA-Z0-9_]*");
  std::set<std::string_view> seen;
  for (std::string_view n : kVipInfoLabels) {
    EXPECT_TRUE(std::regex_match(std::string(n), label_name)) << n;
    EXPECT_TRUE(seen.insert(n).second) << n;
  }
  EXPECT_TRUE(seen.count(LabelNames(MetricLabels::kVip)[0]));
}

TEST(Metrics, TelemetryNamesStayAsTheyWere) {
  EXPECT_EQ(ReasonKey(GetMetric(MetricId::kDrop), "no_vip"), "drop_no_vip");
  EXPECT_EQ(ReasonKey(GetMetric(MetricId::kDropSteerRingFull), "steer_ring_full"),
            "drop_steer_ring_full");
  EXPECT_EQ(ReasonKey(GetMetric(MetricId::kNeighborIgnored), "bad_mac"), "neighbor_ignored_bad_mac");
  EXPECT_EQ(PerWorkerKey(GetMetric(MetricId::kConntrackOccupied)), "conntrack_occupied_per_worker");
  EXPECT_EQ(VipKey(GetMetric(MetricId::kVipNewFlows)), "new_flows");
  EXPECT_EQ(GetMetric(MetricId::kBackendNextHopResolved).name, "backend_next_hop_resolved");
  EXPECT_EQ(GetMetric(MetricId::kUptime).name, "uptime_s");
  // What tools read since health checks (README "Counters").
  EXPECT_EQ(GetMetric(MetricId::kBackendWeights).name, "backend_weights");
  EXPECT_EQ(GetMetric(MetricId::kBackendEffectiveWeights).name, "backend_effective_weights");
  EXPECT_EQ(GetMetric(MetricId::kBackendHealthUp).name, "backend_health_up");
  EXPECT_EQ(GetMetric(MetricId::kBackendHealthSince).name, "backend_health_since_ms");
  EXPECT_EQ(GetMetric(MetricId::kHealthRebuilds).name, "health_rebuilds");
  EXPECT_EQ(kBackendHealthKey, "backend_health");
}

}  // namespace
}  // namespace maglb
