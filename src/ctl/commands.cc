#include "commands.h"

#include "analyze.h"
#include "diff.h"
#include "drain.h"
#include "fleet.h"
#include "stats.h"
#include "table.h"
#include "top.h"

namespace maglb {

std::span<const Command> Commands() {
  static const Command kCommands[] = {
      {"table", CmdTable, kTableUsage},
      {"diff", CmdDiff, kDiffUsage},
      {"analyze", CmdAnalyze, kAnalyzeUsage},
      {"stats", CmdStats, kStatsUsage},
      {"top", CmdTop, kTopUsage},
      {"fleet", CmdFleet, kFleetUsage},
      {"drain", CmdDrain, kDrainUsage},
  };
  return kCommands;
}

void PrintUsage(FILE* out) {
  std::fputs("usage:\n", out);
  for (const Command& c : Commands()) std::fputs(c.usage, out);
}

}  // namespace maglb
