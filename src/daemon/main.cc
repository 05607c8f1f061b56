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
#include <rte_log.h>
#include <rte_ring.h>
#include <sys/signalfd.h>

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

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "control/controller.h"
#include "control/log.h"
#include "control/service_notify.h"
#include "control/telemetry.h"
#include "daemon/check.h"
#include "dataplane/capture.h"
#include "dataplane/dpdk_owners.h"
#include "dataplane/eal.h"
#include "dataplane/kernel_port.h"
#include "dataplane/port.h"
#include "dataplane/snapshot.h"
#include "dataplane/worker_loop.h"
#include "maglb/config.h"
#include "maglb/exit_codes.h"
#include "maglb/pipeline.h"
#include "maglb/tunnel_probe.h"

namespace maglb {
namespace {

constexpr const char* kDefaultEalLogLevel = "--log-level=lib.eal:error";

constexpr const char* kUsage =
    "usage: maglb [EAL arguments] -- --config FILE [--port N] [--backend-port M]\n"
    "             [--idle-sleep-us N] [--log-format text|json] [--check]\n"
    "  --config FILE       the TOML configuration (reloaded when it changes, or on SIGHUP)\n"
    "  --port N            the DPDK port to serve (default 0); one-arm: in and out of it\n"
    "  --backend-port M    two-arm: packets toward backends (and ARP/ND for next hops)\n"
    "                      leave by port M, which takes port N's MAC address\n"
    "  --idle-sleep-us N   test mode: a worker whose queue stays empty sleeps N us\n"
    "                      between polls (default 0: poll continuously)\n"
    "  --check             validate the config, EAL, the ports (link, queues, descriptors,\n"
    "                      NUMA placement) and memory as this start would use them, print\n"
    "                      one finding per line (ok/warning/error), exit without\n"
    "                      forwarding: 0 without errors\n"
    "  --log-format F      text (default): one line per event; json: one JSON object\n"
    "                      per line (ts, level, event, its vip/backend/prefix fields, msg)\n"
    "signals: SIGHUP reloads; SIGUSR1 (maglbctl drain) withdraws every announced VIP,\n"
    "  forwards for [announce] drain_s more, then stops; SIGTERM does the same when\n"
    "  [announce] is set and something was announced, else stops; SIGINT, or\n"
    "  SIGTERM during a drain, stops at once\n"
    "example (test mode on a veth; net_pcap passes frames as on the wire, fragments included):\n"
    "  maglb --no-huge --no-pci -l 0,1 --file-prefix lb1 --vdev=net_pcap0,iface=veth0,phy_mac=1 \\\n"
    "        -- --config /etc/maglb.toml\n";

struct AppArgs {
  std::string config_path;
  uint16_t port = 0;
  int backend_port = -1;  // -1: one-arm
  uint32_t idle_sleep_us = 0;
  bool check = false;  // --check: validate, do not serve
  LogFormat log_format = LogFormat::kText;
};

int Fail(const std::string& msg, int code = kExitError) {
  if (GetLogFormat() == LogFormat::kJson) {
    LogEvent("exit", {{"status", code}}, absl::StrCat("error: ", msg), LogLevel::kError);
    return code;
  }
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
    } else if (a == "--check") {
      out->check = true;
    } else if (a == "--log-format") {
      const char* v = value();
      std::optional<LogFormat> f = v ? ParseLogFormat(v) : std::nullopt;
      if (!f) return "--log-format needs text or json";
      out->log_format = *f;
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

// The command line split at "--": EAL's arguments before it, maglb's after.
struct CommandLine {
  std::vector<char*> eal_argv;  // argv[0], maglb's default EAL log level, the user's
  AppArgs app;
};

// Fails with the usage error to print (Main adds the usage text).
absl::StatusOr<CommandLine> ParseCommandLine(int argc, char** argv) {
  int split = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      split = i;
      break;
    }
  }
  if (split < 0) {
    return absl::InvalidArgumentError(
        "no '--' separating EAL arguments from maglb's (--config FILE is required)");
  }
  CommandLine cmd;
  std::string err = ParseAppArgs(argc - split - 1, argv + split + 1, &cmd.app);
  if (!err.empty()) return absl::InvalidArgumentError(err);
  // EAL's own info lines are quiet unless asked for: the default level goes
  // first, so a --log-level of the user's (parsed later) overrides it.
  cmd.eal_argv = {argv[0], const_cast<char*>(kDefaultEalLogLevel)};
  cmd.eal_argv.insert(cmd.eal_argv.end(), argv + 1, argv + split);
  return cmd;
}

// Signals go to the control thread's signalfd; block them before EAL starts
// its threads so that every thread inherits the mask. Returns the signalfd.
absl::StatusOr<int> BlockSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGHUP);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  int signal_fd = signalfd(-1, &signals, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_fd < 0) return absl::InternalError(absl::StrFormat("signalfd: %s", std::strerror(errno)));
  return signal_fd;
}

