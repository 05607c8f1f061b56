#!/usr/bin/python3
"""End to end: a fleet of maglb instances behind an ECMP router, with BGP.

scripts/testbed.sh fleet-up: a router namespace running BIRD with multipath,
three maglb instances (mlb-lb-a/b/c), each with its own BIRD announcing what
maglb puts into kernel table 4242, the usual backends, real kernel TCP.

- every instance announces: the router's route to a VIP has one next hop per
  instance, and flows spread over them as the router's hash says; a VIP whose
  only backend cannot be resolved is never announced;
- `maglbctl fleet` agrees, and flags an instance whose backends differ;
- SIGKILL of an instance under 120 long-lived connections (echo_streams.py):
  once the route converges every connection goes on through a survivor, 0
  broken; the longest stall each flow saw is reported, with BFD and without;
- the instance comes back: its routes appear only after it is ready;
- `maglbctl drain` and SIGTERM: 0 broken, the route leaves at once;
- a backend added while an instance is lost: only connections that changed
  instance can break, compared with what Maglev's disruption predicts.
Figures go to the log (this is a test, not a benchmark: only 0 broken and
the orderings are asserted)."""
import calendar
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import lbtest
from lbtest import MAGLB, MAGLBCTL, TESTBED, TestFailure, check, log, run

HERE = os.path.dirname(os.path.abspath(__file__))
ECHO_STREAMS = os.path.join(HERE, "echo_streams.py")
FAULT_SHIM = os.path.join(lbtest.BUILD_DIR, "tests", "e2e", "libmaglb_start_fault.so")
INSTANCES = ("a", "b", "c")
ADDR = {"a": "10.0.0.21", "b": "10.0.0.22", "c": "10.0.0.23"}
ADDR6 = {"a": "fd00::21", "b": "fd00::22", "c": "fd00::23"}
BY_ADDR = {v: k for k, v in list(ADDR.items()) + list(ADDR6.items())}
VIP = lbtest.VIP["gre"]  # 10.100.0.1, web-gre
VIP6 = lbtest.VIP6["gre"]
NOWHERE_VIP = "10.100.0.5"  # L2 DSR to a backend that does not exist
DRAIN_S = 3
CLIENT = "10.0.1.2"


def fleet_config(name, backends=("be1", "be2", "be3")):
    """The same VIPs and backends on every instance; only [lb] differs."""
    text = lbtest.config_text(vips={m: {b: 1 for b in backends} for m in lbtest.VIP})
    text = text.replace('ipv4 = "%s"' % lbtest.LB_IP, 'ipv4 = "%s"' % ADDR[name], 1)
    text = text.replace('ipv6 = "%s"' % lbtest.LB_IP6, 'ipv6 = "%s"' % ADDR6[name], 1)
    text += "\n".join([
        '[[vip]]', 'name = "web-nowhere"', 'address = "%s"' % NOWHERE_VIP, 'protocol = "tcp"',
        'port = 80', 'forwarding = "l2dsr"', 'table_size = 251',
        '  [[vip.backend]]', '  name = "ghost"', '  address = "10.0.0.99"', '',
        '[kernel]', 'interface = "maglb0"', '',
        '[announce]', 'table = 4242', 'drain_s = %d' % DRAIN_S, 'interval_ms = 50', 'stall_ms = 500', ''])
    return text


