#!/usr/bin/python3
"""End to end: capturing a running maglb with DPDK's own tools.

dpdk-dumpcap and dpdk-pdump are DPDK secondary processes: they attach to
maglb's hugepage memory (same --file-prefix) and ask it to copy its ports'
packets into a ring of theirs (src/dataplane/capture.h). maglb runs on
hugepages here (lbtest.Testbed(hugepages=True)); tshark, which nobody here
wrote, decodes what they wrote.

1. One-arm with a kernel interface (maglb0). maglb says capture is
   available and how; `dpdk-dumpcap -D` lists the data port and the kernel
   interface's tap. Two dumpcaps (one port each) capture both while curl runs
   through the GRE and the IP-in-IP VIP and a TCP connection from the router
   reaches the kernel:
   every curl is answered; each client SYN to a VIP was received (inbound)
   and sent (outbound) to a backend encapsulated (outer 10.0.0.10 -> backend,
   GRE carrying IPv4 / IP protocol 4, inner client -> VIP:80), the backends of
   the encapsulated flows are exactly those curl was answered by, as often;
   the tap shows the SYN maglb passed up to the kernel and the kernel's RST;
   dumpcap dropped nothing and wrote what it counted. maglb serves on after.
   dpdk-pdump (pcap files per direction) sees the same of the IP-in-IP VIP.
   Then maglb stops while dumpcap captures: maglb exits 0, dumpcap follows.
2. Two-arm: dumpcaps on both ports see client SYNs come in by the front
   port and their GRE leave by the backend port. A dumpcap killed (SIGKILL)
   during a capture leaves maglb forwarding (a download across the kill is
   whole) and stopping cleanly.
3. --no-huge (how every other test runs): maglb warns once that capture
   needs hugepages; dumpcap cannot attach, and maglb serves on."""
import os
import re
import signal
import subprocess
import time

import lbtest
from lbtest import BACKENDS, LB_IP, VIP, check, log, ns

CLIENT_IP = "10.0.1.2"
ROUTER_IP = "10.0.0.1"
CURLS = 20
KERNEL_PORT = 9  # nothing listens: the kernel of mlb-lb answers RST
IP_PROTO = {"gre": 47, "ipip": 4}
BACKEND_BY_IP = {ip: name for name, ip in BACKENDS.items()}
INBOUND, OUTBOUND = 1, 2  # pcapng epb_flags direction


class Dumpcap:
    """dpdk-dumpcap in mlb-lb capturing `port` of the testbed's maglb. One
    port each: given several -i, 22.11's dumpcap captures only the last."""

    def __init__(self, tb, name, port):
        self.port = port
        self.path = os.path.join(tb.tmp, name + ".pcapng")
        self.err_path = os.path.join(tb.tmp, name + ".err")
        cmd = ["ip", "netns", "exec", "mlb-lb", "dpdk-dumpcap", "--file-prefix", tb.prefix, "-i", port,
               "-w", self.path]
        with open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        # It prints "Packets captured:" once the ports' callbacks are in.
        deadline = time.time() + 30
        while "Packets captured:" not in self.stderr():
            if self.proc.poll() is not None or time.time() > deadline:
                self.proc.kill()
                raise lbtest.TestFailure("dpdk-dumpcap did not start capturing (rc %s):\n%s" %
                                         (self.proc.poll(), self.stderr()))
            time.sleep(0.1)
        log("dpdk-dumpcap captures %s" % port)

    def stderr(self):
        with open(self.err_path) as f:
            return f.read()

    def wait(self, timeout=15):
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate(timeout=5)
            raise lbtest.TestFailure("dpdk-dumpcap did not exit within %d s:\n%s" % (timeout, self.stderr()))
        return self.proc.returncode, out + self.stderr()

    def stop(self):
        """Ctrl-C, as an operator ends it; checks its report (it dropped
        nothing, wrote what it counted) and returns the decoded frames."""
        self.proc.send_signal(signal.SIGINT)
        rc, out = self.wait()
        check(rc == 0, "dpdk-dumpcap on %s exits 0 on Ctrl-C (got %d)" % (self.port, rc))
        m = re.search(r"Packets received/dropped on interface '([^']*)': (\d+)/(\d+)", out)
        check(m is not None, "dpdk-dumpcap reports its count%s" % ("" if m else ":\n" + out))
        received, dropped = int(m.group(2)), int(m.group(3))
        written = frame_count(self.path)
        check(dropped == 0 and written == received, "dpdk-dumpcap on %s dropped nothing and wrote the %d "
              "packets it counted (%d in the file)" % (m.group(1), received, written))
        return decode(self.path)


