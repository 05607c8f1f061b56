// One line per event, with a UTC timestamp, to stderr (journald/syslog-friendly):
// as text ("2026-01-02T03:04:05.678Z maglb: <text>"), or, for log shippers,
// as one JSON object per line ({"ts": ..., "level": ..., "event": ...,
// <fields>, "msg": <text>}). An event of a VIP, backend or route carries them
// as fields (LogEvent); any other line is event "log" (LogLine).
#ifndef MAGLB_CONTROL_LOG_H_
#define MAGLB_CONTROL_LOG_H_

#include <sys/time.h>

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace maglb {

enum class LogFormat { kText, kJson };

/// How every line is written from now on. Set once at start, before any
/// other thread logs (maglb --log-format).
void SetLogFormat(LogFormat format);
LogFormat GetLogFormat();
/// "text" or "json"; nullopt for anything else.
std::optional<LogFormat> ParseLogFormat(std::string_view name);

enum class LogLevel { kInfo, kWarning, kError };

/// One field of an event: a text, a number, or a list of texts (the VIPs on
/// an address, the backends a reload touched). JSON keeps the type; text
/// mode does not print fields (the text says it all).
struct LogField {
  using Value = std::variant<std::string, uint64_t, std::vector<std::string>>;
  LogField(std::string_view k, std::string_view v) : key(k), value(std::string(v)) {}
  LogField(std::string_view k, const std::string& v) : key(k), value(v) {}
  LogField(std::string_view k, const char* v) : key(k), value(std::string(v)) {}
  LogField(std::string_view k, uint64_t v) : key(k), value(v) {}
  LogField(std::string_view k, uint32_t v) : key(k), value(uint64_t{v}) {}
  LogField(std::string_view k, int v) : key(k), value(static_cast<uint64_t>(v < 0 ? 0 : v)) {}
  LogField(std::string_view k, std::vector<std::string> v) : key(k), value(std::move(v)) {}
  /// "vip", "backend", "prefix", "reason", ...; ts, level, event and msg
  /// are the line's own: a field of one of those names is written field_<name>.
  std::string_view key;
  Value value;
};

/// Writes one event in one write (lines of the control and telemetry
/// threads never interleave). `event` names what happened
/// ("health_transition"); `text` is the line text mode prints, unchanged.
void LogEvent(std::string_view event, std::initializer_list<LogField> fields, std::string_view text,
              LogLevel level = LogLevel::kInfo);

/// Event "log": a line without fields. Its level is warning when the line
/// starts "warning:", error when it starts "error:", else info.
void LogLine(std::string_view line);

/// The line LogEvent writes at `when`, its newline included.
std::string FormatLogLine(LogFormat format, const timeval& when, std::string_view event,
                          std::span<const LogField> fields, std::string_view text, LogLevel level);

/// A stream each of whose lines goes out as LogEvent("dpdk", {}, line): for
/// DPDK's log (rte_openlog_stream) in JSON mode. Lives for the process.
FILE* LogLineStream();

}  // namespace maglb

#endif  // MAGLB_CONTROL_LOG_H_
