#include "maglb/maglev.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "maglb/hash.h"
#include "maglb/prime.h"

namespace maglb {

absl::Status ValidateTableInput(std::span<const BackendSpec> backends, uint32_t m) {
  if (m < kMinTableSize || m > kMaxTableSize || !IsPrime(m)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "table size %u must be a prime from %u to %u (65537 is the usual choice; "
        "about 100 x the number of backends keeps shares within 1%%)",
        m, kMinTableSize, kMaxTableSize));
  }
  if (backends.size() > LookupTable::kMaxBackends) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%u backends: at most %u per VIP", backends.size(), LookupTable::kMaxBackends));
  }
  if (backends.size() > m) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "table size %u is smaller than the number of backends (%u): "
        "every backend needs slots; use a larger prime", m, backends.size()));
  }
  absl::flat_hash_set<std::string_view> seen;
  for (const BackendSpec& b : backends) {
    if (b.name.empty()) {
      return absl::InvalidArgumentError("a backend has an empty name");
    }
    if (!seen.insert(b.name).second) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "backend name \"%s\" appears twice: names identify backends and must "
          "be unique", b.name));
    }
    if (b.weight > kMaxWeight) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "backend \"%s\": weight %u is above the maximum %u", b.name, b.weight,
          kMaxWeight));
    }
  }
  return absl::OkStatus();
}

MaglevPermutation MaglevPermutationOf(std::string_view name, uint32_t m) {
  return MaglevPermutation{
      .offset = static_cast<uint32_t>(Xxh64(name, kMaglevOffsetSeed) % m),
      .skip = static_cast<uint32_t>(Xxh64(name, kMaglevSkipSeed) % (m - 1) + 1),
  };
}

absl::StatusOr<LookupTable> BuildMaglevTable(std::span<const BackendSpec> backends,
                                             uint32_t m) {
  if (absl::Status s = ValidateTableInput(backends, m); !s.ok()) return s;

  std::vector<std::string> names;
  names.reserve(backends.size());
  for (const BackendSpec& b : backends) names.push_back(b.name);

  // Turn order is the byte order of names: "the table is filled in that order".
  struct Claimant {
    uint32_t next;    // the next slot of this backend's permutation to try
    uint32_t skip;
    uint32_t weight;
    uint32_t credit;  // < max_weight between turns, so no overflow
    uint16_t index;   // position in the caller's list
  };
  std::vector<uint16_t> order(backends.size());
  std::iota(order.begin(), order.end(), uint16_t{0});
  std::sort(order.begin(), order.end(), [&](uint16_t a, uint16_t b) {
    return backends[a].name < backends[b].name;
  });
  std::vector<Claimant> claimants;
  uint32_t max_weight = 0;
  for (uint16_t i : order) {
    if (backends[i].weight == 0) continue;
    MaglevPermutation p = MaglevPermutationOf(backends[i].name, m);
    claimants.push_back({p.offset, p.skip, backends[i].weight, 0, i});
    max_weight = std::max(max_weight, backends[i].weight);
  }
  if (claimants.empty()) return LookupTable({}, std::move(names));

  constexpr uint16_t kEmpty = 0xFFFF;  // never a valid index: kMaxBackends caps at 0xFFFF
  std::vector<uint16_t> slots(m, kEmpty);
  uint32_t filled = 0;
  while (true) {
    for (Claimant& c : claimants) {
      c.credit += c.weight;
      while (c.credit >= max_weight) {
        c.credit -= max_weight;
        // Walk the permutation incrementally: next += skip (mod M) by one
        // compare-and-subtract, never a multiply or a division.
        uint32_t pos = c.next;
        while (slots[pos] != kEmpty) {
          pos += c.skip;
          if (pos >= m) pos -= m;
        }
        slots[pos] = c.index;
        pos += c.skip;
        if (pos >= m) pos -= m;
        c.next = pos;
        if (++filled == m) return LookupTable(std::move(slots), std::move(names));
      }
    }
  }
}

}  // namespace maglb
