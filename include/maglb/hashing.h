// The consistent-hashing family beside Maglev: ring (ketama-style), rendezvous
// (highest random weight), jump (Lamping & Veach 2014) and modulo (for
// comparison). Every scheme compiles to the same LookupTable that Maglev
// builds, so a VIP's choice of scheme costs the packet path nothing: one
// multiply-shift and one load, whatever the scheme.
//
// How a scheme becomes a table. LookupTable sends a flow hash h to slot
// s = ((h >> 32) * M) >> 32, so slot s covers the flow hashes from
// SlotKey(s) up to SlotKey(s + 1) - 1. Each builder evaluates its scheme at one
// representative key per slot, SlotKey(s) (the slot's first hash value), and
// every flow of the slot goes where that key goes. The table is therefore the
// scheme exactly, applied to the flow hash rounded down to its slot's start:
//  - ring: a point that falls inside a slot acts as if it sat on the next slot
//    boundary. Ownership is still a function of the set of points, so adding
//    or removing a backend moves slots only to or from that backend: exactly 0
//    slots move between survivors. Shares differ from the exact ring's arcs by
//    at most one slot per point.
//  - rendezvous: each slot is one key scored against every backend. Still a
//    function of (slot, backend) pairs alone, so adding, removing or
//    re-weighting a backend moves slots only to or from it: exactly 0 between
//    the others. Balance is that of M independent draws (sd/avg of a
//    backend's entries is about sqrt((N - 1) / M) for equal weights).
//  - jump: each slot's key picks a bucket; buckets are the backends in byte
//    order of their names. Adding or removing the backend whose name sorts
//    LAST moves only its own slots (exactly 0 between the others); any other
//    addition or removal renumbers the buckets after it and reshuffles most
//    slots. A draining backend (weight 0) keeps its bucket, and its slots are
//    re-jumped with a fresh key, so draining any backend moves only its slots.
//  - modulo: each slot's key mod N. No guarantee: a change of N moves about
//    1 - 1/(N+1) of the slots. It is here to show what the others avoid.
// None of this depends on the order in which backends are listed.
#ifndef MAGLB_HASHING_H_
#define MAGLB_HASHING_H_

#include <cmath>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "maglb/lookup_table.h"
#include "maglb/table_scheme.h"

namespace maglb {

// Seeds of the per-scheme hashes. Fixed forever: changing one moves every
// flow of every VIP that uses the scheme.
inline constexpr uint64_t kRingPointSeed = 0x6d61676c622d7270ULL;   // "maglb-rp"
inline constexpr uint64_t kRendezvousSeed = 0x6d61676c622d7277ULL;  // "maglb-rw"
inline constexpr uint64_t kJumpSeed = 0x6d61676c622d6a70ULL;        // "maglb-jp"
inline constexpr uint64_t kModuloSeed = 0x6d61676c622d6d64ULL;      // "maglb-md"

// Ring points per weight: kDefaultRingPoints, kMaxRingPointsPerWeight
// (table_scheme.h).
/// Cap on all points of one ring (sum of weight * points): 16 bytes each, and
/// a sort of them on every rebuild; 2^22 is 64 MiB and under a second.
inline constexpr uint64_t kMaxRingPointsTotal = 1ULL << 22;

/// The first flow hash that LookupTable::SlotOf sends to slot s:
/// ceil(s * 2^32 / M) << 32. Every builder here evaluates its scheme there.
inline uint64_t SlotKey(uint32_t s, uint32_t m) {
  uint64_t start32 = ((static_cast<uint64_t>(s) << 32) + m - 1) / m;
  return start32 << 32;
}

/// MurmurHash3's 64-bit finaliser, a bijection with full avalanche: cheap
/// enough to score every (slot, backend) pair of a rendezvous table.
inline constexpr uint64_t Fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

// ---------------------------------------------------------------------------
// The schemes as functions of a key, for any hash (the table builders below
// and `maglbctl analyze --classic` both use them).

/// One point of a hash ring: its position and the backend it belongs to.
struct RingPoint {
  uint64_t position;
  uint32_t backend;
};

/// A hash ring: a key belongs to the first point at or after it, clockwise,
/// wrapping past the largest position to the smallest. Points at the same
/// position are ordered by backend rank (the caller's tie-break, e.g. the byte
/// order of names), so the lowest rank wins a tie, deterministically.
class HashRing {
 public:
  /// `rank[b]` orders backends for ties; distinct per backend.
  HashRing(std::vector<RingPoint> points, std::span<const uint32_t> rank);

  bool empty() const { return points_.empty(); }
  /// Backend owning `key`. Requires !empty().
  uint32_t Owner(uint64_t key) const;
  /// Index into points() of the point owning `key` (for walking the ring).
  size_t OwnerPoint(uint64_t key) const;
  const std::vector<RingPoint>& points() const { return points_; }