def decode(path):
    """The TCP frames of a capture, as tshark dissects them: one dict each,
    'ips' the IP headers outermost first as (src, dst, protocol)."""
    r = lbtest.run(["tshark", "-r", path, "-Y", "tcp", "-T", "fields", "-E", "separator=/t",
                    "-e", "frame.packet_flags_direction", "-e", "ip.src",
                    "-e", "ip.dst", "-e", "ip.proto", "-e", "gre.proto", "-e", "tcp.srcport",
                    "-e", "tcp.dstport", "-e", "tcp.flags.syn", "-e", "tcp.flags.ack",
                    "-e", "tcp.flags.reset"], timeout=60)
    frames = []
    for line in r.stdout.splitlines():
        f = line.split("\t")
        if len(f) != 10 or not f[1]:
            continue  # IPv6 frames (no ip.src): not looked at here
        ips = list(zip(f[1].split(","), f[2].split(","), [int(p) for p in f[3].split(",")]))
        frames.append({
            "direction": int(f[0], 16) & 3 if f[0] else 0, "ips": ips, "gre_proto": f[4],
            "sport": int(f[5]), "dport": int(f[6]), "syn": f[7] in ("1", "True"),
            "ack": f[8] in ("1", "True"), "rst": f[9] in ("1", "True")})
    return frames


def frame_count(path):
    r = lbtest.run(["tshark", "-r", path, "-T", "fields", "-e", "frame.number"], timeout=60)
    return len(r.stdout.split())


def client_syns(frames, vip, direction=None):
    """Source ports of the client's SYNs to vip:80 as received (no tunnel)."""
    return {f["sport"] for f in frames
            if f["ips"] == [(CLIENT_IP, vip, 6)] and f["dport"] == 80 and f["syn"] and not f["ack"]
            and (direction is None or f["direction"] == direction)}


def encapsulated_syns(frames, mode, vip, direction=None):
    """{client source port: backend} of the client's SYNs to vip:80 inside
    a tunnel of `mode` from the LB to a backend."""
    out = {}
    for f in frames:
        if len(f["ips"]) != 2 or f["dport"] != 80 or not f["syn"] or f["ack"]:
            continue
        (osrc, odst, oproto), inner = f["ips"]
        if osrc != LB_IP or odst not in BACKEND_BY_IP or oproto != IP_PROTO[mode] or inner != (CLIENT_IP, vip, 6):
            continue
        if mode == "gre" and f["gre_proto"] != "0x0800":
            continue
        if direction is None or f["direction"] == direction:
            out[f["sport"]] = BACKEND_BY_IP[odst]
    return out


def check_vip_capture(rx_frames, tx_frames, mode, answered, directions=True):
    """The captures hold each curl's SYN in (rx_frames) and, encapsulated,
    out toward the backend that answered it (tx_frames)."""
    vip = VIP[mode]
    rx = client_syns(rx_frames, vip, INBOUND if directions else None)
    tx = encapsulated_syns(tx_frames, mode, vip, OUTBOUND if directions else None)
    check(len(rx) == CURLS, "%s: the capture holds the client's SYN of each of the %d connections as "
          "received (%d)" % (mode, CURLS, len(rx)))
    check(set(tx) == rx, "%s: each of them leaves encapsulated (outer %s -> backend, %s) with the "
          "client's SYN to %s:80 inside" % (mode, LB_IP, "GRE/IPv4" if mode == "gre" else "IP protocol 4", vip))
    per_backend = {}
    for backend in tx.values():
        per_backend[backend] = per_backend.get(backend, 0) + 1
    check(per_backend == answered, "%s: backends of the captured tunnels %s = those that answered curl %s" %
          (mode, sorted(per_backend.items()), sorted(answered.items())))


