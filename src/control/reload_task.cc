#include "control/reload_task.h"

#include <sys/epoll.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "control/log.h"
#include "control/service_notify.h"

namespace maglb {
namespace {

// What a reload touched, for its log event's fields: the VIPs added, removed
// or changed, and their backends added, removed or reweighted ("web/be4").
struct ChangedNames {
  std::vector<std::string> vips, backends;
};
ChangedNames Changed(const LbStateChange& change) {
  ChangedNames out;
  out.vips = change.vips_added;
  out.vips.insert(out.vips.end(), change.vips_removed.begin(), change.vips_removed.end());
  for (const LbStateChange::VipChange& c : change.vips_changed) {
    out.vips.push_back(c.name);
    for (const auto* list : {&c.backends_added, &c.backends_removed, &c.backends_reweighted}) {
      for (const std::string& b : *list) out.backends.push_back(c.name + "/" + b);
    }
  }
  return out;
}

}  // namespace

namespace {

// What `systemctl status` shows while `state` serves.
std::string ServingStatusOf(const LbState& state) {
  size_t backends = 0;
  for (const VipConfig& v : state.config().vips) backends += v.backends.size();
  return ServingStatus(state.generation(), state.config().vips.size(), backends);
}

}  // namespace

absl::Status ReloadTask::PublishFirst(const Config& config) {
  absl::StatusOr<std::unique_ptr<const LbState>> state =
      BuildLbState(config, nullptr, options_.inputs->Capture());
  if (!state.ok()) {
    return absl::Status(state.status().code(),
                        absl::StrFormat("%s: %s", config.source, std::string(state.status().message())));
  }
  options_.publisher->Publish(*std::move(state));
  options_.inputs->ConfigPublished(*options_.publisher->Current());
  return absl::OkStatus();
}

absl::Status ReloadTask::Start(EventLoop& loop) {
  loop_ = &loop;
  absl::StatusOr<std::unique_ptr<ReloadBuilder>> builder = ReloadBuilder::Create(options_.build);
  if (!builder.ok()) return builder.status();
  builder_ = *std::move(builder);
  absl::Status added = loop.AddFd(builder_->fd(), EPOLLIN, [this](uint32_t) {
    FinishBuild();
    StartNext();
  });
  if (!added.ok()) return added;
  absl::StatusOr<ConfigWatch> watch = ConfigWatch::Create(options_.config_path);
  if (watch.ok()) {
    watch_.emplace(*std::move(watch));
    // Every complete write, rename or removal is one reload attempt: a file
    // that is missing or unreadable is refused (logged, counted) like a bad one.
    added = loop.AddFd(watch_->fd(), EPOLLIN, [this](uint32_t) {
      const uint64_t woken_ns = MonotonicNs();  // the loop woke for the event: its timing starts
      if (watch_->ConsumeEvents()) Request("file changed", woken_ns);
    });
    if (!added.ok()) return added;
  } else {
    LogLine(absl::StrFormat("warning: %s; reload with SIGHUP only",
                            std::string(watch.status().message())));
  }
  options_.inputs->SetRepublish([this] { Republish(); });
  options_.inputs->SetRebuild([this](std::string why) { RequestRebuild(std::move(why)); });
  return absl::OkStatus();
}

void ReloadTask::Stop() {
  if (builder_ && builder_->busy() &&
      !builder_->Abandon(std::chrono::milliseconds(kShutdownBuildWaitMs))) {
    LogLine(absl::StrFormat("stopping with a reload (%s) still building: abandoned", reload_why_));
  }
}

void ReloadTask::Request(const char* why, uint64_t event_ns) {
  if (unserved_event_ns_ == 0) unserved_event_ns_ = event_ns;
  ++reload_seq_;
  reload_why_ = why;
  build_wanted_ = true;
  // Started when this pass's events are handled (the triggers of one pass
  // make one build), or after the running build, whose result is then stale.
  StartNextAfterThisPass();
}

void ReloadTask::RequestRebuild(std::string why) {
  rebuild_wanted_ = true;
  rebuild_why_ = std::move(why);
  StartNextAfterThisPass();
}

void ReloadTask::StartNextAfterThisPass() {
  if (!builder_->busy() && start_timer_ == 0) {
    start_timer_ = loop_->AddTimer(std::chrono::nanoseconds(0), [this] {
      start_timer_ = 0;
      StartNext();
    });
  }
}

void ReloadTask::StartNext() {
  if (builder_->busy()) return;
  if (build_wanted_) {
    // A wanted rebuild stays wanted: the reload may be refused, and then the
    // inputs it took are published by nobody (the rebuild after it reuses
    // every table if they were).
    StartBuild();
  } else if (rebuild_wanted_) {
    StartRebuild();
  }
}

void ReloadTask::StartRebuild() {
  rebuild_wanted_ = false;
  BuildJob job;
  job.seq = reload_seq_;
  job.why = rebuild_why_;
  job.inputs_only = true;
  job.previous = std::make_shared<const LbState>(*options_.publisher->Current());
  job.options = options_.inputs->Capture();
  build_inputs_version_ = options_.inputs->version();
  builder_->Start(std::move(job));
}

// Counts and logs a refused reload; the running state stays as it is.
void ReloadTask::RefuseReload(const std::string& why, const std::string& msg,
                              const LbState& current, uint64_t event_ns) {
  LogEvent("reload_refused", {{"reason", why}, {"error", msg}, {"generation", current.generation()}},
           absl::StrFormat("reload (%s) refused: %s; still serving generation %u", why, msg,
                           current.generation()),
           LogLevel::kWarning);
  {
    std::lock_guard<std::mutex> lock(options_.publisher->mutex());  // counted once logged
    ++options_.stats->reloads_refused;
    options_.stats->last_refusal = msg;
    options_.stats->reload_timings.Add(ReloadTiming{.generation = current.generation(),
                                                    .outcome = ReloadOutcome::kRefused,
                                                    .event_ns = event_ns,
                                                    .published_ns = 0,
                                                    .workers_ns = 0});
  }
  // The service manager's reload ends here too: it is back to serving.
  NotifyReady(absl::StrCat(ServingStatusOf(current), "; last reload refused: ", msg));
}

void ReloadTask::StartBuild() {
  build_wanted_ = false;
  const LbState* current = options_.publisher->Current();
  BuildJob job;
  job.seq = reload_seq_;
  job.why = reload_why_;
  job.config_path = options_.config_path;
  // The helper thread reads copies: the loop may publish (and free)
  // snapshots and learn inputs meanwhile. Copying shares tables.
  job.previous = std::make_shared<const LbState>(*current);
  job.options = options_.inputs->Capture();
  build_inputs_version_ = options_.inputs->version();
  builder_->Start(std::move(job));
  // Until published or refused (NotifyReady in FinishBuild): `systemctl
  // status` shows "reloading". A superseded build is followed by another.
  NotifyReloading(absl::StrFormat("reloading (%s); serving generation %u", reload_why_,
                                  current->generation()));
}

void ReloadTask::FinishBuild() {
  std::optional<BuildResult> result = builder_->Take();
  if (!result) return;
  const LbState* current = options_.publisher->Current();
  if (result->job.inputs_only) {
    FinishRebuild(*std::move(result), *current);
    return;
  }
  if (result->job.seq != reload_seq_) {
    // A newer change came while this one was built: only the newest is
    // published (or refused).
    LogEvent("reload_superseded", {{"reason", result->job.why}, {"next_reason", reload_why_}},
             absl::StrFormat("reload (%s): superseded by a newer change (%s) while building; "
                             "building that",
                             result->job.why, reload_why_));
    return;  // build_wanted_ is set: the caller starts it; its trigger stays unserved
  }
  // The newest: no trigger came since this build started, so it serves them all.
  const uint64_t event_ns = unserved_event_ns_;
  unserved_event_ns_ = 0;
  if (!result->state.ok()) {
    RefuseReload(result->job.why, std::string(result->state.status().message()), *current, event_ns);
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
                 *current, event_ns);
    return;
  }
  if (options_.inputs->version() != build_inputs_version_) {
    next = options_.inputs->Reapply(*next);  // an input changed during the build
  }
  const LbStateChange& change = next->change();
  // Conntrack tables are sized and timed once, at start (no allocation later).
  const bool conntrack_changed = next->config().conntrack != current->config().conntrack;
  // The kernel interface is made once, at start; its rate and burst apply
  // at once (read per frame, like reply_rate).
  const KernelConfig& kernel = next->config().kernel;
  const KernelConfig& running_kernel = current->config().kernel;
  const bool kernel_changed = kernel.interface != running_kernel.interface ||
                              kernel.ipv4_prefix_len != running_kernel.ipv4_prefix_len ||
                              kernel.ipv6_prefix_len != running_kernel.ipv6_prefix_len;
  // The exporter binds once, at start (metrics_task.h). Its address, not
  // its line: an edit above [metrics] moves that.
  const MetricsConfig& metrics = next->config().metrics;
  const MetricsConfig& running_metrics = current->config().metrics;
  const bool metrics_changed = metrics.enabled() != running_metrics.enabled() ||
                               metrics.address != running_metrics.address;
  // Descriptor rings and packet buffer pools are made once, at start (port.cc).
  const bool sizing_changed = !next->config().lb.sizing.SameValues(current->config().lb.sizing);
  std::string summary = change.ToString();
  const ChangedNames changed = Changed(change);
  const uint64_t generation = change.generation;
  const bool unchanged = change.empty();
  const PublishTimes published = options_.publisher->Publish(std::move(next));
  const ReloadTiming timing{.generation = generation,
                            .outcome = unchanged ? ReloadOutcome::kUnchanged : ReloadOutcome::kApplied,
                            .event_ns = event_ns,
                            .published_ns = published.swapped_ns,
                            .workers_ns = published.synchronized_ns};
  // "the file change", "SIGHUP": what the time is counted from.
  const std::string since = result->job.why == "file changed" ? "the file change" : result->job.why;
  LogEvent("reload",
           {{"reason", result->job.why}, {"generation", generation}, {"vips", changed.vips},
            {"backends", changed.backends}, {"to_workers_ns", timing.ToWorkersNs()}},
           absl::StrFormat("reload (%s): %s%s%s%s%s; applied to workers %s after %s", result->job.why, summary,
                           conntrack_changed ? "; [conntrack] changes apply at the next restart" : "",
                           sizing_changed ? "; [lb] rx_descriptors, tx_descriptors and mbufs apply at the "
                                            "next restart"
                                          : "",
                           kernel_changed ? "; [kernel] interface and prefix lengths apply at the next "
                                            "restart"
                                          : "",
                           metrics_changed ? "; [metrics] listen applies at the next restart" : "",
                           FormatDurationNs(timing.ToWorkersNs()), since));
  {
    // Counted once logged: whoever sees the count (telemetry, tests) finds the line.
    std::lock_guard<std::mutex> lock(options_.publisher->mutex());
    ++options_.stats->reloads_ok;
    if (unchanged) ++options_.stats->reloads_unchanged;
    options_.stats->last_refusal.clear();
    options_.stats->reload_timings.Add(timing);
  }
  options_.inputs->ConfigPublished(*options_.publisher->Current());
  NotifyReady(ServingStatusOf(*options_.publisher->Current()));
}

