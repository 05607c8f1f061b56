// What the LB learns from ARP replies and neighbour advertisements (the
// policy of NeighborTable::Observe): only answers to its own requests; an
// unresolved address takes the first answer unless another MAC answers the
// same request (then none, until one MAC answers a window alone); a known
// neighbour's MAC changes only when two requests' answers agree on the new
// one with no other MAC answering; never a group or zero MAC, never
// over a static [[neighbor]] entry; RFC 4861 flags and hop limit. Frames are
// built byte by byte and go through the packet path's Classify, as on the
// control thread.
#include <string>

#include "control/neighbor.h"
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
  LocalAddresses lb;
  lb.v4 = Ip("10.0.0.10");
  lb.v6 = Ip("fd00::10");
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

// The first answer resolves an address at once; a second host answering the
// same request with another MAC (a forger racing the gateway) is a conflict
// that undoes it: there is nothing older to keep, and either may be the
// forger, so the address is unresolved again (the data plane drops), counted
// and logged with both MACs.
TEST(NeighborTable, TwoMacsAnsweringOneRequestAreAConflict) {
  NeighborTable t = Table(0, /*answer=*/true);
  NeighborOutcome o = See(t, ArpReply("10.0.0.1", kOtherMac), 2 * kMs);
  EXPECT_EQ(o.ignored, NeighborIgnore::kConflict);
  EXPECT_TRUE(o.changed);  // republish: the data plane must stop using kGwMac too
  EXPECT_EQ(o.log, "neighbor 10.0.0.1: ignored ARP reply from 02:00:00:00:00:99: 02:00:00:00:00:01 "
                   "answered the same request; unresolved (dropped) until one MAC alone answers a "
                   "request and the next one (neighbor_ignored_conflict)");
  o = See(t, Advert("fd00::1", kOtherMac), 2 * kMs);
  EXPECT_EQ(o.ignored, NeighborIgnore::kConflict);
  EXPECT_TRUE(o.changed);
  EXPECT_FALSE(t.Lookup(Ip("10.0.0.1")).has_value());
  EXPECT_FALSE(t.Lookup(Ip("fd00::1")).has_value());
  EXPECT_EQ(t.resolved(), 0u);
  // The first MAC answering again changes nothing and is not counted.
  o = See(t, ArpReply("10.0.0.1", kGwMac), 3 * kMs);
  EXPECT_FALSE(o.changed);
  EXPECT_FALSE(o.ignored.has_value());
  EXPECT_EQ(Count(t, NeighborIgnore::kConflict), 2u);
  // Conflicts are logged at most once per interval, saying how many were not.
  o = See(t, ArpReply("10.0.0.1", kThirdMac), 4 * kMs);
  EXPECT_TRUE(o.log.empty());
  EXPECT_FALSE(o.changed);
  EXPECT_EQ(Count(t, NeighborIgnore::kConflict), 3u);
  EXPECT_FALSE(t.Lookup(Ip("10.0.0.1")).has_value());
}

// A known next hop that a forger disputes while the real host answers too:
// every window has two MACs, the known one stays (the review's repro, 2nd part).
TEST(NeighborTable, KnownMacStaysWhileItsOwnerAnswers) {
  NeighborTable t = Table(0, /*answer=*/true);
  const uint64_t t0 = 40 * kSecond;  // a refresh is due
  ASSERT_EQ(t.DueRequests(t0).size(), 2u);
  See(t, Advert("fd00::1", kGwMac), t0 + kMs);
  // The forger answers first: remembered, not taken ...
  NeighborOutcome o = See(t, ArpReply("10.0.0.1", kOtherMac), t0 + kMs);
  EXPECT_EQ(o.ignored, NeighborIgnore::kUnconfirmed);
  EXPECT_FALSE(o.changed);
  EXPECT_EQ(t.Lookup(Ip("10.0.0.1")), kGwMac);
  // ... and the gateway's answer to the same request, even late in the window, is a conflict.
  o = See(t, ArpReply("10.0.0.1", kGwMac), t0 + kNeighborAnswerWindowNs - 1);
  EXPECT_EQ(o.ignored, NeighborIgnore::kConflict);
  EXPECT_NE(o.log.find("02:00:00:00:00:99 answered the same request; kept 02:00:00:00:00:01"),
            std::string::npos)
      << o.log;
  // The next request: the forger alone answers first again; still not taken
  // (its candidate died in the conflict).
  const uint64_t t1 = t0 + kNeighborAnswerWindowNs;
  ASSERT_EQ(t.DueRequests(t1).size(), 1u);
  EXPECT_EQ(See(t, ArpReply("10.0.0.1", kOtherMac), t1 + kMs).ignored, NeighborIgnore::kUnconfirmed);
  EXPECT_EQ(t.Lookup(Ip("10.0.0.1")), kGwMac);
  EXPECT_EQ(Count(t, NeighborIgnore::kConflict), 1u);
}

