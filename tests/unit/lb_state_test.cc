#include "maglb/lb_state.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "maglb/table_builder.h"

namespace maglb {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

IpAddress Ip(std::string_view s) { return *IpAddress::Parse(s); }
MacAddress Mac(std::string_view s) { return *MacAddress::Parse(s); }

VipConfig Vip(std::string name, std::string addr, Forwarding fwd,
              std::vector<std::pair<std::string, uint32_t>> backends) {
  VipConfig v;
  v.name = std::move(name);
  v.address = Ip(addr);
  v.port = 80;
  v.forwarding = fwd;
  v.table_size = 251;
  int i = 1;
  for (auto& [n, w] : backends) {
    v.backends.push_back({n, Ip(absl::StrCat("203.0.113.", i++)), w, 0});
  }
  return v;
}

Config BaseConfig() {
  Config c;
  c.source = "test.toml";
  c.lb.ipv4 = Ip("192.0.2.10");
  c.lb.gateway_v4 = Ip("192.0.2.1");
  c.neighbors.push_back({Ip("192.0.2.1"), Mac("02:00:00:00:00:01"), 0});
  c.vips.push_back(Vip("web", "198.51.100.80", Forwarding::kGre, {{"a", 1}, {"b", 1}, {"c", 2}}));
  c.vips.push_back(Vip("api", "198.51.100.81", Forwarding::kIpip, {{"x", 1}, {"y", 1}}));
  c.vips.push_back(Vip("dsr", "198.51.100.82", Forwarding::kL2Dsr, {{"d1", 1}, {"d2", 1}}));
  return c;
}

std::unique_ptr<const LbState> Build(const Config& c, const LbState* prev = nullptr) {
  auto s = BuildLbState(c, prev);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

uint32_t IdOf(const LbState& s, std::string_view vip, std::string_view backend) {
  for (const BackendState& b : s.FindVip(vip)->backends) {
    if (b.name == backend) return b.id;
  }
  return 0;
}

TEST(LbStateTest, FirstSnapshot) {
  auto s = Build(BaseConfig());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->generation(), 1u);
  ASSERT_EQ(s->vips().size(), 3u);
  EXPECT_EQ(s->vips()[0].name, "web");
  EXPECT_EQ(s->vips()[0].table->size(), 251u);
  EXPECT_EQ(s->vips()[0].hash_seed, kDefaultHashSeed);
  EXPECT_THAT(s->change().vips_added, ElementsAre("web", "api", "dsr"));
  EXPECT_EQ(s->change().tables_built, 3u);
  // Ids and counter slots are distinct.
  std::set<uint32_t> ids, vip_slots, backend_slots;
  for (const VipState& v : s->vips()) {
    ids.insert(v.id);
    vip_slots.insert(v.counter_slot);
    for (const BackendState& b : v.backends) {
      ids.insert(b.id);
      backend_slots.insert(b.counter_slot);
      EXPECT_NE(b.id, 0u);
    }
  }
  EXPECT_EQ(ids.size(), 3u + 7u);
  EXPECT_EQ(vip_slots.size(), 3u);
  EXPECT_EQ(backend_slots.size(), 7u);
  // The matcher maps each VIP to its index.
  EXPECT_EQ(s->matcher().Match(Ip("198.51.100.81").bytes.data(), false, 6, 80), 1);
}

TEST(LbStateTest, BackendsFollowTheTableIndexOrder) {
  auto s = Build(BaseConfig());
  for (const VipState& v : s->vips()) {
    ASSERT_EQ(v.backends.size(), v.table->backend_names().size());
    for (size_t i = 0; i < v.backends.size(); ++i) {
      EXPECT_EQ(v.backends[i].name, v.table->backend_names()[i]);
      EXPECT_EQ(v.Resolve(v.backends[i].id, static_cast<uint16_t>(i)), i);
      EXPECT_EQ(v.Resolve(v.backends[i].id, 999), i);  // bad hint: found anyway
    }
    EXPECT_EQ(v.Resolve(123456, 0), VipState::kNoBackend);
  }
}

TEST(LbStateTest, UnchangedVipsKeepTheirTablesAndIds) {
  auto s1 = Build(BaseConfig());
  Config c = BaseConfig();
  // Reordering backends changes nothing that matters.
  std::swap(c.vips[0].backends[0], c.vips[0].backends[2]);
  auto s2 = Build(c, s1.get());
  EXPECT_EQ(s2->generation(), 2u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(s2->vips()[i].table.get(), s1->vips()[i].table.get()) << i;
    EXPECT_EQ(s2->vips()[i].id, s1->vips()[i].id);
    EXPECT_EQ(s2->vips()[i].counter_slot, s1->vips()[i].counter_slot);
  }
  EXPECT_EQ(IdOf(*s2, "web", "a"), IdOf(*s1, "web", "a"));
  EXPECT_EQ(IdOf(*s2, "web", "c"), IdOf(*s1, "web", "c"));
  EXPECT_TRUE(s2->change().empty()) << s2->change().ToString();
  EXPECT_EQ(s2->change().tables_reused, 3u);
  EXPECT_EQ(s2->change().tables_built, 0u);
  // Backends still in the (reused) table's order.
  const VipState& web = *s2->FindVip("web");
  for (size_t i = 0; i < web.backends.size(); ++i) {
    EXPECT_EQ(web.backends[i].name, web.table->backend_names()[i]);
  }
}

TEST(LbStateTest, OnlyTheChangedVipGetsANewTable) {
  auto s1 = Build(BaseConfig());
  Config c = BaseConfig();
  c.vips[0].backends[1].weight = 3;  // web: b 1 -> 3
  auto s2 = Build(c, s1.get());
  EXPECT_NE(s2->FindVip("web")->table.get(), s1->FindVip("web")->table.get());
  EXPECT_EQ(s2->FindVip("api")->table.get(), s1->FindVip("api")->table.get());
  EXPECT_EQ(s2->FindVip("dsr")->table.get(), s1->FindVip("dsr")->table.get());
  EXPECT_EQ(s2->change().tables_built, 1u);
  EXPECT_EQ(s2->change().tables_reused, 2u);
  ASSERT_EQ(s2->change().vips_changed.size(), 1u);
  const auto& vc = s2->change().vips_changed[0];
  EXPECT_EQ(vc.name, "web");
  EXPECT_THAT(vc.backends_reweighted, ElementsAre("b"));
  EXPECT_GT(vc.moved, 0.1);
  EXPECT_NE(vc.old_fingerprint, vc.new_fingerprint);
  EXPECT_EQ(vc.new_fingerprint, s2->FindVip("web")->fingerprint());
  EXPECT_THAT(s2->change().ToString(), HasSubstr("~vip web (~b, moved"));
  for (std::string_view b : {"a", "b", "c"}) EXPECT_EQ(IdOf(*s2, "web", b), IdOf(*s1, "web", b));
}

TEST(LbStateTest, AddedAndRemovedBackendsAndVips) {
  auto s1 = Build(BaseConfig());
  Config c = BaseConfig();
  c.vips[0].backends.erase(c.vips[0].backends.begin());  // web: -a
  c.vips[0].backends.push_back({"d", Ip("203.0.113.9"), 1, 0});  // web: +d
  c.vips.erase(c.vips.begin() + 1);  // -api
  c.vips.push_back(Vip("new", "198.51.100.99", Forwarding::kGre, {{"n1", 1}}));
  auto s2 = Build(c, s1.get());
  EXPECT_THAT(s2->change().vips_added, ElementsAre("new"));
  EXPECT_THAT(s2->change().vips_removed, ElementsAre("api"));
  ASSERT_EQ(s2->change().vips_changed.size(), 1u);
  EXPECT_THAT(s2->change().vips_changed[0].backends_added, ElementsAre("d"));
  EXPECT_THAT(s2->change().vips_changed[0].backends_removed, ElementsAre("a"));

  const VipState& web = *s2->FindVip("web");
  const uint32_t old_a = IdOf(*s1, "web", "a");
  EXPECT_EQ(web.Resolve(old_a, 0), VipState::kNoBackend);  // a is gone
  EXPECT_EQ(IdOf(*s2, "web", "b"), IdOf(*s1, "web", "b"));
  // New ids are new: never one that was ever used.
  std::set<uint32_t> old_ids;
  for (const VipState& v : s1->vips()) {
    old_ids.insert(v.id);
    for (const BackendState& b : v.backends) old_ids.insert(b.id);
  }
  EXPECT_EQ(old_ids.count(IdOf(*s2, "web", "d")), 0u);
  EXPECT_EQ(old_ids.count(s2->FindVip("new")->id), 0u);

  // Putting a back gives it a fresh id: flows pinned to the old a were
  // already moved and must not be confused with the new one.
  Config c3 = c;
  c3.vips[0].backends.push_back({"a", Ip("203.0.113.1"), 1, 0});
  auto s3 = Build(c3, s2.get());
  EXPECT_NE(IdOf(*s3, "web", "a"), old_a);
  EXPECT_EQ(s3->generation(), 3u);
}

TEST(LbStateTest, CounterSlotsAreReusedButIdsAreNot) {
  auto s1 = Build(BaseConfig());
  Config c = BaseConfig();
  c.vips.erase(c.vips.begin() + 1);  // -api (frees its VIP slot and 2 backend slots)
  auto s2 = Build(c, s1.get());
  c.vips.push_back(Vip("later", "198.51.100.77", Forwarding::kGre, {{"l1", 1}}));
  auto s3 = Build(c, s2.get());
  const VipState& later = *s3->FindVip("later");
  EXPECT_EQ(later.counter_slot, s1->FindVip("api")->counter_slot);
  EXPECT_NE(later.id, s1->FindVip("api")->id);
  std::set<uint32_t> slots;
  for (const VipState& v : s3->vips()) EXPECT_TRUE(slots.insert(v.counter_slot).second);
}

TEST(LbStateTest, AllDrainingGivesAnEmptyTableButKeepsTheBackends) {
  Config c = BaseConfig();
  for (auto& b : c.vips[1].backends) b.weight = 0;
  auto s = Build(c);
  const VipState& api = *s->FindVip("api");
  EXPECT_TRUE(api.table->empty());
  EXPECT_EQ(api.backends.size(), 2u);
  EXPECT_EQ(api.fingerprint(), 0u);
}

TEST(LbStateTest, IndependentInstancesAgreeOnFingerprints) {
  Config c1 = BaseConfig();
  Config c2 = BaseConfig();
  std::reverse(c2.vips[0].backends.begin(), c2.vips[0].backends.end());
  auto s1 = Build(c1);
  auto s2 = Build(c2);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(s1->vips()[i].fingerprint(), s2->vips()[i].fingerprint());
}

TEST(LbStateTest, NextHopsFromStaticNeighborsAndTheResolver) {
  Config c = BaseConfig();
  LbStateOptions opts;
  opts.port_mac = Mac("02:aa:00:00:00:01");
  auto s = *BuildLbState(c, nullptr, opts);
  // GRE/IPIP go through the gateway (static neighbor); DSR needs each backend's MAC.
  for (const BackendState& b : s->FindVip("web")->backends) {
    EXPECT_TRUE(b.next_hop_known);
    EXPECT_EQ(b.target.next_hop_mac, Mac("02:00:00:00:00:01"));
    EXPECT_EQ(b.target.forwarding, Forwarding::kGre);
  }
  for (const BackendState& b : s->FindVip("dsr")->backends) EXPECT_FALSE(b.next_hop_known);
  EXPECT_EQ(s->encap().src_mac, Mac("02:aa:00:00:00:01"));
  EXPECT_EQ(s->encap().source_v4, Ip("192.0.2.10"));

  auto resolved = s->WithNeighbors([](const IpAddress& ip) -> std::optional<MacAddress> {
    if (ip == *IpAddress::Parse("203.0.113.1")) return *MacAddress::Parse("02:bb:00:00:00:01");
    return std::nullopt;
  });
  EXPECT_EQ(resolved->generation(), s->generation());
  EXPECT_EQ(resolved->neighbor_version(), s->neighbor_version() + 1);
  EXPECT_EQ(resolved->FindVip("web")->table.get(), s->FindVip("web")->table.get());
  const VipState& dsr = *resolved->FindVip("dsr");
  for (const BackendState& b : dsr.backends) {
    EXPECT_EQ(b.next_hop_known, b.name == "d1") << b.name;
    if (b.name == "d1") {
      EXPECT_EQ(b.target.next_hop_mac, Mac("02:bb:00:00:00:01"));
    }
  }
  // A later reload keeps the options (port MAC, resolver) of the previous snapshot.
  auto next = Build(c, resolved.get());
  EXPECT_EQ(next->encap().src_mac, Mac("02:aa:00:00:00:01"));
  EXPECT_TRUE(next->FindVip("dsr")->backends[0].next_hop_known ||
              next->FindVip("dsr")->backends[1].next_hop_known);
}

TEST(LbStateTest, RefusesWhatItCannotBuild) {
  Config c = BaseConfig();
  c.vips[1].table_size = 250;  // not prime (a config that skipped validation)
  auto s = BuildLbState(c, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("VIP api"));
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("not applied"));

  Config many = BaseConfig();
  many.vips.clear();
  for (uint32_t i = 0; i <= kMaxVips; ++i) {
    many.vips.push_back(Vip(absl::StrCat("v", i), "198.51.100.1", Forwarding::kGre, {{"a", 1}}));
  }
  auto t = BuildLbState(many, nullptr);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("at most 4096"));
}

}  // namespace
}  // namespace maglb
