#!/usr/bin/env python3
"""Full-path benchmark: the real maglb daemon against dpdk-testpmd on the same vdevs.

    sudo python3 bench/fullpath.py --quick            # a smoke run (~2 s windows, fewer packets)
    sudo python3 bench/fullpath.py --rounds 3 --out /tmp/fp --pcap-dir /tmp/fp-pcaps
    sudo python3 bench/fullpath.py --source memif --latency --reload   # paced: latency, reload under load
    sudo python3 bench/fullpath.py --render /tmp/fp/fullpath.json   # table and plot again
  Needs a release build: meson setup build-rel -Dbuildtype=release &&
  ninja -C build-rel maglb src/ctl/maglbctl bench/pktgen (--build DIR for another).

A benchmark, never a test: nothing here is pass/fail, and it is not in `meson test`.

What runs, per traffic case (mix x flow count), interleaved in the same run:
  dpdk-testpmd --forward-mode=io, dpdk-testpmd --forward-mode=macswap, maglb,
  (repeated --rounds times; the table takes the median of each), all three on
  the identical vdevs:
    --vdev=<source port> --vdev=net_null0,no-rx=1
  port 0 (the source) is where traffic comes in, port 1 (net_null) where it
  leaves: maglb runs two-arm (`--backend-port 1`), GRE toward 3 backends behind
  a static [[neighbor]] gateway (no ARP), conntrack capacity sized to the flow
  count. net_null's `no-rx=1`: otherwise its RX invents packets at ~40 Mpps,
  which testpmd io forwards back (halving its core for the direction we
  measure) and maglb drops at the MAC check.

The traffic source, per case (`--source auto`, the default, picks replay or fifo):
  replay  net_pcap `rx_pcap=FILE,infinite_rx=1`: the PMD reads the file into
          mbufs of the port's pool once and copies from them forever; the
          fastest source, but every packet of the file holds one mbuf of the
          pool for the whole run, so the harness sizes the pools to the file
          (maglb `[lb] mbufs`, testpmd `--total-num-mbufs`: packets + 16384)
          and replays files of up to --replay-max packets (default 1M: ~5 GB
          of 2 MB hugepages for maglb's two ports, which the harness reserves
          and releases, see "Memory" below).
  fifo    net_pcap `rx_pcap=FIFO`: a streamer process (pinned to CPU 0, the
          main lcore's, idle in both programs) writes the file's records
          into a named pipe in a loop and the PMD reads them with libpcap, one
          mbuf per packet, freed on transmit: any number of flows, at the cost of
          a pipe read in the polling thread (a lower ceiling, the same for testpmd).
  memif   net_memif: bench/pktgen (a net_memif server, pinned to CPU 0 with
          the main lcores) holds the whole file in a pool of its own and
          sends it round-robin, paced by TSC (--pps) or flat out, with
          back-pressure (what the ring does not take is offered again);
          testpmd and maglb are memif clients (`role=client`, maglb's MAC set
          to the pcaps' destination). Any file size, and the only source that
          can be paced (--latency, --reload). Every packet crosses from CPU 0
          to CPU 1 through the shared ring (a copy on each side; --memif-zc
          makes the clients zero-copy: the generator copies into their mbufs),
          so its ceiling is what the two CPUs move between them, and on a
          loaded 2-CPU machine both programs must be running at once for
          anything to move. Measured here (2 vCPUs, load average 5-10):
          into testpmd io 1-3.4 Mpps (replay: 8-13), into maglb 0.4-2.2
          (replay: 2.0) with single runs up to 5.7; a bare C ring between
          the two CPUs (producer spinning on a full ring, consumer copying
          60-byte slots) moved 3-16 Mpps: the VM's cross-CPU traffic and
          the scheduler set the ceiling, not memif or pktgen. Zero-copy
          (--memif-zc) and 64-byte slots (the default) help within the noise.
  The ratio to testpmd macswap is always against the same source and file.

Memory (--hugepages auto|N|0): as root, 2 MB hugepages for the largest replayed
file's pools are reserved before the first run (a hugetlbfs mounted in a temp
dir if none is), both programs run on them (--huge-dir, --huge-unlink), and
they are released at the end, on an error or Ctrl-C too (nr_hugepages less
what was added). Without them (0, or none to be had) both run --no-huge with
-m sized to the file (DPDK then takes a 4 KiB page per 2 KB buffer).
--big-flows 10000000 adds uniform cases at such counts (the FIFO past
--replay-max), measured once maglb has seen the whole file.

Mpps: maglb's from its telemetry (`maglbctl stats --prefix P --format json`
read twice, rx_packets difference over the window; telemetry counts packets
per port, not per worker, so "per worker" is that over the workers polling,
with each worker's share of busy polls from worker_polls/worker_busy_polls
_per_worker); testpmd's from its `--stats-period 1` Rx-pps of port 0 after the
warm-up, averaged over the window. "forwarded" (maglb tx/rx) shows that the
packets went through the whole path (GRE out), not a drop. With memif the
warm-up lasts at least one pass over the file (conntrack filled).

--latency (memif): per case (default uniform 1K and 1M flows), maglb's
maximum rate with pktgen flat out, then runs at 50% and 90% of it; each reads
maglb's per-packet latency histogram (telemetry /maglb/latency: time from
receive to transmit inside maglb, TSC) at both ends of the window and
reports p50/p99/p99.9 of the difference (each the upper bound of the bucket
holding that rank) and the rate reached.

--reload: per case, interleaved runs without and with reloads; with memif
(default, --reload-source) at 90% of the maximum rate, with replay
(--reload-source replay: no generator process sharing CPU 0 with maglb's
control thread, but no pacing) at the replay's full rate; during the window the config is rewritten 100
times a second (a temp file renamed over it; a 4th backend added, reweighted,
removed in turn). Compares the rates; checks rx = tx + counted drops
(`maglbctl stats`; with memif after pktgen stopped, its linger letting maglb
drain the ring) and pktgen's sent total against maglb's rx; polls /maglb/reloads at 10 Hz and
reports the time from each rename to the workers using the new tables.

Workers (`--workers N`): maglb gets N worker lcores and testpmd N forwarding
cores. With replay the capture is split into N files by a hash of each
frame's addresses and ports (as RSS would spread them: a flow in one file) and
net_pcap gets one rx_pcap per file, so each of maglb's workers and testpmd's
cores (--rxq/--txq N) reads one queue (src/dataplane/port.cc PlannedQueues:
"one source per queue"). net_memif and the FIFO offer one queue: maglb polls
it with one worker whatever N is, the other lcores idle, and the harness says
so (from maglb's `started:` line). The per-worker table is printed either way.

CPUs: the main lcores (both programs) and the streamer or generator on CPU 0,
workers on CPU 1..N; the output says where each ran.

Output: a markdown table on stdout and in OUT/fullpath.md (with the latency
and reload tables when asked), the raw figures in OUT/fullpath.json and
OUT/fullpath.dat, and OUT/fullpath.png (gnuplot: Mpps against flow count, log
x). Temp files (pcaps, FIFOs, configs, logs) go in a temp dir removed at the
end (`--keep` keeps it; `--pcap-dir` caches pcaps).
"""

