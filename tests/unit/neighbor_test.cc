// What the LB learns from ARP replies and neighbour advertisements (the
// policy of NeighborTable::Observe): only answers to its own requests, or
// rate-limited updates of known neighbours; never a group or zero MAC, never
// over a static [[neighbor]] entry; RFC 4861 flags and hop limit. Frames are
// built byte by byte and go through the packet path's Classify, as on the
// control thread.
#include <string>

#include "../../src/control/neighbor.h"
#include "gtest/gtest.h"
#include "maglb/packet.h"
#include "packet_builder.h"

namespace maglb {
namespace {

using testing::Bytes;
using testing::Ip;
using testing::Mac;

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kSecond = 1'000 * kMs;

const MacAddress kLbMac = Mac("02:4d:4c:00:00:0a");
const MacAddress kGwMac = Mac("02:00:00:00:00:01");
const MacAddress kOtherMac = Mac("02:00:00:00:00:99");  // another host on the segment
const MacAddress kThirdMac = Mac("02:00:00:00:00:77");

Bytes ArpReply(const char* sender_ip, const MacAddress& sha, const MacAddress& eth_src) {
  return testing::Frame({.dst = kLbMac, .src = eth_src}, 0x0806,
                        testing::Arp(2, sha, Ip(sender_ip), kLbMac, Ip("10.0.0.10")));
}
Bytes ArpReply(const char* sender_ip, const MacAddress& sha) { return ArpReply(sender_ip, sha, sha); }

struct Na {
  bool solicited = true;
  bool override_flag = true;
  const char* dst = "fd00::10";  // or ff02::1
  uint8_t hop_limit = 255;
  bool tlla = true;
};
// A neighbour advertisement for `target` at `mac`, sent from `eth_src`.
Bytes Advert(const char* target, const MacAddress& mac, const MacAddress& eth_src, Na na = {}) {
  const IpAddress t = Ip(target);
  Bytes body(t.bytes.begin(), t.bytes.end());
  if (na.tlla) {
    body.insert(body.end(), {2, 1});  // target link-layer address, 1 x 8 bytes
    body.insert(body.end(), mac.bytes.begin(), mac.bytes.end());
  }
  const uint32_t flags = (na.solicited ? 0x40u : 0) | (na.override_flag ? 0x20u : 0);
  return testing::Frame6({.src = Ip(target), .dst = Ip(na.dst), .proto = 58, .hop_limit = na.hop_limit},
                         testing::Icmp(136, 0, flags << 24, body), {.dst = kLbMac, .src = eth_src});
}
Bytes Advert(const char* target, const MacAddress& mac, Na na = {}) { return Advert(target, mac, mac, na); }

// The control thread's path: Classify (as the worker did), then read the claim.
std::optional<NeighborClaim> Claim(const Bytes& f, Verdict* verdict = nullptr) {
  VipMatcher no_vips;
  LocalAddresses lb{Ip("10.0.0.10"), Ip("fd00::10")};
  ParsedPacket p;
  Verdict v = Classify(f, no_vips, lb, &p);
  if (verdict != nullptr) *verdict = v;
  if (v.action != Action::kLocalArp && v.action != Action::kLocalNd) return std::nullopt;
  return ReadNeighborClaim(f, p);
}

uint64_t Count(const NeighborTable& t, NeighborIgnore r) { return t.ignored()[static_cast<size_t>(r)]; }

// Observes a frame; expects it to yield a claim.
NeighborOutcome See(NeighborTable& t, const Bytes& f, uint64_t now) {
  std::optional<NeighborClaim> c = Claim(f);
  EXPECT_TRUE(c.has_value());
  return c ? t.Observe(*c, now) : NeighborOutcome{};
}

// A table that wants 10.0.0.1 and fd00::1, has asked for both at `asked`
// and, if `answer`, learned them from answers 1 ms later.
NeighborTable Table(uint64_t asked, bool answer) {
  NeighborTable t;
  t.SetWanted({Ip("10.0.0.1"), Ip("fd00::1")});
  EXPECT_EQ(t.DueRequests(asked).size(), 2u);
  if (answer) {
    EXPECT_TRUE(See(t, ArpReply("10.0.0.1", kGwMac), asked + kMs).changed);
    EXPECT_TRUE(See(t, Advert("fd00::1", kGwMac), asked + kMs).changed);
  }
  return t;
}

TEST(ReadNeighborClaim, ArpReplyAndAdvertisement) {
  std::optional<NeighborClaim> c = Claim(ArpReply("10.0.0.1", kGwMac, kOtherMac));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->address, Ip("10.0.0.1"));
  EXPECT_EQ(c->mac, kGwMac);
  EXPECT_EQ(c->eth_source, kOtherMac);
  EXPECT_FALSE(c->is_nd);
  EXPECT_TRUE(c->override_flag);

