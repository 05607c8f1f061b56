#include "dataplane/rtnetlink.h"

#include <libmnl/libmnl.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <time.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"

namespace maglb {
namespace {

// Every request here fits one page; answers (an ack or an error quoting the
// request) too.
constexpr size_t kBufferSize = 8192;
// A route dump comes in batches the kernel sizes by the reader's buffer, at
// most 32 KiB; a smaller buffer would truncate one.
constexpr size_t kDumpBufferSize = 32768;
// FlushRoutes dumps and deletes until a dump finds none left; a table that
// refills faster than this many rounds is someone else's fight.
constexpr int kMaxFlushRounds = 16;

// The lowest rtm_protocol of routing software; 0 .. 4 are the kernel's.
constexpr uint8_t kFirstRoutingSoftwareProtocol = RTPROT_STATIC + 1;

absl::Status CheckRoute(uint32_t table, uint8_t protocol, const IpAddress* address, uint8_t prefix_len,
                        const int* ifindex) {
  if (table == RT_TABLE_UNSPEC) {
    return absl::InvalidArgumentError("routing table 0 names no table (RT_TABLE_UNSPEC)");
  }
  if (protocol < kFirstRoutingSoftwareProtocol) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "route protocol %u is the kernel's (0 .. 4: unspec, redirect, kernel, boot, static)", protocol));
  }
  if (ifindex != nullptr && *ifindex <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat("interface index %d names no interface", *ifindex));
  }
  if (address == nullptr) return absl::OkStatus();
  const size_t bits = address->length() * 8;
  if (prefix_len > bits) {
    return absl::InvalidArgumentError(absl::StrFormat("%s/%u: an %s prefix has at most %u bits",
                                                      address->ToString(), prefix_len,
                                                      address->is_v6 ? "IPv6" : "IPv4", bits));
  }
  for (size_t bit = prefix_len; bit < bits; ++bit) {
    if ((address->bytes[bit / 8] >> (7 - bit % 8)) & 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s/%u: the address has bits set past the prefix length", address->ToString(), prefix_len));
    }
  }
  return absl::OkStatus();
}

// Puts the table: rtm_table holds ids up to 255, RTA_TABLE any (the kernel
// reads RTA_TABLE first).
void PutTable(nlmsghdr* nlh, rtmsg* rtm, uint32_t table) {
  rtm->rtm_table = static_cast<uint8_t>(table < 256 ? table : uint32_t{RT_TABLE_UNSPEC});
  mnl_attr_put_u32(nlh, RTA_TABLE, table);
}

// One route of a dump, as much of it as it takes to delete just that route.
struct DumpedRoute {
  rtmsg header;
  uint32_t table = 0;
  std::array<uint8_t, 16> dst{};
  bool has_dst = false;
  uint32_t oif = 0;
  std::optional<uint32_t> priority;
};

struct DumpFilter {
  uint32_t table;
  uint8_t protocol;
  std::vector<DumpedRoute>* out;
};

int RouteAttribute(const nlattr* attr, void* data) {
  auto** tb = static_cast<const nlattr**>(data);
  const int type = mnl_attr_get_type(attr);
  if (mnl_attr_type_valid(attr, RTA_MAX) < 0) return MNL_CB_OK;  // newer than these headers
  tb[type] = attr;
  return MNL_CB_OK;
}

