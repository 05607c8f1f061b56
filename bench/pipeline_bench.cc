// The per-packet pipeline, as a worker core runs it: bursts of 32 frames
// through classify -> conntrack -> table -> encapsulate (GRE), with 1M tracked
// flows, beside a baseline that only touches the packet bytes.
//
// Every benchmark prepares its burst the same way (64-byte TCP frames written
// into mbuf-like buffers with headroom, the flow's source address and port
// set), so the ratio pipeline/baseline is the cost of the packet path itself.
// items_per_second = packets per second on one core.
//
//   BM_Baseline_TouchBytes   prepare + read every byte + swap the MACs
//   BM_Pipeline_Existing     packets of 1M established flows, random order
//   BM_Pipeline_SynFlood     every packet a new flow (SYN), table already full
//   BM_Pipeline_ExistingHot  as Existing, 1024 flows (conntrack in cache)
//   BM_Pipeline_Existing_ChecksumNic / _ChecksumSoftware  as Existing, each
//                            frame's IPv4 header checksum computed in prepare,
//                            then vouched for by the NIC / verified by Classify
//   BM_Step_Classify         prepare + Classify only (packet library)
//   BM_Step_Classify_ChecksumNic / _ChecksumSoftware  the same split for Classify
//   BM_Step_ClassifyForward  prepare + Classify + forward (GRE) only, as Worker::Send
//                            does it (ForwardFast on the backend's template, else Forward)
//   BM_Pipeline_Existing_TxChecksumNic, BM_Pipeline_ExistingHot_TxChecksumNic,
//   BM_Step_ClassifyForward_TxChecksumNic  the same with the outer IPv4
//                            header checksum left to the NIC (TX offload:
//                            Worker::SetTxOuterIpv4Checksum); the plain ones
//                            are the software path
//   BM_Pipeline_SynFloodBounded  as SynFlood, the VIP with bounded loads (eps 0.25)
//   BM_Pipeline_IcmpError/0  ICMP frag-needed about tracked flows, no RssOwner
//   BM_Pipeline_IcmpError/1  ... with an RssOwner that finds this worker owns them
//                            (the Toeplitz + RETA cost an error pays on its own worker)
//   BM_Pipeline_IcmpError/2  ... that finds another worker owns them (handed over)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "maglb/checksum.h"
#include "maglb/config.h"
#include "maglb/encap.h"
#include "maglb/lb_state.h"
#include "maglb/packet.h"
#include "maglb/pipeline.h"
#include "maglb/toeplitz.h"

