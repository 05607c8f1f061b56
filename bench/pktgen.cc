// A paced packet generator for bench/fullpath.py: loads a pcap into mbufs
// once and transmits them round-robin on one port at a set rate.
//
//   pktgen [EAL arguments] -- --pcap FILE [--pps N] [--burst B] [--duration S]
//          [--port P] [--link-timeout S]
//   e.g. pktgen --no-huge --no-pci -m 1024 -l 0 --file-prefix g1
//          --vdev=net_memif0,role=server,socket=/tmp/g1.sock,rsize=12 -- --pcap x.pcap --pps 5000000
//   (one command line)
//
// What it does, and why:
// - No copy per packet: every frame of the file sits in an mbuf of a pool
//   sized to the file, and those mbufs themselves are transmitted, each
//   holding references granted in advance (refcnt > 1), so that the PMD's free
//   after transmit (net_memif in copy mode copies the frame into its shared
//   ring and frees the mbuf at once, DPDK 22.11 rte_eth_memif.c eth_memif_tx)
//   only drops a reference and never returns it to the pool. A grant of
//   kReferencesPerGrant references per mbuf is renewed once every as many
//   passes over the file, instead of an atomic increment per packet sent.
// - Pacing by TSC in bursts: a burst leaves when the schedule (start + sent /
//   pps) allows a whole burst; --pps 0 sends as fast as the port takes. A
//   generator that falls behind (the port not taking packets, the CPU taken
//   away) catches up as fast as the port takes, as long as it is at most
//   --catch-up-ms behind; further behind, it restarts the schedule from now
//   instead of sending the backlog as one long burst, and counts it
//   ("behind"): the rate reached is then below --pps, and the stats say so.
//   On a shared machine the scheduler takes a polling thread away for
//   milliseconds at a time: into maglb at half its measured maximum, 1 ms
//   reached 36% of the target here, 10 ms 79% (2 loaded vCPUs).
// - Back-pressure: what the port does not take now stays at the head of the
//   next burst and is offered again; nothing is dropped by the generator.
//   Calls that left packets behind count as "short_calls", those that took
//   nothing as "full_calls".
// - Stats: a JSON line per second on stdout ({"t":..,"tx":..,"pps":..}), a
//   final one with "final": true; the clock starts when the link is up (a
//   net_memif server: when the client has connected). Stops on SIGINT or
//   SIGTERM, after --duration seconds, or when the link goes down (the client
//   left: exit status 3). With net_memif, stop the sending before the client
//   leaves (--hold): DPDK 22.11's memif unmaps the ring in its control thread
//   while the data path may be using it, on either side.
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pcap_reader.h"

namespace maglb::bench {
namespace {

constexpr uint16_t kMaxBurst = 512;
constexpr uint16_t kDefaultBurst = 32;
constexpr uint16_t kRxDescriptors = 1024;
constexpr uint16_t kTxDescriptors = 1024;
// For what comes back on the port (an ARP request, a reply): received and
// freed, counted.
constexpr unsigned kRxPoolMbufs = 2047;
// References granted per mbuf at a time. refcnt is 16 bits: a grant plus the
// pool's own reference plus every copy of the mbuf still queued in a TX ring
// must stay under 65536; rings hold at most 16384 here (memif's largest).
constexpr uint16_t kReferencesPerGrant = 16384;
// RX is drained once every this many loop passes (it is almost always empty).
constexpr unsigned kRxDrainEvery = 256;

// SIGINT/SIGTERM received: the first stops sending, a second ends --hold.
std::atomic<int> g_signals{0};

void OnSignal(int) { g_signals.fetch_add(1, std::memory_order_relaxed); }

struct Options {
  std::string pcap;
  double pps = 0;  // 0: as fast as the port takes
  uint16_t burst = kDefaultBurst;
  double duration_s = 0;  // 0: until a signal
  uint16_t port = 0;
  double link_timeout_s = 60;
  double linger_ms = 200;  // after the last transmit, before closing the port
  bool hold = false;       // after the final line, keep the port until the client leaves
  double catch_up_ms = 10;  // how far behind its schedule it catches up
};

const char kUsage[] =
    "usage: pktgen [EAL arguments] -- --pcap FILE [--pps N] [--burst B] [--catch-up-ms MS]\n"
    "              [--duration S] [--port P]\n"
    "              [--link-timeout S] [--linger-ms MS] [--hold]\n"
    "  --pcap FILE         frames to send, round-robin (classic pcap, Ethernet)\n"
    "  --pps N             packets per second (default 0: as fast as the port takes)\n"
    "  --burst B           packets per transmit call, 1..512 (default 32)\n"
    "  --catch-up-ms MS    behind schedule by at most this, send faster to catch up; further\n"
    "                      behind, restart the schedule (counted: behind) (default 10)\n"
    "  --duration S        stop after S seconds from link up (default 0: at SIGINT/SIGTERM)\n"
    "  --port P            DPDK port to send on (default 0)\n"
    "  --link-timeout S    give up if the link is not up within S seconds (default 60)\n"
    "  --linger-ms MS      after the last transmit, keep the port open this long so that the\n"
    "                      receiver drains the ring before the link drops (default 200)\n"
    "  --hold              after the final line, keep the port open (sending nothing) until the\n"
    "                      link goes down (the client left) or a second SIGINT/SIGTERM\n";

bool ParseDouble(const char* text, double lo, double hi, double* out) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !(v >= lo && v <= hi)) return false;
  *out = v;
  return true;
}

