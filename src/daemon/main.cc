// maglb: the load balancer daemon.
//
//   maglb [EAL arguments] -- --config FILE [--port N] [--backend-port M] [--idle-sleep-us N]
//
// The main lcore runs the control thread (config reload, ARP/ND, telemetry
// data); every other lcore runs a worker polling its own queue pair.
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_ring.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "control/controller.h"
#include "control/log.h"
#include "control/telemetry.h"
#include "dataplane/port.h"
#include "dataplane/snapshot.h"
#include "dataplane/worker_loop.h"
#include "maglb/config.h"
#include "maglb/exit_codes.h"
#include "maglb/pipeline.h"

namespace maglb {
namespace {

constexpr unsigned kControlRingSize = 1024;
constexpr const char* kDefaultEalLogLevel = "--log-level=lib.eal:error";

constexpr const char* kUsage =
    "usage: maglb [EAL arguments] -- --config FILE [--port N] [--backend-port M]\n"
    "             [--idle-sleep-us N]\n"
    "  --config FILE       the TOML configuration (reloaded when it changes, or on SIGHUP)\n"
    "  --port N            the DPDK port to serve (default 0); one-arm: in and out of it\n"
    "  --backend-port M    two-arm: packets toward backends (and ARP/ND for next hops)\n"
    "                      leave by port M, which takes port N's MAC address\n"
    "  --idle-sleep-us N   test mode: a worker whose queue stays empty sleeps N us\n"
    "                      between polls (default 0: poll continuously)\n"
    "example (test mode on a veth; net_pcap passes frames as on the wire, fragments included):\n"
    "  maglb --no-huge --no-pci -l 0,1 --file-prefix lb1 --vdev=net_pcap0,iface=veth0,phy_mac=1 \\\n"
    "        -- --config /etc/maglb.toml\n";

struct AppArgs {
  std::string config_path;
  uint16_t port = 0;
  int backend_port = -1;  // -1: one-arm
  uint32_t idle_sleep_us = 0;
};

int Fail(const std::string& msg, int code = kExitError) {
  std::fprintf(stderr, "maglb: error: %s\n", msg.c_str());
  return code;
}

// The --vdev values among EAL arguments ("--vdev=X" or "--vdev X"), to name
// them when none probes.
std::vector<std::string> VdevArguments(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a.rfind("--vdev=", 0) == 0) {
      out.emplace_back(a);
    } else if (a == "--vdev" && i + 1 < argc) {
      out.push_back(absl::StrCat("--vdev=", argv[++i]));
    }
  }
  return out;
}

// What rte_eal_init printed, held back (see QuietEalInit).
struct EalOutput {
  std::vector<std::string> out, err;  // its stdout and stderr lines
  std::string program;                 // argv[0], which getopt's complaints begin with

  void Replay() const {
    for (const std::string& l : out) std::fputs(l.c_str(), stdout);
    for (const std::string& l : err) std::fputs(l.c_str(), stderr);
    std::fflush(stdout);
  }
  // The lines that say what went wrong, one-lined: getopt's complaints and
  // EAL's log lines, without DPDK's usage text and generic trailers.
  std::string Reasons(const std::vector<std::string>& only_with = {}) const {
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
};

std::vector<std::string> ReadLines(FILE* f) {
  std::vector<std::string> lines;
  std::rewind(f);
  char buf[1024];
  while (std::fgets(buf, sizeof(buf), f) != nullptr) lines.emplace_back(buf);
  return lines;
}

// rte_eal_init with its stdout and stderr held back: on a bad argument DPDK
// prints its whole usage text and each complaint twice, which would bury
// maglb's one error line. The caller replays them (success) or folds the
// reasons into its error line.
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

// Parses the arguments after "--". Returns an error message or "".
std::string ParseAppArgs(int argc, char** argv, AppArgs* out) {
  for (int i = 0; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--config") {
      const char* v = value();
      if (v == nullptr) return "--config needs a FILE";
      out->config_path = v;
    } else if (a == "--port") {
      const char* v = value();
      char* end = nullptr;
      unsigned long p = v ? std::strtoul(v, &end, 10) : 0;
      if (v == nullptr || *end != '\0' || p >= RTE_MAX_ETHPORTS) return "--port needs a port number";
      out->port = static_cast<uint16_t>(p);
    } else if (a == "--backend-port") {
      const char* v = value();
      char* end = nullptr;
      unsigned long p = v ? std::strtoul(v, &end, 10) : 0;
      if (v == nullptr || *end != '\0' || p >= RTE_MAX_ETHPORTS) {
        return "--backend-port needs a port number";
      }
      out->backend_port = static_cast<int>(p);
    } else if (a == "--idle-sleep-us") {
      const char* v = value();
      char* end = nullptr;
      unsigned long us = v ? std::strtoul(v, &end, 10) : 0;
      if (v == nullptr || *end != '\0' || us > 1'000'000) return "--idle-sleep-us needs 0..1000000";
      out->idle_sleep_us = static_cast<uint32_t>(us);
    } else if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(kExitOk);
    } else {
      return absl::StrFormat("unexpected argument '%s'", argv[i]);
    }
  }
  if (out->config_path.empty()) return "--config FILE is required (after '--')";
  return "";
}

