// The XXH64 building blocks (constants, rounds, avalanche, little-endian
// loads), shared by the general Xxh64 (hash.cc) and the fixed-length FlowHash
// (flow_hash.h) so that the two cannot drift apart.
#ifndef MAGLB_XXH64_INTERNAL_H_
#define MAGLB_XXH64_INTERNAL_H_

#include <bit>
#include <cstdint>
#include <cstring>

namespace maglb::xxh64_internal {

inline constexpr uint64_t kP1 = 0x9E3779B185EBCA87ULL;
inline constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4FULL;
inline constexpr uint64_t kP3 = 0x165667B19E3779F9ULL;
inline constexpr uint64_t kP4 = 0x85EBCA77C2B2AE63ULL;
inline constexpr uint64_t kP5 = 0x27D4EB2F165667C5ULL;

// Little-endian loads whatever the host order: the result must not depend on
// it. (memcpy compiles to one load; the swap only exists on big-endian.)
inline uint64_t LoadLe64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}
inline uint32_t LoadLe32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
  return v;
}

inline uint64_t Round(uint64_t acc, uint64_t input) {
  acc += input * kP2;
  acc = std::rotl(acc, 31);
  return acc * kP1;
}

inline uint64_t MergeRound(uint64_t acc, uint64_t val) {
  acc ^= Round(0, val);
  return acc * kP1 + kP4;
}

// One 8-byte tail step of the finalisation.
inline uint64_t Tail8(uint64_t h, uint64_t lane) {
  h ^= Round(0, lane);
  return std::rotl(h, 27) * kP1 + kP4;
}

inline uint64_t Avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

}  // namespace maglb::xxh64_internal

#endif  // MAGLB_XXH64_INTERNAL_H_
