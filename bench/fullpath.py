#!/usr/bin/env python3
"""Full-path benchmark: the real maglb daemon against dpdk-testpmd on the same vdevs.

    sudo python3 bench/fullpath.py --quick            # a smoke run (~2 s windows, fewer packets)
    sudo python3 bench/fullpath.py --rounds 3 --out /tmp/fp --pcap-dir /tmp/fp-pcaps
    sudo python3 bench/fullpath.py --render /tmp/fp/fullpath.json   # table and plot again
  Needs a release build: meson setup build-rel -Dbuildtype=release &&
  ninja -C build-rel maglb src/ctl/maglbctl (--build DIR for another).

A benchmark, never a test: nothing here is pass/fail, and it is not in `meson test`.

What runs, per traffic case (mix x flow count), interleaved in the same run:
  dpdk-testpmd --forward-mode=io, dpdk-testpmd --forward-mode=macswap, maglb,
  (repeated --rounds times; the table takes the median of each), all three on
  the identical vdevs:
    --vdev=net_pcap0,<source> --vdev=net_null0,no-rx=1
  port 0 (net_pcap) is where traffic comes in, port 1 (net_null) where it leaves:
  maglb runs two-arm (`--backend-port 1`), GRE toward 3 backends behind a static
  [[neighbor]] gateway (no ARP), conntrack capacity sized to the flow count.
  net_null's `no-rx=1`: otherwise its RX invents packets at ~40 Mpps, which
  testpmd io forwards back (halving its core for the direction we measure) and
  maglb drops at the MAC check.

The traffic source, per case (`--source auto`, the default):
  replay  net_pcap `rx_pcap=FILE,infinite_rx=1`: the PMD reads the file into
          mbufs of the port's pool once and copies from them forever; the
          fastest source, but every packet of the file holds one mbuf of the
          pool, and maglb's pool is 8191 mbufs (src/dataplane/port.h), so only
          files of <= 4096 packets (the 1K-flow cases).
  fifo    net_pcap `rx_pcap=FIFO`: a streamer process (pinned to CPU 0, the
          main lcore's, idle in both programs) writes the file's records
          into a named pipe in a loop and the PMD reads them with libpcap, one
          mbuf per packet, freed on transmit: any number of flows, at the cost of
          a pipe read in the polling thread (a lower ceiling, the same for testpmd).
  The ratio to testpmd macswap is always against the same source and file.
  Not used: net_memif fed by a generator (testpmd io from a net_pcap replay
  with a pool of its own): measured here at 0.5-0.8 Mpps into maglb (the
  generator's memif TX dropped ~90%), below the FIFO. Once maglb's pool can be
  sized to the ports (issue 13 point 4), `--replay-max` lets replay take the
  large files too (1M packets: ~1M mbufs, ~2.3 GB of -m at 2 KB buffers).

Mpps: maglb's from its telemetry (`maglbctl stats --prefix P --format json`
read twice, rx_packets difference over the window; telemetry counts packets
per port, not per worker, so "per worker" is that over the workers polling,
with each worker's share of busy polls from worker_polls/worker_busy_polls
_per_worker); testpmd's from its `--stats-period 1` Rx-pps of port 0 after the
warm-up, averaged over the window. "forwarded" (maglb tx/rx) shows that the
packets went through the whole path (GRE out), not a drop.

Workers (`--workers N`): maglb gets N worker lcores and testpmd N forwarding
cores. net_pcap offers no RSS, so maglb polls it with ONE queue whatever N is
(src/dataplane/port.cc PlannedQueues: several queues only with RSS or
net_af_packet's kernel fanout, so that a flow stays on the worker holding its
conntrack entry); the other lcores idle, and the harness says so (from maglb's
`started:` line). net_pcap can have several RX queues (rx_pcap given once per
queue) but then disables infinite_rx, and spreads nothing by flow. A scaling
curve needs a port with RSS (a NIC, or net_af_packet); the per-worker table is
printed either way.

Output: a markdown table on stdout and in OUT/fullpath.md, the raw figures in
OUT/fullpath.json and OUT/fullpath.dat, and OUT/fullpath.png (gnuplot: Mpps
against flow count, log x). Temp files (pcaps, FIFOs, configs, logs) go in a
temp dir removed at the end (`--keep` keeps it; `--pcap-dir` caches pcaps).
"""

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fullpath_traffic as traffic  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPLAY_MAX_PACKETS = 4096  # fits maglb's 8191-mbuf pool beside 1024 RX + 1024 TX descriptors and caches
MEM_MB = 512

