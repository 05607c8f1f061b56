#include "maglb/lookup_table.h"

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
  Xxh64Stream stream(kFingerprintSeed);
  stream.UpdateU64(slots_.size());
  for (uint16_t b : slots_) stream.UpdateU64(name_hashes[b]);
  fingerprint_ = stream.Digest();
}

std::vector<uint32_t> LookupTable::EntryCounts() const {
  std::vector<uint32_t> counts(backend_names_.size(), 0);
  for (uint16_t b : slots_) ++counts[b];
  return counts;
}

}  // namespace maglb
