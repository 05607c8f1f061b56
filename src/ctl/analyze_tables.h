// `maglbctl analyze`, the data plane's view: tables of M slots built by every
// scheme from maglb's own hashes, their balance and their disruption when a
// backend comes or goes.
#ifndef MAGLB_CTL_ANALYZE_TABLES_H_
#define MAGLB_CTL_ANALYZE_TABLES_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analyze_theory.h"
#include "maglb/lookup_table.h"
#include "maglb/maglev.h"
#include "report.h"

namespace maglb::analyze {

// A scheme by name, and how it builds a table of M slots.
struct SchemeBuilder {
  std::string name;
  std::function<absl::StatusOr<LookupTable>(std::span<const BackendSpec>, uint32_t)> build;
};

// Every scheme, in the order the reports list them.
std::vector<SchemeBuilder> AllSchemes(uint32_t ring_points);

// Fractions of the table whose backend changed.
struct SlotMovement {
  double moved = 0, between_survivors = 0;
};

// One scheme at N equal backends: its balance, and what adding one backend
// (its name sorting last) and removing a middle one move.
struct TableFigures {
  std::string scheme;
  uint32_t n;
  Balance balance;
  SlotMovement add, remove;
};

// Every scheme at N = 10, 100 and 1000 backends.
absl::StatusOr<std::vector<TableFigures>> MeasureTables(uint32_t m, uint32_t ring_points);

// The balance and the disruption tables of those figures, beside theory.
std::vector<report::Table> TableExperiments(const std::vector<TableFigures>& figures, uint32_t m,
                                            uint32_t ring_points);

}  // namespace maglb::analyze

#endif  // MAGLB_CTL_ANALYZE_TABLES_H_
