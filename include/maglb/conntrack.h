// Per-worker connection tracking: which backend each live flow is pinned to.
//
// One table per worker, never shared, never locked. Fixed capacity, allocated
// once at construction; nothing on the packet path allocates or calls the
// system: the caller passes the time in (monotonic nanoseconds).
//
// Layout (as VPP's sticky table, extended to full keys and two choices):
// buckets of 8 ways. A bucket's 64-byte header holds, per way, a 24-bit
// signature plus the TCP state (0 = empty) and proven/reset flags, and the
// expiry tick; the 8 entries
// (full FlowKey, backend id, backend hint) live in a parallel array, one
// 64-byte line each. A flow may sit in either of two buckets (both derived from
// ConntrackHash; an insert takes the emptier one), which keeps premature
// evictions negligible up to ~80% occupancy of the ways. A lookup reads the
// two headers, compares signatures, and reads at most the matching entry
// lines. Expiry is lazy: an entry is live until its expiry tick, and a
// dead way is simply reused.
//
// Proven flows. A packet alone proves nothing: anyone can send a bare ACK,
// a UDP datagram, a FIN or a SYN with any source. An entry starts unproven
// and becomes proven when its flow shows it is real:
//  - created by a SYN: when the client's handshake-completing segment (the
//    first non-SYN, non-FIN/RST one) arrives;
//  - created mid-flow (a non-SYN first packet after an LB restart or an
//    ECMP change) or UDP: when a packet of it arrives at least
//    kProofDelayNs (1 s) after its first; a real connection picked up
//    mid-flow is proven within a second (until then it may be evicted; its
//    next packet is then placed by the table, as any untracked flow's).
// The proof is kept for the entry's life (closing, a new SYN on its tuple
// and repins included). HashOf is keyed with a per-start secret, so which
// flows share buckets cannot be chosen from outside either.
//
// Proof is cheap for a spoofer (a SYN then an ACK), so it buys protection
// only while it is paid for: a proven entry cannot be evicted while it was
// seen within the last `proven_protect_s` (T, default 60 s), in any state. To
// keep every way of a table protected, a spoofer must send one packet per
// way every T: ways / T, ~22k packets/s per worker at the default capacity
// (1.31M ways) and T = 60 s, rather than two packets per way an hour. The
// price: during such a flood, a legitimate flow idle for longer than T may
// be evicted; its next packet is then placed by the table, which moves it if
// a reload has moved its slot, or, on a VIP with bounded loads (which place
// only new flows), if the bound had placed it off the table's choice.
//
// When both buckets are full, a new flow (always unproven) replaces, in this
// order: a proven closing or re-opened entry past its protection (a
// connection that ended more than T ago); the unproven half-open or closing
// entry with the nearest deadline; the unproven established or UDP one; a
// proven established or UDP one idle for longer than T (nearest deadline
// first within each class). A flow that finds no such way is not tracked
// (Insert returns nullptr, counted as untracked): the caller still forwards
// it by the table, and its next packet tries again. A RST never inserts
// (nothing to pin after a reset).
//
// A FIN or RST does not shorten a proven entry's life (a spoofed one would
// otherwise make an idle SSH session expire after 10 s) nor its protection:
// it is marked closing and keeps the established timeout, and a SYN on it
// keeps it too. Once past T such an entry is the first victim, so real
// closes free their ways under pressure (until then, or until evicted, they
// count as occupied). Unproven entries take the closing and half-open
// timeouts. The deadline is the only timestamp: a proven entry's last packet
// is its deadline minus its state's timeout.
//
// Long uptimes. Deadlines are 32-bit ticks (~16.8 ms) compared by signed
// difference, which is right only within 2^31 ticks (~1.1 years) of now: an
// expired entry left alone longer would come back to life. Sweep (once per
// burst: a compare on the hot path) revisits every bucket at least every
// kSweepPeriodTicks (~26 days) and re-stamps dead ways with the current
// tick, so no dead way is ever older than ~130 days; after a gap of more
// than kMaxDeadlineTicks between calls every entry is known dead and is
// re-stamped at once.
#ifndef MAGLB_CONNTRACK_H_
#define MAGLB_CONNTRACK_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__SSE4_1__)
#include <smmintrin.h>
#endif

