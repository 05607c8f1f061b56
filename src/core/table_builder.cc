#include "maglb/table_builder.h"

#include "maglb/maglev.h"

namespace maglb {

absl::StatusOr<LookupTable> BuildVipTable(const VipConfig& vip) {
  std::vector<BackendSpec> specs = vip.BackendSpecs();
  switch (vip.algorithm) {
    case Algorithm::kMaglev:
      return BuildMaglevTable(specs, vip.table_size);
  }
  return absl::InternalError("unknown algorithm");
}

}  // namespace maglb
