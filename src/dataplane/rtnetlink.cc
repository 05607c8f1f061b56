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
#include "dataplane/rtnetlink_internal.h"

namespace maglb {
namespace {

// Every request here fits one page. What is received can be bigger: a route
// dump comes in batches the kernel sizes by the reader's buffer, at most
// 32 KiB (a smaller buffer would truncate one), and a batch of a dump someone
// else asked for on this socket may come while a request waits for its ack.
constexpr size_t kBufferSize = 32768;
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

int RouteAttribute(const nlattr* attr, void* data) {
  auto** tb = static_cast<const nlattr**>(data);
  const int type = mnl_attr_get_type(attr);
  if (mnl_attr_type_valid(attr, RTA_MAX) < 0) return MNL_CB_OK;  // newer than these headers
  tb[type] = attr;
  return MNL_CB_OK;
}

// The errno a netlink error message carries; EPROTO for one that carries
// none a kernel sends (positive, or past the errno range).
int ErrnoOf(int error) { return error < 0 && error > -4096 ? -error : EPROTO; }

// Receives one datagram into `buf`, again when a signal interrupted the wait.
ssize_t Receive(mnl_socket* socket, char* buf, size_t size) {
  for (;;) {
    const ssize_t n = mnl_socket_recvfrom(socket, buf, size);
    if (n >= 0 || errno != EINTR) return n;
  }
}

}  // namespace

namespace rtnetlink_internal {

bool Answers(const nlmsghdr* nlh, uint32_t seq, uint32_t port_id) {
  // The kernel stamps its answers with the requester's port (0 on some old
  // paths): any other port is someone else's conversation.
  return nlh->nlmsg_seq == seq && (nlh->nlmsg_pid == 0 || nlh->nlmsg_pid == port_id);
}

std::optional<int> FindAck(const char* buf, size_t len, uint32_t seq, uint32_t port_id) {
  int left = static_cast<int>(len);
  for (auto* nlh = reinterpret_cast<const nlmsghdr*>(buf); mnl_nlmsg_ok(nlh, left);
       nlh = mnl_nlmsg_next(nlh, &left)) {
    if (!Answers(nlh, seq, port_id) || nlh->nlmsg_type != NLMSG_ERROR) continue;
    if (mnl_nlmsg_get_payload_len(nlh) < sizeof(nlmsgerr)) return EBADMSG;
    nlmsgerr err;
    std::memcpy(&err, mnl_nlmsg_get_payload(nlh), sizeof(err));
    return err.error == 0 ? 0 : ErrnoOf(err.error);
  }
  return std::nullopt;
}

std::optional<DumpedRoute> ParseRoute(const nlmsghdr* nlh, uint32_t table, uint8_t protocol) {
  if (nlh->nlmsg_type != RTM_NEWROUTE) return std::nullopt;
  // A message too short for its rtmsg would be read past its end.
  if (mnl_nlmsg_get_payload_len(nlh) < sizeof(rtmsg)) return std::nullopt;
  rtmsg rtm;
  std::memcpy(&rtm, mnl_nlmsg_get_payload(nlh), sizeof(rtm));
  if (rtm.rtm_family != AF_INET && rtm.rtm_family != AF_INET6) return std::nullopt;
  if (rtm.rtm_protocol != protocol) return std::nullopt;
  const nlattr* tb[RTA_MAX + 1] = {};
  if (mnl_attr_parse(nlh, sizeof(rtmsg), RouteAttribute, tb) < 0) return std::nullopt;
  DumpedRoute r;
  r.header = rtm;
  r.table = tb[RTA_TABLE] != nullptr && mnl_attr_get_payload_len(tb[RTA_TABLE]) == 4
                ? mnl_attr_get_u32(tb[RTA_TABLE])
                : rtm.rtm_table;
  if (r.table != table) return std::nullopt;
  const size_t length = rtm.rtm_family == AF_INET6 ? 16 : 4;
  if (tb[RTA_DST] != nullptr) {
    if (mnl_attr_get_payload_len(tb[RTA_DST]) != length) return std::nullopt;
    std::memcpy(r.dst.data(), mnl_attr_get_payload(tb[RTA_DST]), length);
    r.has_dst = true;
  }
  if (tb[RTA_OIF] != nullptr && mnl_attr_get_payload_len(tb[RTA_OIF]) == 4) {
    r.oif = mnl_attr_get_u32(tb[RTA_OIF]);
  }
  if (tb[RTA_PRIORITY] != nullptr && mnl_attr_get_payload_len(tb[RTA_PRIORITY]) == 4) {
    r.priority = mnl_attr_get_u32(tb[RTA_PRIORITY]);
  }
  return r;
}

void ReadDumpBatch(const char* buf, size_t len, Dump* dump) {
  int left = static_cast<int>(len);
  for (auto* nlh = reinterpret_cast<const nlmsghdr*>(buf); mnl_nlmsg_ok(nlh, left);
       nlh = mnl_nlmsg_next(nlh, &left)) {
    if (!Answers(nlh, dump->seq, dump->port_id)) continue;
    if (nlh->nlmsg_flags & NLM_F_DUMP_INTR) dump->interrupted = true;
    if (nlh->nlmsg_type == NLMSG_DONE) {
      // Its payload, where there is one, is the errno of a dump that failed
      // midway.
      if (mnl_nlmsg_get_payload_len(nlh) >= sizeof(int)) {
        int error;
        std::memcpy(&error, mnl_nlmsg_get_payload(nlh), sizeof(error));
        if (error != 0) dump->error = ErrnoOf(error);
      }
      dump->done = true;
      return;
    }
    if (nlh->nlmsg_type == NLMSG_ERROR) {
      if (mnl_nlmsg_get_payload_len(nlh) < sizeof(nlmsgerr)) {
        dump->error = EBADMSG;
      } else {
        nlmsgerr err;
        std::memcpy(&err, mnl_nlmsg_get_payload(nlh), sizeof(err));
        if (err.error != 0) dump->error = ErrnoOf(err.error);
      }
      dump->done = true;
      return;
    }
    if (std::optional<DumpedRoute> r = ParseRoute(nlh, dump->table, dump->protocol)) {
      dump->routes.push_back(*r);
    }
  }
}

}  // namespace rtnetlink_internal

using rtnetlink_internal::Dump;
using rtnetlink_internal::DumpedRoute;

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

void Rtnetlink::DiscardQueued() {
  // Each read lets the kernel queue a running dump's next batch, so this
  // reads until a dump is over and nothing is left.
  while (recv(mnl_socket_get_fd(socket_), buf_.get(), kBufferSize, MSG_DONTWAIT) >= 0 || errno == EINTR) {
  }
}

int Rtnetlink::fd_for_test() const { return mnl_socket_get_fd(socket_); }

absl::Status Rtnetlink::Request(const char* what, int* kernel_error) {
  *kernel_error = 0;
  auto* nlh = reinterpret_cast<nlmsghdr*>(buf_.get());
  const uint32_t seq = nlh->nlmsg_seq;
  if (mnl_socket_sendto(socket_, nlh, nlh->nlmsg_len) < 0) {
    return absl::UnavailableError(absl::StrFormat("%s: netlink send: %s", what, std::strerror(errno)));
  }
  // Messages that answer another request (a stray reply, what is left of an
  // earlier dump) are read and skipped until our own answer comes: else
  // every later request would read its predecessor's.
  for (;;) {
    const ssize_t n = Receive(socket_, buf_.get(), kBufferSize);
    if (n < 0 && errno == ENOSPC) continue;  // truncated: bigger than any answer of ours
    if (n < 0) {
      return absl::UnavailableError(absl::StrFormat("%s: netlink receive: %s", what, std::strerror(errno)));
    }
    const std::optional<int> answer =
        rtnetlink_internal::FindAck(buf_.get(), static_cast<size_t>(n), seq, port_id_);
    if (!answer) continue;
    if (*answer == 0) return absl::OkStatus();
    *kernel_error = *answer;
    return absl::Status(
        *kernel_error == EPERM ? absl::StatusCode::kPermissionDenied : absl::StatusCode::kInternal,
        absl::StrFormat("%s: %s", what, std::strerror(*kernel_error)));
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
  int deleted = 0;
  for (int round = 0; round < kMaxFlushRounds; ++round) {
    nlmsghdr* nlh = mnl_nlmsg_put_header(buf_.get());
    nlh->nlmsg_type = RTM_GETROUTE;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    nlh->nlmsg_seq = ++seq_;
    auto* rtm = static_cast<rtmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(rtmsg)));
    rtm->rtm_family = AF_UNSPEC;  // both families; a missing table is then no error
    rtm->rtm_protocol = protocol;
    PutTable(nlh, rtm, table);
    Dump dump;
    dump.seq = nlh->nlmsg_seq;
    dump.port_id = port_id_;
    dump.table = table;
    dump.protocol = protocol;
    if (mnl_socket_sendto(socket_, nlh, nlh->nlmsg_len) < 0) {
      return absl::UnavailableError(
          absl::StrFormat("dumping routes of table %u: netlink send: %s", table, std::strerror(errno)));
    }
    // To its end (NLMSG_DONE or NLMSG_ERROR) whatever comes: what is left
    // unread would be there for the next request to skip.
    while (!dump.done) {
      const ssize_t n = Receive(socket_, buf_.get(), kBufferSize);
      if (n < 0 && errno == ENOSPC) {  // a batch lost: never with this buffer
        dump.interrupted = true;
        continue;
      }
      if (n < 0) {
        return absl::UnavailableError(absl::StrFormat("dumping routes of table %u: netlink receive: %s",
                                                      table, std::strerror(errno)));
      }
      rtnetlink_internal::ReadDumpBatch(buf_.get(), static_cast<size_t>(n), &dump);
    }
    if (dump.error == EBUSY) {
      // Another dump on this socket is still running (one a failed receive
      // left, or someone's on the same socket): the kernel runs one at a
      // time. Reading it to its end ends it.
      DiscardQueued();
      continue;
    }
    if (dump.error != 0) {
      return absl::InternalError(
          absl::StrFormat("dumping routes of table %u: %s", table, std::strerror(dump.error)));
    }
    const std::vector<DumpedRoute>& routes = dump.routes;
    // The table changed while it was dumped: routes may be missing from it,
    // so an empty one proves nothing; those it has are deleted all the same
    // and the next round dumps again.
    if (routes.empty() && !dump.interrupted) return deleted;
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