// An error message, or "" when `argv` made sense.
std::string ParseOptions(int argc, char** argv, Options* o) {
  for (int i = 0; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") return "";
    if (a == "--hold") {
      o->hold = true;
      continue;
    }
    if (i + 1 >= argc) return std::string(a) + " needs a value (or unknown option)";
    const char* v = argv[++i];
    double d = 0;
    if (a == "--pcap") {
      o->pcap = v;
    } else if (a == "--pps") {
      if (!ParseDouble(v, 0, 1e9, &d)) return std::string("--pps ") + v + ": want 0..1e9";
      o->pps = d;
    } else if (a == "--burst") {
      if (!ParseDouble(v, 1, kMaxBurst, &d) || d != static_cast<uint16_t>(d)) {
        return std::string("--burst ") + v + ": want an integer 1..512";
      }
      o->burst = static_cast<uint16_t>(d);
    } else if (a == "--duration") {
      if (!ParseDouble(v, 0, 1e7, &d)) return std::string("--duration ") + v + ": want seconds >= 0";
      o->duration_s = d;
    } else if (a == "--port") {
      if (!ParseDouble(v, 0, RTE_MAX_ETHPORTS - 1, &d) || d != static_cast<uint16_t>(d)) {
        return std::string("--port ") + v + ": want a port number";
      }
      o->port = static_cast<uint16_t>(d);
    } else if (a == "--catch-up-ms") {
      if (!ParseDouble(v, 0, 10000, &d)) return std::string("--catch-up-ms ") + v + ": want 0..10000";
      o->catch_up_ms = d;
    } else if (a == "--linger-ms") {
      if (!ParseDouble(v, 0, 60000, &d)) return std::string("--linger-ms ") + v + ": want 0..60000";
      o->linger_ms = d;
    } else if (a == "--link-timeout") {
      if (!ParseDouble(v, 0, 3600, &d)) return std::string("--link-timeout ") + v + ": want 0..3600";
      o->link_timeout_s = d;
    } else {
      return "unknown option " + std::string(a);
    }
  }
  if (o->pcap.empty()) return "--pcap FILE is required";
  return "";
}

struct MempoolDeleter {
  void operator()(rte_mempool* p) const { rte_mempool_free(p); }
};
using Mempool = std::unique_ptr<rte_mempool, MempoolDeleter>;

// The frames of the file, one mbuf each, in file order.
struct LoadedFrames {
  Mempool pool;
  std::vector<rte_mbuf*> mbufs;
  uint64_t bytes = 0;
};

