#include "fleet.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "maglb/config.h"
#include "maglb/exit_codes.h"
#include "maglb/metrics.h"
#include "maglb/table_builder.h"
#include "report.h"
#include "telemetry_client.h"

namespace maglb {

const char kFleetUsage[] =
    "  maglbctl fleet [--format table|json] SOURCE SOURCE...\n"
    "      SOURCE: --prefix PREFIX (a running maglb's telemetry), --socket PATH,\n"
    "      or --config FILE (its tables built offline as maglb builds them).\n"
    "      Per VIP: each source's generation, fingerprint and backends\n"
    "      (weights; effective weights and health where live); flags a VIP\n"
    "      missing somewhere, differing tables (and which backends differ) and\n"
    "      differing hash_seed. Live: each instance's route announcement\n"
    "      state and whether it announces each VIP; a VIP that no instance\n"
    "      announces is a warning (not a disagreement). Exit 0: all agree;\n"
    "      1: they disagree; 3: a source could not be read\n";

namespace {

using telemetry::Json;

// What a source says of one backend. Unknown values (a config has no health;
// an older or hostile reply may lack one) are nullopt, never made up.
struct BackendView {
  std::optional<uint64_t> weight;            ///< configured
  std::optional<uint64_t> effective_weight;  ///< live only
  std::string health;                        ///< "unknown" for a config; "?" if not sent
};

struct VipView {
  std::string generation;   ///< live: the reply's; "config"
  std::string fingerprint;  ///< hex, as telemetry writes it ("0000000000000000": no table)
  std::string algorithm;
  std::optional<uint64_t> table_size;
  std::map<std::string, BackendView> backends;  ///< by name
  std::string address;  ///< live: as the reply has it
  /// Live: whether the instance announces the VIP's address, "yes" or "no";
  /// "?" for a value that is no 0/1; "-" where not reported (a config, an
  /// older maglb).
  std::string announced = "-";
};

struct Source {
  std::string label;  ///< as the operator named it: "prefix a", "config b.toml"
  bool live = false;
  std::string generation;  ///< the instance's, or "config"
  std::optional<uint64_t> hash_seed;  ///< configs only: telemetry does not report it
  std::map<std::string, VipView> vips;
  /// Live: /maglb/announce's state ("off", "announcing", ...; "not
  /// reported" by an older maglb; "?" unreadable); "-" for a config.
  std::string announce_state = "-";
  /// Live: why each VIP address is or is not announced, by address.
  std::map<std::string, std::string> announce_reasons;
};

// Whether the source announces routes at all: a VIP it does not announce
// then means something.
bool Announces(const Source& s) {
  return s.live && s.announce_state != "-" && s.announce_state != "off" && s.announce_state != "not reported";
}

struct SourceArg {
  enum class Kind { kPrefix, kSocket, kConfig } kind;
  std::string value;
};

std::string Label(const SourceArg& a) {
  switch (a.kind) {
    case SourceArg::Kind::kPrefix:
      return "prefix " + a.value;
    case SourceArg::Kind::kSocket:
      return "socket " + a.value;
    case SourceArg::Kind::kConfig:
      return "config " + a.value;
  }
  return a.value;
}

std::string Hex(uint64_t v) { return absl::StrFormat("%016x", v); }

// The tables exactly as the daemon builds them: from each VIP's TableInput
// alone (lb_state.cc), every backend at its configured weight, which is what
// a live instance serves when every backend is healthy and past slow start.
absl::StatusOr<Source> ReadConfig(const SourceArg& arg) {
  absl::StatusOr<Config> config = LoadConfig(arg.value);
  if (!config.ok()) return config.status();
  Source s;
  s.label = Label(arg);
  s.generation = "config";
  s.hash_seed = config->lb.hash_seed;
  for (const VipConfig& vc : config->vips) {
    absl::StatusOr<LookupTable> table = BuildVipTable(TableInput::Of(vc).ToVipConfig());
    if (!table.ok()) {
      return absl::Status(table.status().code(),
                          absl::StrFormat("%s:%d: vip \"%s\": cannot build its table: %s", arg.value,
                                          vc.line, vc.name, table.status().message()));
    }
    VipView v;
    v.generation = "config";
    v.fingerprint = Hex(table->fingerprint());
    v.algorithm = std::string(ToString(vc.algorithm));
    v.table_size = vc.table_size;
    for (const BackendConfig& b : vc.backends) v.backends[b.name] = {b.weight, std::nullopt, "unknown"};
    s.vips[vc.name] = std::move(v);
  }
  return s;
}

absl::StatusOr<Source> ReadLive(const SourceArg& arg) {
  using enum MetricId;
  using telemetry::Count;
  using telemetry::Entry;
  using telemetry::Text;
  const std::string path =
      arg.kind == SourceArg::Kind::kPrefix ? telemetry::SocketPath(arg.value) : arg.value;
  absl::StatusOr<telemetry::Snapshot> snap = telemetry::ReadSnapshot(path);
  if (!snap.ok()) return snap.status();
  // Agreement cannot be asserted on a part of the backends.
  if (!snap->warnings.empty()) return absl::DataLossError(absl::StrJoin(snap->warnings, "; "));
  Source s;
  s.label = Label(arg);
  s.live = true;
  s.generation = absl::StrCat(telemetry::U64(snap->stats, kGeneration));
  // Route announcement is shown, never a reason to refuse the source: the
  // tables are read whole without it.
  if (!snap->announce_error.empty()) {
    s.announce_state = "?";
  } else if (snap->announce.is_null()) {
    s.announce_state = "not reported";
  } else {
    const Json& a = snap->announce;
    s.announce_state = Text(telemetry::Get(a, "state")).has_value()
                           ? telemetry::Shown(*Text(telemetry::Get(a, "state")))
                           : "?";
    const Json* prefixes = telemetry::Get(a, "prefixes");
    for (size_t i = 0; i < telemetry::ArraySize(prefixes); ++i) {
      const std::optional<std::string> prefix = Text(&(*prefixes)[i]);
      const std::optional<std::string> reason = Text(Entry(a, "reasons", i));
      if (!prefix || !reason) continue;
      const std::string address = prefix->substr(0, prefix->find('/'));
      s.announce_reasons.emplace(address, telemetry::Shown(*reason));
    }
  }
  for (const auto& [name, reply] : snap->vips) {
    VipView v;
    v.generation = absl::StrCat(telemetry::U64(reply, "generation"));
    v.fingerprint = telemetry::Str(reply, "fingerprint");
    if (v.fingerprint.empty()) {
      return absl::DataLossError(
          absl::StrFormat("vip \"%s\": the reply has no table fingerprint", telemetry::Shown(name)));
    }
    v.algorithm = telemetry::Str(reply, "algorithm");
    if (telemetry::Get(reply, "table_size") != nullptr) v.table_size = telemetry::U64(reply, "table_size");
    v.address = telemetry::Str(reply, "address");
    if (const Json* on = telemetry::Get(reply, VipKey(GetMetric(kVipAnnounced))); on != nullptr) {
      const std::optional<uint64_t> c = Count(on);
      v.announced = !c || *c > 1 ? "?" : *c == 1 ? "yes" : "no";
    }
    const bool sends_health = telemetry::SendsHealth(reply);
    for (size_t i = 0; i < telemetry::BackendRows(reply); ++i) {
      std::optional<std::string> backend = Text(Entry(reply, kBackendNamesKey, i));
      if (!backend) return absl::DataLossError(absl::StrFormat("vip \"%s\": backend %u has no name",
                                                               telemetry::Shown(name), i));
      BackendView b;
      b.weight = Count(Entry(reply, kBackendWeights, i));
      b.effective_weight = Count(Entry(reply, kBackendEffectiveWeights, i));
      b.health = sends_health ? Text(Entry(reply, kBackendHealthKey, i)).value_or("?") : "?";
      v.backends[*backend] = std::move(b);
    }
    s.vips[name] = std::move(v);
  }
  return s;
}

// The weight a source's table was built with: the effective weight where
// live (health and slow start decide it), else the configured one.
std::optional<uint64_t> TableWeight(const BackendView& b) {
  return b.effective_weight ? b.effective_weight : b.weight;
}

std::string Opt(std::optional<uint64_t> v) { return v ? absl::StrCat(*v) : "?"; }

std::string ShownName(const std::string& s) { return telemetry::Shown(s); }

// Why source `o`'s table of a VIP differs from the reference `r`'s, in words:
// the backends only one has, and those whose weights or health differ.
std::vector<std::string> Differences(const Source& rs, const VipView& r, const Source& os,
                                     const VipView& o) {
  std::vector<std::string> only_r, only_o, what;
  for (const auto& [name, b] : r.backends) {
    if (!o.backends.contains(name)) only_r.push_back(ShownName(name));
  }
  for (const auto& [name, b] : o.backends) {
    if (!r.backends.contains(name)) only_o.push_back(ShownName(name));
  }
  if (!only_r.empty()) what.push_back(absl::StrFormat("only %s has %s", rs.label, absl::StrJoin(only_r, ", ")));
  if (!only_o.empty()) what.push_back(absl::StrFormat("only %s has %s", os.label, absl::StrJoin(only_o, ", ")));
  for (const auto& [name, rb] : r.backends) {
    auto it = o.backends.find(name);
    if (it == o.backends.end()) continue;
    const BackendView& ob = it->second;
    std::vector<std::string> d;
    if (rb.weight != ob.weight) {
      d.push_back(absl::StrFormat("weight %s on %s, %s on %s", Opt(rb.weight), rs.label, Opt(ob.weight), os.label));
    }
    // What each serves it with, where a live source's health is in play.
    const bool live = rb.effective_weight.has_value() || ob.effective_weight.has_value();
    if (live && (TableWeight(rb) != TableWeight(ob) || rb.health != ob.health)) {
      auto served = [](const BackendView& b) {
        return b.effective_weight
                   ? absl::StrFormat("effective weight %u (%s)", *b.effective_weight, telemetry::Shown(b.health))
                   : absl::StrFormat("weight %s (health %s)", Opt(b.weight), telemetry::Shown(b.health));
      };
      d.push_back(absl::StrFormat("%s on %s, %s on %s", served(rb), rs.label, served(ob), os.label));
    }
    if (!d.empty()) what.push_back(absl::StrFormat("%s: %s", ShownName(name), absl::StrJoin(d, "; ")));
  }
  if (r.algorithm != o.algorithm) {
    what.push_back(absl::StrFormat("algorithm %s vs %s", telemetry::Shown(r.algorithm), telemetry::Shown(o.algorithm)));
  }
  if (r.table_size != o.table_size) {
    what.push_back(absl::StrFormat("table size %s vs %s", Opt(r.table_size), Opt(o.table_size)));
  }
  if (what.empty()) {
    what.push_back("same backends, weights, algorithm and size: ring_points (not in telemetry) or the "
                   "maglb versions differ");
  }
  return what;
}

report::Cell OptInt(std::optional<uint64_t> v) {
  return v ? report::Int(static_cast<double>(*v)) : report::Num(std::nan(""));
}

struct FleetVerdict {
  std::vector<std::string> problems;  ///< one line each, for the summary
  std::vector<std::string> warnings;  ///< shown, not a disagreement
};

// One VIP across the sources: a table per source, a table per backend and
// source, and the problems found.
void CompareVip(const std::string& name, const std::vector<Source>& sources, report::Report& out,
                FleetVerdict& verdict) {
  std::vector<const Source*> have, lack;
  for (const Source& s : sources) (s.vips.contains(name) ? have : lack).push_back(&s);
  const Source& ref = *have.front();
  const VipView& rv = ref.vips.at(name);
  std::vector<std::string> problems;
  if (!lack.empty()) {
    std::vector<std::string> labels;
    for (const Source* s : lack) labels.push_back(s->label);
    problems.push_back(absl::StrFormat("missing on %s", absl::StrJoin(labels, ", ")));
  }
  std::vector<std::string> footer;
  for (const Source* s : have) {
    const VipView& v = s->vips.at(name);
    if (v.fingerprint == rv.fingerprint) continue;
    const std::string diff = absl::StrJoin(Differences(ref, rv, *s, v), "; ");
    problems.push_back(absl::StrFormat("table of %s (%s) differs from %s (%s): %s", s->label,
                                       telemetry::Shown(v.fingerprint), ref.label,
                                       telemetry::Shown(rv.fingerprint), diff));
  }
  const std::string shown = ShownName(name);
  report::Table& t = out.tables.emplace_back();
  t.id = "vip:" + name;
  t.title = problems.empty() ? absl::StrFormat("vip \"%s\": agree", shown)
                             : absl::StrFormat("vip \"%s\": DISAGREE", shown);
  using report::Align;
  t.columns = {report::FixedColumn("source", Align::kLeft, 24),
               report::FixedColumn("generation", Align::kRight, 10),
               report::FixedColumn("fingerprint", Align::kLeft, 16),
               report::FixedColumn("algorithm", Align::kLeft, 10),
               report::FixedColumn("table_size", Align::kRight, 10),
               report::FixedColumn("backends", Align::kRight, 8),
               report::FixedColumn("announced", Align::kLeft, 9)};
  for (const Source& s : sources) {
    auto it = s.vips.find(name);
    if (it == s.vips.end()) {
      t.rows.push_back({report::Str(s.label), report::Str(s.generation), report::Str("MISSING"),
                        report::Str("-"), report::Num(std::nan("")), report::Num(std::nan("")),
                        report::Str("-")});
      continue;
    }
    const VipView& v = it->second;
    t.rows.push_back({report::Str(s.label), report::Str(v.generation), report::Str(telemetry::Shown(v.fingerprint)),
                      report::Str(telemetry::Shown(v.algorithm)), OptInt(v.table_size),
                      report::Int(static_cast<double>(v.backends.size())), report::Str(v.announced)});
  }
  for (const std::string& p : problems) t.footer.push_back(p);
  // No route to the VIP from any instance that announces routes: the router
  // sends it nowhere. A warning: the instances may agree on their tables.
  std::vector<const Source*> announcing;
  for (const Source* s : have) {
    if (Announces(*s)) announcing.push_back(s);
  }
  if (!announcing.empty() && std::none_of(have.begin(), have.end(), [&](const Source* s) {
        return s->vips.at(name).announced == "yes";
      })) {
    std::vector<std::string> why;
    for (const Source* s : announcing) {
      auto reason = s->announce_reasons.find(s->vips.at(name).address);
      why.push_back(absl::StrFormat("%s %s: %s", s->label, s->announce_state,
                                    reason != s->announce_reasons.end() ? reason->second : "?"));
    }
    const std::string warning =
        absl::StrFormat("WARNING: no instance announces it (%s)", absl::StrJoin(why, "; "));
    t.footer.push_back(warning);
    verdict.warnings.push_back(absl::StrFormat("vip \"%s\": %s", shown, warning));
  }

  // Every backend any source has, per source: what it says of it.
  report::Table& b = out.tables.emplace_back();
  b.id = "vip:" + name + ":backends";
  b.columns = {report::FixedColumn("backend", Align::kLeft, 20), report::FixedColumn("source", Align::kLeft, 24),
               report::FixedColumn("weight", Align::kRight, 7),  report::FixedColumn("eff_weight", Align::kRight, 10),
               report::FixedColumn("health", Align::kLeft, 9),   report::FixedColumn("differs", Align::kLeft, 7)};
  std::set<std::string> names;
  for (const Source* s : have) {
    for (const auto& [n, _] : s->vips.at(name).backends) names.insert(n);
  }
  for (const std::string& n : names) {
    std::set<std::optional<uint64_t>> table_weights, weights;
    bool absent_somewhere = false;
    for (const Source* s : have) {
      const auto& bs = s->vips.at(name).backends;
      auto it = bs.find(n);
      if (it == bs.end()) {
        absent_somewhere = true;
        continue;
      }
      table_weights.insert(TableWeight(it->second));
      weights.insert(it->second.weight);
    }
    const bool differs = absent_somewhere || table_weights.size() > 1 || weights.size() > 1;
    for (const Source* s : have) {
      const auto& bs = s->vips.at(name).backends;
      auto it = bs.find(n);
      std::vector<report::Cell> row = {report::Str(ShownName(n)), report::Str(s->label)};
      if (it == bs.end()) {
        row.insert(row.end(), {report::Num(std::nan("")), report::Num(std::nan("")), report::Str("absent")});
      } else {
        row.insert(row.end(), {OptInt(it->second.weight), OptInt(it->second.effective_weight),
                               report::Str(telemetry::Shown(it->second.health))});
      }
      row.push_back(report::Str(differs ? "DIFFERS" : ""));
      b.rows.push_back(std::move(row));
    }
  }
  for (const std::string& p : problems) verdict.problems.push_back(absl::StrFormat("vip \"%s\": %s", shown, p));
}

}  // namespace

int CmdFleet(int argc, char** argv) {
  std::vector<SourceArg> args;
  std::string format = "table";
  for (int i = 0; i < argc; ++i) {
    std::string_view a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--prefix" && has_value) {
      args.push_back({SourceArg::Kind::kPrefix, argv[++i]});
    } else if (a == "--socket" && has_value) {
      args.push_back({SourceArg::Kind::kSocket, argv[++i]});
    } else if (a == "--config" && has_value) {
      args.push_back({SourceArg::Kind::kConfig, argv[++i]});
    } else if (a == "--format" && has_value) {
      format = argv[++i];
      if (format != "table" && format != "json") {
        std::fprintf(stderr, "maglbctl fleet: --format is table or json, not '%s'\n", format.c_str());
        return kExitUsage;
      }
    } else {
      std::fprintf(stderr, "maglbctl fleet: unexpected argument '%s'\n%s", argv[i], kFleetUsage);
      return kExitUsage;
    }
  }
  if (args.size() < 2) {
    std::fprintf(stderr, "maglbctl fleet: needs at least 2 sources to compare, got %zu\n%s", args.size(),
                 kFleetUsage);
    return kExitUsage;
  }

