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
// {VIPs, backends per VIP}: 4096 x 16 is the most the data plane takes
// (kMaxVips, kMaxBackendsTotal). The case, 40k VIPs, is now refused
// before parsing (kMaxConfigTableArrays): toml++ 3.3 finds an existing array
// of tables by a linear search of every such array so far, once per
// [[vip.backend]] header.
BENCHMARK(BM_ParseConfig)
    ->Args({1000, 2})
    ->Args({4096, 2})
    ->Args({4096, 16})
    ->Unit(benchmark::kMillisecond);

// The largest config the data plane takes, skewed: 4095 VIPs of one backend,
// then one VIP of all the other backends, so that each of its headers makes
// toml++ search past every other VIP's backend list.
void BM_ParseLargestSkewed(benchmark::State& state) {
  std::string text = GeneratedConfig(4095, 1);
  absl::StrAppend(&text, "[[vip]]\nname = \"big\"\naddress = \"10.255.0.1\"\nport = 80\n");
  for (int b = 0; b < 65536 - 4095; ++b) {
    absl::StrAppendFormat(&text, "  [[vip.backend]]\n  name = \"b%d\"\n  address = \"172.17.%d.%d\"\n",
                          b, (b >> 8) & 255, b & 255);
  }
  for (auto _ : state) {
    absl::StatusOr<Config> c = ParseConfig(text, "bench.toml");
    if (!c.ok() || c->vips.size() != 4096) {
      state.SkipWithError(std::string(c.status().message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(c);
  }
  state.counters["bytes"] = static_cast<double>(text.size());
}
BENCHMARK(BM_ParseLargestSkewed)->Unit(benchmark::kMillisecond);

// Hostile shapes: small units repeated up to state.range(1) KiB, each aimed
// at one of the lists toml++ 3.3 searches linearly (parser.inl: table_arrays,
// dotted_key_tables, implicit_tables). Unbounded, each grows quadratically
// with the file; the pre-scan in ParseConfig must refuse them, or let them
// through only while bounded, in time linear in the file. The figure is the
// time to an answer, accepted or refused (the "refused" counter says which).
enum Shape : int64_t {
  // [[vip]] + 2 x [[vip.backend]]: one new backend array per unit, and each
  // later header searches every array so far.
  kArrayRepeat,
  // [tN] with x.y and x.z: x.z searches every dotted-key table so far.
  kDottedTables,
  // The same inside inline tables, all on one line: a = [{x.y=1, x.z=1}, ...]
  kInlineDotted,
  // [aN.b] then [aN]: each promotion searches (and erases from) the list of
  // implicit tables.
  kImplicitPromote,
  // As many arrays of tables as the pre-scan lets through, then one header
  // of the newest repeated: each repeat searches them all (the worst the
  // pre-scan admits).
  kManyArraysRepeatLast,
  // The same, filled to exactly what the pre-scan admits: the slowest
  // accepted file (kMaxConfigTableArrays arrays, kMaxConfigHeaderParts).
  kWorstAdmitted,
  // Linear shapes for scale: one key per line in one table, and one long
  // array of inline tables.
  kManyKeys,
  kManyInlineTables,
};

std::string HostileConfig(Shape shape, size_t bytes) {
  std::string text;
  int n = 0;
  switch (shape) {
    case kArrayRepeat:
      while (text.size() < bytes) text += "[[vip]]\n[[vip.backend]]\n[[vip.backend]]\n";
      break;
    case kDottedTables:
      while (text.size() < bytes) absl::StrAppendFormat(&text, "[t%d]\nx.y = 1\nx.z = 1\n", n++);
      break;
    case kInlineDotted:
      text = "a = [";
      while (text.size() < bytes) text += "{x.y=1,x.z=1},";
      text += "]\n";
      break;
    case kImplicitPromote: {
      while (text.size() < bytes / 2) absl::StrAppendFormat(&text, "[a%d.b]\n", n++);
      while (n > 0) absl::StrAppendFormat(&text, "[a%d]\n", --n);
      break;
    }
    case kManyArraysRepeatLast:
      for (; n < 4150 && text.size() < bytes; ++n) absl::StrAppendFormat(&text, "[[a%d]]\n", n);
      while (text.size() < bytes) absl::StrAppendFormat(&text, "[[a%d]]\n", n - 1);
      break;
    case kWorstAdmitted:
      for (; n < kMaxConfigTableArrays; ++n) absl::StrAppendFormat(&text, "[[a%d]]\n", n);
      for (int i = n; i < kMaxConfigHeaderParts; ++i) absl::StrAppendFormat(&text, "[[a%d]]\n", n - 1);
      break;
    case kManyKeys:
      while (text.size() < bytes) absl::StrAppendFormat(&text, "k%d = 1\n", n++);
      break;
    case kManyInlineTables:
      text = "a = [";
      while (text.size() < bytes) text += "{},";
      text += "]\n";
      break;
  }
  return text;
}

void BM_ParseHostile(benchmark::State& state) {
  const std::string text =
      HostileConfig(static_cast<Shape>(state.range(0)), static_cast<size_t>(state.range(1)) << 10);
  bool refused = false;
  for (auto _ : state) {
    absl::StatusOr<Config> c = ParseConfig(text, "hostile.toml");
    refused = !c.ok();
    benchmark::DoNotOptimize(c);
  }
  state.counters["bytes"] = static_cast<double>(text.size());
  state.counters["refused"] = refused ? 1 : 0;
}
// {shape, KiB}: up to just under kMaxConfigBytes (16 MiB).
BENCHMARK(BM_ParseHostile)
    ->ArgsProduct({{kArrayRepeat, kDottedTables, kInlineDotted, kImplicitPromote,
                    kManyArraysRepeatLast, kWorstAdmitted, kManyKeys, kManyInlineTables},
                   {256, 1024, 4096, 16383}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace maglb

BENCHMARK_MAIN();