  c = Claim(Advert("fd00::1", kGwMac, kOtherMac, {.solicited = false, .override_flag = true, .dst = "ff02::1"}));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->address, Ip("fd00::1"));
  EXPECT_EQ(c->mac, kGwMac);
  EXPECT_EQ(c->eth_source, kOtherMac);
  EXPECT_TRUE(c->is_nd);
  EXPECT_FALSE(c->solicited);
  EXPECT_TRUE(c->override_flag);
  EXPECT_TRUE(c->to_multicast);

  c = Claim(Advert("fd00::1", kGwMac, {.solicited = true, .override_flag = false}));
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->solicited);
  EXPECT_FALSE(c->override_flag);
  EXPECT_FALSE(c->to_multicast);
}

TEST(ReadNeighborClaim, NothingToLearn) {
  // An ARP request (answered by the worker, never learned from).
  Bytes req = testing::Frame({.dst = kLbMac, .src = kGwMac}, 0x0806,
                             testing::Arp(1, kGwMac, Ip("10.0.0.1"), MacAddress{}, Ip("10.0.0.10")));
  EXPECT_FALSE(Claim(req).has_value());
  // An advertisement without a target link-layer address.
  EXPECT_FALSE(Claim(Advert("fd00::1", kGwMac, {.tlla = false})).has_value());
}

// RFC 4861 7.1.1 / 7.1.2: ND messages with hop limit != 255 may come from off
// link; the packet path drops them (drop_bad_nd) before the control thread.
TEST(ReadNeighborClaim, HopLimitOtherThan255IsDropped) {
  for (uint8_t hl : {0, 1, 64, 254}) {
    Verdict v;
    EXPECT_FALSE(Claim(Advert("fd00::1", kGwMac, {.hop_limit = hl}), &v).has_value());
    EXPECT_EQ(v.action, Action::kDrop) << int{hl};
    // Hop limit 0 is refused earlier, by the parser (packet.h, "TTL").
    EXPECT_EQ(v.reason, hl == 0 ? DropReason::kTtlZero : DropReason::kBadNd) << int{hl};
  }
  // A solicitation too (the worker would otherwise answer it).
  const IpAddress lb6 = Ip("fd00::10");
  Bytes ns_body(lb6.bytes.begin(), lb6.bytes.end());
  ns_body.insert(ns_body.end(), {1, 1, 2, 0, 0, 0, 0, 1});
  for (uint8_t hl : {64, 254, 255}) {
    Verdict v;
    Claim(testing::Frame6({.src = Ip("fd00::1"), .dst = Ip("ff02::1:ff00:10"), .proto = 58, .hop_limit = hl},
                          testing::Icmp(135, 0, 0, ns_body), {.dst = kLbMac, .src = kGwMac}),
          &v);
    if (hl == 255) {
      EXPECT_EQ(v.action, Action::kLocalNd);
    } else {
      EXPECT_EQ(v.action, Action::kDrop) << int{hl};
      EXPECT_EQ(v.reason, DropReason::kBadNd) << int{hl};
    }
  }
  EXPECT_TRUE(Claim(Advert("fd00::1", kGwMac, {.hop_limit = 255})).has_value());
}