  std::vector<Source> sources;
  std::vector<std::string> unreadable;
  for (const SourceArg& a : args) {
    absl::StatusOr<Source> s = a.kind == SourceArg::Kind::kConfig ? ReadConfig(a) : ReadLive(a);
    if (!s.ok()) {
      const std::string line = absl::StrFormat("%s: cannot be read: %s", Label(a), s.status().message());
      std::fprintf(stderr, "maglbctl fleet: %s\n", line.c_str());
      unreadable.push_back(line);
      continue;
    }
    sources.push_back(*std::move(s));
  }

  report::Report out;
  out.blank_line_after_each = false;
  out.fit_columns = true;  // source labels are paths of any length
  FleetVerdict verdict;
  out.tables.emplace_back();  // the summary, filled in below
  report::Table summary;
  summary.id = "sources";
  using report::Align;
  summary.columns = {report::FixedColumn("source", Align::kLeft, 24),
                     report::FixedColumn("generation", Align::kRight, 10),
                     report::FixedColumn("hash_seed", Align::kRight, 20),
                     report::FixedColumn("vips", Align::kRight, 5),
                     report::FixedColumn("announce", Align::kLeft, 12)};
  std::set<uint64_t> seeds;
  for (const Source& s : sources) {
    if (s.hash_seed) seeds.insert(*s.hash_seed);
    summary.rows.push_back({report::Str(s.label), report::Str(s.generation),
                            s.hash_seed ? report::Str(absl::StrCat(*s.hash_seed)) : report::Str("not reported"),
                            report::Int(static_cast<double>(s.vips.size())), report::Str(s.announce_state)});
  }
  if (seeds.size() > 1) {
    std::vector<std::string> per;
    for (const Source& s : sources) {
      if (s.hash_seed) per.push_back(absl::StrFormat("%s: %u", s.label, *s.hash_seed));
    }
    verdict.problems.push_back(absl::StrFormat(
        "hash_seed differs (%s): a flow hashes differently on each, whatever the tables",
        absl::StrJoin(per, ", ")));
  }
  std::set<std::string> vip_names;
  for (const Source& s : sources) {
    for (const auto& [name, _] : s.vips) vip_names.insert(name);
  }
  if (sources.size() >= 2) {
    for (const std::string& name : vip_names) CompareVip(name, sources, out, verdict);
  }

