// The hashing family: ring, rendezvous, jump, modulo beside maglev; the
// classic recipe's primitives; the per-VIP `algorithm` choice.
#include "maglb/hashing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ctl/classic_hash.h"
#include "maglb/config.h"
#include "maglb/hash.h"
#include "maglb/maglev.h"
#include "maglb/table_builder.h"

namespace maglb {
namespace {

// ---------------------------------------------------------------------------
// Classic recipe primitives. Goldens from an independent implementation in
// JavaScript run under node (the recipe's native language): mulberry32 as
// commonly published, FNV-1a with Math.imul, fmix32, and jump hash in BigInt.

TEST(ClassicHashTest, Fnv1a32MatchesPublishedVectors) {
  EXPECT_EQ(Fnv1a32(""), 0x811c9dc5u);
  EXPECT_EQ(Fnv1a32("a"), 0xe40c292cu);
  EXPECT_EQ(Fnv1a32("foobar"), 0xbf9cf968u);
}

TEST(ClassicHashTest, ClassicHash32MatchesNodeOracle) {
  EXPECT_EQ(ClassicHash32(""), 0xab3e7c0bu);
  EXPECT_EQ(ClassicHash32("a"), 0x1a80b1b3u);
  EXPECT_EQ(ClassicHash32("foobar"), 0x0c0da6dcu);
  EXPECT_EQ(ClassicHash32("S0#0"), 0xeb4ced2fu);
  EXPECT_EQ(ClassicHash32("user:631395207"), 0x80e213a8u);
  EXPECT_EQ(ClassicHash32("user:631395207|S3"), 0x826b1ce1u);
  EXPECT_EQ(Fmix32(0), 0u);  // fmix32 fixes 0: FNV-1a's avalanche must come first
}

TEST(ClassicHashTest, Mulberry32Seed16MatchesNodeOracle) {
  Mulberry32 rng(16);
  const uint32_t want[] = {2711821766u, 619857794u, 3231266251u, 1667621465u, 1458934711u};
  for (uint32_t w : want) EXPECT_EQ(rng.NextU32(), w);
  Mulberry32 again(16);
  EXPECT_DOUBLE_EQ(again.Next(), 0.6313952072523534);
  EXPECT_DOUBLE_EQ(again.Next(), 0.14432188915088773);
}

TEST(ClassicHashTest, KeysMatchNodeOracleAndRestartPerCall) {
  std::vector<std::string> keys = ClassicKeys(5);
  EXPECT_EQ(keys, (std::vector<std::string>{"user:631395207", "user:144321889", "user:752337801",
                                            "user:388273379", "user:339684707"}));
  EXPECT_EQ(ClassicKeys(10000)[0], "user:631395207");  // a fresh generator each time
  EXPECT_EQ(ClassicServerName(7), "S7");
}

TEST(JumpHashTest, MatchesNodeBigIntOracle) {
  EXPECT_EQ(JumpConsistentHash(0, 1), 0);
  EXPECT_EQ(JumpConsistentHash(1, 10), 6);
  EXPECT_EQ(JumpConsistentHash(0xdeadbeef, 1000), 285);
  EXPECT_EQ(JumpConsistentHash(~uint64_t{0}, 100), 92);
  EXPECT_EQ(JumpConsistentHash(123456789, 7), 0);
  EXPECT_EQ(JumpConsistentHash(42, 65536), 5747);
}

TEST(JumpHashTest, GrowingMovesKeysOnlyToTheNewBucket) {
  std::mt19937_64 rng(5);
  for (int i = 0; i < 20000; ++i) {
    uint64_t k = rng();
    int32_t n = 1 + static_cast<int32_t>(rng() % 200);
    int32_t before = JumpConsistentHash(k, n), after = JumpConsistentHash(k, n + 1);
    if (before != after) {
      EXPECT_EQ(after, n) << "key " << k << " n " << n;
    }
  }
}

// ---------------------------------------------------------------------------
// Slot mapping.

TEST(SlotKeyTest, IsTheFirstHashOfItsSlot) {
  for (uint32_t m : {251u, 65537u, kMaxTableSize}) {
    for (uint32_t s : {0u, 1u, m / 3, m / 2, m - 2, m - 1}) {
      uint64_t k = SlotKey(s, m);
      EXPECT_EQ(LookupTable::SlotOf(k, m), s) << "m " << m << " s " << s;
      EXPECT_EQ(k & 0xffffffffu, 0u);
      if (s > 0) {
        EXPECT_EQ(LookupTable::SlotOf(k - (uint64_t{1} << 32), m), s - 1);
      }
    }
  }
}

// ---------------------------------------------------------------------------
// The ring as a function of a key.

TEST(HashRingTest, WrapsAroundAndOwnsAKeyEqualToAPoint) {
  std::vector<uint32_t> rank = {0, 1, 2};
  HashRing ring({{1000, 0}, {5000, 1}, {9000, 2}}, rank);
  EXPECT_EQ(ring.Owner(0), 0u);
  EXPECT_EQ(ring.Owner(999), 0u);
  EXPECT_EQ(ring.Owner(1000), 0u);  // equal to a point: that point owns it
  EXPECT_EQ(ring.Owner(1001), 1u);
  EXPECT_EQ(ring.Owner(5000), 1u);
  EXPECT_EQ(ring.Owner(9000), 2u);
  EXPECT_EQ(ring.Owner(9001), 0u);  // past the largest point: wraps to the first
  EXPECT_EQ(ring.Owner(~uint64_t{0}), 0u);
}

TEST(HashRingTest, TiesGoToTheLowestRankWhateverTheInputOrder) {
  // Backends 0 and 1 share position 5000; rank says backend 1 sorts first.
  std::vector<uint32_t> rank = {1, 0};
  HashRing a({{5000, 0}, {5000, 1}, {7000, 0}}, rank);
  HashRing b({{7000, 0}, {5000, 1}, {5000, 0}}, rank);
  EXPECT_EQ(a.Owner(5000), 1u);
  EXPECT_EQ(b.Owner(5000), 1u);
  EXPECT_EQ(a.Owner(4000), 1u);
  EXPECT_EQ(a.Owner(6000), 0u);
}

// ---------------------------------------------------------------------------
// Tables: disruption.

std::vector<BackendSpec> Backends(int n, const std::string& prefix = "backend-") {
  std::vector<BackendSpec> b;
  for (int i = 0; i < n; ++i) b.push_back({absl::StrCat(prefix, 10000 + i), 1});
  return b;
}

using Builder = absl::StatusOr<LookupTable> (*)(std::span<const BackendSpec>, uint32_t);

absl::StatusOr<LookupTable> Ring(std::span<const BackendSpec> b, uint32_t m) {
  return BuildRingTable(b, m, kDefaultRingPoints);
}
absl::StatusOr<LookupTable> Maglev(std::span<const BackendSpec> b, uint32_t m) {
  return BuildMaglevTable(b, m);
}

LookupTable MustBuild(Builder build, std::span<const BackendSpec> b, uint32_t m = 65537) {
  absl::StatusOr<LookupTable> t = build(b, m);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : LookupTable();
}

struct Movement {
  double moved = 0;             // fraction of slots whose backend (by name) changed
  double between_survivors = 0;  // ... from one backend present in both to another
};

// Slot by slot, by backend name: both tables have the same size.
Movement Compare(const LookupTable& a, const LookupTable& b) {
  Movement mv;
  std::vector<std::string> an = a.backend_names(), bn = b.backend_names();
  std::sort(an.begin(), an.end());
  std::sort(bn.begin(), bn.end());
  auto in = [](const std::vector<std::string>& v, const std::string& s) {
    return std::binary_search(v.begin(), v.end(), s);
  };
  for (uint32_t s = 0; s < a.size(); ++s) {
    const std::string& from = a.backend_names()[a.slot(s)];
    const std::string& to = b.backend_names()[b.slot(s)];
    if (from == to) continue;
    mv.moved += 1;
    if (in(bn, from) && in(an, to)) mv.between_survivors += 1;
  }
  mv.moved /= a.size();
  mv.between_survivors /= a.size();
  return mv;
}

struct Scheme {
  const char* name;
  Builder build;
};
const Scheme kConsistent[] = {
    {"ring", Ring}, {"rendezvous", BuildRendezvousTable}, {"jump", BuildJumpTable}};

TEST(TableDisruptionTest, AddingABackendMovesNothingBetweenOldOnes) {
  for (const Scheme& sc : kConsistent) {
    for (int n : {4, 10, 100}) {
      std::vector<BackendSpec> b = Backends(n);
      LookupTable before = MustBuild(sc.build, b);
      // "backend-zzz" sorts after every other name: jump grows at the end.
      b.push_back({"backend-zzz", 1});
      LookupTable after = MustBuild(sc.build, b);
      Movement mv = Compare(before, after);
      EXPECT_EQ(mv.between_survivors, 0.0) << sc.name << " N=" << n;
      // The newcomer's share is what moved; it is about 1/(N+1).
      double ideal = 1.0 / (n + 1);
      double tolerance = sc.build == Ring ? 0.6 * ideal : 6 * std::sqrt(ideal / 65537);
      EXPECT_NEAR(mv.moved, ideal, tolerance) << sc.name << " N=" << n;
    }
  }
}

TEST(TableDisruptionTest, RemovingABackendMovesOnlyItsSlots) {
  for (const Scheme& sc : kConsistent) {
    for (int n : {5, 10, 100}) {
      std::vector<BackendSpec> b = Backends(n);
      LookupTable before = MustBuild(sc.build, b);
      // Jump can only shrink at the end: remove the last name. Ring and
      // rendezvous: also a middle one.
      std::vector<int> victims = {n - 1};
      if (sc.build != BuildJumpTable) victims.push_back(n / 2);
      for (int victim : victims) {
        std::vector<BackendSpec> fewer = b;
        std::string gone = fewer[victim].name;
        fewer.erase(fewer.begin() + victim);
        LookupTable after = MustBuild(sc.build, fewer);
        Movement mv = Compare(before, after);
        EXPECT_EQ(mv.between_survivors, 0.0) << sc.name << " N=" << n << " victim " << gone;
        EXPECT_EQ(mv.moved, before.EntryCounts()[victim] / 65537.0) << sc.name;
      }
    }
  }
}

TEST(TableDisruptionTest, DrainingAnyBackendMovesOnlyItsSlots) {
  // Weight 0 keeps the backend listed: for jump this is how any backend, not
  // only the last, leaves without reshuffling the rest.
  for (const Scheme& sc : kConsistent) {
    std::vector<BackendSpec> b = Backends(20);
    LookupTable before = MustBuild(sc.build, b);
    for (int victim : {0, 7, 19}) {
      std::vector<BackendSpec> drained = b;
      drained[victim].weight = 0;
      LookupTable after = MustBuild(sc.build, drained);
      Movement mv = Compare(before, after);
      // The drained backend stays listed, so Compare counts its slots as
      // "between survivors": every moved slot must be one of its own.
      uint32_t moved_from_others = 0;
      for (uint32_t s = 0; s < before.size(); ++s) {
        moved_from_others += before.slot(s) != after.slot(s) && before.slot(s) != victim;
      }
      EXPECT_EQ(moved_from_others, 0u) << sc.name << " victim " << victim;
      EXPECT_EQ(after.EntryCounts()[victim], 0u) << sc.name;
      EXPECT_EQ(mv.moved, before.EntryCounts()[victim] / 65537.0) << sc.name;
    }
  }
}

TEST(TableDisruptionTest, JumpReshufflesWhenTheMiddleNameLeaves) {
  // The stated limitation, shown: removing a middle name renumbers buckets.
  std::vector<BackendSpec> b = Backends(10);
  LookupTable before = MustBuild(BuildJumpTable, b);
  b.erase(b.begin() + 2);
  EXPECT_GT(Compare(before, MustBuild(BuildJumpTable, b)).between_survivors, 0.2);
}

// Maglev's stated bound (tests/unit/maglev_test.cc): adding or removing one of
// N <= 1000 backends at M = 65537 moves at most 1% of the table between
// survivors. The other schemes' exact 0 is the contrast.
TEST(TableDisruptionTest, MaglevStaysWithinItsStatedBound) {
  for (int n : {10, 100, 1000}) {
    std::vector<BackendSpec> b = Backends(n);
    LookupTable before = MustBuild(Maglev, b);
    std::vector<BackendSpec> more = b;
    more.push_back({"backend-zzz", 1});
    Movement add = Compare(before, MustBuild(Maglev, more));
    std::vector<BackendSpec> fewer = b;
    fewer.erase(fewer.begin() + n / 2);
    Movement remove = Compare(before, MustBuild(Maglev, fewer));
    std::printf("maglev N=%d: add moves %.4f%% between survivors, remove %.4f%%\n", n,
                100 * add.between_survivors, 100 * remove.between_survivors);
    EXPECT_LE(add.between_survivors, 0.01) << n;
    EXPECT_LE(remove.between_survivors, 0.01) << n;
    EXPECT_GE(add.moved, 1.0 / (n + 1) * 0.99);
  }
}

TEST(TableDisruptionTest, ModuloMovesAlmostEverythingAsTheoryPredicts) {
  for (int n : {4, 10}) {
    std::vector<BackendSpec> b = Backends(n);
    LookupTable before = MustBuild(BuildModuloTable, b);
    b.push_back({"backend-zzz", 1});
    Movement mv = Compare(before, MustBuild(BuildModuloTable, b));
    double theory = 1.0 - 1.0 / (n + 1);
    EXPECT_NEAR(mv.moved, theory, 6 * std::sqrt(theory * (1 - theory) / 65537)) << n;
  }
}

// Key level, with the classic recipe's hash: the same exact-0 property for the
// schemes as functions of a key (what `maglbctl analyze --classic` measures).
TEST(KeyDisruptionTest, ClassicRecipeMovesNoKeyBetweenOldServers) {
  std::vector<std::string> keys = ClassicKeys(10000);
  auto ring_of = [](uint32_t n) {
    std::vector<RingPoint> p;
    std::vector<uint32_t> rank(n);
    for (uint32_t s = 0; s < n; ++s) {
      rank[s] = s;
      for (int i = 0; i < 100; ++i) p.push_back({ClassicHash32(absl::StrCat("S", s, "#", i)), s});
    }
    return HashRing(std::move(p), rank);
  };
  auto hrw = [](const std::string& key, uint32_t n) {
    uint32_t best = 0, best_h = 0;
    for (uint32_t s = 0; s < n; ++s) {
      uint32_t h = ClassicHash32(absl::StrCat(key, "|S", s));
      if (s == 0 || h > best_h) best = s, best_h = h;
    }
    return best;
  };
  HashRing r4 = ring_of(4), r5 = ring_of(5);
  int ring_moved = 0, hrw_moved = 0, jump_moved = 0;
  for (const std::string& k : keys) {
    uint32_t h = ClassicHash32(k);
    uint32_t a = r4.Owner(h), b = r5.Owner(h);
    if (a != b) {
      EXPECT_EQ(b, 4u);
      ++ring_moved;
    }
    a = hrw(k, 4), b = hrw(k, 5);
    if (a != b) {
      EXPECT_EQ(b, 4u);
      ++hrw_moved;
    }
    int32_t ja = JumpConsistentHash(h, 4), jb = JumpConsistentHash(h, 5);
    if (ja != jb) {
      EXPECT_EQ(jb, 4);
      ++jump_moved;
    }
  }
  // Exact counts from an independent implementation of the whole recipe in
  // JavaScript under node (each about 1/5 of the keys, as theory says).
  EXPECT_EQ(ring_moved, 2195);
  EXPECT_EQ(hrw_moved, 1950);
  EXPECT_EQ(jump_moved, 1925);
}

// The classic balance experiment: 100,000 keys over S0..S9 on rings of V
// points per server; min and max loads from the same node oracle.
TEST(KeyBalanceTest, ClassicRingLoadsMatchNodeOracle) {
  std::vector<std::string> keys = ClassicKeys(100000);
  struct Case {
    int v;
    int min, max;
  };
  for (Case c : {Case{1, 224, 24526}, Case{10, 5376, 14921}, Case{100, 8387, 11381},
                 Case{1000, 9394, 10539}}) {
    std::vector<RingPoint> p;
    std::vector<uint32_t> rank(10);
    for (uint32_t s = 0; s < 10; ++s) {
      rank[s] = s;
      for (int i = 0; i < c.v; ++i) p.push_back({ClassicHash32(absl::StrCat("S", s, "#", i)), s});
    }
    HashRing ring(std::move(p), rank);
    std::vector<int> load(10, 0);
    for (const std::string& k : keys) ++load[ring.Owner(ClassicHash32(k))];
    EXPECT_EQ(*std::min_element(load.begin(), load.end()), c.min) << "V=" << c.v;
    EXPECT_EQ(*std::max_element(load.begin(), load.end()), c.max) << "V=" << c.v;
  }
}

// ---------------------------------------------------------------------------
// Tables: weights and balance.

// Rendezvous: each slot an independent weighted draw, so a backend's entries
// are Binomial(M, w / W): within 5 standard deviations.
TEST(TableBalanceTest, RendezvousAndModuloSharesFollowWeights) {
  std::vector<BackendSpec> b = {{"a", 1}, {"b", 2}, {"c", 3}, {"d", 10}, {"e", 0}, {"f", 1}};
  for (Builder build : {Builder{BuildRendezvousTable}, Builder{BuildModuloTable}}) {
    LookupTable t = MustBuild(build, b);
    std::vector<uint32_t> counts = t.EntryCounts();
    double total = 17, m = t.size();
    for (size_t i = 0; i < b.size(); ++i) {
      double p = b[i].weight / total;
      EXPECT_NEAR(counts[i], m * p, 5 * std::sqrt(m * p * (1 - p)) + 1e-9) << b[i].name;
    }
  }
}

// Ring: a backend with P points owns the sum of P arcs, sd/avg about
// 1/sqrt(P); with V = 2000 per unit of weight, within 5 of those sd.
TEST(TableBalanceTest, RingSharesFollowWeights) {
  std::vector<BackendSpec> b = {{"a", 1}, {"b", 2}, {"c", 4}, {"d", 8}};
  absl::StatusOr<LookupTable> t = BuildRingTable(b, kMaxTableSize, 2000);
  ASSERT_TRUE(t.ok()) << t.status();
  std::vector<uint32_t> counts = t->EntryCounts();
  for (size_t i = 0; i < b.size(); ++i) {
    double expected = t->size() * b[i].weight / 15.0;
    double rel_sd = 1 / std::sqrt(2000.0 * b[i].weight);
    EXPECT_NEAR(counts[i] / expected, 1.0, 5 * rel_sd) << b[i].name;
  }
}

// Theory: with V points per backend, a backend's share is a sum of V spacings,
// Gamma(V)-distributed: sd/avg = 1/sqrt(V). 200 backends make the measured
// spread a good estimate (its own error about 1/sqrt(2 * 200) = 5%); the
// largest table keeps slot rounding small beside 1/sqrt(1000).
TEST(TableBalanceTest, RingBalanceImprovesAsOneOverSqrtV) {
  std::vector<BackendSpec> b = Backends(200);
  double previous = 1e9;
  for (uint32_t v : {1u, 10u, 100u, 1000u}) {
    absl::StatusOr<LookupTable> t = BuildRingTable(b, kMaxTableSize, v);
    ASSERT_TRUE(t.ok()) << t.status();
    std::vector<uint32_t> counts = t->EntryCounts();
    double avg = static_cast<double>(t->size()) / b.size(), var = 0;
    for (uint32_t c : counts) var += (c - avg) * (c - avg);
    double cv = std::sqrt(var / b.size()) / avg;
    double theory = 1 / std::sqrt(static_cast<double>(v));
    std::printf("ring V=%u: sd/avg %.4f, theory %.4f\n", v, cv, theory);
    EXPECT_GT(cv / theory, 0.75) << "V=" << v;
    EXPECT_LT(cv / theory, 1.25) << "V=" << v;
    EXPECT_LT(cv, previous);
    previous = cv;
  }
}

TEST(TableBalanceTest, JumpIsEvenAndRefusesUnequalWeights) {
  LookupTable t = MustBuild(BuildJumpTable, Backends(10));
  for (uint32_t c : t.EntryCounts()) EXPECT_NEAR(c, 6553.7, 5 * std::sqrt(6553.7 * 0.9));
  absl::StatusOr<LookupTable> bad = BuildJumpTable(std::vector<BackendSpec>{{"a", 1}, {"b", 2}});
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("jump hash has no weights"), absl::string_view::npos);
  // Weight 0 is draining, not a weight: allowed beside equal weights.
  EXPECT_TRUE(BuildJumpTable(std::vector<BackendSpec>{{"a", 3}, {"b", 0}, {"c", 3}}).ok());
}

// The grouped scoring in BuildRendezvousTable (one log per weight, not per
// backend) must pick what scoring every backend would.
TEST(RendezvousTest, GroupedScoringEqualsScoringEveryBackend) {
  std::vector<BackendSpec> b = {{"x", 5}, {"a", 1}, {"q", 5}, {"m", 2}, {"k", 1}, {"z", 0}};
  const uint32_t m = 4099;
  LookupTable t = MustBuild(BuildRendezvousTable, b, m);
  for (uint32_t s = 0; s < m; ++s) {
    uint64_t kh = Fmix64(SlotKey(s, m) ^ kRendezvousSeed);
    int best = -1;
    double best_score = 0;
    for (size_t i = 0; i < b.size(); ++i) {
      if (b[i].weight == 0) continue;
      double score = RendezvousScore(RendezvousHash(kh, Xxh64(b[i].name, kRendezvousSeed)),
                                     b[i].weight);
      if (best < 0 || score > best_score) best = static_cast<int>(i), best_score = score;
    }
    ASSERT_EQ(t.slot(s), best) << "slot " << s;
  }
}

// The tables are what hashing.h says they are: each scheme evaluated at the
// slot's first hash, SlotKey(s). Recomputed here the slow way (binary search,
// one jump per slot) from the documented seeds.
TEST(SlotMappingTest, TablesAreTheSchemesAtEachSlotKey) {
  std::vector<BackendSpec> b = {{"m", 1}, {"c", 2}, {"x", 1}, {"a", 3}};
  const uint32_t m = 1009;
  std::vector<uint32_t> rank = {2, 1, 3, 0};  // byte order: a, c, m, x
  std::vector<RingPoint> points;
  for (uint32_t i = 0; i < b.size(); ++i) {
    for (uint32_t k = 0; k < b[i].weight * 7; ++k) {
      points.push_back({Xxh64(absl::StrCat(b[i].name, "#", k), kRingPointSeed), i});
    }
  }
  HashRing ring(points, rank);
  absl::StatusOr<LookupTable> rt = BuildRingTable(b, m, 7);
  ASSERT_TRUE(rt.ok());
  LookupTable mt = MustBuild(BuildModuloTable, b, m);
  std::vector<BackendSpec> equal = {{"m", 1}, {"c", 1}, {"x", 1}, {"a", 1}};
  LookupTable jt = MustBuild(BuildJumpTable, equal, m);
  const uint32_t by_name[] = {3, 1, 0, 2};  // a, c, m, x as list indices
  for (uint32_t s = 0; s < m; ++s) {
    uint64_t key = SlotKey(s, m);
    EXPECT_EQ(rt->slot(s), ring.Owner(key)) << "ring slot " << s;
    EXPECT_EQ(jt.slot(s), by_name[JumpConsistentHash(Fmix64(key ^ kJumpSeed), 4)])
        << "jump slot " << s;
    // Modulo: residues of W = 7 in runs of weight, by name: a 0-2, c 3-4, m 5, x 6.
    const uint32_t residue_owner[] = {3, 3, 3, 1, 1, 0, 2};
    EXPECT_EQ(mt.slot(s), residue_owner[Fmix64(key ^ kModuloSeed) % 7]) << "modulo slot " << s;
  }
}

// ---------------------------------------------------------------------------
// Every scheme: determinism, list order, empty, validation.

const Scheme kAll[] = {{"maglev", Maglev},
                       {"ring", Ring},
                       {"rendezvous", BuildRendezvousTable},
                       {"jump", BuildJumpTable},
                       {"modulo", BuildModuloTable}};

TEST(AllSchemesTest, ListOrderDoesNotMatterAndEveryBackendGetsSlots) {
  for (const Scheme& sc : kAll) {
    std::vector<BackendSpec> b = Backends(50);
    LookupTable t = MustBuild(sc.build, b);
    std::reverse(b.begin(), b.end());
    std::mt19937 rng(1);
    std::shuffle(b.begin(), b.end(), rng);
    LookupTable u = MustBuild(sc.build, b);
    EXPECT_EQ(t.fingerprint(), u.fingerprint()) << sc.name;
    for (uint32_t c : t.EntryCounts()) EXPECT_GT(c, 0u) << sc.name;
  }
}

TEST(AllSchemesTest, AllDrainingGivesEmptyAndBadInputIsRefused) {
  for (const Scheme& sc : kAll) {
    std::vector<BackendSpec> b = {{"a", 0}, {"b", 0}};
    LookupTable t = MustBuild(sc.build, b);
    EXPECT_TRUE(t.empty()) << sc.name;
    EXPECT_FALSE(sc.build(b, 65536).ok()) << sc.name << ": non-prime M";
    std::vector<BackendSpec> dup = {{"a", 1}, {"a", 1}};
    EXPECT_FALSE(sc.build(dup, 65537).ok()) << sc.name << ": duplicate names";
  }
  absl::StatusOr<LookupTable> huge =
      BuildRingTable(std::vector<BackendSpec>{{"a", 60000}}, 65537, 100);
  EXPECT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("ring_points"), absl::string_view::npos);
}