int OnDumpedRoute(const nlmsghdr* nlh, void* data) {
  const auto* filter = static_cast<const DumpFilter*>(data);
  if (nlh->nlmsg_type != RTM_NEWROUTE) return MNL_CB_OK;
  const auto* rtm = static_cast<const rtmsg*>(mnl_nlmsg_get_payload(nlh));
  if (rtm->rtm_family != AF_INET && rtm->rtm_family != AF_INET6) return MNL_CB_OK;
  if (rtm->rtm_protocol != filter->protocol) return MNL_CB_OK;
  const nlattr* tb[RTA_MAX + 1] = {};
  // Never MNL_CB_ERROR: the rest of the dump would be left to answer the
  // next request. A message that does not parse is skipped.
  if (mnl_attr_parse(nlh, sizeof(rtmsg), RouteAttribute, tb) < 0) return MNL_CB_OK;
  DumpedRoute r;
  r.header = *rtm;
  r.table = tb[RTA_TABLE] != nullptr && mnl_attr_get_payload_len(tb[RTA_TABLE]) == 4
                ? mnl_attr_get_u32(tb[RTA_TABLE])
                : rtm->rtm_table;
  if (r.table != filter->table) return MNL_CB_OK;
  const size_t length = rtm->rtm_family == AF_INET6 ? 16 : 4;
  if (tb[RTA_DST] != nullptr) {
    if (mnl_attr_get_payload_len(tb[RTA_DST]) != length) return MNL_CB_OK;
    std::memcpy(r.dst.data(), mnl_attr_get_payload(tb[RTA_DST]), length);
    r.has_dst = true;
  }
  if (tb[RTA_OIF] != nullptr && mnl_attr_get_payload_len(tb[RTA_OIF]) == 4) {
    r.oif = mnl_attr_get_u32(tb[RTA_OIF]);
  }
  if (tb[RTA_PRIORITY] != nullptr && mnl_attr_get_payload_len(tb[RTA_PRIORITY]) == 4) {
    r.priority = mnl_attr_get_u32(tb[RTA_PRIORITY]);
  }
  filter->out->push_back(r);
  return MNL_CB_OK;
}

// The end of a dump carries the errno of a dump that failed midway.
int OnDumpDone(const nlmsghdr* nlh, void*) {
  if (mnl_nlmsg_get_payload_len(nlh) >= sizeof(int)) {
    int error;
    std::memcpy(&error, mnl_nlmsg_get_payload(nlh), sizeof(error));
    if (error < 0) {
      errno = -error;
      return MNL_CB_ERROR;
    }
  }
  return MNL_CB_STOP;
}

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

absl::Status Rtnetlink::RouteRequest(uint16_t type, uint16_t flags, uint32_t table, uint8_t protocol,
                                     int ifindex, const IpAddress& address, uint8_t prefix_len,
                                     int* kernel_error) {
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf_.get());
  nlh->nlmsg_type = type;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
  nlh->nlmsg_seq = ++seq_;
  auto* rtm = static_cast<rtmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(rtmsg)));
  rtm->rtm_family = address.is_v6 ? AF_INET6 : AF_INET;
  rtm->rtm_dst_len = prefix_len;
  rtm->rtm_protocol = protocol;
  rtm->rtm_type = RTN_UNICAST;
  // What iproute2 sends for `ip route add/del PREFIX dev IF`: a delete
  // matches any scope; IPv6 keeps no scope but universe.
  rtm->rtm_scope = type == RTM_DELROUTE ? RT_SCOPE_NOWHERE
                   : address.is_v6      ? RT_SCOPE_UNIVERSE
                                        : RT_SCOPE_LINK;
  PutTable(nlh, rtm, table);
  mnl_attr_put(nlh, RTA_DST, address.length(), address.bytes.data());
  mnl_attr_put_u32(nlh, RTA_OIF, static_cast<uint32_t>(ifindex));
  const std::string what =
      absl::StrFormat("%s route %s/%u dev #%d table %u proto %u",
                      type == RTM_DELROUTE ? "deleting" : "replacing", address.ToString(), prefix_len,
                      ifindex, table, protocol);
  return Request(what.c_str(), kernel_error);
}

absl::Status Rtnetlink::ReplaceRoute(uint32_t table, uint8_t protocol, int ifindex, const IpAddress& address,
                                     uint8_t prefix_len) {
  if (absl::Status s = CheckRoute(table, protocol, &address, prefix_len, &ifindex); !s.ok()) return s;
  int error;
  return RouteRequest(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE, table, protocol, ifindex, address,
                      prefix_len, &error);
}

absl::Status Rtnetlink::DeleteRoute(uint32_t table, uint8_t protocol, int ifindex, const IpAddress& address,
                                    uint8_t prefix_len) {
  if (absl::Status s = CheckRoute(table, protocol, &address, prefix_len, &ifindex); !s.ok()) return s;
  int error;
  absl::Status s = RouteRequest(RTM_DELROUTE, 0, table, protocol, ifindex, address, prefix_len, &error);
  return error == ESRCH || error == ENOENT ? absl::OkStatus() : s;
}