  int rc = kExitOk;
  if (!unreadable.empty()) {
    rc = kExitUnreadable;
    summary.title = absl::StrFormat("fleet: %zu of %zu sources could not be read; agreement unknown",
                                    unreadable.size(), args.size());
    summary.notes = unreadable;
  } else if (!verdict.problems.empty()) {
    rc = kExitDisagree;
    summary.title = absl::StrFormat("fleet: %zu sources DISAGREE (%zu problem(s))", sources.size(),
                                    verdict.problems.size());
  } else {
    summary.title = absl::StrFormat("fleet: %zu sources agree on %zu VIPs%s", sources.size(), vip_names.size(),
                                    verdict.warnings.empty()
                                        ? ""
                                        : absl::StrFormat("; %zu warning(s)", verdict.warnings.size()));
  }
  if (!unreadable.empty() && !verdict.problems.empty()) {
    summary.notes.push_back(absl::StrFormat("and the readable sources DISAGREE (%zu problem(s))",
                                            verdict.problems.size()));
  }
  summary.footer = verdict.problems;
  summary.footer.insert(summary.footer.end(), verdict.warnings.begin(), verdict.warnings.end());
  if (seeds.size() <= 1 && std::any_of(sources.begin(), sources.end(), [](const Source& s) { return s.live; })) {
    summary.footer.push_back("hash_seed: telemetry does not report it; compared among config sources only");
  }
  out.tables.front() = std::move(summary);
  report::Print(out, format == "json" ? report::Format::kJson : report::Format::kText);
  return rc;
}

}  // namespace maglb
