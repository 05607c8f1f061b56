#include "maglb/config.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_format.h"
#include "maglb/lb_state.h"
#include "maglb/table_builder.h"

namespace maglb {
namespace {

constexpr char kMinimal[] = R"(
[[vip]]
name = "web"
address = "10.0.0.1"
port = 80

  [[vip.backend]]
  name = "a"
  address = "10.1.0.1"

  [[vip.backend]]
  name = "b"
  address = "10.1.0.2"
  weight = 3
)";

// Expects a refusal whose message starts with "FILE:LINE: KEY" and contains
// `needle`.
void ExpectRefused(const std::string& text, int line, const std::string& key,
                   const std::string& needle) {
  absl::StatusOr<Config> c = ParseConfig(text, "test.toml");
  ASSERT_FALSE(c.ok()) << "accepted:\n" << text;
  std::string msg(c.status().message());
  std::string where = "test.toml:" + std::to_string(line) + ":";
  EXPECT_EQ(msg.rfind(where, 0), 0u) << "message: " << msg << "\nwanted prefix: " << where;
  EXPECT_NE(msg.find(key), std::string::npos) << "message: " << msg << "\nwanted key: " << key;
  EXPECT_NE(msg.find(needle), std::string::npos) << "message: " << msg << "\nwanted: " << needle;
}

TEST(ConfigTest, ReplyRateAndBurst) {
  absl::StatusOr<Config> d = ParseConfig("[lb]\n", "test.toml");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->lb.reply_rate, kDefaultReplyRate);
  EXPECT_EQ(d->lb.reply_burst, kDefaultReplyBurst);
  absl::StatusOr<Config> c = ParseConfig("[lb]\nreply_rate = 0\nreply_burst = 7\n", "test.toml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->lb.reply_rate, 0u);
  EXPECT_EQ(c->lb.reply_burst, 7u);
  ExpectRefused("[lb]\nreply_rate = 1000001\n", 2, "lb.reply_rate", "out of range");
  ExpectRefused("[lb]\nreply_burst = 0\n", 2, "lb.reply_burst", "out of range");
}

// [lb] rx_descriptors, tx_descriptors, mbufs (port_sizing.h): absent or 0
// leaves them to maglb; else within their ranges, each refusal naming the
// line and key and saying what 0 means.
TEST(ConfigTest, PortSizingKeys) {
  absl::StatusOr<Config> d = ParseConfig("[lb]\n", "test.toml");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->lb.sizing.rx_descriptors, 0u);
  EXPECT_EQ(d->lb.sizing.tx_descriptors, 0u);
  EXPECT_EQ(d->lb.sizing.mbufs, 0u);
  EXPECT_EQ(d->lb.sizing.mbufs_line, 0);
  absl::StatusOr<Config> c =
      ParseConfig("[lb]\nrx_descriptors = 4096\ntx_descriptors = 64\nmbufs = 1048576\n", "test.toml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->lb.sizing.rx_descriptors, 4096u);
  EXPECT_EQ(c->lb.sizing.tx_descriptors, 64u);
  EXPECT_EQ(c->lb.sizing.mbufs, 1048576u);
  EXPECT_EQ(c->lb.sizing.rx_descriptors_line, 2);
  EXPECT_EQ(c->lb.sizing.tx_descriptors_line, 3);
  EXPECT_EQ(c->lb.sizing.mbufs_line, 4);
  absl::StatusOr<Config> zero =
      ParseConfig("[lb]\nrx_descriptors = 0\ntx_descriptors = 0\nmbufs = 0\n", "test.toml");
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_TRUE(zero->lb.sizing.SameValues(PortSizingConfig{}));
  absl::StatusOr<Config> edges =
      ParseConfig("[lb]\nrx_descriptors = 32768\ntx_descriptors = 32768\nmbufs = 67108864\n", "test.toml");
  ASSERT_TRUE(edges.ok()) << edges.status();
  EXPECT_EQ(edges->lb.sizing.mbufs, kMaxMbufs);

  for (const char* key : {"rx_descriptors", "tx_descriptors"}) {
    const std::string k = key;
    const std::string path = "lb." + k;
    ExpectRefused("[lb]\n" + k + " = 63\n", 2, path,
                  "63 is out of range: must be 0 (the port's choice (1024, or the driver's preferred ring if "
                  "larger)) or from 64 to 32768");
    // 65535 would round up to the port's alignment past 16 bits: 0.
    ExpectRefused("[lb]\n" + k + " = 65535\n", 2, path, "65535 is out of range");
    ExpectRefused("[lb]\n" + k + " = 32769\n", 2, path, "out of range");
    ExpectRefused("[lb]\n" + k + " = -1\n", 2, path, "-1 is out of range");
    ExpectRefused("[lb]\n" + k + " = 1\n", 2, path, "out of range");
    ExpectRefused("[lb]\n" + k + " = 4294967296\n", 2, path, "out of range");
    ExpectRefused("[lb]\n" + k + " = \"4096\"\n", 2, path, "must be an integer: must be 0");
    ExpectRefused("[lb]\n" + k + " = 1024.0\n", 2, path, "must be an integer");
  }
  ExpectRefused("[lb]\nmbufs = 1023\n", 2, "lb.mbufs",
                "1023 is out of range: must be 0 (computed from the ports, queues and descriptors) or from "
                "1024 to 67108864");
  ExpectRefused("[lb]\nmbufs = 67108865\n", 2, "lb.mbufs", "out of range");
  ExpectRefused("[lb]\nmbufs = 9223372036854775807\n", 2, "lb.mbufs", "out of range");
  ExpectRefused("[lb]\nmbufs = -8192\n", 2, "lb.mbufs", "out of range");
  ExpectRefused("[lb]\nmbufs = true\n", 2, "lb.mbufs", "must be an integer");
  ExpectRefused("[lb]\nmbuf = 8192\n", 2, "lb.mbuf", "unknown key (did you mean \"mbufs\"?)");
}

TEST(ConfigTest, ParsesMinimalConfigWithDefaults) {
  absl::StatusOr<Config> c = ParseConfig(kMinimal, "test.toml");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->vips.size(), 1u);
  const VipConfig& v = c->vips[0];
  EXPECT_EQ(v.name, "web");
  EXPECT_EQ(v.address, IpAddress::V4(10, 0, 0, 1));
  EXPECT_EQ(v.protocol, Protocol::kTcp);
  EXPECT_EQ(v.port, 80);
  EXPECT_EQ(v.forwarding, Forwarding::kGre);
  EXPECT_EQ(v.table_size, kDefaultTableSize);
  ASSERT_EQ(v.backends.size(), 2u);
  EXPECT_EQ(v.backends[0].weight, 1u);
  EXPECT_EQ(v.backends[1].weight, 3u);
  EXPECT_EQ(v.backends[1].line, 11);
  EXPECT_EQ(c->conntrack.capacity, kDefaultConntrackCapacity);
  EXPECT_EQ(c->lb.hash_seed, kDefaultHashSeed);
}

TEST(ConfigTest, ExampleConfigIsValidAndBuilds) {
  absl::StatusOr<Config> c = LoadConfig("config/example.toml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_GE(c->vips.size(), 2u);
  ASSERT_TRUE(c->lb.ipv4.has_value());
  EXPECT_EQ(c->lb.encap_source_v4, c->lb.ipv4);  // defaults to the LB address
  ASSERT_EQ(c->neighbors.size(), 1u);
  EXPECT_EQ(c->neighbors[0].mac.ToString(), "02:00:00:00:00:01");
  // Issue 10: a kernel interface, a named check and a VIP's own.
  EXPECT_TRUE(c->kernel.enabled());
  ASSERT_EQ(c->health_checks.size(), 1u);
  const VipConfig* web = c->FindVip("web");
  const VipConfig* dns = c->FindVip("dns");
  ASSERT_TRUE(web != nullptr && dns != nullptr);
  ASSERT_TRUE(web->health_check.has_value());
  EXPECT_EQ(*web->health_check, c->health_checks[0]);
  EXPECT_EQ(web->health_check->type, HealthCheckType::kHttp);
  ASSERT_TRUE(dns->health_check.has_value());
  EXPECT_EQ(dns->health_check->name, "");
  EXPECT_EQ(dns->health_check->port, 53);
  EXPECT_EQ(dns->backends.size(), 3u);
  for (const VipConfig& v : c->vips) {
    absl::StatusOr<LookupTable> t = BuildVipTable(v);
    ASSERT_TRUE(t.ok()) << v.name << ": " << t.status();
    EXPECT_FALSE(t->empty());
  }
}

TEST(ConfigTest, MissingFileIsAClearError) {
  absl::StatusOr<Config> c = LoadConfig("/nonexistent/maglb.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(std::string(c.status().message()).find("/nonexistent/maglb.toml"), std::string::npos);
}

TEST(ConfigTest, SyntaxErrorNamesLineAndColumn) {
  absl::StatusOr<Config> c = ParseConfig("[lb]\nhash_seed = = 3\n", "test.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(std::string(c.status().message()).rfind("test.toml:2:", 0), 0u) << c.status();
  EXPECT_NE(std::string(c.status().message()).find("not valid TOML"), std::string::npos);
}

TEST(ConfigTest, RefusesWithFileLineAndKey) {
  std::string base(kMinimal);
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = base;
    size_t pos = s.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    return s.replace(pos, from.size(), to);
  };
  ExpectRefused(replace("weight = 3", "weight = -1"), 14, "vip[\"web\"].backend[\"b\"].weight",
                "negative");
  ExpectRefused(replace("weight = 3", "weight = 1000000000"), 14,
                "vip[\"web\"].backend[\"b\"].weight", "absurd");
  ExpectRefused(replace("weight = 3", "weight = \"3\""), 14, "weight", "must be an integer");
  ExpectRefused(replace("weight = 3", "wieght = 3"), 14, "wieght",
                "unknown key (did you mean \"weight\"?)");
  ExpectRefused(replace("name = \"b\"", "name = \"a\""), 11, "backend[\"a\"].name",
                "duplicate backend name (first declared at line 7)");
  ExpectRefused(replace("port = 80", "port = 80\ntable_size = 65536"), 6, "vip[\"web\"].table_size",
                "must be a prime");
  ExpectRefused(replace("port = 80", "port = 80\ntable_size = 241"), 6, "table_size",
                "must be a prime from 251");
  ExpectRefused(replace("port = 80", "port = 70000"), 5, "vip[\"web\"].port", "out of range");
  ExpectRefused(replace("address = \"10.1.0.2\"", "address = \"10.1.0.300\""), 13,
                "backend[\"b\"].address", "not an IPv4 or IPv6 address");
  ExpectRefused(replace("  address = \"10.1.0.2\"\n", ""), 11, "backend[\"b\"].address",
                "required key is missing");
  ExpectRefused(replace("port = 80", "port = 80\nprotocol = \"sctp\""), 6, "vip[\"web\"].protocol",
                "is not one of: tcp, udp");
}

TEST(ConfigTest, RefusesFamilyMismatches) {
  ExpectRefused("[lb]\nipv4 = \"2001:db8::1\"\n", 2, "lb.ipv4", "must be an IPv4 address");
  ExpectRefused(R"([[vip]]
name = "v"
address = "10.0.0.1"
forwarding = "l2dsr"
  [[vip.backend]]
  name = "a"
  address = "2001:db8::2"
)", 5, "vip[\"v\"].backend[\"a\"].address", "same address family");
}

TEST(ConfigTest, RefusesDuplicateVips) {
  ExpectRefused(R"([[vip]]
name = "v"
address = "10.0.0.1"
[[vip]]
name = "v"
address = "10.0.0.2"
)", 4, "vip[\"v\"].name", "duplicate VIP name (first declared at line 1)");
  ExpectRefused(R"([[vip]]
name = "v1"
address = "10.0.0.1"
port = 80
[[vip]]
name = "v2"
address = "10.0.0.1"
port = 80
)", 5, "vip[\"v2\"]", "already served by vip \"v1\"");
}

TEST(ConfigTest, ConntrackProvenProtectWindow) {
  EXPECT_EQ(ConntrackConfig{}.proven_protect_s, 60u);
  absl::StatusOr<Config> c = ParseConfig("[conntrack]\nproven_protect_s = 120\n", "t.toml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->conntrack.proven_protect_s, 120u);
  ExpectRefused("[conntrack]\nproven_protect_s = 0\n", 2, "conntrack.proven_protect_s", "out of range");
}

TEST(ConfigTest, RefusesUnknownTopLevelKeysAndBadTimeouts) {
  ExpectRefused("vips = 3\n", 1, "vips", "unknown key (did you mean \"vip\"?)");
  ExpectRefused("[conntrack]\nudp_timeout_s = 0\n", 2, "conntrack.udp_timeout_s", "out of range");
  ExpectRefused("[[neighbor]]\naddress = \"10.0.0.1\"\nmac = \"zz:00:00:00:00:01\"\n", 3,
                "neighbor[0].mac", "not a MAC address");
}

TEST(ConfigTest, DrainingOnlyVipIsValidButHasNoTable) {
  absl::StatusOr<Config> c = ParseConfig(R"([[vip]]
name = "v"
address = "10.0.0.1"
  [[vip.backend]]
  name = "a"
  address = "10.1.0.1"
  weight = 0
)", "test.toml");
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<LookupTable> t = BuildVipTable(c->vips[0]);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->empty());
}

}  // namespace
}  // namespace maglb

