#include "dataplane/offloads.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace maglb {

namespace {

// The names DPDK's tools print for these offloads, with the direction.
constexpr const char* kRxIpv4Checksum = "rx_ipv4_cksum";
constexpr const char* kTxIpv4Checksum = "tx_ipv4_cksum";
constexpr const char* kFastFree = "mbuf_fast_free";

std::vector<std::string> Names(const PortOffloads& o) {
  std::vector<std::string> n;
  if (o.rx_ipv4_checksum) n.push_back(kRxIpv4Checksum);
  if (o.tx_ipv4_checksum) n.push_back(kTxIpv4Checksum);
  if (o.tx_fast_free) n.push_back(kFastFree);
  return n;
}

}  // namespace

PortOffloads OfferedOffloads(const rte_eth_dev_info& dev) {
  // rx/tx_offload_capa include the per-queue capabilities
  // (rx/tx_queue_offload_capa); a port-level request enables those on
  // every queue.
  PortOffloads o;
  o.rx_ipv4_checksum = (dev.rx_offload_capa & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM) != 0;
  o.tx_ipv4_checksum = (dev.tx_offload_capa & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) != 0;
  o.tx_fast_free = (dev.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE) != 0;
  return o;
}

PortOffloads ChooseOffloads(const rte_eth_dev_info& dev, bool toward_backends) {
  PortOffloads o = OfferedOffloads(dev);
  o.tx_ipv4_checksum = o.tx_ipv4_checksum && toward_backends;
  return o;
}

uint64_t RxOffloadBits(const PortOffloads& o) {
  return o.rx_ipv4_checksum ? RTE_ETH_RX_OFFLOAD_IPV4_CKSUM : 0;
}

uint64_t TxOffloadBits(const PortOffloads& o) {
  return (o.tx_ipv4_checksum ? RTE_ETH_TX_OFFLOAD_IPV4_CKSUM : 0) |
         (o.tx_fast_free ? RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE : 0);
}

std::string OffloadNames(const PortOffloads& o) {
  const std::vector<std::string> n = Names(o);
  return n.empty() ? "none" : absl::StrJoin(n, " ");
}

std::string DescribeOffloads(const PortOffloads& enabled, const PortOffloads& offered) {
  const PortOffloads missing{!offered.rx_ipv4_checksum, !offered.tx_ipv4_checksum, !offered.tx_fast_free};
  std::string s = absl::StrCat("offloads ", OffloadNames(enabled));
  if (missing == PortOffloads{true, true, true}) {
    absl::StrAppend(&s, " (the port offers none of ", OffloadNames(missing), "; checksums in software)");
  } else if (missing != PortOffloads{}) {
    absl::StrAppend(&s, "; not offered: ", OffloadNames(missing));
  }
  // Only the TX checksum is ever left off where offered (ChooseOffloads).
  if (offered.tx_ipv4_checksum && !enabled.tx_ipv4_checksum) {
    absl::StrAppend(&s, "; ", kTxIpv4Checksum, " offered, unused: no encapsulated frame leaves by this port");
  }
  return s;
}

}  // namespace maglb