// Starts the EAL and checks that it gave maglb what it needs: only EAL
// arguments before "--", a worker lcore (listed in *worker_lcores), a port.
absl::StatusOr<Eal> StartEal(std::vector<char*>& eal_argv, std::vector<unsigned>* worker_lcores) {
  const int eal_argc = static_cast<int>(eal_argv.size());
  std::vector<std::string> vdevs = VdevArguments(eal_argc, eal_argv.data());
  EalOutput eal_output;
  eal_output.program = eal_argv[0];
  if (GetLogFormat() == LogFormat::kJson) eal_output.replay_to = LogLineStream();
  absl::StatusOr<Eal> eal = Eal::Init(eal_argc, eal_argv.data(), &eal_output);
  // DPDK's own log lines as events too (after the init, whose output is held).
  if (eal.ok() && GetLogFormat() == LogFormat::kJson) rte_openlog_stream(LogLineStream());
  if (!eal.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "EAL initialisation failed: %s (check the EAL arguments before '--'; see maglb --help)",
        eal.status().message()));
  }
  // EAL's output is held back until the port check below, which may tell the
  // driver's complaint more plainly; every other way on shows it.
  if (eal->consumed() + 1 != eal_argc) {
    eal_output.Replay();
    return absl::InvalidArgumentError(
        absl::StrFormat("unexpected EAL argument '%s' before '--'", eal_argv[eal->consumed() + 1]));
  }
  unsigned lcore;
  RTE_LCORE_FOREACH_WORKER(lcore) { worker_lcores->push_back(lcore); }
  if (worker_lcores->empty()) {
    eal_output.Replay();
    return absl::InvalidArgumentError(
        absl::StrFormat("too few lcores: %u given, maglb needs the main lcore for control "
                        "plus at least one worker lcore (e.g. -l 0,1)",
                        rte_lcore_count()));
  }
  if (rte_eth_dev_count_avail() == 0) {
    if (!vdevs.empty()) {
      // The driver's own lines name the device ("net_af_packet0: ioctl ...").
      std::vector<std::string> devices;
      for (const std::string& v : vdevs) devices.push_back(v.substr(7, v.find(',') - 7));
      std::string reasons = eal_output.Reasons(devices);
      return absl::NotFoundError(absl::StrFormat(
          "no DPDK port: the virtual device%s %s failed to probe%s%s (does the interface exist "
          "in this network namespace?)",
          vdevs.size() == 1 ? "" : "s", absl::StrJoin(vdevs, ", "), reasons.empty() ? "" : ": ",
          reasons));
    }
    eal_output.Replay();
    return absl::NotFoundError(
        "no DPDK port: bind a NIC to DPDK or give a virtual device, e.g. "
        "--vdev=net_pcap0,iface=eth0,phy_mac=1");
  }
  eal_output.Replay();
  return eal;
}

// The ports maglb serves, started.
struct Ports {
  // [kernel] interface, the exception path. First, so that it is destroyed
  // last: frames it read (of its pool) may wait in the other ports' TX queues.
  std::optional<KernelPort> kernel;
  Port front;                   // one-arm: the only one
  std::optional<Port> backend;  // two-arm: toward backends
  uint32_t num_workers = 0;     // queue pairs both ports have

  // Stops and closes them, front first, the kernel interface last (it goes
  // away then).
  void Close() {
    front.Close();
    if (backend) backend->Close();
    if (kernel) kernel->Close();
  }
};

