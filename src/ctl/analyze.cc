// maglbctl analyze: balance and disruption of every hashing scheme, measured
// beside theory, on the textbook recipe (--classic), on a config file's VIPs
// (--config), and for bounded loads. Output as text, JSON, or a gnuplot PNG.
// This file reads the command line and puts the parts together:
//   analyze_theory     the formulas the measurements are printed beside
//   analyze_classic    the textbook experiments (keys onto servers "S<i>")
//   analyze_tables     tables of M slots, maglb's own hashes
//   analyze_bounded_load  bounded loads, simulated
//   analyze_config     per VIP of a config file
//   plot               the gnuplot charts
//   report             the text and JSON output, shared with the other commands
#include "analyze.h"

#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "analyze_bounded_load.h"
#include "analyze_classic.h"
#include "analyze_config.h"
#include "analyze_tables.h"
#include "analyze_theory.h"
#include "maglb/config.h"
#include "maglb/exit_codes.h"
#include "maglb/hashing.h"
#include "maglb/maglev.h"
#include "plot.h"
#include "report.h"

namespace maglb {

const char kAnalyzeUsage[] =
    "  maglbctl analyze [--classic] [--config FILE] [--format text|json] [--plot FILE.png]\n"
    "      every hashing scheme (maglev, ring, rendezvous, jump, modulo) side by side,\n"
    "      measured beside theory: --classic (the default) runs the textbook\n"
    "      experiments and a bounded-load simulation; --config gives, per VIP, what\n"
    "      each scheme would do with its backends; --plot draws balance and\n"
    "      disruption with gnuplot\n";

namespace analyze {
namespace {

struct Options {
  bool classic = false;
  std::string config;
  report::Format format = report::Format::kText;
  std::string plot;
};

// analyze's layout: "== title", notes indented by three, columns as wide as
// their widest cell.
report::Report AnalyzeReport(std::vector<report::Table> tables) {
  report::Report r;
  r.tables = std::move(tables);
  r.title_prefix = "== ";
  r.note_indent = "   ";
  r.fit_columns = true;
  return r;
}

int RunClassic(const Options& o) {
  std::vector<report::Table> tables;
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
  for (report::Table& t : TableExperiments(*figures, kDefaultTableSize, kDefaultRingPoints)) {
    tables.push_back(std::move(t));
  }
  tables.push_back(BoundedLoadSimulation(10, 10000));
  for (report::Table& t : tables) {
    if (t.id.rfind("classic", 0) == 0) t.notes.insert(t.notes.begin(), kClassicRecipeNote);
  }
  report::Print(AnalyzeReport(std::move(tables)), o.format);
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
  std::vector<report::Table> tables;
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
  if (o.format == report::Format::kText && tables.empty()) {
    std::printf("%s defines no VIPs\n", o.config.c_str());
  } else {
    report::Print(AnalyzeReport(std::move(tables)), o.format);
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
}  // namespace analyze

int CmdAnalyze(int argc, char** argv) {
  analyze::Options o;
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
      o.format = f == "json" ? report::Format::kJson : report::Format::kText;
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
  return o.config.empty() ? analyze::RunClassic(o) : analyze::RunConfig(o);
}

}  // namespace maglb
