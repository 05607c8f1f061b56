#include "dataplane/worker_loop.h"

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <rte_errno.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <span>

#include "absl/strings/str_format.h"
#include "dataplane/offloads.h"

namespace maglb {

namespace {

// Idle passes before an (optional) sleep: a busy queue never sleeps.
constexpr uint32_t kIdlePassesBeforeSleep = 64;

// Frames waiting for one port's TX queue.
struct TxBuffer {
  uint16_t port = 0;
  uint16_t queue = 0;
  uint16_t n = 0;
  // Frames handed to Flush so far: with n, how many a burst queued (the
  // latency histogram counts them), early flushes included.
  uint64_t flushed = 0;
  bool fast_free = false;  // MBUF_FAST_FREE: only the worker's pool, refcnt 1 (offloads.h)
  rte_mbuf* frames[kTxCapacity];
  uint64_t queued() const { return flushed + n; }
};

void Flush(TxBuffer& b, LoopCounters* counters) {
  if (b.n == 0) return;
  uint16_t sent = rte_eth_tx_burst(b.port, b.queue, b.frames, b.n);
  if (sent < b.n) {
    counters->tx_full.Add(b.n - sent);
    rte_pktmbuf_free_bulk(b.frames + sent, b.n - sent);
  }
  b.flushed += b.n;
  b.n = 0;
}

void Push(TxBuffer& b, rte_mbuf* m, LoopCounters* counters) {
  if (b.n == kTxCapacity) Flush(b, counters);
  b.frames[b.n++] = m;
}

// A fast-free queue returns what it sent to the pool of its first frame,
// unchecked (offloads.h): a frame of another pool (the backend port's, the
// kernel interface's), or one with another reference, goes as a copy in the
// worker's pool. Rare frames only (replies, probes, steered errors). Null:
// no buffer for the copy (counted; `m` is freed).
[[gnu::noinline]] rte_mbuf* InWorkerPool(const WorkerContext& c, rte_mbuf* m) {
  if (m->pool == c.pool && rte_mbuf_refcnt_read(m) == 1 && RTE_MBUF_DIRECT(m)) return m;
  rte_mbuf* copy = rte_pktmbuf_copy(m, c.pool, 0, UINT32_MAX);
  rte_pktmbuf_free(m);
  if (copy == nullptr) c.counters->extra_alloc_fail.Add(1);
  return copy;
}

// Push, for a frame that may not be of the worker's pool (`maybe_foreign`:
// known per burst, so the front port's frames pay one predictable branch).
inline void PushFrame(const WorkerContext& c, TxBuffer& b, rte_mbuf* m, bool maybe_foreign) {
  if (maybe_foreign && b.fast_free) [[unlikely]] {
    m = InWorkerPool(c, m);
    if (m == nullptr) return;
  }
  Push(b, m, c.counters);
}

// The kernel interface's queue: counted as frames to the kernel, and what it
// refuses as kernel_full. net_tap writes (and frees) each frame at once.
void FlushKernel(TxBuffer& b, LoopCounters* counters) {
  if (b.n == 0) return;
  uint64_t bytes = 0;
  for (uint16_t i = 0; i < b.n; ++i) bytes += rte_pktmbuf_pkt_len(b.frames[i]);
  uint16_t sent = rte_eth_tx_burst(b.port, b.queue, b.frames, b.n);
  if (sent < b.n) {
    for (uint16_t i = sent; i < b.n; ++i) bytes -= rte_pktmbuf_pkt_len(b.frames[i]);
    counters->kernel_full.Add(b.n - sent);
    rte_pktmbuf_free_bulk(b.frames + sent, b.n - sent);
  }
  counters->to_kernel.Add(sent);
  counters->to_kernel_bytes.Add(bytes);
  b.n = 0;
}

void PushKernel(TxBuffer& b, rte_mbuf* m, LoopCounters* counters) {
  if (b.n == kTxCapacity) FlushKernel(b, counters);
  b.frames[b.n++] = m;
}

// Hands a frame (ARP reply, neighbour advertisement) to the control thread,
// which learns next-hop MACs from it and frees it.
bool ToControl(const WorkerContext& c, rte_mbuf* m) {
  if (rte_ring_mp_enqueue(c.to_control, m) != 0) {
    c.counters->control_full.Add(1);
    return false;
  }
  c.counters->to_control.Add(1);
  return true;
}

// The TX buffers of one worker: the front port's, two-arm the backend
// port's, and the kernel interface's if there is one.
struct TxSet {
  TxBuffer front;
  TxBuffer backend_side;
  TxBuffer kernel;
  bool two_arm = false;
  bool has_kernel = false;
  TxBuffer& to_backends() { return two_arm ? backend_side : front; }
  // Frames queued toward the ports so far (backend_side's stay 0 one-arm).
  uint64_t queued() const { return front.queued() + backend_side.queued(); }
  // Replies leave by the port their request came in on.
  TxBuffer& back(uint16_t rx_port) { return two_arm && rx_port == backend_side.port ? backend_side : front; }
};

// Hands an ICMP error to the worker that owns its flow; a full ring drops it.
bool Steer(const WorkerContext& c, rte_mbuf* m, uint16_t to) {
  if (rte_ring_mp_enqueue(c.steer_rings[to], m) != 0) {
    c.counters->steer_full.Add(1);
    return false;
  }
  return true;
}

// Room for a burst's PacketRefs, left uninitialised: Admit writes each one
// in full (a default-constructed array cost a 768-byte memset and a store
// per slot every burst, for slots Admit overwrites anyway).
struct BurstRefs {
  union {
    PacketRef at[kRxBurst];
  };
  BurstRefs() {}
};

// A received frame for the pipeline: single-segment, with a snapshot to
// read it against (else counted, and the caller drops it).
inline bool Admit(const WorkerContext& c, rte_mbuf* m, const LbState* state, PacketRef* r) {
  if (m->nb_segs != 1 || state == nullptr) [[unlikely]] {
    (m->nb_segs != 1 ? c.counters->rx_multiseg : c.counters->no_snapshot).Add(1);
    return false;
  }
  // Field by field into the slot: built in a local and copied, it was
  // stored narrow and reloaded as one wide load (a failed store forward
  // per frame).
  new (r) PacketRef();  // the outputs at their defaults
  r->data = rte_pktmbuf_mtod(m, uint8_t*);
  r->len = rte_pktmbuf_data_len(m);
  r->headroom = rte_pktmbuf_headroom(m);
  r->tailroom = rte_pktmbuf_tailroom(m);
  return true;
}

// The mbuf holds the frame the pipeline left: r.out_len bytes at r.offset.
inline void TakeOutFrame(rte_mbuf* m, const PacketRef& r) {
  m->data_off = static_cast<uint16_t>(m->data_off + r.offset);
  m->data_len = r.out_len;
  m->pkt_len = r.out_len;
}

// The frames the pipeline built for `r` (PacketAction::kExtra: fragments),
// copied into buffers of their own; one that gets no buffer is counted lost.
void PushExtraFrames(const WorkerContext& c, const PacketRef& r, TxBuffer& to) {
  std::span<const ExtraFrame> extra = c.worker->extra_frames();
  for (uint16_t k = 0; k < r.extra_count; ++k) {
    const ExtraFrame& e = extra[r.extra_first + k];
    rte_mbuf* f = rte_pktmbuf_alloc(c.pool);
    char* dst = f != nullptr ? rte_pktmbuf_append(f, e.len) : nullptr;
    if (dst == nullptr) {
      if (f != nullptr) rte_pktmbuf_free(f);
      c.counters->extra_alloc_fail.Add(1);
      continue;
    }
    std::memcpy(dst, e.data, e.len);
    RequestTxOffload(f, e.tx_offload);
    Push(to, f, c.counters);  // of the worker's pool, refcnt 1: fit for a fast-free queue
  }
}

// Runs `n` frames through the pipeline and sends each where its action says.
// `rx_port`: where they came in; kSteeredIn: frames another worker handed
// over, each marked with its port in m->port by that worker. `rx_tsc`: the
// start of the pass that received them (the pipeline's clock: conntrack times).
constexpr uint16_t kSteeredIn = UINT16_MAX;
void Process(const WorkerContext& c, rte_mbuf** in, uint16_t n, const LbState* state, uint16_t rx_port,
             TxSet& tx, uint64_t rx_tsc) {
  const bool steered = rx_port == kSteeredIn;
  // Buffers of another pool than the worker's: the backend port's, or
  // either port's (handed over by another worker).
  const bool maybe_foreign = rx_port != c.port_id;
  rte_mbuf* kept[kRxBurst];
  rte_mbuf* drop[kRxBurst];
  BurstRefs burst;
  PacketRef* const refs = burst.at;
  RxChecksum ip_checksum[kRxBurst];
  uint16_t np = 0, ndrop = 0;
  if (state == nullptr) [[unlikely]] {
    // Before the first snapshot: each frame counted (Admit) and dropped.
    // Tested once here, so that Admit's test of it folds away below.
    for (uint16_t i = 0; i < n; ++i) (void)Admit(c, in[i], state, &refs[0]);
    rte_pktmbuf_free_bulk(in, n);
    return;
  }
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = in[i];
    if (!Admit(c, m, state, &refs[np])) {
      drop[ndrop++] = m;
      continue;
    }
    ip_checksum[np] = RxIpChecksum(m->ol_flags, m->packet_type);
    kept[np++] = m;
  }
  if (np > 0) {
    if (steered) [[unlikely]] {
      c.worker->ProcessSteered(refs, np, *state, TscToMonotonicNs(rx_tsc));
    } else {
      c.worker->ProcessBurst(refs, np, *state, TscToMonotonicNs(rx_tsc), ip_checksum);
    }
  }
  TxBuffer& to_backends = tx.to_backends();
  // Per burst, in a register (the stores to the mbufs below could alias
  // what it is computed from).
  const bool check_pool = maybe_foreign && to_backends.fast_free;
  for (uint16_t i = 0; i < np; ++i) {
    rte_mbuf* m = kept[i];
    const PacketRef& r = refs[i];
    // Nearly every frame: tested before the switch, whose jump table costs
    // an indirect branch per frame.
    if (r.action == PacketAction::kTransmit) [[likely]] {
      TakeOutFrame(m, r);
      RequestTxOffload(m, r.tx_offload);
      PushFrame(c, to_backends, m, check_pool);
      continue;
    }
    switch (r.action) {
      case PacketAction::kTransmit:  // (above)
        break;
      case PacketAction::kReply:
      case PacketAction::kFromKernel:  // (ProcessFromKernel's only)
        TakeOutFrame(m, r);
        PushFrame(c, tx.back(steered ? m->port : rx_port), m, maybe_foreign);
        break;
      case PacketAction::kExtra:
        // Fragments of a datagram too big for the tunnel, toward its backend.
        PushExtraFrames(c, r, to_backends);
        drop[ndrop++] = m;
        break;
      case PacketAction::kToControl:
        if (!ToControl(c, m)) drop[ndrop++] = m;
        break;
      case PacketAction::kToKernel:
        if (tx.has_kernel) {
          PushKernel(tx.kernel, m, c.counters);
        } else {
          c.counters->kernel_full.Add(1);  // no queue to take it (not reached: the snapshot says so)
          drop[ndrop++] = m;
        }
        break;
      case PacketAction::kToControlAndKernel:
        // Both stacks learn the neighbour from the same answer.
        if (tx.has_kernel) {
          rte_mbuf* copy = rte_pktmbuf_copy(m, c.pool, 0, UINT32_MAX);
          if (copy != nullptr) {
            PushKernel(tx.kernel, copy, c.counters);
          } else {
            c.counters->extra_alloc_fail.Add(1);
          }
        }
        if (!ToControl(c, m)) drop[ndrop++] = m;
        break;
      case PacketAction::kSteer:
        m->port = rx_port;  // its replies, if any, leave by this port
        if (!Steer(c, m, r.steer_to)) drop[ndrop++] = m;
        break;
      case PacketAction::kDrop:
        drop[ndrop++] = m;
        break;
    }
  }
  if (ndrop > 0) rte_pktmbuf_free_bulk(drop, ndrop);
}

// One RX burst from `rx_port` through the pipeline, received in the pass
// that started at `pass_tsc` (the pipeline's clock). Returns how many frames
// came in; adds those it queued for the wire to `queued_frames`.
uint16_t Serve(const WorkerContext& c, uint16_t rx_port, const LbState* state, TxSet& tx, uint64_t pass_tsc,
               uint64_t& queued_frames) {
  rte_mbuf* rx[kRxBurst];
  uint16_t n = rte_eth_rx_burst(rx_port, c.queue, rx, kRxBurst);
  if (n == 0) return 0;
  const uint64_t queued = tx.queued();
  Process(c, rx, n, state, rx_port, tx, pass_tsc);
  queued_frames += tx.queued() - queued;
  return n;
}

// The frames a pass queued for the wire, from its start to the next pass's
// (LoopCounters::latency).
struct PassMark {
  uint64_t tsc = 0;
  uint64_t frames = 0;
};
inline void RecordLatency(const WorkerContext& c, const TscToNs& to_ns, uint64_t end_tsc, const PassMark& pass) {
  if (pass.frames != 0) c.counters->latency.Record(to_ns.Between(pass.tsc, end_tsc), pass.frames);
}

// What the kernel interface sent: out by the front port unchanged, tunnel
// probes toward their backend, an ICMP error about a too-big probe back up.
uint16_t ServeKernel(const WorkerContext& c, const LbState* state, TxSet& tx, uint64_t pass_tsc) {
  rte_mbuf* in[kRxBurst];
  const uint16_t n = rte_eth_rx_burst(static_cast<uint16_t>(c.kernel_port_id), c.queue, in, kRxBurst);
  if (n == 0) return 0;
  rte_mbuf* kept[kRxBurst];
  rte_mbuf* drop[kRxBurst];
  BurstRefs burst;
  PacketRef* const refs = burst.at;
  uint16_t np = 0, ndrop = 0;
  uint64_t bytes = 0;
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = in[i];
    bytes += rte_pktmbuf_pkt_len(m);
    if (!Admit(c, m, state, &refs[np])) {
      drop[ndrop++] = m;
      continue;
    }
    kept[np++] = m;
  }
  c.counters->from_kernel.Add(n);
  c.counters->from_kernel_bytes.Add(bytes);
  if (np > 0) c.worker->ProcessFromKernel(refs, np, *state, TscToMonotonicNs(pass_tsc), c.tunnel_probes);
  for (uint16_t i = 0; i < np; ++i) {
    rte_mbuf* m = kept[i];
    const PacketRef& r = refs[i];
    switch (r.action) {
      case PacketAction::kFromKernel:
      case PacketAction::kTransmit:
      case PacketAction::kReply:
        TakeOutFrame(m, r);
        if (r.action == PacketAction::kReply) {
          PushKernel(tx.kernel, m, c.counters);
        } else if (r.action == PacketAction::kTransmit) {
          RequestTxOffload(m, r.tx_offload);
          PushFrame(c, tx.to_backends(), m, /*maybe_foreign=*/true);  // of the kernel interface's pool
        } else {
          PushFrame(c, tx.front, m, /*maybe_foreign=*/true);
        }
        break;
      case PacketAction::kExtra: {
        // A probe too big for the tunnel without DF: its fragments.
        PushExtraFrames(c, r, tx.to_backends());
        drop[ndrop++] = m;
        break;
      }
      case PacketAction::kToControl:
      case PacketAction::kToControlAndKernel:
      case PacketAction::kToKernel:
      case PacketAction::kSteer:
      case PacketAction::kDrop:  // counted by the pipeline (the others are not ProcessFromKernel's)
        drop[ndrop++] = m;
        break;
    }
  }
  if (ndrop > 0) rte_pktmbuf_free_bulk(drop, ndrop);
  return n;
}

