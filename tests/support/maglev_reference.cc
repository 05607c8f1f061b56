#include "maglev_reference.h"

#include <algorithm>
#include <string>

#include "maglb/hash.h"

namespace maglb::testing {

std::vector<int> ReferenceMaglevPopulate(const std::vector<BackendSpec>& backends, uint64_t m) {
  // Turns go in ascending order of the 64-bit offset hash of the name (ties
  // by name); weight-0 backends sit out.
  std::vector<int> order;
  std::vector<uint64_t> turn_key(backends.size());
  for (size_t i = 0; i < backends.size(); ++i) {
    turn_key[i] = Xxh64(backends[i].name, kMaglevOffsetSeed);
    if (backends[i].weight > 0) order.push_back(static_cast<int>(i));
  }
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return turn_key[a] != turn_key[b] ? turn_key[a] < turn_key[b]
                                      : backends[a].name < backends[b].name;
  });
  if (order.empty()) return {};

  uint64_t max_weight = 0;
  for (int i : order) max_weight = std::max<uint64_t>(max_weight, backends[i].weight);

  const size_t n = order.size();
  std::vector<uint64_t> offset(n), skip(n), next(n, 0), credit(n, 0);
  for (size_t k = 0; k < n; ++k) {
    const std::string& name = backends[order[k]].name;
    offset[k] = Xxh64(name, kMaglevOffsetSeed) % m;
    skip[k] = Xxh64(name, kMaglevSkipSeed) % (m - 1) + 1;
  }
  auto permutation = [&](size_t k, uint64_t j) { return (offset[k] + j * skip[k]) % m; };

  std::vector<int> entry(m, -1);
  uint64_t filled = 0;
  while (true) {
    for (size_t k = 0; k < n; ++k) {
      // Weighted turn: w / max_w of a claim per turn, kept as exact credit.
      credit[k] += backends[order[k]].weight;
      while (credit[k] >= max_weight) {
        credit[k] -= max_weight;
        uint64_t c = permutation(k, next[k]);
        while (entry[c] >= 0) {
          next[k]++;
          c = permutation(k, next[k]);
        }
        entry[c] = order[k];
        next[k]++;
        if (++filled == m) return entry;
      }
    }
  }
}

}  // namespace maglb::testing
