#include "maglb/hash.h"

#include <bit>
#include <cstring>

#include "maglb/xxh64_internal.h"

namespace maglb {
namespace {

using namespace xxh64_internal;  // NOLINT: the primitives of this one hash

// Folds the trailing < 32 bytes into each of kChains hashes of the same
// bytes (Xxh64Seeds runs several side by side) and finishes them.
template <size_t kChains>
void Finish(uint64_t (&h)[kChains], const uint8_t* p, size_t len) {
  while (len >= 8) {
    const uint64_t lane = LoadLe64(p);
    for (uint64_t& x : h) x = Tail8(x, lane);
    p += 8;
    len -= 8;
  }
  if (len >= 4) {
    const uint64_t word = uint64_t{LoadLe32(p)} * kP1;
    for (uint64_t& x : h) x = std::rotl(x ^ word, 23) * kP2 + kP3;
    p += 4;
    len -= 4;
  }
  while (len > 0) {
    const uint64_t byte = uint64_t{*p} * kP5;
    for (uint64_t& x : h) x = std::rotl(x ^ byte, 11) * kP1;
    ++p;
    --len;
  }
  for (uint64_t& x : h) x = Avalanche(x);
}

uint64_t Finish(uint64_t h, const uint8_t* p, size_t len) {
  uint64_t one[1] = {h};
  Finish(one, p, len);
  return one[0];
}

uint64_t Converge(const uint64_t v[4]) {
  uint64_t h = std::rotl(v[0], 1) + std::rotl(v[1], 7) + std::rotl(v[2], 12) + std::rotl(v[3], 18);
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

template <size_t kSeeds>
void Xxh64Seeds(std::string_view data, const uint64_t (&seeds)[kSeeds], uint64_t (&out)[kSeeds]) {
  const size_t len = data.size();
  if (len >= 32) {  // not a name's length: one at a time
    for (size_t k = 0; k < kSeeds; ++k) out[k] = Xxh64(data.data(), len, seeds[k]);
    return;
  }
  for (size_t k = 0; k < kSeeds; ++k) out[k] = seeds[k] + kP5 + len;  // Xxh64's start below 32 bytes
  Finish(out, reinterpret_cast<const uint8_t*>(data.data()), len);
}
template void Xxh64Seeds<3>(std::string_view, const uint64_t (&)[3], uint64_t (&)[3]);

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
