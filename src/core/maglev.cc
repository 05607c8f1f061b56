#include "maglb/maglev.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <queue>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "hash_order.h"
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

// (a + b) mod m for a, b < m: an add and a conditional subtract, written as a
// minimum (when s < m, s - m wraps around and is the larger) so that
// compilers emit a conditional move: as a branch it mispredicts half the time.
inline uint32_t AddMod(uint32_t a, uint32_t b, uint32_t m) {
  const uint32_t s = a + b;
  return std::min(s, s - m);
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

// a^-1 mod m for m prime (Fermat), by MulMod: no division.
uint32_t InverseMod(uint32_t a, uint32_t m, double inv_m) {
  uint32_t result = 1, base = a;
  for (uint32_t exp = m - 2; exp > 0; exp >>= 1) {
    if (exp & 1) result = MulMod(result, base, m, inv_m);
    base = MulMod(base, base, m, inv_m);
  }
  return result;
}

// x mod d for any 64-bit x and 1 < d < 2^32, exactly, without a division
// (two per backend, 30-90 cycles each, were a tenth of the setup at N =
// 5000): r = floor((2^64 - 1) / d) makes x * r / 2^64 at most two below
// x / d, so the remainder needs at most two corrections.
class Reducer {
 public:
  explicit Reducer(uint32_t d) : d_(d), r_(~uint64_t{0} / d) {}
  uint32_t operator()(uint64_t x) const {
    const uint64_t q = static_cast<uint64_t>((static_cast<unsigned __int128>(x) * r_) >> 64);
    uint64_t rem = x - q * d_;  // < 3d
    rem = rem >= d_ ? rem - d_ : rem;
    rem = rem >= d_ ? rem - d_ : rem;
    return static_cast<uint32_t>(rem);
  }

 private:
  uint64_t d_;
  uint64_t r_;
};

constexpr int kStrides = 8;

// A backend with weight, in turn order. One cache line.
struct alignas(64) Claimant {
  uint32_t next;               // the next slot of this backend's permutation to try
  uint32_t skip;
  uint32_t stride[kStrides];   // k * skip mod M: a window's offsets from its first slot
  uint32_t stride_step;        // kStrides * skip mod M: from one window of 8 to the next
  uint32_t inv_skip;           // skip^-1 mod M, set when the scan first needs it
  uint32_t weight;
  uint32_t credit;             // < max_weight between turns (round-robin schedules)
  uint16_t index;              // position in the caller's list
};

// How a claim finds its backend's next empty slot. Every way gives exactly
// the paper's result (the slot the one-by-one walk would stop at); they
// differ in cost, and which is cheapest depends on how full the table is.
enum class Probe {
  kWalk,      // slot by slot: nearly every first try is empty
  kWindow4,   // 4, 8 or 16 permutation positions at once, branch-free, the
  kWindow8,   // first empty one taken: where the walk's length is a coin toss
  kWindow16,  // and mispredicted branches would cost more than extra loads
  kScan,      // few empty slots left: look at each of them instead
};

// Which slots are taken, in one of two layouts. Both keep a second copy of
// the M slots after the first, so that a window reads slot first + stride[k]
// (< 2M) without reducing it mod M.
//  - ByteMap, up to kByteMapSlots slots: a byte per slot, a probe is one load.
//  - BitMap, above: a bit per slot, a probe is a load and a shift, but a
//    million slots take 256 KiB and stay in the L2 cache (as bytes, 2 MiB,
//    they did not: 1.4x slower at M = 1000003).
constexpr uint32_t kByteMapSlots = 1 << 17;

class ByteMap {
 public:
  static size_t Words(uint32_t m) { return (2 * size_t{m} + 7) / 8; }
  explicit ByteMap(uint64_t* words) : t_(reinterpret_cast<uint8_t*>(words)) {}

  bool Taken(uint32_t s) const { return t_[s]; }
  void Take(uint32_t s, uint32_t m) {
    t_[s] = 1;
    t_[s + m] = 1;
  }
  // Bit k: whether slot first + stride[k] is taken, k < kWidth (4 or 8).
  // Added up as a tree, (b0 + 2 b1) + 4 (b2 + 2 b3) + ..., so that compilers
  // combine the bytes with lea: three instructions a probe.
  template <int kWidth>
  uint32_t TakenMask(uint32_t first, const uint32_t* stride) const {
    const uint8_t* at = t_ + first;
    auto pair = [&](int k) { return uint32_t{at[stride[k]]} + 2 * uint32_t{at[stride[k + 1]]}; };
    const uint32_t low = pair(0) + 4 * pair(2);
    if constexpr (kWidth == 4) {
      return low;
    } else {
      return low + 16 * (pair(4) + 4 * pair(6));
    }
  }
  template <class F>
  void ForEachEmpty(uint32_t m, const F& f) const {
    uint32_t s = 0;
    for (; s + 8 <= m; s += 8) {  // eight slots a load: the few empty ones are far apart
      uint64_t eight;
      std::memcpy(&eight, t_ + s, 8);
      if (eight == 0x0101010101010101) continue;
      for (uint32_t k = s; k < s + 8; ++k) {
        if (!t_[k]) f(k);
      }
    }
    for (; s < m; ++s) {
      if (!t_[s]) f(s);
    }
  }

 private:
  uint8_t* t_;
};

class BitMap {
 public:
  static size_t Words(uint32_t m) { return (2 * size_t{m} + 63) / 64; }
  explicit BitMap(uint64_t* words) : w_(words) {}

  bool Taken(uint32_t s) const { return (w_[s / 64] >> (s % 64)) & 1; }
  void Take(uint32_t s, uint32_t m) {
    w_[s / 64] |= uint64_t{1} << (s % 64);
    s += m;
    w_[s / 64] |= uint64_t{1} << (s % 64);
  }
  template <int kWidth>
  uint32_t TakenMask(uint32_t first, const uint32_t* stride) const {
    uint32_t mask = 0;
#pragma GCC unroll 8
    for (int k = 0; k < kWidth; ++k) mask |= static_cast<uint32_t>(Taken(first + stride[k])) << k;
    return mask;
  }
  template <class F>
  void ForEachEmpty(uint32_t m, const F& f) const {
    for (uint32_t w = 0; w * 64 < m; ++w) {
      uint64_t empty = ~w_[w];
      if (m - w * 64 < 64) empty &= (uint64_t{1} << (m - w * 64)) - 1;
      for (; empty != 0; empty &= empty - 1) f(w * 64 + std::countr_zero(empty));
    }
  }

 private:
  uint64_t* w_;
};

// Everything a claim reads and writes besides its claimant. Schedules copy
// it into a local for each run of claims: the stores into the map may alias
// anything (bytes do), so state reached through a pointer would be reloaded
// from memory after every claim.
template <class Map>
struct Cursor {
  uint32_t m;
  uint32_t filled;
  Map taken;
  uint16_t* slots;
};

template <int kWidth, class Map>
inline uint32_t FindInWindows(const Cursor<Map>& f, const Claimant& c) {
  constexpr uint32_t kAllTaken = (1u << kWidth) - 1;
  const uint32_t step = kWidth == kStrides ? c.stride_step : c.stride[kWidth];
  uint32_t pos = c.next;
  while (true) {
    const uint32_t mask = f.taken.template TakenMask<kWidth>(pos, c.stride);
    if (mask != kAllTaken) return AddMod(pos, c.stride[std::countr_one(mask)], f.m);
    pos = AddMod(pos, step, f.m);
  }
}

// Two windows of 8 side by side.
template <class Map>
inline uint32_t FindInWindows16(const Cursor<Map>& f, const Claimant& c) {
  uint32_t pos = c.next;
  while (true) {
    const uint32_t second = AddMod(pos, c.stride_step, f.m);
    const uint32_t mask = f.taken.template TakenMask<8>(pos, c.stride) |
                          f.taken.template TakenMask<8>(second, c.stride) << 8;
    if (mask != 0xFFFF) {
      const int k = std::countr_one(mask);
      return AddMod(k < 8 ? pos : second, c.stride[k & 7], f.m);
    }
    pos = AddMod(second, c.stride_step, f.m);
  }
}

// The empty slots, for Probe::kScan.
class EmptySlots {
 public:
  explicit EmptySlots(uint32_t m) : m_(m), inv_m_(1.0 / m) {}

  template <class Map>
  void Collect(const Map& taken) {
    taken.ForEachEmpty(m_, [&](uint32_t s) { empty_.push_back(s); });
  }

  // The walk from c.next stops at the empty slot with the least permutation
  // distance (e - c.next) * skip^-1 mod M, which is unique; with E empty
  // slots this costs E multiplications instead of about M / E probes.
  // Removes and returns that slot.
  uint32_t TakeNearest(Claimant& c) {
    if (c.inv_skip == 0) c.inv_skip = InverseMod(c.skip, m_, inv_m_);
    const uint32_t from = m_ - c.next;
    size_t best = 0;
    uint32_t best_distance = UINT32_MAX;
    for (size_t k = 0; k < empty_.size(); ++k) {
      const uint32_t d = MulMod(AddMod(empty_[k], from, m_), c.inv_skip, m_, inv_m_);
      if (d < best_distance) {
        best_distance = d;
        best = k;
      }
    }
    const uint32_t pos = empty_[best];
    empty_[best] = empty_.back();
    empty_.pop_back();
    return pos;
  }

 private:
  const uint32_t m_;
  const double inv_m_;
  std::vector<uint32_t> empty_;
};

template <class Map>
class Fill {
 public:
  // `words`: Map::Words(m) zeroed words.
  Fill(uint32_t m, uint64_t* words, uint16_t* slots)
      : cursor_{.m = m, .filled = 0, .taken = Map(words), .slots = slots}, empty_(m) {}

  Cursor<Map>& cursor() { return cursor_; }

  // Lists the empty slots for Probe::kScan; once, before the first scan.
  void StartScan() { empty_.Collect(cursor_.taken); }

  template <Probe kProbe>
  __attribute__((always_inline)) inline void Claim(Cursor<Map>& f, Claimant& c) {
    uint32_t pos;
    if constexpr (kProbe == Probe::kWalk) {
      pos = c.next;
      while (f.taken.Taken(pos)) pos = AddMod(pos, c.skip, f.m);
    } else if constexpr (kProbe == Probe::kWindow4) {
      pos = FindInWindows<4>(f, c);
    } else if constexpr (kProbe == Probe::kWindow8) {
      pos = FindInWindows<8>(f, c);
    } else if constexpr (kProbe == Probe::kWindow16) {
      pos = FindInWindows16(f, c);
    } else {
      pos = empty_.TakeNearest(c);
    }
    f.taken.Take(pos, f.m);
    f.slots[pos] = c.index;
    c.next = AddMod(pos, c.skip, f.m);
    ++f.filled;
  }

 private:
  Cursor<Map> cursor_;
  EmptySlots empty_;
};

// Schedules: who claims next. Each Run claims until `until` slots are filled
// and keeps its place for the next Run (with the next way of probing).
// Backend i's k-th claim falls in turn ceil(k * max_weight / w_i); within a
// turn, backends go in turn order.

// Equal weights: everyone claims every turn.
class RoundRobin {
 public:
  explicit RoundRobin(std::span<Claimant> c) : c_(c) {}
  template <Probe kProbe, class Map>
  void Run(Fill<Map>& fill, uint32_t until) {
    Cursor<Map> f = fill.cursor();
    Claimant* const c = c_.data();
    const size_t n = c_.size();
    size_t i = next_;
    while (f.filled < until) {
      fill.template Claim<kProbe>(f, c[i]);
      i = i + 1 == n ? 0 : i + 1;
    }
    next_ = i;
    fill.cursor() = f;
  }

 private:
  std::span<Claimant> c_;
  size_t next_ = 0;
};

// Every turn a backend earns `weight` credits and claims once per max_weight
// credits it holds (at most once per turn, as weight <= max_weight). With few
// backends the pattern of who claims repeats and the branch predicts.
class WeightedRoundRobin {
 public:
  WeightedRoundRobin(std::span<Claimant> c, uint32_t max_weight)
      : c_(c), max_weight_(max_weight) {}
  template <Probe kProbe, class Map>
  void Run(Fill<Map>& fill, uint32_t until) {
    Cursor<Map> f = fill.cursor();
    Claimant* const claimants = c_.data();
    const size_t n = c_.size();
    const uint32_t max_weight = max_weight_;
    size_t i = next_;
    while (f.filled < until) {
      Claimant& c = claimants[i];
      i = i + 1 == n ? 0 : i + 1;
      c.credit += c.weight;
      if (c.credit < max_weight) continue;
      c.credit -= max_weight;
      fill.template Claim<kProbe>(f, c);
    }
    next_ = i;
    fill.cursor() = f;
  }

 private:
  std::span<Claimant> c_;
  const uint32_t max_weight_;
  size_t next_ = 0;
};

// The same with many backends, where who claims in a turn is a coin toss per
// backend (weights 1..100: half of them) and mispredicts: list each turn's
// claimants first without a branch, then claim.
class ClaimantList {
 public:
  ClaimantList(std::span<Claimant> c, uint32_t max_weight)
      : c_(c), max_weight_(max_weight), claiming_(c.size()) {}
  template <Probe kProbe, class Map>
  void Run(Fill<Map>& fill, uint32_t until) {
    Cursor<Map> f = fill.cursor();
    Claimant* const* claiming = claiming_.data();
    size_t next = next_, count = count_;
    while (f.filled < until) {
      if (next == count) {
        count = NextTurn();
        next = 0;
      }
      fill.template Claim<kProbe>(f, *claiming[next++]);
    }
    next_ = next;
    count_ = count;
    fill.cursor() = f;
  }

 private:
  // Lists the next turn's claimants; returns how many.
  size_t NextTurn() {
    size_t count = 0;
    for (Claimant& c : c_) {
      const uint32_t credit = c.credit + c.weight;
      const bool claims = credit >= max_weight_;
      c.credit = claims ? credit - max_weight_ : credit;
      claiming_[count] = &c;
      count += claims;
    }
    return count;
  }

  std::span<Claimant> c_;
  const uint32_t max_weight_;
  std::vector<Claimant*> claiming_;
  size_t next_ = 0, count_ = 0;
};

// Skewed weights (say one backend at 1000 and many at 1): most turns have
// only a few claims, and visiting every backend each turn would cost turns x
// N, quadratic in the worst case. Take the claims in (turn, position) order
// from a heap instead: O(M log N).
class HeapSchedule {
 public:
  HeapSchedule(std::span<Claimant> c, uint32_t max_weight) : c_(c), max_weight_(max_weight) {
    for (uint32_t i = 0; i < c_.size(); ++i) events_.push({ClaimTurn(c_[i], 1), i, 0});
  }
  template <Probe kProbe, class Map>
  void Run(Fill<Map>& fill, uint32_t until) {
    Cursor<Map> f = fill.cursor();
    while (f.filled < until) {
      Event e = events_.top();
      events_.pop();
      fill.template Claim<kProbe>(f, c_[e.position]);
      ++e.claims;
      e.turn = ClaimTurn(c_[e.position], e.claims + 1);
      events_.push(e);
    }
    fill.cursor() = f;
  }

 private:
  struct Event {
    uint64_t turn;
    uint32_t position;  // in turn order
    uint32_t claims;    // made so far by this backend
    bool operator>(const Event& o) const {
      return turn != o.turn ? turn > o.turn : position > o.position;
    }
  };
  uint64_t ClaimTurn(const Claimant& c, uint64_t k) const {
    return (k * max_weight_ + c.weight - 1) / c.weight;  // ceil(k * max_weight / w)
  }

  std::span<Claimant> c_;
  const uint32_t max_weight_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
};

// The ways of probing in order of fill, each where it was the cheapest on
// maglev_bench (N = 10..5000, M = 65537 and 1000003; bench/RESULTS.md, issue
// 13). The scan starts once fewer than sqrt(M) / 2 slots are empty (sqrt(M)
// with the bit map, whose probes cost more): there, walking costs M / E
// probes a claim and scanning E multiplications.
template <class Schedule, class Map>
void FillTable(Schedule& schedule, Fill<Map>& f, uint32_t m) {
  const double sqrt_m = std::sqrt(static_cast<double>(m));
  const uint32_t scan_from =
      m - static_cast<uint32_t>(std::is_same_v<Map, BitMap> ? sqrt_m : sqrt_m / 2);
  auto at = [&](uint32_t percent) {
    return std::min(scan_from, static_cast<uint32_t>(uint64_t{m} * percent / 100));
  };
  schedule.template Run<Probe::kWalk>(f, at(15));
  schedule.template Run<Probe::kWindow4>(f, at(60));
  schedule.template Run<Probe::kWindow8>(f, at(85));
  schedule.template Run<Probe::kWindow16>(f, at(96));
  schedule.template Run<Probe::kWindow8>(f, scan_from);
  f.StartScan();
  schedule.template Run<Probe::kScan>(f, m);
}

template <class Map>
void FillBySchedule(std::span<Claimant> claimants, uint32_t max_weight, uint64_t total_weight,
                    Fill<Map>& fill, uint32_t m) {
  const uint64_t n = claimants.size();
  if (total_weight == max_weight * n) {
    RoundRobin schedule(claimants);
    FillTable(schedule, fill, m);
  } else if (max_weight * n <= 8 * total_weight && n < 64) {
    WeightedRoundRobin schedule(claimants, max_weight);
    FillTable(schedule, fill, m);
  } else if (max_weight * n <= 8 * total_weight) {
    ClaimantList schedule(claimants, max_weight);
    FillTable(schedule, fill, m);
  } else {
    HeapSchedule schedule(claimants, max_weight);
    FillTable(schedule, fill, m);
  }
}

// What a build needs besides its result, kept by each thread from one build
// to the next. Allocated afresh it cost page faults, and the time of a build
// depended on what the allocator had lately freed: glibc maps blocks of 128
// KiB and more itself and unmaps them on free, and the byte map at M = 65537
// is 128 KiB. At most 1 MiB of map (M = kMaxTableSize) and 88 bytes per
// backend stay allocated per thread that built a table.
struct Scratch {
  std::vector<uint64_t> map;
  std::vector<HashedIndex> order;
  std::vector<uint64_t> skip_hash;
  std::vector<Claimant> claimants;
};

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

}  // namespace

