#include "maglb/lb_state.h"

#include <cstring>
#include <map>
#include <random>
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

// Every backend's encap template is what its target and the snapshot's
// EncapConfig make now (and none for L2 DSR), after every way a snapshot is
// made: the next hop's MAC, a reload of the encap settings or a backend's
// address, health.
void ExpectTemplatesOfTheirInputs(const LbState& s, const MacAddress& gateway_mac) {
  for (const VipState& v : s.vips()) {
    for (const BackendState& b : v.backends) {
      EXPECT_EQ(b.encap_template, Ipv4EncapTemplate::Of(b.target, s.encap())) << v.name << "/" << b.name;
      EXPECT_EQ(b.encap_template.valid(), v.forwarding != Forwarding::kL2Dsr) << v.name << "/" << b.name;
      if (!b.encap_template.valid()) continue;
      const uint8_t* f = b.encap_template.bytes + Ipv4EncapTemplate::kCopy - b.encap_template.prepend;
      EXPECT_EQ(std::memcmp(f, gateway_mac.bytes.data(), 6), 0) << v.name << "/" << b.name;
      EXPECT_EQ(f[14 + 8], s.encap().ttl) << v.name << "/" << b.name;
      EXPECT_EQ(std::memcmp(f + 14 + 16, b.target.backend.bytes.data(), 4), 0) << v.name << "/" << b.name;
    }
  }
}

