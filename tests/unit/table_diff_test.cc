#include "maglb/table_diff.h"

#include <gtest/gtest.h>

#include "maglb/maglev.h"

namespace maglb {
namespace {

LookupTable Build(const std::vector<BackendSpec>& b, uint32_t m = kDefaultTableSize) {
  return *BuildMaglevTable(b, m);
}

TEST(TableDiffTest, IdenticalTablesMoveNothing) {
  std::vector<BackendSpec> b = {{"a", 1}, {"b", 1}, {"c", 1}};
  LookupTable t = Build(b);
  TableDiff d = DiffTables(t, b, t, b);
  EXPECT_EQ(d.moved, 0);
  EXPECT_EQ(d.ideal, 0);
  EXPECT_EQ(d.between_survivors, 0);
  ASSERT_EQ(d.backends.size(), 3u);
  EXPECT_NEAR(d.backends[0].old_share, 1.0 / 3, 1e-4);
}

TEST(TableDiffTest, RemovingABackendMovesItsShare) {
  std::vector<BackendSpec> before = {{"a", 1}, {"b", 1}, {"c", 1}, {"d", 1}};
  std::vector<BackendSpec> after = {{"a", 1}, {"b", 1}, {"c", 1}};
  LookupTable t0 = Build(before), t1 = Build(after);
  TableDiff d = DiffTables(t0, before, t1, after);
  EXPECT_NEAR(d.ideal, 0.25, 1e-12);
  EXPECT_GE(d.moved, 0.25 - 1e-4);
  EXPECT_LE(d.moved, 0.26);
  // The removed backend loses everything and gains nothing.
  const BackendChange& removed = d.backends[3];
  EXPECT_EQ(removed.name, "d");
  EXPECT_TRUE(removed.in_old);
  EXPECT_FALSE(removed.in_new);
  EXPECT_NEAR(removed.lost, removed.old_share, 1e-12);
  EXPECT_EQ(removed.gained, 0);
  // Moved = sum of what everyone lost = sum of what everyone gained.
  double lost = 0, gained = 0;
  for (const BackendChange& c : d.backends) {
    lost += c.lost;
    gained += c.gained;
  }
  EXPECT_NEAR(lost, d.moved, 1e-9);
  EXPECT_NEAR(gained, d.moved, 1e-9);
}

TEST(TableDiffTest, ComparesTablesOfDifferentSizesOverTheHashSpace) {
  std::vector<BackendSpec> b = {{"a", 1}, {"b", 1}};
  LookupTable small = Build(b, 251), large = Build(b, 65537);
  TableDiff d = DiffTables(small, b, large, b);
  EXPECT_EQ(d.ideal, 0);
  EXPECT_GT(d.moved, 0.3);  // resizing reshuffles: different permutations
  EXPECT_LT(d.moved, 0.7);
  EXPECT_NEAR(d.backends[0].old_share + d.backends[1].old_share, 1.0, 1e-12);
  EXPECT_NEAR(d.backends[0].new_share + d.backends[1].new_share, 1.0, 1e-12);
  // Cross-check with a direct sample of the hash space.
  int moved = 0;
  const int kSamples = 1 << 16;
  for (int i = 0; i < kSamples; ++i) {
    uint64_t h = (uint64_t{static_cast<uint32_t>(i) * 65521u + 17u}) << 32;
    moved += small.backend_names()[small.Lookup(h)] != large.backend_names()[large.Lookup(h)];
  }
  EXPECT_NEAR(static_cast<double>(moved) / kSamples, d.moved, 0.01);
}

TEST(TableDiffTest, DrainingEverythingMovesEverything) {
  std::vector<BackendSpec> before = {{"a", 1}, {"b", 1}};
  std::vector<BackendSpec> after = {{"a", 0}, {"b", 0}};
  LookupTable t0 = Build(before), t1 = Build(after);
  ASSERT_TRUE(t1.empty());
  TableDiff d = DiffTables(t0, before, t1, after);
  EXPECT_NEAR(d.moved, 1.0, 1e-12);
  EXPECT_NEAR(d.ideal, 1.0, 1e-12);
}

TEST(TableDiffTest, ReweightingMovesBetweenSurvivors) {
  std::vector<BackendSpec> before = {{"a", 1}, {"b", 1}};
  std::vector<BackendSpec> after = {{"a", 1}, {"b", 3}};
  TableDiff d = DiffTables(Build(before), before, Build(after), after);
  EXPECT_NEAR(d.ideal, 0.25, 1e-12);
  EXPECT_GE(d.moved, 0.25 - 1e-4);
  EXPECT_NEAR(d.between_survivors, d.moved, 1e-12);  // both serve before and after
}

}  // namespace
}  // namespace maglb
