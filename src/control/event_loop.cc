#include "event_loop.h"  // bare: the unit test compiles this file without -Isrc

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "absl/strings/str_format.h"

namespace maglb {

namespace {

constexpr uint64_t kWakeId = 0;  // the eventfd's registration; fd ids start at 1
constexpr int kMaxEventsPerPass = 64;

}  // namespace

// Shared by the loop and every Poster: the queue and the wake descriptor,
// which closes with the loop, under the same lock a post takes.
struct EventLoop::Poster::Mailbox {
  std::mutex mu;
  std::vector<Callback> posted;  // guarded by mu
  int wake_fd;
  bool closed = false;  // guarded by mu

  explicit Mailbox(int fd) : wake_fd(fd) {}
  // Wakes the loop; false (nothing done) once it is gone.
  bool WakeLocked() const {
    if (closed) return false;
    uint64_t one = 1;
    ssize_t ignored = write(wake_fd, &one, sizeof(one));  // cannot fail: counter far from max
    (void)ignored;
    return true;
  }
  bool Post(Callback fn) {
    std::lock_guard<std::mutex> lock(mu);
    if (closed) return false;
    posted.push_back(std::move(fn));
    return WakeLocked();
  }
  void Close() {
    std::vector<Callback> dropped;  // destroyed outside the lock
    std::lock_guard<std::mutex> lock(mu);
    closed = true;
    dropped.swap(posted);
    close(wake_fd);
  }
};

bool EventLoop::Poster::Post(Callback fn) const { return box_->Post(std::move(fn)); }

EventLoop::EventLoop(int epoll_fd, int wake_fd)
    : epoll_fd_(epoll_fd), wake_fd_(wake_fd), mailbox_(std::make_shared<Poster::Mailbox>(wake_fd)) {}

absl::StatusOr<std::unique_ptr<EventLoop>> EventLoop::Create() {
  int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) {
    return absl::InternalError(absl::StrFormat("epoll_create1: %s", std::strerror(errno)));
  }
  int wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) {
    int err = errno;
    close(epoll_fd);
    return absl::InternalError(absl::StrFormat("eventfd: %s", std::strerror(err)));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeId;
  if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev) != 0) {
    int err = errno;
    close(wake_fd);
    close(epoll_fd);
    return absl::InternalError(absl::StrFormat("epoll_ctl: %s", std::strerror(err)));
  }
  return std::unique_ptr<EventLoop>(new EventLoop(epoll_fd, wake_fd));
}

EventLoop::~EventLoop() {
  mailbox_->Close();
  close(epoll_fd_);
}

uint64_t EventLoop::MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

absl::Status EventLoop::AddFd(int fd, uint32_t events, FdCallback callback) {
  if (fd_ids_.count(fd) != 0) {
    return absl::AlreadyExistsError(absl::StrFormat("fd %d is already in the event loop", fd));
  }
  const uint64_t id = next_fd_id_++;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    return absl::InternalError(absl::StrFormat("epoll_ctl(add fd %d): %s", fd, std::strerror(errno)));
  }
  fds_[id] = std::make_shared<FdEntry>(FdEntry{fd, std::move(callback)});
  fd_ids_[fd] = id;
  return absl::OkStatus();
}

void EventLoop::RemoveFd(int fd) {
  auto it = fd_ids_.find(fd);
  if (it == fd_ids_.end()) return;
  // Fails harmlessly if fd was closed already (closing removed it).
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  fds_.erase(it->second);  // a callback running now holds its own reference
  fd_ids_.erase(it);
}

EventLoop::TimerId EventLoop::Schedule(uint64_t deadline_ns, uint64_t period_ns, Callback callback) {
  const TimerId id = next_timer_id_++;
  timers_[id] = Timer{deadline_ns, period_ns, std::make_shared<Callback>(std::move(callback))};
  queue_.insert({deadline_ns, id});
  return id;
}

EventLoop::TimerId EventLoop::AddTimer(std::chrono::nanoseconds delay, Callback callback) {
  uint64_t d = delay.count() > 0 ? static_cast<uint64_t>(delay.count()) : 0;
  return Schedule(MonotonicNs() + d, 0, std::move(callback));
}