int Main(int argc, char** argv) {
  // Split at "--": EAL arguments before it, ours after.
  int split = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      split = i;
      break;
    }
  }
  if (split < 0) {
    std::fputs(kUsage, stderr);
    return Fail("no '--' separating EAL arguments from maglb's (--config FILE is required)",
                kExitUsage);
  }
  AppArgs args;
  std::string err = ParseAppArgs(argc - split - 1, argv + split + 1, &args);
  if (!err.empty()) {
    std::fputs(kUsage, stderr);
    return Fail(err, kExitUsage);
  }
  // The config first: a bad file is reported before EAL spends time starting.
  absl::StatusOr<Config> config = LoadConfig(args.config_path);
  if (!config.ok()) return Fail(std::string(config.status().message()));

  // Signals go to the control thread's signalfd; block them before EAL starts
  // its threads so that every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGHUP);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  int signal_fd = signalfd(-1, &signals, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_fd < 0) return Fail(absl::StrFormat("signalfd: %s", std::strerror(errno)));

  // EAL's own info lines are quiet unless asked for: the default level goes
  // first, so a --log-level of the user's (parsed later) overrides it.
  std::vector<char*> eal_argv = {argv[0], const_cast<char*>(kDefaultEalLogLevel)};
  eal_argv.insert(eal_argv.end(), argv + 1, argv + split);
  const int eal_argc = static_cast<int>(eal_argv.size());
  std::vector<std::string> vdevs = VdevArguments(eal_argc, eal_argv.data());
  EalOutput eal_output;
  eal_output.program = argv[0];
  int consumed = QuietEalInit(eal_argc, eal_argv.data(), &eal_output);
  if (consumed < 0) {
    std::string reasons = eal_output.Reasons();
    return Fail(absl::StrFormat("EAL initialisation failed: %s (check the EAL arguments before "
                                "'--'; see maglb --help)",
                                reasons.empty() ? std::string(rte_strerror(rte_errno)) : reasons));
  }
  // Held back until the port check below, which may tell the driver's
  // complaint more plainly.
  bool eal_output_shown = false;
  auto show_eal_output = [&] {
    if (!eal_output_shown) eal_output.Replay();
    eal_output_shown = true;
  };
  if (consumed + 1 != eal_argc) {
    show_eal_output();
    rte_eal_cleanup();
    return Fail(
        absl::StrFormat("unexpected EAL argument '%s' before '--'", eal_argv[consumed + 1]));
  }
  std::vector<unsigned> worker_lcores;
  unsigned lcore;
  RTE_LCORE_FOREACH_WORKER(lcore) { worker_lcores.push_back(lcore); }
  if (worker_lcores.empty()) {
    show_eal_output();
    rte_eal_cleanup();
    return Fail(absl::StrFormat("too few lcores: %u given, maglb needs the main lcore for control "
                                "plus at least one worker lcore (e.g. -l 0,1)",
                                rte_lcore_count()));
  }
  if (rte_eth_dev_count_avail() == 0) {
    rte_eal_cleanup();
    if (!vdevs.empty()) {
      // The driver's own lines name the device ("net_af_packet0: ioctl ...").
      std::vector<std::string> devices;
      for (const std::string& v : vdevs) devices.push_back(v.substr(7, v.find(',') - 7));
      std::string reasons = eal_output.Reasons(devices);
      return Fail(absl::StrFormat(
          "no DPDK port: the virtual device%s %s failed to probe%s%s (does the interface exist "
          "in this network namespace?)",
          vdevs.size() == 1 ? "" : "s", absl::StrJoin(vdevs, ", "), reasons.empty() ? "" : ": ",
          reasons));
    }
    show_eal_output();
    return Fail("no DPDK port: bind a NIC to DPDK or give a virtual device, e.g. "
                "--vdev=net_pcap0,iface=eth0,phy_mac=1");
  }
  show_eal_output();
  const bool two_arm = args.backend_port >= 0 && args.backend_port != args.port;
  for (int p : {static_cast<int>(args.port), two_arm ? args.backend_port : -1}) {
    if (p >= 0 && !rte_eth_dev_is_valid_port(static_cast<uint16_t>(p))) {
      rte_eal_cleanup();
      return Fail(absl::StrFormat("no DPDK port %d (%u available)", p, rte_eth_dev_count_avail()));
    }
  }

  absl::StatusOr<PortInfo> port =
      SetUpPort(args.port, static_cast<uint16_t>(worker_lcores.size()), config->lb.mtu);
  if (!port.ok()) {
    rte_eal_cleanup();
    return Fail(std::string(port.status().message()));
  }
  uint32_t num_workers = port->num_queues;
  std::optional<PortInfo> backend_port;
  if (two_arm) {
    // The pipeline writes one MAC as ours (replies, outer source), so both
    // arms carry the front port's: they sit on different segments.
    absl::StatusOr<PortInfo> b = SetUpPort(static_cast<uint16_t>(args.backend_port),
                                           static_cast<uint16_t>(worker_lcores.size()),
                                           config->lb.mtu);
    absl::Status mac = b.ok() ? SetPortMac(b->port_id, port->mac) : b.status();
    if (!mac.ok()) {
      ShutDownPort(*port);
      rte_eal_cleanup();
      return Fail(std::string(mac.message()));
    }
    b->mac = port->mac;
    backend_port = *b;
    num_workers = std::min<uint32_t>(num_workers, b->num_queues);
  }

  absl::StatusOr<std::unique_ptr<SnapshotPublisher>> publisher = SnapshotPublisher::Create(num_workers);
  if (!publisher.ok()) return Fail(std::string(publisher.status().message()));
  rte_ring* to_control = rte_ring_create("maglb_to_ctl", kControlRingSize, rte_socket_id(),
                                         RING_F_SC_DEQ);
  rte_ring* from_control = rte_ring_create("maglb_from_ctl", kControlRingSize, rte_socket_id(),
                                           RING_F_SP_ENQ | RING_F_SC_DEQ);
  if (to_control == nullptr || from_control == nullptr) {
    return Fail(absl::StrFormat("cannot create control rings: %s", rte_strerror(rte_errno)));
  }

  std::vector<std::unique_ptr<Worker>> workers;
  std::vector<std::unique_ptr<LoopCounters>> loop_counters;
  std::vector<WorkerContext> contexts(num_workers);
  std::atomic<bool> stop{false};
  ControllerOptions copts;
  copts.config_path = args.config_path;
  copts.port = *port;
  copts.publisher = publisher->get();
  copts.to_control = to_control;
  copts.from_control = from_control;
  copts.signal_fd = signal_fd;
  for (uint32_t i = 0; i < num_workers; ++i) {
    // Each worker's conntrack hash gets its own secret (flow_hash.h,
    // ConntrackHash): which flows share buckets is unknowable from outside.
    ConntrackKey conntrack_key;
    if (!RandomConntrackKey(&conntrack_key)) {
      ShutDownPort(*port);
      rte_eal_cleanup();
      return Fail(absl::StrFormat("cannot draw the conntrack hash key with getrandom(2): %s; "
                                  "refusing to start with a guessable one",
                                  std::strerror(errno)));
    }
    workers.push_back(std::make_unique<Worker>(config->conntrack, conntrack_key));
    loop_counters.push_back(std::make_unique<LoopCounters>());
    copts.workers.push_back(workers.back().get());
    copts.loop_counters.push_back(loop_counters.back().get());
  }
  Controller controller(std::move(copts));
  absl::Status started = controller.Start(*config);
  if (!started.ok()) {
    ShutDownPort(*port);
    rte_eal_cleanup();
    return Fail(std::string(started.message()));
  }
  RegisterTelemetry(&controller);

  // ICMP errors reach the worker RSS picks by their outer header: hand each
  // to the worker its flow's own packets reach (worker_loop.h).
  std::optional<RssOwner> rss_owner;
  std::unique_ptr<SteerRings> steer_rings;
  if (num_workers > 1 && port->distribution == "rss") {
    absl::StatusOr<RssOwner> owner =
        port->rss ? RssOwner::Create(*port->rss, num_workers) : absl::UnavailableError(port->rss_note);
    absl::StatusOr<std::unique_ptr<SteerRings>> rings =
        owner.ok() ? SteerRings::Create(num_workers, rte_socket_id()) : owner.status();
    if (rings.ok()) {
      rss_owner = *std::move(owner);
      steer_rings = *std::move(rings);
      LogLine(absl::StrFormat("ICMP errors steered to their flow's worker: RSS key %u bytes, RETA %u entries",
                              rss_owner->config().key.size(), rss_owner->config().reta.size()));
    } else {
      LogLine(absl::StrFormat("warning: ICMP errors not steered to their flow's worker (%s): with %u "
                              "workers an error may follow the current table instead of a pinned flow",
                              rings.status().message(), num_workers));
    }
  }
  for (uint32_t i = 0; i < num_workers; ++i) {
    WorkerContext& c = contexts[i];
    c.index = i;
    c.lcore = worker_lcores[i];
    c.port_id = port->port_id;
    c.backend_port_id = backend_port ? backend_port->port_id : port->port_id;
    c.queue = static_cast<uint16_t>(i);
    c.worker = workers[i].get();
    c.counters = loop_counters[i].get();
    c.publisher = publisher->get();
    c.pool = port->pool;
    c.to_control = to_control;
    c.from_control = i == 0 ? from_control : nullptr;
    c.rss_owner = rss_owner ? &*rss_owner : nullptr;
    c.steer_rings = steer_rings ? steer_rings->rings() : nullptr;
    c.stop = &stop;
    c.idle_sleep_us = args.idle_sleep_us;
    int rc = rte_eal_remote_launch(WorkerMain, &c, c.lcore);
    if (rc != 0) {
      stop = true;
      rte_eal_mp_wait_lcore();
      return Fail(absl::StrFormat("cannot start worker on lcore %u: %s", c.lcore,
                                  std::strerror(-rc)));
    }
  }

  size_t backends = 0;
  for (const VipConfig& v : config->vips) backends += v.backends.size();
  std::vector<std::string> lcores_text;
  for (uint32_t i = 0; i < num_workers; ++i) lcores_text.push_back(absl::StrCat(worker_lcores[i]));
  std::string idle_lcores;
  if (worker_lcores.size() > num_workers) {
    idle_lcores = absl::StrFormat(" (%u lcores idle: the port has %u queue%s)",
                                  worker_lcores.size() - num_workers, num_workers,
                                  num_workers == 1 ? "" : "s");
  }
  std::string arms = backend_port ? absl::StrFormat(" + backend port %u %s (%s), two-arm",
                                                   backend_port->port_id, backend_port->name,
                                                   backend_port->driver)
                                  : std::string(", one-arm");
  LogLine(absl::StrFormat(
      "started: port %u %s (%s) mac %s%s, %u queue pair%s (%s), %u worker%s on lcore%s %s%s; "
      "config %s generation 1: %u VIPs, %u backends; addresses %s %s; telemetry %s/dpdk_telemetry.v2",
      port->port_id, port->name, port->driver, port->mac.ToString(), arms, port->num_queues,
      port->num_queues == 1 ? "" : "s", port->distribution, num_workers, num_workers == 1 ? "" : "s",
      num_workers == 1 ? "" : "s", absl::StrJoin(lcores_text, ","), idle_lcores, args.config_path,
      config->vips.size(), backends, config->lb.ipv4 ? config->lb.ipv4->ToString() : "-",
      config->lb.ipv6 ? config->lb.ipv6->ToString() : "-", rte_eal_get_runtime_dir()));

  std::string why = controller.Run();
  UnregisterTelemetry();
  stop = true;
  rte_eal_mp_wait_lcore();
  steer_rings.reset();
  uint64_t rx = 0, tx = 0;
  for (const auto& w : workers) {
    rx += w->counters().rx_packets.value();
    tx += w->counters().tx_packets.value();
  }
  ShutDownPort(*port);
  if (backend_port) ShutDownPort(*backend_port);
  LogLine(absl::StrFormat("stopped on %s: %u packets received, %u sent", why, rx, tx));
  {
    // UnregisterTelemetry waited for callbacks in flight; the mutex keeps any
    // reader of the snapshot (WithView holds it) off what is freed here.
    std::lock_guard<std::mutex> lock((*publisher)->mutex());
    workers.clear();
  }
  publisher->reset();
  rte_ring_free(to_control);
  rte_ring_free(from_control);
  rte_eal_cleanup();
  return kExitOk;
}

}  // namespace
}  // namespace maglb

int main(int argc, char** argv) { return maglb::Main(argc, argv); }
