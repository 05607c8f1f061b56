// Maglev table build and lookup cost, beside the paper-faithful reference
// builder from the test tree, measured in the same run.
#include <benchmark/benchmark.h>

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "maglb/hash.h"
#include "maglb/maglev.h"
#include "maglev_reference.h"

namespace maglb {
namespace {

std::vector<BackendSpec> Backends(int n) {
  std::vector<BackendSpec> b;
  for (int i = 0; i < n; ++i) b.push_back({absl::StrFormat("backend-%d", i), 1});
  return b;
}

// Weight mixes for the builder-vs-plain-walk comparison: 1 = all equal,
// otherwise weights 1..range from a fixed generator (the same in every run).
std::vector<BackendSpec> WeightedBackends(int n, uint32_t range) {
  std::vector<BackendSpec> b = Backends(n);
  uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (BackendSpec& s : b) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    s.weight = 1 + static_cast<uint32_t>((x >> 33) % range);
  }
  return b;
}

// The baseline the builder must beat: the straightforward Maglev fill with no
// tricks. Each backend keeps its permutation position and walks it one slot
// at a time (pos += skip mod M, an add and a compare, no division) until an
// empty slot; a byte per slot says taken. Turn order and weights as the
// builder defines them (maglev.h): canonical order by the offset hash, and
// every turn a backend earns `weight` credits and claims once per max_weight.
// It returns the same LookupTable (fingerprint included), so the two are
// timed for the same output; BM_PlainWalk checks the tables are equal.
absl::StatusOr<LookupTable> PlainWalkMaglevTable(std::span<const BackendSpec> backends,
                                                 uint32_t m) {
  struct Walker {
    uint64_t key;
    uint32_t pos, skip, weight, credit;
    uint16_t index;
  };
  std::vector<Walker> walkers;
  uint32_t max_weight = 0;
  for (size_t i = 0; i < backends.size(); ++i) {
    if (backends[i].weight == 0) continue;
    MaglevPermutation p = MaglevPermutationOf(backends[i].name, m);
    walkers.push_back({Xxh64(backends[i].name, kMaglevOffsetSeed), p.offset, p.skip,
                       backends[i].weight, 0, static_cast<uint16_t>(i)});
    max_weight = std::max(max_weight, backends[i].weight);
  }
  std::sort(walkers.begin(), walkers.end(), [&](const Walker& a, const Walker& b) {
    if (a.key != b.key) return a.key < b.key;
    return backends[a.index].name < backends[b.index].name;
  });
  std::vector<uint8_t> taken(m, 0);
  std::vector<uint16_t> slots(m);
  uint32_t filled = 0;
  while (true) {
    for (Walker& w : walkers) {
      w.credit += w.weight;
      if (w.credit < max_weight) continue;
      w.credit -= max_weight;
      uint32_t pos = w.pos;
      while (taken[pos]) pos = pos + w.skip >= m ? pos + w.skip - m : pos + w.skip;
      taken[pos] = 1;
      slots[pos] = w.index;
      w.pos = pos + w.skip >= m ? pos + w.skip - m : pos + w.skip;
      if (++filled == m) return LookupTable(std::move(slots), BackendNames(backends));
    }
  }
}

// Builder and plain walk side by side, per (N, M, weight range). Run both
// filters in one process and compare the pairs' ratio, not absolute times.
// A pair benchmark's arguments: N backends, table size M, weights 1..range.
struct PairCase {
  explicit PairCase(const benchmark::State& state)
      : backends(WeightedBackends(static_cast<int>(state.range(0)), static_cast<uint32_t>(state.range(2)))),
        m(static_cast<uint32_t>(state.range(1))),
        label(absl::StrFormat("N=%d M=%u w=1..%d", backends.size(), m, state.range(2))) {}
  std::vector<BackendSpec> backends;
  uint32_t m;
  std::string label;
};

// Whether the plain walk builds the builder's table (else the benchmark is
// skipped: a baseline that builds something else measures nothing).
bool BaselineAgrees(benchmark::State& state, const PairCase& c) {
  if (PlainWalkMaglevTable(c.backends, c.m)->slots() == BuildMaglevTable(c.backends, c.m)->slots()) return true;
  state.SkipWithError("plain walk and builder disagree: the baseline is wrong");
  return false;
}

const char* FillCodeName(MaglevFillCode code) {
  return code == MaglevFillCode::kAvx2 ? "avx2" : "portable";
}

void BM_Builder(benchmark::State& state) {
  const PairCase c(state);
  for (auto _ : state) {
    absl::StatusOr<LookupTable> t = BuildMaglevTable(c.backends, c.m);
    benchmark::DoNotOptimize(t);
  }
  state.SetLabel(c.label + " fill=" + FillCodeName(PreferredMaglevFillCode()));
}

void BM_PlainWalk(benchmark::State& state) {
  const PairCase c(state);
  if (!BaselineAgrees(state, c)) return;
  for (auto _ : state) {
    absl::StatusOr<LookupTable> t = PlainWalkMaglevTable(c.backends, c.m);
    benchmark::DoNotOptimize(t);
  }
  state.SetLabel(c.label);
}

// The two side by side in one loop: each iteration times the plain walk and
// then the builder (thread CPU time, each including the table's destruction,
// as in the two benchmarks above), so both see the same machine within a few
// milliseconds. On a shared machine the load moves absolute times by 2x
// between benchmarks that run a minute apart; the ratio of each pair holds
// much better. Counters: medians of plain_ms, builder_ms and of the per-pair
// ratio = plain / builder (above 1: the builder is faster), and page faults
// per build of each.
double ThreadCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

long MinorFaults() {
  rusage u;
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_minflt;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void BuilderOverPlainWalk(benchmark::State& state, MaglevFillCode code) {
  const PairCase c(state);
  if (!MaglevFillCodeRuns(code)) {
    state.SkipWithError("this fill code does not run on this CPU or build");
    return;
  }
  if (!BaselineAgrees(state, c)) return;
  std::vector<double> plain, builder, ratio;
  long plain_faults = 0, builder_faults = 0;
  for (auto _ : state) {
    const long f0 = MinorFaults();
    const double t0 = ThreadCpuMs();
    {
      absl::StatusOr<LookupTable> t = PlainWalkMaglevTable(c.backends, c.m);
      benchmark::DoNotOptimize(t);
    }
    const double t1 = ThreadCpuMs();
    const long f1 = MinorFaults();
    const double t2 = ThreadCpuMs();
    {
      absl::StatusOr<LookupTable> t = BuildMaglevTableWith(code, c.backends, c.m);
      benchmark::DoNotOptimize(t);
    }
    const double t3 = ThreadCpuMs();
    builder_faults += MinorFaults() - f1;
    plain_faults += f1 - f0;
    plain.push_back(t1 - t0);
    builder.push_back(t3 - t2);
    ratio.push_back((t1 - t0) / (t3 - t2));
  }
  state.counters["plain_ms"] = Median(plain);
  state.counters["builder_ms"] = Median(builder);
  state.counters["ratio"] = Median(ratio);
  // Page faults per build (first touches of freshly mapped memory).
  state.counters["plain_faults"] = static_cast<double>(plain_faults) / plain.size();
  state.counters["builder_faults"] = static_cast<double>(builder_faults) / builder.size();
  state.SetLabel(c.label + " fill=" + FillCodeName(code));
}

// The fill BuildMaglevTable picks on this CPU, and the portable one beside it.
void BM_BuilderOverPlainWalk(benchmark::State& state) {
  BuilderOverPlainWalk(state, PreferredMaglevFillCode());
}
void BM_PortableOverPlainWalk(benchmark::State& state) {
  BuilderOverPlainWalk(state, MaglevFillCode::kPortable);
}

void PairArgs(benchmark::internal::Benchmark* bench) {
  for (int64_t m : {65537, 1000003}) {
    for (int64_t n : {10, 100, 1000, 5000}) {
      for (int64_t range : {1, 3, 100}) bench->Args({n, m, range});
    }
  }
  bench->Unit(benchmark::kMicrosecond);
}
BENCHMARK(BM_PlainWalk)->Apply(PairArgs);
BENCHMARK(BM_Builder)->Apply(PairArgs);
BENCHMARK(BM_BuilderOverPlainWalk)->Apply(PairArgs);
BENCHMARK(BM_PortableOverPlainWalk)->Apply(PairArgs);

void BM_BuildMaglev(benchmark::State& state) {
  std::vector<BackendSpec> b = Backends(static_cast<int>(state.range(0)));
  const uint32_t m = static_cast<uint32_t>(state.range(1));
  for (auto _ : state) {
    absl::StatusOr<LookupTable> t = BuildMaglevTable(b, m);
    benchmark::DoNotOptimize(t);
  }
  state.SetLabel(absl::StrFormat("N=%d M=%u", b.size(), m));
}
BENCHMARK(BM_BuildMaglev)
    ->Args({10, 65537})
    ->Args({100, 65537})
    ->Args({1000, 65537})
    ->Args({1000, 655373})
    ->Unit(benchmark::kMicrosecond);

void BM_BuildReference(benchmark::State& state) {
  std::vector<BackendSpec> b = Backends(static_cast<int>(state.range(0)));
  const uint64_t m = static_cast<uint64_t>(state.range(1));
  for (auto _ : state) {
    std::vector<int> t = testing::ReferenceMaglevPopulate(b, m);
    benchmark::DoNotOptimize(t);
  }
  state.SetLabel(absl::StrFormat("N=%d M=%u", b.size(), m));
}
BENCHMARK(BM_BuildReference)
    ->Args({10, 65537})
    ->Args({100, 65537})
    ->Args({1000, 65537})
    ->Args({1000, 655373})
    ->Unit(benchmark::kMicrosecond);

// Skewed weights: one backend at 65535, the rest at 1. Visiting every backend
// every turn would cost (turns x N); the builder switches to a heap schedule.
void BM_BuildMaglevSkewed(benchmark::State& state) {
  std::vector<BackendSpec> b = Backends(static_cast<int>(state.range(0)));
  b[0].weight = kMaxWeight;
  const uint32_t m = static_cast<uint32_t>(state.range(1));
  for (auto _ : state) {
    absl::StatusOr<LookupTable> t = BuildMaglevTable(b, m);
    benchmark::DoNotOptimize(t);
  }
  state.SetLabel(absl::StrFormat("N=%d M=%u one at 65535", b.size(), m));
}
BENCHMARK(BM_BuildMaglevSkewed)
    ->Args({1000, 65537})
    ->Args({5000, 1000003})
    ->Unit(benchmark::kMicrosecond);

// The LookupTable constructor alone (its fingerprint: which names own slots,
// their ranks, XXH64 over the ranked slots), which every builder ends in.
void BM_LookupTableFromSlots(benchmark::State& state) {
  const uint32_t m = static_cast<uint32_t>(state.range(1));
  const LookupTable built = *BuildMaglevTable(Backends(static_cast<int>(state.range(0))), m);
  const std::vector<std::string> names = built.backend_names();
  for (auto _ : state) {
    std::vector<uint16_t> slots = built.slots();
    LookupTable t(std::move(slots), names);
    benchmark::DoNotOptimize(t);
  }
  state.SetLabel(absl::StrFormat("N=%d M=%u", names.size(), m));
}
BENCHMARK(BM_LookupTableFromSlots)->Args({10, 65537})->Args({1000, 65537})->Args({10, 1000003})->Unit(benchmark::kMicrosecond);

// Copying the slots alone, which BM_LookupTableFromSlots includes.
void BM_CopySlots(benchmark::State& state) {
  const uint32_t m = static_cast<uint32_t>(state.range(0));
  const std::vector<uint16_t> from(m, 1);
  for (auto _ : state) {
    std::vector<uint16_t> slots = from;
    benchmark::DoNotOptimize(slots);
  }
}
BENCHMARK(BM_CopySlots)->Arg(65537)->Arg(1000003)->Unit(benchmark::kMicrosecond);

// Lookup: flow hash -> backend index, over a stream of hashes that touches
// the whole table (no division: a multiply and a shift).
void BM_Lookup(benchmark::State& state) {
  const uint32_t m = static_cast<uint32_t>(state.range(0));
  LookupTable t = *BuildMaglevTable(Backends(100), m);
  uint64_t h = 0x9e3779b97f4a7c15ULL;
  uint64_t sum = 0;
  for (auto _ : state) {
    for (int i = 0; i < 1024; ++i) {
      h = h * 6364136223846793005ULL + 1442695040888963407ULL;  // LCG: cheap, spreads
      sum += t.Lookup(h);
    }
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations() * 1024);
  state.SetLabel(absl::StrFormat("M=%u", m));
}
BENCHMARK(BM_Lookup)->Arg(65537)->Arg(655373);

// The same loop without the table read: the cost of generating hashes alone.
void BM_LookupBaselineHashOnly(benchmark::State& state) {
  uint64_t h = 0x9e3779b97f4a7c15ULL;
  uint64_t sum = 0;
  for (auto _ : state) {
    for (int i = 0; i < 1024; ++i) {
      h = h * 6364136223846793005ULL + 1442695040888963407ULL;
      sum += (h >> 32) & 0xffff;
    }
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations() * 1024);
}
BENCHMARK(BM_LookupBaselineHashOnly);

}  // namespace
}  // namespace maglb

BENCHMARK_MAIN();
