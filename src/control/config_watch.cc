#include "config_watch.h"  // bare: the unit test compiles this file without -Isrc

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"

namespace maglb {

absl::StatusOr<ConfigWatch> ConfigWatch::Create(const std::string& path) {
  std::string dir = ".", name = path;
  size_t slash = path.rfind('/');
  if (slash != std::string::npos) {
    dir = slash == 0 ? "/" : path.substr(0, slash);
    name = path.substr(slash + 1);
  }
  int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError(absl::StrFormat("inotify_init1: %s", std::strerror(errno)));
  }
  if (inotify_add_watch(fd, dir.c_str(),
                        IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MODIFY) < 0) {
    int err = errno;
    close(fd);
    return absl::InternalError(
        absl::StrFormat("cannot watch %s for config changes: %s", dir, std::strerror(err)));
  }
  return ConfigWatch(fd, name);
}

ConfigWatch::ConfigWatch(ConfigWatch&& other) noexcept
    : fd_(other.fd_), file_name_(std::move(other.file_name_)) {
  other.fd_ = -1;
}

ConfigWatch::~ConfigWatch() {
  if (fd_ >= 0) close(fd_);
}

bool ConfigWatch::ConsumeEvents() {
  alignas(inotify_event) char buf[8192];
  bool relevant = false;
  while (true) {
    ssize_t n = read(fd_, buf, sizeof(buf));
    if (n <= 0) break;
    for (ssize_t off = 0; off < n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
      if (ev->len > 0 && file_name_ == ev->name) relevant = true;
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
    }
  }
  return relevant;
}

}  // namespace maglb
