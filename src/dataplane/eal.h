// DPDK's Environment Abstraction Layer as an object: initialised (with the
// output it prints held back) when made, cleaned up when destroyed.
#ifndef MAGLB_DATAPLANE_EAL_H_
#define MAGLB_DATAPLANE_EAL_H_

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace maglb {

/// What rte_eal_init printed, held back (see Eal::Init).
struct EalOutput {
  std::vector<std::string> out, err;  ///< its stdout and stderr lines
  std::string program;                ///< argv[0], which getopt's complaints begin with
  FILE* replay_to = nullptr;          ///< where Replay prints every line instead (maglb's JSON log)

  /// Prints the held lines where they were going (or to replay_to).
  void Replay() const;
  /// The lines that say what went wrong, one-lined: getopt's complaints and
  /// EAL's log lines, without DPDK's usage text and generic trailers. With
  /// `only_with`, only lines containing one of those strings.
  std::string Reasons(const std::vector<std::string>& only_with = {}) const;
};

/// The initialised EAL; rte_eal_cleanup when destroyed. Destroy it last:
/// after it, every DPDK object (port, ring, mempool) is gone.
class Eal {
 public:
  /// rte_eal_init(argc, argv) with its stdout and stderr held back in
  /// `*output`: on a bad argument DPDK prints its whole usage text and each
  /// complaint twice, which would bury the caller's one error line. The
  /// caller replays them (Replay) or folds the reasons into its error line.
  /// On failure the status message is those reasons (or rte_errno's text).
  static absl::StatusOr<Eal> Init(int argc, char** argv, EalOutput* output);

  Eal(Eal&& other) noexcept
      : initialised_(std::exchange(other.initialised_, false)), consumed_(other.consumed_) {}
  Eal& operator=(Eal&&) = delete;
  ~Eal();

  /// How many arguments after argv[0] rte_eal_init took as its own.
  int consumed() const { return consumed_; }

 private:
  explicit Eal(int consumed) : initialised_(true), consumed_(consumed) {}

  bool initialised_;
  int consumed_;
};

}  // namespace maglb

#endif  // MAGLB_DATAPLANE_EAL_H_
