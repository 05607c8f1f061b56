// maglb's DPDK telemetry socket as maglbctl reads it: the client, the paged
// /maglb/vips and /maglb/vip fetches, and readers of reply fields that never
// trust the reply (a missing, negative or oversized value reads as absent or
// bounded, never as undefined behaviour). `stats` and `fleet` both use it.
#ifndef MAGLB_CTL_TELEMETRY_CLIENT_H_
#define MAGLB_CTL_TELEMETRY_CLIENT_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "maglb/metrics.h"
#include "nlohmann/json.hpp"

namespace maglb::telemetry {

// Replies keep their fields' order (the stats table lists reasons in it).
using Json = nlohmann::ordered_json;

/// The socket of a maglb started with --file-prefix PREFIX.
std::string SocketPath(std::string_view prefix);

// A number field (0 if absent or not a number: an older maglb), a string
// field ("" likewise). Counters are never negative: a negative or non-finite
// number reads as 0, one past 2^64 as the largest.
uint64_t AsU64(const Json& x);
uint64_t U64(const Json& j, std::string_view key);
uint64_t U64(const Json& j, MetricId id);
/// A VIP metric in a /maglb/vip reply.
uint64_t VipU64(const Json& j, MetricId id);
std::string Str(const Json& j, std::string_view key);
const Json* Get(const Json& j, std::string_view key);
size_t ArraySize(const Json* a);

class TelemetryClient {
 public:
  TelemetryClient() = default;
  TelemetryClient(const TelemetryClient&) = delete;
  TelemetryClient& operator=(const TelemetryClient&) = delete;
  ~TelemetryClient();
  /// Connects and reads the server's greeting.
  absl::Status Connect(const std::string& path);
  /// What the greeting said ({"version": "DPDK 22.11.4", "pid": 1234,
  /// "max_output_len": 16384}), as it came: an empty object if it was not a
  /// JSON object. Nothing in it is checked; see GreetingPid.
  const Json& greeting() const { return greeting_; }
  /// The pid of the process that serves the socket (the one that made it
  /// listen), from the kernel (SO_PEERCRED), in the caller's pid namespace:
  /// unlike the greeting's pid, which is the server's own view. nullopt when
  /// not connected or the kernel tells none; 0 when the server is in a pid
  /// namespace the caller does not see into.
  std::optional<pid_t> PeerPid() const;
  /// Sends `cmd`; returns the value of its {"<cmd>": value} reply (null when
  /// the command failed or is unknown), and in `raw` its text if not null.
  /// A reply that is not JSON, or nested deeper than any of maglb's, is an
  /// error.
  absl::StatusOr<Json> Query(const std::string& cmd, std::string* raw);

 private:
  absl::StatusOr<std::string> Read();
  int fd_ = -1;
  Json greeting_ = Json::object();
};

/// The pid a greeting names, if it names one a process can have: an integer
/// from 1 to Linux's PID_MAX_LIMIT. Anything else (missing, 0, negative, a
/// float, a string, past the limit) is an error saying what came: a caller
/// that signals it must never pass 0 or -1 (a process group, every process)
/// to kill().
absl::StatusOr<int> GreetingPid(const Json& greeting);

/// The per-backend arrays of /maglb/vip: texts, then every backend metric.
const std::vector<std::string>& BackendArrays();
/// What a maglb from before health checks does not send.
bool IsHealthArray(std::string_view key);
/// Whether a VIP reply reports health (a maglb with health checks).
bool SendsHealth(const Json& vip);

/// One VIP with all its backends, its pages merged. A null Json if the VIP
/// is gone.
absl::StatusOr<Json> FetchVip(TelemetryClient& client, const std::string& name);

struct VipList {
  std::vector<std::string> names;
  std::string gap;  ///< what is missing, in words; "" if the list is whole
};
/// Every VIP name, its pages joined.
absl::StatusOr<VipList> FetchVipNames(TelemetryClient& client);

/// What the reply of a VIP lacks for its backend count, in words; "" if none.
std::string VipGaps(const Json& v);
/// The backends a VIP reply has rows for.
size_t BackendRows(const Json& v);
/// Entry i of the reply's array `key`; null if it has none there.
const Json* Entry(const Json& v, std::string_view key, size_t i);
const Json* Entry(const Json& v, MetricId id, size_t i);
/// A counter or gauge as maglb sends it, a non-negative integer; nullopt for
/// anything else.
std::optional<uint64_t> Count(const Json* x);
std::optional<std::string> Text(const Json* x);
/// A text of the reply as the terminal gets it: printable ASCII, anything
/// else '?', at most 200 bytes.
std::string Shown(std::string_view s);

/// One VIP of a snapshot: its name and its reply (pages merged).
using VipDetail = std::pair<std::string, Json>;

/// Everything one maglb answers: /maglb/stats, the VIP list and each VIP.
struct Snapshot {
  Json stats;
  std::string stats_raw;  ///< /maglb/stats' value as it came
  std::vector<VipDetail> vips;
  std::string vip_gap;  ///< VipList::gap
  /// /maglb/announce's value: null from a maglb older than route
  /// announcement, or when announce_error says why it is unusable.
  Json announce;
  std::string announce_raw;    ///< its text as it came ("" when null)
  std::string announce_error;  ///< "" unless the reply was unreadable
  /// Incomplete replies (a cut VIP list, a VIP lacking values), in words:
  /// the snapshot is usable but not whole.
  std::vector<std::string> warnings;
};

/// Connects to `socket_path` and reads a Snapshot. An error says what failed,
/// naming the socket where the error is about it.
absl::StatusOr<Snapshot> ReadSnapshot(const std::string& socket_path);
/// The same over a connected client (whose greeting the caller reads too:
/// `top` tells a restarted maglb by its pid); `socket_path` names it in errors.
absl::StatusOr<Snapshot> ReadSnapshot(TelemetryClient& client, const std::string& socket_path);

}  // namespace maglb::telemetry

#endif  // MAGLB_CTL_TELEMETRY_CLIENT_H_
