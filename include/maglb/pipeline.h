// The per-worker packet pipeline: classify -> conntrack -> table -> forward,
// on byte buffers. DPDK-free: the data plane maps its mbufs onto PacketRef.
//
// Per burst (ProcessBurst):
//  1. Classify every packet (packet.h) against the snapshot's VipMatcher.
//  2. For packets to a VIP: conntrack hash (in a pass of its own, so that it
//     does not stall on the parser's fresh stores), prefetch both buckets;
//     then prefetch the entries whose signature matches or, for a flow not
//     there, the way its insert will take.
//  3. Per packet, in order: conntrack lookup. Hit and its backend still
//     configured (any weight): refresh and forward to it. Hit but backend
//     removed, or miss: flow hash (seed of the VIP) -> LookupTable::Lookup ->
//     track (repin / insert) -> forward. An unknown non-SYN flow (LB restart,
//     ECMP shift) is treated exactly like a new one and tracked from then on.
//     ICMP errors follow the flow they are about (lookup only: no insert, no
//     refresh); with an RssOwner (SetRssOwner), one about a flow whose
//     packets RSS puts on another worker's queue is handed to that worker
//     unchanged (PacketAction::kSteer), which processes it against its own
//     conntrack (ProcessSteered). No packet moves a tracked flow
//     (conntrack.h): FIN/RST only mark it closing, and a SYN on a closing
//     flow (the tuple's next connection, or a spoof) stays on the pinned
//     backend while it is configured, draining (weight 0) included. A RST of an
//     unknown flow is forwarded by the table and tracks nothing (counted
//     untracked). The conntrack's Sweep runs once per burst (expiry over any
//     uptime).
//  4. Forward (encap.h): encapsulate or rewrite in the packet's own buffer
//     (headroom). Local traffic (ARP, ND, echo) and packets too big for the
//     tunnel with DF get their reply in place (reply.h: never to a group or
//     unspecified source, within the worker's [lb] reply_rate); IPv4 packets too big
//     without DF are fragmented and each fragment encapsulated, in the
//     worker's scratch memory (PacketAction::kExtra). A backend whose next-hop
//     MAC is not resolved yet: dropped as kNoNeighbor, never sent to a zero MAC.
//
// Packets are processed in order, each one's conntrack update visible to the
// next (two packets of one new flow in a burst get one entry).
//
// Bounded loads (bounded_load.h), for a VIP with bounded_load_epsilon set:
// a new connection (a TCP SYN without ACK, or a UDP flow) on step 3's table
// path takes the table's backend unless that backend's active flows on this
// worker are at its capacity ceil((1 + eps) * (F + 1) * w / W) (F the VIP's
// active flows on this worker, W its total weight); then the next distinct
// backend of the flow's table preference order (TablePreference: the
// backends of the slots after its own; weight-0 backends have capacity 0)
// that is below its capacity, over at most kBoundedLoadMaxSlots slots, else
// the first choice. A TCP packet of an unknown flow mid-flow (restart, ECMP
// shift, or a SYN that the conntrack could not track, itself sent to its
// first choice) takes the table's choice, which every packet of it agrees
// on. Per VIP: bounded_load_passed (placed off their first choice) and
// bounded_load_over (no backend below capacity within the walk). The counts
// are the conntrack's FlowLoads, every flow of such a VIP included: per
// worker, exact at every insert, release and repin, idle flows included
// until their way is reused (conntrack.h). So the bound holds per worker,
// overall up to the RSS split. Flows of VIPs without epsilon are neither
// counted nor walked, and packets of tracked flows (the hot path) do no work
// for it at all: pinning wins over the bound.
#ifndef MAGLB_PIPELINE_H_
#define MAGLB_PIPELINE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "maglb/conntrack.h"
#include "maglb/conntrack_config.h"
#include "maglb/encap.h"
#include "maglb/packet.h"
#include "maglb/reply.h"
#include "maglb/toeplitz.h"
#include "maglb/tunnel_probe.h"

