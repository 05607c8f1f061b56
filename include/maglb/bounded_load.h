// Consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam,
// SODA 2018 / arXiv 2016) for new flows: a backend already at its capacity
// passes the new flow on to the next distinct backend in that flow's
// preference order. The pure decision lives here; a VIP opts in with
// `bounded_load_epsilon`.
//
// In the data plane (Worker::BoundedLoadChoice in pipeline.cc) only new flows
// of a VIP with epsilon set are placed this way, each worker against its own
// counts (FlowLoads below: its active flows per backend and per VIP, kept by
// its conntrack). Each worker sees its RSS share of the flows, so the
// bound holds per worker: a backend's flows on a worker stay within
// ceil((1 + epsilon) * that worker's weighted average), hence within about
// (1 + epsilon) of the overall average up to how evenly RSS splits flows.
// Packets of tracked flows never consult it: pinning wins over the bound.
// The preference order is TablePreference's, walked over at most
// kBoundedLoadMaxSlots slots (bounded work per packet); when no backend there
// is below its capacity, the flow takes its first choice and is counted.
#ifndef MAGLB_BOUNDED_LOAD_H_
#define MAGLB_BOUNDED_LOAD_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "maglb/lookup_table.h"

namespace maglb {

/// The smallest epsilon a VIP may set, and the largest: below 0.01 nearly
/// every flow would be passed on, above 10 the bound never binds.
inline constexpr double kMinBoundedLoadEpsilon = 0.01;
inline constexpr double kMaxBoundedLoadEpsilon = 10.0;

/// Table slots that the data plane walks at most, from the flow's own slot,
/// looking for a backend below its capacity. Enough to see every backend of
/// a maglev table of up to ~40 backends in all but a negligible share of
/// walks (a table of N backends shows them all within ~N ln N slots); beyond,
/// the walk sees a sample of the next backends in the same order. The walk
/// only goes this far when nearly every backend is at its capacity.
inline constexpr uint32_t kBoundedLoadMaxSlots = 256;

/// Active flows per backend (indexed as the table's backends) and weights.
/// total_flows and total_weight are the sums, kept by the caller so that a
/// decision costs O(rank), not O(N).
struct LoadView {
  std::span<const uint32_t> active_flows;
  std::span<const uint32_t> weights;  // 0: takes no new flows
  uint64_t total_flows = 0;           // sum of active_flows
  uint64_t total_weight = 0;          // sum of weights
};

/// Capacity of backend b for the next flow: ceil((1 + epsilon) * (F + 1) *
/// w_b / W), F the active flows before this one (Mirrokni et al. average over
/// the flows including the new one). For equal weights, ceil((1+e)(F+1)/N).
uint64_t BoundedLoadCapacity(const LoadView& load, uint32_t backend, double epsilon);
/// The same for a backend of weight `weight`, with `total_flows` F and
/// `total_weight` W: the one formula that analyze and the data plane share.
uint64_t BoundedLoadCapacity(uint64_t total_flows, uint32_t weight, uint64_t total_weight,
                             double epsilon);

struct BoundedLoadChoice {
  uint32_t backend = 0;
  /// Position of `backend` in the preference order: 0 = the first choice.
  uint32_t rank = 0;
  /// False only if no backend in `preference` was below its capacity; then
  /// `backend` is the first choice (a flow is never refused for load).
  bool within_bound = true;
};

/// Picks the first backend of `preference` (distinct backend indices, most
/// preferred first) whose active flows are below its capacity.
///
/// Guarantee: the capacities sum to at least (1 + epsilon)(F + 1) > F, so when
/// `preference` lists every backend of positive weight, one is always below
/// capacity, and the chosen backend ends at most at its capacity. With
/// arrivals only, no backend ever exceeds ceil((1 + epsilon) * average).
/// Established flows never move, so after departures lower the average a
/// backend can sit above the new bound; it then takes no new flow until it
/// is below again. Preference orders: for rendezvous, backends
/// by descending score; for a table (any scheme, maglev included), the
/// backends of the successive slots s, s+1, ... (wrapping) after skipping
/// repeats, from the flow's slot s: see TablePreference.
BoundedLoadChoice BoundedLoadAssign(std::span<const uint32_t> preference, const LoadView& load,
                                    double epsilon);

/// The table's preference order from `slot`: backends of slots slot, slot+1,
/// ... (wrapping), each once, at most `max_backends` of them (all distinct
/// backends that have slots, when max_backends is large enough). Walks at most
/// M slots.
std::vector<uint32_t> TablePreference(const LookupTable& table, uint32_t slot,
                                      size_t max_backends);

/// ConntrackEntry::load_slot of a flow that FlowLoads does not count.
inline constexpr uint32_t kUncountedFlow = 0xFFFFFFFF;

/// Active flows per backend and per VIP on one worker, for bounded loads
/// (above), kept exactly by the conntrack's own events: +1 when a
/// counted flow is inserted for a backend, -1 when its entry leaves that
/// backend (its way reused after expiry, evicted, repinned, removed).
///
/// Expiry is lazy: a flow that went idle still counts until an insert reuses
/// its way. The average that the bound is relative to comes from the same
/// counts, so idle flows inflate a backend's count and the average alike.
///
/// Slots are the backends' counter slots (lb_state.h), which a reload may hand
/// to another backend: a slot belongs to one backend id, and each snapshot
/// that the worker adopts re-registers its backends (Adopt). A slot that
/// changed hands starts from zero; the entries of a backend that is no longer
/// configured (or whose slot went to another) are ignored when they leave; a
/// VIP's total is rebuilt at each adoption as the sum over its current
/// backends, so a removed backend's flows leave the average at once.
class FlowLoads {
 public:
  /// No slots: nothing may be counted (Insert with kUncountedFlow only).
  FlowLoads() = default;
  FlowLoads(uint32_t backend_slots, uint32_t vip_slots);

