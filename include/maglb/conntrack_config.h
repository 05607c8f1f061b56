// The connection tracker's settings ([conntrack] of the config): its size and
// idle timeouts, without the rest of the configuration model.
#ifndef MAGLB_CONNTRACK_CONFIG_H_
#define MAGLB_CONNTRACK_CONFIG_H_

#include <cstdint>

namespace maglb {

inline constexpr uint32_t kDefaultConntrackCapacity = 1u << 20;  // flows per worker
inline constexpr uint32_t kDefaultTcpEstablishedTimeoutS = 3600;
inline constexpr uint32_t kDefaultTcpClosingTimeoutS = 10;
inline constexpr uint32_t kDefaultTcpSynTimeoutS = 30;
inline constexpr uint32_t kDefaultUdpTimeoutS = 60;

struct ConntrackConfig {
  uint32_t capacity = kDefaultConntrackCapacity;
  uint32_t tcp_established_timeout_s = kDefaultTcpEstablishedTimeoutS;
  uint32_t tcp_closing_timeout_s = kDefaultTcpClosingTimeoutS;
  uint32_t tcp_syn_timeout_s = kDefaultTcpSynTimeoutS;
  uint32_t udp_timeout_s = kDefaultUdpTimeoutS;
  uint32_t proven_protect_s = 60;  // conntrack.h "Proven flows": unevictable while seen this recently

  bool operator==(const ConntrackConfig&) const = default;
};

}  // namespace maglb

#endif  // MAGLB_CONNTRACK_CONFIG_H_
