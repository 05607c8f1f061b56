// maglbctl: the operator's tool. Inspects tables and previews reloads offline,
// from config files alone, and reads a running maglb's counters. Each command
// lives in a file of its own (commands.cc lists them).
#include <cstdio>
#include <cstring>
#include <string_view>

#include "commands.h"
#include "maglb/exit_codes.h"

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    maglb::PrintUsage(argc < 2 ? stderr : stdout);
    return argc < 2 ? maglb::kExitUsage : maglb::kExitOk;
  }
  const std::string_view name = argv[1];
  for (const maglb::Command& c : maglb::Commands()) {
    if (c.name == name) return c.run(argc - 2, argv + 2);
  }
  std::fprintf(stderr, "maglbctl: unknown command '%s'\n", argv[1]);
  maglb::PrintUsage(stderr);
  return maglb::kExitUsage;
}
