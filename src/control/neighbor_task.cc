#include "control/neighbor_task.h"

#include <rte_mbuf.h>
#include <rte_ring.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "control/log.h"
#include "dataplane/worker_loop.h"
#include "maglb/reply.h"

namespace maglb {

namespace {

constexpr unsigned kMaxControlFramesPerPass = 64;

// The backends ("vip/backend") and VIPs whose next hop is `address` (the
// backend itself, or the gateway a tunnel goes through), for the fields of
// a neighbour's log event: who a change reaches. As LbState::ResolveNeighbors
// picks next hops.
struct NextHopUsers {
  std::vector<std::string> vips, backends;
};
NextHopUsers UsersOf(const LbState& state, const IpAddress& address) {
  NextHopUsers out;
  const LbConfig& lb = state.config().lb;
  for (const VipState& v : state.vips()) {
    bool any = false;
    for (const BackendState& b : v.backends) {
      IpAddress next_hop = b.target.backend;
      if (b.target.forwarding != Forwarding::kL2Dsr) {
        const std::optional<IpAddress>& gw = b.target.backend.is_v6 ? lb.gateway_v6 : lb.gateway_v4;
        if (gw.has_value()) next_hop = *gw;
      }
      if (next_hop != address) continue;
      out.backends.push_back(absl::StrCat(v.name, "/", b.name));
      any = true;
    }
    if (any) out.vips.push_back(v.name);
  }
  return out;
}

}  // namespace

void NeighborTask::Pass() {
  const uint64_t now = NowNs();
  HandleControlFrames(now);
  SendRequests(now);
}

absl::Status NeighborTask::Start(EventLoop& loop) {
  // The first pass as soon as the loop runs: the first requests go out at
  // once, before any answer can come.
  loop.AddTimer(std::chrono::nanoseconds(0), [this] { Pass(); });
  loop.AddPeriodic(kNeighborPollInterval, [this] { Pass(); });
  started_ = true;
  return absl::OkStatus();
}

void NeighborTask::Fill(LbStateOptions& options) const {
  // A copy: the table goes on learning while a build reads this.
  auto table = std::make_shared<const NeighborTable>(table_);
  options.resolve = [table](const IpAddress& a) { return table->Lookup(a); };
}

void NeighborTask::ConfigPublished(const LbState& state) {
  table_.SetConfig(state.config());
  // New next hops after a reload: ask at once rather than at the next pass
  // (at start, the first pass asks).
  if (started_) SendRequests(NowNs());
}

bool NeighborTask::Transmit(const uint8_t* frame, size_t len) {
  rte_mbuf* m = rte_pktmbuf_alloc(options_.port.pool);
  if (m == nullptr) return false;
  char* dst = rte_pktmbuf_append(m, static_cast<uint16_t>(len));
  if (dst == nullptr) {
    rte_pktmbuf_free(m);
    return false;
  }
  std::memcpy(dst, frame, len);
  if (rte_ring_sp_enqueue(options_.from_control, m) != 0) {
    rte_pktmbuf_free(m);
    return false;
  }
  return true;
}

void NeighborTask::SendRequests(uint64_t now_ns) {
  const LbState* state = options_.publisher->Current();
  const LbConfig& lb = state->config().lb;
  for (const IpAddress& target : table_.DueRequests(now_ns)) {
    uint8_t frame[128];
    size_t len = 0;
    if (!target.is_v6 && lb.ipv4) {
      len = BuildArpRequest(options_.port.mac, *lb.ipv4, target, frame);
    } else if (target.is_v6 && lb.ipv6) {
      len = BuildNeighborSolicit(options_.port.mac, *lb.ipv6, target, frame);
    }
    if (len == 0) {
      continue;  // no own address of that family: only a static entry can help
    }
    if (Transmit(frame, len)) {
      std::lock_guard<std::mutex> lock(options_.publisher->mutex());
      ++(target.is_v6 ? options_.stats->nd_requests_sent : options_.stats->arp_requests_sent);
    }
  }
}

void NeighborTask::HandleControlFrames(uint64_t now_ns) {
  void* got[kMaxControlFramesPerPass];
  unsigned n = rte_ring_sc_dequeue_burst(options_.to_control, got, kMaxControlFramesPerPass, nullptr);
  if (n == 0) return;
  const LbState* state = options_.publisher->Current();
  bool changed = false;
  for (unsigned i = 0; i < n; ++i) {
    auto* m = static_cast<rte_mbuf*>(got[i]);
    std::span<const uint8_t> frame(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m));
    ParsedPacket p;
    Verdict v = Classify(frame, state->matcher(), state->local(), &p);
    if (v.action == Action::kLocalArp || v.action == Action::kLocalNd) {
      std::optional<NeighborClaim> claim = ReadNeighborClaim(frame, p);
      NeighborOutcome o = claim ? table_.Observe(*claim, now_ns) : NeighborOutcome{};
      if (o.changed) {
        changed = true;
        // What the table now holds: a conflict can undo a resolution.
        const std::optional<MacAddress> now_at = table_.Lookup(claim->address);
        const NextHopUsers users = UsersOf(*state, claim->address);
        LogEvent(now_at ? "neighbor_resolved" : "neighbor_conflict",
                 {{"address", claim->address.ToString()}, {"mac", now_at ? now_at->ToString() : ""},
                  {"vips", users.vips}, {"backends", users.backends}},
                 now_at ? absl::StrFormat("neighbor %s is at %s", claim->address.ToString(), now_at->ToString())
                        : absl::StrFormat("neighbor %s is unresolved (conflicting answers)",
                                          claim->address.ToString()),
                 now_at ? LogLevel::kInfo : LogLevel::kWarning);
      }
      if (!o.log.empty()) LogLine(o.log);
    }
    rte_pktmbuf_free(m);
  }
  {
    std::lock_guard<std::mutex> lock(options_.publisher->mutex());
    options_.stats->control_frames += n;
    if (changed) ++options_.stats->neighbor_updates;
    options_.stats->neighbor_ignored = table_.ignored();
  }
  if (changed) options_.inputs->Changed();  // republished with what was learned
}

}  // namespace maglb