void ReloadTask::FinishRebuild(BuildResult result, const LbState& current) {
  if (result.job.seq != reload_seq_ || build_wanted_) {
    rebuild_wanted_ = true;  // superseded by a reload, which may yet be refused: again after it
    return;
  }
  if (!result.state.ok()) {
    // The config built before; only a table over a builder's limit can fail here.
    LogEvent("health_rebuild_failed",
             {{"reason", result.job.why}, {"error", std::string(result.state.status().message())},
              {"generation", current.generation()}},
             absl::StrFormat("health (%s): cannot rebuild the tables: %s; still serving the previous "
                             "ones (generation %u)",
                             result.job.why, result.state.status().message(), current.generation()),
             LogLevel::kError);
    return;
  }
  std::unique_ptr<const LbState> next = *std::move(result.state);
  if (options_.inputs->version() != build_inputs_version_) next = options_.inputs->Reapply(*next);
  std::string summary = next->change().ToString();
  const ChangedNames changed = Changed(next->change());
  const uint64_t generation = next->change().generation;
  {
    std::lock_guard<std::mutex> lock(options_.publisher->mutex());
    ++options_.stats->health_rebuilds;
  }
  options_.publisher->Publish(std::move(next));
  LogEvent("health_rebuild",
           {{"reason", result.job.why}, {"generation", generation}, {"vips", changed.vips},
            {"backends", changed.backends}},
           absl::StrFormat("health (%s): %s", result.job.why, summary));
}

void ReloadTask::Republish() {
  const LbState* current = options_.publisher->Current();
  options_.publisher->Publish(options_.inputs->Reapply(*current));
}

}  // namespace maglb