namespace maglb {

// The snapshot a worker reads (lb_state.h), by reference only: callers that
// build one include lb_state.h themselves.
class LbState;
struct VipState;
struct BackendState;

/// What to do with a packet after ProcessBurst.
enum class PacketAction : uint8_t {
  kTransmit,  ///< send the frame at data + offset, out_len bytes (toward a backend)
  kReply,     ///< same, but it is an answer to the sender (ARP/ND/echo/ICMP too-big)
  kExtra,     ///< the original is consumed; send Worker::extra_frames()[extra_first..+extra_count)
  kToControl, ///< unchanged; for the control thread (ARP reply / neighbour advertisement to learn)
  kSteer,     ///< unchanged; an ICMP error for worker `steer_to` (it owns the flow): ProcessSteered there
  kToKernel,  ///< unchanged; up to the kernel interface (LocalAddresses::kernel)
  kToControlAndKernel,  ///< kToControl, and a copy up to the kernel interface (its ARP/ND)
  kFromKernel,  ///< unchanged; a frame the kernel interface sent: out by the front port (ProcessFromKernel)
  kDrop,      ///< free it; `reason` says why
};

/// One packet, as the worker sees it. The caller fills data/len/headroom; the
/// pipeline fills the rest. The buffer is written in place: bytes before
/// `data` (up to `headroom`) take prepended headers.
struct PacketRef {
  uint8_t* data = nullptr;  ///< the Ethernet frame (in)
  uint16_t len = 0;         ///< frame length (in)
  uint16_t headroom = 0;    ///< writable bytes before `data` (in)
  uint16_t tailroom = 0;    ///< writable bytes after data + len (in; replies may grow)
  PacketAction action = PacketAction::kDrop;  ///< out
  union {  // by action, as below
    DropReason reason = DropReason::kTooShort;  ///< out, kDrop only
    /// out, kTransmit only: kTxOffload* bits (encap.h), what the NIC must
    /// do to the frame (Worker::SetTxOuterIpv4Checksum); 0: complete.
    uint8_t tx_offload;
  };
  int16_t offset = 0;       ///< out: the frame to send starts at data + offset
  uint16_t out_len = 0;     ///< out: its length
  union {  // one field, so that PacketRef stays 24 bytes (32 cost ~5% per packet)
    uint16_t extra_first = 0; ///< out, kExtra only
    uint16_t steer_to;        ///< out, kSteer only: the owning worker's index
  };
  uint16_t extra_count = 0; ///< out, kExtra only
};
static_assert(sizeof(PacketRef) == 24);

/// A frame the pipeline built in the worker's scratch memory (fragments of an
/// IPv4 datagram too big for the tunnel). Valid until the next ProcessBurst.
struct ExtraFrame {
  const uint8_t* data;
  uint16_t len;
  uint8_t tx_offload;  ///< kTxOffload* bits, as PacketRef::tx_offload
};

/// One relaxed 64-bit counter: written by one worker only, readable from any
/// thread without tearing. Increments compile to a plain load/add/store.
class Counter {
 public:
  void Add(uint64_t v) { v_.store(v_.load(std::memory_order_relaxed) + v, std::memory_order_relaxed); }
  void Reset() { v_.store(0, std::memory_order_relaxed); }
  void Set(uint64_t v) { v_.store(v, std::memory_order_relaxed); }
  uint64_t value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

/// Counters of one VIP or one backend on one worker.
struct FlowCounters {
  Counter packets, bytes, new_flows;
};

/// A VIP's counters: its flows, and what bounded loads did to its new flows.
struct VipCounters : FlowCounters {
  Counter bounded_load_passed;  ///< new flows placed off their first choice
  Counter bounded_load_over;    ///< new flows that found no backend below capacity
};

/// Local traffic answered by the LB itself.
#define MAGLB_FOREACH_LOCAL_COUNTER(X) \
  X(kArpReplies, "arp_replies")        \
  X(kNdReplies, "nd_replies")          \
  X(kEchoReplies, "echo_replies")      \
  X(kIcmpTooBig, "icmp_too_big_sent")  \
  X(kFragmentsSent, "fragments_sent")  \
  X(kIcmpErrorsRouted, "icmp_errors_routed") \
  X(kIcmpErrorsSteered, "icmp_errors_steered")  /* handed to the flow's worker */ \
  X(kTunnelProbes, "tunnel_probes_sent")  /* kernel frames of tunnel health probes, encapsulated */

enum class LocalCounter : uint8_t {
#define MAGLB_LOCAL_ENUM(name, str) name,
  MAGLB_FOREACH_LOCAL_COUNTER(MAGLB_LOCAL_ENUM)
#undef MAGLB_LOCAL_ENUM
};
inline constexpr size_t kNumLocalCounters = 0
#define MAGLB_LOCAL_COUNT(name, str) +1
    MAGLB_FOREACH_LOCAL_COUNTER(MAGLB_LOCAL_COUNT)
#undef MAGLB_LOCAL_COUNT
    ;
std::string_view LocalCounterName(LocalCounter c);

/// The counters of one worker, cache-aligned, written only by that worker.
/// VIP and backend counters are indexed by counter slot (lb_state.h); a slot
/// whose owner id changed is zeroed by the worker when it first sees the new
/// snapshot, so a slot reused by another backend starts from zero.
struct alignas(64) WorkerCounters {
  WorkerCounters();
  Counter rx_packets, rx_bytes;
  Counter tx_packets, tx_bytes;
  Counter drops[kNumDropReasons];
  Counter local[kNumLocalCounters];
  Counter untracked;       ///< new flows forwarded without a conntrack entry
  Counter evictions;       ///< live flows evicted from a full conntrack
  Counter repinned;        ///< tracked flows moved because their backend was removed
  Counter conntrack_occupied;  ///< ways in use, refreshed once per burst
  Counter generation;      ///< snapshot generation the worker last used
  std::unique_ptr<VipCounters[]> vip;             // kMaxVips
  std::unique_ptr<FlowCounters[]> backend;        // kMaxBackendsTotal
  std::unique_ptr<std::atomic<uint32_t>[]> vip_owner;      // id owning each slot
  std::unique_ptr<std::atomic<uint32_t>[]> backend_owner;  // id owning each slot
};

/// Scratch memory for frames the pipeline creates (fragments).
inline constexpr size_t kDefaultScratchBytes = 256 * 1024;

/// One worker: its conntrack, its counters. Not thread-safe: one per core.
class Worker {
 public:
  /// The conntrack's hash key is random, or `conntrack_key` (the daemon
  /// passes one from getrandom(2); tests pin one to be deterministic).
  explicit Worker(const ConntrackConfig& conntrack, size_t scratch_bytes = kDefaultScratchBytes);
  Worker(const ConntrackConfig& conntrack, const ConntrackKey& conntrack_key,
         size_t scratch_bytes = kDefaultScratchBytes);
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  /// Processes `n` packets (any n; internally in chunks of kBurst). `now_ns` is
  /// a monotonic clock in nanoseconds (the caller's, e.g. TSC-derived).
  /// `ip_checksum`, if given, holds the NIC's verdict on each packet's IPv4
  /// header checksum (packet.h, RxChecksum); null: all unknown, verified in
  /// software. An array beside PacketRef rather than a field in it: growing
  /// PacketRef past 24 bytes costs ~5 ns a packet where the caller fills it
  /// (measured in pipeline_bench).
  void ProcessBurst(PacketRef* pkts, size_t n, const LbState& state, uint64_t now_ns,
                    const RxChecksum* ip_checksum = nullptr);

