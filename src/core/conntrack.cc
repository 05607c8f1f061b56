#include "maglb/conntrack.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include <random>

#if defined(__SSE4_1__)
#include <smmintrin.h>
#endif

#if defined(__linux__)
#include <sys/mman.h>
#include <sys/random.h>
#endif

namespace maglb {
namespace {

constexpr uint64_t kNsPerSecond = 1'000'000'000ULL;
using conntrack_internal::kEmpty;
using conntrack_internal::kProvenBit;
using conntrack_internal::kStateBits;
using conntrack_internal::kStateMask;

using conntrack_internal::Remaining;

// State of a flow that is not tracked yet, from its first packet.
inline FlowState InitialState(uint8_t protocol, uint8_t tcp_flags) {
  if (protocol != kIpProtoTcp) return FlowState::kUdp;
  if (tcp_flags & (kTcpRst | kTcpFin)) return FlowState::kClosing;
  if ((tcp_flags & (kTcpSyn | kTcpAck)) == kTcpSyn) return FlowState::kSynSent;
  return FlowState::kEstablished;
}


// A key for a table built without one: random all the same (a fixed default
// would be the public constant that this key replaces).
ConntrackKey DefaultKey() {
  ConntrackKey key;
  if (!RandomConntrackKey(&key)) {
    std::random_device rd;
    for (uint64_t& w : key.k) w = uint64_t{rd()} << 32 | rd();
  }
  return key;
}

}  // namespace

bool RandomConntrackKey(ConntrackKey* key) {
#if defined(__linux__)
  auto* p = reinterpret_cast<uint8_t*>(key->k);
  size_t got = 0;
  while (got < sizeof(key->k)) {
    const ssize_t n = getrandom(p + got, sizeof(key->k) - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    got += static_cast<size_t>(n);
  }
  return true;
#else
  std::random_device rd;
  for (uint64_t& w : key->k) w = uint64_t{rd()} << 32 | rd();
  return true;
#endif
}

ConntrackTimeouts ConntrackTimeouts::FromConfig(const ConntrackConfig& config) {
  return {
      .tcp_established_ns = config.tcp_established_timeout_s * kNsPerSecond,
      .tcp_closing_ns = config.tcp_closing_timeout_s * kNsPerSecond,
      .tcp_syn_ns = config.tcp_syn_timeout_s * kNsPerSecond,
      .udp_ns = config.udp_timeout_s * kNsPerSecond,
  };
}

Conntrack::Conntrack(const ConntrackConfig& config) : Conntrack(config, DefaultKey()) {}

Conntrack::Conntrack(const ConntrackConfig& config, const ConntrackKey& key)
    : key_(key), timeouts_(ConntrackTimeouts::FromConfig(config)) {
  auto ticks = [](uint64_t ns) {
    uint64_t t = (ns + (uint64_t{1} << kTickShift) - 1) >> kTickShift;
    return static_cast<uint32_t>(std::clamp<uint64_t>(t, 1, kMaxDeadlineTicks));
  };
  const uint32_t syn = ticks(timeouts_.tcp_syn_ns), est = ticks(timeouts_.tcp_established_ns),
                 closing = ticks(timeouts_.tcp_closing_ns), udp = ticks(timeouts_.udp_ns),
                 protect = ticks(uint64_t{config.proven_protect_s} * kNsPerSecond);
  // By ClassOf: unproven states, then proven ones (+8). Proven TCP keeps the
  // established timeout whatever its FIN/RST/SYN say (file comment).
  constexpr uint32_t kProven = 8;
  for (auto [s, ticks_of_state] : {std::pair{FlowState::kSynSent, syn}, std::pair{FlowState::kEstablished, est},
                                   std::pair{FlowState::kClosing, closing}, std::pair{FlowState::kUdp, udp}}) {
    deadline_ticks_[static_cast<uint32_t>(s)] = ticks_of_state;
    deadline_ticks_[static_cast<uint32_t>(s) | kProven] = s == FlowState::kUdp ? udp : est;
  }
  // A proven entry was last seen (deadline - timeout) ago; it is protected
  // while that is less than proven_protect_s, i.e. while the remaining ticks
  // exceed timeout - window (0: its whole life). The same window in every
  // state: a spoofed FIN/RST/SYN must not shorten a live flow's protection
  // (once past it, a closed flow is the first victim: SelectSlot). Proven TCP
  // keeps the established timeout in every state, so one threshold serves
  // every TCP state.
  auto above = [](uint32_t deadline, uint32_t window) {
    return static_cast<int32_t>(deadline > window ? deadline - window : 0);
  };
  protect_above_tcp_ = above(est, protect);
  protect_above_udp_ = above(udp, protect);

  num_buckets_ = BucketsFor(config.capacity);
  headers_ = AllocateArray<BucketHeader>(num_buckets_, &headers_bytes_);
  entries_ = AllocateArray<ConntrackEntry>(num_buckets_ * kWays, &entries_bytes_);
  sweep_step_ns_ = std::max<uint64_t>((kSweepPeriodTicks << kTickShift) / num_buckets_, 1);
}

Conntrack::Conntrack(const ConntrackConfig& config, uint32_t load_slots, uint32_t vip_slots)
    : Conntrack(config) {
  loads_ = FlowLoads(load_slots, vip_slots);
}

Conntrack::Conntrack(const ConntrackConfig& config, const ConntrackKey& key, uint32_t load_slots,
                     uint32_t vip_slots)
    : Conntrack(config, key) {
  loads_ = FlowLoads(load_slots, vip_slots);
}

void Conntrack::SweepSlow(uint64_t now_ns) {
  const uint32_t now = TickOf(now_ns);
  // Re-stamps the dead ways of bucket b with now: dead, and young again.
  auto sweep_bucket = [&](size_t b) {
    BucketHeader& h = headers_[b];
    for (int w = 0; w < kWays; ++w) {
      if ((h.tag[w] & kStateMask) != kEmpty && Remaining(h.expires[w], now) <= 0) h.expires[w] = now;
    }
  };
  if (!sweep_started_ || now_ns < last_sweep_call_ns_) {
    // First call, or a clock that went back (not monotonic): start a round.
    sweep_started_ = true;
    next_sweep_ns_ = now_ns + sweep_step_ns_;
    return;
  }
  if (now_ns - last_sweep_call_ns_ > kMaxDeadlineNs) {
    // Nothing was touched for longer than any deadline reaches: every way is
    // dead, whatever its 32-bit tick says after such a gap.
    for (size_t b = 0; b < num_buckets_; ++b) {
      for (int w = 0; w < kWays; ++w) {
        if ((headers_[b].tag[w] & kStateMask) != kEmpty) headers_[b].expires[w] = now;
      }
    }
    next_sweep_ns_ = now_ns + sweep_step_ns_;
    return;
  }
  if (now_ns < next_sweep_ns_) return;
  // The buckets due since the last call (one, unless calls were sparse).
  const uint64_t due = std::min<uint64_t>((now_ns - next_sweep_ns_) / sweep_step_ns_ + 1, num_buckets_);
  for (uint64_t i = 0; i < due; ++i) {
    sweep_bucket(sweep_cursor_);
    sweep_cursor_ = sweep_cursor_ + 1 == num_buckets_ ? 0 : sweep_cursor_ + 1;
  }
  next_sweep_ns_ = due == num_buckets_ ? now_ns + sweep_step_ns_ : next_sweep_ns_ + due * sweep_step_ns_;
}

Conntrack::~Conntrack() {
  std::destroy_n(entries_, num_buckets_ * kWays);
  std::destroy_n(headers_, num_buckets_);
  std::free(entries_);
  std::free(headers_);
}

// The table is read at random: with 4 KiB pages nearly every lookup would
// also miss the TLB. Ask for transparent huge pages (2 MiB-aligned, madvise),
// then value-initialise (every way empty), which also touches every page now
// rather than on the packet path.
template <typename T>
T* Conntrack::AllocateArray(size_t n, size_t* bytes) {
  const size_t size = AllocationBytes(n * sizeof(T));
  void* p = std::aligned_alloc(size >= kAllocationUnit ? kAllocationUnit : alignof(T), size);
  if (p == nullptr) std::abort();  // construction time only: out of memory
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  madvise(p, size, MADV_HUGEPAGE);  // best effort; fine if THP is off
#endif
  *bytes = size;
  T* arr = static_cast<T*>(p);
  std::uninitialized_value_construct_n(arr, n);
  return arr;
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

size_t Conntrack::CountCounted(uint32_t load_slot, uint32_t backend_id) const {
  size_t n = 0;
  for (size_t i = 0; i < num_buckets_ * kWays; ++i) {
    n += (headers_[i / kWays].tag[i % kWays] & kStateMask) != kEmpty &&
         entries_[i].load_slot == load_slot && entries_[i].backend_id == backend_id;
  }
  return n;
}

void Conntrack::LookupBulk(const FlowKey* const* keys, const uint64_t* hashes, size_t n,
                           uint64_t now_ns, ConntrackEntry** out) {
  constexpr size_t kChunk = 64;  // probes kept on the stack
  Probe probes[kChunk];
  for (size_t off = 0; off < n; off += kChunk) {
    const size_t m = std::min(kChunk, n - off);
    for (size_t i = 0; i < m; ++i) {
      probes[i] = ProbeOf(hashes[off + i]);
      PrefetchBuckets(probes[i]);
    }
    // Signature matches are kept for stage 3: nothing changes the table between.
    for (size_t i = 0; i < m; ++i) PrefetchEntries(probes[i]);
    for (size_t i = 0; i < m; ++i) out[off + i] = LookupPrefetched(*keys[off + i], probes[i], now_ns);
  }
}




Conntrack::Slot Conntrack::SelectSlot(const Probe& probe, uint32_t now) const {
  // A free or dead way in the bucket with more of them (greedy two-choice:
  // keeps the buckets balanced, so premature evictions stay rare); else the
  // best victim over both buckets in the order of the file comment: the
  // victim class, then the nearest deadline. A proven live flow seen within
  // its protection window is never a victim: every insert comes from a
  // packet that proves nothing. Branch-free over the 16 ways: this runs for
  // every new flow, and a branch per way mispredicts.
  //
  // Victim keys (computed only when both buckets are full, the flood's
  // case): protected → UINT32_MAX; else victim class (0..3, file comment:
  // proven early, unproven early, unproven, proven) << 30 + remaining ticks,
  // clamped to 2^29 (a live deadline is at most kMaxDeadlineTicks < 2^30
  // ahead, so each class sorts after the one before and nothing overflows).
  // Early = odd state; the lowest key wins, ties to the lower way (primary
  // bucket first).
  static_assert(static_cast<int>(FlowState::kSynSent) == 1 && static_cast<int>(FlowState::kClosing) == 3 &&
                static_cast<int>(FlowState::kEstablished) == 2 && static_cast<int>(FlowState::kUdp) == 4);
  const uint32_t buckets[2] = {probe.primary, probe.secondary};
  auto slot_at = [&](uint32_t bucket, int way, Slot::Kind kind) {
    Slot slot;
    slot.index = uint64_t{bucket} * kWays + static_cast<uint32_t>(way);
    slot.kind = kind;
    slot.tag = headers_[bucket].tag[way];
    slot.expires = headers_[bucket].expires[way];
    return slot;
  };
#if defined(__SSE4_1__)
  // 4 ways per vector, q = 2 * bucket + half. SSE4.1 (meson.build asks for
  // it on x86_64) for the unsigned minimum and the blends.
  const __m128i now_v = _mm_set1_epi32(static_cast<int>(now));
  const __m128i zero = _mm_setzero_si128();
  const __m128i state_byte = _mm_set1_epi32(static_cast<int>(kStateMask));
  __m128i tag[4], rem[4], live[4];
  for (int q = 0; q < 4; ++q) {
    const BucketHeader& h = headers_[buckets[q / 2]];
    tag[q] = _mm_load_si128(reinterpret_cast<const __m128i*>(h.tag) + q % 2);
    rem[q] = _mm_sub_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(h.expires) + q % 2), now_v);
    live[q] = _mm_andnot_si128(_mm_cmpeq_epi32(_mm_and_si128(tag[q], state_byte), zero),
                               _mm_cmpgt_epi32(rem[q], zero));
  }
  // Lanes are all ones or zeros: two signed packs keep them, one byte a way
  // (bit 8 * bucket + way).
  const auto live_mask = static_cast<uint32_t>(_mm_movemask_epi8(
      _mm_packs_epi16(_mm_packs_epi32(live[0], live[1]), _mm_packs_epi32(live[2], live[3]))));
  const uint32_t free_mask[2] = {~live_mask & 0xFF, (~live_mask >> 8) & 0xFF};
#else
  uint32_t free_mask[2];
  for (int k = 0; k < 2; ++k) {
    const BucketHeader& h = headers_[buckets[k]];
    uint32_t mask = 0;
    for (int w = 0; w < kWays; ++w) {
      const bool free = ((h.tag[w] & kStateMask) == kEmpty) | (Remaining(h.expires[w], now) <= 0);
      mask |= static_cast<uint32_t>(free) << w;
    }
    free_mask[k] = mask;
  }
#endif
  if ((free_mask[0] | free_mask[1]) != 0) {
    const int k = std::popcount(free_mask[1]) > std::popcount(free_mask[0]) ? 1 : 0;
    const int w = std::countr_zero(free_mask[k]);
    return slot_at(buckets[k], w,
                  (headers_[buckets[k]].tag[w] & kStateMask) == kEmpty ? Slot::kEmptyWay : Slot::kDead);
  }
  // Both buckets full: every way is live.
  uint32_t best_key;
  int best;
#if defined(__SSE4_1__)
  const __m128i above_tcp = _mm_set1_epi32(protect_above_tcp_);
  const __m128i above_udp = _mm_set1_epi32(protect_above_udp_);
  const __m128i cap = _mm_set1_epi32(int32_t{1} << 29);
  const __m128i bit30 = _mm_set1_epi32(int32_t{1} << 30);
  const __m128i bit31 = _mm_set1_epi32(static_cast<int>(0x80000000u));
  __m128i key[4];
  for (int q = 0; q < 4; ++q) {
    const __m128i t = tag[q];
    // Sign bits: kProvenBit (bit 7) and the UDP state's bit 2.
    const __m128i proven = _mm_srai_epi32(_mm_slli_epi32(t, 24), 31);
    const __m128i window_above = _mm_castps_si128(_mm_blendv_ps(
        _mm_castsi128_ps(above_tcp), _mm_castsi128_ps(above_udp), _mm_castsi128_ps(_mm_slli_epi32(t, 29))));
    const __m128i protect = _mm_and_si128(proven, _mm_cmpgt_epi32(rem[q], window_above));
    // Class: bit 31 = established/UDP (even state), bit 30 = proven XOR early.
    const __m128i victim_class =
        _mm_or_si128(_mm_andnot_si128(_mm_slli_epi32(t, 31), bit31),
                     _mm_and_si128(_mm_xor_si128(_mm_slli_epi32(t, 30), proven), bit30));
    key[q] = _mm_or_si128(protect, _mm_add_epi32(_mm_min_epu32(rem[q], cap), victim_class));
  }
  __m128i m = _mm_min_epu32(_mm_min_epu32(key[0], key[1]), _mm_min_epu32(key[2], key[3]));
  m = _mm_min_epu32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
  m = _mm_min_epu32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
  best_key = static_cast<uint32_t>(_mm_cvtsi128_si32(m));
  const auto at_min = static_cast<uint32_t>(_mm_movemask_epi8(
      _mm_packs_epi16(_mm_packs_epi32(_mm_cmpeq_epi32(key[0], m), _mm_cmpeq_epi32(key[1], m)),
                      _mm_packs_epi32(_mm_cmpeq_epi32(key[2], m), _mm_cmpeq_epi32(key[3], m)))));
  best = std::countr_zero(at_min);
#else
  uint32_t key[2 * kWays];
  for (int k = 0; k < 2; ++k) {
    const BucketHeader& h = headers_[buckets[k]];
    for (int w = 0; w < kWays; ++w) {
      const uint32_t tag = h.tag[w];
      const uint32_t st = tag & kStateBits;
      const int32_t rem = Remaining(h.expires[w], now);
      const int32_t window_above = st == static_cast<uint32_t>(FlowState::kUdp) ? protect_above_udp_
                                                                                 : protect_above_tcp_;
      const bool protected_way = ((tag & kProvenBit) != 0) & (rem > window_above);
      const uint32_t victim_class = (((~st & 1) << 1) | (((tag & kProvenBit) >> 7) ^ (st & 1))) << 30;
      const auto r = static_cast<uint32_t>(std::min<int32_t>(rem, int32_t{1} << 29));
      key[k * kWays + w] = protected_way ? UINT32_MAX : r + victim_class;
    }
  }
  // Minimum of (key, way) packed in 64 bits, as a tree: 4 dependent steps
  // instead of 16 (ties go to the lower way, as a scan would).
  uint64_t v[2 * kWays];
  for (int i = 0; i < 2 * kWays; ++i) v[i] = uint64_t{key[i]} << 8 | i;
  for (int width = kWays; width >= 1; width /= 2) {
    for (int i = 0; i < width; ++i) v[i] = std::min(v[i], v[i + width]);
  }
  best = static_cast<int>(v[0] & 0xFF);
  best_key = key[best];
#endif
  // Full of protected proven flows: a packet that proves nothing may not push
  // them out (floods of spoofed SYN/ACK/UDP must not flush real connections).
  if (best_key == UINT32_MAX) return Slot{};  // kNone
  return slot_at(buckets[best / kWays], best % kWays, Slot::kEvict);
}

void Conntrack::PrefetchInsertSlot(Probe& probe, uint8_t protocol, uint8_t tcp_flags,
                                   uint64_t now_ns) const {
  if (protocol == kIpProtoTcp && (tcp_flags & kTcpRst)) return;  // never inserted
  probe.slot = SelectSlot(probe, TickOf(now_ns));
  if (probe.slot.kind != Slot::kNone) conntrack_internal::PrefetchLine(&entries_[probe.slot.index]);
}

// Inline: one call per new flow, with eight arguments to pass.
inline ConntrackEntry* Conntrack::InsertAt(const Slot& slot, const FlowKey& key, uint32_t sig,
                                    FlowState state, uint32_t backend_id, uint16_t backend_hint,
                                    uint64_t now_ns, uint32_t load_slot) {
  switch (slot.kind) {
    case Slot::kNone:
      ++stats_.untracked;
      return nullptr;
    case Slot::kEvict:
      ++stats_.evictions;
      break;
    case Slot::kDead:
      ++stats_.expired_reused;
      break;
    case Slot::kEmptyWay:
      ++occupied_;
      break;
  }
  ++stats_.inserts;
  const uint64_t index = slot.index;
  ConntrackEntry* e = &entries_[index];
  // The way's previous flow (expired or evicted) leaves its backend's count.
  // Its line is being written anyway: the check costs uncounted VIPs nothing.
  if (e->load_slot != kUncountedFlow) [[unlikely]] loads_.Release(e->load_slot, e->backend_id);
  e->key = key;
  e->backend_id = backend_id;
  e->backend_hint = backend_hint;
  e->created_ns = now_ns;
  e->load_slot = load_slot;
  if (load_slot != kUncountedFlow) [[unlikely]] loads_.Add(load_slot);
  BucketHeader& h = headers_[index / kWays];
  h.tag[index % kWays] = (sig << 8) | static_cast<uint8_t>(state);
  h.expires[index % kWays] = TickOf(now_ns) + deadline_ticks_[static_cast<uint32_t>(state)];  // unproven
  return e;
}

ConntrackEntry* Conntrack::Insert(const FlowKey& key, const Probe& probe, uint8_t tcp_flags,
                                  uint32_t backend_id, uint16_t backend_hint, uint64_t now_ns,
                                  uint32_t load_slot) {
  if (key.protocol == kIpProtoTcp && (tcp_flags & kTcpRst)) return nullptr;  // nothing to pin after a reset
  const FlowState state = InitialState(key.protocol, tcp_flags);
  const Slot& cached = probe.slot;
  const BucketHeader& h = headers_[cached.index / kWays];
  if (cached.kind != Slot::kNone && h.tag[cached.index % kWays] == cached.tag &&
      h.expires[cached.index % kWays] == cached.expires) {
    return InsertAt(cached, key, probe.sig, state, backend_id, backend_hint, now_ns, load_slot);
  }
  return InsertAt(SelectSlot(probe, TickOf(now_ns)), key, probe.sig, state, backend_id, backend_hint, now_ns,
                  load_slot);
}

ConntrackEntry* Conntrack::Insert(const FlowKey& key, uint64_t hash, uint8_t tcp_flags,
                                  uint32_t backend_id, uint16_t backend_hint, uint64_t now_ns,
                                  uint32_t load_slot) {
  if (key.protocol == kIpProtoTcp && (tcp_flags & kTcpRst)) return nullptr;  // nothing to pin after a reset
  const FlowState state = InitialState(key.protocol, tcp_flags);
  const Probe probe = ProbeOf(hash);
  return InsertAt(SelectSlot(probe, TickOf(now_ns)), key, probe.sig, state, backend_id,
                  backend_hint, now_ns, load_slot);
}

void Conntrack::Repin(ConntrackEntry* e, uint32_t backend_id, uint16_t backend_hint,
                      uint8_t tcp_flags, uint64_t now_ns, uint32_t load_slot) {
  if (e->load_slot != kUncountedFlow) loads_.Release(e->load_slot, e->backend_id);
  e->load_slot = load_slot;
  if (load_slot != kUncountedFlow) loads_.Add(load_slot);
  e->backend_id = backend_id;
  e->backend_hint = backend_hint;
  e->created_ns = now_ns;
  // The proof stays: a repin moves a flow that was already proven or not.
  const auto index = static_cast<uint32_t>(e - entries_);
  SetState(index, InitialState(e->key.protocol, tcp_flags),
           headers_[index / kWays].tag[index % kWays] & kProvenBit, now_ns);
}

void Conntrack::Remove(ConntrackEntry* e) {
  const auto index = static_cast<size_t>(e - entries_);
  BucketHeader& h = headers_[index / kWays];
  if ((h.tag[index % kWays] & kStateMask) != kEmpty) --occupied_;
  if (e->load_slot != kUncountedFlow) loads_.Release(e->load_slot, e->backend_id);
  e->load_slot = kUncountedFlow;
  h.tag[index % kWays] = 0;
  h.expires[index % kWays] = 0;
}

}  // namespace maglb
