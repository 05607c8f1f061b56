// Text as DPDK's telemetry can carry it, and what it costs in a reply.
// Pure C++ (tested without DPDK); telemetry.cc pages its replies with it.
#ifndef MAGLB_CONTROL_TELEMETRY_TEXT_H_
#define MAGLB_CONTROL_TELEMETRY_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "maglb/metrics.h"

namespace maglb {

/// `s` made safe for a telemetry string: printable ASCII only, at most
/// kMaxTelemetryText bytes. DPDK 22.11 escapes '"' and '\' but reads a byte
/// above 0x7f as a negative index into its escape table (out of bounds: it
/// drops the byte or writes garbage) and cuts a long string at any byte: so
/// a control character becomes a space, any other byte '?', and a longer
/// text ends in "..." within the limit (a reason or a probe's detail may
/// quote what a server said).
inline std::string TelemetryText(std::string_view s) {
  constexpr std::string_view kCut = "...";
  const bool cut = s.size() > kMaxTelemetryText;
  if (cut) s = s.substr(0, kMaxTelemetryText - kCut.size());
  std::string out;
  out.reserve(s.size() + (cut ? kCut.size() : 0));
  for (char ch : s) {
    const auto b = static_cast<unsigned char>(ch);
    out += b < 0x20 ? ' ' : b >= 0x7f ? '?' : ch;
  }
  if (cut) out += kCut;
  return out;
}

/// Bytes a TelemetryText takes in a reply as an array entry: its quotes, a
/// backslash before each '"' and '\', and the comma.
inline size_t TelemetryStringCost(std::string_view text) {
  size_t n = text.size() + 3;
  for (char ch : text) n += ch == '"' || ch == '\\';
  return n;
}

/// Bytes a number takes in a reply as an array entry (digits and comma).
inline size_t TelemetryNumberCost(uint64_t v) {
  size_t n = 2;
  while (v >= 10) v /= 10, ++n;
  return n;
}

}  // namespace maglb

#endif  // MAGLB_CONTROL_TELEMETRY_TEXT_H_
