#include "control/controller.h"

#include <poll.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

#include "absl/strings/str_format.h"
#include "control/log.h"
#include "maglb/reply.h"

namespace maglb {

namespace {

// The control loop wakes at least this often to pass ARP/ND frames on and
// ask for unresolved next hops.
constexpr int kPollMs = 10;
constexpr unsigned kMaxControlFramesPerPass = 64;

}  // namespace

Controller::Controller(ControllerOptions options) : options_(std::move(options)) {}

NeighborResolver Controller::Resolver() {
  return [this](const IpAddress& a) { return neighbors_.Lookup(a); };
}

absl::Status Controller::Start(const Config& config) {
  stats_.started_ns = NowNs();
  LbStateOptions opts;
  opts.port_mac = options_.port.mac;
  opts.resolve = Resolver();
  neighbors_.SetConfig(config);
  absl::StatusOr<std::unique_ptr<const LbState>> state = BuildLbState(config, nullptr, opts);
  if (!state.ok()) {
    return absl::Status(state.status().code(),
                        absl::StrFormat("%s: %s", config.source, std::string(state.status().message())));
  }
  options_.publisher->Publish(*std::move(state));
  absl::StatusOr<std::unique_ptr<ReloadBuilder>> builder = ReloadBuilder::Create(options_.build);
  if (!builder.ok()) return builder.status();
  builder_ = *std::move(builder);
  absl::StatusOr<ConfigWatch> watch = ConfigWatch::Create(options_.config_path);
  if (watch.ok()) {
    watch_.emplace(*std::move(watch));
  } else {
    LogLine(absl::StrFormat("warning: %s; reload with SIGHUP only",
                            std::string(watch.status().message())));
  }
  return absl::OkStatus();
}

// Counts and logs a refused reload; the running state stays as it is.
void Controller::RefuseReload(const std::string& why, const std::string& msg,
                              const LbState& current) {
  {
    std::lock_guard<std::mutex> lock(options_.publisher->mutex());
    ++stats_.reloads_refused;
    stats_.last_refusal = msg;
  }
  LogLine(absl::StrFormat("reload (%s) refused: %s; still serving generation %u", why, msg,
                          current.generation()));
}

void Controller::RequestReload(const char* why) {
  ++reload_seq_;
  reload_why_ = why;
  // Started at the end of this pass (triggers of one pass make one build),
  // or after the running build, whose result is then stale.
  build_wanted_ = true;
}

void Controller::StartBuild() {
  build_wanted_ = false;
  const LbState* current = options_.publisher->Current();
  BuildJob job;
  job.seq = reload_seq_;
  job.why = reload_why_;
  job.config_path = options_.config_path;
  // The helper thread reads copies: the control thread may publish (and
  // free) snapshots and learn neighbours meanwhile. Copying shares tables.
  job.previous = std::make_shared<const LbState>(*current);
  auto neighbors = std::make_shared<const NeighborTable>(neighbors_);
  job.options.port_mac = options_.port.mac;
  job.options.resolve = [neighbors](const IpAddress& a) { return neighbors->Lookup(a); };
  build_neighbor_changes_ = neighbor_changes_;
  builder_->Start(std::move(job));
}

void Controller::FinishBuild() {
  std::optional<BuildResult> result = builder_->Take();
  if (!result) return;
  const LbState* current = options_.publisher->Current();
  if (result->job.seq != reload_seq_) {
    // A newer change came while this one was built: only the newest is
    // published (or refused).
    LogLine(absl::StrFormat("reload (%s): superseded by a newer change (%s) while building; "
                            "building that",
                            result->job.why, reload_why_));
    return;  // build_wanted_ is set: the loop starts it
  }
  if (!result->state.ok()) {
    RefuseReload(result->job.why, std::string(result->state.status().message()), *current);
    return;
  }
  std::unique_ptr<const LbState> next = *std::move(result->state);
  // The packet buffers were sized from the MTU at start (port.cc); frames of
  // a larger MTU would not fit them and every one would be dropped.
  const LbConfig& lb = next->config().lb;
  if (options_.port.max_mtu != 0 && lb.mtu > options_.port.max_mtu) {
    RefuseReload(result->job.why,
                 absl::StrFormat("%s:%d: lb.mtu: %u is above %u, the largest MTU the packet "
                                 "buffers sized at start (for mtu %u) hold; raising it needs a "
                                 "restart",
                                 result->job.config_path, lb.mtu_line, lb.mtu,
                                 options_.port.max_mtu, current->config().lb.mtu),
                 *current);
    return;
  }
  if (neighbor_changes_ != build_neighbor_changes_) {
    next = next->WithNeighbors(Resolver());  // learned during the build
  }
  const LbStateChange& change = next->change();
  // Conntrack tables are sized and timed once, at start (no allocation later).
  const ConntrackConfig& a = next->config().conntrack;
  const ConntrackConfig& b = current->config().conntrack;
  bool conntrack_changed = a.capacity != b.capacity ||
                           a.tcp_established_timeout_s != b.tcp_established_timeout_s ||
                           a.tcp_closing_timeout_s != b.tcp_closing_timeout_s ||
                           a.tcp_syn_timeout_s != b.tcp_syn_timeout_s ||
                           a.udp_timeout_s != b.udp_timeout_s || a.proven_protect_s != b.proven_protect_s;
  neighbors_.SetConfig(next->config());
  std::string summary = change.ToString();
  {
    std::lock_guard<std::mutex> lock(options_.publisher->mutex());
    ++stats_.reloads_ok;
    if (change.empty()) ++stats_.reloads_unchanged;
    stats_.last_refusal.clear();
  }
  options_.publisher->Publish(std::move(next));
  LogLine(absl::StrFormat("reload (%s): %s%s", result->job.why, summary,
                          conntrack_changed ? "; [conntrack] changes apply at the next restart" : ""));
  // New next hops: ask at once rather than at the next periodic pass.
  SendNeighborRequests(NowNs());
}

void Controller::RepublishNeighbors() {
  const LbState* current = options_.publisher->Current();
  std::unique_ptr<const LbState> next = current->WithNeighbors(Resolver());
  options_.publisher->Publish(std::move(next));
}

bool Controller::Transmit(const uint8_t* frame, size_t len) {
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

void Controller::SendNeighborRequests(uint64_t now_ns) {
  const LbState* state = options_.publisher->Current();
  const LbConfig& lb = state->config().lb;
  for (const IpAddress& target : neighbors_.DueRequests(now_ns)) {
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
      ++(target.is_v6 ? stats_.nd_requests_sent : stats_.arp_requests_sent);
    }
  }
}

void Controller::HandleControlFrames(uint64_t now_ns) {
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
      NeighborOutcome o = claim ? neighbors_.Observe(*claim, now_ns) : NeighborOutcome{};
      if (o.changed) {
        changed = true;
        // What the table now holds: a conflict can undo a resolution.
        const std::optional<MacAddress> now_at = neighbors_.Lookup(claim->address);
        LogLine(now_at ? absl::StrFormat("neighbor %s is at %s", claim->address.ToString(),
                                         now_at->ToString())
                       : absl::StrFormat("neighbor %s is unresolved (conflicting answers)",
                                         claim->address.ToString()));
      }
      if (!o.log.empty()) LogLine(o.log);
    }
    rte_pktmbuf_free(m);
  }
  {
    std::lock_guard<std::mutex> lock(options_.publisher->mutex());
    stats_.control_frames += n;
    if (changed) ++stats_.neighbor_updates;
    stats_.neighbor_ignored = neighbors_.ignored();
  }
  if (changed) {
    ++neighbor_changes_;
    RepublishNeighbors();
  }
}

