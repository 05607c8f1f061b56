// maglbctl: the operator's tool. Inspects tables and previews reloads offline,
// from config files alone.
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"
#include "analyze.h"
#include "maglb/config.h"
#include "maglb/table_builder.h"
#include "maglb/table_diff.h"
#include "stats.h"

namespace maglb {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

void PrintUsage(FILE* out) {
  std::fputs(
      "usage:\n"
      "  maglbctl table --config FILE [--vip NAME] [--dump]\n"
      "      per VIP: each backend's entries, share, expected share, max/avg,\n"
      "      min/avg and the table fingerprint; --dump prints the table itself,\n"
      "      one backend name per slot (needs --vip when there are several VIPs)\n"
      "  maglbctl diff OLD.toml NEW.toml\n"
      "      per VIP: the fraction of flows that would change backend, beside the\n"
      "      ideal minimum for that change, and which backends gain and lose\n",
      out);
  std::fputs(kAnalyzeUsage, out);
  std::fputs(kStatsUsage, out);
}

std::string Percent(double f) { return absl::StrFormat("%.3f%%", 100.0 * f); }

std::string Describe(const VipConfig& v) {
  std::string port = v.port == 0 ? "*" : absl::StrFormat("%u", v.port);
  return absl::StrFormat("vip \"%s\" %s %s/%s forwarding=%s algorithm=%s M=%u", v.name,
                         v.address.ToString(), ToString(v.protocol), port,
                         ToString(v.forwarding), ToString(v.algorithm), v.table_size);
}

int PrintTable(const VipConfig& vip, const LookupTable& table) {
  std::printf("%s\n", Describe(vip).c_str());
  if (table.empty()) {
    std::printf("  no table: all %zu backends have weight 0 (draining); new flows to this "
                "VIP have no backend and are dropped\n\n", vip.backends.size());
    return kExitOk;
  }
  std::printf("  fingerprint %016llx\n", static_cast<unsigned long long>(table.fingerprint()));
  std::vector<uint32_t> counts = table.EntryCounts();
  uint64_t total_weight = 0;
  size_t active = 0;
  for (const BackendConfig& b : vip.backends) {
    total_weight += b.weight;
    active += b.weight > 0;
  }
  std::printf("  %-24s %-40s %7s %9s %9s %9s %8s\n", "backend", "address", "weight", "entries",
              "share", "expected", "ratio");
  double max_ratio = 0, min_ratio = 1e300;
  for (size_t i = 0; i < vip.backends.size(); ++i) {
    const BackendConfig& b = vip.backends[i];
    double share = static_cast<double>(counts[i]) / table.size();
    double expected = static_cast<double>(b.weight) / total_weight;
    std::string ratio = "-";
    if (b.weight > 0) {
      double r = share / expected;
      max_ratio = std::max(max_ratio, r);
      min_ratio = std::min(min_ratio, r);
      ratio = absl::StrFormat("%.4f", r);
    }
    std::printf("  %-24s %-40s %7u %9u %9s %9s %8s%s\n", b.name.c_str(),
                b.address.ToString().c_str(), b.weight, counts[i], Percent(share).c_str(),
                Percent(expected).c_str(), ratio.c_str(),
                b.weight == 0 ? "  draining" : (counts[i] == 0 ? "  NO ENTRIES: weight too "
                                                                 "small for this table size"
                                                               : ""));
  }
  // For weighted backends "avg" is the expected entry count of each backend,
  // so max/avg and min/avg read the same for equal and unequal weights.
  std::printf("  %zu active of %zu backends; max/avg %.4f  min/avg %.4f\n\n", active,
              vip.backends.size(), max_ratio, min_ratio);
  return kExitOk;
}

int CmdTable(int argc, char** argv) {
  std::string config_path, vip_name;
  bool dump = false;
  for (int i = 0; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--config" && i + 1 < argc) {
      config_path = argv[++i];
    } else if (a == "--vip" && i + 1 < argc) {
      vip_name = argv[++i];
    } else if (a == "--dump") {
      dump = true;
    } else {
      std::fprintf(stderr, "maglbctl table: unexpected argument '%s'\n", argv[i]);
      PrintUsage(stderr);
      return kExitUsage;
    }
  }
  if (config_path.empty()) {
    std::fprintf(stderr, "maglbctl table: --config FILE is required\n");
    return kExitUsage;
  }
  absl::StatusOr<Config> config = LoadConfig(config_path);
  if (!config.ok()) {
    std::fprintf(stderr, "maglbctl: %s\n", std::string(config.status().message()).c_str());
    return kExitError;
  }
  std::vector<const VipConfig*> vips;
  for (const VipConfig& v : config->vips) {
    if (vip_name.empty() || v.name == vip_name) vips.push_back(&v);
  }
  if (!vip_name.empty() && vips.empty()) {
    std::fprintf(stderr, "maglbctl: %s has no vip named \"%s\"\n", config_path.c_str(),
                 vip_name.c_str());
    return kExitError;
  }
  if (vips.empty()) {
    std::printf("%s defines no VIPs\n", config_path.c_str());
    return kExitOk;
  }
  if (dump && vips.size() > 1) {
    std::fprintf(stderr, "maglbctl table --dump: %s has %zu VIPs; choose one with --vip NAME\n",
                 config_path.c_str(), vips.size());
    return kExitUsage;
  }
  for (const VipConfig* v : vips) {
    absl::StatusOr<LookupTable> table = BuildVipTable(*v);
    if (!table.ok()) {
      std::fprintf(stderr, "maglbctl: %s: vip \"%s\": %s\n", config_path.c_str(),
                   v->name.c_str(), std::string(table.status().message()).c_str());
      return kExitError;
    }
    if (dump) {
      if (table->empty()) {
        std::fprintf(stderr, "maglbctl: vip \"%s\" has no table: all backends have weight 0\n",
                     v->name.c_str());
        return kExitError;
      }
      std::string out;
      out.reserve(table->size() * 16);
      for (uint16_t b : table->slots()) {
        out += table->backend_names()[b];
        out += '\n';
      }
      std::fwrite(out.data(), 1, out.size(), stdout);
      continue;
    }
    PrintTable(*v, *table);
  }
  return kExitOk;
}