class Fleet:
    """The fleet testbed, maglb instances started and stopped at will."""

    def __init__(self, n=3, bfd=True):
        self.names = INSTANCES[:n]
        self.bfd = bfd
        self.procs = {}
        self.log_paths = {}
        self.configs = {}

    def __enter__(self):
        if os.geteuid() != 0:
            print("skipped: end-to-end tests need root (network namespaces)")
            sys.exit(77)
        if not os.path.exists("/usr/sbin/bird"):
            raise TestFailure("bird (bird2) is not installed: scripts/install-deps.sh installs it")
        self.lock = lbtest.take_testbed_lock()
        self.tmp = tempfile.mkdtemp(prefix="mlb-fleet-")
        try:
            r = subprocess.run([TESTBED, "fleet-up", str(len(self.names))], capture_output=True, text=True,
                               timeout=90, env=self.env(), pass_fds=(self.lock.fileno(),))
            if r.returncode != 0:
                if "Operation not permitted" in r.stderr:
                    print("skipped: cannot create network namespaces here")
                    sys.exit(77)
                raise TestFailure("fleet-up failed:\n" + r.stdout + r.stderr)
        except BaseException:
            self.teardown()
            raise
        return self

    def env(self):
        return dict(os.environ, BUILD_DIR=lbtest.BUILD_DIR, MLB_STATE=os.path.join(self.tmp, "state"),
                    MLB_TESTBED_LOCK_FD=str(self.lock.fileno()), MLB_FLEET_BFD="1" if self.bfd else "0")

    def prefix(self, name):
        return "mlb-fleet-%d-%s" % (os.getpid(), name)

    def config_path(self, name):
        return os.path.join(self.tmp, "%s.toml" % name)

    def write_config(self, name, text):
        tmp = self.config_path(name) + ".new"
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, self.config_path(name))
        self.configs[name] = text

    def start(self, name, config=None, env=None):
        self.write_config(name, config or fleet_config(name))
        # One log per start: what a restarted instance says is its own.
        self.starts = getattr(self, "starts", 0) + 1
        self.log_paths[name] = os.path.join(self.tmp, "%s-%d.log" % (name, self.starts))
        out = open(self.log_paths[name], "w")
        cpus = os.cpu_count() or 1
        cmd = ["ip", "netns", "exec", "mlb-lb-" + name, MAGLB, "--no-huge", "--no-pci", "-m", "256",
               "--lcores", "0@0,1@%d" % (1 if cpus > 1 else 0), "--file-prefix", self.prefix(name),
               "--log-level", "lib.eal:warning", "--vdev=net_pcap0,iface=lb0,phy_mac=1", "--",
               "--config", self.config_path(name), "--idle-sleep-us", "50"]
        self.procs[name] = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                            env=dict(os.environ, **(env or {})))
        out.close()
        deadline = time.time() + 30
        while "started:" not in self.read_log(name):
            if self.procs[name].poll() is not None:
                raise TestFailure("maglb %s exited at start:\n%s" % (name, self.read_log(name)))
            if time.time() > deadline:
                raise TestFailure("maglb %s did not start:\n%s" % (name, self.read_log(name)))
            time.sleep(0.05)

    def read_log(self, name):
        try:
            with open(self.log_paths[name]) as f:
                return f.read()
        except (OSError, KeyError):
            return ""

    def signal(self, name, sig):
        self.procs[name].send_signal(sig)

    def wait_exit(self, name, timeout=15):
        rc = self.procs[name].wait(timeout=timeout)
        del self.procs[name]
        shutil.rmtree(os.path.join(lbtest.DPDK_RUN_DIR, self.prefix(name)), ignore_errors=True)
        return rc

    def stats(self, name):
        r = run([MAGLBCTL, "stats", "--prefix", self.prefix(name), "--format", "json"], timeout=10)
        return json.loads(r.stdout)

    def reload(self, name, text):
        gen = self.stats(name)["stats"]["generation"]
        self.write_config(name, text)
        wait_for(lambda: self.stats(name)["stats"]["generation"] > gen, "%s reloaded" % name, 10)

    def nexthops(self, vip=VIP):
        """The instances the router's route to `vip` leads to."""
        r = lbtest.ns("mlb-router", "ip", "-j", "-6" if ":" in vip else "-4", "route", "show", vip)
        found = set()
        for route in json.loads(r.stdout or "[]"):
            for hop in route.get("nexthops", [route]):
                if hop.get("gateway") in BY_ADDR:
                    found.add(BY_ADDR[hop["gateway"]])
        return found

    def instance_of(self, sport, vip=VIP, dport=80):
        """Which instance the router sends the client's flow from `sport` to
        (its ECMP hash, policy 3 on the 5-tuple: the testbed says why)."""
        r = lbtest.ns("mlb-router", "ip", "route", "get", vip, "from", CLIENT, "iif", "c0", "ipproto", "tcp",
                      "sport", str(sport), "dport", str(dport))
        m = re.search(r"via (\S+)", r.stdout)
        return BY_ADDR.get(m.group(1)) if m else None

    def fleet_check(self, names=None):
        args = []
        for n in names or self.procs:
            args += ["--prefix", self.prefix(n)]
        return run([MAGLBCTL, "fleet"] + args, timeout=20, check_rc=False)

    def teardown(self):
        for name, p in list(self.procs.items()):
            p.send_signal(signal.SIGINT)  # at once, no drain
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
            shutil.rmtree(os.path.join(lbtest.DPDK_RUN_DIR, self.prefix(name)), ignore_errors=True)
        self.procs = {}
        subprocess.run([TESTBED, "down"], capture_output=True, timeout=60, env=self.env(),
                       pass_fds=(self.lock.fileno(),))
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.lock.close()

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            for n in self.log_paths:
                print("---- maglb %s log ----\n%s" % (n, self.read_log(n)[-3000:]), flush=True)
        self.teardown()
        return False