namespace maglb {
namespace {

TEST(ConfigFileTest, RefusesDirectoriesAndEmptyFiles) {
  // Either would otherwise read as a config with no VIPs, and a reload would
  // drop every service.
  absl::StatusOr<Config> dir = LoadConfig("config");
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(std::string(dir.status().message()).find("not a regular file"), std::string::npos)
      << dir.status();
  char empty_path[] = "/tmp/maglb_empty_XXXXXX";
  const int fd = mkstemp(empty_path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, " \n", 2), 2);
  close(fd);
  absl::StatusOr<Config> empty = LoadConfig(empty_path);
  unlink(empty_path);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(std::string(empty.status().message()).find("the file is empty"), std::string::npos)
      << empty.status();
  absl::StatusOr<Config> missing = LoadConfig("/nonexistent/x.toml");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.status().message()).find("No such file or directory"),
            std::string::npos) << missing.status();
}

TEST(ConfigFileTest, RefusesAnMtuThatBlackHolesTunnelledIpv6) {
  const std::string vip6 = R"(
[[vip]]
name = "v6"
address = "2001:db8::80"
forwarding = "gre"
  [[vip.backend]]
  name = "a"
  address = "2001:db8:1::1"
)";
  // GRE over IPv6 adds 44 bytes: 1280 + 44 = 1324 is the least that works.
  ExpectRefused("[lb]\nmtu = 1323\n" + vip6, 2, "lb.mtu", "set mtu to at least 1324");
  EXPECT_TRUE(ParseConfig("[lb]\nmtu = 1324\n" + vip6, "test.toml").ok());
  // L2 DSR adds nothing; IPv4 VIPs are not bound by IPv6's minimum.
  std::string dsr = vip6;
  dsr.replace(dsr.find("gre"), 3, "l2dsr");
  EXPECT_TRUE(ParseConfig("[lb]\nmtu = 1280\n" + dsr, "test.toml").ok());
}

TEST(ConfigFileTest, RefusesNamesThatBreakLogsAndDumps) {
  ExpectRefused("[[vip]]\nname = \"web one\"\naddress = \"10.0.0.1\"\n", 2, "vip[0].name",
                "printable ASCII without spaces");
  ExpectRefused("[[vip]]\nname = \"v\"\naddress = \"10.0.0.1\"\n  [[vip.backend]]\n  name = \"a\\nb\"\n"
                "  address = \"10.1.0.1\"\n", 5, "vip[\"v\"].backend[0].name", "printable ASCII without spaces");
  ExpectRefused("[[vip]]\nname = \"" + std::string(65, 'x') + "\"\naddress = \"10.0.0.1\"\n", 2, "vip[0].name",
                "at most 64");
  ExpectRefused("[[vip]]\nname = \"v\"\naddress = \"10.0.0.1\"\nbackend = 3\n", 4, "vip[\"v\"].backend",
                "must be an array of tables ([[vip.backend]])");
}

}  // namespace
}  // namespace maglb

namespace maglb {
namespace {

std::string Repeat(const std::string& part, int n, const std::string& sep = ".") {
  std::string out;
  for (int i = 0; i < n; ++i) out += (i == 0 ? "" : sep) + part;
  return out;
}

// Issue 8, point 1: toml++ recursed once per dotted part and overflowed the
// stack (SIGSEGV) at ~35k parts; the pre-scan refuses such files first.
TEST(ConfigNestingTest, RefusesDeepTableHeadersBeforeParsing) {
  const std::string deep = Repeat("a", 35000);
  ExpectRefused("[lb]\nhash_seed = 1\n[" + deep + "]\nx = 1\n", 3, "a.a.a.a",
                "a table header of more than 16 dotted parts");
  ExpectRefused("[[" + deep + "]]\n", 1, "a.a.a", "a table header of more than 16 dotted parts");
  ExpectRefused("[ a . b . " + Repeat("c", 20, " . ") + " ]\n", 1, "a . b . c",
                "more than 16 dotted parts");
  // After a UTF-8 byte order mark (which toml++ skips), a header is a header:
  // its parts count towards the depth of the keys under it.
  ExpectRefused("\xEF\xBB\xBF[[" + Repeat("a", 16) + "]]\n" + Repeat("b", 16) + " = 1\n", 2, "b.b",
                "a key nested 33 levels deep");
}

TEST(ConfigNestingTest, RefusesDeepDottedKeysAnywhere) {
  const std::string deep = Repeat("a", 35000);
  ExpectRefused(kMinimal + deep + " = 1\n", 15, "a.a.a", "a key of more than 16 dotted parts");
  ExpectRefused("[lb]\nx = { y = 1, " + deep + " = 2 }\n", 2, "a.a.a",
                "a key of more than 16 dotted parts");
  ExpectRefused("x = [ 1, { " + Repeat("\"q\"", 20) + " = 2 } ]\n", 1, "\"q\".\"q\"",
                "a key of more than 16 dotted parts");
  ExpectRefused("x = [ {a = 1},\n  {b = [ {" + Repeat("'q'", 17) + " = 2} ]} ]\n", 2, "'q'.'q'",
                "a key of more than 16 dotted parts");
}

TEST(ConfigNestingTest, RefusesDeepNestingBuiltFromShorterParts) {
  // Every part count within the limit, their sum not: [[16 parts]] is 17
  // levels, and a 16-part key under it 33.
  ExpectRefused("[[" + Repeat("a", 16) + "]]\n" + Repeat("b", 16) + " = 1\n", 2, "b.b.b",
                "a key nested 33 levels deep");
  ExpectRefused("x = " + std::string(40, '[') + std::string(40, ']') + "\n", 1, "x = [[[",
                "an array nested 33 levels deep");
  ExpectRefused("x = " + Repeat("{a = ", 40, "") + "1" + std::string(40, '}') + "\n", 1, "a",
                "a key nested 33 levels deep");
  ExpectRefused("x = " + Repeat("[{a = ", 20, "") + "1" + Repeat("}]", 20, "") + "\n", 1, "a = [{",
                "an inline table nested 33 levels deep");
  // At the limit, the parser gets the file (and refuses the unknown key).
  ExpectRefused("[" + Repeat("a", 16) + "]\n" + Repeat("b", 16) + " = 1\n", 1, "a",
                "unknown key");
  ExpectRefused("x = " + std::string(31, '[') + std::string(31, ']') + "\n", 1, "x",
                "unknown key");
}

TEST(ConfigNestingTest, DotsInsideStringsQuotedKeysAndCommentsDoNotCount) {
  const std::string dots = Repeat("a", 40);  // 39 dots
  // Comments, and strings of all four kinds holding dots, brackets, quotes and
  // header-like lines, in places the schema accepts: the file is valid.
  const std::string ok = "# [" + dots + "] " + dots + " = 1\n" + std::string(R"(
[lb] # )") + dots + R"(
ipv4 = "192.0.2.10" # [)" + dots + R"(]
[[vip]]
name = """web.)" + Repeat("x", 20) + R"("""
address = '198.51.100.80'
  [[vip.backend]]
  name = '''b.)" + Repeat("y", 20) + R"('''
  address = "10.1.0.1"
)";
  absl::StatusOr<Config> c = ParseConfig(ok, "test.toml");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->vips.size(), 1u);
  EXPECT_EQ(c->vips[0].name, "web." + Repeat("x", 20));
  EXPECT_EQ(c->vips[0].backends[0].name, "b." + Repeat("y", 20));

