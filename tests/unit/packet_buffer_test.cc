// Packet buffer sizing: the data room follows the MTU (jumbo frames), and the
// MTU a pool can hold is its inverse.
#include "maglb/packet_buffer.h"

#include <gtest/gtest.h>

namespace maglb {
namespace {

// DPDK's defaults, spelled out (the core library includes no DPDK header).
constexpr uint32_t kHeadroom = 128;                       // RTE_PKTMBUF_HEADROOM
constexpr uint32_t kDefaultRoom = 2048 + kHeadroom;       // RTE_MBUF_DEFAULT_BUF_SIZE

TEST(PacketBufferTest, StandardMtuKeepsTheDefaultBuffer) {
  EXPECT_EQ(PacketBufferDataRoom(1500, kHeadroom, kDefaultRoom), kDefaultRoom);
  EXPECT_EQ(PacketBufferDataRoom(1280, kHeadroom, kDefaultRoom), kDefaultRoom);
}

TEST(PacketBufferTest, EveryMtuFitsWholeWithTagsAndHeadroom) {
  for (uint32_t mtu = 1280; mtu <= 9216; ++mtu) {
    const uint32_t room = PacketBufferDataRoom(mtu, kHeadroom, kDefaultRoom);
    // The largest frame: two VLAN tags, Ethernet, mtu bytes of IP.
    ASSERT_GE(room, kHeadroom + 14 + 2 * 4 + mtu) << "mtu " << mtu;
    ASSERT_EQ(room % 64, 0u) << "mtu " << mtu;
    ASSERT_LT(room, kHeadroom + 14 + 2 * 4 + mtu + 64 + kDefaultRoom) << "mtu " << mtu;
    ASSERT_GE(MaxMtuForDataRoom(room, kHeadroom), mtu) << "mtu " << mtu;
    // No larger than needed beyond the rounding (or the default floor).
    if (room > kDefaultRoom) {
      ASSERT_LT(MaxMtuForDataRoom(room, kHeadroom), mtu + 64) << "mtu " << mtu;
    }
  }
}

TEST(PacketBufferTest, JumboFrames) {
  // 9000 + 22 + 128 = 9150 -> 9152; a 9000-byte fragment no longer needs 2 KB.
  EXPECT_EQ(PacketBufferDataRoom(9000, kHeadroom, kDefaultRoom), 9152u);
  EXPECT_EQ(MaxMtuForDataRoom(9152, kHeadroom), 9002u);
  // What today's 2 KB buffer holds: the "~2034" of the issue, less VLAN tags.
  EXPECT_EQ(MaxMtuForDataRoom(kDefaultRoom, kHeadroom), 2026u);
  EXPECT_EQ(MaxMtuForDataRoom(100, kHeadroom), 0u);
}

}  // namespace
}  // namespace maglb
