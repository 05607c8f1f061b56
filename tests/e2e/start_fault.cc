// LD_PRELOAD shim for start_failure_test.py: makes one DPDK call fail
// (MAGLB_FAULT=ring|launch|dev_start) and logs, in order, the calls that
// release DPDK resources to MAGLB_FAULT_LOG, so the test can see that every
// exit path of maglb cleans up. MAGLB_FAULT=stall stalls a worker on demand
// (test_fleet.py). For maglb --check (tests/install/test_check.py):
// MAGLB_FAULT=link_down reports every port's link down, MAGLB_FAULT=numa1
// puts every port on NUMA node 1.
#include <dlfcn.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

namespace {

bool Fault(const char* what) {
  const char* f = std::getenv("MAGLB_FAULT");
  return f != nullptr && std::strcmp(f, what) == 0;
}

void Log(const char* call) {
  const char* path = std::getenv("MAGLB_FAULT_LOG");
  if (path == nullptr) return;
  if (FILE* f = std::fopen(path, "a")) {
    std::fprintf(f, "%s\n", call);
    std::fclose(f);
  }
}

template <typename F>
F Next(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {

rte_ring* rte_ring_create(const char* name, unsigned count, int socket_id, unsigned flags) {
  if (Fault("ring") && std::strcmp(name, "maglb_to_ctl") == 0) {
    rte_errno = ENOMEM;
    return nullptr;
  }
  return Next<rte_ring* (*)(const char*, unsigned, int, unsigned)>("rte_ring_create")(
      name, count, socket_id, flags);
}

int rte_eal_remote_launch(lcore_function_t* f, void* arg, unsigned worker_id) {
  if (Fault("launch")) return -EBUSY;
  return Next<int (*)(lcore_function_t*, void*, unsigned)>("rte_eal_remote_launch")(f, arg,
                                                                                   worker_id);
}

int rte_eth_dev_start(uint16_t port_id) {
  if (Fault("dev_start")) return -EIO;
  return Next<int (*)(uint16_t)>("rte_eth_dev_start")(port_id);
}

int rte_eth_link_get_nowait(uint16_t port_id, rte_eth_link* link) {
  const int rc = Next<int (*)(uint16_t, rte_eth_link*)>("rte_eth_link_get_nowait")(port_id, link);
  if (rc == 0 && Fault("link_down")) link->link_status = RTE_ETH_LINK_DOWN;
  return rc;
}

int rte_eth_dev_socket_id(uint16_t port_id) {
  if (Fault("numa1")) return 1;
  return Next<int (*)(uint16_t)>("rte_eth_dev_socket_id")(port_id);
}

int rte_eth_dev_stop(uint16_t port_id) {
  Log("rte_eth_dev_stop");
  return Next<int (*)(uint16_t)>("rte_eth_dev_stop")(port_id);
}

int rte_eth_dev_close(uint16_t port_id) {
  Log("rte_eth_dev_close");
  return Next<int (*)(uint16_t)>("rte_eth_dev_close")(port_id);
}

void rte_mempool_free(rte_mempool* mp) {
  if (mp != nullptr && std::strncmp(mp->name, "maglb_mbufs_", 12) == 0) Log("rte_mempool_free");
  Next<void (*)(rte_mempool*)>("rte_mempool_free")(mp);
}

int rte_eal_cleanup(void) {
  Log("rte_eal_cleanup");
  return Next<int (*)(void)>("rte_eal_cleanup")();
}

}  // extern "C"

// MAGLB_FAULT=stall: while the file MAGLB_STALL_FILE exists, a worker that
// goes to its idle sleep (test mode, --idle-sleep-us) stays there, passing
// no quiescent point: a stalled worker, for test_fleet.py's stall check.
extern "C" void rte_delay_us_sleep(unsigned int us) {
  static auto real = Next<void (*)(unsigned int)>("rte_delay_us_sleep");
  const char* file = std::getenv("MAGLB_STALL_FILE");
  if (Fault("stall") && file != nullptr) {
    while (access(file, F_OK) == 0) real(10000);
  }
  real(us);
}