  // A quoted key holding dots is one part: the parser sees it, and refuses it
  // as an unknown key (not as nesting).
  ExpectRefused("[lb]\n\"" + dots + "\" = 1\n", 2, "lb." + dots, "unknown key");
  ExpectRefused("[lb]\n'" + dots + "'.b = 1\n", 2, "lb." + dots, "unknown key");
  ExpectRefused("[\"" + dots + "\".'" + dots + "']\n", 1, dots, "unknown key");
  // Escaped quotes do not end a basic string.
  ExpectRefused("[lb]\n\"x\\\"" + dots + "\\\\\" = 1\n", 2, "lb.x\"", "unknown key");
}

TEST(ConfigNestingTest, MultiLineStringsAreSkippedWhole) {
  // Valid TOML (checked with Python's tomllib): strings of all four kinds
  // spanning lines that look like deep headers and keys, with quotes inside
  // (up to two before the closing delimiter), escaped quotes, a line-ending
  // backslash, empty multi-line strings, a literal string ending in a
  // backslash, and brackets inside strings of a multi-line array.
  const std::string strings = R"toml([zz]
a = """
[a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a]
" "" \""" a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a = 1 \
x"""""
b = '''
a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a = "
[[a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a]]'' '''
c = """"""
d = ''''''
e = ["""
]""", '''
{''', # a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a
  "a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a"]
f = "a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a\"" # "a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a"
g = 'a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a\'
)toml";
  // The parser gets the whole file: the only error is the unknown table.
  ExpectRefused(strings, 1, "zz", "unknown key");
  // The scan kept its place (and its line count) through the strings: a deep
  // header right after them is still found, on line 17.
  ExpectRefused(strings + "[" + Repeat("a", 20) + "]\n", 17, "a.a.a",
                "a table header of more than 16 dotted parts");
  // ... and so is a deep key on the same line as a closing delimiter.
  ExpectRefused("x = [\"\"\"\n\"\"\", { " + Repeat("a", 20) + " = 1 }]\n", 2, "a.a",
                "a key of more than 16 dotted parts");
}

TEST(ConfigNestingTest, RefusesOversizedFiles) {
  std::string big(kMaxConfigBytes + 1, '\n');
  absl::StatusOr<Config> c = ParseConfig(big, "test.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(std::string(c.status().message()).find("refuses config files over 16777216 bytes"),
            std::string::npos) << c.status();
  EXPECT_TRUE(ParseConfig(std::string(kMaxConfigBytes, '\n'), "test.toml").ok());

  // LoadConfig refuses from the file's size, without reading it (sparse here).
  char path[] = "/tmp/maglb_big_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 1ll << 32), 0);
  close(fd);
  absl::StatusOr<Config> f = LoadConfig(path);
  unlink(path);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(std::string(f.status().message()).find("4294967296 bytes: maglb refuses"),
            std::string::npos) << f.status();
}

// Issue 8, point 4: toml++ 3.3 finds arrays of tables, implicit tables and
// dotted-key tables by a linear search of every one so far, so these shapes
// parsed in time quadratic in the file (4 MiB of the first: 2 s; 16 MiB: tens
// of seconds). The pre-scan bounds what the parser would have to search.
std::string Times(const std::string& unit, int n) {
  std::string out;
  out.reserve(unit.size() * n);
  for (int i = 0; i < n; ++i) out += unit;
  return out;
}

TEST(ConfigSearchBoundTest, RefusesMoreArraysOfTablesThanTheDataPlaneTakes) {
  // [[vip]] is one array; each VIP's [[vip.backend]] list is one more. The
  // 4159th VIP's list is the 4161st array: unit 4159 (from 0), its line 2.
  ExpectRefused(Times("[[vip]]\n[[vip.backend]]\n[[vip.backend]]\n", kMaxConfigTableArrays),
                3 * 4159 + 2, "vip.backend", "more than 4160 arrays of tables");
  // Spelling a key another way does not hide a new array: each header whose
  // path is not the previous header's counts as one (an over-estimate here:
  // 2 a VIP, refused at the 2080th).
  ExpectRefused(Times("[[\"vip\"]]\n[[ \"vip\".backend ]]\n[['vip' . backend]]\n", 2100),
                3 * 2079 + 3, "'vip' . backend", "more than 4160 arrays of tables");
  // Distinct top-level arrays count one each.
  std::string distinct;
  for (int i = 0; i <= kMaxConfigTableArrays; ++i) distinct += "[[a" + std::to_string(i) + "]]\n";
  ExpectRefused(distinct, kMaxConfigTableArrays + 1, "a4160", "more than 4160 arrays of tables");
  // The same array repeated adds elements, not arrays: refused by the schema.
  ExpectRefused(Times("[[neighbor]]\n", kMaxConfigTableArrays + 10), 1, "neighbor[0]",
                "address");
}

TEST(ConfigSearchBoundTest, RefusesTooManyImplicitTables) {
  // [tN] holding x.y and x.z: each dotted key may create a table (x), and
  // x.z searched every such table so far. Key 257 is unit 128's x.y.
  std::string dotted;
  for (int i = 0; i < 200; ++i) dotted += "[t" + std::to_string(i) + "]\nx.y = 1\nx.z = 1\n";
  ExpectRefused(dotted, 3 * 128 + 2, "x.y", "more than 256 tables created by dotted keys");
  // The same inside inline tables, on one line.
  ExpectRefused("a = [" + Times("{x.y=1, x.z=1},", 200) + "]\n", 1, "x.y",
                "more than 256 tables created by dotted keys");
  // [aN.b] creates the implicit table aN (a later [aN] searched them all).
  std::string implicit;
  for (int i = 0; i < 300; ++i) implicit += "[a" + std::to_string(i) + ".b]\n";
  ExpectRefused(implicit, 257, "a256.b", "more than 256 tables created by dotted keys");
  // [[vip.backend]] under an existing vip creates none (the schema's own).
  ExpectRefused(Times("[[vip]]\n[[vip.backend]]\n", 300), 1, "vip[0]", "name");
}

TEST(ConfigSearchBoundTest, RefusesTooManyHeaderParts) {
  // One array, repeated past what the schema's largest file needs: each
  // header searched every array of tables so far.
  ExpectRefused(Times("[[n]]\n", kMaxConfigHeaderParts + 1), kMaxConfigHeaderParts + 1, "n",
                "table headers of more than 163840 dotted parts in all");
  ExpectRefused(Times("[[n.m]]\n", kMaxConfigHeaderParts / 2 + 1), kMaxConfigHeaderParts / 2 + 1,
                "n.m", "table headers of more than 163840 dotted parts in all");
}

// The largest config the data plane takes (kMaxVips VIPs, kMaxBackendsTotal
// backends) passes the bounds, however its backends are spread; `checks`
// adds the most [[health_check]] and a [vip.health_check] table to each VIP.
std::string LargestConfig(bool skewed, bool checks = false) {
  std::string text = "[lb]\nipv4 = \"192.0.2.10\"\n[conntrack]\ncapacity = 1024\n";
  if (checks) {
    text += "[kernel]\ninterface = \"maglb0\"\n[health]\nhold_down_s = 10\n";
    for (uint32_t i = 0; i < kMaxHealthChecks; ++i) {
      text += absl::StrFormat("[[health_check]]\nname = \"c%d\"\ntype = \"tcp\"\nport = 80\n", i);
    }
  }
  for (int i = 0; i < 64; ++i) {
    text += "[[neighbor]]\naddress = \"192.0.2." + std::to_string(100 + i) +
            "\"\nmac = \"02:00:00:00:00:" + (i < 16 ? "0" : "") + absl::StrFormat("%x", i) + "\"\n";
  }
  int backend = 0;
  for (uint32_t v = 0; v < kMaxVips; ++v) {
    const int n = skewed ? (v + 1 < kMaxVips ? 1 : kMaxBackendsTotal - (kMaxVips - 1))
                         : kMaxBackendsTotal / kMaxVips;
    text += absl::StrFormat("[[vip]]\nname = \"v%d\"\naddress = \"10.%d.%d.1\"\ntable_size = %d\n",
                            v, v >> 8, v & 255, n > 251 ? 131071 : 251);
    if (checks) text += "[vip.health_check]\ntype = \"tcp\"\nport = 80\n";
    for (int b = 0; b < n; ++b, ++backend) {
      text += absl::StrFormat("  [[vip.backend]]\n  name = \"b%d\"\n  address = \"172.%d.%d.%d\"\n",
                              b, 16 + (backend >> 16), (backend >> 8) & 255, backend & 255);
    }
  }
  return text;
}

TEST(ConfigSearchBoundTest, AcceptsTheLargestConfigTheDataPlaneTakes) {
  for (bool skewed : {false, true}) {
    absl::StatusOr<Config> c = ParseConfig(LargestConfig(skewed), "test.toml");
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_EQ(c->vips.size(), kMaxVips);
    size_t backends = 0;
    for (const VipConfig& v : c->vips) backends += v.backends.size();
    EXPECT_EQ(backends, kMaxBackendsTotal);
    EXPECT_EQ(c->neighbors.size(), 64u);
  }
  absl::StatusOr<Config> c = ParseConfig(LargestConfig(/*skewed=*/false, /*checks=*/true), "test.toml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->health_checks.size(), kMaxHealthChecks);
  for (const VipConfig& v : c->vips) ASSERT_TRUE(v.health_check.has_value()) << v.name;
}

}  // namespace
}  // namespace maglb

namespace maglb {
namespace {

// `n` VIPs with one backend each; VIP i sets table_size on its line 5 when
// `table_size` is given.
std::string ManyVips(int n, const char* table_size = nullptr) {
  std::string text;
  for (int i = 0; i < n; ++i) {
    text += "[[vip]]\nname = \"v" + std::to_string(i) + "\"\naddress = \"10.0." +
            std::to_string(i / 256) + "." + std::to_string(i % 256) + "\"\nport = 80\n";
    if (table_size != nullptr) text += std::string("table_size = ") + table_size + "\n";
    text += "  [[vip.backend]]\n  name = \"a\"\n  address = \"10.1.0.1\"\n";
  }
  return text;
}

// Issue 8, point 4: every VIP could take 8 MiB of table with no total cap.
TEST(ConfigTableMemoryTest, RefusesTablesOverTheTotalCapAtTheVipThatCrossesIt) {
  // Default 1024 MiB: 128 tables of the largest size fit (8,388,602 bytes
  // each), the 129th does not. Each VIP is 8 lines; VIP 128's table_size is
  // on line 128 * 8 + 5.
  EXPECT_TRUE(ParseConfig(ManyVips(128, "4194301"), "test.toml").ok());
  ExpectRefused(ManyVips(129, "4194301"), 128 * 8 + 5, "vip[\"v128\"].table_size",
                "brings the tables of the first 129 VIPs to 1032.0 MiB, over [lb] "
                "max_table_memory_mb = 1024 (all 129 VIPs ask for 1032.0 MiB)");
  // A lower cap, counted in default-size tables (65537 slots, 2 bytes over
  // 128 KiB): 7 fit in 1 MiB. Without table_size the error points at the
  // [[vip]] line (VIP i starts on line 3 + 7 i).
  EXPECT_TRUE(ParseConfig("[lb]\nmax_table_memory_mb = 1\n" + ManyVips(7), "test.toml").ok());
  ExpectRefused("[lb]\nmax_table_memory_mb = 1\n" + ManyVips(10), 3 + 7 * 7,
                "vip[\"v7\"].table_size", "the first 8 VIPs to 1.0 MiB, over [lb] "
                "max_table_memory_mb = 1 (all 10 VIPs ask for 1.3 MiB)");
  ExpectRefused("[lb]\nmax_table_memory_mb = 0\n", 2, "lb.max_table_memory_mb",
                "0 is out of range: must be from 1 to 1048576");
}

}  // namespace
}  // namespace maglb

