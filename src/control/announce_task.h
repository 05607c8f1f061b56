// Route announcement (maglb/announce.h decides): one host route per VIP
// address that this instance can serve, in the kernel routing table
// [announce] table, on the kernel interface, for the BGP daemon beside maglb
// to learn and announce (README "Fleet"). Every [announce] interval_ms the
// task decides from the current snapshot and adds or deletes the routes that
// changed. Whether the workers pass their quiescent points (the snapshot's
// RCU) is watched by a thread of its own (StallWatch): a stalled worker also
// blocks every Publish on the control thread, which could then withdraw
// nothing. A drain (SIGUSR1, `maglbctl drain`, SIGTERM) withdraws every
// route at once and ends the loop [announce] drain_s later; the routes also
// go when maglb stops, and with the kernel interface if maglb dies.
#ifndef MAGLB_CONTROL_ANNOUNCE_TASK_H_
#define MAGLB_CONTROL_ANNOUNCE_TASK_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <optional>
#include <string>
#include <vector>

#include "control/control_stats.h"
#include "control/control_task.h"
#include "control/event_loop.h"
#include "dataplane/rtnetlink.h"
#include "dataplane/snapshot.h"
#include "maglb/announce.h"
#include "maglb/announce_config.h"

namespace maglb {

class AnnounceTask : public ControlTask {
 public:
  struct Options {
    SnapshotPublisher* publisher = nullptr;
    ControlStats* stats = nullptr;  ///< written under publisher->mutex()
    std::string kernel_interface;   ///< empty: no kernel interface, nothing to announce on
  };

  explicit AnnounceTask(Options options);
  std::string_view name() const override { return "announce"; }
  absl::Status Start(EventLoop& loop) override;
  /// Withdraws every route (a clean shutdown).
  void Stop() override;

  /// [announce] is set in the running config.
  bool enabled() const;
  bool draining() const { return draining_; }
  /// A route is announced now, or one was withdrawn within drain_s: a
  /// shutdown should drain. Otherwise nothing of this instance is in
  /// flight at the router and SIGTERM can stop at once.
  bool AnnouncedRecently() const;
  /// Withdraws every route now, keeps forwarding, and calls `done` on the
  /// loop [announce] drain_s later (at once when 0). `why`: "SIGUSR1".
  void Drain(const std::string& why, EventLoop::Callback done);

 private:
  struct Route {
    IpAddress address;
    uint8_t prefix_len = 0;
  };

  // Starts a liveness round every interval and, while a round stays unpassed
  // longer than stall_ms, flushes every route of ours from the table with
  // its own rtnetlink socket; never takes the publisher's mutex.
  class StallWatch {
   public:
    ~StallWatch() { Stop(); }
    absl::Status Start(SnapshotPublisher* publisher);
    void Stop();
    /// Taken by the watch at its next round (from the loop's thread).
    void Configure(const AnnounceConfig& config);
    bool ever_live() const { return ever_live_.load(); }
    /// How long the current round has gone unpassed; 0 when it passed.
    uint64_t stalled_ms() const { return stalled_ms_.load(); }
    bool stalled() const { return stalled_.load(); }
    /// Grows each time the watch flushed the table (the loop's idea of what
    /// is installed is then wrong).
    uint64_t flushes() const { return flushes_.load(); }

   private:
    void Run();

    SnapshotPublisher* publisher_ = nullptr;
    std::optional<Rtnetlink> netlink_;
    std::thread thread_;
    std::mutex mu_;  // guards config_ and stop_ (never the publisher's)
    std::condition_variable wake_;
    AnnounceConfig config_;
    bool stop_ = false;
    std::atomic<bool> ever_live_{false};
    std::atomic<bool> stalled_{false};
    std::atomic<uint64_t> stalled_ms_{0};
    std::atomic<uint64_t> flushes_{0};
  };

  void Tick();
  // The workers' liveness, as the watch last saw it.
  AnnounceReadiness Readiness(const AnnounceConfig& config);
  void Apply(const std::vector<AddressAnnouncement>& decisions, const AnnounceConfig& config);
  bool Add(const std::string& prefix, const Route& route, const std::string& reason);
  bool Remove(const std::string& prefix, const Route& route, const std::string& reason);
  // Under the publisher's mutex.
  void RouteFailed(const std::string& prefix, std::string_view what, const absl::Status& s);
  // Deletes every route of ours (those it knows, then the table by
  // protocol); false if the table could not be flushed (retried later).
  bool WithdrawAll(const std::string& reason);
  // Puts every installed route back (replace: no change if present). The
  // kernel drops a route, without a word, when its interface goes down.
  void Refresh();
  static constexpr uint64_t kRefreshTicks = 20;
  void RearmTimer(uint32_t interval_ms);
  void PublishStatus(const std::vector<AddressAnnouncement>& decisions, const std::string& state,
                     uint32_t table);

  Options options_;
  EventLoop* loop_ = nullptr;
  std::optional<Rtnetlink> netlink_;
  int ifindex_ = 0;
  EventLoop::TimerId timer_ = 0;
  uint32_t timer_interval_ms_ = 0;

  // Routes in the kernel now (prefix -> route), and where they are.
  std::map<std::string, Route> installed_;
  uint32_t table_ = 0;
  uint8_t protocol_ = 0;
  std::map<std::string, std::string> failing_;  // prefix -> last error logged
  // The VIPs last seen on each address (prefix -> names), for the fields of
  // its log events; kept after they leave it, for the withdrawal's.
  std::map<std::string, std::vector<std::string>> vips_of_;

  StallWatch watch_;
  uint64_t watch_flushes_seen_ = 0;
  uint64_t ticks_ = 0;

  uint64_t last_withdrawal_ns_ = 0;
  bool draining_ = false;
  std::string drain_reason_;
  std::string state_ = "off";
};

}  // namespace maglb

#endif  // MAGLB_CONTROL_ANNOUNCE_TASK_H_
