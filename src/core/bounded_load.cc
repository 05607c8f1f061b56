#include "maglb/bounded_load.h"

#include <cmath>

namespace maglb {

uint64_t BoundedLoadCapacity(uint64_t total_flows, uint32_t weight, uint64_t total_weight,
                             double epsilon) {
  if (total_weight == 0 || weight == 0) return 0;
  // Integer part first, so that exact multiples do not round up by a hair.
  double cap = (1.0 + epsilon) * static_cast<double>(total_flows + 1) *
               static_cast<double>(weight) / static_cast<double>(total_weight);
  double c = std::ceil(cap - 1e-9 * cap);
  return static_cast<uint64_t>(c);
}

uint64_t BoundedLoadCapacity(const LoadView& load, uint32_t backend, double epsilon) {
  return BoundedLoadCapacity(load.total_flows, load.weights[backend], load.total_weight, epsilon);
}

BoundedLoadChoice BoundedLoadAssign(std::span<const uint32_t> preference, const LoadView& load,
                                    double epsilon) {
  for (uint32_t rank = 0; rank < preference.size(); ++rank) {
    uint32_t b = preference[rank];
    if (load.active_flows[b] < BoundedLoadCapacity(load, b, epsilon)) {
      return {.backend = b, .rank = rank, .within_bound = true};
    }
  }
  return {.backend = preference.empty() ? 0 : preference[0], .rank = 0, .within_bound = false};
}

FlowLoads::FlowLoads(uint32_t backend_slots, uint32_t vip_slots)
    : cells_(new Cell[backend_slots]()), vip_active_(new uint64_t[vip_slots]()) {}

std::vector<uint32_t> TablePreference(const LookupTable& table, uint32_t slot,
                                      size_t max_backends) {
  std::vector<uint32_t> out;
  if (table.empty()) return out;
  std::vector<bool> seen(table.backend_names().size(), false);
  uint32_t m = table.size();
  for (uint32_t i = 0; i < m && out.size() < max_backends; ++i) {
    uint32_t s = slot + i;
    if (s >= m) s -= m;
    uint16_t b = table.slot(s);
    if (!seen[b]) {
      seen[b] = true;
      out.push_back(b);
    }
  }
  return out;
}

}  // namespace maglb