def curl_all(tb, mode, what):
    answered = tb.curl_many(VIP[mode], CURLS)
    check(sum(answered.values()) == CURLS, "%s: all %d curls through the %s VIP answered (%s)" %
          (what, CURLS, mode, answered))
    return answered


def one_arm_with_kernel_interface():
    config = lbtest.config_text(extra='[kernel]\ninterface = "maglb0"\n')
    with lbtest.Testbed(config=config, hugepages=True) as tb:
        line = [x for x in tb.read_log().splitlines() if "packet capture" in x]
        check(len(line) == 1 and "packet capture available: dpdk-dumpcap --file-prefix %s " % tb.prefix in line[0],
              "maglb logs once that capture is available, with the command (%s)" %
              (line[0].split("maglb: ")[1] if line else "none"))
        r = ns("mlb-lb", "dpdk-dumpcap", "--file-prefix", tb.prefix, "-D", timeout=60)
        listed = dict(re.findall(r"^(\d+)\. (\S+)$", r.stdout, re.M))
        check(listed.get("0") == "net_pcap0" and "net_tap_maglb0" in listed.values(),
              "dpdk-dumpcap -D lists the data port (0. net_pcap0) and the kernel interface's tap (%s)" % listed)

        # Two at once, one per port.
        data_cap, tap_cap = Dumpcap(tb, "data", "net_pcap0"), Dumpcap(tb, "tap", "net_tap_maglb0")
        answered = {m: curl_all(tb, m, "during the capture") for m in ("gre", "ipip")}
        r = ns("mlb-router", "curl", "-s", "-m", "5", "http://%s:%d/" % (LB_IP, KERNEL_PORT), check_rc=False)
        check(r.returncode == 7, "a TCP connection from the router to %s:%d is refused by the kernel of "
              "mlb-lb (curl exit 7, got %d)" % (LB_IP, KERNEL_PORT, r.returncode))
        frames, tap_frames = data_cap.stop(), tap_cap.stop()
        for mode in ("gre", "ipip"):
            check_vip_capture(frames, frames, mode, answered[mode])
        to_kernel = [f for f in tap_frames if f["direction"] == OUTBOUND and f["syn"]
                     and f["ips"] == [(ROUTER_IP, LB_IP, 6)] and f["dport"] == KERNEL_PORT]
        from_kernel = [f for f in tap_frames if f["direction"] == INBOUND and f["rst"]
                       and f["ips"] == [(LB_IP, ROUTER_IP, 6)] and f["sport"] == KERNEL_PORT]
        check(to_kernel and from_kernel, "on the tap: the SYN maglb passed up to the kernel (%d) and the "
              "kernel's RST (%d)" % (len(to_kernel), len(from_kernel)))
        curl_all(tb, "gre", "after the capture")

        # dpdk-pdump: one pcap file per direction through net_pcap devices of its own.
        rx_pcap, tx_pcap = os.path.join(tb.tmp, "pdump-rx.pcap"), os.path.join(tb.tmp, "pdump-tx.pcap")
        pdump = subprocess.Popen(
            ["ip", "netns", "exec", "mlb-lb", "dpdk-pdump", "--file-prefix", tb.prefix, "--", "--pdump",
             "port=0,queue=*,rx-dev=%s,tx-dev=%s" % (rx_pcap, tx_pcap)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        # No line says it is ready: its pcap files appear when its devices start.
        tb.wait_for(lambda: os.path.exists(rx_pcap) and os.path.exists(tx_pcap), "dpdk-pdump's files", 30)
        time.sleep(1)  # its enable request follows the devices
        pdump_answered = curl_all(tb, "ipip", "during dpdk-pdump")
        pdump.send_signal(signal.SIGINT)
        out, _ = pdump.communicate(timeout=15)
        check(pdump.returncode == 0, "dpdk-pdump exits 0 on Ctrl-C (got %d)" % pdump.returncode)
        rx_frames, tx_frames = decode(rx_pcap), decode(tx_pcap)
        check_vip_capture(rx_frames, tx_frames, "ipip", pdump_answered, directions=False)
        check(not encapsulated_syns(rx_frames, "ipip", VIP["ipip"]) and not client_syns(tx_frames, VIP["ipip"]),
              "dpdk-pdump: the client's SYNs in the rx file, the encapsulated ones in the tx file")
        curl_all(tb, "ipip", "after dpdk-pdump")

        # maglb stops while a capture runs: it exits as always, the tool follows.
        cap = Dumpcap(tb, "at-stop", "0")
        rc, text = tb.stop()
        check(rc == 0 and "stopped on SIGTERM" in text, "maglb stops cleanly (0) while dpdk-dumpcap captures")
        rc, out = cap.wait(timeout=15)
        check("Primary process is no longer active" in out,
              "dpdk-dumpcap ends by itself when maglb is gone (exit %d)" % rc)


def two_arm_and_killed_capture():
    # As test_two_arm: the gateway behind the backend port, a static neighbour.
    vips = {m: {"be1": 1, "be2": 1, "be3": 1} for m in ("gre", "ipip")}
    config = lbtest.config_text(vips, gateway_v4="10.0.2.1", ipv6_vips=False,
                                neighbors={"10.0.2.1": "02:4d:4c:00:02:01"})
    with lbtest.Testbed(config, two_arm=True, hugepages=True) as tb:
        front, backend = Dumpcap(tb, "front", "net_pcap0"), Dumpcap(tb, "backend", "net_pcap1")
        answered = curl_all(tb, "gre", "two-arm, during the capture")
        front_frames, backend_frames = front.stop(), backend.stop()
        check_vip_capture(front_frames, backend_frames, "gre", answered)
        check(not encapsulated_syns(front_frames, "gre", VIP["gre"]),
              "two-arm: no encapsulated SYN leaves by the front port")

        cap = Dumpcap(tb, "killed", "1")
        stream = tb.start_stream(VIP["gre"], 2_000_000, delay_ms=20)
        stream.backend()
        cap.proc.kill()
        cap.proc.wait(timeout=10)
        log("dpdk-dumpcap killed (SIGKILL) while a download runs")
        stream.check("download during and after the killed capture")
        curl_all(tb, "gre", "after the killed capture")
        curl_all(tb, "ipip", "after the killed capture")
        # Its callbacks stay on the ports (DPDK 22.11 cannot remove them for a
        # dead tool): a new capture of those ports is refused until maglb
        # restarts. Said in the README; shown here, not asserted (a later DPDK
        # may do better).
        r = ns("mlb-lb", "dpdk-dumpcap", "--file-prefix", tb.prefix, "-i", "1", "-w",
               os.path.join(tb.tmp, "after-kill.pcapng"), "-a", "duration:1", timeout=60, check_rc=False)
        log("a new dpdk-dumpcap after the killed one: exit %d, %s" %
            (r.returncode, (r.stderr.strip().splitlines() or [""])[-1]))
        curl_all(tb, "gre", "after the refused capture")


def no_hugepages():
    with lbtest.Testbed() as tb:
        line = [x for x in tb.read_log().splitlines() if "packet capture" in x]
        check(len(line) == 1 and "warning: packet capture unavailable: with --no-huge" in line[0],
              "with --no-huge maglb warns once that capture needs hugepages")
        r = ns("mlb-lb", "dpdk-dumpcap", "--file-prefix", tb.prefix, "-i", "0", "-w",
               os.path.join(tb.tmp, "no-huge.pcapng"), "-a", "duration:1", timeout=60, check_rc=False)
        check(r.returncode != 0, "dpdk-dumpcap cannot attach to a --no-huge maglb (exit %d: %s)" %
              (r.returncode, " / ".join(r.stderr.strip().splitlines()[:2])))
        curl_all(tb, "gre", "after the failed attach")


def test():
    one_arm_with_kernel_interface()
    two_arm_and_killed_capture()
    no_hugepages()


if __name__ == "__main__":
    lbtest.main(test)