# The streamer: writes the pcap header once, then the records forever, into
# the FIFO (a 1 MiB pipe buffer: fewer wake-ups). Ends on EPIPE when the
# reader exits.
STREAMER = r"""
import os, sys
data = open(sys.argv[1], 'rb').read()
fd = os.open(sys.argv[2], os.O_WRONLY)
try:
    import fcntl
    fcntl.fcntl(fd, 1031, 1 << 20)  # F_SETPIPE_SZ
except OSError:
    pass
try:
    os.write(fd, data[:24])
    body = memoryview(data)[24:]
    while True:
        v = body
        while v:
            v = v[os.write(fd, v):]
except OSError:
    pass
"""


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


class Procs:
    """Every process the harness starts, stopped by its PID at the end."""

    def __init__(self):
        self.procs = []

    def start(self, cmd, **kw):
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, **kw)
        self.procs.append(p)
        return p

    def stop(self, p, sig=signal.SIGINT, timeout=15):
        if p.poll() is None:
            try:
                p.send_signal(sig)
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if p in self.procs:
            self.procs.remove(p)

    def stop_all(self):
        for p in list(self.procs):
            self.stop(p, signal.SIGKILL, timeout=5)


def config_text(capacity):
    lines = ['[lb]', 'hash_seed = 0', 'ipv4 = "192.0.2.10"', 'gateway_v4 = "192.0.2.1"', '',
             '[conntrack]', 'capacity = %d' % capacity, '',
             '[[neighbor]]', 'address = "192.0.2.1"', 'mac = "02:00:00:00:00:01"', '']
    backends = ["10.200.0.%d" % i for i in (1, 2, 3)]
    for i, b in enumerate(backends):
        lines += ['[[neighbor]]', 'address = "%s"' % b, 'mac = "02:00:00:00:01:%02x"' % (i + 1), '']
    lines += ['[[vip]]', 'name = "bench"', 'address = "198.51.100.80"', 'protocol = "tcp"', 'port = 80',
              'forwarding = "gre"']
    for i, b in enumerate(backends):
        lines += ['  [[vip.backend]]', '  name = "be%d"' % (i + 1), '  address = "%s"' % b]
    return "\n".join(lines) + "\n"


def lcore_args(workers):
    """Main lcore plus `workers` lcores; mapped onto the CPUs there are
    (round robin) when there are fewer CPUs than lcores."""
    ncpu = os.cpu_count() or 1
    if workers + 1 <= ncpu:
        return ["-l", "0-%d" % workers]
    return ["--lcores", ",".join("%d@%d" % (i, i % ncpu) for i in range(workers + 1))]


class Case:
    def __init__(self, mix, flows, packets, capacity):
        self.mix, self.flows, self.packets, self.capacity = mix, flows, packets, capacity
        self.name = "%s-%d" % (mix, flows)


