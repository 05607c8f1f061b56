// Numbers the wire protocols assign, named once: EtherTypes, IP protocol
// numbers, TCP flags, ARP operations, ICMP and ICMPv6 message types and the
// codes and options maglb reads or writes. Nothing else: no maglb types.
#ifndef MAGLB_PROTOCOL_NUMBERS_H_
#define MAGLB_PROTOCOL_NUMBERS_H_

#include <cstdint>

namespace maglb {

// EtherTypes (IEEE 802.3, host order).
inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeIpv6 = 0x86DD;
inline constexpr uint16_t kEtherTypeArp = 0x0806;
inline constexpr uint16_t kEtherTypeVlan = 0x8100;   // 802.1Q
inline constexpr uint16_t kEtherTypeQinQ = 0x88A8;   // 802.1ad service tag

// IP protocol numbers / IPv6 next headers (IANA).
inline constexpr uint8_t kIpProtoIcmp = 1;
inline constexpr uint8_t kIpProtoIpip = 4;
inline constexpr uint8_t kIpProtoTcp = 6;
inline constexpr uint8_t kIpProtoUdp = 17;
inline constexpr uint8_t kIpProtoIpv6 = 41;
inline constexpr uint8_t kIpProtoGre = 47;
inline constexpr uint8_t kIpProtoIcmpv6 = 58;

/// TCP flag bits as they sit in the TCP header's flags byte.
inline constexpr uint8_t kTcpFin = 0x01;
inline constexpr uint8_t kTcpSyn = 0x02;
inline constexpr uint8_t kTcpRst = 0x04;
inline constexpr uint8_t kTcpAck = 0x10;

// ARP (RFC 826): the hardware type of Ethernet, and the operations.
inline constexpr uint16_t kArpHardwareEthernet = 1;
inline constexpr uint16_t kArpRequest = 1;
inline constexpr uint16_t kArpReply = 2;

// ICMP types (RFC 792) and the one code maglb sends (RFC 1191).
inline constexpr uint8_t kIcmpEchoReply = 0;
inline constexpr uint8_t kIcmpDestUnreachable = 3;
inline constexpr uint8_t kIcmpCodeFragmentationNeeded = 4;  // of kIcmpDestUnreachable
inline constexpr uint8_t kIcmpEchoRequest = 8;
inline constexpr uint8_t kIcmpTimeExceeded = 11;
inline constexpr uint8_t kIcmpParameterProblem = 12;
inline constexpr uint8_t kIcmpTimestamp = 13;
inline constexpr uint8_t kIcmpTimestampReply = 14;

// ICMPv6 types (RFC 4443, RFC 4861). Types below 128 are errors.
inline constexpr uint8_t kIcmpv6DestUnreachable = 1;
inline constexpr uint8_t kIcmpv6PacketTooBig = 2;
inline constexpr uint8_t kIcmpv6TimeExceeded = 3;
inline constexpr uint8_t kIcmpv6ParameterProblem = 4;
inline constexpr uint8_t kIcmpv6FirstInformational = 128;
inline constexpr uint8_t kIcmpv6EchoRequest = 128;
inline constexpr uint8_t kIcmpv6EchoReply = 129;
inline constexpr uint8_t kIcmpv6NeighborSolicitation = 135;
inline constexpr uint8_t kIcmpv6NeighborAdvertisement = 136;

// Neighbour discovery option types (RFC 4861 4.6.1).
inline constexpr uint8_t kNdOptSourceLinkAddress = 1;
inline constexpr uint8_t kNdOptTargetLinkAddress = 2;

}  // namespace maglb

#endif  // MAGLB_PROTOCOL_NUMBERS_H_
