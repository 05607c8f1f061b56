// The health-check prober against real servers on loopback: TCP listeners
// (accepting, not accepting, with a full backlog), closed ports, HTTP servers
// (cpp-httplib) and raw TCP servers answering garbage, UDP echo and silent
// listeners, over IPv4 and IPv6, on the real EventLoop. A full accept queue
// makes the kernel drop SYNs, which is how a connect timeout is had without
// leaving loopback.
#include "control/health_probe.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace maglb {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const IpAddress kLo4 = IpAddress::V4(127, 0, 0, 1);
const IpAddress kLo6 = *IpAddress::Parse("::1");

std::unique_ptr<EventLoop> NewLoop() {
  auto loop = EventLoop::Create();
  EXPECT_TRUE(loop.ok()) << loop.status();
  return *std::move(loop);
}

std::unique_ptr<Prober> NewProber(EventLoop& loop) {
  auto prober = Prober::Create(loop);
  EXPECT_TRUE(prober.ok()) << prober.status();
  return *std::move(prober);
}

// Runs the loop until `pred` holds, or `limit` (generous: a failure, not a
// measurement) has passed.
template <typename Pred>
bool RunUntil(EventLoop& loop, Pred pred, milliseconds limit = milliseconds(20000)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred() && std::chrono::steady_clock::now() < end) loop.RunOnce(milliseconds(20));
  return pred();
}

void RunFor(EventLoop& loop, milliseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) loop.RunOnce(milliseconds(10));
}

int CountOpenFds() {
  int n = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n;
}

HealthCheckConfig Check(HealthCheckType type, uint32_t timeout_ms = 2000) {
  HealthCheckConfig c;
  c.type = type;
  c.timeout_ms = timeout_ms;
  return c;
}

HealthCheckConfig HttpCheck(std::string path, uint16_t status = 200, std::string contains = "",
                            uint32_t timeout_ms = 2000) {
  HealthCheckConfig c = Check(HealthCheckType::kHttp, timeout_ms);
  c.http_path = std::move(path);
  c.http_status = status;
  c.http_body_contains = std::move(contains);
  return c;
}

HealthCheckConfig UdpCheck(std::string payload, std::optional<std::string> expect, uint32_t timeout_ms = 2000) {
  HealthCheckConfig c = Check(HealthCheckType::kUdp, timeout_ms);
  c.udp_payload = std::move(payload);
  c.udp_expect = std::move(expect);
  return c;
}

ProbeTarget To(const IpAddress& ip, uint16_t port) {
  ProbeTarget t;
  t.destination = ip;
  t.port = port;
  return t;
}

// One probe, run to its end; checks that `done` ran once, and not inside
// Start.
ProbeOutcome Probe(EventLoop& loop, Prober& prober, const HealthCheckConfig& check, const ProbeTarget& target) {
  int calls = 0;
  ProbeOutcome got;
  prober.Start(check, target, [&](ProbeOutcome o) {
    ++calls;
    got = std::move(o);
  });
  EXPECT_EQ(calls, 0) << "done ran inside Start";
  EXPECT_EQ(prober.in_flight(), 1u);
  EXPECT_TRUE(RunUntil(loop, [&] { return calls > 0; })) << "the probe never ended";
  EXPECT_EQ(prober.in_flight(), 0u);
  loop.RunOnce(milliseconds(5));
  EXPECT_EQ(calls, 1);
  return got;
}

// --- servers ---------------------------------------------------------------

struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  Fd(Fd&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

void SetLingerZero(int fd) {
  linger l{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
}

socklen_t Sockaddr(const IpAddress& ip, uint16_t port, sockaddr_storage* sa) {
  std::memset(sa, 0, sizeof(*sa));
  if (ip.is_v6) {
    auto* s6 = reinterpret_cast<sockaddr_in6*>(sa);
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(port);
    std::memcpy(&s6->sin6_addr, ip.bytes.data(), 16);
    return sizeof(*s6);
  }
  auto* s4 = reinterpret_cast<sockaddr_in*>(sa);
  s4->sin_family = AF_INET;
  s4->sin_port = htons(port);
  std::memcpy(&s4->sin_addr, ip.bytes.data(), 4);
  return sizeof(*s4);
}

uint16_t LocalPort(int fd) {
  sockaddr_storage sa;
  socklen_t len = sizeof(sa);
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  return ntohs(sa.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&sa)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&sa)->sin_port);
}

Fd BoundSocket(const IpAddress& ip, int type) {
  Fd s(socket(ip.is_v6 ? AF_INET6 : AF_INET, type | SOCK_CLOEXEC, 0));
  sockaddr_storage sa;
  socklen_t len = Sockaddr(ip, 0, &sa);
  EXPECT_EQ(bind(s.fd, reinterpret_cast<sockaddr*>(&sa), len), 0) << std::strerror(errno);
  return s;
}

Fd Listener(const IpAddress& ip, int backlog = 128) {
  Fd s = BoundSocket(ip, SOCK_STREAM);
  EXPECT_EQ(listen(s.fd, backlog), 0);
  return s;
}

