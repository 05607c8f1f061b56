#!/usr/bin/env python3
"""`maglb --check`: with the arguments of a real start (test mode: a net_null
port, no namespaces), one finding per line and the exit status says whether
maglb would start. A good config: exit 0, ok lines only (config, EAL, port,
queues, descriptors, NUMA, buffers, conntrack, link). Then one fault at a
time, each named on an error (or warning) line with what to change: packet
buffers of a jumbo MTU that do not fit -m 64; conntrack tables larger than
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
                     "packet buffers (port 0: 8191 x 2176 B) needs", "--no-huge: DPDK's fixed memory (-m)",
                     "conntrack (1 worker x 8.0 MiB for [conntrack] capacity 65536)",
                     "port 0: link up, 10000 Mbps"):
            lbtest.check(any(l.startswith("ok: ") and what in l for l in findings), "good: ok line with '%s'" % what)
        lbtest.check(summary == "check: 0 errors, 0 warnings: maglb can start with these arguments",
                     "good: summary '%s'" % summary)

        # Jumbo frames: 8191 buffers of ~9 KB do not fit 64 MiB.
        jumbo = config("jumbo", mtu=9000)
        rc, findings, summary = run_check("jumbo", jumbo)
        errors = with_levels(findings, "error")
        lbtest.check(rc == 1 and len(errors) == 1 and "packet buffers (port 0: 8191 x 9152 B) needs 75 MiB" in errors[0]
                     and "DPDK's fixed memory (-m) on socket 0: " in errors[0] and "give EAL more memory with -m" in errors[0]
                     and "maglb would not start" in summary,
                     "jumbo: exit 1, the buffers' memory named with the fix: %s" % errors)
        # ... and fit 96 MiB: the estimate is on the side of what the pool takes.
        rc, findings, _ = run_check("jumbo-96", jumbo, memory="96")
        lbtest.check(rc == 0 and any("port 0 set up and started" in l for l in findings),
                     "jumbo with -m 96: exit 0, the pool made")

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
