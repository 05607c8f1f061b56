// maglbctl analyze: balance and disruption of every hashing scheme, measured
// beside theory, on the textbook recipe (--classic), on a config file's VIPs
// (--config), and for bounded loads. Output as text, JSON, or a gnuplot PNG.
#include "analyze.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "maglb/bounded_load.h"
#include "maglb/classic_hash.h"
#include "maglb/config.h"
#include "maglb/hashing.h"
#include "maglb/maglev.h"

namespace maglb {

const char kAnalyzeUsage[] =
    "  maglbctl analyze [--classic] [--config FILE] [--format text|json] [--plot FILE.png]\n"
    "      every hashing scheme (maglev, ring, rendezvous, jump, modulo) side by side,\n"
    "      measured beside theory: --classic (the default) runs the textbook\n"
    "      experiments and a bounded-load simulation; --config gives, per VIP, what\n"
    "      each scheme would do with its backends; --plot draws balance and\n"
    "      disruption with gnuplot\n";

namespace {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

// ---------------------------------------------------------------------------
// A report: tables of named columns, rendered as text or JSON.

struct Value {
  bool is_number = false;
  double number = 0;
  int digits = 4;
  std::string text;
};
Value Num(double v, int digits = 4) { return {true, v, digits, ""}; }
Value Int(double v) { return {true, v, 0, ""}; }
Value Str(std::string s) { return {false, 0, 0, std::move(s)}; }

struct Table {
  std::string id, title;
  std::vector<std::string> notes;
  std::vector<std::string> columns;
  std::vector<std::vector<Value>> rows;
};

std::string FormatText(const Value& v) {
  if (!v.is_number) return v.text;
  if (!std::isfinite(v.number)) return "-";
  return absl::StrFormat("%.*f", v.digits, v.number);
}

void PrintText(const std::vector<Table>& tables) {
  for (const Table& t : tables) {
    std::printf("== %s\n", t.title.c_str());
    for (const std::string& n : t.notes) std::printf("   %s\n", n.c_str());
    std::vector<size_t> width(t.columns.size());
    for (size_t c = 0; c < t.columns.size(); ++c) width[c] = t.columns[c].size();
    for (const auto& row : t.rows) {
      for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], FormatText(row[c]).size());
    }
    std::string line = " ";
    for (size_t c = 0; c < t.columns.size(); ++c) {
      absl::StrAppend(&line, " ", c == 0 ? absl::StrFormat("%-*s", width[c], t.columns[c])
                                         : absl::StrFormat("%*s", width[c], t.columns[c]));
    }
    std::printf("%s\n", line.c_str());
    for (const auto& row : t.rows) {
      line = " ";
      for (size_t c = 0; c < row.size(); ++c) {
        std::string s = FormatText(row[c]);
        absl::StrAppend(&line, " ", c == 0 ? absl::StrFormat("%-*s", width[c], s)
                                           : absl::StrFormat("%*s", width[c], s));
      }
      std::printf("%s\n", line.c_str());
    }
    std::printf("\n");
  }
}

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string JsonValue(const Value& v) {
  if (!v.is_number) return JsonString(v.text);
  if (!std::isfinite(v.number)) return "null";
  if (v.digits == 0) return absl::StrFormat("%.0f", v.number);
  return absl::StrFormat("%.9g", v.number);
}

void PrintJson(const std::vector<Table>& tables) {
  std::string out = "{\"tables\": [";
  for (size_t i = 0; i < tables.size(); ++i) {
    const Table& t = tables[i];
    std::vector<std::string> notes, rows;
    for (const std::string& n : t.notes) notes.push_back(JsonString(n));
    for (const auto& row : t.rows) {
      std::vector<std::string> fields;
      for (size_t c = 0; c < row.size(); ++c) {
        fields.push_back(absl::StrCat(JsonString(t.columns[c]), ": ", JsonValue(row[c])));
      }
      rows.push_back(absl::StrCat("{", absl::StrJoin(fields, ", "), "}"));
    }
    absl::StrAppend(&out, i ? ",\n" : "\n", " {\"id\": ", JsonString(t.id),
                    ", \"title\": ", JsonString(t.title), ",\n  \"notes\": [",
                    absl::StrJoin(notes, ", "), "],\n  \"rows\": [\n   ",
                    absl::StrJoin(rows, ",\n   "), "]}");
  }
  out += "\n]}\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
}