std::string Controller::Run() {
  while (true) {
    pollfd fds[3] = {{options_.signal_fd, POLLIN, 0},
                     {watch_ ? watch_->fd() : -1, POLLIN, 0},
                     {builder_->fd(), POLLIN, 0}};
    poll(fds, 3, kPollMs);
    uint64_t now = NowNs();
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo si;
      while (read(options_.signal_fd, &si, sizeof(si)) == sizeof(si)) {
        if (si.ssi_signo == SIGHUP) {
          RequestReload("SIGHUP");
        } else {
          if (builder_->busy() &&
              !builder_->Abandon(std::chrono::milliseconds(kShutdownBuildWaitMs))) {
            LogLine(absl::StrFormat("stopping with a reload (%s) still building: abandoned",
                                    reload_why_));
          }
          return si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM";
        }
      }
    }
    // Every complete write, rename or removal is one reload attempt: a file
    // that is missing or unreadable is refused (logged, counted) like a bad one.
    if (watch_ && (fds[1].revents & POLLIN) && watch_->ConsumeEvents()) {
      RequestReload("file changed");
    }
    if (fds[2].revents & POLLIN) FinishBuild();
    if (build_wanted_ && !builder_->busy()) StartBuild();
    HandleControlFrames(now);
    SendNeighborRequests(now);
  }
}

}  // namespace maglb