  /// Adoption of a snapshot: BeginAdoption, then for each VIP AdoptVip and
  /// AdoptBackend for each of its backends. Slots not adopted since the last
  /// BeginAdoption are inert.
  void BeginAdoption() { ++epoch_; }
  void AdoptVip(uint32_t vip_slot) { vip_active_[vip_slot] = 0; }
  void AdoptBackend(uint32_t slot, uint32_t backend_id, uint32_t vip_slot) {
    Cell& c = cells_[slot];
    if (c.owner != backend_id) {
      c.owner = backend_id;
      c.active = 0;
    }
    c.epoch = epoch_;
    c.vip_slot = vip_slot;
    vip_active_[vip_slot] += c.active;
  }

  /// Counted flows of the backend in `slot`, and of the VIP in `vip_slot`.
  uint32_t active(uint32_t slot) const { return cells_[slot].active; }
  uint64_t vip_active(uint32_t vip_slot) const { return vip_active_[vip_slot]; }

  /// A counted flow placed on the backend in `slot` (adopted, current).
  void Add(uint32_t slot) {
    Cell& c = cells_[slot];
    ++c.active;
    ++vip_active_[c.vip_slot];
  }
  /// A counted flow of backend `backend_id` leaves `slot`; ignored when the
  /// slot is not that backend's in the current snapshot.
  void Release(uint32_t slot, uint32_t backend_id) {
    Cell& c = cells_[slot];
    if (c.owner != backend_id || c.epoch != epoch_ || c.active == 0) return;
    --c.active;
    --vip_active_[c.vip_slot];
  }

 private:
  struct Cell {
    uint32_t owner = 0;  // backend id; 0 is never assigned
    uint32_t epoch = 0;  // adoption that last registered this slot
    uint32_t active = 0;
    uint32_t vip_slot = 0;
  };
  std::unique_ptr<Cell[]> cells_;
  std::unique_ptr<uint64_t[]> vip_active_;
  uint32_t epoch_ = 0;
};

}  // namespace maglb

#endif  // MAGLB_BOUNDED_LOAD_H_
