// What Rtnetlink reads from its socket, one datagram at a time, as pure
// functions on the bytes received: so that a hostile or unlucky datagram (a
// short message, a foreign sequence number, an interrupted dump) can be
// tested on hand-built buffers. Only rtnetlink.cc and its tests include it.
#ifndef MAGLB_DATAPLANE_RTNETLINK_INTERNAL_H_
#define MAGLB_DATAPLANE_RTNETLINK_INTERNAL_H_

#include <linux/rtnetlink.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace maglb::rtnetlink_internal {

/// Whether a message answers our request `seq` on port `port_id`: anything
/// else (a reply to an earlier request, one someone else's bogus request
/// drew) is skipped, never taken for our answer.
bool Answers(const nlmsghdr* nlh, uint32_t seq, uint32_t port_id);

/// The answer to a request sent with NLM_F_ACK, if this datagram holds it:
/// 0 for the acknowledgement, else the errno the kernel answered. nullopt
/// when the datagram holds only others' messages: read on.
std::optional<int> FindAck(const char* buf, size_t len, uint32_t seq, uint32_t port_id);

/// One route of a dump, as much of it as it takes to delete just that route.
struct DumpedRoute {
  rtmsg header{};
  uint32_t table = 0;
  std::array<uint8_t, 16> dst{};
  bool has_dst = false;
  uint32_t oif = 0;
  std::optional<uint32_t> priority;
};

/// One RTM_NEWROUTE of a dump, if it is a route of `protocol` in `table`
/// that parses; nullopt for anything else (another table or protocol, a
/// message too short for its rtmsg, attributes that do not parse).
std::optional<DumpedRoute> ParseRoute(const nlmsghdr* nlh, uint32_t table, uint8_t protocol);

/// A route dump answering request `seq`, read datagram by datagram.
struct Dump {
  uint32_t seq = 0;
  uint32_t port_id = 0;
  uint32_t table = 0;
  uint8_t protocol = 0;
  std::vector<DumpedRoute> routes;
  /// The kernel's NLMSG_DONE or NLMSG_ERROR has come: nothing of the dump is
  /// left in the socket.
  bool done = false;
  /// The errno the dump ended with (NLMSG_DONE or NLMSG_ERROR); 0 if none.
  int error = 0;
  /// The table changed while it was dumped (NLM_F_DUMP_INTR): routes may be
  /// missing or repeated; dump again.
  bool interrupted = false;
};

/// Takes in one datagram: our routes, the end of the dump and how it ended;
/// others' messages are skipped. Reading stops at the end of the dump
/// (messages past it in the datagram are not ours to read).
void ReadDumpBatch(const char* buf, size_t len, Dump* dump);

}  // namespace maglb::rtnetlink_internal

#endif  // MAGLB_DATAPLANE_RTNETLINK_INTERNAL_H_
