#include "maglb/pipeline.h"

#include <algorithm>
#include <cstring>

#include "maglb/bounded_load.h"
#include "maglb/encap.h"
#include "maglb/flow_hash.h"
#include "maglb/lb_state.h"
#include "maglb/reply.h"

namespace maglb {
namespace {

constexpr std::string_view kLocalCounterNames[] = {
#define MAGLB_LOCAL_NAME(name, str) str,
    MAGLB_FOREACH_LOCAL_COUNTER(MAGLB_LOCAL_NAME)
#undef MAGLB_LOCAL_NAME
};
static_assert(std::size(kLocalCounterNames) == kNumLocalCounters);

// Room in front of a fragment in scratch for the outer headers.
constexpr size_t kScratchHeadroom = kMaxEncapPrepend;
// L2 DSR fragments take the original L2 header, tags included, in that room.
static_assert(kScratchHeadroom >= kEthernetHeaderLen + kMaxVlanTags * kVlanTagLen);

inline size_t Index(DropReason r) { return static_cast<size_t>(r); }
inline size_t Index(LocalCounter c) { return static_cast<size_t>(c); }

// Whether a TCP segment (unfragmented: it has flags) carries payload: IP
// length past the TCP header's data offset. Read for closing flows only.
inline bool TcpCarriesData(const PacketRef& pkt, const ParsedPacket& p) {
  if (p.l4_offset == 0 || size_t{p.l4_offset} + 13 > pkt.len) return false;
  if (p.l3_len < p.l4_offset - p.l3_offset) return false;
  const size_t tcp_len = size_t{p.l3_len} - (p.l4_offset - p.l3_offset);
  return tcp_len > size_t{(pkt.data[p.l4_offset + 12] >> 4) * 4u};
}

}  // namespace

std::string_view LocalCounterName(LocalCounter c) { return kLocalCounterNames[Index(c)]; }

WorkerCounters::WorkerCounters()
    : vip(new VipCounters[kMaxVips]),
      backend(new FlowCounters[kMaxBackendsTotal]),
      vip_owner(new std::atomic<uint32_t>[kMaxVips]),
      backend_owner(new std::atomic<uint32_t>[kMaxBackendsTotal]) {
  // Id 0 is never assigned (lb_state.cc starts at 1): every slot starts unowned.
  for (uint32_t i = 0; i < kMaxVips; ++i) vip_owner[i].store(0, std::memory_order_relaxed);
  for (uint32_t i = 0; i < kMaxBackendsTotal; ++i) backend_owner[i].store(0, std::memory_order_relaxed);
}

Worker::Worker(const ConntrackConfig& conntrack, size_t scratch_bytes)
    : conntrack_(conntrack, kMaxBackendsTotal, kMaxVips),
      counters_(std::make_unique<WorkerCounters>()),
      scratch_(scratch_bytes),
      extra_(std::max<size_t>(scratch_bytes / 64, 1)) {}

Worker::Worker(const ConntrackConfig& conntrack, const ConntrackKey& conntrack_key,
               size_t scratch_bytes)
    : conntrack_(conntrack, conntrack_key, kMaxBackendsTotal, kMaxVips),
      counters_(std::make_unique<WorkerCounters>()),
      scratch_(scratch_bytes),
      extra_(std::max<size_t>(scratch_bytes / 64, 1)) {}

void Worker::AdoptState(const LbState& state) {
  // A slot that changed hands starts from zero (the worker is its only writer).
  WorkerCounters& c = *counters_;
  FlowLoads& loads = conntrack_.loads();
  loads.BeginAdoption();
  for (const VipState& v : state.vips()) {
    if (c.vip_owner[v.counter_slot].load(std::memory_order_relaxed) != v.id) {
      VipCounters& f = c.vip[v.counter_slot];
      f.packets.Reset();
      f.bytes.Reset();
      f.new_flows.Reset();
      f.bounded_load_passed.Reset();
      f.bounded_load_over.Reset();
      c.vip_owner[v.counter_slot].store(v.id, std::memory_order_relaxed);
    }
    loads.AdoptVip(v.counter_slot);
    for (const BackendState& b : v.backends) {
      loads.AdoptBackend(b.counter_slot, b.id, v.counter_slot);
      if (c.backend_owner[b.counter_slot].load(std::memory_order_relaxed) != b.id) {
        FlowCounters& f = c.backend[b.counter_slot];
        f.packets.Reset();
        f.bytes.Reset();
        f.new_flows.Reset();
        c.backend_owner[b.counter_slot].store(b.id, std::memory_order_relaxed);
      }
    }
  }
  generation_seen_ = state.generation();
  c.generation.Set(generation_seen_);
}

uint8_t* Worker::ScratchAlloc(size_t bytes) {
  bytes = (bytes + 63) & ~size_t{63};
  if (scratch_used_ + bytes > scratch_.size()) return nullptr;
  uint8_t* p = scratch_.data() + scratch_used_;
  scratch_used_ += bytes;
  return p;
}

bool Worker::AddExtra(const uint8_t* data, size_t len, uint8_t tx_offload) {
  if (extra_count_ == extra_.size()) return false;
  extra_[extra_count_++] = {data, static_cast<uint16_t>(len), tx_offload};
  return true;
}

void Worker::Drop(PacketRef& pkt, DropReason reason) {
  pkt.action = PacketAction::kDrop;
  pkt.reason = reason;
  pkt.offset = 0;
  pkt.out_len = 0;
  counters_->drops[Index(reason)].Add(1);
}

// The packet's own buffer now holds a reply of `len` bytes from its start.
void Worker::ReplyInPlace(PacketRef& pkt, size_t len, LocalCounter counted_as) {
  pkt.action = PacketAction::kReply;
  pkt.offset = 0;
  pkt.out_len = static_cast<uint16_t>(len);
  counters_->local[Index(counted_as)].Add(1);
}

// A reply built in scratch goes back in the packet's own buffer when it fits,
// else as an extra frame.
void Worker::ReplyFromScratch(PacketRef& pkt, const uint8_t* frame, size_t len) {
  if (len <= size_t{pkt.len} + pkt.tailroom) {
    std::memcpy(pkt.data, frame, len);
    pkt.action = PacketAction::kReply;
    pkt.offset = 0;
    pkt.out_len = static_cast<uint16_t>(len);
    return;
  }
  pkt.extra_first = static_cast<uint16_t>(extra_count_);
  pkt.extra_count = 1;
  if (!AddExtra(frame, len)) {
    Drop(pkt, DropReason::kNoHeadroom);
    return;
  }
  pkt.action = PacketAction::kExtra;
}

// Whether to answer `pkt` (what the LB generates on its own): never a group
// or unspecified source, never about a group destination (reply.h,
// ReplyCheck), and within the worker's rate (RFC 4443 2.4(f)). Drops and
// counts it otherwise. The address check comes first: refused packets take
// no token.
bool Worker::MayReply(PacketRef& pkt, const ParsedPacket& p, TokenBucket& bucket, DropReason over_limit,
                      const LbState& state) {
  switch (CheckReplyAddresses({pkt.data, pkt.len}, p)) {
    case ReplyCheck::kOk:
      break;
    case ReplyCheck::kGroupSource:
      Drop(pkt, DropReason::kBroadcastSource);
      return false;
    case ReplyCheck::kGroupDestination:
      Drop(pkt, DropReason::kBroadcastDestination);
      return false;
  }
  const LbConfig& lb = state.config().lb;
  if (!bucket.Take(now_ns_, lb.reply_rate, lb.reply_burst)) {
    Drop(pkt, over_limit);
    return false;
  }
  return true;
}

void Worker::Local(PacketRef& pkt, const ParsedPacket& p, Action action, const LbState& state) {
  WorkerCounters& c = *counters_;
  const MacAddress& mac = state.encap().src_mac;
  const std::span<uint8_t> frame(pkt.data, pkt.len);
  switch (action) {
    case Action::kLocalArp: {
      if (p.arp_op == kArpReply) return ToControl(pkt, state);
      if (!MayReply(pkt, p, neighbor_bucket_, DropReason::kArpNdRateLimited, state)) return;
      size_t n = state.local().v4 ? MakeArpReply(frame, p, *state.local().v4, mac) : 0;
      if (n == 0) return Drop(pkt, DropReason::kBadArp);
      return ReplyInPlace(pkt, n, LocalCounter::kArpReplies);
    }
    case Action::kLocalNd: {
      if (p.icmp_type == kIcmpv6NeighborAdvertisement) return ToControl(pkt, state);
      if (!MayReply(pkt, p, neighbor_bucket_, DropReason::kArpNdRateLimited, state)) return;
      uint8_t* out = ScratchAlloc(kNeighborAdvertLen + kMaxVlanTags * kVlanTagLen);
      size_t n = 0;
      if (out != nullptr && state.local().v6) {
        // For our address, or for the kernel interface's link-local one.
        const std::span<uint8_t> room(out, kNeighborAdvertLen + kMaxVlanTags * kVlanTagLen);
        n = BuildNeighborAdvert(frame, p, *state.local().v6, mac, room);
        if (n == 0 && state.local().v6_link_local) {
          n = BuildNeighborAdvert(frame, p, *state.local().v6_link_local, mac, room);
        }
      }
      if (n == 0) return Drop(pkt, DropReason::kBadNd);
      ReplyFromScratch(pkt, out, n);
      c.local[Index(LocalCounter::kNdReplies)].Add(1);
      return;
    }
    case Action::kLocalEcho: {
      if (!MayReply(pkt, p, icmp_bucket_, DropReason::kIcmpRateLimited, state)) return;
      size_t n = MakeEchoReply(frame, p, mac);
      if (n == 0) return Drop(pkt, DropReason::kLocalUnsupported);
      return ReplyInPlace(pkt, n, LocalCounter::kEchoReplies);
    }
    case Action::kToKernel:
      return ToKernel(pkt, p, state);
    default:
      return Drop(pkt, DropReason::kLocalUnsupported);
  }
}

bool Worker::KernelMayTake(TokenBucket& bucket, const LbState& state) {
  const KernelConfig& k = state.config().kernel;
  return bucket.Take(now_ns_, k.rate, k.burst);
}

// A reply to one of the health task's probes: TCP or UDP to a mapped probe
// port from exactly the peer that port probes (tunnel_probe.h).
bool Worker::IsProbeReply(const ParsedPacket& p) const {
  if (probes_ == nullptr || p.is_fragment || p.is_icmp_error) return false;
  if (p.flow.protocol != kIpProtoTcp && p.flow.protocol != kIpProtoUdp) return false;
  return probes_->IsPeer(p.flow.dst_port, p.flow.src.data(), p.flow.is_v6, p.flow.src_port);
}

void Worker::ToKernel(PacketRef& pkt, const ParsedPacket& p, const LbState& state) {
  // Health-probe replies have a budget of their own: a flood to the LB's
  // address (anyone can send one) must not make the checks fail.
  TokenBucket& bucket = IsProbeReply(p) ? probe_bucket_ : kernel_bucket_;
  if (!KernelMayTake(bucket, state)) return Drop(pkt, DropReason::kKernelRateLimited);
  pkt.action = PacketAction::kToKernel;
  pkt.offset = 0;
  pkt.out_len = pkt.len;
}

// ARP replies and neighbour advertisements: the control thread learns next
// hops from them; with a kernel interface, its stack gets a copy of the same
// answers, so that both resolve a neighbour to the same MAC.
void Worker::ToControl(PacketRef& pkt, const LbState& state) {
  pkt.action = PacketAction::kToControl;
  pkt.offset = 0;
  pkt.out_len = pkt.len;
  if (!state.local().kernel) return;
  // The kernel's copy on a budget of its own: without its neighbours the
  // kernel cannot probe either.
  if (KernelMayTake(neighbor_copy_bucket_, state)) {
    pkt.action = PacketAction::kToControlAndKernel;
  } else {
    counters_->drops[Index(DropReason::kKernelRateLimited)].Add(1);  // the kernel's copy only
  }
}

void Worker::Send(PacketRef& pkt, const ParsedPacket& p, const VipState& vip, uint16_t backend,
                  const LbState& state) {
  SendInline(pkt, p, vip, backend, state);
}

inline void Worker::SendInline(PacketRef& pkt, const ParsedPacket& p, const VipState& vip, uint16_t backend,
                               const LbState& state) {
  const BackendState& b = vip.backends[backend];
  // Never to a zero MAC: the control thread is still resolving the next hop.
  if (!b.next_hop_known) return Drop(pkt, DropReason::kNoNeighbor);
  const Ipv4EncapTemplate& t = b.encap_template;
  if (!t.valid()) [[unlikely]] return SendGeneral(pkt, p, vip, b, state);
  // The flow hash (SendGeneral says which) only where the source takes flow
  // bits, out of line: inlined, its registers cost every packet spills.
  if (t.source_flow_mask != 0) [[unlikely]] return SendWithFlowBits(pkt, p, vip, b, state);
  if (!SendFast(pkt, p, b, 0)) [[unlikely]] SendGeneral(pkt, p, vip, b, state);
}

void Worker::SendWithFlowBits(PacketRef& pkt, const ParsedPacket& p, const VipState& vip,
                              const BackendState& b, const LbState& state) {
  if (!SendFast(pkt, p, b, FlowHash(p.flow, vip.hash_seed))) SendGeneral(pkt, p, vip, b, state);
}

// ForwardFast, then Transmit; false: nothing done.
inline bool Worker::SendFast(PacketRef& pkt, const ParsedPacket& p, const BackendState& b, uint64_t path_hash) {
  EncapResult r;
  const bool built =
      tx_outer_ipv4_checksum_
          ? ForwardFast<true>(pkt.data, pkt.len, pkt.headroom, p, b.encap_template, path_hash, &r)
          : ForwardFast<false>(pkt.data, pkt.len, pkt.headroom, p, b.encap_template, path_hash, &r);
  if (built) Transmit(pkt, b, r);
  return built;
}

// A backend's counters count what was sent to it: only once the frame is
// built (a packet answered with ICMP too-big never reached it).
inline void Worker::Transmit(PacketRef& pkt, const BackendState& b, const EncapResult& r) {
  FlowCounters& bc = counters_->backend[b.counter_slot];
  bc.packets.Add(1);
  bc.bytes.Add(pkt.len);
  pkt.action = PacketAction::kTransmit;
  pkt.offset = static_cast<int16_t>(r.offset);
  pkt.out_len = static_cast<uint16_t>(r.length);
  pkt.tx_offload = r.tx_offload;
}

// What the template does not cover: L2 DSR, IPv6 outer, no source, and every
// packet ForwardFast leaves to Forward.
void Worker::SendGeneral(PacketRef& pkt, const ParsedPacket& p, const VipState& vip,
                         const BackendState& b, const LbState& state) {
  // The per-flow value that varies the outer source and the IPv6 flow label
  // is the flow's placement hash: stable for the flow and equal on every LB
  // instance (ECMP may move the flow). Never the conntrack's keyed hash,
  // whose bits would leave the LB in every tunnelled header. Computed only
  // where a header takes it.
  const EncapConfig& encap = state.encap();
  const bool uses_path_hash = b.target.forwarding != Forwarding::kL2Dsr &&
                              (b.target.backend.is_v6 || encap.flow_bits_v4 != 0);
  const uint64_t path_hash = uses_path_hash ? FlowHash(p.flow, vip.hash_seed) : 0;
  const EncapResult r =
      Forward(pkt.data, pkt.len, pkt.headroom, p, b.target, encap, path_hash, tx_outer_ipv4_checksum_);
  if (r.status == EncapStatus::kOk) [[likely]] return Transmit(pkt, b, r);
  SendSlow(pkt, p, vip, b, r, path_hash, state);
}

// Everything but plain forwarding, out of the hot function.
void Worker::SendSlow(PacketRef& pkt, const ParsedPacket& p, const VipState& vip,
                      const BackendState& b, const EncapResult& r, uint64_t path_hash,
                      const LbState& state) {
  WorkerCounters& c = *counters_;
  const EncapConfig& encap = state.encap();
  switch (r.status) {
    case EncapStatus::kOk:
      return;  // handled in Send
    case EncapStatus::kMtuExceeded: {
      // Not forwarded either way; answered only within the rules and the rate.
      if (!MayReply(pkt, p, icmp_bucket_, DropReason::kIcmpRateLimited, state)) return;
      const bool v6 = p.ip_version == 6;
      const std::optional<IpAddress>& ours = v6 ? state.local().v6 : state.local().v4;
      IpAddress source = ours.value_or(vip.address);
      uint8_t* out = ScratchAlloc(kMaxIcmpTooBigLen);
      size_t n = out != nullptr ? BuildIcmpTooBig({pkt.data, pkt.len}, p, r.usable_mtu, source,
                                                  encap.src_mac, {out, kMaxIcmpTooBigLen})
                                : 0;
      if (n == 0) return Drop(pkt, DropReason::kMtuExceededNoIcmp);
      c.drops[Index(DropReason::kMtuExceeded)].Add(1);  // not forwarded, but answered
      c.local[Index(LocalCounter::kIcmpTooBig)].Add(1);
      ReplyFromScratch(pkt, out, n);
      return;
    }
    case EncapStatus::kFragmentInner: {
      const uint8_t* ip = pkt.data + p.l3_offset;
      const size_t count = Ipv4FragmentCount(ip, p.l3_len, r.usable_mtu);
      if (count == 0) return Drop(pkt, DropReason::kMtuExceededNoIcmp);
      const uint16_t first = static_cast<uint16_t>(extra_count_);
      for (size_t i = 0; i < count; ++i) {
        uint8_t* slot = ScratchAlloc(kScratchHeadroom + r.usable_mtu);
        if (slot == nullptr) {
          extra_count_ = first;
          return Drop(pkt, DropReason::kMtuExceededNoIcmp);
        }
        uint8_t* frag = slot + kScratchHeadroom;
        const size_t len = WriteIpv4Fragment(ip, p.l3_len, r.usable_mtu, i, frag, r.usable_mtu);
        if (len == 0) {
          extra_count_ = first;
          return Drop(pkt, DropReason::kMtuExceededNoIcmp);
        }
        const uint8_t* out;
        size_t out_len;
        uint8_t tx_offload = 0;  // L2 DSR: the fragment's own header, checksummed above
        if (b.target.forwarding == Forwarding::kL2Dsr) {
          // Each fragment keeps the frame's VLAN tags, as L2 DSR does for
          // whole packets (p.l3_offset <= 22 bytes fits kScratchHeadroom).
          out = WriteL2DsrHeader(frag, pkt.data, p.l3_offset, b.target, encap);
          out_len = p.l3_offset + len;
        } else {
          EncapResult fr = Encapsulate(frag, len, kScratchHeadroom, b.target, encap, path_hash,
                                       tx_outer_ipv4_checksum_);
          if (fr.status != EncapStatus::kOk) {
            extra_count_ = first;
            return Drop(pkt, DropReason::kMtuExceededNoIcmp);
          }
          out = frag + fr.offset;
          out_len = fr.length;
          tx_offload = fr.tx_offload;
        }
        if (!AddExtra(out, out_len, tx_offload)) {
          extra_count_ = first;
          return Drop(pkt, DropReason::kMtuExceededNoIcmp);
        }
      }
      pkt.action = PacketAction::kExtra;
      pkt.extra_first = first;
      pkt.extra_count = static_cast<uint16_t>(count);
      c.local[Index(LocalCounter::kFragmentsSent)].Add(count);
      FlowCounters& bc = c.backend[b.counter_slot];  // sent, in fragments
      bc.packets.Add(1);
      bc.bytes.Add(pkt.len);
      return;
    }
    case EncapStatus::kNoSource:
      return Drop(pkt, DropReason::kNoEncapSource);
    case EncapStatus::kNoHeadroom:
      return Drop(pkt, DropReason::kNoHeadroom);
    case EncapStatus::kBadPacket:
      return Drop(pkt, DropReason::kBadIpLength);
  }
}

// An ICMP error is hashed by the NIC on its outer header; the flow it quotes
// lives on the worker whose queue RSS gives that flow's own packets.
bool Worker::SteerToOwner(PacketRef& pkt, const ParsedPacket& p) {
  const uint32_t owner = rss_owner_->OwnerOf(p.flow);
  if (owner == self_ || owner == RssOwner::kUnknown) return false;
  pkt.action = PacketAction::kSteer;
  pkt.steer_to = static_cast<uint16_t>(owner);
  pkt.offset = 0;
  pkt.out_len = pkt.len;
  counters_->local[Index(LocalCounter::kIcmpErrorsSteered)].Add(1);
  return true;
}

inline void Worker::ToVip(PacketRef& pkt, const ParsedPacket& p, const Conntrack::Probe& probe, const VipState& vip, const LbState& state,
                   uint64_t now_ns) {
  if (p.is_icmp_error && rss_owner_ != nullptr && !steered_burst_) [[unlikely]] {
    if (SteerToOwner(pkt, p)) return;  // counted (VIP, routed) by the owner
  }
  WorkerCounters& c = *counters_;
  FlowCounters& vc = c.vip[vip.counter_slot];
  vc.packets.Add(1);
  vc.bytes.Add(pkt.len);

  // The signature matches of stage 2 hold unless this chunk inserted since.
  ConntrackEntry* e = chunk_inserted_ ? conntrack_.Lookup(p.flow, probe, now_ns)
                                      : conntrack_.LookupPrefetched(p.flow, probe, now_ns);
  uint16_t backend = VipState::kNoBackend;
  if (e != nullptr) backend = vip.Resolve(e->backend_id, e->backend_hint);

  if (p.is_icmp_error) {
    // About a flow: follow it without creating or refreshing state. Not
    // tracked here (expired, or several workers without an RssOwner): the
    // table decides.
    if (backend == VipState::kNoBackend) {
      if (vip.table->empty()) return Drop(pkt, DropReason::kNoBackend);
      backend = vip.table->Lookup(FlowHash(p.flow, vip.hash_seed));
    }
    c.local[Index(LocalCounter::kIcmpErrorsRouted)].Add(1);
    return Send(pkt, p, vip, backend, state);
  }

  if (e != nullptr && backend != VipState::kNoBackend) {
    // Pinned: stays with its backend while it is configured, weight 0
    // included; no packet moves it (conntrack.h, Touch). A SYN on a closing
    // entry stays too, draining backend or not: it may be the tuple's next
    // connection, or a spoofed SYN after a spoofed FIN/RST, and nothing the
    // LB sees tells them apart. Only a removed backend moves its flows.
    if (e->backend_hint != backend) e->backend_hint = backend;  // keep the line clean
    conntrack_.Touch(e, p.tcp_flags, now_ns, [&] { return TcpCarriesData(pkt, p); });
    return SendInline(pkt, p, vip, backend, state);
  }

  NewFlow(pkt, p, probe, e, backend == VipState::kNoBackend, vip, state, now_ns);
}

// A new flow (or an unknown mid-flow one, or a new connection reusing a
// closing flow's tuple, or a flow whose backend is gone): the current table.
void Worker::NewFlow(PacketRef& pkt, const ParsedPacket& p, const Conntrack::Probe& probe, ConntrackEntry* e, bool backend_unresolved,
                     const VipState& vip, const LbState& state, uint64_t now_ns) {
  WorkerCounters& c = *counters_;
  FlowCounters& vc = c.vip[vip.counter_slot];
  const bool backend_gone = e != nullptr && backend_unresolved;
  if (vip.table->empty()) return Drop(pkt, DropReason::kNoBackend);
  const uint64_t flow_hash = FlowHash(p.flow, vip.hash_seed);
  const uint16_t first = vip.table->Lookup(flow_hash);
  if (p.flow.protocol == kIpProtoTcp && (p.tcp_flags & kTcpRst)) [[unlikely]] {
    // A RST pins nothing (conntrack.h): by the table, not tracked.
    c.untracked.Add(1);
    return Send(pkt, p, vip, first, state);
  }
  uint16_t backend = first;
  uint32_t load_slot = kUncountedFlow;
  BoundedLoadOutcome outcome = BoundedLoadOutcome::kFirstChoice;
  if (vip.bounded_load_epsilon > 0) [[unlikely]] {
    // Only a new connection is placed by the bound. A TCP packet of a flow we
    // do not know mid-flow (LB restart, ECMP shift, or a SYN that could not be
    // tracked) takes the table's choice, which every packet of it agrees on.
    if (p.flow.protocol != kIpProtoTcp || (p.tcp_flags & (kTcpSyn | kTcpAck)) == kTcpSyn) {
      backend = BoundedLoadChoice(vip, flow_hash, first, &outcome);
    }
    load_slot = vip.backends[backend].counter_slot;
  }
  chunk_inserted_ = true;
  if (e != nullptr) {
    if (backend_gone) c.repinned.Add(1);
    conntrack_.Repin(e, vip.backends[backend].id, backend, p.tcp_flags, now_ns, load_slot);
  } else if (conntrack_.Insert(p.flow, probe, p.tcp_flags, vip.backends[backend].id, backend,
                               now_ns, load_slot) == nullptr) {
    c.untracked.Add(1);
    // Untracked, its next packet is placed again, by the table: so is this one.
    backend = first;
    outcome = BoundedLoadOutcome::kFirstChoice;
  }
  if (outcome != BoundedLoadOutcome::kFirstChoice) [[unlikely]] {
    VipCounters& bounded = c.vip[vip.counter_slot];
    (outcome == BoundedLoadOutcome::kPassed ? bounded.bounded_load_passed
                                            : bounded.bounded_load_over).Add(1);
  }
  const BackendState& b = vip.backends[backend];
  vc.new_flows.Add(1);
  c.backend[b.counter_slot].new_flows.Add(1);
  Send(pkt, p, vip, backend, state);
}

// Bounded loads (pipeline.h): the first backend of the flow's table
// preference order below its capacity on this worker. Re-checking a backend
// that repeats later in the walk gives the same answer (no count changes
// during the walk), so only adjacent repeats are skipped, and the result is
// BoundedLoadAssign over TablePreference as far as the walk reaches.
uint16_t Worker::BoundedLoadChoice(const VipState& vip, uint64_t flow_hash, uint16_t first,
                                   BoundedLoadOutcome* outcome) {
  const FlowLoads& loads = conntrack_.loads();
  const uint64_t flows = loads.vip_active(vip.counter_slot);
  const double eps = vip.bounded_load_epsilon;
  // Capacity depends on the weight alone: one computation per distinct weight in a row.
  uint32_t cap_weight = vip.backends[first].weight;
  uint64_t cap = BoundedLoadCapacity(flows, cap_weight, vip.total_weight, eps);
  if (loads.active(vip.backends[first].counter_slot) < cap) return first;

  const LookupTable& table = *vip.table;
  const uint32_t m = table.size();
  uint32_t s = LookupTable::SlotOf(flow_hash, m);
  const uint32_t walk = std::min(m, kBoundedLoadMaxSlots);
  uint16_t previous = first;
  for (uint32_t i = 1; i < walk; ++i) {
    if (++s == m) s = 0;
    const uint16_t b = table.slot(s);
    if (b == previous) continue;
    previous = b;
    const BackendState& bs = vip.backends[b];
    if (bs.weight != cap_weight) {
      cap_weight = bs.weight;
      cap = BoundedLoadCapacity(flows, cap_weight, vip.total_weight, eps);
    }
    if (loads.active(bs.counter_slot) < cap) {
      *outcome = BoundedLoadOutcome::kPassed;
      return b;
    }
  }
  *outcome = BoundedLoadOutcome::kOver;
  return first;
}

void Worker::ProcessChunk(PacketRef* pkts, size_t n, const LbState& state, uint64_t now_ns,
                          const RxChecksum* ip_checksum) {
  WorkerCounters& c = *counters_;
  // 1. Classify; hash and prefetch the conntrack buckets of VIP traffic.
  // Frames to another unicast MAC are dropped (promiscuous port, flooded
  // segment). One MAC serves both arms: two-arm, the backend port takes the
  // front port's MAC (daemon/main.cc). An all-zero port MAC means none was
  // given (LbStateOptions' default, library tests): nothing to compare with.
  const MacAddress& our_mac = state.encap().src_mac;
  const MacAddress* port_mac = our_mac == MacAddress{} ? nullptr : &our_mac;
  uint64_t rx_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    PacketRef& pkt = pkts[i];
    rx_bytes += pkt.len;
    pkt.extra_count = 0;
    verdict_[i] = Classify({pkt.data, pkt.len}, state.matcher(), state.local(), &parsed_[i], port_mac,
                           ip_checksum != nullptr ? ip_checksum[i] : RxChecksum::kUnknown);
  }
  // Hash in a second pass: hashing a key right after the parser wrote it
  // piecewise stalls on store-to-load forwarding.
  for (size_t i = 0; i < n; ++i) {
    if (verdict_[i].action == Action::kToVip) {
      probe_[i] = conntrack_.ProbeOf(conntrack_.HashOf(parsed_[i].flow));
      conntrack_.PrefetchBuckets(probe_[i]);
    }
  }
  // 2. Prefetch the entries whose signatures match.
  for (size_t i = 0; i < n; ++i) {
    if (verdict_[i].action == Action::kToVip && !conntrack_.PrefetchEntries(probe_[i]) &&
        !parsed_[i].is_icmp_error) {
      conntrack_.PrefetchInsertSlot(probe_[i], parsed_[i].flow.protocol, parsed_[i].tcp_flags, now_ns);
    }
  }
  if (!steered_burst_) {  // a handed-over packet was counted by the worker that received it
    c.rx_packets.Add(n);
    c.rx_bytes.Add(rx_bytes);
  }
  // 3. In order: look up, place, track, forward.
  chunk_inserted_ = false;
  uint64_t tx_packets = 0, tx_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    PacketRef& pkt = pkts[i];
    const Verdict& v = verdict_[i];
    switch (v.action) {
      case Action::kToVip:
        ToVip(pkt, parsed_[i], probe_[i], state.vips()[v.vip_index], state, now_ns);
        break;
      case Action::kDrop:
        Drop(pkt, v.reason);
        break;
      default:
        Local(pkt, parsed_[i], v.action, state);
        break;
    }
    if (pkt.action == PacketAction::kTransmit || pkt.action == PacketAction::kReply) {
      ++tx_packets;
      tx_bytes += pkt.out_len;
    } else if (pkt.action == PacketAction::kExtra) {
      for (uint16_t k = 0; k < pkt.extra_count; ++k) {
        ++tx_packets;
        tx_bytes += extra_[pkt.extra_first + k].len;
      }
    }
  }
  c.tx_packets.Add(tx_packets);
  c.tx_bytes.Add(tx_bytes);
}

