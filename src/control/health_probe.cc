#include "health_probe.h"  // bare: the unit test compiles this file without -Isrc

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace maglb {

namespace {

// How much of a configured or received string a detail quotes.
constexpr size_t kQuoteMaxBytes = 64;

std::string Quoted(std::string_view s) {
  // absl::string_view: this Abseil is built without std::string_view.
  const absl::string_view head(s.data(), std::min(s.size(), kQuoteMaxBytes));
  std::string out = absl::StrCat("\"", absl::CHexEscape(head), "\"");
  if (s.size() > kQuoteMaxBytes) out += "...";
  return out;
}

std::string HostPort(const IpAddress& ip, uint16_t port) {
  return ip.is_v6 ? absl::StrCat("[", ip.ToString(), "]:", port) : absl::StrCat(ip.ToString(), ":", port);
}

socklen_t ToSockaddr(const IpAddress& ip, uint16_t port, sockaddr_storage* out) {
  std::memset(out, 0, sizeof(*out));
  if (ip.is_v6) {
    auto* s6 = reinterpret_cast<sockaddr_in6*>(out);
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(port);
    std::memcpy(&s6->sin6_addr, ip.bytes.data(), 16);
    return sizeof(*s6);
  }
  auto* s4 = reinterpret_cast<sockaddr_in*>(out);
  s4->sin_family = AF_INET;
  s4->sin_port = htons(port);
  std::memcpy(&s4->sin_addr, ip.bytes.data(), 4);
  return sizeof(*s4);
}

std::string ConnectError(int err) {
  if (err == ECONNREFUSED) return "connection refused";
  return absl::StrCat("connect failed: ", std::strerror(err));
}

// A RST on close instead of a FIN: no TIME_WAIT is left on the LB, so the
// next probe from the same fixed source port finds it free.
void SetAbortiveClose(int fd) {
  linger l{};
  l.l_onoff = 1;
  l.l_linger = 0;
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
}

// A path or Host value goes into the request line or a header as is: CR, LF,
// spaces or other bytes outside printable ASCII would forge or break the
// request, so such a value fails the probe instead.
bool IsPrintableToken(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

// What libcurl's callbacks of one HTTP probe read and write.
struct HttpReply {
  bool bind_local = false;  // binds a source address or port: SO_REUSEADDR
  size_t bytes = 0;         // status line, headers and body read so far
  bool cut = false;         // stopped reading at kMaxHttpProbeReplyBytes
  bool headers_too_long = false;
  std::string body;         // at most kMaxHttpProbeReplyBytes - headers
  char error[CURL_ERROR_SIZE] = {};
};

size_t OnHttpHeader(char* /*data*/, size_t size, size_t count, void* reply) {
  auto& r = *static_cast<HttpReply*>(reply);
  const size_t n = size * count;
  r.bytes += n;
  if (r.bytes > kMaxHttpProbeReplyBytes) {
    r.headers_too_long = true;
    return 0;  // stops the transfer
  }
  return n;
}

size_t OnHttpBody(char* data, size_t size, size_t count, void* reply) {
  auto& r = *static_cast<HttpReply*>(reply);
  const size_t n = size * count;
  const size_t room = kMaxHttpProbeReplyBytes - std::min<size_t>(r.bytes, kMaxHttpProbeReplyBytes);
  if (n > room) {
    // An endless (or merely huge) body: keep what fits, stop reading, and
    // judge that.
    r.body.append(data, room);
    r.bytes += room;
    r.cut = true;
    return 0;  // stops the transfer (CURLE_WRITE_ERROR)
  }
  r.body.append(data, n);
  r.bytes += n;
  return n;
}

int OnHttpSocket(void* reply, curl_socket_t fd, curlsocktype purpose) {
  auto& r = *static_cast<HttpReply*>(reply);
  if (purpose != CURLSOCKTYPE_IPCXN) return CURL_SOCKOPT_OK;
  // libcurl opens its sockets without close-on-exec.
  fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC);
  SetAbortiveClose(fd);
  if (r.bind_local) {
    // Called before libcurl binds: a port left by an earlier probe binds again.
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  }
  return CURL_SOCKOPT_OK;
}

std::once_flag curl_init_once;
CURLcode curl_init_result = CURLE_FAILED_INIT;

}  // namespace

struct Prober::Curl {
  CURLM* multi = nullptr;
  std::map<int, uint32_t> fds;  // sockets libcurl waits on -> their epoll events
  EventLoop::TimerId timer = 0;
};

struct Prober::Probe {
  ProbeId id = 0;
  HealthCheckConfig check;
  uint32_t timeout_ms = 1;
  bool port_unreachable = false;  // udp: an ICMP port unreachable came (see OnUdpEvent)
  Done done;
  EventLoop::TimerId timer = 0;  // the deadline, or the deferred report
  // tcp, udp
  int fd = -1;
  bool fd_in_loop = false;
  // http
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  HttpReply http;
};

Prober::Prober(EventLoop& loop) : loop_(loop) {}

absl::StatusOr<std::unique_ptr<Prober>> Prober::Create(EventLoop& loop) {
  // curl_global_init is not thread-safe and must run once per process.
  std::call_once(curl_init_once, [] { curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (curl_init_result != CURLE_OK) {
    return absl::InternalError(
        absl::StrCat("health checks: libcurl initialisation failed: ", curl_easy_strerror(curl_init_result)));
  }
  std::unique_ptr<Prober> prober(new Prober(loop));
  prober->curl_ = std::make_unique<Curl>();
  CURLM* multi = curl_multi_init();
  if (multi == nullptr) return absl::InternalError("health checks: libcurl: cannot create a multi handle");
  prober->curl_->multi = multi;
  if (curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, &Prober::CurlSocket) != CURLM_OK ||
      curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, prober.get()) != CURLM_OK ||
      curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, &Prober::CurlTimer) != CURLM_OK ||
      curl_multi_setopt(multi, CURLMOPT_TIMERDATA, prober.get()) != CURLM_OK) {
    return absl::InternalError("health checks: libcurl refused the event-loop callbacks");
  }
  return prober;
}

