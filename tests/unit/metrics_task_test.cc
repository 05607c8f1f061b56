// The Prometheus exporter's HTTP side (control/metrics_task.h) over real
// sockets: /metrics and nothing else, HEAD, a refused method; hostile
// clients (a 1 MB header, 50 idle and 50 busy connections at once, more
// connections than the limit) are refused or wait without delaying a scrape;
// an address in use or not on this host fails the start with what to do;
// Stop frees the port.
#include "control/metrics_task.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace maglb {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kBody[] = "# HELP maglb_x X\n# TYPE maglb_x gauge\nmaglb_x 1\n";

// A port nothing listens on now (the kernel picks it; closed again).
uint16_t FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

MetricsConfig ConfigFor(const std::string& listen) {
  MetricsConfig c;
  std::string why;
  std::optional<MetricsListen> address = ParseMetricsListen(listen, &why);
  EXPECT_TRUE(address.has_value()) << why;
  c.listen = listen;
  if (address) c.address = *address;
  c.line = 7;
  return c;
}

// A connected socket to 127.0.0.1:port, or -1.
int Connect(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads until the server closes or `timeout_ms` passes without data.
std::string ReadAll(int fd, int timeout_ms) {
  std::string out;
  char buf[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) break;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Sends `request` on a new connection and returns all of the answer ("" if
// none came within 5 s, or the connection was refused).
std::string Exchange(uint16_t port, const std::string& request, int timeout_ms = 5000) {
  const int fd = Connect(port);
  if (fd < 0) return "";
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may refuse before reading it all
    sent += static_cast<size_t>(n);
  }
  std::string answer = ReadAll(fd, timeout_ms);
  close(fd);
  return answer;
}

std::string Get(uint16_t port, const std::string& path, const std::string& method = "GET") {
  return Exchange(port, method + " " + path + " HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
}

class MetricsTaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = FreePort();
    task_.Configure(ConfigFor(absl::StrFormat("127.0.0.1:%u", port_)), "test.toml");
    ASSERT_TRUE(task_.Listen().ok());
    ASSERT_TRUE(task_.serving());
  }

  std::atomic<int> renders_{0};
  MetricsTask task_{MetricsTask::Options{
      .render =
          [this] {
            ++renders_;
            return std::string(kBody);
          },
      .content_type = "text/plain; version=0.0.4; charset=utf-8",
  }};
  uint16_t port_ = 0;
};

TEST_F(MetricsTaskTest, ServesMetricsAndNothingElse) {
  const std::string ok = Get(port_, "/metrics");
  EXPECT_THAT(ok, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(ok, HasSubstr("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
  EXPECT_THAT(ok, HasSubstr(absl::StrFormat("Content-Length: %u\r\n", std::strlen(kBody))));
  EXPECT_EQ(ok.substr(ok.find("\r\n\r\n") + 4), kBody);
  EXPECT_EQ(renders_.load(), 1);
  EXPECT_THAT(Get(port_, "/metrics?x=1"), StartsWith("HTTP/1.1 200 OK\r\n"));  // the path counts

  const std::string head = Get(port_, "/metrics", "HEAD");
  EXPECT_THAT(head, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(head, HasSubstr(absl::StrFormat("Content-Length: %u\r\n", std::strlen(kBody))));
  EXPECT_EQ(head.substr(head.find("\r\n\r\n") + 4), "");  // no body

  const int before = renders_.load();
  for (const char* path : {"/", "/metrics/", "/Metrics", "/metricsx", "/../metrics", "/metrics%2f"}) {
    EXPECT_THAT(Get(port_, path), StartsWith("HTTP/1.1 404 Not Found\r\n")) << path;
  }
  for (const char* method : {"POST", "PUT", "DELETE", "OPTIONS"}) {
    const std::string refused = Get(port_, "/metrics", method);
    EXPECT_THAT(refused, StartsWith("HTTP/1.1 405 Method Not Allowed\r\n")) << method;
    EXPECT_THAT(refused, HasSubstr("Allow: GET, HEAD\r\n")) << method;
  }
  EXPECT_EQ(renders_.load(), before);  // nothing rendered for them
  // Not HTTP at all (a TLS hello): refused or left to time out, never served.
  EXPECT_THAT(Exchange(port_, "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n", 1000),
              Not(HasSubstr("200 OK")));
  EXPECT_EQ(renders_.load(), before);
  EXPECT_THAT(Get(port_, "/metrics"), StartsWith("HTTP/1.1 200 OK\r\n"));
}

TEST_F(MetricsTaskTest, RefusesAHugeHeaderAndServesTheNextScrape) {
  const std::string big(1 << 20, 'a');
  const std::string answer =
      Exchange(port_, "GET /metrics HTTP/1.1\r\nHost: test\r\nX-Big: " + big + "\r\n\r\n");
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 431")) << answer.substr(0, 200);
  const std::string long_path = Get(port_, "/metrics?" + big);
  EXPECT_THAT(long_path, StartsWith("HTTP/1.1 414")) << long_path.substr(0, 200);
  // Many small headers, adding up over the cap.
  std::string many = "GET /metrics HTTP/1.1\r\nHost: test\r\n";
  for (int i = 0; i < 4000; ++i) many += absl::StrFormat("X-%d: v\r\n", i);
  EXPECT_THAT(Exchange(port_, many + "\r\n"), StartsWith("HTTP/1.1 431"));
  EXPECT_EQ(renders_.load(), 0);
  EXPECT_THAT(Get(port_, "/metrics"), StartsWith("HTTP/1.1 200 OK\r\n"));
}

// Idle connections hold a descriptor, not one of the kMetricsThreads: a
// scrape is answered while 50 clients sit silent and 50 others hammer paths
// that do not exist.
TEST_F(MetricsTaskTest, IdleAndBusyClientsDoNotDelayAScrape) {
  std::vector<int> idle;
  for (int i = 0; i < 50; ++i) {
    const int fd = Connect(port_);
    ASSERT_GE(fd, 0);
    idle.push_back(fd);
  }
  // Half a request on some: a client that stalls mid-header.
  for (int i = 0; i < 10; ++i) send(idle[i], "GET /metr", 9, MSG_NOSIGNAL);
  std::atomic<int> not_found{0};
  std::vector<std::thread> busy;
  for (int i = 0; i < 50; ++i) {
    busy.emplace_back([&] {
      for (int j = 0; j < 5; ++j) {
        if (Get(port_, "/nope").starts_with("HTTP/1.1 404")) ++not_found;
      }
    });
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string scrape = Get(port_, "/metrics");
  const auto took = std::chrono::steady_clock::now() - start;
  for (std::thread& t : busy) t.join();
  EXPECT_THAT(scrape, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_EQ(scrape.substr(scrape.find("\r\n\r\n") + 4), kBody);
  // Generous: a thread per connection would wait out the idle ones (10 s).
  EXPECT_LT(took, std::chrono::seconds(kMetricsIdleTimeoutS / 2));
  EXPECT_EQ(not_found.load(), 250);
  for (int fd : idle) close(fd);
  EXPECT_THAT(Get(port_, "/metrics"), StartsWith("HTTP/1.1 200 OK\r\n"));
}

// Past kMetricsConnectionLimit, MHD stops accepting: newcomers (a scrape
// among them) wait in the kernel's listen backlog until the crowd leaves (an
// idle one after kMetricsIdleTimeoutS at most), and are then served.
TEST_F(MetricsTaskTest, ConnectionsOverTheLimitWaitForTheCrowdToLeave) {
  std::vector<int> crowd;
  for (size_t i = 0; i < kMetricsConnectionLimit; ++i) {
    const int fd = Connect(port_);
    ASSERT_GE(fd, 0) << i;
    crowd.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let MHD accept them
  std::atomic<bool> answered{false};
  std::string scrape;
  std::thread scraper([&] {
    scrape = Exchange(port_, "GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n", 8000);
    answered = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_FALSE(answered.load()) << "served past the connection limit";
  for (int fd : crowd) close(fd);
  scraper.join();
  EXPECT_THAT(scrape, StartsWith("HTTP/1.1 200 OK\r\n"));
}

TEST_F(MetricsTaskTest, StopClosesThePort) {
  task_.Stop();
  EXPECT_FALSE(task_.serving());
  EXPECT_LT(Connect(port_), 0);
  // Free for the next start (SO_REUSEADDR: no wait for TIME_WAIT).
  ASSERT_TRUE(task_.Listen().ok());
  EXPECT_THAT(Get(port_, "/metrics"), StartsWith("HTTP/1.1 200 OK\r\n"));
}

TEST(MetricsTaskStart, AnAddressInUseFailsTheStartWithWhatToDo) {
  const int holder = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(holder, 1), 0);
  socklen_t len = sizeof(a);
  getsockname(holder, reinterpret_cast<sockaddr*>(&a), &len);
  const std::string listen = absl::StrFormat("127.0.0.1:%u", ntohs(a.sin_port));
  MetricsTask task({.render = [] { return std::string(); }, .content_type = "text/plain"});
  task.Configure(ConfigFor(listen), "/etc/maglb/maglb.toml");
  const absl::Status s = task.Listen();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), StartsWith("/etc/maglb/maglb.toml:7: metrics.listen = \"" + listen + "\": "));
  EXPECT_THAT(std::string(s.message()), HasSubstr("Address already in use"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("pick another port"));
  EXPECT_FALSE(task.serving());
  close(holder);
}

TEST(MetricsTaskStart, AnAddressNotOnThisHostFailsTheStart) {
  MetricsTask task({.render = [] { return std::string(); }, .content_type = "text/plain"});
  task.Configure(ConfigFor("192.0.2.1:9469"), "maglb.toml");  // TEST-NET-1
  const absl::Status s = task.Listen();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("no interface of this host"));
}

TEST(MetricsTaskStart, OffServesNothing) {
  MetricsTask task({.render = [] { return std::string("x"); }, .content_type = "text/plain"});
  task.Configure(MetricsConfig{}, "maglb.toml");
  EXPECT_TRUE(task.Listen().ok());
  EXPECT_FALSE(task.serving());
}

TEST(MetricsTaskStart, ServesOnIpv6) {
  const uint16_t port = FreePort();
  MetricsTask task({.render = [] { return std::string("v6\n"); }, .content_type = "text/plain"});
  task.Configure(ConfigFor(absl::StrFormat("[::1]:%u", port)), "maglb.toml");
  const absl::Status s = task.Listen();
  if (!s.ok() && s.message().find("no interface") != std::string::npos) GTEST_SKIP() << "no ::1 here";
  ASSERT_TRUE(s.ok()) << s;
  const int fd = socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  a.sin6_addr = in6addr_loopback;
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  const std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  const std::string answer = ReadAll(fd, 5000);
  close(fd);
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_EQ(answer.substr(answer.find("\r\n\r\n") + 4), "v6\n");
  // IPv4 is not served on an IPv6 address.
  EXPECT_LT(Connect(port), 0);
}

}  // namespace
}  // namespace maglb