// ---------------------------------------------------------------------------
// Statistics.

// A backend's entries over what its weight share promises: 1.0 = exact.
// `avg` is the mean expected count, so that min * avg and max * avg read as
// entry counts when weights are equal.
struct Balance {
  double min = 0, max = 0, cv = 0, avg = 0;
};

Balance BalanceOf(const std::vector<double>& counts, const std::vector<double>& expected) {
  Balance b;
  if (counts.empty()) return b;
  std::vector<double> x(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) x[i] = counts[i] / expected[i];
  b.min = *std::min_element(x.begin(), x.end());
  b.max = *std::max_element(x.begin(), x.end());
  double var = 0;
  for (double v : x) var += (v - 1) * (v - 1);
  b.cv = std::sqrt(var / static_cast<double>(x.size()));
  b.avg = std::accumulate(expected.begin(), expected.end(), 0.0) / static_cast<double>(x.size());
  return b;
}

// Equal shares of `total` over n.
std::vector<double> EqualShares(double total, size_t n) {
  return std::vector<double>(n, total / static_cast<double>(n));
}

// The expected largest of N draws relative to the mean, for a spread of cv:
// Gaussian approximation 1 + cv * sqrt(2 ln N) (an upper estimate).
double MaxOverAvgApprox(double cv, size_t n) {
  return 1 + cv * std::sqrt(2 * std::log(static_cast<double>(n)));
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Maglev's churn between surviving backends has no closed form; its theory
// cell is the bound that the unit tests hold it to (1% of the table).
constexpr double kMaglevChurnBound = 0.01;

// Jump hash over N buckets when bucket k (0-based, in the bucket order) is
// removed and the buckets after it are renumbered down by one. A key's bucket
// among N - 1 is b' = jump(key, N - 1), uniform; jump(key, N) equals b' except
// with probability 1/N, when it is N - 1. A key keeps its server when
//  - jump(key, N) = b' < k (probability (N-1)/N * k/(N-1) = k/N), or
//  - jump(key, N) = N - 1 and b' = N - 2, which after renumbering is the old
//    bucket N - 1 again (probability 1/N * 1/(N-1); needs k < N - 1).
// So `moved` = 1 - k/N - 1/(N(N-1)) for k < N - 1, and 1/N for k = N - 1 (only
// the last bucket's keys); `between` = moved - 1/N, the part not forced by
// the removed bucket's own keys.
struct JumpRemoval {
  double moved, between;
};
JumpRemoval JumpRemovalTheory(uint32_t n, uint32_t k) {
  double dn = n;
  if (k + 1 >= n) return {1 / dn, 0};
  double moved = 1 - k / dn - 1 / (dn * (dn - 1));
  return {moved, moved - 1 / dn};
}

// ---------------------------------------------------------------------------
// The classic recipe: schemes as functions of a key string, on servers
// "S<i>" given by index. owner() returns the server index.

struct ClassicKey {
  std::string text;
  uint32_t hash;  // ClassicHash32(text)
};

std::vector<ClassicKey> MakeKeys(size_t n) {
  std::vector<ClassicKey> keys;
  for (std::string& k : ClassicKeys(n)) {
    uint32_t h = ClassicHash32(k);
    keys.push_back({std::move(k), h});
  }
  return keys;
}

struct KeyScheme {
  std::string name;
  std::function<uint32_t(const ClassicKey&)> owner;
};

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

std::vector<uint32_t> Range(uint32_t n) {
  std::vector<uint32_t> v(n);
  std::iota(v.begin(), v.end(), 0u);
  return v;
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
  t.columns = {"scheme", "moved", "moved_theory", "to_new", "between_old", "between_old_theory"};
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
  t.columns = {"scheme", "removed", "moved", "moved_theory", "between_survivors",
               "between_survivors_theory"};
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
  t.columns = {"scheme", "min", "max", "sd", "sd/avg", "sd/avg_theory", "max/avg",
               "max/avg_theory"};
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

// ---------------------------------------------------------------------------
// Tables at M slots, maglb's own hashes: the data plane's view.

struct SchemeBuilder {
  std::string name;
  std::function<absl::StatusOr<LookupTable>(std::span<const BackendSpec>, uint32_t)> build;
};

std::vector<SchemeBuilder> AllSchemes(uint32_t ring_points) {
  return {
      {"maglev", [](std::span<const BackendSpec> b, uint32_t m) { return BuildMaglevTable(b, m); }},
      {"ring", [ring_points](std::span<const BackendSpec> b,
                             uint32_t m) { return BuildRingTable(b, m, ring_points); }},
      {"rendezvous",
       [](std::span<const BackendSpec> b, uint32_t m) { return BuildRendezvousTable(b, m); }},
      {"jump", [](std::span<const BackendSpec> b, uint32_t m) { return BuildJumpTable(b, m); }},
      {"modulo", [](std::span<const BackendSpec> b, uint32_t m) { return BuildModuloTable(b, m); }},
  };
}

// Theoretical sd/avg of a backend's entries (equal weights), by scheme.
double CvTheory(const std::string& scheme, uint32_t n, uint32_t m, uint32_t ring_points) {
  double sampling = std::sqrt((n - 1.0) / m);
  if (scheme == "maglev") {
    // Perfect up to rounding: entries are floor or ceil of M/N.
    double avg = static_cast<double>(m) / n, frac = avg - std::floor(avg);
    return std::sqrt(frac * (1 - frac)) / avg;
  }
  if (scheme == "ring") return std::sqrt(1.0 / ring_points + sampling * sampling);
  return sampling;
}

struct SlotMovement {
  double moved = 0, between_survivors = 0;
};

// Both tables list backends by name; `gone` (may be empty) is the backend that
// left, `added` the one that came; everything else survives.
SlotMovement CompareTables(const LookupTable& a, const LookupTable& b, const std::string& gone,
                           const std::string& added) {
  SlotMovement mv;
  for (uint32_t s = 0; s < a.size(); ++s) {
    const std::string& from = a.backend_names()[a.slot(s)];
    const std::string& to = b.backend_names()[b.slot(s)];
    if (from == to) continue;
    mv.moved += 1;
    if (from != gone && to != added) mv.between_survivors += 1;
  }
  mv.moved /= a.size();
  mv.between_survivors /= a.size();
  return mv;
}

struct TableFigures {
  std::string scheme;
  uint32_t n;
  Balance balance;
  SlotMovement add, remove;
};

std::vector<BackendSpec> NumberedBackends(uint32_t n) {
  std::vector<BackendSpec> b;
  // Zero-padded, so that the added backend's name sorts last (jump's case).
  for (uint32_t i = 0; i < n; ++i) b.push_back({absl::StrFormat("backend-%05u", i), 1});
  return b;
}

absl::StatusOr<std::vector<TableFigures>> MeasureTables(uint32_t m, uint32_t ring_points) {
  std::vector<TableFigures> out;
  for (uint32_t n : {10u, 100u, 1000u}) {
    std::vector<BackendSpec> base = NumberedBackends(n);
    std::vector<BackendSpec> more = NumberedBackends(n + 1);
    std::vector<BackendSpec> fewer = base;
    std::string gone = fewer[n / 2].name;
    fewer.erase(fewer.begin() + n / 2);
    for (const SchemeBuilder& sc : AllSchemes(ring_points)) {
      absl::StatusOr<LookupTable> t0 = sc.build(base, m), t1 = sc.build(more, m),
                                  t2 = sc.build(fewer, m);
      for (auto* t : {&t0, &t1, &t2}) {
        if (!t->ok()) return t->status();
      }
      TableFigures f{sc.name, n, {}, {}, {}};
      std::vector<uint32_t> c = t0->EntryCounts();
      f.balance = BalanceOf(std::vector<double>(c.begin(), c.end()), EqualShares(m, n));
      f.add = CompareTables(*t0, *t1, "", more.back().name);
      f.remove = CompareTables(*t0, *t2, gone, "");
      out.push_back(f);
    }
  }
  return out;
}

std::vector<Table> TableExperiments(const std::vector<TableFigures>& figures, uint32_t m,
                                    uint32_t ring_points) {
  Table bal, dis;
  bal.id = "table_balance";
  bal.title = absl::StrFormat("Table balance at M = %u (maglb's XXH64; ring V = %u)", m,
                              ring_points);
  bal.notes = {"entries per backend; theory: maglev floor/ceil of M/N; rendezvous, jump, modulo "
               "sd/avg = sqrt((N-1)/M) (one draw per slot); ring sqrt(1/V + (N-1)/M)"};
  bal.columns = {"scheme", "N", "min", "max", "sd", "sd/avg", "sd/avg_theory", "max/avg",
                 "max/avg_theory"};
  dis.id = "table_disruption";
  dis.title = absl::StrFormat(
      "Table disruption at M = %u: add one backend (name sorting last), remove a middle one", m);
  dis.notes = {"fractions of the table; theory: add moves 1/(N+1), remove 1/N, and 0 between "
               "survivors for ring and rendezvous (exactly, by construction) and for jump when "
               "the change is at the end of the name order; maglev trades a little churn "
               "between survivors for balance (it moves the ideal plus that churn): its "
               "*_between_theory is the bound the unit "
               "tests hold it to (0.01), not an expectation; modulo moves 1 - 1/(N+1) on add "
               "(1 - 2/(N+1) between survivors), 1 - 1/N on remove (1 - 2/N)",
               "jump, removing the middle backend k = N/2 of N (0-based in name order; the "
               "rest renumber): moves 1 - k/N - 1/(N(N-1)), all but 1/N between survivors"};
  dis.columns = {"scheme", "N", "add_moved", "add_theory", "add_between_survivors",
                 "add_between_theory", "remove_moved", "remove_theory",
                 "remove_between_survivors", "remove_between_theory"};
  for (const TableFigures& f : figures) {
    double cv = CvTheory(f.scheme, f.n, m, ring_points);
    double max_theory = f.scheme == "maglev"
                            ? std::ceil(static_cast<double>(m) / f.n) / (static_cast<double>(m) / f.n)
                            : MaxOverAvgApprox(cv, f.n);
    const Balance& b = f.balance;
    bal.rows.push_back({Str(f.scheme), Int(f.n), Int(b.min * b.avg), Int(b.max * b.avg),
                        Num(b.cv * b.avg, 1), Num(b.cv), Num(cv), Num(b.max), Num(max_theory)});
    bool modulo = f.scheme == "modulo", jump = f.scheme == "jump";
    bool maglev = f.scheme == "maglev";
    // Modulo on add: 1/(N+1) of slots stay (old and new residues name the
    // same backend), 1/(N+1) go to the newcomer, the rest move between old ones.
    double add_between = maglev ? kMaglevChurnBound : (modulo ? 1 - 2.0 / (f.n + 1) : 0.0);
    // MeasureTables removes backend n/2 of names that sort in index order.
    JumpRemoval jr = JumpRemovalTheory(f.n, f.n / 2);
    double remove_moved = modulo ? 1 - 1.0 / f.n : (jump ? jr.moved : 1.0 / f.n);
    double remove_between = maglev   ? kMaglevChurnBound
                            : modulo ? 1 - 2.0 / f.n
                            : jump   ? jr.between
                                     : 0.0;
    dis.rows.push_back({Str(f.scheme), Int(f.n), Num(f.add.moved),
                        Num(modulo ? 1 - 1.0 / (f.n + 1) : 1.0 / (f.n + 1)),
                        Num(f.add.between_survivors), Num(add_between), Num(f.remove.moved),
                        Num(remove_moved), Num(f.remove.between_survivors),
                        Num(remove_between)});
  }
  return {bal, dis};
}

// ---------------------------------------------------------------------------
// Bounded loads: flows arrive with a preference order per scheme and take the
// first backend below ceil((1 + eps) * average).

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
  t.columns = {"scheme", "eps", "run", "bound_at_end", "max_load_plain", "max_load_bounded",
               "over_bound", "max_over_now", "moved_off_first", "moved_off_first_%", "mean_rank"};
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

// ---------------------------------------------------------------------------
// Per-VIP analysis of a config file.

constexpr size_t kMaxFailuresAnalyzed = 50;

struct VipFigures {
  std::string vip, scheme;
  bool configured = false;
  std::string unavailable;  // why this scheme cannot serve the VIP
  Balance balance;          // of entries relative to each backend's weight share
  double fail_mean_moved = 0, fail_mean_ideal = 0, fail_worst_moved = 0,
         fail_worst_between = 0;
  size_t failures = 0;
};

absl::StatusOr<std::vector<VipFigures>> AnalyzeVip(const VipConfig& vip) {
  std::vector<VipFigures> out;
  std::vector<BackendSpec> specs = vip.BackendSpecs();
  uint64_t total_weight = 0;
  std::vector<uint32_t> active;
  for (uint32_t i = 0; i < specs.size(); ++i) {
    total_weight += specs[i].weight;
    if (specs[i].weight > 0) active.push_back(i);
  }
  // Failures analysed: every serving backend, or an even sample of them.
  std::vector<uint32_t> victims;
  for (size_t k = 0; k < std::min(active.size(), kMaxFailuresAnalyzed); ++k) {
    victims.push_back(active[k * active.size() / std::min(active.size(), kMaxFailuresAnalyzed)]);
  }
  for (const SchemeBuilder& sc : AllSchemes(vip.ring_points)) {
    VipFigures f;
    f.vip = vip.name;
    f.scheme = sc.name;
    f.configured = sc.name == ToString(vip.algorithm);
    absl::StatusOr<LookupTable> t = sc.build(specs, vip.table_size);
    if (!t.ok()) {
      f.unavailable = std::string(t.status().message());
      out.push_back(f);
      continue;
    }
    if (t->empty()) {
      f.unavailable = "every backend has weight 0";
      out.push_back(f);
      continue;
    }
    std::vector<uint32_t> c = t->EntryCounts();
    std::vector<double> counts, expected;
    for (uint32_t i : active) {
      counts.push_back(c[i]);
      expected.push_back(static_cast<double>(t->size()) * specs[i].weight / total_weight);
    }
    f.balance = BalanceOf(counts, expected);
    for (uint32_t victim : victims) {
      if (active.size() < 2) break;
      // A failed backend stays listed with weight 0 (what a health check does).
      std::vector<BackendSpec> failed = specs;
      failed[victim].weight = 0;
      absl::StatusOr<LookupTable> u = sc.build(failed, vip.table_size);
      if (!u.ok()) return u.status();
      double moved = 0, between = 0;
      for (uint32_t s = 0; s < t->size(); ++s) {
        if (t->slot(s) == u->slot(s)) continue;
        moved += 1;
        if (t->slot(s) != victim) between += 1;
      }
      moved /= t->size();
      between /= t->size();
      f.fail_mean_moved += moved;
      f.fail_mean_ideal += static_cast<double>(specs[victim].weight) / total_weight;
      f.fail_worst_moved = std::max(f.fail_worst_moved, moved);
      f.fail_worst_between = std::max(f.fail_worst_between, between);
      ++f.failures;
    }
    if (f.failures > 0) {
      f.fail_mean_moved /= f.failures;
      f.fail_mean_ideal /= f.failures;
    }
    out.push_back(f);
  }
  return out;
}

Table VipTable(const VipConfig& vip, const std::vector<VipFigures>& figures) {
  Table t;
  t.id = "vip:" + vip.name;
  size_t active = 0;
  for (const BackendConfig& b : vip.backends) active += b.weight > 0;
  t.title = absl::StrFormat("vip \"%s\": %zu backends (%zu serving), M = %u, configured "
                            "algorithm %s",
                            vip.name, vip.backends.size(), active, vip.table_size,
                            ToString(vip.algorithm));
  t.notes = {"balance: entries relative to each backend's weight share (1.0 = exact)",
             "fail: each single serving backend set to weight 0 in turn" +
                 std::string(active > kMaxFailuresAnalyzed
                                 ? absl::StrFormat(" (%zu of %zu, evenly spaced)",
                                                   kMaxFailuresAnalyzed, active)
                                 : "") +
                 "; ideal = its share. Removing it from the file instead gives the same for "
                 "every scheme but jump, which only shrinks without reshuffling at the end of "
                 "the name order"};
  t.columns = {"scheme", "configured", "max/avg", "min/avg", "sd/avg", "fail_mean_moved",
               "fail_mean_ideal", "fail_worst_moved", "fail_worst_between_survivors", "note"};
  for (const VipFigures& f : figures) {
    Value configured = Str(f.configured ? "*" : "");
    if (!f.unavailable.empty()) {
      t.rows.push_back({Str(f.scheme), configured, Num(kNaN), Num(kNaN), Num(kNaN), Num(kNaN),
                        Num(kNaN), Num(kNaN), Num(kNaN), Str("unavailable (see above)")});
      t.notes.push_back(absl::StrCat(f.scheme, " unavailable: ", f.unavailable));
      continue;
    }
    double nan_if_none = f.failures ? 0 : kNaN;
    t.rows.push_back({Str(f.scheme), configured, Num(f.balance.max), Num(f.balance.min), Num(f.balance.cv),
                      Num(f.fail_mean_moved + nan_if_none), Num(f.fail_mean_ideal + nan_if_none),
                      Num(f.fail_worst_moved + nan_if_none),
                      Num(f.fail_worst_between + nan_if_none),
                      Str(f.scheme == "modulo" ? "comparison only (needs allow_modulo = true)"
                                               : "")});
  }
  return t;
}

// ---------------------------------------------------------------------------
// Plotting with gnuplot: two clustered bar charts, balance and disruption.

struct PlotSeries {
  std::string label;           // a cluster (e.g. "N=10" or a VIP)
  std::vector<double> values;  // one per scheme
};

struct Plot {
  std::string title, ylabel;
  bool log_y = false;
  std::vector<PlotSeries> series;
};

std::string GnuplotQuote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

int RunProcess(const std::vector<std::string>& args) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int DrawPlots(const std::string& png, const std::vector<std::string>& schemes,
              const std::vector<Plot>& all_plots, const std::string& title) {
  // gnuplot stops at a histogram column without one finite value ("No valid
  // points in histogram") after it has begun the PNG. Such a series has no
  // figures to show (a VIP whose backends all drain, or with one serving
  // backend and so no failure to simulate): leave it out, and a chart left
  // with none, and refuse before gnuplot runs when nothing is left.
  std::vector<Plot> plots;
  for (const Plot& p : all_plots) {
    Plot kept = p;
    kept.series.clear();
    for (const PlotSeries& s : p.series) {
      if (std::any_of(s.values.begin(), s.values.end(),
                      [](double v) { return std::isfinite(v); })) {
        kept.series.push_back(s);
      } else {
        std::fprintf(stderr,
                     "maglbctl analyze: --plot: \"%s\" has no figure for any scheme in the "
                     "chart \"%s\"; left out of it\n",
                     s.label.c_str(), p.title.c_str());
      }
    }
    if (!kept.series.empty()) plots.push_back(std::move(kept));
  }
  if (plots.empty()) {
    std::fprintf(stderr,
                 "maglbctl analyze: --plot: nothing to draw (no VIP has a serving backend to "
                 "measure); %s was not written\n",
                 png.c_str());
    return kExitError;
  }
  char dir_template[] = "/tmp/maglbctl-plot-XXXXXX";
  char* dir = mkdtemp(dir_template);
  if (dir == nullptr) {
    std::fprintf(stderr, "maglbctl analyze: cannot create a temporary directory for --plot\n");
    return kExitError;
  }
  std::string script = absl::StrCat(dir, "/plot.gp");
  std::vector<std::string> files = {script};
  std::string gp = absl::StrFormat(
      "set terminal pngcairo size %d,560 font \"sans,10\"\nset output %s\n"
      "set multiplot layout 1,%zu title %s\nset style data histograms\n"
      "set style histogram clustered gap 1\nset style fill solid 0.85 border -1\n"
      "set boxwidth 0.9\nset key top left\nset grid ytics\nset xtics nomirror\n",
      560 * static_cast<int>(plots.size()), GnuplotQuote(png), plots.size(), GnuplotQuote(title));
  for (size_t p = 0; p < plots.size(); ++p) {
    std::string data = absl::StrCat(dir, "/plot", p, ".dat");
    files.push_back(data);
    std::ofstream out(data);
    out << "scheme";
    for (const PlotSeries& s : plots[p].series) out << "\t" << GnuplotQuote(s.label);
    out << "\n";
    for (size_t i = 0; i < schemes.size(); ++i) {
      out << GnuplotQuote(schemes[i]);
      for (const PlotSeries& s : plots[p].series) {
        double v = s.values[i];
        if (!std::isfinite(v)) {
          out << "\tNaN";
        } else {
          out << "\t" << absl::StrFormat("%.9g", plots[p].log_y ? std::max(v, 1e-6) : v);
        }
      }
      out << "\n";
    }
    absl::StrAppend(&gp, "set title ", GnuplotQuote(plots[p].title), "\nset ylabel ",
                    GnuplotQuote(plots[p].ylabel), "\n",
                    plots[p].log_y ? "set logscale y\nset yrange [0.1:*]\n"
                                   : "unset logscale y\nset yrange [0:*]\n");
    std::vector<std::string> parts;
    for (size_t c = 0; c < plots[p].series.size(); ++c) {
      parts.push_back(absl::StrFormat("%s using %d:xtic(1) title columnheader(%d)",
                                      c == 0 ? GnuplotQuote(data) : "''", c + 2, c + 2));
    }
    absl::StrAppend(&gp, "plot ", absl::StrJoin(parts, ", "), "\n");
  }
  gp += "unset multiplot\n";
  std::ofstream(script) << gp;
  int rc = RunProcess({"gnuplot", script});
  for (const std::string& f : files) std::remove(f.c_str());
  rmdir(dir);
  if (rc == 127) {
    std::fprintf(stderr, "maglbctl analyze: --plot needs gnuplot, which was not found; install "
                         "gnuplot-nox (scripts/install-deps.sh)\n");
    return kExitError;
  }
  if (rc != 0) {
    // Whatever gnuplot began writing is not a whole PNG: leave no file.
    std::remove(png.c_str());
    std::fprintf(stderr, "maglbctl analyze: gnuplot failed (exit %d) drawing %s; removed it\n",
                 rc, png.c_str());
    return kExitError;
  }
  return kExitOk;
}

// ---------------------------------------------------------------------------

struct Options {
  bool classic = false;
  std::string config;
  bool json = false;
  std::string plot;
};

int RunClassic(const Options& o) {
  std::vector<Table> tables;
  std::vector<ClassicKey> keys10k = MakeKeys(10000);
  tables.push_back(AddServerExperiment(keys10k, 4, 100));
  tables.push_back(RemoveServerExperiment(MakeKeys(10000), 5, 100));
  tables.push_back(AddServerExperiment(MakeKeys(10000), 10, 100));
  tables.push_back(KeyBalanceExperiment(MakeKeys(100000), 10));
  absl::StatusOr<std::vector<TableFigures>> figures =
      MeasureTables(kDefaultTableSize, kDefaultRingPoints);
  if (!figures.ok()) {
    std::fprintf(stderr, "maglbctl analyze: %s\n", std::string(figures.status().message()).c_str());
    return kExitError;
  }
  for (Table& t : TableExperiments(*figures, kDefaultTableSize, kDefaultRingPoints)) {
    tables.push_back(std::move(t));
  }
  tables.push_back(BoundedLoadSimulation(10, 10000));
  for (Table& t : tables) {
    if (t.id.rfind("classic", 0) == 0) {
      t.notes.insert(t.notes.begin(),
                     "recipe: hash = fmix32(FNV-1a 32); keys \"user:\" + floor(r * 1e9), r from "
                     "mulberry32(16) restarted per experiment; servers S0..S<n-1>, ring points "
                     "\"S<s>#<i>\", rendezvous hash(key + \"|\" + server), jump key = the 32-bit "
                     "hash, modulo hash % N; maglev: a 65537-slot table of the names (maglb's "
                     "XXH64) looked up with the key hash");
    }
  }
  if (o.json) {
    PrintJson(tables);
  } else {
    PrintText(tables);
  }
  if (o.plot.empty()) return kExitOk;
  std::vector<std::string> schemes;
  for (const SchemeBuilder& s : AllSchemes(kDefaultRingPoints)) schemes.push_back(s.name);
  Plot balance{"Balance: largest backend / average (1 = perfect)", "max/avg entries", false, {}};
  Plot disruption{"Disruption when a backend is added: moved / ideal (1 = minimal)",
                  "moved / (1/(N+1)), log scale", true, {}};
  Plot churn{"Moved between surviving backends on add (% of table)", "% of table", false, {}};
  for (uint32_t n : {10u, 100u, 1000u}) {
    PlotSeries b{absl::StrFormat("N=%u", n), {}}, d = b, c = b;
    for (const TableFigures& f : *figures) {
      if (f.n != n) continue;
      b.values.push_back(f.balance.max);
      d.values.push_back(f.add.moved * (n + 1));
      c.values.push_back(100 * f.add.between_survivors);
    }
    balance.series.push_back(b);
    disruption.series.push_back(d);
    churn.series.push_back(c);
  }
  return DrawPlots(o.plot, schemes, {balance, disruption, churn},
                   absl::StrFormat("maglb hashing schemes at M = %u (ring V = %u)",
                                   kDefaultTableSize, kDefaultRingPoints));
}

int RunConfig(const Options& o) {
  absl::StatusOr<Config> config = LoadConfig(o.config);
  if (!config.ok()) {
    std::fprintf(stderr, "maglbctl: %s\n", std::string(config.status().message()).c_str());
    return kExitError;
  }
  std::vector<Table> tables;
  std::vector<std::vector<VipFigures>> all;
  for (const VipConfig& v : config->vips) {
    absl::StatusOr<std::vector<VipFigures>> f = AnalyzeVip(v);
    if (!f.ok()) {
      std::fprintf(stderr, "maglbctl: %s: vip \"%s\": %s\n", o.config.c_str(), v.name.c_str(),
                   std::string(f.status().message()).c_str());
      return kExitError;
    }
    tables.push_back(VipTable(v, *f));
    all.push_back(*std::move(f));
  }
  if (o.json) {
    PrintJson(tables);
  } else if (tables.empty()) {
    std::printf("%s defines no VIPs\n", o.config.c_str());
  } else {
    PrintText(tables);
  }
  if (o.plot.empty()) return kExitOk;
  if (all.empty()) {
    std::fprintf(stderr, "maglbctl analyze: %s defines no VIPs: nothing to plot\n",
                 o.config.c_str());
    return kExitError;
  }
  std::vector<std::string> schemes;
  for (const VipFigures& f : all[0]) schemes.push_back(f.scheme);
  Plot balance{"Balance: largest backend / its weight share (1 = exact)", "max/avg", false, {}};
  Plot disruption{"Single backend failure: mean moved / ideal (1 = minimal)", "moved / ideal",
                  false, {}};
  for (size_t i = 0; i < all.size(); ++i) {
    PlotSeries b{config->vips[i].name, {}}, d = b;
    for (const VipFigures& f : all[i]) {
      bool ok = f.unavailable.empty();
      b.values.push_back(ok ? f.balance.max : kNaN);
      d.values.push_back(ok && f.failures ? f.fail_mean_moved / f.fail_mean_ideal : kNaN);
    }
    balance.series.push_back(b);
    disruption.series.push_back(d);
  }
  return DrawPlots(o.plot, schemes, {balance, disruption},
                   absl::StrFormat("maglb hashing schemes for the VIPs of %s", o.config));
}

}  // namespace

int RunAnalyze(int argc, char** argv) {
  Options o;
  for (int i = 0; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--classic") {
      o.classic = true;
    } else if (a == "--config" && i + 1 < argc) {
      o.config = argv[++i];
    } else if (a == "--format" && i + 1 < argc) {
      std::string_view f = argv[++i];
      if (f != "text" && f != "json") {
        std::fprintf(stderr, "maglbctl analyze: --format must be text or json, not '%s'\n",
                     argv[i]);
        return kExitUsage;
      }
      o.json = f == "json";
    } else if (a == "--plot" && i + 1 < argc) {
      o.plot = argv[++i];
    } else {
      std::fprintf(stderr, "maglbctl analyze: unexpected argument '%s'\nusage:\n%s", argv[i],
                   kAnalyzeUsage);
      return kExitUsage;
    }
  }
  if (o.classic && !o.config.empty()) {
    std::fprintf(stderr, "maglbctl analyze: choose --classic or --config FILE, not both\n");
    return kExitUsage;
  }
  return o.config.empty() ? RunClassic(o) : RunConfig(o);
}

}  // namespace maglb
