// The few rtnetlink requests the kernel interface needs (kernel_port.h):
// addresses on it, and no IPv6 address the kernel would make up by itself;
// and the VIP routes a BGP daemon learns from a routing table of maglb's
// ([announce], announce_config.h).
// Linux only, no DPDK: plain libmnl on a NETLINK_ROUTE socket, each request
// acknowledged (or its error returned) before the call returns.
#ifndef MAGLB_DATAPLANE_RTNETLINK_H_
#define MAGLB_DATAPLANE_RTNETLINK_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "maglb/ip_address.h"

struct mnl_socket;

namespace maglb {

class Rtnetlink {
 public:
  static absl::StatusOr<Rtnetlink> Open();
  Rtnetlink(Rtnetlink&&) noexcept;
  Rtnetlink& operator=(Rtnetlink&&) = delete;
  ~Rtnetlink();

  /// IFLA_INET6_ADDR_GEN_MODE none: the kernel generates no IPv6 address
  /// (link-local or SLAAC) of its own on the interface; it has only those
  /// added here. Set it while the link is down, before the kernel generates.
  absl::Status DisableIpv6AddressGeneration(int ifindex);

  /// Adds `address`/`prefix_len` (IPv6: without duplicate address detection,
  /// IFA_F_NODAD, so it is usable at once; maglb answers for it on the wire).
  /// An address already there is no error.
  absl::Status AddAddress(int ifindex, const IpAddress& address, uint8_t prefix_len);

  // --- Routes: `address`/`prefix_len` dev `ifindex` in routing table `table`
  // (1 .. 2^32-1; ids over 255 travel in RTA_TABLE), with rtm_protocol
  // `protocol` (5 .. 255: 0 .. 4 are the kernel's). `address` must be the
  // prefix itself (no host bits past prefix_len), prefix_len at most 32 for
  // IPv4, 128 for IPv6; anything else is refused (InvalidArgument) before a
  // request is sent.

  /// Adds or replaces the route, scope link (IPv6: universe, as the kernel
  /// keeps it), type unicast (NLM_F_CREATE | NLM_F_REPLACE): idempotent.
  /// The kernel refuses it while the interface is down (ENETDOWN), drops
  /// it when the interface goes down or away, and does not bring it back.
  absl::Status ReplaceRoute(uint32_t table, uint8_t protocol, int ifindex, const IpAddress& address,
                            uint8_t prefix_len);
  /// Deletes that route (only with that protocol and interface); a route
  /// already gone (ESRCH / ENOENT) is no error.
  absl::Status DeleteRoute(uint32_t table, uint8_t protocol, int ifindex, const IpAddress& address,
                           uint8_t prefix_len);
  /// Deletes every route of `protocol` in `table`, both families, on any
  /// interface: those an earlier run left. Returns how many it deleted.
  /// Routes of other protocols in the table stay.
  absl::StatusOr<int> FlushRoutes(uint32_t table, uint8_t protocol);

  /// The socket, for tests that put others' messages in its way.
  int fd_for_test() const;

 private:
  explicit Rtnetlink(mnl_socket* socket);
  // Sends the request in buf_ and waits for its acknowledgement, skipping
  // whatever answers another request; *kernel_error: the errno the kernel
  // answered, or 0.
  absl::Status Request(const char* what, int* kernel_error);
  // Reads and drops everything queued in the socket, without waiting.
  void DiscardQueued();
  // RTM_NEWROUTE / RTM_DELROUTE of one route, after the checks above.
  absl::Status RouteRequest(uint16_t type, uint16_t flags, uint32_t table, uint8_t protocol, int ifindex,
                            const IpAddress& address, uint8_t prefix_len, int* kernel_error);

  mnl_socket* socket_ = nullptr;
  uint32_t port_id_ = 0;
  uint32_t seq_ = 0;
  std::unique_ptr<char[]> buf_;
};

}  // namespace maglb

#endif  // MAGLB_DATAPLANE_RTNETLINK_H_