// A port nobody listens on: bound once, then closed.
uint16_t ClosedPort(const IpAddress& ip, int type) {
  Fd s = BoundSocket(ip, type);
  return LocalPort(s.fd);
}

// A listener that never accepts, its accept queue full: the kernel drops
// further SYNs, so a connect to it hangs in SYN_SENT until it times out.
struct FullListener {
  Fd listener;
  std::vector<Fd> queued;  // connections that filled the queue
  uint16_t port = 0;

  explicit FullListener(const IpAddress& ip) : listener(Listener(ip, 0)) {
    port = LocalPort(listener.fd);
    for (int i = 0; i < 16; ++i) {
      Fd c(socket(ip.is_v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      SetLingerZero(c.fd);
      sockaddr_storage sa;
      socklen_t len = Sockaddr(ip, port, &sa);
      connect(c.fd, reinterpret_cast<sockaddr*>(&sa), len);
      pollfd pfd{c.fd, POLLOUT, 0};
      int err = 0;
      socklen_t elen = sizeof(err);
      if (poll(&pfd, 1, 300) == 1 && getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err == 0) {
        queued.push_back(std::move(c));
        continue;
      }
      full = true;  // this SYN was dropped: the queue is full
      return;
    }
  }
  bool full = false;
};

// Accepts on the loop and keeps the connections (closed with a RST at the
// end, so that neither side is left in TIME_WAIT).
struct AcceptingServer {
  EventLoop& loop;
  Fd listener;
  uint16_t port;
  std::vector<Fd> accepted;

  AcceptingServer(EventLoop& l, const IpAddress& ip) : loop(l), listener(Listener(ip)) {
    port = LocalPort(listener.fd);
    // No peer address asked for: a connection the prober already reset
    // would make accept fail (ECONNABORTED) and stay queued.
    EXPECT_TRUE(loop.AddFd(listener.fd, EPOLLIN, [this](uint32_t) {
                      int c = accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC);
                      if (c < 0) return;
                      SetLingerZero(c);
                      accepted.emplace_back(c);
                    }).ok());
  }
  ~AcceptingServer() { loop.RemoveFd(listener.fd); }
};

// On a thread of its own (its replies may be larger than the socket
// buffers): reads the request, answers `reply`, closes with a FIN.
class RawServer {
 public:
  RawServer(const IpAddress& ip, std::string reply) : listener_(Listener(ip)), reply_(std::move(reply)) {
    port = LocalPort(listener_.fd);
    thread_ = std::thread([this] { Serve(); });
  }
  ~RawServer() {
    shutdown(listener_.fd, SHUT_RDWR);  // wakes accept
    thread_.join();
  }
  uint16_t port = 0;

 private:
  void Serve() {
    while (true) {
      Fd c(accept4(listener_.fd, nullptr, nullptr, SOCK_CLOEXEC));
      if (c.fd < 0) return;
      timeval tv{2, 0};
      setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      char buf[4096];
      if (recv(c.fd, buf, sizeof(buf), 0) <= 0) continue;
      size_t sent = 0;
      while (sent < reply_.size()) {
        ssize_t n = send(c.fd, reply_.data() + sent, reply_.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) break;
        sent += static_cast<size_t>(n);
      }
      shutdown(c.fd, SHUT_WR);
      while (recv(c.fd, buf, sizeof(buf), 0) > 0) {
      }
    }
  }
  Fd listener_;
  std::string reply_;
  std::thread thread_;
};

// UDP on the loop: echoes (reply empty) or answers `reply`; silent: reads
// nothing.
struct UdpServer {
  EventLoop& loop;
  Fd sock;
  uint16_t port;
  std::optional<std::string> reply;