import argparse
import atexit
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
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fullpath_daemon as daemon  # noqa: E402
import fullpath_traffic as traffic  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# maglb's pool is sized to the file ([lb] mbufs): 1M packets fit ~5 GB of hugepages.
REPLAY_MAX_PACKETS = 1 << 20
MEM_MB = 512
# The pcaps' destination MAC (net_pcap's first port); a memif client gets it
# with `mac=` so that the same files serve every source.
PCAP_DST_MAC = "02:70:63:61:70:00"
# The 4th backend the reload runs add, reweight and remove; its neighbour
# entry stays in every config.
FOURTH_BACKEND = "10.200.0.4"

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


# --- Memory: pools that follow the file, and hugepages (issue 13 point 4) ---
#
# A replayed file holds one mbuf per packet for the whole run, so the pools are
# sized to it: maglb gets `[lb] mbufs` = packets + POOL_EXTRA_MBUFS for each of
# its two data ports (the key sizes every data port's pool; net_null's goes
# unused), testpmd `--total-num-mbufs` the same (one pool for both ports).
# Without hugepages DPDK lays a 2.4 KB buffer out in a 4 KiB page of its own
# (no buffer crosses a page), so --no-huge costs 4 KiB a buffer; in 2 MiB
# hugepages 2432 bytes. With root and 2 MB hugepages available, the harness
# reserves what the largest replay needs (--hugepages auto, or N pages),
# mounts a hugetlbfs in a temp dir if none is mounted, runs both programs on
# it (--huge-dir, --huge-unlink: no page left behind by a process), and at the
# end, on failure or Ctrl-C too, unmounts and gives back exactly the pages it
# added (nr_hugepages less what it added, so that a concurrent user's stay).

NR_HUGEPAGES = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
HUGEPAGE_BYTES = 2 << 20
MBUF_BYTES_HUGE = 2432     # mbuf + 2176-byte data room + mempool header/trailer
MBUF_BYTES_NO_HUGE = 4096  # the same, one per 4 KiB page
POOL_EXTRA_MBUFS = 16384   # beyond the file's packets: rings, caches, bursts (maglb computes ~7K here)
FIFO_TESTPMD_MBUFS = 8191  # testpmd's pool for the FIFO source (nothing held)
HUGE_OVERHEAD_BYTES = 256 << 20  # EAL's own allocations beside the pools


