// The control thread's event loop: descriptors and timers fire, timers in
// deadline order, Post wakes the loop from another thread, and a callback
// may remove its own descriptor or cancel timers.
#include "control/event_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace maglb {
namespace {

using std::chrono::milliseconds;

std::unique_ptr<EventLoop> NewLoop() {
  auto loop = EventLoop::Create();
  EXPECT_TRUE(loop.ok()) << loop.status();
  return *std::move(loop);
}

void Signal(int fd) {
  uint64_t one = 1;
  ASSERT_EQ(write(fd, &one, sizeof(one)), static_cast<ssize_t>(sizeof(one)));
}

TEST(EventLoop, AReadableFdFires) {
  auto loop = NewLoop();
  int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  int fired = 0;
  ASSERT_TRUE(loop->AddFd(fd, EPOLLIN, [&](uint32_t events) {
                    EXPECT_TRUE(events & EPOLLIN);
                    uint64_t n;
                    ASSERT_EQ(read(fd, &n, sizeof(n)), static_cast<ssize_t>(sizeof(n)));
                    ++fired;
                  }).ok());
  EXPECT_FALSE(loop->AddFd(fd, EPOLLIN, [](uint32_t) {}).ok());  // one registration per fd
  loop->RunOnce(milliseconds(0));
  EXPECT_EQ(fired, 0);
  Signal(fd);
  loop->RunOnce(milliseconds(1000));
  EXPECT_EQ(fired, 1);
  loop->RemoveFd(fd);
  Signal(fd);
  loop->RunOnce(milliseconds(10));
  EXPECT_EQ(fired, 1);
  close(fd);
}

TEST(EventLoop, TimersFireInDeadlineOrder) {
  auto loop = NewLoop();
  std::string order;
  loop->AddTimer(milliseconds(30), [&] { order += "c"; });
  loop->AddTimer(milliseconds(10), [&] { order += "a"; });
  loop->AddTimer(milliseconds(10), [&] { order += "b"; });  // same deadline: added later, later
  EventLoop::TimerId cancelled = loop->AddTimer(milliseconds(20), [&] { order += "x"; });
  loop->CancelTimer(cancelled);
  loop->AddTimer(milliseconds(40), [&] { loop->Stop(); });
  loop->Run();
  EXPECT_EQ(order, "abc");
}

TEST(EventLoop, PeriodicTimerRepeatsUntilCancelled) {
  auto loop = NewLoop();
  int ticks = 0;
  EventLoop::TimerId id = 0;
  id = loop->AddPeriodic(milliseconds(2), [&] {
    if (++ticks == 3) {
      loop->CancelTimer(id);  // its own timer, from inside
      loop->AddTimer(milliseconds(20), [&] { loop->Stop(); });
    }
  });
  loop->Run();
  EXPECT_EQ(ticks, 3);
}

TEST(EventLoop, PostFromAnotherThreadWakesTheLoop) {
  auto loop = NewLoop();
  std::vector<int> got;
  std::thread poster([&] {
    std::this_thread::sleep_for(milliseconds(20));
    for (int i = 0; i < 3; ++i) loop->Post([&got, i] { got.push_back(i); });
    loop->Post([&] { loop->Stop(); });
  });
  loop->Run();  // no timers: only the posts can end it
  poster.join();
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2}));
}

// A helper thread abandoned at shutdown may post after the loop is gone: its
// Poster refuses, and writes nothing to the descriptor number the loop's
// eventfd had (which the next open reuses).
TEST(EventLoop, APosterOutlivingTheLoopIsRefused) {
  auto loop = NewLoop();
  EventLoop::Poster poster = loop->poster();
  bool ran = false;
  ASSERT_TRUE(poster.Post([&] { ran = true; }));
  loop->RunOnce(milliseconds(100));
  EXPECT_TRUE(ran);

  ASSERT_TRUE(poster.Post([] { FAIL() << "a post still queued when the loop went must not run"; }));
  loop.reset();
  int reused[2];
  ASSERT_EQ(pipe2(reused, O_NONBLOCK | O_CLOEXEC), 0);
  EXPECT_FALSE(poster.Post([] {}));
  uint64_t stray;
  EXPECT_EQ(read(reused[0], &stray, sizeof(stray)), -1);  // nothing was written
  EXPECT_EQ(errno, EAGAIN);
  close(reused[0]);
  close(reused[1]);
}

TEST(EventLoop, StopFromAnotherThreadEndsRun) {
  auto loop = NewLoop();
  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(20));
    loop->Stop();
  });
  loop->Run();
  stopper.join();
  loop->Stop();
  loop->Run();  // a Stop before Run: returns at once
}

TEST(EventLoop, RemovingFdsInsideACallbackIsSafe) {
  auto loop = NewLoop();
  int a = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  int b = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  int fired = 0;
  // Whichever fires first removes both: the other's event of this pass is dropped.
  auto remove_both = [&](uint32_t) {
    ++fired;
    loop->RemoveFd(a);
    loop->RemoveFd(b);
  };
  ASSERT_TRUE(loop->AddFd(a, EPOLLIN, remove_both).ok());
  ASSERT_TRUE(loop->AddFd(b, EPOLLIN, remove_both).ok());
  Signal(a);
  Signal(b);
  loop->RunOnce(milliseconds(1000));
  EXPECT_EQ(fired, 1);
  loop->RunOnce(milliseconds(10));
  EXPECT_EQ(fired, 1);
  // And added again: a new registration for the same number.
  ASSERT_TRUE(loop->AddFd(a, EPOLLIN, [&](uint32_t) { fired += 10; loop->RemoveFd(a); }).ok());
  loop->RunOnce(milliseconds(1000));
  EXPECT_EQ(fired, 11);
  close(a);
  close(b);
}

TEST(EventLoop, StopInsideACallbackSkipsTheRestOfThePass) {
  auto loop = NewLoop();
  int ran = 0;
  loop->AddTimer(milliseconds(0), [&] {
    ++ran;
    loop->Stop();
  });
  loop->AddTimer(milliseconds(0), [&] { ++ran; });
  loop->Run();
  EXPECT_EQ(ran, 1);
  EXPECT_TRUE(loop->RunOnce(milliseconds(100)));  // the second one, on the next run
  EXPECT_EQ(ran, 2);
}

}  // namespace
}  // namespace maglb