absl::StatusOr<LookupTable> BuildMaglevTable(std::span<const BackendSpec> backends,
                                             uint32_t m) {
  if (absl::Status s = ValidateSizesNamesWeights(backends, m); !s.ok()) return s;

  std::vector<std::string> names = BackendNames(backends);
  Scratch& scratch = ThreadScratch();

  // The canonical turn order: ascending XXH64(name, kMaglevOffsetSeed), ties
  // by the names' bytes. Equal names sit side by side, which is where
  // duplicates are caught.
  std::vector<HashedIndex>& order = scratch.order;
  std::vector<uint64_t>& skip_hash = scratch.skip_hash;
  order.resize(backends.size());
  skip_hash.resize(backends.size());
  for (size_t i = 0; i < backends.size(); ++i) {  // both hashes while the name is at hand
    order[i] = {Xxh64(backends[i].name, kMaglevOffsetSeed), static_cast<uint16_t>(i)};
    skip_hash[i] = Xxh64(backends[i].name, kMaglevSkipSeed);
  }
  SortByHashThenName(order, [&](uint16_t i) -> const std::string& { return backends[i].name; });
  for (size_t i = 1; i < order.size(); ++i) {
    if (order[i].key == order[i - 1].key &&
        backends[order[i].index].name == backends[order[i - 1].index].name) {
      return DuplicateNameError(backends[order[i].index].name);
    }
  }

  std::vector<Claimant>& claimants = scratch.claimants;
  claimants.clear();
  const Reducer mod_m(m), mod_m_minus_1(m - 1);
  uint32_t max_weight = 0;
  uint64_t total_weight = 0;
  for (const HashedIndex& turn : order) {
    const uint16_t i = turn.index;
    if (backends[i].weight == 0) continue;
    Claimant& c = claimants.emplace_back();
    // MaglevPermutationOf, reusing the offset hash the turn order computed.
    c.next = mod_m(turn.key);
    c.skip = mod_m_minus_1(skip_hash[i]) + 1;
    // k * skip mod M by additions: eight 64-bit divisions per backend had
    // cost more than the fill at N = 5000.
    c.stride[0] = 0;
    for (int k = 1; k < kStrides; ++k) c.stride[k] = AddMod(c.stride[k - 1], c.skip, m);
    c.stride_step = AddMod(c.stride[kStrides - 1], c.skip, m);
    c.inv_skip = 0;
    c.weight = backends[i].weight;
    c.credit = 0;
    c.index = i;
    max_weight = std::max(max_weight, c.weight);
    total_weight += c.weight;
  }
  if (claimants.empty()) return LookupTable({}, std::move(names));

  std::vector<uint16_t> slots(m);
  if (m <= kByteMapSlots) {
    scratch.map.assign(ByteMap::Words(m), 0);
    Fill<ByteMap> fill(m, scratch.map.data(), slots.data());
    FillBySchedule(claimants, max_weight, total_weight, fill, m);
  } else {
    scratch.map.assign(BitMap::Words(m), 0);
    Fill<BitMap> fill(m, scratch.map.data(), slots.data());
    FillBySchedule(claimants, max_weight, total_weight, fill, m);
  }
  return LookupTable(std::move(slots), std::move(names));
}

}  // namespace maglb
