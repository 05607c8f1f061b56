#include "control/controller.h"

#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <csignal>

#include "absl/strings/str_format.h"
#include "control/log.h"
#include "control/metrics_view.h"
#include "control/prometheus.h"
#include "control/service_notify.h"

namespace maglb {

Controller::Controller(ControllerOptions options)
    : options_(std::move(options)),
      inputs_(options_.port.mac, !options_.kernel_interface.empty()),
      neighbor_task_(NeighborTask::Options{
          .port = options_.port,
          .to_control = options_.to_control,
          .from_control = options_.from_control,
          .publisher = options_.publisher,
          .stats = &stats_,
          .inputs = &inputs_,
      }),
      health_task_(HealthTask::Options{
          .inputs = &inputs_,
          .stats_mutex = &options_.publisher->mutex(),
          .stats = &stats_,
          .tunnel_probes = options_.tunnel_probes,
          .now_ns = {},
      }),
      reload_task_(ReloadTask::Options{
          .config_path = options_.config_path,
          .port = options_.port,
          .publisher = options_.publisher,
          .stats = &stats_,
          .inputs = &inputs_,
          .build = options_.build,
      }),
      announce_task_(AnnounceTask::Options{
          .publisher = options_.publisher,
          .stats = &stats_,
          .kernel_interface = options_.kernel_interface,
      }),
      metrics_task_(MetricsTask::Options{
          .render =
              [this] {
                std::string body;
                WithView([&](const LbState& state, const CounterTotals& totals, const ControlStats& control,
                             const ControllerOptions& options) {
                  body = RenderPrometheus(MetricsView(state, totals, control, options, NowNs()));
                });
                return body;
              },
          .content_type = kPrometheusContentType,
      }),
      // The exporter first: a port in use fails the start before anything
      // else began. The announcer last: stopped first, it withdraws while the
      // rest still runs.
      tasks_{&metrics_task_, &neighbor_task_, &health_task_, &reload_task_, &announce_task_} {
  inputs_.AddSource(&neighbor_task_);
  inputs_.AddSource(&health_task_);
}

absl::Status Controller::Start(const Config& config) {
  stats_.started_ns = NowNs();
  metrics_task_.Configure(config.metrics, options_.config_path);
  absl::Status published = reload_task_.PublishFirst(config);
  if (!published.ok()) return published;
  absl::StatusOr<std::unique_ptr<EventLoop>> loop = EventLoop::Create();
  if (!loop.ok()) return loop.status();
  loop_ = *std::move(loop);
  if (options_.signal_fd >= 0) {
    absl::Status added = loop_->AddFd(options_.signal_fd, EPOLLIN, [this](uint32_t) { HandleSignals(); });
    if (!added.ok()) return added;
  }
  for (ControlTask* task : tasks_) {
    absl::Status started = task->Start(*loop_);
    if (!started.ok()) return started;
  }
  return absl::OkStatus();
}

void Controller::HandleSignals() {
  const uint64_t woken_ns = MonotonicNs();  // a SIGHUP's reload is timed from here
  signalfd_siginfo si;
  while (read(options_.signal_fd, &si, sizeof(si)) == sizeof(si)) {
    if (si.ssi_signo == SIGHUP) {
      reload_task_.Request("SIGHUP", woken_ns);
      continue;
    }
    const std::string name = si.ssi_signo == SIGINT ? "SIGINT" : si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGUSR1";
    if (si.ssi_signo == SIGUSR1 && announce_task_.draining()) {
      // Two drains asked at once (two operators, a retry) must not cut the
      // first short: only SIGTERM and SIGINT escalate.
      LogLine("drain (SIGUSR1) ignored: already draining; SIGTERM or SIGINT stops at once");
    } else if (si.ssi_signo == SIGINT || (si.ssi_signo == SIGTERM && !announce_task_.enabled()) ||
               announce_task_.draining()) {
      StopLoop(name);
      return;  // what follows it is not acted on
    } else if (!announce_task_.enabled()) {
      LogLine("drain (SIGUSR1) ignored: nothing is announced ([announce] is not set); stop with SIGTERM");
    } else if (si.ssi_signo == SIGTERM && !announce_task_.AnnouncedRecently()) {
      LogLine("SIGTERM: nothing announced within [announce] drain_s: stopping without a drain");
      StopLoop(name);
      return;
    } else {
      // The service manager learns at once that this is the way out (its
      // TimeoutStopSec must cover [announce] drain_s).
      NotifyStopping(absl::StrFormat("draining (%s): routes withdrawn, forwarding until the drain ends",
                                     name));
      announce_task_.Drain(name, [this, name] { StopLoop(name + " after a drain"); });
    }
  }
}

void Controller::StopLoop(std::string why) {
  NotifyStopping(absl::StrFormat("stopping (%s)", why));
  stopped_by_ = std::move(why);
  loop_->Stop();
}

std::string Controller::Run() {
  loop_->Run();
  for (auto it = tasks_.rbegin(); it != tasks_.rend(); ++it) (*it)->Stop();
  return stopped_by_;
}

}  // namespace maglb
