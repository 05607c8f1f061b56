#include "classic_hash.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace maglb {

uint32_t Fnv1a32(std::string_view s) {
  uint32_t h = 0x811c9dc5u;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x01000193u;
  }
  return h;
}

std::vector<std::string> ClassicKeys(size_t count, uint32_t seed) {
  Mulberry32 rng(seed);
  std::vector<std::string> keys;
  keys.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    // r < 1, so r * 1e9 < 1e9: the floor fits in 32 bits.
    keys.push_back(absl::StrCat("user:", static_cast<uint64_t>(std::floor(rng.Next() * 1e9))));
  }
  return keys;
}

std::string ClassicServerName(uint32_t index) { return absl::StrCat("S", index); }

}  // namespace maglb