namespace maglb {
namespace {

// Issue 10: [health] and [kernel].
TEST(ConfigHealthSettingsTest, DefaultsAndEveryKey) {
  absl::StatusOr<Config> d = ParseConfig("", "test.toml");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->health, HealthSettings{});
  EXPECT_EQ(d->health.rebuild_interval_ms, kDefaultRebuildIntervalMs);
  EXPECT_EQ(d->health.slow_start_steps, kDefaultSlowStartSteps);
  absl::StatusOr<Config> c = ParseConfig(R"([health]
rebuild_interval_ms = 0
flap_window_s = 3600
flap_max_transitions = 1
hold_down_s = 86400
slow_start_steps = 20
)", "test.toml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->health.rebuild_interval_ms, 0u);
  EXPECT_EQ(c->health.flap_window_s, 3600u);
  EXPECT_EQ(c->health.flap_max_transitions, 1u);
  EXPECT_EQ(c->health.hold_down_s, 86400u);
  EXPECT_EQ(c->health.slow_start_steps, 20u);
}

TEST(ConfigHealthSettingsTest, RefusesOutOfRangeAndWrongTypes) {
  ExpectRefused("[health]\nrebuild_interval_ms = 60001\n", 2, "health.rebuild_interval_ms",
                "60001 is out of range: must be from 0 to 60000");
  ExpectRefused("[health]\nrebuild_interval_ms = -1\n", 2, "health.rebuild_interval_ms", "out of range");
  ExpectRefused("[health]\nflap_window_s = 0\n", 2, "health.flap_window_s", "out of range");
  ExpectRefused("[health]\nflap_window_s = 3601\n", 2, "health.flap_window_s", "out of range");
  ExpectRefused("[health]\nflap_max_transitions = 0\n", 2, "health.flap_max_transitions",
                "out of range");
  ExpectRefused("[health]\nflap_max_transitions = 1001\n", 2, "health.flap_max_transitions",
                "out of range");
  ExpectRefused("[health]\nhold_down_s = 86401\n", 2, "health.hold_down_s", "out of range");
  ExpectRefused("[health]\nslow_start_steps = 0\n", 2, "health.slow_start_steps", "out of range");
  ExpectRefused("[health]\nslow_start_steps = 21\n", 2, "health.slow_start_steps", "out of range");
  ExpectRefused("[health]\nhold_down_s = 9223372036854775807\n", 2, "health.hold_down_s",
                "out of range");
  ExpectRefused("[health]\nhold_down_s = \"30\"\n", 2, "health.hold_down_s", "must be an integer");
  ExpectRefused("[health]\nhold_down_s = 1.5\n", 2, "health.hold_down_s", "must be an integer");
  ExpectRefused("[health]\nhold_down = 30\n", 2, "health.hold_down",
                "unknown key (did you mean \"hold_down_s\"?)");
  ExpectRefused("health = 3\n", 1, "health", "must be a table ([health])");
  ExpectRefused("[helth]\n", 1, "helth", "unknown key (did you mean \"health\"?)");
}

constexpr char kLbV4[] = "[lb]\nipv4 = \"192.0.2.10\"\n";

TEST(ConfigKernelTest, DefaultsAndEveryKey) {
  absl::StatusOr<Config> d = ParseConfig("", "test.toml");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->kernel.enabled());
  EXPECT_EQ(d->kernel, KernelConfig{});
  absl::StatusOr<Config> on = ParseConfig(std::string(kLbV4) + "[kernel]\ninterface = \"maglb0\"\n",
                                          "test.toml");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->kernel.enabled());
  EXPECT_EQ(on->kernel.interface, "maglb0");
  EXPECT_EQ(on->kernel.ipv4_prefix_len, 24);
  EXPECT_EQ(on->kernel.ipv6_prefix_len, 64);
  EXPECT_EQ(on->kernel.rate, kDefaultKernelRate);
  EXPECT_EQ(on->kernel.burst, kDefaultKernelBurst);
  EXPECT_EQ(on->kernel.line, 3);
  absl::StatusOr<Config> c = ParseConfig(R"([lb]
ipv6 = "2001:db8::10"
[kernel]
interface = "abcdefghijklmno"
ipv4_prefix_len = 32
ipv6_prefix_len = 128
rate = 10000000
burst = 1000000
)", "test.toml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->kernel.interface, "abcdefghijklmno");
  EXPECT_EQ(c->kernel.ipv4_prefix_len, 32);
  EXPECT_EQ(c->kernel.ipv6_prefix_len, 128);
  EXPECT_EQ(c->kernel.rate, 10000000u);
  EXPECT_EQ(c->kernel.burst, 1000000u);
  absl::StatusOr<Config> low = ParseConfig(
      std::string(kLbV4) + "[kernel]\ninterface = \"a\"\nipv4_prefix_len = 0\nipv6_prefix_len = 0\n"
      "rate = 0\nburst = 1\n", "test.toml");
  ASSERT_TRUE(low.ok()) << low.status();
  EXPECT_EQ(low->kernel.rate, 0u);
  // Without an interface, [kernel] is off; its other keys are still checked.
  absl::StatusOr<Config> off = ParseConfig("[kernel]\nrate = 5\n", "test.toml");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->kernel.enabled());
  ExpectRefused("[kernel]\nrate = 10000001\n", 2, "kernel.rate", "out of range");
}

TEST(ConfigKernelTest, RefusesBadInterfaceNames) {
  const std::string lb(kLbV4);
  auto refused = [&](const std::string& value, const std::string& needle) {
    ExpectRefused(lb + "[kernel]\ninterface = " + value + "\n", 4, "kernel.interface", needle);
  };
  refused("\"\"", "must not be empty");
  refused("\"abcdefghijklmnop\"", "is 16 bytes long: Linux interface names have at most 15");
  refused("\".\"", "not a valid interface name");
  refused("\"..\"", "not a valid interface name");
  refused("\"a/b\"", "printable ASCII without spaces, '/' or ':'");
  refused("\"a:b\"", "printable ASCII without spaces, '/' or ':'");
  refused("\"a b\"", "printable ASCII");
  refused("\"a\\tb\"", "printable ASCII");
  refused("\"a\\nb\"", "printable ASCII");
  refused("\"a\\u0000b\"", "printable ASCII");
  refused("\"\\u00e9t\"", "printable ASCII");
  refused("3", "must be a string");
  refused("[\"maglb0\"]", "must be a string");
  ExpectRefused(lb + "[kernel]\ninterfce = \"m\"\n", 4, "kernel.interfce",
                "unknown key (did you mean \"interface\"?)");
  ExpectRefused("kernel = \"maglb0\"\n" + lb, 1, "kernel", "must be a table ([kernel])");
}

TEST(ConfigKernelTest, RefusesOutOfRange) {
  const std::string k = std::string(kLbV4) + "[kernel]\ninterface = \"maglb0\"\n";
  ExpectRefused(k + "ipv4_prefix_len = 33\n", 5, "kernel.ipv4_prefix_len",
                "33 is out of range: must be from 0 to 32");
  ExpectRefused(k + "ipv4_prefix_len = -1\n", 5, "kernel.ipv4_prefix_len", "out of range");
  ExpectRefused(k + "ipv6_prefix_len = 129\n", 5, "kernel.ipv6_prefix_len", "out of range");
  // 256 would wrap to 0 in a uint8_t if the range were not checked first.
  ExpectRefused(k + "ipv6_prefix_len = 256\n", 5, "kernel.ipv6_prefix_len", "out of range");
  ExpectRefused(k + "rate = -5\n", 5, "kernel.rate", "out of range");
  ExpectRefused(k + "rate = 99999999999999\n", 5, "kernel.rate", "out of range");
  ExpectRefused(k + "burst = 0\n", 5, "kernel.burst", "out of range");
  ExpectRefused(k + "burst = 1000001\n", 5, "kernel.burst", "out of range");
  ExpectRefused(k + "burst = true\n", 5, "kernel.burst", "must be an integer");
}

TEST(ConfigKernelTest, AnInterfaceNeedsAnLbAddress) {
  ExpectRefused("[kernel]\ninterface = \"maglb0\"\n", 2, "kernel.interface",
                "[lb] sets neither ipv4 nor ipv6");
  ExpectRefused("[lb]\nhash_seed = 1\n[kernel]\ninterface = \"maglb0\"\n", 4, "kernel.interface",
                "neither ipv4 nor ipv6");
  // Either family will do; [kernel] may come before [lb] in the file.
  EXPECT_TRUE(ParseConfig("[kernel]\ninterface = \"maglb0\"\n[lb]\nipv6 = \"2001:db8::10\"\n",
                          "test.toml").ok());
}

}  // namespace
}  // namespace maglb

namespace maglb {
namespace {

// Issue 10: [[health_check]] and a VIP's health keys. kChecked is 5 lines:
// the LB addresses and the kernel interface every check needs.
constexpr char kChecked[] = R"([lb]
ipv4 = "192.0.2.10"
ipv6 = "2001:db8::10"
[kernel]
interface = "maglb0"
)";

// A tcp VIP on port 80 with two IPv4 backends, `keys` on its lines 4.. (the
// [[vip]] header is on its line 1); backends after them.
std::string Vip(const std::string& keys, const std::string& name = "web",
                const std::string& address = "198.51.100.80") {
  return "[[vip]]\nname = \"" + name + "\"\naddress = \"" + address + "\"\n" + keys +
         "  [[vip.backend]]\n  name = \"a\"\n  address = \"10.1.0.1\"\n"
         "  [[vip.backend]]\n  name = \"b\"\n  address = \"10.1.0.2\"\n";
}

absl::StatusOr<Config> Parse(const std::string& text) { return ParseConfig(text, "test.toml"); }

TEST(ConfigHealthCheckTest, ATunnelCheckProbesTheVipsOwnServiceOnly) {
  // Another port, or the other protocol, through the tunnel would be no
  // traffic of this VIP: refused, naming the way out (via = "direct").
  for (const char* keys : {"type = \"http\"\nvia = \"tunnel\"\nport = 8080\n",
                           "type = \"udp\"\nvia = \"tunnel\"\nport = 80\n"}) {
    absl::StatusOr<Config> c = Parse(std::string(kChecked) + "[[health_check]]\nname = \"t\"\n" + keys +
                                     Vip("port = 80\nhealth_check = \"t\"\n"));
    ASSERT_FALSE(c.ok()) << keys;
    EXPECT_NE(c.status().message().find("via = \"direct\""), std::string::npos) << c.status();
  }
  absl::StatusOr<Config> ok = Parse(std::string(kChecked) + "[[health_check]]\nname = \"t\"\ntype = \"http\"\n"
                                    "via = \"tunnel\"\nport = 80\n" + Vip("port = 80\nhealth_check = \"t\"\n"));
  EXPECT_TRUE(ok.ok()) << ok.status();
}

TEST(ConfigHealthCheckTest, ATimeoutMustEndBeforeAJitteredIntervalDoes) {
  absl::StatusOr<Config> c = Parse(std::string(kChecked) +
                                   "[[health_check]]\nname = \"t\"\ntype = \"tcp\"\ninterval_ms = 2000\n"
                                   "timeout_ms = 1500\njitter_percent = 50\n" + Vip("port = 80\nhealth_check = \"t\"\n"));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("timeout_ms (1500) must be less than the shortest interval"), std::string::npos) << c.status();
  EXPECT_NE(c.status().message().find("1000 ms"), std::string::npos);
}

