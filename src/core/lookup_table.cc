#include "maglb/lookup_table.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>

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
  for (size_t first = 0; first < slots_.size(); first += kBlock) {
    const size_t count = std::min(kBlock, slots_.size() - first);
#pragma GCC unroll 8
    for (size_t i = 0; i < count; ++i) {
      uint16_t r = rank[slots_[first + i]];
      if constexpr (std::endian::native == std::endian::big) r = __builtin_bswap16(r);
      ranked[i] = r;
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
