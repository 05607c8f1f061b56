#!/usr/bin/python3
"""End to end, fragments as they are on the wire (the net_pcap test port; see
lbtest.port_vdevs): a 4000-byte UDP datagram sent as IPv4 fragments, in order
and out of order, to every UDP VIP of config/testbed.toml (IPv4: GRE, IP-in-IP,
L2 DSR; IPv6 with a fragment header: 6-in-4 GRE, L2 DSR) is echoed back whole
by one backend, and maglb's per-backend counters show that every fragment of
the datagram went to that backend (as separate packets: nothing reassembled
them before maglb). Fragments that fill the 1500-byte MTU exceed it once
tunnelled, and maglb fragments them again, still toward one backend. A reload
to a jumbo mtu is refused (the packet buffers were sized at start). Then jumbo
frames (point 14 of issue 8): the testbed at
MTU 9000 with lb.mtu = 9000 carries an 8000-byte datagram unfragmented, and a
20000-byte one as fragments of 8000 bytes (over the 2 KB a default mbuf
holds), in both orders.

The client sends its fragments itself through a raw socket (header included),
so no kernel on the client side fragments or reassembles what maglb sees;
the backends' decapsulator (maglb-decap: AF_PACKET without fanout) hands the
inner fragments to the kernel as they are, which reassembles them.

Run with --client ... inside mlb-client, it is that sender (one datagram,
prints the echoing backend's name as JSON)."""
import argparse
import json
import os
import random
import socket
import struct
import sys
import tomllib

import lbtest
from lbtest import check, log, ns

TESTBED_TOML = os.path.join(lbtest.SOURCE_DIR, "config", "testbed.toml")
DATAGRAM = 4000          # UDP payload bytes
FRAGMENT = 1400          # bytes of IP payload per fragment: + GRE overhead stays under 1500
JUMBO_MTU = 9000
JUMBO_DATAGRAM = 8000    # unfragmented, through a 9000 MTU
JUMBO_FRAGMENTED = 20000
JUMBO_FRAGMENT = 8000    # each fragment far over a 2 KB mbuf


# --- the client side (inside mlb-client) ---------------------------------

def checksum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def udp_datagram(family, src, dst, sport, dport, payload):
    length = 8 + len(payload)
    s, d = socket.inet_pton(family, src), socket.inet_pton(family, dst)
    if family == socket.AF_INET:
        pseudo = s + d + struct.pack("!BBH", 0, socket.IPPROTO_UDP, length)
    else:
        pseudo = s + d + struct.pack("!IxxxB", length, socket.IPPROTO_UDP)
    header = struct.pack("!HHHH", sport, dport, length, 0)
    csum = checksum(pseudo + header + payload) or 0xFFFF
    return struct.pack("!HHHH", sport, dport, length, csum) + payload


def fragments(family, src, dst, datagram, size):
    """IP packets (header included) carrying `datagram` (a UDP header and
    payload) in fragments of `size` bytes (a multiple of 8) each."""
    assert size % 8 == 0
    ident = random.randint(1, 0xFFFF if family == socket.AF_INET else 0xFFFFFFFF)
    s, d = socket.inet_pton(family, src), socket.inet_pton(family, dst)
    out = []
    for off in range(0, len(datagram), size):
        chunk = datagram[off:off + size]
        more = off + size < len(datagram)
        if family == socket.AF_INET:
            flags = (0x2000 if more else 0) | (off // 8)
            h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(chunk), ident, flags, 64,
                            socket.IPPROTO_UDP, 0, s, d)
            h = h[:10] + struct.pack("!H", checksum(h)) + h[12:]
            out.append(h + chunk)
        else:
            frag = struct.pack("!BBHI", socket.IPPROTO_UDP, 0, off | (1 if more else 0), ident)
            h = struct.pack("!IHBB16s16s", 6 << 28, len(frag) + len(chunk), 44, 64, s, d)
            out.append(h + frag + chunk)
    return out