TEST(LbStateTest, EncapTemplatesFollowEveryInput) {
  Config c = BaseConfig();
  c.neighbors.clear();  // the gateway from the resolver
  const MacAddress first = Mac("02:00:00:00:00:71"), second = Mac("02:00:00:00:00:72");
  auto resolve_to = [](MacAddress mac) {
    return [mac](const IpAddress& ip) -> std::optional<MacAddress> {
      if (ip == *IpAddress::Parse("192.0.2.1")) return mac;
      return std::nullopt;
    };
  };
  LbStateOptions opts;
  opts.port_mac = Mac("02:aa:00:00:00:01");
  opts.resolve = resolve_to(first);
  auto s = *BuildLbState(c, nullptr, opts);
  ExpectTemplatesOfTheirInputs(*s, first);
  const Ipv4EncapTemplate before = s->FindVip("web")->backends[0].encap_template;

  auto moved = s->WithNeighbors(resolve_to(second));
  ExpectTemplatesOfTheirInputs(*moved, second);
  EXPECT_NE(moved->FindVip("web")->backends[0].encap_template, before);

  c.lb.encap_ttl = 17;
  c.lb.encap_source_v4 = Ip("192.0.2.128");
  c.lb.encap_source_v4_flow_bits = 4;
  c.lb.mtu = 9000;
  c.vips[0].backends[0].address = Ip("203.0.113.99");
  auto reloaded = Build(c, moved.get());
  ExpectTemplatesOfTheirInputs(*reloaded, second);
  const Ipv4EncapTemplate& t = reloaded->FindVip("web")->backends[0].encap_template;
  EXPECT_EQ(t.source_flow_mask, 0xFu);
  EXPECT_EQ(t.max_ip_len, 9000 - 24);

  auto health = RebuildForInputs(*reloaded, reloaded->options());
  ASSERT_TRUE(health.ok()) << health.status();
  ExpectTemplatesOfTheirInputs(**health, second);
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

// Issue 8, point 9: a reload that changed only ring_points kept the old
// table, while a restarted instance built a new one.
TEST(LbStateTest, RingPointsAloneRebuildTheTable) {
  Config c = BaseConfig();
  c.vips[0].algorithm = Algorithm::kRing;
  c.vips[0].ring_points = 10;
  auto s1 = Build(c);
  c.vips[0].ring_points = 11;
  auto s2 = Build(c, s1.get());
  auto fresh = Build(c);
  EXPECT_NE(s2->vips()[0].table.get(), s1->vips()[0].table.get());
  EXPECT_EQ(s2->vips()[0].fingerprint(), fresh->vips()[0].fingerprint());
  EXPECT_NE(s2->vips()[0].fingerprint(), s1->vips()[0].fingerprint());
  EXPECT_EQ(s2->change().tables_built, 1u);
  // ring_points means nothing to other schemes: their tables are kept.
  EXPECT_EQ(s2->vips()[1].table.get(), s1->vips()[1].table.get());
  Config m = BaseConfig();
  auto m1 = Build(m);
  m.vips[1].ring_points = 7;
  auto m2 = Build(m, m1.get());
  EXPECT_EQ(m2->vips()[1].table.get(), m1->vips()[1].table.get());
}

// Random valid configs and random changes to them, one field or several:
// every field that can decide placement, and fields that cannot. Whatever
// changed, the tables running after the reload must be the ones a fresh start
// from the new config builds.
class ReloadProperty {
 public:
  explicit ReloadProperty(uint32_t seed) : rng_(seed) {}

  Config RandomConfig() {
    Config c;
    c.source = "random.toml";
    c.lb.hash_seed = Pick(3);
    const int vips = 1 + static_cast<int>(Pick(3));
    for (int i = 0; i < vips; ++i) {
      VipConfig v;
      v.name = absl::StrCat("v", i);
      v.address = Ip(absl::StrCat("198.51.100.", 1 + i));
      v.port = 80;
      v.algorithm = static_cast<Algorithm>(Pick(5));
      v.table_size = kPrimes[Pick(std::size(kPrimes))];
      v.ring_points = 1 + static_cast<uint32_t>(Pick(40));
      const int n = 1 + static_cast<int>(Pick(5));
      for (int b = 0; b < n; ++b) AddBackend(v);
      Fix(v);
      c.vips.push_back(std::move(v));
    }
    return c;
  }

  // Applies one random change; says which (for failure messages).
  std::string Mutate(Config& c) {
    VipConfig& v = c.vips[Pick(c.vips.size())];
    std::string what;
    switch (Pick(16)) {
      // Fields that decide placement.
      case 0: v.algorithm = static_cast<Algorithm>(Pick(5)); what = "algorithm"; break;
      case 1: v.table_size = kPrimes[Pick(std::size(kPrimes))]; what = "table_size"; break;
      case 2: v.ring_points = 1 + static_cast<uint32_t>(Pick(40)); what = "ring_points"; break;
      case 3: v.backends[Pick(v.backends.size())].weight = static_cast<uint32_t>(Pick(4));
              what = "weight"; break;
      case 4: AddBackend(v); what = "backend added"; break;
      case 5:
        if (v.backends.size() > 1) v.backends.erase(v.backends.begin() + Pick(v.backends.size()));
        what = "backend removed"; break;
      case 6: v.backends[Pick(v.backends.size())].name = NewName(v); what = "backend renamed"; break;
      // Fields that do not.
      case 7: std::shuffle(v.backends.begin(), v.backends.end(), rng_); what = "order"; break;
      case 8: v.allow_modulo = !v.allow_modulo; what = "allow_modulo"; break;
      case 9:
        v.bounded_load_epsilon = Pick(2) ? std::optional<double>(0.25) : std::nullopt;
        what = "bounded_load_epsilon"; break;
      case 10: c.lb.hash_seed = Pick(3); what = "hash_seed"; break;
      case 11: v.port = static_cast<uint16_t>(Pick(3) * 80); what = "port"; break;
      case 12: v.forwarding = static_cast<Forwarding>(Pick(3)); what = "forwarding"; break;
      case 13: v.protocol = Pick(2) ? Protocol::kTcp : Protocol::kUdp; what = "protocol"; break;
      case 14: v.backends[Pick(v.backends.size())].address = Ip(absl::StrCat("203.0.113.", 100 + Pick(50)));
               what = "backend address"; break;
      default: c.conntrack.capacity = 1024u << Pick(4); what = "conntrack"; break;
    }
    Fix(v);
    return absl::StrCat(v.name, ".", what);
  }

 private:
  static constexpr uint32_t kPrimes[] = {251, 257, 263, 269, 271};

  uint64_t Pick(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }

  std::string NewName(const VipConfig& v) {
    for (;;) {
      std::string name = absl::StrCat("b", Pick(40));
      bool taken = false;
      for (const BackendConfig& b : v.backends) taken |= b.name == name;
      if (!taken) return name;
    }
  }
  void AddBackend(VipConfig& v) {
    v.backends.push_back({NewName(v), Ip(absl::StrCat("203.0.113.", 1 + Pick(50))),
                          static_cast<uint32_t>(Pick(4)), 0});
  }
  // What validation would insist on: modulo needs consent, jump equal
  // weights, l2dsr (IPv4 VIPs here) IPv4 backends.
  void Fix(VipConfig& v) {
    if (v.algorithm == Algorithm::kModulo) v.allow_modulo = true;
    if (v.algorithm == Algorithm::kJump) {
      for (BackendConfig& b : v.backends) b.weight = b.weight > 0 ? 2 : 0;
    }
  }

  std::mt19937_64 rng_;
};

// Both snapshots serve the same packets the same way: same fingerprint, and
// slot by slot the same backend by name (through each snapshot's own index
// order), which is also what BuildVipTable makes of the VIP.
void ExpectSameTables(const LbState& reloaded, const LbState& fresh, const std::string& what) {
  ASSERT_EQ(reloaded.vips().size(), fresh.vips().size()) << what;
  for (size_t i = 0; i < fresh.vips().size(); ++i) {
    const VipState& r = reloaded.vips()[i];
    const VipState& f = fresh.vips()[i];
    ASSERT_EQ(r.name, f.name);
    EXPECT_EQ(r.fingerprint(), f.fingerprint()) << what << " (vip " << r.name << ")";
    ASSERT_EQ(r.table->size(), f.table->size()) << what << " (vip " << r.name << ")";
    absl::StatusOr<LookupTable> direct = BuildVipTable(fresh.config().vips[i]);
    ASSERT_TRUE(direct.ok()) << direct.status();
    ASSERT_EQ(direct->size(), f.table->size());
    int mismatches = 0;
    for (uint32_t s = 0; s < f.table->size(); ++s) {
      const std::string& rn = r.backends[r.table->slot(s)].name;
      const std::string& fn = f.backends[f.table->slot(s)].name;
      mismatches += rn != fn || direct->backend_names()[direct->slot(s)] != fn;
    }
    EXPECT_EQ(mismatches, 0) << what << " (vip " << r.name << ")";
  }
}

TEST(LbStateTest, AfterAnyReloadTheTablesAreThoseOfAFreshStart) {
  ReloadProperty gen(20261201);
  int rebuilt = 0, reused = 0;
  for (int round = 0; round < 300; ++round) {
    Config before = gen.RandomConfig();
    auto running = Build(before);
    ASSERT_NE(running, nullptr);
    // Round r changes 1 + r % 3 fields, then reloads.
    Config after = before;
    std::string what;
    for (int k = 0; k <= round % 3; ++k) what += (k ? ", " : "") + gen.Mutate(after);
    auto reloaded = Build(after, running.get());
    auto fresh = Build(after);
    ASSERT_NE(reloaded, nullptr) << what;
    ASSERT_NE(fresh, nullptr) << what;
    ExpectSameTables(*reloaded, *fresh, absl::StrCat("round ", round, ": ", what));
    rebuilt += reloaded->change().tables_built;
    reused += reloaded->change().tables_reused;
    if (HasFailure()) return;
  }
  // Both paths ran many times.
  EXPECT_GT(rebuilt, 100);
  EXPECT_GT(reused, 100);
}

}  // namespace
}  // namespace maglb

