// maglb's conntrack table against DPDK's rte_hash, on what the packet path
// asks of it: bulk lookups of 32 flow keys (40 bytes) in a table of 1M flows,
// hits and misses, random order. Both sides hash in the loop (ConntrackHash,
// keyed, for maglb; rte_hash_crc, rte_hash's fastest hash on x86, for
// rte_hash), and both build their keys the same way. The *_Legacy cases run
// maglb with the unkeyed hash it had before issue 8.3 (a copy below), on a
// table of its own, to price the key in the same run; BM_Hash_* hash alone.
//
// rte_hash needs the EAL (its tables live in rte_malloc memory); it runs here
// without hugepages or devices: --no-huge --no-pci -m 1024 --no-shconf.
//
// The rte_hash side only finds an index; maglb's lookup also checks the
// flow's expiry and hands back the entry (backend id, hint). A conntrack on
// rte_hash would need that entry as a separate array read after the lookup.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>

#include "maglb/conntrack.h"
#include "maglb/flow_hash.h"
#include "maglb/pipeline.h"
#include "maglb/xxh64_internal.h"
#include "legacy_conntrack_hash.h"

namespace maglb {
namespace {

constexpr uint32_t kFlows = 1u << 20;
constexpr size_t kBurst = 32;
constexpr uint64_t kNow = 1000ULL * 1'000'000'000ULL;

inline void MakeKey(uint32_t id, FlowKey* k) {
  *k = FlowKey{};
  k->src[0] = 10;
  k->src[1] = static_cast<uint8_t>(id >> 16);
  k->src[2] = static_cast<uint8_t>(id >> 8);
  k->src[3] = static_cast<uint8_t>(id);
  k->dst = {198, 51, 100, 80};
  k->src_port = static_cast<uint16_t>(1024 + (id >> 24));
  k->dst_port = 80;
  k->protocol = 6;
}

std::vector<uint32_t> RandomIds(uint32_t base, uint32_t range, size_t n) {
  std::vector<uint32_t> ids(n);
  std::mt19937 rng(base + 1);
  for (auto& id : ids) id = base + rng() % range;
  return ids;
}

constexpr size_t kOrder = 1u << 22;
const std::vector<uint32_t>& HitIds() {
  static const auto* v = new std::vector<uint32_t>(RandomIds(0, kFlows, kOrder));
  return *v;
}
const std::vector<uint32_t>& MissIds() {
  static const auto* v = new std::vector<uint32_t>(RandomIds(kFlows, kFlows, kOrder));
  return *v;
}

using testing::LegacyConntrackHash;

template <bool kLegacy>
inline uint64_t HashFor(const Conntrack& ct, const FlowKey& k) {
  return kLegacy ? LegacyConntrackHash(k) : ct.HashOf(k);
}

template <bool kLegacy>
Conntrack& MaglbTable() {
  static Conntrack* ct = [] {
    ConntrackConfig c;
    c.capacity = kFlows;
    auto* t = new Conntrack(c, ConntrackKey::Fixed(kLegacy ? 2 : 1));
    FlowKey k;
    for (uint32_t id = 0; id < kFlows; ++id) {
      MakeKey(id, &k);
      t->Insert(k, HashFor<kLegacy>(*t, k), kTcpAck, id, 0, kNow);
    }
    return t;
  }();
  return *ct;
}

uint32_t CrcHash(const void* key, uint32_t len, uint32_t init) { return rte_hash_crc(key, len, init); }

rte_hash* DpdkTable() {
  static rte_hash* h = [] {
    // --in-memory is refused with --no-huge (legacy memory) on 22.11;
    // --no-shconf keeps the run from leaving runtime files behind.
    const char* argv[] = {"conntrack_bench", "--no-huge",      "--no-pci",       "-m",
                          "1024",            "--no-shconf",    "--file-prefix=bench_ct",
                          "--no-telemetry",  "-l",             "0",              "--log-level=4"};
    if (rte_eal_init(static_cast<int>(std::size(argv)), const_cast<char**>(argv)) < 0) {
      std::fprintf(stderr, "rte_eal_init failed: %s\n", rte_strerror(rte_errno));
      std::abort();
    }
    // EAL still creates the (empty) runtime directory: remove it at exit.
    std::atexit([] { rmdir((std::string(rte_eal_get_runtime_dir())).c_str()); });
    rte_hash_parameters p{};
    p.name = "ct";
    p.entries = kFlows * 5 / 4;  // the same 25% headroom as maglb's table
    p.key_len = sizeof(FlowKey);
    p.hash_func = CrcHash;
    p.hash_func_init_val = 0;
    p.socket_id = 0;
    p.extra_flag = RTE_HASH_EXTRA_FLAGS_EXT_TABLE;  // never fail an insert
    rte_hash* t = rte_hash_create(&p);
    if (t == nullptr) {
      std::fprintf(stderr, "rte_hash_create failed: %s\n", rte_strerror(rte_errno));
      std::abort();
    }
    FlowKey k;
    for (uint32_t id = 0; id < kFlows; ++id) {
      MakeKey(id, &k);
      if (rte_hash_add_key_data(t, &k, reinterpret_cast<void*>(uintptr_t{id})) != 0) std::abort();
    }
    return t;
  }();
  return h;
}

void Report(benchmark::State& state) {
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kBurst));
  state.counters["ns_per_lookup"] = benchmark::Counter(
      static_cast<double>(state.iterations() * kBurst), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

template <bool kLegacy>
void MaglbBulk(benchmark::State& state, const std::vector<uint32_t>& ids) {
  Conntrack& ct = MaglbTable<kLegacy>();
  FlowKey keys[kBurst];
  const FlowKey* key_ptrs[kBurst];
  uint64_t hashes[kBurst];
  ConntrackEntry* out[kBurst];
  for (size_t i = 0; i < kBurst; ++i) key_ptrs[i] = &keys[i];
  size_t pos = 0, found = 0;
  for (auto _ : state) {
    // Keys first, then hashes (as rte_hash_lookup_bulk does inside): hashing a
    // key right after writing it bytewise stalls on store-to-load forwarding.
    for (size_t i = 0; i < kBurst; ++i) MakeKey(ids[pos + i], &keys[i]);
    for (size_t i = 0; i < kBurst; ++i) hashes[i] = HashFor<kLegacy>(ct, keys[i]);
    pos = (pos + kBurst) & (kOrder - 1);
    ct.LookupBulk(key_ptrs, hashes, kBurst, kNow, out);
    for (size_t i = 0; i < kBurst; ++i) found += out[i] != nullptr;
  }
  Report(state);
  state.counters["hit_ratio"] = static_cast<double>(found) / static_cast<double>(state.iterations() * kBurst);
}

template <bool kLegacy>
void MaglbSingle(benchmark::State& state, const std::vector<uint32_t>& ids) {
  Conntrack& ct = MaglbTable<kLegacy>();
  FlowKey k;
  size_t pos = 0, found = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < kBurst; ++i) {
      MakeKey(ids[pos + i], &k);
      found += ct.Lookup(k, HashFor<kLegacy>(ct, k), kNow) != nullptr;
    }
    pos = (pos + kBurst) & (kOrder - 1);
  }
  Report(state);
  state.counters["hit_ratio"] = static_cast<double>(found) / static_cast<double>(state.iterations() * kBurst);
}