#include "maglb/bounded_load.h"
#include "maglb/conntrack_config.h"
#include "maglb/flow.h"
#include "maglb/flow_hash.h"
#include "maglb/protocol_numbers.h"

namespace maglb {

namespace conntrack_internal {
// A prefetch the compiler must keep: GCC 12 deletes a loop whose only effect
// is __builtin_prefetch (it did so for the pipeline's stage 2, silently
// doubling the cost of a packet), but never a volatile asm.
inline void PrefetchLine(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 0, 3);
#endif
}

inline constexpr uint32_t kStateMask = 0xFF;   // the whole low byte (0 = empty)
inline constexpr uint32_t kStateBits = 0x07;   // FlowState
inline constexpr uint32_t kResetBit = 0x40;    // closing because of a RST
inline constexpr uint32_t kProvenBit = 0x80;   // see "Proven flows"
inline constexpr uint8_t kEmpty = 0;
// Signed distance in ticks from now to a deadline, modulo 2^32: positive
// while the deadline is ahead. Ticks wrap after ~2.3 years of uptime; the
// signed difference keeps comparisons right across the wrap, for deadlines
// within 2^31 ticks of now (Sweep keeps dead ones there).
inline int32_t Remaining(uint32_t deadline, uint32_t now_tick) {
  return static_cast<int32_t>(deadline - now_tick);
}
}  // namespace conntrack_internal

/// What the conntrack remembers of a flow's TCP handshake. It sees only the
/// client-to-VIP direction (backends answer directly), so the states are the
/// client's: kSynSent until the client's first non-SYN segment, kEstablished,
/// kClosing after a FIN or RST from the client. kUdp for UDP (and any other
/// tracked protocol). 0 is reserved for an empty way.
enum class FlowState : uint8_t { kSynSent = 1, kEstablished = 2, kClosing = 3, kUdp = 4 };

// TCP flag bits (kTcpFin, kTcpSyn, kTcpRst, kTcpAck): protocol_numbers.h.

/// A tracked flow. Stable in memory until the next Insert or Remove.
struct alignas(64) ConntrackEntry {
  FlowKey key;
  /// Stable backend id (BackendState::id in lb_state.h): survives reloads,
  /// never reused for another backend.
  uint32_t backend_id = 0;
  /// Index of that backend in its VipState::backends when it was last
  /// resolved; a hint only, verified against the id before it is trusted.
  uint16_t backend_hint = 0;
  uint16_t reserved = 0;
  uint64_t created_ns = 0;
  /// FlowLoads slot (the backend's counter slot) this flow is counted in, or
  /// kUncountedFlow (flows of VIPs without bounded loads).
  uint32_t load_slot = kUncountedFlow;
};
static_assert(sizeof(ConntrackEntry) == 64);

/// Idle timeouts in nanoseconds, from ConntrackConfig's seconds.
struct ConntrackTimeouts {
  uint64_t tcp_established_ns;
  uint64_t tcp_closing_ns;
  uint64_t tcp_syn_ns;
  uint64_t udp_ns;
  static ConntrackTimeouts FromConfig(const ConntrackConfig& config);
};

/// Counters of one table; plain fields, read them from the owning worker or
/// accept a torn/approximate view from another thread via Worker's snapshot.
struct ConntrackStats {
  uint64_t inserts = 0;
  uint64_t evictions = 0;      // live flows replaced because their buckets were full
  uint64_t untracked = 0;      // inserts refused (both buckets full of protected proven flows)
  uint64_t expired_reused = 0; // dead ways reclaimed by an insert
};