def cases(quick, only_mixes):
    big = 1_000_000 if quick else 2_000_000
    out = []
    for flows in (1000, 100_000, 1_000_000):
        out.append(Case("uniform", flows, flows, max(1024, flows)))
    for flows in (1000, 100_000, 1_000_000):
        out.append(Case("zipf", flows, REPLAY_MAX_PACKETS if flows <= 1000 else big, max(1024, flows)))
    # SYN flood: every packet its own flow; the table holds half the file, so
    # a replayed SYN has been evicted by the time it comes round again.
    out.append(Case("syn", big, big, big // 2))
    # 90/10: 100K established flows; new flows (10% of packets, ~100K-200K per
    # pass of the file) churn through 5% spare capacity, so they stay new.
    est = 100_000
    out.append(Case("mix90", est, big // 2 if quick else big, est + est // 20))
    if only_mixes:
        out = [c for c in out if c.mix in only_mixes]
    return out


class Bench:
    def __init__(self, args, tmp):
        self.args, self.tmp = args, tmp
        self.procs = Procs()
        self.maglb = os.path.join(args.build, "maglb")
        self.ctl = os.path.join(args.build, "src", "ctl", "maglbctl")
        self.seq = 0

    def prefix(self):
        self.seq += 1
        return "fullpath%d_%d" % (os.getpid(), self.seq)

    def pcap(self, case):
        cache = self.args.pcap_dir or self.tmp
        os.makedirs(cache, exist_ok=True)
        path = os.path.join(cache, "%s-%d.pcap" % (case.name, case.packets))
        meta = path + ".json"
        if os.path.exists(path) and os.path.exists(meta):
            with open(meta) as f:
                return path, json.load(f)
        t0 = time.time()
        recs, info = traffic.build(case.mix, case.flows, case.packets)
        traffic.write(path, recs)
        with open(meta, "w") as f:
            json.dump(info, f)
        log("%s: %d packets, %d distinct flows, written in %.1f s" %
            (case.name, info["packets"], info["distinct"], time.time() - t0))
        return path, info

    def source(self, case, info):
        limit = self.args.replay_max
        if self.args.source == "replay" or (self.args.source == "auto" and info["packets"] <= limit):
            if info["packets"] > limit:
                log("warning: %s: %d packets in replay mode exceed maglb's pool" % (case.name, info["packets"]))
            return "replay"
        return "fifo"

    def vdevs(self, pcap, source):
        """The EAL vdev arguments, and the streamer to start first (fifo)."""
        if source == "replay":
            rx = "rx_pcap=%s,infinite_rx=1" % pcap
            streamer = None
        else:
            fifo = os.path.join(self.tmp, "rx%d.fifo" % self.seq)
            if os.path.exists(fifo):
                os.unlink(fifo)
            os.mkfifo(fifo)
            rx = "rx_pcap=%s" % fifo
            # On the main lcore's CPU (0), which both programs leave idle, not
            # on a worker's.
            streamer = ["taskset", "-c", "0", sys.executable, "-c", STREAMER, pcap, fifo]
        return ["--vdev=net_pcap0,%s" % rx, "--vdev=net_null0,no-rx=1"], streamer

    def cleanup_prefix(self, prefix):
        shutil.rmtree("/var/run/dpdk/%s" % prefix, ignore_errors=True)

    def run_testpmd(self, pcap, source, mode):
        prefix = self.prefix()
        vdevs, streamer = self.vdevs(pcap, source)
        sp = self.procs.start(streamer, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) if streamer else None
        out_path = os.path.join(self.tmp, "%s.log" % prefix)
        cmd = ["stdbuf", "-oL", self.args.testpmd, "--no-huge", "--no-pci", "-m", str(MEM_MB), "--file-prefix",
               prefix] + lcore_args(self.args.workers) + vdevs + [
               "--", "--forward-mode=%s" % mode, "--stats-period", "1", "--nb-cores=%d" % self.args.workers,
               "--total-num-mbufs=8191", "--no-lsc-interrupt"]
        skip = int(self.args.warmup) + 1  # the first sample covers start-up
        want = skip + int(round(self.args.window))
        samples = []
        with open(out_path, "w") as out:
            p = self.procs.start(cmd, stdout=out, stderr=subprocess.STDOUT)
            deadline = time.time() + 60 + want
            while time.time() < deadline and p.poll() is None:
                time.sleep(0.25)
                samples = port0_rx_pps(open(out_path).read())
                if len(samples) >= want:
                    break
            self.procs.stop(p)
        if sp:
            self.procs.stop(sp, signal.SIGKILL)
        self.cleanup_prefix(prefix)
        text = open(out_path).read()
        window = samples[skip:want]
        if not window:
            raise RuntimeError("testpmd %s gave no stats (log %s):\n%s" % (mode, out_path, text[-2000:]))
        return {"mpps": statistics.mean(window) / 1e6, "samples": len(window)}

    def stats(self, prefix):
        p = subprocess.run([self.ctl, "stats", "--prefix", prefix, "--format", "json"], capture_output=True,
                           text=True, timeout=20)
        if p.returncode != 0:
            raise RuntimeError("maglbctl stats: %s%s" % (p.stdout, p.stderr))
        return json.loads(p.stdout)["stats"], time.monotonic()

    def run_maglb(self, pcap, source, case):
        prefix = self.prefix()
        vdevs, streamer = self.vdevs(pcap, source)
        cfg = os.path.join(self.tmp, "%s.toml" % prefix)
        with open(cfg, "w") as f:
            f.write(config_text(case.capacity))
        sp = self.procs.start(streamer, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) if streamer else None
        log_path = os.path.join(self.tmp, "%s.log" % prefix)
        cmd = [self.maglb, "--no-huge", "--no-pci", "-m", str(MEM_MB), "--file-prefix", prefix] + \
            lcore_args(self.args.workers) + vdevs + ["--", "--config", cfg, "--backend-port", "1"]
        try:
            with open(log_path, "w") as out:
                p = self.procs.start(cmd, stdout=out, stderr=subprocess.STDOUT)
            started, offloads, deadline = None, [], time.time() + 60
            while started is None and time.time() < deadline and p.poll() is None:
                time.sleep(0.2)
                lines = open(log_path).read().splitlines()
                for line in lines:
                    if "started:" in line:
                        started = line
                offloads = offload_lines(lines)
            if started is None:
                raise RuntimeError("maglb did not start (log %s):\n%s" % (log_path, open(log_path).read()[-3000:]))
            time.sleep(self.args.warmup)
            s1, t1 = self.stats(prefix)
            time.sleep(self.args.window)
            s2, t2 = self.stats(prefix)
        finally:
            self.procs.stop(p)
            if sp:
                self.procs.stop(sp, signal.SIGKILL)
            self.cleanup_prefix(prefix)
        return dict(rates(s1, s2, t2 - t1, started), offloads=offloads)


def offload_lines(lines):
    """The NIC offloads each port enabled, from maglb's log (the lines just
    before "started:"), e.g. "port 0 net_pcap0 (net_pcap): offloads none ..."."""
    found = (re.search(r"port \d+ \S+ \(\S+\): offloads .*", line) for line in lines)
    return [m.group(0) for m in found if m]


def port0_rx_pps(text):
    """Rx-pps of port 0 in testpmd's output, one per --stats-period, each over the last period."""
    samples, port = [], None
    for line in text.splitlines():
        m = re.search(r"NIC statistics for port (\d+)", line)
        if m:
            port = int(m.group(1))
        m = re.search(r"Rx-pps:\s+(\d+)", line)
        if m and port == 0:
            samples.append(int(m.group(1)))
    return samples


def per_worker(stats, key):
    a = stats.get(key + "_per_worker")
    return [int(x) for x in a] if isinstance(a, list) else None


def rates(s1, s2, dt, started):
    """maglb's figures over the window. Telemetry counts packets per port, not
    per worker; per worker it has polls, busy polls (a poll that got packets)
    and conntrack occupancy, so the per-worker rate is the total over the
    workers polling, each worker's share of busy polls shown beside it."""
    def d(key):
        return int(s2.get(key, 0)) - int(s1.get(key, 0))
    rx, tx = d("rx_packets"), d("tx_packets")
    m = re.search(r"(\d+) workers? on lcore", started)
    polling = int(m.group(1)) if m else int(s2.get("workers", 1))
    busy = []
    p1, p2 = per_worker(s1, "worker_polls"), per_worker(s2, "worker_polls")
    b1, b2 = per_worker(s1, "worker_busy_polls"), per_worker(s2, "worker_busy_polls")
    if p1 and p2 and b1 and b2:
        busy = [min(1.0, (bb - ba) / (pb - pa)) if pb > pa else 0.0 for pa, pb, ba, bb in zip(p1, p2, b1, b2)]
    return {"mpps": rx / dt / 1e6, "tx_mpps": tx / dt / 1e6, "forwarded": tx / rx if rx else 0.0,
            "dropped": d("dropped"), "per_worker_mpps": [rx / dt / 1e6 / max(1, polling)] * polling,
            "busy_poll_share": busy, "conntrack_occupied": per_worker(s2, "conntrack_occupied"),
            "workers_polling": polling, "started": started.strip()}


def fmt_flows(n):
    return "%dM" % (n // 1_000_000) if n >= 1_000_000 and n % 1_000_000 == 0 else \
        "%dK" % (n // 1000) if n >= 1000 and n % 1000 == 0 else str(n)


def render(results, args):
    head = ("| mix | flows | packets in file (distinct flows) | source | testpmd io Mpps | testpmd macswap Mpps "
            "| maglb Mpps | maglb per worker | forwarded | ratio to macswap (range over rounds) |")
    lines = [head, "| " + " | ".join(["---"] * 10) + " |"]
    for r in results:
        pw = " / ".join("%.2f" % x for x in r["maglb"]["per_worker_mpps"]) or "-"
        busy = r["maglb"]["busy_poll_share"]
        if busy:
            pw += " (busy %s)" % " / ".join("%d%%" % round(100 * b) for b in busy)
        ratios = sorted(r["ratios"])
        ratio = "%.2f" % ratios[len(ratios) // 2]
        if len(ratios) > 1:
            ratio += " (%.2f-%.2f)" % (ratios[0], ratios[-1])
        lines.append("| %s | %s | %d (%d) | %s | %.2f | %.2f | %.2f | %s | %.1f%% | %s |" % (
            r["mix"], fmt_flows(r["flows"]), r["packets"], r["distinct"], r["source"], r["io"]["mpps"],
            r["macswap"]["mpps"], r["maglb"]["mpps"], pw, 100 * r["maglb"]["forwarded"], ratio))
    polling = sorted({r["maglb"]["workers_polling"] for r in results if r["maglb"]["workers_polling"]})
    lines.append("")
    lines.append("Mpps: the median over %d interleaved round(s); ratio: median of each round's maglb over "
                 "the macswap run just before it." % args.rounds)
    lines.append("maglb: %d worker lcore(s) asked, %s polling; per-worker Mpps is the port's rate over the "
                 "workers polling (telemetry counts packets per port), busy = share of a worker's polls that "
                 "got packets." % (args.workers, "/".join(map(str, polling)) or "?"))
    if polling and max(polling) < args.workers:
        lines.append("net_pcap offers no RSS, so maglb polls it with one queue; the other lcores idle.")
    offloads = sorted({o for r in results for o in r["maglb"].get("offloads", [])})
    if offloads:
        lines.append("maglb's NIC offloads (its log): " + "; ".join("`%s`" % o for o in offloads))
    return "\n".join(lines)


def machine_header(args, load_before):
    """What bench/RESULTS.md wants beside every figure: command, build type, CPU, load."""
    buildtype = "?"
    try:
        with open(os.path.join(args.build, "meson-info", "intro-buildoptions.json")) as f:
            buildtype = next(o["value"] for o in json.load(f) if o["name"] == "buildtype")
    except (OSError, StopIteration, ValueError, KeyError):
        pass
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    with open("/proc/loadavg") as f:
        load_after = " ".join(f.read().split()[:3])
    return ["command: `%s`" % " ".join(["python3", "bench/fullpath.py"] + sys.argv[1:]),
            "build: %s (%s), %s" % (args.build, buildtype, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())),
            "CPU: %s, %d CPUs; load average before %s, after %s" % (model, os.cpu_count() or 0, load_before,
                                                                   load_after), ""]


def plot(results, out_dir):
    dat = os.path.join(out_dir, "fullpath.dat")
    series = []
    with open(dat, "w") as f:
        for mix in ("uniform", "zipf", "syn", "mix90"):
            rows = [r for r in results if r["mix"] == mix]
            if not rows:
                continue
            f.write("# %s: flows maglb_mpps macswap_mpps io_mpps\n" % mix)
            for r in rows:
                f.write("%d %.4f %.4f %.4f\n" % (r["flows"], r["maglb"]["mpps"], r["macswap"]["mpps"], r["io"]["mpps"]))
            f.write("\n\n")
            series.append(mix)
    if not shutil.which("gnuplot"):
        log("gnuplot not found: no PNG (data in %s)" % dat)
        return
    png = os.path.join(out_dir, "fullpath.png")
    cmds = ["set terminal pngcairo size 1000,600" if _has_pngcairo() else "set terminal png size 1000,600",
            "set output '%s'" % png, "set logscale x", "set xlabel 'flows'", "set ylabel 'Mpps'",
            "set key outside right", "set grid", "set yrange [0:*]", "set termoption noenhanced",
            'set title "maglb full path (net_pcap -> GRE -> net_null) vs testpmd macswap, same vdevs\\n'
            'source per point: %s"' % (", ".join("%s %s" % (fmt_flows(r["flows"]), r["source"]) for r in results
                                                 if r["mix"] == "uniform") or "see table")]
    plots = []
    for i, mix in enumerate(series):
        plots.append("'%s' index %d using 1:2 with linespoints lw 2 pt 7 title 'maglb %s'" % (dat, i, mix))
        plots.append("'%s' index %d using 1:3 with linespoints dt 2 title 'testpmd macswap (%s)'" % (dat, i, mix))
    cmds.append("plot " + ", ".join(plots))
    subprocess.run(["gnuplot"], input="\n".join(cmds), text=True, check=False)
    log("plot: %s" % png)


def _has_pngcairo():
    p = subprocess.run(["gnuplot", "-e", "set terminal"], capture_output=True, text=True)
    return "pngcairo" in (p.stdout + p.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 s windows, 1 s warm-up, smaller files")
    ap.add_argument("--workers", type=int, default=1, help="maglb worker lcores / testpmd forwarding cores")
    ap.add_argument("--window", type=float, help="measurement window, s (default 5; quick 2)")
    ap.add_argument("--warmup", type=float, help="warm-up before the window, s (default 2; quick 1)")
    ap.add_argument("--rounds", type=int, default=1, help="interleaved rounds per case; the median is reported")
    ap.add_argument("--mix", action="append", choices=["uniform", "zipf", "syn", "mix90"], help="only these mixes")
    ap.add_argument("--max-flows", type=int, help="skip cases with more flows")
    ap.add_argument("--source", choices=["auto", "fifo", "replay"], default="auto")
    ap.add_argument("--replay-max", type=int, default=REPLAY_MAX_PACKETS,
                    help="largest file replayed with infinite_rx under --source auto (each packet holds one "
                         "mbuf of maglb's pool for the whole run); default %(default)s for the 8191-mbuf pool")
    ap.add_argument("--build", default=os.path.join(REPO, "build-rel"), help="build dir with maglb (release)")
    ap.add_argument("--testpmd", default="/usr/bin/dpdk-testpmd")
    ap.add_argument("--out", help="output dir (default: a new one under /tmp)")
    ap.add_argument("--pcap-dir", help="keep generated pcaps here and reuse them")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs, configs)")
    ap.add_argument("--render", metavar="JSON", help="only print the table (and plot) of a saved fullpath.json")
    args = ap.parse_args()
    if args.render:
        with open(args.render) as f:
            saved = json.load(f)
        saved_args = argparse.Namespace(**saved["args"])
        for r in saved["results"]:
            r.setdefault("ratios", [m / s if s else 0.0 for m, s in zip(r["rounds"]["maglb"], r["rounds"]["macswap"])])
        print(render(saved["results"], saved_args))
        plot(saved["results"], os.path.dirname(os.path.abspath(args.render)))
        return
    args.window = args.window or (2.0 if args.quick else 5.0)
    args.warmup = args.warmup or (1.0 if args.quick else 2.0)
    if os.geteuid() != 0:
        sys.exit("fullpath.py: DPDK needs root (run with sudo)")
    for exe in (os.path.join(args.build, "maglb"), os.path.join(args.build, "src", "ctl", "maglbctl"), args.testpmd):
        if not os.access(exe, os.X_OK):
            sys.exit("fullpath.py: %s missing: meson setup build-rel -Dbuildtype=release && "
                     "ninja -C build-rel maglb src/ctl/maglbctl" % exe)
    out_dir = args.out or tempfile.mkdtemp(prefix="maglb-fullpath-out-")
    os.makedirs(out_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="maglb-fullpath-")
    bench = Bench(args, tmp)
    with open("/proc/loadavg") as f:
        load_before = " ".join(f.read().split()[:3])
    results = []
    try:
        for case in cases(args.quick, args.mix):
            if args.max_flows and case.flows > args.max_flows:
                continue
            pcap, info = bench.pcap(case)
            source = bench.source(case, info)
            runs = {"io": [], "macswap": [], "maglb": []}
            failed = False
            for rnd in range(args.rounds):
                if failed:
                    break
                for what in ("io", "macswap", "maglb"):
                    log("%s (%s) round %d: %s" % (case.name, source, rnd + 1, what))
                    try:
                        r = bench.run_maglb(pcap, source, case) if what == "maglb" else \
                            bench.run_testpmd(pcap, source, what)
                    except (RuntimeError, OSError, subprocess.SubprocessError, ValueError, KeyError) as e:
                        log("  failed, case skipped: %s" % e)
                        failed = True
                        break
                    log("  %.2f Mpps" % r["mpps"])
                    runs[what].append(r)
            if failed:
                continue
            pick = {k: sorted(v, key=lambda r: r["mpps"])[len(v) // 2] for k, v in runs.items()}
            # Each round's maglb against the macswap run just before it (the
            # load of the machine drifts between rounds).
            ratios = [m["mpps"] / s["mpps"] if s["mpps"] else 0.0 for m, s in zip(runs["maglb"], runs["macswap"])]
            results.append({"mix": case.mix, "flows": case.flows, "packets": info["packets"],
                            "distinct": info["distinct"], "capacity": case.capacity, "source": source,
                            "rounds": {k: [r["mpps"] for r in v] for k, v in runs.items()},
                            "ratios": ratios, **pick})
            if pick["maglb"]["workers_polling"] is not None and pick["maglb"]["workers_polling"] < args.workers:
                log("note: %s" % pick["maglb"]["started"])
    finally:
        bench.procs.stop_all()
        if args.keep:
            log("temp files kept in %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    table = "\n".join(machine_header(args, load_before)) + "\n" + render(results, args)
    with open(os.path.join(out_dir, "fullpath.md"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(out_dir, "fullpath.json"), "w") as f:
        json.dump({"args": vars(args), "results": results}, f, indent=1)
    plot(results, out_dir)
    print(table)
    log("results in %s" % out_dir)


if __name__ == "__main__":
    main()
