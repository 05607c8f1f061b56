// What the worker loop's two per-pass counters (worker_polls,
// worker_busy_polls: dataplane/worker_loop.cc) cost a pass, in a model of
// the pass (a burst that finds 32 frames one pass in eight): none, a
// Counter::Add each (load, add, store through memory), and the loop's way,
// counts kept in registers and stored with Counter::Set.
//
// Then the receive-to-transmit latency histogram (LoopCounters::latency),
// as the loop does it. Both variants read the TSC once a burst, as the loop
// always did for the pipeline's clock (NowNs); with the histogram that read
// is also the burst's start, the frames it queued are the TX buffers' counts
// before and after, and at the pass's end, if any were, a second TSC read,
// the conversion to ns and LatencyHistogram::Record. One pass in eight busy
// (Arg 7), and every pass busy (Arg 0: the cost per burst). Then the loop's
// way since (BM_Pass_WithLatencyOneRead): one TSC read a pass, busy or not.
#include <benchmark/benchmark.h>
#include <rte_cycles.h>

#include <cstdint>

#include "maglb/latency_histogram.h"
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

// The TX buffers' counts (worker_loop.cc TxBuffer: n and flushed), in
// memory as there: a burst's frames are what it adds to them.
struct FakeTx {
  uint16_t n = 0;
  uint64_t flushed = 0;
  uint64_t queued() const { return flushed + n; }
  // The pipeline queues a burst's frames; returns how many.
  uint64_t Queue(uint16_t got) {
    const uint64_t before = queued();
    n = static_cast<uint16_t>(n + got);
    benchmark::ClobberMemory();
    return queued() - before;
  }
  void Flush() {
    if (n != 0) {
      flushed += n;
      n = 0;
    }
  }
};

// The end of every pass: the poll counters as the loop keeps them.
struct PassCounts {
  uint64_t polls = 0, busy_polls = 0;
  void Count(PollCounters& c, uint16_t got) {
    busy_polls += got != 0;
    c.polls.Set(++polls);
    c.busy_polls.Set(busy_polls);
  }
};

void ReportFramesTimed(benchmark::State& state, const maglb::LatencyHistogram& latency) {
  uint64_t timed = 0;
  for (uint64_t n : latency.Counts()) timed += n;
  state.counters["frames_timed"] = static_cast<double>(timed);
}

// The loop's pass as in BM_Pass_RegisterCountsSet, a burst of 32 when
// (pass & busy_mask) == 0, its frames queued and flushed; with `kLatency`,
// timed as the loop times them.
template <bool kLatency>
void BM_PassWithLatency(benchmark::State& state) {
  static PollCounters c;
  static maglb::LatencyHistogram latency;
  static FakeTx tx;
  const uint64_t busy_mask = static_cast<uint64_t>(state.range(0));
  const maglb::TscToNs to_ns(2'500'000'000u);  // the rate does not change the cost
  uint64_t pass = 0;
  PassCounts counts;
  for (auto _ : state) {
    uint64_t rx_tsc = 0, frames = 0;
    uint16_t got = (pass++ & busy_mask) == 0 ? 32 : 0;
    benchmark::DoNotOptimize(got);
    if (got != 0) {
      rx_tsc = rte_rdtsc();  // the pipeline's clock, in both
      benchmark::DoNotOptimize(rx_tsc);
      frames = tx.Queue(got);
    }
    tx.Flush();
    if constexpr (kLatency) {
      if (frames != 0) latency.Record(to_ns(rte_rdtsc() - rx_tsc), frames);
    }
    benchmark::DoNotOptimize(frames);
    counts.Count(c, got);
  }
  ReportFramesTimed(state, latency);
}

void BM_Pass_WithoutLatency(benchmark::State& state) { BM_PassWithLatency<false>(state); }
void BM_Pass_WithLatency(benchmark::State& state) { BM_PassWithLatency<true>(state); }

// The loop's way since: one TSC read every pass, at its start, which ends
// the latency of the frames the pass before queued and starts that of this
// pass's (and is the pipeline's clock). An idle pass reads it too.
void BM_Pass_WithLatencyOneRead(benchmark::State& state) {
  static PollCounters c;
  static maglb::LatencyHistogram latency;
  static FakeTx tx;
  const uint64_t busy_mask = static_cast<uint64_t>(state.range(0));
  const maglb::TscToNs to_ns(2'500'000'000u);
  uint64_t pass = 0;
  PassCounts counts;
  uint64_t sent_tsc = 0, sent_frames = 0;
  for (auto _ : state) {
    const uint64_t pass_tsc = rte_rdtsc();
    if (sent_frames != 0) latency.Record(to_ns.Between(sent_tsc, pass_tsc), sent_frames);
    sent_tsc = pass_tsc;
    sent_frames = 0;
    uint16_t got = (pass++ & busy_mask) == 0 ? 32 : 0;
    benchmark::DoNotOptimize(got);
    if (got != 0) {
      benchmark::DoNotOptimize(pass_tsc);  // the pipeline's clock
      sent_frames = tx.Queue(got);
    }
    tx.Flush();
    benchmark::DoNotOptimize(sent_frames);
    counts.Count(c, got);
  }
  ReportFramesTimed(state, latency);
}

}  // namespace

BENCHMARK(BM_Pass_NoCounters);
BENCHMARK(BM_Pass_CounterAdd);
BENCHMARK(BM_Pass_RegisterCountsSet);
BENCHMARK(BM_Pass_WithoutLatency)->Arg(7)->Arg(0);
BENCHMARK(BM_Pass_WithLatency)->Arg(7)->Arg(0);
BENCHMARK(BM_Pass_WithLatencyOneRead)->Arg(7)->Arg(0);
BENCHMARK_MAIN();
