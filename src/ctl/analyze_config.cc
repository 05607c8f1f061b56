// Per-VIP analysis of a config file.
#include "analyze_config.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analyze_tables.h"

namespace maglb::analyze {

using report::Num;
using report::Str;
using report::Table;

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
  t.columns = report::Columns({"scheme", "configured", "max/avg", "min/avg", "sd/avg",
                               "fail_mean_moved", "fail_mean_ideal", "fail_worst_moved",
                               "fail_worst_between_survivors", "note"});
  for (const VipFigures& f : figures) {
    report::Cell configured = Str(f.configured ? "*" : "");
    if (!f.unavailable.empty()) {
      t.rows.push_back({Str(f.scheme), configured, Num(kNaN), Num(kNaN), Num(kNaN), Num(kNaN),
                        Num(kNaN), Num(kNaN), Num(kNaN), Str("unavailable (see above)")});
      t.notes.push_back(absl::StrCat(f.scheme, " unavailable: ", f.unavailable));
      continue;
    }
    double nan_if_none = f.failures ? 0 : kNaN;
    t.rows.push_back({Str(f.scheme), configured, Num(f.balance.max), Num(f.balance.min),
                      Num(f.balance.cv),
                      Num(f.fail_mean_moved + nan_if_none), Num(f.fail_mean_ideal + nan_if_none),
                      Num(f.fail_worst_moved + nan_if_none),
                      Num(f.fail_worst_between + nan_if_none),
                      Str(f.scheme == "modulo" ? "comparison only (needs allow_modulo = true)"
                                               : "")});
  }
  return t;
}

}  // namespace maglb::analyze