// A gateway that really changes its MAC (VRRP failover: a gratuitous ARP,
// then the new master alone answers) is followed within about
// kNeighborAnswerWindowNs of the first request; the same over ND.
TEST(NeighborTable, GenuineChangeIsFollowedWithinSeconds) {
  NeighborTable t = Table(0, /*answer=*/true);
  const uint64_t g = 20 * kSecond;
  // The gratuitous ARP / unsolicited advertisement: not taken, but asked about at once.
  NeighborOutcome o = See(t, ArpReply("10.0.0.1", kOtherMac), g);
  EXPECT_EQ(o.ignored, NeighborIgnore::kUnsolicited);
  EXPECT_EQ(o.log, "neighbor 10.0.0.1: ignored unsolicited ARP reply from 02:00:00:00:00:99: differs "
                   "from the known MAC: the LB asks to verify it (neighbor_ignored_unsolicited)");
  EXPECT_EQ(See(t, Advert("fd00::1", kOtherMac, {.solicited = false, .dst = "ff02::1"}), g).ignored,
            NeighborIgnore::kUnsolicited);
  EXPECT_EQ(t.Lookup(Ip("10.0.0.1")), kGwMac);
  EXPECT_EQ(t.Lookup(Ip("fd00::1")), kGwMac);
  uint64_t now = g;
  uint64_t changed_at = 0;
  for (; now < g + 10 * kSecond && changed_at == 0; now += 100 * kMs) {
    for (const IpAddress& a : t.DueRequests(now)) {  // only the new master answers
      if (a.is_v6) {
        See(t, Advert("fd00::1", kOtherMac), now + kMs);
      } else {
        See(t, ArpReply("10.0.0.1", kOtherMac), now + kMs);
      }
    }
    if (t.Lookup(Ip("10.0.0.1")) == kOtherMac && t.Lookup(Ip("fd00::1")) == kOtherMac) changed_at = now;
  }
  ASSERT_NE(changed_at, 0u);
  EXPECT_LE(changed_at - g, kNeighborAnswerWindowNs + 200 * kMs);
  EXPECT_EQ(Count(t, NeighborIgnore::kUnconfirmed), 2u);
  EXPECT_EQ(Count(t, NeighborIgnore::kConflict), 0u);
  // Once taken, the new MAC is the known one: the old one now needs the same proof.
  EXPECT_EQ(See(t, ArpReply("10.0.0.1", kGwMac), now + kNeighborAnswerWindowNs).ignored,
            NeighborIgnore::kUnsolicited);
  EXPECT_EQ(t.Lookup(Ip("10.0.0.1")), kOtherMac);
}