def wait_for(pred, what, timeout):
    lbtest.wait_for(pred, what, timeout, interval=0.05)


def wait_nexthops(fleet, want, timeout=20, vip=VIP):
    t0 = time.time()
    wait_for(lambda: fleet.nexthops(vip) == set(want), "route to %s via %s" % (vip, sorted(want)), timeout)
    return time.time() - t0


class Streams:
    """echo_streams.py in the client namespace, in the background."""

    def __init__(self, fleet, count, duration_s, sport_base):
        self.out = os.path.join(fleet.tmp, "streams-%d.json" % sport_base)
        self.sport_base = sport_base
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", "mlb-client", "/usr/bin/python3", ECHO_STREAMS, "--vip", VIP,
             "--count", str(count), "--sport-base", str(sport_base), "--duration-s", str(duration_s),
             "--interval-ms", "50", "--out", self.out], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if line.strip() != "established":
            raise TestFailure("echo_streams did not establish: %s %s" % (line, self.proc.stderr.read()))

    def result(self, timeout=120):
        _, err = self.proc.communicate(timeout=timeout)
        if self.proc.returncode != 0:
            raise TestFailure("echo_streams failed: %s" % err)
        with open(self.out) as f:
            return json.load(f)["connections"]


class RouteWatch:
    """Samples the router's next hops for VIP every 10 ms in a thread: when
    each instance was first and last seen."""

    def __init__(self, fleet):
        self.fleet = fleet
        self.samples = []  # (time, frozenset of instances)
        self.stop = False
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.stop:
            try:
                hops = frozenset(self.fleet.nexthops())
                # Stamped once read: a sample never claims a route earlier than it saw it.
                self.samples.append((time.time(), hops))
            except (TestFailure, ValueError):
                pass
            time.sleep(0.01)

    def end(self):
        self.stop = True
        self.thread.join()
        return self.samples

    def first_with(self, name, after=0):
        return next((t for t, hops in self.samples if t >= after and name in hops), None)

    def first_without(self, name, after=0):
        return next((t for t, hops in self.samples if t >= after and name not in hops), None)


def stall_summary(conns):
    rtts = sorted(c["max_rtt_ms"] for c in conns)
    if not rtts:
        return "none"
    return "median %.0f ms, p90 %.0f ms, max %.0f ms" % (statistics.median(rtts), rtts[int(0.9 * (len(rtts) - 1))],
                                                       rtts[-1])


def log_time(text, pattern):
    """The UTC time (seconds since the epoch) of the first log line matching pattern."""
    for line in text.splitlines():
        if re.search(pattern, line):
            stamp = line.split(" ", 1)[0]
            return calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) + float("0" + stamp[19:23])
    return None


