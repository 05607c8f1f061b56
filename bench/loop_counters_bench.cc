// What the worker loop's two per-pass counters (worker_polls,
// worker_busy_polls: dataplane/worker_loop.cc) cost a pass, in a model of
// the pass (a burst that finds 32 frames one pass in eight): none, a
// Counter::Add each (load, add, store through memory), and the loop's way,
// counts kept in registers and stored with Counter::Set.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "maglb/pipeline.h"

namespace {

struct alignas(64) PollCounters {
  maglb::Counter polls, busy_polls;
};

uint16_t FakeBurst(uint64_t pass) { return (pass & 7) == 0 ? 32 : 0; }

void BM_Pass_NoCounters(benchmark::State& state) {
  uint64_t pass = 0, frames = 0;
  for (auto _ : state) {
    uint16_t got = FakeBurst(pass++);
    benchmark::DoNotOptimize(got);
    frames += got;
  }
  benchmark::DoNotOptimize(frames);
}

void BM_Pass_CounterAdd(benchmark::State& state) {
  static PollCounters c;
  uint64_t pass = 0, frames = 0;
  for (auto _ : state) {
    uint16_t got = FakeBurst(pass++);
    benchmark::DoNotOptimize(got);
    frames += got;
    c.polls.Add(1);
    c.busy_polls.Add(got != 0);
  }
  benchmark::DoNotOptimize(frames);
}

void BM_Pass_RegisterCountsSet(benchmark::State& state) {
  static PollCounters c;
  uint64_t pass = 0, frames = 0, polls = 0, busy_polls = 0;
  for (auto _ : state) {
    uint16_t got = FakeBurst(pass++);
    benchmark::DoNotOptimize(got);
    frames += got;
    busy_polls += got != 0;
    c.polls.Set(++polls);
    c.busy_polls.Set(busy_polls);
  }
  benchmark::DoNotOptimize(frames);
}

}  // namespace

BENCHMARK(BM_Pass_NoCounters);
BENCHMARK(BM_Pass_CounterAdd);
BENCHMARK(BM_Pass_RegisterCountsSet);
BENCHMARK_MAIN();