// The kernel interface, with one queue pair per worker and the front port's
// MAC (kernel_port.h).
absl::Status SetUpKernelPort(const Config& config, Ports& ports) {
  if (!config.kernel.enabled()) return absl::OkStatus();
  absl::StatusOr<KernelPort> kernel =
      KernelPort::Create(config.kernel, config.lb, ports.front->mac, static_cast<uint16_t>(ports.num_workers),
                         ports.front->tx_descriptors);
  if (!kernel.ok()) {
    return absl::Status(kernel.status().code(),
                        absl::StrFormat("%s:%d: %s", config.source, config.kernel.line,
                                        kernel.status().message()));
  }
  ports.kernel.emplace(*std::move(kernel));
  LogLine(ports.kernel->Describe());
  return absl::OkStatus();
}

// What a start makes of the data ports, before any is configured: queues,
// descriptors, and each port's pool (counting every port's TX rings).
// maglb --check reports the same plans.
struct PortsPlan {
  std::vector<PortPlan> ports;  // the front port, then (two-arm) the backend port
  std::vector<PortPool> pools;  // one per port, in the same order
  uint32_t workers = 0;         // queue pairs every port has
};

absl::StatusOr<PortsPlan> PlanPorts(const AppArgs& args, uint16_t worker_lcores, const Config& config) {
  const bool two_arm = args.backend_port >= 0 && args.backend_port != args.port;
  PortsPlan plan;
  for (int p : {static_cast<int>(args.port), two_arm ? args.backend_port : -1}) {
    if (p < 0) continue;
    if (!rte_eth_dev_is_valid_port(static_cast<uint16_t>(p))) {
      return absl::NotFoundError(
          absl::StrFormat("no DPDK port %d (%u available)", p, rte_eth_dev_count_avail()));
    }
    absl::StatusOr<PortPlan> port =
        PlanPort(static_cast<uint16_t>(p), worker_lcores, config.lb.mtu, config.lb.sizing);
    if (!port.ok()) return port.status();
    plan.workers = plan.ports.empty() ? port->queues : std::min<uint32_t>(plan.workers, port->queues);
    plan.ports.push_back(*std::move(port));
  }
  for (const PortPlan& port : plan.ports) {
    absl::StatusOr<PortPool> pool = PlanPortPool(port, plan.ports, plan.workers, config.lb.sizing, config.source);
    if (!pool.ok()) return pool.status();
    plan.pools.push_back(*std::move(pool));
  }
  return plan;
}

absl::StatusOr<Ports> SetUpPorts(const PortsPlan& plan, const Config& config) {
  const std::string origin = MbufsOrigin(config.lb.sizing, config.source);
  // Frames toward backends leave by the backend port, two-arm.
  absl::StatusOr<Port> front =
      SetUpPort(plan.ports[0], plan.pools[0], config.lb.mtu, origin, /*toward_backends=*/plan.ports.size() == 1);
  if (!front.ok()) return front.status();
  const uint32_t front_queues = front->info().num_queues;
  Ports ports{.kernel = std::nullopt, .front = *std::move(front), .backend = std::nullopt,
              .num_workers = front_queues};
  if (plan.ports.size() > 1) {
    // The pipeline writes one MAC as ours (replies, outer source), so both
    // arms carry the front port's: they sit on different segments.
    absl::StatusOr<Port> b =
        SetUpPort(plan.ports[1], plan.pools[1], config.lb.mtu, origin, /*toward_backends=*/true);
    absl::Status mac = b.ok() ? b->SetMac(ports.front->mac) : b.status();
    if (!mac.ok()) return mac;
    ports.num_workers = std::min<uint32_t>(ports.num_workers, b->info().num_queues);
    ports.backend.emplace(*std::move(b));
  }
  return ports;
}

// What the workers and the control thread share. Goes before the ports: its
// rings may hold buffers of their pools.
struct DataPlane {
  std::unique_ptr<SnapshotPublisher> publisher;
  UniqueMbufRing to_control;    // workers -> control thread (ARP/ND frames)
  UniqueMbufRing from_control;  // control thread -> worker 0 (frames to send)
  std::vector<std::unique_ptr<Worker>> workers;  // the pipelines, one per worker lcore
  std::vector<std::unique_ptr<LoopCounters>> loop_counters;
  /// Tunnel health probes' backends (with a kernel interface only): the
  /// health task writes it, the workers read it.
  std::unique_ptr<TunnelProbeTable> tunnel_probes;
};