  UdpServer(EventLoop& l, const IpAddress& ip, std::optional<std::string> r, bool silent = false)
      : loop(l), sock(BoundSocket(ip, SOCK_DGRAM)), reply(std::move(r)) {
    port = LocalPort(sock.fd);
    if (silent) return;
    EXPECT_TRUE(loop.AddFd(sock.fd, EPOLLIN, [this](uint32_t) {
                      char buf[4096];
                      sockaddr_storage from;
                      socklen_t len = sizeof(from);
                      ssize_t n = recvfrom(sock.fd, buf, sizeof(buf), MSG_DONTWAIT,
                                           reinterpret_cast<sockaddr*>(&from), &len);
                      if (n < 0) return;
                      std::string out = reply ? *reply : std::string(buf, static_cast<size_t>(n));
                      sendto(sock.fd, out.data(), out.size(), 0, reinterpret_cast<sockaddr*>(&from), len);
                    }).ok());
  }
  ~UdpServer() { loop.RemoveFd(sock.fd); }
};

// A cpp-httplib server on its own thread.
class HttpServer {
 public:
  explicit HttpServer(const std::string& host) {
    server_.set_keep_alive_timeout(1);
    server_.Get("/ok", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("all ok here", "text/plain");
    });
    server_.Get("/fail", [](const httplib::Request&, httplib::Response& res) {
      res.status = 503;
      res.set_content("down for maintenance", "text/plain");
    });
    server_.Get("/redirect", [](const httplib::Request&, httplib::Response& res) { res.set_redirect("/ok"); });
    server_.Get("/host", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content("host=" + req.get_header_value("Host"), "text/plain");
    });
    server_.Get("/peer", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content("peer=" + req.remote_addr + ":" + std::to_string(req.remote_port), "text/plain");
    });
    // 70000 bytes, then the word: past what a probe reads.
    server_.Get("/late-needle", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(70000, 'x') + "needle", "text/plain");
    });
    server_.Get("/endless", [this](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/plain", [this](size_t, httplib::DataSink& sink) {
        static const std::string chunk(4096, 'y');
        endless_bytes_ += chunk.size();
        return sink.write(chunk.data(), chunk.size());
      });
    });
    port_ = server_.bind_to_any_port(host);
    EXPECT_GT(port_, 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(milliseconds(1));
  }
  ~HttpServer() {
    server_.stop();
    thread_.join();
  }
  uint16_t port() const { return static_cast<uint16_t>(port_); }
  size_t endless_bytes() const { return endless_bytes_.load(); }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<size_t> endless_bytes_{0};
};

// TCP sockets of this network namespace (/proc/net/tcp, tcp6).
struct TcpSocket {
  std::string local;  // "127.0.0.2" (IPv4 only; "" for IPv6)
  uint16_t local_port = 0;
  uint16_t remote_port = 0;
  int state = 0;  // 2: SYN_SENT, 6: TIME_WAIT
};

std::vector<TcpSocket> TcpSockets() {
  std::vector<TcpSocket> out;
  for (const char* file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string sl, local, remote, state;
      fields >> sl >> local >> remote >> state;
      const size_t lc = local.rfind(':'), rc = remote.rfind(':');
      if (lc == std::string::npos || rc == std::string::npos) continue;
      TcpSocket s;
      s.local_port = static_cast<uint16_t>(std::stoul(local.substr(lc + 1), nullptr, 16));
      s.remote_port = static_cast<uint16_t>(std::stoul(remote.substr(rc + 1), nullptr, 16));
      s.state = static_cast<int>(std::stoul(state, nullptr, 16));
      if (lc == 8) {  // the address as the kernel holds it, printed as a host-order word
        uint32_t raw = static_cast<uint32_t>(std::stoul(local.substr(0, 8), nullptr, 16));
        char text[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &raw, text, sizeof(text));
        s.local = text;
      }
      out.push_back(s);
    }
  }
  return out;
}

int TimeWaitOnLocalPort(uint16_t port) {
  int n = 0;
  for (const TcpSocket& s : TcpSockets()) n += (s.local_port == port && s.state == 6);
  return n;
}

class ProberTest : public ::testing::Test {
 protected:
  std::unique_ptr<EventLoop> loop_ = NewLoop();
  std::unique_ptr<Prober> prober_ = NewProber(*loop_);

  ProbeOutcome Run(const HealthCheckConfig& check, const ProbeTarget& target) {
    return Probe(*loop_, *prober_, check, target);
  }
};

// --- tcp -------------------------------------------------------------------

TEST_F(ProberTest, TcpConnectsToAListenerThatAcceptsOrNot) {
  AcceptingServer accepting(*loop_, kLo4);
  ProbeOutcome o = Run(Check(HealthCheckType::kTcp), To(kLo4, accepting.port));
  EXPECT_TRUE(o.ok) << o.detail;
  EXPECT_EQ(o.detail, "connected");

  Fd idle = Listener(kLo4);  // the kernel completes the handshake alone
  o = Run(Check(HealthCheckType::kTcp), To(kLo4, LocalPort(idle.fd)));
  EXPECT_TRUE(o.ok) << o.detail;
}

TEST_F(ProberTest, TcpClosedPortIsRefused) {
  ProbeOutcome o = Run(Check(HealthCheckType::kTcp), To(kLo4, ClosedPort(kLo4, SOCK_STREAM)));
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.detail, "connection refused");
}

TEST_F(ProberTest, TcpConnectTimeoutOnAFullBacklog) {
  FullListener full(kLo4);
  ASSERT_TRUE(full.full) << "could not fill the accept queue";
  const auto start = std::chrono::steady_clock::now();
  ProbeOutcome o = Run(Check(HealthCheckType::kTcp, 300), To(kLo4, full.port));
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.detail, "connect timeout 300 ms");
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(290));  // not before its deadline
}

TEST_F(ProberTest, TcpZeroTimeoutStillEndsOnTheLoop) {
  FullListener full(kLo4);
  ASSERT_TRUE(full.full);
  ProbeOutcome o = Run(Check(HealthCheckType::kTcp, 0), To(kLo4, full.port));
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.detail, "connect timeout 1 ms");
}

