#include "control/log.h"

#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>

#include "nlohmann/json.hpp"

namespace maglb {
namespace {

std::atomic<LogFormat> g_format{LogFormat::kText};

std::string Timestamp(const timeval& tv) {
  tm t;
  gmtime_r(&tv.tv_sec, &t);
  char stamp[64];
  std::snprintf(stamp, sizeof(stamp), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", t.tm_year + 1900, t.tm_mon + 1,
                t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, static_cast<int>(tv.tv_usec / 1000));
  return stamp;
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

void Write(const std::string& out) {
  // One write: lines from the control and telemetry threads never interleave.
  ssize_t ignored = write(STDERR_FILENO, out.data(), out.size());
  (void)ignored;
}

void WriteEvent(std::string_view event, std::span<const LogField> fields, std::string_view text,
                LogLevel level) {
  timeval tv;
  gettimeofday(&tv, nullptr);
  Write(FormatLogLine(g_format.load(std::memory_order_relaxed), tv, event, fields, text, level));
}

// fopencookie's write: whole lines go out as events; a partial one waits
// for its end (DPDK writes a line in one or more fprintf calls).
struct LineStream {
  std::mutex mutex;
  std::string pending;
};
ssize_t LineStreamWrite(void* cookie, const char* data, size_t size) {
  auto* s = static_cast<LineStream*>(cookie);
  std::lock_guard<std::mutex> lock(s->mutex);
  s->pending.append(data, size);
  size_t start = 0;
  for (size_t nl; (nl = s->pending.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string_view line(s->pending.data() + start, nl - start);
    if (!line.empty()) WriteEvent("dpdk", {}, line, LogLevel::kInfo);
  }
  s->pending.erase(0, start);
  return static_cast<ssize_t>(size);
}

}  // namespace

void SetLogFormat(LogFormat format) { g_format.store(format, std::memory_order_relaxed); }
LogFormat GetLogFormat() { return g_format.load(std::memory_order_relaxed); }

std::optional<LogFormat> ParseLogFormat(std::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return std::nullopt;
}

std::string FormatLogLine(LogFormat format, const timeval& when, std::string_view event,
                          std::span<const LogField> fields, std::string_view text, LogLevel level) {
  if (format == LogFormat::kText) {
    std::string out = Timestamp(when);
    out += " maglb: ";
    out.append(text.data(), text.size());
    out += '\n';
    return out;
  }
  // nlohmann writes the JSON: every string escaped (quotes, control bytes,
  // newlines), so one event stays one line whatever a config or a peer put in
  // a name; bytes that are no UTF-8 are replaced, never an exception.
  nlohmann::ordered_json j;
  j["ts"] = Timestamp(when);
  j["level"] = LevelName(level);
  j["event"] = std::string(event);
  for (const LogField& f : fields) {
    std::string key(f.key);
    if (key == "ts" || key == "level" || key == "event" || key == "msg") key = "field_" + key;
    std::visit([&](const auto& v) { j[key] = v; }, f.value);
  }
  j["msg"] = std::string(text);
  std::string out = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  out += '\n';
  return out;
}

void LogEvent(std::string_view event, std::initializer_list<LogField> fields, std::string_view text,
              LogLevel level) {
  WriteEvent(event, std::span<const LogField>(fields.begin(), fields.size()), text, level);
}

void LogLine(std::string_view line) {
  const LogLevel level = line.starts_with("warning:") ? LogLevel::kWarning
                         : line.starts_with("error:") ? LogLevel::kError
                                                      : LogLevel::kInfo;
  WriteEvent("log", {}, line, level);
}

FILE* LogLineStream() {
  static FILE* stream = [] {
    cookie_io_functions_t io{};
    io.write = LineStreamWrite;
    FILE* f = fopencookie(new LineStream, "w", io);
    if (f != nullptr) setvbuf(f, nullptr, _IONBF, 0);  // each write reaches the cookie at once
    return f;
  }();
  return stream;
}

}  // namespace maglb
