#include "maglb/lookup_table.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "hash_order.h"
#include "maglb/hash.h"

namespace maglb {

std::vector<std::string> BackendNames(std::span<const BackendSpec> backends) {
  std::vector<std::string> names;
  names.reserve(backends.size());
  for (const BackendSpec& b : backends) names.push_back(b.name);
  return names;
}
namespace {
constexpr uint64_t kFingerprintSeed = LookupTable::kNameHashSeed;

// Up to 16 backends a slot's rank is one byte shuffle away: 16 slots a step
// where the plain loop takes two loads and a store a slot (a twentieth of a
// Maglev build at N = 10, M = 65537).
constexpr size_t kShuffleRanks = 16;

#if defined(__x86_64__)
__attribute__((target("avx2"))) void RankByShuffle(const uint16_t* slots, size_t count,
                                                   const uint8_t (&rank)[kShuffleRanks], uint16_t* out) {
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rank)));
  // Each slot's high byte becomes 0x80, which the shuffle turns into 0: the
  // low byte (the backend, < 16) is looked up, little-endian as the stream wants.
  const __m256i high = _mm256_set1_epi16(static_cast<int16_t>(0x8000));
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m256i s = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(slots + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_shuffle_epi8(table, _mm256_or_si256(s, high)));
  }
  for (; i < count; ++i) out[i] = rank[slots[i] % kShuffleRanks];
}

bool RankByShuffleRuns() {
  static const bool runs = [] {
    __builtin_cpu_init();  // right even when the first table is made in a static constructor
    return __builtin_cpu_supports("avx2");
  }();
  return runs;
}
#else
bool RankByShuffleRuns() { return false; }
void RankByShuffle(const uint16_t*, size_t, const uint8_t (&)[kShuffleRanks], uint16_t*) {}
#endif
}  // namespace

uint64_t LookupTable::NameHash(std::string_view name) { return Xxh64(name, kNameHashSeed); }

LookupTable::LookupTable(std::vector<uint16_t> slots,
                         std::vector<std::string> backend_names)
    : LookupTable(std::move(slots), std::move(backend_names), Known{}) {}

LookupTable::LookupTable(std::vector<uint16_t> slots,
                         std::vector<std::string> backend_names,
                         Known known)
    : slots_(std::move(slots)), backend_names_(std::move(backend_names)) {
  if (slots_.empty()) return;
  // Identity by name, not by list position: rank the names that own slots in
  // a canonical order (by name hash, ties by name; integers sort cheaply),
  // hash those names, then each slot's rank.
  // A part of the wrong length is ignored (worked out here instead).
  if (known.name_hashes.size() != backend_names_.size()) known.name_hashes = {};
  std::vector<uint8_t> found;
  std::span<const uint8_t> owns = known.owns;
  if (owns.size() != backend_names_.size()) {
    found.assign(backend_names_.size(), 0);
#pragma GCC unroll 8
    for (uint16_t b : slots_) found[b] = 1;  // a store per slot, no read-modify-write
    owns = found;
  }
  std::vector<HashedIndex> present;
  for (size_t i = 0; i < owns.size(); ++i) {
    if (owns[i]) {
      present.push_back({known.name_hashes.empty() ? NameHash(backend_names_[i]) : known.name_hashes[i],
                         static_cast<uint16_t>(i)});
    }
  }
  SortByHashThenName(present, [&](uint16_t i) -> const std::string& { return backend_names_[i]; });
  std::vector<uint16_t> rank(backend_names_.size(), 0);
  Xxh64Stream stream(kFingerprintSeed);
  stream.UpdateU64(slots_.size());
  stream.UpdateU64(present.size());
  // Each name as its length (8 bytes, little-endian) and its bytes: laid out
  // first and hashed in one call (two calls a name were 5% of a build at
  // 5000 backends). The buffer is kept by each thread unless it grew large.
  thread_local std::vector<uint8_t> laid_out;
  size_t bytes = 0;
  for (const HashedIndex& p : present) bytes += 8 + backend_names_[p.index].size();
  laid_out.resize(bytes);
  uint8_t* out = laid_out.data();
  for (size_t r = 0; r < present.size(); ++r) {
    const std::string& name = backend_names_[present[r].index];
    rank[present[r].index] = static_cast<uint16_t>(r);
    StoreLe64(name.size(), out);
    std::memcpy(out + 8, name.data(), name.size());
    out += 8 + name.size();
  }
  stream.Update(laid_out.data(), bytes);
  if (laid_out.capacity() > (size_t{1} << 20)) laid_out = {};
  // Ranks as little-endian 16-bit words, hashed a block at a time (the hash
  // is streaming: the same digest as over one array of all the ranks).
  constexpr size_t kBlock = 2048;
  uint16_t ranked[kBlock];
  const bool shuffle = backend_names_.size() <= kShuffleRanks && RankByShuffleRuns();
  uint8_t small_rank[kShuffleRanks] = {};
  if (shuffle) std::copy(rank.begin(), rank.end(), small_rank);
  for (size_t first = 0; first < slots_.size(); first += kBlock) {
    const size_t count = std::min(kBlock, slots_.size() - first);
    if (shuffle) {
      RankByShuffle(&slots_[first], count, small_rank, ranked);
    } else {
#pragma GCC unroll 8
      for (size_t i = 0; i < count; ++i) {
        uint16_t r = rank[slots_[first + i]];
        if constexpr (std::endian::native == std::endian::big) r = __builtin_bswap16(r);
        ranked[i] = r;
      }
    }
    stream.Update(ranked, count * sizeof(uint16_t));
  }
  fingerprint_ = stream.Digest();
}

std::vector<uint32_t> LookupTable::EntryCounts() const {
  std::vector<uint32_t> counts(backend_names_.size(), 0);
  for (uint16_t b : slots_) ++counts[b];
  return counts;
}

}  // namespace maglb
