// Config parsing at 1k / 10k / 40k VIPs (issue 8, point 4): parse + validate
// must stay linear in the size of the file, since the daemon parses on every
// reload. Each VIP has its own address and a few backends, as a large
// deployment's generated config would. BM_ParseConfig reports time per VIP
// beside the total, so that linearity reads off one column.
#include <benchmark/benchmark.h>

#include <string>

#include "absl/strings/str_format.h"
#include "maglb/config.h"

namespace maglb {
namespace {

std::string GeneratedConfig(int vips, int backends) {
  std::string text = "[lb]\nipv4 = \"192.0.2.10\"\n\n";
  for (int i = 0; i < vips; ++i) {
    absl::StrAppendFormat(&text,
                          "[[vip]]\nname = \"vip-%06d\"\naddress = \"10.%d.%d.%d\"\nport = 80\n"
                          "table_size = 251\n",
                          i, (i >> 16) & 255, (i >> 8) & 255, i & 255);
    for (int b = 0; b < backends; ++b) {
      absl::StrAppendFormat(&text, "  [[vip.backend]]\n  name = \"b%d\"\n  address = \"172.16.%d.%d\"\n",
                            b, (i >> 8) & 255, (i + b) & 255);
    }
  }
  return text;
}

void BM_ParseConfig(benchmark::State& state) {
  const int vips = static_cast<int>(state.range(0));
  const std::string text = GeneratedConfig(vips, static_cast<int>(state.range(1)));
  for (auto _ : state) {
    absl::StatusOr<Config> c = ParseConfig(text, "bench.toml");
    if (!c.ok() || c->vips.size() != static_cast<size_t>(vips)) {
      state.SkipWithError("the generated config was refused");
      break;
    }
    benchmark::DoNotOptimize(c);
  }
  state.counters["bytes"] = static_cast<double>(text.size());
  state.counters["per_vip"] = benchmark::Counter(static_cast<double>(vips),
                                                 benchmark::Counter::kIsIterationInvariantRate |
                                                     benchmark::Counter::kInvert);
}
// {VIPs, backends per VIP}: 40k VIPs is the case; 4096 x 16 is the
// most the data plane takes (kMaxVips, kMaxBackendsTotal). 40k x 1 beside
// 40k x 2 isolates what is left that grows with the VIP count: toml++ 3.3
// finds an existing array of tables by a linear search of every such array
// so far, once per repeated [[vip.backend]] header.
BENCHMARK(BM_ParseConfig)
    ->Args({1000, 2})
    ->Args({10000, 2})
    ->Args({40000, 2})
    ->Args({40000, 1})
    ->Args({4096, 16})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace maglb

BENCHMARK_MAIN();
