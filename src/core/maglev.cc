#include "maglb/maglev.h"

#include <algorithm>
#include <bit>
#include <cmath>
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

namespace {

// (a + b) mod m for a, b < m: one add and a conditional subtract.
inline uint32_t AddMod(uint32_t a, uint32_t b, uint32_t m) {
  uint32_t s = a + b;
  return s >= m ? s - m : s;
}

// a * b mod m for a, b < m < 2^23 without a division: the product is exact in
// a double (< 2^46), the quotient estimate is off by at most one, and the
// integer correction makes the result exact (so deterministic on any host).
inline uint32_t MulMod(uint32_t a, uint32_t b, uint32_t m, double inv_m) {
  const uint64_t x = uint64_t{a} * b;
  const uint64_t q = static_cast<uint64_t>(static_cast<double>(x) * inv_m);
  int64_t r = static_cast<int64_t>(x - q * m);
  if (r < 0) r += m;
  if (r >= static_cast<int64_t>(m)) r -= m;
  return static_cast<uint32_t>(r);
}

uint32_t PowMod(uint32_t base, uint32_t exp, uint32_t m) {
  uint64_t result = 1, b = base;
  while (exp > 0) {
    if (exp & 1) result = result * b % m;
    b = b * b % m;
    exp >>= 1;
  }
  return static_cast<uint32_t>(result);
}

}  // namespace

// Two phases, both producing exactly the paper's result (the oracle test
// checks this):
//  1. While many slots are empty, walk each backend's permutation slot by
//     slot (pos += skip mod M) until an empty slot: about M/E probes when E
//     slots are empty.
//  2. Once E < sqrt(M), walking costs more than looking at every empty slot:
//     the first empty slot of a backend's walk from `pos` is the empty slot e
//     with the least permutation distance (e - pos) * skip^-1 mod M, so scan
//     the E survivors instead. This removes most of the M ln M probes, which
//     happen at the very end of the fill.
absl::StatusOr<LookupTable> BuildMaglevTable(std::span<const BackendSpec> backends,
                                             uint32_t m) {
  if (absl::Status s = ValidateTableInput(backends, m); !s.ok()) return s;

  std::vector<std::string> names;
  names.reserve(backends.size());
  for (const BackendSpec& b : backends) names.push_back(b.name);

  // Turn order is the byte order of names: "the table is filled in that order".
  struct Claimant {
    uint32_t next;      // the next slot of this backend's permutation to try
    uint32_t skip;
    uint32_t inv_skip;  // skip^-1 mod M, set when phase 2 starts
    uint32_t weight;
    uint32_t credit;    // < max_weight between turns, so no overflow
    uint16_t index;     // position in the caller's list
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
    claimants.push_back({p.offset, p.skip, 0, backends[i].weight, 0, i});
    max_weight = std::max(max_weight, backends[i].weight);
  }
  if (claimants.empty()) return LookupTable({}, std::move(names));

  // Taken slots live in a bitmap (8 KiB at M = 65537: stays in L1).
  std::vector<uint64_t> taken_bits((m + 63) / 64, 0);
  uint64_t* const taken = taken_bits.data();
  std::vector<uint16_t> slots(m);
  uint32_t filled = 0;

  // Phase 2 starts when fewer than sqrt(M) slots are empty: a scan step costs
  // about twice a walk probe, and walking needs M/E probes per claim.
  const uint32_t scan_below = static_cast<uint32_t>(std::sqrt(static_cast<double>(m)));
  const double inv_m = 1.0 / m;
  std::vector<uint32_t> empty;  // phase 2: the empty slots, in no order
  bool scanning = false;

  while (true) {
    for (Claimant& c : claimants) {
      c.credit += c.weight;
      while (c.credit >= max_weight) {
        c.credit -= max_weight;
        uint32_t pos = c.next;
        if (!scanning) {
          const uint32_t skip = c.skip;
          while ((taken[pos >> 6] >> (pos & 63)) & 1) pos = AddMod(pos, skip, m);
        } else {
          // The first empty slot of the walk from `pos` is the empty slot at
          // the least permutation distance (e - pos) * skip^-1 mod M.
          if (c.inv_skip == 0) c.inv_skip = PowMod(c.skip, m - 2, m);  // Fermat: M prime
          size_t best = 0;
          uint32_t best_distance = UINT32_MAX;
          for (size_t k = 0; k < empty.size(); ++k) {
            const uint32_t d = MulMod(AddMod(empty[k], m - pos, m), c.inv_skip, m, inv_m);
            if (d < best_distance) {
              best_distance = d;
              best = k;
            }
          }
          pos = empty[best];
          empty[best] = empty.back();
          empty.pop_back();
        }
        taken[pos >> 6] |= uint64_t{1} << (pos & 63);
        slots[pos] = c.index;
        c.next = AddMod(pos, c.skip, m);
        if (++filled == m) return LookupTable(std::move(slots), std::move(names));
        if (!scanning && m - filled < scan_below) {
          scanning = true;
          for (uint32_t w = 0; w < taken_bits.size(); ++w) {
            for (uint64_t free = ~taken[w]; free != 0; free &= free - 1) {
              const uint32_t e = w * 64 + static_cast<uint32_t>(std::countr_zero(free));
              if (e < m) empty.push_back(e);
            }
          }
        }
      }
    }
  }
}

}  // namespace maglb
