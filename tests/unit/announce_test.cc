#include "maglb/announce.h"

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace maglb {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

IpAddress Ip(std::string_view s) { return *IpAddress::Parse(s); }

VipConfig Vip(std::string name, std::string addr, Forwarding fwd, Protocol proto, uint16_t port,
              std::vector<std::pair<std::string, uint32_t>> backends) {
  VipConfig v;
  v.name = std::move(name);
  v.address = Ip(addr);
  v.protocol = proto;
  v.port = port;
  v.forwarding = fwd;
  v.table_size = 251;
  int i = 1;
  for (auto& [n, w] : backends) v.backends.push_back({n, Ip(absl::StrCat("192.0.2.", 10 + i++)), w, 0});
  return v;
}

// web and dns share 198.51.100.1; dsr (L2 DSR: each backend's own MAC) is
// 198.51.100.2; v6 is on an IPv6 address.
Config FleetConfig() {
  Config c;
  c.source = "fleet.toml";
  c.lb.ipv4 = Ip("192.0.2.10");
  c.lb.gateway_v4 = Ip("192.0.2.1");
  c.neighbors.push_back({Ip("192.0.2.1"), *MacAddress::Parse("02:00:00:00:00:01"), 0});
  c.vips.push_back(Vip("web", "198.51.100.1", Forwarding::kGre, Protocol::kTcp, 80, {{"a", 1}, {"b", 1}, {"c", 2}}));
  c.vips.push_back(Vip("dns", "198.51.100.1", Forwarding::kGre, Protocol::kUdp, 53, {{"a", 1}}));
  c.vips.push_back(Vip("dsr", "198.51.100.2", Forwarding::kL2Dsr, Protocol::kTcp, 80, {{"d1", 1}, {"d2", 1}}));
  c.vips.push_back(Vip("v6", "2001:db8::1", Forwarding::kGre, Protocol::kTcp, 443, {{"a", 1}}));
  HealthCheckConfig check;
  check.type = HealthCheckType::kTcp;
  c.vips[0].health_check = check;
  c.vips[1].health_check = check;
  return c;
}

// Backends named in `down` are down by their check; every other checked one is up.
// `resolved`: which L2 DSR backends' MACs are known.
std::unique_ptr<const LbState> Build(const Config& c, std::map<std::string, bool> down = {},
                                     std::map<std::string, bool> resolved = {}) {
  LbStateOptions o;
  o.kernel_interface = true;  // checks need one
  o.resolve = [resolved, &c](const IpAddress& ip) -> std::optional<MacAddress> {
    for (const VipConfig& v : c.vips) {
      for (const BackendConfig& b : v.backends) {
        if (b.address == ip && resolved.count(b.name)) return *MacAddress::Parse("02:00:00:00:01:01");
      }
    }
    return std::nullopt;
  };
  o.health = [down](std::string_view, std::string_view backend) -> std::optional<BackendHealthInput> {
    if (down.count(std::string(backend))) return BackendHealthInput{BackendHealth::kDown, 0, false, std::nullopt};
    return BackendHealthInput{BackendHealth::kUp, 1, false, std::nullopt};
  };
  auto s = BuildLbState(c, nullptr, o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

const AnnounceReadiness kLive{.workers_live = true, .draining = false, .why_not_live = {}, .drain_reason = {}, .first_check_pending = {}};

// A copy: the decisions are often a temporary.
AddressAnnouncement For(const std::vector<AddressAnnouncement>& all, std::string_view addr) {
  for (const AddressAnnouncement& a : all) {
    if (a.address == Ip(addr)) return a;
  }
  ADD_FAILURE() << addr;
  return {};
}

TEST(Announce, OneRoutePerAddressWhileABackendServes) {
  Config c = FleetConfig();
  auto s = Build(c, {}, {{"d1", true}, {"d2", true}});
  auto all = DecideAnnouncements(*s, kLive);
  ASSERT_EQ(all.size(), 3u) << "web and dns share one address";
  EXPECT_EQ(all[0].Prefix(), "198.51.100.1/32");
  EXPECT_EQ(all[2].Prefix(), "2001:db8::1/128");
  EXPECT_THAT(all[0].vips, ElementsAre("web", "dns"));
  for (const auto& a : all) EXPECT_TRUE(a.announce) << a.Prefix() << ": " << a.reason;
  EXPECT_EQ(all[0].reason, "web: 3 of 3 backends serving");
}

TEST(Announce, NothingWhileWorkersAreNotLiveOrWhileDraining) {
  auto s = Build(FleetConfig(), {}, {{"d1", true}});
  AnnounceReadiness stalled{.workers_live = false, .draining = false,
                            .why_not_live = "workers stalled for 1200 ms", .drain_reason = {}, .first_check_pending = {}};
  for (const auto& a : DecideAnnouncements(*s, stalled)) {
    EXPECT_FALSE(a.announce);
    EXPECT_EQ(a.reason, "workers stalled for 1200 ms");
  }
  AnnounceReadiness draining{.workers_live = true, .draining = true, .why_not_live = {},
                             .drain_reason = "draining on SIGTERM", .first_check_pending = {}};
  for (const auto& a : DecideAnnouncements(*s, draining)) {
    EXPECT_FALSE(a.announce);
    EXPECT_EQ(a.reason, "draining on SIGTERM");
  }
}

TEST(Announce, UnresolvedNextHopsAreNotReady) {
  // L2 DSR: each backend's own MAC. None known yet: the VIP cannot forward.
  auto none = Build(FleetConfig());
  const auto dsr = For(DecideAnnouncements(*none, kLive), "198.51.100.2");
  EXPECT_FALSE(dsr.announce);
  EXPECT_EQ(dsr.reason, "no serving backend (dsr: d1 next hop unresolved, d2 next hop unresolved)");
  // One is enough.
  auto one = Build(FleetConfig(), {}, {{"d2", true}});
  EXPECT_TRUE(For(DecideAnnouncements(*one, kLive), "198.51.100.2").announce);
}

TEST(Announce, AnAddressStaysWhileAnyOfItsVipsServes) {
  // Every backend of dns down (a is down for both web and dns: health is per
  // VIP in maglb, here the resolver says so for both), web's b and c serve.
  auto s = Build(FleetConfig(), {{"a", true}});
  const auto shared = For(DecideAnnouncements(*s, kLive), "198.51.100.1");
  EXPECT_TRUE(shared.announce);
  EXPECT_EQ(shared.reason, "web: 2 of 3 backends serving");
  // v6's only backend a is down... but v6 has no check: unchecked serves.
  EXPECT_TRUE(For(DecideAnnouncements(*s, kLive), "2001:db8::1").announce);
}

TEST(Announce, EveryBackendDownWithdrawsEvenIfTheTableIsKept) {
  Config c = FleetConfig();
  c.vips[0].all_down = AllDownPolicy::kKeepLast;
  auto s = Build(c, {{"a", true}, {"b", true}, {"c", true}});
  const auto shared = For(DecideAnnouncements(*s, kLive), "198.51.100.1");
  EXPECT_FALSE(shared.announce);
  EXPECT_THAT(shared.reason, HasSubstr("web: a down, b down, c down"));
  EXPECT_THAT(shared.reason, HasSubstr("dns: a down"));
}

TEST(Announce, ABackendWhoseCheckHasNotAnsweredYetDoesNotServe) {
  auto s = Build(FleetConfig(), {}, {{"d1", true}});
  AnnounceReadiness r = kLive;
  r.first_check_pending = [](std::string_view vip, std::string_view backend) {
    return (vip == "web" && backend != "c") || vip == "dns";
  };
  const auto shared = For(DecideAnnouncements(*s, r), "198.51.100.1");
  EXPECT_TRUE(shared.announce) << "c's check answered";
  EXPECT_EQ(shared.reason, "web: 1 of 3 backends serving");
  r.first_check_pending = [](std::string_view vip, std::string_view) { return vip == "web" || vip == "dns"; };
  const auto pending = For(DecideAnnouncements(*s, r), "198.51.100.1");
  EXPECT_FALSE(pending.announce);
  EXPECT_THAT(pending.reason, HasSubstr("web: a first check pending, b first check pending, c first check pending"));
}

TEST(Announce, WeightZeroEverywhereWithdraws) {
  Config c = FleetConfig();
  for (auto& b : c.vips[3].backends) b.weight = 0;
  auto s = Build(c);
  const auto v6 = For(DecideAnnouncements(*s, kLive), "2001:db8::1");
  EXPECT_FALSE(v6.announce);
  EXPECT_EQ(v6.reason, "no serving backend (v6: a weight 0)");
}

TEST(Announce, LongListsNameAFewBackends) {
  Config c = FleetConfig();
  std::vector<std::pair<std::string, uint32_t>> many;
  for (int i = 0; i < 10; ++i) many.push_back({absl::StrCat("d", i), 1});
  c.vips[2] = Vip("dsr", "198.51.100.2", Forwarding::kL2Dsr, Protocol::kTcp, 80, many);
  auto s = Build(c);
  EXPECT_EQ(For(DecideAnnouncements(*s, kLive), "198.51.100.2").reason,
            "no serving backend (dsr: d0 next hop unresolved, d1 next hop unresolved, d2 next hop "
            "unresolved and 7 more)");
}

}  // namespace
}  // namespace maglb
