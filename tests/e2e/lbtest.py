"""Harness of maglb's end-to-end tests: brings the namespace testbed up, runs
maglb in it, drives real traffic from the client namespace, reads counters
with `maglbctl stats --format json`, and always tears everything down.

Environment: MAGLB_BUILD_DIR (the meson build directory), MAGLB_SOURCE_DIR,
MAGLB_E2E_KERNEL_INTERFACE (if set, every config_text() gets a [kernel]
interface of that name, so that any test runs with the kernel interface
present; tests/e2e/meson.build runs test_forwarding so).
Exit code 77 (meson: skipped) when not root or namespaces are unavailable.
"""
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SOURCE_DIR = os.environ.get("MAGLB_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD_DIR = os.environ.get("MAGLB_BUILD_DIR") or os.path.join(SOURCE_DIR, "build")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import backend_server  # noqa: E402  (stream_bytes: the body the client checks)

MAGLB = os.path.join(BUILD_DIR, "maglb")
MAGLBCTL = os.path.join(BUILD_DIR, "src", "ctl", "maglbctl")
TESTBED = os.path.join(SOURCE_DIR, "scripts", "testbed.sh")
BACKENDS = {"be1": "10.0.0.11", "be2": "10.0.0.12", "be3": "10.0.0.13", "be4": "10.0.0.14"}
BACKENDS6 = {"be1": "fd00::11", "be2": "fd00::12", "be3": "fd00::13", "be4": "fd00::14"}
VIP = {"gre": "10.100.0.1", "ipip": "10.100.0.2", "l2dsr": "10.100.0.3"}
VIP6 = {"gre": "fd00:100::1", "l2dsr": "fd00:100::3"}
LB_IP = "10.0.0.10"
LB_IP6 = "fd00::10"
LB_MAC = "02:4d:4c:00:00:0a"
UDP_PORT = 7777
# The testbed's namespaces are global to the host: concurrent runs (two build
# directories testing at once) would tear each other's down. They take turns.
LOCK_PATH = "/run/mlb-testbed.lock"
LOCK_WAIT_S = 240
DPDK_RUN_DIR = "/var/run/dpdk"
NR_HUGEPAGES = "/proc/sys/vm/nr_hugepages"  # of the default size (2 MB on x86)
# Hugepages for a capture tool beside maglb's -m: dpdk-dumpcap's pool (4096
# buffers of ~2.4 KB: 10 MB), its ring and heap, rounded up generously.
CAPTURE_HEADROOM_MB = 64


class TestFailure(Exception):
    pass


class HugepagesUnavailable(Exception):
    """Testbed(hugepages=True) skips on it (exit 77); hugepages="try" runs on without."""


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)
    log("ok: " + msg)


