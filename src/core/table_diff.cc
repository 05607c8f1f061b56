#include "maglb/table_diff.h"

#include <algorithm>
#include <map>
#include <utility>

namespace maglb {
namespace {

constexpr double kHashSpace = 4294967296.0;  // 2^32, what LookupTable::SlotOf maps

// First 32-bit hash value that lands in slot s of an M-slot table.
uint64_t SlotStart(uint64_t s, uint64_t m) { return ((s << 32) + m - 1) / m; }

std::map<std::string, uint32_t> Weights(std::span<const BackendSpec> backends) {
  std::map<std::string, uint32_t> w;
  for (const BackendSpec& b : backends) w[b.name] = b.weight;
  return w;
}

std::map<std::string, double> Shares(const std::map<std::string, uint32_t>& weights) {
  double total = 0;
  for (const auto& [name, w] : weights) total += w;
  std::map<std::string, double> shares;
  for (const auto& [name, w] : weights) shares[name] = total > 0 ? w / total : 0.0;
  return shares;
}

}  // namespace

TableDiff DiffTables(const LookupTable& old_table, std::span<const BackendSpec> old_backends,
                     const LookupTable& new_table, std::span<const BackendSpec> new_backends) {
  TableDiff diff;
  std::map<std::string, uint32_t> old_w = Weights(old_backends), new_w = Weights(new_backends);
  std::map<std::string, double> old_s = Shares(old_w), new_s = Shares(new_w);

  std::map<std::string, BackendChange> changes;
  for (const auto& [name, w] : old_w) {
    BackendChange& c = changes[name];
    c.name = name;
    c.in_old = true;
    c.old_weight = w;
  }
  for (const auto& [name, w] : new_w) {
    BackendChange& c = changes[name];
    c.name = name;
    c.in_new = true;
    c.new_weight = w;
  }
  for (auto& [name, c] : changes) {
    double before = old_s.count(name) ? old_s[name] : 0.0;
    double after = new_s.count(name) ? new_s[name] : 0.0;
    if (!old_table.empty()) diff.ideal += std::max(0.0, before - after);
  }
  if (old_table.empty()) diff.ideal = new_table.empty() ? 0.0 : 1.0;
  else if (new_table.empty()) diff.ideal = 1.0;

  std::map<std::pair<std::string, std::string>, double> moves;
  auto add_range = [&](const std::string* from, const std::string* to, double fraction) {
    if (from != nullptr) changes[*from].old_share += fraction;
    if (to != nullptr) changes[*to].new_share += fraction;
    if (from != nullptr && to != nullptr && *from == *to) return;
    diff.moved += fraction;
    if (from != nullptr) changes[*from].lost += fraction;
    if (to != nullptr) changes[*to].gained += fraction;
    if (from != nullptr && to != nullptr) moves[{*from, *to}] += fraction;
  };

  if (old_table.empty() || new_table.empty()) {
    const LookupTable& t = old_table.empty() ? new_table : old_table;
    if (!t.empty()) {
      std::vector<uint32_t> counts = t.EntryCounts();
      for (size_t i = 0; i < counts.size(); ++i) {
        double f = static_cast<double>(counts[i]) / t.size();
        if (f == 0) continue;
        const std::string* name = &t.backend_names()[i];
        add_range(old_table.empty() ? nullptr : name, old_table.empty() ? name : nullptr, f);
      }
    }
  } else {
    // Merge the slot boundaries of both tables over [0, 2^32).
    const uint64_t m_old = old_table.size(), m_new = new_table.size();
    uint64_t i = 0, j = 0, x = 0;
    while (x < (uint64_t{1} << 32)) {
      uint64_t end = std::min(SlotStart(i + 1, m_old), SlotStart(j + 1, m_new));
      add_range(&old_table.backend_names()[old_table.slot(static_cast<uint32_t>(i))],
                &new_table.backend_names()[new_table.slot(static_cast<uint32_t>(j))],
                static_cast<double>(end - x) / kHashSpace);
      x = end;
      if (SlotStart(i + 1, m_old) == end) ++i;
      if (SlotStart(j + 1, m_new) == end) ++j;
    }
  }

  for (const auto& [key, fraction] : moves) {
    diff.movements.push_back({key.first, key.second, fraction});
    const BackendChange& from = changes[key.first];
    const BackendChange& to = changes[key.second];
    if (from.old_weight > 0 && from.new_weight > 0 && to.old_weight > 0 && to.new_weight > 0) {
      diff.between_survivors += fraction;
    }
  }
  std::stable_sort(diff.movements.begin(), diff.movements.end(),
                   [](const Movement& a, const Movement& b) { return a.fraction > b.fraction; });
  for (auto& [name, c] : changes) diff.backends.push_back(std::move(c));
  return diff;
}

}  // namespace maglb
