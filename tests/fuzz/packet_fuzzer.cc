// libFuzzer harness over the whole per-packet function: one input = one
// Ethernet frame. Built with -fsanitize=fuzzer,address,undefined
// (scripts/fuzz.sh), so any read or write outside the frame's buffer, any
// undefined behaviour, or any crash fails the run.
//
// Each input goes through
//  1. the per-worker pipeline (Worker::ProcessPacket: classify, conntrack,
//     table, encapsulate / reply / fragment) against a snapshot with GRE,
//     IP-in-IP (IPv4 and IPv6 backends) and L2 DSR VIPs, a small MTU so
//     that the ICMP too-big and fragmentation paths run, and a small
//     conntrack so that eviction runs; then every output frame the pipeline
//     names is read in full (ASan checks the bounds it claims);
//  2. the packet library directly (Classify, checked against the same frame
//     with a VLAN tag, which only the general parser takes; Forward in every mode, the
//     reply builders, IPv4 fragmentation), with each buffer sized exactly,
//     so that a read one byte past the end is caught too;
//  3. the exception path: every other input goes through a snapshot with a
//     kernel interface (so frames to the LB's address go up to it), and every
//     input through Worker::ProcessFromKernel as a frame the kernel sent,
//     with every tunnel-probe port mapped (to a VIP and a backend that exist,
//     or to a backend that does not).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "maglb/checksum.h"
#include "maglb/config.h"
#include "maglb/encap.h"
#include "maglb/lb_state.h"
#include "maglb/packet.h"
#include "maglb/pipeline.h"
#include "maglb/reply.h"

