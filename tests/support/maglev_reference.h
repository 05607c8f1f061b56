// A straightforward, paper-faithful Maglev builder used as an oracle: the
// production builder must produce identical tables. Written for clarity, not
// speed: every probe recomputes permutation[i][j] = (offset + j * skip) mod M
// with 64-bit arithmetic, exactly as the paper's pseudocode indexes it.
#ifndef MAGLB_TESTS_SUPPORT_MAGLEV_REFERENCE_H_
#define MAGLB_TESTS_SUPPORT_MAGLEV_REFERENCE_H_

#include <cstdint>
#include <vector>

#include "maglb/lookup_table.h"

namespace maglb::testing {

/// Slot -> index into `backends`, or an empty vector when no backend has
/// weight. Inputs are assumed valid.
std::vector<int> ReferenceMaglevPopulate(const std::vector<BackendSpec>& backends, uint64_t m);

}  // namespace maglb::testing

#endif  // MAGLB_TESTS_SUPPORT_MAGLEV_REFERENCE_H_