def failover(fleet, victim, sig, count, sport_base, what):
    """Long-lived connections; `victim` gets `sig` 2 s in. Returns (connections
    with the instance each crossed before, route convergence time)."""
    streams = Streams(fleet, count, 12, sport_base)
    before = {sport_base + i: fleet.instance_of(sport_base + i) for i in range(count)}
    time.sleep(2)
    watch = RouteWatch(fleet)
    t_kill = time.time()
    fleet.signal(victim, sig)
    conns = streams.result()
    samples = watch.end()
    gone = watch.first_without(victim, t_kill)
    converge = (gone - t_kill) if gone else None
    via = [c for c in conns if before[c["sport"]] == victim]
    others = [c for c in conns if before[c["sport"]] != victim]
    broken = [c for c in conns if not c["ok"]]
    log("%s: %d connections, %d through %s; route without %s after %s; stall of %s's flows: %s; of the "
        "others: %s; broken %d %s" % (what, len(conns), len(via), victim, victim,
                                      "%.2f s" % converge if converge is not None else "never (samples %d)" % len(samples),
                                      victim, stall_summary(via), stall_summary(others), len(broken),
                                      [(c["sport"], c["error"]) for c in broken][:5]))
    check(len(via) > 0, "%s: some connections went through %s (%d of %d)" % (what, victim, len(via), len(conns)))
    check(not broken, "%s: 0 of %d connections broken (%d went through %s)" % (what, len(conns), len(via), victim))
    return conns, converge


