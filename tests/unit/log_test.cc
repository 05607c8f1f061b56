// maglb's log lines: text mode as it always was; JSON mode one valid object
// per line, its fields typed, whatever bytes a name holds.
#include "control/log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace maglb {
namespace {

constexpr timeval kWhen{1767323045, 678901};  // 2026-01-02T03:04:05.678Z

std::string Line(LogFormat format, std::string_view event, std::vector<LogField> fields, std::string_view text,
                 LogLevel level = LogLevel::kInfo) {
  return FormatLogLine(format, kWhen, event, fields, text, level);
}

nlohmann::json ParseOneLine(const std::string& line) {
  EXPECT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line: " << line;
  return nlohmann::json::parse(line);  // throws (fails the test) if not JSON
}

TEST(Log, TextModeIsTheLineAsBefore) {
  EXPECT_EQ(Line(LogFormat::kText, "health_transition", {{"vip", "web-gre"}, {"backend", "be1"}},
                 "vip web-gre backend be1: up -> down (3 consecutive failures)"),
            "2026-01-02T03:04:05.678Z maglb: vip web-gre backend be1: up -> down (3 consecutive failures)\n");
}

TEST(Log, JsonModeHasTimestampLevelEventFieldsAndMessage) {
  const std::string line = Line(LogFormat::kJson, "health_transition",
                                {{"vip", "web-gre"}, {"backend", "be1"}, {"generation", uint64_t{7}},
                                 {"vips", std::vector<std::string>{"a", "b"}}},
                                "vip web-gre backend be1: up -> down", LogLevel::kWarning);
  const nlohmann::json j = ParseOneLine(line);
  EXPECT_EQ(j["ts"], "2026-01-02T03:04:05.678Z");
  EXPECT_EQ(j["level"], "warning");
  EXPECT_EQ(j["event"], "health_transition");
  EXPECT_EQ(j["vip"], "web-gre");
  EXPECT_EQ(j["backend"], "be1");
  EXPECT_EQ(j["generation"], 7);
  EXPECT_EQ(j["vips"], nlohmann::json::array({"a", "b"}));
  EXPECT_EQ(j["msg"], "vip web-gre backend be1: up -> down");
  // The fixed keys first, the message last: a human reading the raw line finds them.
  EXPECT_EQ(line.rfind("{\"ts\":", 0), 0u) << line;
  EXPECT_NE(line.find(",\"msg\":"), std::string::npos);
}

TEST(Log, HostileStringsStayOneValidLine) {
  const std::string nasty = "a\"b\\c\nd\re\tf\x01g\x7f h\xc3\xa9 i\xff\xfe j}{\"";
  const std::string line =
      Line(LogFormat::kJson, "log", {{"vip", nasty}, {"backend", std::string("x\0y", 3)}}, nasty);
  const nlohmann::json j = ParseOneLine(line);
  // Valid UTF-8 (é) kept; what is no UTF-8 replaced; the rest exactly as given.
  EXPECT_EQ(j["msg"], "a\"b\\c\nd\re\tf\x01g\x7f h\xc3\xa9 i\xef\xbf\xbd\xef\xbf\xbd j}{\"");
  EXPECT_EQ(j["vip"], j["msg"]);
  EXPECT_EQ(j["backend"], std::string("x\0y", 3));
}

TEST(Log, FieldsCannotOverwriteTheFixedKeys) {
  const nlohmann::json j =
      ParseOneLine(Line(LogFormat::kJson, "reload", {{"msg", "forged"}, {"event", "forged"}}, "real"));
  EXPECT_EQ(j["msg"], "real");
  EXPECT_EQ(j["event"], "reload");
  EXPECT_EQ(j["field_msg"], "forged");
}

TEST(Log, ParseLogFormat) {
  EXPECT_EQ(ParseLogFormat("text"), LogFormat::kText);
  EXPECT_EQ(ParseLogFormat("json"), LogFormat::kJson);
  EXPECT_EQ(ParseLogFormat("JSON"), std::nullopt);
  EXPECT_EQ(ParseLogFormat(""), std::nullopt);
}

// LogLine and the DPDK stream write to stderr: read it back through a pipe.
class StderrCapture {
 public:
  StderrCapture() {
    EXPECT_EQ(pipe(fds_), 0);
    saved_ = dup(STDERR_FILENO);
    dup2(fds_[1], STDERR_FILENO);
  }
  std::string Take() {
    dup2(saved_, STDERR_FILENO);
    close(saved_);
    close(fds_[1]);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = read(fds_[0], buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
    close(fds_[0]);
    return out;
  }

 private:
  int fds_[2];
  int saved_;
};

TEST(Log, LogLineAndTheDpdkStreamInJsonMode) {
  SetLogFormat(LogFormat::kJson);
  StderrCapture capture;
  LogLine("warning: something odd");
  LogLine("started: port 0");
  LogEvent("announce", {{"prefix", "10.0.0.1/32"}}, "announce: 10.0.0.1/32 announced (web: 1 of 1)");
  FILE* dpdk = LogLineStream();
  ASSERT_NE(dpdk, nullptr);
  std::fprintf(dpdk, "EAL: part one, ");
  std::fprintf(dpdk, "part two\nNET: second\n\n");
  std::fflush(dpdk);
  const std::string out = capture.Take();
  SetLogFormat(LogFormat::kText);
  std::vector<nlohmann::json> lines;
  size_t start = 0;
  for (size_t nl; (nl = out.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(nlohmann::json::parse(out.substr(start, nl - start)));
  }
  EXPECT_EQ(start, out.size()) << "every line ends";
  ASSERT_EQ(lines.size(), 5u) << out;
  EXPECT_EQ(lines[0]["level"], "warning");
  EXPECT_EQ(lines[0]["event"], "log");
  EXPECT_EQ(lines[1]["msg"], "started: port 0");
  EXPECT_EQ(lines[1]["level"], "info");
  EXPECT_EQ(lines[2]["prefix"], "10.0.0.1/32");
  EXPECT_EQ(lines[3]["event"], "dpdk");
  EXPECT_EQ(lines[3]["msg"], "EAL: part one, part two");
  EXPECT_EQ(lines[4]["msg"], "NET: second");
}

}  // namespace
}  // namespace maglb