void Worker::ProcessBurst(PacketRef* pkts, size_t n, const LbState& state, uint64_t now_ns,
                          const RxChecksum* ip_checksum) {
  if (state.generation() != generation_seen_) AdoptState(state);
  now_ns_ = now_ns;
  conntrack_.Sweep(now_ns);
  scratch_used_ = 0;
  extra_count_ = 0;
  for (size_t off = 0; off < n; off += kBurst) {
    ProcessChunk(pkts + off, std::min(kBurst, n - off), state, now_ns,
                 ip_checksum != nullptr ? ip_checksum + off : nullptr);
  }
  WorkerCounters& c = *counters_;
  c.evictions.Set(conntrack_.stats().evictions);
  c.conntrack_occupied.Set(conntrack_.occupied());
}

void Worker::ProcessSteered(PacketRef* pkts, size_t n, const LbState& state, uint64_t now_ns) {
  steered_burst_ = true;
  ProcessBurst(pkts, n, state, now_ns);
  steered_burst_ = false;
}

void Worker::FromKernel(PacketRef& pkt, ParsedPacket& p, const LbState& state,
                        const TunnelProbeTable* probes) {
  pkt.action = PacketAction::kFromKernel;  // unless it is a tunnel probe: out as the kernel sent it
  pkt.offset = 0;
  pkt.out_len = pkt.len;
  if (probes == nullptr) return;
  // The kernel wrote the headers (IPv4 checksum included); its next-hop MAC
  // is not ours to check.
  const Verdict v = Classify({pkt.data, pkt.len}, state.matcher(), state.local(), &p, nullptr,
                             RxChecksum::kGood);
  if (v.action != Action::kToVip || p.is_icmp_error || p.is_fragment) return;
  if (!TunnelProbeTable::Covers(p.flow.src_port)) return;
  const std::optional<IpAddress>& ours = p.flow.is_v6 ? state.local().v6 : state.local().v4;
  if (!ours || std::memcmp(p.flow.src.data(), ours->bytes.data(), ours->length()) != 0) return;
  const std::optional<TunnelProbeTable::Target> target = probes->Get(p.flow.src_port);
  if (!target) return;
  const VipState& vip = state.vips()[v.vip_index];
  // Mapped to another VIP (this address and port now belong to a VIP the
  // probe was not for): anywhere it went it would test the wrong thing.
  if (target->vip_id != vip.id) return Drop(pkt, DropReason::kTunnelProbeStale);
  // Whatever its health: the probe is what finds out.
  const uint16_t backend = vip.ResolveAny(target->backend_id);
  if (backend == VipState::kNoBackend) return Drop(pkt, DropReason::kTunnelProbeStale);
  counters_->local[Index(LocalCounter::kTunnelProbes)].Add(1);
  Send(pkt, p, vip, backend, state);
}