absl::StatusOr<DataPlane> CreateDataPlane(uint32_t num_workers, const Config& config,
                                          bool kernel_interface) {
  DataPlane dp;
  if (kernel_interface) dp.tunnel_probes = std::make_unique<TunnelProbeTable>();
  absl::StatusOr<std::unique_ptr<SnapshotPublisher>> publisher =
      SnapshotPublisher::Create(num_workers);
  if (!publisher.ok()) return publisher.status();
  dp.publisher = *std::move(publisher);
  dp.to_control.reset(
      rte_ring_create("maglb_to_ctl", kControlRingSize, rte_socket_id(), RING_F_SC_DEQ));
  dp.from_control.reset(rte_ring_create("maglb_from_ctl", kControlRingSize, rte_socket_id(),
                                        RING_F_SP_ENQ | RING_F_SC_DEQ));
  if (dp.to_control == nullptr || dp.from_control == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("cannot create control rings: %s", rte_strerror(rte_errno)));
  }
  for (uint32_t i = 0; i < num_workers; ++i) {
    // Each worker's conntrack hash gets its own secret (flow_hash.h,
    // ConntrackHash): which flows share buckets is unknowable from outside.
    ConntrackKey conntrack_key;
    if (!RandomConntrackKey(&conntrack_key)) {
      return absl::UnavailableError(
          absl::StrFormat("cannot draw the conntrack hash key with getrandom(2): %s; "
                          "refusing to start with a guessable one",
                          std::strerror(errno)));
    }
    dp.workers.push_back(std::make_unique<Worker>(config.conntrack, conntrack_key));
    dp.loop_counters.push_back(std::make_unique<LoopCounters>());
  }
  return dp;
}

// The worker lcores at work; stopped and joined when destroyed, before what
// they use (ports, rings, pipelines) goes.
class RunningWorkers {
 public:
  RunningWorkers() = default;
  RunningWorkers(const RunningWorkers&) = delete;
  RunningWorkers& operator=(const RunningWorkers&) = delete;
  ~RunningWorkers() { Stop(); }

  // Tells every worker to stop, waits for them, frees the steering rings.
  void Stop() {
    stop_ = true;
    rte_eal_mp_wait_lcore();
    steer_rings_.reset();
  }

 private:
  friend absl::StatusOr<std::unique_ptr<RunningWorkers>> LaunchWorkers(
      const AppArgs&, const std::vector<unsigned>&, const Ports&, DataPlane&);

  std::atomic<bool> stop_{false};
  std::vector<WorkerContext> contexts_;
  std::optional<RssOwner> rss_owner_;
  std::unique_ptr<SteerRings> steer_rings_;
};

absl::StatusOr<std::unique_ptr<RunningWorkers>> LaunchWorkers(
    const AppArgs& args, const std::vector<unsigned>& worker_lcores, const Ports& ports,
    DataPlane& dp) {
  const uint32_t num_workers = ports.num_workers;
  const PortInfo& port = ports.front.info();
  auto running = std::make_unique<RunningWorkers>();
  // ICMP errors reach the worker RSS picks by their outer header: hand each
  // to the worker its flow's own packets reach (worker_loop.h).
  if (num_workers > 1 && port.distribution == "rss") {
    absl::StatusOr<RssOwner> owner =
        port.rss ? RssOwner::Create(*port.rss, num_workers) : absl::UnavailableError(port.rss_note);
    absl::StatusOr<std::unique_ptr<SteerRings>> rings =
        owner.ok() ? SteerRings::Create(num_workers, rte_socket_id()) : owner.status();
    if (rings.ok()) {
      running->rss_owner_ = *std::move(owner);
      running->steer_rings_ = *std::move(rings);
      LogLine(absl::StrFormat("ICMP errors steered to their flow's worker: RSS key %u bytes, RETA %u entries",
                              running->rss_owner_->config().key.size(),
                              running->rss_owner_->config().reta.size()));
    } else {
      LogLine(absl::StrFormat("warning: ICMP errors not steered to their flow's worker (%s): with %u "
                              "workers an error may follow the current table instead of a pinned flow",
                              rings.status().message(), num_workers));
    }
  }
  running->contexts_.resize(num_workers);
  for (uint32_t i = 0; i < num_workers; ++i) {
    WorkerContext& c = running->contexts_[i];
    c.index = i;
    c.lcore = worker_lcores[i];
    c.port_id = port.port_id;
    c.backend_port_id = ports.backend ? ports.backend->info().port_id : port.port_id;
    c.queue = static_cast<uint16_t>(i);
    c.worker = dp.workers[i].get();
    c.counters = dp.loop_counters[i].get();
    c.publisher = dp.publisher.get();
    c.pool = port.pool;
    const PortInfo& backend = ports.backend ? ports.backend->info() : port;
    c.backend_tx_ipv4_checksum = backend.offloads.tx_ipv4_checksum;
    c.front_fast_free = port.offloads.tx_fast_free;
    c.backend_fast_free = backend.offloads.tx_fast_free;
    c.to_control = dp.to_control.get();
    c.from_control = i == 0 ? dp.from_control.get() : nullptr;
    c.rss_owner = running->rss_owner_ ? &*running->rss_owner_ : nullptr;
    c.steer_rings = running->steer_rings_ ? running->steer_rings_->rings() : nullptr;
    c.stop = &running->stop_;
    c.idle_sleep_us = args.idle_sleep_us;
    c.kernel_port_id = ports.kernel ? ports.kernel->info().port_id : -1;
    c.tunnel_probes = dp.tunnel_probes.get();
    int rc = rte_eal_remote_launch(WorkerMain, &c, c.lcore);
    if (rc != 0) {
      return absl::InternalError(absl::StrFormat("cannot start worker on lcore %u: %s", c.lcore,
                                                 std::strerror(-rc)));
    }
  }
  return running;
}

