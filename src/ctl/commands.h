// maglbctl's commands. A new command is a file of its own here (its Cmd* entry
// point and usage lines, output through report.h) and one line in commands.cc.
#ifndef MAGLB_CTL_COMMANDS_H_
#define MAGLB_CTL_COMMANDS_H_

#include <cstdio>
#include <span>
#include <string_view>

namespace maglb {

struct Command {
  std::string_view name;
  /// argv holds the arguments after the command's name; returns the exit status.
  int (*run)(int argc, char** argv);
  const char* usage;  ///< its lines in maglbctl's help
};

/// Every command, in the order the help lists them.
std::span<const Command> Commands();

/// maglbctl's help: every command's usage lines.
void PrintUsage(FILE* out);

}  // namespace maglb

#endif  // MAGLB_CTL_COMMANDS_H_
