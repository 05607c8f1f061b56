// [metrics]: the Prometheus exporter (control/metrics_task.h). Off unless the
// section is there; its one key, listen, names the address to bind
// explicitly ("127.0.0.1:9469", "[::1]:9469"): no host names, no wildcard
// left implicit, no port chosen by the kernel.
#ifndef MAGLB_METRICS_CONFIG_H_
#define MAGLB_METRICS_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "maglb/ip_address.h"

namespace maglb {

struct MetricsListen {
  IpAddress address;
  uint16_t port = 0;
  friend bool operator==(const MetricsListen&, const MetricsListen&) = default;
};

/// "IP:PORT" or "[IPv6]:PORT", port 1..65535. nullopt with `why` set (what
/// is wrong, for an operator) otherwise.
std::optional<MetricsListen> ParseMetricsListen(std::string_view text, std::string* why);

struct MetricsConfig {
  /// listen as written ("127.0.0.1:9469"); empty: no exporter.
  std::string listen;
  MetricsListen address;  ///< listen, parsed
  int line = 0;           ///< of listen, for messages

  bool enabled() const { return !listen.empty(); }
  bool operator==(const MetricsConfig&) const = default;
};

}  // namespace maglb

#endif  // MAGLB_METRICS_CONFIG_H_
