// Tables at M slots, maglb's own hashes: the data plane's view.
#include "analyze_tables.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "maglb/hashing.h"

namespace maglb::analyze {

using report::Int;
using report::Num;
using report::Str;
using report::Table;

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


namespace {

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

std::vector<BackendSpec> NumberedBackends(uint32_t n) {
  std::vector<BackendSpec> b;
  // Zero-padded, so that the added backend's name sorts last (jump's case).
  for (uint32_t i = 0; i < n; ++i) b.push_back({absl::StrFormat("backend-%05u", i), 1});
  return b;
}

}  // namespace

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
  bal.columns = report::Columns({"scheme", "N", "min", "max", "sd", "sd/avg", "sd/avg_theory",
                                 "max/avg", "max/avg_theory"});
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
  dis.columns = report::Columns({"scheme", "N", "add_moved", "add_theory",
                                 "add_between_survivors", "add_between_theory", "remove_moved",
                                 "remove_theory", "remove_between_survivors",
                                 "remove_between_theory"});
  for (const TableFigures& f : figures) {
    double cv = CvTheory(f.scheme, f.n, m, ring_points);
    const double avg = static_cast<double>(m) / f.n;
    double max_theory = f.scheme == "maglev" ? std::ceil(avg) / avg : MaxOverAvgApprox(cv, f.n);
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

}  // namespace maglb::analyze
