// What iproute2 (a reader nobody here wrote) says of the kernel's routing
// tables, for the tests of maglb's own route writing (rtnetlink_route_test,
// announce_task_test). Header-only; needs nlohmann-json and gtest.
#ifndef MAGLB_TESTS_SUPPORT_KERNEL_ROUTES_H_
#define MAGLB_TESTS_SUPPORT_KERNEL_ROUTES_H_

#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace maglb::testing {

// Runs a shell command; its standard output, and its exit status in *rc.
inline std::string Shell(const std::string& command, int* rc = nullptr) {
  FILE* p = popen((command + " 2>/dev/null").c_str(), "r");
  if (p == nullptr) return "";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  if (rc != nullptr) *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// Every route of both families in `table`, as `ip -j` objects. From a dump
// of every table: asked for one table that does not exist, ip fails.
inline std::vector<nlohmann::json> RouteObjectsIn(uint32_t table) {
  std::vector<nlohmann::json> routes;
  for (const char* family : {"-4", "-6"}) {
    int rc = 0;
    const std::string out = Shell(std::string("ip -j ") + family + " route show table all", &rc);
    EXPECT_EQ(rc, 0) << "ip " << family << " route show table all";
    const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
    EXPECT_TRUE(j.is_array()) << out;
    if (!j.is_array()) continue;
    // ip leaves out the main table's name, and names 253 .. 255.
    const std::string wanted = table == 254 ? "main" : std::to_string(table);
    for (const auto& r : j) {
      if (r.value("table", "main") == wanted) routes.push_back(r);
    }
  }
  return routes;
}

}  // namespace maglb::testing

#endif  // MAGLB_TESTS_SUPPORT_KERNEL_ROUTES_H_