  /// One packet (for the fuzz harness and tests); same as a burst of one.
  void ProcessPacket(PacketRef& pkt, const LbState& state, uint64_t now_ns,
                     RxChecksum ip_checksum = RxChecksum::kUnknown) {
    ProcessBurst(&pkt, 1, state, now_ns, &ip_checksum);
  }

  /// Like ProcessBurst, for packets another worker handed over (kSteer):
  /// not counted as received again, never handed on again.
  void ProcessSteered(PacketRef* pkts, size_t n, const LbState& state, uint64_t now_ns);

  /// Frames the kernel interface sent (the exception path: what the host's
  /// stack says on the data port). Each leaves unchanged (kFromKernel: out by
  /// the front port), except the frames of tunnel health probes
  /// (tunnel_probe.h): TCP or UDP, to a VIP, from one of our own addresses,
  /// from a port `probes` maps to that VIP. Those go to the mapped backend
  /// like the VIP's data traffic (Send: kTransmit, encapsulated or L2-rewritten; kReply
  /// if too big for the tunnel: that ICMP error goes back up to the kernel),
  /// without conntrack; a mapping whose backend, or VIP, is no longer
  /// configured drops the frame (kTunnelProbeStale), since anywhere else it
  /// would test another backend. Not counted as received (the data plane
  /// counts frames from the kernel); what leaves counts as sent. `probes`
  /// null: no probes, everything leaves unchanged.
  void ProcessFromKernel(PacketRef* pkts, size_t n, const LbState& state, uint64_t now_ns,
                         const TunnelProbeTable* probes);

