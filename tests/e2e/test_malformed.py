#!/usr/bin/python3
"""End to end: 1000 malformed frames (truncated, bad lengths, bad versions,
bad extension chains, random bytes) sent at the LB's port from the router's
segment. maglb keeps running, counts them as drops, and valid traffic during
and after flows normally."""
import subprocess
import time

import lbtest
from lbtest import VIP, LB_MAC, check, log, ns

FRAMES = 1000

# Runs in the router namespace with scapy; prints how many frames it sent.
SENDER = r'''
import random, sys
from scapy.all import Ether, IP, IPv6, TCP, UDP, ARP, IPv6ExtHdrRouting, Raw, sendp, conf
conf.verb = 0
rnd = random.Random(4)
dst, n = sys.argv[1], int(sys.argv[2])
src = "02:00:00:00:00:99"
vip = "10.100.0.1"
def valid():
    return bytes(Ether(dst=dst, src=src)/IP(src="10.0.1.2", dst=vip)/TCP(sport=rnd.randint(1024, 65535), dport=80, flags="S"))
def v6():
    return bytes(Ether(dst=dst, src=src)/IPv6(src="fd01::2", dst="fd00:100::1")/UDP(sport=1, dport=7777)/b"x")
frames = []
for i in range(n):
    kind = i % 10
    f = bytearray(valid())
    if kind == 0:    # truncated anywhere, down to a few bytes
        f = f[:rnd.randint(1, len(f) - 1)]
    elif kind == 1:  # IPv4 total length beyond the frame
        f[16:18] = (len(f) + rnd.randint(1, 1000)).to_bytes(2, "big")
    elif kind == 2:  # IPv4 total length shorter than the header
        f[16:18] = rnd.randint(0, 19).to_bytes(2, "big")
    elif kind == 3:  # IHL < 5
        f[14] = 0x40 | rnd.randint(0, 4)
    elif kind == 4:  # bad IP version under the IPv4 ethertype
        f[14] = (rnd.choice([0, 1, 5, 6, 7, 15]) << 4) | 5
    elif kind == 5:  # TCP data offset < 5 or past the end
        f[14 + 20 + 12] = rnd.choice([0x00, 0x10, 0x40, 0xF0])
    elif kind == 6:  # IPv6 with a version 4 nibble, or a truncated routing header chain
        f = bytearray(v6())
        if rnd.random() < 0.5:
            f[14] = 0x40
        else:
            f = bytearray(bytes(Ether(dst=dst, src=src)/IPv6(src="fd01::2", dst="fd00:100::1")/IPv6ExtHdrRouting()/UDP(dport=7777)))[:rnd.randint(55, 70)]
    elif kind == 7:  # ARP with wrong hardware/protocol sizes
        f = bytearray(bytes(Ether(dst=dst, src=src)/ARP(op=1, psrc="10.0.0.1", pdst="10.0.0.10", hwlen=rnd.randint(0, 5), plen=rnd.randint(5, 16))))
    elif kind == 8:  # random bytes behind a real ethertype
        et = rnd.choice([0x0800, 0x86DD, 0x0806, 0x8100])
        f = bytearray(bytes.fromhex(dst.replace(":", "")) + bytes.fromhex(src.replace(":", "")) + et.to_bytes(2, "big") + rnd.randbytes(rnd.randint(0, 200)))
    else:            # random bytes, random ethertype
        f = bytearray(bytes.fromhex(dst.replace(":", "")) + rnd.randbytes(rnd.randint(0, 300)))
    frames.append(bytes(f))
sendp([Raw(f) for f in frames], iface="br0", inter=0.001)
print(len(frames))
'''


def test():
    with lbtest.Testbed() as tb:
        before = tb.stats()["stats"]
        # Valid traffic during the flood, from the client.
        during = subprocess.Popen(
            ["ip", "netns", "exec", "mlb-client", "curl", "-s", "-m", "5", "-H", "Connection: close"]
            + ["http://%s/" % VIP["gre"]] * 60, stdout=subprocess.PIPE, text=True)
        r = ns("mlb-router", "/usr/bin/python3", "-c", SENDER, LB_MAC, str(FRAMES), timeout=90)
        check(int(r.stdout.strip()) == FRAMES, "sent %d malformed frames from the router's segment" % FRAMES)
        out, _ = during.communicate(timeout=60)
        check(len(out.split()) == 60, "valid traffic during the flood: 60/60 requests answered")
        check(tb.proc.poll() is None, "maglb is still running")

        def counted():
            s = tb.stats()["stats"]
            return s["rx_packets"] - before["rx_packets"] >= FRAMES and s["dropped"] - before["dropped"] >= FRAMES * 0.95
        tb.wait_for(counted, "the malformed frames to be counted", 10)
        after = tb.stats()["stats"]
        reasons = {k[5:]: after[k] - before[k] for k in after
                   if k.startswith("drop_") and after[k] != before[k]}
        log("drops by reason: %s" % dict(sorted(reasons.items(), key=lambda kv: -kv[1])))
        check(after["dropped"] - before["dropped"] >= FRAMES * 0.95,
              "malformed frames counted as drops (+%d)" % (after["dropped"] - before["dropped"]))
        check(len(reasons) >= 5, "spread over %d drop reasons" % len(reasons))
        counts = tb.curl_many(VIP["gre"], 60)
        check(sum(counts.values()) == 60, "valid traffic after the flood: 60/60 answered %s" % counts)
        for mode, vip in VIP.items():
            c = tb.udp_many(vip, 10)
            check(sum(c.values()) == 10, "udp %s after the flood: 10/10 echoed" % mode)


if __name__ == "__main__":
    lbtest.main(test)