// A forger alone (the real host silent for a whole window) does get its
// candidate taken at the next request (ARP cannot tell it from a failover);
// if the real host answers that request too, the change is undone at once.
TEST(NeighborTable, ChangeUndoneWhenTheOldMacAnswersTheConfirmingRequest) {
  NeighborTable t = Table(0, /*answer=*/true);
  const uint64_t t0 = 40 * kSecond;
  ASSERT_EQ(t.DueRequests(t0).size(), 2u);
  See(t, Advert("fd00::1", kGwMac), t0 + kMs);
  EXPECT_EQ(See(t, ArpReply("10.0.0.1", kOtherMac), t0 + kMs).ignored, NeighborIgnore::kUnconfirmed);
  // The confirming request goes out once the first window has closed, not before.
  EXPECT_TRUE(t.DueRequests(t0 + kNeighborAnswerWindowNs - 1).empty());
  const uint64_t t1 = t0 + kNeighborAnswerWindowNs;
  ASSERT_EQ(t.DueRequests(t1).size(), 1u);
  NeighborOutcome o = See(t, ArpReply("10.0.0.1", kOtherMac), t1 + kMs);
  EXPECT_TRUE(o.changed);
  EXPECT_EQ(t.Lookup(Ip("10.0.0.1")), kOtherMac);
  o = See(t, ArpReply("10.0.0.1", kGwMac), t1 + 2 * kMs);
  EXPECT_TRUE(o.changed);
  EXPECT_EQ(o.ignored, NeighborIgnore::kConflict);
  EXPECT_EQ(t.Lookup(Ip("10.0.0.1")), kGwMac);
  // A candidate that does not answer the next request is forgotten.
  const uint64_t t2 = t1 + kNeighborRefreshNs + kSecond;
  ASSERT_EQ(t.DueRequests(t2).size(), 2u);
  See(t, Advert("fd00::1", kGwMac), t2 + kMs);
  EXPECT_EQ(See(t, ArpReply("10.0.0.1", kThirdMac), t2 + kMs).ignored, NeighborIgnore::kUnconfirmed);
  ASSERT_EQ(t.DueRequests(t2 + kNeighborAnswerWindowNs).size(), 1u);  // nobody answers
  ASSERT_EQ(t.DueRequests(t2 + 2 * kNeighborAnswerWindowNs).size(), 1u);
  EXPECT_EQ(See(t, ArpReply("10.0.0.1", kThirdMac), t2 + 2 * kNeighborAnswerWindowNs + kMs).ignored,
            NeighborIgnore::kUnconfirmed);
  EXPECT_EQ(t.Lookup(Ip("10.0.0.1")), kGwMac);
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
  const uint64_t late = 20 * kSecond;  // before the refresh
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
  // With O, a differing answer is a candidate (taken only if it answers the
  // next request too); an unsolicited one (S clear, or S set but not asked)
  // only makes the LB ask.
  EXPECT_EQ(See(t, Advert("fd00::1", kOtherMac, {.solicited = true}), late + 2 * kMs).ignored,
            NeighborIgnore::kUnconfirmed);
  EXPECT_EQ(See(t, Advert("fd00::1", kThirdMac, {.solicited = false, .dst = "ff02::1"}), late + 3 * kMs).ignored,
            NeighborIgnore::kUnsolicited);
  EXPECT_EQ(See(t, Advert("fd00::1", kThirdMac, {.solicited = true}), late + 4 * kNeighborAnswerWindowNs).ignored,
            NeighborIgnore::kUnsolicited);
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
  // Still verified across the reload (the window of the request before it):
  // a second MAC in it undoes the resolution.
  NeighborOutcome o = See(t, ArpReply("10.0.0.1", kOtherMac), 2 * kMs);
  EXPECT_EQ(o.ignored, NeighborIgnore::kConflict);
  EXPECT_TRUE(o.changed);
  EXPECT_FALSE(t.Lookup(Ip("10.0.0.1")).has_value());
  EXPECT_EQ(See(t, ArpReply("10.0.0.1", kOtherMac), 5 * kSecond).ignored, NeighborIgnore::kNotAsked);
  EXPECT_FALSE(t.Lookup(Ip("10.0.0.1")).has_value());
  t.SetWanted({Ip("10.0.0.3")});
  EXPECT_FALSE(t.Lookup(Ip("10.0.0.1")).has_value());
  EXPECT_EQ(See(t, ArpReply("10.0.0.1", kGwMac), 3 * kMs).ignored, NeighborIgnore::kNotAsked);
}

