#include "control/prometheus.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "control/reload_timing.h"
#include "maglb/latency_histogram.h"

namespace maglb {
namespace {

constexpr std::string_view kPrefix = "maglb_";

// A unit whose values are not in base units, or whose name abbreviates it:
// the name's suffix becomes "_seconds", the value is divided by 10^decimals.
struct UnitRule {
  std::string_view unit, suffix;
  int decimals;
};
constexpr UnitRule kUnitRules[] = {
    {"seconds", "_s", 0},
    {"milliseconds", "_ms", 3},
};

const UnitRule* RuleOf(const MetricInfo& m) {
  for (const UnitRule& r : kUnitRules) {
    if (m.unit == r.unit) return &r;
  }
  return nullptr;
}

void AppendValue(std::string* out, uint64_t v, int decimals) {
  if (decimals == 0) {
    absl::StrAppend(out, v);
    return;
  }
  uint64_t scale = 1;
  for (int i = 0; i < decimals; ++i) scale *= 10;
  if (v % scale == 0) {
    absl::StrAppend(out, v / scale);
  } else {
    absl::StrAppendFormat(out, "%u.%0*u", v / scale, decimals, v % scale);
  }
}

// The value of label `label` (one of LabelNames(m.labels.kind)) for `k`.
std::string LabelValue(std::string_view label, const MetricInfo& m, const MetricsView& v,
                       const MetricKey& k) {
  if (label == "reason") return std::string(m.reasons()[k.reason]);
  // Worker i polls queue i of the data port (daemon/main.cc).
  if (label == "worker" || label == "queue") return absl::StrCat(k.worker);
  if (label == "port") return absl::StrCat(v.options.port.port_id);
  if (label == "vip") return v.state.vips()[k.vip].name;
  if (label == "backend") return v.state.vips()[k.vip].backends[k.backend].name;
  return "";  // prometheus_test renders every kind: no label comes here
}

std::string Hex(uint64_t v) { return absl::StrFormat("%016x", v); }

// The value of the VIP info's label `label` (one of kVipInfoLabels).
std::string VipInfoValue(std::string_view label, const VipState& vip) {
  if (label == "vip") return vip.name;
  if (label == "address") return vip.address.ToString();
  if (label == "protocol") return std::string(ToString(vip.protocol));
  if (label == "port") return absl::StrCat(vip.port);
  if (label == "forwarding") return std::string(ToString(vip.forwarding));
  if (label == "algorithm") return std::string(ToString(vip.algorithm));
  if (label == "fingerprint") return Hex(vip.fingerprint());
  return "";
}

void AppendLabel(std::string* out, bool first, std::string_view name, std::string_view value) {
  *out += first ? '{' : ',';
  out->append(name);
  *out += "=\"";
  *out += EscapeLabelValue(value);
  *out += '"';
}

void AppendHeader(std::string* out, std::string_view name, std::string_view help, std::string_view type) {
  *out += "# HELP ";
  out->append(name);
  *out += ' ';
  *out += EscapeHelp(help);
  *out += "\n# TYPE ";
  out->append(name);
  *out += ' ';
  out->append(type);
  *out += '\n';
}

void AppendHeader(std::string* out, std::string_view name, std::string_view help, MetricType type) {
  AppendHeader(out, name, help, type == MetricType::kCounter ? "counter" : "gauge");
}

// Nanoseconds as seconds, exactly and without trailing zeros: "0.000000064", "2.5", "1".
std::string Seconds(uint64_t ns) {
  std::string out = absl::StrCat(ns / 1'000'000'000u);
  if (uint64_t frac = ns % 1'000'000'000u; frac != 0) {
    std::string digits = absl::StrFormat("%09u", frac);
    digits.erase(digits.find_last_not_of('0') + 1);
    absl::StrAppend(&out, ".", digits);
  }
  return out;
}

class Renderer {
 public:
  explicit Renderer(const MetricsView& view) : v_(view) {}

  std::string Render() {
    const std::span<const MetricInfo> list = Metrics();
    // The entries of a family are adjacent (metrics_test checks it).
    for (size_t i = 0; i < list.size();) {
      const MetricInfo& first = list[i];
      name_ = PrometheusName(first);
      const UnitRule* rule = RuleOf(first);
      decimals_ = rule != nullptr ? rule->decimals : 0;
      AppendHeader(&out_, name_, first.help, first.type);
      for (; i < list.size() && list[i].name == first.name; ++i) Samples(list[i]);
    }
    VipInfo();
    PacketLatency();
    ReloadApply();
    return std::move(out_);
  }

 private:
  void Samples(const MetricInfo& m) {
    MetricKey k;
    switch (m.labels.kind) {
      case MetricLabels::kNone:
        Sample(m, k);
        break;
      case MetricLabels::kReason:
        for (k.reason = 0; k.reason < m.reasons().size(); ++k.reason) Sample(m, k);
        break;
      case MetricLabels::kWorker:
        for (k.worker = 0; k.worker < v_.worker_count(); ++k.worker) Sample(m, k);
        break;
      case MetricLabels::kVip:
        for (k.vip = 0; k.vip < v_.state.vips().size(); ++k.vip) Sample(m, k);
        break;
      case MetricLabels::kVipBackend:
        for (k.vip = 0; k.vip < v_.state.vips().size(); ++k.vip) {
          for (k.backend = 0; k.backend < v_.state.vips()[k.vip].backends.size(); ++k.backend) {
            Sample(m, k);
          }
        }
        break;
    }
  }

  void Sample(const MetricInfo& m, const MetricKey& k) {
    out_ += name_;
    bool first = true;
    for (std::string_view label : LabelNames(m.labels.kind)) {
      AppendLabel(&out_, first, label, LabelValue(label, m, v_, k));
      first = false;
    }
    if (!first) out_ += '}';
    out_ += ' ';
    AppendValue(&out_, v_.Read(m.id, k), decimals_);
    out_ += '\n';
  }

  void VipInfo() {
    const std::string name = std::string(kPrefix) + std::string(kVipInfoName);
    AppendHeader(&out_, name, kVipInfoHelp, MetricType::kGauge);
    for (const VipState& vip : v_.state.vips()) {
      out_ += name;
      bool first = true;
      for (std::string_view label : kVipInfoLabels) {
        AppendLabel(&out_, first, label, VipInfoValue(label, vip));
        first = false;
      }
      out_ += "} 1\n";
    }
  }

  // One histogram series: its name, labels ("" or `worker="0",...,`: the
  // le label follows), the finite upper bounds (ns) with the count of each
  // bucket (not cumulative), what is above them, and the sum of the times.
  void Histogram(const std::string& name, const std::string& labels, std::span<const uint64_t> bounds_ns,
                 std::span<const uint64_t> counts, uint64_t above, uint64_t sum_ns) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i < bounds_ns.size(); ++i) {
      cumulative += counts[i];
      absl::StrAppend(&out_, name, "_bucket{", labels, "le=\"", Seconds(bounds_ns[i]), "\"} ", cumulative, "\n");
    }
    cumulative += above;
    absl::StrAppend(&out_, name, "_bucket{", labels, "le=\"+Inf\"} ", cumulative, "\n");
    const std::string plain = labels.empty() ? "" : absl::StrCat("{", labels.substr(0, labels.size() - 1), "}");
    absl::StrAppend(&out_, name, "_sum", plain, " ", Seconds(sum_ns), "\n");
    absl::StrAppend(&out_, name, "_count", plain, " ", cumulative, "\n");
  }