TEST_F(ProberTest, TcpOverIpv6) {
  AcceptingServer accepting(*loop_, kLo6);
  ProbeOutcome o = Run(Check(HealthCheckType::kTcp), To(kLo6, accepting.port));
  EXPECT_TRUE(o.ok) << o.detail;
  o = Run(Check(HealthCheckType::kTcp), To(kLo6, ClosedPort(kLo6, SOCK_STREAM)));
  EXPECT_EQ(o.detail, "connection refused");
}

// Tunnel probes go out from one fixed source port every interval: each must
// bind it again, and none may leave the LB side in TIME_WAIT.
TEST_F(ProberTest, TcpFiftyProbesFromOneFixedSourcePortAllSucceed) {
  AcceptingServer server(*loop_, kLo4);
  ProbeTarget target = To(kLo4, server.port);
  target.source = kLo4;
  target.source_port = ClosedPort(kLo4, SOCK_STREAM);
  for (int i = 0; i < 50; ++i) {
    ProbeOutcome o = Run(Check(HealthCheckType::kTcp), target);
    ASSERT_TRUE(o.ok) << "probe " << i << ": " << o.detail;
  }
  EXPECT_EQ(TimeWaitOnLocalPort(target.source_port), 0);
}

// Seen while it hangs in SYN_SENT toward a full backlog (once connected, a
// peer the prober resets at once may be gone before anyone could look).
TEST_F(ProberTest, TcpBindsTheSourceAddressAndPort) {
  FullListener full(kLo4);
  ASSERT_TRUE(full.full);
  ProbeTarget target = To(kLo4, full.port);
  target.source = IpAddress::V4(127, 0, 0, 2);
  target.source_port = ClosedPort(kLo4, SOCK_STREAM);
  bool done = false;
  prober_->Start(Check(HealthCheckType::kTcp, 5000), target, [&](ProbeOutcome) { done = true; });
  loop_->RunOnce(milliseconds(10));
  int seen = 0;
  for (const TcpSocket& s : TcpSockets()) {
    if (s.remote_port == full.port && s.state == 2) {
      ++seen;
      EXPECT_EQ(s.local, "127.0.0.2");
      EXPECT_EQ(s.local_port, target.source_port);
    }
  }
  EXPECT_EQ(seen, 1);
  EXPECT_FALSE(done);
}

TEST_F(ProberTest, SourceOfAnotherFamilyFails) {
  ProbeTarget target = To(kLo6, 80);
  target.source = kLo4;
  for (HealthCheckType type : {HealthCheckType::kTcp, HealthCheckType::kUdp, HealthCheckType::kHttp}) {
    ProbeOutcome o = Run(Check(type), target);
    EXPECT_FALSE(o.ok);
    EXPECT_THAT(o.detail, HasSubstr("different families"));
  }
}

TEST_F(ProberTest, SourcePortInUseFailsToBind) {
  Fd holder = Listener(kLo4);  // listening on it: no SO_REUSEADDR gets past that
  ProbeTarget target = To(kLo4, ClosedPort(kLo4, SOCK_STREAM));
  target.source_port = LocalPort(holder.fd);
  ProbeOutcome o = Run(Check(HealthCheckType::kTcp), target);
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.detail, StartsWith("bind to 0.0.0.0:" + std::to_string(target.source_port) + " failed: "));
}

TEST_F(ProberTest, TypeNoneIsNoProbe) {
  ProbeOutcome o = Run(Check(HealthCheckType::kNone), To(kLo4, 80));
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.detail, "check type none sends no probe");
}

// --- http ------------------------------------------------------------------

class HttpProberTest : public ProberTest {
 protected:
  HttpServer server_{"127.0.0.1"};
  ProbeTarget Server() const { return To(kLo4, server_.port()); }
};

TEST_F(HttpProberTest, ExpectedStatusSucceeds) {
  ProbeOutcome o = Run(HttpCheck("/ok"), Server());
  EXPECT_TRUE(o.ok) << o.detail;
  EXPECT_EQ(o.detail, "HTTP status 200");
}

TEST_F(HttpProberTest, OtherStatusFails) {
  ProbeOutcome o = Run(HttpCheck("/fail"), Server());
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.detail, "HTTP status 503, expected 200");
  o = Run(HttpCheck("/fail", 503), Server());  // a check may expect it
  EXPECT_TRUE(o.ok) << o.detail;
  o = Run(HttpCheck("/nowhere"), Server());
  EXPECT_EQ(o.detail, "HTTP status 404, expected 200");
}

TEST_F(HttpProberTest, RedirectIsNotFollowed) {
  ProbeOutcome o = Run(HttpCheck("/redirect"), Server());
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.detail, "HTTP status 302, expected 200");
}

TEST_F(HttpProberTest, BodySubstring) {
  ProbeOutcome o = Run(HttpCheck("/ok", 200, "ok"), Server());
  EXPECT_TRUE(o.ok) << o.detail;
  o = Run(HttpCheck("/ok", 200, "healthy"), Server());
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.detail, "body did not contain \"healthy\"");
  // The status is judged first.
  o = Run(HttpCheck("/fail", 200, "down"), Server());
  EXPECT_EQ(o.detail, "HTTP status 503, expected 200");
}

