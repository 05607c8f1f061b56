#include "maglb/table_builder.h"

#include "maglb/hashing.h"
#include "maglb/maglev.h"

namespace maglb {

absl::StatusOr<LookupTable> BuildVipTable(const VipConfig& vip) {
  std::vector<BackendSpec> specs = vip.BackendSpecs();
  switch (vip.algorithm) {
    case Algorithm::kMaglev:
      return BuildMaglevTable(specs, vip.table_size);
    case Algorithm::kRing:
      return BuildRingTable(specs, vip.table_size, vip.ring_points);
    case Algorithm::kRendezvous:
      return BuildRendezvousTable(specs, vip.table_size);
    case Algorithm::kJump:
      return BuildJumpTable(specs, vip.table_size);
    case Algorithm::kModulo:
      return BuildModuloTable(specs, vip.table_size);
  }
  return absl::InternalError("unknown algorithm");
}

}  // namespace maglb
