// A flow's identity on the packet path.
#ifndef MAGLB_FLOW_H_
#define MAGLB_FLOW_H_

#include <array>
#include <cstdint>
#include <cstring>

namespace maglb {

/// The 5-tuple of a packet, as the parser extracts it. Fixed 40 bytes, no
/// padding holes, so it can be hashed and compared as raw bytes. IPv4
/// addresses use bytes [0..3] and leave the rest zero. Ports are in host byte
/// order; for ICMP echo the identifier stands in the source port, and for
/// non-first fragments (no L4 header) both ports are 0 (see the fragment
/// policy in packet.h).
struct FlowKey {
  std::array<uint8_t, 16> src{};
  std::array<uint8_t, 16> dst{};
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  uint8_t protocol = 0;  // kIpProto* (protocol_numbers.h)
  uint8_t is_v6 = 0;
  uint16_t reserved = 0;  // always 0

  friend bool operator==(const FlowKey& a, const FlowKey& b) {
    return std::memcmp(&a, &b, sizeof(FlowKey)) == 0;
  }
};
static_assert(sizeof(FlowKey) == 40, "FlowKey must stay packed: it is hashed as bytes");

}  // namespace maglb

#endif  // MAGLB_FLOW_H_
