// One line per event, with a UTC timestamp, to stderr (journald/syslog-friendly).
#ifndef MAGLB_CONTROL_LOG_H_
#define MAGLB_CONTROL_LOG_H_

#include <string_view>

namespace maglb {

/// Writes "2026-01-02T03:04:05.678Z maglb: <line>\n" in one write.
void LogLine(std::string_view line);

}  // namespace maglb

#endif  // MAGLB_CONTROL_LOG_H_
