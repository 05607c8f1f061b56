// The control thread's event loop (epoll). Tasks (control_task.h) register
// the descriptors they wait on and their timers here; every callback runs on
// the loop's thread and must not block: slow work goes to a helper thread,
// which hands its result back with Post() (or through a descriptor of its own
// that the task registered, like ReloadBuilder's eventfd).
//
// Timers run on CLOCK_MONOTONIC with millisecond resolution (the epoll
// timeout); timers due at the same time run in the order they were added.
#ifndef MAGLB_CONTROL_EVENT_LOOP_H_
#define MAGLB_CONTROL_EVENT_LOOP_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace maglb {

class EventLoop {
 public:
  /// Gets the epoll events that are ready (EPOLLIN, EPOLLERR, ...).
  using FdCallback = std::function<void(uint32_t events)>;
  using Callback = std::function<void()>;
  using TimerId = uint64_t;

  static absl::StatusOr<std::unique_ptr<EventLoop>> Create();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // --- Loop thread only (or before Run) ---
  /// Calls `callback` whenever `fd` has any of `events` (level-triggered). The
  /// loop does not own `fd`. One registration per fd.
  absl::Status AddFd(int fd, uint32_t events, FdCallback callback);
  /// Stops watching `fd`; safe inside any callback, its own included (an
  /// event of `fd` already collected in this pass is then dropped).
  void RemoveFd(int fd);
  /// Calls `callback` once, `delay` from now.
  TimerId AddTimer(std::chrono::nanoseconds delay, Callback callback);
  /// Calls `callback` every `period` (the first time `period` from now). A
  /// pass that runs late is not made up: the next one is `period` after it.
  TimerId AddPeriodic(std::chrono::nanoseconds period, Callback callback);
  /// Safe inside any callback, the timer's own included. Unknown ids (fired
  /// one-shots) are ignored.
  void CancelTimer(TimerId id);

  /// Dispatches events and timers until Stop(). Returns at once if Stop()
  /// came before it. Each Stop() ends one Run (a later Run runs again).
  void Run();
  /// One pass: waits at most `timeout` (less if a timer is due sooner) and
  /// dispatches what happened. Returns false, like Run, if stopped.
  bool RunOnce(std::chrono::milliseconds timeout);

  // --- Any thread ---
  /// Runs `fn` on the loop's thread, soon (posts from one thread keep their
  /// order). What is still queued when the loop is destroyed is dropped.
  void Post(Callback fn);

  /// A handle for a helper thread that may outlive the loop (a build or a
  /// probe abandoned at shutdown): its Post returns false once the loop is
  /// gone, and never touches the loop's descriptors after that.
  class Poster {
   public:
    bool Post(Callback fn) const;

   private:
    friend class EventLoop;
    struct Mailbox;
    explicit Poster(std::shared_ptr<Mailbox> box) : box_(std::move(box)) {}
    std::shared_ptr<Mailbox> box_;
  };
  Poster poster() const { return Poster(mailbox_); }
  /// Makes Run() return after the callback in progress (no further callback
  /// of this pass runs).
  void Stop();

 private:
  struct FdEntry {
    int fd;
    FdCallback callback;
  };
  struct Timer {
    uint64_t deadline_ns;
    uint64_t period_ns;  // 0: one-shot
    std::shared_ptr<Callback> callback;
  };

  EventLoop(int epoll_fd, int wake_fd);
  static uint64_t MonotonicNs();
  TimerId Schedule(uint64_t deadline_ns, uint64_t period_ns, Callback callback);
  int TimeoutMs(uint64_t now_ns) const;
  bool Pass(std::chrono::milliseconds timeout);  // false once stopped
  void RunPosted();
  void RunDueTimers();

  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: Post and Stop from other threads; owned by mailbox_
  std::atomic<bool> stop_{false};
  // Keyed by a registration id (never reused), so that an event collected for
  // an fd that was removed, or removed and added again, finds nothing.
  std::map<uint64_t, std::shared_ptr<FdEntry>> fds_;
  std::map<int, uint64_t> fd_ids_;
  uint64_t next_fd_id_ = 1;
  std::map<TimerId, Timer> timers_;
  std::set<std::pair<uint64_t, TimerId>> queue_;  // (deadline, id): order of firing
  TimerId next_timer_id_ = 1;
  std::shared_ptr<Poster::Mailbox> mailbox_;  // what other threads posted
};

}  // namespace maglb

#endif  // MAGLB_CONTROL_EVENT_LOOP_H_
