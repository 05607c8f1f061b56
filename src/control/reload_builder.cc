#include "reload_builder.h"  // bare: the unit test compiles this file without -Isrc

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/strings/str_format.h"

namespace maglb {

// What the helper thread and the control thread share; the last one to let
// go (the detached thread, after an abandoned build) closes the eventfd.
struct ReloadBuilder::Shared {
  int fd = -1;
  std::atomic<bool> cancel{false};
  std::mutex mu;
  std::optional<BuildResult> result;  // guarded by mu
  std::thread thread;                 // touched by the control thread only

  ~Shared() {
    if (fd >= 0) close(fd);
  }
};

absl::StatusOr<std::unique_ptr<const LbState>> LoadAndBuild(const BuildJob& job,
                                                            const std::atomic<bool>& cancel) {
  absl::StatusOr<Config> config = LoadConfig(job.config_path);
  if (!config.ok()) return config.status();
  if (cancel.load()) return absl::CancelledError("shutting down");
  absl::StatusOr<std::unique_ptr<const LbState>> state =
      BuildLbState(*config, job.previous.get(), job.options);
  if (!state.ok()) {
    return absl::Status(state.status().code(),
                        absl::StrFormat("%s: %s", job.config_path,
                                        std::string(state.status().message())));
  }
  return state;
}

absl::StatusOr<std::unique_ptr<ReloadBuilder>> ReloadBuilder::Create(BuildFunction build) {
  auto shared = std::make_shared<Shared>();
  shared->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (shared->fd < 0) {
    return absl::InternalError(absl::StrFormat("eventfd: %s", std::strerror(errno)));
  }
  if (!build) build = LoadAndBuild;
  return std::unique_ptr<ReloadBuilder>(new ReloadBuilder(std::move(shared), std::move(build)));
}

ReloadBuilder::~ReloadBuilder() { Abandon(std::chrono::milliseconds(0)); }

int ReloadBuilder::fd() const { return shared_->fd; }

void ReloadBuilder::Start(BuildJob job) {
  busy_ = true;
  thread_running_ = true;
  shared_->cancel = false;
  // The thread holds its own reference: it may outlive this object.
  shared_->thread = std::thread([shared = shared_, build = build_, job = std::move(job)]() mutable {
    absl::StatusOr<std::unique_ptr<const LbState>> state =
        job.inputs_only ? RebuildForInputs(*job.previous, job.options) : build(job, shared->cancel);
    {
      std::lock_guard<std::mutex> lock(shared->mu);
      shared->result.emplace(BuildResult{std::move(job), std::move(state)});
    }
    uint64_t one = 1;
    ssize_t ignored = write(shared->fd, &one, sizeof(one));  // cannot fail: counter far from max
    (void)ignored;
  });
}

void ReloadBuilder::Join() {
  if (thread_running_ && shared_->thread.joinable()) shared_->thread.join();
  thread_running_ = false;
}

std::optional<BuildResult> ReloadBuilder::Take() {
  uint64_t n;
  if (read(shared_->fd, &n, sizeof(n)) != sizeof(n)) return std::nullopt;  // still running
  Join();
  std::optional<BuildResult> out;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    out = std::move(shared_->result);
    shared_->result.reset();
  }
  busy_ = false;
  return out;
}

bool ReloadBuilder::Abandon(std::chrono::milliseconds bound) {
  if (!thread_running_) return true;
  shared_->cancel = true;
  pollfd p = {shared_->fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(bound.count())) == 1) {
    Take();  // ended in time: joined, result dropped
    return true;
  }
  shared_->thread.detach();
  thread_running_ = false;
  busy_ = false;
  return false;
}

}  // namespace maglb