namespace maglb {
namespace {

constexpr size_t kHeadroom = 128;
constexpr size_t kTailroom = 128;

IpAddress Ip(const char* s) { return *IpAddress::Parse(s); }
MacAddress Mac(const char* s) { return *MacAddress::Parse(s); }

VipConfig Vip(const char* name, const char* addr, Protocol proto, uint16_t port, Forwarding fwd,
              std::vector<const char*> backends) {
  VipConfig v;
  v.name = name;
  v.address = Ip(addr);
  v.protocol = proto;
  v.port = port;
  v.forwarding = fwd;
  v.table_size = 251;
  for (const char* b : backends) v.backends.push_back({b, Ip(b), 1, 0});
  return v;
}

struct Fixture {
  Fixture() {
    Config c;
    c.source = "fuzz";
    // The seed corpus (tests/fuzz/make_corpus.py) uses these addresses.
    c.lb.ipv4 = Ip("192.0.2.10");
    c.lb.ipv6 = Ip("2001:db8::10");
    c.lb.gateway_v4 = Ip("192.0.2.1");
    c.lb.gateway_v6 = Ip("2001:db8::1");
    c.lb.encap_source_v4_flow_bits = 4;
    c.lb.encap_source_v6_flow_bits = 12;
    c.lb.mtu = 1400;  // frames of 1400+ bytes take the ICMP / fragment paths
    c.neighbors.push_back({Ip("192.0.2.1"), Mac("02:00:00:00:00:fe"), 0});
    c.neighbors.push_back({Ip("2001:db8::1"), Mac("02:00:00:00:00:fd"), 0});
    c.neighbors.push_back({Ip("192.0.2.50"), Mac("02:00:00:00:00:50"), 0});
    c.vips.push_back(Vip("web", "198.51.100.80", Protocol::kTcp, 80, Forwarding::kGre,
                         {"203.0.113.1", "203.0.113.2", "2001:db8:b::1"}));
    c.vips.push_back(Vip("any", "198.51.100.80", Protocol::kTcp, 0, Forwarding::kIpip,
                         {"203.0.113.3", "2001:db8:b::2"}));
    c.vips.push_back(Vip("dns", "198.51.100.53", Protocol::kUdp, 53, Forwarding::kIpip, {"203.0.113.4"}));
    c.vips.push_back(Vip("web6", "2001:db8:5::80", Protocol::kTcp, 443, Forwarding::kGre,
                         {"2001:db8:b::3", "203.0.113.5"}));
    c.vips.push_back(Vip("udp6", "2001:db8:5::80", Protocol::kUdp, 0, Forwarding::kIpip, {"2001:db8:b::4"}));
    c.vips.push_back(Vip("dsr", "198.51.100.90", Protocol::kTcp, 80, Forwarding::kL2Dsr, {"192.0.2.50"}));
    c.vips.push_back(Vip("drain", "198.51.100.91", Protocol::kUdp, 0, Forwarding::kGre, {}));
    // Bounded loads on two VIPs the corpus reaches, so the placement walk of
    // new flows is fuzzed too.
    c.vips[0].bounded_load_epsilon = 0.1;
    c.vips[2].bounded_load_epsilon = 0.25;
    LbStateOptions opts;
    opts.port_mac = Mac("02:00:00:00:00:01");
    auto s = BuildLbState(c, nullptr, opts);
    if (!s.ok()) std::abort();
    state = *std::move(s);
    opts.kernel_interface = true;
    s = BuildLbState(c, nullptr, opts);
    if (!s.ok()) std::abort();
    kernel_state = *std::move(s);
    // Odd ports: VIP "web"'s first backend; even ports: one that is gone.
    const VipState& web = kernel_state->vips()[0];
    for (uint32_t port = kTunnelProbePortBase; port < kTunnelProbePortBase + kTunnelProbePorts; ++port) {
      probes.Set(static_cast<uint16_t>(port), web.id, port % 2 ? web.backends[0].id : 0xFFFFFFF0u);
    }
    ConntrackConfig ct;
    ct.capacity = 1024;
    worker = std::make_unique<Worker>(ct, ConntrackKey::Fixed(1));
    kernel_worker = std::make_unique<Worker>(ct, ConntrackKey::Fixed(2));
    vips = VipMatcher(VipSpecsOf(c.vips));
    local.v4 = c.lb.ipv4;
    local.v6 = c.lb.ipv6;
    encap = EncapConfig::FromLbConfig(c.lb, opts.port_mac);
    encap.mtu = 1400;
  }
  std::unique_ptr<const LbState> state;
  std::unique_ptr<const LbState> kernel_state;  // with a kernel interface
  std::unique_ptr<Worker> worker;
  std::unique_ptr<Worker> kernel_worker;  // frames from the kernel interface
  TunnelProbeTable probes;
  VipMatcher vips;
  LocalAddresses local;
  EncapConfig encap;
  uint64_t now_ns = 1'000'000'000'000ULL;
};

// Reads every byte (the sum goes nowhere, but ASan sees each access).
volatile uint32_t g_sink;
void Touch(const uint8_t* p, size_t n) { g_sink = ChecksumPartial(p, n, 0); }

// The NIC's verdict on the IPv4 header checksum: mostly "good", so that the
// fuzzer reaches past the header without having to solve its checksum; one
// input in three is verified in software (RxChecksum in packet.h).
RxChecksum ChecksumHint(size_t size) { return size % 3 == 0 ? RxChecksum::kUnknown : RxChecksum::kGood; }

// The frames a PacketRef names exist within its buffer (or the scratch).
void CheckOutput(Fixture& f, Worker& w, const PacketRef& ref, const std::vector<uint8_t>& buf) {
  switch (ref.action) {
    case PacketAction::kTransmit:
    case PacketAction::kReply:
    case PacketAction::kToKernel:
    case PacketAction::kFromKernel: {
      const uint8_t* out = ref.data + ref.offset;
      if (out < buf.data() || out + ref.out_len > buf.data() + buf.size()) std::abort();
      Touch(out, ref.out_len);
      break;
    }
    case PacketAction::kExtra:
      for (const ExtraFrame& e : w.extra_frames().subspan(ref.extra_first, ref.extra_count)) {
        Touch(e.data, e.len);
      }
      break;
    case PacketAction::kToControl:
    case PacketAction::kToControlAndKernel:
    case PacketAction::kDrop:
      break;
    case PacketAction::kSteer:
      std::abort();  // only with an RssOwner, which this worker has not
  }
  (void)f;
}

void RunPipeline(Fixture& f, const uint8_t* data, size_t size) {
  if (size > 0xFFFF - kHeadroom - kTailroom) return;
  // Odd-sized inputs get no tailroom, so that a read past the frame's end
  // is out of bounds here too; even-sized ones let replies grow.
  const size_t tailroom = (size & 1) ? 0 : kTailroom;
  std::vector<uint8_t> buf(kHeadroom + size + tailroom);
  std::memcpy(buf.data() + kHeadroom, data, size);
  PacketRef ref;
  ref.data = buf.data() + kHeadroom;
  ref.len = static_cast<uint16_t>(size);
  ref.headroom = kHeadroom;
  ref.tailroom = static_cast<uint16_t>(tailroom);
  f.now_ns += 7'000'000'000ULL;  // 7 s per input: timeouts expire along the way
  const LbState& state = (size / 2) % 2 ? *f.kernel_state : *f.state;
  f.worker->ProcessPacket(ref, state, f.now_ns, ChecksumHint(size));
  CheckOutput(f, *f.worker, ref, buf);

  // The same bytes as a frame the kernel interface sent.
  std::memcpy(buf.data() + kHeadroom, data, size);
  PacketRef from_kernel;
  from_kernel.data = buf.data() + kHeadroom;
  from_kernel.len = static_cast<uint16_t>(size);
  from_kernel.headroom = kHeadroom;
  from_kernel.tailroom = static_cast<uint16_t>(tailroom);
  f.kernel_worker->ProcessFromKernel(&from_kernel, 1, *f.kernel_state, f.now_ns, &f.probes);
  if (from_kernel.action == PacketAction::kToKernel || from_kernel.action == PacketAction::kToControl ||
      from_kernel.action == PacketAction::kToControlAndKernel) {
    std::abort();  // nothing from the kernel goes back up but an ICMP error (kReply)
  }
  CheckOutput(f, *f.kernel_worker, from_kernel, buf);
}

// Classify decides the common case (untagged IPv4 TCP/UDP) on a path of its
// own; a VLAN tag sends the frame to the general parser and changes only the
// offsets and the tag fields, so the tagged copy is an oracle for the rest.
void CheckAgainstTagged(Fixture& f, const std::vector<uint8_t>& frame, const Verdict& v, const ParsedPacket& p) {
  if (frame.size() < 14 || frame.size() > 0xFFFF - 4) return;
  if ((frame[12] == 0x81 && frame[13] == 0x00) || (frame[12] == 0x88 && frame[13] == 0xA8)) return;
  std::vector<uint8_t> tagged(frame.begin(), frame.begin() + 12);
  tagged.insert(tagged.end(), {0x81, 0x00, 0x01, 0x23});
  tagged.insert(tagged.end(), frame.begin() + 12, frame.end());
  ParsedPacket t;
  const Verdict vt = Classify(tagged, f.vips, f.local, &t, nullptr, ChecksumHint(frame.size()));
  if (vt.action != v.action || vt.reason != v.reason || vt.vip_index != v.vip_index) std::abort();
  ParsedPacket want = p;
  want.vlan_count = 1;
  want.vlan_tci[0] = 0x0123;
  want.l3_offset = static_cast<uint16_t>(want.l3_offset + 4);
  if (want.l4_offset != 0) want.l4_offset = static_cast<uint16_t>(want.l4_offset + 4);
  if (!(t.flow == want.flow) || t.l3_offset != want.l3_offset || t.l4_offset != want.l4_offset ||
      t.l3_len != want.l3_len || t.ethertype != want.ethertype || t.vlan_tci != want.vlan_tci ||
      t.vlan_count != want.vlan_count || t.ip_version != want.ip_version || t.l4_protocol != want.l4_protocol ||
      t.tcp_flags != want.tcp_flags || t.ttl != want.ttl || t.dont_fragment != want.dont_fragment ||
      t.is_fragment != want.is_fragment || t.is_first_fragment != want.is_first_fragment ||
      t.is_icmp_error != want.is_icmp_error || t.icmp_type != want.icmp_type || t.icmp_code != want.icmp_code ||
      t.arp_op != want.arp_op || t.fragment_id != want.fragment_id) {
    std::abort();
  }
}

void RunLibrary(Fixture& f, const uint8_t* data, size_t size) {
  // Exactly `size` bytes: one past the end is out of bounds.
  std::vector<uint8_t> frame(data, data + size);
  ParsedPacket p;
  const Verdict v = Classify(frame, f.vips, f.local, &p, nullptr, ChecksumHint(size));
  CheckAgainstTagged(f, frame, v, p);
  if (v.action == Action::kDrop) return;
  if (p.ip_version != 0 && size_t{p.l3_offset} + p.l3_len > size) std::abort();  // parser's promise

  const MacAddress mac = f.encap.src_mac;
  std::vector<uint8_t> out(kMaxIcmpTooBigLen);
  if (v.action == Action::kToVip) {
    for (Forwarding fwd : {Forwarding::kGre, Forwarding::kIpip, Forwarding::kL2Dsr}) {
      for (const char* backend : {"203.0.113.9", "2001:db8:b::9"}) {
        std::vector<uint8_t> buf(kMaxEncapPrepend + size);
        std::memcpy(buf.data() + kMaxEncapPrepend, frame.data(), size);
        const EncapTarget t{.forwarding = fwd, .backend = Ip(backend), .next_hop_mac = mac};
        const EncapResult r = Forward(buf.data() + kMaxEncapPrepend, size, kMaxEncapPrepend, p, t, f.encap,
                                      0x9e3779b97f4a7c15ULL);
        if (r.status == EncapStatus::kOk) {
          const uint8_t* o = buf.data() + kMaxEncapPrepend + r.offset;
          if (o < buf.data() || o + r.length > buf.data() + buf.size()) std::abort();
          Touch(o, r.length);
        }
        // The worker's template path: where it takes the packet, Forward's frame exactly.
        const Ipv4EncapTemplate tmpl = Ipv4EncapTemplate::Of(t, f.encap);
        if (tmpl.valid()) {
          std::vector<uint8_t> fast(kMaxEncapPrepend + size);
          std::memcpy(fast.data() + kMaxEncapPrepend, frame.data(), size);
          EncapResult fr;
          if (ForwardFast<false>(fast.data() + kMaxEncapPrepend, size, kMaxEncapPrepend, p, tmpl,
                                 0x9e3779b97f4a7c15ULL, &fr)) {
            if (r.status != EncapStatus::kOk || fr.offset != r.offset || fr.length != r.length ||
                std::memcmp(fast.data() + kMaxEncapPrepend + fr.offset, buf.data() + kMaxEncapPrepend + r.offset,
                            r.length) != 0) {
              std::abort();
            }
          }
        }
      }
    }
    const size_t n = BuildIcmpTooBig(frame, p, 1300, p.ip_version == 6 ? *f.local.v6 : *f.local.v4, mac, out);
    if (n > out.size()) std::abort();
    if (p.ip_version == 4) {
      const uint8_t* ip = frame.data() + p.l3_offset;
      for (size_t max_len : {68, 576, 1000}) {
        const size_t count = Ipv4FragmentCount(ip, p.l3_len, max_len);
        for (size_t i = 0; i < count && i < 1024; ++i) {
          std::vector<uint8_t> frag(max_len);
          const size_t fl = WriteIpv4Fragment(ip, p.l3_len, max_len, i, frag.data(), frag.size());
          if (fl == 0 || fl > max_len) std::abort();
        }
      }
    }
  }
  if (v.action == Action::kLocalEcho) {
    std::vector<uint8_t> copy = frame;
    if (MakeEchoReply(copy, p, mac) > size) std::abort();
  }
  if (v.action == Action::kLocalArp) {
    std::vector<uint8_t> copy = frame;
    if (MakeArpReply(copy, p, *f.local.v4, mac) > size) std::abort();
    (void)ExtractNeighbor(frame, p);
  }
  if (v.action == Action::kLocalNd) {
    std::vector<uint8_t> na(kNeighborAdvertLen + 8);
    if (BuildNeighborAdvert(frame, p, *f.local.v6, mac, na) > na.size()) std::abort();
    (void)ExtractNeighbor(frame, p);
  }
}

}  // namespace
}  // namespace maglb

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static maglb::Fixture* fixture = new maglb::Fixture();  // lives for the process
  maglb::RunPipeline(*fixture, data, size);
  maglb::RunLibrary(*fixture, data, size);
  return 0;
}
