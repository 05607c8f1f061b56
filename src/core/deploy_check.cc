#include "maglb/deploy_check.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace maglb {

namespace {

CheckFinding Ok(std::string text) { return {CheckFinding::Level::kOk, std::move(text)}; }
CheckFinding Warning(std::string text) { return {CheckFinding::Level::kWarning, std::move(text)}; }
CheckFinding Error(std::string text) { return {CheckFinding::Level::kError, std::move(text)}; }

// A descriptor count against the device's limits, as
// rte_eth_dev_adjust_nb_rx_tx_desc would change it.
void CheckDescriptors(const std::string& port, const char* ring, uint16_t want,
                      const DescriptorLimits& lim, std::vector<CheckFinding>* out) {
  const uint16_t align = std::max<uint16_t>(lim.align, 1);
  if (want > lim.max || want < lim.min || want % align != 0) {
    uint32_t adjusted = std::clamp<uint32_t>(want, lim.min, lim.max);
    adjusted = (adjusted + align - 1) / align * align;
    out->push_back(Warning(absl::StrFormat(
        "%s: %u %s descriptors per queue are outside the device's %u..%u (multiple of %u): "
        "maglb uses %u, adjusted as DPDK does",
        port, want, ring, lim.min, lim.max, align, adjusted)));
  } else {
    out->push_back(Ok(absl::StrFormat("%s: %u %s descriptors per queue (device: %u..%u)", port, want,
                                      ring, lim.min, lim.max)));
  }
}

}  // namespace

std::string CheckFinding::ToString() const {
  switch (level) {
    case Level::kOk:
      return "ok: " + text;
    case Level::kWarning:
      return "warning: " + text;
    case Level::kError:
      return "error: " + text;
  }
  return text;
}

std::vector<CheckFinding> CheckQueues(const PortFacts& port, uint32_t worker_lcores, uint16_t queues,
                                      uint16_t rx_descriptors, uint16_t tx_descriptors) {
  std::vector<CheckFinding> out;
  const uint16_t max_queues = std::min(port.max_rx_queues, port.max_tx_queues);
  if (worker_lcores > 1 && !port.rss && !port.kernel_fanout && !port.source_per_queue) {
    out.push_back(Warning(absl::StrFormat(
        "%s: no RSS for IP/TCP/UDP flows: one queue, one worker; %u of %u worker lcores would idle "
        "(give -l one main and one worker lcore, or use a port with RSS)",
        port.label, worker_lcores - 1, worker_lcores)));
  } else if (worker_lcores > max_queues) {
    out.push_back(Warning(absl::StrFormat(
        "%s: at most %u queue pairs, %u worker lcores given: %u would idle (give -l %u lcores: "
        "the main one and %u workers)",
        port.label, max_queues, worker_lcores, worker_lcores - max_queues, max_queues + 1,
        max_queues)));
  } else {
    out.push_back(Ok(absl::StrFormat("%s: %u queue pair%s, one per worker lcore (%s; device: up to %u)",
                                     port.label, queues, queues == 1 ? "" : "s",
                                     queues == 1 ? "single queue"
                                     : port.rss           ? "RSS"
                                     : port.kernel_fanout ? "kernel fanout"
                                                          : "one source per queue",
                                     max_queues)));
  }
  CheckDescriptors(port.label, "RX", rx_descriptors, port.rx, &out);
  CheckDescriptors(port.label, "TX", tx_descriptors, port.tx, &out);
  return out;
}

CheckFinding CheckNuma(const PortFacts& port, const std::vector<LcoreSocket>& workers,
                       const std::string& node_cpus) {
  if (port.numa_node < 0) {
    return Ok(absl::StrFormat("%s: no NUMA node (a virtual device): lcore placement not checked",
                              port.label));
  }
  std::vector<std::string> away;
  for (const LcoreSocket& w : workers) {
    if (w.socket != port.numa_node) away.push_back(absl::StrFormat("%u (node %d)", w.lcore, w.socket));
  }
  if (away.empty()) {
    return Ok(absl::StrFormat("%s: NUMA node %d; %s on it", port.label, port.numa_node,
                              workers.size() == 1 ? std::string("its worker lcore")
                                                  : absl::StrFormat("all %u worker lcores", workers.size())));
  }
  return Warning(absl::StrFormat(
      "%s: NUMA node %d, but worker lcore%s %s on another node: every packet crosses the "
      "interconnect (slower, more jitter); give -l with lcores of node %d%s",
      port.label, port.numa_node, away.size() == 1 ? "" : "s", absl::StrJoin(away, ", "),
      port.numa_node, node_cpus.empty() ? "" : absl::StrCat(" (CPUs ", node_cpus, ")")));
}

CheckFinding CheckMemory(const std::string& what, uint64_t need, const std::string& pool,
                         uint64_t available, const std::string& fix) {
  const std::string figures = absl::StrFormat("%s needs %s; %s: %s available", what, HumanBytes(need),
                                              pool, HumanBytes(available));
  if (need > available) return Error(absl::StrCat(figures, ": does not fit; ", fix));
  if (need > available - available / 10) {
    return Warning(absl::StrCat(figures, ": less than 10% to spare; ", fix));
  }
  return Ok(figures);
}

std::string HumanBytes(uint64_t bytes) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024 && unit < 4) {
    v /= 1024;
    ++unit;
  }
  if (unit == 0) return absl::StrFormat("%u B", bytes);
  // Two literal formats: absl checks them at compile time (clang refuses a chosen one).
  return v < 10 ? absl::StrFormat("%.1f %s", v, kUnits[unit]) : absl::StrFormat("%.0f %s", v, kUnits[unit]);
}

}  // namespace maglb
