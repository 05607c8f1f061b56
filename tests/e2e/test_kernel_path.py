#!/usr/bin/python3
"""End to end: the kernel interface on the data port (the exception path).

maglb runs with [kernel] interface = "maglb0" and two workers (two queue
pairs on the tap). The kernel of mlb-lb then:
- carries the LB's addresses on maglb0 (and nothing it made up itself), with
  the LB's MAC;
- serves a real TCP server on 10.0.0.10:8080 and [fd00::10]:8080 that curl in
  mlb-client reaches through maglb (to_kernel / from_kernel counters grow);
- reaches a backend directly (curl, its ARP and ND resolved by the answers
  maglb passes up) and a VIP (out and back through the router);
while maglb alone answers ping and ARP/ND for 10.0.0.10 / fd00::10: one reply
per request (no DUP! from two stacks), and every ARP or ND frame the LB's
segment sees from the LB's addresses (captured with tshark on the router's
port to the LB) carries the LB's MAC. A flood of 20000 UDP datagrams to
10.0.0.10 is held to [kernel] rate (kernel_rate_limited) while VIP traffic
goes on. A reload of [kernel] rate applies at once, one of the interface
says it applies at the next restart. SIGTERM exits 0 and maglb0 is gone."""
import os
import re
import subprocess
import threading
import time

import lbtest
from lbtest import BACKENDS, LB_IP, LB_IP6, LB_MAC, VIP, check, log, ns

RATE = 1000    # [kernel] rate: frames per second per worker to the kernel
BURST = 1000
WORKERS = 2
FLOOD = 20000
LINK_LOCAL = "fe80::4d:4cff:fe00:a"  # fe80::/64 + the EUI-64 of LB_MAC
KERNEL_BODY = "served by the kernel of mlb-lb\n"


def kernel_config(rate=RATE, interface="maglb0"):
    return lbtest.config_text(extra='[kernel]\ninterface = "%s"\nrate = %d\nburst = %d\n' %
                              (interface, rate, BURST))