// What an established flow's packet costs the conntrack: Lookup, then Touch
// (a pure ACK), on the 1M-flow table (the deadline moves with the clock, as
// on the packet path: each iteration is a few microseconds later; 2 s after
// the flows were picked up mid-flow, so the first Touch proves them).
void MaglbTouch(benchmark::State& state, const std::vector<uint32_t>& ids) {
  Conntrack& ct = MaglbTable<false>();
  FlowKey k;
  size_t pos = 0, found = 0;
  uint64_t now = kNow + 2'000'000'000ULL;
  for (auto _ : state) {
    now += 4096;
    for (size_t i = 0; i < kBurst; ++i) {
      MakeKey(ids[pos + i], &k);
      if (ConntrackEntry* e = ct.Lookup(k, ct.HashOf(k), now)) {
        ct.Touch(e, kTcpAck, now);
        ++found;
      }
    }
    pos = (pos + kBurst) & (kOrder - 1);
  }
  Report(state);
  state.counters["hit_ratio"] = static_cast<double>(found) / static_cast<double>(state.iterations() * kBurst);
}

void DpdkBulk(benchmark::State& state, const std::vector<uint32_t>& ids) {
  rte_hash* h = DpdkTable();
  FlowKey keys[kBurst];
  const void* key_ptrs[kBurst];
  void* data[kBurst];
  for (size_t i = 0; i < kBurst; ++i) key_ptrs[i] = &keys[i];
  size_t pos = 0, found = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < kBurst; ++i) MakeKey(ids[pos + i], &keys[i]);
    pos = (pos + kBurst) & (kOrder - 1);
    uint64_t hits = 0;
    found += static_cast<size_t>(rte_hash_lookup_bulk_data(h, key_ptrs, kBurst, &hits, data));
    benchmark::DoNotOptimize(data[0]);
  }
  Report(state);
  state.counters["hit_ratio"] = static_cast<double>(found) / static_cast<double>(state.iterations() * kBurst);
}