std::string Fingerprint(const LookupTable& t) {
  return t.empty() ? "none" : absl::StrFormat("%016x", t.fingerprint());
}

void PrintDiff(const VipConfig* old_vip, const LookupTable* old_table, const VipConfig* new_vip,
               const LookupTable* new_table) {
  const VipConfig& any = new_vip != nullptr ? *new_vip : *old_vip;
  if (old_vip == nullptr) {
    if (new_table->empty()) {
      std::printf("vip \"%s\": added with %zu backends, all with weight 0: no table; new flows "
                  "to it will be dropped\n\n", any.name.c_str(), any.backends.size());
    } else {
      std::printf("vip \"%s\": added with %zu backends (fingerprint %s)\n\n", any.name.c_str(),
                  any.backends.size(), Fingerprint(*new_table).c_str());
    }
    return;
  }
  if (new_vip == nullptr) {
    std::printf("vip \"%s\": removed; its %zu backends get no more traffic for it\n\n",
                any.name.c_str(), any.backends.size());
    return;
  }
  std::vector<BackendSpec> old_specs = old_vip->BackendSpecs();
  std::vector<BackendSpec> new_specs = new_vip->BackendSpecs();
  TableDiff d = DiffTables(*old_table, old_specs, *new_table, new_specs);
  std::printf("vip \"%s\": M %u -> %u, fingerprint %s -> %s%s\n", any.name.c_str(),
              old_vip->table_size, new_vip->table_size, Fingerprint(*old_table).c_str(),
              Fingerprint(*new_table).c_str(),
              old_table->fingerprint() == new_table->fingerprint() ? " (unchanged)" : "");
  if (new_table->empty() && !old_table->empty()) {
    std::printf("  after the change: no table, all %zu backends have weight 0 (draining); new "
                "flows to this VIP will be dropped, tracked flows continue\n",
                new_vip->backends.size());
  } else if (old_table->empty() && !new_table->empty()) {
    std::printf("  before the change: no table (all backends draining); new flows get a backend "
                "again\n");
  }
  if (d.moved == 0 && d.ideal == 0) {
    std::printf("  no flow changes backend\n\n");
    return;
  }
  std::printf("  flows that change backend: %s   ideal minimum for this change: %s", Percent(d.moved).c_str(),
              Percent(d.ideal).c_str());
  if (d.ideal > 0) std::printf("   (%.2fx the ideal)", d.moved / d.ideal);
  std::printf("\n  moved between backends that serve before and after: %s\n",
              Percent(d.between_survivors).c_str());
  std::printf("  %-24s %-17s %9s %9s %9s %9s\n", "backend", "weight", "before", "after", "lost",
              "gained");
  for (const BackendChange& c : d.backends) {
    std::string weight = !c.in_old   ? absl::StrFormat("(new) %u", c.new_weight)
                         : !c.in_new ? absl::StrFormat("%u (removed)", c.old_weight)
                         : c.old_weight == c.new_weight
                             ? absl::StrFormat("%u", c.new_weight)
                             : absl::StrFormat("%u -> %u", c.old_weight, c.new_weight);
    std::printf("  %-24s %-17s %9s %9s %9s %9s\n", c.name.c_str(), weight.c_str(),
                Percent(c.old_share).c_str(), Percent(c.new_share).c_str(),
                c.lost > 0 ? ("-" + Percent(c.lost)).c_str() : "",
                c.gained > 0 ? ("+" + Percent(c.gained)).c_str() : "");
  }
  if (!d.movements.empty()) {
    std::printf("  largest movements:");
    size_t shown = 0;
    for (const Movement& m : d.movements) {
      if (shown++ == 5) break;
      std::printf("%s %s -> %s %s", shown > 1 ? "," : "", m.from.c_str(), m.to.c_str(),
                  Percent(m.fraction).c_str());
    }
    std::printf("\n");
  }
  std::printf("\n");
}

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
    PrintDiff(o, ot ? &*ot : nullptr, n, nt ? &*nt : nullptr);
  }
  return kExitOk;
}

}  // namespace
}  // namespace maglb

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    maglb::PrintUsage(argc < 2 ? stderr : stdout);
    return argc < 2 ? maglb::kExitUsage : maglb::kExitOk;
  }
  std::string_view cmd = argv[1];
  if (cmd == "table") return maglb::CmdTable(argc - 2, argv + 2);
  if (cmd == "diff") return maglb::CmdDiff(argc - 2, argv + 2);
  if (cmd == "analyze") return maglb::RunAnalyze(argc - 2, argv + 2);
  if (cmd == "stats") return maglb::CmdStats(argc - 2, argv + 2);
  std::fprintf(stderr, "maglbctl: unknown command '%s'\n", argv[1]);
  maglb::PrintUsage(stderr);
  return maglb::kExitUsage;
}
