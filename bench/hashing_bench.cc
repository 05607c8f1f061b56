// Table builds of every hashing scheme at M = 65537, N = 10, 100, 1000,
// measured in one run so that ratios against Maglev hold on the same machine.
// The packet path's lookup is the same for every scheme (one LookupTable);
// BM_Lookup shows it on tables from each builder.
#include <benchmark/benchmark.h>

#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "maglb/bounded_load.h"
#include "maglb/hashing.h"
#include "maglb/maglev.h"

namespace maglb {
namespace {

std::vector<BackendSpec> Backends(int n, bool weighted = false) {
  std::vector<BackendSpec> b;
  for (int i = 0; i < n; ++i) {
    b.push_back({absl::StrFormat("backend-%05d", i), weighted ? 1u + i % 3u : 1u});
  }
  return b;
}

constexpr uint32_t kM = 65537;

absl::StatusOr<LookupTable> Build(int scheme, std::span<const BackendSpec> b) {
  switch (scheme) {
    case 0: return BuildMaglevTable(b, kM);
    case 1: return BuildRingTable(b, kM, kDefaultRingPoints);
    case 2: return BuildRendezvousTable(b, kM);
    case 3: return BuildJumpTable(b, kM);
    default: return BuildModuloTable(b, kM);
  }
}
const char* const kNames[] = {"maglev", "ring", "rendezvous", "jump", "modulo"};

// range(0): scheme, range(1): N, range(2): 1 = weights 1..3 (not for jump).
void BM_Build(benchmark::State& state) {
  const int scheme = static_cast<int>(state.range(0));
  std::vector<BackendSpec> b = Backends(static_cast<int>(state.range(1)), state.range(2) != 0);
  for (auto _ : state) {
    absl::StatusOr<LookupTable> t = Build(scheme, b);
    if (!t.ok()) state.SkipWithError(std::string(t.status().message()).c_str());
    benchmark::DoNotOptimize(t);
  }
  state.SetLabel(absl::StrFormat("%s N=%d M=%u%s", kNames[scheme], b.size(), kM,
                                 state.range(2) ? " weights 1..3" : ""));
}
BENCHMARK(BM_Build)
    ->ArgsProduct({{0, 1, 2, 3, 4}, {10, 100, 1000}, {0}})
    ->Args({0, 1000, 1})
    ->Args({1, 1000, 1})
    ->Args({2, 1000, 1})
    ->Unit(benchmark::kMillisecond);

// Lookup over a stream of hashes touching the whole table.
void BM_Lookup(benchmark::State& state) {
  LookupTable t = *Build(static_cast<int>(state.range(0)), Backends(100));
  uint64_t h = 0x9e3779b97f4a7c15ULL, sum = 0;
  for (auto _ : state) {
    h = h * 6364136223846793005ULL + 1442695040888963407ULL;
    sum += t.Lookup(h);
  }
  benchmark::DoNotOptimize(sum);
  state.SetLabel(kNames[state.range(0)]);
}
BENCHMARK(BM_Lookup)->DenseRange(0, 4);

// One bounded-load decision for a new flow, 100 backends near the bound.
void BM_BoundedLoadAssign(benchmark::State& state) {
  const uint32_t n = 100;
  std::vector<uint32_t> flows(n), weights(n, 1), pref(n);
  for (uint32_t i = 0; i < n; ++i) flows[i] = 1000 + (i * 37) % 60;
  std::iota(pref.begin(), pref.end(), 0u);
  LoadView v{flows, weights, std::accumulate(flows.begin(), flows.end(), uint64_t{0}), n};
  for (auto _ : state) benchmark::DoNotOptimize(BoundedLoadAssign(pref, v, 0.01));
}
BENCHMARK(BM_BoundedLoadAssign);

}  // namespace
}  // namespace maglb

BENCHMARK_MAIN();
