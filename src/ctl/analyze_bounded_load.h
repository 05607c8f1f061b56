// `maglbctl analyze`: bounded loads (Mirrokni et al.) simulated on the classic
// recipe's keys, for each scheme's preference order.
#ifndef MAGLB_CTL_ANALYZE_BOUNDED_LOAD_H_
#define MAGLB_CTL_ANALYZE_BOUNDED_LOAD_H_

#include <cstddef>
#include <cstdint>

#include "report.h"

namespace maglb::analyze {

// `flows` flows onto `n` backends, arrivals only and then with churn, at two
// values of eps.
report::Table BoundedLoadSimulation(uint32_t n, size_t flows);

}  // namespace maglb::analyze

#endif  // MAGLB_CTL_ANALYZE_BOUNDED_LOAD_H_
