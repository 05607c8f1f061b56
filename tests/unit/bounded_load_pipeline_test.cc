// Bounded loads in the packet path (issue 5): Worker places the new flows of
// a VIP with bounded_load_epsilon by its per-worker active-flow counts.
//
// The oracle here is independent of bounded_load.cc: integer capacities
// ceil(num * (F + 1) * w / (den * W)) for 1 + eps = num / den, a preference
// order walked over the table's slots with its own seen-set, and flow counts
// kept by the test from what it sent.
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "maglb/bounded_load.h"
#include "maglb/conntrack.h"
#include "maglb/flow_hash.h"
#include "maglb/lb_state.h"
#include "maglb/pipeline.h"
#include "packet_buf.h"
#include "packet_builder.h"

namespace maglb {
namespace {

using testing::Bytes;
using testing::Ip;
using testing::Ip4;
using testing::Mac;

constexpr uint64_t kSec = 1'000'000'000ULL;
constexpr uint64_t kT0 = 5000 * kSec;
const MacAddress kPortMac = Mac("02:00:00:00:00:01");
const MacAddress kGatewayMac = Mac("02:00:00:00:00:fe");
constexpr char kWeb[] = "198.51.100.80";
constexpr char kApi[] = "198.51.100.81";

// 1 + eps as a fraction, for the integer oracle.
struct Ratio {
  uint64_t num, den;
  double eps() const { return static_cast<double>(num - den) / static_cast<double>(den); }
};
constexpr Ratio kEps25{5, 4};
constexpr Ratio kEps10{11, 10};

struct Flow {
  std::string client;
  uint16_t sport;
};

std::string Client(int i) { return absl::StrCat("10.", (i >> 16) & 255, ".", (i >> 8) & 255, ".", i & 255); }

VipConfig MakeVip(std::string name, const char* addr, std::vector<std::pair<std::string, uint32_t>> backends,
                  std::optional<Ratio> eps, int subnet, Algorithm algorithm = Algorithm::kMaglev,
                  uint32_t table_size = 251, uint32_t ring_points = 100) {
  VipConfig v;
  v.name = std::move(name);
  v.address = Ip(addr);
  v.protocol = Protocol::kTcp;
  v.port = 80;
  v.forwarding = Forwarding::kGre;
  v.algorithm = algorithm;
  v.table_size = table_size;
  v.ring_points = ring_points;
  if (eps) v.bounded_load_epsilon = eps->eps();
  for (auto& [n, w] : backends) {
    v.backends.push_back({n, Ip(absl::StrCat("203.0.", subnet, ".", v.backends.size() + 1)), w, 0});
  }
  return v;
}

Config MakeConfig(std::vector<VipConfig> vips) {
  Config c;
  c.source = "bounded_load_pipeline_test.toml";
  c.lb.ipv4 = Ip("192.0.2.10");
  c.lb.gateway_v4 = Ip("192.0.2.1");
  c.lb.mtu = 1500;
  c.neighbors.push_back({Ip("192.0.2.1"), kGatewayMac, 0});
  c.vips = std::move(vips);
  return c;
}

std::vector<std::pair<std::string, uint32_t>> Equal(int n) {
  std::vector<std::pair<std::string, uint32_t>> out;
  for (int i = 0; i < n; ++i) out.push_back({std::string(1, static_cast<char>('a' + i)), 1});
  return out;
}

ConntrackConfig CtConfig(uint32_t capacity) {
  ConntrackConfig c;
  c.capacity = capacity;
  c.tcp_syn_timeout_s = 5;
  c.tcp_established_timeout_s = 300;
  return c;
}

using Buf = testing::PacketBuf;

Bytes Frame(const Flow& f, const char* vip, uint8_t flags) {
  Ip4 h;
  h.src = Ip(f.client);
  h.dst = Ip(vip);
  h.proto = 6;
  return testing::Frame4(h, testing::Tcp(f.sport, 80, flags));
}

class BoundedLoadPipelineTest : public ::testing::Test {
 protected:
  explicit BoundedLoadPipelineTest(uint32_t capacity = 1 << 14) : worker_(CtConfig(capacity)) {}