void Worker::ProcessFromKernel(PacketRef* pkts, size_t n, const LbState& state, uint64_t now_ns,
                               const TunnelProbeTable* probes) {
  if (state.generation() != generation_seen_) AdoptState(state);  // Send counts per backend slot
  now_ns_ = now_ns;
  scratch_used_ = 0;
  extra_count_ = 0;
  uint64_t tx_packets = 0, tx_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    PacketRef& pkt = pkts[i];
    pkt.extra_count = 0;
    FromKernel(pkt, parsed_[0], state, probes);
    if (pkt.action == PacketAction::kFromKernel || pkt.action == PacketAction::kTransmit) {
      // (a kReply goes back up to the kernel)
      ++tx_packets;
      tx_bytes += pkt.out_len;
    } else if (pkt.action == PacketAction::kExtra) {
      for (uint16_t k = 0; k < pkt.extra_count; ++k) {
        ++tx_packets;
        tx_bytes += extra_[pkt.extra_first + k].len;
      }
    }
  }
  WorkerCounters& c = *counters_;
  c.tx_packets.Add(tx_packets);
  c.tx_bytes.Add(tx_bytes);
}

CounterTotals SumCounters(const LbState& state, std::span<const Worker* const> workers) {
  CounterTotals t;
  for (const VipState& v : state.vips()) {
    CounterTotals::Vip vt;
    vt.name = v.name;
    for (const BackendState& b : v.backends) vt.backends.push_back({b.name, {}});
    t.vips.push_back(std::move(vt));
  }
  auto add = [](CounterTotals::Flow& to, const FlowCounters& from) {
    to.packets += from.packets.value();
    to.bytes += from.bytes.value();
    to.new_flows += from.new_flows.value();
  };
  for (const Worker* w : workers) {
    const WorkerCounters& c = w->counters();
    t.rx_packets += c.rx_packets.value();
    t.rx_bytes += c.rx_bytes.value();
    t.tx_packets += c.tx_packets.value();
    t.tx_bytes += c.tx_bytes.value();
    for (size_t r = 0; r < kNumDropReasons; ++r) t.drops[r] += c.drops[r].value();
    for (size_t l = 0; l < kNumLocalCounters; ++l) t.local[l] += c.local[l].value();
    t.untracked += c.untracked.value();
    t.evictions += c.evictions.value();
    t.repinned += c.repinned.value();
    t.conntrack_occupied.push_back(c.conntrack_occupied.value());
    for (size_t i = 0; i < state.vips().size(); ++i) {
      const VipState& v = state.vips()[i];
      if (c.vip_owner[v.counter_slot].load(std::memory_order_relaxed) == v.id) {
        add(t.vips[i].counters, c.vip[v.counter_slot]);
        t.vips[i].bounded_load_passed += c.vip[v.counter_slot].bounded_load_passed.value();
        t.vips[i].bounded_load_over += c.vip[v.counter_slot].bounded_load_over.value();
      }
      for (size_t j = 0; j < v.backends.size(); ++j) {
        const BackendState& b = v.backends[j];
        if (c.backend_owner[b.counter_slot].load(std::memory_order_relaxed) == b.id) {
          add(t.vips[i].backends[j].counters, c.backend[b.counter_slot]);
        }
      }
    }
  }
  return t;
}

}  // namespace maglb