def run(cmd, timeout=30, check_rc=True, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check_rc and p.returncode != 0:
        raise TestFailure("command failed (%d): %s\n%s%s" % (p.returncode, " ".join(cmd), p.stdout, p.stderr))
    return p


def ns(name, *cmd, timeout=30, check_rc=True):
    return run(["ip", "netns", "exec", name] + list(cmd), timeout=timeout, check_rc=check_rc)


def config_text(vips=None, conntrack_capacity=65536, gateway_v4="10.0.0.1", ipv6_vips=True,
                neighbors=None, extra="", mtu=1500, ipv6_udp_vips=False):
    """A testbed config. vips: {mode: {backend: weight}}, applied to the TCP
    and the UDP VIP of that mode; default be1..be3 weight 1 everywhere.
    ipv6_udp_vips adds UDP echo VIPs beside the IPv6 TCP ones."""
    if vips is None:
        vips = {m: {"be1": 1, "be2": 1, "be3": 1} for m in VIP}
    out = ['[lb]', 'hash_seed = 0', 'ipv4 = "%s"' % LB_IP, 'ipv6 = "%s"' % LB_IP6,
           'gateway_v4 = "%s"' % gateway_v4, 'gateway_v6 = "fd00::1"', 'mtu = %d' % mtu, '',
           '[conntrack]', 'capacity = %d' % conntrack_capacity, 'tcp_established_timeout_s = 600',
           'udp_timeout_s = 30', '']
    for addr, mac in (neighbors or {}).items():
        out += ['[[neighbor]]', 'address = "%s"' % addr, 'mac = "%s"' % mac, '']
    for mode, backends in vips.items():
        for proto, port, kind in (("tcp", 80, "web"), ("udp", UDP_PORT, "echo")):
            out += ['[[vip]]', 'name = "%s-%s"' % (kind, mode), 'address = "%s"' % VIP[mode],
                    'protocol = "%s"' % proto, 'port = %d' % port, 'forwarding = "%s"' % mode,
                    'table_size = 4099']
            for b, w in backends.items():
                out += ['  [[vip.backend]]', '  name = "%s"' % b, '  address = "%s"' % BACKENDS[b],
                        '  weight = %d' % w]
            out.append('')
    # IPv6 VIPs: 6-in-4 GRE to the backends' IPv4 addresses, and L2 DSR to
    # their IPv6 addresses (resolved by neighbour discovery).
    v6 = [("web6-gre", VIP6["gre"], "gre", False, "tcp", 80),
          ("web6-l2dsr", VIP6["l2dsr"], "l2dsr", True, "tcp", 80)] if ipv6_vips else []
    if ipv6_udp_vips:
        v6 += [("echo6-gre", VIP6["gre"], "gre", False, "udp", UDP_PORT),
               ("echo6-l2dsr", VIP6["l2dsr"], "l2dsr", True, "udp", UDP_PORT)]
    for name, addr, mode, v6_backends, proto, port in v6:
        out += ['[[vip]]', 'name = "%s"' % name, 'address = "%s"' % addr, 'protocol = "%s"' % proto,
                'port = %d' % port, 'forwarding = "%s"' % mode, 'table_size = 4099']
        for b in ("be1", "be2", "be3"):
            out += ['  [[vip.backend]]', '  name = "%s"' % b,
                    '  address = "%s"' % (BACKENDS6[b] if v6_backends else BACKENDS[b])]
        out.append('')
    kernel = os.environ.get("MAGLB_E2E_KERNEL_INTERFACE")
    if kernel and "[kernel]" not in extra:
        extra += '\n[kernel]\ninterface = "%s"\n' % kernel
    return "\n".join(out) + "\n" + extra


def port_vdevs(workers, two_arm):
    """The DPDK virtual devices on the LB's veths (lb0; lb1 for two-arm).

    net_pcap (libpcap live capture) delivers frames exactly as on the wire:
    no PACKET_FANOUT (net_af_packet joins its sockets into a fanout group with
    PACKET_FANOUT_FLAG_DEFRAG, so the kernel reassembles IPv4 fragments before
    maglb sees them), a 9728-byte snap length (net_af_packet: 2 KB frames), and
    with iface= one socket both receives and sends, so maglb never reads its
    own frames back. phy_mac=1: the port takes the interface's MAC. Its limit:
    one queue per port. Tests of several workers therefore use net_af_packet,
    whose qpairs=N sockets the kernel's fanout hash spreads flows over; they
    send no fragments and no frame over 1500 bytes. net_tap (kernel flow
    steering over queues) stops at max_rx_pktlen 1522, net_af_xdp at one page
    a frame: neither carries jumbo frames on DPDK 22.11."""
    if workers <= 1:
        vdevs = ["--vdev=net_pcap0,iface=lb0,phy_mac=1"]
        if two_arm:
            vdevs.append("--vdev=net_pcap1,iface=lb1,phy_mac=1")
        return vdevs
    vdevs = ["--vdev=net_af_packet0,iface=lb0,qpairs=%d" % workers]
    if two_arm:
        vdevs.append("--vdev=net_af_packet1,iface=lb1,qpairs=%d" % workers)
    return vdevs


def wait_for(pred, what, timeout=10, interval=0.2, context=None):
    """Polls pred() until true; a TestFailure after `timeout` s, with the last
    error pred raised and context() (a log tail) if given."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            if pred():
                return
        except (TestFailure, KeyError, ValueError) as e:
            last = e
        time.sleep(interval)
    tail = "\n" + context()[-3000:] if context else ""
    raise TestFailure("timed out after %ds waiting for %s (%s)%s" % (timeout, what, last, tail))


def take_testbed_lock():
    """The testbed's lock (LOCK_PATH), waited for at most LOCK_WAIT_S; the
    open file holds it until closed."""
    lock = open(LOCK_PATH, "w")
    deadline = time.time() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return lock
        except BlockingIOError:
            if time.time() > deadline:
                lock.close()
                raise TestFailure("another testbed run held %s for %d s" % (LOCK_PATH, LOCK_WAIT_S))
            time.sleep(0.5)


class Testbed:
    """Context manager: testbed up + maglb running; down and checks on exit."""

    def __init__(self, config=None, workers=1, two_arm=False, link_mtu=1500, hugepages=False, extra_args=()):
        """link_mtu: the MTU of the testbed's links other than the LB's own
        (scripts/testbed.sh MLB_TESTBED_MTU); 9000 for jumbo frames.
        hugepages: run maglb on hugepages (shared memory, so that DPDK
        secondary processes such as dpdk-dumpcap can attach) instead of
        --no-huge: reserves 2 MB pages for its -m plus CAPTURE_HEADROOM_MB
        and mounts a hugetlbfs of its own (self.huge_dir), both undone at
        teardown; exit 77 (skipped) when the kernel gives fewer pages, or
        "try": run on with --no-huge then.
        extra_args: more of maglb's arguments (after "--"), e.g.
        ("--log-format", "json")."""
        self.config = config or config_text()
        self.extra_args = list(extra_args)
        self.workers = workers
        self.two_arm = two_arm
        self.link_mtu = link_mtu
        self.hugepages = hugepages
        self.huge_dir = None
        self.saved_nr_hugepages = None  # set while our reservation stands
        self.prefix = "mlb-e2e-%d" % os.getpid()
        self.proc = None
        self.stopped_rc = None  # exit code of a maglb the test stopped itself (stop())
        self.expect_clean_exit = True

    def __enter__(self):
        if os.geteuid() != 0:
            print("skipped: end-to-end tests need root (network namespaces)")
            sys.exit(77)
        for path in (MAGLB, MAGLBCTL):
            if not os.path.exists(path):
                raise TestFailure("%s not built" % path)
        self.lock = take_testbed_lock()
        self.tmp = tempfile.mkdtemp(prefix="mlb-e2e-")
        self.config_path = os.path.join(self.tmp, "maglb.toml")
        self.log_path = os.path.join(self.tmp, "maglb.log")
        with open(self.config_path, "w") as f:
            f.write(self.config)
        try:
            if self.hugepages:
                try:
                    self.reserve_hugepages()
                except HugepagesUnavailable as e:
                    if self.hugepages != "try":
                        print("skipped: %s" % e)
                        sys.exit(77)
                    log("no hugepages (%s): maglb runs with --no-huge, without packet capture" % e)
            r = subprocess.run([TESTBED, "up"], capture_output=True, text=True, timeout=60,
                               env=self.testbed_env(), pass_fds=(self.lock.fileno(),))
            if r.returncode != 0:
                if "Operation not permitted" in r.stderr:
                    print("skipped: cannot create network namespaces here")
                    sys.exit(77)
                raise TestFailure("testbed up failed:\n" + r.stdout + r.stderr)
            self.start()
        except BaseException:
            self.teardown()
            raise
        return self

    def memory_mb(self):
        # Jumbo MTUs take ~9 KB packet buffers (4x the memory of 2 KB ones).
        return 256 if self.link_mtu <= 1500 else 768

    def reserve_hugepages(self):
        """Raises nr_hugepages by what maglb (-m) and a capture tool need and
        mounts a hugetlbfs for them; teardown undoes both."""
        with open("/proc/meminfo") as f:
            meminfo = dict(line.split(":", 1) for line in f)
        page_kb = int(meminfo["Hugepagesize"].split()[0])
        if page_kb != 2048:
            raise HugepagesUnavailable("the default hugepage size is %d kB, not 2048" % page_kb)
        wanted = (self.memory_mb() + CAPTURE_HEADROOM_MB) // 2
        with open(NR_HUGEPAGES) as f:
            before = int(f.read())
        try:
            with open(NR_HUGEPAGES, "w") as f:
                f.write(str(before + wanted))
        except OSError as e:
            raise HugepagesUnavailable("cannot reserve hugepages (%s)" % e)
        self.saved_nr_hugepages = before
        with open(NR_HUGEPAGES) as f:
            got = int(f.read()) - before
        if got < wanted:
            # Memory too fragmented (or a cgroup limit): the kernel gave fewer.
            raise HugepagesUnavailable("the kernel reserved %d of %d 2 MB hugepages" % (got, wanted))
        self.huge_dir = tempfile.mkdtemp(prefix="mlb-e2e-huge-")
        run(["mount", "-t", "hugetlbfs", "-o", "pagesize=2M", "none", self.huge_dir])
        log("hugepages: %d more 2 MB pages (nr_hugepages %d -> %d), hugetlbfs on %s" %
            (wanted, before, before + got, self.huge_dir))

    def release_hugepages(self):
        """Unmounts our hugetlbfs (freeing the pages maglb's files held) and
        puts nr_hugepages back; after maglb and every capture tool stopped."""
        if self.huge_dir is not None:
            if run(["umount", self.huge_dir], check_rc=False).returncode != 0:
                # Still mapped by a straggler: detach now, freed when it exits.
                run(["umount", "-l", self.huge_dir], check_rc=False)
            try:
                os.rmdir(self.huge_dir)
            except OSError:
                pass
            self.huge_dir = None
        if self.saved_nr_hugepages is not None:
            with open(NR_HUGEPAGES, "w") as f:
                f.write(str(self.saved_nr_hugepages))
            self.saved_nr_hugepages = None

    def testbed_env(self):
        # testbed.sh takes LOCK_PATH itself; on our descriptor (inherited, the
        # same open file) it finds the lock already ours instead of waiting.
        return dict(os.environ, BUILD_DIR=BUILD_DIR, MLB_STATE=os.path.join(self.tmp, "state"),
                    MLB_TESTBED_LOCK_FD=str(self.lock.fileno()), MLB_TESTBED_MTU=str(self.link_mtu))

    def start(self):
        # lcore 0 (control) on CPU 0, workers spread over the other CPUs (a
        # 2-CPU CI machine runs two workers on CPU 1: they sleep when idle).
        cpus = os.cpu_count() or 1
        lcores = ",".join(["0@0"] + ["%d@%d" % (i, 1 + (i - 1) % (cpus - 1) if cpus > 1 else 0)
                                     for i in range(1, self.workers + 1)])
        memory = ["--huge-dir", self.huge_dir] if self.huge_dir is not None else ["--no-huge"]
        cmd = ["ip", "netns", "exec", "mlb-lb", MAGLB, *memory, "--no-pci", "-m", str(self.memory_mb()),
               "--lcores", lcores, "--file-prefix", self.prefix, "--log-level", "lib.eal:warning"]
        cmd += port_vdevs(self.workers, self.two_arm)
        cmd += ["--", "--config", self.config_path, "--idle-sleep-us", "50"]
        if self.two_arm:
            cmd += ["--backend-port", "1"]
        cmd += self.extra_args
        self.log_file = open(self.log_path, "a")
        self.proc = subprocess.Popen(cmd, stdout=self.log_file, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise TestFailure("maglb exited at start (%d):\n%s" % (self.proc.returncode, self.read_log()))
            if "started:" in self.read_log():
                break
            time.sleep(0.1)
        else:
            raise TestFailure("maglb did not start within 30 s:\n" + self.read_log())
        kernel = os.environ.get("MAGLB_E2E_KERNEL_INTERFACE")
        if kernel and ('interface = "%s"' % kernel) in self.config:
            check("kernel interface %s:" % kernel in self.read_log(),
                  "maglb runs with its kernel interface %s (MAGLB_E2E_KERNEL_INTERFACE)" % kernel)
        # Wait until every next hop is resolved (ARP through the router's bridge).
        self.wait_for(lambda: all(all(v["backend_next_hop_resolved"]) for v in self.stats()["vips"].values()),
                      "all next hops resolved", 15)

    def read_log(self):
        try:
            with open(self.log_path) as f:
                return f.read()
        except OSError:
            return ""

    def log_messages(self):
        """The text of each line of maglb's log: after "maglb: " in text
        mode, the "msg" of each JSON object in --log-format json (a line of
        neither kind as it is)."""
        out = []
        for line in self.read_log().splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line).get("msg", line))
                    continue
                except ValueError:
                    pass
            out.append(line.split(" maglb: ", 1)[1] if " maglb: " in line else line)
        return out

    def stats(self):
        r = run([MAGLBCTL, "stats", "--prefix", self.prefix, "--format", "json"], timeout=10)
        return json.loads(r.stdout)

    def telemetry(self, cmd):
        """One DPDK telemetry command ("/maglb/latency"), straight over the
        socket: its reply's value (None if maglb answered null)."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            s.settimeout(10)
            s.connect("/var/run/dpdk/%s/dpdk_telemetry.v2" % self.prefix)
            s.recv(1024)  # the greeting
            s.send(cmd.encode())
            return json.loads(s.recv(1 << 16).decode())[cmd.split(",")[0]]
        finally:
            s.close()

    def wait_for(self, pred, what, timeout=10):
        wait_for(pred, what, timeout, context=self.read_log)

    def generation(self):
        return self.stats()["stats"]["generation"]

    def write_config(self, text, atomic=True):
        """Replaces the config file as an editor would (rename) or in place."""
        if atomic:
            tmp = self.config_path + ".new"
            with open(tmp, "w") as f:
                f.write(text)
            os.rename(tmp, self.config_path)
        else:
            with open(self.config_path, "w") as f:
                f.write(text)

    def reload(self, text, atomic=True):
        """Writes a valid config and waits until maglb serves it."""
        gen = self.generation()
        self.write_config(text, atomic)
        self.wait_for(lambda: self.generation() > gen, "config generation > %d" % gen, 10)

    def stop(self):
        """SIGTERM; returns (exit code, log). Once stopped, again: the same code."""
        if self.proc is None:
            return self.stopped_rc, self.read_log()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait(timeout=5)
            self.expect_clean_exit = False
        self.proc = None
        self.stopped_rc = rc
        return rc, self.read_log()

    def teardown(self):
        if self.proc is not None:
            try:
                self.stop()
            except Exception:  # noqa: BLE001 - teardown must go on
                pass
        subprocess.run([TESTBED, "down"], capture_output=True, timeout=60, env=self.testbed_env(),
                       pass_fds=(self.lock.fileno(),))
        if hasattr(self, "log_file"):
            self.log_file.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        # EAL's runtime directory (config, telemetry socket, ~3 MB of tmpfs)
        # outlives the process; maglb is stopped by now, so it is ours to remove.
        if self.proc is None:
            shutil.rmtree(os.path.join(DPDK_RUN_DIR, self.prefix), ignore_errors=True)
        try:
            self.release_hugepages()
        finally:
            self.lock.close()  # releases the flock

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                rc, text = self.stop()
                check(rc == 0, "maglb exits with status 0 on SIGTERM (got %s)" % rc)
                check(any(m.startswith("stopped on SIGTERM") for m in self.log_messages()),
                      "maglb logs its clean stop")
            elif self.proc is not None:
                print("---- maglb log ----\n" + self.read_log()[-6000:], flush=True)
        finally:
            self.teardown()
        return False

    # --- traffic from the client namespace ---

    def curl_many(self, vip, n, timeout=60):
        """n sequential HTTP requests (new connection each); {backend: count}.
        The client ports the connections used are left in self.curl_ports
        (the kernel may give a port again once its connection has closed: the
        LB then sees the same flow again, not a new one)."""
        url = "http://[%s]/" % vip if ":" in vip else "http://%s/" % vip
        r = ns("mlb-client", "curl", "-s", "-m", "5", "--retry", "0", "-H", "Connection: close",
               "-w", " client-port=%{local_port}\n", *([url] * n), timeout=timeout, check_rc=False)
        counts = {}
        self.curl_ports = []
        for word in r.stdout.split():
            if word.startswith("client-port="):
                self.curl_ports.append(int(word[len("client-port="):]))
            else:
                counts[word] = counts.get(word, 0) + 1
        return counts

    def udp_many(self, vip, n, timeout=30):
        """n UDP echoes from n source ports; {backend: count} of the replies."""
        code = (
            "import socket,sys\n"
            "counts={}\n"
            "for i in range(%d):\n"
            "  s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.settimeout(1.0)\n"
            "  s.sendto(b'ping-%%d' %% i,('%s',%d))\n"
            "  try:\n"
            "    d,_=s.recvfrom(2048); name,_,rest=d.partition(b' ')\n"
            "    if rest==b'ping-%%d' %% i: counts[name.decode()]=counts.get(name.decode(),0)+1\n"
            "  except socket.timeout: pass\n"
            "  s.close()\n"
            "print(repr(counts))\n" % (n, vip, UDP_PORT))
        r = ns("mlb-client", "/usr/bin/python3", "-c", code, timeout=timeout)
        return eval(r.stdout.strip())  # noqa: S307 - our own repr of a dict of ints

    def start_stream(self, vip, nbytes, delay_ms=20, chunk=16384):
        """Starts a long download from the client; returns a Stream."""
        return Stream(self, vip, nbytes, delay_ms, chunk)


class Stream:
    """curl downloading /stream in the background; check() verifies it."""

    def __init__(self, tb, vip, nbytes, delay_ms, chunk):
        self.nbytes = nbytes
        self.body = os.path.join(tb.tmp, "stream-%s-%d.bin" % (vip, time.time_ns()))
        self.headers = self.body + ".hdr"
        url = "http://%s/stream?bytes=%d&chunk=%d&delay_ms=%d" % (vip, nbytes, chunk, delay_ms)
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", "mlb-client", "curl", "-s", "-S", "-m", "110", "-o", self.body,
             "-D", self.headers, url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def backend(self, timeout=5):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with open(self.headers) as f:
                    m = re.search(r"X-Backend: (\S+)", f.read())
                    if m:
                        return m.group(1)
            except OSError:
                pass
            time.sleep(0.05)
        raise TestFailure("stream: no response headers within %ds" % timeout)

    def running(self):
        return self.proc.poll() is None

    def finish(self, timeout=120):
        out, err = self.proc.communicate(timeout=timeout)
        with open(self.body, "rb") as f:
            data = f.read()
        return self.proc.returncode, err, data

    def check(self, what, timeout=120):
        rc, err, data = self.finish(timeout)
        check(rc == 0, "%s: curl completed without error (rc %d %s)" % (what, rc, err.strip()))
        check(len(data) == self.nbytes, "%s: %d of %d bytes received" % (what, len(data), self.nbytes))
        want = hashlib.sha256(backend_server.stream_bytes(self.nbytes)).hexdigest()
        got = hashlib.sha256(data).hexdigest()
        check(got == want, "%s: body identical byte for byte (sha256 %s)" % (what, got[:16]))


def _on_sigterm(signum, frame):
    # meson's timeout sends SIGTERM: unwind through the with-blocks so that
    # maglb is stopped and the testbed torn down.
    raise KeyboardInterrupt("SIGTERM")


def main(test):
    """Runs test() and maps the outcome to an exit code."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    t0 = time.time()
    try:
        test()
    except TestFailure as e:
        print("FAIL: %s" % e, flush=True)
        sys.exit(1)
    log("PASS in %.1fs" % (time.time() - t0))