// ---------------------------------------------------------------------------
// Configuration: the per-VIP choice.

std::string VipText(const std::string& extra, const std::string& weights = "1") {
  return absl::StrCat(R"([[vip]]
name = "web"
address = "10.0.0.1"
)", extra, R"(

  [[vip.backend]]
  name = "a"
  address = "10.1.0.1"

  [[vip.backend]]
  name = "b"
  address = "10.1.0.2"
  weight = )", weights, "\n");
}

TEST(HashingConfigTest, EachAlgorithmParsesAndBuildsItsScheme) {
  struct Case {
    const char* text;
    Algorithm algorithm;
    Builder build;
  };
  for (Case c : {Case{"algorithm = \"maglev\"", Algorithm::kMaglev, Maglev},
                 Case{"algorithm = \"ring\"", Algorithm::kRing, Ring},
                 Case{"algorithm = \"rendezvous\"", Algorithm::kRendezvous, BuildRendezvousTable},
                 Case{"algorithm = \"jump\"", Algorithm::kJump, BuildJumpTable},
                 Case{"algorithm = \"modulo\"\nallow_modulo = true", Algorithm::kModulo,
                      BuildModuloTable}}) {
    absl::StatusOr<Config> config = ParseConfig(VipText(c.text), "t.toml");
    ASSERT_TRUE(config.ok()) << config.status();
    const VipConfig& v = config->vips[0];
    EXPECT_EQ(v.algorithm, c.algorithm);
    absl::StatusOr<LookupTable> t = BuildVipTable(v);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->fingerprint(), MustBuild(c.build, v.BackendSpecs()).fingerprint())
        << ToString(v.algorithm);
  }
}