void LogStarted(const AppArgs& args, const Config& config, const std::vector<unsigned>& worker_lcores,
                const Ports& ports) {
  const PortInfo& port = ports.front.info();
  const uint32_t num_workers = ports.num_workers;
  size_t backends = 0;
  for (const VipConfig& v : config.vips) backends += v.backends.size();
  std::vector<std::string> lcores_text;
  for (uint32_t i = 0; i < num_workers; ++i) lcores_text.push_back(absl::StrCat(worker_lcores[i]));
  std::string idle_lcores;
  if (worker_lcores.size() > num_workers) {
    idle_lcores = absl::StrFormat(" (%u lcores idle: the port has %u queue%s)",
                                  worker_lcores.size() - num_workers, num_workers,
                                  num_workers == 1 ? "" : "s");
  }
  std::string arms = ports.backend ? absl::StrFormat(" + backend port %u %s (%s), two-arm",
                                                    ports.backend->info().port_id,
                                                    ports.backend->info().name,
                                                    ports.backend->info().driver)
                                   : std::string(", one-arm");
  // Which checksums the NICs compute (offloads.h), before the line that
  // says the LB serves.
  for (const Port* p : {&ports.front, ports.backend ? &*ports.backend : nullptr}) {
    if (p == nullptr) continue;
    LogLine(absl::StrFormat("port %u %s (%s): %s", p->info().port_id, p->info().name, p->info().driver,
                            DescribeOffloads(p->info().offloads, p->info().offered)));
  }
  LogLine(absl::StrFormat(
      "started: port %u %s (%s) mac %s%s, %u queue pair%s (%s), %u worker%s on lcore%s %s%s; "
      "config %s generation 1: %u VIPs, %u backends; addresses %s %s; telemetry %s/dpdk_telemetry.v2",
      port.port_id, port.name, port.driver, port.mac.ToString(), arms, port.num_queues,
      port.num_queues == 1 ? "" : "s", port.distribution, num_workers, num_workers == 1 ? "" : "s",
      num_workers == 1 ? "" : "s", absl::StrJoin(lcores_text, ","), idle_lcores, args.config_path,
      config.vips.size(), backends, config.lb.ipv4 ? config.lb.ipv4->ToString() : "-",
      config.lb.ipv6 ? config.lb.ipv6->ToString() : "-", rte_eal_get_runtime_dir()));
}

// systemd (Type=notify): generation 1 is published, the ports are up and the
// workers poll them. After the "started:" line, so that a log reader that
// sees the unit active also sees what it serves.
void NotifyStarted(const Config& config) {
  size_t backends = 0;
  for (const VipConfig& v : config.vips) backends += v.backends.size();
  NotifyReady(ServingStatus(1, config.vips.size(), backends));
}