Prober::~Prober() {
  alive_.reset();
  for (auto& [id, p] : probes_) Release(*p);
  probes_.clear();
  if (curl_ == nullptr) return;
  if (curl_->multi != nullptr) curl_multi_cleanup(curl_->multi);
  loop_.CancelTimer(curl_->timer);
  for (const auto& [fd, events] : curl_->fds) loop_.RemoveFd(fd);
}

Prober::ProbeId Prober::Start(const HealthCheckConfig& check, const ProbeTarget& target, Done done) {
  const ProbeId id = next_id_++;
  auto owned = std::make_unique<Probe>();
  Probe& p = *owned;
  p.id = id;
  p.check = check;
  p.timeout_ms = std::max<uint32_t>(check.timeout_ms, 1);  // 0 would mean "no timeout" to libcurl
  p.done = std::move(done);
  probes_.emplace(id, std::move(owned));
  switch (check.type) {
    case HealthCheckType::kTcp:
      StartTcp(p, target);
      break;
    case HealthCheckType::kUdp:
      StartUdp(p, target);
      break;
    case HealthCheckType::kHttp:
      StartHttp(p, target);
      break;
    case HealthCheckType::kNone:
      FinishSoon(p, {false, "check type none sends no probe"});
      break;
  }
  return id;
}

void Prober::Cancel(ProbeId id) {
  auto it = probes_.find(id);
  if (it == probes_.end()) return;
  Release(*it->second);
  probes_.erase(it);
}

void Prober::Release(Probe& p) {
  if (p.timer != 0) {
    loop_.CancelTimer(p.timer);  // ignored if it is the one firing now
    p.timer = 0;
  }
  if (p.fd_in_loop) {
    loop_.RemoveFd(p.fd);
    p.fd_in_loop = false;
  }
  if (p.fd >= 0) {
    close(p.fd);
    p.fd = -1;
  }
  if (p.easy != nullptr) {
    // Closes its connection (through CurlSocket: out of the loop first).
    curl_multi_remove_handle(curl_->multi, p.easy);
    curl_easy_cleanup(p.easy);
    p.easy = nullptr;
  }
  if (p.headers != nullptr) {
    curl_slist_free_all(p.headers);
    p.headers = nullptr;
  }
}

void Prober::FinishSoon(Probe& p, ProbeOutcome outcome) {
  Release(p);
  const ProbeId id = p.id;
  p.timer = loop_.AddTimer(std::chrono::nanoseconds(0),
                           [this, id, outcome = std::move(outcome)]() mutable { Complete(id, std::move(outcome)); });
}

