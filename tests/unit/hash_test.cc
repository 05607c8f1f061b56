#include "maglb/hash.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace maglb {
namespace {

// Golden values from python3-xxhash (Debian's binding of the reference C
// implementation), an oracle nobody here wrote.
TEST(Xxh64Test, MatchesReferenceImplementation) {
  EXPECT_EQ(Xxh64("", 0), 0xef46db3751d8e999ULL);
  EXPECT_EQ(Xxh64("a", 0), 0xd24ec4f1a98c6e5bULL);
  EXPECT_EQ(Xxh64("abc", 0), 0x44bc2cf5ad770999ULL);
  EXPECT_EQ(Xxh64("backend-1", kMaglevOffsetSeed), 0x718602f1bb0e2155ULL);
  EXPECT_EQ(Xxh64("The quick brown fox jumps over the lazy dog", 0), 0x0b242d361fda71bcULL);
  std::vector<uint8_t> bytes(100);
  for (int i = 0; i < 100; ++i) bytes[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(Xxh64(bytes, 12345), 0x028ba1ae2de4de27ULL);
}

TEST(Xxh64Test, StreamingEqualsOneShotForAnySplit) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<uint8_t> data(rng() % 300);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    uint64_t seed = rng();
    Xxh64Stream s(seed);
    size_t pos = 0;
    while (pos < data.size()) {
      size_t n = std::min<size_t>(rng() % 40, data.size() - pos);
      s.Update(data.data() + pos, n);
      pos += n;
    }
    EXPECT_EQ(s.Digest(), Xxh64(data, seed)) << "length " << data.size();
  }
}

// The fused form gives each seed's one-shot hash, at every length (short
// names take its lane-by-lane path, 32 bytes and more the plain one), for
// the reference's golden value too.
TEST(Xxh64Test, SeveralSeedsAtOnceEqualOneShot) {
  std::mt19937_64 rng(11);
  for (size_t len = 0; len <= 80; ++len) {
    std::string data(len, '\0');
    for (char& c : data) c = static_cast<char>(rng());
    const uint64_t seeds[3] = {rng(), 0, kMaglevSkipSeed};
    uint64_t out[3];
    Xxh64Seeds(data, seeds, out);
    for (int k = 0; k < 3; ++k) EXPECT_EQ(out[k], Xxh64(data, seeds[k])) << "length " << len << " seed " << k;
  }
  const uint64_t seeds[3] = {kMaglevOffsetSeed, 0, 0};
  uint64_t out[3];
  Xxh64Seeds("backend-1", seeds, out);
  EXPECT_EQ(out[0], 0x718602f1bb0e2155ULL);
  Xxh64Seeds("abc", seeds, out);
  EXPECT_EQ(out[1], 0x44bc2cf5ad770999ULL);
}

TEST(Xxh64Test, SeedChangesResult) {
  EXPECT_NE(Xxh64("web-1", kMaglevOffsetSeed), Xxh64("web-1", kMaglevSkipSeed));
}

}  // namespace
}  // namespace maglb
