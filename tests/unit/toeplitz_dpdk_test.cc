// maglb's Toeplitz (src/core, DPDK-free) against DPDK's own rte_softrss, on
// random keys and tuples of every length the data plane hashes.
#include <rte_thash.h>

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "maglb/toeplitz.h"

namespace maglb {
namespace {

TEST(ToeplitzDpdkTest, EqualsRteSoftrss) {
  std::mt19937_64 rng(20261201);
  for (int round = 0; round < 20000; ++round) {
    std::vector<uint8_t> key(round % 2 == 0 ? 40 : 52);
    for (uint8_t& b : key) b = static_cast<uint8_t>(rng());
    const size_t words = std::vector<size_t>{2, 3, 8, 9}[round % 4];  // v4, v4+ports, v6, v6+ports
    uint8_t in[kRssMaxInputLen];
    uint32_t tuple[kRssMaxInputLen / 4];
    for (size_t w = 0; w < words; ++w) {
      const uint32_t v = static_cast<uint32_t>(rng());
      tuple[w] = v;  // rte_softrss takes host-order words of the wire bytes
      in[4 * w] = static_cast<uint8_t>(v >> 24);
      in[4 * w + 1] = static_cast<uint8_t>(v >> 16);
      in[4 * w + 2] = static_cast<uint8_t>(v >> 8);
      in[4 * w + 3] = static_cast<uint8_t>(v);
    }
    ASSERT_EQ(ToeplitzHash(key, {in, 4 * words}),
              rte_softrss(tuple, static_cast<uint32_t>(words), key.data()))
        << "round " << round;
  }
}

}  // namespace
}  // namespace maglb
