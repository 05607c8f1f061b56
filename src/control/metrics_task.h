// The Prometheus exporter: GET (or HEAD) /metrics over HTTP on [metrics]
// listen (metrics_config.h), anything else 404 (other paths) or 405 (other
// methods). Served by GNU libmicrohttpd on threads of its own, never the
// control loop's: a small fixed pool (kMetricsThreads) polls every
// connection (poll(2): with epoll, libmicrohttpd 0.9.75 can leave a
// connection that arrived while at the limit unaccepted until another
// comes), so an idle or slow client holds a descriptor, not a thread, and
// cannot delay a scrape behind it. Each connection is capped
// (kMetricsRequestBytes for its request line and headers: larger is refused
// with 431, a longer URL with 414; kMetricsIdleTimeoutS without progress:
// closed), and so is their number (kMetricsConnectionLimit: newcomers wait
// in the kernel's listen backlog until one closes).
//
// The body comes from `render` (the controller renders the metric list under
// its lock: prometheus.h); the workers are never touched beyond the
// counters it reads. The socket is bound in Start, so an address in use, or
// one this host does not have, fails the daemon's start with what to change.
// A reload does not rebind (reload_task.cc says so when listen changes).
#ifndef MAGLB_CONTROL_METRICS_TASK_H_
#define MAGLB_CONTROL_METRICS_TASK_H_

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "control/control_task.h"
#include "maglb/metrics_config.h"

struct MHD_Daemon;

namespace maglb {

inline constexpr unsigned kMetricsThreads = 2;
inline constexpr unsigned kMetricsConnectionLimit = 256;
/// A scrape's request is a few hundred bytes.
inline constexpr size_t kMetricsRequestBytes = 16 * 1024;
inline constexpr unsigned kMetricsIdleTimeoutS = 10;

class MetricsTask : public ControlTask {
 public:
  struct Options {
    /// The body of /metrics; called on the exporter's threads.
    std::function<std::string()> render;
    std::string_view content_type;
  };
  explicit MetricsTask(Options options);
  ~MetricsTask() override;
  MetricsTask(const MetricsTask&) = delete;
  MetricsTask& operator=(const MetricsTask&) = delete;

  /// What Start serves; before Start. Not enabled: Start serves nothing.
  void Configure(const MetricsConfig& config, std::string_view config_path);

  std::string_view name() const override { return "metrics"; }
  /// Binds and serves (needs nothing of the loop).
  absl::Status Start(EventLoop& loop) override;
  absl::Status Listen();
  /// Closes the socket and every connection, and joins the threads.
  void Stop() override;

  bool serving() const { return daemon_ != nullptr; }

 private:
  Options options_;
  MetricsConfig config_;
  std::string config_path_;
  MHD_Daemon* daemon_ = nullptr;
};

}  // namespace maglb

#endif  // MAGLB_CONTROL_METRICS_TASK_H_