class Background:
    """A process in a namespace, ended (by its PID) when done."""

    def __init__(self, nsname, *cmd, **kw):
        self.proc = subprocess.Popen(["ip", "netns", "exec", nsname] + list(cmd),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate(timeout=5)
        return out


def counter(tb, name):
    return tb.stats()["stats"][name]


def curl_kernel(url, n):
    """n requests from the client to the kernel's server; how many answered with its body."""
    r = ns("mlb-client", "curl", "-s", "-m", "5", "-g", *([url] * n), timeout=60, check_rc=False)
    return r.stdout.count(KERNEL_BODY.strip())


def wait_listening(tb, address):
    tb.wait_for(lambda: ("%s:8080" % address) in ns("mlb-lb", "ss", "-ltn").stdout,
                "the kernel's server listening on %s:8080" % address, 15)


def check_interface(tb):
    log_text = tb.read_log()
    check(re.search(r"kernel interface maglb0: port \d+ net_tap_maglb0, mac %s, mtu 1500, %d queue pairs, \d+ packet buffers, "
                    r"addresses 10\.0\.0\.10/24 fd00::10/64 %s/64" % (LB_MAC, WORKERS, LINK_LOCAL),
                    log_text) is not None,
          "maglb logs the kernel interface it made")
    link = ns("mlb-lb", "ip", "-d", "link", "show", "maglb0").stdout
    check(LB_MAC in link and "mtu 1500" in link and "tun type tap" in link and "numqueues %d" % WORKERS in link,
          "maglb0 is a tap with the LB's MAC, mtu 1500 and %d queues" % WORKERS)
    addrs = ns("mlb-lb", "ip", "-o", "addr", "show", "dev", "maglb0").stdout
    v4 = re.findall(r"inet (\S+)", addrs)
    v6 = sorted(re.findall(r"inet6 (\S+)", addrs))
    check(v4 == ["10.0.0.10/24"] and v6 == sorted(["fd00::10/64", LINK_LOCAL + "/64"]),
          "maglb0 carries the LB's addresses and no other (%s %s)" % (v4, v6))


def neighbor_frames(pcap):
    """(eth src, kind, sender IP, link-layer addresses stated) of every ARP and
    ND frame in the capture."""
    r = lbtest.run(["tshark", "-r", pcap, "-T", "fields", "-E", "separator=|", "-e", "eth.src", "-e", "arp.opcode",
                    "-e", "arp.src.proto_ipv4", "-e", "arp.src.hw_mac", "-e", "ipv6.src", "-e", "icmpv6.type",
                    "-e", "icmpv6.opt.linkaddr", "arp or icmpv6.type == 135 or icmpv6.type == 136"],
                   timeout=60)
    out = []
    for line in r.stdout.splitlines():
        f = line.split("|")
        if len(f) < 7:
            continue
        eth, op, spa, sha, src6, t6, lla = f[:7]
        if op:
            out.append((eth, "arp-reply" if op == "2" else "arp-request", spa, [sha]))
        elif t6:
            out.append((eth, "na" if t6 == "136" else "ns", src6, [a for a in lla.split(",") if a]))
    return out


def test():
    with lbtest.Testbed(config=kernel_config(), workers=WORKERS) as tb:
        check_interface(tb)
        r = subprocess.run([lbtest.TESTBED, "kernel-routes"], capture_output=True, text=True, timeout=30,
                           env=tb.testbed_env(), pass_fds=(tb.lock.fileno(),))
        check(r.returncode == 0, "testbed kernel-routes: default routes of mlb-lb via the router on maglb0")

        # Everything the LB sends on its segment, for the ARP/ND check at the end.
        pcap = os.path.join(tb.tmp, "lb-segment.pcap")
        capture = Background("mlb-router", "tshark", "-q", "-i", "lbp", "-f", "arp or icmp6", "-w", pcap)
        time.sleep(2)  # tshark takes its time to start capturing

        # The router's entry for the LB: maglb's answer (from scratch, and again).
        ns("mlb-router", "ip", "neigh", "flush", "dev", "br0")
        r = ns("mlb-router", "ping", "-c", "10", "-i", "0.1", "-W", "1", LB_IP, check_rc=False)
        check(r.returncode == 0 and "10 received" in r.stdout and "DUP" not in r.stdout,
              "ping %s: 10 requests, 10 replies, no duplicate from a second stack" % LB_IP)
        r = ns("mlb-router", "ping", "-6", "-c", "10", "-i", "0.1", "-W", "1", LB_IP6, check_rc=False)
        check(r.returncode == 0 and "10 received" in r.stdout and "DUP" not in r.stdout,
              "ping %s: 10 requests, 10 replies, no duplicate" % LB_IP6)
        r = ns("mlb-router", "ping", "-6", "-c", "3", "-i", "0.1", "-W", "1", LINK_LOCAL + "%br0", check_rc=False)
        check(r.returncode == 0 and "3 received" in r.stdout and "DUP" not in r.stdout,
              "ping %s (the kernel interface's link-local address): answered once each" % LINK_LOCAL)
        neigh = ns("mlb-router", "ip", "neigh", "show", LB_IP).stdout
        check(LB_MAC in neigh, "the router's entry for %s is the LB's MAC (%s)" % (LB_IP, neigh.strip()))

        # A real server in the LB's kernel, reached from the client through maglb.
        docroot = os.path.join(tb.tmp, "www")
        os.makedirs(docroot)
        with open(os.path.join(docroot, "kernel.txt"), "w") as f:
            f.write(KERNEL_BODY)
        servers = [Background("mlb-lb", "/usr/bin/python3", "-m", "http.server", "--bind", addr, "--directory",
                              docroot, "8080") for addr in (LB_IP, LB_IP6)]
        try:
            wait_listening(tb, LB_IP)
            wait_listening(tb, "[%s]" % LB_IP6)
            before = tb.stats()["stats"]
            n = curl_kernel("http://%s:8080/kernel.txt" % LB_IP, 20)
            check(n == 20, "curl from mlb-client to the kernel's server on %s:8080: %d/20 answered" % (LB_IP, n))
            n6 = curl_kernel("http://[%s]:8080/kernel.txt" % LB_IP6, 20)
            check(n6 == 20, "curl -6 from mlb-client to [%s]:8080: %d/20 answered" % (LB_IP6, n6))
            after = tb.stats()["stats"]
            up = after["to_kernel_packets"] - before["to_kernel_packets"]
            down = after["from_kernel_packets"] - before["from_kernel_packets"]
            check(up >= 40 * 3 and down >= 40 * 3 and after["to_kernel_bytes"] > before["to_kernel_bytes"]
                  and after["from_kernel_bytes"] > before["from_kernel_bytes"],
                  "counted: %d frames (%d bytes) to the kernel, %d (%d bytes) from it" %
                  (up, after["to_kernel_bytes"] - before["to_kernel_bytes"], down,
                   after["from_kernel_bytes"] - before["from_kernel_bytes"]))
            text = lbtest.run([lbtest.MAGLBCTL, "stats", "--prefix", tb.prefix], timeout=10).stdout
            check(re.search(r"kernel interface: \d+ frames \d+ bytes up to it, \d+ frames \d+ bytes from it", text)
                  is not None, "maglbctl stats shows the kernel interface's counters")
        finally:
            for s in servers:
                s.stop()

        # The kernel reaches a backend directly, resolving it by ARP / ND
        # through maglb; and a VIP, out and back through the router.
        ns("mlb-lb", "ip", "neigh", "flush", "dev", "maglb0")
        r = ns("mlb-lb", "curl", "-s", "-m", "5", "http://%s/" % BACKENDS["be1"], check_rc=False)
        check(r.stdout.strip() == "be1", "curl http://%s/ from mlb-lb's kernel answers %r" % (BACKENDS["be1"], r.stdout))
        neigh = ns("mlb-lb", "ip", "neigh", "show", BACKENDS["be1"]).stdout
        check("02:4d:4c:00:01:11" in neigh, "mlb-lb's kernel resolved be1 by ARP: %s" % neigh.strip())
        r = ns("mlb-lb", "curl", "-s", "-m", "5", "-g", "http://[%s]/" % lbtest.BACKENDS6["be2"], check_rc=False)
        check(r.stdout.strip() == "be2", "curl -6 http://[%s]/ from mlb-lb's kernel answers %r" %
              (lbtest.BACKENDS6["be2"], r.stdout))
        neigh6 = ns("mlb-lb", "ip", "-6", "neigh", "show", lbtest.BACKENDS6["be2"]).stdout
        check("02:4d:4c:00:01:12" in neigh6, "mlb-lb's kernel resolved be2 by ND: %s" % neigh6.strip())
        r = ns("mlb-lb", "curl", "-s", "-m", "5", "http://%s/" % VIP["gre"], check_rc=False)
        check(r.stdout.strip() in ("be1", "be2", "be3"),
              "curl to the GRE VIP from mlb-lb's kernel is balanced like anyone's: %r" % r.stdout)
        r = ns("mlb-lb", "ping", "-c", "3", "-i", "0.2", "-W", "1", "10.0.1.2", check_rc=False)
        check(r.returncode == 0 and "3 received" in r.stdout, "the kernel's pings to the client are answered")

        # A flood at the LB's address: held to the rate, VIPs keep working.
        before = tb.stats()["stats"]
        during = {}
        def vip_traffic():
            during.update(tb.curl_many(VIP["ipip"], 30, timeout=90))
        t = threading.Thread(target=vip_traffic)
        t0 = time.time()
        t.start()
        code = ("import socket\n"
                "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
                "for i in range(%d): s.sendto(b'flood-%%06d' %% i,('%s',9))\n" % (FLOOD, LB_IP))
        ns("mlb-client", "/usr/bin/python3", "-c", code, timeout=120)
        t.join(timeout=120)
        check(sum(during.values()) == 30, "30 curl requests to the IP-in-IP VIP during the flood: all answered %s" %
              dict(during))
        tb.wait_for(lambda: counter(tb, "rx_packets") >= before["rx_packets"] + FLOOD * 0.5, "the flood received")
        time.sleep(1)
        after = tb.stats()["stats"]
        elapsed = time.time() - t0
        limited = after["drop_kernel_rate_limited"] - before["drop_kernel_rate_limited"]
        up = after["to_kernel_packets"] - before["to_kernel_packets"]
        allowed = WORKERS * (BURST + RATE * elapsed)
        check(limited >= FLOOD / 4, "flood of %d datagrams: %d dropped as kernel_rate_limited" % (FLOOD, limited))
        check(up <= allowed, "%d frames went up to the kernel during %.1f s, within %d workers x (burst %d + "
              "%d/s) = %d" % (up, elapsed, WORKERS, BURST, RATE, allowed))
        check(after["kernel_queue_full"] == 0, "the kernel's queues never refused a frame")
        counts = tb.curl_many(VIP["gre"], 30)
        check(sum(counts.values()) == 30, "after the flood: 30/30 requests to the GRE VIP answered %s" % counts)

        # What the segment saw from the LB's addresses: ARP and ND, all at one MAC.
        time.sleep(1)
        capture.stop()
        frames = neighbor_frames(pcap)
        ours = [f for f in frames if f[2] in (LB_IP, LB_IP6, LINK_LOCAL)]
        kinds = {f[1] for f in ours}
        log("captured on the router's port to the LB: %d ARP/ND frames, %d from the LB's addresses (%s)" %
            (len(frames), len(ours), sorted(kinds)))
        check({"arp-reply", "arp-request", "na", "ns"} <= kinds,
              "maglb's ARP replies and NAs and the kernel's ARP requests and NSes were captured")
        wrong = [f for f in ours if f[0] != LB_MAC or any(m != LB_MAC for m in f[3])]
        check(not wrong, "every ARP/ND frame from %s, %s and %s names the LB's MAC only %s" %
              (LB_IP, LB_IP6, LINK_LOCAL, wrong[:5]))
        neigh = ns("mlb-router", "ip", "neigh", "show", LB_IP).stdout
        check(LB_MAC in neigh, "the router's entry for %s is still %s" % (LB_IP, LB_MAC))

        # Reloads: the rate applies at once; the interface at the next start.
        def reload_line(generation):
            m = re.search(r"reload \([^)]*\): generation %d\b[^\n]*" % generation, tb.read_log())
            return m.group(0) if m else ""
        gen = tb.generation()
        tb.reload(kernel_config(rate=RATE * 2))
        line = reload_line(gen + 1)
        check(line and "next restart" not in line, "a reload of [kernel] rate applies at once: %s" % line)
        tb.reload(kernel_config(rate=RATE * 2, interface="maglb1"))
        line = reload_line(gen + 2)
        check("[kernel] interface and prefix lengths apply at the next restart" in line,
              "a reload of [kernel] interface says so: %s" % line)
        r = ns("mlb-lb", "ip", "link", "show", "maglb1", check_rc=False)
        check(r.returncode != 0 and ns("mlb-lb", "ip", "link", "show", "maglb0").returncode == 0,
              "maglb0 stays, no maglb1")

        rc, text = tb.stop()
        check(rc == 0 and "maglb: stopped on SIGTERM" in text, "SIGTERM: maglb exits 0")
        r = ns("mlb-lb", "ip", "link", "show", "maglb0", check_rc=False)
        check(r.returncode != 0, "maglb0 is gone once maglb stopped")


if __name__ == "__main__":
    lbtest.main(test)