std::string Refusal(const std::string& text) {
  absl::StatusOr<Config> c = ParseConfig(text, "t.toml");
  return c.ok() ? "accepted" : std::string(c.status().message());
}

TEST(HashingConfigTest, ModuloIsRefusedUnlessTheOperatorInsists) {
  std::string msg = Refusal(VipText("algorithm = \"modulo\""));
  EXPECT_EQ(msg.rfind("t.toml:4: vip[\"web\"].algorithm:", 0), 0u) << msg;
  EXPECT_NE(msg.find("allow_modulo = true"), std::string::npos) << msg;
  EXPECT_NE(Refusal(VipText("algorithm = \"modulo\"\nallow_modulo = false")).find("modulo"),
            std::string::npos);
  EXPECT_EQ(Refusal(VipText("algorithm = \"modulo\"\nallow_modulo = true")), "accepted");
  // The consent is harmless on another scheme (switching back needs no edit).
  EXPECT_EQ(Refusal(VipText("allow_modulo = true")), "accepted");
  EXPECT_NE(Refusal(VipText("allow_modulo = 1")).find("must be true or false"), std::string::npos);
}

TEST(HashingConfigTest, UnknownAlgorithmListsTheChoices) {
  std::string msg = Refusal(VipText("algorithm = \"consistent\""));
  EXPECT_NE(msg.find("maglev, ring, rendezvous, jump, modulo"), std::string::npos) << msg;
}

