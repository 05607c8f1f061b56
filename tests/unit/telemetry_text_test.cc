// What telemetry sends as text (control/telemetry_text.h): nothing DPDK's
// escaper mangles, nothing past its string limit, and the bytes a reply
// page counts for it are the bytes DPDK writes.
#include "control/telemetry_text.h"

#include <string>

#include "gtest/gtest.h"

namespace maglb {
namespace {

TEST(TelemetryText, PrintableAsciiPassesAsItIs) {
  EXPECT_EQ(TelemetryText("3 consecutive failures: connect timeout 500 ms"),
            "3 consecutive failures: connect timeout 500 ms");
  EXPECT_EQ(TelemetryText("reply did not contain \"ok\" \\ here"), "reply did not contain \"ok\" \\ here");
  EXPECT_EQ(TelemetryText(""), "");
}

TEST(TelemetryText, ControlAndNonAsciiBytesAreReplaced) {
  // A server's reply quoted in a probe's detail: newlines, an escape
  // sequence, UTF-8, a NUL in the middle.
  const std::string hostile = std::string("line1\r\nline2\t\x1b[2J caf\xc3\xa9 \x7f") + '\0' + "end";
  const std::string text = TelemetryText(hostile);
  EXPECT_EQ(text, std::string("line1  line2  [2J caf?? ? end"));
  for (char ch : text) EXPECT_TRUE(ch >= 0x20 && ch < 0x7f) << static_cast<int>(ch);
}

TEST(TelemetryText, LongTextIsCutWithinDpdksLimit) {
  const std::string at_limit(kMaxTelemetryText, 'a');
  EXPECT_EQ(TelemetryText(at_limit), at_limit);
  const std::string text = TelemetryText(std::string(100000, 'b'));
  EXPECT_EQ(text.size(), kMaxTelemetryText);
  EXPECT_TRUE(text.ends_with("bb...")) << text;
}

TEST(TelemetryText, CostsCountQuotesEscapesAndSeparator) {
  EXPECT_EQ(TelemetryStringCost(""), 3u);             // "",
  EXPECT_EQ(TelemetryStringCost("up"), 5u);           // "up",
  EXPECT_EQ(TelemetryStringCost("a\"b\\c"), 10u);     // "a\"b\\c",
  // The worst a text can cost: every byte a quote.
  EXPECT_EQ(TelemetryStringCost(TelemetryText(std::string(1000, '"'))), 2 * 124 + 3 + 3u);
  EXPECT_EQ(TelemetryNumberCost(0), 2u);
  EXPECT_EQ(TelemetryNumberCost(9), 2u);
  EXPECT_EQ(TelemetryNumberCost(10), 3u);
  EXPECT_EQ(TelemetryNumberCost(UINT64_MAX), 21u);
}

}  // namespace
}  // namespace maglb
