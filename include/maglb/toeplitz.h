// Receive-side scaling in software: the Toeplitz hash that NICs compute over
// a packet's addresses and ports (Microsoft's RSS specification), and the
// owner decision built on it: which worker's queue the NIC puts a flow on.
// DPDK-free: the data plane reads the key, the hash types and the
// indirection table (RETA) from its port at start-up and hands them here.
//
// Used for ICMP errors (packet.h): the NIC spreads an error by its outer
// header (router -> VIP), so it may reach a worker that does not track the
// flow it quotes; the worker that does is the one whose queue the flow's own
// packets (client -> VIP, the error's inner tuple reversed) are hashed to.
#ifndef MAGLB_TOEPLITZ_H_
#define MAGLB_TOEPLITZ_H_

#include <cstddef>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "maglb/flow.h"

namespace maglb {

/// Longest input the hash takes: IPv6 source, destination, two ports.
inline constexpr size_t kRssMaxInputLen = 36;

/// Toeplitz hash of `input` (network byte order, as on the wire) under `key`.
/// Bits of the input past (key.size() - 4) * 8 are not hashed (a key must be
/// 4 bytes longer than the input; NICs use 40 or 52 bytes).
uint32_t ToeplitzHash(std::span<const uint8_t> key, std::span<const uint8_t> input);

/// The packet types a port hashes, and on which fields. A TCP or UDP flow is
/// hashed on (source, destination, source port, destination port) when its
/// family's type for that protocol is set, else on (source, destination) when
/// the family's IP type is set, else not at all (hash 0: RETA entry 0), the
/// way NICs apply their most specific enabled type. A key without ports (a
/// fragment's: packet.h) is hashed on the addresses, as NICs hash fragments.
struct RssHashTypes {
  bool ipv4 = false;
  bool ipv4_tcp = false;
  bool ipv4_udp = false;
  bool ipv6 = false;
  bool ipv6_tcp = false;
  bool ipv6_udp = false;
};

/// A port's RSS as its NIC applies it.
struct RssConfig {
  std::vector<uint8_t> key;   ///< Toeplitz key (40 or 52 bytes)
  RssHashTypes types;
  std::vector<uint16_t> reta; ///< indirection table: hash % size -> RX queue
};

/// The RSS hash the NIC computes for the packets of `flow` (as the parser
/// keys them: packet.h). Ports are taken as they are in the key.
uint32_t RssHash(const RssConfig& rss, const FlowKey& flow);

/// Which worker owns a flow: the one polling the RX queue that the port's RSS
/// puts the flow's packets on (worker i polls queue i). Immutable, shared by
/// all workers.
class RssOwner {
 public:
  static constexpr uint32_t kUnknown = UINT32_MAX;

  /// Refuses a key too short for IPv6 4-tuples (< 40 bytes) or an empty RETA.
  static absl::StatusOr<RssOwner> Create(RssConfig rss, uint32_t workers);

  /// The worker whose queue gets `flow`, or kUnknown when that queue has no
  /// worker (a RETA pointing past the polled queues).
  uint32_t OwnerOf(const FlowKey& flow) const;

  /// RssHash(config(), flow), from per-nibble tables (4.5 KB) built once.
  uint32_t Hash(const FlowKey& flow) const;

  const RssConfig& config() const { return rss_; }

 private:
  RssOwner(RssConfig rss, uint32_t workers) : rss_(std::move(rss)), workers_(workers) {}
  RssConfig rss_;
  uint32_t workers_;
  std::array<std::array<uint32_t, 16>, 2 * kRssMaxInputLen> nibbles_{};
};

}  // namespace maglb

#endif  // MAGLB_TOEPLITZ_H_
