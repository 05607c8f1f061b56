#include "maglb/hash.h"

#include <bit>
#include <cstring>

namespace maglb {
namespace {

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kP3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kP4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kP5 = 0x27D4EB2F165667C5ULL;

inline uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// Little-endian loads whatever the host order: the result must not depend
// on it. (memcpy compiles to one load; the swap only exists on big-endian.)
inline uint64_t LoadLe64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}
inline uint32_t LoadLe32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
  return v;
}

inline uint64_t Round(uint64_t acc, uint64_t input) {
  acc += input * kP2;
  acc = Rotl(acc, 31);
  return acc * kP1;
}

inline uint64_t MergeRound(uint64_t acc, uint64_t val) {
  acc ^= Round(0, val);
  return acc * kP1 + kP4;
}

// Folds the trailing < 32 bytes and finishes the hash.
uint64_t Finish(uint64_t h, const uint8_t* p, size_t len) {
  while (len >= 8) {
    h ^= Round(0, LoadLe64(p));
    h = Rotl(h, 27) * kP1 + kP4;
    p += 8;
    len -= 8;
  }
  if (len >= 4) {
    h ^= uint64_t{LoadLe32(p)} * kP1;
    h = Rotl(h, 23) * kP2 + kP3;
    p += 4;
    len -= 4;
  }
  while (len > 0) {
    h ^= uint64_t{*p} * kP5;
    h = Rotl(h, 11) * kP1;
    ++p;
    --len;
  }
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

uint64_t Converge(const uint64_t v[4]) {
  uint64_t h = Rotl(v[0], 1) + Rotl(v[1], 7) + Rotl(v[2], 12) + Rotl(v[3], 18);
  for (int i = 0; i < 4; ++i) h = MergeRound(h, v[i]);
  return h;
}

void InitLanes(uint64_t v[4], uint64_t seed) {
  v[0] = seed + kP1 + kP2;
  v[1] = seed + kP2;
  v[2] = seed;
  v[3] = seed - kP1;
}

inline void Stripe(uint64_t v[4], const uint8_t* p) {
  for (int i = 0; i < 4; ++i) v[i] = Round(v[i], LoadLe64(p + 8 * i));
}

}  // namespace

uint64_t Xxh64(const void* data, size_t len, uint64_t seed) {
  const auto* p = static_cast<const uint8_t*>(data);
  const size_t total = len;
  uint64_t h;
  if (len >= 32) {
    uint64_t v[4];
    InitLanes(v, seed);
    while (len >= 32) {
      Stripe(v, p);
      p += 32;
      len -= 32;
    }
    h = Converge(v);
  } else {
    h = seed + kP5;
  }
  h += total;
  return Finish(h, p, len);
}

Xxh64Stream::Xxh64Stream(uint64_t seed) : seed_(seed) { InitLanes(acc_, seed); }

void Xxh64Stream::Update(const void* data, size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
  total_len_ += len;
  if (buffered_ > 0) {
    size_t take = 32 - buffered_;
    if (take > len) take = len;
    std::memcpy(buffer_ + buffered_, p, take);
    buffered_ += take;
    p += take;
    len -= take;
    if (buffered_ < 32) return;
    Stripe(acc_, buffer_);
    buffered_ = 0;
  }
  while (len >= 32) {
    Stripe(acc_, p);
    p += 32;
    len -= 32;
  }
  std::memcpy(buffer_, p, len);
  buffered_ = len;
}

void Xxh64Stream::UpdateU64(uint64_t v) {
  uint8_t b[8];
  StoreLe64(v, b);
  Update(b, 8);
}

uint64_t Xxh64Stream::Digest() const {
  uint64_t h = total_len_ >= 32 ? Converge(acc_) : seed_ + kP5;
  h += total_len_;
  return Finish(h, buffer_, buffered_);
}

}  // namespace maglb