TEST(ConfigHealthCheckTest, NamedCheckWithEveryKeyIsCopiedIntoEachVip) {
  const std::string text = std::string(kChecked) + R"([[health_check]]
name = "web-http"
type = "http"
via = "direct"
port = 8080
interval_ms = 500
timeout_ms = 249
rise = 100
fall = 1
jitter_percent = 50
http_path = "/healthz?full=1&x=%20"
http_status = 204
http_body_contains = "ok: ready ünïcode"
http_host = "www.example.com:8080"
[[health_check]]
name = "plain"
type = "tcp"
)" + Vip("port = 80\nhealth_check = \"web-http\"\n") +
                           Vip("port = 443\nhealth_check = \"web-http\"\n", "web2") +
                           Vip("port = 22\nhealth_check = \"plain\"\n", "ssh");
  absl::StatusOr<Config> c = Parse(text);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->health_checks.size(), 2u);
  const HealthCheckConfig& h = c->health_checks[0];
  EXPECT_EQ(h.name, "web-http");
  EXPECT_EQ(h.type, HealthCheckType::kHttp);
  EXPECT_EQ(h.via, HealthCheckVia::kDirect);
  EXPECT_EQ(h.port, 8080);
  EXPECT_EQ(h.interval_ms, 500u);
  EXPECT_EQ(h.timeout_ms, 249u);
  EXPECT_EQ(h.rise, 100u);
  EXPECT_EQ(h.fall, 1u);
  EXPECT_EQ(h.jitter_percent, 50u);
  EXPECT_EQ(h.http_path, "/healthz?full=1&x=%20");
  EXPECT_EQ(h.http_status, 204);
  EXPECT_EQ(h.http_body_contains, "ok: ready ünïcode");
  EXPECT_EQ(h.http_host, "www.example.com:8080");
  EXPECT_EQ(h.line, 6);
  ASSERT_EQ(c->vips.size(), 3u);
  ASSERT_TRUE(c->vips[0].health_check.has_value());
  EXPECT_EQ(*c->vips[0].health_check, h);  // a full copy, name and line kept
  EXPECT_EQ(*c->vips[1].health_check, h);
  // Defaults of every key a check leaves out.
  const HealthCheckConfig& p = *c->vips[2].health_check;
  EXPECT_EQ(p.name, "plain");
  EXPECT_EQ(p.type, HealthCheckType::kTcp);
  EXPECT_EQ(p.via, HealthCheckVia::kDirect);
  EXPECT_EQ(p.port, 0);
  EXPECT_EQ(p.interval_ms, kDefaultCheckIntervalMs);
  EXPECT_EQ(p.timeout_ms, kDefaultCheckTimeoutMs);
  EXPECT_EQ(p.rise, kDefaultCheckRise);
  EXPECT_EQ(p.fall, kDefaultCheckFall);
  EXPECT_EQ(p.jitter_percent, kDefaultCheckJitterPercent);
  EXPECT_EQ(p.http_path, "/");
  EXPECT_EQ(p.http_status, kDefaultHttpStatus);
  EXPECT_EQ(p.http_body_contains, "");
  EXPECT_EQ(p.http_host, "");
  EXPECT_EQ(p.udp_payload, "maglb-health");
  EXPECT_FALSE(p.udp_expect.has_value());
  EXPECT_EQ(p.line, 20);
}

TEST(ConfigHealthCheckTest, InlineChecksAsATableOrAnInlineTable) {
  const std::string text = std::string(kChecked) +
                           Vip("port = 80\n[vip.health_check]\ntype = \"tcp\"\nrise = 5\n") +
                           Vip("port = 81\nhealth_check = { type = \"http\", http_path = \"/up\" }\n",
                               "web2");
  absl::StatusOr<Config> c = Parse(text);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->health_checks.empty());
  ASSERT_TRUE(c->vips[0].health_check.has_value());
  EXPECT_EQ(c->vips[0].health_check->name, "");
  EXPECT_EQ(c->vips[0].health_check->type, HealthCheckType::kTcp);
  EXPECT_EQ(c->vips[0].health_check->rise, 5u);
  EXPECT_EQ(c->vips[0].health_check->line, 10);
  // The [vip.health_check] table belongs to its VIP; its backends still count.
  EXPECT_EQ(c->vips[0].backends.size(), 2u);
  ASSERT_TRUE(c->vips[1].health_check.has_value());
  EXPECT_EQ(c->vips[1].health_check->type, HealthCheckType::kHttp);
  EXPECT_EQ(c->vips[1].health_check->http_path, "/up");
  EXPECT_EQ(c->vips[1].health_check->line, 23);
  // No check: nothing set, and the VIP's other health keys have defaults.
  absl::StatusOr<Config> none = Parse(kMinimal);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->vips[0].health_check.has_value());
  EXPECT_EQ(none->vips[0].slow_start_s, kDefaultSlowStartS);
  EXPECT_EQ(none->vips[0].all_down, AllDownPolicy::kKeepLast);
  EXPECT_EQ(none->vips[0].down_flows, DownFlows::kPin);
}

TEST(ConfigHealthCheckTest, UdpChecksTakeAnyBytesWithinTheCap) {
  const std::string max(kMaxUdpProbePayloadBytes, 'x');
  absl::StatusOr<Config> c = Parse(
      std::string(kChecked) +
      Vip("protocol = \"udp\"\nport = 53\nhealth_check = { type = \"udp\", udp_payload = "
          "\"\\u0000\\u0001q\\r\\n\", udp_expect = \"" + max + "\" }\n") +
      Vip("protocol = \"udp\"\nport = 54\nhealth_check = { type = \"udp\", udp_payload = \"\" }\n",
          "empty"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->vips[0].health_check->udp_payload, std::string("\0\1q\r\n", 5));
  EXPECT_EQ(c->vips[0].health_check->udp_expect, max);
  // A zero-length datagram is a probe some services answer.
  EXPECT_EQ(c->vips[1].health_check->udp_payload, "");
  EXPECT_FALSE(c->vips[1].health_check->udp_expect.has_value());
}

TEST(ConfigHealthCheckTest, TypeNoneLeavesTheVipUnchecked) {
  // Nor does it need a kernel interface: nothing is probed.
  absl::StatusOr<Config> c = Parse("[[health_check]]\nname = \"off\"\ntype = \"none\"\n" +
                                   Vip("port = 0\nhealth_check = \"off\"\n") +
                                   Vip("port = 0\nhealth_check = { type = \"none\" }\n", "w2",
                                       "198.51.100.81"));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->health_checks.size(), 1u);
  EXPECT_EQ(c->health_checks[0].type, HealthCheckType::kNone);
  EXPECT_FALSE(c->vips[0].health_check.has_value());
  EXPECT_FALSE(c->vips[1].health_check.has_value());
  // A named check nobody uses needs no kernel interface either.
  EXPECT_TRUE(Parse("[[health_check]]\nname = \"t\"\ntype = \"tcp\"\n").ok());
}

