// Hash mod N compiled to a LookupTable: the baseline the consistent schemes beat.
#include <algorithm>
#include <string>
#include <vector>

#include "maglb/hashing.h"
#include "maglb/maglev.h"

namespace maglb {

absl::StatusOr<LookupTable> BuildModuloTable(std::span<const BackendSpec> backends, uint32_t m) {
  if (absl::Status s = ValidateTableInput(backends, m); !s.ok()) return s;
  std::vector<std::string> names = BackendNames(backends);
  std::vector<uint32_t> order = ActiveByName(backends);
  if (order.empty()) return LookupTable({}, std::move(names));

  // Backend k of the name order takes residues [cum[k-1], cum[k]) of W.
  std::vector<uint64_t> cum;
  uint64_t total = 0;
  for (uint32_t i : order) cum.push_back(total += backends[i].weight);
  std::vector<uint16_t> slots(m);
  for (uint32_t s = 0; s < m; ++s) {
    uint64_t r = Fmix64(SlotKey(s, m) ^ kModuloSeed) % total;
    size_t k = static_cast<size_t>(std::upper_bound(cum.begin(), cum.end(), r) - cum.begin());
    slots[s] = static_cast<uint16_t>(order[k]);
  }
  return LookupTable(std::move(slots), std::move(names));
}

}  // namespace maglb