  /// With several workers behind a port's RSS: `owner` says which worker's
  /// queue a flow's packets arrive on, `self` is this worker's index. ICMP
  /// errors about another worker's flow then leave ProcessBurst as kSteer.
  /// Null (the default): every packet is processed here. `owner` must
  /// outlive the worker's use of it.
  void SetRssOwner(const RssOwner* owner, uint32_t self) {
    rss_owner_ = owner;
    self_ = self;
  }
  /// Whether the port that frames toward backends leave by computes their
  /// outer IPv4 header checksum (a NIC offload; dataplane/offloads.h). Then
  /// frames that get an outer IPv4 header (GRE/IPIP to an IPv4 backend,
  /// fragments included) leave it 0 and are marked kTxOffloadOuterIpv4Checksum
  /// in PacketRef::tx_offload (kTransmit) or ExtraFrame::tx_offload; the
  /// bytes are otherwise those of the software path. IPv6 outer headers, L2
  /// DSR and replies (kReply, and extra frames that are replies) are never
  /// marked. Default: off, every checksum computed here.
  void SetTxOuterIpv4Checksum(bool by_nic) { tx_outer_ipv4_checksum_ = by_nic; }
  /// The health probes' ports (tunnel_probe.h): their replies reach the
  /// kernel on a budget of their own. Must outlive the worker's use of it.
  void SetProbeTable(const TunnelProbeTable* probes) { probes_ = probes; }

  /// Frames built during the last ProcessBurst (PacketAction::kExtra).
  std::span<const ExtraFrame> extra_frames() const { return {extra_.data(), extra_count_}; }

  const WorkerCounters& counters() const { return *counters_; }
  const Conntrack& conntrack() const { return conntrack_; }
  Conntrack& conntrack() { return conntrack_; }

  static constexpr size_t kBurst = 32;

 private:
  void AdoptState(const LbState& state);
  void ProcessChunk(PacketRef* pkts, size_t n, const LbState& state, uint64_t now_ns,
                    const RxChecksum* ip_checksum);
  // Inlined into ProcessChunk (its only caller): the call's register saves
  // and argument moves cost every VIP packet ~20 instructions.
  [[gnu::always_inline]] inline void ToVip(PacketRef& pkt, const ParsedPacket& p, const Conntrack::Probe& probe,
                                           const VipState& vip, const LbState& state, uint64_t now_ns);
  void Local(PacketRef& pkt, const ParsedPacket& p, Action action, const LbState& state);
  bool KernelMayTake(TokenBucket& bucket, const LbState& state);
  bool IsProbeReply(const ParsedPacket& p) const;
  void ToKernel(PacketRef& pkt, const ParsedPacket& p, const LbState& state);
  void ToControl(PacketRef& pkt, const LbState& state);
  void FromKernel(PacketRef& pkt, ParsedPacket& p, const LbState& state, const TunnelProbeTable* probes);
  bool MayReply(PacketRef& pkt, const ParsedPacket& p, TokenBucket& bucket, DropReason over_limit,
                const LbState& state);
  void Send(PacketRef& pkt, const ParsedPacket& p, const VipState& vip, uint16_t backend,
            const LbState& state);
  // Send's body, inlined where a pinned flow's packet is sent (ToVip).
  [[gnu::always_inline]] inline void SendInline(PacketRef& pkt, const ParsedPacket& p, const VipState& vip,
                                                uint16_t backend, const LbState& state);
  [[gnu::noinline]] void SendGeneral(PacketRef& pkt, const ParsedPacket& p, const VipState& vip,
                                     const BackendState& b, const LbState& state);
  [[gnu::noinline]] void SendWithFlowBits(PacketRef& pkt, const ParsedPacket& p, const VipState& vip,
                                          const BackendState& b, const LbState& state);
  bool SendFast(PacketRef& pkt, const ParsedPacket& p, const BackendState& b, uint64_t path_hash);
  void Transmit(PacketRef& pkt, const BackendState& b, const EncapResult& r);
  [[gnu::noinline]] void SendSlow(PacketRef& pkt, const ParsedPacket& p, const VipState& vip,
                                  const BackendState& b, const EncapResult& r, uint64_t path_hash,
                                  const LbState& state);
  [[gnu::noinline]] void NewFlow(PacketRef& pkt, const ParsedPacket& p,
                                 const Conntrack::Probe& probe, ConntrackEntry* e,
                                 bool backend_unresolved, const VipState& vip,
                                 const LbState& state, uint64_t now_ns);
  enum class BoundedLoadOutcome : uint8_t { kFirstChoice, kPassed, kOver };
  uint16_t BoundedLoadChoice(const VipState& vip, uint64_t flow_hash, uint16_t first,
                             BoundedLoadOutcome* outcome);
  [[gnu::noinline]] bool SteerToOwner(PacketRef& pkt, const ParsedPacket& p);
  void Drop(PacketRef& pkt, DropReason reason);
  uint8_t* ScratchAlloc(size_t bytes);
  bool AddExtra(const uint8_t* data, size_t len, uint8_t tx_offload = 0);
  void ReplyInPlace(PacketRef& pkt, size_t len, LocalCounter counted_as);
  void ReplyFromScratch(PacketRef& pkt, const uint8_t* frame, size_t len);