def test():
    with Fleet(3, bfd=True) as fleet:
        for n in INSTANCES:
            fleet.start(n)
        took = wait_nexthops(fleet, INSTANCES)
        routes = lbtest.ns("mlb-router", "ip", "route", "show", VIP).stdout.strip()
        log("router: %s" % routes.replace("\n", " | "))
        log("ok: the route to %s has one next hop per instance, %.1f s after the last start" % (VIP, took))
        wait_nexthops(fleet, INSTANCES, vip=VIP6)
        log("ok: so has the IPv6 VIP %s" % VIP6)
        for n in INSTANCES:
            a = fleet.stats(n)["announce"]
            nowhere = a["reasons"][a["prefixes"].index(NOWHERE_VIP + "/32")]
            check(a["state"] == "announcing" and a["announced"][a["prefixes"].index(NOWHERE_VIP + "/32")] == 0
                  and "next hop unresolved" in nowhere,
                  "%s: web-nowhere (its only backend unresolvable) is not announced: %s" % (n, nowhere))
        check(fleet.nexthops(NOWHERE_VIP) == set(), "the router has no route to %s" % NOWHERE_VIP)

        # Flows spread as the router's hash says (fresh source ports: a
        # reused one finds its conntrack entry and makes no new flow).
        before = {n: fleet.stats(n)["vips"]["web-gre"]["new_flows"] for n in INSTANCES}
        predicted = {n: 0 for n in INSTANCES}
        answered = 0
        for i in range(45):
            sport = 47000 + i
            predicted[fleet.instance_of(sport)] += 1
            r = lbtest.ns("mlb-client", "curl", "-s", "-m", "3", "--local-port", str(sport), "http://%s/" % VIP,
                          check_rc=False)
            answered += r.stdout.startswith("be")
        time.sleep(0.3)
        got = {n: fleet.stats(n)["vips"]["web-gre"]["new_flows"] - before[n] for n in INSTANCES}
        check(answered == 45, "45 of 45 requests answered through the fleet")
        check(got == predicted and all(v > 0 for v in got.values()),
              "new flows per instance %s, as the router's ECMP hash predicts %s" % (got, predicted))

        r = fleet.fleet_check()
        check(r.returncode == 0, "maglbctl fleet: the three instances agree (exit %d)" % r.returncode)
        # Config skew: c without be3.
        fleet.reload("c", fleet_config("c", backends=("be1", "be2")))
        r = fleet.fleet_check()
        check(r.returncode == 1 and "web-gre" in r.stdout and "be3" in r.stdout,
              "maglbctl fleet flags c's different backend set (exit %d)" % r.returncode)
        fleet.reload("c", fleet_config("c"))
        check(fleet.fleet_check().returncode == 0, "and agrees again once c is restored")

        # A stalled worker (c's, held in its idle sleep by a preloaded shim,
        # passing no quiescent point): c's own watch withdraws every VIP
        # within stall_ms, though its control loop may be stuck in a publish.
        stall_file = os.path.join(fleet.tmp, "stall")
        fleet.signal("c", signal.SIGINT)
        fleet.wait_exit("c")
        fleet.start("c", env={"LD_PRELOAD": FAULT_SHIM, "MAGLB_FAULT": "stall", "MAGLB_STALL_FILE": stall_file})
        wait_nexthops(fleet, INSTANCES)
        table_c = lambda: lbtest.ns("mlb-lb-c", "ip", "route", "show", "table", "4242").stdout.strip()
        check(VIP in table_c(), "c's routes are in its table 4242")
        t_stall = time.time()
        open(stall_file, "w").close()
        wait_for(lambda: table_c() == "", "c's table 4242 emptied", 10)
        emptied = time.time() - t_stall
        wait_for(lambda: "announce: workers stalled" in fleet.read_log("c"), "c logs the stall", 5)
        wait_nexthops(fleet, ("a", "b"), timeout=10)
        counts = {}
        for i in range(20):
            r = lbtest.ns("mlb-client", "curl", "-s", "-m", "3", "--local-port", str(48000 + i), "http://%s/" % VIP,
                          check_rc=False)
            counts[r.stdout.strip()] = counts.get(r.stdout.strip(), 0) + 1
        check(sum(v for k, v in counts.items() if k.startswith("be")) == 20,
              "c's worker stalled: its table emptied %.2f s later (stall_ms 500), the router uses a and b, "
              "20 of 20 requests answered %s" % (emptied, counts))
        os.remove(stall_file)
        back = wait_nexthops(fleet, INSTANCES, timeout=20)
        check("workers pass their quiescent points again" in fleet.read_log("c"),
              "the worker resumed: c announces again (router route back %.2f s later)" % back)

        # An instance dies without a word: BFD takes its route away.
        failover(fleet, "a", signal.SIGKILL, 120, 41000, "SIGKILL a (BFD)")
        fleet.wait_exit("a")

        # It comes back: announced only once ready (started, next hops
        # resolved, workers passing quiescent points).
        watch = RouteWatch(fleet)
        t_start = time.time()
        fleet.start("a")
        wait_nexthops(fleet, INSTANCES)
        time.sleep(0.3)  # the watch's own samples see it too
        watch.end()
        text = fleet.read_log("a")
        t_announced = log_time(text, r"announce: %s/32 announced" % re.escape(VIP))
        t_first = watch.first_with("a", t_start)
        lines = text.splitlines()
        first_announce = next(i for i, l in enumerate(lines) if "announced (" in l)
        resolved = [l for l in lines[:first_announce] if re.search(r"neighbor (10\.0\.0\.1|10\.0\.0\.1[123]) is at", l)]
        check("started:" in "\n".join(lines[:first_announce]) and len(resolved) == 4,
              "a announced only after its start and after resolving the gateway and be1-be3 (%d lines)" % len(resolved))
        check(t_announced is not None and t_first is not None and t_first >= t_announced - 0.002,
              "the router had no route via a before a announced it (first seen %.3f s after a's start, "
              "announced at %.3f s)" % (t_first - t_start, t_announced - t_start))

        # Drain b with maglbctl while flows run, then SIGTERM c.
        streams = Streams(fleet, 120, 12, 42000)
        before = {42000 + i: fleet.instance_of(42000 + i) for i in range(120)}
        time.sleep(2)
        watch = RouteWatch(fleet)
        t_drain = time.time()
        r = run([MAGLBCTL, "drain", "--prefix", fleet.prefix("b")], timeout=15, check_rc=False)
        check(r.returncode == 0 and "draining" in r.stdout, "maglbctl drain b: %s" % r.stdout.strip())
        fleet.signal("b", signal.SIGUSR1)  # a second drain asked meanwhile must not cut the first short
        time.sleep(4)
        t_term = time.time()
        fleet.signal("c", signal.SIGTERM)
        conns = streams.result()
        watch.end()
        rc_b, rc_c = fleet.wait_exit("b"), fleet.wait_exit("c")
        b_gone, c_gone = watch.first_without("b", t_drain), watch.first_without("c", t_term)
        broken = [c for c in conns if not c["ok"]]
        log("drain b / SIGTERM c: route without b after %.3f s, without c after %.3f s; stall of b's flows: %s, "
            "c's: %s, a's: %s" % (b_gone - t_drain, c_gone - t_term,
                                  stall_summary([c for c in conns if before[c["sport"]] == "b"]),
                                  stall_summary([c for c in conns if before[c["sport"]] == "c"]),
                                  stall_summary([c for c in conns if before[c["sport"]] == "a"])))
        check(not broken, "drain and SIGTERM: 0 of %d connections broken (%s)" % (len(conns), broken[:3]))
        check("drain (SIGUSR1) ignored: already draining" in fleet.read_log("b"),
              "a second SIGUSR1 during b's drain was ignored")
        check(rc_b == 0 and rc_c == 0 and "stopped on SIGUSR1 after a drain" in fleet.read_log("b")
              and "stopped on SIGTERM after a drain" in fleet.read_log("c"),
              "b and c exited 0 after their %d s drain" % DRAIN_S)
        for n in ("b", "c"):
            fleet.start(n)
        wait_nexthops(fleet, INSTANCES)

        # A backend added on the survivors while b is lost: a connection
        # that changes instance is placed by the new table (no conntrack
        # entry there) and breaks if its slot moved to be4.
        old_cfg = os.path.join(fleet.tmp, "old.toml")
        new_cfg = os.path.join(fleet.tmp, "new.toml")
        with open(old_cfg, "w") as f:
            f.write(fleet_config("a"))
        with open(new_cfg, "w") as f:
            f.write(fleet_config("a", backends=("be1", "be2", "be3", "be4")))
        diff = run([MAGLBCTL, "diff", old_cfg, new_cfg], timeout=30).stdout
        moved = float(re.search(r'web-gre.*?flows that change backend: (\d+\.\d+)%', diff, re.S).group(1)) / 100
        count = 120
        streams = Streams(fleet, count, 10, 43000)
        before = {43000 + i: fleet.instance_of(43000 + i) for i in range(count)}
        time.sleep(2)
        fleet.signal("b", signal.SIGKILL)
        for n in ("a", "c"):
            fleet.reload(n, fleet_config(n, backends=("be1", "be2", "be3", "be4")))
        wait_nexthops(fleet, ("a", "c"), timeout=10)
        after = {s: fleet.instance_of(s) for s in before}
        conns = streams.result()
        fleet.wait_exit("b")
        changed = [c for c in conns if before[c["sport"]] != after[c["sport"]]]
        broken = [c for c in conns if not c["ok"]]
        stayed_broken = [c for c in broken if before[c["sport"]] == after[c["sport"]]]
        log("backend be4 added while b is lost: %d of %d connections changed instance, %d broke; Maglev's "
            "disruption for this change is %.1f%% of flows (maglbctl diff), which predicts %.1f of the %d" %
            (len(changed), count, len(broken), moved * 100, moved * len(changed), len(changed)))
        check(not stayed_broken, "no connection that kept its instance broke (%d broken, all among the %d that "
              "changed instance)" % (len(broken), len(changed)))
        check(all(c["error"] for c in broken), "every broken connection says why: %s" %
              sorted(set(c["error"].split(":")[0] for c in broken)))

    # Without BFD: the router notices a dead instance when its BGP hold time
    # (3 s) expires; TCP retransmits over the gap.
    with Fleet(3, bfd=False) as fleet:
        for n in INSTANCES:
            fleet.start(n)
        wait_nexthops(fleet, INSTANCES)
        failover(fleet, "a", signal.SIGKILL, 120, 44000, "SIGKILL a (no BFD, hold time 3 s)")
        fleet.wait_exit("a")


if __name__ == "__main__":
    lbtest.main(test)
