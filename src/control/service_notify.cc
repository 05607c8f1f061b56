#include "control/service_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"
#include "control/log.h"

namespace maglb {

namespace {

std::atomic<bool> g_failure_logged{false};

void LogFailureOnce(const std::string& why) {
  if (!g_failure_logged.exchange(true)) {
    LogLine(absl::StrFormat("warning: cannot notify the service manager (NOTIFY_SOCKET): %s; "
                            "a Type=notify unit may time out waiting for READY=1",
                            why));
  }
}

}  // namespace

bool ServiceNotify(std::string_view state) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path == nullptr || path[0] == '\0') return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const size_t len = std::strlen(path);
  // '@' names an abstract socket (a leading NUL); otherwise a path, which
  // must be absolute (sd_notify refuses anything else too).
  if ((path[0] != '/' && path[0] != '@') || len >= sizeof(addr.sun_path)) {
    // Escaped: the variable is the environment's, and a newline in it would
    // forge a log line.
    LogFailureOnce(absl::StrFormat("'%s' is neither an absolute path nor an abstract '@' name of "
                                   "at most %u bytes",
                                   absl::CHexEscape(path), sizeof(addr.sun_path) - 1));
    return false;
  }
  std::memcpy(addr.sun_path, path, len);
  if (path[0] == '@') addr.sun_path[0] = '\0';
  const socklen_t addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len);
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    LogFailureOnce(absl::StrFormat("socket: %s", std::strerror(errno)));
    return false;
  }
  const ssize_t sent = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL | MSG_DONTWAIT,
                              reinterpret_cast<const sockaddr*>(&addr), addr_len);
  const int err = errno;
  close(fd);
  if (sent != static_cast<ssize_t>(state.size())) {
    LogFailureOnce(absl::StrFormat("send to %s: %s", absl::CHexEscape(path), sent < 0 ? std::strerror(err) : "short"));
    return false;
  }
  return true;
}

std::string OneLine(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

std::string ServingStatus(uint64_t generation, size_t vips, size_t backends) {
  return absl::StrFormat("serving generation %u: %u VIP%s, %u backend%s", generation, vips,
                         vips == 1 ? "" : "s", backends, backends == 1 ? "" : "s");
}

void NotifyReady(std::string_view status) {
  ServiceNotify(absl::StrCat("READY=1\nSTATUS=", OneLine(status)));
}

void NotifyReloading(std::string_view status) {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const uint64_t usec = static_cast<uint64_t>(now.tv_sec) * 1'000'000 +
                        static_cast<uint64_t>(now.tv_nsec) / 1000;
  ServiceNotify(absl::StrCat("RELOADING=1\nMONOTONIC_USEC=", usec, "\nSTATUS=", OneLine(status)));
}

void NotifyStopping(std::string_view status) {
  ServiceNotify(absl::StrCat("STOPPING=1\nSTATUS=", OneLine(status)));
}

void NotifyStatus(std::string_view status) { ServiceNotify(absl::StrCat("STATUS=", OneLine(status))); }

}  // namespace maglb