  Conntrack conntrack_;
  std::unique_ptr<WorkerCounters> counters_;
  uint64_t generation_seen_ = 0;
  std::vector<uint8_t> scratch_;
  size_t scratch_used_ = 0;
  std::vector<ExtraFrame> extra_;
  size_t extra_count_ = 0;
  // What the worker generates on its own ([lb] reply_rate): echo replies and
  // ICMP errors, ARP/ND replies. now_ns_: the current burst's clock.
  TokenBucket icmp_bucket_;
  TokenBucket neighbor_bucket_;
  uint64_t now_ns_ = 0;
  // Per-chunk working state, kept here so that nothing is initialised twice.
  // Cache-line aligned: how these arrays fall on lines measurably changes the
  // cost of a packet (+10% for existing flows when the members before them
  // grew by 24 bytes), so it must not depend on those members.
  alignas(64) ParsedPacket parsed_[kBurst];
  alignas(64) Verdict verdict_[kBurst];
  alignas(64) Conntrack::Probe probe_[kBurst];
  bool chunk_inserted_ = false;  // an Insert/Repin ran in this chunk's stage 3
  bool steered_burst_ = false;   // ProcessSteered: handed over, counted by the sender
  const RssOwner* rss_owner_ = nullptr;
  uint32_t self_ = 0;
  // Frames up to the kernel interface ([kernel] rate, burst): each costs the
  // worker a write(2) and the kernel's receive path, so a flood to the LB's
  // address must not take more than this. Last, so that the members above
  // lie as they did before it (the hot path's layout).
  TokenBucket kernel_bucket_;
  // Replies to health probes, and the kernel's copies of ARP/ND answers: the
  // same rate, apart (a flood to the LB's address must not starve checks).
  TokenBucket probe_bucket_;
  TokenBucket neighbor_copy_bucket_;
  const TunnelProbeTable* probes_ = nullptr;
  bool tx_outer_ipv4_checksum_ = false;  // SetTxOuterIpv4Checksum
};

/// Counters summed over workers, by name, for one snapshot: what telemetry
/// and `maglbctl stats` show. Reads relaxed counters of running workers.
struct CounterTotals {
  struct Flow {
    uint64_t packets = 0, bytes = 0, new_flows = 0;
  };
  struct Backend {
    std::string name;
    Flow counters;
  };
  struct Vip {
    std::string name;
    Flow counters;
    uint64_t bounded_load_passed = 0, bounded_load_over = 0;
    std::vector<Backend> backends;  // VipState::backends order
  };
  uint64_t rx_packets = 0, rx_bytes = 0, tx_packets = 0, tx_bytes = 0;
  uint64_t drops[kNumDropReasons] = {};
  uint64_t local[kNumLocalCounters] = {};
  uint64_t untracked = 0, evictions = 0, repinned = 0;
  std::vector<uint64_t> conntrack_occupied;  // per worker
  std::vector<Vip> vips;                     // LbState::vips order
};

/// Sums the workers' counters for the VIPs and backends of `state`. A worker
/// that has not adopted `state` yet contributes only to slots whose owner
/// matches, so a reused slot never shows another backend's counts.
CounterTotals SumCounters(const LbState& state, std::span<const Worker* const> workers);

}  // namespace maglb

#endif  // MAGLB_PIPELINE_H_
