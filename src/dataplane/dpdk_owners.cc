#include "dataplane/dpdk_owners.h"

#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

namespace maglb {

void MempoolFree::operator()(rte_mempool* pool) const { rte_mempool_free(pool); }

void MbufRingFree::operator()(rte_ring* ring) const {
  // The ring may be single-consumer: its consumers have stopped by now.
  void* m;
  while (rte_ring_sc_dequeue(ring, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
  rte_ring_free(ring);
}

}  // namespace maglb
