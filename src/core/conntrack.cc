#include "maglb/conntrack.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace maglb {
namespace {

constexpr uint64_t kNsPerSecond = 1'000'000'000ULL;
constexpr uint32_t kStateMask = 0xFF;
constexpr uint8_t kEmpty = 0;

// Signed distance in ticks from now to a deadline, modulo 2^32: positive
// while the deadline is ahead. Ticks wrap after ~2.3 years of uptime; the
// signed difference keeps comparisons right across the wrap.
inline int32_t Remaining(uint32_t deadline, uint32_t now_tick) {
  return static_cast<int32_t>(deadline - now_tick);
}

inline uint32_t SigOf(uint64_t hash) { return static_cast<uint32_t>(hash >> 40); }

// State of a flow that is not tracked yet, from its first packet.
inline FlowState InitialState(uint8_t protocol, uint8_t tcp_flags) {
  if (protocol != 6) return FlowState::kUdp;
  if (tcp_flags & (kTcpRst | kTcpFin)) return FlowState::kClosing;
  if ((tcp_flags & (kTcpSyn | kTcpAck)) == kTcpSyn) return FlowState::kSynSent;
  return FlowState::kEstablished;
}

// Eviction preference: half-open and closing flows go before established
// TCP and UDP flows.
inline int EvictionClass(uint8_t state) {
  return (state == static_cast<uint8_t>(FlowState::kSynSent) ||
          state == static_cast<uint8_t>(FlowState::kClosing))
             ? 1
             : 2;
}

}  // namespace

ConntrackTimeouts ConntrackTimeouts::FromConfig(const ConntrackConfig& config) {
  return {
      .tcp_established_ns = config.tcp_established_timeout_s * kNsPerSecond,
      .tcp_closing_ns = config.tcp_closing_timeout_s * kNsPerSecond,
      .tcp_syn_ns = config.tcp_syn_timeout_s * kNsPerSecond,
      .udp_ns = config.udp_timeout_s * kNsPerSecond,
  };
}

Conntrack::Conntrack(const ConntrackConfig& config)
    : timeouts_(ConntrackTimeouts::FromConfig(config)) {
  auto ticks = [](uint64_t ns) {
    uint64_t t = (ns + (uint64_t{1} << kTickShift) - 1) >> kTickShift;
    return static_cast<uint32_t>(std::clamp<uint64_t>(t, 1, uint64_t{1} << 30));
  };
  deadline_ticks_[static_cast<int>(FlowState::kSynSent)] = ticks(timeouts_.tcp_syn_ns);
  deadline_ticks_[static_cast<int>(FlowState::kEstablished)] = ticks(timeouts_.tcp_established_ns);
  deadline_ticks_[static_cast<int>(FlowState::kClosing)] = ticks(timeouts_.tcp_closing_ns);
  deadline_ticks_[static_cast<int>(FlowState::kUdp)] = ticks(timeouts_.udp_ns);

  // 25% more ways than flows: greedy two-choice fills 80% of the ways with
  // ~0.02% premature evictions (100%: ~4%), so `capacity` flows really fit.
  uint64_t want = std::max<uint64_t>(uint64_t{config.capacity} * 5 / 4, 2 * kWays);
  num_buckets_ = (want + kWays - 1) / kWays;
  // Value-initialised: every way empty, and every page touched now rather
  // than on the packet path.
  headers_ = new BucketHeader[num_buckets_]();
  entries_ = new ConntrackEntry[num_buckets_ * kWays]();
}

Conntrack::~Conntrack() {
  delete[] headers_;
  delete[] entries_;
}

// Buckets by multiply-shift ("fastrange") of 32 hash bits: any bucket count,
// no division. Primary from the low 32 bits, secondary from bits 16..47
// remixed, signature from bits 40..63.
uint32_t Conntrack::Primary(uint64_t hash) const {
  return static_cast<uint32_t>((uint64_t{static_cast<uint32_t>(hash)} * num_buckets_) >> 32);
}