namespace maglb {
namespace {

constexpr size_t kBurst = 32;
constexpr size_t kPool = 8 * kBurst;  // buffers cycled through, like an mbuf ring
constexpr size_t kHeadroom = 128;     // RTE_PKTMBUF_HEADROOM
constexpr size_t kFrameLen = 60;      // 64-byte frames on the wire (FCS not in the buffer)
constexpr size_t kBufSize = 256;
constexpr uint32_t kTrackedFlows = 1u << 20;
constexpr uint64_t kNow = 1000ULL * 1'000'000'000ULL;

IpAddress Ip(const char* s) { return *IpAddress::Parse(s); }

Config BenchConfig() {
  Config c;
  c.lb.ipv4 = Ip("192.0.2.10");
  c.lb.gateway_v4 = Ip("192.0.2.1");
  c.neighbors.push_back({Ip("192.0.2.1"), *MacAddress::Parse("02:00:00:00:00:fe"), 0});
  VipConfig v;
  v.name = "web";
  v.address = Ip("198.51.100.80");
  v.port = 80;
  v.forwarding = Forwarding::kGre;
  for (int i = 0; i < 16; ++i) {
    // StrCat, not "b" + std::to_string: GCC 12 -O3 warns (-Wrestrict) on the latter.
    v.backends.push_back({absl::StrCat("b", i), IpAddress::V4(203, 0, 113, static_cast<uint8_t>(i + 1)), 1, 0});
  }
  c.vips.push_back(v);
  return c;
}

// A 60-byte Ethernet/IPv4/TCP frame to the VIP. Checksums are left 0: the
// TCP checksum is not checked on the forwarding path, and the IPv4 header
// checksum is either vouched for by the "NIC" (the default, as with receive
// offload) or computed per frame by Bursts (ChecksumMode).
void WriteTemplate(uint8_t* f) {
  static const uint8_t kFrame[kFrameLen] = {
      0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02, 0x08, 0x00,  // Ethernet
      0x45, 0, 0, 40, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0,             // IPv4 ...
      10, 0, 0, 1, 198, 51, 100, 80,                                // src, dst
      0x9c, 0x40, 0, 80, 0, 0, 0x03, 0xe8, 0, 0, 0, 0,              // TCP ports, seq, ack
      0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0,                           // offset, ACK, window
  };
  std::memcpy(f, kFrame, kFrameLen);
}

// How the IPv4 header checksum reaches Classify.
enum class ChecksumMode {
  kNicVerified,        // field 0, hint kGood: a NIC with RX_OFFLOAD_IPV4_CKSUM
  kValidNicVerified,   // field computed per frame, hint kGood (baseline of the next)
  kValidSoftware,      // field computed per frame, hint kUnknown: verified in software
};

// Per-burst preparation shared by every benchmark: the NIC's part.
class Bursts {
 public:
  explicit Bursts(ChecksumMode mode = ChecksumMode::kNicVerified) : storage_(kPool * kBufSize), mode_(mode) {}

  PacketRef* Next(const uint32_t* flows, uint8_t tcp_flags) {
    uint8_t* base = storage_.data() + next_ * kBurst * kBufSize;
    next_ = (next_ + 1) % (kPool / kBurst);
    const RxChecksum hint = mode_ == ChecksumMode::kValidSoftware ? RxChecksum::kUnknown : RxChecksum::kGood;
    std::fill(std::begin(hints_), std::end(hints_), hint);
    for (size_t i = 0; i < kBurst; ++i) {
      uint8_t* f = base + i * kBufSize + kHeadroom;
      WriteTemplate(f);
      const uint32_t flow = flows[i];
      // Flow id -> client 10.x.y.z (24 bits) and source port 1024 + 6 bits.
      f[27] = static_cast<uint8_t>(flow >> 22);
      f[28] = static_cast<uint8_t>(flow >> 14);
      f[29] = static_cast<uint8_t>(flow >> 6);
      const uint16_t port = static_cast<uint16_t>(1024 + (flow & 0x3F));
      f[34] = static_cast<uint8_t>(port >> 8);
      f[35] = static_cast<uint8_t>(port);
      f[47] = tcp_flags;
      PacketRef& r = refs_[i];
      r = PacketRef{};
      r.data = f;
      r.len = kFrameLen;
      r.headroom = kHeadroom;
      r.tailroom = kBufSize - kHeadroom - kFrameLen;
    }
    if (mode_ != ChecksumMode::kNicVerified) {
      for (size_t i = 0; i < kBurst; ++i) {
        uint8_t* f = refs_[i].data;
        uint32_t sum = 0;
        for (size_t k = 14; k < 34; k += 2) sum += uint32_t{f[k]} << 8 | f[k + 1];
        sum = (sum & 0xFFFF) + (sum >> 16);
        sum = (sum & 0xFFFF) + (sum >> 16);
        f[24] = static_cast<uint8_t>(~sum >> 8);
        f[25] = static_cast<uint8_t>(~sum);
      }
    }
    return refs_;
  }
  /// The NIC's checksum verdicts of the last Next() (ProcessBurst's array).
  const RxChecksum* hints() const { return hints_; }

