#include "control/controller.h"

#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <csignal>

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
      tasks_{&neighbor_task_, &health_task_, &reload_task_} {
  inputs_.AddSource(&neighbor_task_);
  inputs_.AddSource(&health_task_);
}

absl::Status Controller::Start(const Config& config) {
  stats_.started_ns = NowNs();
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
  signalfd_siginfo si;
  while (read(options_.signal_fd, &si, sizeof(si)) == sizeof(si)) {
    if (si.ssi_signo == SIGHUP) {
      reload_task_.Request("SIGHUP");
    } else {
      stopped_by_ = si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM";
      loop_->Stop();
      return;  // what follows it is not acted on
    }
  }
}

std::string Controller::Run() {
  loop_->Run();
  for (auto it = tasks_.rbegin(); it != tasks_.rend(); ++it) (*it)->Stop();
  return stopped_by_;
}

}  // namespace maglb
