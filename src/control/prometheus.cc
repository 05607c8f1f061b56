#include "control/prometheus.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

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

void AppendHeader(std::string* out, std::string_view name, std::string_view help, MetricType type) {
  *out += "# HELP ";
  out->append(name);
  *out += ' ';
  *out += EscapeHelp(help);
  *out += "\n# TYPE ";
  out->append(name);
  *out += type == MetricType::kCounter ? " counter\n" : " gauge\n";
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