class Conntrack {
 public:
  /// Allocates 8-way buckets for config.capacity * 1.25 ways: at the
  /// configured number of flows, fewer than 0.02% are evicted early because
  /// both of their buckets happened to be full.
  /// The hash key is random (RandomConntrackKey), or `key` when given
  /// (tests and benchmarks pin one to be deterministic).
  explicit Conntrack(const ConntrackConfig& config);
  Conntrack(const ConntrackConfig& config, const ConntrackKey& key);
  /// As above, with FlowLoads for `load_slots` backends and `vip_slots` VIPs
  /// (kMaxBackendsTotal and kMaxVips for a worker).
  Conntrack(const ConntrackConfig& config, uint32_t load_slots, uint32_t vip_slots);
  Conntrack(const ConntrackConfig& config, const ConntrackKey& key, uint32_t load_slots,
            uint32_t vip_slots);
  ~Conntrack();
  Conntrack(const Conntrack&) = delete;
  Conntrack& operator=(const Conntrack&) = delete;

  /// The hash that Lookup and Insert take for `key`: ConntrackHash with
  /// this table's secret.
  uint64_t HashOf(const FlowKey& key) const { return ConntrackHash(key, key_); }

  /// Keeps expiry right over any uptime (see "Long uptimes"). Call with
  /// each new now_ns before using it for lookups or inserts (once per
  /// burst); a compare unless a bucket is due.
  void Sweep(uint64_t now_ns) {
    if (now_ns >= next_sweep_ns_ || now_ns - last_sweep_call_ns_ > kMaxDeadlineNs) [[unlikely]] {
      SweepSlow(now_ns);
    }
    last_sweep_call_ns_ = now_ns;
  }

  /// Number of ways (~1.25 x the configured capacity).
  size_t capacity() const { return num_buckets_ * kWays; }
  /// The memory one table of `capacity` flows allocates (ordinary memory,
  /// transparent huge pages asked for; not DPDK's hugepages): its bucket
  /// headers and its entries, each rounded up to 2 MiB. ~90 bytes a flow.
  static size_t MemoryBytes(uint32_t capacity) {
    const uint64_t buckets = BucketsFor(capacity);
    return AllocationBytes(buckets * sizeof(BucketHeader)) +
           AllocationBytes(buckets * kWays * sizeof(ConntrackEntry));
  }
  /// What this table allocated (MemoryBytes of its capacity).
  size_t memory_bytes() const { return headers_bytes_ + entries_bytes_; }
  const ConntrackTimeouts& timeouts() const { return timeouts_; }
  const ConntrackStats& stats() const { return stats_; }
  /// Active flows per backend, counted for inserts that passed a load_slot.
  const FlowLoads& loads() const { return loads_; }
  FlowLoads& loads() { return loads_; }

  /// Ways holding a flow that has not been reclaimed; includes flows that
  /// expired but whose way no insert has reused yet. O(1).
  size_t occupied() const { return occupied_; }
  /// Live flows at `now_ns`. O(capacity): tests and diagnostics only.
  size_t CountLive(uint64_t now_ns) const;
  /// Occupied ways (live or expired, not yet reused) counted in `load_slot`
  /// for `backend_id`: what loads().active(load_slot) must equal while that
  /// slot is the backend's. O(capacity): tests and diagnostics only.
  size_t CountCounted(uint32_t load_slot, uint32_t backend_id) const;

