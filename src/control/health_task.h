// The health task: probes every backend of every VIP that has a health check
// (control/health_probe.h: tcp, http, udp; direct to the backend, or through
// the tunnel like its data traffic), feeds the results into one HealthTracker
// per backend (maglb/health.h: rise/fall, flap hold-down, slow start), and
// turns them into the weights the tables are built with, as a
// SnapshotInputSource. Changes of many backends at once make one rebuild, and
// rebuilds are spaced by [health] rebuild_interval_ms (RebuildLimiter).
//
// A VIP whose every backend is down follows its all_down policy: keep_last
// (fail open: the weights it had before the last one went down stay) or drop
// (no table: new flows dropped as no_backend); entering and leaving that
// state is logged.
//
// Health is runtime state only: never written to the config. A reload keeps
// the state of every backend still configured with the same address; a
// removed backend's probes stop at once.
//
// Plain C++ on the control thread's EventLoop (no DPDK): its unit test runs
// it against real servers.
#ifndef MAGLB_CONTROL_HEALTH_TASK_H_
#define MAGLB_CONTROL_HEALTH_TASK_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "control/control_stats.h"
#include "control/control_task.h"
#include "control/health_probe.h"
#include "control/snapshot_inputs.h"
#include "maglb/health.h"
#include "maglb/lb_state.h"
#include "maglb/tunnel_probe.h"

namespace maglb {

class HealthTask : public ControlTask, public SnapshotInputSource {
 public:
  struct Options {
    SnapshotInputs* inputs = nullptr;  ///< asked to rebuild when weights change
    std::mutex* stats_mutex = nullptr;  ///< guards *stats (the publisher's mutex)
    ControlStats* stats = nullptr;
    /// Where tunnel probes' source ports are mapped to backends for the data
    /// plane; null: no kernel interface, tunnel checks cannot run.
    TunnelProbeTable* tunnel_probes = nullptr;
    /// Monotonic nanoseconds; steady_clock if empty (tests pass their own).
    std::function<uint64_t()> now_ns;
  };
  explicit HealthTask(Options options);
  ~HealthTask() override;

  std::string_view name() const override { return "health"; }
  absl::Status Start(EventLoop& loop) override;
  void Stop() override;

  void Fill(LbStateOptions& options) const override;
  /// Starts checks for new backends, stops those of removed ones, carries the
  /// state of the others over.
  void ConfigPublished(const LbState& state) override;

  /// Backends being checked (tests).
  size_t checked() const { return backends_.size(); }

 private:
  using Key = std::pair<std::string, std::string>;  // (VIP name, backend name)
  struct Backend;
  struct VipPolicy {
    AllDownPolicy all_down = AllDownPolicy::kKeepLast;
    DownFlows down_flows = DownFlows::kPin;
    /// Slow start scales every weight of the VIP (placement depends on
    /// ratios); a ring would be rebuilt by scaled weights, so it ramps by
    /// smaller weights instead (health.h EffectiveWeight).
    bool ramp_by_scaling = true;
    bool all_down_now = false;
  };

  uint64_t Now() const;
  void Schedule(Backend& b, uint64_t delay_ns);
  // The first probe of a backend, at a random point of its first interval.
  void ScheduleFirst(Backend& b);
  void RunProbe(const Key& key);
  void ProbeDone(const Key& key, const ProbeOutcome& outcome);
  void Forget(Backend& b);
  // Weights from every tracker; asks for a rebuild if they changed (from
  // `published`, the snapshot just published, if given; else from the last).
  void Recompute(const std::string& why, const LbState* published = nullptr);
  void MaybeRebuild();
  void ArmChangeTimer();
  void PublishStatus(const Backend& b);
  // A free probe port slot, at random; -1 when all are taken.
  int TakePortSlot();
  // A direct probe's slot for a tunnel probe (which cannot go without one).
  int TakeSlotFromDirectProbe();
  // Logs and counts a change of reported health.
  void Transitioned(Backend& b, const HealthTransition& t);

  Options options_;
  EventLoop* loop_ = nullptr;
  std::unique_ptr<Prober> prober_;
  bool first_config_ = true;
  std::map<Key, std::unique_ptr<Backend>> backends_;
  std::map<std::string, VipPolicy> vips_;
  /// What Fill hands out: the weights of the last Recompute.
  std::shared_ptr<const std::map<Key, BackendHealthInput>> inputs_;
  /// Weights before a VIP went all down (keep_last).
  std::map<Key, BackendHealthInput> last_serving_;
  RebuildLimiter limiter_{0};
  std::string pending_why_;
  EventLoop::TimerId rebuild_timer_ = 0;
  EventLoop::TimerId change_timer_ = 0;
  uint64_t change_timer_ns_ = 0;
  std::vector<bool> tunnel_ports_used_;
  std::mt19937_64 jitter_rng_;
};

}  // namespace maglb

#endif  // MAGLB_CONTROL_HEALTH_TASK_H_
