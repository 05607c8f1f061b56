#!/usr/bin/env python3
"""maglb's start and stop paths release what they took: the port stopped and
closed, its buffer pool freed, then the EAL cleaned up (its multi-process
socket gone from /var/run/dpdk/<prefix>), whichever step fails. Runs maglb on
a net_null port (no namespaces needed); a preloaded shim (start_fault.cc)
makes one DPDK call fail and logs the release calls. The error line and exit
code stay those of the daemon."""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

import lbtest

SHIM = os.path.join(lbtest.BUILD_DIR, "tests", "e2e", "libmaglb_start_fault.so")
PORT_RELEASE = ["rte_eth_dev_close", "rte_mempool_free", "rte_eal_cleanup"]
STARTED_RELEASE = ["rte_eth_dev_stop"] + PORT_RELEASE


def run_maglb(tmp, name, vdev, config, fault=None, stop_after_start=False):
    prefix = "mlb-startfail-%d-%s" % (os.getpid(), name)
    log_path = os.path.join(tmp, name + ".calls")
    env = dict(os.environ, LD_PRELOAD=SHIM, MAGLB_FAULT_LOG=log_path)
    if fault:
        env["MAGLB_FAULT"] = fault
    cmd = [lbtest.MAGLB, "--no-huge", "--no-pci", "-m", "64", "-l", "0,1", "--file-prefix", prefix,
           vdev, "--", "--config", config, "--idle-sleep-us", "50"]
    p = None
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        out = ""
        if stop_after_start:
            # SIGTERM once it serves (signals are blocked for its signalfd by then).
            for line in p.stdout:
                out += line
                if "maglb: started:" in line:
                    p.send_signal(signal.SIGTERM)
                    break
        rest, _ = p.communicate(timeout=30)
        out += rest
        run_dir = os.path.join(lbtest.DPDK_RUN_DIR, prefix)
        mp_socket_left = os.path.exists(os.path.join(run_dir, "mp_socket"))
        calls = open(log_path).read().split() if os.path.exists(log_path) else []
        return p.returncode, out, calls, mp_socket_left
    finally:
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()
        shutil.rmtree(os.path.join(lbtest.DPDK_RUN_DIR, prefix), ignore_errors=True)


def expect(tmp, name, vdev, config, rc, message, calls, fault=None, stop_after_start=False):
    got_rc, out, got_calls, mp_socket_left = run_maglb(tmp, name, vdev, config, fault, stop_after_start)
    lbtest.log("%s: rc %s, calls %s, output:\n%s" % (name, got_rc, got_calls, out.strip()))
    lbtest.check(got_rc == rc and message in out, "%s: exit %d with '%s'" % (name, rc, message))
    lbtest.check(got_calls == calls, "%s: released in order: %s" % (name, " ".join(calls) or "nothing"))
    lbtest.check(not mp_socket_left, "%s: no EAL socket left in %s" % (name, lbtest.DPDK_RUN_DIR))


def main():
    if os.geteuid() != 0:
        print("skipped: needs root (DPDK runtime directory)")
        return 77
    if not os.path.exists(SHIM):
        raise lbtest.TestFailure("%s not built" % SHIM)
    tmp = tempfile.mkdtemp(prefix="mlb-startfail-")
    try:
        # The example without a kernel interface: this test runs in the host's
        # own network namespace, where maglb must make none.
        with open(os.path.join(lbtest.SOURCE_DIR, "config", "example.toml")) as f:
            example = f.read()
        active = re.compile(r'(?m)^(\[kernel\][^\[]*?)^interface = .*$')
        no_kernel = active.sub(r"\1# interface: none in this test", example)
        if active.search(no_kernel) or "\n[kernel]\n" not in no_kernel:
            raise lbtest.TestFailure("config/example.toml: cannot find its [kernel] table and interface")
        # ... and so without its health checks, which need one.
        no_kernel, named = re.subn(r'(?m)^health_check = .*$', "# health_check: none in this test", no_kernel)
        no_kernel, inline = re.subn(r'(?ms)^  \[vip\.health_check\]\n.*?(?=^  \[\[vip\.backend\]\])', "",
                                    no_kernel)
        if named == 0 or inline == 0:
            raise lbtest.TestFailure("config/example.toml: cannot find its VIPs' health checks")
        config = os.path.join(tmp, "maglb.toml")
        with open(config, "w") as f:
            f.write(no_kernel)
        # A kernel interface named like one that exists ("lo"): refused before
        # anything is made, the port released.
        kernel_lo = os.path.join(tmp, "kernel-lo.toml")
        with open(kernel_lo, "w") as f:
            f.write(no_kernel.replace("\n[kernel]\n", '\n[kernel]\ninterface = "lo"\n', 1))
        kernel_line = no_kernel[:no_kernel.index("\n[kernel]\n")].count("\n") + 2
        # [metrics] listen on an address something else holds: the start
        # fails with the file:line and what to do, after the port was started.
        holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        metrics_listen = "127.0.0.1:%d" % holder.getsockname()[1]
        metrics_in_use = os.path.join(tmp, "metrics-in-use.toml")
        with open(metrics_in_use, "w") as f:
            f.write(no_kernel + '\n[metrics]\nlisten = "%s"\n' % metrics_listen)
        metrics_line = (no_kernel + "\n[metrics]\n").count("\n") + 1
        null = "--vdev=net_null0,no-rx=1"
        expect(tmp, "started", null, config, 0, "maglb: stopped on SIGTERM", STARTED_RELEASE,
               stop_after_start=True)
        expect(tmp, "ring", null, config, 1, "maglb: error: cannot create control rings: ",
               STARTED_RELEASE, fault="ring")
        expect(tmp, "launch", null, config, 1, "maglb: error: cannot start worker on lcore 1: ",
               STARTED_RELEASE, fault="launch")
        expect(tmp, "dev_start", null, config, 1, "maglb: error: port 0: rte_eth_dev_start failed: ",
               PORT_RELEASE, fault="dev_start")
        expect(tmp, "kernel_exists", null, kernel_lo, 1,
               "maglb: error: %s:%d: cannot create kernel interface lo: an interface of that name already "
               "exists in this network namespace" % (kernel_lo, kernel_line), STARTED_RELEASE)
        expect(tmp, "metrics_in_use", null, metrics_in_use, 1,
               'maglb: error: %s:%d: metrics.listen = "%s": cannot serve Prometheus metrics there: Address '
               "already in use: another process serves there; pick another port or stop it; maglb did not "
               "start" % (metrics_in_use, metrics_line, metrics_listen), STARTED_RELEASE)
        holder.close()
        expect(tmp, "no_port", "--vdev=net_pcap0,iface=mlb-no-such-if", config, 1,
               "maglb: error: no DPDK port: the virtual device --vdev=net_pcap0,iface=mlb-no-such-if "
               "failed to probe", ["rte_eal_cleanup"])
        expect(tmp, "eal_argument", "--no-such-eal-option", config, 1,
               "maglb: error: EAL initialisation failed: unrecognized option '--no-such-eal-option'", [])
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