TEST(NeighborTable, LearnsOnlyWhatItAskedFor) {
  NeighborTable t;
  t.SetWanted({Ip("10.0.0.1"), Ip("fd00::1")});
  // Before any request: not learned.
  NeighborOutcome o = See(t, ArpReply("10.0.0.1", kGwMac), 1);
  EXPECT_FALSE(o.changed);
  EXPECT_EQ(o.ignored, NeighborIgnore::kNotAsked);
  EXPECT_EQ(o.log, "neighbor 10.0.0.1: ignored unsolicited ARP reply from 02:00:00:00:00:01: "
                   "not asked for (neighbor_ignored_not_asked)");
  EXPECT_FALSE(t.Lookup(Ip("10.0.0.1")).has_value());
  EXPECT_EQ(See(t, Advert("fd00::1", kGwMac), 1).ignored, NeighborIgnore::kNotAsked);
  // An address the LB never asks for (not a next hop).
  EXPECT_EQ(See(t, ArpReply("10.0.0.14", kOtherMac), 2).ignored, NeighborIgnore::kNotAsked);
  EXPECT_FALSE(t.Lookup(Ip("10.0.0.14")).has_value());
  EXPECT_EQ(Count(t, NeighborIgnore::kNotAsked), 3u);

  // Asked: the answer is learned.
  const uint64_t asked = 10 * kSecond;
  ASSERT_EQ(t.DueRequests(asked).size(), 2u);
  o = See(t, ArpReply("10.0.0.1", kGwMac), asked + kMs);
  EXPECT_TRUE(o.changed);
  EXPECT_FALSE(o.ignored.has_value());
  EXPECT_EQ(t.Lookup(Ip("10.0.0.1")), kGwMac);
  // An answer later than kNeighborAnswerWindowNs is not one.
  EXPECT_EQ(See(t, Advert("fd00::1", kGwMac), asked + kNeighborAnswerWindowNs).ignored,
            NeighborIgnore::kNotAsked);
  EXPECT_FALSE(t.Lookup(Ip("fd00::1")).has_value());
  ASSERT_EQ(t.DueRequests(asked + kNeighborAnswerWindowNs).size(), 1u);  // asked again
  EXPECT_TRUE(See(t, Advert("fd00::1", kGwMac), asked + kNeighborAnswerWindowNs + kMs).changed);
  EXPECT_EQ(t.resolved(), 2u);
}

// One request, one answer: a second reply with another MAC right after the
// first (a forger racing the gateway) is an unsolicited change, refused
// within kNeighborMinChangeNs of the answer.
TEST(NeighborTable, OneAnswerPerRequest) {
  NeighborTable t = Table(0, /*answer=*/true);
  EXPECT_EQ(See(t, ArpReply("10.0.0.1", kOtherMac), 2 * kMs).ignored, NeighborIgnore::kRateLimited);
  EXPECT_EQ(See(t, Advert("fd00::1", kOtherMac), 2 * kMs).ignored, NeighborIgnore::kRateLimited);
  EXPECT_EQ(t.Lookup(Ip("10.0.0.1")), kGwMac);
  EXPECT_EQ(t.Lookup(Ip("fd00::1")), kGwMac);
  // A repeated answer with the same MAC changes nothing and is not counted.
  NeighborOutcome o = See(t, ArpReply("10.0.0.1", kGwMac), 3 * kMs);
  EXPECT_FALSE(o.changed);
  EXPECT_FALSE(o.ignored.has_value());
}