// ICMP errors other workers handed to this one.
uint16_t ServeSteered(const WorkerContext& c, const LbState* state, TxSet& tx, uint64_t pass_tsc) {
  rte_mbuf* in[kRxBurst];
  unsigned n = rte_ring_sc_dequeue_burst(c.steer_rings[c.index], reinterpret_cast<void**>(in), kRxBurst,
                                         nullptr);
  if (n == 0) return 0;
  Process(c, in, static_cast<uint16_t>(n), state, kSteeredIn, tx, pass_tsc);
  return static_cast<uint16_t>(n);
}

}  // namespace

uint64_t TscToMonotonicNs(uint64_t tsc) {
  static const uint64_t hz = rte_get_tsc_hz();
  return static_cast<uint64_t>(static_cast<unsigned __int128>(tsc) * 1'000'000'000u / hz);
}

uint64_t NowNs() { return TscToMonotonicNs(rte_rdtsc()); }

int WorkerMain(void* arg) {
  WorkerContext& c = *static_cast<WorkerContext*>(arg);
  c.publisher->ReaderOnline(c.index);
  const bool two_arm = c.backend_port_id != c.port_id;
  const bool steering = c.rss_owner != nullptr && c.steer_rings != nullptr;
  if (steering) c.worker->SetRssOwner(c.rss_owner, c.index);
  c.worker->SetProbeTable(c.tunnel_probes);
  c.worker->SetTxOuterIpv4Checksum(c.backend_tx_ipv4_checksum);
  const bool has_kernel = c.kernel_port_id >= 0;
  TxSet tx{{c.port_id, c.queue, 0, 0, c.front_fast_free, {}},
           {c.backend_port_id, c.queue, 0, 0, c.backend_fast_free, {}},
           {static_cast<uint16_t>(has_kernel ? c.kernel_port_id : 0), c.queue, 0, 0, false, {}},
           two_arm,
           has_kernel};
  const TscToNs tsc_to_ns(rte_get_tsc_hz());
  uint32_t idle = 0;
  (void)NowNs();  // initialise the TSC rate outside the loop
  const uint64_t kernel_poll_cycles = kKernelPollIntervalNs * rte_get_tsc_hz() / 1'000'000'000u;
  uint64_t kernel_polled = 0;  // TSC of the last poll
  // Kept in registers and stored each pass: a Counter::Add per pass (load,
  // add, store on the same line) cost ~2 ns a pass, two plain stores ~0.3 ns.
  uint64_t polls = c.counters->polls.value(), busy_polls = c.counters->busy_polls.value();

  // The one TSC read of a pass, at its start: the pipeline's clock, the
  // start of the latency of the frames the pass receives, and the end of
  // that of the frames the pass before sent (only the RCU quiescent mark and
  // the poll counters' stores lie between its last TX burst and this read).
  PassMark sent;  // by the pass before
  while (!c.stop->load(std::memory_order_relaxed)) {
    const uint64_t pass_tsc = rte_rdtsc();
    RecordLatency(c, tsc_to_ns, pass_tsc, sent);
    sent = {pass_tsc, 0};
    const LbState* state = c.publisher->Current();
    uint16_t got = Serve(c, c.port_id, state, tx, pass_tsc, sent.frames);
    if (two_arm) got = static_cast<uint16_t>(got + Serve(c, c.backend_port_id, state, tx, pass_tsc, sent.frames));
    if (steering) got = static_cast<uint16_t>(got + ServeSteered(c, state, tx, pass_tsc));
    // Frames the control thread wants on the wire: ARP / ND requests for
    // next hops, which live on the backend side.
    if (c.from_control != nullptr) {
      rte_mbuf* ctl[kRxBurst];
      unsigned k = rte_ring_sc_dequeue_burst(c.from_control, reinterpret_cast<void**>(ctl), kRxBurst,
                                             nullptr);
      c.counters->control_sent.Add(k);
      // Of the front port's pool (NeighborTask), checked all the same.
      for (unsigned i = 0; i < k; ++i) PushFrame(c, tx.to_backends(), ctl[i], /*maybe_foreign=*/true);
    }
    if (has_kernel) {
      // Not every pass (worker_loop.h): each frame read is a system call.
      if (got == 0 || pass_tsc - kernel_polled >= kernel_poll_cycles) {
        kernel_polled = pass_tsc;
        got = static_cast<uint16_t>(got + ServeKernel(c, state, tx, pass_tsc));
      }
      FlushKernel(tx.kernel, c.counters);
    }
    Flush(tx.front, c.counters);
    if (two_arm) Flush(tx.backend_side, c.counters);
    c.publisher->Quiescent(c.index);
    busy_polls += got != 0;
    c.counters->polls.Set(++polls);
    c.counters->busy_polls.Set(busy_polls);
    if (got == 0 && c.idle_sleep_us > 0 && ++idle >= kIdlePassesBeforeSleep) {
      rte_delay_us_sleep(c.idle_sleep_us);  // test mode only: share a small machine
    } else if (got != 0) {
      idle = 0;
    }
  }
  RecordLatency(c, tsc_to_ns, rte_rdtsc(), sent);  // the last pass's
  // Frames still in this worker's steering ring are freed by SteerRings.
  c.publisher->ReaderOffline(c.index);
  return 0;
}

absl::StatusOr<std::unique_ptr<SteerRings>> SteerRings::Create(uint32_t workers, int socket) {
  std::unique_ptr<SteerRings> r(new SteerRings());
  for (uint32_t i = 0; i < workers; ++i) {
    char name[RTE_RING_NAMESIZE];
    std::snprintf(name, sizeof(name), "maglb_steer_%u", i);
    rte_ring* ring = rte_ring_create(name, kSteerRingSize, socket, RING_F_SC_DEQ);
    if (ring == nullptr) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "cannot create the ICMP steering ring of worker %u: %s", i, rte_strerror(rte_errno)));
    }
    r->rings_.push_back(ring);
  }
  return r;
}

SteerRings::~SteerRings() {
  // Workers have stopped: free what they left in flight, then the rings.
  for (rte_ring* ring : rings_) {
    void* m;
    while (rte_ring_sc_dequeue(ring, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
    rte_ring_free(ring);
  }
}

}  // namespace maglb
