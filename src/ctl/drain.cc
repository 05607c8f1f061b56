#include "drain.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "maglb/exit_codes.h"
#include "telemetry_client.h"

namespace maglb {

const char kDrainUsage[] =
    "  maglbctl drain [--prefix PREFIX | --socket PATH] [--wait [--timeout-s N]]\n"
    "      a graceful stop of a maglb that announces its VIPs ([announce]):\n"
    "      sends it SIGUSR1 (the pid its telemetry socket names, once the\n"
    "      kernel says that process serves the socket and /proc says it is a\n"
    "      maglb); maglb withdraws every route, forwards for\n"
    "      [announce] drain_s so the router moves traffic away, then exits.\n"
    "      Refused when maglb announces nothing (stop it with SIGTERM); not\n"
    "      signalled again when already draining (maglb ignores a second\n"
    "      SIGUSR1; SIGTERM then stops it at once). --wait: until it has exited, at most N s (default: the\n"
    "      drain's end + 30 s). Exit 0: draining (--wait: stopped); 1: not\n"
    "      signalled (the pid is not the socket's server, no maglb, or in\n"
    "      another pid namespace; no permission); 2: a wrong command\n"
    "      line, or nothing announced; 3: the instance could not be read, or\n"
    "      --wait timed out\n";

namespace {

using telemetry::Json;
using Clock = std::chrono::system_clock;

constexpr std::string_view kDaemonName = "maglb";
// How long maglb takes to handle the signal: the control thread withdraws
// the routes (a few rtnetlink requests) before it reports "draining".
constexpr auto kDrainReportWait = std::chrono::seconds(5);
constexpr auto kPollInterval = std::chrono::milliseconds(50);
constexpr int64_t kWaitSlackS = 30;
// A drain end further away than this is no drain_s anyone configures: the
// default wait is then kUnknownDrainWaitS, not a day.
constexpr int64_t kMaxPlausibleDrainS = 24 * 3600;
constexpr int64_t kUnknownDrainWaitS = 60;
constexpr int64_t kMaxTimeoutS = 7 * 24 * 3600;

struct AnnounceView {
  std::string state;
  uint64_t table = 0;
  uint64_t routes = 0;
  uint64_t drain_until_ms = 0;
};

// /maglb/announce as drain needs it. An older maglb (no such command) is a
// FailedPrecondition: it has no drain to ask for.
absl::StatusOr<AnnounceView> ReadAnnounce(telemetry::TelemetryClient& client) {
  absl::StatusOr<Json> a = client.Query("/maglb/announce", nullptr);
  if (!a.ok()) return a.status();
  if (a->is_null()) {
    return absl::FailedPreconditionError(
        "this maglb does not report route announcement (it is older than [announce]): nothing is "
        "announced to withdraw; stop it with SIGTERM instead");
  }
  if (!a->is_object()) return absl::DataLossError("unreadable reply to /maglb/announce: not an object");
  AnnounceView v;
  v.state = telemetry::Str(*a, "state");
  // Only a state drain understands leads to a signal.
  if (v.state != "off" && v.state != "starting" && v.state != "announcing" && v.state != "stalled" &&
      v.state != "draining") {
    return absl::DataLossError(absl::StrFormat("/maglb/announce reports state \"%s\", which maglbctl does not know",
                                               telemetry::Shown(v.state)));
  }
  v.table = telemetry::U64(*a, "table");
  v.routes = telemetry::U64(*a, "routes");
  v.drain_until_ms = telemetry::U64(*a, "drain_until_unix_ms");
  return v;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
}

// "12:34:56 UTC"; "?" for no time (0) or one no clock shows.
std::string UtcClock(uint64_t unix_ms) {
  constexpr uint64_t kYear10000Ms = 253402300800000;
  if (unix_ms == 0 || unix_ms >= kYear10000Ms) return "?";
  const time_t secs = static_cast<time_t>(unix_ms / 1000);
  tm utc{};
  char buf[32];
  if (gmtime_r(&secs, &utc) == nullptr || std::strftime(buf, sizeof(buf), "%H:%M:%S UTC", &utc) == 0) return "?";
  return buf;
}

std::string Until(const AnnounceView& a) {
  return a.drain_until_ms == 0 ? "forwarding for [announce] drain_s, then it exits"
                               : absl::StrFormat("forwarding until %s, then it exits", UtcClock(a.drain_until_ms));
}

// Seconds from now until the drain ends; nullopt when the reply gives no
// plausible end.
std::optional<int64_t> DrainLeftS(const AnnounceView& a) {
  if (a.drain_until_ms == 0 || a.drain_until_ms > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  const int64_t left_ms = static_cast<int64_t>(a.drain_until_ms) - NowMs();
  if (left_ms > kMaxPlausibleDrainS * 1000) return std::nullopt;
  return left_ms > 0 ? (left_ms + 999) / 1000 : 0;
}

std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// A process named by the greeting, held by a pidfd where the kernel offers
// one: the signal then reaches that very process or none (a pid freed and
// reused after the check gets nothing), and its exit is seen by poll().
// Without pidfds (old kernels, some seccomp filters) it falls back to
// kill() and /proc.
//
// Raw syscalls: glibc 2.36's <sys/pidfd.h> declares its wrappers without C
// linkage, so C++ cannot link them.
class Process {
 public:
  explicit Process(int pid) : pid_(pid) {}
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process() {
    if (pidfd_ >= 0) close(pidfd_);
  }

  // Opens the process and checks that it is a maglb: its comm, or its
  // executable's name, is "maglb". Anything else gets no signal.
  absl::Status OpenMaglb() {
    pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0U));
    if (pidfd_ < 0 && errno == ESRCH) {
      return absl::NotFoundError(
          absl::StrFormat("no process %d is running: the socket is stale, or its maglb is in another pid "
                          "namespace; nothing signalled",
                          pid_));
    }
    // ENOSYS, or EPERM from a seccomp filter: no pidfds here. Anything else
    // (EINVAL: a thread's id, not a process's) gets no signal.
    if (pidfd_ < 0 && errno != ENOSYS && errno != EPERM) {
      return absl::FailedPreconditionError(
          absl::StrFormat("process %d: %s; nothing signalled", pid_, std::strerror(errno)));
    }
    const std::string comm = FirstLine(absl::StrFormat("/proc/%d/comm", pid_));
    std::string exe;
    char buf[4096];
    if (ssize_t n = readlink(absl::StrFormat("/proc/%d/exe", pid_).c_str(), buf, sizeof(buf) - 1); n > 0) {
      exe.assign(buf, static_cast<size_t>(n));
      // An upgraded binary still runs as "/usr/sbin/maglb (deleted)".
      constexpr std::string_view kDeleted = " (deleted)";
      if (exe.ends_with(kDeleted)) exe.resize(exe.size() - kDeleted.size());
    }
    const std::string exe_name = exe.substr(exe.rfind('/') == std::string::npos ? 0 : exe.rfind('/') + 1);
    if (comm.empty() && exe.empty()) {
      return absl::NotFoundError(absl::StrFormat("no process %d in /proc: nothing signalled", pid_));
    }
    if (comm != kDaemonName && exe_name != kDaemonName) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "process %d (the pid the telemetry socket names) is \"%s\"%s, not maglb: nothing signalled", pid_,
          telemetry::Shown(comm), exe.empty() ? "" : absl::StrFormat(" (%s)", telemetry::Shown(exe))));
    }
    return absl::OkStatus();
  }

  absl::Status Signal(int sig) {
    const int rc = pidfd_ >= 0 ? static_cast<int>(syscall(SYS_pidfd_send_signal, pidfd_, sig, nullptr, 0U)) : kill(pid_, sig);
    if (rc == 0) return absl::OkStatus();
    const int err = errno;
    if (err == ESRCH) return absl::NotFoundError(absl::StrFormat("maglb %d exited before the signal", pid_));
    return absl::PermissionDeniedError(absl::StrFormat("cannot signal maglb %d: %s%s", pid_, std::strerror(err),
                                                       err == EPERM ? " (run as its user or root)" : ""));
  }

  // Whether it has exited (a zombie not yet reaped by its parent has).
  bool Gone() {
    if (pidfd_ >= 0) {
      pollfd p{pidfd_, POLLIN, 0};
      return poll(&p, 1, 0) > 0;
    }
    const std::string stat = FirstLine(absl::StrFormat("/proc/%d/stat", pid_));
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size()) return true;
    const char state = stat[paren + 2];
    return state == 'Z' || state == 'X';
  }

  // Waits until it has exited, at most `timeout`; whether it has.
  bool WaitGone(std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (!Gone()) {
      const auto left = end - std::chrono::steady_clock::now();
      if (left <= std::chrono::milliseconds(0)) return false;
      if (pidfd_ >= 0) {
        pollfd p{pidfd_, POLLIN, 0};
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count();
        poll(&p, 1, static_cast<int>(std::min<int64_t>(ms + 1, 1000)));
      } else {
        std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(left, kPollInterval));
      }
    }
    return true;
  }

 private:
  int pid_;
  int pidfd_ = -1;
};