uint32_t Conntrack::Secondary(uint64_t hash) const {
  const uint32_t mixed = static_cast<uint32_t>(hash >> 16) * 0x9E3779B1u;
  uint32_t b = static_cast<uint32_t>((uint64_t{mixed} * num_buckets_) >> 32);
  const uint32_t p = Primary(hash);
  if (b == p) b = (p + 1 == num_buckets_) ? 0 : p + 1;  // two distinct buckets
  return b;
}

uint32_t Conntrack::DeadlineOf(FlowState s, uint64_t now_ns) const {
  return TickOf(now_ns) + deadline_ticks_[static_cast<int>(s)];
}

size_t Conntrack::CountLive(uint64_t now_ns) const {
  const uint32_t now = TickOf(now_ns);
  size_t live = 0;
  for (size_t b = 0; b < num_buckets_; ++b) {
    for (int w = 0; w < kWays; ++w) {
      if ((headers_[b].tag[w] & kStateMask) != kEmpty && Remaining(headers_[b].expires[w], now) > 0) {
        ++live;
      }
    }
  }
  return live;
}

void Conntrack::PrefetchBuckets(uint64_t hash) const {
  __builtin_prefetch(&headers_[Primary(hash)], 1, 3);
  __builtin_prefetch(&headers_[Secondary(hash)], 1, 3);
}

void Conntrack::PrefetchEntries(uint64_t hash) const {
  const uint32_t sig = SigOf(hash);
  for (uint32_t b : {Primary(hash), Secondary(hash)}) {
    const BucketHeader& h = headers_[b];
    for (int w = 0; w < kWays; ++w) {
      if ((h.tag[w] >> 8) == sig && (h.tag[w] & kStateMask) != kEmpty) {
        __builtin_prefetch(&entries_[size_t{b} * kWays + w], 0, 3);
      }
    }
  }
}

ConntrackEntry* Conntrack::Find(uint32_t b, uint32_t sig, const FlowKey& key, uint32_t now_tick) {
  const BucketHeader& h = headers_[b];
  // Gather signature matches first (branch-free, vectorisable), then verify.
  uint32_t matches = 0;
  for (int w = 0; w < kWays; ++w) {
    matches |= static_cast<uint32_t>((h.tag[w] >> 8) == sig && (h.tag[w] & kStateMask) != kEmpty) << w;
  }
  while (matches != 0) {
    int w = std::countr_zero(matches);
    matches &= matches - 1;
    ConntrackEntry* e = &entries_[size_t{b} * kWays + w];
    if (Remaining(h.expires[w], now_tick) > 0 && e->key == key) return e;
  }
  return nullptr;
}

ConntrackEntry* Conntrack::Lookup(const FlowKey& key, uint64_t hash, uint64_t now_ns) {
  const uint32_t now = TickOf(now_ns);
  const uint32_t sig = SigOf(hash);
  if (ConntrackEntry* e = Find(Primary(hash), sig, key, now)) return e;
  return Find(Secondary(hash), sig, key, now);
}

void Conntrack::LookupBulk(const FlowKey* const* keys, const uint64_t* hashes, size_t n,
                           uint64_t now_ns, ConntrackEntry** out) {
  for (size_t i = 0; i < n; ++i) PrefetchBuckets(hashes[i]);
  for (size_t i = 0; i < n; ++i) PrefetchEntries(hashes[i]);
  for (size_t i = 0; i < n; ++i) out[i] = Lookup(*keys[i], hashes[i], now_ns);
}

FlowState Conntrack::StateOf(const ConntrackEntry* e) const {
  size_t index = static_cast<size_t>(e - entries_);
  return static_cast<FlowState>(headers_[index / kWays].tag[index % kWays] & kStateMask);
}

void Conntrack::SetState(uint32_t index_u, FlowState s, uint64_t now_ns) {
  size_t index = index_u;
  BucketHeader& h = headers_[index / kWays];
  int w = static_cast<int>(index % kWays);
  h.tag[w] = (h.tag[w] & ~kStateMask) | static_cast<uint8_t>(s);
  h.expires[w] = DeadlineOf(s, now_ns);
}

