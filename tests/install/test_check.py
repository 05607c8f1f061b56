#!/usr/bin/env python3
"""`maglb --check`: with the arguments of a real start (test mode: a net_null
port, no namespaces), one finding per line and the exit status says whether
maglb would start. A good config: exit 0, ok lines only (config, EAL, port,
queues, descriptors, NUMA, buffers, conntrack, link). Then one fault at a
time, each named on an error (or warning) line with what to change: packet
buffers of a jumbo MTU that do not fit -m 64; [lb] rx_descriptors /
tx_descriptors and the pool they need; a set [lb] mbufs that does not fit
(error naming the key), is below the floor (refused with its line), or below
the computed need (a warning); conntrack tables larger than
the memory the process may take (RLIMIT_DATA, as systemd's LimitDATA= or a
cgroup's memory.max would cap it); a link that stays down and a port on
another NUMA node than the workers (both faked by the preloaded shim of
test_start_failure, tests/e2e/start_fault.cc); a port that does not exist; a
bad config. The check never starts a worker: no 'started:' line."""
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import lbtest  # noqa: E402

SHIM = os.path.join(lbtest.BUILD_DIR, "tests", "e2e", "libmaglb_start_fault.so")
FINDING = re.compile(r"^(ok|warning|error): ")


def run_check(name, config, extra_app=(), memory="64", fault=None, rlimit_data=None):
    prefix = "mlb-check-%d-%s" % (os.getpid(), name)
    env = dict(os.environ)
    if fault:
        env.update(LD_PRELOAD=SHIM, MAGLB_FAULT=fault)

    def limit():
        if rlimit_data:
            resource.setrlimit(resource.RLIMIT_DATA, (rlimit_data, rlimit_data))

    cmd = [lbtest.MAGLB, "--no-huge", "--no-pci", "-m", memory, "-l", "0,1", "--file-prefix", prefix,
           "--vdev=net_null0,no-rx=1", "--", "--config", config, "--check"] + list(extra_app)
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                           timeout=120, preexec_fn=limit)
    finally:
        shutil.rmtree(os.path.join(lbtest.DPDK_RUN_DIR, prefix), ignore_errors=True)
    lines = p.stdout.strip().split("\n")
    lbtest.log("%s: exit %d\n%s\n(stderr: %s)" % (name, p.returncode, p.stdout.strip(), p.stderr.strip()[-400:]))
    findings = lines[:-1]
    lbtest.check(all(FINDING.match(l) for l in findings) and lines[-1].startswith("check: "),
                 "%s: one finding a line, then the summary" % name)
    lbtest.check("maglb: started:" not in p.stdout + p.stderr, "%s: no worker started" % name)
    return p.returncode, findings, lines[-1]


def with_levels(findings, level):
    return [l for l in findings if l.startswith(level + ": ")]


