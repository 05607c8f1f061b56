#include "maglb/announce.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace maglb {

std::string AddressAnnouncement::Prefix() const {
  return absl::StrCat(address.ToString(), "/", prefix_len());
}

std::string WhyNotServing(const BackendState& b) {
  if (b.health == BackendHealth::kDown) return "down";
  if (b.weight == 0) return b.configured_weight == 0 ? "weight 0" : "effective weight 0";
  if (!b.next_hop_known) return "next hop unresolved";
  return "";
}

namespace {

// "web-gre: 2 of 3 backends serving" or "web-gre: be1 down, be2 next hop
// unresolved" (at most a few backends named: a log line, not a table).
constexpr size_t kBackendsNamed = 3;

std::string VipVerdict(const VipState& v, const AnnounceReadiness& readiness, size_t* serving) {
  *serving = 0;
  std::vector<std::string> why;
  size_t unnamed = 0;
  for (const BackendState& b : v.backends) {
    std::string w = WhyNotServing(b);
    if (w.empty() && readiness.first_check_pending && readiness.first_check_pending(v.name, b.name)) {
      w = "first check pending";
    }
    if (w.empty()) {
      ++*serving;
    } else if (why.size() < kBackendsNamed) {
      why.push_back(absl::StrCat(b.name, " ", w));
    } else {
      ++unnamed;
    }
  }
  if (v.table->empty()) *serving = 0;  // nothing to look up (every weight 0)
  if (*serving > 0) {
    return absl::StrFormat("%s: %u of %u backend%s serving", v.name, *serving, v.backends.size(),
                           v.backends.size() == 1 ? "" : "s");
  }
  if (v.backends.empty()) return absl::StrCat(v.name, ": no backend configured");
  if (why.empty()) return absl::StrCat(v.name, ": empty table");
  std::string text = absl::StrCat(v.name, ": ", absl::StrJoin(why, ", "));
  if (unnamed > 0) absl::StrAppend(&text, " and ", unnamed, " more");
  return text;
}

}  // namespace

std::vector<AddressAnnouncement> DecideAnnouncements(const LbState& state,
                                                     const AnnounceReadiness& readiness) {
  std::vector<AddressAnnouncement> out;
  // Per address: the verdict of a serving VIP (the first), else every VIP's.
  std::vector<std::vector<std::string>> down_verdicts;
  for (const VipState& v : state.vips()) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const AddressAnnouncement& a) { return a.address == v.address; });
    size_t index = static_cast<size_t>(it - out.begin());
    if (it == out.end()) {
      out.push_back(AddressAnnouncement{.address = v.address, .announce = false, .reason = {}, .vips = {}});
      down_verdicts.emplace_back();
    }
    AddressAnnouncement& a = out[index];
    a.vips.push_back(v.name);
    size_t serving = 0;
    std::string verdict = VipVerdict(v, readiness, &serving);
    if (serving > 0) {
      if (!a.announce) a.reason = verdict;
      a.announce = true;
    } else {
      down_verdicts[index].push_back(std::move(verdict));
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    AddressAnnouncement& a = out[i];
    if (a.announce && readiness.draining) {
      a.announce = false;
      a.reason = readiness.drain_reason.empty() ? "draining" : readiness.drain_reason;
    } else if (a.announce && !readiness.workers_live) {
      a.announce = false;
      a.reason = readiness.why_not_live.empty() ? "workers not live" : readiness.why_not_live;
    } else if (!a.announce) {
      a.reason = absl::StrCat("no serving backend (", absl::StrJoin(down_verdicts[i], "; "), ")");
    }
  }
  return out;
}

}  // namespace maglb