  // Per worker, /maglb/latency's buckets merged to one per power of two
  // (the bounds 64 ns, 128 ns, ... 2^27 ns), labelled as the per-worker
  // metrics are.
  void PacketLatency() {
    const std::string name = std::string(kPrefix) + std::string(kPacketLatencyName);
    AppendHeader(&out_, name, kPacketLatencyHelp, "histogram");
    std::vector<uint64_t> bounds;
    for (uint64_t b : LatencyBucketUpperBoundsNs()) {
      if (std::has_single_bit(b)) bounds.push_back(b);
    }
    std::vector<uint64_t> counts(bounds.size());
    for (size_t w = 0; w < v_.options.loop_counters.size(); ++w) {
      const LatencyHistogram& h = v_.options.loop_counters[w]->latency;
      const std::array<uint64_t, kLatencyBuckets> fine = h.Counts();
      std::fill(counts.begin(), counts.end(), 0);
      for (size_t i = 0, coarse = 0; i < kLatencyBounds; ++i) {
        counts[coarse] += fine[i];
        if (LatencyBucketUpperNs(i) == bounds[coarse]) ++coarse;
      }
      std::string labels;
      MetricKey k;
      k.worker = w;
      for (std::string_view label : LabelNames(MetricLabels::kWorker)) {
        absl::StrAppend(&labels, std::string(label), "=\"", EscapeLabelValue(WorkerLabelValue(label, k)), "\",");
      }
      Histogram(name, labels, bounds, counts, fine[kLatencyBounds], h.sum_ns());
    }
  }

  void ReloadApply() {
    const std::string name = std::string(kPrefix) + std::string(kReloadApplyName);
    AppendHeader(&out_, name, kReloadApplyHelp, "histogram");
    const ReloadTimings& t = v_.control.reload_timings;
    const auto& buckets = t.to_workers_buckets();
    Histogram(name, std::string(), kReloadApplyBoundsNs, std::span<const uint64_t>(buckets.data(), buckets.size() - 1),
              buckets.back(), t.to_workers_sum_ns());
  }

  // A per-worker label's value (one of LabelNames(kWorker)).
  std::string WorkerLabelValue(std::string_view label, const MetricKey& k) const {
    if (label == "port") return absl::StrCat(v_.options.port.port_id);
    return absl::StrCat(k.worker);  // worker, queue: worker i polls queue i
  }

  const MetricsView& v_;
  std::string out_;
  std::string name_;  // of the family being written
  int decimals_ = 0;  // of its values
};

}  // namespace

std::string PrometheusName(const MetricInfo& m) {
  std::string name = std::string(kPrefix) + std::string(m.name);
  if (const UnitRule* rule = RuleOf(m); rule != nullptr) {
    if (std::string_view(name).ends_with(rule->suffix)) name.resize(name.size() - rule->suffix.size());
    if (!std::string_view(name).ends_with("_seconds")) name += "_seconds";
  }
  if (m.type == MetricType::kCounter) name += "_total";
  return name;
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char ch : value) {
    if (ch == '\\') {
      out += "\\\\";
    } else if (ch == '"') {
      out += "\\\"";
    } else if (ch == '\n') {
      out += "\\n";
    } else {
      out += ch;
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char ch : help) {
    if (ch == '\\') {
      out += "\\\\";
    } else if (ch == '\n') {
      out += "\\n";
    } else {
      out += ch;
    }
  }
  return out;
}

std::string RenderPrometheus(const MetricsView& view) { return Renderer(view).Render(); }

}  // namespace maglb
