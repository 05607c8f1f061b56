// The VIP matcher under address sets that defeated the old unkeyed hash
// (issue 8, point 2): 4096 IPv6 VIPs that differ only in their last two
// bytes, 4096 with one /64 each, against 4096 IPv4 VIPs in sequence.
//
//   BM_Classify/<set>/<dst>     Classify() of a TCP frame to a VIP of the set
//                               (dst=vip) or to an address that is none
//                               (dst=miss: same pattern, outside the set)
//   BM_Lookup/<impl>/<set>/<dst>  the matcher calls Classify makes for such a
//                               frame (Match, then IsVipAddress on a miss),
//                               impl=new (VipMatcher) or old: a copy of the
//                               matcher as it was before the fix (unkeyed
//                               multiply-xor hash, probe until an empty slot),
//                               kept here as the baseline of the same run.
//   BM_Build/<set>              building the matcher for the set (control path)
// Items are lookups; ns_per_pkt is the time of one.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "maglb/packet.h"
#include "maglb/vip_spec.h"

namespace maglb {
namespace {

constexpr uint32_t kVips = 4096;
constexpr size_t kAddresses = 1024;  // destinations cycled through

enum Set { kV4Sequence, kV6LastTwoBytes, kV6OnePer64 };
const char* const kSetNames[] = {"v4_sequence", "v6_last_two_bytes", "v6_one_per_64"};

// Address i of a set; i >= kVips gives addresses of the same pattern that are
// no VIPs.
IpAddress SetAddress(Set set, uint32_t i) {
  IpAddress a;
  switch (set) {
    case kV4Sequence:
      return IpAddress::V4(10, static_cast<uint8_t>(i >> 16), static_cast<uint8_t>(i >> 8),
                           static_cast<uint8_t>(i));
    case kV6LastTwoBytes:
      a = *IpAddress::Parse("2001:db8::");
      a.bytes[13] = static_cast<uint8_t>(i >> 16);
      a.bytes[14] = static_cast<uint8_t>(i >> 8);
      a.bytes[15] = static_cast<uint8_t>(i);
      return a;
    case kV6OnePer64:
      a = *IpAddress::Parse("2001:db8::1");
      a.bytes[5] = static_cast<uint8_t>(i >> 16);
      a.bytes[6] = static_cast<uint8_t>(i >> 8);
      a.bytes[7] = static_cast<uint8_t>(i);
      return a;
  }
  return a;
}

std::vector<VipSpec> SetVips(Set set) {
  std::vector<VipSpec> vips(kVips);
  for (uint32_t i = 0; i < kVips; ++i) {
    vips[i].address = SetAddress(set, i);
    vips[i].protocol = Protocol::kTcp;
    vips[i].port = 443;
  }
  return vips;
}

// The matcher before the fix, lookups only (address groups, no ports): the
// same layout and probe loop as VipMatcher had, with its unkeyed hash.
class OldMatcher {
 public:
  explicit OldMatcher(const std::vector<VipSpec>& vips) {
    uint32_t capacity = 4;
    while (capacity < 2 * vips.size()) capacity *= 2;
    groups_.assign(capacity, Group{});
    mask_ = capacity - 1;
    for (size_t k = 0; k < vips.size(); ++k) {
      const IpAddress& a = vips[k].address;
      uint32_t i = Hash(a.bytes.data(), a.is_v6) & mask_;
      while (groups_[i].used) i = (i + 1) & mask_;
      groups_[i] = Group{a.bytes, a.is_v6, 1, static_cast<uint16_t>(k)};
    }
  }
  uint16_t Match(const uint8_t* addr, bool is_v6) const {
    for (uint32_t i = Hash(addr, is_v6) & mask_;; i = (i + 1) & mask_) {
      const Group& g = groups_[i];
      if (!g.used) return VipMatcher::kNone;
      if (g.is_v6 == is_v6 && std::memcmp(g.addr.data(), addr, is_v6 ? 16 : 4) == 0) return g.index;
    }
  }
  bool IsVipAddress(const uint8_t* addr, bool is_v6) const { return Match(addr, is_v6) != VipMatcher::kNone; }