 private:
  std::vector<RingPoint> points_;  // sorted by (position, rank)
};

/// Lamping & Veach's jump consistent hash: the bucket in [0, num_buckets) for
/// `key`. Growing num_buckets by one moves only keys to the new bucket.
int32_t JumpConsistentHash(uint64_t key, int32_t num_buckets);

/// Weighted rendezvous score -w / ln(u), with u = the hash mapped into (0, 1)
/// by its top 53 bits plus one half. Over backends, the highest score wins,
/// and a backend wins with probability w / sum(w) (the exponential race).
/// For equal weights it orders backends as their raw hashes do.
inline double RendezvousScore(uint64_t hash, uint32_t weight) {
  double u = (static_cast<double>(hash >> 11) + 0.5) * 0x1.0p-53;
  return -static_cast<double>(weight) / std::log(u);
}

/// The per-(key, backend) hash of maglb's rendezvous tables: `key_hash` is
/// Fmix64 of the slot key, `name_hash` is XXH64(name, kRendezvousSeed).
inline uint64_t RendezvousHash(uint64_t key_hash, uint64_t name_hash) {
  return Fmix64(key_hash ^ name_hash);
}

// ---------------------------------------------------------------------------
// Table builders. Each validates its input as BuildMaglevTable does
// (ValidateTableInput) plus its own rules, returns an empty() table when every
// backend weighs 0, and indexes backends in the caller's list order.

/// Ring: backend b gets weight_b * points_per_weight points at
/// XXH64("name#i", kRingPointSeed). Ties go to the byte-smaller name. Weights
/// at most kMaxWeight: scaled weights (slow start's kMaxEffectiveWeight)
/// would be a different, larger ring.
absl::Status ValidateRingInput(std::span<const BackendSpec> backends, uint32_t points_per_weight);
absl::StatusOr<LookupTable> BuildRingTable(std::span<const BackendSpec> backends,
                                           uint32_t m = kDefaultTableSize,
                                           uint32_t points_per_weight = kDefaultRingPoints);

/// Cap on a rendezvous table's work, M x (backends of positive weight) score
/// evaluations: 2^28. At the cap, measured on one core here (load average 6):
/// 0.23-0.44 s with equal weights, 1.6-2.2 s with every weight distinct (one
/// log per weight group and slot). A rebuild blocks the reload that needs it,
/// and `maglbctl analyze --config` builds one table per backend failure it
/// simulates (up to 51), so the cost must stay bounded. The cap admits 4095
/// serving backends at the default M = 65537, 64 at the largest M.
inline constexpr uint64_t kMaxRendezvousEvaluations = uint64_t{1} << 28;

/// Rendezvous: refuses M x (number of backends of positive weight) above
/// kMaxRendezvousEvaluations, saying how to get under it.
absl::Status ValidateRendezvousInput(std::span<const BackendSpec> backends, uint32_t m);

/// Rendezvous: slot s goes to the backend of highest RendezvousScore(
/// RendezvousHash(Fmix64(SlotKey(s) ^ kRendezvousSeed), name hash), weight /
/// g), g the gcd of the serving backends' weights; ties go to the byte-smaller
/// name. Dividing by g makes the table exactly invariant under scaling every
/// weight by one factor (slow start relies on this; health.h).
///
/// Cost: M * N hash evaluations (one Fmix64 each) plus, per slot, one log per
/// distinct weight (within a weight, hashes order as their scores do, so only
/// each weight group's winner is scored). Measured at M = 65537, N = 1000 on
/// one core: about 60 ms with equal weights, 70-130 ms with three weights, 60x
/// Maglev's build: a control-path cost paid on rebuild only, and the limit of
/// this scheme (it grows as M * N, hence kMaxRendezvousEvaluations;
/// bench/RESULTS.md has the figures).
///
/// Determinism: with equal weights placement is pure integer arithmetic. With
/// unequal weights the group winners are compared by std::log, which libm
/// versions may round differently in the last place; two LB instances could
/// then disagree only on a slot whose two best scores agree to about 1e-16.
absl::StatusOr<LookupTable> BuildRendezvousTable(std::span<const BackendSpec> backends,
                                                 uint32_t m = kDefaultTableSize);

/// Jump: buckets are all backends (weight 0 included) in byte order of names;
/// slot s's key is Fmix64(SlotKey(s) ^ kJumpSeed). A slot that lands on a
/// draining backend is re-jumped with the next key of a fixed sequence (at
/// most kJumpRetries times, then the next live bucket upward). Jump has no
/// weights: every backend of positive weight must have the same weight.
inline constexpr int kJumpRetries = 64;
absl::Status ValidateJumpInput(std::span<const BackendSpec> backends);
absl::StatusOr<LookupTable> BuildJumpTable(std::span<const BackendSpec> backends,
                                           uint32_t m = kDefaultTableSize);

/// Modulo: slot s goes to Fmix64(SlotKey(s) ^ kModuloSeed) mod W, W the sum of
/// weights, each backend taking a run of `weight` residues in byte order of
/// names (equal weights: hash mod N). For comparison only.
absl::StatusOr<LookupTable> BuildModuloTable(std::span<const BackendSpec> backends,
                                             uint32_t m = kDefaultTableSize);

/// Indices of the backends of positive weight, in byte order of their names.
std::vector<uint32_t> ActiveByName(std::span<const BackendSpec> backends);
/// Indices of every backend, draining ones too, in byte order of their names.
std::vector<uint32_t> AllByName(std::span<const BackendSpec> backends);

}  // namespace maglb

#endif  // MAGLB_HASHING_H_
