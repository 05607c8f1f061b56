// One entry point from a VIP's configuration to its lookup table, whatever
// the scheme; the data plane and maglbctl both use it.
#ifndef MAGLB_TABLE_BUILDER_H_
#define MAGLB_TABLE_BUILDER_H_

#include "absl/status/statusor.h"
#include "maglb/config.h"
#include "maglb/lookup_table.h"

namespace maglb {

/// Builds the VIP's table with its configured algorithm and size. The table's
/// backend indices follow vip.backends. empty() when every backend weighs 0.
absl::StatusOr<LookupTable> BuildVipTable(const VipConfig& vip);

}  // namespace maglb

#endif  // MAGLB_TABLE_BUILDER_H_
