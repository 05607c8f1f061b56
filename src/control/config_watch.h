// Watches the config file for changes with inotify. The directory is watched,
// not the file: editors and `mv new.toml config.toml` replace the file (a new
// inode), which a watch on the file itself would miss.
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
  /// Reads the pending events; true if one concerns the config file (written
  /// and closed, moved or created in place, or deleted).
  bool ConsumeEvents();

 private:
  ConfigWatch(int fd, std::string file_name) : fd_(fd), file_name_(std::move(file_name)) {}
  int fd_ = -1;
  std::string file_name_;
};

}  // namespace maglb

#endif  // MAGLB_CONTROL_CONFIG_WATCH_H_
