// What changes for flows when a VIP's table is replaced: the preview an
// operator wants before a reload.
#ifndef MAGLB_TABLE_DIFF_H_
#define MAGLB_TABLE_DIFF_H_

#include <span>
#include <string>
#include <vector>

#include "maglb/lookup_table.h"

namespace maglb {

struct BackendChange {
  std::string name;
  bool in_old = false;  // configured (any weight) before / after
  bool in_new = false;
  uint32_t old_weight = 0, new_weight = 0;
  double old_share = 0, new_share = 0;  // of the hash space
  double lost = 0;    // fraction of the hash space it gave away
  double gained = 0;  // fraction it took over
};

struct Movement {
  std::string from, to;
  double fraction = 0;
};

struct TableDiff {
  /// Fraction of the flow-hash space whose backend changes.
  double moved = 0;
  /// The least any scheme must move for this change: the total variation
  /// distance between the old and new weight shares, sum of max(0, old - new).
  double ideal = 0;
  /// Part of `moved` that goes from one backend to another where both serve
  /// (weight > 0) before and after: churn the change did not strictly require
  /// unless their weights changed.
  double between_survivors = 0;
  std::vector<BackendChange> backends;  // by name
  std::vector<Movement> movements;      // largest first
};

/// Compares two tables over the whole 32-bit hash space that LookupTable uses,
/// exactly (slot boundaries merged), so tables of different sizes compare too.
/// `old_backends`/`new_backends` are the lists each table was built from. An
/// empty table (everything draining) serves nothing: every flow of the other
/// side counts as moved.
TableDiff DiffTables(const LookupTable& old_table, std::span<const BackendSpec> old_backends,
                     const LookupTable& new_table, std::span<const BackendSpec> new_backends);

}  // namespace maglb

#endif  // MAGLB_TABLE_DIFF_H_