TEST(NeighborTable, UnsolicitedUpdatesOfKnownNeighboursAreRateLimited) {
  NeighborTable t = Table(0, /*answer=*/true);  // learned at 1 ms
  const uint64_t learned = kMs;
  NeighborOutcome o = See(t, ArpReply("10.0.0.1", kOtherMac), learned + kNeighborMinChangeNs - 1);
  EXPECT_EQ(o.ignored, NeighborIgnore::kRateLimited);
  EXPECT_EQ(o.log, "neighbor 10.0.0.1: ignored unsolicited ARP reply from 02:00:00:00:00:99: its MAC "
                   "was set or confirmed less than 10 s ago (neighbor_ignored_rate_limited)");
  EXPECT_EQ(t.Lookup(Ip("10.0.0.1")), kGwMac);
  // The disputed neighbour is asked again at once (not after kNeighborRefreshNs).
  const uint64_t t1 = learned + kNeighborMinChangeNs - 1;
  std::vector<IpAddress> due = t.DueRequests(t1);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0], Ip("10.0.0.1"));
  // The gateway confirms; that restarts the interval.
  EXPECT_FALSE(See(t, ArpReply("10.0.0.1", kGwMac), t1 + kMs).changed);
  const uint64_t confirmed = t1 + kMs;
  EXPECT_EQ(See(t, ArpReply("10.0.0.1", kOtherMac), confirmed + kNeighborMinChangeNs - 1).ignored,
            NeighborIgnore::kRateLimited);
  // Past the interval one change is taken (a gateway failover announces
  // itself this way) ...
  const uint64_t t2 = confirmed + kNeighborMinChangeNs;
  o = See(t, ArpReply("10.0.0.1", kOtherMac), t2);
  EXPECT_TRUE(o.changed);
  EXPECT_EQ(t.Lookup(Ip("10.0.0.1")), kOtherMac);
  // ... and the next only kNeighborMinChangeNs later, whoever sends it.
  EXPECT_EQ(See(t, ArpReply("10.0.0.1", kThirdMac), t2 + 1).ignored, NeighborIgnore::kRateLimited);
  EXPECT_EQ(See(t, ArpReply("10.0.0.1", kGwMac), t2 + kNeighborMinChangeNs - 1).ignored,
            NeighborIgnore::kRateLimited);
  EXPECT_EQ(t.Lookup(Ip("10.0.0.1")), kOtherMac);
  // The change itself is verified by a request; the answer to it wins.
  due = t.DueRequests(t2 + kNeighborRetryNs);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_TRUE(See(t, ArpReply("10.0.0.1", kGwMac), t2 + kNeighborRetryNs + kMs).changed);
  EXPECT_EQ(t.Lookup(Ip("10.0.0.1")), kGwMac);
  EXPECT_EQ(Count(t, NeighborIgnore::kRateLimited), 4u);
  // Unsolicited claims of the known MAC are harmless and not counted.
  o = See(t, ArpReply("10.0.0.1", kGwMac), t2 + 2 * kNeighborRetryNs);
  EXPECT_FALSE(o.changed);
  EXPECT_FALSE(o.ignored.has_value());
}

TEST(NeighborTable, NeverLearnsGroupOrZeroMacs) {
  const MacAddress bad[] = {Mac("ff:ff:ff:ff:ff:ff"), Mac("01:00:5e:00:00:01"), Mac("33:33:00:00:00:01"),
                            Mac("03:00:00:00:00:01"), Mac("00:00:00:00:00:00")};
  for (const MacAddress& m : bad) {
    // Even as answers to a request, in the advertised MAC or the Ethernet source.
    NeighborTable t = Table(0, /*answer=*/false);
    EXPECT_EQ(See(t, ArpReply("10.0.0.1", m), kMs).ignored, NeighborIgnore::kBadMac) << m.ToString();
    EXPECT_EQ(See(t, ArpReply("10.0.0.1", kGwMac, m), kMs).ignored, NeighborIgnore::kBadMac);
    EXPECT_EQ(See(t, Advert("fd00::1", m), kMs).ignored, NeighborIgnore::kBadMac);
    EXPECT_EQ(See(t, Advert("fd00::1", kGwMac, m), kMs).ignored, NeighborIgnore::kBadMac);
    EXPECT_EQ(t.resolved(), 0u);
    EXPECT_EQ(Count(t, NeighborIgnore::kBadMac), 4u);
    // Nor over a known one, however long ago it was learned.
    NeighborTable k = Table(0, /*answer=*/true);
    EXPECT_EQ(See(k, ArpReply("10.0.0.1", m), 100 * kSecond).ignored, NeighborIgnore::kBadMac);
    EXPECT_EQ(See(k, Advert("fd00::1", m, {.solicited = false}), 100 * kSecond).ignored,
              NeighborIgnore::kBadMac);
    EXPECT_EQ(k.Lookup(Ip("10.0.0.1")), kGwMac);
    EXPECT_EQ(k.Lookup(Ip("fd00::1")), kGwMac);
  }
  NeighborTable t = Table(0, false);
  EXPECT_EQ(See(t, ArpReply("10.0.0.1", Mac("ff:ff:ff:ff:ff:ff"), kOtherMac), kMs).log,
            "neighbor 10.0.0.1: ignored ARP reply from 02:00:00:00:00:99 claiming ff:ff:ff:ff:ff:ff: "
            "multicast, broadcast or zero MAC (neighbor_ignored_bad_mac)");
}