def client(args):
    family = socket.AF_INET6 if ":" in args.vip else socket.AF_INET
    u = socket.socket(family, socket.SOCK_DGRAM)
    u.settimeout(3.0)
    u.connect((args.vip, args.port))  # picks the source address and port
    src, sport = u.getsockname()[:2]
    payload = bytes(random.getrandbits(8) for _ in range(args.size))
    pkts = fragments(family, src, args.vip, udp_datagram(family, src, args.vip, sport, args.port,
                                                         payload), args.fragment)
    if args.order == "reverse":
        pkts.reverse()
    elif args.order == "shuffle":
        # The rest in random order, the first fragment (the UDP header) last.
        rest = pkts[1:]
        random.shuffle(rest)
        pkts = rest + pkts[:1]
    # IPPROTO_RAW: the header is ours (IPv4 and IPv6); the kernel neither
    # fragments nor reassembles it.
    raw = socket.socket(family, socket.SOCK_RAW, socket.IPPROTO_RAW)
    for p in pkts:
        raw.sendto(p, (args.vip, 0))
    try:
        reply, _ = u.recvfrom(65535)
    except socket.timeout:
        print(json.dumps({"fragments": len(pkts), "backend": None, "error": "no echo within 3 s"}))
        return
    name, _, body = reply.partition(b" ")
    print(json.dumps({"fragments": len(pkts), "backend": name.decode(errors="replace"),
                      "echo_ok": body == payload, "echo_len": len(body)}))


# --- the test -------------------------------------------------------------

def send(vip, size, fragment, order):
    r = ns("mlb-client", "/usr/bin/python3", os.path.abspath(__file__), "--client", "--vip", vip,
           "--port", str(lbtest.UDP_PORT), "--size", str(size), "--fragment", str(fragment),
           "--order", order, timeout=30)
    return json.loads(r.stdout)


def backend_packets(tb, vip_name):
    v = tb.stats()["vips"][vip_name]
    return dict(zip(v["backend_names"], v["backend_packets"]))


def one_datagram(tb, vip_name, vip, size, fragment, order, refragmented=False):
    """refragmented: the fragments fill the link MTU, so that with the tunnel
    header they exceed lb.mtu and maglb fragments them again (DF clear); the
    counters then show one backend, at least one packet per fragment."""
    before = backend_packets(tb, vip_name)
    r = send(vip, size, fragment, order)
    what = "%s %s: %d-byte datagram in %d fragments of <= %d, %s" % (
        vip_name, vip, size, r["fragments"], fragment, order)
    check(r["backend"] is not None and r.get("echo_ok"),
          "%s: echoed back whole by %s (%s bytes)" % (what, r["backend"], r.get("echo_len")))
    # Counters are read after the echo came back: every forwarded fragment
    # was counted before the backend could answer.
    after = backend_packets(tb, vip_name)
    grew = {b: after[b] - before.get(b, 0) for b in after if after[b] != before.get(b, 0)}
    if refragmented:
        check(list(grew) == [r["backend"]] and grew[r["backend"]] >= r["fragments"],
              "%s: maglb's own fragments of them all went to %s (per-backend packets %s)" %
              (what, r["backend"], grew))
        return
    check(grew == {r["backend"]: r["fragments"]},
          "%s: all %d fragments went to %s, none elsewhere (per-backend packets %s)" %
          (what, r["fragments"], r["backend"], grew))


def udp_vips(text):
    return [(v["name"], v["address"]) for v in tomllib.loads(text)["vip"] if v["protocol"] == "udp"]