  /// Where a flow's entry can be: its two buckets and its signature, computed
  /// once per packet from HashOf.
  /// Where Insert puts a new flow, with the way's header as it was when chosen
  /// (a cached choice is used only if the way is unchanged since).
  struct Slot {
    enum Kind : uint8_t { kNone, kEmptyWay, kDead, kEvict };
    uint64_t index = 0;  // into entries_; meaningless for kNone
    Kind kind = kNone;
    uint32_t tag = 0, expires = 0;
  };
  struct Probe {
    uint32_t primary;
    uint32_t secondary;
    uint32_t sig;
    // Signature matches, from PrefetchEntries: bit w the primary's way w,
    // bit 8 + w the secondary's.
    uint16_t matches = 0;
    Slot slot{};  // insert slot, from PrefetchInsertSlot
  };
  Probe ProbeOf(uint64_t hash) const {
    const uint32_t p = Primary(hash);
    const uint32_t mixed = static_cast<uint32_t>(hash >> 16) * 0x9E3779B1u;
    uint32_t s = static_cast<uint32_t>((uint64_t{mixed} * num_buckets_) >> 32);
    if (s == p) s = (p + 1 == num_buckets_) ? 0 : p + 1;  // two distinct buckets
    return {p, s, SigOf(hash)};
  }

  /// Stage 1 of a burst: prefetch both bucket headers of a flow.
  void PrefetchBuckets(const Probe& probe) const {
    conntrack_internal::PrefetchLine(&headers_[probe.primary]);
    conntrack_internal::PrefetchLine(&headers_[probe.secondary]);
  }
  void PrefetchBuckets(uint64_t hash) const { PrefetchBuckets(ProbeOf(hash)); }

  /// Stage 2 of a burst (after PrefetchBuckets): prefetch the entry lines whose
  /// signature matches, so that stage 3's Lookup finds everything in cache.
  /// Returns false when no way carries the flow's signature: the flow is new
  /// (see PrefetchInsertSlot).
  /// Records the matches in `probe` for LookupPrefetched.
  bool PrefetchEntries(Probe& probe) const {
    const uint32_t m = MatchMask(headers_[probe.primary], headers_[probe.secondary], probe.sig);
    probe.matches = static_cast<uint16_t>(m);
    // Nearly always one match at most (24-bit signatures).
    for (uint32_t rest = m; rest != 0; rest &= rest - 1) {
      const auto i = static_cast<uint32_t>(std::countr_zero(rest));
      conntrack_internal::PrefetchLine(
          &entries_[size_t{i < kWays ? probe.primary : probe.secondary} * kWays + i % kWays]);
    }
    return m != 0;
  }
  bool PrefetchEntries(uint64_t hash) const {
    Probe probe = ProbeOf(hash);
    return PrefetchEntries(probe);
  }
  /// For a flow that PrefetchEntries found absent: prefetches the entry line
  /// that Insert will most likely write (the choice is made again there), so
  /// that a burst of new flows does not stall on its stores.
  void PrefetchInsertSlot(Probe& probe, uint8_t protocol, uint8_t tcp_flags, uint64_t now_ns) const;

  /// The live entry of `key` (hash = HashOf(key)) or nullptr. Does not
  /// refresh it: call Touch for packets that belong to it.
  ConntrackEntry* Lookup(const FlowKey& key, const Probe& probe, uint64_t now_ns) {
    return FindMatching(probe, MatchMask(headers_[probe.primary], headers_[probe.secondary], probe.sig),
                        key, TickOf(now_ns));
  }
  ConntrackEntry* Lookup(const FlowKey& key, uint64_t hash, uint64_t now_ns) {
    return Lookup(key, ProbeOf(hash), now_ns);
  }
  /// Lookup with the matches PrefetchEntries recorded in `probe`: valid while
  /// no Insert or Repin ran since (Touch keeps them valid).
  ConntrackEntry* LookupPrefetched(const FlowKey& key, const Probe& probe, uint64_t now_ns) {
    return FindMatching(probe, probe.matches, key, TickOf(now_ns));
  }

  /// Lookups for a burst: prefetches every bucket, then every matching entry,
  /// then looks each key up. out[i] is what Lookup(*keys[i], hashes[i], now)
  /// returns; the pointers stay valid until the next Insert or Remove.
  void LookupBulk(const FlowKey* const* keys, const uint64_t* hashes, size_t n,
                  uint64_t now_ns, ConntrackEntry** out);