TEST(ConfigHealthCheckTest, VipHealthKeys) {
  absl::StatusOr<Config> c = Parse(
      Vip("port = 80\nslow_start_s = 3600\nall_down = \"drop\"\ndown_flows = \"move\"\n") +
      Vip("port = 81\nalgorithm = \"jump\"\nslow_start_s = 0\nall_down = \"keep_last\"\n"
          "down_flows = \"pin\"\n", "j"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->vips[0].slow_start_s, 3600u);
  EXPECT_EQ(c->vips[0].all_down, AllDownPolicy::kDrop);
  EXPECT_EQ(c->vips[0].down_flows, DownFlows::kMove);
  EXPECT_EQ(c->vips[1].all_down, AllDownPolicy::kKeepLast);
  EXPECT_EQ(c->vips[1].down_flows, DownFlows::kPin);
  ExpectRefused(Vip("slow_start_s = 3601\n"), 4, "vip[\"web\"].slow_start_s",
                "3601 is out of range: must be from 0 to 3600");
  ExpectRefused(Vip("slow_start_s = -1\n"), 4, "vip[\"web\"].slow_start_s", "out of range");
  ExpectRefused(Vip("slow_start_s = \"10\"\n"), 4, "vip[\"web\"].slow_start_s", "must be an integer");
  ExpectRefused(Vip("algorithm = \"jump\"\nslow_start_s = 10\n"), 5, "vip[\"web\"].slow_start_s",
                "\"jump\" has no weights");
  ExpectRefused(Vip("all_down = \"open\"\n"), 4, "vip[\"web\"].all_down",
                "\"open\" is not one of: keep_last, drop");
  ExpectRefused(Vip("all_down = true\n"), 4, "vip[\"web\"].all_down", "must be a string");
  ExpectRefused(Vip("down_flows = \"Move\"\n"), 4, "vip[\"web\"].down_flows",
                "\"Move\" is not one of: pin, move");
  ExpectRefused(Vip("slowstart_s = 10\n"), 4, "vip[\"web\"].slowstart_s",
                "unknown key (did you mean \"slow_start_s\"?)");
}

// A check written inline in a port-80 tcp VIP: `keys` start on line 8.
std::string InlineCheck(const std::string& keys) {
  return std::string(kChecked) + Vip("port = 80\n[vip.health_check]\n" + keys);
}
void ExpectCheckRefused(const std::string& keys, int line, const std::string& key,
                        const std::string& needle) {
  ExpectRefused(InlineCheck(keys), line, "vip[\"web\"].health_check" + key, needle);
}

TEST(ConfigHealthCheckTest, RefusesBadCheckKeys) {
  ExpectCheckRefused("rise = 2\n", 10, ".type", "required key is missing (one of: none, tcp, http, udp)");
  ExpectCheckRefused("type = \"tpc\"\n", 11, ".type", "\"tpc\" is not one of: none, tcp, http, udp");
  ExpectCheckRefused("type = \"\"\n", 11, ".type", "\"\" is not one of");
  ExpectCheckRefused("type = 1\n", 11, ".type", "must be a string");
  ExpectCheckRefused("type = \"tcp\"\nvia = \"kernel\"\n", 12, ".via", "is not one of: direct, tunnel");
  ExpectCheckRefused("type = \"tcp\"\nport = 65536\n", 12, ".port", "out of range");
  ExpectCheckRefused("type = \"tcp\"\nport = -80\n", 12, ".port", "out of range");
  ExpectCheckRefused("type = \"tcp\"\ninterval_ms = 99\n", 12, ".interval_ms",
                     "99 is out of range: must be from 100 to 3600000");
  ExpectCheckRefused("type = \"tcp\"\ninterval_ms = 3600001\n", 12, ".interval_ms", "out of range");
  ExpectCheckRefused("type = \"tcp\"\ninterval_ms = 9223372036854775807\n", 12, ".interval_ms",
                     "out of range");
  ExpectCheckRefused("type = \"tcp\"\ninterval_ms = 2000.0\n", 12, ".interval_ms", "must be an integer");
  ExpectCheckRefused("type = \"tcp\"\ntimeout_ms = 9\n", 12, ".timeout_ms", "out of range");
  ExpectCheckRefused("type = \"tcp\"\ninterval_ms = 1000\ntimeout_ms = 1000\n", 13, ".timeout_ms",
                     "timeout_ms (1000) must be less than interval_ms (1000)");
  // With the default timeout (1000 ms), a shorter interval is what is wrong.
  ExpectCheckRefused("type = \"tcp\"\ninterval_ms = 500\n", 12, ".interval_ms",
                     "timeout_ms (1000, the default) must be less than interval_ms (500)");
  ExpectCheckRefused("type = \"tcp\"\nrise = 0\n", 12, ".rise", "out of range");
  ExpectCheckRefused("type = \"tcp\"\nrise = 101\n", 12, ".rise", "out of range");
  ExpectCheckRefused("type = \"tcp\"\nfall = 0\n", 12, ".fall", "out of range");
  ExpectCheckRefused("type = \"tcp\"\nfall = 101\n", 12, ".fall", "out of range");
  ExpectCheckRefused("type = \"tcp\"\njitter_percent = 51\n", 12, ".jitter_percent", "out of range");
  ExpectCheckRefused("type = \"http\"\nhttp_status = 99\n", 12, ".http_status", "out of range");
  ExpectCheckRefused("type = \"http\"\nhttp_status = 600\n", 12, ".http_status", "out of range");
  ExpectCheckRefused("type = \"tcp\"\nintervall_ms = 500\n", 12, ".intervall_ms",
                     "unknown key (did you mean \"interval_ms\"?)");
  ExpectCheckRefused("type = \"tcp\"\nname = \"x\"\n", 12, ".name",
                     "a VIP's own check has no name; to share one check among VIPs, declare it as a "
                     "[[health_check]]");
}

TEST(ConfigHealthCheckTest, RefusesHostileHttpStrings) {
  auto path = [](const std::string& v, const std::string& needle) {
    ExpectCheckRefused("type = \"http\"\nhttp_path = " + v + "\n", 12, ".http_path", needle);
  };
  // Header injection: a CR LF in the path would end the request line.
  path("\"/x HTTP/1.1\\r\\nHost: evil\\r\\n\\r\\n\"", "printable ASCII without spaces");
  path("\"/a\\nb\"", "printable ASCII without spaces");
  path("\"/a b\"", "printable ASCII without spaces");
  path("\"/a\\tb\"", "printable ASCII without spaces");
  path("\"/a\\u0000\"", "printable ASCII without spaces");
  path("\"/a\\u007f\"", "printable ASCII without spaces");
  path("\"/caf\\u00e9\"", "printable ASCII without spaces");
  path("\"\"", "must start with '/'");
  path("\"healthz\"", "must start with '/'");
  path("\"http://x/\"", "must start with '/'");
  path("\"/" + std::string(kMaxHttpProbeReplyBytes, 'a') + "\"", "bytes long: at most 1024");
  path("[\"/a\"]", "must be a string");
  // 1024 bytes is the most.
  ASSERT_TRUE(Parse(InlineCheck("type = \"http\"\nhttp_path = \"/" + std::string(1023, 'a') + "\"\n")).ok());

  auto host = [](const std::string& v, const std::string& needle) {
    ExpectCheckRefused("type = \"http\"\nhttp_host = " + v + "\n", 12, ".http_host", needle);
  };
  host("\"a\\r\\nX-Evil: 1\"", "must be a host name");
  host("\"a b\"", "must be a host name");
  host("\"a/b\"", "must be a host name");
  host("\"\"", "must not be empty");
  host("\"" + std::string(256, 'a') + "\"", "is 256 bytes long: at most 255");
  ASSERT_TRUE(Parse(InlineCheck("type = \"http\"\nhttp_host = \"[2001:db8::1]:80\"\n")).ok());

  auto body = [](const std::string& v, const std::string& needle) {
    ExpectCheckRefused("type = \"http\"\nhttp_body_contains = " + v + "\n", 12,
                       ".http_body_contains", needle);
  };
  body("\"ok\\r\\n\"", "must not hold control characters");
  body("\"\\u0000\"", "must not hold control characters");
  body("\"\"", "must not be empty");
  body("\"" + std::string(1025, 'a') + "\"", "is 1025 bytes long: at most 1024");
  body("7", "must be a string");
}

TEST(ConfigHealthCheckTest, RefusesUdpPayloadsOverTheCap) {
  const std::string over(kMaxUdpProbePayloadBytes + 1, 'x');
  auto udp = [](const std::string& keys) {
    return std::string(kChecked) +
           Vip("protocol = \"udp\"\nport = 53\n[vip.health_check]\ntype = \"udp\"\n" + keys);
  };
  ExpectRefused(udp("udp_payload = \"" + over + "\"\n"), 13, "vip[\"web\"].health_check.udp_payload",
                "is 1025 bytes long: at most 1024");
  ExpectRefused(udp("udp_expect = \"" + over + "\"\n"), 13, "vip[\"web\"].health_check.udp_expect",
                "at most 1024");
  ExpectRefused(udp("udp_expect = \"\"\n"), 13, "vip[\"web\"].health_check.udp_expect",
                "must not be empty (leave it out to take any reply)");
  ExpectRefused(udp("udp_expect = 1\n"), 13, "vip[\"web\"].health_check.udp_expect", "must be a string");
  ExpectRefused(udp("udp_payload = 1\n"), 13, "vip[\"web\"].health_check.udp_payload",
                "must be a string");
}

TEST(ConfigHealthCheckTest, RefusesKeysOfAnotherType) {
  // A typo of type must not make them silently check nothing.
  ExpectCheckRefused("type = \"tcp\"\nhttp_path = \"/x\"\n", 12, ".http_path",
                     "is for type = \"http\" checks, and this one is type = \"tcp\"");
  ExpectCheckRefused("type = \"tcp\"\nhttp_status = 200\n", 12, ".http_status", "type = \"http\"");
  ExpectCheckRefused("type = \"udp\"\nport = 53\nhttp_body_contains = \"ok\"\n", 13,
                     ".http_body_contains", "this one is type = \"udp\"");
  ExpectCheckRefused("type = \"none\"\nhttp_host = \"x\"\n", 12, ".http_host",
                     "this one is type = \"none\"");
  ExpectCheckRefused("type = \"http\"\nudp_payload = \"x\"\n", 12, ".udp_payload",
                     "is for type = \"udp\" checks, and this one is type = \"http\"");
  ExpectCheckRefused("type = \"tcp\"\nudp_expect = \"x\"\n", 12, ".udp_expect", "type = \"udp\"");
  ExpectRefused("[[health_check]]\nname = \"c\"\ntype = \"tcp\"\nhttp_path = \"/\"\n", 4,
                "health_check[\"c\"].http_path", "this one is type = \"tcp\"");
}

TEST(ConfigHealthCheckTest, RefusesBadNamedChecks) {
  ExpectRefused("[[health_check]]\ntype = \"tcp\"\n", 1, "health_check[0].name",
                "required key is missing");
  ExpectRefused("[[health_check]]\nname = \"\"\ntype = \"tcp\"\n", 2, "health_check[0].name",
                "must not be empty");
  ExpectRefused("[[health_check]]\nname = \"a b\"\ntype = \"tcp\"\n", 2, "health_check[0].name",
                "printable ASCII without spaces");
  ExpectRefused("[[health_check]]\nname = \"a\\r\\nb\"\ntype = \"tcp\"\n", 2, "health_check[0].name",
                "printable ASCII without spaces");
  ExpectRefused("[[health_check]]\nname = \"" + std::string(65, 'c') + "\"\ntype = \"tcp\"\n", 2,
                "health_check[0].name", "at most 64");
  ExpectRefused("[[health_check]]\nname = \"c\"\n", 1, "health_check[\"c\"].type",
                "required key is missing");
  ExpectRefused("[[health_check]]\nname = \"c\"\ntype = \"tcp\"\n[[health_check]]\nname = \"c\"\n"
                "type = \"http\"\n", 4, "health_check[\"c\"].name",
                "duplicate check name (first declared at line 1)");
  ExpectRefused("[health_check]\nname = \"c\"\n", 1, "health_check",
                "must be an array of tables ([[health_check]])");
  ExpectRefused("health_check = \"c\"\n", 1, "health_check",
                "must be an array of tables ([[health_check]])");
  ExpectRefused("[[healthcheck]]\nname = \"c\"\n", 1, "healthcheck",
                "unknown key (did you mean \"health_check\"?)");
}

TEST(ConfigHealthCheckTest, RefusesAnUnknownCheckNameWithASuggestion) {
  const std::string checks = std::string(kChecked) +
                             "[[health_check]]\nname = \"web-http\"\ntype = \"http\"\n"
                             "[[health_check]]\nname = \"dns-udp\"\ntype = \"udp\"\n";
  ExpectRefused(checks + Vip("port = 80\nhealth_check = \"web-htp\"\n"), 16,
                "vip[\"web\"].health_check",
                "no [[health_check]] is named \"web-htp\" (did you mean \"web-http\"?)");
  ExpectRefused(checks + Vip("port = 80\nhealth_check = \"something\"\n"), 16,
                "vip[\"web\"].health_check", "no [[health_check]] is named \"something\"");
  ExpectRefused(std::string(kChecked) + Vip("port = 80\nhealth_check = \"web\"\n"), 10,
                "vip[\"web\"].health_check", "(the file declares no [[health_check]])");
  // A name no check could have: no suggestion computed, nothing echoed.
  const std::string huge(1 << 20, 'x');
  absl::StatusOr<Config> c = Parse(checks + Vip("port = 80\nhealth_check = \"" + huge + "\"\n"));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("is not the name of a [[health_check]]"), std::string::npos)
      << c.status().message().substr(0, 300);
  EXPECT_LT(c.status().message().size(), 500u);
  ExpectRefused(checks + Vip("port = 80\nhealth_check = \"a\\r\\nb\"\n"), 16,
                "vip[\"web\"].health_check", "is not the name of a [[health_check]]");
  ExpectRefused(checks + Vip("port = 80\nhealth_check = 3\n"), 16, "vip[\"web\"].health_check",
                "must be the name of a [[health_check]] (a string) or a table");
  ExpectRefused(checks + Vip("port = 80\nhealth_check = [\"web-http\"]\n"), 16,
                "vip[\"web\"].health_check", "must be the name of a [[health_check]]");
  ExpectRefused(checks + Vip("port = 80\n[[vip.health_check]]\ntype = \"tcp\"\n"), 16,
                "vip[\"web\"].health_check", "must be the name of a [[health_check]]");
}