void Prober::Complete(ProbeId id, ProbeOutcome outcome) {
  auto it = probes_.find(id);
  if (it == probes_.end()) return;
  std::unique_ptr<Probe> p = std::move(it->second);
  probes_.erase(it);
  Release(*p);
  Done done = std::move(p->done);
  p.reset();
  if (done) done(std::move(outcome));  // last: it may destroy this Prober
}

void Prober::ArmDeadline(Probe& p, uint64_t ms, std::string detail) {
  const ProbeId id = p.id;
  p.timer = loop_.AddTimer(std::chrono::milliseconds(ms), [this, id, detail = std::move(detail)] {
    auto it = probes_.find(id);
    const bool unreachable = it != probes_.end() && it->second->port_unreachable;
    Complete(id, {false, unreachable ? std::string("port unreachable") : detail});
  });
}

// --- tcp and udp ---------------------------------------------------------

int Prober::OpenSocket(Probe& p, const ProbeTarget& target, int type) {
  const bool bind_local = target.source.has_value() || target.source_port != 0;
  if (target.source && target.source->is_v6 != target.destination.is_v6) {
    FinishSoon(p, {false, absl::StrCat("source address ", target.source->ToString(), " and destination ",
                                       target.destination.ToString(), " are of different families")});
    return -1;
  }
  const int family = target.destination.is_v6 ? AF_INET6 : AF_INET;
  int fd = socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    FinishSoon(p, {false, absl::StrCat("socket: ", std::strerror(errno))});
    return -1;
  }
  p.fd = fd;
  if (type == SOCK_STREAM) SetAbortiveClose(fd);
  if (bind_local) {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    IpAddress local = target.source ? *target.source : IpAddress{};
    local.is_v6 = target.destination.is_v6;  // unset source: the family's any-address
    sockaddr_storage sa;
    socklen_t len = ToSockaddr(local, target.source_port, &sa);
    if (bind(fd, reinterpret_cast<const sockaddr*>(&sa), len) != 0) {
      FinishSoon(p, {false, absl::StrCat("bind to ", HostPort(local, target.source_port),
                                         " failed: ", std::strerror(errno))});
      return -1;
    }
  }
  return fd;
}

void Prober::StartTcp(Probe& p, const ProbeTarget& target) {
  int fd = OpenSocket(p, target, SOCK_STREAM);
  if (fd < 0) return;
  sockaddr_storage sa;
  socklen_t len = ToSockaddr(target.destination, target.port, &sa);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&sa), len) == 0) {
    FinishSoon(p, {true, "connected"});
    return;
  }
  if (errno != EINPROGRESS) {
    FinishSoon(p, {false, ConnectError(errno)});
    return;
  }
  const ProbeId id = p.id;
  absl::Status added = loop_.AddFd(fd, EPOLLOUT, [this, id](uint32_t) { OnTcpEvent(id); });
  if (!added.ok()) {
    FinishSoon(p, {false, absl::StrCat("event loop: ", added.message())});
    return;
  }
  p.fd_in_loop = true;
  ArmDeadline(p, p.timeout_ms, absl::StrFormat("connect timeout %u ms", p.timeout_ms));
}

