// Bounded loads: flows arrive with a preference order per scheme and take the
// first backend below ceil((1 + eps) * average).
#include "analyze_bounded_load.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analyze_classic.h"
#include "classic_hash.h"
#include "maglb/bounded_load.h"
#include "maglb/maglev.h"

namespace maglb::analyze {
namespace {

struct Preferences {
  std::string scheme;
  std::vector<std::vector<uint32_t>> order;  // per flow, all N backends
};

std::vector<Preferences> BoundedLoadPreferences(const std::vector<ClassicKey>& keys, uint32_t n) {
  std::vector<Preferences> out;
  std::vector<uint32_t> servers = Range(n);
  std::vector<BackendSpec> specs;
  for (uint32_t s : servers) specs.push_back({ClassicServerName(s), 1});
  LookupTable maglev = *BuildMaglevTable(specs, kDefaultTableSize);
  Preferences p{"maglev (successive slots)", {}};
  for (const ClassicKey& k : keys) {
    p.order.push_back(TablePreference(maglev, LookupTable::SlotOf(uint64_t{k.hash} << 32,
                                                                  maglev.size()), n));
  }
  out.push_back(std::move(p));

  p = {"rendezvous (score order)", {}};
  for (const ClassicKey& k : keys) {
    std::vector<std::pair<uint32_t, uint32_t>> scored;
    for (uint32_t s : servers) scored.push_back({ClassicHash32(absl::StrCat(k.text, "|S", s)), s});
    std::sort(scored.begin(), scored.end(), [](auto a, auto b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    std::vector<uint32_t> order;
    for (auto [h, s] : scored) order.push_back(s);
    p.order.push_back(std::move(order));
  }
  out.push_back(std::move(p));

  for (uint32_t v : {100u, 1u}) {
    HashRing ring = ClassicRing(servers, v);
    p = {absl::StrFormat("ring V=%u (clockwise)", v), {}};
    for (const ClassicKey& k : keys) {
      std::vector<uint32_t> order;
      std::vector<bool> seen(n, false);
      size_t i = ring.OwnerPoint(k.hash);
      while (order.size() < n) {
        uint32_t b = ring.points()[i].backend;
        if (!seen[b]) seen[b] = true, order.push_back(b);
        if (++i == ring.points().size()) i = 0;
      }
      p.order.push_back(std::move(order));
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

using report::Int;
using report::Num;
using report::Str;
using report::Table;

Table BoundedLoadSimulation(uint32_t n, size_t flows) {
  Table t;
  t.id = "bounded_load";
  t.title = absl::StrFormat("Bounded loads (Mirrokni et al.): %zu flows onto %u backends", flows,
                            n);
  t.notes = {"each new flow takes the first backend in its preference order whose active flows "
             "are below ceil((1 + eps) * (F + 1) / N), F the flows before it",
             "arrivals: all flows stay. churn: the same number then arrive and leave one for one "
             "(a random active flow leaves before each arrival); established flows never move, so "
             "after departures a backend can sit above the current bound, but never takes a new "
             "flow there",
             "over_bound: assignments that left the chosen backend above the bound (must be 0); "
             "max_over_now: the most any backend was above the bound at an arrival"};
  t.columns = report::Columns({"scheme", "eps", "run", "bound_at_end", "max_load_plain",
                               "max_load_bounded", "over_bound", "max_over_now",
                               "moved_off_first", "moved_off_first_%", "mean_rank"});
  std::vector<ClassicKey> keys = MakeKeys(2 * flows);
  std::vector<Preferences> prefs = BoundedLoadPreferences(keys, n);
  for (const Preferences& p : prefs) {
    for (double eps : {0.25, 0.1}) {
      for (bool churn : {false, true}) {
        std::vector<uint32_t> load(n, 0), plain(n, 0), weights(n, 1);
        std::vector<uint32_t> live;  // backend of each active flow, in arrival order
        std::vector<uint32_t> live_plain;
        uint64_t total = 0, moved = 0, rank_sum = 0, over = 0;
        int64_t max_over_now = 0;
        Mulberry32 rng(kClassicSeed);
        size_t events = churn ? 2 * flows : flows;
        for (size_t i = 0; i < events; ++i) {
          if (churn && i >= flows) {
            size_t k = rng.NextU32() % live.size();
            --load[live[k]];
            --plain[live_plain[k]];
            --total;
            live[k] = live.back();
            live.pop_back();
            live_plain[k] = live_plain.back();
            live_plain.pop_back();
          }
          const std::vector<uint32_t>& pref = p.order[i];
          LoadView view{load, weights, total, n};
          uint64_t cap = BoundedLoadCapacity(view, 0, eps);
          for (uint32_t b = 0; b < n; ++b) {
            max_over_now = std::max(max_over_now, int64_t{load[b]} - static_cast<int64_t>(cap));
          }
          BoundedLoadChoice c = BoundedLoadAssign(pref, view, eps);
          ++load[c.backend];
          ++plain[pref[0]];
          ++total;
          live.push_back(c.backend);
          live_plain.push_back(pref[0]);
          over += !c.within_bound || load[c.backend] > cap;
          moved += c.rank > 0;
          rank_sum += c.rank;
        }
        uint64_t bound = static_cast<uint64_t>(std::ceil((1 + eps) * total / n - 1e-9));
        t.rows.push_back({Str(p.scheme), Num(eps, 2), Str(churn ? "churn" : "arrivals"),
                          Int(static_cast<double>(bound)),
                          Int(*std::max_element(plain.begin(), plain.end())),
                          Int(*std::max_element(load.begin(), load.end())), Int(over),
                          Int(static_cast<double>(max_over_now)), Int(static_cast<double>(moved)),
                          Num(100.0 * moved / events, 2),
                          Num(static_cast<double>(rank_sum) / events, 3)});
      }
    }
  }
  return t;
}

}  // namespace maglb::analyze