absl::Status CheckServer(const telemetry::TelemetryClient& client, const std::string& socket_path,
                         int greeting_pid) {
  const std::optional<pid_t> peer = client.PeerPid();
  if (!peer) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: the kernel does not say which process serves it (SO_PEERCRED failed), so its greeting's pid %d "
        "cannot be trusted; nothing signalled",
        socket_path, greeting_pid));
  }
  if (*peer == 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: the process serving it is in a pid namespace this one does not see (its greeting names pid %d "
        "there); run maglbctl drain in maglb's pid namespace; nothing signalled",
        socket_path, greeting_pid));
  }
  if (*peer != greeting_pid) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: its greeting names pid %d, but the process serving it is %d here: maglb runs in another pid "
        "namespace (a container: run maglbctl drain inside it), or the socket is not served by the process it "
        "names; nothing signalled",
        socket_path, greeting_pid, *peer));
  }
  return absl::OkStatus();
}

int Fail(int rc, const std::string& message) {
  std::fprintf(stderr, "maglbctl drain: %s\n", message.c_str());
  return rc;
}

int ExitFor(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kPermissionDenied:
      return kExitError;
    default:
      return kExitUnreadable;
  }
}

}  // namespace

int CmdDrain(int argc, char** argv) {
  std::string prefix = "rte", socket_path, label;
  bool wait = false;
  std::optional<int64_t> timeout_s;
  for (int i = 0; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--prefix" && i + 1 < argc) {
      prefix = argv[++i];
      label = "prefix " + prefix;
    } else if (a == "--socket" && i + 1 < argc) {
      socket_path = argv[++i];
      label = "socket " + socket_path;
    } else if (a == "--wait") {
      wait = true;
    } else if (a == "--timeout-s" && i + 1 < argc) {
      int64_t v = 0;
      if (!absl::SimpleAtoi(argv[++i], &v) || v < 1 || v > kMaxTimeoutS) {
        std::fprintf(stderr, "maglbctl drain: --timeout-s is a number of seconds from 1 to %lld, not '%s'\n",
                     static_cast<long long>(kMaxTimeoutS), argv[i]);
        return kExitUsage;
      }
      timeout_s = v;
    } else {
      std::fprintf(stderr, "maglbctl drain: unexpected argument '%s'\n%s", argv[i], kDrainUsage);
      return kExitUsage;
    }
  }
  if (timeout_s && !wait) {
    std::fprintf(stderr, "maglbctl drain: --timeout-s bounds --wait; give both\n%s", kDrainUsage);
    return kExitUsage;
  }
  if (socket_path.empty()) socket_path = telemetry::SocketPath(prefix);
  if (label.empty()) label = "prefix " + prefix;

  telemetry::TelemetryClient client;
  if (absl::Status s = client.Connect(socket_path); !s.ok()) return Fail(kExitUnreadable, std::string(s.message()));
  absl::StatusOr<int> pid = telemetry::GreetingPid(client.greeting());
  if (!pid.ok()) {
    return Fail(kExitUnreadable, absl::StrFormat("%s: %s; nothing signalled", socket_path, pid.status().message()));
  }
  // The greeting's pid is the server's own view: a maglb in a container
  // names a pid of its namespace, which here may be any process (another
  // maglb even). The kernel's word on who serves the socket, in this
  // namespace, must agree.
  if (absl::Status s = CheckServer(client, socket_path, *pid); !s.ok()) {
    return Fail(kExitError, std::string(s.message()));
  }
  absl::StatusOr<AnnounceView> before = ReadAnnounce(client);
  if (!before.ok()) {
    const bool older = before.status().code() == absl::StatusCode::kFailedPrecondition;
    return Fail(older ? kExitUsage : kExitUnreadable,
                absl::StrFormat("maglb %d (%s): %s", *pid, label, before.status().message()));
  }
  const std::string who = absl::StrFormat("maglb %d (%s)", *pid, label);
  if (before->state == "off") {
    return Fail(kExitUsage, absl::StrFormat("%s: nothing is announced (no [announce] in its config), so there is "
                                            "nothing to withdraw; stop it with SIGTERM instead",
                                            who));
  }

  Process process(*pid);
  if (absl::Status s = process.OpenMaglb(); !s.ok()) return Fail(ExitFor(s), std::string(s.message()));

  AnnounceView draining = *before;
  bool stopped = false;
  if (before->state == "draining") {
    std::printf("%s is already draining (%s): not signalled again\n",
                who.c_str(), Until(*before).c_str());
  } else {
    if (absl::Status s = process.Signal(SIGUSR1); !s.ok()) return Fail(ExitFor(s), std::string(s.message()));
    // Until maglb says it drains: then its routes are withdrawn and its
    // drain's end is known. It may also be gone already (drain_s 0).
    const auto give_up = std::chrono::steady_clock::now() + kDrainReportWait;
    bool reported = false;
    while (!reported && !stopped) {
      absl::StatusOr<AnnounceView> now = ReadAnnounce(client);
      if (now.ok() && now->state == "draining") {
        draining = *now;
        reported = true;
      } else if (process.Gone()) {
        stopped = true;
      } else if (!now.ok() && now.status().code() != absl::StatusCode::kDeadlineExceeded) {
        // The socket closed: maglb is on its way out.
        stopped = process.WaitGone(std::chrono::seconds(2));
        if (!stopped) {
          return Fail(kExitUnreadable, absl::StrFormat("%s was sent SIGUSR1, then its telemetry failed: %s", who,
                                                       now.status().message()));
        }
      } else if (std::chrono::steady_clock::now() >= give_up) {
        return Fail(kExitUnreadable,
                    absl::StrFormat("%s was sent SIGUSR1 but reports \"%s\", not draining, after %d s: look at "
                                    "its log; not signalled again (a second signal stops it at once)",
                                    who, now.ok() ? telemetry::Shown(now->state) : "no reply",
                                    static_cast<int>(kDrainReportWait.count())));
      } else {
        std::this_thread::sleep_for(kPollInterval);
      }
    }
    if (stopped) {
      std::printf("%s stopped on SIGUSR1 before it reported draining\n", who.c_str());
      return kExitOk;
    }
    const uint64_t withdrawn = before->routes > draining.routes ? before->routes - draining.routes : 0;
    const std::string still = draining.routes == 0 ? "" : absl::StrFormat(" (%u still there)", draining.routes);
    std::printf("%s\n", absl::StrFormat("%s draining: %u route%s withdrawn from table %u%s; %s", who, withdrawn,
                                        withdrawn == 1 ? "" : "s", draining.table, still, Until(draining))
                            .c_str());
  }
  std::fflush(stdout);
  if (!wait) return kExitOk;

  const std::optional<int64_t> left = DrainLeftS(draining);
  const int64_t bound = timeout_s ? *timeout_s : left ? *left + kWaitSlackS : kUnknownDrainWaitS;
  const auto start = std::chrono::steady_clock::now();
  if (!process.WaitGone(std::chrono::seconds(bound))) {
    return Fail(kExitUnreadable,
                absl::StrFormat("%s is still running after %lld s of waiting; not signalled again (a second "
                                "signal stops it at once, dropping what it still forwards)",
                                who, static_cast<long long>(bound)));
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s stopped (waited %.1f s)\n", who.c_str(), waited);
  return kExitOk;
}

}  // namespace maglb