void Prober::OnTcpEvent(ProbeId id) {
  auto it = probes_.find(id);
  if (it == probes_.end()) return;
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(it->second->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  Complete(id, err == 0 ? ProbeOutcome{true, "connected"} : ProbeOutcome{false, ConnectError(err)});
}

void Prober::StartUdp(Probe& p, const ProbeTarget& target) {
  int fd = OpenSocket(p, target, SOCK_DGRAM);
  if (fd < 0) return;
  sockaddr_storage sa;
  socklen_t len = ToSockaddr(target.destination, target.port, &sa);
  // Connected: the kernel passes up only the target's replies, and its ICMP
  // port unreachable as ECONNREFUSED.
  if (connect(fd, reinterpret_cast<const sockaddr*>(&sa), len) != 0) {
    FinishSoon(p, {false, ConnectError(errno)});
    return;
  }
  const std::string& payload = p.check.udp_payload;
  if (send(fd, payload.data(), payload.size(), MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
    FinishSoon(p, {false, errno == ECONNREFUSED ? std::string("port unreachable")
                                                : absl::StrCat("send failed: ", std::strerror(errno))});
    return;
  }
  const ProbeId id = p.id;
  absl::Status added = loop_.AddFd(fd, EPOLLIN, [this, id](uint32_t) { OnUdpEvent(id); });
  if (!added.ok()) {
    FinishSoon(p, {false, absl::StrCat("event loop: ", added.message())});
    return;
  }
  p.fd_in_loop = true;
  ArmDeadline(p, p.timeout_ms, absl::StrFormat("timeout %u ms (no reply)", p.timeout_ms));
}

void Prober::OnUdpEvent(ProbeId id) {
  auto it = probes_.find(id);
  if (it == probes_.end()) return;
  Probe& p = *it->second;
  // One byte more than any expected reply may have: a longer one shows as
  // longer, and is not read further.
  std::array<char, kMaxUdpProbePayloadBytes + 1> buf;
  ssize_t n = recv(p.fd, buf.data(), buf.size(), MSG_DONTWAIT);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;  // wait on
    if (errno == ECONNREFUSED) {
      // An ICMP port unreachable. Anyone can forge one (the probe's ports are
      // few), so it fails the probe only if no reply comes before the
      // deadline; a real reply still wins.
      p.port_unreachable = true;
      return;
    }
    Complete(id, {false, absl::StrCat("receive failed: ", std::strerror(errno))});
    return;
  }
  const std::string_view reply(buf.data(), static_cast<size_t>(n));
  if (!p.check.udp_expect) {
    Complete(id, {true, absl::StrFormat("reply of %d bytes", n)});
    return;
  }
  const std::string& expect = *p.check.udp_expect;
  if (reply.size() > kMaxUdpProbePayloadBytes) {
    Complete(id, {false, absl::StrFormat("reply longer than %u bytes, expected %s", kMaxUdpProbePayloadBytes,
                                         Quoted(expect))});
  } else if (reply != expect) {
    Complete(id, {false, absl::StrFormat("reply %s (%d bytes) is not the expected %s", Quoted(reply), n,
                                         Quoted(expect))});
  } else {
    Complete(id, {true, "expected reply"});
  }
}

// --- http ----------------------------------------------------------------

void Prober::StartHttp(Probe& p, const ProbeTarget& target) {
  const std::string& path = p.check.http_path;
  if (path.empty() || path[0] != '/' || !IsPrintableToken(path)) {
    FinishSoon(p, {false, absl::StrCat("invalid HTTP path ", Quoted(path),
                                       " (must start with / and hold no spaces or control characters)")});
    return;
  }
  const std::string& host = !target.host.empty() ? target.host : p.check.http_host;
  if (!host.empty() && !IsPrintableToken(host)) {
    FinishSoon(p, {false, absl::StrCat("invalid HTTP Host ", Quoted(host),
                                       " (no spaces or control characters)")});
    return;
  }
  if (target.source && target.source->is_v6 != target.destination.is_v6) {
    FinishSoon(p, {false, absl::StrCat("source address ", target.source->ToString(), " and destination ",
                                       target.destination.ToString(), " are of different families")});
    return;
  }
  p.easy = curl_easy_init();
  if (p.easy == nullptr) {
    FinishSoon(p, {false, "libcurl: cannot create a transfer"});
    return;
  }
  CURL* e = p.easy;
  p.http.bind_local = target.source.has_value() || target.source_port != 0;
  const std::string url = absl::StrCat("http://", HostPort(target.destination, target.port), path);
  CURLcode rc = CURLE_OK;
  auto keep_first_error = [&rc](CURLcode r) {
    if (rc == CURLE_OK) rc = r;
  };
  keep_first_error(curl_easy_setopt(e, CURLOPT_URL, url.c_str()));  // libcurl copies strings
  keep_first_error(curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http"));
  keep_first_error(curl_easy_setopt(e, CURLOPT_PRIVATE, &p));
  keep_first_error(curl_easy_setopt(e, CURLOPT_ERRORBUFFER, p.http.error));
  keep_first_error(curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L));
  // "" overrides http_proxy and the like from the environment; NOPROXY "*"
  // on top, should a proxy ever be set.
  keep_first_error(curl_easy_setopt(e, CURLOPT_PROXY, ""));
  keep_first_error(curl_easy_setopt(e, CURLOPT_NOPROXY, "*"));
  keep_first_error(curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L));
  keep_first_error(curl_easy_setopt(e, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1)));
  keep_first_error(curl_easy_setopt(e, CURLOPT_HTTP09_ALLOWED, 0L));
  keep_first_error(curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L));  // the configured path, not normalised
  keep_first_error(curl_easy_setopt(e, CURLOPT_USERAGENT, "maglb-health-check"));
  keep_first_error(curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(p.timeout_ms)));
  keep_first_error(curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(p.timeout_ms)));
  // Every probe on a connection of its own, closed when it ends: a reused
  // one would not test the backend's accept, nor come from source_port.
  keep_first_error(curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L));
  keep_first_error(curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L));
  keep_first_error(curl_easy_setopt(e, CURLOPT_SOCKOPTFUNCTION, &OnHttpSocket));
  keep_first_error(curl_easy_setopt(e, CURLOPT_SOCKOPTDATA, &p.http));
  keep_first_error(curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &OnHttpHeader));
  keep_first_error(curl_easy_setopt(e, CURLOPT_HEADERDATA, &p.http));
  keep_first_error(curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &OnHttpBody));
  keep_first_error(curl_easy_setopt(e, CURLOPT_WRITEDATA, &p.http));
  if (target.source_port != 0) {
    keep_first_error(curl_easy_setopt(e, CURLOPT_LOCALPORT, static_cast<long>(target.source_port)));
    keep_first_error(curl_easy_setopt(e, CURLOPT_LOCALPORTRANGE, 1L));
  }
  if (target.source) {
    // "host!": an address, never taken for an interface name.
    const std::string interface = absl::StrCat("host!", target.source->ToString());
    keep_first_error(curl_easy_setopt(e, CURLOPT_INTERFACE, interface.c_str()));
  }
  if (!host.empty()) {
    const std::string header = absl::StrCat("Host: ", host);
    p.headers = curl_slist_append(nullptr, header.c_str());
    if (p.headers == nullptr) keep_first_error(CURLE_OUT_OF_MEMORY);
    keep_first_error(curl_easy_setopt(e, CURLOPT_HTTPHEADER, p.headers));
  }
  if (rc != CURLE_OK) {
    FinishSoon(p, {false, absl::StrCat("libcurl: ", curl_easy_strerror(rc))});
    return;
  }
  CURLMcode mrc = curl_multi_add_handle(curl_->multi, e);
  if (mrc != CURLM_OK) {
    FinishSoon(p, {false, absl::StrCat("libcurl: ", curl_multi_strerror(mrc))});
    return;
  }
  // libcurl times the probe out itself (CURLOPT_TIMEOUT_MS); this is the
  // backstop should it never report (a socket the loop could not watch).
  ArmDeadline(p, uint64_t{p.timeout_ms} + kHttpProbeBackstopMs, absl::StrFormat("timeout %u ms", p.timeout_ms));
}