  void Use(const Config& c) {
    LbStateOptions opts;
    opts.port_mac = kPortMac;
    auto s = state_ ? BuildLbState(c, state_.get()) : BuildLbState(c, nullptr, opts);
    ASSERT_TRUE(s.ok()) << s.status();
    state_ = *std::move(s);
  }
  const VipState& Vip(const char* name = "web") const { return *state_->FindVip(name); }

  FlowKey Key(const Flow& f, const char* vip = kWeb) const {
    FlowKey k;
    const IpAddress c = Ip(f.client), d = Ip(vip);
    std::memcpy(k.src.data(), c.bytes.data(), 4);
    std::memcpy(k.dst.data(), d.bytes.data(), 4);
    k.src_port = f.sport;
    k.dst_port = 80;
    k.protocol = 6;
    return k;
  }
  uint32_t SlotOf(const Flow& f, const VipState& v, const char* vip = kWeb) const {
    return LookupTable::SlotOf(FlowHash(Key(f, vip), v.hash_seed), v.table->size());
  }
  uint16_t FirstChoice(const Flow& f, const VipState& v, const char* vip = kWeb) const {
    return v.table->slot(SlotOf(f, v, vip));
  }

  // The backend index a transmitted frame went to (outer IPv4 destination).
  int BackendOf(const Buf& b, const VipState& v) const {
    if (b.ref.action != PacketAction::kTransmit) return -1;
    const Bytes out = b.Out();
    for (size_t i = 0; i < v.backends.size(); ++i) {
      if (std::memcmp(out.data() + 30, v.backends[i].target.backend.bytes.data(), 4) == 0) {
        return static_cast<int>(i);
      }
    }
    return -2;
  }
  int Send(const Flow& f, uint8_t flags, uint64_t now = kT0, const char* vip = kWeb,
           const char* name = "web") {
    Buf b(Frame(f, vip, flags));
    worker_.ProcessPacket(b.ref, *state_, now);
    return BackendOf(b, Vip(name));
  }

  // Flows (distinct clients) whose first choice is backend `want`.
  std::vector<Flow> FlowsPreferring(const VipState& v, uint16_t want, size_t n, int start = 1) const {
    std::vector<Flow> out;
    for (int i = start; out.size() < n; ++i) {
      Flow f{Client(i), static_cast<uint16_t>(20000 + i % 1000)};
      if (FirstChoice(f, v) == want) out.push_back(f);
    }
    return out;
  }

  // The oracle: capacity and choice, from counts the test keeps itself.
  static uint64_t Cap(uint64_t flows_before, uint64_t w, uint64_t total_w, Ratio r) {
    if (w == 0) return 0;
    const uint64_t numer = r.num * (flows_before + 1) * w, denom = r.den * total_w;
    return (numer + denom - 1) / denom;
  }
  uint16_t Oracle(const VipState& v, uint32_t slot, const std::vector<uint64_t>& counts, Ratio r,
                  bool* passed) const {
    uint64_t flows = 0, total_w = 0;
    for (uint64_t c : counts) flows += c;
    for (const BackendState& b : v.backends) total_w += b.weight;
    const uint32_t m = v.table->size();
    std::vector<bool> seen(v.backends.size(), false);
    for (uint32_t i = 0; i < std::min(m, kBoundedLoadMaxSlots); ++i) {
      const uint16_t b = v.table->slot((slot + i) % m);
      if (seen[b]) continue;
      seen[b] = true;
      if (counts[b] < Cap(flows, v.backends[b].weight, total_w, r)) {
        *passed = i != 0;
        return b;
      }
    }
    *passed = false;
    return v.table->slot(slot);
  }

  // The worker's counts must equal what its conntrack holds, entry by entry.
  void ExpectCountsExact(const VipState& v) const {
    const FlowLoads& loads = worker_.conntrack().loads();
    uint64_t sum = 0;
    for (const BackendState& b : v.backends) {
      EXPECT_EQ(loads.active(b.counter_slot), worker_.conntrack().CountCounted(b.counter_slot, b.id))
          << "backend " << b.name;
      sum += loads.active(b.counter_slot);
    }
    EXPECT_EQ(loads.vip_active(v.counter_slot), sum);
  }

