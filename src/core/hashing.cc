// What the hashing schemes share: the ring structure, the byte order of names.
#include <algorithm>
#include <numeric>
#include <utility>

#include "maglb/hashing.h"

namespace maglb {

namespace {

std::vector<uint32_t> ByName(std::span<const BackendSpec> backends, bool with_draining) {
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < backends.size(); ++i) {
    if (with_draining || backends[i].weight > 0) order.push_back(i);
  }
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return backends[a].name < backends[b].name; });
  return order;
}

}  // namespace

std::vector<uint32_t> ActiveByName(std::span<const BackendSpec> backends) {
  return ByName(backends, false);
}
std::vector<uint32_t> AllByName(std::span<const BackendSpec> backends) { return ByName(backends, true); }

HashRing::HashRing(std::vector<RingPoint> points, std::span<const uint32_t> rank)
    : points_(std::move(points)) {
  std::sort(points_.begin(), points_.end(), [&](const RingPoint& a, const RingPoint& b) {
    if (a.position != b.position) return a.position < b.position;
    return rank[a.backend] < rank[b.backend];
  });
}

size_t HashRing::OwnerPoint(uint64_t key) const {
  // The first point at or after the key; of points at one position the
  // lowest rank comes first. Past the largest point the key wraps to the first.
  auto it = std::lower_bound(points_.begin(), points_.end(), key,
                             [](const RingPoint& p, uint64_t k) { return p.position < k; });
  return it == points_.end() ? 0 : static_cast<size_t>(it - points_.begin());
}

uint32_t HashRing::Owner(uint64_t key) const { return points_[OwnerPoint(key)].backend; }

}  // namespace maglb