 private:
  std::vector<uint8_t> storage_;
  size_t next_ = 0;
  ChecksumMode mode_;
  PacketRef refs_[kBurst];
  RxChecksum hints_[kBurst];
};

struct Fixture {
  Fixture() {
    LbStateOptions opts;
    opts.port_mac = *MacAddress::Parse("02:00:00:00:00:01");  // the frames' destination: checked
    state = *BuildLbState(BenchConfig(), nullptr, opts);
    ConntrackConfig ct;
    ct.capacity = kTrackedFlows;
    worker = std::make_unique<Worker>(ct, ConntrackKey::Fixed(1));
    // Random order over the tracked flows (a power of two for cheap wrap).
    order.resize(1u << 22);
    std::mt19937 rng(42);
    for (auto& o : order) o = rng() % kTrackedFlows;
  }
  void Populate(uint32_t flows) {
    Bursts b;
    std::vector<uint32_t> ids(kBurst);
    for (uint32_t f = 0; f < flows; f += kBurst) {
      for (size_t i = 0; i < kBurst; ++i) ids[i] = f + static_cast<uint32_t>(i);
      worker->ProcessBurst(b.Next(ids.data(), 0x02), kBurst, *state, kNow, b.hints());
      worker->ProcessBurst(b.Next(ids.data(), 0x10), kBurst, *state, kNow, b.hints());
    }
  }
  std::unique_ptr<const LbState> state;
  std::unique_ptr<Worker> worker;
  std::vector<uint32_t> order;
};

Fixture& SharedFixture() {
  static Fixture* f = [] {
    auto* fx = new Fixture;
    fx->Populate(kTrackedFlows);
    return fx;
  }();
  return *f;
}

void Report(benchmark::State& state) {
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kBurst));
  state.counters["ns_per_pkt"] = benchmark::Counter(static_cast<double>(state.iterations() * kBurst),
                                                    benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_Baseline_TouchBytes(benchmark::State& state) {
  Fixture& fx = SharedFixture();
  Bursts bursts;
  size_t pos = 0;
  const size_t mask = fx.order.size() - 1;
  uint64_t sink = 0;
  for (auto _ : state) {
    PacketRef* p = bursts.Next(&fx.order[pos], 0x10);
    pos = (pos + kBurst) & mask;
    for (size_t i = 0; i < kBurst; ++i) {
      uint64_t acc = 0;
      for (size_t k = 0; k < p[i].len; k += 8) {
        uint64_t w;
        std::memcpy(&w, p[i].data + k, 8);
        acc ^= w;
      }
      uint8_t mac[6];
      std::memcpy(mac, p[i].data, 6);
      std::memcpy(p[i].data, p[i].data + 6, 6);
      std::memcpy(p[i].data + 6, mac, 6);
      sink += acc;
    }
    benchmark::DoNotOptimize(sink);
  }
  Report(state);
}
BENCHMARK(BM_Baseline_TouchBytes);

// The outer IPv4 checksum left to the NIC for the length of one benchmark.
class TxChecksumByNic {
 public:
  TxChecksumByNic(Worker& w, bool on) : w_(w) { w_.SetTxOuterIpv4Checksum(on); }
  ~TxChecksumByNic() { w_.SetTxOuterIpv4Checksum(false); }

 private:
  Worker& w_;
};

void PipelineExisting(benchmark::State& state, ChecksumMode mode, bool tx_checksum_by_nic = false) {
  Fixture& fx = SharedFixture();
  const TxChecksumByNic tx(*fx.worker, tx_checksum_by_nic);
  Bursts bursts(mode);
  size_t pos = 0;
  const size_t mask = fx.order.size() - 1;
  const uint64_t new_before = fx.worker->counters().vip[0].new_flows.value();
  const uint64_t tx_before = fx.worker->counters().tx_packets.value();
  for (auto _ : state) {
    PacketRef* p = bursts.Next(&fx.order[pos], 0x10);
    pos = (pos + kBurst) & mask;
    fx.worker->ProcessBurst(p, kBurst, *fx.state, kNow, bursts.hints());
    benchmark::DoNotOptimize(p[0].offset);
  }
  Report(state);
  const double n = static_cast<double>(state.iterations() * kBurst);
  state.counters["conntrack_miss"] =
      static_cast<double>(fx.worker->counters().vip[0].new_flows.value() - new_before) / n;
  state.counters["transmitted"] = static_cast<double>(fx.worker->counters().tx_packets.value() - tx_before) / n;
  state.counters["tracked"] = static_cast<double>(fx.worker->conntrack().CountLive(kNow));
}
void BM_Pipeline_Existing(benchmark::State& state) { PipelineExisting(state, ChecksumMode::kNicVerified); }
BENCHMARK(BM_Pipeline_Existing);
// What a replaying PMD reads per burst besides the pipeline (net_pcap
// infinite_rx copies each frame out of its own stored buffer): two lines of
// each of 32 buffers 2176 bytes apart (an mbuf's), walking 1 GiB in order.
// The daemon's 1M-packet replay streams its source buffers so: they do not
// stay in cache, and they push the conntrack out of it too.
class ReplaySource {
 public:
  uint64_t ReadBurst() {
    static const std::vector<uint8_t>* const source = new std::vector<uint8_t>(kFrames * kStride, 1);
    uint64_t sum = 0;
    for (size_t i = 0; i < kBurst; ++i) {
      const uint8_t* f = source->data() + next_ * kStride;
      sum += f[0] + f[128];
      next_ = next_ + 1 == kFrames ? 0 : next_ + 1;
    }
    return sum;
  }

 private:
  static constexpr size_t kStride = 2176, kFrames = (size_t{1} << 30) / kStride;
  size_t next_ = 0;
};

// As Existing, with the replay's reads of its source buffers.
void BM_Pipeline_Existing_SourceStream(benchmark::State& state) {
  Fixture& fx = SharedFixture();
  Bursts bursts;
  ReplaySource source;
  size_t pos = 0;
  const size_t mask = fx.order.size() - 1;
  uint64_t sink = 0;
  for (auto _ : state) {
    sink += source.ReadBurst();
    PacketRef* p = bursts.Next(&fx.order[pos], 0x10);
    pos = (pos + kBurst) & mask;
    fx.worker->ProcessBurst(p, kBurst, *fx.state, kNow, bursts.hints());
    benchmark::DoNotOptimize(p[0].offset);
  }
  benchmark::DoNotOptimize(sink);
  Report(state);
}
BENCHMARK(BM_Pipeline_Existing_SourceStream);
// The same stream alone (what it costs without the pipeline).
void BM_Baseline_SourceStream(benchmark::State& state) {
  ReplaySource source;
  for (auto _ : state) {
    const uint64_t sum = source.ReadBurst();
    benchmark::DoNotOptimize(sum);
  }
  Report(state);
}
BENCHMARK(BM_Baseline_SourceStream);
void BM_Pipeline_Existing_TxChecksumNic(benchmark::State& state) {
  PipelineExisting(state, ChecksumMode::kNicVerified, true);
}
BENCHMARK(BM_Pipeline_Existing_TxChecksumNic);
// As Existing, with a valid IPv4 header checksum per frame, vouched for by the
// NIC or verified in software (issue 8, point 15).
void BM_Pipeline_Existing_ChecksumNic(benchmark::State& state) {
  PipelineExisting(state, ChecksumMode::kValidNicVerified);
}
BENCHMARK(BM_Pipeline_Existing_ChecksumNic);
void BM_Pipeline_Existing_ChecksumSoftware(benchmark::State& state) {
  PipelineExisting(state, ChecksumMode::kValidSoftware);
}
BENCHMARK(BM_Pipeline_Existing_ChecksumSoftware);

void BM_Pipeline_SynFlood(benchmark::State& state) {
  Fixture& fx = SharedFixture();
  Bursts bursts;
  // Flows never seen before: ids above the tracked range.
  static uint32_t next = kTrackedFlows;
  uint32_t ids[kBurst];
  const uint64_t new_before = fx.worker->counters().vip[0].new_flows.value();
  for (auto _ : state) {
    for (size_t i = 0; i < kBurst; ++i) ids[i] = next++ & 0x3FFFFFFF;
    PacketRef* p = bursts.Next(ids, 0x02);
    fx.worker->ProcessBurst(p, kBurst, *fx.state, kNow, bursts.hints());
    benchmark::DoNotOptimize(p[0].offset);
  }
  Report(state);
  state.counters["new_flows"] =
      static_cast<double>(fx.worker->counters().vip[0].new_flows.value() - new_before) /
      static_cast<double>(state.iterations() * kBurst);
}
BENCHMARK(BM_Pipeline_SynFlood);

void PipelineExistingHot(benchmark::State& state, bool tx_checksum_by_nic) {
  Fixture& fx = SharedFixture();
  const TxChecksumByNic tx(*fx.worker, tx_checksum_by_nic);
  Bursts bursts;
  std::vector<uint32_t> hot(1u << 16);
  std::mt19937 rng(1);
  for (auto& h : hot) h = rng() % 1024;
  size_t pos = 0;
  for (auto _ : state) {
    PacketRef* p = bursts.Next(&hot[pos], 0x10);
    pos = (pos + kBurst) & (hot.size() - 1);
    fx.worker->ProcessBurst(p, kBurst, *fx.state, kNow, bursts.hints());
    benchmark::DoNotOptimize(p[0].offset);
  }
  Report(state);
}
void BM_Pipeline_ExistingHot(benchmark::State& state) { PipelineExistingHot(state, false); }
BENCHMARK(BM_Pipeline_ExistingHot);
void BM_Pipeline_ExistingHot_TxChecksumNic(benchmark::State& state) { PipelineExistingHot(state, true); }
BENCHMARK(BM_Pipeline_ExistingHot_TxChecksumNic);

// Where the time goes: the packet library's steps alone, on the same bursts.
void StepClassify(benchmark::State& state, ChecksumMode mode) {
  Fixture& fx = SharedFixture();
  Bursts bursts(mode);
  size_t pos = 0;
  const size_t mask = fx.order.size() - 1;
  ParsedPacket parsed;
  uint64_t to_vip = 0;
  for (auto _ : state) {
    PacketRef* p = bursts.Next(&fx.order[pos], 0x10);
    pos = (pos + kBurst) & mask;
    for (size_t i = 0; i < kBurst; ++i) {
      Verdict v = Classify({p[i].data, p[i].len}, fx.state->matcher(), fx.state->local(), &parsed, nullptr,
                           bursts.hints()[i]);
      to_vip += v.action == Action::kToVip;
      benchmark::DoNotOptimize(v);
    }
  }
  Report(state);
  state.counters["to_vip"] = static_cast<double>(to_vip) / static_cast<double>(state.iterations() * kBurst);
}
void BM_Step_Classify(benchmark::State& state) { StepClassify(state, ChecksumMode::kNicVerified); }
BENCHMARK(BM_Step_Classify);
// The software IPv4 header check (issue 8, point 15): the same frames with a
// valid checksum, vouched for by the NIC or verified by Classify.
void BM_Step_Classify_ChecksumNic(benchmark::State& state) { StepClassify(state, ChecksumMode::kValidNicVerified); }
BENCHMARK(BM_Step_Classify_ChecksumNic);
void BM_Step_Classify_ChecksumSoftware(benchmark::State& state) { StepClassify(state, ChecksumMode::kValidSoftware); }
BENCHMARK(BM_Step_Classify_ChecksumSoftware);

void StepClassifyForward(benchmark::State& state, bool tx_checksum_by_nic) {
  Fixture& fx = SharedFixture();
  Bursts bursts;
  size_t pos = 0;
  const size_t mask = fx.order.size() - 1;
  ParsedPacket parsed;
  const VipState& vip = fx.state->vips()[0];
  for (auto _ : state) {
    PacketRef* p = bursts.Next(&fx.order[pos], 0x10);
    pos = (pos + kBurst) & mask;
    for (size_t i = 0; i < kBurst; ++i) {
      Classify({p[i].data, p[i].len}, fx.state->matcher(), fx.state->local(), &parsed, nullptr, bursts.hints()[i]);
      // As Worker::Send forwards: the backend's template, else Forward.
      const BackendState& b = vip.backends[i & 15];
      EncapResult r;
      const bool fast =
          tx_checksum_by_nic ? ForwardFast<true>(p[i].data, p[i].len, p[i].headroom, parsed, b.encap_template, i, &r)
                             : ForwardFast<false>(p[i].data, p[i].len, p[i].headroom, parsed, b.encap_template, i, &r);
      if (!fast) {
        r = Forward(p[i].data, p[i].len, p[i].headroom, parsed, b.target, fx.state->encap(), i, tx_checksum_by_nic);
      }
      benchmark::DoNotOptimize(r);
    }
  }
  Report(state);
}
void BM_Step_ClassifyForward(benchmark::State& state) { StepClassifyForward(state, false); }
BENCHMARK(BM_Step_ClassifyForward);
void BM_Step_ClassifyForward_TxChecksumNic(benchmark::State& state) { StepClassifyForward(state, true); }
BENCHMARK(BM_Step_ClassifyForward_TxChecksumNic);

// ICMP fragmentation-needed from a router about the backend's reply to a
// tracked flow: the embedded packet is VIP:80 -> client:port.
constexpr size_t kIcmpFrameLen = 14 + 20 + 8 + 20 + 8;
void WriteIcmpError(uint8_t* f, uint32_t flow) {
  static const uint8_t kFrame[kIcmpFrameLen] = {
      0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02, 0x08, 0x00,  // Ethernet
      0x45, 0, 0, 56, 0, 0, 0, 0, 64, 1, 0, 0,                      // IPv4, ICMP
      192, 0, 2, 77, 198, 51, 100, 80,                              // router -> VIP
      3, 4, 0, 0, 0, 0, 0x05, 0x78,                                 // frag needed, MTU 1400
      0x45, 0, 0x05, 0xdc, 0, 0, 0x40, 0, 63, 6, 0, 0,              // embedded IPv4
      198, 51, 100, 80, 10, 0, 0, 0,                                // VIP -> client
      0, 80, 0, 0, 0, 0, 0, 0,                                      // TCP ports, seq
  };
  std::memcpy(f, kFrame, kIcmpFrameLen);
  f[59] = static_cast<uint8_t>(flow >> 22);  // client 10.x.y.z, as Bursts
  f[60] = static_cast<uint8_t>(flow >> 14);
  f[61] = static_cast<uint8_t>(flow >> 6);
  const uint16_t port = static_cast<uint16_t>(1024 + (flow & 0x3F));
  f[64] = static_cast<uint8_t>(port >> 8);
  f[65] = static_cast<uint8_t>(port);
  const uint16_t inner = InternetChecksum(f + 42, 20);
  f[52] = static_cast<uint8_t>(inner >> 8);
  f[53] = static_cast<uint8_t>(inner);
  const uint16_t outer = InternetChecksum(f + 14, 20);
  f[24] = static_cast<uint8_t>(outer >> 8);
  f[25] = static_cast<uint8_t>(outer);
  const uint16_t icmp = InternetChecksum(f + 34, kIcmpFrameLen - 34);
  f[36] = static_cast<uint8_t>(icmp >> 8);
  f[37] = static_cast<uint8_t>(icmp);
}

void BM_Pipeline_IcmpError(benchmark::State& state) {
  Fixture& fx = SharedFixture();
  const int mode = static_cast<int>(state.range(0));
  // Microsoft's verification key; a 128-entry RETA naming this worker (0)
  // or the other one (1) throughout, so that every error takes one path.
  RssConfig rss;
  rss.key = {0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
             0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
             0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};
  rss.types = {.ipv4 = true, .ipv4_tcp = true, .ipv4_udp = true, .ipv6 = true, .ipv6_tcp = true, .ipv6_udp = true};
  rss.reta.assign(128, mode == 2 ? 1 : 0);
  const RssOwner owner = *RssOwner::Create(rss, 2);
  fx.worker->SetRssOwner(mode == 0 ? nullptr : &owner, 0);
  std::vector<uint8_t> storage(kPool * kBufSize);
  PacketRef refs[kBurst];
  size_t pos = 0, next = 0;
  const size_t mask = fx.order.size() - 1;
  const auto& local = fx.worker->counters().local;
  const uint64_t routed_before = local[static_cast<size_t>(LocalCounter::kIcmpErrorsRouted)].value();
  const uint64_t steered_before = local[static_cast<size_t>(LocalCounter::kIcmpErrorsSteered)].value();
  for (auto _ : state) {
    uint8_t* base = storage.data() + next * kBurst * kBufSize;
    next = (next + 1) % (kPool / kBurst);
    for (size_t i = 0; i < kBurst; ++i) {
      uint8_t* f = base + i * kBufSize + kHeadroom;
      WriteIcmpError(f, fx.order[pos + i]);
      refs[i] = PacketRef{};
      refs[i].data = f;
      refs[i].len = kIcmpFrameLen;
      refs[i].headroom = kHeadroom;
      refs[i].tailroom = kBufSize - kHeadroom - kIcmpFrameLen;
    }
    pos = (pos + kBurst) & mask;
    fx.worker->ProcessBurst(refs, kBurst, *fx.state, kNow);
    benchmark::DoNotOptimize(refs[0].offset);
  }
  fx.worker->SetRssOwner(nullptr, 0);
  Report(state);
  const double n = static_cast<double>(state.iterations() * kBurst);
  state.counters["routed"] =
      static_cast<double>(local[static_cast<size_t>(LocalCounter::kIcmpErrorsRouted)].value() - routed_before) / n;
  state.counters["steered"] =
      static_cast<double>(local[static_cast<size_t>(LocalCounter::kIcmpErrorsSteered)].value() - steered_before) / n;
}
BENCHMARK(BM_Pipeline_IcmpError)->Arg(0)->Arg(1)->Arg(2);

// As SynFlood, on the same VIP with bounded_load_epsilon = 0.25 (issue 5):
// every new flow counted, its first choice checked against its capacity.
// Last in the file: its snapshot (same VIP, next generation) is adopted once.
void BM_Pipeline_SynFloodBounded(benchmark::State& state) {
  Fixture& fx = SharedFixture();
  Config c = BenchConfig();
  c.vips[0].bounded_load_epsilon = 0.25;
  static const LbState* bounded = BuildLbState(c, fx.state.get())->release();
  Bursts bursts;
  static uint32_t next = 0x20000000;  // flows never seen before, apart from SynFlood's
  uint32_t ids[kBurst];
  const VipCounters& vc = fx.worker->counters().vip[0];
  const uint64_t new_before = vc.new_flows.value(), passed_before = vc.bounded_load_passed.value();
  for (auto _ : state) {
    for (size_t i = 0; i < kBurst; ++i) ids[i] = next++ & 0x3FFFFFFF;
    PacketRef* p = bursts.Next(ids, 0x02);
    fx.worker->ProcessBurst(p, kBurst, *bounded, kNow, bursts.hints());
    benchmark::DoNotOptimize(p[0].offset);
  }
  Report(state);
  const double n = static_cast<double>(state.iterations() * kBurst);
  state.counters["new_flows"] = static_cast<double>(vc.new_flows.value() - new_before) / n;
  state.counters["passed_on"] = static_cast<double>(vc.bounded_load_passed.value() - passed_before) / n;
}
BENCHMARK(BM_Pipeline_SynFloodBounded);

}  // namespace
}  // namespace maglb

BENCHMARK_MAIN();
