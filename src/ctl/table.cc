#include "table.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"
#include "commands.h"
#include "maglb/config.h"
#include "maglb/exit_codes.h"
#include "maglb/table_builder.h"
#include "report.h"

namespace maglb {

const char kTableUsage[] =
    "  maglbctl table --config FILE [--vip NAME] [--dump]\n"
    "      per VIP: each backend's entries, share, expected share, max/avg,\n"
    "      min/avg and the table fingerprint; --dump prints the table itself,\n"
    "      one backend name per slot (needs --vip when there are several VIPs)\n";

namespace {

std::string Describe(const VipConfig& v) {
  std::string port = v.port == 0 ? "*" : absl::StrFormat("%u", v.port);
  return absl::StrFormat("vip \"%s\" %s %s/%s forwarding=%s algorithm=%s M=%u", v.name,
                         v.address.ToString(), ToString(v.protocol), port,
                         ToString(v.forwarding), ToString(v.algorithm), v.table_size);
}

report::Table VipReport(const VipConfig& vip, const LookupTable& table) {
  report::Table t;
  t.id = "vip:" + vip.name;
  t.title = Describe(vip);
  if (table.empty()) {
    t.notes.push_back(absl::StrFormat(
        "no table: all %zu backends have weight 0 (draining); new flows to this VIP have no "
        "backend and are dropped",
        vip.backends.size()));
    return t;
  }
  t.notes.push_back(absl::StrFormat("fingerprint %016llx",
                                    static_cast<unsigned long long>(table.fingerprint())));
  using report::Align;
  using report::FixedColumn;
  t.columns = {FixedColumn("backend", Align::kLeft, 24), FixedColumn("address", Align::kLeft, 40),
               FixedColumn("weight", Align::kRight, 7),  FixedColumn("entries", Align::kRight, 9),
               FixedColumn("share", Align::kRight, 9),   FixedColumn("expected", Align::kRight, 9),
               FixedColumn("ratio", Align::kRight, 8)};
  // A remark that follows the ratio unheaded; its cells bring their own gap.
  report::Column remark = FixedColumn("remark", Align::kLeft, 0);
  remark.gap = "";
  remark.heading = "";
  t.columns.push_back(std::move(remark));
  std::vector<uint32_t> counts = table.EntryCounts();
  uint64_t total_weight = 0;
  size_t active = 0;
  for (const BackendConfig& b : vip.backends) {
    total_weight += b.weight;
    active += b.weight > 0;
  }
  double max_ratio = 0, min_ratio = 1e300;
  for (size_t i = 0; i < vip.backends.size(); ++i) {
    const BackendConfig& b = vip.backends[i];
    double share = static_cast<double>(counts[i]) / table.size();
    double expected = static_cast<double>(b.weight) / total_weight;
    double ratio = std::numeric_limits<double>::quiet_NaN();  // "-": draining
    if (b.weight > 0) {
      ratio = share / expected;
      max_ratio = std::max(max_ratio, ratio);
      min_ratio = std::min(min_ratio, ratio);
    }
    t.rows.push_back({report::Str(b.name), report::Str(b.address.ToString()),
                      report::Int(b.weight), report::Int(counts[i]), report::Percent(share),
                      report::Percent(expected), report::Num(ratio, 4),
                      report::Str(b.weight == 0     ? "  draining"
                                  : counts[i] == 0 ? "  NO ENTRIES: weight too small for this "
                                                     "table size"
                                                   : "")});
  }
  // For weighted backends "avg" is the expected entry count of each backend,
  // so max/avg and min/avg read the same for equal and unequal weights.
  t.footer.push_back(absl::StrFormat("%zu active of %zu backends; max/avg %.4f  min/avg %.4f",
                                     active, vip.backends.size(), max_ratio, min_ratio));
  return t;
}

}  // namespace

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
    // Each VIP as soon as it is built: a later VIP's error still shows the earlier ones.
    report::Print(report::OneTable(VipReport(*v, *table)), report::Format::kText);
  }
  return kExitOk;
}

}  // namespace maglb