// Telemetry answers from the controller while this lives.
class TelemetryRegistration {
 public:
  explicit TelemetryRegistration(Controller* controller) { RegisterTelemetry(controller); }
  TelemetryRegistration(const TelemetryRegistration&) = delete;
  TelemetryRegistration& operator=(const TelemetryRegistration&) = delete;
  ~TelemetryRegistration() { Unregister(); }
  // Waits for callbacks in flight (telemetry.h); once only.
  void Unregister() {
    if (registered_) UnregisterTelemetry();
    registered_ = false;
  }

 private:
  bool registered_ = true;
};

// The control thread: publishes generation 1, starts the workers, serves
// until SIGINT/SIGTERM (after a drain when announcing), then stops the
// workers and the ports.
absl::Status RunControlLoop(const AppArgs& args, const Config& config, int signal_fd,
                            const std::vector<unsigned>& worker_lcores, Ports& ports,
                            DataPlane& dp) {
  ControllerOptions copts;
  copts.config_path = args.config_path;
  copts.port = ports.front.info();
  if (ports.backend) copts.backend_port = ports.backend->info();
  copts.publisher = dp.publisher.get();
  copts.to_control = dp.to_control.get();
  copts.from_control = dp.from_control.get();
  copts.signal_fd = signal_fd;
  if (ports.kernel) copts.kernel_interface = ports.kernel->info().interface;
  copts.tunnel_probes = dp.tunnel_probes.get();
  for (uint32_t i = 0; i < dp.workers.size(); ++i) {
    copts.workers.push_back(dp.workers[i].get());
    copts.loop_counters.push_back(dp.loop_counters[i].get());
  }
  Controller controller(std::move(copts));
  absl::Status started = controller.Start(config);
  if (!started.ok()) return started;
  TelemetryRegistration telemetry(&controller);

  absl::StatusOr<std::unique_ptr<RunningWorkers>> workers =
      LaunchWorkers(args, worker_lcores, ports, dp);
  if (!workers.ok()) return workers.status();
  LogStarted(args, config, worker_lcores, ports);
  // The sizes chosen at start (descriptors, packet buffers, where their
  // memory is): they change only with a restart.
  LogLine(absl::StrCat("buffers: ", ports.front->sizing));
  if (ports.backend) LogLine(absl::StrCat("buffers: ", ports.backend->info().sizing));
  NotifyStarted(config);

  std::string why = controller.Run();
  telemetry.Unregister();
  (*workers)->Stop();
  uint64_t rx = 0, tx = 0;
  for (const auto& w : dp.workers) {
    rx += w->counters().rx_packets.value();
    tx += w->counters().tx_packets.value();
  }
  // The rings may hold buffers of the ports' pools, which Close frees.
  dp.to_control.reset();
  dp.from_control.reset();
  ports.Close();
  LogLine(absl::StrFormat("stopped on %s: %u packets received, %u sent", why, rx, tx));
  {
    // Telemetry is unregistered; the mutex also keeps any reader of the
    // snapshot (WithView holds it) off what is freed here.
    std::lock_guard<std::mutex> lock(dp.publisher->mutex());
    dp.workers.clear();
  }
  return absl::OkStatus();
}

// Everything after the command line, as steps. Each step returns the owners
// of what it made; on a failure they undo it in reverse (data plane, ports,
// EAL) before the caller prints the error.
absl::Status Serve(CommandLine& cmd) {
  // The config first: a bad file is reported before EAL spends time starting.
  absl::StatusOr<Config> config = LoadConfig(cmd.app.config_path);
  if (!config.ok()) return config.status();
  absl::StatusOr<int> signal_fd = BlockSignals();
  if (!signal_fd.ok()) return signal_fd.status();
  std::vector<unsigned> worker_lcores;
  absl::StatusOr<Eal> eal = StartEal(cmd.eal_argv, &worker_lcores);
  if (!eal.ok()) return eal.status();
  // dpdk-dumpcap / dpdk-pdump may attach from here on (capture.h); stops
  // answering when Serve returns, before the EAL goes.
  CaptureService capture = CaptureService::Start();
  LogLine(capture.note());
  absl::StatusOr<PortsPlan> plan = PlanPorts(cmd.app, static_cast<uint16_t>(worker_lcores.size()), *config);
  if (!plan.ok()) return plan.status();
  absl::StatusOr<Ports> ports = SetUpPorts(*plan, *config);
  if (!ports.ok()) return ports.status();
  absl::Status kernel = SetUpKernelPort(*config, *ports);
  if (!kernel.ok()) return kernel;
  absl::StatusOr<DataPlane> data_plane =
      CreateDataPlane(ports->num_workers, *config, ports->kernel.has_value());
  if (!data_plane.ok()) return data_plane.status();
  return RunControlLoop(cmd.app, *config, *signal_fd, worker_lcores, *ports, *data_plane);
}