absl::StatusOr<int> Rtnetlink::FlushRoutes(uint32_t table, uint8_t protocol) {
  if (absl::Status s = CheckRoute(table, protocol, nullptr, 0, nullptr); !s.ok()) return s;
  // Strict checking (Linux 4.20+) lets the kernel dump only this table and
  // protocol instead of every route of the host (a full BGP table is a
  // million); without it the filter below does the same work in here.
  int strict = 1;
  mnl_socket_setsockopt(socket_, NETLINK_GET_STRICT_CHK, &strict, sizeof(strict));
  std::unique_ptr<char[]> dump(new char[kDumpBufferSize]);
  int deleted = 0;
  for (int round = 0; round < kMaxFlushRounds; ++round) {
    std::vector<DumpedRoute> routes;
    nlmsghdr* nlh = mnl_nlmsg_put_header(buf_.get());
    nlh->nlmsg_type = RTM_GETROUTE;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    nlh->nlmsg_seq = ++seq_;
    auto* rtm = static_cast<rtmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(rtmsg)));
    rtm->rtm_family = AF_UNSPEC;  // both families; a missing table is then no error
    rtm->rtm_protocol = protocol;
    PutTable(nlh, rtm, table);
    const uint32_t seq = nlh->nlmsg_seq;
    if (mnl_socket_sendto(socket_, nlh, nlh->nlmsg_len) < 0) {
      return absl::UnavailableError(
          absl::StrFormat("dumping routes of table %u: netlink send: %s", table, std::strerror(errno)));
    }
    DumpFilter filter{table, protocol, &routes};
    for (;;) {
      const ssize_t n = mnl_socket_recvfrom(socket_, dump.get(), kDumpBufferSize);
      if (n < 0) {
        return absl::UnavailableError(absl::StrFormat("dumping routes of table %u: netlink receive: %s",
                                                      table, std::strerror(errno)));
      }
      mnl_cb_t control[NLMSG_MIN_TYPE] = {};
      control[NLMSG_DONE] = OnDumpDone;
      const int rc = mnl_cb_run2(dump.get(), static_cast<size_t>(n), seq, port_id_, OnDumpedRoute, &filter,
                                 control, NLMSG_MIN_TYPE);
      if (rc == MNL_CB_STOP) break;
      // An error ends the dump: nothing of it is left to read.
      if (rc < 0) {
        return absl::InternalError(
            absl::StrFormat("dumping routes of table %u: %s", table, std::strerror(errno)));
      }
    }
    if (routes.empty()) return deleted;
    for (const DumpedRoute& r : routes) {
      nlmsghdr* del = mnl_nlmsg_put_header(buf_.get());
      del->nlmsg_type = RTM_DELROUTE;
      del->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
      del->nlmsg_seq = ++seq_;
      auto* d = static_cast<rtmsg*>(mnl_nlmsg_put_extra_header(del, sizeof(rtmsg)));
      d->rtm_family = r.header.rtm_family;
      d->rtm_dst_len = r.header.rtm_dst_len;
      d->rtm_tos = r.header.rtm_tos;
      d->rtm_protocol = protocol;
      d->rtm_type = r.header.rtm_type;
      d->rtm_scope = RT_SCOPE_NOWHERE;
      PutTable(del, d, table);
      const size_t length = r.header.rtm_family == AF_INET6 ? 16 : 4;
      if (r.has_dst) mnl_attr_put(del, RTA_DST, length, r.dst.data());
      if (r.oif != 0) mnl_attr_put_u32(del, RTA_OIF, r.oif);
      if (r.priority) mnl_attr_put_u32(del, RTA_PRIORITY, *r.priority);
      const std::string what = absl::StrFormat("flushing a route of table %u proto %u", table, protocol);
      int error;
      absl::Status s = Request(what.c_str(), &error);
      if (s.ok()) {
        ++deleted;
      } else if (error != ESRCH && error != ENOENT) {  // gone meanwhile: fine
        return s;
      }
    }
  }
  return absl::InternalError(absl::StrFormat(
      "flushing table %u proto %u: routes still there after %d rounds of deleting them (%d deleted); "
      "something keeps adding them",
      table, protocol, kMaxFlushRounds, deleted));
}

}  // namespace maglb
