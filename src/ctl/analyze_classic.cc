// The classic recipe: schemes as functions of a key string, on servers
// "S<i>" given by index. owner() returns the server index.
#include "analyze_classic.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analyze_theory.h"
#include "classic_hash.h"
#include "maglb/maglev.h"

namespace maglb::analyze {

using report::Num;
using report::Int;
using report::Str;
using report::Table;

const char kClassicRecipeNote[] =
    "recipe: hash = fmix32(FNV-1a 32); keys \"user:\" + floor(r * 1e9), r from "
    "mulberry32(16) restarted per experiment; servers S0..S<n-1>, ring points "
    "\"S<s>#<i>\", rendezvous hash(key + \"|\" + server), jump key = the 32-bit "
    "hash, modulo hash % N; maglev: a 65537-slot table of the names (maglb's "
    "XXH64) looked up with the key hash";

std::vector<ClassicKey> MakeKeys(size_t n) {
  std::vector<ClassicKey> keys;
  for (std::string& k : ClassicKeys(n)) {
    uint32_t h = ClassicHash32(k);
    keys.push_back({std::move(k), h});
  }
  return keys;
}

HashRing ClassicRing(const std::vector<uint32_t>& servers, uint32_t points) {
  uint32_t max_server = *std::max_element(servers.begin(), servers.end());
  std::vector<uint32_t> rank(max_server + 1);
  std::iota(rank.begin(), rank.end(), 0u);  // ties: the lower server index
  std::vector<RingPoint> p;
  for (uint32_t s : servers) {
    for (uint32_t i = 0; i < points; ++i) {
      p.push_back({ClassicHash32(absl::StrCat("S", s, "#", i)), s});
    }
  }
  return HashRing(std::move(p), rank);
}

std::vector<uint32_t> Range(uint32_t n) {
  std::vector<uint32_t> v(n);
  std::iota(v.begin(), v.end(), 0u);
  return v;
}

namespace {

struct KeyScheme {
  std::string name;
  std::function<uint32_t(const ClassicKey&)> owner;
};

uint32_t ClassicRendezvous(const ClassicKey& k, const std::vector<uint32_t>& servers) {
  uint32_t best = servers[0], best_h = 0;
  bool first = true;
  for (uint32_t s : servers) {
    uint32_t h = ClassicHash32(absl::StrCat(k.text, "|S", s));
    if (first || h > best_h || (h == best_h && s < best)) best = s, best_h = h, first = false;
  }
  return best;
}

// Every scheme over `servers` (a list of server indices, in index order).
// Maglev has no key-level form: it is a table, built from the names with
// maglb's own hash at M = 65537, looked up with the key's 32-bit hash as the
// high half of the flow hash.
std::vector<KeyScheme> ClassicSchemes(const std::vector<uint32_t>& servers, uint32_t ring_points) {
  std::vector<KeyScheme> out;
  std::vector<BackendSpec> specs;
  for (uint32_t s : servers) specs.push_back({ClassicServerName(s), 1});
  auto table = std::make_shared<LookupTable>(*BuildMaglevTable(specs, kDefaultTableSize));
  out.push_back({"maglev", [table, servers](const ClassicKey& k) {
                   return servers[table->Lookup(uint64_t{k.hash} << 32)];
                 }});
  auto ring = std::make_shared<HashRing>(ClassicRing(servers, ring_points));
  out.push_back({"ring", [ring](const ClassicKey& k) { return ring->Owner(k.hash); }});
  out.push_back({"rendezvous",
                 [servers](const ClassicKey& k) { return ClassicRendezvous(k, servers); }});
  out.push_back({"jump", [servers](const ClassicKey& k) {
                   return servers[JumpConsistentHash(k.hash, static_cast<int32_t>(servers.size()))];
                 }});
  out.push_back({"modulo", [servers](const ClassicKey& k) {
                   return servers[k.hash % servers.size()];
                 }});
  return out;
}

struct KeyMovement {
  double moved = 0, to_new = 0, between_old = 0;
};

// Compares owners before and after; `new_server` is the added one (or -1).
KeyMovement MoveKeys(const std::vector<ClassicKey>& keys, const KeyScheme& before,
                     const KeyScheme& after, int64_t new_server) {
  KeyMovement m;
  for (const ClassicKey& k : keys) {
    uint32_t a = before.owner(k), b = after.owner(k);
    if (a == b) continue;
    m.moved += 1;
    if (static_cast<int64_t>(b) == new_server) {
      m.to_new += 1;
    } else if (new_server >= 0) {
      m.between_old += 1;
    }
  }
  double n = static_cast<double>(keys.size());
  m.moved /= n;
  m.to_new /= n;
  m.between_old /= n;
  return m;
}

}  // namespace

Table AddServerExperiment(const std::vector<ClassicKey>& keys, uint32_t n, uint32_t ring_points) {
  Table t;
  t.id = absl::StrFormat("classic_add_%d_to_%d", n, n + 1);
  t.title = absl::StrFormat("%zu keys, %u -> %u servers (ring: %u points per server)", keys.size(),
                            n, n + 1, ring_points);
  t.notes = {absl::StrFormat("theory: a consistent scheme moves 1/(N+1) = %.4f, all to the new "
                             "server; mod-N moves 1 - 1/(N+1) = %.4f, of which 1 - 2/(N+1) between "
                             "old servers; maglev's between_old_theory is its bound (1%% of the "
                             "table, as the unit tests hold it), not an expectation",
                             1.0 / (n + 1), 1.0 - 1.0 / (n + 1))};
  t.columns = report::Columns(
      {"scheme", "moved", "moved_theory", "to_new", "between_old", "between_old_theory"});
  std::vector<KeyScheme> before = ClassicSchemes(Range(n), ring_points);
  std::vector<KeyScheme> after = ClassicSchemes(Range(n + 1), ring_points);
  for (size_t i = 0; i < before.size(); ++i) {
    KeyMovement m = MoveKeys(keys, before[i], after[i], n);
    bool modulo = before[i].name == "modulo";
    bool maglev = before[i].name == "maglev";
    t.rows.push_back({Str(before[i].name), Num(m.moved),
                      Num(modulo ? 1.0 - 1.0 / (n + 1) : 1.0 / (n + 1)), Num(m.to_new),
                      Num(m.between_old),
                      Num(maglev ? kMaglevChurnBound : (modulo ? 1.0 - 2.0 / (n + 1) : 0.0))});
  }
  return t;
}

Table RemoveServerExperiment(const std::vector<ClassicKey>& keys, uint32_t n,
                             uint32_t ring_points) {
  Table t;
  t.id = absl::StrFormat("classic_remove_1_of_%d", n);
  t.title = absl::StrFormat("%zu keys, removing 1 of %u servers (the last, S%u, and a middle one, "
                            "S%u)",
                            keys.size(), n, n - 1, n / 2);
  t.notes = {absl::StrFormat("theory: a consistent scheme moves only the removed server's keys, "
                             "1/N = %.4f; mod-N moves 1 - 1/N = %.4f, of which 1 - 2/N between "
                             "survivors. Jump can only shrink at the end: removing bucket k of N "
                             "(0-based) renumbers the rest and moves 1 - k/N - 1/(N(N-1)), of "
                             "which all but 1/N between survivors (1/N and 0 for the last). "
                             "maglev's between_survivors_theory is its 1%% bound",
                             1.0 / n, 1.0 - 1.0 / n)};
  t.columns = report::Columns({"scheme", "removed", "moved", "moved_theory",
                               "between_survivors", "between_survivors_theory"});
  std::vector<KeyScheme> before = ClassicSchemes(Range(n), ring_points);
  for (uint32_t victim : {n - 1, n / 2}) {
    std::vector<uint32_t> rest;
    for (uint32_t s = 0; s < n; ++s) {
      if (s != victim) rest.push_back(s);
    }
    std::vector<KeyScheme> after = ClassicSchemes(rest, ring_points);
    for (size_t i = 0; i < before.size(); ++i) {
      KeyMovement m = MoveKeys(keys, before[i], after[i], -1);
      // Keys of the victim must move; the rest moved between survivors.
      double victim_share = 0;
      for (const ClassicKey& k : keys) victim_share += before[i].owner(k) == victim;
      victim_share /= static_cast<double>(keys.size());
      const std::string& name = before[i].name;
      // Servers are S0..S<n-1> in bucket order, so the victim's bucket is its index.
      JumpRemoval jump = JumpRemovalTheory(n, victim);
      double moved_theory = name == "modulo" ? 1.0 - 1.0 / n
                            : name == "jump" ? jump.moved
                                             : 1.0 / n;
      double between_theory = name == "modulo"   ? 1.0 - 2.0 / n
                              : name == "jump"   ? jump.between
                              : name == "maglev" ? kMaglevChurnBound
                                                 : 0.0;
      t.rows.push_back({Str(name), Str(ClassicServerName(victim)), Num(m.moved),
                        Num(moved_theory), Num(m.moved - victim_share), Num(between_theory)});
    }
  }
  return t;
}

Table KeyBalanceExperiment(const std::vector<ClassicKey>& keys, uint32_t n) {
  Table t;
  t.id = "classic_balance";
  t.title = absl::StrFormat("Load balance of %zu keys over %u servers", keys.size(), n);
  double sampling = std::sqrt((n - 1.0) / static_cast<double>(keys.size()));
  t.notes = {"theory: ring sd/avg ~ 1/sqrt(V) (a server's share is a sum of V arcs); the others "
             "draw each key independently, sd/avg ~ sqrt((N-1)/K) = " +
                 absl::StrFormat("%.4f", sampling) +
                 " from sampling keys alone (a floor that the ring also has)",
             "max/avg theory: expected maximum of N exponential shares (harmonic number H_N) for "
             "V = 1, else 1 + cv * sqrt(2 ln N)"};
  t.columns = report::Columns({"scheme", "min", "max", "sd", "sd/avg", "sd/avg_theory",
                               "max/avg", "max/avg_theory"});
  auto row = [&](const std::string& name, const std::function<uint32_t(const ClassicKey&)>& owner,
                 double cv_theory, double max_theory) {
    std::vector<double> counts(n, 0);
    for (const ClassicKey& k : keys) counts[owner(k)] += 1;
    Balance b = BalanceOf(counts, EqualShares(static_cast<double>(keys.size()), n));
    t.rows.push_back({Str(name), Int(b.min * b.avg), Int(b.max * b.avg), Num(b.cv * b.avg, 1),
                      Num(b.cv), Num(cv_theory), Num(b.max), Num(max_theory)});
  };
  double harmonic = 0;
  for (uint32_t i = 1; i <= n; ++i) harmonic += 1.0 / i;
  for (uint32_t v : {1u, 10u, 100u, 1000u}) {
    HashRing ring = ClassicRing(Range(n), v);
    double cv = 1 / std::sqrt(static_cast<double>(v));
    row(absl::StrFormat("ring V=%u", v), [&](const ClassicKey& k) { return ring.Owner(k.hash); },
        cv, v == 1 ? harmonic : MaxOverAvgApprox(cv, n));
  }
  for (const KeyScheme& s : ClassicSchemes(Range(n), 100)) {
    if (s.name == "ring") continue;
    row(s.name, s.owner, sampling, MaxOverAvgApprox(sampling, n));
  }
  return t;
}

}  // namespace maglb::analyze