TEST(ConfigHealthCheckTest, AVipOnEveryPortNeedsTheCheckToSetOne) {
  ExpectRefused(std::string(kChecked) + Vip("port = 0\nhealth_check = { type = \"tcp\" }\n"), 10,
                "vip[\"web\"].health_check",
                "this VIP takes every port (port = 0), so the check has no VIP port to probe: set "
                "health_check.port in this [[vip]]");
  ExpectRefused(std::string(kChecked) + "[[health_check]]\nname = \"t\"\ntype = \"tcp\"\n" +
                    Vip("health_check = \"t\"\n"),
                12, "vip[\"web\"].health_check",
                "set port in [[health_check]] \"t\" (line 6)");
  EXPECT_TRUE(Parse(std::string(kChecked) +
                    Vip("port = 0\nhealth_check = { type = \"tcp\", port = 22 }\n")).ok());
}

TEST(ConfigHealthCheckTest, AProtocolOtherThanTheVipsNeedsItsOwnPort) {
  auto vip = [](const std::string& protocol, const std::string& check) {
    return std::string(kChecked) +
           Vip("protocol = \"" + protocol + "\"\nport = 53\nhealth_check = " + check + "\n");
  };
  ExpectRefused(vip("tcp", "{ type = \"udp\" }"), 11, "vip[\"web\"].health_check",
                "a type = \"udp\" check on a tcp VIP cannot probe the VIP's port (the backends serve it over "
                "tcp): set health_check.port");
  ExpectRefused(vip("udp", "{ type = \"tcp\" }"), 11, "vip[\"web\"].health_check",
                "a type = \"tcp\" check on a udp VIP");
  ExpectRefused(vip("udp", "{ type = \"http\" }"), 11, "vip[\"web\"].health_check",
                "a type = \"http\" check on a udp VIP");
  EXPECT_TRUE(Parse(vip("udp", "{ type = \"tcp\", port = 53 }")).ok());
  EXPECT_TRUE(Parse(vip("tcp", "{ type = \"udp\", port = 53 }")).ok());
  EXPECT_TRUE(Parse(vip("udp", "{ type = \"udp\" }")).ok());
  EXPECT_TRUE(Parse(vip("tcp", "{ type = \"http\" }")).ok());
}

TEST(ConfigHealthCheckTest, EveryCheckNeedsTheKernelInterface) {
  const std::string lb = "[lb]\nipv4 = \"192.0.2.10\"\n";
  for (const char* via : {"direct", "tunnel"}) {
    ExpectRefused(lb + Vip(std::string("port = 80\nhealth_check = { type = \"tcp\", via = \"") + via +
                           "\" }\n"),
                  7, "vip[\"web\"].health_check",
                  "this VIP's health_check needs [kernel] interface: probes (direct or tunnel) go "
                  "out through the kernel interface on the data port");
  }
  ExpectRefused(lb + "[[health_check]]\nname = \"t\"\ntype = \"tcp\"\n" +
                    Vip("port = 80\nhealth_check = \"t\"\n"),
                10, "vip[\"web\"].health_check", "[[health_check]] \"t\" (line 3) needs [kernel] interface");
  // [kernel] without an interface is no kernel interface.
  ExpectRefused(lb + "[kernel]\nrate = 100\n" + Vip("port = 80\nhealth_check = { type = \"tcp\" }\n"),
                9, "vip[\"web\"].health_check", "needs [kernel] interface");
}

TEST(ConfigHealthCheckTest, ProbesNeedAnLbAddressOfTheirFamily) {
  const std::string v4_only = "[lb]\nipv4 = \"192.0.2.10\"\n[kernel]\ninterface = \"maglb0\"\n";
  auto vip6_backends = [](const std::string& via) {
    return "[[vip]]\nname = \"v\"\naddress = \"198.51.100.80\"\nport = 80\nhealth_check = { type = "
           "\"tcp\"" + via + " }\n  [[vip.backend]]\n  name = \"a\"\n  address = \"10.1.0.1\"\n"
           "  [[vip.backend]]\n  name = \"six\"\n  address = \"2001:db8:1::1\"\n";
  };
  // Direct: from the LB's address of each backend's family.
  ExpectRefused(v4_only + vip6_backends(""), 9, "vip[\"v\"].health_check",
                "this VIP's health_check probes backend \"six\" (line 13) from the LB's own IPv6 "
                "address, and [lb] sets no ipv6");
  // Tunnel: the inner packet goes to the VIP, from the LB's address of its family.
  EXPECT_TRUE(Parse(v4_only + vip6_backends(", via = \"tunnel\"")).ok());
  const std::string v6_only = "[lb]\nipv6 = \"2001:db8::10\"\n[kernel]\ninterface = \"maglb0\"\n";
  ExpectRefused(v6_only + vip6_backends(", via = \"tunnel\""), 9,
                "vip[\"v\"].health_check", "probes this IPv4 VIP from the LB's own IPv4 address");
}

TEST(ConfigHealthCheckTest, RefusesMoreThanTheMostChecks) {
  std::string text = kChecked;
  for (uint32_t i = 0; i <= kMaxHealthChecks; ++i) {
    text += "[[health_check]]\nname = \"c" + std::to_string(i) + "\"\ntype = \"tcp\"\n";
  }
  ExpectRefused(text, 6 + 3 * static_cast<int>(kMaxHealthChecks), "health_check[4096]",
                "more than 4096 [[health_check]]");
  text.resize(text.rfind("[[health_check]]"));
  absl::StatusOr<Config> c = Parse(text);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->health_checks.size(), kMaxHealthChecks);
}

}  // namespace
}  // namespace maglb

namespace maglb {
namespace {

// Issue 11: [announce]. kWithKernel is 4 lines; [announce] starts on line 5.
constexpr char kWithKernel[] = "[lb]\nipv4 = \"192.0.2.10\"\n[kernel]\ninterface = \"maglb0\"\n";

std::string Announce(const std::string& keys) {
  return std::string(kWithKernel) + "[announce]\n" + keys;
}

// The example's [announce] is commented out (it runs without a BGP daemon);
// uncommented, it parses as documented.
TEST(ConfigAnnounceTest, TheExamplesSectionUncommented) {
  absl::StatusOr<Config> as_is = LoadConfig("config/example.toml");
  ASSERT_TRUE(as_is.ok()) << as_is.status();
  EXPECT_FALSE(as_is->announce.enabled());
  std::ifstream in("config/example.toml");
  std::stringstream text;
  text << in.rdbuf();
  std::string example = text.str();
  for (const std::string line : {"[announce]", "table = 4242", "route_protocol = 249", "interval_ms = 100",
                                 "stall_ms = 1000", "drain_s = 10"}) {
    const size_t at = example.find("\n# " + line + "\n");
    ASSERT_NE(at, std::string::npos) << "config/example.toml: no \"# " << line << "\" line";
    example.erase(at + 1, 2);
  }
  absl::StatusOr<Config> on = ParseConfig(example, "example.toml");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->announce.enabled());
  AnnounceConfig expected;
  expected.table = 4242;
  expected.line = on->announce.line;
  EXPECT_EQ(on->announce, expected);
}

TEST(ConfigAnnounceTest, OffWithoutTheSection) {
  absl::StatusOr<Config> d = ParseConfig(kWithKernel, "test.toml");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->announce.enabled());
  EXPECT_EQ(d->announce, AnnounceConfig{});
}

TEST(ConfigAnnounceTest, DefaultsAndEveryKey) {
  absl::StatusOr<Config> d = ParseConfig(Announce("table = 4242\n"), "test.toml");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->announce.enabled());
  EXPECT_EQ(d->announce.table, 4242u);
  EXPECT_EQ(d->announce.route_protocol, 249);
  EXPECT_EQ(d->announce.interval_ms, 100u);
  EXPECT_EQ(d->announce.stall_ms, 1000u);
  EXPECT_EQ(d->announce.drain_s, 10u);
  EXPECT_EQ(d->announce.line, 5);
  absl::StatusOr<Config> c = ParseConfig(Announce(R"(table = 4294967295
route_protocol = 255
interval_ms = 10000
stall_ms = 60000
drain_s = 3600
)"), "test.toml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->announce.table, 4294967295u);
  EXPECT_EQ(c->announce.route_protocol, 255);
  EXPECT_EQ(c->announce.interval_ms, 10000u);
  EXPECT_EQ(c->announce.stall_ms, 60000u);
  EXPECT_EQ(c->announce.drain_s, 3600u);
  absl::StatusOr<Config> low = ParseConfig(
      Announce("table = 1\nroute_protocol = 5\ninterval_ms = 10\nstall_ms = 20\ndrain_s = 0\n"),
      "test.toml");
  ASSERT_TRUE(low.ok()) << low.status();
  EXPECT_EQ(low->announce.table, 1u);
  EXPECT_EQ(low->announce.route_protocol, 5);
  EXPECT_EQ(low->announce.stall_ms, 20u);
  EXPECT_EQ(low->announce.drain_s, 0u);
  // The last table below the kernel's and the first above; protocols between
  // the reserved ones.
  for (const char* ok : {"table = 252\n", "table = 256\n", "table = 7\nroute_protocol = 13\n",
                         "table = 7\nroute_protocol = 185\n", "table = 7\nroute_protocol = 199\n"}) {
    EXPECT_TRUE(ParseConfig(Announce(ok), "test.toml").ok()) << ok;
  }
  // [announce] may come before [kernel] in the file.
  EXPECT_TRUE(ParseConfig("[announce]\ntable = 4242\n" + std::string(kWithKernel), "test.toml").ok());
}

