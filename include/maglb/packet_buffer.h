// How large a packet buffer (a DPDK mbuf's data room) must be for an MTU.
// DPDK-free so that the arithmetic is unit-tested without a port.
//
// The packet path handles single-segment frames only (a chained mbuf is
// dropped as rx_multiseg), so one buffer must hold the largest frame the LB
// receives or builds whole: Ethernet with up to two VLAN tags plus `mtu`
// bytes of IP. Encapsulation grows a frame at its front, in the buffer's
// headroom (which must hold kMaxEncapPrepend, checked where the pool is
// made); a result over `mtu` is fragmented into new buffers of at most L2 +
// mtu or answered with ICMP, never grown in place past the MTU.
#ifndef MAGLB_PACKET_BUFFER_H_
#define MAGLB_PACKET_BUFFER_H_

#include <cstdint>

#include "maglb/packet.h"

namespace maglb {

/// The longest link-layer header the pipeline keeps or writes.
inline constexpr uint32_t kMaxL2HeaderLen =
    static_cast<uint32_t>(kEthernetHeaderLen + kMaxVlanTags * kVlanTagLen);

/// The data room (headroom included, as rte_pktmbuf_pool_create takes it) of
/// a buffer that holds any frame of `mtu` bytes of IP: headroom + L2 + mtu,
/// rounded up to 64 bytes, and never below `min_data_room` (the PMD default,
/// so small MTUs keep today's buffers).
constexpr uint32_t PacketBufferDataRoom(uint32_t mtu, uint32_t headroom, uint32_t min_data_room) {
  uint32_t room = headroom + kMaxL2HeaderLen + mtu;
  room = (room + 63u) & ~63u;
  return room < min_data_room ? min_data_room : room;
}

/// The largest MTU whose frames fit whole in a buffer of `data_room` bytes
/// (the inverse of PacketBufferDataRoom; 0 if not even the headers fit).
constexpr uint32_t MaxMtuForDataRoom(uint32_t data_room, uint32_t headroom) {
  return data_room > headroom + kMaxL2HeaderLen ? data_room - headroom - kMaxL2HeaderLen : 0;
}

}  // namespace maglb

#endif  // MAGLB_PACKET_BUFFER_H_
