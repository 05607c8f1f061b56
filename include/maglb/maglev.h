// Maglev consistent hashing (Eisenbud et al., NSDI 2016, section 3.4).
#ifndef MAGLB_MAGLEV_H_
#define MAGLB_MAGLEV_H_

#include <cstdint>
#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "maglb/lookup_table.h"
#include "maglb/table_scheme.h"

namespace maglb {

// Table sizes and weights: kDefaultTableSize, kMinTableSize, kMaxTableSize,
// kMaxWeight, kMaxEffectiveWeight (table_scheme.h).

/// Checks what every table builder requires: M prime within
/// [kMinTableSize, kMaxTableSize], at least as many slots as backends, names
/// non-empty and distinct, weights at most kMaxEffectiveWeight (a configured
/// weight, at most kMaxWeight, scaled by slow start; the ring takes no more
/// than kMaxWeight, ValidateRingInput), at most
/// LookupTable::kMaxBackends backends. The message says which rule broke and
/// for which backend.
absl::Status ValidateTableInput(std::span<const BackendSpec> backends, uint32_t m);

/// A backend's permutation of the M slots: slot_j = (offset + j * skip) mod M.
/// offset = XXH64(name, kMaglevOffsetSeed) mod M and
/// skip = XXH64(name, kMaglevSkipSeed) mod (M - 1) + 1; M prime makes every
/// skip coprime to M, so the permutation visits every slot exactly once.
struct MaglevPermutation {
  uint32_t offset;
  uint32_t skip;
};
MaglevPermutation MaglevPermutationOf(std::string_view name, uint32_t m);

/// Builds the Maglev lookup table. Backends take turns, each claiming its next
/// preferred empty slot. The turn order is canonical, so the result does not
/// depend on how backends are listed: ascending XXH64(name, kMaglevOffsetSeed)
/// (the full 64-bit offset hash), ties broken by the names' bytes. Weights:
/// every turn a backend earns `weight` credits and claims one slot per
/// `max_weight` credits it holds, so entries are proportional to weight and
/// equal weights reduce exactly to the paper's one-claim-per-turn. Scaling
/// every weight by the same factor leaves the table exactly as it was (the
/// credits scale with max_weight; slow start relies on this). Weight-0
/// backends claim nothing; if all weigh 0 the returned table is empty().
///
/// Cost: about M ln(M) / 2 probes of a map of taken slots (a byte per slot up
/// to 2^17 slots, a bit above), branch-free in windows of 4 to 16 permutation
/// positions while the table fills, then, once fewer than about sqrt(M) slots
/// are empty, a scan of those slots by permutation distance; no division. The
/// schedule of turns is a plain round-robin when most backends claim in most
/// turns (with unequal weights, from a list of the claims of one period of
/// turns where that period has at most 2^16 claims), a heap of next-claim
/// turns (O(M log N)) when weights are skewed. Each thread keeps its scratch
/// (the map, the period's list, 97 bytes per backend) between builds: at most
/// about 1.2 MiB plus 6 MiB for 65535 backends.
///
/// On x86-64 CPUs with AVX2, BMI and BMI2 (GCC builds) the last empty slots
/// are scanned with vectors and, above 2^17 slots, probes are gathers over a
/// bit map (PreferredMaglevFillCode); the table is the same either way.
absl::StatusOr<LookupTable> BuildMaglevTable(std::span<const BackendSpec> backends,
                                             uint32_t m = kDefaultTableSize);

/// The two codes that fill a Maglev table, bit for bit the same table.
enum class MaglevFillCode { kPortable, kAvx2 };
/// What BuildMaglevTable uses here: kAvx2 where it runs, unless the kernel
/// reports the Gather Data Sampling microcode, which slows every gather.
MaglevFillCode PreferredMaglevFillCode();
/// Whether `code` runs on this CPU and build (kPortable always does).
bool MaglevFillCodeRuns(MaglevFillCode code);
/// BuildMaglevTable with a given code, for tests and benchmarks that compare
/// them; FailedPrecondition where the code does not run here.
absl::StatusOr<LookupTable> BuildMaglevTableWith(MaglevFillCode code,
                                                 std::span<const BackendSpec> backends,
                                                 uint32_t m = kDefaultTableSize);

}  // namespace maglb

#endif  // MAGLB_MAGLEV_H_