// A frame advertising a MAC other than its own Ethernet source speaks for
// someone else: refused even as an answer.
TEST(NeighborTable, RefusesAMacOtherThanTheEthernetSource) {
  NeighborTable t = Table(0, /*answer=*/false);
  EXPECT_EQ(See(t, ArpReply("10.0.0.1", kOtherMac, kGwMac), kMs).ignored, NeighborIgnore::kMacMismatch);
  EXPECT_EQ(See(t, Advert("fd00::1", kOtherMac, kGwMac), kMs).ignored, NeighborIgnore::kMacMismatch);
  EXPECT_EQ(t.resolved(), 0u);
  // The true answer still gets through.
  EXPECT_TRUE(See(t, ArpReply("10.0.0.1", kGwMac), 2 * kMs).changed);
  EXPECT_EQ(Count(t, NeighborIgnore::kMacMismatch), 2u);
}

TEST(NeighborTable, StaticEntriesAreNeverOverridden) {
  absl::StatusOr<Config> c = ParseConfig(R"(
[lb]
ipv4 = "10.0.0.10"
gateway_v4 = "10.0.0.1"
[[neighbor]]
address = "10.0.0.1"
mac = "02:00:00:00:00:01"
[[vip]]
name = "t"
address = "10.100.0.1"
protocol = "tcp"
port = 80
forwarding = "gre"
  [[vip.backend]]
  name = "a"
  address = "10.0.0.11"
)",
                                         "test.toml");
  ASSERT_TRUE(c.ok()) << c.status();
  NeighborTable t;
  t.SetConfig(*c);
  EXPECT_EQ(t.wanted(), 0u);
  EXPECT_TRUE(t.DueRequests(0).empty());
  for (const MacAddress& m : {kOtherMac, kGwMac}) {
    NeighborOutcome o = See(t, ArpReply("10.0.0.1", m), kMs);
    EXPECT_FALSE(o.changed);
    EXPECT_EQ(o.ignored, NeighborIgnore::kStatic);
  }
  EXPECT_FALSE(t.Lookup(Ip("10.0.0.1")).has_value());  // the static entry answers (LbState)

  // A reload that makes a learned next hop static: from then on claims about it are refused.
  NeighborTable d;
  d.SetWanted({Ip("10.0.0.1")});
  d.DueRequests(0);
  ASSERT_TRUE(See(d, ArpReply("10.0.0.1", kOtherMac), kMs).changed);
  d.SetConfig(*c);
  EXPECT_EQ(See(d, ArpReply("10.0.0.1", kThirdMac), 100 * kSecond).ignored, NeighborIgnore::kStatic);
  EXPECT_FALSE(d.Lookup(Ip("10.0.0.1")).has_value());
}

