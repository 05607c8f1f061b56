// Rendezvous (highest random weight) hashing compiled to a LookupTable.
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "maglb/hash.h"
#include "maglb/hashing.h"
#include "maglb/maglev.h"

namespace maglb {

absl::Status ValidateRendezvousInput(std::span<const BackendSpec> backends, uint32_t m) {
  uint64_t active = 0;
  for (const BackendSpec& b : backends) active += b.weight > 0;
  if (active * m <= kMaxRendezvousEvaluations) return absl::OkStatus();
  // The largest table that fits is what the operator can set instead.
  uint64_t fit = kMaxRendezvousEvaluations / active;
  std::string remedy =
      fit >= std::max<uint64_t>(backends.size(), kMinTableSize)
          ? absl::StrFormat("set a prime table_size of at most %u, or choose \"maglev\"", fit)
          : std::string("choose \"maglev\"");
  return absl::InvalidArgumentError(absl::StrFormat(
      "rendezvous scores every slot against every serving backend: table_size %u x %u "
      "serving backends = %u score evaluations, more than the %u allowed (the rebuild would "
      "take seconds on every reload); %s, whose build does not grow as M x N",
      m, active, active * m, kMaxRendezvousEvaluations, remedy));
}

absl::StatusOr<LookupTable> BuildRendezvousTable(std::span<const BackendSpec> backends,
                                                 uint32_t m) {
  if (absl::Status s = ValidateTableInput(backends, m); !s.ok()) return s;
  if (absl::Status s = ValidateRendezvousInput(backends, m); !s.ok()) return s;
  std::vector<std::string> names = BackendNames(backends);

  // Active backends grouped by weight, by name within a group. Within a group
  // the score is increasing in the hash, so the largest hash is the group's
  // best (and the first of equal hashes the byte-smallest name): only one
  // score, one log, per group and slot.
  std::vector<uint32_t> order = ActiveByName(backends);
  if (order.empty()) return LookupTable({}, std::move(names));
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return backends[a].weight < backends[b].weight;
  });
  std::vector<uint64_t> name_hash(order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    name_hash[k] = Xxh64(backends[order[k]].name, kRendezvousSeed);
  }
  struct Group {
    size_t begin, end;
    uint32_t weight;
  };
  std::vector<Group> groups;
  for (size_t k = 0; k < order.size(); ++k) {
    uint32_t w = backends[order[k]].weight;
    if (groups.empty() || groups.back().weight != w) groups.push_back({k, k, w});
    groups.back().end = k + 1;
  }
  // Scores use the weights divided by their gcd, so that scaling every weight
  // by one factor (slow start does) gives bit-identical scores, not scores
  // rounded differently that could swap a near-tie.
  uint32_t common = 0;
  for (const Group& g : groups) common = std::gcd(common, g.weight);
  for (Group& g : groups) g.weight /= common;

  std::vector<uint16_t> slots(m);
  for (uint32_t s = 0; s < m; ++s) {
    uint64_t key_hash = Fmix64(SlotKey(s, m) ^ kRendezvousSeed);
    size_t winner = 0;
    double winner_score = -1;
    for (const Group& g : groups) {
      size_t best = g.begin;
      uint64_t best_hash = RendezvousHash(key_hash, name_hash[g.begin]);
      for (size_t k = g.begin + 1; k < g.end; ++k) {
        uint64_t h = RendezvousHash(key_hash, name_hash[k]);
        if (h > best_hash) {
          best_hash = h;
          best = k;
        }
      }
      if (groups.size() == 1) {
        winner = best;
        break;
      }
      double score = RendezvousScore(best_hash, g.weight);
      if (score > winner_score ||
          (score == winner_score && backends[order[best]].name < backends[order[winner]].name)) {
        winner_score = score;
        winner = best;
      }
    }
    slots[s] = static_cast<uint16_t>(order[winner]);
  }
  return LookupTable(std::move(slots), std::move(names));
}

}  // namespace maglb