TEST(HashingConfigTest, JumpWithUnequalWeightsIsRefusedAtTheAlgorithmKey) {
  std::string msg = Refusal(VipText("algorithm = \"jump\"", "3"));
  EXPECT_EQ(msg.rfind("t.toml:4: vip[\"web\"].algorithm:", 0), 0u) << msg;
  EXPECT_NE(msg.find("no weights"), std::string::npos) << msg;
}

TEST(HashingConfigTest, RingPointsAndBoundedLoadEpsilon) {
  absl::StatusOr<Config> c = ParseConfig(
      VipText("algorithm = \"ring\"\nring_points = 400\nbounded_load_epsilon = 0.25"), "t.toml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->vips[0].ring_points, 400u);
  ASSERT_TRUE(c->vips[0].bounded_load_epsilon.has_value());
  EXPECT_DOUBLE_EQ(*c->vips[0].bounded_load_epsilon, 0.25);

  absl::StatusOr<Config> d = ParseConfig(VipText(""), "t.toml");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->vips[0].ring_points, kDefaultRingPoints);
  EXPECT_FALSE(d->vips[0].bounded_load_epsilon.has_value());

  std::string msg = Refusal(VipText("bounded_load_epsilon = 0"));
  EXPECT_EQ(msg.rfind("t.toml:4: vip[\"web\"].bounded_load_epsilon: 0 is out of range", 0), 0u)
      << msg;
  EXPECT_NE(Refusal(VipText("bounded_load_epsilon = \"x\"")).find("must be a number"),
            std::string::npos);
  EXPECT_NE(Refusal(VipText("ring_points = 0")).find("out of range"), std::string::npos);
}