// RFC 4861 7.2.5, for a host that only needs next hops.
TEST(NeighborTable, AdvertisementFlags) {
  // Asked, unresolved: only an advertisement with S set answers; O does not matter.
  NeighborTable t = Table(0, /*answer=*/false);
  EXPECT_EQ(See(t, Advert("fd00::1", kGwMac, {.solicited = false}), kMs).ignored, NeighborIgnore::kNotAsked);
  EXPECT_TRUE(See(t, Advert("fd00::1", kGwMac, {.solicited = true, .override_flag = false}), kMs).changed);
  EXPECT_EQ(t.Lookup(Ip("fd00::1")), kGwMac);

  // S set on an advertisement to a multicast group is invalid (7.1.2).
  t = Table(0, false);
  EXPECT_EQ(See(t, Advert("fd00::1", kGwMac, {.solicited = true, .dst = "ff02::1"}), kMs).ignored,
            NeighborIgnore::kBadFlags);
  EXPECT_EQ(t.resolved(), 0u);

  // Known: without O a different MAC is never taken, even as an answer, and
  // the neighbour is asked again (the RFC's STALE, then probe).
  t = Table(0, /*answer=*/true);
  const uint64_t late = 20 * kSecond;  // past kNeighborMinChangeNs, before the refresh
  EXPECT_EQ(See(t, Advert("fd00::1", kOtherMac, {.solicited = false, .override_flag = false, .dst = "ff02::1"}),
                late)
                .ignored,
            NeighborIgnore::kNoOverride);
  std::vector<IpAddress> due = t.DueRequests(late);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0], Ip("fd00::1"));
  EXPECT_EQ(See(t, Advert("fd00::1", kOtherMac, {.solicited = true, .override_flag = false}), late + kMs).ignored,
            NeighborIgnore::kNoOverride);
  EXPECT_EQ(t.Lookup(Ip("fd00::1")), kGwMac);
  // With O, an answer replaces it at once ...
  EXPECT_TRUE(See(t, Advert("fd00::1", kOtherMac, {.solicited = true}), late + 2 * kMs).changed);
  EXPECT_EQ(t.Lookup(Ip("fd00::1")), kOtherMac);
  // ... an unsolicited one (S clear, or S set but not asked) only past the interval.
  EXPECT_EQ(See(t, Advert("fd00::1", kGwMac, {.solicited = false, .dst = "ff02::1"}), late + 3 * kMs).ignored,
            NeighborIgnore::kRateLimited);
  EXPECT_EQ(See(t, Advert("fd00::1", kGwMac, {.solicited = true}), late + 4 * kMs).ignored,
            NeighborIgnore::kRateLimited);
  const uint64_t later = late + 2 * kMs + kNeighborMinChangeNs;
  EXPECT_TRUE(See(t, Advert("fd00::1", kGwMac, {.solicited = false, .dst = "ff02::1"}), later).changed);
  EXPECT_EQ(t.Lookup(Ip("fd00::1")), kGwMac);
}

// One line per reason per kNeighborLogIntervalNs, saying how many it skipped;
// every frame counted.
TEST(NeighborTable, LogsAtMostOncePerReasonPerInterval) {
  NeighborTable t = Table(0, false);
  const Bytes bcast = ArpReply("10.0.0.1", Mac("ff:ff:ff:ff:ff:ff"), kOtherMac);
  EXPECT_FALSE(See(t, bcast, 1 * kSecond).log.empty());
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(See(t, bcast, 1 * kSecond + i * kMs).log.empty());
  // Another reason has its own limit.
  EXPECT_FALSE(See(t, ArpReply("10.0.0.1", kOtherMac, kGwMac), 2 * kSecond).log.empty());
  EXPECT_TRUE(See(t, bcast, 1 * kSecond + kNeighborLogIntervalNs - 1).log.empty());
  const std::string line = See(t, bcast, 1 * kSecond + kNeighborLogIntervalNs).log;
  EXPECT_NE(line.find("bad_mac); 6 more since the last line of this kind"), std::string::npos) << line;
  EXPECT_TRUE(See(t, bcast, 1 * kSecond + kNeighborLogIntervalNs + 1).log.empty());
  EXPECT_EQ(Count(t, NeighborIgnore::kBadMac), 9u);
  EXPECT_EQ(Count(t, NeighborIgnore::kMacMismatch), 1u);
  EXPECT_EQ(NeighborIgnoreName(NeighborIgnore::kBadMac), "bad_mac");
}

TEST(NeighborTable, ReloadKeepsWhatItLearnedOfAddressesThatStay) {
  NeighborTable t;
  t.SetWanted({Ip("10.0.0.1")});
  t.DueRequests(0);
  ASSERT_TRUE(See(t, ArpReply("10.0.0.1", kGwMac), kMs).changed);
  t.SetWanted({Ip("10.0.0.1"), Ip("10.0.0.3")});
  EXPECT_EQ(t.Lookup(Ip("10.0.0.1")), kGwMac);
  // Still rate-limited across the reload.
  EXPECT_EQ(See(t, ArpReply("10.0.0.1", kOtherMac), 2 * kMs).ignored, NeighborIgnore::kRateLimited);
  t.SetWanted({Ip("10.0.0.3")});
  EXPECT_FALSE(t.Lookup(Ip("10.0.0.1")).has_value());
  EXPECT_EQ(See(t, ArpReply("10.0.0.1", kGwMac), 3 * kMs).ignored, NeighborIgnore::kNotAsked);
}

}  // namespace
}  // namespace maglb
