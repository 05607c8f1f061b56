#include "maglb/maglev.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "maglb/hash.h"
#include "maglb/prime.h"

namespace maglb {

namespace {

absl::Status DuplicateNameError(std::string_view name) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "backend name \"%s\" appears twice: names identify backends and must be unique",
      std::string(name)));
}

// Everything ValidateTableInput checks except that names are distinct.
absl::Status ValidateSizesNamesWeights(std::span<const BackendSpec> backends, uint32_t m) {
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
  for (const BackendSpec& b : backends) {
    if (b.name.empty()) {
      return absl::InvalidArgumentError("a backend has an empty name");
    }
    // Configured weights stop at kMaxWeight (config.cc); slow start scales
    // them by up to kMaxSlowStartSteps, which the arithmetic below takes: a
    // credit stays below 2 x max_weight < 2^22, a claim turn k x max_weight
    // below 2^22 x 2^21 in 64 bits.
    if (b.weight > kMaxEffectiveWeight) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "backend \"%s\": weight %u is above the maximum %u (%u configured x %u slow "
          "start steps)",
          b.name, b.weight, kMaxEffectiveWeight, kMaxWeight, kMaxEffectiveWeight / kMaxWeight));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTableInput(std::span<const BackendSpec> backends, uint32_t m) {
  if (absl::Status s = ValidateSizesNamesWeights(backends, m); !s.ok()) return s;
  absl::flat_hash_set<std::string_view> seen;
  for (const BackendSpec& b : backends) {
    if (!seen.insert(b.name).second) return DuplicateNameError(b.name);
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

// Bit k: whether slot pos + stride[k] (mod m) is taken; the slots go to
// `candidate`. Unrolled by the fold so that the probes have no branch.
template <size_t... K>
inline uint32_t WindowTakenMask(const uint8_t* taken, uint32_t pos, const uint32_t* stride,
                                uint32_t m, uint32_t* candidate, std::index_sequence<K...>) {
  return ((uint32_t{taken[candidate[K] = AddMod(pos, stride[K], m)]} << K) | ...);
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

// The canonical turn order: ascending offset hash, ties by the names' bytes.
struct Turn {
  uint64_t key;  // XXH64(name, kMaglevOffsetSeed)
  uint16_t index;
};

// Sorts `order` into turn order. The keys are hashes, so a comparison sort
// mispredicts about every other comparison (0.76 M cycles for N = 5000, a
// third of that build); an LSD radix sort on the key's bytes is linear and
// branch-free, and stable, so equal keys then only need their names sorted.
void SortTurns(std::vector<Turn>& order, std::span<const BackendSpec> backends) {
  auto by_name = [&](const Turn& a, const Turn& b) {
    return backends[a.index].name < backends[b.index].name;
  };
  if (order.size() < 64) {
    std::sort(order.begin(), order.end(), [&](const Turn& a, const Turn& b) {
      return a.key != b.key ? a.key < b.key : by_name(a, b);
    });
    return;
  }
  std::vector<Turn> buffer(order.size());
  for (int shift = 0; shift < 64; shift += 8) {
    uint32_t start[257] = {};
    for (const Turn& t : order) ++start[((t.key >> shift) & 0xFF) + 1];
    if (start[((order[0].key >> shift) & 0xFF) + 1] == order.size()) continue;  // one digit
    for (int d = 0; d < 256; ++d) start[d + 1] += start[d];
    for (const Turn& t : order) buffer[start[(t.key >> shift) & 0xFF]++] = t;
    order.swap(buffer);
  }
  for (size_t i = 0; i + 1 < order.size();) {
    size_t j = i + 1;
    while (j < order.size() && order[j].key == order[i].key) ++j;
    if (j - i > 1) std::sort(order.begin() + i, order.begin() + j, by_name);
    i = j;
  }
}

}  // namespace

// Three ways to find a backend's next empty slot, each giving exactly the
// paper's result (the oracle test checks this), chosen by how full the table is:
//  - Sparse (< 35% full) and dense (> 99.8% full): walk the permutation slot by
//    slot, pos += skip mod M, until an empty slot. Sparse walks stop at once;
//    dense ones run long; either way the loop branch predicts well.
//  - In between, the walk's length is a coin toss per probe, and branch
//    mispredictions dominated: test a window of eight permutation positions
//    branch-free and take the first empty one.
//  - Once E < sqrt(M) slots are empty, walking costs M/E probes per claim,
//    more than looking at every empty slot: the walk from `pos` stops at the
//    empty slot with the least permutation distance (e - pos) * skip^-1 mod M,
//    so scan the E survivors instead. Most of the M ln M probes of a plain walk
//    happen here, at the very end of the fill.
absl::StatusOr<LookupTable> BuildMaglevTable(std::span<const BackendSpec> backends,
                                             uint32_t m) {
  if (absl::Status s = ValidateSizesNamesWeights(backends, m); !s.ok()) return s;

  std::vector<std::string> names = BackendNames(backends);

  constexpr int kWindow = 8;
  struct Claimant {
    uint32_t next;              // the next slot of this backend's permutation to try
    uint32_t skip;
    uint32_t stride[kWindow];   // k * skip mod M: the window's offsets
    uint32_t inv_skip;          // skip^-1 mod M, set when scanning starts
    uint32_t weight;
    uint32_t credit;            // < max_weight between turns (round-robin schedule)
    uint16_t index;             // position in the caller's list
  };
  // Canonical turn order (SortTurns); equal names sit side by side, which is
  // where duplicates are caught.
  std::vector<Turn> order(backends.size());
  for (size_t i = 0; i < backends.size(); ++i) {
    order[i] = {Xxh64(backends[i].name, kMaglevOffsetSeed), static_cast<uint16_t>(i)};
  }
  SortTurns(order, backends);
  for (size_t i = 1; i < order.size(); ++i) {
    if (order[i].key == order[i - 1].key &&
        backends[order[i].index].name == backends[order[i - 1].index].name) {
      return DuplicateNameError(backends[order[i].index].name);
    }
  }
  std::vector<Claimant> claimants;
  claimants.reserve(order.size());
  uint32_t max_weight = 0;
  for (const Turn& turn : order) {
    const uint16_t i = turn.index;
    if (backends[i].weight == 0) continue;
    Claimant c{};
    // MaglevPermutationOf, reusing the offset hash the turn order computed.
    c.next = static_cast<uint32_t>(turn.key % m);
    c.skip = static_cast<uint32_t>(Xxh64(backends[i].name, kMaglevSkipSeed) % (m - 1) + 1);
    // k * skip mod M by additions: eight 64-bit divisions per backend had
    // cost more than the fill at N = 5000.
    for (int k = 1; k < kWindow; ++k) c.stride[k] = AddMod(c.stride[k - 1], c.skip, m);
    c.weight = backends[i].weight;
    c.index = i;
    claimants.push_back(c);
    max_weight = std::max(max_weight, backends[i].weight);
  }
  if (claimants.empty()) return LookupTable({}, std::move(names));

  // One byte per slot: a probe is a single load and compare.
  std::vector<uint8_t> taken_bytes(m, 0);
  uint8_t* const taken = taken_bytes.data();
  std::vector<uint16_t> slots(m);
  uint32_t filled = 0;

  enum class Mode { kWalk, kWindow, kScan };
  Mode mode = Mode::kWalk;
  const uint32_t scan_below = static_cast<uint32_t>(std::sqrt(static_cast<double>(m)));
  // Window bounds tuned on the N = 1000, M = 65537 benchmark (35% .. 99.8%).
  const uint32_t window_from = static_cast<uint32_t>(uint64_t{m} * 35 / 100);
  const uint32_t window_until = std::max(window_from, m - m / 500);  // then walk again
  const uint32_t scan_from = m - scan_below;
  uint32_t next_switch = window_from;
  const double inv_m = 1.0 / m;
  std::vector<uint32_t> empty;  // while scanning: the empty slots, in no order

  // Claims one slot for `c`; true once the table is full.
  auto claim = [&](Claimant& c) __attribute__((always_inline)) {
    uint32_t pos = c.next;
    if (mode == Mode::kWalk) {
      const uint32_t skip = c.skip;
      while (taken[pos]) pos = AddMod(pos, skip, m);
    } else if (mode == Mode::kWindow) {
      while (true) {
        uint32_t candidate[kWindow];
        const uint32_t taken_mask = WindowTakenMask(taken, pos, c.stride, m, candidate,
                                                    std::make_index_sequence<kWindow>());
        if (taken_mask != (1u << kWindow) - 1) {
          pos = candidate[std::countr_one(taken_mask)];
          break;
        }
        pos = AddMod(candidate[kWindow - 1], c.skip, m);
      }
    } else {
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
    taken[pos] = 1;
    slots[pos] = c.index;
    c.next = AddMod(pos, c.skip, m);
    if (++filled < next_switch) return false;
    if (filled == m) return true;
    // Phase changes, in order; thresholds may coincide for small M.
    if (filled >= scan_from) {
      mode = Mode::kScan;
      next_switch = m;
      for (uint32_t e = 0; e < m; ++e) {
        if (!taken[e]) empty.push_back(e);
      }  // once per build: a plain loop is fine
    } else if (filled >= window_until) {
      mode = Mode::kWalk;
      next_switch = scan_from;
    } else {
      mode = Mode::kWindow;
      next_switch = window_until;
    }
    return false;
  };

  // Who claims when: every turn a backend earns `weight` credits and claims
  // once per max_weight credits (at most once per turn, as weight <= max);
  // within a turn, backends go in turn order. So backend i's k-th claim falls
  // in turn ceil(k * max_weight / w_i).
  uint64_t total_weight = 0;
  for (const Claimant& c : claimants) total_weight += c.weight;
  if (total_weight == uint64_t{max_weight} * claimants.size()) {
    // Equal weights: everyone claims every turn.
    while (true) {
      for (Claimant& c : claimants) {
        if (claim(c)) return LookupTable(std::move(slots), std::move(names));
      }
    }
  }
  if (uint64_t{max_weight} * claimants.size() <= 8 * total_weight && claimants.size() < 64) {
    // Most backends claim in most turns: visit them all, turn after turn. With
    // few backends the pattern of who claims repeats and the branch predicts.
    while (true) {
      for (Claimant& c : claimants) {
        c.credit += c.weight;
        if (c.credit < max_weight) continue;
        c.credit -= max_weight;
        if (claim(c)) return LookupTable(std::move(slots), std::move(names));
      }
    }
  }
  if (uint64_t{max_weight} * claimants.size() <= 8 * total_weight) {
    // The same with many backends, where who claims in a turn is a coin toss
    // per backend (weights 1..100: half of them) and mispredicts: list the
    // turn's claimants first without a branch, then claim.
    std::vector<Claimant*> claiming(claimants.size());
    while (true) {
      size_t count = 0;
      for (Claimant& c : claimants) {
        const uint32_t credit = c.credit + c.weight;
        const bool claims = credit >= max_weight;
        c.credit = claims ? credit - max_weight : credit;
        claiming[count] = &c;
        count += claims;
      }
      for (size_t k = 0; k < count; ++k) {
        if (claim(*claiming[k])) return LookupTable(std::move(slots), std::move(names));
      }
    }
  }
  // Skewed weights (say one backend at 1000 and many at 1): most turns have
  // only a few claims, and visiting every backend each turn would cost turns x
  // N, quadratic in the worst case. Take the claims in (turn, position) order
  // from a heap instead: O(M log N).
  struct Event {
    uint64_t turn;
    uint32_t position;  // in turn order
    uint32_t claims;    // made so far by this backend
    bool operator>(const Event& o) const {
      return turn != o.turn ? turn > o.turn : position > o.position;
    }
  };
  auto claim_turn = [&](const Claimant& c, uint64_t k) {
    return (k * max_weight + c.weight - 1) / c.weight;  // ceil(k * max_weight / w)
  };
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  for (uint32_t i = 0; i < claimants.size(); ++i) {
    events.push({claim_turn(claimants[i], 1), i, 0});
  }
  while (true) {
    Event e = events.top();
    events.pop();
    if (claim(claimants[e.position])) return LookupTable(std::move(slots), std::move(names));
    ++e.claims;
    e.turn = claim_turn(claimants[e.position], e.claims + 1);
    events.push(e);
  }
}

}  // namespace maglb