void Conntrack::Touch(ConntrackEntry* e, uint8_t tcp_flags, uint64_t now_ns) {
  const auto index = static_cast<uint32_t>(e - entries_);
  FlowState s = StateOf(e);
  switch (s) {
    case FlowState::kSynSent:
      if (tcp_flags & (kTcpFin | kTcpRst)) {
        s = FlowState::kClosing;
      } else if (!(tcp_flags & kTcpSyn)) {
        s = FlowState::kEstablished;  // the client's ACK completes its handshake
      }
      break;
    case FlowState::kEstablished:
      if (tcp_flags & (kTcpFin | kTcpRst)) s = FlowState::kClosing;
      break;
    case FlowState::kClosing:
    case FlowState::kUdp:
      break;
  }
  SetState(index, s, now_ns);
}

ConntrackEntry* Conntrack::Insert(const FlowKey& key, uint64_t hash, uint8_t tcp_flags,
                                  uint32_t backend_id, uint16_t backend_hint, uint64_t now_ns) {
  const uint32_t now = TickOf(now_ns);
  const FlowState state = InitialState(key.protocol, tcp_flags);
  const uint32_t buckets[2] = {Primary(hash), Secondary(hash)};

  // A free or dead way in the bucket with more of them (greedy two-choice:
  // keeps the buckets balanced, so the table fills to ~95% before a bucket
  // pair overflows); else the best victim over both buckets.
  int64_t chosen = -1;
  bool reclaimed_dead = false;
  int best_free = 0;
  int best_class = 3;
  int32_t best_remaining = INT32_MAX;
  int64_t victim = -1;
  for (uint32_t b : buckets) {
    const BucketHeader& h = headers_[b];
    int free_ways = 0;
    int64_t first_free = -1;
    bool first_free_dead = false;
    for (int w = 0; w < kWays; ++w) {
      uint8_t st = h.tag[w] & kStateMask;
      int32_t rem = Remaining(h.expires[w], now);
      if (st == kEmpty || rem <= 0) {
        if (first_free < 0) {
          first_free = int64_t{b} * kWays + w;
          first_free_dead = st != kEmpty;
        }
        ++free_ways;
        continue;
      }
      int cls = EvictionClass(st);
      if (cls < best_class || (cls == best_class && rem < best_remaining)) {
        best_class = cls;
        best_remaining = rem;
        victim = int64_t{b} * kWays + w;
      }
    }
    if (free_ways > best_free) {
      best_free = free_ways;
      chosen = first_free;
      reclaimed_dead = first_free_dead;
    }
  }
  if (chosen < 0) {
    // Full: a SYN may not push out a live established/UDP flow (SYN floods
    // must not flush real connections); anything else evicts the stalest.
    if (state == FlowState::kSynSent && best_class > 1) {
      ++stats_.untracked;
      return nullptr;
    }
    chosen = victim;
    ++stats_.evictions;
  } else if (reclaimed_dead) {
    ++stats_.expired_reused;
  } else {
    ++occupied_;
  }
  ++stats_.inserts;

  const auto index = static_cast<uint32_t>(chosen);
  ConntrackEntry* e = &entries_[index];
  e->key = key;
  e->backend_id = backend_id;
  e->backend_hint = backend_hint;
  e->created_ns = now_ns;
  BucketHeader& h = headers_[index / kWays];
  h.tag[index % kWays] = (SigOf(hash) << 8) | static_cast<uint8_t>(state);
  h.expires[index % kWays] = DeadlineOf(state, now_ns);
  return e;
}

void Conntrack::Repin(ConntrackEntry* e, uint32_t backend_id, uint16_t backend_hint,
                      uint8_t tcp_flags, uint64_t now_ns) {
  e->backend_id = backend_id;
  e->backend_hint = backend_hint;
  e->created_ns = now_ns;
  SetState(static_cast<uint32_t>(e - entries_), InitialState(e->key.protocol, tcp_flags), now_ns);
}

void Conntrack::Remove(ConntrackEntry* e) {
  const auto index = static_cast<size_t>(e - entries_);
  BucketHeader& h = headers_[index / kWays];
  if ((h.tag[index % kWays] & kStateMask) != kEmpty) --occupied_;
  h.tag[index % kWays] = 0;
  h.expires[index % kWays] = 0;
}

}  // namespace maglb
