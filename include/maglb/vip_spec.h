// What identifies a VIP on the wire, (address, protocol, port): all that the
// packet path's VIP matching needs of the configuration.
#ifndef MAGLB_VIP_SPEC_H_
#define MAGLB_VIP_SPEC_H_

#include <cstdint>
#include <string_view>

#include "maglb/ip_address.h"
#include "maglb/protocol_numbers.h"

namespace maglb {

/// A VIP's transport protocol; the values are the IP protocol numbers.
enum class Protocol : uint8_t { kTcp = kIpProtoTcp, kUdp = kIpProtoUdp };

std::string_view ToString(Protocol p);

struct VipSpec {
  IpAddress address;
  Protocol protocol = Protocol::kTcp;
  uint16_t port = 0;  // 0: every port
};

}  // namespace maglb

#endif  // MAGLB_VIP_SPEC_H_
