// The probe engine of active health checks: one probe (tcp connect, HTTP GET,
// UDP request/reply) to one target, on the control thread's EventLoop, with
// nothing that blocks and no thread of its own. The health task decides when
// to probe and feeds the outcomes into its HealthTrackers (maglb/health.h).
//
//  - tcp: a non-blocking connect; success = the connection completes.
//  - http: libcurl's multi-socket interface driven by the loop (its sockets
//    are AddFd'ed, its timer is a loop timer); GET http://DEST:PORT/path,
//    success = the expected status and, if set, the body substring within
//    the first kMaxHttpProbeReplyBytes of the reply. No proxy (environment
//    proxies included), no redirect followed, no connection reused.
//  - udp: send the payload on a connected socket; success = a reply (if
//    udp_expect is unset) or exactly udp_expect.
// Every probe's sockets are closed abortively (SO_LINGER 0: a RST, no
// TIME_WAIT), so probes that go out every second from one fixed source port
// (tunnel checks) never find that port busy.
//
// Failure details are written for an operator's log line ("vip web backend
// be2: up -> down (3 consecutive failures: connect timeout 500 ms)"):
// "connection refused", "connect timeout 500 ms", "timeout 500 ms (no
// reply)", "HTTP status 503, expected 200", "body did not contain \"ok\"",
// "port unreachable", ...
#ifndef MAGLB_CONTROL_HEALTH_PROBE_H_
#define MAGLB_CONTROL_HEALTH_PROBE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "event_loop.h"  // bare: the unit test compiles this file without -Isrc
#include "maglb/health.h"
#include "maglb/health_config.h"
#include "maglb/ip_address.h"

namespace maglb {

/// Where one probe goes, and from where.
struct ProbeTarget {
  IpAddress destination;
  uint16_t port = 0;
  /// Bind to this local address (the LB's own) if set; same family as
  /// `destination`.
  std::optional<IpAddress> source;
  /// Bind to this local port if non-zero (tunnel probes: the data plane maps
  /// it to a backend).
  uint16_t source_port = 0;
  /// HTTP Host header. Empty: the check's http_host, and if that is empty too,
  /// the destination as the URL names it ("10.0.0.2:8080", "[2001:db8::2]:80").
  std::string host;
};

/// An HTTP probe that waits this much past the check's timeout for libcurl to
/// report its own timeout is ended by the loop's timer ("timeout N ms"): a
/// backstop that never fires while libcurl works.
inline constexpr uint32_t kHttpProbeBackstopMs = 1000;

class Prober {
 public:
  using Done = std::function<void(ProbeOutcome)>;
  /// Never 0 (a caller may use 0 as "no probe").
  using ProbeId = uint64_t;

  /// Fails only if libcurl cannot be set up. The Prober must be destroyed
  /// before `loop`, on the loop's thread.
  static absl::StatusOr<std::unique_ptr<Prober>> Create(EventLoop& loop);
  /// Probes in flight are dropped: no callback runs, every descriptor closes.
  ~Prober();
  Prober(const Prober&) = delete;
  Prober& operator=(const Prober&) = delete;

  /// Starts one probe of `check` (type tcp, http or udp) to `target`, with
  /// check.timeout_ms (at least 1 ms) as its deadline. `done` runs on the
  /// loop exactly once, never inside Start (a probe that cannot even start,
  /// e.g. out of descriptors, reports that on the next pass), unless the
  /// probe is cancelled. Inside `done` the probe is no longer in flight;
  /// `done` may Start and Cancel probes, and may destroy the Prober.
  ProbeId Start(const HealthCheckConfig& check, const ProbeTarget& target, Done done);
  /// Ends a probe in flight: its `done` never runs, its descriptors close.
  /// Unknown or finished ids are ignored.
  void Cancel(ProbeId id);
  size_t in_flight() const { return probes_.size(); }

 private:
  struct Probe;
  struct Curl;  // the multi handle and its sockets

  explicit Prober(EventLoop& loop);
  void StartTcp(Probe& p, const ProbeTarget& target);
  void StartUdp(Probe& p, const ProbeTarget& target);
  void StartHttp(Probe& p, const ProbeTarget& target);
  int OpenSocket(Probe& p, const ProbeTarget& target, int type);
  void OnTcpEvent(ProbeId id);
  void OnUdpEvent(ProbeId id);
  /// Ends `p` at once but reports `outcome` on the next pass (Start must not
  /// call back).
  void FinishSoon(Probe& p, ProbeOutcome outcome);
  /// Frees the probe and runs its `done`; the Prober may be gone after it.
  void Complete(ProbeId id, ProbeOutcome outcome);
  void Release(Probe& p);
  void ArmDeadline(Probe& p, uint64_t ms, std::string detail);

  // libcurl's side (health_probe.cc).
  static int CurlSocket(void* easy, int fd, int what, void* self, void* socketp);
  static int CurlTimer(void* multi, long timeout_ms, void* self);
  void OnCurlEvent(int fd, uint32_t events);
  void OnCurlTimer();
  /// Completes the transfers libcurl has finished.
  void ReapCurl();
  ProbeOutcome JudgeHttp(Probe& p, int code);

  EventLoop& loop_;
  std::unique_ptr<Curl> curl_;
  std::map<ProbeId, std::unique_ptr<Probe>> probes_;
  ProbeId next_id_ = 1;
  // Expires when the Prober is destroyed: a loop that runs several `done`
  // callbacks stops once one of them destroyed it.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace maglb

#endif  // MAGLB_CONTROL_HEALTH_PROBE_H_