TEST_F(HttpProberTest, BodyIsReadOnlyUpToTheLimit) {
  ProbeOutcome o = Run(HttpCheck("/late-needle", 200, "needle"), Server());
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.detail, "body did not contain \"needle\" in the first 65536 bytes of the reply");
  o = Run(HttpCheck("/late-needle", 200, "xxx"), Server());
  EXPECT_TRUE(o.ok) << o.detail;
}

// An endless body: the probe stops at the limit and judges what it read
// (were it to read on, it would end in its timeout, failed).
TEST_F(HttpProberTest, EndlessBodyIsCutAndJudged) {
  ProbeOutcome o = Run(HttpCheck("/endless", 200, "", 10000), Server());
  EXPECT_TRUE(o.ok) << o.detail;
  o = Run(HttpCheck("/endless", 200, "yyyy", 10000), Server());
  EXPECT_TRUE(o.ok) << o.detail;
  o = Run(HttpCheck("/endless", 200, "z", 10000), Server());
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.detail, HasSubstr("in the first 65536 bytes"));
}

TEST_F(HttpProberTest, HostHeader) {
  // By default the URL's host: the address and port.
  ProbeTarget target = Server();
  HealthCheckConfig check = HttpCheck("/host", 200, "host=127.0.0.1:" + std::to_string(server_.port()));
  ProbeOutcome o = Run(check, target);
  EXPECT_TRUE(o.ok) << o.detail;
  // The check's http_host, unless the target names one.
  check = HttpCheck("/host", 200, "host=check.example");
  check.http_host = "check.example";
  o = Run(check, target);
  EXPECT_TRUE(o.ok) << o.detail;
  target.host = "web.example";
  check.http_body_contains = "host=web.example";
  o = Run(check, target);
  EXPECT_TRUE(o.ok) << o.detail;
}

// Values that would forge or break the request are refused, not sent.
TEST_F(HttpProberTest, HostilePathOrHostFails) {
  for (const char* path : {"/a b", "/x\r\nX-Evil: 1", "", "ok", "/\x7f", "/caf\xc3\xa9"}) {
    ProbeOutcome o = Run(HttpCheck(path), Server());
    EXPECT_FALSE(o.ok) << path;
    EXPECT_THAT(o.detail, StartsWith("invalid HTTP path ")) << path;
  }
  ProbeTarget target = Server();
  target.host = "web.example\r\nX-Evil: 1";
  ProbeOutcome o = Run(HttpCheck("/ok"), target);
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.detail, "invalid HTTP Host \"web.example\\r\\nX-Evil: 1\" (no spaces or control characters)");
}

TEST_F(HttpProberTest, EnvironmentProxiesNeverApply) {
  const uint16_t dead = ClosedPort(kLo4, SOCK_STREAM);
  const std::string proxy = "http://127.0.0.1:" + std::to_string(dead);
  for (const char* var : {"http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"}) setenv(var, proxy.c_str(), 1);
  ProbeOutcome o = Run(HttpCheck("/ok"), Server());
  for (const char* var : {"http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"}) unsetenv(var);
  EXPECT_TRUE(o.ok) << o.detail;
}

TEST_F(HttpProberTest, TwentyProbesFromOneFixedSourcePort) {
  ProbeTarget target = Server();
  target.source = kLo4;
  target.source_port = ClosedPort(kLo4, SOCK_STREAM);
  HealthCheckConfig check = HttpCheck("/peer", 200, "peer=127.0.0.1:" + std::to_string(target.source_port));
  for (int i = 0; i < 20; ++i) {
    ProbeOutcome o = Run(check, target);
    ASSERT_TRUE(o.ok) << "probe " << i << ": " << o.detail;
  }
  EXPECT_EQ(TimeWaitOnLocalPort(target.source_port), 0);
}

TEST_F(HttpProberTest, BindsTheSourceAddress) {
  ProbeTarget target = Server();
  target.source = IpAddress::V4(127, 0, 0, 2);
  ProbeOutcome o = Run(HttpCheck("/peer", 200, "peer=127.0.0.2:"), target);
  EXPECT_TRUE(o.ok) << o.detail;
}

TEST_F(ProberTest, HttpClosedPortIsRefused) {
  ProbeOutcome o = Run(HttpCheck("/ok"), To(kLo4, ClosedPort(kLo4, SOCK_STREAM)));
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.detail, "connection refused");
}

TEST_F(ProberTest, HttpConnectTimeout) {
  FullListener full(kLo4);
  ASSERT_TRUE(full.full);
  ProbeOutcome o = Run(HttpCheck("/ok", 200, "", 300), To(kLo4, full.port));
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.detail, "connect timeout 300 ms");
}

