// The EAL of a unit test process that needs DPDK (lcores, rte_malloc, RCU):
// no hugepages, no PCI, no shared config or telemetry, a file prefix of its
// own. Started once a process and cleaned up at exit: the EAL cannot start
// again after rte_eal_cleanup (--gtest_repeat runs SetUpTestSuite again).
// Header-only; needs DPDK.
#ifndef MAGLB_TESTS_SUPPORT_TEST_EAL_H_
#define MAGLB_TESTS_SUPPORT_TEST_EAL_H_

#include <rte_eal.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace maglb::testing {

/// Whether the EAL is up: `name` (the program, and the prefix's stem),
/// `memory_mb` (-m), `lcores` (--lcores, e.g. "(0-2)@(0-1)"). The first
/// call's arguments hold for the process.
inline bool StartTestEal(const std::string& name, int memory_mb, const std::string& lcores) {
  static const bool ok = [&] {
    std::vector<std::string> args = {name, "--no-huge", "-m", absl::StrCat(memory_mb), "--no-pci",
                                     absl::StrCat("--lcores=", lcores), "--log-level=5", "--no-shconf",
                                     "--no-telemetry", absl::StrCat("--file-prefix=maglb_", name, "_", getpid())};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    if (rte_eal_init(static_cast<int>(argv.size()), argv.data()) < 0) return false;
    std::atexit([] {
      const std::string runtime_dir = rte_eal_get_runtime_dir();
      rte_eal_cleanup();
      rmdir(runtime_dir.c_str());  // left empty by --no-shconf
    });
    return true;
  }();
  return ok;
}

}  // namespace maglb::testing

#endif  // MAGLB_TESTS_SUPPORT_TEST_EAL_H_
