#include "maglb/port_sizing.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace maglb {

uint32_t WantedDescriptors(uint32_t configured, uint32_t pmd_preferred) {
  if (configured != 0) return configured;
  return std::min(std::max(kDefaultDescriptors, pmd_preferred), kMaxDescriptors);
}

std::string PoolPlan::Breakdown(const PoolDemand& d) const {
  return absl::StrFormat(
      "rx %u x %u + tx %u + in flight %u x %u + lcore caches %u x %u + rings %u + margin %u = %u",
      d.rx_queues, d.rx_descriptors, tx, d.workers, d.held_per_worker, d.workers + d.control_lcores,
      MempoolCacheHeld(d.cache_size), rings, margin, computed);
}

absl::StatusOr<PoolPlan> PlanPool(const PoolDemand& d, const PortSizingConfig& sizing,
                                  std::string_view source) {
  PoolPlan p;
  p.rx = uint64_t{d.rx_queues} * d.rx_descriptors;
  p.tx = d.tx_descriptors_total;
  p.in_flight = uint64_t{d.workers} * d.held_per_worker;
  p.caches = (uint64_t{d.workers} + d.control_lcores) * MempoolCacheHeld(d.cache_size);
  p.rings = d.ring_slots;
  const uint64_t sum = p.rx + p.tx + p.in_flight + p.caches + p.rings;
  p.margin = std::max<uint64_t>((sum + 7) / 8, kMinPoolMargin);
  p.computed = sum + p.margin;
  if (sizing.mbufs == 0) {
    if (p.computed > kMaxMbufs) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: its pool would need %u packet buffers (%s), more than maglb makes (%u): lower "
          "[lb] rx_descriptors / tx_descriptors or the worker count",
          d.port, p.computed, p.Breakdown(d), kMaxMbufs));
    }
    p.mbufs = static_cast<uint32_t>(p.computed);
    return p;
  }
  p.configured = true;
  p.mbufs = sizing.mbufs;
  if (sizing.mbufs < p.floor()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s:%d: lb.mbufs: %u packet buffers are too few for %s: its RX rings, the workers' bursts "
        "and the lcore caches alone take %u (rx %u x %u + in flight %u x %u + lcore caches %u x %u); "
        "set at least %u, or 0 for the computed %u",
        source, sizing.mbufs_line, sizing.mbufs, d.port, p.floor(), d.rx_queues, d.rx_descriptors,
        d.workers, d.held_per_worker, d.workers + d.control_lcores, MempoolCacheHeld(d.cache_size),
        p.floor(), p.computed));
  }
  p.below_computed = sizing.mbufs < p.computed;
  return p;
}

}  // namespace maglb
