// Deterministic hashing for everything that decides placement.
//
// maglb's placement must be identical on every process, host, build and
// version, so it never uses absl::Hash or std::hash (seeded per process or
// unspecified). The one hash is XXH64 (xxHash, 64-bit variant, as specified
// by its author), computed on little-endian byte loads so that big-endian
// hosts agree too.
#ifndef MAGLB_HASH_H_
#define MAGLB_HASH_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

namespace maglb {

/// XXH64 of `data` with `seed`.
uint64_t Xxh64(const void* data, size_t len, uint64_t seed);

inline uint64_t Xxh64(std::string_view s, uint64_t seed) {
  return Xxh64(s.data(), s.size(), seed);
}

inline uint64_t Xxh64(std::span<const uint8_t> bytes, uint64_t seed) {
  return Xxh64(bytes.data(), bytes.size(), seed);
}

/// Xxh64(data, len, seeds[k]) for k = 0..kSeeds-1, computed together: the
/// chains share their loads and loop branches and run side by side (a
/// backend's name is hashed three times per table build).
template <size_t kSeeds>
void Xxh64Seeds(std::string_view data, const uint64_t (&seeds)[kSeeds], uint64_t (&out)[kSeeds]);
extern template void Xxh64Seeds<3>(std::string_view, const uint64_t (&)[3], uint64_t (&)[3]);

/// Writes v as 8 little-endian bytes (one store on little-endian hosts).
inline void StoreLe64(uint64_t v, uint8_t* out) {
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  std::memcpy(out, &v, 8);
}

/// Streaming XXH64 for data that arrives in pieces; gives the same result as
/// the one-shot function over the concatenation.
class Xxh64Stream {
 public:
  explicit Xxh64Stream(uint64_t seed);
  void Update(const void* data, size_t len);
  void UpdateU64(uint64_t v);  // appends v as 8 little-endian bytes
  uint64_t Digest() const;

 private:
  uint64_t acc_[4];
  uint64_t seed_;
  uint64_t total_len_ = 0;
  uint8_t buffer_[32];
  size_t buffered_ = 0;
};

/// Seeds of the two independent hashes of a backend's name that give its
/// Maglev permutation (offset, skip). Fixed forever: changing them moves
/// every flow of every deployment.
inline constexpr uint64_t kMaglevOffsetSeed = 0x6d61676c622d6f66ULL;  // "maglb-of"
inline constexpr uint64_t kMaglevSkipSeed = 0x6d61676c622d736bULL;    // "maglb-sk"

}  // namespace maglb

#endif  // MAGLB_HASH_H_
