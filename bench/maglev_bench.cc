// Maglev table build and lookup cost, beside the paper-faithful reference
// builder from the test tree, measured in the same run.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "maglb/maglev.h"
#include "maglev_reference.h"

namespace maglb {
namespace {

std::vector<BackendSpec> Backends(int n) {
  std::vector<BackendSpec> b;
  for (int i = 0; i < n; ++i) b.push_back({absl::StrFormat("backend-%d", i), 1});
  return b;
}

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