// A listener that never accepts: connected, the request sent, no reply.
TEST_F(ProberTest, HttpServerThatNeverAnswersTimesOut) {
  Fd silent = Listener(kLo4);
  ProbeOutcome o = Run(HttpCheck("/ok", 200, "", 300), To(kLo4, LocalPort(silent.fd)));
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.detail, "timeout 300 ms (no reply)");
}

// The largest timeout a config can hold: the backstop past it must not wrap
// round to a short one.
TEST_F(ProberTest, HttpHugeTimeoutDoesNotWrap) {
  Fd silent = Listener(kLo4);
  int calls = 0;
  Prober::ProbeId id = prober_->Start(HttpCheck("/ok", 200, "", UINT32_MAX - 200), To(kLo4, LocalPort(silent.fd)),
                                      [&](ProbeOutcome) { ++calls; });
  RunFor(*loop_, milliseconds(1500));
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(prober_->in_flight(), 1u);
  prober_->Cancel(id);
}

TEST_F(ProberTest, HttpGarbageReplyFails) {
  RawServer garbage(kLo4, "SSH-2.0-OpenSSH_9.2\r\nnot http at all\r\n\r\n");
  ProbeOutcome o = Run(HttpCheck("/ok"), To(kLo4, garbage.port));
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.detail, StartsWith("not an HTTP reply ("));
  RawServer empty(kLo4, "");
  o = Run(HttpCheck("/ok"), To(kLo4, empty.port));
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.detail, "Empty reply from server");
}

TEST_F(ProberTest, HttpHugeHeadersAreCut) {
  std::string reply = "HTTP/1.1 200 OK\r\n";
  for (int i = 0; i < 2000; ++i) reply += "X-Filler-" + std::to_string(i) + ": " + std::string(40, 'f') + "\r\n";
  reply += "Content-Length: 2\r\n\r\nok";
  RawServer server(kLo4, reply);
  ProbeOutcome o = Run(HttpCheck("/ok"), To(kLo4, server.port));
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.detail, "reply headers longer than 65536 bytes");
}

TEST_F(ProberTest, HttpOverIpv6) {
  HttpServer server("::1");
  ProbeOutcome o = Run(HttpCheck("/host", 200, "host=[::1]:" + std::to_string(server.port())), To(kLo6, server.port()));
  EXPECT_TRUE(o.ok) << o.detail;
  ProbeTarget target = To(kLo6, server.port());
  target.source = kLo6;
  target.source_port = ClosedPort(kLo6, SOCK_STREAM);
  o = Run(HttpCheck("/peer", 200, "peer=::1:" + std::to_string(target.source_port)), target);
  EXPECT_TRUE(o.ok) << o.detail;
}

// --- udp -------------------------------------------------------------------

TEST_F(ProberTest, UdpAnyReply) {
  UdpServer echo(*loop_, kLo4, std::nullopt);
  ProbeOutcome o = Run(UdpCheck("ping", std::nullopt), To(kLo4, echo.port));
  EXPECT_TRUE(o.ok) << o.detail;
  EXPECT_EQ(o.detail, "reply of 4 bytes");
}

TEST_F(ProberTest, UdpExpectedReply) {
  UdpServer echo(*loop_, kLo4, std::nullopt);
  ProbeOutcome o = Run(UdpCheck("ping", "ping"), To(kLo4, echo.port));
  EXPECT_TRUE(o.ok) << o.detail;
  o = Run(UdpCheck("ping", "pong"), To(kLo4, echo.port));
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.detail, "reply \"ping\" (4 bytes) is not the expected \"pong\"");
  o = Run(UdpCheck("ping", "pin"), To(kLo4, echo.port));  // exactly, not a prefix
  EXPECT_FALSE(o.ok);
}

TEST_F(ProberTest, UdpReplyLongerThanAnyExpectedIsAMismatch) {
  UdpServer big(*loop_, kLo4, std::string(2000, 'a'));
  ProbeOutcome o = Run(UdpCheck("ping", std::string(kMaxUdpProbePayloadBytes, 'a')), To(kLo4, big.port));
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.detail, StartsWith("reply longer than 1024 bytes, expected \"aaaa"));
  UdpServer exact(*loop_, kLo4, std::string(kMaxUdpProbePayloadBytes, 'a'));
  o = Run(UdpCheck("ping", std::string(kMaxUdpProbePayloadBytes, 'a')), To(kLo4, exact.port));
  EXPECT_TRUE(o.ok) << o.detail;
}

TEST_F(ProberTest, UdpBinaryReplyIsEscapedInTheDetail) {
  UdpServer server(*loop_, kLo4, std::string("\x00\x01\n\xff", 4));
  ProbeOutcome o = Run(UdpCheck("ping", "pong"), To(kLo4, server.port));
  EXPECT_EQ(o.detail, "reply \"\\x00\\x01\\n\\xff\" (4 bytes) is not the expected \"pong\"");
}

TEST_F(ProberTest, UdpNoListenerIsPortUnreachable) {
  // The ICMP error alone fails it only at the deadline (anyone can forge one).
  ProbeOutcome o = Run(UdpCheck("ping", std::nullopt, 300), To(kLo4, ClosedPort(kLo4, SOCK_DGRAM)));
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.detail, "port unreachable");
}