  /// The state of a live entry.
  FlowState StateOf(const ConntrackEntry* e) const {
    const size_t index = static_cast<size_t>(e - entries_);
    return static_cast<FlowState>(headers_[index / kWays].tag[index % kWays] &
                                  conntrack_internal::kStateBits);
  }
  /// Whether a live entry is proven (file comment, "Proven flows").
  bool IsProven(const ConntrackEntry* e) const {
    const size_t index = static_cast<size_t>(e - entries_);
    return (headers_[index / kWays].tag[index % kWays] & conntrack_internal::kProvenBit) != 0;
  }

  /// How long an unproven mid-flow or UDP entry must live (a packet at
  /// least this long after its first) to become proven.
  static constexpr uint64_t kProofDelayNs = 1'000'000'000ULL;

  /// Refreshes a live entry for one more packet of its flow: applies the TCP
  /// flags (`tcp_flags` is ignored for UDP) and extends its idle deadline.
  /// None of it moves the flow: the backend stays pinned.
  ///  - half-open: the first non-SYN segment completes the handshake
  ///    (established, proven); FIN or RST → closing.
  ///  - established: FIN or RST → closing (a shorter timeout if unproven,
  ///    a shorter protection if proven: file comment).
  ///  - closing: a SYN starts the tuple's next connection (half-open, still
  ///    pinned: the pipeline never re-pins it, a spoof looks the same; a
  ///    proven entry keeps the established timeout). A later non-SYN,
  ///    non-RST packet restores established when it shows that the FIN/RST
  ///    was not the client's: after a RST any such packet (a client sends
  ///    nothing after its RST), after a FIN one that carries data
  ///    (`carries_data()`, asked only then; the pure ACKs of a half-closed
  ///    download are normal and only extend the closing timeout).
  void Touch(ConntrackEntry* e, uint8_t tcp_flags, uint64_t now_ns, bool payload = false) {
    Touch(e, tcp_flags, now_ns, [payload] { return payload; });
  }
  template <typename CarriesData>
  void Touch(ConntrackEntry* e, uint8_t tcp_flags, uint64_t now_ns, CarriesData&& carries_data) {
    using namespace conntrack_internal;  // NOLINT: the tag bits
    const auto index = static_cast<uint32_t>(e - entries_);
    const uint32_t old = headers_[index / kWays].tag[index % kWays] & kStateMask;
    // Most packets: a proven established or UDP flow's, without SYN, FIN or
    // RST. Nothing but the deadline changes (what the rules below give too).
    if ((old == (kProvenBit | static_cast<uint32_t>(FlowState::kEstablished)) ||
         old == (kProvenBit | static_cast<uint32_t>(FlowState::kUdp))) &&
        (tcp_flags & (kTcpSyn | kTcpFin | kTcpRst)) == 0) [[likely]] {
      uint32_t& expires = headers_[index / kWays].expires[index % kWays];
      const uint32_t deadline = TickOf(now_ns) + deadline_ticks_[ClassOf(old)];
      if (expires != deadline) expires = deadline;  // as SetState: keep the line clean
      return;
    }
    uint32_t flags = old & (kResetBit | kProvenBit);
    auto s = static_cast<FlowState>(old & kStateBits);
    const bool rst = tcp_flags & kTcpRst, fin = tcp_flags & kTcpFin, syn = tcp_flags & kTcpSyn;
    if (s == FlowState::kSynSent) {
      if (rst | fin) {
        s = FlowState::kClosing;
      } else if (!syn) {
        s = FlowState::kEstablished;  // the client's ACK completes its handshake
        flags |= kProvenBit;
      }
    } else if (s == FlowState::kEstablished) {
      if (rst | fin) s = FlowState::kClosing;
    } else if (s == FlowState::kClosing) {
      if (syn && !rst) {
        s = FlowState::kSynSent;
        flags &= ~kResetBit;
      } else if (!rst && !fin && ((flags & kResetBit) || carries_data())) {
        s = FlowState::kEstablished;
        flags &= ~kResetBit;
      }
    }
    if (rst && s == FlowState::kClosing) flags |= kResetBit;
    // Mid-flow and UDP entries prove themselves by living (file comment).
    if (!(flags & kProvenBit) && s != FlowState::kSynSent && !rst &&
        now_ns - e->created_ns >= kProofDelayNs) [[unlikely]] {
      flags |= kProvenBit;
    }
    SetState(index, s, flags, now_ns);
  }

