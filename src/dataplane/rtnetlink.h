// The few rtnetlink requests the kernel interface needs (kernel_port.h):
// addresses on it, and no IPv6 address the kernel would make up by itself.
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

 private:
  explicit Rtnetlink(mnl_socket* socket);
  // Sends the request in buf_ and waits for its acknowledgement;
  // *kernel_error: the errno the kernel answered, or 0.
  absl::Status Request(const char* what, int* kernel_error);

  mnl_socket* socket_ = nullptr;
  uint32_t port_id_ = 0;
  uint32_t seq_ = 0;
  std::unique_ptr<char[]> buf_;
};

}  // namespace maglb

#endif  // MAGLB_DATAPLANE_RTNETLINK_H_