def main():
    if os.geteuid() != 0:
        print("skipped: needs root (DPDK runtime directory)")
        return 77
    if not os.path.exists(SHIM):
        raise lbtest.TestFailure("%s not built" % SHIM)
    tmp = tempfile.mkdtemp(prefix="mlb-check-")
    try:
        def config(name, **kw):
            path = os.path.join(tmp, name + ".toml")
            with open(path, "w") as f:
                f.write(lbtest.config_text(**kw))
            return path

        good = config("good")
        rc, findings, summary = run_check("good", good)
        lbtest.check(rc == 0 and not with_levels(findings, "error") and not with_levels(findings, "warning"),
                     "good: exit 0, no warning or error")
        for what in ("config %s: 8 VIPs, 24 backends" % good, "EAL up: main lcore 0, 1 worker lcore",
                     "port 0 net_null0 (net_null): found", "1 queue pair", "1024 RX descriptors",
                     "1024 TX descriptors", "NUMA node 0; its worker lcore on it",
                     "packet buffers (port 0: 5758 x 2176 B, rx 1 x 1024 + tx 1024 + in flight 1 x 256 + "
                     "lcore caches 2 x 384 + rings 2046 + margin 640 = 5758) needs",
                     "--no-huge: DPDK's fixed memory (-m)",
                     "port 0: 1024 RX and 1024 TX descriptors per queue, 5758 packet buffers of 2176 bytes",
                     "conntrack (1 worker x 8.0 MiB for [conntrack] capacity 65536)",
                     "port 0: link up, 10000 Mbps"):
            lbtest.check(any(l.startswith("ok: ") and what in l for l in findings), "good: ok line with '%s'" % what)
        lbtest.check(summary == "check: 0 errors, 0 warnings: maglb can start with these arguments",
                     "good: summary '%s'" % summary)

        # Jumbo frames: 5758 buffers of ~9 KB (3 pages of 4 KiB each without
        # hugepages) do not fit 64 MiB.
        jumbo = config("jumbo", mtu=9000)
        rc, findings, summary = run_check("jumbo", jumbo)
        errors = with_levels(findings, "error")
        lbtest.check(rc == 1 and len(errors) == 1 and "packet buffers (port 0: 5758 x 9152 B, rx 1 x 1024" in errors[0]
                     and "needs 69 MiB" in errors[0]
                     and "DPDK's fixed memory (-m) on socket 0: " in errors[0] and "give EAL more memory with -m" in errors[0]
                     and "or lower [lb] mtu, rx_descriptors / tx_descriptors or the worker count" in errors[0]
                     and "maglb would not start" in summary,
                     "jumbo: exit 1, the buffers' memory named with the fix: %s" % errors)
        # ... and fit 80 MiB: the estimate is on the side of what the pool takes.
        rc, findings, _ = run_check("jumbo-80", jumbo, memory="80")
        lbtest.check(rc == 0 and any("port 0 set up and started" in l for l in findings),
                     "jumbo with -m 80: exit 0, the pool made")

        # [lb] rx_descriptors, tx_descriptors, mbufs: the descriptors asked
        # for and the pool they need; a set mbufs as it is, judged against
        # memory, against the floor (the RX rings, bursts, caches) and
        # against the computed need.
        def lb_keys(name, keys):
            path = os.path.join(tmp, name + ".toml")
            with open(path, "w") as f:
                f.write(lbtest.config_text().replace("mtu = 1500\n", "mtu = 1500\n" + keys))
            with open(path) as f:
                line = next(i for i, l in enumerate(f, 1) if l.startswith(keys.split(" ")[0]))
            return path, line

        rings, _ = lb_keys("rings", "rx_descriptors = 4096\ntx_descriptors = 2048\n")
        rc, findings, _ = run_check("rings", rings)
        lbtest.check(rc == 0 and not with_levels(findings, "warning") and
                     any("4096 RX descriptors per queue (device: 0..65535)" in l for l in findings) and
                     any("2048 TX descriptors per queue" in l for l in findings) and
                     any("packet buffers (port 0: 10366 x 2176 B, rx 1 x 4096 + tx 2048 +" in l for l in findings) and
                     any("port 0: 4096 RX and 2048 TX descriptors per queue, 10366 packet buffers" in l for l in findings),
                     "rings: the descriptors asked for and the pool that holds them")
        big_pool, line = lb_keys("big-pool", "mbufs = 40000\n")
        rc, findings, _ = run_check("big-pool", big_pool)
        errors = with_levels(findings, "error")
        lbtest.check(rc == 1 and len(errors) == 1 and "packet buffers (port 0: 40000 x 2176 B, %s:%d: lb.mbufs 40000)"
                     % (big_pool, line) in errors[0] and "does not fit" in errors[0]
                     and "or lower lb.mbufs (%s:%d: lb.mbufs 40000), [lb] mtu or the worker count" % (big_pool, line)
                     in errors[0], "mbufs = 40000 in 64 MiB: exit 1, the key named: %s" % errors)
        rc, findings, _ = run_check("big-pool-256", big_pool, memory="256")
        lbtest.check(rc == 0 and any("40000 packet buffers of 2176 bytes" in l and
                                     "%s:%d: lb.mbufs 40000 (computed: rx 1 x 1024" % (big_pool, line) in l
                                     for l in findings), "mbufs = 40000 in 256 MiB: the pool made with them")
        few, line = lb_keys("few", "mbufs = 2000\n")
        rc, findings, _ = run_check("few", few)
        errors = with_levels(findings, "error")
        lbtest.check(rc == 1 and len(errors) == 1 and errors[0].startswith(
                     "error: %s:%d: lb.mbufs: 2000 packet buffers are too few for port 0" % (few, line))
                     and "set at least 2048, or 0 for the computed 5758" in errors[0],
                     "mbufs = 2000: exit 1, refused with its line: %s" % errors)
        low, line = lb_keys("low", "mbufs = 3000\n")
        rc, findings, _ = run_check("low", low)
        warnings = with_levels(findings, "warning")
        lbtest.check(rc == 0 and len(warnings) == 1 and "%s:%d: lb.mbufs 3000, below the 5758 packet buffers" % (low, line)
                     in warnings[0] and "under load, frames waiting in TX rings" in warnings[0],
                     "mbufs = 3000: exit 0, a warning that it is below the computed need: %s" % warnings)

        # 2^24 flows per worker: 1.4 GiB of conntrack against a 1 GiB data limit.
        big = config("big", conntrack_capacity=1 << 24)
        rc, findings, _ = run_check("conntrack", big, rlimit_data=1 << 30)
        errors = with_levels(findings, "error")
        lbtest.check(rc == 1 and len(errors) == 1 and "conntrack (1 worker x 1.4 GiB for [conntrack] capacity 16777216)" in errors[0]
                     and "RLIMIT_DATA 1.0 GiB" in errors[0] and "lower [conntrack] capacity in %s" % big in errors[0],
                     "conntrack: exit 1, the tables' memory and its limit named: %s" % errors)

        rc, findings, _ = run_check("link-down", good, fault="link_down")
        errors = with_levels(findings, "error")
        lbtest.check(rc == 1 and len(errors) == 1 and "port 0: link down" in errors[0] and "check the cable" in errors[0],
                     "link down: exit 1, named: %s" % errors)

        rc, findings, _ = run_check("numa", good, fault="numa1")
        warnings = with_levels(findings, "warning")
        lbtest.check(any("NUMA node 1, but worker lcore 1 (node 0) on another node" in w and
                         "give -l with lcores of node 1" in w for w in warnings),
                     "numa: the worker on another node is named: %s" % warnings)
        lbtest.check(rc == 1 and any("on socket 1: 0 B available: does not fit" in e
                                     for e in with_levels(findings, "error")),
                     "numa: the buffers, allocated on the port's node, find no memory there")

        rc, findings, _ = run_check("no-port", good, extra_app=["--port", "3"])
        lbtest.check(rc == 1 and any(l.startswith("error: no DPDK port 3 (1 available): bind the NIC to vfio-pci")
                                     for l in findings), "no port 3: exit 1, named")

        bad = os.path.join(tmp, "bad.toml")
        with open(bad, "w") as f:
            f.write(lbtest.config_text().replace("mtu = 1500", "mtu = 99"))
        rc, findings, _ = run_check("bad-config", bad)
        lbtest.check(rc == 1 and len(findings) == 1 and findings[0].startswith("error: %s:" % bad) and "mtu" in findings[0],
                     "bad config: exit 1, the file:line error only (EAL not started): %s" % findings)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except lbtest.TestFailure as e:
        print("FAIL: %s" % e)
        sys.exit(1)