TEST_F(ProberTest, UdpSilentListenerTimesOut) {
  UdpServer silent(*loop_, kLo4, std::nullopt, /*silent=*/true);
  ProbeOutcome o = Run(UdpCheck("ping", std::nullopt, 300), To(kLo4, silent.port));
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.detail, "timeout 300 ms (no reply)");
}

TEST_F(ProberTest, UdpOverIpv6FromAFixedSourcePort) {
  UdpServer echo(*loop_, kLo6, std::nullopt);
  ProbeTarget target = To(kLo6, echo.port);
  target.source = kLo6;
  target.source_port = ClosedPort(kLo6, SOCK_DGRAM);
  for (int i = 0; i < 5; ++i) {
    ProbeOutcome o = Run(UdpCheck("maglb", "maglb"), target);
    EXPECT_TRUE(o.ok) << o.detail;
  }
  ProbeOutcome o = Run(UdpCheck("ping", std::nullopt, 300), To(kLo6, ClosedPort(kLo6, SOCK_DGRAM)));
  EXPECT_EQ(o.detail, "port unreachable");
}

// --- lifetime --------------------------------------------------------------

TEST_F(ProberTest, CancelledProbeNeverCallsBack) {
  FullListener full(kLo4);
  ASSERT_TRUE(full.full);
  Fd silent = Listener(kLo4);
  UdpServer quiet(*loop_, kLo4, std::nullopt, true);
  int calls = 0;
  auto count = [&](ProbeOutcome) { ++calls; };
  // Reported on the next pass (failed in Start, refused at once): cancelled
  // before it.
  Prober::ProbeId refused =
      prober_->Start(Check(HealthCheckType::kTcp), To(kLo4, ClosedPort(kLo4, SOCK_STREAM)), count);
  Prober::ProbeId bad = prober_->Start(HttpCheck("bad path"), To(kLo4, 80), count);
  std::vector<Prober::ProbeId> waiting = {
      prober_->Start(Check(HealthCheckType::kTcp, 200), To(kLo4, full.port), count),
      prober_->Start(HttpCheck("/ok", 200, "", 200), To(kLo4, LocalPort(silent.fd)), count),
      prober_->Start(UdpCheck("x", std::nullopt, 200), To(kLo4, quiet.port), count),
  };
  EXPECT_EQ(prober_->in_flight(), 5u);
  prober_->Cancel(refused);
  prober_->Cancel(bad);
  RunFor(*loop_, milliseconds(50));  // the others under way (HTTP connected, request sent)
  EXPECT_EQ(prober_->in_flight(), 3u);
  for (Prober::ProbeId id : waiting) prober_->Cancel(id);
  prober_->Cancel(waiting[0]);  // twice: ignored
  prober_->Cancel(12345);       // unknown: ignored
  EXPECT_EQ(prober_->in_flight(), 0u);
  RunFor(*loop_, milliseconds(1500));  // past every deadline, the HTTP backstop included
  EXPECT_EQ(calls, 0);
}

TEST_F(ProberTest, CancelFromAnotherProbesDone) {
  FullListener full(kLo4);
  ASSERT_TRUE(full.full);
  const uint16_t closed = ClosedPort(kLo4, SOCK_STREAM);
  int slow_calls = 0, fast_calls = 0;
  Prober::ProbeId slow = prober_->Start(Check(HealthCheckType::kTcp, 300), To(kLo4, full.port),
                                        [&](ProbeOutcome) { ++slow_calls; });
  prober_->Start(Check(HealthCheckType::kTcp), To(kLo4, closed), [&](ProbeOutcome) {
    ++fast_calls;
    prober_->Cancel(slow);
  });
  ASSERT_TRUE(RunUntil(*loop_, [&] { return fast_calls == 1; }));
  RunFor(*loop_, milliseconds(500));
  EXPECT_EQ(slow_calls, 0);
  EXPECT_EQ(prober_->in_flight(), 0u);

  // Two HTTP probes that may end in the same libcurl pass, each cancelling
  // the other: exactly one reports.
  int calls = 0;
  Prober::ProbeId a = 0, b = 0;
  a = prober_->Start(HttpCheck("/ok"), To(kLo4, closed), [&](ProbeOutcome) {
    ++calls;
    prober_->Cancel(b);
  });
  b = prober_->Start(HttpCheck("/ok"), To(kLo4, closed), [&](ProbeOutcome) {
    ++calls;
    prober_->Cancel(a);
  });
  ASSERT_TRUE(RunUntil(*loop_, [&] { return prober_->in_flight() == 0; }));
  RunFor(*loop_, milliseconds(100));
  EXPECT_EQ(calls, 1);
}