def pcap_packets(pcap):
    """Records of a file written by fullpath_traffic (fixed-size frames)."""
    return max(0, (os.path.getsize(pcap) - 24) // (16 + traffic.FRAME_LEN))


def replay_mbufs(packets, queues=1):
    return packets + POOL_EXTRA_MBUFS * queues


def split_pcap(pcap, parts):
    """The records of `pcap` in `parts` files by a hash of each frame's IPv4
    addresses and ports (the frames fullpath_traffic writes: untagged, IHL
    5), so that every flow is in one file, as RSS keeps a flow on one queue.
    Cached beside the file; returns the paths."""
    paths = ["%s.q%dof%d.pcap" % (pcap, i, parts) for i in range(parts)]
    if all(os.path.exists(q) and os.path.getmtime(q) >= os.path.getmtime(pcap) for q in paths):
        return paths
    record = 16 + traffic.FRAME_LEN
    outs = [[] for _ in range(parts)]
    with open(pcap, "rb") as f:
        header = f.read(24)
        while True:
            rec = f.read(record)
            if len(rec) < record:
                break
            outs[zlib.crc32(rec[16 + 26:16 + 38]) % parts].append(rec)
    for path, recs in zip(paths, outs):
        if not recs:
            raise ValueError("%s: no frames hash to %s (too few flows for %d queues)" % (pcap, path, parts))
        with open(path + ".tmp", "wb") as f:
            f.write(header)
            f.writelines(recs)
        os.replace(path + ".tmp", path)
    return paths


def pool_bytes(mbufs, pools, huge):
    return mbufs * pools * (MBUF_BYTES_HUGE if huge else MBUF_BYTES_NO_HUGE)


class Hugepages:
    """2 MB hugepages reserved for this run, and released at exit (atexit:
    after the harness has stopped every process it started; SIGTERM and
    SIGHUP are turned into SystemExit so that it runs then too)."""

    def __init__(self):
        self.added = 0
        self.mount = None      # our own hugetlbfs mount (a temp dir), if we made one
        self.huge_dir = None   # what EAL is given
        self.before = None

    @staticmethod
    def existing_mount():
        """A hugetlbfs of 2 MB pages the system keeps mounted (/dev/hugepages);
        not another run's temporary one, which may go away under us."""
        tmp = os.path.realpath(tempfile.gettempdir())
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 4 and parts[2] == "hugetlbfs" and not parts[1].startswith(tmp + "/"):
                    opts = parts[3].split(",")
                    if "pagesize=2M" in opts or not any(o.startswith("pagesize=") for o in opts):
                        return parts[1]
        return None

    def reserve(self, pages):
        """Adds `pages` pages; returns why not ("" when reserved)."""
        if os.geteuid() != 0:
            return "not root"
        if not os.path.exists(NR_HUGEPAGES):
            return "no 2 MB hugepages on this kernel (%s)" % NR_HUGEPAGES
        with open(NR_HUGEPAGES) as f:
            self.before = int(f.read())
        try:
            with open(NR_HUGEPAGES, "w") as f:
                f.write(str(self.before + pages))
        except OSError as e:
            return "cannot raise nr_hugepages (%s)" % e
        with open(NR_HUGEPAGES) as f:
            self.added = max(0, int(f.read()) - self.before)
        atexit.register(self.release)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, _exit_on_signal)
        if self.added < pages:
            # Memory too fragmented (or a limit): the kernel gave fewer.
            why = "the kernel reserved %d of %d 2 MB pages" % (self.added, pages)
            self.release()
            return why
        self.huge_dir = self.existing_mount()
        if self.huge_dir is None:
            self.mount = tempfile.mkdtemp(prefix="maglb-fullpath-huge-")
            r = subprocess.run(["mount", "-t", "hugetlbfs", "-o", "pagesize=2M", "none", self.mount],
                               capture_output=True, text=True)
            if r.returncode != 0:
                why = "cannot mount hugetlbfs: %s" % r.stderr.strip()
                self.release()
                return why
            self.huge_dir = self.mount
        log("hugepages: %d more 2 MB pages (%.1f GiB; nr_hugepages %d -> %d), hugetlbfs on %s%s" %
            (self.added, self.added * HUGEPAGE_BYTES / 2**30, self.before, self.before + self.added, self.huge_dir,
             " (mounted for this run)" if self.mount else ""))
        return ""

    def release(self):
        if self.mount is not None:
            # Frees what files a killed process left there.
            if subprocess.run(["umount", self.mount], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", self.mount], capture_output=True)
            try:
                os.rmdir(self.mount)
            except OSError:
                pass
            self.mount = None
        self.huge_dir = None
        if self.added:
            with open(NR_HUGEPAGES) as f:
                now = int(f.read())
            with open(NR_HUGEPAGES, "w") as f:
                f.write(str(max(0, now - self.added)))
            with open(NR_HUGEPAGES) as f:
                after = int(f.read())
            log("hugepages: released %d pages (nr_hugepages %d -> %d; %d before the run)" %
                (self.added, now, after, self.before))
            self.added = 0

    def eal_args(self):
        return ["--huge-dir", self.huge_dir, "--huge-unlink"] if self.huge_dir else None


def _exit_on_signal(signum, frame):
    raise SystemExit("fullpath.py: signal %d: stopping (hugepages released)" % signum)


def plan_memory(args, case_list):
    """Reserves hugepages for the replayed cases when asked (--hugepages N) or
    when they need more than MEM_MB of buffers (auto); returns the
    Hugepages (huge_dir None: --no-huge)."""
    hp = Hugepages()
    replayed = [c.packets for c in case_list if "replay" in args.source or
                ("auto" in args.source and c.packets <= args.replay_max)]
    need = max([pool_bytes(replay_mbufs(p, args.workers), 2, True) for p in replayed] or [0]) + \
        HUGE_OVERHEAD_BYTES
    if args.hugepages == "auto":
        if need - HUGE_OVERHEAD_BYTES <= MEM_MB << 20:
            return hp
        pages = -(-need // HUGEPAGE_BYTES)
    else:
        pages = int(args.hugepages)
        if pages == 0:
            return hp
    why = hp.reserve(pages)
    if why:
        log("no hugepages (%s): maglb and testpmd run with --no-huge, -m sized to each file (4 KiB a buffer)" % why)
    return hp


def eal_memory(hugepages, mbufs, pools):
    """EAL's memory arguments for a program whose `pools` pools hold `mbufs`
    buffers each."""
    args = hugepages.eal_args() if hugepages is not None else None
    if args:
        return args
    return ["--no-huge", "-m", str(MEM_MB + -(-pool_bytes(mbufs, pools, False) // (1 << 20)))]


def with_pool(config, mbufs):
    """The config with `[lb] mbufs` set (None: computed by maglb)."""
    if mbufs is None:
        return config
    return config.replace("[lb]\n", "[lb]\nmbufs = %d\n" % mbufs, 1)


def extra_cases(flow_counts):
    """--big-flows: uniform established flows at these counts (each flow once
    a pass, capacity = flows), e.g. 10M: replayed if the pool allows, else
    through the FIFO; measured after a whole first pass (warm_pass)."""
    out = []
    for flows in flow_counts:
        c = Case("uniform", flows, flows, max(1024, flows))
        c.warm_pass = True
        out.append(c)
    return out


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


def config_text(capacity, fourth_weight=None):
    """The bench config: 3 backends; with fourth_weight, a 4th of that weight."""
    lines = ['[lb]', 'hash_seed = 0', 'ipv4 = "192.0.2.10"', 'gateway_v4 = "192.0.2.1"', '',
             '[conntrack]', 'capacity = %d' % capacity, '',
             '[[neighbor]]', 'address = "192.0.2.1"', 'mac = "02:00:00:00:00:01"', '']
    backends = ["10.200.0.%d" % i for i in (1, 2, 3)]
    for i, b in enumerate(backends + [FOURTH_BACKEND]):
        lines += ['[[neighbor]]', 'address = "%s"' % b, 'mac = "02:00:00:00:01:%02x"' % (i + 1), '']
    lines += ['[[vip]]', 'name = "bench"', 'address = "198.51.100.80"', 'protocol = "tcp"', 'port = 80',
              'forwarding = "gre"']
    for i, b in enumerate(backends):
        lines += ['  [[vip.backend]]', '  name = "be%d"' % (i + 1), '  address = "%s"' % b]
    if fourth_weight is not None:
        lines += ['  [[vip.backend]]', '  name = "be4"', '  address = "%s"' % FOURTH_BACKEND,
                  '  weight = %d' % fourth_weight]
    return "\n".join(lines) + "\n"


def reload_texts(capacity, n=1200):
    """The configs a reload run writes in turn (cycled after n), from the
    3-backend one it starts with: add a 4th backend, reweight it 1 to 3
    times, remove it; the weights never repeat within ~100 rounds and the
    rounds differ in length, so that reloads that read the file at a fixed
    phase of the writes do not keep finding the config they run. With a
    fixed cycle of 3 configs, 40 of 59 published reloads in one run here
    were 'unchanged'; with this sequence 3 to 16 of 22 to 42 still are (the
    daemon's fingerprints chain, so they were: coalesced renames often end
    on the running config)."""
    out, r = [], 0
    while len(out) < n:
        out.append(config_text(capacity, 1 + r % 97))
        for k in range(1 + r % 3):
            out.append(config_text(capacity, 100 + (3 * r + k) % 97))
        out.append(config_text(capacity))
        r += 1
    return out[:n]


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
        self.pktgen = os.path.join(args.build, "bench", "pktgen")
        self.seq = 0
        self.hugepages = None  # plan_memory's, set by main

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

    def source(self, case, info, asked):
        """The source `asked` for (auto: replay for small files, else fifo)."""
        if asked == "memif":
            return "memif"
        limit = self.args.replay_max
        if asked == "replay" or (asked == "auto" and info["packets"] <= limit):
            if info["packets"] > limit:
                log("warning: %s: %d packets in replay mode exceed maglb's pool" % (case.name, info["packets"]))
            return "replay"
        return "fifo"

    def feed(self, pcap, info, source, pps=0):
        """Starts what feeds port 0 and returns (vdev and EAL arguments for the
        consumer, the feeding process or None, the Generator or None)."""
        if source == "replay":
            files = split_pcap(pcap, self.args.workers) if self.args.workers > 1 else [pcap]
            return ["--vdev=net_pcap0,%s,infinite_rx=1" % ",".join("rx_pcap=" + f for f in files)], None, None
        if source == "fifo":
            fifo = os.path.join(self.tmp, "rx%d.fifo" % self.seq)
            if os.path.exists(fifo):
                os.unlink(fifo)
            os.mkfifo(fifo)
            # On the main lcore's CPU (0), which both programs leave idle, not
            # on a worker's.
            streamer = ["taskset", "-c", "0", sys.executable, "-c", STREAMER, pcap, fifo]
            sp = self.procs.start(streamer, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            return ["--vdev=net_pcap0,rx_pcap=%s" % fifo], sp, None
        gen = Generator(self, pcap, info, pps)
        try:
            gen.start()
        except (RuntimeError, OSError):
            gen.close()
            raise
        return gen.client_args(), None, gen

    def cleanup_prefix(self, prefix):
        shutil.rmtree("/var/run/dpdk/%s" % prefix, ignore_errors=True)

    def run_testpmd(self, pcap, info, source, mode):
        prefix = self.prefix()
        feed_args, sp, gen = self.feed(pcap, info, source)
        out_path = os.path.join(self.tmp, "%s.log" % prefix)
        mbufs = replay_mbufs(pcap_packets(pcap), self.args.workers) if source == "replay" else FIFO_TESTPMD_MBUFS
        # A queue per worker where the source has them (replay: a file each).
        queues = ["--rxq=%d" % self.args.workers, "--txq=%d" % self.args.workers] \
            if source == "replay" and self.args.workers > 1 else []
        cmd = ["stdbuf", "-oL", self.args.testpmd] + eal_memory(self.hugepages, mbufs, 1) + ["--no-pci", "--file-prefix",
               prefix] + lcore_args(self.args.workers) + feed_args + ["--vdev=net_null0,no-rx=1"] + [
               "--", "--forward-mode=%s" % mode, "--stats-period", "1", "--nb-cores=%d" % self.args.workers,
               "--total-num-mbufs=%d" % mbufs, "--no-lsc-interrupt"] + queues
        skip = int(self.args.warmup) + 1  # the first sample covers start-up
        want = skip + int(round(self.args.window))
        samples = []
        p = None
        try:
            with open(out_path, "w") as out:
                p = self.procs.start(cmd, stdout=out, stderr=subprocess.STDOUT)
                deadline = time.time() + 60 + want
                while time.time() < deadline and p.poll() is None:
                    time.sleep(0.25)
                    samples = port0_rx_pps(open(out_path).read())
                    if len(samples) >= want:
                        break
                # The sending first, then the client, then the server: a
                # memif end can crash when the other leaves mid-burst
                # (bench/pktgen.cc, --hold).
                if gen:
                    gen.stop()
                self.procs.stop(p)
        finally:
            if sp:
                self.procs.stop(sp, signal.SIGKILL)
            if gen:
                gen.stop()
                if p is not None:
                    self.procs.stop(p)
                gen.close()
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

    def telemetry_path(self, prefix):
        """maglb's telemetry socket (a test may point this elsewhere)."""
        return "/var/run/dpdk/%s/dpdk_telemetry.v2" % prefix

    def latency(self, prefix):
        """maglb's cumulative latency histogram, or the reason there is none."""
        try:
            path = self.telemetry_path(prefix)
            return daemon.latency_histogram(daemon.read_latency(lambda cmd: daemon.telemetry(path, cmd))), None
        except (daemon.TelemetryError, ValueError) as e:
            return None, str(e)

    def run_maglb(self, pcap, info, source, case, pps=0, latency=False, reload=None):
        """maglb's rate over the window; with latency, the histogram of the
        window; with reload, the config rewritten 100 times a second in the
        window. memif runs also stop pktgen after the window and check the
        books with nothing in flight."""
        prefix = self.prefix()
        cfg = os.path.join(self.tmp, "%s.toml" % prefix)
        mbufs = replay_mbufs(pcap_packets(pcap), self.args.workers) if source == "replay" else None
        with open(cfg, "w") as f:
            f.write(with_pool(config_text(case.capacity), mbufs))
        feed_args, sp, gen = self.feed(pcap, info, source, pps)
        log_path = os.path.join(self.tmp, "%s.log" % prefix)
        # Two data ports, each with a pool of `mbufs` (or maglb's own, ~7K).
        cmd = [self.maglb] + eal_memory(self.hugepages, mbufs or POOL_EXTRA_MBUFS, 2) + \
            ["--no-pci", "--file-prefix", prefix] + \
            lcore_args(self.args.workers) + feed_args + ["--vdev=net_null0,no-rx=1"] + \
            ["--", "--config", cfg, "--backend-port", "1"]
        extra = {}
        p = None
        reloader = poller = None
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
            self.warm_up(prefix, case)
            if gen:
                # Conntrack filled: the whole file once through.
                gen.wait_passes(1, timeout=120)
            s1, t1 = self.stats(prefix)
            lat1 = self.latency(prefix) if latency else None
            if reload:
                poller = daemon.ReloadPoller(
                    lambda: daemon.telemetry(self.telemetry_path(prefix), "/maglb/reloads"), period=0.1)
                poller.start()
                reloader = daemon.Reloader(cfg, [with_pool(t, mbufs) for t in reload_texts(case.capacity)],
                                           hz=self.args.reload_hz)
                reloader.start()
            time.sleep(self.args.window)
            s2, t2 = self.stats(prefix)
            lat2 = self.latency(prefix) if latency else None
            if reloader:
                reloader.stop()
                # The last renames take effect and the poller sees their
                # record (a reload in progress serves them when it ends):
                # until no new record for 0.5 s, at most 3 s.
                deadline, seen, quiet_since = time.time() + 3, -1, time.time()
                while time.time() < deadline and time.time() - quiet_since < 0.5:
                    if len(poller.records) != seen:
                        seen, quiet_since = len(poller.records), time.time()
                    time.sleep(0.1)
                poller.stop()
            if latency:
                extra["latency"] = latency_result(lat1, lat2)
            if gen:
                final = gen.stop()
                time.sleep(0.3)  # nothing is in flight: pktgen lingered, maglb polls empty rings
                s3, _ = self.stats(prefix)
                extra["generator"] = gen.summary(final)
                extra["accounting"] = daemon.accounting({}, s3)
                extra["accounting"]["sent"] = final.get("tx", 0)
                extra["accounting"]["sent_minus_rx"] = final.get("tx", 0) - extra["accounting"]["rx"]
            if source == "replay" and reload is not None and "accounting" not in extra:
                # The replay never pauses: the window's books, read while
                # frames flow (each worker counts rx as a chunk starts and tx
                # as it ends, so a read may catch up to one chunk per worker
                # mid-way).
                extra["accounting"] = daemon.accounting(s1, s2)
                extra["accounting"]["in_flight_bound"] = 32 * self.args.workers
                extra["accounting"]["sent_minus_rx"] = None
            if reload:
                extra["reload"] = reload_result(reloader, poller, s1, s3 if gen else s2)
        finally:
            for t in (reloader, poller):
                if t and t.is_alive():
                    t.stop()
            if gen:
                gen.stop()
            if p is not None:
                self.procs.stop(p)
            if gen:
                gen.close()
            if sp:
                self.procs.stop(sp, signal.SIGKILL)
            self.cleanup_prefix(prefix)
        r = rates(s1, s2, t2 - t1, started)
        r["offloads"] = offloads
        r["buffers"] = _buffers_lines(open(log_path).read())  # the pools maglb made, and in which pages
        r.update(extra)
        r["target_pps"] = pps
        return r


def _buffers_lines(log_text):
    return [l for l in log_text.splitlines() if "buffers:" in l]


def _warm_up(bench, prefix, case):
    """The warm-up before the window; for a warm_pass case (--big-flows),
    until maglb has received the whole file once (every flow inserted), so
    that the window measures established flows."""
    time.sleep(bench.args.warmup)
    if not getattr(case, "warm_pass", False):
        return
    deadline = time.time() + 600
    while time.time() < deadline:
        s, _ = bench.stats(prefix)
        if int(s.get("rx_packets", 0)) >= case.packets:
            return
        time.sleep(1)
    raise RuntimeError("%s: maglb did not receive the file once within 600 s" % case.name)


Bench.warm_up = _warm_up


class Generator:
    """bench/pktgen as the net_memif server of one run, on CPU 0 (the main
    lcores'), started before its client; its JSON lines in a log."""

    def __init__(self, bench, pcap, info, pps):
        self.bench, self.pcap, self.info, self.pps = bench, pcap, info, pps
        self.prefix = bench.prefix()
        self.sock = os.path.join(bench.tmp, "%s.memif" % self.prefix)
        self.log_path = os.path.join(bench.tmp, "%s.pktgen.log" % self.prefix)
        self.proc = None
        self.final = None

    def memif_args(self):
        a = self.bench.args
        # A socket file in the temp dir (DPDK 22.11's default is an abstract
        # name, which nothing removes and the harness cannot wait for).
        return "socket=%s,socket-abstract=no,rsize=%d,bsize=%d" % (self.sock, a.memif_rsize, a.memif_bsize)

    def client_args(self):
        """The consumer's EAL arguments for the client end of this ring."""
        zc = self.bench.args.memif_zc
        vdev = "--vdev=net_memif0,role=client,%s,mac=%s%s" % (self.memif_args(), PCAP_DST_MAC,
                                                              ",zero-copy=yes" if zc else "")
        # Zero-copy exposes the client's memory to the server: one file.
        return (["--single-file-segments"] if zc else []) + [vdev]

    def start(self):
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        # Its pool holds the file: ~320 bytes per 60-byte frame, plus EAL's own.
        mem_mb = 128 + self.info["packets"] * 320 // (1 << 20)
        cmd = ["taskset", "-c", "0", self.bench.pktgen, "--no-huge", "--no-pci", "-m", str(mem_mb), "-l", "0",
               "--file-prefix", self.prefix, "--vdev=net_memif0,role=server,%s" % self.memif_args(), "--",
               "--pcap", self.pcap, "--pps", "%d" % self.pps, "--burst", str(self.bench.args.burst),
               "--catch-up-ms", "%g" % self.bench.args.catch_up_ms,
               "--linger-ms", "300", "--hold"]
        with open(self.log_path, "w") as out:
            self.proc = self.bench.procs.start(cmd, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("pktgen exited (%d) before loading (log %s):\n%s" % (
                    self.proc.returncode, self.log_path, open(self.log_path).read()[-2000:]))
            if any("loaded" in r for r in self.lines()) and os.path.exists(self.sock):
                return
            time.sleep(0.1)
        raise RuntimeError("pktgen did not load %s in 120 s (log %s)" % (self.pcap, self.log_path))

    def lines(self):
        out = []
        try:
            with open(self.log_path) as f:
                for line in f:
                    if line.startswith("{"):
                        try:
                            out.append(json.loads(line))
                        except ValueError:
                            pass  # a line cut by a concurrent write
        except OSError:
            pass
        return out

    def wait_passes(self, n, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            rows = [r for r in self.lines() if "passes" in r]
            if rows and rows[-1]["passes"] >= n:
                return
            if self.proc.poll() is not None:
                raise RuntimeError("pktgen exited (%d) (log %s):\n%s" % (
                    self.proc.returncode, self.log_path, open(self.log_path).read()[-2000:]))
            time.sleep(0.2)
        log("warning: pktgen did not finish %d pass(es) over the file in %d s" % (n, timeout))

    def stop(self):
        """Stops the sending (SIGINT) and returns pktgen's final line, after its
        linger; it keeps the port open (--hold) until close()."""
        if self.proc is not None and self.final is None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGINT)
            deadline = time.time() + 10
            finals = []
            while time.time() < deadline:
                finals = [r for r in self.lines() if r.get("final")]
                if finals or self.proc.poll() is not None:
                    break
                time.sleep(0.05)
            finals = finals or [r for r in self.lines() if r.get("final")]
            self.final = finals[-1] if finals else {}
            if not finals:
                log("warning: pktgen left no final line (exit %s, log %s)" % (self.proc.poll(), self.log_path))
        return self.final or {}

    def close(self):
        """After the client has gone: pktgen sees the link down and exits."""
        if self.proc is None:
            return
        self.stop()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.bench.procs.stop(self.proc, signal.SIGINT, timeout=5)  # a second signal ends --hold
        if self.proc.returncode not in (0, 3, -signal.SIGINT):
            log("warning: pktgen exited with %s (log %s)" % (self.proc.returncode, self.log_path))
        self.proc = None
        self.bench.cleanup_prefix(self.prefix)

    def summary(self, final):
        return {k: final.get(k) for k in ("tx", "pps", "tx_calls", "short_calls", "full_calls", "behind", "unsent",
                                           "stop")}


def latency_result(lat1, lat2):
    """p50/p99/p99.9 (ns) of the window from two reads (each (hist, error))."""
    (h1, e1), (h2, e2) = lat1, lat2
    if h1 is None or h2 is None:
        return {"error": e1 or e2}
    try:
        bounds, counts = daemon.histogram_diff(h1, h2)
    except ValueError as e:
        return {"error": str(e)}
    return {"packets": sum(counts), "overflow": counts[-1], "last_bound_ns": bounds[-1],
            "p50_ns": daemon.percentile_ns(bounds, counts, 0.5),
            "p99_ns": daemon.percentile_ns(bounds, counts, 0.99),
            "p999_ns": daemon.percentile_ns(bounds, counts, 0.999)}


def reload_result(reloader, poller, s_before, s_after):
    """What the reload window did: renames, the daemon's reload counters,
    the records matched to renames and the rename -> workers times."""
    out = {"renames": len(reloader.renames), "late_ticks": reloader.late, "writer_error": reloader.error,
           "reloads_ok": int(s_after.get("reloads_ok", 0)) - int(s_before.get("reloads_ok", 0)),
           "reloads_refused": int(s_after.get("reloads_refused", 0)) - int(s_before.get("reloads_refused", 0)),
           "last_refusal": s_after.get("last_refusal", ""), "poll_errors": poller.errors, "polls": poller.polls,
           "poll_max_gap_s": round(poller.max_gap_s, 3)}
    if poller.polls == 0:
        return out
    m = daemon.match_reloads(reloader.renames, list(poller.records.values()))
    lat = m.pop("latencies_ns")
    out.update(m)
    out["file_to_workers_ns"] = {"p50": daemon.nearest_rank(lat, 0.5), "p99": daemon.nearest_rank(lat, 0.99),
                                 "max": lat[-1] if lat else None, "n": len(lat)}
    first, last = poller.first, poller.last
    try:
        count = int(last["file_to_workers_count"]) - int(first["file_to_workers_count"])
        total = int(last["file_to_workers_ns_sum"]) - int(first["file_to_workers_ns_sum"])
        out["daemon_file_to_workers_ns"] = {"mean": total / count if count > 0 else None, "count": count,
                                            "max_since_start": int(last["file_to_workers_ns_max"])}
    except (KeyError, TypeError, ValueError) as e:
        out["poll_errors"] = out["poll_errors"] + ["totals: %s" % e]
    return out


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
        ratio = "%.2f" % statistics.median(ratios)
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
        lines.append("The source port (net_pcap, net_memif) offers no RSS, so maglb polls it with one queue; "
                     "the other lcores idle.")
    offloads = sorted({o for r in results for o in r["maglb"].get("offloads", [])})
    if offloads:
        lines.append("maglb's NIC offloads (its log): " + "; ".join("`%s`" % o for o in offloads))
    return "\n".join(lines)


def render_all(results, paced, args):
    parts = []
    if results:
        parts.append(render(results, args))
    if any(e["latency"] for e in paced):
        parts.append(render_latency(paced))
    if any(e["reload"] for e in paced):
        parts.append(render_reload(paced, args))
    if paced and not parts:
        parts.append("No paced run completed (see the log).")
    return "\n\n".join(parts)


def _us(ns):
    if ns is None:
        return "-"
    if ns == float("inf"):
        return "overflow"
    return "%.1f" % (ns / 1000.0)


def _note(notes, text):
    """The footnote number of `text` (one note per distinct text; a socket
    path names a run, not a reason)."""
    text = re.sub(r"/var/run/dpdk/[^/ ]+/dpdk_telemetry\.v2", "maglb's telemetry socket", text)
    if text not in notes:
        notes.append(text)
    return notes.index(text) + 1


def render_latency(paced):
    lines = ["Latency inside maglb (receive to transmit, /maglb/latency), memif source, pktgen paced:", "",
             "| mix | flows | load | pktgen target Mpps | maglb Mpps | pktgen behind | p50 µs | p99 µs | p99.9 µs "
             "| packets in histogram |", "| " + " | ".join(["---"] * 10) + " |"]
    notes = []
    for e in paced:
        for r in e["latency"]:
            lat = r.get("latency", {})
            load = "max (flat out)" if r["load"] == "max" else "%d%%" % round(100 * r["load"])
            target = "%.2f" % (r["target_pps"] / 1e6) if r["target_pps"] else "-"
            behind = (r.get("generator") or {}).get("behind", "-")
            if "error" in lat:
                cells = ["n/a [%d]" % _note(notes, lat["error"])] + ["-"] * 3
            else:
                cells = [_us(lat.get("p50_ns")), _us(lat.get("p99_ns")), _us(lat.get("p999_ns")),
                         "%d (%d over %s µs)" % (lat["packets"], lat["overflow"], _us(lat["last_bound_ns"]))]
            lines.append("| %s | %s | %s | %s | %.2f | %s | %s |" % (
                e["mix"], fmt_flows(e["flows"]), load, target, r["mpps"], behind, " | ".join(cells)))
    lines.append("")
    lines.append("Each percentile is the upper bound of the histogram bucket holding that rank; the window's "
                 "histogram is the difference of two cumulative reads. pktgen behind: times it fell more than "
                 "--catch-up-ms behind its schedule and restarted it (the rate reached is then below the "
                 "target).")
    for i, n in enumerate(notes):
        lines.append("[%d] %s" % (i + 1, n))
    return "\n".join(lines)


def _books(r):
    """rx = tx + counted drops, and pktgen's sent against maglb's rx, for a cell."""
    a = r.get("accounting")
    if not a:
        return "-", "-"
    bound = a.get("in_flight_bound", 0)
    ok = abs(a["unaccounted"]) <= bound and a["reasons_sum"] == a["dropped"]
    why = ", ".join("%s %d" % kv for kv in sorted(a["drop_reasons"].items()))
    books = ("yes" if ok and not a["unaccounted"] else
             "yes, %+d in flight at the reads" % a["unaccounted"] if ok else
             "NO: %d unaccounted" % a["unaccounted"]) + \
        (" (%d dropped: %s)" % (a["dropped"], why) if a["dropped"] else " (0 dropped)")
    if a["tx_full"]:
        books += ", %d refused by the TX ring (tx_full)" % a["tx_full"]
    return books, "-" if a["sent_minus_rx"] is None else "%d" % a["sent_minus_rx"]


def render_reload(paced, args):
    replay = getattr(args, "reload_source", "memif") == "replay"
    lines = ["Reload under load: %s, config rewritten %g times a second in the window (4th backend added, "
             "reweighted, removed in turn):" % ("the replay's full rate (net_pcap infinite_rx, no generator process)"
                                                if replay else "90% of the maximum rate, memif source",
                                                args.reload_hz), "",
             "| mix | flows | round | Mpps without reloads | Mpps with reloads | ratio | renames (late ticks) "
             "| reloads ok / refused | records: applied / unchanged / refused; renames coalesced / pending "
             "| rename → workers p50 / p99 / max ms "
             "| rx = tx + counted drops (without; with) | pktgen sent − maglb rx (without; with) |",
             "| " + " | ".join(["---"] * 12) + " |"]
    notes = []
    for e in paced:
        for pair in e["reload"]:
            a, b = pair.get("without"), pair.get("with")
            if not a or not b:
                continue
            rl = b.get("reload", {})
            ftw = rl.get("file_to_workers_ns")
            if ftw and ftw["n"]:
                timing = " / ".join("%.2f" % (ftw[k] / 1e6) for k in ("p50", "p99", "max"))
                records = "%d / %d / %d; %d / %d" % (rl["applied"], rl["unchanged"], rl["refused"], rl["coalesced"],
                                                   rl["pending"])
            else:
                why = "; ".join(dict.fromkeys(rl.get("poll_errors") or [])) or "no applied record seen"
                timing = "n/a [%d]" % _note(notes, why)
                records = "-" if not ftw else "%d / %d / %d; %d / %d" % (
                    rl["applied"], rl["unchanged"], rl["refused"], rl["coalesced"], rl["pending"])
            ba, sa = _books(a)
            bb, sb = _books(b)
            lines.append("| %s | %s | %d | %.2f | %.2f | %.2f | %d (%d) | %d / %d | %s | %s | %s; %s | %s; %s |" % (
                e["mix"], fmt_flows(e["flows"]), pair["round"], a["mpps"], b["mpps"],
                b["mpps"] / a["mpps"] if a["mpps"] else 0.0, rl.get("renames", 0), rl.get("late_ticks", 0),
                rl.get("reloads_ok", 0), rl.get("reloads_refused", 0), records, timing, ba, bb, sa, sb))
    lines.append("")
    lines.append(("Books over the window, read while the replay runs (a read may catch a chunk mid-way: "
                  "up to 32 frames a worker). " if replay else
                  "Books read after pktgen stopped (it lingers 300 ms so that maglb drains the ring), over "
                  "maglb's whole run. ") + "records: the daemon's reload records (/maglb/reloads, polled at 10 Hz) "
                 "matched to the newest rename before each; coalesced: renames superseded before the daemon "
                 "read the file (a record's event is its first unserved change, so its time runs from the "
                 "oldest rename it serves). rename → workers: from just before the rename to the workers using "
                 "the new tables." + ("" if replay else " maglb's control thread, which parses and builds each reload, "
                 "runs on the main lcore's CPU 0 beside pktgen: with few CPUs the rate with reloads includes the "
                 "generator losing CPU to the builds."))
    for i, n in enumerate(notes):
        lines.append("[%d] %s" % (i + 1, n))
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
                                                                   load_after),
            "memory: %s" % getattr(args, "memory", "--no-huge"),
            placement(args), ""]


def placement(args):
    ncpu = os.cpu_count() or 1
    asked = args.source if isinstance(args.source, list) else [args.source]
    reload_gen = getattr(args, "reload", False) and getattr(args, "reload_source", "memif") == "memif"
    uses_gen = "memif" in asked or getattr(args, "latency", False) or reload_gen
    feeder = "pktgen (memif server)" if uses_gen else "the FIFO streamer (fifo)"
    text = "placement: main lcores, this harness (config writer, telemetry polls) and %s on CPU 0, worker " \
        "lcore(s) on CPU 1%s" % (feeder, "-%d" % args.workers if args.workers > 1 else "")
    if ncpu <= 2:
        text += "; on %d CPUs the feeder shares CPU 0 with both programs' main lcores (idle) and with " \
                "whatever else runs on the machine" % ncpu
    if args.workers + 1 > ncpu:
        text += "; %d lcores on %d CPUs: lcores share CPUs round robin" % (args.workers + 1, ncpu)
    return text


def plot(results, out_dir):
    dat = os.path.join(out_dir, "fullpath.dat")
    series = []
    # One series per mix, or per mix and source when a run compared sources
    # (memif is a source of its own; replay and fifo make one line, as the
    # title says which point came from which).
    def line_of(r):
        return (r["mix"], "memif") if r["source"] == "memif" else (r["mix"], "pcap")
    by_source = len({line_of(r)[1] for r in results}) > 1
    with open(dat, "w") as f:
        for mix in ("uniform", "zipf", "syn", "mix90"):
            for src in ("pcap", "memif"):
                rows = [r for r in results if line_of(r) == (mix, src)]
                if not rows:
                    continue
                name = "%s, %s" % (mix, src) if by_source else mix
                f.write("# %s: flows maglb_mpps macswap_mpps io_mpps\n" % name)
                for r in rows:
                    f.write("%d %.4f %.4f %.4f\n" % (r["flows"], r["maglb"]["mpps"], r["macswap"]["mpps"],
                                                     r["io"]["mpps"]))
                f.write("\n\n")
                series.append(name)
    if not shutil.which("gnuplot"):
        log("gnuplot not found: no PNG (data in %s)" % dat)
        return
    png = os.path.join(out_dir, "fullpath.png")
    cmds = ["set terminal pngcairo size 1000,600" if _has_pngcairo() else "set terminal png size 1000,600",
            "set output '%s'" % png, "set logscale x", "set xlabel 'flows'", "set ylabel 'Mpps'",
            "set key outside right", "set grid", "set yrange [0:*]", "set termoption noenhanced",
            'set title "maglb full path (source port -> GRE -> net_null) vs testpmd macswap, same vdevs\\n'
            'source per point: %s"' % (", ".join(dict.fromkeys(
                "%s %s" % (fmt_flows(r["flows"]), r["source"]) for r in results if r["mix"] == "uniform"))
                or "see table")]
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


def paced_cases(args):
    """The cases of --latency and --reload: uniform 1K and 1M flows, or every
    case of the mixes asked for."""
    out = [c for c in cases(args.quick, args.mix)
           if args.mix or (c.mix == "uniform" and c.flows in (1000, 1_000_000))]
    return [c for c in out if not args.max_flows or c.flows <= args.max_flows]


def run_table(bench, args):
    results = []
    for case in bench.case_list:
        if args.max_flows and case.flows > args.max_flows:
            continue
        pcap, info = bench.pcap(case)
        # Several sources: each round runs them in turn, so that they compare
        # under the same load.
        sources = list(dict.fromkeys(bench.source(case, info, a) for a in args.source))
        runs = {src: {"io": [], "macswap": [], "maglb": []} for src in sources}
        failed = set()
        for rnd in range(args.rounds):
            for source in sources:
                if source in failed:
                    continue
                for what in ("io", "macswap", "maglb"):
                    log("%s (%s) round %d: %s" % (case.name, source, rnd + 1, what))
                    try:
                        r = bench.run_maglb(pcap, info, source, case) if what == "maglb" else \
                            bench.run_testpmd(pcap, info, source, what)
                    except (RuntimeError, OSError, subprocess.SubprocessError, ValueError, KeyError) as e:
                        log("  failed, %s skipped for this case: %s" % (source, e))
                        failed.add(source)
                        break
                    log("  %.2f Mpps" % r["mpps"])
                    runs[source][what].append(r)
        for source in sources:
            if source in failed:
                continue
            rs = runs[source]
            pick = {k: sorted(v, key=lambda r: r["mpps"])[len(v) // 2] for k, v in rs.items()}
            # Each round's maglb against the macswap run just before it (the
            # load of the machine drifts between rounds).
            ratios = [m["mpps"] / s["mpps"] if s["mpps"] else 0.0 for m, s in zip(rs["maglb"], rs["macswap"])]
            results.append({"mix": case.mix, "flows": case.flows, "packets": info["packets"],
                            "distinct": info["distinct"], "capacity": case.capacity, "source": source,
                            "rounds": {k: [r["mpps"] for r in v] for k, v in rs.items()},
                            "ratios": ratios, **pick})
            if pick["maglb"]["workers_polling"] is not None and pick["maglb"]["workers_polling"] < args.workers:
                log("note: %s" % pick["maglb"]["started"])
    return results


def run_reload_replay(bench, args, case, pcap, info, entry):
    """--reload --reload-source replay: interleaved runs at the replay's full
    rate without and with reloads (no generator on CPU 0)."""
    for rnd in range(args.rounds):
        pair = {"round": rnd + 1}
        for with_reloads in (False, True):
            log("%s (replay): full rate, round %d, %s reloads" % (
                case.name, rnd + 1, "with" if with_reloads else "without"))
            r = bench.run_maglb(pcap, info, "replay", case, reload=with_reloads)
            log("  %.2f Mpps" % r["mpps"])
            pair["with" if with_reloads else "without"] = r
        entry["reload"].append(pair)


def run_paced(bench, args):
    """--latency and --reload: per case, maglb's maximum rate on memif with
    pktgen flat out, then paced runs at fractions of it (--reload-source
    replay: the reload runs at the replay's full rate instead)."""
    results = []
    errors = (RuntimeError, OSError, subprocess.SubprocessError, ValueError, KeyError)
    for case in paced_cases(args):
        pcap, info = bench.pcap(case)
        entry = {"mix": case.mix, "flows": case.flows, "packets": info["packets"], "distinct": info["distinct"],
                 "latency": [], "reload": []}
        if args.reload and args.reload_source == "replay":
            try:
                run_reload_replay(bench, args, case, pcap, info, entry)
            except errors as e:
                log("  failed, reload runs skipped: %s" % e)
            if not args.latency:
                results.append(entry)
                continue
        log("%s (memif): maximum rate, pktgen flat out" % case.name)
        try:
            mx = bench.run_maglb(pcap, info, "memif", case, pps=0, latency=args.latency)
        except errors as e:
            log("  failed, case skipped: %s" % e)
            continue
        log("  %.2f Mpps" % mx["mpps"])
        entry["max_mpps"] = mx["mpps"]
        rmax = mx["mpps"] * 1e6
        if rmax <= 0:
            log("  no traffic went through: case skipped")
            continue
        try:
            if args.latency:
                entry["latency"].append(dict(mx, load="max"))
                for frac in (0.5, 0.9):
                    log("%s: %.0f%% of the maximum (%.2f Mpps)" % (case.name, 100 * frac, frac * rmax / 1e6))
                    r = bench.run_maglb(pcap, info, "memif", case, pps=int(frac * rmax), latency=True)
                    log("  %.2f Mpps" % r["mpps"])
                    entry["latency"].append(dict(r, load=frac))
            if args.reload and args.reload_source == "memif":
                for rnd in range(args.rounds):
                    pair = {"round": rnd + 1}
                    for with_reloads in (False, True):
                        log("%s: 90%% of the maximum, round %d, %s reloads" % (
                            case.name, rnd + 1, "with" if with_reloads else "without"))
                        r = bench.run_maglb(pcap, info, "memif", case, pps=int(0.9 * rmax), reload=with_reloads)
                        log("  %.2f Mpps" % r["mpps"])
                        pair["with" if with_reloads else "without"] = r
                    entry["reload"].append(pair)
        except errors as e:
            log("  failed, rest of the case skipped: %s" % e)
        results.append(entry)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 s windows, 1 s warm-up, smaller files")
    ap.add_argument("--workers", type=int, default=1, help="maglb worker lcores / testpmd forwarding cores")
    ap.add_argument("--window", type=float, help="measurement window, s (default 5; quick 2)")
    ap.add_argument("--warmup", type=float, help="warm-up before the window, s (default 2; quick 1)")
    ap.add_argument("--rounds", type=int, default=1, help="interleaved rounds per case; the median is reported")
    ap.add_argument("--mix", action="append", choices=["uniform", "zipf", "syn", "mix90"], help="only these mixes")
    ap.add_argument("--max-flows", type=int, help="skip cases with more flows")
    ap.add_argument("--source", default="auto",
                    help="traffic source(s) of the main table, comma-separated, each run in every round: "
                         "auto (replay for small files, else fifo), replay, fifo, memif (default auto)")
    ap.add_argument("--replay-max", type=int, default=REPLAY_MAX_PACKETS,
                    help="largest file replayed with infinite_rx under --source auto (each packet holds one "
                         "mbuf for the whole run: maglb's [lb] mbufs and testpmd's --total-num-mbufs are sized "
                         "to the file, ~5 GB of hugepages (~8.5 GB without) at 1M packets); default %(default)s")
    ap.add_argument("--hugepages", default="auto", type=lambda v: v if v == "auto" else str(max(0, int(v))),
                    help="2 MB hugepages to reserve for the run (root), released at the end; 0: never (--no-huge); "
                         "auto (default): what the largest replayed file needs, when that is more than %d MiB" % MEM_MB)
    ap.add_argument("--big-flows", type=lambda v: [int(x) for x in v.split(",")], default=[],
                    help="also uniform established flows at these counts, comma-separated (e.g. 1000000,10000000; "
                         "the generator makes up to 64000 x 4M distinct flows), measured after one whole pass")
    ap.add_argument("--memif-rsize", type=int, default=12, choices=range(1, 15), metavar="LOG2",
                    help="memif ring size, log2 (default 12: 4096 slots)")
    # 64: one cache line per 60-byte frame, slots contiguous; measured here
    # 1.5-2x the rate of 2048-byte slots into testpmd io (noisy).
    ap.add_argument("--memif-bsize", type=int, default=64,
                    help="memif slot buffer bytes (default 64: one cache line; longer frames take several slots)")
    ap.add_argument("--memif-zc", action="store_true",
                    help="memif clients (testpmd, maglb) zero-copy: pktgen copies into their mbufs")
    ap.add_argument("--burst", type=int, default=32, help="pktgen packets per transmit call (default 32)")
    ap.add_argument("--catch-up-ms", type=float, default=10.0,
                    help="paced pktgen: how far behind its schedule it still catches up (default 10; "
                         "further behind it restarts the schedule, counted as 'behind')")
    ap.add_argument("--latency", action="store_true",
                    help="memif: latency histogram at the maximum rate, 50%% and 90%% of it")
    ap.add_argument("--reload", action="store_true",
                    help="memif: 90%% of the maximum rate without and with config reloads (--reload-hz)")
    ap.add_argument("--reload-hz", type=float, default=100.0, help="config rewrites per second (default 100)")
    ap.add_argument("--reload-source", choices=["memif", "replay"], default="memif",
                    help="--reload's source: memif paced at 90%% of the maximum (default; pktgen shares CPU 0 "
                         "with maglb's control thread), or replay at its full rate (nothing else on CPU 0)")
    ap.add_argument("--no-table", action="store_true", help="skip the main throughput table")
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
        print(render_all(saved["results"], saved.get("paced", []), saved_args))
        if saved["results"]:
            plot(saved["results"], os.path.dirname(os.path.abspath(args.render)))
        return
    args.window = args.window or (2.0 if args.quick else 5.0)
    args.warmup = args.warmup or (1.0 if args.quick else 2.0)
    args.source = args.source.split(",")
    if not args.source or any(a not in ("auto", "replay", "fifo", "memif") for a in args.source):
        sys.exit("fullpath.py: --source: want a comma-separated list of auto, replay, fifo, memif")
    if not 1 <= args.burst <= 512:
        sys.exit("fullpath.py: --burst must be 1..512")
    if os.geteuid() != 0:
        sys.exit("fullpath.py: DPDK needs root (run with sudo)")
    need = [os.path.join(args.build, "maglb"), os.path.join(args.build, "src", "ctl", "maglbctl"), args.testpmd]
    if "memif" in args.source or args.latency or (args.reload and args.reload_source == "memif"):
        need.append(os.path.join(args.build, "bench", "pktgen"))
    for exe in need:
        if not os.access(exe, os.X_OK):
            sys.exit("fullpath.py: %s missing: meson setup build-rel -Dbuildtype=release && "
                     "ninja -C build-rel maglb src/ctl/maglbctl bench/pktgen" % exe)
    if (os.cpu_count() or 1) > 1:
        # The harness's own threads (the config writer, telemetry polls) and
        # the maglbctl it runs stay off the workers' CPUs; DPDK pins its
        # lcores itself.
        os.sched_setaffinity(0, {0})
    out_dir = args.out or tempfile.mkdtemp(prefix="maglb-fullpath-out-")
    os.makedirs(out_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="maglb-fullpath-")
    bench = Bench(args, tmp)
    case_list = [c for c in cases(args.quick, args.mix) + extra_cases(args.big_flows)
                 if not (args.max_flows and c.flows > args.max_flows)]
    bench.case_list = case_list
    bench.hugepages = plan_memory(args, case_list)
    args.memory = ("2 MB hugepages (%d reserved for the run)" % bench.hugepages.added if bench.hugepages.huge_dir
                   else "--no-huge (-m sized to each file)")
    with open("/proc/loadavg") as f:
        load_before = " ".join(f.read().split()[:3])
    results, paced = [], []
    try:
        if not args.no_table:
            results = run_table(bench, args)
        if args.latency or args.reload:
            paced = run_paced(bench, args)
    finally:
        bench.procs.stop_all()
        if args.keep:
            log("temp files kept in %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    table = "\n".join(machine_header(args, load_before)) + "\n" + render_all(results, paced, args)
    with open(os.path.join(out_dir, "fullpath.md"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(out_dir, "fullpath.json"), "w") as f:
        json.dump({"args": vars(args), "results": results, "paced": paced}, f, indent=1)
    if results:
        plot(results, out_dir)
    print(table)
    log("results in %s" % out_dir)


if __name__ == "__main__":
    main()
