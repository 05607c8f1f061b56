#ifndef MAGLB_PRIME_H_
#define MAGLB_PRIME_H_

#include <cstdint>

namespace maglb {

/// Deterministic primality test by trial division; table sizes are at most a
/// few million, so this costs microseconds and runs only on the control path.
bool IsPrime(uint64_t n);

}  // namespace maglb

#endif  // MAGLB_PRIME_H_
