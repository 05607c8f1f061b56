#include "diff.h"

#include <cstdio>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_format.h"
#include "commands.h"
#include "maglb/config.h"
#include "maglb/exit_codes.h"
#include "maglb/table_builder.h"
#include "maglb/table_diff.h"
#include "report.h"

namespace maglb {

const char kDiffUsage[] =
    "  maglbctl diff OLD.toml NEW.toml\n"
    "      per VIP: the fraction of flows that would change backend, beside the\n"
    "      ideal minimum for that change, and which backends gain and lose\n";

namespace {

std::string Percent(double f) { return report::CellText(report::Percent(f)); }

std::string Fingerprint(const LookupTable& t) {
  return t.empty() ? "none" : absl::StrFormat("%016x", t.fingerprint());
}

// One VIP's change; old_vip or new_vip is null when it is added or removed.
report::Table VipDiff(const VipConfig* old_vip, const LookupTable* old_table,
                      const VipConfig* new_vip, const LookupTable* new_table) {
  const VipConfig& any = new_vip != nullptr ? *new_vip : *old_vip;
  report::Table t;
  t.id = "vip:" + any.name;
  if (old_vip == nullptr) {
    t.title = new_table->empty()
                  ? absl::StrFormat("vip \"%s\": added with %zu backends, all with weight 0: no "
                                    "table; new flows to it will be dropped",
                                    any.name, any.backends.size())
                  : absl::StrFormat("vip \"%s\": added with %zu backends (fingerprint %s)",
                                    any.name, any.backends.size(), Fingerprint(*new_table));
    return t;
  }
  if (new_vip == nullptr) {
    t.title = absl::StrFormat("vip \"%s\": removed; its %zu backends get no more traffic for it",
                              any.name, any.backends.size());
    return t;
  }
  std::vector<BackendSpec> old_specs = old_vip->BackendSpecs();
  std::vector<BackendSpec> new_specs = new_vip->BackendSpecs();
  TableDiff d = DiffTables(*old_table, old_specs, *new_table, new_specs);
  t.title = absl::StrFormat("vip \"%s\": M %u -> %u, fingerprint %s -> %s%s", any.name,
                            old_vip->table_size, new_vip->table_size, Fingerprint(*old_table),
                            Fingerprint(*new_table),
                            old_table->fingerprint() == new_table->fingerprint() ? " (unchanged)"
                                                                                 : "");
  if (new_table->empty() && !old_table->empty()) {
    t.notes.push_back(absl::StrFormat(
        "after the change: no table, all %zu backends have weight 0 (draining); new flows to "
        "this VIP will be dropped, tracked flows continue",
        new_vip->backends.size()));
  } else if (old_table->empty() && !new_table->empty()) {
    t.notes.push_back(
        "before the change: no table (all backends draining); new flows get a backend again");
  }
  if (d.moved == 0 && d.ideal == 0) {
    t.notes.push_back("no flow changes backend");
    return t;
  }
  std::string moved = absl::StrFormat("flows that change backend: %s   ideal minimum for this "
                                      "change: %s",
                                      Percent(d.moved), Percent(d.ideal));
  if (d.ideal > 0) moved += absl::StrFormat("   (%.2fx the ideal)", d.moved / d.ideal);
  t.notes.push_back(std::move(moved));
  t.notes.push_back(absl::StrFormat("moved between backends that serve before and after: %s",
                                    Percent(d.between_survivors)));
  using report::Align;
  using report::FixedColumn;
  t.columns = {FixedColumn("backend", Align::kLeft, 24), FixedColumn("weight", Align::kLeft, 17),
               FixedColumn("before", Align::kRight, 9),  FixedColumn("after", Align::kRight, 9),
               FixedColumn("lost", Align::kRight, 9),    FixedColumn("gained", Align::kRight, 9)};
  for (const BackendChange& c : d.backends) {
    std::string weight = !c.in_old   ? absl::StrFormat("(new) %u", c.new_weight)
                         : !c.in_new ? absl::StrFormat("%u (removed)", c.old_weight)
                         : c.old_weight == c.new_weight
                             ? absl::StrFormat("%u", c.new_weight)
                             : absl::StrFormat("%u -> %u", c.old_weight, c.new_weight);
    t.rows.push_back({report::Str(c.name), report::Str(std::move(weight)),
                      report::Percent(c.old_share), report::Percent(c.new_share),
                      c.lost > 0 ? report::SignedPercent(-c.lost) : report::Str(""),
                      c.gained > 0 ? report::SignedPercent(c.gained) : report::Str("")});
  }
  if (!d.movements.empty()) {
    std::string line = "largest movements:";
    size_t shown = 0;
    for (const Movement& m : d.movements) {
      if (shown++ == 5) break;
      line += absl::StrFormat("%s %s -> %s %s", shown > 1 ? "," : "", m.from, m.to,
                              Percent(m.fraction));
    }
    t.footer.push_back(std::move(line));
  }
  return t;
}

}  // namespace

int CmdDiff(int argc, char** argv) {
  if (argc != 2) {
    PrintUsage(stderr);
    return kExitUsage;
  }
  absl::StatusOr<Config> old_config = LoadConfig(argv[0]);
  absl::StatusOr<Config> new_config = LoadConfig(argv[1]);
  for (const auto* c : {&old_config, &new_config}) {
    if (!c->ok()) {
      std::fprintf(stderr, "maglbctl: %s\n", std::string(c->status().message()).c_str());
      return kExitError;
    }
  }
  std::vector<std::string> names;
  for (const VipConfig& v : old_config->vips) names.push_back(v.name);
  for (const VipConfig& v : new_config->vips) {
    if (old_config->FindVip(v.name) == nullptr) names.push_back(v.name);
  }
  for (const std::string& name : names) {
    const VipConfig* o = old_config->FindVip(name);
    const VipConfig* n = new_config->FindVip(name);
    std::optional<LookupTable> ot, nt;
    for (auto [vip, table, path] : {std::tuple{o, &ot, argv[0]}, std::tuple{n, &nt, argv[1]}}) {
      if (vip == nullptr) continue;
      absl::StatusOr<LookupTable> t = BuildVipTable(*vip);
      if (!t.ok()) {
        std::fprintf(stderr, "maglbctl: %s: vip \"%s\": %s\n", path, name.c_str(),
                     std::string(t.status().message()).c_str());
        return kExitError;
      }
      *table = *std::move(t);
    }
    // Each VIP as soon as it is built: a later VIP's error still shows the earlier ones.
    report::Print(report::OneTable(VipDiff(o, ot ? &*ot : nullptr, n, nt ? &*nt : nullptr)),
                  report::Format::kText);
  }
  return kExitOk;
}

}  // namespace maglb