// maglb --check: the steps of a start up to the ports, each judged, then
// the ports closed and EAL cleaned up again; no worker starts. Findings on
// stdout, one a line (check.h); EAL's and the drivers' own lines on stderr.
int Check(CommandLine& cmd) {
  DeploymentCheck check;
  absl::StatusOr<Config> config = LoadConfig(cmd.app.config_path);
  if (!config.ok()) {
    check.Error(std::string(config.status().message()));
    return check.Finish();
  }
  size_t backends = 0;
  for (const VipConfig& v : config->vips) backends += v.backends.size();
  check.Ok(absl::StrFormat("config %s: %u VIPs, %u backends, conntrack capacity %u per worker, mtu %u",
                           cmd.app.config_path, config->vips.size(), backends,
                           config->conntrack.capacity, config->lb.mtu));
  std::vector<unsigned> worker_lcores;
  absl::StatusOr<Eal> eal = StartEal(cmd.eal_argv, &worker_lcores);
  if (!eal.ok()) {
    const bool locked = absl::StrContains(eal.status().message(), "another primary");
    check.Error(absl::StrCat(eal.status().message(),
                             locked ? " (a running maglb with the same --file-prefix holds its EAL "
                                      "lock and device: check before the service starts, or stop it)"
                                    : ""));
    return check.Finish();
  }
  check.Ok(absl::StrFormat("EAL up: main lcore %u, %u worker lcore%s, %u DPDK port%s, %s",
                           rte_get_main_lcore(), worker_lcores.size(), worker_lcores.size() == 1 ? "" : "s",
                           rte_eth_dev_count_avail(), rte_eth_dev_count_avail() == 1 ? "" : "s",
                           rte_eal_has_hugepages() ? "hugepages" : "--no-huge (test mode)"));
  check.CheckPortsAndMemory(*config, cmd.app.port, cmd.app.backend_port, worker_lcores);
  if (check.failed()) return check.Finish();
  // The ports as a start sets them up (queues, pools, MTU, started), for the
  // errors only that can tell and for the link; the kernel interface is not
  // made (it would appear in the host's namespace).
  absl::StatusOr<PortsPlan> plan = PlanPorts(cmd.app, static_cast<uint16_t>(worker_lcores.size()), *config);
  absl::StatusOr<Ports> ports = plan.ok() ? SetUpPorts(*plan, *config) : plan.status();
  if (!ports.ok()) {
    check.Error(std::string(ports.status().message()));
    return check.Finish();
  }
  check.Ok(absl::StrFormat("port %u set up and started: %u queue pair%s (%s), buffers for mtu %u; %s",
                           ports->front.info().port_id, ports->num_workers,
                           ports->num_workers == 1 ? "" : "s", ports->front.info().distribution,
                           ports->front.info().max_mtu, ports->front.info().sizing));
  if (ports->backend) check.Ok(absl::StrCat("backend ", ports->backend->info().sizing));
  check.CheckLink(ports->front.info().port_id);
  if (ports->backend) check.CheckLink(ports->backend->info().port_id);
  ports->Close();
  return check.Finish();
}

int Main(int argc, char** argv) {
  absl::StatusOr<CommandLine> cmd = ParseCommandLine(argc, argv);
  if (!cmd.ok()) {
    std::fputs(kUsage, stderr);
    return Fail(std::string(cmd.status().message()), kExitUsage);
  }
  SetLogFormat(cmd->app.log_format);
  if (cmd->app.check) return Check(*cmd);
  absl::Status served = Serve(*cmd);
  if (!served.ok()) return Fail(std::string(served.message()));
  return kExitOk;
}

}  // namespace
}  // namespace maglb

int main(int argc, char** argv) { return maglb::Main(argc, argv); }
