// maglb --check: the environment and the config validated as a start would
// use them, without forwarding. main.cc drives the steps (config, EAL, port
// set-up, as for a start); this gathers the facts between them (the device's
// limits, NUMA nodes, memory, link) and prints one finding per line.
#ifndef MAGLB_DAEMON_CHECK_H_
#define MAGLB_DAEMON_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "maglb/config.h"
#include "maglb/deploy_check.h"

namespace maglb {

class DeploymentCheck {
 public:
  void Ok(std::string text) { Add({CheckFinding::Level::kOk, std::move(text)}); }
  void Warning(std::string text) { Add({CheckFinding::Level::kWarning, std::move(text)}); }
  void Error(std::string text) { Add({CheckFinding::Level::kError, std::move(text)}); }
  bool failed() const { return errors_ > 0; }

  /// After EAL is up, before any port is set up: the ports exist; their
  /// queues, descriptors and NUMA placement; the packet buffer pools in
  /// DPDK's memory and the conntrack tables in ordinary memory. `port`,
  /// `backend_port` (-1: one-arm) as on the command line.
  void CheckPortsAndMemory(const Config& config, uint16_t port, int backend_port,
                           const std::vector<unsigned>& worker_lcores);

  /// After the port is set up and started as for a start: its link.
  void CheckLink(uint16_t port_id);

  /// The summary line; the exit status (kExitOk without errors).
  int Finish();

 private:
  void Add(CheckFinding f);
  int errors_ = 0, warnings_ = 0;
};

}  // namespace maglb

#endif  // MAGLB_DAEMON_CHECK_H_
