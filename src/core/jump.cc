// Jump consistent hashing (Lamping & Veach, 2014) compiled to a LookupTable.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "maglb/hashing.h"
#include "maglb/maglev.h"

namespace maglb {

int32_t JumpConsistentHash(uint64_t key, int32_t num_buckets) {
  // The paper's code, verbatim in effect: a linear congruential step per jump.
  int64_t b = -1, j = 0;
  while (j < num_buckets) {
    b = j;
    key = key * 2862933555777941757ULL + 1;
    j = static_cast<int64_t>(static_cast<double>(b + 1) *
                             (static_cast<double>(1LL << 31) /
                              static_cast<double>((key >> 33) + 1)));
  }
  return static_cast<int32_t>(b);
}

absl::Status ValidateJumpInput(std::span<const BackendSpec> backends) {
  const BackendSpec* first = nullptr;
  for (const BackendSpec& b : backends) {
    if (b.weight == 0) continue;
    if (first == nullptr) {
      first = &b;
    } else if (b.weight != first->weight) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "jump hash has no weights, but backend \"%s\" has weight %u and \"%s\" has %u: "
          "give every serving backend the same weight (0 still drains), or choose "
          "\"rendezvous\" or \"maglev\", which honour weights",
          b.name, b.weight, first->name, first->weight));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<LookupTable> BuildJumpTable(std::span<const BackendSpec> backends, uint32_t m) {
  if (absl::Status s = ValidateTableInput(backends, m); !s.ok()) return s;
  if (absl::Status s = ValidateJumpInput(backends); !s.ok()) return s;
  std::vector<std::string> names = BackendNames(backends);

  // Buckets: every backend, draining ones too, in byte order of names, so that
  // draining a backend does not renumber the others.
  const std::vector<uint32_t> bucket = AllByName(backends);
  bool any_live = false;
  for (const BackendSpec& b : backends) any_live |= b.weight > 0;
  if (!any_live) return LookupTable({}, std::move(names));

  const int32_t n = static_cast<int32_t>(bucket.size());
  std::vector<uint16_t> slots(m);
  for (uint32_t s = 0; s < m; ++s) {
    uint64_t key = Fmix64(SlotKey(s, m) ^ kJumpSeed);
    int32_t b = JumpConsistentHash(key, n);
    // A draining bucket passes the slot on with a fresh key: each attempt is
    // itself a jump over the same buckets, so consistency holds attempt by
    // attempt and the drained backend's slots spread evenly.
    for (int attempt = 0; attempt < kJumpRetries && backends[bucket[b]].weight == 0; ++attempt) {
      key = Fmix64(key + 0x9e3779b97f4a7c15ULL);
      b = JumpConsistentHash(key, n);
    }
    while (backends[bucket[b]].weight == 0) b = (b + 1) % n;  // all but vanishingly rare
    slots[s] = static_cast<uint16_t>(bucket[b]);
  }
  return LookupTable(std::move(slots), std::move(names));
}

}  // namespace maglb