  /// Tracks a new flow that Lookup did not find. `protocol` is kIpProtoTcp
  /// (flags decide the initial state: a SYN without ACK starts half-open,
  /// anything else — a mid-flow pickup after a restart or an ECMP shift —
  /// starts established, or closing for FIN/RST) or anything else (kUdp).
  /// Returns the new entry, or nullptr if the flow could not be tracked (see
  /// the file comment); the caller forwards the packet either way.
  /// `load_slot`: kUncountedFlow, or the FlowLoads slot (adopted for
  /// `backend_id`) that counts this flow while it holds its way. Whatever
  /// the new flow, a counted flow whose way it takes is released.
  /// As below, taking the slot PrefetchInsertSlot chose when its way is
  /// unchanged since (else choosing again): one choice per new flow.
  ConntrackEntry* Insert(const FlowKey& key, const Probe& probe, uint8_t tcp_flags,
                         uint32_t backend_id, uint16_t backend_hint, uint64_t now_ns,
                         uint32_t load_slot = kUncountedFlow);
  ConntrackEntry* Insert(const FlowKey& key, uint64_t hash, uint8_t tcp_flags,
                         uint32_t backend_id, uint16_t backend_hint, uint64_t now_ns,
                         uint32_t load_slot = kUncountedFlow);

  /// Repins an existing entry to another backend (its backend was removed)
  /// and refreshes it as Touch does; its count moves from its old load slot
  /// to `load_slot`.
  void Repin(ConntrackEntry* e, uint32_t backend_id, uint16_t backend_hint, uint8_t tcp_flags,
             uint64_t now_ns, uint32_t load_slot = kUncountedFlow);

  /// Forgets an entry (and releases its count).
  void Remove(ConntrackEntry* e);

  static constexpr int kWays = 8;
  static constexpr int kTickShift = 24;  // ~16.8 ms ticks; 2^31 ticks ~ 1.1 years
  static constexpr uint64_t kMaxDeadlineTicks = uint64_t{1} << 29;  // ~104 days
  static constexpr uint64_t kMaxDeadlineNs = kMaxDeadlineTicks << kTickShift;
  /// Every bucket is swept at least this often (plus one gap between Sweep
  /// calls, < kMaxDeadlineTicks): well inside the 2^31 ticks that the signed
  /// comparison of deadlines is right for.
  static constexpr uint64_t kSweepPeriodTicks = uint64_t{1} << 27;  // ~26 days

 private:
  // tests/unit/conntrack_test.cc: SelectSlot on chosen bucket contents,
  // against a model of the file comment's order.
  friend struct ConntrackTestPeer;
  struct alignas(64) BucketHeader {
    uint32_t tag[kWays];      // sig << 8 | FlowState (0 = empty)
    uint32_t expires[kWays];  // tick (now_ns >> kTickShift, wrapping) of the idle deadline
  };
  static_assert(sizeof(BucketHeader) == 64);
  static_assert(kSweepPeriodTicks + 2 * kMaxDeadlineTicks < (uint64_t{1} << 31));