TEST(ConfigAnnounceTest, RefusesAMissingOrReservedTable) {
  ExpectRefused(Announce(""), 5, "announce.table", "required key is missing");
  ExpectRefused(Announce("drain_s = 1\n"), 5, "announce.table", "required key is missing");
  ExpectRefused(Announce("table = 0\n"), 6, "announce.table", "0 names no table");
  ExpectRefused(Announce("table = 253\n"), 6, "announce.table", "253 is the kernel's default table");
  ExpectRefused(Announce("table = 254\n"), 6, "announce.table", "254 is the kernel's main table");
  ExpectRefused(Announce("table = 255\n"), 6, "announce.table", "255 is the kernel's local table");
  ExpectRefused(Announce("table = -1\n"), 6, "announce.table",
                "-1 is out of range: must be from 0 to 4294967295");
  // 2^32 would wrap to table 0 in a uint32_t if the range were not checked.
  ExpectRefused(Announce("table = 4294967296\n"), 6, "announce.table", "out of range");
  ExpectRefused(Announce("table = \"4242\"\n"), 6, "announce.table", "must be an integer");
  ExpectRefused(Announce("table = 42.5\n"), 6, "announce.table", "must be an integer");
}

TEST(ConfigAnnounceTest, RefusesReservedRouteProtocols) {
  auto refused = [](int protocol, const std::string& needle) {
    ExpectRefused(Announce("table = 4242\nroute_protocol = " + std::to_string(protocol) + "\n"), 7,
                  "announce.route_protocol", needle);
  };
  for (int p = 0; p <= 4; ++p) refused(p, "0 to 4 belong to the kernel");
  refused(12, "12 is BIRD's");
  refused(11, "FRR's zebra");
  refused(42, "babel");
  refused(186, "186 to 198 are FRR's");
  refused(198, "186 to 198 are FRR's");
  refused(256, "out of range: must be from 0 to 255");
  refused(-1, "out of range");
  ExpectRefused(Announce("table = 4242\nroute_protocol = \"bird\"\n"), 7, "announce.route_protocol",
                "must be an integer");
}

TEST(ConfigAnnounceTest, RefusesOutOfRangeTimes) {
  const std::string a = Announce("table = 4242\n");
  ExpectRefused(a + "interval_ms = 9\n", 7, "announce.interval_ms", "out of range: must be from 10 to 10000");
  ExpectRefused(a + "interval_ms = 10001\n", 7, "announce.interval_ms", "out of range");
  ExpectRefused(a + "stall_ms = 9\n", 7, "announce.stall_ms", "out of range: must be from 10 to 60000");
  ExpectRefused(a + "stall_ms = 60001\n", 7, "announce.stall_ms", "out of range");
  ExpectRefused(a + "drain_s = -1\n", 7, "announce.drain_s", "out of range: must be from 0 to 3600");
  ExpectRefused(a + "drain_s = 3601\n", 7, "announce.drain_s", "out of range");
  ExpectRefused(a + "drain_s = 9223372036854775807\n", 7, "announce.drain_s", "out of range");
  ExpectRefused(a + "drain_s = true\n", 7, "announce.drain_s", "must be an integer");
}

TEST(ConfigAnnounceTest, AStallMustSpanTwoChecks) {
  const std::string a = Announce("table = 4242\n");
  ExpectRefused(a + "stall_ms = 199\n", 7, "announce.stall_ms",
                "stall_ms = 199 is under 2 x interval_ms = 200");
  EXPECT_TRUE(ParseConfig(a + "stall_ms = 200\n", "test.toml").ok());
  // Only interval_ms set: the message points at it.
  ExpectRefused(a + "interval_ms = 501\n", 7, "announce.interval_ms",
                "stall_ms = 1000 is under 2 x interval_ms = 1002");
  ExpectRefused(a + "interval_ms = 100\nstall_ms = 150\n", 8, "announce.stall_ms", "under 2 x interval_ms");
}

TEST(ConfigAnnounceTest, RefusesUnknownKeysAndWrongShapes) {
  ExpectRefused(Announce("tabel = 4242\n"), 6, "announce.tabel", "unknown key (did you mean \"table\"?)");
  ExpectRefused(Announce("table = 4242\nstal_ms = 100\n"), 7, "announce.stal_ms",
                "unknown key (did you mean \"stall_ms\"?)");
  ExpectRefused("announce = 4242\n" + std::string(kWithKernel), 1, "announce",
                "must be a table ([announce])");
  ExpectRefused(std::string(kWithKernel) + "[anounce]\ntable = 4242\n", 5, "anounce",
                "unknown key (did you mean \"announce\"?)");
}

TEST(ConfigAnnounceTest, NeedsTheKernelInterface) {
  ExpectRefused("[announce]\ntable = 4242\n", 1, "announce", "needs [kernel] interface");
  // [kernel] without an interface is no kernel interface.
  ExpectRefused("[kernel]\nrate = 5\n[announce]\ntable = 4242\n", 3, "announce",
                "needs [kernel] interface: the VIP routes go on the kernel interface");
}

}  // namespace
}  // namespace maglb

namespace maglb {
namespace {

// Issue 12: [metrics]. The section starts on line 1, listen is on line 2.
std::string Metrics(const std::string& listen) { return "[metrics]\nlisten = \"" + listen + "\"\n"; }

TEST(ConfigMetricsTest, OffWithoutTheSection) {
  absl::StatusOr<Config> c = ParseConfig("[lb]\n", "test.toml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->metrics.enabled());
  EXPECT_EQ(c->metrics, MetricsConfig{});
}

TEST(ConfigMetricsTest, Ipv4AndIpv6Addresses) {
  absl::StatusOr<Config> c = ParseConfig(Metrics("127.0.0.1:9469"), "test.toml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->metrics.enabled());
  EXPECT_EQ(c->metrics.listen, "127.0.0.1:9469");
  EXPECT_EQ(c->metrics.address.address, IpAddress::V4(127, 0, 0, 1));
  EXPECT_EQ(c->metrics.address.port, 9469);
  EXPECT_EQ(c->metrics.line, 2);
  absl::StatusOr<Config> v6 = ParseConfig(Metrics("[fd00::10]:65535"), "test.toml");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->metrics.address.address, *IpAddress::Parse("fd00::10"));
  EXPECT_EQ(v6->metrics.address.port, 65535);
  // Every address, said so explicitly.
  for (const char* any : {"0.0.0.0:1", "[::]:9469"}) {
    absl::StatusOr<Config> a = ParseConfig(Metrics(any), "test.toml");
    ASSERT_TRUE(a.ok()) << any << ": " << a.status();
  }
}

TEST(ConfigMetricsTest, RefusesWhatIsNotAnExplicitAddressAndPort) {
  ExpectRefused(Metrics(""), 2, "metrics.listen", "must be explicit");
  ExpectRefused(Metrics("*"), 2, "metrics.listen", "must be explicit");
  ExpectRefused(Metrics("*:9469"), 2, "metrics.listen", "must be explicit");
  ExpectRefused(Metrics(":9469"), 2, "metrics.listen", "must be explicit");
  ExpectRefused(Metrics("127.0.0.1"), 2, "metrics.listen", "the port is missing");
  ExpectRefused(Metrics("[::1]"), 2, "metrics.listen", "the port is missing");
  ExpectRefused(Metrics("127.0.0.1:"), 2, "metrics.listen", "is not a port number");
  ExpectRefused(Metrics("127.0.0.1:0"), 2, "metrics.listen", "port 0 is out of range");
  ExpectRefused(Metrics("127.0.0.1:65536"), 2, "metrics.listen", "port 65536 is out of range");
  ExpectRefused(Metrics("127.0.0.1:123456"), 2, "metrics.listen", "is not a port number");
  ExpectRefused(Metrics("127.0.0.1:-1"), 2, "metrics.listen", "is not a port number");
  ExpectRefused(Metrics("127.0.0.1:+80"), 2, "metrics.listen", "is not a port number");
  ExpectRefused(Metrics("127.0.0.1:http"), 2, "metrics.listen", "is not a port number");
  ExpectRefused(Metrics("localhost:9469"), 2, "metrics.listen", "host names are not resolved");
  ExpectRefused(Metrics("metrics.example.com:9469"), 2, "metrics.listen", "not an IPv4 or IPv6 address");
  ExpectRefused(Metrics("::1:9469"), 2, "metrics.listen", "takes brackets");
  ExpectRefused(Metrics("[127.0.0.1]:9469"), 2, "metrics.listen", "brackets are for IPv6");
  ExpectRefused(Metrics("[::1:9469"), 2, "metrics.listen", "no ']'");
  ExpectRefused(Metrics("[::1]9469"), 2, "metrics.listen", "expected ':'");
  ExpectRefused(Metrics("[fe80::1%eth0]:9469"), 2, "metrics.listen", "not an IPv4 or IPv6 address");
  ExpectRefused(Metrics(" 127.0.0.1:9469"), 2, "metrics.listen", "printable ASCII");
  ExpectRefused(Metrics("127.0.0.1\\u0000:9469"), 2, "metrics.listen", "printable ASCII");
  ExpectRefused(Metrics("127.0.0.1:9469\\n"), 2, "metrics.listen", "printable ASCII");
  ExpectRefused("[metrics]\nlisten = 9469\n", 2, "metrics.listen", "must be a string");
  ExpectRefused("[metrics]\n", 1, "metrics.listen", "required key is missing");
  ExpectRefused("[metrics]\nlisen = \"127.0.0.1:9469\"\n", 2, "metrics.lisen",
                "unknown key (did you mean \"listen\"?)");
  ExpectRefused("metrics = \"127.0.0.1:9469\"\n", 1, "metrics", "must be a table");
}

// The example's [metrics] is commented out (off by default); uncommented, it
// parses as documented.
TEST(ConfigMetricsTest, TheExamplesSectionUncommented) {
  absl::StatusOr<Config> as_is = LoadConfig("config/example.toml");
  ASSERT_TRUE(as_is.ok()) << as_is.status();
  EXPECT_FALSE(as_is->metrics.enabled());
  std::ifstream in("config/example.toml");
  std::stringstream text;
  text << in.rdbuf();
  std::string example = text.str();
  for (const std::string line : {"[metrics]", "listen = \"127.0.0.1:9469\""}) {
    const size_t at = example.find("\n# " + line + "\n");
    ASSERT_NE(at, std::string::npos) << "config/example.toml: no \"# " << line << "\" line";
    example.erase(at + 1, 2);
  }
  absl::StatusOr<Config> on = ParseConfig(example, "example.toml");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(on->metrics.listen, "127.0.0.1:9469");
}

}  // namespace
}  // namespace maglb
