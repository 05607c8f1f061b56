// Bounded load for new flows (Mirrokni, Thorup, Zadimoghaddam).
#include "maglb/bounded_load.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "maglb/hash.h"
#include "maglb/hashing.h"

namespace maglb {
namespace {

struct Loads {
  std::vector<uint32_t> flows, weights;
  LoadView View() const {
    return {.active_flows = flows,
            .weights = weights,
            .total_flows = std::accumulate(flows.begin(), flows.end(), uint64_t{0}),
            .total_weight = std::accumulate(weights.begin(), weights.end(), uint64_t{0})};
  }
};

TEST(BoundedLoadTest, CapacityIsCeilingOfOnePlusEpsilonTimesAverageIncludingTheNewFlow) {
  Loads l{std::vector<uint32_t>(10, 0), std::vector<uint32_t>(10, 1)};
  l.flows[0] = 99;  // F = 99, so the average after this flow is 100 / 10 = 10
  EXPECT_EQ(BoundedLoadCapacity(l.View(), 3, 0.25), 13u);  // ceil(12.5)
  EXPECT_EQ(BoundedLoadCapacity(l.View(), 3, 0.1), 11u);   // exactly 11: no round-up
  EXPECT_EQ(BoundedLoadCapacity(l.View(), 3, 0.5), 15u);
  // Weighted: w / W of the flows, times (1 + epsilon).
  Loads w{{0, 0, 0}, {1, 3, 0}};
  w.flows[1] = 7;  // F = 7, F + 1 = 8: shares 2 and 6
  EXPECT_EQ(BoundedLoadCapacity(w.View(), 0, 0.25), 3u);  // ceil(2.5)
  EXPECT_EQ(BoundedLoadCapacity(w.View(), 1, 0.25), 8u);  // ceil(7.5)
  EXPECT_EQ(BoundedLoadCapacity(w.View(), 2, 0.25), 0u);  // weight 0 takes nothing
}

TEST(BoundedLoadTest, PassesTheFlowToTheNextBackendBelowCapacity) {
  Loads l{{13, 13, 2, 0}, {1, 1, 1, 1}};  // F = 28, cap = ceil(1.25 * 29 / 4) = 10
  std::vector<uint32_t> pref = {1, 0, 2, 3};
  BoundedLoadChoice c = BoundedLoadAssign(pref, l.View(), 0.25);
  EXPECT_EQ(c.backend, 2u);
  EXPECT_EQ(c.rank, 2u);
  EXPECT_TRUE(c.within_bound);
  std::vector<uint32_t> first_ok = {3, 0};
  EXPECT_EQ(BoundedLoadAssign(first_ok, l.View(), 0.25).rank, 0u);
}

TEST(BoundedLoadTest, NoRoomInAPartialOrderKeepsTheFirstChoice) {
  Loads l{{13, 13, 2, 0}, {1, 1, 1, 1}};
  std::vector<uint32_t> pref = {1, 0};
  BoundedLoadChoice c = BoundedLoadAssign(pref, l.View(), 0.25);
  EXPECT_FALSE(c.within_bound);
  EXPECT_EQ(c.backend, 1u);
}

TEST(BoundedLoadTest, TablePreferenceWalksSlotsSkippingRepeats) {
  LookupTable t({2, 2, 0, 2, 1, 0, 1}, {"a", "b", "c", "d"});
  EXPECT_EQ(TablePreference(t, 0, 10), (std::vector<uint32_t>{2, 0, 1}));
  EXPECT_EQ(TablePreference(t, 5, 10), (std::vector<uint32_t>{0, 1, 2}));  // wraps
  EXPECT_EQ(TablePreference(t, 5, 2), (std::vector<uint32_t>{0, 1}));
}

// Flows arrive (and some leave) with rendezvous preference orders over all
// backends; with the bound on, no backend ever holds more than
// ceil((1 + epsilon) * average) right after an assignment. A skewed hash
// (half the flows share one first choice) forces the bound to bind.
TEST(BoundedLoadTest, SimulationNeverExceedsTheBound) {
  for (double eps : {0.25, 0.1}) {
    for (bool skewed : {false, true}) {
      const uint32_t n = 10;
      Loads l{std::vector<uint32_t>(n, 0), std::vector<uint32_t>(n, 1)};
      std::vector<uint64_t> name_hash(n);
      for (uint32_t b = 0; b < n; ++b) name_hash[b] = Xxh64(absl::StrCat("b", b), 1);
      std::mt19937_64 rng(99);
      std::vector<uint32_t> live;  // backend of each active flow
      uint64_t total = 0;
      int moved_off_first = 0;
      for (int i = 0; i < 20000; ++i) {
        if (!live.empty() && rng() % 4 == 0) {  // a departure
          size_t k = rng() % live.size();
          --l.flows[live[k]];
          --total;
          live[k] = live.back();
          live.pop_back();
        }
        uint64_t key = (skewed && rng() % 2 == 0) ? 7 : rng();
        std::vector<uint32_t> pref(n);
        std::iota(pref.begin(), pref.end(), 0u);
        std::sort(pref.begin(), pref.end(), [&](uint32_t a, uint32_t b) {
          return RendezvousHash(key, name_hash[a]) > RendezvousHash(key, name_hash[b]);
        });
        LoadView view{l.flows, l.weights, total, n};
        BoundedLoadChoice c = BoundedLoadAssign(pref, view, eps);
        ASSERT_TRUE(c.within_bound);
        uint64_t cap = static_cast<uint64_t>(std::ceil((1 + eps) * (total + 1) / n - 1e-9));
        ++l.flows[c.backend];
        ++total;
        live.push_back(c.backend);
        moved_off_first += c.rank > 0;
        ASSERT_LE(l.flows[c.backend], cap) << "eps " << eps << " flow " << i;
        if (c.rank > 0) {
          // Every backend preferred before it was full.
          for (uint32_t r = 0; r < c.rank; ++r) EXPECT_GE(l.flows[pref[r]], cap);
        }
      }
      if (skewed) {
        EXPECT_GT(moved_off_first, 1000) << "the bound must have bound";
      }
    }
  }
}

}  // namespace
}  // namespace maglb
