#include "maglb/maglev.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
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

// The AVX2 fill needs GCC's target pragma (clang builds, such as the fuzz
// build, take the portable fill).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MAGLB_HAVE_AVX2_FILL 1
#include <immintrin.h>
#else
#define MAGLB_HAVE_AVX2_FILL 0
#endif

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
  uint32_t first;              // `next` before the fill
  uint16_t index;              // position in the caller's list
};
static_assert(sizeof(Claimant) == 64);

namespace portable {
#define MAGLB_FILL_AVX2 0
#include "maglev_fill.inc"
#undef MAGLB_FILL_AVX2
}  // namespace portable

#if MAGLB_HAVE_AVX2_FILL
#pragma GCC push_options
#pragma GCC target("avx2,bmi,bmi2")
namespace avx2 {
#define MAGLB_FILL_AVX2 1
#include "maglev_fill.inc"
#undef MAGLB_FILL_AVX2
}  // namespace avx2
#pragma GCC pop_options

// Where the Gather Data Sampling mitigation is loaded, the microcode makes
// every gather several times slower and the portable fill is the faster.
bool GathersSlowedByMicrocode() {
  FILE* f = std::fopen("/sys/devices/system/cpu/vulnerabilities/gather_data_sampling", "re");
  if (f == nullptr) return false;
  char line[128] = {};
  const bool slowed = std::fgets(line, sizeof(line), f) != nullptr &&
                      std::strncmp(line, "Mitigation: Microcode", 21) == 0;
  std::fclose(f);
  return slowed;
}
#endif

bool Avx2FillRuns() {
#if MAGLB_HAVE_AVX2_FILL
  static const bool runs = [] {
    __builtin_cpu_init();  // right even when the first build runs in a static constructor
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi") &&
           __builtin_cpu_supports("bmi2");
  }();
  return runs;
#else
  return false;
#endif
}

bool Avx2FillPreferred() {
#if MAGLB_HAVE_AVX2_FILL
  static const bool preferred = Avx2FillRuns() && !GathersSlowedByMicrocode();
  return preferred;
#else
  return false;
#endif
}

// What a build needs besides its result, kept by each thread from one build
// to the next. Allocated afresh it cost page faults, and the time of a build
// depended on what the allocator had lately freed: glibc maps blocks of 128
// KiB and more itself and unmaps them on free, and the byte map at M = 65537
// is 128 KiB. At most 1 MiB of map (M = kMaxTableSize), 128 KiB of claim
// order and 97 bytes per backend stay allocated per thread that built a
// table.
struct Scratch {
  std::vector<uint64_t> map;
  std::vector<uint16_t> claim_order;  // PeriodicSchedule's period, at most 128 KiB
  std::vector<HashedIndex> order;
  std::vector<uint64_t> skip_hash;
  std::vector<uint64_t> name_hash;  // LookupTable::NameHash, for the fingerprint
  std::vector<uint8_t> owns;        // which backends hold a slot, for the fingerprint
  std::vector<Claimant> claimants;
};

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

absl::StatusOr<LookupTable> Build([[maybe_unused]] MaglevFillCode code,
                                  std::span<const BackendSpec> backends,
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
  std::vector<uint64_t>& name_hash = scratch.name_hash;
  name_hash.resize(backends.size());
  for (size_t i = 0; i < backends.size(); ++i) {  // the three hashes of a name at once
    static constexpr uint64_t kSeeds[3] = {kMaglevOffsetSeed, kMaglevSkipSeed, LookupTable::kNameHashSeed};
    uint64_t h[3];
    Xxh64Seeds(backends[i].name, kSeeds, h);
    order[i] = {h[0], static_cast<uint16_t>(i)};
    skip_hash[i] = h[1];
    name_hash[i] = h[2];
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
    c.first = c.next;
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
#if MAGLB_HAVE_AVX2_FILL
  if (code == MaglevFillCode::kAvx2) {
    avx2::FillSlots(claimants, max_weight, total_weight, m, scratch.map, scratch.claim_order,
                    slots.data());
  } else
#endif
  {
    portable::FillSlots(claimants, max_weight, total_weight, m, scratch.map, scratch.claim_order,
                        slots.data());
  }
  // Who holds a slot (the fingerprint names only those), from the claimants
  // rather than from the M slots: a claimant that claimed has moved on from
  // its first position, unless its claims took it once around its whole
  // permutation, whose last position it then holds.
  std::vector<uint8_t>& owns = scratch.owns;
  owns.assign(backends.size(), 0);
  for (const Claimant& c : claimants) {
    owns[c.index] = c.next != c.first || slots[AddMod(c.first, m - c.skip, m)] == c.index;
  }
  return LookupTable(std::move(slots), std::move(names),
                     LookupTable::Known{.name_hashes = name_hash, .owns = owns});
}

}  // namespace

MaglevFillCode PreferredMaglevFillCode() {
  return Avx2FillPreferred() ? MaglevFillCode::kAvx2 : MaglevFillCode::kPortable;
}

bool MaglevFillCodeRuns(MaglevFillCode code) {
  return code == MaglevFillCode::kPortable || Avx2FillRuns();
}

absl::StatusOr<LookupTable> BuildMaglevTable(std::span<const BackendSpec> backends, uint32_t m) {
  return Build(PreferredMaglevFillCode(), backends, m);
}

absl::StatusOr<LookupTable> BuildMaglevTableWith(MaglevFillCode code,
                                                 std::span<const BackendSpec> backends,
                                                 uint32_t m) {
  if (!MaglevFillCodeRuns(code)) {
    return absl::FailedPreconditionError("this CPU or build has no AVX2 Maglev fill");
  }
  return Build(code, backends, m);
}

}  // namespace maglb
