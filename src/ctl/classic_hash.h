// The textbook recipe that published comparisons of consistent-hashing schemes
// use, so that `maglbctl analyze --classic` can be checked against their
// tables: a 32-bit string hash (FNV-1a 32 then MurmurHash3's fmix32), keys
// drawn from mulberry32, servers "S0".."S<n-1>". maglb's own placement never
// uses these (it uses XXH64); they exist to reproduce figures.
#ifndef MAGLB_CTL_CLASSIC_HASH_H_
#define MAGLB_CTL_CLASSIC_HASH_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace maglb {

/// FNV-1a, 32-bit (offset basis 0x811c9dc5, prime 0x01000193), over bytes.
uint32_t Fnv1a32(std::string_view s);

/// MurmurHash3's 32-bit finaliser: FNV-1a's low bits avalanche poorly, so the
/// recipe runs its result through this bijection.
inline constexpr uint32_t Fmix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

/// The recipe's hash: Fmix32(Fnv1a32(s)).
inline uint32_t ClassicHash32(std::string_view s) { return Fmix32(Fnv1a32(s)); }

/// mulberry32 (Tommy Ettinger's 32-bit PRNG, as commonly written in
/// JavaScript), bit-for-bit: NextU32() is the state's output before the
/// division, Next() is that divided by 2^32, in [0, 1).
class Mulberry32 {
 public:
  explicit Mulberry32(uint32_t seed) : state_(seed) {}
  uint32_t NextU32() {
    uint32_t t = state_ += 0x6d2b79f5u;
    t = (t ^ (t >> 15)) * (t | 1u);
    t ^= t + (t ^ (t >> 7)) * (t | 61u);
    return t ^ (t >> 14);
  }
  double Next() { return NextU32() / 4294967296.0; }

 private:
  uint32_t state_;
};

inline constexpr uint32_t kClassicSeed = 16;

/// `count` keys "user:" + floor(r * 1e9), r from a fresh Mulberry32(seed).
std::vector<std::string> ClassicKeys(size_t count, uint32_t seed = kClassicSeed);

/// "S<index>", the recipe's server names.
std::string ClassicServerName(uint32_t index);

}  // namespace maglb

#endif  // MAGLB_CTL_CLASSIC_HASH_H_