ProbeOutcome Prober::JudgeHttp(Probe& p, int result) {
  const auto code = static_cast<CURLcode>(result);
  long status = 0;
  curl_easy_getinfo(p.easy, CURLINFO_RESPONSE_CODE, &status);
  if (code == CURLE_OK || (code == CURLE_WRITE_ERROR && p.http.cut)) {
    const std::string cut = p.http.cut ? absl::StrFormat(" in the first %u bytes of the reply", kMaxHttpProbeReplyBytes)
                                  : std::string();
    if (status != p.check.http_status) {
      return {false, absl::StrFormat("HTTP status %d, expected %u", status, p.check.http_status)};
    }
    const std::string& want = p.check.http_body_contains;
    if (!want.empty() && p.http.body.find(want) == std::string::npos) {
      return {false, absl::StrCat("body did not contain ", Quoted(want), cut)};
    }
    return {true, absl::StrFormat("HTTP status %d", status)};
  }
  if (code == CURLE_WRITE_ERROR && p.http.headers_too_long) {
    return {false, absl::StrFormat("reply headers longer than %u bytes", kMaxHttpProbeReplyBytes)};
  }
  if (code == CURLE_OPERATION_TIMEDOUT) {
    curl_off_t connect_us = 0;
    curl_easy_getinfo(p.easy, CURLINFO_CONNECT_TIME_T, &connect_us);
    if (connect_us == 0) return {false, absl::StrFormat("connect timeout %u ms", p.timeout_ms)};
    if (p.http.bytes == 0) return {false, absl::StrFormat("timeout %u ms (no reply)", p.timeout_ms)};
    return {false, absl::StrFormat("timeout %u ms (reply incomplete after %u bytes)", p.timeout_ms, p.http.bytes)};
  }
  if (code == CURLE_COULDNT_CONNECT) {
    long os_errno = 0;
    curl_easy_getinfo(p.easy, CURLINFO_OS_ERRNO, &os_errno);
    if (os_errno != 0) return {false, ConnectError(static_cast<int>(os_errno))};
  }
  const std::string text = p.http.error[0] != '\0' ? std::string(p.http.error) : std::string(curl_easy_strerror(code));
  if (code == CURLE_WEIRD_SERVER_REPLY || code == CURLE_UNSUPPORTED_PROTOCOL) {
    return {false, absl::StrCat("not an HTTP reply (", text, ")")};
  }
  return {false, text};
}

