#include "control/announce_task.h"

#include <net/if.h>

#include <chrono>
#include <utility>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "control/log.h"

namespace maglb {
namespace {

// (MonotonicNs: control/reload_timing.h, through control_stats.h.)
uint64_t WallMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

AnnounceTask::AnnounceTask(Options options) : options_(std::move(options)) {}

bool AnnounceTask::enabled() const {
  const LbState* state = options_.publisher->Current();
  return state != nullptr && state->config().announce.enabled() && ifindex_ > 0;
}

absl::Status AnnounceTask::Start(EventLoop& loop) {
  loop_ = &loop;
  const LbState* state = options_.publisher->Current();
  const AnnounceConfig& config = state->config().announce;
  if (options_.kernel_interface.empty()) return absl::OkStatus();  // config refuses [announce] then
  absl::StatusOr<Rtnetlink> netlink = Rtnetlink::Open();
  if (!netlink.ok()) {
    return absl::Status(netlink.status().code(),
                        absl::StrCat("announce: ", netlink.status().message()));
  }
  netlink_.emplace(*std::move(netlink));
  ifindex_ = static_cast<int>(if_nametoindex(options_.kernel_interface.c_str()));
  if (ifindex_ <= 0) {
    return absl::NotFoundError(absl::StrFormat("announce: no kernel interface %s to put VIP routes on",
                                               options_.kernel_interface));
  }
  if (config.enabled()) {
    // Routes of an earlier run on an interface that outlived it (they go with
    // a tap, but not with every kind of interface): only ours, by protocol.
    absl::StatusOr<int> flushed = netlink_->FlushRoutes(config.table, config.route_protocol);
    if (!flushed.ok()) {
      return absl::Status(flushed.status().code(),
                          absl::StrFormat("%s:%d: [announce] table %u: %s", state->config().source,
                                          config.line, config.table, flushed.status().message()));
    }
    if (*flushed > 0) {
      LogEvent("announce_flush", {{"table", config.table}, {"routes", *flushed}, {"reason", "stale routes"}},
               absl::StrFormat("announce: deleted %d stale route%s of protocol %u from table %u", *flushed,
                               *flushed == 1 ? "" : "s", config.route_protocol, config.table));
    }
    LogLine(absl::StrFormat(
        "announce: VIP routes go to table %u (protocol %u) on %s once the workers run and a VIP has "
        "a serving backend; checked every %u ms, workers stalled after %u ms, drain %u s",
        config.table, config.route_protocol, options_.kernel_interface, config.interval_ms,
        config.stall_ms, config.drain_s));
  }
  table_ = config.table;
  protocol_ = config.route_protocol;
  watch_.Configure(config);
  if (absl::Status s = watch_.Start(options_.publisher); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("announce: ", s.message()));
  }
  // Even when [announce] is off: a reload may turn it on.
  RearmTimer(config.enabled() ? config.interval_ms : 1000);
  if (config.enabled()) PublishStatus({}, "starting", config.table);
  return absl::OkStatus();
}

void AnnounceTask::RearmTimer(uint32_t interval_ms) {
  if (timer_interval_ms_ == interval_ms) return;
  if (timer_ != 0) loop_->CancelTimer(timer_);
  timer_interval_ms_ = interval_ms;
  timer_ = loop_->AddPeriodic(std::chrono::milliseconds(interval_ms), [this] { Tick(); });
}

absl::Status AnnounceTask::StallWatch::Start(SnapshotPublisher* publisher) {
  publisher_ = publisher;
  absl::StatusOr<Rtnetlink> netlink = Rtnetlink::Open();
  if (!netlink.ok()) return netlink.status();
  netlink_.emplace(*std::move(netlink));
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void AnnounceTask::StallWatch::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void AnnounceTask::StallWatch::Configure(const AnnounceConfig& config) {
  std::lock_guard<std::mutex> lock(mu_);
  config_ = config;
}

void AnnounceTask::StallWatch::Run() {
  bool pending = false;
  bool started_all_online = false;  // the pending round began with every worker online
  uint64_t token = 0, started_ns = 0;
  bool logged = false;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    const AnnounceConfig config = config_;
    lock.unlock();
    const uint64_t now = MonotonicNs();
    if (pending && publisher_->LivenessRoundPassed(token)) {
      pending = false;
      // A round passes with no worker online too, and a worker coming online
      // takes the current token: only a round that began with all of them
      // online proves that each passed a quiescent point.
      if (started_all_online) ever_live_ = true;
    }
    const uint64_t stalled_ms = pending ? (now - started_ns) / 1'000'000 : 0;
    if (!pending) {
      started_all_online = publisher_->ReadersRegistered() == publisher_->readers();
      token = publisher_->StartLivenessRound();
      started_ns = now;
      pending = true;
    }
    stalled_ms_ = stalled_ms;
    const bool stalled = ever_live_ && config.enabled() && stalled_ms > config.stall_ms;
    stalled_ = stalled;
    if (stalled) {
      // Every interval while it lasts: the loop may add a route it decided
      // on just before the stall.
      absl::StatusOr<int> flushed = netlink_->FlushRoutes(config.table, config.route_protocol);
      if (flushed.ok() && *flushed > 0) ++flushes_;
      if (!logged) {
        LogEvent("announce_stalled", {{"table", config.table}, {"stalled_ms", stalled_ms}},
                 absl::StrFormat("announce: workers stalled: no quiescent point for %u ms (stall_ms %u): "
                                 "every VIP withdrawn (%s)",
                                 stalled_ms, config.stall_ms,
                                 flushed.ok() ? absl::StrCat(*flushed, " routes deleted")
                                              : std::string(flushed.status().message())),
                 LogLevel::kError);
        logged = true;
      }
    } else if (logged) {
      LogEvent("announce_resumed", {{"table", config.table}}, "announce: workers pass their quiescent points again");
      logged = false;
    }
    lock.lock();
    wake_.wait_for(lock, std::chrono::milliseconds(config.enabled() ? config.interval_ms : 100),
                   [this] { return stop_; });
  }
}

AnnounceReadiness AnnounceTask::Readiness(const AnnounceConfig&) {
  AnnounceReadiness r;
  r.draining = draining_;
  r.drain_reason = drain_reason_;
  // Called under the publisher's mutex (Tick), which guards the stats.
  r.first_check_pending = [stats = options_.stats](std::string_view vip, std::string_view backend) {
    auto it = stats->backend_health.find({std::string(vip), std::string(backend)});
    return it != stats->backend_health.end() && it->second.probes == 0;
  };
  r.workers_live = watch_.ever_live() && !watch_.stalled();
  if (!watch_.ever_live()) {
    r.why_not_live = "starting: the workers have not passed a quiescent point yet";
  } else if (!r.workers_live) {
    r.why_not_live = absl::StrFormat("workers stalled: no quiescent point for %u ms", watch_.stalled_ms());
  }
  return r;
}

void AnnounceTask::Tick() {
  const LbState* state = options_.publisher->Current();  // this thread publishes: it stays
  const AnnounceConfig& config = state->config().announce;
  watch_.Configure(config);  // off too: a watch with the old config would flush a table no longer ours
  if (!config.enabled()) {
    if (!installed_.empty()) WithdrawAll("[announce] removed by a reload");
    if (state_ != "off") PublishStatus({}, "off", 0);
    RearmTimer(1000);
    return;
  }
  RearmTimer(config.interval_ms);
  if (const uint64_t flushes = watch_.flushes(); flushes != watch_flushes_seen_) {
    // The watch emptied the table during a stall; a route added just after
    // its dump may have survived: start again from an empty table.
    watch_flushes_seen_ = flushes;
    if (netlink_->FlushRoutes(table_, protocol_).ok()) installed_.clear();
  }
  if (config.table != table_ || config.route_protocol != protocol_) {
    // A reload moved the routes: out of the old table, into the new below;
    // not before the old one is clean (retried every interval). No old table
    // ([announce] off since the start; table 0 names none): the new one is
    // cleaned of an earlier run's routes instead, as Start does.
    if (table_ == 0) {
      table_ = config.table;
      protocol_ = config.route_protocol;
    }
    if (!WithdrawAll(absl::StrFormat("[announce] moved to table %u protocol %u", config.table,
                                     config.route_protocol))) {
      return;
    }
    table_ = config.table;
    protocol_ = config.route_protocol;
  }
  const AnnounceReadiness readiness = Readiness(config);
  std::vector<AddressAnnouncement> decisions;
  {
    std::lock_guard<std::mutex> lock(options_.publisher->mutex());
    decisions = DecideAnnouncements(*state, readiness);
  }
  Apply(decisions, config);
  if (++ticks_ % kRefreshTicks == 0) Refresh();
  const char* status = draining_ ? "draining" : !watch_.ever_live() ? "starting"
                                   : !readiness.workers_live ? "stalled" : "announcing";
  PublishStatus(decisions, status, config.table);
}

void AnnounceTask::Apply(const std::vector<AddressAnnouncement>& decisions, const AnnounceConfig&) {
  std::map<std::string, const AddressAnnouncement*> wanted;
  for (const AddressAnnouncement& d : decisions) {
    wanted[d.Prefix()] = &d;
    vips_of_[d.Prefix()] = d.vips;
  }
  // Withdraw first: an address that no longer serves must leave the router
  // even if an add below fails.
  for (auto it = installed_.begin(); it != installed_.end();) {
    auto w = wanted.find(it->first);
    if (w != wanted.end() && w->second->announce) {
      ++it;
      continue;
    }
    const std::string reason = w == wanted.end() ? "no VIP on it any more" : w->second->reason;
    it = Remove(it->first, it->second, reason) ? installed_.erase(it) : std::next(it);
  }
  for (const AddressAnnouncement& d : decisions) {
    const std::string prefix = d.Prefix();
    if (!d.announce || installed_.count(prefix)) continue;
    Route route{d.address, d.prefix_len()};
    if (Add(prefix, route, d.reason)) installed_[prefix] = route;
  }
}

void AnnounceTask::Refresh() {
  for (const auto& [prefix, route] : installed_) {
    absl::Status s = netlink_->ReplaceRoute(table_, protocol_, ifindex_, route.address, route.prefix_len);
    if (s.ok()) continue;
    std::lock_guard<std::mutex> lock(options_.publisher->mutex());
    RouteFailed(prefix, "restore", s);
  }
}

// Counts a failed route request and logs it once per distinct error (not
// every interval, where it is retried).
void AnnounceTask::RouteFailed(const std::string& prefix, std::string_view what, const absl::Status& s) {
  ++options_.stats->announce.route_errors;
  const std::string text(s.message());
  if (failing_[prefix] == text) return;
  LogEvent("announce_error", {{"prefix", prefix}, {"vips", vips_of_[prefix]}, {"table", table_}, {"error", text}},
           absl::StrFormat("announce: cannot %s route %s in table %u: %s; retrying every interval", what, prefix,
                           table_, text),
           LogLevel::kError);
  failing_[prefix] = text;
}

bool AnnounceTask::Add(const std::string& prefix, const Route& route, const std::string& reason) {
  absl::Status s = netlink_->ReplaceRoute(table_, protocol_, ifindex_, route.address, route.prefix_len);
  std::lock_guard<std::mutex> lock(options_.publisher->mutex());
  if (!s.ok()) {
    RouteFailed(prefix, "add", s);
    return false;
  }
  failing_.erase(prefix);
  ++options_.stats->announce.route_changes;
  LogEvent("route_announced",
           {{"prefix", prefix}, {"vips", vips_of_[prefix]}, {"table", table_}, {"reason", reason}},
           absl::StrFormat("announce: %s announced (%s)", prefix, reason));
  return true;
}

bool AnnounceTask::Remove(const std::string& prefix, const Route& route, const std::string& reason) {
  absl::Status s = netlink_->DeleteRoute(table_, protocol_, ifindex_, route.address, route.prefix_len);
  std::lock_guard<std::mutex> lock(options_.publisher->mutex());
  if (!s.ok()) {
    RouteFailed(prefix, "delete", s);
    return false;
  }
  failing_.erase(prefix);
  ++options_.stats->announce.route_changes;
  last_withdrawal_ns_ = MonotonicNs();
  LogEvent("route_withdrawn",
           {{"prefix", prefix}, {"vips", vips_of_[prefix]}, {"table", table_}, {"reason", reason}},
           absl::StrFormat("announce: %s withdrawn (%s)", prefix, reason));
  return true;
}

bool AnnounceTask::WithdrawAll(const std::string& reason) {
  for (auto it = installed_.begin(); it != installed_.end();) {
    it = Remove(it->first, it->second, reason) ? installed_.erase(it) : std::next(it);
  }
  // By protocol, whatever installed_ believes: the table holds nothing of ours after this.
  absl::StatusOr<int> flushed = netlink_->FlushRoutes(table_, protocol_);
  if (!flushed.ok()) {
    std::lock_guard<std::mutex> lock(options_.publisher->mutex());
    ++options_.stats->announce.route_errors;
    LogEvent("announce_error", {{"table", table_}, {"error", std::string(flushed.status().message())}},
             absl::StrFormat("announce: cannot flush table %u: %s", table_, flushed.status().message()),
             LogLevel::kError);
    return false;
  }
  if (*flushed > 0) {
    LogEvent("announce_flush", {{"table", table_}, {"routes", *flushed}, {"reason", reason}},
             absl::StrFormat("announce: %d more route%s of ours deleted from table %u (%s)", *flushed,
                             *flushed == 1 ? "" : "s", table_, reason));
  }
  installed_.clear();
  return true;
}

void AnnounceTask::PublishStatus(const std::vector<AddressAnnouncement>& decisions, const std::string& state,
                                 uint32_t table) {
  state_ = state;
  std::lock_guard<std::mutex> lock(options_.publisher->mutex());
  AnnounceStatus& s = options_.stats->announce;
  s.enabled = state != "off";
  s.state = state;
  s.table = table;
  s.prefixes.clear();
  for (const AddressAnnouncement& d : decisions) {
    const std::string prefix = d.Prefix();
    s.prefixes.push_back({prefix, installed_.count(prefix) > 0, d.reason});
  }
}

bool AnnounceTask::AnnouncedRecently() const {
  const LbState* state = options_.publisher->Current();
  const uint64_t drain_ns = uint64_t{state->config().announce.drain_s} * 1'000'000'000;
  return !installed_.empty() || (last_withdrawal_ns_ != 0 && MonotonicNs() - last_withdrawal_ns_ < drain_ns);
}

void AnnounceTask::Drain(const std::string& why, EventLoop::Callback done) {
  const LbState* state = options_.publisher->Current();
  const uint32_t drain_s = state->config().announce.drain_s;
  draining_ = true;
  drain_reason_ = absl::StrCat("draining on ", why);
  {
    std::lock_guard<std::mutex> lock(options_.publisher->mutex());
    options_.stats->announce.drain_until_unix_ms = WallMs() + uint64_t{drain_s} * 1000;
  }
  LogEvent("drain", {{"reason", why}, {"drain_s", drain_s}},
           absl::StrFormat("drain (%s): withdrawing every VIP; forwarding for %u s more, then stopping", why,
                           drain_s));
  Tick();
  if (drain_s == 0) {
    loop_->Post(std::move(done));
  } else {
    loop_->AddTimer(std::chrono::seconds(drain_s), std::move(done));
  }
}

void AnnounceTask::Stop() {
  if (timer_ != 0) loop_->CancelTimer(timer_);  // no Tick may announce after this
  timer_ = 0;
  watch_.Stop();
  if (netlink_ && !installed_.empty()) WithdrawAll("maglb stopping");
}

}  // namespace maglb