TEST(HashingConfigTest, RendezvousAboveItsWorkCapIsRefusedAtTheAlgorithmKey) {
  // kMaxRendezvousEvaluations = 2^28: at the largest table, 64 serving
  // backends fit (64 x 4194301 = 2^28 - 192) and 65 do not.
  static_assert(kMaxRendezvousEvaluations == (uint64_t{1} << 28));
  auto text = [](int serving, int draining) {
    std::string t = "[[vip]]\nname = \"web\"\naddress = \"10.0.0.1\"\n"
                    "algorithm = \"rendezvous\"\ntable_size = 4194301\n";
    for (int i = 0; i < serving + draining; ++i) {
      absl::StrAppend(&t, "[[vip.backend]]\nname = \"b", i, "\"\naddress = \"10.1.", i / 250,
                      ".", i % 250 + 1, "\"\nweight = ", i < serving ? 1 : 0, "\n");
    }
    return t;
  };
  EXPECT_EQ(Refusal(text(64, 0)), "accepted");
  // Draining backends are never scored: only serving ones count.
  EXPECT_EQ(Refusal(text(64, 100)), "accepted");
  std::string msg = Refusal(text(65, 0));
  EXPECT_EQ(msg.rfind("t.toml:4: vip[\"web\"].algorithm:", 0), 0u) << msg;
  EXPECT_NE(msg.find("table_size 4194301 x 65 serving backends = 272629565"), std::string::npos)
      << msg;
  // The largest table that fits: floor(2^28 / 65).
  EXPECT_NE(msg.find("table_size of at most 4129776"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"maglev\""), std::string::npos) << msg;

  // The builder refuses the same input by itself (reload paths, analyze).
  std::vector<BackendSpec> many = Backends(65);
  absl::StatusOr<LookupTable> t = BuildRendezvousTable(many, 4194301);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(t.status().message()), std::string(ValidateRendezvousInput(many, 4194301).message()));
  // No table_size can fit 65535 backends (the table needs one slot each).
  std::vector<BackendSpec> most = Backends(65535);
  std::string none(ValidateRendezvousInput(most, 65537).message());
  EXPECT_EQ(none.find("table_size of at most"), std::string::npos) << none;
  EXPECT_NE(none.find("choose \"maglev\""), std::string::npos) << none;
  EXPECT_TRUE(ValidateRendezvousInput(Backends(4095), 65537).ok());
  EXPECT_FALSE(ValidateRendezvousInput(Backends(4096), 65537).ok());
}

}  // namespace
}  // namespace maglb
