// How a VIP's table is filled: the scheme and the limits of its inputs. What
// the configuration model needs of the table builders, without the builders.
#ifndef MAGLB_TABLE_SCHEME_H_
#define MAGLB_TABLE_SCHEME_H_

#include <cstdint>
#include <string_view>

namespace maglb {

/// How a VIP's table is filled. Every scheme compiles to a LookupTable.
enum class Algorithm : uint8_t { kMaglev, kRing, kRendezvous, kJump, kModulo };

std::string_view ToString(Algorithm a);

inline constexpr uint32_t kDefaultTableSize = 65537;
inline constexpr uint32_t kMinTableSize = 251;
/// The largest prime below 2^22: room for 40,000 backends at 100 slots each.
inline constexpr uint32_t kMaxTableSize = 4194301;
/// Weights are relative; 65535 leaves room for fine ratios while refusing the
/// absurd (a typo of 10^9 is an error, not a silent 100% share).
inline constexpr uint32_t kMaxWeight = 65535;
/// What the table builders accept: a configured weight times the most slow
/// start steps (kMaxSlowStartSteps, health_config.h; health.h checks the two
/// agree). During a ramp the health task scales every weight of a VIP by the
/// steps (EffectiveWeight, health.h): Maglev and rendezvous placement depend
/// on weight ratios only, so the fully-up backends' share of the table does
/// not move. The ring cannot take scaled weights (it places weight x
/// ring_points points, and more points are a different ring): it refuses
/// weights above kMaxWeight. Modulo accepts them but moves flows when scaled.
inline constexpr uint32_t kMaxEffectiveWeight = kMaxWeight * 20;

/// Ring points per unit of weight when the VIP does not say (`ring_points`).
/// Theory: a backend's share has sd/avg about 1/sqrt(points), so 100 points
/// leave about 10% spread, and 1000 about 3%.
inline constexpr uint32_t kDefaultRingPoints = 100;
inline constexpr uint32_t kMaxRingPointsPerWeight = 10000;

}  // namespace maglb

#endif  // MAGLB_TABLE_SCHEME_H_
