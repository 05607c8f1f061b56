#include "maglb/lookup_table.h"

#include <algorithm>
#include <utility>

#include "maglb/hash.h"

namespace maglb {
namespace {
constexpr uint64_t kFingerprintSeed = 0x6d61676c622d6670ULL;  // "maglb-fp"
}  // namespace

LookupTable::LookupTable(std::vector<uint16_t> slots,
                         std::vector<std::string> backend_names)
    : slots_(std::move(slots)), backend_names_(std::move(backend_names)) {
  if (slots_.empty()) return;
  std::vector<uint64_t> name_hashes(backend_names_.size());
  for (size_t i = 0; i < backend_names_.size(); ++i) {
    name_hashes[i] = Xxh64(backend_names_[i], kFingerprintSeed);
  }
  // Little-endian bytes in blocks: one streaming call per 4 KiB, not per slot.
  Xxh64Stream stream(kFingerprintSeed);
  stream.UpdateU64(slots_.size());
  constexpr size_t kBlock = 512;
  uint8_t block[kBlock * 8];
  for (size_t i = 0; i < slots_.size(); i += kBlock) {
    const size_t n = std::min(kBlock, slots_.size() - i);
    for (size_t k = 0; k < n; ++k) {
      StoreLe64(name_hashes[slots_[i + k]], block + 8 * k);
    }
    stream.Update(block, n * 8);
  }
  fingerprint_ = stream.Digest();
}

std::vector<uint32_t> LookupTable::EntryCounts() const {
  std::vector<uint32_t> counts(backend_names_.size(), 0);
  for (uint16_t b : slots_) ++counts[b];
  return counts;
}

}  // namespace maglb