bool LoadFrames(const PcapFile& file, int socket, LoadedFrames* out) {
  const unsigned n = static_cast<unsigned>(file.frames.size());
  // No headroom: the frames are sent as they are, never prepended to, and
  // 128 bytes less per packet is ~128 MB less per million.
  const uint16_t data_room = static_cast<uint16_t>(file.max_length);
  rte_mempool* pool = rte_pktmbuf_pool_create("pktgen_frames", n, 0, 0, data_room, socket);
  if (pool == nullptr) {
    rte_mempool_objsz sz{};
    const uint32_t per = rte_mempool_calc_obj_size(sizeof(rte_mbuf) + data_room, 0, &sz);
    std::fprintf(stderr,
                 "pktgen: cannot allocate %u packet buffers of %u bytes (~%.0f MB): %s; give the "
                 "EAL more memory (-m MB)\n",
                 n, data_room, static_cast<double>(per) * n / (1 << 20), rte_strerror(rte_errno));
    return false;
  }
  out->pool.reset(pool);
  out->mbufs.resize(n);
  if (rte_pktmbuf_alloc_bulk(pool, out->mbufs.data(), n) != 0) {
    std::fprintf(stderr, "pktgen: cannot take %u buffers from a pool of %u\n", n, n);
    return false;
  }
  for (unsigned i = 0; i < n; ++i) {
    rte_mbuf* m = out->mbufs[i];
    const std::span<const uint8_t> frame = file.Frame(i);
    m->data_off = 0;
    std::memcpy(rte_pktmbuf_mtod(m, uint8_t*), frame.data(), frame.size());
    m->data_len = static_cast<uint16_t>(frame.size());
    m->pkt_len = static_cast<uint32_t>(frame.size());
    rte_mbuf_refcnt_set(m, 1 + kReferencesPerGrant);
    out->bytes += frame.size();
  }
  return true;
}

bool SetUpPort(uint16_t port, int socket, rte_mempool* rx_pool) {
  if (!rte_eth_dev_is_valid_port(port)) {
    std::fprintf(stderr, "pktgen: no DPDK port %u (give one with --vdev)\n", port);
    return false;
  }
  rte_eth_conf conf{};
  int rc = rte_eth_dev_configure(port, 1, 1, &conf);
  uint16_t rx_desc = kRxDescriptors, tx_desc = kTxDescriptors;
  if (rc == 0) rc = rte_eth_dev_adjust_nb_rx_tx_desc(port, &rx_desc, &tx_desc);
  if (rc == 0) rc = rte_eth_rx_queue_setup(port, 0, rx_desc, socket, nullptr, rx_pool);
  if (rc == 0) rc = rte_eth_tx_queue_setup(port, 0, tx_desc, socket, nullptr);
  if (rc == 0) rc = rte_eth_dev_start(port);
  if (rc != 0) {
    std::fprintf(stderr, "pktgen: port %u setup failed: %s\n", port, rte_strerror(-rc));
    return false;
  }
  return true;
}

