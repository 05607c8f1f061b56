#include "maglb/toeplitz.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "maglb/packet.h"
#include "packet_builder.h"

namespace maglb {
namespace {

using testing::Ip;

// Microsoft's RSS verification key ("Verifying the RSS Hash Calculation",
// Windows driver docs), which is also the default key of several PMDs.
const std::vector<uint8_t> kMsKey = {
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
    0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
    0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

FlowKey Key(const std::string& src, uint16_t sport, const std::string& dst, uint16_t dport,
            uint8_t proto = kIpProtoTcp) {
  FlowKey k;
  const IpAddress s = Ip(src), d = Ip(dst);
  k.is_v6 = s.is_v6 ? 1 : 0;
  const size_t n = k.is_v6 ? 16 : 4;
  std::memcpy(k.src.data(), s.bytes.data(), n);
  std::memcpy(k.dst.data(), d.bytes.data(), n);
  k.src_port = sport;
  k.dst_port = dport;
  k.protocol = proto;
  return k;
}

struct Vector {
  const char* dst;
  uint16_t dport;
  const char* src;
  uint16_t sport;
  uint32_t ip_only;
  uint32_t with_tcp;
};

// The published table: destination, source, then the hash over the
// addresses alone and over addresses and TCP ports.
constexpr Vector kIpv4Vectors[] = {
    {"161.142.100.80", 1766, "66.9.149.187", 2794, 0x323e8fc2, 0x51ccc178},
    {"65.69.140.83", 4739, "199.92.111.2", 14230, 0xd718262a, 0xc626b0ea},
    {"12.22.207.184", 38024, "24.19.198.95", 12898, 0xd2d0a5de, 0x5c2b394a},
    {"209.142.163.6", 2217, "38.27.205.30", 48228, 0x82989176, 0xafc7327f},
    {"202.188.127.2", 1303, "153.39.163.191", 44251, 0x5d1809c5, 0x10e828a2},
};
constexpr Vector kIpv6Vectors[] = {
    {"3ffe:2501:200:3::1", 1766, "3ffe:2501:200:1fff::7", 2794, 0x2cc18cd5, 0x40207d3d},
    {"ff02::1", 4739, "3ffe:501:8::260:97ff:fe40:efab", 14230, 0x0f0c461c, 0xdde51bbf},
    {"fe80::200:f8ff:fe21:67cf", 38024, "3ffe:1900:4545:3:200:f8ff:fe21:67cf", 44251, 0x4b61e985,
     0x02d1feef},
};

RssConfig MsConfig(RssHashTypes types, std::vector<uint16_t> reta = {0}) {
  return RssConfig{kMsKey, types, std::move(reta)};
}

TEST(ToeplitzTest, MicrosoftVerificationVectors) {
  const RssConfig ip_only = MsConfig({.ipv4 = true, .ipv6 = true});
  const RssConfig with_tcp = MsConfig({.ipv4 = true, .ipv4_tcp = true, .ipv6 = true, .ipv6_tcp = true});
  for (const Vector& v : kIpv4Vectors) {
    const FlowKey k = Key(v.src, v.sport, v.dst, v.dport);
    EXPECT_EQ(RssHash(ip_only, k), v.ip_only) << v.dst;
    EXPECT_EQ(RssHash(with_tcp, k), v.with_tcp) << v.dst;
  }
  for (const Vector& v : kIpv6Vectors) {
    const FlowKey k = Key(v.src, v.sport, v.dst, v.dport);
    EXPECT_EQ(RssHash(ip_only, k), v.ip_only) << v.dst;
    EXPECT_EQ(RssHash(with_tcp, k), v.with_tcp) << v.dst;
  }
}

TEST(ToeplitzTest, RawHashOverWireBytes) {
  // The first IPv4 vector as the bytes the NIC hashes: source, destination.
  const uint8_t in[] = {66, 9, 149, 187, 161, 142, 100, 80};
  EXPECT_EQ(ToeplitzHash(kMsKey, in), 0x323e8fc2u);
  EXPECT_EQ(ToeplitzHash(kMsKey, {}), 0u);
  EXPECT_EQ(ToeplitzHash({kMsKey.data(), 3}, in), 0u);  // no 32-bit window at all
}

TEST(ToeplitzTest, HashTypesPickTheFields) {
  const Vector& v = kIpv4Vectors[0];
  const FlowKey tcp = Key(v.src, v.sport, v.dst, v.dport, kIpProtoTcp);
  const FlowKey udp = Key(v.src, v.sport, v.dst, v.dport, kIpProtoUdp);
  // UDP hashed on ports only when the UDP type is on; the Toeplitz input is
  // the same bytes as TCP's.
  EXPECT_EQ(RssHash(MsConfig({.ipv4 = true, .ipv4_tcp = true}), udp), v.ip_only);
  EXPECT_EQ(RssHash(MsConfig({.ipv4 = true, .ipv4_udp = true}), udp), v.with_tcp);
  EXPECT_EQ(RssHash(MsConfig({.ipv4_tcp = true}), tcp), v.with_tcp);
  // A fragment's key (no ports) is hashed on its addresses.
  const FlowKey frag = Key(v.src, 0, v.dst, 0, kIpProtoUdp);
  EXPECT_EQ(RssHash(MsConfig({.ipv4 = true, .ipv4_udp = true}), frag), v.ip_only);
  // A family whose types are all off is not hashed.
  EXPECT_EQ(RssHash(MsConfig({.ipv4_udp = true}), tcp), 0u);
  EXPECT_EQ(RssHash(MsConfig({.ipv6 = true, .ipv6_tcp = true}), tcp), 0u);
}

TEST(ToeplitzTest, OwnerIsTheRetaEntryOfTheHash) {
  // RETA of 128 entries over 4 queues, as a NIC fills it by default.
  std::vector<uint16_t> reta(128);
  for (size_t i = 0; i < reta.size(); ++i) reta[i] = static_cast<uint16_t>(i % 4);
  const RssHashTypes types{.ipv4 = true, .ipv4_tcp = true, .ipv6 = true, .ipv6_tcp = true};
  absl::StatusOr<RssOwner> owner = RssOwner::Create(MsConfig(types, reta), 4);
  ASSERT_TRUE(owner.ok()) << owner.status();
  for (const Vector& v : kIpv4Vectors) {
    EXPECT_EQ(owner->OwnerOf(Key(v.src, v.sport, v.dst, v.dport)), (v.with_tcp % 128) % 4) << v.dst;
  }
  for (const Vector& v : kIpv6Vectors) {
    EXPECT_EQ(owner->OwnerOf(Key(v.src, v.sport, v.dst, v.dport)), (v.with_tcp % 128) % 4) << v.dst;
  }
  // A RETA entry naming a queue nobody polls: unknown, not a wrong worker.
  absl::StatusOr<RssOwner> two = RssOwner::Create(MsConfig(types, reta), 2);
  ASSERT_TRUE(two.ok());
  const Vector& v = kIpv4Vectors[0];  // 0x51ccc178 % 128 = 120 -> queue 0
  EXPECT_EQ(two->OwnerOf(Key(v.src, v.sport, v.dst, v.dport)), 0u);
  const Vector& w = kIpv4Vectors[1];  // 0xc626b0ea % 128 = 106 -> queue 2
  EXPECT_EQ(two->OwnerOf(Key(w.src, w.sport, w.dst, w.dport)), RssOwner::kUnknown);
}

TEST(ToeplitzTest, OwnersTableHashEqualsTheBitwiseHash) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 2000; ++round) {
    std::vector<uint8_t> key(round % 2 == 0 ? 40 : 52);
    for (uint8_t& b : key) b = static_cast<uint8_t>(rng());
    const RssHashTypes types{.ipv4 = round % 3 != 0, .ipv4_tcp = round % 5 != 0, .ipv4_udp = true,
                             .ipv6 = round % 3 != 1, .ipv6_tcp = round % 5 != 1, .ipv6_udp = false};
    absl::StatusOr<RssOwner> owner = RssOwner::Create({key, types, {0}}, 1);
    ASSERT_TRUE(owner.ok());
    FlowKey k;
    k.is_v6 = round % 2;
    for (size_t i = 0; i < (k.is_v6 ? 16u : 4u); ++i) {
      k.src[i] = static_cast<uint8_t>(rng());
      k.dst[i] = static_cast<uint8_t>(rng());
    }
    k.src_port = static_cast<uint16_t>(rng());
    k.dst_port = static_cast<uint16_t>(rng());
    k.protocol = std::vector<uint8_t>{kIpProtoTcp, kIpProtoUdp, kIpProtoIcmp}[round % 3];
    ASSERT_EQ(owner->Hash(k), RssHash(owner->config(), k)) << "round " << round;
  }
}

TEST(ToeplitzTest, CreateRefusesShortKeysAndEmptyTables) {
  EXPECT_FALSE(RssOwner::Create({std::vector<uint8_t>(kMsKey.begin(), kMsKey.begin() + 39), {}, {0}}, 1).ok());
  EXPECT_FALSE(RssOwner::Create({kMsKey, {}, {}}, 1).ok());
  EXPECT_TRUE(RssOwner::Create({kMsKey, {}, {0}}, 1).ok());
}

}  // namespace
}  // namespace maglb