  // 25% more ways than flows: greedy two-choice fills 80% of the ways with
  // ~0.02% premature evictions (100%: ~4%), so `capacity` flows really fit.
  static uint64_t BucketsFor(uint32_t capacity) {
    const uint64_t want = std::max<uint64_t>(uint64_t{capacity} * 5 / 4, 2 * kWays);
    return (want + kWays - 1) / kWays;
  }
  // Allocations are whole 2 MiB pages (AllocateArray).
  static constexpr size_t kAllocationUnit = size_t{2} << 20;
  static size_t AllocationBytes(size_t bytes) {
    return (bytes + kAllocationUnit - 1) / kAllocationUnit * kAllocationUnit;
  }
  static uint32_t SigOf(uint64_t hash) { return static_cast<uint32_t>(hash >> 40); }
  // Buckets by multiply-shift ("fastrange") of 32 hash bits: any bucket
  // count, no division. Primary from the low 32 bits, secondary from bits
  // 16..47 remixed (ProbeOf), signature from bits 40..63.
  uint32_t Primary(uint64_t hash) const {
    return static_cast<uint32_t>((uint64_t{static_cast<uint32_t>(hash)} * num_buckets_) >> 32);
  }
  // Bit w set when way w of `a` is occupied and carries signature `sig`,
  // bit 8 + w the same for `b`. Branch-free (SSE2 where available): a
  // data-dependent branch per way costs more than the whole comparison.
  // A way matches when x = tag ^ (sig << 8) is 1..255 (equal signature
  // bits, a non-empty state), i.e. when x - 1 < 255 unsigned: x = 0 wraps,
  // and x = 256 (an empty way's tag 0 against signature 1) is excluded.
  // SSE2 compares signed only: x - 1 with its top bit flipped, which is
  // x + 0x7FFFFFFF, against 255 with its top bit flipped.
  static uint32_t MatchMask(const BucketHeader& a, const BucketHeader& b, uint32_t sig) {
#if defined(__SSE2__)
    const __m128i want = _mm_set1_epi32(static_cast<int>(sig << 8));
    const __m128i bias = _mm_set1_epi32(0x7FFFFFFF);
    const __m128i limit = _mm_set1_epi32(static_cast<int>(0x800000FFu));
    auto match = [&](const uint32_t* tags) {
      const __m128i x = _mm_xor_si128(_mm_load_si128(reinterpret_cast<const __m128i*>(tags)), want);
      return _mm_cmplt_epi32(_mm_add_epi32(x, bias), limit);
    };
    // Lanes are all ones or zeros: two signed packs keep them, a byte a way.
    return static_cast<uint32_t>(_mm_movemask_epi8(
        _mm_packs_epi16(_mm_packs_epi32(match(a.tag), match(a.tag + 4)),
                        _mm_packs_epi32(match(b.tag), match(b.tag + 4)))));
#else
    uint32_t mask = 0;
    for (int w = 0; w < kWays; ++w) {
      mask |= static_cast<uint32_t>((a.tag[w] >> 8) == sig && (a.tag[w] & 0xFF) != 0) << w;
      mask |= static_cast<uint32_t>((b.tag[w] >> 8) == sig && (b.tag[w] & 0xFF) != 0) << (kWays + w);
    }
    return mask;
#endif
  }
  Slot SelectSlot(const Probe& probe, uint32_t now_tick) const;
  void SweepSlow(uint64_t now_ns);
  ConntrackEntry* InsertAt(const Slot& slot, const FlowKey& key, uint32_t sig, FlowState state,
                           uint32_t backend_id, uint16_t backend_hint, uint64_t now_ns,
                           uint32_t load_slot);
  static bool SameKey(const FlowKey& a, const FlowKey& b) {
    static_assert(sizeof(FlowKey) == 40);
#if defined(__SSE4_1__)
    // Two 16-byte compares and one of 8 (the word-array version below goes
    // through the stack).
    const auto* pa = reinterpret_cast<const __m128i*>(&a);
    const auto* pb = reinterpret_cast<const __m128i*>(&b);
    const __m128i d = _mm_or_si128(_mm_xor_si128(_mm_loadu_si128(pa), _mm_loadu_si128(pb)),
                                   _mm_xor_si128(_mm_loadu_si128(pa + 1), _mm_loadu_si128(pb + 1)));
    uint64_t x, y;
    std::memcpy(&x, reinterpret_cast<const char*>(&a) + 32, sizeof(x));
    std::memcpy(&y, reinterpret_cast<const char*>(&b) + 32, sizeof(y));
    return _mm_testz_si128(d, d) & (x == y);
#else
    uint64_t x[5], y[5];
    std::memcpy(x, &a, sizeof(x));
    std::memcpy(y, &b, sizeof(y));
    return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2]) | (x[3] ^ y[3]) | (x[4] ^ y[4])) == 0;