EventLoop::TimerId EventLoop::AddPeriodic(std::chrono::nanoseconds period, Callback callback) {
  // A zero period would never let the loop wait: at least 1 ns.
  uint64_t p = period.count() > 0 ? static_cast<uint64_t>(period.count()) : 1;
  return Schedule(MonotonicNs() + p, p, std::move(callback));
}

void EventLoop::CancelTimer(TimerId id) {
  auto it = timers_.find(id);
  if (it == timers_.end()) return;
  queue_.erase({it->second.deadline_ns, id});
  timers_.erase(it);
}

void EventLoop::Post(Callback fn) { mailbox_->Post(std::move(fn)); }

void EventLoop::Stop() {
  stop_.store(true);
  std::lock_guard<std::mutex> lock(mailbox_->mu);
  mailbox_->WakeLocked();  // wakes a Run on another thread
}

int EventLoop::TimeoutMs(uint64_t now_ns) const {
  if (queue_.empty()) return -1;
  uint64_t deadline = queue_.begin()->first;
  if (deadline <= now_ns) return 0;
  // Rounded up: waking before the deadline would only wait again.
  uint64_t ms = (deadline - now_ns + 999'999) / 1'000'000;
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

void EventLoop::RunPosted() {
  std::vector<Callback> batch;
  {
    std::lock_guard<std::mutex> lock(mailbox_->mu);
    batch.swap(mailbox_->posted);
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    if (stop_.load()) {
      // Kept, in order, for a later Run.
      std::lock_guard<std::mutex> lock(mailbox_->mu);
      mailbox_->posted.insert(mailbox_->posted.begin(), std::make_move_iterator(batch.begin() + i),
                              std::make_move_iterator(batch.end()));
      mailbox_->WakeLocked();
      return;
    }
    batch[i]();
  }
}

void EventLoop::RunDueTimers() {
  const uint64_t now = MonotonicNs();
  // The timers due now, taken first: one that a callback adds (or a periodic
  // one rescheduled) waits for the next pass, so timers cannot starve fds.
  std::vector<TimerId> due;
  for (auto it = queue_.begin(); it != queue_.end() && it->first <= now; ++it) {
    due.push_back(it->second);
  }
  for (TimerId id : due) {
    if (stop_.load()) return;
    auto it = timers_.find(id);
    if (it == timers_.end()) continue;  // cancelled by an earlier callback
    Timer& t = it->second;
    queue_.erase({t.deadline_ns, id});
    std::shared_ptr<Callback> callback = t.callback;
    if (t.period_ns != 0) {
      uint64_t next = t.deadline_ns + t.period_ns;
      if (next <= now) next = now + t.period_ns;  // late: not made up
      t.deadline_ns = next;
      queue_.insert({next, id});
    } else {
      timers_.erase(it);
    }
    (*callback)();
  }
}

bool EventLoop::Pass(std::chrono::milliseconds timeout) {
  if (stop_.load()) return false;
  int wait_ms = TimeoutMs(MonotonicNs());
  int cap = static_cast<int>(timeout.count());
  if (wait_ms < 0 || wait_ms > cap) wait_ms = cap;
  epoll_event events[kMaxEventsPerPass];
  int n = epoll_wait(epoll_fd_, events, kMaxEventsPerPass, wait_ms);
  if (n < 0) n = 0;  // EINTR: a signal not routed to a signalfd; just go round
  for (int i = 0; i < n; ++i) {
    if (stop_.load()) return false;
    const uint64_t id = events[i].data.u64;
    if (id == kWakeId) {
      uint64_t count;
      ssize_t ignored = read(wake_fd_, &count, sizeof(count));
      (void)ignored;
      RunPosted();
      continue;
    }
    auto it = fds_.find(id);
    if (it == fds_.end()) continue;  // removed by an earlier callback of this pass
    std::shared_ptr<FdEntry> entry = it->second;
    entry->callback(events[i].events);
  }
  if (stop_.load()) return false;
  RunDueTimers();
  return !stop_.load();
}

bool EventLoop::RunOnce(std::chrono::milliseconds timeout) {
  if (Pass(timeout)) return true;
  stop_.store(false);  // this Stop() is spent
  return false;
}

void EventLoop::Run() {
  while (Pass(std::chrono::milliseconds(INT_MAX))) {
  }
  stop_.store(false);
}

}  // namespace maglb