TEST_F(ProberTest, DoneMayStartTheNextProbe) {
  const uint16_t closed = ClosedPort(kLo4, SOCK_STREAM);
  int calls = 0;
  std::function<void(ProbeOutcome)> again = [&](ProbeOutcome o) {
    EXPECT_EQ(o.detail, "connection refused");
    if (++calls < 5) prober_->Start(HttpCheck("/ok"), To(kLo4, closed), again);
  };
  prober_->Start(HttpCheck("/ok"), To(kLo4, closed), again);
  ASSERT_TRUE(RunUntil(*loop_, [&] { return calls == 5; }));
  EXPECT_EQ(prober_->in_flight(), 0u);
}

TEST(Prober, DestroyedWithProbesInFlight) {
  auto loop = NewLoop();
  FullListener full(kLo4);
  ASSERT_TRUE(full.full);
  Fd silent = Listener(kLo4);
  UdpServer quiet(*loop, kLo4, std::nullopt, true);
  const int fds_before = CountOpenFds();
  int calls = 0;
  {
    auto prober = NewProber(*loop);
    auto count = [&](ProbeOutcome) { ++calls; };
    for (int i = 0; i < 10; ++i) {
      prober->Start(Check(HealthCheckType::kTcp, 200), To(kLo4, full.port), count);
      prober->Start(HttpCheck("/ok", 200, "", 200), To(kLo4, LocalPort(silent.fd)), count);
      prober->Start(UdpCheck("x", std::nullopt, 200), To(kLo4, quiet.port), count);
      prober->Start(Check(HealthCheckType::kNone), To(kLo4, 1), count);
    }
    RunFor(*loop, milliseconds(50));  // HTTP connected and waiting
    EXPECT_EQ(prober->in_flight(), 30u);
  }
  RunFor(*loop, milliseconds(1500));
  EXPECT_EQ(calls, 10);  // only the type-none failures, reported at once
  EXPECT_EQ(CountOpenFds(), fds_before);
}

TEST(Prober, DestroyedInsideADoneCallback) {
  auto loop = NewLoop();
  const uint16_t closed = ClosedPort(kLo4, SOCK_STREAM);
  auto prober = NewProber(*loop);
  int calls = 0;
  for (int i = 0; i < 5; ++i) {
    prober->Start(HttpCheck("/ok"), To(kLo4, closed), [&](ProbeOutcome) {
      ++calls;
      prober.reset();
    });
    prober->Start(Check(HealthCheckType::kTcp), To(kLo4, closed), [&](ProbeOutcome) {
      ++calls;
      prober.reset();
    });
  }
  ASSERT_TRUE(RunUntil(*loop, [&] { return calls > 0; }));
  RunFor(*loop, milliseconds(1500));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(prober, nullptr);
}

// 1000 probes that all fail (refused, blackholed, unanswered): every one
// reports once, and every descriptor they opened is closed.
TEST(Prober, ThousandFailingProbesLeakNothing) {
  auto loop = NewLoop();
  auto prober = NewProber(*loop);
  FullListener full(kLo4);
  ASSERT_TRUE(full.full);
  UdpServer quiet(*loop, kLo4, std::nullopt, true);
  const uint16_t closed_tcp = ClosedPort(kLo4, SOCK_STREAM);
  const uint16_t closed_udp = ClosedPort(kLo4, SOCK_DGRAM);
  const int fds_before = CountOpenFds();
  std::vector<int> calls(1000, 0);
  std::vector<std::string> details(1000);
  for (int i = 0; i < 1000; ++i) {
    HealthCheckConfig check;
    ProbeTarget target;
    switch (i % 6) {
      // Refused ones with a long deadline, so that a slow machine (valgrind)
      // still sees their refusal first.
      case 0: check = Check(HealthCheckType::kTcp, 5000); target = To(kLo4, closed_tcp); break;
      case 1: check = Check(HealthCheckType::kTcp, 300); target = To(kLo4, full.port); break;
      case 2: check = HttpCheck("/ok", 200, "", 5000); target = To(kLo4, closed_tcp); break;
      case 3: check = HttpCheck("/ok", 200, "", 300); target = To(kLo4, full.port); break;
      case 4: check = UdpCheck("x", std::nullopt, 1500); target = To(kLo4, closed_udp); break;
      case 5: check = UdpCheck("x", std::nullopt, 300); target = To(kLo4, quiet.port); break;
    }
    prober->Start(check, target, [&calls, &details, i](ProbeOutcome o) {
      ++calls[i];
      EXPECT_FALSE(o.ok);
      details[i] = o.detail;
    });
  }
  EXPECT_EQ(prober->in_flight(), 1000u);
  ASSERT_TRUE(RunUntil(*loop, [&] { return prober->in_flight() == 0; }));
  RunFor(*loop, milliseconds(200));
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(calls[i], 1) << "probe " << i;
    const char* want[] = {"connection refused", "connect timeout 300 ms", "connection refused",
                          "connect timeout 300 ms", "port unreachable", "timeout 300 ms (no reply)"};
    EXPECT_EQ(details[i], want[i % 6]) << "probe " << i;
  }
  EXPECT_EQ(CountOpenFds(), fds_before);
}

}  // namespace
}  // namespace maglb