  Worker worker_;
  std::unique_ptr<const LbState> state_;
};

// Every flow prefers backend a: without the bound all 400 would go there.
TEST_F(BoundedLoadPipelineTest, SkewedNewFlowsNeverPushABackendPastTheBound) {
  Use(MakeConfig({MakeVip("web", kWeb, Equal(4), kEps25, 113)}));
  const VipState& v = Vip();
  const std::vector<Flow> flows = FlowsPreferring(v, 0, 400);
  std::vector<uint64_t> counts(4, 0);
  uint64_t passed = 0, total = 0;
  for (const Flow& f : flows) {
    bool expect_passed = false;
    const uint16_t want = Oracle(v, SlotOf(f, v), counts, kEps25, &expect_passed);
    const int got = Send(f, kTcpSyn);
    ASSERT_EQ(got, want) << f.client;
    ++counts[want];
    ++total;
    passed += expect_passed;
    // ceil((1 + eps) * average), the new flow included: 5 * F / (4 * N).
    const uint64_t bound = (5 * total + 16 - 1) / 16;
    EXPECT_LE(*std::max_element(counts.begin(), counts.end()), bound) << "after " << total << " flows";
    const FlowLoads& loads = worker_.conntrack().loads();
    for (size_t b = 0; b < 4; ++b) ASSERT_EQ(loads.active(v.backends[b].counter_slot), counts[b]);
    ASSERT_EQ(loads.vip_active(v.counter_slot), total);
  }
  EXPECT_EQ(counts[0], 125u);  // ceil(1.25 * 400 / 4): a is full, the rest went on
  EXPECT_EQ(passed, 400u - counts[0]);
  const VipCounters& vc = worker_.counters().vip[v.counter_slot];
  EXPECT_EQ(vc.bounded_load_passed.value(), passed);
  EXPECT_EQ(vc.bounded_load_over.value(), 0u);
  EXPECT_EQ(vc.new_flows.value(), 400u);
  const Worker* workers[] = {&worker_};
  const CounterTotals t = SumCounters(*state_, workers);
  EXPECT_EQ(t.vips[0].bounded_load_passed, passed);
  EXPECT_EQ(t.vips[0].bounded_load_over, 0u);
  ExpectCountsExact(v);
}

// A flow passed on goes to the next distinct backend of its preference order
// that has room: here a is full and b, next after a from these flows' slots,
// is full too, so the flow skips both.
TEST_F(BoundedLoadPipelineTest, PassedFlowsTakeTheNextDistinctBackendWithRoom) {
  Use(MakeConfig({MakeVip("web", kWeb, Equal(4), kEps25, 113)}));
  const VipState& v = Vip();
  const std::vector<uint32_t> order_a = TablePreference(*v.table, SlotOf(FlowsPreferring(v, 0, 1)[0], v), 4);
  // Flows whose order starts a, x, y: fill a and then x through the data plane.
  std::vector<Flow> probes;
  for (const Flow& f : FlowsPreferring(v, 0, 2000)) {
    if (TablePreference(*v.table, SlotOf(f, v), 4) == order_a) probes.push_back(f);
  }
  ASSERT_GE(probes.size(), 60u);
  std::vector<uint64_t> counts(4, 0);
  size_t passed_to_second = 0, passed_to_third = 0;
  uint64_t total = 0;
  for (const Flow& f : probes) {
    const int got = Send(f, kTcpSyn);
    ASSERT_GE(got, 0);
    // Every backend before it in the order was at its capacity, it was not.
    const uint64_t cap = Cap(total, 1, 4, kEps25);
    const size_t rank = std::find(order_a.begin(), order_a.end(), static_cast<uint32_t>(got)) - order_a.begin();
    ASSERT_LT(rank, order_a.size());
    for (size_t r = 0; r < rank; ++r) EXPECT_GE(counts[order_a[r]], cap) << "skipped a backend with room";
    EXPECT_LT(counts[got], cap);
    ++counts[got];
    ++total;
    passed_to_second += rank == 1;
    passed_to_third += rank == 2;
  }
  EXPECT_GT(passed_to_second, 0u);
  EXPECT_GT(passed_to_third, 0u);  // the second choice filled up too
  ExpectCountsExact(v);
}

// The data plane places flows as `maglbctl analyze` simulates them:
// BoundedLoadAssign over TablePreference, on maglev at M = 65537, N = 10.
TEST_F(BoundedLoadPipelineTest, AgreesWithAnalyzesSimulation) {
  Use(MakeConfig({MakeVip("web", kWeb, Equal(10), kEps10, 113, Algorithm::kMaglev, 65537)}));
  const VipState& v = Vip();
  std::vector<uint32_t> load(10, 0), weights(10, 1);
  uint64_t total = 0, passed = 0;
  // Half the flows prefer backend 0, so the bound binds.
  std::vector<Flow> flows = FlowsPreferring(v, 0, 1000);
  for (int i = 1; i <= 1000; ++i) flows.push_back({Client(200000 + i), 9000});
  for (const Flow& f : flows) {
    const std::vector<uint32_t> pref = TablePreference(*v.table, SlotOf(f, v), 10);
    const BoundedLoadChoice c = BoundedLoadAssign(pref, LoadView{load, weights, total, 10}, 0.1);
    ASSERT_EQ(Send(f, kTcpSyn), static_cast<int>(c.backend));
    ++load[c.backend];
    ++total;
    passed += c.rank > 0;
  }
  EXPECT_GT(passed, 0u);
  EXPECT_EQ(worker_.counters().vip[v.counter_slot].bounded_load_passed.value(), passed);
}

// Pinning wins: after b, c and d lose their flows, a sits far above the bound;
// its own flows stay with it, only new flows go elsewhere.
TEST_F(BoundedLoadPipelineTest, ExistingFlowsAreNeverMovedByTheBound) {
  Use(MakeConfig({MakeVip("web", kWeb, Equal(4), kEps25, 113)}));
  const VipState& v = Vip();
  const std::vector<Flow> flows = FlowsPreferring(v, 0, 400);
  std::map<std::string, int> placed;
  for (const Flow& f : flows) placed[f.client] = Send(f, kTcpSyn);
  for (const Flow& f : flows) {
    if (placed[f.client] == 0) continue;
    ConntrackEntry* e = worker_.conntrack().Lookup(Key(f), worker_.conntrack().HashOf(Key(f)), kT0);
    ASSERT_NE(e, nullptr);
    worker_.conntrack().Remove(e);
  }
  const FlowLoads& loads = worker_.conntrack().loads();
  EXPECT_EQ(loads.active(v.backends[0].counter_slot), 125u);
  for (size_t b = 1; b < 4; ++b) EXPECT_EQ(loads.active(v.backends[b].counter_slot), 0u);
  EXPECT_EQ(loads.vip_active(v.counter_slot), 125u);  // capacity now ceil(1.25 * 126 / 4) = 40

  const uint64_t new_flows = worker_.counters().vip[v.counter_slot].new_flows.value();
  for (const Flow& f : flows) {
    if (placed[f.client] != 0) continue;
    EXPECT_EQ(Send(f, kTcpAck), 0) << "an established flow moved";
  }
  EXPECT_EQ(worker_.counters().vip[v.counter_slot].new_flows.value(), new_flows);
  EXPECT_EQ(loads.active(v.backends[0].counter_slot), 125u);
  // A new flow that prefers a does not get it.
  const Flow fresh = FlowsPreferring(v, 0, 1, 100000)[0];
  EXPECT_NE(Send(fresh, kTcpSyn), 0);
  ExpectCountsExact(v);
}

// Counts go down as ways are reclaimed: evicted half-open flows, and expired
// flows whose ways new flows reuse (lazy expiry: not before).
class BoundedLoadSmallTableTest : public BoundedLoadPipelineTest {
 protected:
  BoundedLoadSmallTableTest() : BoundedLoadPipelineTest(64) {}
};

TEST_F(BoundedLoadSmallTableTest, CountsFollowEvictionAndExpiry) {
  Use(MakeConfig({MakeVip("web", kWeb, Equal(4), kEps25, 113)}));
  const VipState& v = Vip();
  const FlowLoads& loads = worker_.conntrack().loads();
  const size_t ways = worker_.conntrack().capacity();
  for (int i = 0; i < 300; ++i) {
    ASSERT_GE(Send({Client(i + 1), 30000}, kTcpSyn), 0);
    ExpectCountsExact(v);
  }
  EXPECT_GT(worker_.conntrack().stats().evictions, 0u);
  EXPECT_LE(loads.vip_active(v.counter_slot), ways);  // 300 placed, evicted ones gone
  EXPECT_EQ(loads.vip_active(v.counter_slot), worker_.conntrack().occupied());

  // All expired: they still count (lazy expiry) until a new flow takes their way.
  const uint64_t later = kT0 + 60 * kSec;
  EXPECT_EQ(worker_.conntrack().CountLive(later), 0u);
  const uint64_t before = loads.vip_active(v.counter_slot);
  Send({Client(9999), 1}, kTcpAck, later, "198.51.100.99");  // time passes, nothing reused
  EXPECT_EQ(loads.vip_active(v.counter_slot), before);
  const uint64_t reused = worker_.conntrack().stats().expired_reused;
  for (int i = 0; i < 20; ++i) {
    ASSERT_GE(Send({Client(5000 + i), 30000}, kTcpSyn, later), 0);
    ExpectCountsExact(v);
  }
  EXPECT_GT(worker_.conntrack().stats().expired_reused, reused);
  // Each reused way traded an old flow for a new one.
  EXPECT_EQ(loads.vip_active(v.counter_slot), before + 20 - (worker_.conntrack().stats().expired_reused - reused));
  EXPECT_EQ(loads.vip_active(v.counter_slot), worker_.conntrack().occupied());
}

// Only new connections are placed by the bound. TCP picked up mid-flow takes
// the table's choice (counted all the same), and so does a SYN that the
// conntrack cannot track, so that its next packet, placed again, agrees.
TEST_F(BoundedLoadSmallTableTest, MidFlowPickupsAndUntrackedSynsTakeTheFirstChoice) {
  Use(MakeConfig({MakeVip("web", kWeb, Equal(4), kEps25, 113)}));
  const VipState& v = Vip();
  const std::vector<Flow> flows = FlowsPreferring(v, 0, 300);
  // Mid-flow pickups (no SYN): all on a, far above its capacity; the table
  // fills with established flows, which a packet two seconds later proves.
  for (size_t i = 0; i < 200; ++i) ASSERT_EQ(Send(flows[i], kTcpAck), 0);
  Conntrack& ct = worker_.conntrack();
  for (size_t i = 0; i < 200; ++i) {
    if (ct.Lookup(Key(flows[i]), ct.HashOf(Key(flows[i])), kT0) != nullptr) {
      ASSERT_EQ(Send(flows[i], kTcpAck, kT0 + 2 * kSec), 0);
    }
  }
  ASSERT_EQ(ct.CountLive(kT0 + 2 * kSec), ct.capacity());
  const FlowLoads& loads = worker_.conntrack().loads();
  EXPECT_EQ(loads.active(v.backends[0].counter_slot), worker_.conntrack().occupied());
  ExpectCountsExact(v);
  EXPECT_EQ(worker_.counters().vip[v.counter_slot].bounded_load_passed.value(), 0u);

  // A SYN now finds no way it may take: untracked, sent to a although a is
  // full; its ACK cannot evict a proven flow either and goes to a as well.
  const uint64_t untracked = worker_.counters().untracked.value();
  for (size_t i = 200; i < 210; ++i) {
    ASSERT_EQ(Send(flows[i], kTcpSyn, kT0 + 2 * kSec), 0);
    ASSERT_EQ(Send(flows[i], kTcpAck, kT0 + 2 * kSec), 0);
  }
  EXPECT_EQ(worker_.counters().untracked.value(), untracked + 20);
  EXPECT_EQ(worker_.counters().vip[v.counter_slot].bounded_load_passed.value(), 0u);
  ExpectCountsExact(v);

  // A new connection that can be tracked is bounded: once the ways
  // expire, SYNs may take them and a is passed over.
  const uint64_t later = kT0 + 400 * kSec;
  int off_a = 0;
  for (size_t i = 210; i < 230; ++i) off_a += Send(flows[i], kTcpSyn, later) != 0;
  EXPECT_GT(off_a, 0);
  EXPECT_EQ(worker_.counters().vip[v.counter_slot].bounded_load_passed.value(),
            static_cast<uint64_t>(off_a));
  ExpectCountsExact(v);
}

// A removed backend's flows leave the average at once; its slot, handed to a
// new backend, starts from zero; the removed backend's flows are repinned
// (counted on their new backend) and never decrement the new owner.
TEST_F(BoundedLoadPipelineTest, CountsFollowBackendRemovalSlotReuseAndRepinning) {
  Use(MakeConfig({MakeVip("web", kWeb, Equal(4), kEps25, 113)}));
  std::vector<Flow> flows, on_b;
  for (int i = 1; i <= 200; ++i) flows.push_back({Client(i), 40000});
  for (const Flow& f : flows) {
    const int backend = Send(f, kTcpSyn);
    ASSERT_GE(backend, 0);
    ASSERT_EQ(Send(f, kTcpAck), backend);
    if (backend == 1) on_b.push_back(f);
  }
  ASSERT_GE(on_b.size(), 4u);
  const uint32_t b_slot = Vip().backends[1].counter_slot;
  const uint32_t b_id = Vip().backends[1].id;
  const uint64_t b_flows = worker_.conntrack().CountCounted(b_slot, b_id);
  ASSERT_GT(b_flows, 0u);

  // The worker adopts a snapshot with its next burst: one that is not for a VIP.
  const char* kNotAVip = "198.51.100.99";
  Use(MakeConfig({MakeVip("web", kWeb, {{"a", 1}, {"c", 1}, {"d", 1}}, kEps25, 113)}));
  Send({Client(9999), 1}, kTcpAck, kT0, kNotAVip);
  ExpectCountsExact(Vip());
  EXPECT_EQ(worker_.conntrack().loads().vip_active(Vip().counter_slot), 200u - b_flows);
  // Half of b's flows come back while b's slot is nobody's: repinned, and
  // their release from b's slot touches no current count.
  for (size_t i = 0; i < on_b.size() / 2; ++i) ASSERT_GE(Send(on_b[i], kTcpAck), 0);
  ExpectCountsExact(Vip());
  EXPECT_EQ(worker_.conntrack().loads().vip_active(Vip().counter_slot), 200u - b_flows + on_b.size() / 2);

  Use(MakeConfig({MakeVip("web", kWeb, {{"a", 1}, {"c", 1}, {"d", 1}, {"e", 1}}, kEps25, 113)}));
  const VipState& v = Vip();
  const BackendState& e = *std::find_if(v.backends.begin(), v.backends.end(),
                                        [](const BackendState& b) { return b.name == "e"; });
  ASSERT_EQ(e.counter_slot, b_slot) << "precondition: e reuses b's counter slot";
  Send({Client(9998), 1}, kTcpAck, kT0, kNotAVip);
  EXPECT_EQ(worker_.conntrack().loads().active(e.counter_slot), 0u);  // b's flows are not e's
  EXPECT_EQ(worker_.conntrack().CountCounted(b_slot, b_id), b_flows - on_b.size() / 2);
  ExpectCountsExact(v);

  for (const Flow& f : flows) ASSERT_GE(Send(f, kTcpAck), 0);  // b's flows are repinned
  EXPECT_EQ(worker_.conntrack().CountCounted(b_slot, b_id), 0u);
  EXPECT_EQ(worker_.counters().repinned.value(), b_flows);
  ExpectCountsExact(v);
  EXPECT_EQ(worker_.conntrack().loads().vip_active(v.counter_slot), 200u);
}

// A SYN reusing a closing flow's tuple is a new connection, re-placed by the
// bound: its count moves from the old backend to the new one.
TEST_F(BoundedLoadPipelineTest, ANewConnectionOnAClosingTupleMovesItsCount) {
  Use(MakeConfig({MakeVip("web", kWeb, Equal(4), kEps25, 113)}));
  const VipState& v = Vip();
  const std::vector<Flow> flows = FlowsPreferring(v, 0, 200);
  for (const Flow& f : flows) ASSERT_GE(Send(f, kTcpSyn), 0);
  const FlowLoads& loads = worker_.conntrack().loads();
  const uint32_t a_slot = v.backends[0].counter_slot;
  ASSERT_EQ(loads.active(a_slot), 63u);  // ceil(1.25 * 200 / 4)
  // Every flow closes; those not on a start again, each re-placed by the bound.
  int moved_to_a = 0;
  for (const Flow& f : flows) {
    const int before = Send(f, kTcpFin | kTcpAck);
    if (before == 0) continue;
    const int after = Send(f, kTcpSyn);
    ASSERT_GE(after, 0);
    moved_to_a += after == 0;
    ExpectCountsExact(v);
    ASSERT_EQ(loads.vip_active(v.counter_slot), 200u);
  }
  EXPECT_EQ(moved_to_a, 0);  // a stays at its capacity throughout
  EXPECT_EQ(loads.active(a_slot), 63u);
}

// A reload turns the bound on or off for a live VIP. Flows placed while it
// was off are not counted (the bound is relative to the counted ones) and
// keep their backend; counted flows stay exactly counted after it is off.
TEST_F(BoundedLoadPipelineTest, AReloadTurnsTheBoundOnAndOff) {
  Use(MakeConfig({MakeVip("web", kWeb, Equal(4), std::nullopt, 113)}));
  const std::vector<Flow> flows = FlowsPreferring(Vip(), 0, 300);
  for (size_t i = 0; i < 100; ++i) ASSERT_EQ(Send(flows[i], kTcpSyn), 0);

  Use(MakeConfig({MakeVip("web", kWeb, Equal(4), kEps25, 113)}));
  ASSERT_EQ(state_->change().vips_changed.size(), 1u);  // the log names the VIP
  const VipState& v = Vip();
  EXPECT_EQ(v.bounded_load_epsilon, 0.25);
  for (size_t i = 0; i < 100; ++i) ASSERT_EQ(Send(flows[i], kTcpAck), 0);  // pinned, uncounted
  const FlowLoads& loads = worker_.conntrack().loads();
  EXPECT_EQ(loads.vip_active(v.counter_slot), 0u);
  for (size_t i = 100; i < 200; ++i) ASSERT_GE(Send(flows[i], kTcpSyn), 0);
  EXPECT_EQ(loads.vip_active(v.counter_slot), 100u);
  EXPECT_EQ(loads.active(v.backends[0].counter_slot), 32u);  // ceil(1.25 * 100 / 4)
  ExpectCountsExact(v);

  Use(MakeConfig({MakeVip("web", kWeb, Equal(4), std::nullopt, 113)}));
  for (size_t i = 200; i < 300; ++i) ASSERT_EQ(Send(flows[i], kTcpSyn), 0);  // no bound
  ExpectCountsExact(Vip());
  EXPECT_EQ(loads.vip_active(Vip().counter_slot), 100u);
}

// Weights: capacities follow them; a weight-0 (draining) backend takes no new flow.
TEST_F(BoundedLoadPipelineTest, WeightedCapacitiesAndDrainingBackends) {
  Use(MakeConfig({MakeVip("web", kWeb, {{"a", 1}, {"b", 2}, {"c", 3}, {"d", 0}}, kEps10, 113)}));
  const VipState& v = Vip();
  const uint16_t c = static_cast<uint16_t>(
      std::find_if(v.backends.begin(), v.backends.end(), [](const BackendState& b) { return b.name == "c"; }) -
      v.backends.begin());
  std::vector<Flow> flows = FlowsPreferring(v, c, 300);
  for (int i = 1; i <= 300; ++i) flows.push_back({Client(100000 + i), 50000});  // and ordinary ones
  std::vector<uint64_t> counts(4, 0);
  uint64_t total = 0;
  for (const Flow& f : flows) {
    bool passed = false;
    const uint16_t want = Oracle(v, SlotOf(f, v), counts, kEps10, &passed);
    ASSERT_EQ(Send(f, kTcpSyn), want);
    ++counts[want];
    ++total;
    for (size_t b = 0; b < 4; ++b) {
      // ceil(1.1 * F * w / W), W = 6.
      const uint64_t bound = (11 * total * v.backends[b].weight + 60 - 1) / 60;
      EXPECT_LE(counts[b], bound) << v.backends[b].name << " after " << total;
    }
  }
  for (size_t b = 0; b < 4; ++b) {
    if (v.backends[b].weight == 0) {
      EXPECT_EQ(counts[b], 0u);
    }
  }
  EXPECT_GT(worker_.counters().vip[v.counter_slot].bounded_load_passed.value(), 0u);
  ExpectCountsExact(v);
}

// A ring with one point per backend leaves long runs of one backend in the
// table: a flow deep in a's run sees no other backend within the walk's
// kBoundedLoadMaxSlots slots and keeps its first choice (counted as over);
// one near the end of the run passes to the next backend.
TEST_F(BoundedLoadPipelineTest, TheWalkIsBoundedAndFallsBackToTheFirstChoice) {
  Use(MakeConfig({MakeVip("web", kWeb, Equal(2), kEps10, 113, Algorithm::kRing, 4093, 1)}));
  const VipState& v = Vip();
  const uint32_t m = v.table->size();
  auto run_ahead = [&](uint32_t slot) {
    uint32_t n = 0;
    while (n < m && v.table->slot((slot + n) % m) == v.table->slot(slot)) ++n;
    return n;
  };
  std::vector<Flow> deep, shallow;
  for (int i = 1; deep.size() < 50 || shallow.size() < 50; ++i) {
    ASSERT_LT(i, 200000);
    const Flow f{Client(i), 60000};
    const uint32_t s = SlotOf(f, v);
    if (v.table->slot(s) != 0) continue;
    const uint32_t ahead = run_ahead(s);
    if (ahead > kBoundedLoadMaxSlots && deep.size() < 50) deep.push_back(f);
    if (ahead < kBoundedLoadMaxSlots / 2 && shallow.size() < 50) shallow.push_back(f);
  }
  std::vector<uint64_t> counts(2, 0);
  uint64_t over = 0, passed_n = 0;
  for (const std::vector<Flow>* group : {&deep, &shallow}) {
    for (const Flow& f : *group) {
      bool passed = false;
      const uint16_t want = Oracle(v, SlotOf(f, v), counts, kEps10, &passed);
      const uint64_t total_before = counts[0] + counts[1];
      const bool a_full = counts[0] >= Cap(total_before, 1, 2, kEps10);
      ASSERT_EQ(Send(f, kTcpSyn), want);
      ++counts[want];
      over += a_full && !passed;
      passed_n += passed;
    }
  }
  const VipCounters& vc = worker_.counters().vip[v.counter_slot];
  EXPECT_GT(over, 0u);
  EXPECT_GT(passed_n, 0u);
  EXPECT_EQ(vc.bounded_load_over.value(), over);
  EXPECT_EQ(vc.bounded_load_passed.value(), passed_n);
  ExpectCountsExact(v);
}

// A VIP without epsilon is untouched: every new flow takes the table's choice,
// nothing is counted, and its output is byte for byte what a worker whose
// config has no bounded load at all sends.
TEST_F(BoundedLoadPipelineTest, AVipWithoutEpsilonBehavesExactlyAsBefore) {
  Use(MakeConfig({MakeVip("web", kWeb, Equal(4), std::nullopt, 113),
                  MakeVip("api", kApi, Equal(4), kEps25, 114)}));
  LbStateOptions opts;
  opts.port_mac = kPortMac;
  const std::unique_ptr<const LbState> plain =
      *BuildLbState(MakeConfig({MakeVip("web", kWeb, Equal(4), std::nullopt, 113),
                                MakeVip("api", kApi, Equal(4), std::nullopt, 114)}),
                    nullptr, opts);
  Worker reference(CtConfig(1 << 14));
  const VipState& v = Vip();
  const std::vector<Flow> flows = FlowsPreferring(v, 0, 300);
  for (const Flow& f : flows) {
    for (uint8_t flags : {kTcpSyn, kTcpAck}) {
      Buf ours(Frame(f, kWeb, flags)), theirs(Frame(f, kWeb, flags));
      worker_.ProcessPacket(ours.ref, *state_, kT0);
      reference.ProcessPacket(theirs.ref, *plain, kT0);
      ASSERT_EQ(ours.ref.action, PacketAction::kTransmit);
      ASSERT_EQ(BackendOf(ours, v), 0);  // all 300 on a: no bound
      ASSERT_EQ(ours.Out(), theirs.Out());
    }
  }
  // The other VIP's bound is its own business: its flows are counted, web's are not.
  for (int i = 1; i <= 40; ++i) ASSERT_GE(Send({Client(i), 7000}, kTcpSyn, kT0, kApi, "api"), 0);
  const FlowLoads& loads = worker_.conntrack().loads();
  for (const BackendState& b : v.backends) {
    EXPECT_EQ(loads.active(b.counter_slot), 0u);
    EXPECT_EQ(worker_.conntrack().CountCounted(b.counter_slot, b.id), 0u);
  }
  EXPECT_EQ(loads.vip_active(v.counter_slot), 0u);
  EXPECT_EQ(loads.vip_active(Vip("api").counter_slot), 40u);
  ExpectCountsExact(Vip("api"));
  EXPECT_EQ(worker_.counters().vip[v.counter_slot].bounded_load_passed.value(), 0u);
  EXPECT_EQ(worker_.counters().vip[v.counter_slot].bounded_load_over.value(), 0u);
}

}  // namespace
}  // namespace maglb
