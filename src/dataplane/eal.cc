#include "dataplane/eal.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_join.h"

namespace maglb {
namespace {

std::vector<std::string> ReadLines(FILE* f) {
  std::vector<std::string> lines;
  std::rewind(f);
  char buf[1024];
  while (std::fgets(buf, sizeof(buf), f) != nullptr) lines.emplace_back(buf);
  return lines;
}

// rte_eal_init with stdout and stderr redirected into temporary files, read
// back into *output.
int QuietEalInit(int argc, char** argv, EalOutput* output) {
  std::fflush(stdout);
  std::fflush(stderr);
  FILE* held_out = std::tmpfile();
  FILE* held_err = std::tmpfile();
  int saved_out = dup(STDOUT_FILENO);
  int saved_err = dup(STDERR_FILENO);
  if (held_out == nullptr || held_err == nullptr || saved_out < 0 || saved_err < 0 ||
      dup2(fileno(held_out), STDOUT_FILENO) < 0 || dup2(fileno(held_err), STDERR_FILENO) < 0) {
    // Cannot hold them back: run it plainly.
    if (saved_out >= 0) dup2(saved_out, STDOUT_FILENO), close(saved_out);
    if (saved_err >= 0) dup2(saved_err, STDERR_FILENO), close(saved_err);
    if (held_out != nullptr) std::fclose(held_out);
    if (held_err != nullptr) std::fclose(held_err);
    return rte_eal_init(argc, argv);
  }
  int rc = rte_eal_init(argc, argv);
  const int init_errno = rte_errno;
  std::fflush(stdout);
  std::fflush(stderr);
  dup2(saved_out, STDOUT_FILENO);
  dup2(saved_err, STDERR_FILENO);
  close(saved_out);
  close(saved_err);
  output->out = ReadLines(held_out);
  output->err = ReadLines(held_err);
  std::fclose(held_out);
  std::fclose(held_err);
  rte_errno = init_errno;
  return rc;
}

}  // namespace

void EalOutput::Replay() const {
  for (const std::string& l : out) std::fputs(l.c_str(), replay_to ? replay_to : stdout);
  for (const std::string& l : err) std::fputs(l.c_str(), replay_to ? replay_to : stderr);
  std::fflush(replay_to ? replay_to : stdout);
}

std::string EalOutput::Reasons(const std::vector<std::string>& only_with) const {
  std::vector<std::string> reasons;
  for (const auto* lines : {&err, &out}) {
    for (std::string l : *lines) {
      while (!l.empty() && (l.back() == '\n' || l.back() == ' ')) l.pop_back();
      if (lines == &out && l.rfind("EAL: ", 0) != 0) continue;  // usage text
      if (l.empty() || l.find("Invalid 'command line' arguments") != std::string::npos) continue;
      bool wanted = only_with.empty();
      for (const std::string& w : only_with) wanted |= l.find(w) != std::string::npos;
      if (!wanted) continue;
      // "build/maglb: unrecognized option '--x'" -> "unrecognized option '--x'"
      if (!program.empty() && l.rfind(program + ": ", 0) == 0) l = l.substr(program.size() + 2);
      if (std::find(reasons.begin(), reasons.end(), l) == reasons.end()) reasons.push_back(l);
    }
  }
  return absl::StrJoin(reasons, "; ");
}

absl::StatusOr<Eal> Eal::Init(int argc, char** argv, EalOutput* output) {
  const int consumed = QuietEalInit(argc, argv, output);
  if (consumed < 0) {
    // A failed rte_eal_init leaves nothing that rte_eal_cleanup would undo.
    std::string reasons = output->Reasons();
    return absl::InternalError(reasons.empty() ? std::string(rte_strerror(rte_errno)) : reasons);
  }
  return Eal(consumed);
}

Eal::~Eal() {
  if (initialised_) rte_eal_cleanup();
}

}  // namespace maglb
