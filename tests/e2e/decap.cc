// maglb-decap: a backend's user-space tunnel endpoint for the test topology.
// The test kernel has no ipip/gre modules, so this reads GRE (RFC 2784) and
// IP-in-IP (IPv4/IPv6 outer, IPPROTO 4 / 41) packets addressed to this host
// from an AF_PACKET socket and writes the inner packet into a TUN device; the
// kernel then delivers it to the VIP on loopback and answers the client
// directly (DSR).
//
// usage: maglb-decap --iface IFACE --tun TUNDEV [--quiet]
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

namespace {

constexpr uint8_t kProtoIpip = 4;
constexpr uint8_t kProtoIpv6 = 41;
constexpr uint8_t kProtoGre = 47;
constexpr uint16_t kGreChecksum = 0x8000, kGreKey = 0x2000, kGreSeq = 0x1000;

volatile sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

int OpenTun(const std::string& name) {
  int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
  if (fd < 0) return -1;
  ifreq ifr{};
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
  std::snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name.c_str());
  if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A raw socket for `proto` that keeps nothing: its only job is to exist, so
// that the kernel counts the protocol as delivered and does not answer each
// tunnelled packet with ICMP "protocol unreachable".
int OpenSink(int family, int proto) {
  int fd = socket(family, SOCK_RAW | SOCK_CLOEXEC, proto);
  if (fd < 0) return -1;
  sock_filter drop_all[] = {{BPF_RET | BPF_K, 0, 0, 0}};
  sock_fprog prog{1, drop_all};
  setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog));
  return fd;
}

// Returns the inner packet of a tunnelled IP packet, or an empty view.
std::string_view Inner(const uint8_t* p, size_t n) {
  if (n < 1) return {};
  size_t hlen;
  uint8_t proto;
  if ((p[0] >> 4) == 4) {
    if (n < 20) return {};
    hlen = (p[0] & 0x0F) * 4u;
    uint16_t frag = static_cast<uint16_t>(p[6] << 8 | p[7]);
    if (hlen < 20 || hlen > n || (frag & 0x3FFF) != 0) return {};  // fragments: not handled
    proto = p[9];
  } else if ((p[0] >> 4) == 6) {
    if (n < 40) return {};
    hlen = 40;
    proto = p[6];  // extension headers: not used by maglb
  } else {
    return {};
  }
  const uint8_t* l4 = p + hlen;
  size_t rest = n - hlen;
  if (proto == kProtoIpip || proto == kProtoIpv6) {
    return {reinterpret_cast<const char*>(l4), rest};
  }
  if (proto != kProtoGre || rest < 4) return {};
  uint16_t flags = static_cast<uint16_t>(l4[0] << 8 | l4[1]);
  if ((flags & 0x0007) != 0) return {};  // GRE version must be 0
  size_t glen = 4 + ((flags & kGreChecksum) ? 4 : 0) + ((flags & kGreKey) ? 4 : 0) +
                ((flags & kGreSeq) ? 4 : 0);
  if (rest < glen) return {};
  return {reinterpret_cast<const char*>(l4 + glen), rest - glen};
}

}  // namespace

int main(int argc, char** argv) {
  std::string iface, tun;
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--iface" && i + 1 < argc) {
      iface = argv[++i];
    } else if (a == "--tun" && i + 1 < argc) {
      tun = argv[++i];
    } else if (a == "--quiet") {
      quiet = true;
    } else {
      std::fprintf(stderr, "usage: maglb-decap --iface IFACE --tun TUNDEV [--quiet]\n");
      return 2;
    }
  }
  if (iface.empty() || tun.empty()) {
    std::fprintf(stderr, "usage: maglb-decap --iface IFACE --tun TUNDEV [--quiet]\n");
    return 2;
  }
  unsigned ifindex = if_nametoindex(iface.c_str());
  if (ifindex == 0) {
    std::fprintf(stderr, "maglb-decap: no interface %s: %s\n", iface.c_str(), std::strerror(errno));
    return 1;
  }
  int tun_fd = OpenTun(tun);
  if (tun_fd < 0) {
    std::fprintf(stderr, "maglb-decap: cannot attach TUN %s: %s\n", tun.c_str(), std::strerror(errno));
    return 1;
  }
  int pkt_fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_ALL));
  if (pkt_fd < 0) {
    std::fprintf(stderr, "maglb-decap: AF_PACKET socket: %s\n", std::strerror(errno));
    return 1;
  }
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = static_cast<int>(ifindex);
  if (bind(pkt_fd, reinterpret_cast<sockaddr*>(&sll), sizeof(sll)) < 0) {
    std::fprintf(stderr, "maglb-decap: bind to %s: %s\n", iface.c_str(), std::strerror(errno));
    return 1;
  }
  int one = 1;
  setsockopt(pkt_fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
  int sinks[] = {OpenSink(AF_INET, kProtoGre), OpenSink(AF_INET, kProtoIpip),
                 OpenSink(AF_INET, kProtoIpv6), OpenSink(AF_INET6, kProtoGre),
                 OpenSink(AF_INET6, kProtoIpip), OpenSink(AF_INET6, kProtoIpv6)};
  (void)sinks;

  struct sigaction sa{};
  sa.sa_handler = OnSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  if (!quiet) std::fprintf(stderr, "maglb-decap: %s -> %s\n", iface.c_str(), tun.c_str());

  uint8_t buf[65536];
  uint64_t decapsulated = 0, write_errors = 0;
  while (!g_stop) {
    pollfd pfd{pkt_fd, POLLIN, 0};
    int r = poll(&pfd, 1, 500);
    if (r <= 0) continue;
    sockaddr_ll from{};
    socklen_t from_len = sizeof(from);
    ssize_t n = recvfrom(pkt_fd, buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n <= 0 || from.sll_pkttype != PACKET_HOST) continue;
    uint16_t ethertype = ntohs(from.sll_protocol);
    if (ethertype != ETH_P_IP && ethertype != ETH_P_IPV6) continue;
    std::string_view inner = Inner(buf, static_cast<size_t>(n));
    if (inner.empty()) continue;
    if (write(tun_fd, inner.data(), inner.size()) < 0) {
      ++write_errors;
    } else {
      ++decapsulated;
    }
  }
  if (!quiet) {
    std::fprintf(stderr, "maglb-decap: stopped; %llu packets decapsulated, %llu write errors\n",
                 static_cast<unsigned long long>(decapsulated),
                 static_cast<unsigned long long>(write_errors));
  }
  return 0;
}
