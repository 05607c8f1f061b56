#include "control/metrics_task.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "control/log.h"

namespace maglb {
namespace {

constexpr std::string_view kPath = "/metrics";
constexpr char kNotFound[] = "not found: maglb serves /metrics only\n";
constexpr char kNotAllowed[] = "method not allowed: GET or HEAD /metrics\n";
constexpr int kBacklog = 64;

MHD_Result Send(MHD_Connection* connection, unsigned status, MHD_Response* response) {
  if (response == nullptr) return MHD_NO;  // out of memory: MHD closes the connection
  const MHD_Result queued = MHD_queue_response(connection, status, response);
  MHD_destroy_response(response);
  return queued;
}

MHD_Result SendStatic(MHD_Connection* connection, unsigned status, std::string_view text) {
  MHD_Response* response = MHD_create_response_from_buffer(
      text.size(), const_cast<char*>(text.data()), MHD_RESPMEM_PERSISTENT);
  if (response != nullptr) {
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED) {
      MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    }
  }
  return Send(connection, status, response);
}

// libmicrohttpd's access handler. Every answer is queued on the first call,
// before any body is read: MHD then discards whatever body a client sends.
MHD_Result Handle(void* cls, MHD_Connection* connection, const char* url, const char* method,
                  const char* /*version*/, const char* /*upload_data*/, size_t* /*upload_data_size*/,
                  void** /*request_state*/) {
  const auto& options = *static_cast<const MetricsTask::Options*>(cls);
  const std::string_view m = method;
  if (m != MHD_HTTP_METHOD_GET && m != MHD_HTTP_METHOD_HEAD) {
    return SendStatic(connection, MHD_HTTP_METHOD_NOT_ALLOWED, kNotAllowed);
  }
  if (std::string_view(url) != kPath) return SendStatic(connection, MHD_HTTP_NOT_FOUND, kNotFound);
  std::string body = options.render();
  MHD_Response* response =
      MHD_create_response_from_buffer(body.size(), body.data(), MHD_RESPMEM_MUST_COPY);
  if (response != nullptr) {
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE,
                            std::string(options.content_type).c_str());
  }
  return Send(connection, MHD_HTTP_OK, response);
}

}  // namespace

MetricsTask::MetricsTask(Options options) : options_(std::move(options)) {}

MetricsTask::~MetricsTask() { Stop(); }

void MetricsTask::Configure(const MetricsConfig& config, std::string_view config_path) {
  config_ = config;
  config_path_ = std::string(config_path);
}

absl::Status MetricsTask::Start(EventLoop&) { return Listen(); }

absl::Status MetricsTask::Listen() {
  if (!config_.enabled() || daemon_ != nullptr) return absl::OkStatus();
  const std::string where =
      absl::StrFormat("%s:%d: metrics.listen = \"%s\"", config_path_, config_.line, config_.listen);
  const IpAddress& ip = config_.address.address;
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  if (ip.is_v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(config_.address.port);
    std::memcpy(&a->sin6_addr, ip.bytes.data(), 16);
    addr_len = sizeof(*a);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    a->sin_family = AF_INET;
    a->sin_port = htons(config_.address.port);
    std::memcpy(&a->sin_addr, ip.bytes.data(), 4);
    addr_len = sizeof(*a);
  }
  // Non-blocking: the pool's threads share it, and one that loses the race
  // for a connection must not block in accept().
  const int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::InternalError(absl::StrFormat("%s: cannot open a socket: %s", where, std::strerror(errno)));
  }
  const int one = 1;
  // A restart must not wait out the previous run's TIME_WAIT connections.
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), addr_len) != 0 || listen(fd, kBacklog) != 0) {
    const int err = errno;
    close(fd);
    const char* hint = err == EADDRINUSE      ? ": another process serves there; pick another port or stop it"
                       : err == EADDRNOTAVAIL ? ": no interface of this host (network namespace) has that address"
                       : err == EACCES        ? ": ports under 1024 need CAP_NET_BIND_SERVICE"
                                              : "";
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: cannot serve Prometheus metrics there: %s%s; maglb did not start", where, std::strerror(err), hint));
  }
  daemon_ = MHD_start_daemon(
      MHD_USE_POLL_INTERNAL_THREAD, 0, nullptr, nullptr, &Handle, &options_,
      MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_THREAD_POOL_SIZE, kMetricsThreads,
      MHD_OPTION_CONNECTION_LIMIT, kMetricsConnectionLimit, MHD_OPTION_CONNECTION_TIMEOUT,
      kMetricsIdleTimeoutS, MHD_OPTION_CONNECTION_MEMORY_LIMIT, kMetricsRequestBytes, MHD_OPTION_END);
  if (daemon_ == nullptr) {
    // Not closed here: whether MHD closed it on its way out varies by
    // version, and a second close could hit another thread's descriptor.
    // The daemon does not start, so at most one descriptor stays open.
    return absl::InternalError(absl::StrFormat(
        "%s: libmicrohttpd could not start its threads (out of memory or threads?); maglb did not start", where));
  }
  LogLine(absl::StrFormat("metrics: serving Prometheus metrics on http://%s/metrics (%s:%d)", config_.listen,
                          config_path_, config_.line));
  return absl::OkStatus();
}

void MetricsTask::Stop() {
  if (daemon_ == nullptr) return;
  MHD_stop_daemon(daemon_);  // closes the socket and the connections, joins the threads
  daemon_ = nullptr;
}

}  // namespace maglb
