#include "config_watch.h"  // bare: the unit test compiles this file without -Isrc

#include <limits.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_format.h"

namespace maglb {

namespace {

// Only events after which the file is complete: a writer closing it, a file
// renamed into place, a name created or removed. Not IN_MODIFY: an editor
// pausing mid-write would have a truncated prefix loaded (most prefixes of a
// config are valid configs with fewer VIPs).
constexpr uint32_t kFileEvents = IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE;

// IN_CREATE of a regular file comes when it is opened, still empty: its
// IN_CLOSE_WRITE follows once it is written. Anything else created under the
// name (a symlink, a directory) is complete at once.
bool CreatedComplete(const std::string& dir, const char* name) {
  struct stat st;
  std::string path = dir + "/" + name;
  return lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode);
}

// "dir/name" -> {"dir", "name"}; "name" -> {".", "name"}.
std::pair<std::string, std::string> SplitPath(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

}  // namespace

absl::StatusOr<ConfigWatch> ConfigWatch::Create(const std::string& path) {
  auto [dir, name] = SplitPath(path);
  int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError(absl::StrFormat("inotify_init1: %s", std::strerror(errno)));
  }
  int wd = inotify_add_watch(fd, dir.c_str(), kFileEvents);
  if (wd < 0) {
    int err = errno;
    close(fd);
    return absl::InternalError(
        absl::StrFormat("cannot watch %s for config changes: %s", dir, std::strerror(err)));
  }
  ConfigWatch w(fd, wd, path, name, dir);
  w.Resolve();
  return w;
}

ConfigWatch::ConfigWatch(ConfigWatch&& other) noexcept
    : fd_(other.fd_),
      dir_wd_(other.dir_wd_),
      target_wd_(other.target_wd_),
      path_(std::move(other.path_)),
      file_name_(std::move(other.file_name_)),
      dir_(std::move(other.dir_)),
      target_(std::move(other.target_)),
      target_name_(std::move(other.target_name_)),
      target_dir_(std::move(other.target_dir_)) {
  other.fd_ = -1;
}

ConfigWatch::~ConfigWatch() {
  if (fd_ >= 0) close(fd_);
}

bool ConfigWatch::Resolve() {
  char buf[PATH_MAX];
  std::string target = realpath(path_.c_str(), buf) != nullptr ? std::string(buf) : "";
  if (target == target_) return false;
  target_ = target;
  if (target_wd_ >= 0) {
    inotify_rm_watch(fd_, target_wd_);  // fails harmlessly if the directory is gone
    target_wd_ = -1;
  }
  target_name_.clear();
  target_dir_.clear();
  if (!target_.empty()) {
    auto [dir, name] = SplitPath(target_);
    target_name_ = name;
    target_dir_ = dir;
    int wd = inotify_add_watch(fd_, dir.c_str(), kFileEvents);
    // The same directory as the path's (no symlink) gives the same watch:
    // that one is not ours to remove.
    if (wd >= 0 && wd != dir_wd_) target_wd_ = wd;
  }
  return true;
}

bool ConfigWatch::ConsumeEvents() {
  alignas(inotify_event) char buf[8192];
  bool relevant = false;
  bool any = false;
  while (true) {
    ssize_t n = read(fd_, buf, sizeof(buf));
    if (n <= 0) break;
    any = true;
    for (ssize_t off = 0; off < n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
      if (ev->mask & IN_Q_OVERFLOW) relevant = true;  // events lost: cannot tell
      if (ev->len > 0) {
        const bool at_path = ev->wd == dir_wd_ && file_name_ == ev->name;
        const bool at_target = ev->wd >= 0 && ev->wd == (target_wd_ >= 0 ? target_wd_ : dir_wd_) &&
                               target_name_ == ev->name;
        if (at_path || at_target) {
          if (!(ev->mask & IN_CREATE) ||
              CreatedComplete(at_path ? dir_ : target_dir_, ev->name)) {
            relevant = true;
          }
        }
      }
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
    }
  }
  // A symlink along the way may have been swapped (..data renamed over): the
  // path now names another, complete file. A regular file appearing at the
  // path itself is not complete yet: its close or rename says when.
  if (any && Resolve()) {
    struct stat st;
    if (target_.empty() || lstat(path_.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) relevant = true;
  }
  return relevant;
}

}  // namespace maglb
