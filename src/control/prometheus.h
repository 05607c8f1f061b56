// The metric list (maglb/metrics.h) in Prometheus' text exposition format,
// version 0.0.4 (what /metrics serves: metrics_task.h). Every family comes
// from the list, named by rule, never by hand:
//   - "maglb_" + the list's name, in base units: a name in "_s" (unit
//     seconds) or "_ms" (unit milliseconds, the value divided by 1000) ends
//     in "_seconds";
//   - counters end in "_total";
//   - labels are LabelNames(kind): reason; worker, port, queue; vip; vip and
//     backend; label values escaped (backslash, double quote, newline);
//   - one # HELP and # TYPE per family, whose entries (several for a
//     family of reasons) follow together.
// Besides the list, an info metric per VIP (kVipInfoName), and two
// histograms (kPacketLatencyName per worker, kReloadApplyName), whose `le`
// bounds are seconds written exactly ("0.000000064").
//
// Debian 12 packages no C++ Prometheus client (prometheus-cpp is not in it);
// the text format is a handful of rules, and the tests check the output with
// `promtool check metrics`.
#ifndef MAGLB_CONTROL_PROMETHEUS_H_
#define MAGLB_CONTROL_PROMETHEUS_H_

#include <string>
#include <string_view>

#include "control/metrics_view.h"
#include "maglb/metrics.h"

namespace maglb {

inline constexpr std::string_view kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

/// The family name Prometheus sees: "maglb_rx_packets_total", "maglb_uptime_seconds".
std::string PrometheusName(const MetricInfo& m);
/// A label value as the exposition writes it between quotes.
std::string EscapeLabelValue(std::string_view value);
/// A help text as # HELP writes it (backslash and newline escaped).
std::string EscapeHelp(std::string_view help);

/// Every metric of the list and the VIP info, for one scrape.
std::string RenderPrometheus(const MetricsView& view);

}  // namespace maglb

#endif  // MAGLB_CONTROL_PROMETHEUS_H_