#endif
  }
  // The live entry of `key` among the ways in `matches` (Probe::matches):
  // the primary bucket's first.
  ConntrackEntry* FindMatching(const Probe& probe, uint32_t matches, const FlowKey& key, uint32_t now_tick) {
    ConntrackEntry* e = nullptr;
    if ((matches & 0xFF) != 0) e = FindMasked(probe.primary, matches & 0xFF, key, now_tick);
    if (e == nullptr && (matches >> kWays) != 0) e = FindMasked(probe.secondary, matches >> kWays, key, now_tick);
    return e;
  }
  ConntrackEntry* FindMasked(uint32_t b, uint32_t mask, const FlowKey& key, uint32_t now_tick) {
    const BucketHeader& h = headers_[b];
    for (uint32_t m = mask; m != 0; m &= m - 1) {
      const int w = std::countr_zero(m);
      ConntrackEntry* e = &entries_[size_t{b} * kWays + w];
      if (static_cast<int32_t>(h.expires[w] - now_tick) > 0 && SameKey(e->key, key)) return e;
    }
    return nullptr;
  }
  template <typename T>
  static T* AllocateArray(size_t n, size_t* bytes);
  static uint32_t TickOf(uint64_t now_ns) { return static_cast<uint32_t>(now_ns >> kTickShift); }
  // By ClassOf: unproven states 0..4, proven states 8..12.
  static uint32_t ClassOf(uint32_t tag) {
    return (tag & conntrack_internal::kStateBits) | ((tag & conntrack_internal::kProvenBit) >> 4);
  }
  static_assert(conntrack_internal::kProvenBit >> 4 == 8);
  // `flags`: kResetBit / kProvenBit.
  void SetState(uint32_t index, FlowState s, uint32_t flags, uint64_t now_ns) {
    BucketHeader& h = headers_[index / kWays];
    const uint32_t w = index % kWays;
    const uint32_t tag =
        (h.tag[w] & ~conntrack_internal::kStateMask) | flags | static_cast<uint8_t>(s);
    const uint32_t expires = TickOf(now_ns) + deadline_ticks_[ClassOf(tag)];
    // Store only what changed: most packets of a busy flow fall in the same
    // tick, and a line left clean costs no write-back to memory.
    if (h.tag[w] != tag) h.tag[w] = tag;
    if (h.expires[w] != expires) h.expires[w] = expires;
  }

  ConntrackKey key_;
  ConntrackTimeouts timeouts_;
  // By ClassOf(tag): the idle timeout in ticks.
  uint32_t deadline_ticks_[16] = {};
  // The remaining ticks above which a proven live entry cannot be evicted
  // (SelectSlot): UDP's, and every TCP state's (one window for all: see the
  // constructor).
  int32_t protect_above_tcp_ = 0, protect_above_udp_ = 0;
  // Sweep: the next bucket, when it is due, one bucket's share of the period.
  size_t sweep_cursor_ = 0;
  uint64_t next_sweep_ns_ = 0;
  uint64_t sweep_step_ns_ = 1;
  uint64_t last_sweep_call_ns_ = 0;
  bool sweep_started_ = false;
  size_t num_buckets_ = 0;
  BucketHeader* headers_ = nullptr;
  ConntrackEntry* entries_ = nullptr;
  size_t headers_bytes_ = 0, entries_bytes_ = 0;
  size_t occupied_ = 0;
  ConntrackStats stats_;
  FlowLoads loads_;
};

}  // namespace maglb

#endif  // MAGLB_CONNTRACK_H_
