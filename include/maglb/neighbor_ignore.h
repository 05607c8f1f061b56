// Why an ARP reply or neighbour advertisement taught the control plane
// nothing (control/neighbor.h). Here, in the pure C++ headers, so that the
// metric list (metrics.h), which maglbctl links too, names the reasons from
// this one list.
#ifndef MAGLB_NEIGHBOR_IGNORE_H_
#define MAGLB_NEIGHBOR_IGNORE_H_

#include <cstddef>
#include <cstdint>

namespace maglb {

/// Why an ARP reply or neighbour advertisement taught nothing, as an X-macro:
/// X(enum_name, "counter name", "what an operator reads in the log").
#define MAGLB_FOREACH_NEIGHBOR_IGNORE(X)                                                    \
  X(kNotAsked, "not_asked", "not asked for")                                               \
  X(kStatic, "static", "the address has a static [[neighbor]] entry")                      \
  X(kUnsolicited, "unsolicited", "differs from the known MAC: the LB asks to verify it")       \
  X(kUnconfirmed, "unconfirmed", "differs from the known MAC: taken if the next request's answers agree") \
  X(kConflict, "conflict", "two MACs answered one request: the known one is kept, or none")  \
  X(kNoOverride, "no_override", "override flag clear and the MAC differs from the known one") \
  X(kBadMac, "bad_mac", "multicast, broadcast or zero MAC")                                 \
  X(kMacMismatch, "mac_mismatch", "the Ethernet source differs from the advertised MAC")    \
  X(kBadFlags, "bad_flags", "solicited flag set on an advertisement to a multicast group")

enum class NeighborIgnore : uint8_t {
#define MAGLB_NEIGHBOR_IGNORE_ENUM(name, str, why) name,
  MAGLB_FOREACH_NEIGHBOR_IGNORE(MAGLB_NEIGHBOR_IGNORE_ENUM)
#undef MAGLB_NEIGHBOR_IGNORE_ENUM
};

inline constexpr size_t kNumNeighborIgnores = 0
#define MAGLB_NEIGHBOR_IGNORE_COUNT(name, str, why) +1
    MAGLB_FOREACH_NEIGHBOR_IGNORE(MAGLB_NEIGHBOR_IGNORE_COUNT)
#undef MAGLB_NEIGHBOR_IGNORE_COUNT
    ;

}  // namespace maglb

#endif  // MAGLB_NEIGHBOR_IGNORE_H_
