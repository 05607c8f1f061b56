// Watches the config file for changes with inotify. The directory is watched,
// not the file: editors and `mv new.toml config.toml` replace the file (a new
// inode), which a watch on the file itself would miss. Where the path is a
// symlink (a Kubernetes ConfigMap: maglb.toml -> ..data/maglb.toml, with
// ..data swapped to a new directory on update), the resolved target's
// directory is watched too, and the target is resolved again after events.
// Only complete writes count (close after writing, rename into place, a
// symlink created or swapped, the file removed): never a write in progress.
#ifndef MAGLB_CONTROL_CONFIG_WATCH_H_
#define MAGLB_CONTROL_CONFIG_WATCH_H_

#include <string>

#include "absl/status/statusor.h"

namespace maglb {

class ConfigWatch {
 public:
  static absl::StatusOr<ConfigWatch> Create(const std::string& path);
  ConfigWatch(ConfigWatch&& other) noexcept;
  ConfigWatch& operator=(ConfigWatch&&) = delete;
  ~ConfigWatch();

  /// A descriptor that becomes readable when something in the directory changed.
  int fd() const { return fd_; }
  /// Reads the pending events; true if one concerns the config file (closed
  /// after writing, moved into place, created as anything but a regular file
  /// being written, or deleted, at the path or at its resolved target), if
  /// the path now resolves to another file (a symlink swapped), or if the
  /// kernel's event queue overflowed (events were lost: reload to be sure).
  bool ConsumeEvents();

 private:
  ConfigWatch(int fd, int dir_wd, std::string path, std::string file_name, std::string dir)
      : fd_(fd),
        dir_wd_(dir_wd),
        path_(std::move(path)),
        file_name_(std::move(file_name)),
        dir_(std::move(dir)) {}
  // Resolves path_ and moves the target directory's watch there; true if the
  // resolved file changed.
  bool Resolve();

  int fd_ = -1;
  int dir_wd_ = -1;     // the directory holding path_
  int target_wd_ = -1;  // the resolved target's directory, when it is another one
  std::string path_;
  std::string file_name_;
  std::string dir_;          // the directory holding path_
  std::string target_;       // path_ resolved ("" if it does not resolve)
  std::string target_name_;  // its last component
  std::string target_dir_;   // and its directory
};

}  // namespace maglb

#endif  // MAGLB_CONTROL_CONFIG_WATCH_H_
