#include "dataplane/rtnetlink.h"

#include <libmnl/libmnl.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <time.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"

namespace maglb {
namespace {

// Every request here fits one page; answers (an ack or an error quoting the
// request) too.
constexpr size_t kBufferSize = 8192;

}  // namespace

Rtnetlink::Rtnetlink(mnl_socket* socket)
    : socket_(socket), port_id_(mnl_socket_get_portid(socket)),
      seq_(static_cast<uint32_t>(time(nullptr))), buf_(new char[kBufferSize]) {}

Rtnetlink::Rtnetlink(Rtnetlink&& other) noexcept
    : socket_(std::exchange(other.socket_, nullptr)), port_id_(other.port_id_), seq_(other.seq_),
      buf_(std::move(other.buf_)) {}

Rtnetlink::~Rtnetlink() {
  if (socket_ != nullptr) mnl_socket_close(socket_);
}

absl::StatusOr<Rtnetlink> Rtnetlink::Open() {
  mnl_socket* s = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
  if (s == nullptr) {
    return absl::UnavailableError(absl::StrFormat("netlink socket: %s", std::strerror(errno)));
  }
  if (mnl_socket_bind(s, 0, MNL_SOCKET_AUTOPID) < 0) {
    const int e = errno;
    mnl_socket_close(s);
    return absl::UnavailableError(absl::StrFormat("netlink bind: %s", std::strerror(e)));
  }
  return Rtnetlink(s);
}

absl::Status Rtnetlink::Request(const char* what, int* kernel_error) {
  *kernel_error = 0;
  auto* nlh = reinterpret_cast<nlmsghdr*>(buf_.get());
  const uint32_t seq = nlh->nlmsg_seq;
  if (mnl_socket_sendto(socket_, nlh, nlh->nlmsg_len) < 0) {
    return absl::UnavailableError(absl::StrFormat("%s: netlink send: %s", what, std::strerror(errno)));
  }
  for (;;) {
    const ssize_t n = mnl_socket_recvfrom(socket_, buf_.get(), kBufferSize);
    if (n < 0) {
      return absl::UnavailableError(absl::StrFormat("%s: netlink receive: %s", what, std::strerror(errno)));
    }
    // The acknowledgement (MNL_CB_STOP) or the kernel's error (-1, errno).
    const int rc = mnl_cb_run(buf_.get(), static_cast<size_t>(n), seq, port_id_, nullptr, nullptr);
    if (rc == MNL_CB_STOP) return absl::OkStatus();
    if (rc < 0) {
      *kernel_error = errno;
      return absl::Status(
          *kernel_error == EPERM ? absl::StatusCode::kPermissionDenied : absl::StatusCode::kInternal,
          absl::StrFormat("%s: %s", what, std::strerror(*kernel_error)));
    }
  }
}

absl::Status Rtnetlink::DisableIpv6AddressGeneration(int ifindex) {
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf_.get());
  nlh->nlmsg_type = RTM_NEWLINK;  // on an existing link: changes its attributes
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  nlh->nlmsg_seq = ++seq_;
  auto* ifi = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifi->ifi_family = AF_UNSPEC;
  ifi->ifi_index = ifindex;
  nlattr* af_spec = mnl_attr_nest_start(nlh, IFLA_AF_SPEC);
  nlattr* inet6 = mnl_attr_nest_start(nlh, AF_INET6);
  mnl_attr_put_u8(nlh, IFLA_INET6_ADDR_GEN_MODE, IN6_ADDR_GEN_MODE_NONE);
  mnl_attr_nest_end(nlh, inet6);
  mnl_attr_nest_end(nlh, af_spec);
  int error;
  return Request("turning off IPv6 address generation", &error);
}

absl::Status Rtnetlink::AddAddress(int ifindex, const IpAddress& address, uint8_t prefix_len) {
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf_.get());
  nlh->nlmsg_type = RTM_NEWADDR;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK;
  nlh->nlmsg_seq = ++seq_;
  auto* ifa = static_cast<ifaddrmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifaddrmsg)));
  ifa->ifa_family = address.is_v6 ? AF_INET6 : AF_INET;
  ifa->ifa_prefixlen = prefix_len;
  ifa->ifa_scope = RT_SCOPE_UNIVERSE;  // IPv6 takes the scope from the address itself
  ifa->ifa_index = static_cast<uint32_t>(ifindex);
  const uint32_t flags = address.is_v6 ? IFA_F_NODAD : 0;
  ifa->ifa_flags = static_cast<uint8_t>(flags);
  mnl_attr_put(nlh, IFA_LOCAL, address.length(), address.bytes.data());
  mnl_attr_put(nlh, IFA_ADDRESS, address.length(), address.bytes.data());
  if (flags != 0) mnl_attr_put_u32(nlh, IFA_FLAGS, flags);
  const std::string what = absl::StrFormat("adding %s/%u", address.ToString(), prefix_len);
  int error;
  absl::Status s = Request(what.c_str(), &error);
  return error == EEXIST ? absl::OkStatus() : s;
}

}  // namespace maglb