// What ARP cannot tell apart, pinned down: a forger alone on a next hop whose
// owner is silent (down) for a whole window is taken at the next request,
// like a failover; when the owner answers again, every request is a
// conflict and the MAC the LB holds (the forger's) stays: only an operator
// ([[neighbor]]) can settle that, and the conflict counter and log show it.
// A third MAC answering after a change does not undo it.
TEST(NeighborTable, ForgerAloneAfterTheOwnerWentSilent) {
  NeighborTable t = Table(0, /*answer=*/true);
  const uint64_t t0 = 40 * kSecond;
  ASSERT_EQ(t.DueRequests(t0).size(), 2u);
  See(t, Advert("fd00::1", kGwMac), t0 + kMs);
  EXPECT_EQ(See(t, ArpReply("10.0.0.1", kOtherMac), t0 + kMs).ignored, NeighborIgnore::kUnconfirmed);
  const uint64_t t1 = t0 + kNeighborAnswerWindowNs;
  ASSERT_EQ(t.DueRequests(t1).size(), 1u);
  EXPECT_TRUE(See(t, ArpReply("10.0.0.1", kOtherMac), t1 + kMs).changed);
  NeighborOutcome o = See(t, ArpReply("10.0.0.1", kThirdMac), t1 + 2 * kMs);
  EXPECT_EQ(o.ignored, NeighborIgnore::kConflict);
  EXPECT_FALSE(o.changed);
  EXPECT_EQ(t.Lookup(Ip("10.0.0.1")), kOtherMac);
  // The owner is back and answers the next requests, after the forger.
  uint64_t now = t1 + kNeighborRefreshNs + kSecond;
  for (int i = 0; i < 5; ++i, now += kNeighborAnswerWindowNs) {
    See(t, ArpReply("10.0.0.1", kGwMac), now);  // unsolicited (a gratuitous ARP): the LB asks
    for (const IpAddress& a : t.DueRequests(now)) {
      if (a != Ip("10.0.0.1")) continue;
      See(t, ArpReply("10.0.0.1", kOtherMac), now + kMs);
      See(t, ArpReply("10.0.0.1", kGwMac), now + 2 * kMs);
    }
    EXPECT_EQ(t.Lookup(Ip("10.0.0.1")), kOtherMac);
  }
  EXPECT_EQ(Count(t, NeighborIgnore::kConflict), 6u);
}

// The attacker's review: a forger on the segment must not take over a known
// next hop. (1) One forged reply changes nothing by itself. (2) A forger that
// answers every request before the gateway, while the gateway answers too,
// never wins: 0 of 60 samples point at it.
TEST(NeighborTable, ForgerCannotTakeOverAKnownNextHop) {
  NeighborTable t = Table(0, /*answer=*/true);  // learned at 1 ms
  EXPECT_EQ(See(t, ArpReply("10.0.0.1", kOtherMac), 20 * kSecond).ignored, NeighborIgnore::kUnsolicited);
  EXPECT_EQ(t.Lookup(Ip("10.0.0.1")), kGwMac);
  int at_forger = 0;
  int samples = 0;
  for (uint64_t now = 20 * kSecond; now < 50 * kSecond; now += 500 * kMs) {
    for (const IpAddress& a : t.DueRequests(now)) {
      if (a != Ip("10.0.0.1")) continue;
      See(t, ArpReply("10.0.0.1", kOtherMac), now + kMs);  // the forger, first
      See(t, ArpReply("10.0.0.1", kGwMac), now + 2 * kMs);
    }
    ++samples;
    if (t.Lookup(Ip("10.0.0.1")) == kOtherMac) ++at_forger;
  }
  EXPECT_EQ(samples, 60);
  EXPECT_EQ(at_forger, 0);
  EXPECT_EQ(t.Lookup(Ip("10.0.0.1")), kGwMac);
  // Every request it answered was a conflict (at least one per answer window).
  EXPECT_GE(Count(t, NeighborIgnore::kConflict), 30 * kSecond / kNeighborAnswerWindowNs);
}

// The review's third repro: a forger that answers every request for an
// UNRESOLVED next hop first (replies sent ahead, non-stop) while the real
// host answers too. The first round resolves to the forger for the fraction
// of a window until the host's answer (unavoidable: the first answer is
// used at once so that start-up is not delayed); that answer undoes it, and
// from then on the forger's MAC is never the lookup result.
TEST(NeighborTable, ForgerFirstOnAnUnresolvedAddressIsNotKept) {
  NeighborTable t;
  t.SetWanted({Ip("10.0.0.1")});
  uint64_t asked = 0;
  for (int round = 0; round < 4; ++round, asked += 40 * kSecond) {
    ASSERT_EQ(t.DueRequests(asked).size(), 1u);
    See(t, ArpReply("10.0.0.1", kOtherMac), asked + kMs / 10);  // forger, pre-sent
    if (round > 0) {
      EXPECT_NE(t.Lookup(Ip("10.0.0.1")), kOtherMac) << round;
    }
    See(t, ArpReply("10.0.0.1", kGwMac), asked + kMs);  // real gateway, every round
    EXPECT_NE(t.Lookup(Ip("10.0.0.1")), kOtherMac) << round;
  }
  EXPECT_EQ(Count(t, NeighborIgnore::kConflict), 4u);
}