def test():
    with open(TESTBED_TOML) as f:
        config = f.read()
    vips = udp_vips(config)
    check(sum(":" not in a for _, a in vips) == 3 and sum(":" in a for _, a in vips) == 2,
          "config/testbed.toml: three IPv4 and two IPv6 UDP VIPs (%s)" % ", ".join(n for n, _ in vips))
    with lbtest.Testbed(config) as tb:
        for name, addr in vips:
            frag = FRAGMENT if ":" not in addr else FRAGMENT - 8  # room for the fragment header
            for order in ("in-order", "reverse", "shuffle"):
                one_datagram(tb, name, addr, DATAGRAM, frag, order)
        # Fragments of a full 1500-byte MTU: + GRE / IP-in-IP they exceed
        # lb.mtu, and maglb fragments each again (IPv4, DF clear).
        sent = tb.stats()["stats"]["fragments_sent"]
        tunnelled = [(n, a) for n, a in vips if ":" not in a and not n.endswith("l2dsr")]
        for name, addr in tunnelled:
            one_datagram(tb, name, addr, DATAGRAM, 1480, "reverse", refragmented=True)
        # 1480 + 20 + 24 > 1500: the two full fragments of each datagram split in two.
        sent = tb.stats()["stats"]["fragments_sent"] - sent
        check(sent == 4 * len(tunnelled), "maglb sent %d fragments of its own (2 per full fragment)" % sent)
        s = tb.stats()["stats"]
        log("drops: %s" % {k: v for k, v in s.items() if k.startswith("drop") and v})

        # The packet buffers were sized for mtu 1500 at start: a reload to a
        # jumbo MTU is refused with the line of `mtu`, not half applied.
        gen, refused = s["generation"], s["reloads_refused"]
        tb.write_config(config.replace("mtu = 1500", "mtu = %d" % JUMBO_MTU))
        tb.wait_for(lambda: tb.stats()["stats"]["reloads_refused"] > refused, "the refusal", 10)
        s = tb.stats()["stats"]
        line = 1 + config[:config.index("mtu = 1500")].count("\n")
        refusal = [x for x in tb.read_log().splitlines() if "refused" in x]
        check(s["generation"] == gen and len(refusal) == 1 and
              "maglb.toml:%d: lb.mtu: %d is above" % (line, JUMBO_MTU) in refusal[0] and
              "needs a restart; still serving generation %d" % gen in refusal[0],
              "reload to mtu %d refused, generation %d kept: %s" % (JUMBO_MTU, gen, refusal))
        one_datagram(tb, vips[0][0], vips[0][1], DATAGRAM, FRAGMENT, "reverse")

    # Jumbo frames: every link at 9000, maglb's mtu too.
    jumbo = config.replace("mtu = 1500", "mtu = %d" % JUMBO_MTU)
    check(jumbo != config, "jumbo config: mtu = %d" % JUMBO_MTU)
    with lbtest.Testbed(jumbo, link_mtu=JUMBO_MTU) as tb:
        for name, addr in vips:
            if ":" in addr:
                continue
            r = send(addr, JUMBO_DATAGRAM, 16384, "in-order")  # one packet: no fragment
            check(r["fragments"] == 1 and r["backend"] is not None and r.get("echo_ok"),
                  "%s: an unfragmented %d-byte datagram (a %d-byte frame) echoed whole by %s" %
                  (name, JUMBO_DATAGRAM, JUMBO_DATAGRAM + 8 + 20 + 14, r["backend"]))
            for order in ("in-order", "reverse"):
                one_datagram(tb, name, addr, JUMBO_FRAGMENTED, JUMBO_FRAGMENT, order)
        for name, addr in vips:
            if ":" in addr:
                one_datagram(tb, name, addr, JUMBO_FRAGMENTED, JUMBO_FRAGMENT, "reverse")
        s = tb.stats()["stats"]
        check(s["drop_rx_multiseg"] == 0, "no frame arrived in chained buffers (drop_rx_multiseg 0)")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        ap = argparse.ArgumentParser()
        ap.add_argument("--client", action="store_true")
        ap.add_argument("--vip", required=True)
        ap.add_argument("--port", type=int, required=True)
        ap.add_argument("--size", type=int, required=True)
        ap.add_argument("--fragment", type=int, required=True)
        ap.add_argument("--order", choices=("in-order", "reverse", "shuffle"), required=True)
        client(ap.parse_args())
    else:
        lbtest.main(test)
