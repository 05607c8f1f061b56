// Per-worker connection tracking: which backend each live flow is pinned to.
//
// One table per worker, never shared, never locked. Fixed capacity, allocated
// once at construction; nothing on the packet path allocates or calls the
// system: the caller passes the time in (monotonic nanoseconds).
//
// Layout (as VPP's sticky table, extended to full keys and two choices):
// buckets of 8 ways. A bucket's 64-byte header holds, per way, a 24-bit
// signature plus the TCP state (0 = empty) and the expiry tick; the 8 entries
// (full FlowKey, backend id, backend hint) live in a parallel array, one
// 64-byte line each. A flow may sit in either of two buckets (both derived from
// ConntrackHash; an insert takes the emptier one), which keeps premature
// evictions negligible up to ~80% occupancy of the ways. A lookup
// reads the two headers, compares signatures, and reads at most the matching
// entry lines. Expiry is lazy: an entry is live until its expiry tick, and a
// dead way is simply reused.
//
// When both buckets are full, the new flow replaces the stalest candidate:
// half-open and closing flows first, then the one whose idle deadline comes
// first. One protection against SYN floods: a half-open SYN may only replace a dead, half-open or closing entry,
// never a live established TCP or UDP flow. A SYN that finds no such way is not
// tracked (Insert returns nullptr, counted as untracked); the caller still
// forwards it by the table, and its next packet (a non-SYN) is tracked.
#ifndef MAGLB_CONNTRACK_H_
#define MAGLB_CONNTRACK_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "maglb/config.h"
#include "maglb/flow.h"

namespace maglb {

/// What the conntrack remembers of a flow's TCP handshake. It sees only the
/// client-to-VIP direction (backends answer directly), so the states are the
/// client's: kSynSent until the client's first non-SYN segment, kEstablished,
/// kClosing after a FIN or RST from the client. kUdp for UDP (and any other
/// tracked protocol). 0 is reserved for an empty way.
enum class FlowState : uint8_t { kSynSent = 1, kEstablished = 2, kClosing = 3, kUdp = 4 };

/// TCP flag bits as they sit in the TCP header's flags byte.
inline constexpr uint8_t kTcpFin = 0x01;
inline constexpr uint8_t kTcpSyn = 0x02;
inline constexpr uint8_t kTcpRst = 0x04;
inline constexpr uint8_t kTcpAck = 0x10;

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
  uint64_t untracked = 0;      // inserts refused (SYN facing only live established flows)
  uint64_t expired_reused = 0; // dead ways reclaimed by an insert
};

class Conntrack {
 public:
  /// Allocates 8-way buckets for config.capacity * 1.25 ways: at the
  /// configured number of flows, fewer than 0.02% are evicted early because
  /// both of their buckets happened to be full.
  explicit Conntrack(const ConntrackConfig& config);
  ~Conntrack();
  Conntrack(const Conntrack&) = delete;
  Conntrack& operator=(const Conntrack&) = delete;

  /// Number of ways (~1.25 x the configured capacity).
  size_t capacity() const { return num_buckets_ * kWays; }
  const ConntrackTimeouts& timeouts() const { return timeouts_; }
  const ConntrackStats& stats() const { return stats_; }

  /// Ways holding a flow that has not been reclaimed; includes flows that
  /// expired but whose way no insert has reused yet. O(1).
  size_t occupied() const { return occupied_; }
  /// Live flows at `now_ns`. O(capacity): tests and diagnostics only.
  size_t CountLive(uint64_t now_ns) const;

  /// Stage 1 of a burst: prefetch both bucket headers of a flow.
  void PrefetchBuckets(uint64_t hash) const;
  /// Stage 2 of a burst (after PrefetchBuckets): prefetch the entry lines whose
  /// signature matches, so that stage 3's Lookup finds everything in cache.
  void PrefetchEntries(uint64_t hash) const;

  /// The live entry of `key` (hash = ConntrackHash(key)) or nullptr. Does not
  /// refresh it: call Touch for packets that belong to it.
  ConntrackEntry* Lookup(const FlowKey& key, uint64_t hash, uint64_t now_ns);

  /// Lookups for a burst: prefetches every bucket, then every matching entry,
  /// then looks each key up. out[i] is what Lookup(*keys[i], hashes[i], now)
  /// returns; the pointers stay valid until the next Insert or Remove.
  void LookupBulk(const FlowKey* const* keys, const uint64_t* hashes, size_t n,
                  uint64_t now_ns, ConntrackEntry** out);

  /// The state of a live entry.
  FlowState StateOf(const ConntrackEntry* e) const;

  /// Refreshes a live entry for one more packet of its flow: applies the TCP
  /// flags (`tcp_flags` is ignored for UDP) and extends its idle deadline.
  /// SYN→established on the first non-SYN segment; FIN or RST → closing. A
  /// closing flow stays closing; each packet extends it by the closing
  /// timeout only (the ACKs of a half-closed download keep it alive).
  void Touch(ConntrackEntry* e, uint8_t tcp_flags, uint64_t now_ns);

  /// Tracks a new flow that Lookup did not find. `protocol` is IPPROTO_TCP
  /// (flags decide the initial state: a SYN without ACK starts half-open,
  /// anything else — a mid-flow pickup after a restart or an ECMP shift —
  /// starts established, or closing for FIN/RST) or anything else (kUdp).
  /// Returns the new entry, or nullptr if the flow could not be tracked (see
  /// the file comment); the caller forwards the packet either way.
  ConntrackEntry* Insert(const FlowKey& key, uint64_t hash, uint8_t tcp_flags,
                         uint32_t backend_id, uint16_t backend_hint, uint64_t now_ns);

  /// Repins an existing entry to another backend (its backend was removed)
  /// and refreshes it as Touch does.
  void Repin(ConntrackEntry* e, uint32_t backend_id, uint16_t backend_hint, uint8_t tcp_flags,
             uint64_t now_ns);

  /// Forgets an entry.
  void Remove(ConntrackEntry* e);

  static constexpr int kWays = 8;

 private:
  struct alignas(64) BucketHeader {
    uint32_t tag[kWays];      // sig << 8 | FlowState (0 = empty)
    uint32_t expires[kWays];  // tick (now_ns >> kTickShift, wrapping) of the idle deadline
  };
  static_assert(sizeof(BucketHeader) == 64);
  static constexpr int kTickShift = 24;  // ~16.8 ms ticks; 2^31 ticks ~ 1.1 years

  uint32_t Primary(uint64_t hash) const;
  uint32_t Secondary(uint64_t hash) const;
  static uint32_t TickOf(uint64_t now_ns) { return static_cast<uint32_t>(now_ns >> kTickShift); }
  uint32_t DeadlineOf(FlowState s, uint64_t now_ns) const;
  ConntrackEntry* Find(uint32_t b, uint32_t tag_sig, const FlowKey& key, uint32_t now_tick);
  void SetState(uint32_t index, FlowState s, uint64_t now_ns);

  ConntrackTimeouts timeouts_;
  uint32_t deadline_ticks_[5] = {};  // by FlowState
  size_t num_buckets_ = 0;
  BucketHeader* headers_ = nullptr;
  ConntrackEntry* entries_ = nullptr;
  size_t occupied_ = 0;
  ConntrackStats stats_;
};

}  // namespace maglb

#endif  // MAGLB_CONNTRACK_H_