bool LinkUp(uint16_t port) {
  rte_eth_link link{};
  return rte_eth_link_get_nowait(port, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

struct Counters {
  uint64_t tx = 0;            // packets the port took
  uint64_t tx_calls = 0;
  uint64_t short_calls = 0;   // calls that left packets to offer again
  uint64_t full_calls = 0;    // calls that took none
  uint64_t behind = 0;        // schedule restarts (fell > --catch-up-ms behind)
  uint64_t passes = 0;        // times round the whole file
  uint64_t rx = 0;            // packets that came back, freed
};

void PrintLine(const Counters& c, double t, double pps, bool final, const Options& o,
               const rte_eth_stats* port_stats, const char* stop_reason, uint16_t unsent,
               unsigned frames_in_pool) {
  std::printf(
      "{\"t\": %.3f, \"tx\": %lu, \"pps\": %.0f, \"tx_calls\": %lu, \"short_calls\": %lu, "
      "\"full_calls\": %lu, \"behind\": %lu, \"passes\": %lu, \"rx\": %lu, \"target_pps\": %.0f",
      t, c.tx, pps, c.tx_calls, c.short_calls, c.full_calls, c.behind, c.passes, c.rx, o.pps);
  if (final) {
    // unsent: scheduled but not taken by the port when it stopped (never sent).
    std::printf(", \"final\": true, \"stop\": \"%s\", \"unsent\": %u", stop_reason, unsent);
    // Every frame is held from load to exit: one back in the pool means a
    // reference was dropped that was never granted (a bug, or a PMD that
    // frees more than it was given).
    std::printf(", \"frames_back_in_pool\": %u", frames_in_pool);
    if (port_stats != nullptr) {
      std::printf(", \"port_opackets\": %lu, \"port_oerrors\": %lu", port_stats->opackets,
                  port_stats->oerrors);
    }
  }
  std::printf("}\n");
  std::fflush(stdout);
}

int Run(const Options& o) {
  absl::StatusOr<PcapFile> file = ReadPcap(o.pcap);
  if (!file.ok()) {
    std::fprintf(stderr, "pktgen: %s\n", std::string(file.status().message()).c_str());
    return 2;
  }
  int socket = rte_eth_dev_socket_id(o.port);
  if (socket < 0) socket = 0;
  LoadedFrames frames;
  if (!LoadFrames(*file, socket, &frames)) return 1;
  const uint64_t truncated = file->truncated;
  *file = PcapFile{};  // the bytes are in the mbufs now
  Mempool rx_pool(rte_pktmbuf_pool_create("pktgen_rx", kRxPoolMbufs, 64, 0,
                                          RTE_MBUF_DEFAULT_BUF_SIZE, socket));
  if (rx_pool == nullptr) {
    std::fprintf(stderr, "pktgen: cannot allocate the RX pool: %s (-m MB)\n",
                 rte_strerror(rte_errno));
    return 1;
  }
  if (!SetUpPort(o.port, socket, rx_pool.get())) return 1;
  rte_eth_dev_info info{};
  rte_eth_dev_info_get(o.port, &info);
  std::printf("{\"loaded\": %zu, \"bytes\": %lu, \"truncated_records\": %lu, \"port\": %u, "
              "\"driver\": \"%s\"}\n",
              frames.mbufs.size(), frames.bytes, truncated, o.port,
              info.driver_name != nullptr ? info.driver_name : "?");
  std::fflush(stdout);

  const uint64_t hz = rte_get_tsc_hz();
  const uint64_t wait_until = rte_rdtsc() + static_cast<uint64_t>(o.link_timeout_s * hz);
  while (!LinkUp(o.port)) {
    if (g_signals.load(std::memory_order_relaxed) > 0 || rte_rdtsc() > wait_until) {
      std::fprintf(stderr, "pktgen: port %u: link not up after %.0f s (no client connected?)\n",
                   o.port, o.link_timeout_s);
      rte_eth_dev_stop(o.port);
      rte_eth_dev_close(o.port);
      return 3;
    }
    rte_delay_us_sleep(10000);
  }
  std::fprintf(stderr, "pktgen: port %u link up: sending %zu frames round-robin at %s\n", o.port,
               frames.mbufs.size(),
               o.pps > 0 ? (std::to_string(static_cast<uint64_t>(o.pps)) + " pps").c_str()
                         : "the port's pace");

  const std::vector<rte_mbuf*>& mbufs = frames.mbufs;
  const size_t n = mbufs.size();
  const double pps_per_tsc = o.pps / static_cast<double>(hz);
  // At least two bursts.
  const uint64_t max_backlog =
      std::max<uint64_t>(2u * o.burst, static_cast<uint64_t>(o.pps * o.catch_up_ms * 1e-3));
  rte_mbuf* pending[kMaxBurst];
  uint16_t pending_count = 0;
  size_t cursor = 0;
  Counters c;
  uint64_t scheduled = 0;  // packets put into `pending` (committed to the port)
  const uint64_t start = rte_rdtsc();
  uint64_t sched_start = start, sched_base = 0;
  const uint64_t end = o.duration_s > 0 ? start + static_cast<uint64_t>(o.duration_s * hz) : 0;
  uint64_t next_report = start + hz, last_report = start, last_tx = 0;
  unsigned loops = 0;
  const char* stop_reason = "signal";
  int status = 0;
  rte_mbuf* rx[64];

  while (true) {
    const uint64_t now = rte_rdtsc();
    if (now >= next_report) {
      const double dt = static_cast<double>(now - last_report) / hz;
      PrintLine(c, static_cast<double>(now - start) / hz, (c.tx - last_tx) / dt, false, o, nullptr,
                "", 0, 0);
      last_report = now, last_tx = c.tx, next_report = now + hz;
      if (!LinkUp(o.port)) {
        stop_reason = "link down";
        status = 3;
        break;
      }
    }
    if (g_signals.load(std::memory_order_relaxed) > 0) break;
    if (end != 0 && now >= end) {
      stop_reason = "duration";
      break;
    }
    if (++loops % kRxDrainEvery == 0) {
      const uint16_t got = rte_eth_rx_burst(o.port, 0, rx, 64);
      if (got > 0) rte_pktmbuf_free_bulk(rx, got);
      c.rx += got;
    }

    // How many more the schedule allows now (the whole burst when flat out).
    uint64_t room = o.burst - pending_count;
    if (o.pps > 0) {
      const uint64_t due = sched_base + static_cast<uint64_t>((now - sched_start) * pps_per_tsc);
      const uint64_t allowed = due > scheduled ? due - scheduled : 0;
      if (allowed > max_backlog) {
        ++c.behind;
        sched_start = now, sched_base = scheduled;
        room = 0;
      } else if (pending_count == 0 && allowed < o.burst) {
        continue;  // not yet time for a whole burst
      } else {
        room = std::min<uint64_t>(room, allowed);
      }
    }
    for (uint64_t i = 0; i < room; ++i) {
      pending[pending_count++] = mbufs[cursor];
      if (++cursor == n) {
        cursor = 0;
        // Every mbuf has spent one reference per pass: a new grant once the
        // last one is spent, before any is sent again.
        if (++c.passes % kReferencesPerGrant == 0) {
          for (rte_mbuf* m : mbufs) rte_mbuf_refcnt_update(m, kReferencesPerGrant);
        }
      }
    }
    scheduled += room;
    if (pending_count == 0) continue;
    const uint16_t sent = rte_eth_tx_burst(o.port, 0, pending, pending_count);
    ++c.tx_calls;
    c.tx += sent;
    if (sent < pending_count) {
      ++c.short_calls;
      if (sent == 0) ++c.full_calls;
      std::memmove(pending, pending + sent, (pending_count - sent) * sizeof(pending[0]));
    }
    pending_count = static_cast<uint16_t>(pending_count - sent);
  }

  const uint64_t stop = rte_rdtsc();
  // What the port holds (a memif ring the client has not read yet) is lost
  // when the link drops: give the receiver time to take it.
  if (status == 0 && o.linger_ms > 0) rte_delay_us_sleep(static_cast<unsigned>(o.linger_ms * 1000));
  rte_eth_stats port_stats{};
  const bool have_stats = rte_eth_stats_get(o.port, &port_stats) == 0;
  const double secs = static_cast<double>(stop - start) / hz;
  PrintLine(c, secs, c.tx / secs, true, o, have_stats ? &port_stats : nullptr, stop_reason,
            pending_count, rte_mempool_avail_count(frames.pool.get()));
  if (status == 3) std::fprintf(stderr, "pktgen: port %u: link down (the client left)\n", o.port);
  if (o.hold && status == 0) {
    // A net_memif client polling its ring while the server closes it can
    // crash (DPDK 22.11 unmaps the ring in its control thread while the data
    // path runs), and so can this side if the client leaves mid-transmit:
    // whoever runs both stops the sending first, then the client, then this.
    const int seen = g_signals.load(std::memory_order_relaxed);
    while (LinkUp(o.port) && g_signals.load(std::memory_order_relaxed) == seen) {
      rte_delay_us_sleep(10000);
    }
  }
  // The port first (its queues may hold references), then the pools.
  rte_eth_dev_stop(o.port);
  rte_eth_dev_close(o.port);
  return status;
}

}  // namespace
}  // namespace maglb::bench

int main(int argc, char** argv) {
  const int eal_args = rte_eal_init(argc, argv);
  if (eal_args < 0) {
    std::fprintf(stderr, "pktgen: EAL init failed: %s\n%s", rte_strerror(rte_errno),
                 maglb::bench::kUsage);
    return 2;
  }
  maglb::bench::Options options;
  const std::string error =
      maglb::bench::ParseOptions(argc - eal_args - 1, argv + eal_args + 1, &options);
  if (!error.empty() || options.pcap.empty()) {
    if (!error.empty()) std::fprintf(stderr, "pktgen: %s\n", error.c_str());
    std::fputs(maglb::bench::kUsage, stderr);
    rte_eal_cleanup();
    return 2;
  }
  std::signal(SIGINT, maglb::bench::OnSignal);
  std::signal(SIGTERM, maglb::bench::OnSignal);
  const int status = maglb::bench::Run(options);
  rte_eal_cleanup();
  return status;
}