 private:
  struct Group {
    std::array<uint8_t, 16> addr{};
    uint8_t is_v6 = 0;
    uint8_t used = 0;
    uint16_t index = 0;
  };
  static uint32_t Hash(const uint8_t* addr, bool is_v6) {
    uint64_t lo;
    uint64_t hi = 0;
    if (is_v6) {
      std::memcpy(&lo, addr, 8);
      std::memcpy(&hi, addr + 8, 8);
    } else {
      uint32_t a;
      std::memcpy(&a, addr, 4);
      lo = a;
    }
    const uint64_t h = (lo * 0x9E3779B97F4A7C15ULL) ^ (hi * 0xC2B2AE3D27D4EB4FULL) ^ (is_v6 ? 1 : 0);
    return static_cast<uint32_t>(h >> 32) ^ static_cast<uint32_t>(h >> 17);
  }
  std::vector<Group> groups_;
  uint32_t mask_ = 0;
};

std::vector<IpAddress> Destinations(Set set, bool vip) {
  std::vector<IpAddress> d(kAddresses);
  for (uint32_t i = 0; i < kAddresses; ++i) {
    const uint32_t k = (i * 2654435761u) % kVips;  // spread over the set
    d[i] = SetAddress(set, vip ? k : kVips + k);
  }
  return d;
}

void Report(benchmark::State& state) {
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.counters["ns_per_pkt"] = benchmark::Counter(static_cast<double>(state.iterations()),
                                                    benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// A 60-byte Ethernet/IP/TCP frame to `dst`, port 443 (IPv4: 60 bytes with
// padding; IPv6: 74).
std::vector<uint8_t> TcpFrame(const IpAddress& dst) {
  const bool v6 = dst.is_v6;
  std::vector<uint8_t> f(v6 ? 74 : 60, 0);
  f[12] = v6 ? 0x86 : 0x08;
  f[13] = v6 ? 0xDD : 0x00;
  uint8_t* ip = f.data() + 14;
  size_t l4;
  if (v6) {
    ip[0] = 0x60;
    ip[5] = 20;
    ip[6] = 6;
    ip[7] = 64;
    ip[8] = 0x20;
    std::memcpy(ip + 24, dst.bytes.data(), 16);
    l4 = 14 + 40;
  } else {
    ip[0] = 0x45;
    ip[3] = 40;
    ip[8] = 64;
    ip[9] = 6;
    ip[12] = 10;
    std::memcpy(ip + 16, dst.bytes.data(), 4);
    // A valid header checksum: Classify may verify it.
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2) sum += uint32_t{ip[i]} << 8 | ip[i + 1];
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    ip[10] = static_cast<uint8_t>(~sum >> 8);
    ip[11] = static_cast<uint8_t>(~sum);
    l4 = 14 + 20;
  }
  f[l4] = 0x9c;
  f[l4 + 3] = 0xBB;  // port 443
  f[l4 + 12] = 0x50;
  f[l4 + 13] = 0x10;
  return f;
}

void BM_Classify(benchmark::State& state) {
  const Set set = static_cast<Set>(state.range(0));
  const bool vip = state.range(1) != 0;
  const VipMatcher m(SetVips(set), VipHashKey{0x243F6A8885A308D3ull, 0x13198A2E03707344ull});
  std::vector<std::vector<uint8_t>> frames;
  for (const IpAddress& d : Destinations(set, vip)) frames.push_back(TcpFrame(d));
  const LocalAddresses local;
  ParsedPacket parsed;
  size_t i = 0;
  for (auto _ : state) {
    const Verdict v = Classify(frames[i], m, local, &parsed);
    benchmark::DoNotOptimize(v);
    i = (i + 1) % kAddresses;
  }
  Report(state);
  state.counters["max_probe"] = m.max_probe();
}

template <typename Matcher>
void Lookups(benchmark::State& state, const Matcher& m, Set set, bool vip) {
  const std::vector<IpAddress> dst = Destinations(set, vip);
  size_t i = 0;
  for (auto _ : state) {
    const IpAddress& a = dst[i];
    uint16_t r;
    if constexpr (std::is_same_v<Matcher, VipMatcher>) {
      r = m.Match(a.bytes.data(), a.is_v6, kIpProtoTcp, 443);
    } else {
      r = m.Match(a.bytes.data(), a.is_v6);
    }
    if (r == VipMatcher::kNone) r = m.IsVipAddress(a.bytes.data(), a.is_v6);
    benchmark::DoNotOptimize(r);
    i = (i + 1) % kAddresses;
  }
  Report(state);
}

void BM_Lookup_New(benchmark::State& state) {
  const Set set = static_cast<Set>(state.range(0));
  Lookups(state, VipMatcher(SetVips(set), VipHashKey{0x243F6A8885A308D3ull, 0x13198A2E03707344ull}), set,
          state.range(1) != 0);
}

void BM_Lookup_Old(benchmark::State& state) {
  const Set set = static_cast<Set>(state.range(0));
  Lookups(state, OldMatcher(SetVips(set)), set, state.range(1) != 0);
}

// Building the matcher (control path) for the whole set.
void BM_Build(benchmark::State& state) {
  const std::vector<VipSpec> vips = SetVips(static_cast<Set>(state.range(0)));
  for (auto _ : state) {
    VipMatcher m(vips, VipHashKey{0x243F6A8885A308D3ull, 0x13198A2E03707344ull});
    benchmark::DoNotOptimize(m.size());
  }
}
BENCHMARK(BM_Build)->ArgName("set")->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);

void Sets(benchmark::internal::Benchmark* b) {
  b->ArgNames({"set", "vip"});
  for (int set : {kV4Sequence, kV6LastTwoBytes, kV6OnePer64}) {
    for (int vip : {1, 0}) b->Args({set, vip});
  }
}
BENCHMARK(BM_Classify)->Apply(Sets);
BENCHMARK(BM_Lookup_New)->Apply(Sets);
BENCHMARK(BM_Lookup_Old)->Apply(Sets);

}  // namespace
}  // namespace maglb

BENCHMARK_MAIN();
