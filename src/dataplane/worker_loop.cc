#include "dataplane/worker_loop.h"

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <algorithm>
#include <cstring>
#include <span>

namespace maglb {

namespace {

// Idle passes before an (optional) sleep: a busy queue never sleeps.
constexpr uint32_t kIdlePassesBeforeSleep = 64;

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

}  // namespace

uint64_t NowNs() {
  static const uint64_t hz = rte_get_tsc_hz();
  uint64_t tsc = rte_rdtsc();
  return static_cast<uint64_t>(static_cast<unsigned __int128>(tsc) * 1'000'000'000u / hz);
}

int WorkerMain(void* arg) {
  WorkerContext& c = *static_cast<WorkerContext*>(arg);
  c.publisher->ReaderOnline(c.index);
  rte_mbuf* rx[kRxBurst];
  rte_mbuf* tx[kRxBurst * 2];
  rte_mbuf* drop[kRxBurst];
  PacketRef refs[kRxBurst];
  uint32_t idle = 0;
  (void)NowNs();  // initialise the TSC rate outside the loop

  while (!c.stop->load(std::memory_order_relaxed)) {
    const LbState* state = c.publisher->Current();
    uint16_t n = rte_eth_rx_burst(c.port_id, c.queue, rx, kRxBurst);
    uint16_t ntx = 0, ndrop = 0;
    if (n > 0) {
      idle = 0;
      uint16_t np = 0;
      rte_mbuf* kept[kRxBurst];
      for (uint16_t i = 0; i < n; ++i) {
        rte_mbuf* m = rx[i];
        if (m->nb_segs != 1) {
          c.counters->rx_multiseg.Add(1);
          drop[ndrop++] = m;
          continue;
        }
        PacketRef& r = refs[np];
        r = PacketRef{};
        r.data = rte_pktmbuf_mtod(m, uint8_t*);
        r.len = rte_pktmbuf_data_len(m);
        r.headroom = rte_pktmbuf_headroom(m);
        r.tailroom = rte_pktmbuf_tailroom(m);
        kept[np++] = m;
      }
      if (state != nullptr) {
        c.worker->ProcessBurst(refs, np, *state, NowNs());
      }
      for (uint16_t i = 0; i < np; ++i) {
        rte_mbuf* m = kept[i];
        const PacketRef& r = refs[i];
        if (state == nullptr) {
          drop[ndrop++] = m;
          continue;
        }
        switch (r.action) {
          case PacketAction::kTransmit:
          case PacketAction::kReply:
            m->data_off = static_cast<uint16_t>(m->data_off + r.offset);
            m->data_len = r.out_len;
            m->pkt_len = r.out_len;
            tx[ntx++] = m;
            break;
          case PacketAction::kExtra: {
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
              if (ntx == RTE_DIM(tx)) {  // flush: fragments can outnumber the burst
                uint16_t sent = rte_eth_tx_burst(c.port_id, c.queue, tx, ntx);
                if (sent < ntx) {
                  c.counters->tx_full.Add(ntx - sent);
                  rte_pktmbuf_free_bulk(tx + sent, ntx - sent);
                }
                ntx = 0;
              }
              tx[ntx++] = f;
            }
            drop[ndrop++] = m;
            break;
          }
          case PacketAction::kToControl:
            if (!ToControl(c, m)) drop[ndrop++] = m;
            break;
          case PacketAction::kDrop:
            drop[ndrop++] = m;
            break;
        }
      }
    }
    // Frames the control thread wants on the wire (ARP requests, NS).
    if (c.from_control != nullptr && ntx < RTE_DIM(tx)) {
      unsigned got = rte_ring_sc_dequeue_burst(c.from_control, reinterpret_cast<void**>(tx + ntx),
                                               RTE_DIM(tx) - ntx, nullptr);
      c.counters->control_sent.Add(got);
      ntx = static_cast<uint16_t>(ntx + got);
    }
    if (ntx > 0) {
      uint16_t sent = rte_eth_tx_burst(c.port_id, c.queue, tx, ntx);
      if (sent < ntx) {
        c.counters->tx_full.Add(ntx - sent);
        rte_pktmbuf_free_bulk(tx + sent, ntx - sent);
      }
    }
    if (ndrop > 0) rte_pktmbuf_free_bulk(drop, ndrop);
    c.publisher->Quiescent(c.index);
    if (n == 0 && c.idle_sleep_us > 0 && ++idle >= kIdlePassesBeforeSleep) {
      rte_delay_us_sleep(c.idle_sleep_us);  // test mode only: share a small machine
    }
  }
  c.publisher->ReaderOffline(c.index);
  return 0;
}

}  // namespace maglb