// The hash alone, 32 keys of a burst (keys built outside the timing).
template <bool kLegacy>
void HashOnly(benchmark::State& state) {
  const Conntrack& ct = MaglbTable<kLegacy>();
  std::vector<FlowKey> keys(1024);
  for (uint32_t i = 0; i < keys.size(); ++i) MakeKey(HitIds()[i], &keys[i]);
  size_t pos = 0;
  uint64_t acc = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < kBurst; ++i) acc += HashFor<kLegacy>(ct, keys[pos + i]);
    pos = (pos + kBurst) & (keys.size() - 1);
  }
  benchmark::DoNotOptimize(acc);
  Report(state);
}

void BM_Maglb_Bulk_Hit(benchmark::State& s) { MaglbBulk<false>(s, HitIds()); }
void BM_Maglb_Bulk_Miss(benchmark::State& s) { MaglbBulk<false>(s, MissIds()); }
void BM_Maglb_Single_Hit(benchmark::State& s) { MaglbSingle<false>(s, HitIds()); }
void BM_Maglb_Single_Touch(benchmark::State& s) { MaglbTouch(s, HitIds()); }
void BM_Maglb_Bulk_Hit_Legacy(benchmark::State& s) { MaglbBulk<true>(s, HitIds()); }
void BM_Maglb_Bulk_Miss_Legacy(benchmark::State& s) { MaglbBulk<true>(s, MissIds()); }
void BM_Maglb_Single_Hit_Legacy(benchmark::State& s) { MaglbSingle<true>(s, HitIds()); }
void BM_Hash_Keyed(benchmark::State& s) { HashOnly<false>(s); }
void BM_Hash_Legacy(benchmark::State& s) { HashOnly<true>(s); }
void BM_RteHash_Bulk_Hit(benchmark::State& s) { DpdkBulk(s, HitIds()); }
void BM_RteHash_Bulk_Miss(benchmark::State& s) { DpdkBulk(s, MissIds()); }
// Memory per tracked flow, and lookups at 1M against 10M flows in one run
// (issue 13 point 4). The process's resident memory (/proc/self/statm) is
// read before a table is made and after it is filled, beside what the table
// says it allocated (Conntrack::MemoryBytes: 8-way buckets for 1.25 x the
// capacity, a 64-byte header per bucket and a 64-byte entry per way, each
// array rounded to 2 MiB). The table's capacity is its flow count, filled
// to it, as an operator sizes [conntrack] capacity. Run alone:
//   conntrack_bench --benchmark_filter='Memory|AtFlows'
uint64_t ResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  unsigned long long size = 0, resident = 0;
  if (f != nullptr) {
    if (std::fscanf(f, "%llu %llu", &size, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

struct SizedTable {
  std::unique_ptr<Conntrack> table;
  std::vector<uint32_t> ids;  // random hits
  uint64_t resident_delta = 0;
  double fill_s = 0;
};

SizedTable& TableOf(uint32_t flows) {
  static std::map<uint32_t, SizedTable>* tables = new std::map<uint32_t, SizedTable>();
  auto it = tables->find(flows);
  if (it != tables->end()) return it->second;
  SizedTable& t = (*tables)[flows];
  t.ids = RandomIds(0, flows, kOrder);
  const uint64_t before = ResidentBytes();
  const auto start = std::chrono::steady_clock::now();
  ConntrackConfig c;
  c.capacity = flows;
  t.table = std::make_unique<Conntrack>(c, ConntrackKey::Fixed(3));
  FlowKey k;
  for (uint32_t id = 0; id < flows; ++id) {
    MakeKey(id, &k);
    t.table->Insert(k, t.table->HashOf(k), kTcpAck, id, 0, kNow);
  }
  t.fill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  t.resident_delta = ResidentBytes() - before;
  return t;
}

// Bulk lookups of hits, as BM_Maglb_Bulk_Hit, in a table of `flows` flows.
void BM_Maglb_Bulk_Hit_AtFlows(benchmark::State& state) {
  const uint32_t flows = static_cast<uint32_t>(state.range(0));
  SizedTable& t = TableOf(flows);
  Conntrack& ct = *t.table;
  FlowKey keys[kBurst];
  const FlowKey* key_ptrs[kBurst];
  uint64_t hashes[kBurst];
  ConntrackEntry* out[kBurst];
  for (size_t i = 0; i < kBurst; ++i) key_ptrs[i] = &keys[i];
  size_t pos = 0, found = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < kBurst; ++i) MakeKey(t.ids[pos + i], &keys[i]);
    for (size_t i = 0; i < kBurst; ++i) hashes[i] = ct.HashOf(keys[i]);
    pos = (pos + kBurst) & (kOrder - 1);
    ct.LookupBulk(key_ptrs, hashes, kBurst, kNow, out);
    for (size_t i = 0; i < kBurst; ++i) found += out[i] != nullptr;
  }
  Report(state);
  state.counters["hit_ratio"] = static_cast<double>(found) / static_cast<double>(state.iterations() * kBurst);
  state.counters["table_MiB"] = static_cast<double>(ct.memory_bytes()) / (1 << 20);
  state.counters["alloc_B_per_flow"] = static_cast<double>(ct.memory_bytes()) / flows;
  state.counters["rss_B_per_flow"] = static_cast<double>(t.resident_delta) / flows;
  state.counters["occupied"] = static_cast<double>(ct.occupied());
  state.counters["fill_s"] = t.fill_s;
}
BENCHMARK(BM_Maglb_Bulk_Hit_AtFlows)->Arg(1'000'000)->Arg(10'000'000);

// A worker's memory beside its conntrack (counters for every VIP and
// backend slot, bounded-load counts, scratch), measured on a worker with the
// smallest conntrack; and the largest [conntrack] capacity whose worker fits
// in 1 GiB (binary search on Conntrack::MemoryBytes plus that fixed part).
// Measured once a process: a second worker could reuse the first's freed
// pages and look free.
uint64_t WorkerFixedBytes() {
  static const uint64_t fixed = [] {
    const uint64_t before = ResidentBytes();
    ConntrackConfig c;
    c.capacity = 1024;
    auto* w = new Worker(c, ConntrackKey::Fixed(4));  // kept: its pages stay resident
    benchmark::DoNotOptimize(w);
    const uint64_t resident = ResidentBytes() - before;
    return resident > Conntrack::MemoryBytes(1024) ? resident - Conntrack::MemoryBytes(1024) : 0;
  }();
  return fixed;
}

void BM_Worker_Memory(benchmark::State& state) {
  for (auto _ : state) {
    const uint64_t fixed = WorkerFixedBytes();
    constexpr uint64_t kBudget = uint64_t{1} << 30;
    uint64_t lo = 1024, hi = 1u << 28;  // [conntrack] capacity's range
    while (lo < hi) {
      const uint64_t mid = (lo + hi + 1) / 2;
      if (Conntrack::MemoryBytes(static_cast<uint32_t>(mid)) + fixed <= kBudget) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    state.counters["worker_fixed_MiB"] = static_cast<double>(fixed) / (1 << 20);
    state.counters["alloc_B_per_flow_1M"] =
        static_cast<double>(Conntrack::MemoryBytes(1u << 20)) / (1u << 20);
    state.counters["largest_capacity_1GiB"] = static_cast<double>(lo);
    state.counters["its_table_MiB"] = static_cast<double>(Conntrack::MemoryBytes(static_cast<uint32_t>(lo))) / (1 << 20);
  }
}
BENCHMARK(BM_Worker_Memory)->Iterations(1);

BENCHMARK(BM_Maglb_Bulk_Hit);
BENCHMARK(BM_RteHash_Bulk_Hit);
BENCHMARK(BM_Maglb_Bulk_Miss);
BENCHMARK(BM_RteHash_Bulk_Miss);
BENCHMARK(BM_Maglb_Single_Hit);
BENCHMARK(BM_Maglb_Single_Touch);
BENCHMARK(BM_Maglb_Bulk_Hit_Legacy);
BENCHMARK(BM_Maglb_Bulk_Miss_Legacy);
BENCHMARK(BM_Maglb_Single_Hit_Legacy);
BENCHMARK(BM_Hash_Keyed);
BENCHMARK(BM_Hash_Legacy);

}  // namespace
}  // namespace maglb

BENCHMARK_MAIN();