namespace maglb {
namespace {

// Health as the health task hands it in (LbStateOptions::health).
LbStateOptions WithHealth(std::map<std::string, BackendHealthInput> by_backend) {
  LbStateOptions o;
  o.kernel_interface = true;  // checks need one
  o.health = [by_backend](std::string_view, std::string_view b) -> std::optional<BackendHealthInput> {
    auto it = by_backend.find(std::string(b));
    if (it == by_backend.end()) return std::nullopt;
    return it->second;
  };
  return o;
}

Config CheckedConfig() {
  Config c = BaseConfig();
  HealthCheckConfig check;
  check.type = HealthCheckType::kTcp;
  c.vips[0].health_check = check;  // "web": a (1), b (1), c (2)
  return c;
}

const BackendState& BackendOf(const LbState& s, std::string_view vip, std::string_view name) {
  for (const BackendState& b : s.FindVip(vip)->backends) {
    if (b.name == name) return b;
  }
  ADD_FAILURE() << name;
  return s.FindVip(vip)->backends[0];
}

TEST(LbStateHealth, ADownBackendLeavesTheTableButKeepsItsFlowsUnlessTheyMove) {
  Config c = CheckedConfig();
  auto first = BuildLbState(c, nullptr, WithHealth({}));
  ASSERT_TRUE(first.ok());
  const uint32_t b_id = IdOf(**first, "web", "b");
  const VipState& v1 = *(*first)->FindVip("web");
  uint16_t b_index = 0;
  while (v1.backends[b_index].name != "b") ++b_index;

  // pin (the default): b takes no new flows, its tracked ones still resolve.
  auto pinned = RebuildForInputs(**first, WithHealth({{"b", {BackendHealth::kDown, 0, false, std::nullopt}}}));
  ASSERT_TRUE(pinned.ok());
  const VipState& vp = *(*pinned)->FindVip("web");
  EXPECT_EQ((*pinned)->generation(), (*first)->generation()) << "health keeps the generation";
  EXPECT_TRUE((*pinned)->change().inputs_only);
  EXPECT_EQ(BackendOf(**pinned, "web", "b").weight, 0u);
  EXPECT_EQ(BackendOf(**pinned, "web", "b").configured_weight, 1u);
  EXPECT_EQ(BackendOf(**pinned, "web", "b").health, BackendHealth::kDown);
  EXPECT_EQ(BackendOf(**pinned, "web", "a").health, BackendHealth::kUp);
  EXPECT_EQ(BackendOf(**pinned, "api", "x").health, BackendHealth::kUnchecked) << "no check on api";
  uint16_t pinned_index = 0;
  while (vp.backends[pinned_index].name != "b") ++pinned_index;
  EXPECT_EQ(vp.table->EntryCounts()[pinned_index], 0u);
  EXPECT_EQ(vp.Resolve(b_id, b_index), pinned_index) << "pinned: its flows stay";
  EXPECT_EQ(vp.Resolve(b_id, 0xFFFE), pinned_index);

  // move: its tracked flows learn it is gone (on the hint path and the slow one).
  auto moved = RebuildForInputs(**first, WithHealth({{"b", {BackendHealth::kDown, 0, true, std::nullopt}}}));
  ASSERT_TRUE(moved.ok());
  const VipState& vm = *(*moved)->FindVip("web");
  uint16_t moved_index = 0;
  while (vm.backends[moved_index].name != "b") ++moved_index;
  EXPECT_TRUE(vm.backends[moved_index].flows_move);
  EXPECT_EQ(vm.Resolve(b_id, moved_index), VipState::kNoBackend);
  EXPECT_EQ(vm.Resolve(b_id, 0xFFFE), VipState::kNoBackend);
  EXPECT_EQ(vm.backends[moved_index].id, b_id) << "same identity: its counters go on";

  // Back up: the table is the one it had (tables depend on weights alone).
  auto back = RebuildForInputs(**moved, WithHealth({}));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ((*back)->FindVip("web")->fingerprint(), v1.fingerprint());
}

TEST(LbStateHealth, ABackendAReloadAddsStartsDownUntilChecked) {
  Config c = CheckedConfig();
  auto first = BuildLbState(c, nullptr, WithHealth({}));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(BackendOf(**first, "web", "a").health, BackendHealth::kUp) << "at start: up, not yet checked";
  c.vips[0].backends.push_back({"d", Ip("203.0.113.9"), 1, 0});
  auto second = BuildLbState(c, first->get(), WithHealth({}));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(BackendOf(**second, "web", "d").health, BackendHealth::kDown);
  EXPECT_EQ(BackendOf(**second, "web", "d").weight, 0u);
  EXPECT_EQ(BackendOf(**second, "web", "a").health, BackendHealth::kUp);
  EXPECT_EQ((*second)->generation(), 2u);
}

TEST(LbStateHealth, ASlowStartStepServesAFractionOfTheShare) {
  Config c = CheckedConfig();
  auto first = BuildLbState(c, nullptr, WithHealth({}));
  ASSERT_TRUE(first.ok());
  // b ramps at step 1 of 5: every weight of the VIP scaled by 5, b at 1.
  auto ramp = RebuildForInputs(**first, WithHealth({{"a", {BackendHealth::kUp, 5, false, std::nullopt}},
                                                    {"b", {BackendHealth::kUp, 1, false, std::nullopt}},
                                                    {"c", {BackendHealth::kUp, 10, false, std::nullopt}}}));
  ASSERT_TRUE(ramp.ok()) << ramp.status();
  const VipState& v = *(*ramp)->FindVip("web");
  auto counts = v.table->EntryCounts();
  uint32_t b_entries = 0;
  for (size_t i = 0; i < v.backends.size(); ++i) {
    if (v.backends[i].name == "b") b_entries = counts[i];
  }
  EXPECT_GT(b_entries, 0u);
  EXPECT_LT(b_entries, 251u / 4 / 2) << "a fifth of its share";
}

}  // namespace
}  // namespace maglb

