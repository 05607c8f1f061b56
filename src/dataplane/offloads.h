// The NIC offloads of a data port: which SetUpPort enables (ChooseOffloads,
// from the port's capabilities), and the per-frame glue of the worker loop.
// The core stays DPDK-free: it learns plain flags (Worker::
// SetTxOuterIpv4Checksum) and says per frame what it left to the NIC
// (PacketRef::tx_offload, ExtraFrame::tx_offload).
//
//  - RX IPv4 header checksum (RTE_ETH_RX_OFFLOAD_IPV4_CKSUM), on every data
//    port that offers it: the NIC's verdict reaches Classify as RxChecksum
//    (RxIpChecksum); what the NIC leaves unknown is verified in software.
//  - TX IPv4 header checksum (RTE_ETH_TX_OFFLOAD_IPV4_CKSUM), on the port
//    toward backends (one-arm: the only one): the outer IPv4 header that
//    Encapsulate writes (GRE or IPIP to an IPv4 backend, fragments included)
//    leaves with its checksum field 0, RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM,
//    l2_len 14 and l3_len 20 (RequestTxOffload), and the NIC fills it in.
//    Inner headers are never offloaded: they are the client's, or a
//    fragment's, checksummed in software, and no tunnel flag tells the NIC
//    to look inside. IPv6 outer headers have no checksum; L2 DSR frames have
//    no outer header; replies (ARP, ND, ICMP) are rare and built whole in
//    software: none is marked. A capture (capture.h) copies a frame inside
//    rte_eth_tx_burst, before the NIC sees it, so with this offload the
//    captured outer header shows checksum 0, as a capture on a host with
//    checksum offload does (tshark: "unverified" / "incorrect, should be").
//  - MBUF_FAST_FREE (RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE), on every data port
//    that offers it: the PMD returns sent mbufs to the pool of the first one
//    without checking refcnt or pool. So every frame a worker sends on such
//    a queue must be of one pool with refcnt 1: the worker's (WorkerContext::
//    pool, the front port's), which the RX'd frames of the front port,
//    fragments (PushExtraFrames) and the control thread's ARP/ND requests
//    are. Frames of another pool (received on the backend port, two-arm; read
//    from the kernel interface; handed over by another worker) are copied
//    into the worker's pool first (worker_loop.cc InWorkerPool): replies,
//    probes, ICMP errors, VIP traffic arriving on the backend side: rare.
//    The front port's frames skip the check (where a burst came from says
//    whether it may hold such frames). Captures do not touch refcnt: in DPDK
//    22.11 rte_pdump copies (rte_pktmbuf_copy / rte_pcapng_copy), never
//    clones. The kernel interface's queue (net_tap) takes frames of every
//    pool and is never set up with it.
//
// Cost where it is not offloaded: a predictable branch per frame in the
// pipeline (which Forward body, encap.h ForwardAs) and one in the loop
// (RequestTxOffload); the outer checksum is computed as before.
// On some PMDs (ixgbe, i40e) enabling a TX checksum offload moves TX from
// their vector path to the full-featured one; the software checksum costs
// ~1 ns a packet, so measure on the NIC at hand.
#ifndef MAGLB_DATAPLANE_OFFLOADS_H_
#define MAGLB_DATAPLANE_OFFLOADS_H_

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <string>

#include "maglb/encap.h"
#include "maglb/packet.h"

namespace maglb {

/// The offloads a data port uses (or, as PortInfo::offered, that it offers
/// of those maglb can use).
struct PortOffloads {
  bool rx_ipv4_checksum = false;
  bool tx_ipv4_checksum = false;
  bool tx_fast_free = false;
  bool operator==(const PortOffloads&) const = default;
};

/// Of the offloads above, those `dev` offers (port or queue capability).
PortOffloads OfferedOffloads(const rte_eth_dev_info& dev);

/// Those SetUpPort enables on a port with `dev`'s capabilities.
/// `toward_backends`: encapsulated frames leave by it (one-arm: the only
/// port; two-arm: the backend port); elsewhere the TX checksum has no frame
/// to work on, and is left off (it can slow a PMD's TX path).
PortOffloads ChooseOffloads(const rte_eth_dev_info& dev, bool toward_backends);

/// The RTE_ETH_*_OFFLOAD_* bits of `o`, for rte_eth_conf.
uint64_t RxOffloadBits(const PortOffloads& o);
uint64_t TxOffloadBits(const PortOffloads& o);

/// "rx_ipv4_cksum tx_ipv4_cksum mbuf_fast_free", or "none".
std::string OffloadNames(const PortOffloads& o);

/// One line for the log: what is enabled, what the port does not offer
/// (done in software), what it offers that this port does not use.
std::string DescribeOffloads(const PortOffloads& enabled, const PortOffloads& offered);

/// The NIC's verdict on a received frame's IPv4 header checksum, for the
/// DPDK-free core. CKSUM_NONE: the header's integrity was verified though
/// the field is not valid in the data (a PMD that checked, then stripped it).
/// A frame the NIC parsed as a tunnel (packet_type): its RX_IP_CKSUM flags
/// are about the inner header, not the outer one Classify checks, so only
/// RX_OUTER_IP_CKSUM_BAD counts; otherwise unknown (verified in software).
inline RxChecksum RxIpChecksum(uint64_t ol_flags, uint32_t packet_type) {
  if ((packet_type & RTE_PTYPE_TUNNEL_MASK) != 0) [[unlikely]] {
    return (ol_flags & RTE_MBUF_F_RX_OUTER_IP_CKSUM_BAD) != 0 ? RxChecksum::kBad : RxChecksum::kUnknown;
  }
  switch (ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) {
    case RTE_MBUF_F_RX_IP_CKSUM_GOOD:
    case RTE_MBUF_F_RX_IP_CKSUM_NONE:
      return RxChecksum::kGood;
    case RTE_MBUF_F_RX_IP_CKSUM_BAD:
      return RxChecksum::kBad;
    default:
      return RxChecksum::kUnknown;
  }
}

/// Marks `m` for the work the pipeline left to the NIC (`tx_offload`, bits
/// of kTxOffload*; 0: nothing). The outer IPv4 header is where Encapsulate
/// writes it: after an untagged Ethernet header, without options.
inline void RequestTxOffload(rte_mbuf* m, uint8_t tx_offload) {
  if ((tx_offload & kTxOffloadOuterIpv4Checksum) != 0) {
    m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM;
    m->tx_offload = rte_mbuf_tx_offload(kEthernetHeaderLen, kIpv4HeaderLen, 0, 0, 0, 0, 0);
  }
}

}  // namespace maglb

#endif  // MAGLB_DATAPLANE_OFFLOADS_H_
