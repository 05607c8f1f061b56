#!/usr/bin/env python3
"""The outer IPv4 header checksum computed by a real PMD (dataplane/offloads.h):
maglb one-arm on net_tap, which offers RTE_ETH_TX_OFFLOAD_IPV4_CKSUM and
computes it (in software, from the mbuf's l2_len/l3_len) for frames marked
RTE_MBUF_F_TX_IP_CKSUM. TCP SYNs to a GRE VIP are sent into the tap from its
kernel side (an AF_PACKET socket), and the GRE frames maglb sends back out
of it are read there: each must carry a valid outer checksum (maglb left it
0), the inner packet as sent. maglb's log and its telemetry must say the port
uses the offload (else the software path would have made the same frames and
this would test nothing). SYNs with a broken IPv4 header checksum, which the
tap's receive offload reports bad, are dropped as bad_ipv4_checksum and
none leaves. In a network namespace of its own (the tap appears there);
root only, else skipped (exit 77)."""
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

import lbtest

IFACE = "mlbtxoff0"
VIP = "198.51.100.80"
FLOWS = 200
BROKEN = 10


def config_text():
    lines = ['[lb]', 'ipv4 = "192.0.2.10"', 'gateway_v4 = "192.0.2.1"', '',
             '[[neighbor]]', 'address = "192.0.2.1"', 'mac = "02:00:00:00:00:01"', '',
             '[[vip]]', 'name = "web"', 'address = "%s"' % VIP, 'protocol = "tcp"', 'port = 80',
             'forwarding = "gre"']
    for i in (1, 2, 3):
        lines += ['  [[vip.backend]]', '  name = "be%d"' % i, '  address = "203.0.113.%d"' % i]
    return "\n".join(lines) + "\n"


def ones_sum(b):
    t = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while t >> 16:
        t = (t & 0xFFFF) + (t >> 16)
    return t


def syn(mac, i):
    """A TCP SYN from 10.0.x.y:1024+i to the VIP, checksums valid."""
    src, dst = bytes([10, 0, i >> 8, i & 255]), socket.inet_aton(VIP)
    tcp = struct.pack("!HHIIBBHHH", 1024 + i, 80, i, 0, 0x50, 0x02, 65535, 0, 0)
    tcp = tcp[:16] + struct.pack("!H", 0xFFFF - ones_sum(src + dst + struct.pack("!BBH", 0, 6, len(tcp)) + tcp)) + \
        tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, (i * 4) & 0xFF, 20 + len(tcp), i, 0x4000, 64, 6, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", 0xFFFF - ones_sum(ip)) + ip[12:]
    return mac + bytes.fromhex("02000000aa01") + b"\x08\x00" + ip + tcp


def inside(tmp):
    """In the test's namespace: maglb, the frames, the checks."""
    config = os.path.join(tmp, "maglb.toml")
    with open(config, "w") as f:
        f.write(config_text())
    prefix = "mlb-txoff-%d" % os.getpid()
    log_path = os.path.join(tmp, "maglb.log")
    cmd = [lbtest.MAGLB, "--no-huge", "--no-pci", "-m", "256", "-l", "0,1", "--file-prefix", prefix,
           "--vdev=net_tap0,iface=%s" % IFACE, "--", "--config", config, "--idle-sleep-us", "50"]
    with open(log_path, "w") as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)

    def maglb_log():
        with open(log_path) as f:
            return f.read()

    try:
        lbtest.wait_for(lambda: "maglb: started:" in maglb_log() or p.poll() is not None, "maglb to start",
                        timeout=60, context=maglb_log)
        m = re.search(r"started: port 0 \S+ \(net_tap\) mac ([0-9a-f:]{17})", maglb_log())
        lbtest.check(m is not None, "maglb started on the tap" + ("" if m else ":\n" + maglb_log()))
        mac = bytes.fromhex(m.group(1).replace(":", ""))
        lbtest.check("port 0 net_tap0 (net_tap): offloads rx_ipv4_cksum tx_ipv4_cksum" in maglb_log(),
                     "the log says the port computes IPv4 header checksums")
        def stats():
            out = subprocess.run([lbtest.MAGLBCTL, "stats", "--prefix", prefix, "--format", "json"],
                                 capture_output=True, text=True, timeout=30, check=True).stdout
            return json.loads(out)["stats"]

        lbtest.check(stats().get("offloads") == "0: rx_ipv4_cksum tx_ipv4_cksum",
                     "telemetry says so too (offloads: %s)" % stats().get("offloads"))
        # No IPv6 on the kernel's side: nothing of its own (ND, MLD) for maglb to answer.
        subprocess.run(["sysctl", "-qw", "net.ipv6.conf.%s.disable_ipv6=1" % IFACE], check=True)
        subprocess.run(["ip", "link", "set", IFACE, "up"], check=True)
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))  # ETH_P_ALL
        s.bind((IFACE, 0))
        s.settimeout(0.2)
        sent = {}
        for i in range(FLOWS):
            f = syn(mac, i)
            sent[f[14:]] = i
            s.send(f)
            time.sleep(0.001)
        good, bad, deadline = 0, [], time.time() + 10
        while time.time() < deadline and good + len(bad) < FLOWS:
            try:
                f = s.recv(4096)
            except socket.timeout:
                continue
            if len(f) < 38 or f[6:12] != mac or f[12:14] != b"\x08\x00" or f[23] != 47:
                continue  # not maglb's GRE (the kernel's own frames, ours looped back)
            inner = f[38:]
            if ones_sum(f[14:34]) != 0xFFFF or inner not in sent:
                bad.append(f[14:60].hex())
            else:
                good += 1
        lbtest.log("%d SYNs in; GRE out: %d with a valid outer checksum and the inner packet as sent, %d not: %s"
                   % (FLOWS, good, len(bad), bad[:3]))
        lbtest.check(good == FLOWS and not bad, "every GRE frame's outer checksum computed by net_tap")
        # A broken header checksum: the NIC's verdict (or the software check) drops it.
        before = stats()
        for i in range(FLOWS, FLOWS + BROKEN):
            f = bytearray(syn(mac, i))
            f[24] ^= 0x5A
            s.send(bytes(f))
        lbtest.wait_for(lambda: stats()["drop_bad_ipv4_checksum"] - before["drop_bad_ipv4_checksum"] == BROKEN,
                        "%d drops as bad_ipv4_checksum" % BROKEN, context=lambda: json.dumps(stats()))
        after = stats()
        lbtest.check(after["tx_packets"] == before["tx_packets"], "none of them forwarded")
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        shutil.rmtree(os.path.join(lbtest.DPDK_RUN_DIR, prefix), ignore_errors=True)
        lbtest.log("maglb's log:\n%s" % maglb_log().strip())
    lbtest.check(p.returncode == 0, "maglb stopped cleanly (rc %s)" % p.returncode)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--inside":
        inside(sys.argv[2])
        print("PASS")
        return 0
    if os.geteuid() != 0:
        print("skipped: needs root (a network namespace, a tap)")
        return 77
    netns = "mlb-txoff-%d" % os.getpid()
    if subprocess.run(["ip", "netns", "add", netns], capture_output=True).returncode != 0:
        print("skipped: cannot create network namespaces here")
        return 77
    tmp = tempfile.mkdtemp(prefix="mlb-txoff-")
    try:
        return subprocess.run(["ip", "netns", "exec", netns, sys.executable, os.path.abspath(__file__),
                               "--inside", tmp], timeout=300).returncode
    finally:
        subprocess.run(["ip", "netns", "del", netns], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except lbtest.TestFailure as e:
        print("FAIL: %s" % e)
        sys.exit(1)
