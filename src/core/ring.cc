// Ring (ketama-style) consistent hashing compiled to a LookupTable.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "maglb/hash.h"
#include "maglb/hashing.h"
#include "maglb/maglev.h"

namespace maglb {

absl::Status ValidateRingInput(std::span<const BackendSpec> backends,
                               uint32_t points_per_weight) {
  if (points_per_weight < 1 || points_per_weight > kMaxRingPointsPerWeight) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ring points per unit of weight %u must be from 1 to %u", points_per_weight,
        kMaxRingPointsPerWeight));
  }
  uint64_t total = 0;
  for (const BackendSpec& b : backends) {
    // More points would be a different ring, not a scaled one: slow start
    // ramps a ring backend by its own weight (EffectiveWeight, health.h).
    if (b.weight > kMaxWeight) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "backend \"%s\": weight %u is above %u, the most a ring takes (a ring holds "
          "weight x ring_points points per backend; its weights cannot be scaled by slow "
          "start steps as Maglev's can)",
          b.name, b.weight, kMaxWeight));
    }
    total += uint64_t{b.weight} * points_per_weight;
  }
  if (total > kMaxRingPointsTotal) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the ring would have %u points (sum of weight x %u points per unit of weight), "
        "more than the %u allowed; lower ring_points or the weights (they are relative)",
        total, points_per_weight, kMaxRingPointsTotal));
  }
  return absl::OkStatus();
}

absl::StatusOr<LookupTable> BuildRingTable(std::span<const BackendSpec> backends, uint32_t m,
                                           uint32_t points_per_weight) {
  if (absl::Status s = ValidateTableInput(backends, m); !s.ok()) return s;
  if (absl::Status s = ValidateRingInput(backends, points_per_weight); !s.ok()) return s;

  std::vector<std::string> names = BackendNames(backends);
  // Ties between points go to the byte-smaller name, whatever the list order.
  const std::vector<uint32_t> by_name = AllByName(backends);
  std::vector<uint32_t> rank(backends.size());
  for (uint32_t r = 0; r < by_name.size(); ++r) rank[by_name[r]] = r;

  std::vector<RingPoint> points;
  for (uint32_t b = 0; b < backends.size(); ++b) {
    uint64_t count = uint64_t{backends[b].weight} * points_per_weight;
    std::string key = absl::StrCat(backends[b].name, "#");
    size_t prefix = key.size();
    for (uint64_t i = 0; i < count; ++i) {
      key.resize(prefix);
      absl::StrAppend(&key, i);
      points.push_back({Xxh64(key, kRingPointSeed), b});
    }
  }
  if (points.empty()) return LookupTable({}, std::move(names));
  HashRing ring(std::move(points), rank);

  // Slot keys increase with s, so one forward walk over the sorted points
  // finds every slot's owner: O(M + P) after the sort.
  const std::vector<RingPoint>& p = ring.points();
  std::vector<uint16_t> slots(m);
  size_t next = 0;
  for (uint32_t s = 0; s < m; ++s) {
    uint64_t key = SlotKey(s, m);
    while (next < p.size() && p[next].position < key) ++next;
    slots[s] = static_cast<uint16_t>(p[next == p.size() ? 0 : next].backend);
  }
  return LookupTable(std::move(slots), std::move(names));
}

}  // namespace maglb
