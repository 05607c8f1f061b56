// Owners of DPDK objects that have a plain create/free pair: each frees its
// object when it goes out of scope, so that every exit path releases it.
#ifndef MAGLB_DATAPLANE_DPDK_OWNERS_H_
#define MAGLB_DATAPLANE_DPDK_OWNERS_H_

#include <memory>

struct rte_mempool;
struct rte_ring;

namespace maglb {

struct MempoolFree {
  void operator()(rte_mempool* pool) const;
};
/// rte_mempool_free on destruction. Free it only once nothing holds its
/// buffers any more (the port using it is closed, its rings are drained).
using UniqueMempool = std::unique_ptr<rte_mempool, MempoolFree>;

struct MbufRingFree {
  void operator()(rte_ring* ring) const;
};
/// A ring of mbufs: on destruction frees the mbufs left in it, then the ring
/// (rte_ring_free). Destroy it after its producers and consumers have stopped
/// and before the pool of its mbufs is freed.
using UniqueMbufRing = std::unique_ptr<rte_ring, MbufRingFree>;

}  // namespace maglb

#endif  // MAGLB_DATAPLANE_DPDK_OWNERS_H_