namespace maglb {
namespace {

TEST(LbStateHealth, AReloadThatReplacesEveryBackendFailsOpenUnderKeepLast) {
  Config c = CheckedConfig();
  auto first = BuildLbState(c, nullptr, WithHealth({}));
  ASSERT_TRUE(first.ok());
  c.vips[0].backends = {{"n1", Ip("203.0.113.21"), 1, 0}, {"n2", Ip("203.0.113.22"), 1, 0}};
  auto kept = BuildLbState(c, first->get(), WithHealth({}));
  ASSERT_TRUE(kept.ok());
  EXPECT_FALSE((*kept)->FindVip("web")->table->empty()) << "keep_last: served until checked";
  EXPECT_EQ(BackendOf(**kept, "web", "n1").health, BackendHealth::kUp);
  c.vips[0].all_down = AllDownPolicy::kDrop;
  c.vips[0].backends = {{"m1", Ip("203.0.113.31"), 1, 0}};
  auto dropped = BuildLbState(c, kept->get(), WithHealth({}));
  ASSERT_TRUE(dropped.ok());
  EXPECT_TRUE((*dropped)->FindVip("web")->table->empty()) << "drop: nothing until its first check";
}

}  // namespace
}  // namespace maglb

namespace maglb {
namespace {

TEST(LbStateHealth, AReweightingReloadScalesWhatHealthServes) {
  Config c = CheckedConfig();  // web: a 1, b 1, c 2
  auto first = BuildLbState(c, nullptr, WithHealth({}));
  ASSERT_TRUE(first.ok());
  // The health task's view, made from the old weights: a up, b down, c at
  // step 2 of 4 of a slow start (scaled: 2 of 2 x 4).
  auto health = WithHealth({{"a", {BackendHealth::kUp, 4, false, 1}},
                            {"b", {BackendHealth::kDown, 0, false, 1}},
                            {"c", {BackendHealth::kUp, 4, false, 2}}});
  c.vips[0].backends[0].weight = 0;  // a drained
  c.vips[0].backends[2].weight = 4;  // c doubled
  auto second = BuildLbState(c, first->get(), health);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(BackendOf(**second, "web", "a").weight, 0u) << "drained by the reload";
  EXPECT_EQ(BackendOf(**second, "web", "b").weight, 0u) << "still down";
  EXPECT_EQ(BackendOf(**second, "web", "c").weight, 8u) << "the same share of its new weight";
}

}  // namespace
}  // namespace maglb

namespace maglb {
namespace {

TEST(LbStateHealth, AReloadThatUndrainsABackendServesItAtOnce) {
  Config c = CheckedConfig();
  c.vips[0].backends[0].weight = 0;  // a draining
  auto first = BuildLbState(c, nullptr, WithHealth({}));
  ASSERT_TRUE(first.ok());
  c.vips[0].backends[0].weight = 3;
  auto second = BuildLbState(c, first->get(), WithHealth({{"a", {BackendHealth::kUp, 0, false, 0}}}));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(BackendOf(**second, "web", "a").weight, 3u);
}

}  // namespace
}  // namespace maglb
