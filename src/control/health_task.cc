#include "control/health_task.h"

#include <algorithm>
#include <chrono>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "control/log.h"

namespace maglb {

namespace {

// Longest list of changes named in one rebuild's log line.
constexpr size_t kMaxWhyLength = 200;

uint64_t WallMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

std::string_view TypeName(HealthCheckType t) {
  switch (t) {
    case HealthCheckType::kTcp: return "tcp";
    case HealthCheckType::kHttp: return "http";
    case HealthCheckType::kUdp: return "udp";
    case HealthCheckType::kNone: break;
  }
  return "none";
}

}  // namespace

struct HealthTask::Backend {
  Key key;
  uint32_t vip_id = 0;
  uint32_t backend_id = 0;
  IpAddress address;  // the backend's, to notice a change
  HealthCheckConfig check;
  ProbeTarget target;
  std::string cannot_probe;  // why no probe can go out ("" if one can)
  uint32_t configured_weight = 0;
  int tunnel_slot = -1;
  HealthTracker tracker;
  EventLoop::TimerId timer = 0;
  Prober::ProbeId probe = 0;
  uint64_t since_unix_ms = 0;

  Backend(const HealthCheckConfig& c, const HealthSettings& s, uint32_t slow_start_s, HealthStart start,
          uint64_t now)
      : check(c), tracker(c, s, slow_start_s, start, now) {}
};

HealthTask::HealthTask(Options options)
    : options_(std::move(options)),
      inputs_(std::make_shared<const std::map<Key, BackendHealthInput>>()),
      tunnel_ports_used_(kTunnelProbePorts, false),
      jitter_rng_(std::random_device{}()) {}

HealthTask::~HealthTask() { Stop(); }

uint64_t HealthTask::Now() const {
  if (options_.now_ns) return options_.now_ns();
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

absl::Status HealthTask::Start(EventLoop& loop) {
  loop_ = &loop;
  absl::StatusOr<std::unique_ptr<Prober>> prober = Prober::Create(loop);
  if (!prober.ok()) return prober.status();
  prober_ = *std::move(prober);
  // Backends of the first config were adopted before the loop existed.
  for (auto& [key, b] : backends_) ScheduleFirst(*b);
  ArmChangeTimer();
  return absl::OkStatus();
}

void HealthTask::Stop() {
  for (auto& [key, b] : backends_) Forget(*b);
  backends_.clear();
  if (loop_ != nullptr) {
    if (rebuild_timer_ != 0) loop_->CancelTimer(rebuild_timer_);
    if (change_timer_ != 0) loop_->CancelTimer(change_timer_);
  }
  rebuild_timer_ = change_timer_ = 0;
  prober_.reset();
}

void HealthTask::Fill(LbStateOptions& options) const {
  // The map is immutable once handed out: a build on a helper thread reads it
  // while the task goes on.
  std::shared_ptr<const std::map<Key, BackendHealthInput>> inputs = inputs_;
  options.health = [inputs](std::string_view vip, std::string_view backend) -> std::optional<BackendHealthInput> {
    auto it = inputs->find(Key(std::string(vip), std::string(backend)));
    if (it == inputs->end()) return std::nullopt;
    return it->second;
  };
}

void HealthTask::Forget(Backend& b) {
  if (loop_ != nullptr && b.timer != 0) loop_->CancelTimer(b.timer);
  b.timer = 0;
  if (prober_ != nullptr && b.probe != 0) prober_->Cancel(b.probe);
  b.probe = 0;
  if (b.tunnel_slot >= 0) {
    if (options_.tunnel_probes != nullptr) {
      options_.tunnel_probes->Clear(static_cast<uint16_t>(kTunnelProbePortBase + b.tunnel_slot));
    }
    tunnel_ports_used_[b.tunnel_slot] = false;
    b.tunnel_slot = -1;
  }
  if (options_.stats_mutex != nullptr) {
    std::lock_guard<std::mutex> lock(*options_.stats_mutex);
    options_.stats->backend_health.erase(b.key);
  }
}

int HealthTask::TakePortSlot() {
  // A random free slot: which port probes which backend is not predictable
  // from the config's order (a forged reply must also guess the port).
  std::uniform_int_distribution<size_t> pick(0, tunnel_ports_used_.size() - 1);
  const size_t first = pick(jitter_rng_);
  for (size_t i = 0; i < tunnel_ports_used_.size(); ++i) {
    const size_t slot = (first + i) % tunnel_ports_used_.size();
    if (!tunnel_ports_used_[slot]) {
      tunnel_ports_used_[slot] = true;
      return static_cast<int>(slot);
    }
  }
  return -1;
}

int HealthTask::TakeSlotFromDirectProbe() {
  for (auto& [key, other] : backends_) {
    if (other->tunnel_slot < 0 || other->check.via == HealthCheckVia::kTunnel) continue;
    const int slot = other->tunnel_slot;
    options_.tunnel_probes->Clear(static_cast<uint16_t>(kTunnelProbePortBase + slot));
    other->tunnel_slot = -1;
    other->target.source_port = 0;  // from any port from now on
    if (other->probe != 0) {        // bound to the port being handed over
      prober_->Cancel(other->probe);
      other->probe = 0;
    }
    return slot;
  }
  return -1;
}

void HealthTask::ConfigPublished(const LbState& state) {
  const uint64_t now = Now();
  const LbConfig& lb = state.config().lb;
  limiter_.set_interval_ns(uint64_t{state.config().health.rebuild_interval_ms} * 1'000'000);
  // Checks go out over the kernel interface; a daemon started without one
  // cannot check (a reload that adds [kernel] applies at the next restart).
  const bool can_check = options_.tunnel_probes != nullptr;
  // What stays: checked backends of the new config, at the same address.
  std::map<Key, const BackendState*> wanted;
  std::map<std::string, const VipConfig*> checked_vips;
  bool checks_configured = false;
  for (const VipState& v : state.vips()) {
    const VipConfig* vc = state.config().FindVip(v.name);
    if (vc == nullptr || !vc->health_check || vc->health_check->type == HealthCheckType::kNone) continue;
    checks_configured = true;
    if (!can_check) continue;
    checked_vips[v.name] = vc;
    for (const BackendState& bs : v.backends) wanted[Key(v.name, bs.name)] = &bs;
  }
  if (checks_configured && !can_check) {
    LogLine("warning: health checks are configured but maglb started without a kernel interface "
            "([kernel] interface), which they go out through: backends stay unchecked until a restart");
  }
  // Removed first, so that their probe ports are free for newcomers.
  for (auto it = backends_.begin(); it != backends_.end();) {
    auto w = wanted.find(it->first);
    if (w != wanted.end() && it->second->address == w->second->target.backend) {
      ++it;
      continue;
    }
    Forget(*it->second);
    const char* why = w != wanted.end()                      ? "its address changed: checked anew"
                      : checked_vips.contains(it->first.first) ? "backend removed"
                                                             : "no check any more";
    LogEvent("health_check_stopped",
             {{"vip", it->first.first}, {"backend", it->first.second}, {"reason", why}},
             absl::StrFormat("vip %s backend %s: health check stopped (%s)", it->first.first, it->first.second,
                             why));
    it = backends_.erase(it);
  }
  std::map<std::string, VipPolicy> next_vips;
  for (const VipState& v : state.vips()) {
    auto cv = checked_vips.find(v.name);
    if (cv == checked_vips.end()) continue;
    const VipConfig* vc = cv->second;
    const HealthCheckConfig& check = *vc->health_check;
    VipPolicy policy{vc->all_down, vc->down_flows, vc->algorithm != Algorithm::kRing, false};
    if (auto it = vips_.find(v.name); it != vips_.end()) policy.all_down_now = it->second.all_down_now;
    next_vips[v.name] = policy;
    for (const BackendState& bs : v.backends) {
      Key key(v.name, bs.name);
      auto it = backends_.find(key);
      if (it == backends_.end()) {
        // As the snapshot decided (lb_state.h): a newcomer on a serving VIP
        // starts down, everything else up.
        const HealthStart start = !first_config_ && bs.health == BackendHealth::kDown
                                      ? HealthStart::kDownNew
                                      : HealthStart::kUpUnchecked;
        auto b = std::make_unique<Backend>(check, state.config().health, vc->slow_start_s, start, now);
        b->key = key;
        b->address = bs.target.backend;
        b->since_unix_ms = WallMs();
        it = backends_.emplace(key, std::move(b)).first;
      }
      Backend& b = *it->second;
      b.tracker.Reconfigure(check, state.config().health, vc->slow_start_s);
      b.vip_id = v.id;
      b.backend_id = bs.id;
      b.configured_weight = bs.configured_weight;
      // Where its probes go.
      ProbeTarget t;
      t.port = check.port != 0 ? check.port : v.port;
      const IpAddress& dest = check.via == HealthCheckVia::kTunnel ? v.address : bs.target.backend;
      t.destination = dest;
      std::string cannot_probe;
      const std::optional<IpAddress>& source = dest.is_v6 ? lb.ipv6 : lb.ipv4;
      if (source.has_value()) {
        t.source = *source;
      } else {
        cannot_probe = absl::StrFormat("no [lb] %s address to probe from", dest.is_v6 ? "ipv6" : "ipv4");
      }
      if (!check.http_host.empty()) t.host = check.http_host;
      // Every probe binds a port of its own, mapped to the peer it probes
      // (tunnel_probe.h), so that its replies reach the kernel on their own
      // budget; a tunnel probe's port also names its backend, which its
      // frames are encapsulated toward. Tunnel probes need one: when none is
      // free they take a direct probe's (which then uses any port).
      const bool tunnel = check.via == HealthCheckVia::kTunnel;
      if (b.tunnel_slot < 0) b.tunnel_slot = TakePortSlot();
      if (b.tunnel_slot < 0 && tunnel) b.tunnel_slot = TakeSlotFromDirectProbe();
      if (b.tunnel_slot >= 0) {
        t.source_port = static_cast<uint16_t>(kTunnelProbePortBase + b.tunnel_slot);
        options_.tunnel_probes->Clear(t.source_port);
        if (tunnel) options_.tunnel_probes->Set(t.source_port, v.id, bs.id);
        options_.tunnel_probes->SetPeer(t.source_port, dest.bytes.data(), dest.is_v6, t.port);
      } else if (tunnel) {
        cannot_probe = absl::StrFormat("no probe port free (%u tunnel-checked backends at most)", kTunnelProbePorts);
      }
      // A probe in flight toward what was probed before tests the wrong
      // thing; one whose rise, fall or place in the file changed does not.
      auto probe_shape = [](const HealthCheckConfig& c) {
        return std::tie(c.type, c.via, c.timeout_ms, c.http_path, c.http_status, c.http_body_contains,
                        c.http_host, c.udp_payload, c.udp_expect);
      };
      const bool target_changed = !(t.destination == b.target.destination) || t.port != b.target.port ||
                                  t.source_port != b.target.source_port || probe_shape(check) != probe_shape(b.check);
      if (target_changed && b.probe != 0) {
        prober_->Cancel(b.probe);
        b.probe = 0;
      }
      // A new interval applies from now, not after the old one ran out.
      const bool timing_changed = check.interval_ms != b.check.interval_ms ||
                                  check.jitter_percent != b.check.jitter_percent;
      if (timing_changed && b.timer != 0 && loop_ != nullptr) {
        loop_->CancelTimer(b.timer);
        b.timer = 0;
      }
      b.check = check;
      b.target = t;
      b.cannot_probe = cannot_probe;
      if (b.timer == 0 && loop_ != nullptr) {
        ScheduleFirst(b);
      }
      PublishStatus(b);
    }
  }
  vips_ = std::move(next_vips);
  first_config_ = false;
  Recompute("config", &state);
}

void HealthTask::ScheduleFirst(Backend& b) {
  // Somewhere within one interval: a thousand backends' checks spread out.
  std::uniform_int_distribution<uint64_t> first(0, uint64_t{b.check.interval_ms} * 1'000'000);
  Schedule(b, first(jitter_rng_));
}

void HealthTask::Schedule(Backend& b, uint64_t delay_ns) {
  if (loop_ == nullptr) return;
  Key key = b.key;
  b.timer = loop_->AddTimer(std::chrono::nanoseconds(delay_ns), [this, key] { RunProbe(key); });
}

void HealthTask::RunProbe(const Key& key) {
  auto it = backends_.find(key);
  if (it == backends_.end()) return;
  Backend& b = *it->second;
  b.timer = 0;
  // The next probe goes out one interval (+- jitter) after this one starts,
  // whatever this one takes (timeout < interval).
  const uint64_t interval = uint64_t{b.check.interval_ms} * 1'000'000;
  const uint64_t spread = interval * b.check.jitter_percent / 100;
  std::uniform_int_distribution<uint64_t> jitter(0, 2 * spread);
  Schedule(b, interval - spread + jitter(jitter_rng_));
  if (b.probe != 0) return;  // the last one has not ended (config: timeout < the shortest interval)
  if (!b.cannot_probe.empty()) {
    loop_->AddTimer(std::chrono::nanoseconds(0), [this, key, why = b.cannot_probe] {
      ProbeDone(key, ProbeOutcome{false, why});
    });
    return;
  }
  b.probe = prober_->Start(b.check, b.target, [this, key](ProbeOutcome outcome) {
    auto found = backends_.find(key);
    if (found == backends_.end()) return;
    found->second->probe = 0;
    ProbeDone(key, outcome);
  });
}

void HealthTask::ProbeDone(const Key& key, const ProbeOutcome& outcome) {
  auto it = backends_.find(key);
  if (it == backends_.end()) return;
  Backend& b = *it->second;
  std::optional<HealthTransition> t = b.tracker.Observe(outcome, Now());
  {
    std::lock_guard<std::mutex> lock(*options_.stats_mutex);
    ++options_.stats->health_probes;
    if (!outcome.ok) ++options_.stats->health_probe_failures;
  }
  if (t) Transitioned(b, *t);
  PublishStatus(b);
  if (t) Recompute(absl::StrCat(key.first, "/", key.second, " ", std::string(HealthName(t->to))));
}

void HealthTask::Transitioned(Backend& b, const HealthTransition& t) {
  b.since_unix_ms = WallMs();
  LogEvent("health_transition",
           {{"vip", b.key.first}, {"backend", b.key.second}, {"from", HealthName(t.from)},
            {"to", HealthName(t.to)}, {"reason", t.reason}},
           absl::StrFormat("vip %s backend %s: %s -> %s (%s)", b.key.first, b.key.second, HealthName(t.from),
                           HealthName(t.to), t.reason),
           t.to == BackendHealth::kDown ? LogLevel::kWarning : LogLevel::kInfo);
  {
    std::lock_guard<std::mutex> lock(*options_.stats_mutex);
    ++options_.stats->health_transitions;
  }
  PublishStatus(b);
}

void HealthTask::PublishStatus(const Backend& b) {
  if (options_.stats_mutex == nullptr) return;
  BackendHealthStatus s;
  s.health = b.tracker.health();
  s.held_down = b.tracker.held_down();
  s.reason = b.tracker.reason();
  s.since_unix_ms = b.since_unix_ms;
  s.last_probe = b.cannot_probe.empty() ? b.tracker.last_detail() : b.cannot_probe;
  s.probes = b.tracker.probes();
  s.probe_failures = b.tracker.probe_failures();
  s.transitions = b.tracker.transitions();
  s.check = absl::StrFormat("%s via %s to %s:%u", TypeName(b.check.type),
                            b.check.via == HealthCheckVia::kTunnel ? "tunnel" : "direct",
                            b.target.destination.ToString(), b.target.port);
  if (b.target.source_port != 0) absl::StrAppend(&s.check, " from port ", b.target.source_port);
  std::lock_guard<std::mutex> lock(*options_.stats_mutex);
  options_.stats->backend_health[b.key] = std::move(s);
}

void HealthTask::Recompute(const std::string& why, const LbState* published) {
  const uint64_t now = Now();
  auto next = std::make_shared<std::map<Key, BackendHealthInput>>();
  // Per VIP: its backends' steps, and whether any of them ramps.
  std::map<std::string, std::vector<const Backend*>> by_vip;
  for (const auto& [key, b] : backends_) by_vip[key.first].push_back(b.get());
  for (auto& [vip, members] : by_vip) {
    VipPolicy& policy = vips_[vip];
    bool ramping = false;
    for (const Backend* b : members) ramping |= policy.ramp_by_scaling && b->tracker.Ramping(now);
    uint64_t serving_weight = 0, configured_weight = 0;
    for (const Backend* b : members) {
      const uint32_t s = b->tracker.WeightSteps(now);
      BackendHealthInput in;
      in.health = b->tracker.health();
      in.effective_weight = EffectiveWeight(b->configured_weight, s, b->tracker.steps(), ramping);
      in.flows_move = in.health == BackendHealth::kDown && policy.down_flows == DownFlows::kMove;
      in.for_configured_weight = b->configured_weight;
      serving_weight += in.effective_weight;
      configured_weight += b->configured_weight;
      (*next)[b->key] = in;
    }
    const bool all_down = serving_weight == 0 && configured_weight > 0;
    if (all_down && !policy.all_down_now) {
      const bool keep_last = policy.all_down == AllDownPolicy::kKeepLast;
      LogEvent("vip_all_down", {{"vip", vip}, {"all_down", keep_last ? "keep_last" : "drop"}},
               absl::StrFormat(
                   "vip %s: EVERY BACKEND IS DOWN: %s", vip,
                   keep_last ? "keeping the last table (all_down = \"keep_last\": fail open; flows go to "
                               "backends the checks call down)"
                             : "dropping its new flows (all_down = \"drop\"), counted as no_backend"),
               LogLevel::kError);
    } else if (!all_down && policy.all_down_now) {
      LogEvent("vip_serving_again", {{"vip", vip}},
               absl::StrFormat("vip %s: a backend is up again: serving by health", vip));
    }
    policy.all_down_now = all_down;
    if (all_down && policy.all_down == AllDownPolicy::kKeepLast) {
      // The weights before the last backend went down, health shown as it is.
      for (const Backend* b : members) {
        BackendHealthInput& in = (*next)[b->key];
        auto last = last_serving_.find(b->key);
        in.effective_weight = last != last_serving_.end() ? last->second.effective_weight : b->configured_weight;
        in.flows_move = false;
      }
    } else if (!all_down) {
      for (const Backend* b : members) last_serving_[b->key] = (*next)[b->key];
    }
  }
  for (auto it = last_serving_.begin(); it != last_serving_.end();) {
    it = backends_.contains(it->first) ? std::next(it) : last_serving_.erase(it);
  }
  auto same = [](const BackendHealthInput& a, const BackendHealthInput& b) {
    return a.health == b.health && a.effective_weight == b.effective_weight && a.flows_move == b.flows_move;
  };
  bool changed = false;
  if (published != nullptr) {
    // Against what that build took (its inputs may have changed since).
    for (const VipState& v : published->vips()) {
      for (const BackendState& bs : v.backends) {
        auto it = next->find(Key(v.name, bs.name));
        if (it != next->end() && !same(it->second, {bs.health, bs.weight, bs.flows_move, std::nullopt})) changed = true;
      }
    }
  } else {
    changed = next->size() != inputs_->size();
    auto b = inputs_->begin();
    for (auto a = next->cbegin(); !changed && a != next->cend(); ++a, ++b) {
      changed = a->first != b->first || !same(a->second, b->second);
    }
  }
  inputs_ = std::move(next);
  ArmChangeTimer();
  if (!changed) return;
  if (pending_why_.size() < kMaxWhyLength) {
    absl::StrAppend(&pending_why_, pending_why_.empty() ? "" : ", ", why);
  }
  limiter_.Request();
  MaybeRebuild();
}

void HealthTask::MaybeRebuild() {
  if (!limiter_.wanted() || rebuild_timer_ != 0) return;
  const uint64_t now = Now();
  if (!limiter_.Due(now)) {
    const uint64_t at = limiter_.NextNs();
    rebuild_timer_ = loop_->AddTimer(std::chrono::nanoseconds(at > now ? at - now : 0), [this] {
      rebuild_timer_ = 0;
      MaybeRebuild();
    });
    return;
  }
  limiter_.Done(now);
  std::string why = std::exchange(pending_why_, std::string());
  options_.inputs->TablesChanged(why.empty() ? "weights" : why);
}

void HealthTask::ArmChangeTimer() {
  if (loop_ == nullptr) return;
  const uint64_t now = Now();
  std::optional<uint64_t> soonest;
  for (const auto& [key, b] : backends_) {
    std::optional<uint64_t> at = b->tracker.NextChangeNs(now);
    if (at && (!soonest || *at < *soonest)) soonest = at;
  }
  if (!soonest) return;
  if (change_timer_ != 0) {
    if (change_timer_ns_ <= *soonest) return;  // an earlier one is set: it re-arms
    loop_->CancelTimer(change_timer_);
  }
  change_timer_ns_ = *soonest;
  change_timer_ = loop_->AddTimer(std::chrono::nanoseconds(*soonest > now ? *soonest - now : 0), [this] {
    change_timer_ = 0;
    const uint64_t at = Now();
    std::string why;
    for (auto& [key, b] : backends_) {
      // A hold-down that ended without a probe to end it.
      if (std::optional<HealthTransition> t = b->tracker.Advance(at)) {
        Transitioned(*b, *t);
        absl::StrAppend(&why, why.empty() ? "" : ", ", key.first, "/", key.second, " ", std::string(HealthName(t->to)));
      }
    }
    Recompute(why.empty() ? "slow start step" : why);
  });
}

}  // namespace maglb