// Only the real host answers: resolved by its first answer, at once, and a
// later refresh confirms it (no window to wait for).
TEST(NeighborTable, OnlyTheRealHostAnsweringResolvesAtOnce) {
  NeighborTable t;
  t.SetWanted({Ip("10.0.0.1"), Ip("fd00::1")});
  ASSERT_EQ(t.DueRequests(0).size(), 2u);
  NeighborOutcome o = See(t, ArpReply("10.0.0.1", kGwMac), kMs);
  EXPECT_TRUE(o.changed);
  EXPECT_FALSE(o.ignored.has_value());
  EXPECT_EQ(t.Lookup(Ip("10.0.0.1")), kGwMac);
  // ND too, with or without the Override flag (RFC 4861 7.2.5, INCOMPLETE).
  EXPECT_TRUE(See(t, Advert("fd00::1", kGwMac, {.override_flag = false}), kMs).changed);
  EXPECT_EQ(t.Lookup(Ip("fd00::1")), kGwMac);
  ASSERT_EQ(t.DueRequests(kNeighborRefreshNs + kMs).size(), 2u);
  EXPECT_FALSE(See(t, ArpReply("10.0.0.1", kGwMac), kNeighborRefreshNs + 2 * kMs).changed);
  EXPECT_EQ(t.Lookup(Ip("10.0.0.1")), kGwMac);
  EXPECT_EQ(Count(t, NeighborIgnore::kConflict), 0u);
}

// A second MAC undoes a fresh resolution whatever its flags: an ND answer
// without the Override flag too (it would only be kNoOverride against an
// older MAC).
TEST(NeighborTable, SecondAnswerWithoutOverrideUndoesAFreshResolution) {
  NeighborTable t = Table(0, /*answer=*/true);
  NeighborOutcome o = See(t, Advert("fd00::1", kOtherMac, {.override_flag = false}), 2 * kMs);
  EXPECT_EQ(o.ignored, NeighborIgnore::kConflict);
  EXPECT_TRUE(o.changed);
  EXPECT_FALSE(t.Lookup(Ip("fd00::1")).has_value());
}

// What ARP cannot tell apart, pinned down: a forger alone while the real host
// is silent resolves the address to the forger (use [[neighbor]] for next
// hops on a segment that hostile hosts share); the real host answering a
// later request too makes it a conflict, which the forger's MAC, being the
// known one, survives (see ForgerAloneAfterTheOwnerWentSilent).
TEST(NeighborTable, ForgerAloneOnAnUnresolvedAddressIsTaken) {
  NeighborTable t;
  t.SetWanted({Ip("10.0.0.1")});
  ASSERT_EQ(t.DueRequests(0).size(), 1u);
  EXPECT_TRUE(See(t, ArpReply("10.0.0.1", kOtherMac), kMs).changed);
  EXPECT_EQ(t.Lookup(Ip("10.0.0.1")), kOtherMac);
}