// --- libcurl on the loop -------------------------------------------------

int Prober::CurlSocket(void* /*easy*/, int fd, int what, void* self, void* /*socketp*/) {
  auto* prober = static_cast<Prober*>(self);
  std::map<int, uint32_t>& fds = prober->curl_->fds;
  uint32_t events = 0;
  if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) events |= EPOLLIN;
  if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) events |= EPOLLOUT;
  auto it = fds.find(fd);
  if (it != fds.end()) {
    if (it->second == events) return 0;
    // The loop has no "modify": out and in again.
    prober->loop_.RemoveFd(fd);
    fds.erase(it);
  }
  if (events == 0) return 0;  // CURL_POLL_REMOVE, or CURL_POLL_NONE (wants nothing now)
  // Should the loop refuse it, the probe's backstop timer ends the probe.
  if (prober->loop_.AddFd(fd, events, [prober, fd](uint32_t ev) { prober->OnCurlEvent(fd, ev); }).ok()) {
    fds[fd] = events;
  }
  return 0;
}

int Prober::CurlTimer(void* /*multi*/, long timeout_ms, void* self) {
  auto* prober = static_cast<Prober*>(self);
  // libcurl calls this from inside its own calls: only (re)arm here.
  prober->loop_.CancelTimer(prober->curl_->timer);
  prober->curl_->timer = 0;
  if (timeout_ms >= 0) {
    prober->curl_->timer =
        prober->loop_.AddTimer(std::chrono::milliseconds(timeout_ms), [prober] { prober->OnCurlTimer(); });
  }
  return 0;
}

void Prober::OnCurlEvent(int fd, uint32_t events) {
  int mask = 0;
  if (events & EPOLLIN) mask |= CURL_CSELECT_IN;
  if (events & EPOLLOUT) mask |= CURL_CSELECT_OUT;
  if (events & (EPOLLERR | EPOLLHUP)) mask |= CURL_CSELECT_ERR;
  int running = 0;
  curl_multi_socket_action(curl_->multi, fd, mask, &running);
  ReapCurl();
}

void Prober::OnCurlTimer() {
  curl_->timer = 0;
  int running = 0;
  curl_multi_socket_action(curl_->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  ReapCurl();
}

void Prober::ReapCurl() {
  // Collected first, completed after: a `done` may cancel another probe (or
  // destroy this Prober), and libcurl's messages die with their handles.
  std::vector<std::pair<ProbeId, CURLcode>> finished;
  int left = 0;
  while (CURLMsg* msg = curl_multi_info_read(curl_->multi, &left)) {
    if (msg->msg != CURLMSG_DONE) continue;
    char* priv = nullptr;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
    if (priv != nullptr) finished.emplace_back(reinterpret_cast<Probe*>(priv)->id, msg->data.result);
  }
  std::weak_ptr<bool> alive = alive_;
  for (const auto& [id, code] : finished) {
    auto it = probes_.find(id);
    if (it == probes_.end()) continue;  // cancelled by an earlier `done`
    Complete(id, JudgeHttp(*it->second, code));
    if (alive.expired()) return;
  }
}

}  // namespace maglb