// Two MACs answering every request forever, in either order: after the first
// round the address stays unresolved (no flapping between them), every round
// is counted as a conflict, and requests go out at most once a second (one
// per answer window, since answers count per whole window). When one of them
// stops, the other is taken once it answered a whole window alone and then
// the next request; a second MAC answering that request undoes it again.
TEST(NeighborTable, TwoMacsAnsweringForeverLeaveItUnresolved) {
  NeighborTable t;
  t.SetWanted({Ip("10.0.0.1")});
  const uint64_t end = 120 * kSecond;
  int requests = 0;
  int resolved_samples = 0;
  for (uint64_t now = 0; now < end; now += 100 * kMs) {
    for (const IpAddress& a : t.DueRequests(now)) {
      ASSERT_EQ(a, Ip("10.0.0.1"));
      const bool forger_first = requests % 2 == 0;
      See(t, ArpReply("10.0.0.1", forger_first ? kOtherMac : kGwMac), now + kMs);
      See(t, ArpReply("10.0.0.1", forger_first ? kGwMac : kOtherMac), now + 2 * kMs);
      ++requests;
    }
    if (now > 0 && t.Lookup(Ip("10.0.0.1")).has_value()) ++resolved_samples;
  }
  EXPECT_EQ(resolved_samples, 0);
  EXPECT_LE(static_cast<uint64_t>(requests), end / kSecond);
  EXPECT_GE(static_cast<uint64_t>(requests), end / kNeighborAnswerWindowNs - 1);
  EXPECT_EQ(Count(t, NeighborIgnore::kConflict), static_cast<uint64_t>(requests));

  // The forger gives up: the gateway alone answers a window (a candidate) ...
  uint64_t now = end;
  ASSERT_EQ(t.DueRequests(now).size(), 1u);
  EXPECT_EQ(See(t, ArpReply("10.0.0.1", kGwMac), now + kMs).ignored, NeighborIgnore::kUnconfirmed);
  EXPECT_FALSE(t.Lookup(Ip("10.0.0.1")).has_value());
  EXPECT_TRUE(t.DueRequests(now + kNeighborAnswerWindowNs - 1).empty());
  // ... and the next request: taken.
  now += kNeighborAnswerWindowNs;
  ASSERT_EQ(t.DueRequests(now).size(), 1u);
  EXPECT_TRUE(See(t, ArpReply("10.0.0.1", kGwMac), now + kMs).changed);
  EXPECT_EQ(t.Lookup(Ip("10.0.0.1")), kGwMac);
  // Had the forger answered that request too, it would be undone.
  NeighborTable u = t;
  NeighborOutcome o = See(u, ArpReply("10.0.0.1", kOtherMac), now + 2 * kMs);
  EXPECT_EQ(o.ignored, NeighborIgnore::kConflict);
  EXPECT_TRUE(o.changed);
  EXPECT_FALSE(u.Lookup(Ip("10.0.0.1")).has_value());
  // A forger alone answering one contested window is a candidate, not taken at once.
  NeighborTable f;
  f.SetWanted({Ip("10.0.0.1")});
  f.DueRequests(0);
  See(f, ArpReply("10.0.0.1", kOtherMac), kMs);
  See(f, ArpReply("10.0.0.1", kGwMac), 2 * kMs);
  ASSERT_EQ(f.DueRequests(kNeighborAnswerWindowNs).size(), 1u);
  EXPECT_EQ(See(f, ArpReply("10.0.0.1", kOtherMac), kNeighborAnswerWindowNs + kMs).ignored,
            NeighborIgnore::kUnconfirmed);
  EXPECT_FALSE(f.Lookup(Ip("10.0.0.1")).has_value());
}

// The window of the request that resolved an address stays open to dispute:
// a frame that makes the LB ask again (an unsolicited claim) does not send
// the next request before that window closes, so a late second answer to the
// resolving request still undoes the resolution.
TEST(NeighborTable, ResolvingWindowIsNotCutShortByARecheck) {
  NeighborTable t;
  t.SetWanted({Ip("fd00::1")});
  ASSERT_EQ(t.DueRequests(0).size(), 1u);
  EXPECT_TRUE(See(t, Advert("fd00::1", kOtherMac), kMs).changed);  // forger first
  EXPECT_EQ(See(t, Advert("fd00::1", kGwMac, {.solicited = false, .dst = "ff02::1"}), 500 * kMs).ignored,
            NeighborIgnore::kUnsolicited);
  EXPECT_TRUE(t.DueRequests(kNeighborAnswerWindowNs - 1).empty());
  NeighborOutcome o = See(t, Advert("fd00::1", kGwMac), kNeighborAnswerWindowNs - 2);
  EXPECT_EQ(o.ignored, NeighborIgnore::kConflict);
  EXPECT_TRUE(o.changed);
  EXPECT_FALSE(t.Lookup(Ip("fd00::1")).has_value());
}

}  // namespace
}  // namespace maglb
