#!/usr/bin/python3
"""Wire-format proof: decodes gen_pcap's frames with tshark and checks every
field, checksums included, against values worked out here from the RFCs and
the test inputs, not from maglb's code.

Usage: check_pcap.py PATH/TO/gen_pcap   (meson test 'wire' runs it)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

GOOD = "1"  # tshark's checksum status: 0 bad, 1 good, 2 unverified

OUR_MAC = "02:00:00:00:00:01"
GATEWAY_MAC = "02:66:00:00:00:01"
CLIENT_SIDE_MAC = "02:00:00:00:00:02"  # the test builder's default source MAC
PEER_MAC = "02:aa:00:00:00:01"
# Outer sources: 192.0.2.0 with 8 flow bits, 2001:db8:ff:: with 16, and the
# flow hash 0x0123456789abcdef: the low 8 / 16 bits are 0xef / 0xcdef; the
# IPv6 flow label is its low 20 bits.
OUTER_SRC4 = "192.0.2.239"
OUTER_SRC6 = "2001:db8:ff::cdef"
FLOW_LABEL = "0x0bcdef"
BACKEND4 = "172.16.0.5"
BACKEND6 = "2001:db8:b::5"


def collect(obj, key, out):
    """Every value of `key` anywhere in obj, in document order."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == key:
                out.extend(v if isinstance(v, list) else [v])
            else:
                collect(v, key, out)
    elif isinstance(obj, list):
        for v in obj:
            collect(v, key, out)
    return out


class Checker:
    def __init__(self, packets):
        self.packets = packets
        self.failures = 0
        self.checks = 0

    def field(self, n, key):
        return collect(self.packets[n - 1]["_source"]["layers"], key, [])

    def expect(self, n, key, *want):
        """All occurrences of `key` in frame n, in order, equal `want`."""
        self.checks += 1
        got = self.field(n, key)
        if got != list(want):
            self.failures += 1
            print(f"FAIL frame {n}: {key} = {got}, want {list(want)}")

    def expect_prefix(self, n, key, prefix):
        self.checks += 1
        got = self.field(n, key)
        if len(got) != 1 or not (got[0] == prefix or got[0].startswith(prefix + ":")):
            self.failures += 1
            print(f"FAIL frame {n}: {key} = {got}, want {prefix}[:...]")

    def expect_in(self, n, key, index, want):
        self.checks += 1
        got = self.field(n, key)
        if len(got) <= index or got[index] != want:
            self.failures += 1
            print(f"FAIL frame {n}: {key}[{index}] of {got}, want {want}")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    gen = sys.argv[1]
    tshark = shutil.which("tshark")
    if tshark is None:
        print("FAIL: tshark not installed (scripts/install-deps.sh installs it)")
        return 1
    with tempfile.TemporaryDirectory(prefix="maglb-wire-") as tmp:
        pcap = os.path.join(tmp, "frames.pcap")
        subprocess.run([gen, pcap], check=True)
        out = subprocess.run(
            [tshark, "-r", pcap, "-T", "json", "--no-duplicate-keys",
             "-o", "ip.check_checksum:TRUE", "-o", "tcp.check_checksum:TRUE",
             "-o", "udp.check_checksum:TRUE", "-o", "tcp.analyze_sequence_numbers:FALSE"],
            check=True, capture_output=True, text=True).stdout
    packets = json.loads(out)
    c = Checker(packets)
    if len(packets) != 21:
        print(f"FAIL: {len(packets)} frames, want 21")
        return 1

    # ---- 1-8: encapsulation. GRE then IP-in-IP; inner 4, 6; outer 4, 6.
    n = 0
    for gre in (True, False):
        for inner6 in (False, True):
            for outer6 in (False, True):
                n += 1
                inner_len = (40 if inner6 else 20) + 20 + 100  # IP + TCP + payload
                overhead = (40 if outer6 else 20) + (4 if gre else 0)
                c.expect(n, "frame.len", str(14 + overhead + inner_len))
                c.expect(n, "eth.dst", GATEWAY_MAC)
                c.expect(n, "eth.src", OUR_MAC)
                c.expect(n, "eth.type", "0x86dd" if outer6 else "0x0800")
                outer_proto = "47" if gre else ("41" if inner6 else "4")
                stack = ["eth:ethertype", "ipv6" if outer6 else "ip"]
                if gre:
                    stack.append("gre")
                stack += ["ipv6" if inner6 else "ip", "tcp"]
                # (what follows "tcp" depends on tshark's port heuristics)
                c.expect_prefix(n, "frame.protocols", ":".join(stack))
                # Outer header.
                v4 = []  # (field, outer value) for the ip.* fields
                if outer6:
                    c.expect_in(n, "ipv6.version", 0, "6")
                    c.expect_in(n, "ipv6.tclass", 0, "0x000000b9")  # DSCP 46, ECN 1 copied
                    c.expect_in(n, "ipv6.flow", 0, FLOW_LABEL)
                    c.expect_in(n, "ipv6.plen", 0, str(overhead - 40 + inner_len))
                    c.expect_in(n, "ipv6.nxt", 0, outer_proto)
                    c.expect_in(n, "ipv6.hlim", 0, "61")
                    c.expect_in(n, "ipv6.src", 0, OUTER_SRC6)
                    c.expect_in(n, "ipv6.dst", 0, BACKEND6)
                else:
                    v4 = [("ip.version", "4"), ("ip.hdr_len", "20"), ("ip.dsfield", "0xb9"),
                          ("ip.len", str(overhead + inner_len)), ("ip.id", "0x0000"),
                          ("ip.flags.rb", "0"), ("ip.flags.df", "1"), ("ip.flags.mf", "0"),
                          ("ip.frag_offset", "0"), ("ip.ttl", "61"), ("ip.proto", outer_proto),
                          ("ip.checksum.status", GOOD), ("ip.src", OUTER_SRC4), ("ip.dst", BACKEND4)]
                    for key, want in v4:
                        c.expect_in(n, key, 0, want)
                if gre:
                    c.expect(n, "gre.flags_and_version", "0x0000")
                    c.expect(n, "gre.proto", "0x86dd" if inner6 else "0x0800")
                else:
                    c.expect(n, "gre.proto")
                # Inner packet untouched: addresses, TTL, checksums.
                i = 0 if outer6 != inner6 else 1
                if inner6:
                    c.expect_in(n, "ipv6.src", i, "2001:db8:c::7")
                    c.expect_in(n, "ipv6.dst", i, "2001:db8::1")
                    c.expect_in(n, "ipv6.hlim", i, "64")
                    c.expect(n, "tcp.dstport", "443")
                else:
                    c.expect_in(n, "ip.src", i, "198.51.100.7")
                    c.expect_in(n, "ip.dst", i, "10.0.0.1")
                    c.expect_in(n, "ip.ttl", i, "64")
                    c.expect_in(n, "ip.checksum.status", i, GOOD)
                    c.expect(n, "tcp.dstport", "80")
                c.expect(n, "tcp.srcport", "40000")
                c.expect(n, "tcp.len", "100")
                c.expect(n, "tcp.checksum.status", GOOD)

    # ---- 9: L2 DSR: only the MACs change.
    c.expect(9, "eth.dst", "02:bb:00:00:00:05")
    c.expect(9, "eth.src", OUR_MAC)
    c.expect_prefix(9, "frame.protocols", "eth:ethertype:ip:tcp")
    c.expect(9, "ip.src", "198.51.100.7")
    c.expect(9, "ip.dst", "10.0.0.1")
    c.expect(9, "ip.ttl", "64")
    c.expect(9, "ip.checksum.status", GOOD)
    c.expect(9, "tcp.checksum.status", GOOD)

    # ---- 10: ICMP fragmentation needed (RFC 1191), 576 bytes (RFC 1812), VLAN kept.
    c.expect(10, "eth.dst", CLIENT_SIDE_MAC)
    c.expect(10, "eth.src", OUR_MAC)
    c.expect(10, "vlan.id", "42")
    c.expect(10, "frame.protocols", "eth:ethertype:vlan:ethertype:ip:icmp:ip:tcp")
    c.expect(10, "frame.len", str(18 + 576))
    c.expect_in(10, "ip.len", 0, "576")
    c.expect_in(10, "ip.src", 0, "192.0.2.10")
    c.expect_in(10, "ip.dst", 0, "198.51.100.7")
    c.expect_in(10, "ip.proto", 0, "1")
    c.expect_in(10, "ip.ttl", 0, "64")
    c.expect(10, "ip.checksum.status", GOOD, GOOD)  # ours and the quoted header
    c.expect(10, "icmp.type", "3")
    c.expect(10, "icmp.code", "4")
    c.expect(10, "icmp.mtu", "1476")
    c.expect(10, "icmp.checksum.status", GOOD)
    c.expect_in(10, "ip.src", 1, "198.51.100.7")  # the quoted packet
    c.expect_in(10, "ip.dst", 1, "10.0.0.1")
    c.expect_in(10, "ip.len", 1, "1500")
    c.expect(10, "tcp.srcport", "40000")
    c.expect(10, "tcp.dstport", "80")

    # ---- 11: ICMPv6 packet too big (RFC 4443), 1280 bytes.
    c.expect(11, "frame.len", str(14 + 1280))
    c.expect(11, "frame.protocols", "eth:ethertype:ipv6:icmpv6:ipv6:tcp:data")
    c.expect_in(11, "ipv6.src", 0, "2001:db8:ff::10")
    c.expect_in(11, "ipv6.dst", 0, "2001:db8:c::7")
    c.expect_in(11, "ipv6.plen", 0, "1240")
    c.expect_in(11, "ipv6.nxt", 0, "58")
    c.expect_in(11, "ipv6.hlim", 0, "64")
    c.expect(11, "icmpv6.type", "2")
    c.expect(11, "icmpv6.code", "0")
    c.expect(11, "icmpv6.mtu", "1456")
    c.expect(11, "icmpv6.checksum.status", GOOD)
    c.expect_in(11, "ipv6.src", 1, "2001:db8:c::7")
    c.expect_in(11, "ipv6.plen", 1, "1460")

    # ---- 12: ARP reply.
    c.expect(12, "eth.dst", PEER_MAC)
    c.expect(12, "eth.src", OUR_MAC)
    c.expect(12, "arp.hw.type", "1")
    c.expect(12, "arp.proto.type", "0x0800")
    c.expect(12, "arp.opcode", "2")
    c.expect(12, "arp.src.hw_mac", OUR_MAC)
    c.expect(12, "arp.src.proto_ipv4", "192.0.2.10")
    c.expect(12, "arp.dst.hw_mac", PEER_MAC)
    c.expect(12, "arp.dst.proto_ipv4", "192.0.2.1")

    # ---- 13: ICMP echo reply (request options dropped).
    c.expect(13, "eth.dst", CLIENT_SIDE_MAC)
    c.expect(13, "eth.src", OUR_MAC)
    c.expect(13, "ip.hdr_len", "20")
    c.expect(13, "ip.len", str(20 + 8 + 32))
    c.expect(13, "ip.src", "192.0.2.10")
    c.expect(13, "ip.dst", "198.51.100.7")
    c.expect(13, "ip.ttl", "64")
    c.expect(13, "ip.checksum.status", GOOD)
    c.expect(13, "icmp.type", "0")
    c.expect(13, "icmp.code", "0")
    c.expect(13, "icmp.ident", "4660")
    c.expect(13, "icmp.seq", "5")
    c.expect(13, "icmp.checksum.status", GOOD)
    c.expect(13, "data.len", "32")

    # ---- 14: ICMPv6 echo reply from the VIP pinged (hop-by-hop header dropped).
    c.expect(14, "frame.protocols", "eth:ethertype:ipv6:icmpv6:data")
    c.expect(14, "ipv6.src", "2001:db8::1")
    c.expect(14, "ipv6.dst", "2001:db8:c::7")
    c.expect(14, "ipv6.nxt", "58")
    c.expect(14, "ipv6.plen", "40")
    c.expect(14, "ipv6.hlim", "64")
    c.expect(14, "icmpv6.type", "129")
    c.expect(14, "icmpv6.echo.identifier", "0x4321")
    c.expect(14, "icmpv6.echo.sequence_number", "6")
    c.expect(14, "icmpv6.checksum.status", GOOD)

    # ---- 15: neighbour advertisement (RFC 4861 7.2.4).
    c.expect(15, "eth.dst", PEER_MAC)
    c.expect(15, "eth.src", OUR_MAC)
    c.expect(15, "ipv6.src", "2001:db8:ff::10")
    c.expect(15, "ipv6.dst", "2001:db8:ff::1")
    c.expect(15, "ipv6.hlim", "255")
    c.expect(15, "ipv6.plen", "32")
    c.expect(15, "icmpv6.type", "136")
    c.expect(15, "icmpv6.code", "0")
    c.expect(15, "icmpv6.nd.na.flag.r", "0")
    c.expect(15, "icmpv6.nd.na.flag.s", "1")
    c.expect(15, "icmpv6.nd.na.flag.o", "1")
    c.expect(15, "icmpv6.nd.na.target_address", "2001:db8:ff::10")
    c.expect(15, "icmpv6.opt.type", "2")
    c.expect(15, "icmpv6.opt.linkaddr", OUR_MAC)
    c.expect(15, "icmpv6.checksum.status", GOOD)

    # ---- 16-18: a 3028-byte UDP datagram, DF clear, fragmented to the
    # usable MTU 1476 (1500 - 24 of GRE over IPv4): 1456 + 1456 + 96 data
    # bytes, each fragment GRE-encapsulated; tshark reassembles the inner
    # datagram and verifies its UDP checksum.
    for n, (offset, mf, data) in zip((16, 17, 18), ((0, "1", 1456), (1456, "1", 1456), (2912, "0", 96))):
        c.expect(n, "frame.len", str(14 + 24 + 20 + data))
        c.expect_in(n, "ip.len", 0, str(24 + 20 + data))
        c.expect_in(n, "ip.flags.df", 0, "1")
        c.expect_in(n, "ip.checksum.status", 0, GOOD)
        c.expect_in(n, "ip.src", 0, OUTER_SRC4)
        c.expect_in(n, "ip.len", 1, str(20 + data))
        c.expect_in(n, "ip.id", 1, "0x4242")
        c.expect_in(n, "ip.flags.df", 1, "0")
        c.expect_in(n, "ip.flags.mf", 1, mf)
        c.expect_in(n, "ip.frag_offset", 1, str(offset // 8))  # tshark shows 8-byte units
        c.expect_in(n, "ip.checksum.status", 1, GOOD)
        c.expect(n, "gre.proto", "0x0800")
    c.expect(18, "ip.fragment.count", "3")
    c.expect(18, "udp.length", "3008")
    c.expect(18, "udp.dstport", "7777")
    c.expect(18, "udp.checksum.status", GOOD)

    # ---- 19-21: the same datagram, 802.1ad (VLAN 100) + 802.1Q (VLAN 42)
    # tagged, to an L2 DSR backend: fragmented to the MTU (1480 + 1480 + 48
    # data bytes), every fragment with both tags, the backend's MAC, ours.
    for n, (offset, mf, data) in zip((19, 20, 21), ((0, "1", 1480), (1480, "1", 1480), (2960, "0", 48))):
        c.expect(n, "frame.len", str(14 + 8 + 20 + data))
        c.expect(n, "eth.dst", "02:bb:00:00:00:05")
        c.expect(n, "eth.src", OUR_MAC)
        c.expect(n, "eth.type", "0x88a8")
        c.expect(n, "ieee8021ad.id", "100")
        c.expect(n, "ieee8021ah.etype", "0x8100")  # tshark's name for the S-tag's inner type
        c.expect(n, "vlan.id", "42")
        c.expect(n, "vlan.etype", "0x0800")
        c.expect(n, "ip.len", str(20 + data))
        c.expect(n, "ip.id", "0x4343")
        c.expect(n, "ip.flags.df", "0")
        c.expect(n, "ip.flags.mf", mf)
        c.expect(n, "ip.frag_offset", str(offset // 8))
        c.expect(n, "ip.checksum.status", GOOD)
    c.expect(21, "ip.fragment.count", "3")
    c.expect(21, "udp.length", "3008")
    c.expect(21, "udp.checksum.status", GOOD)

    print(f"check_pcap: {c.checks} checks over {len(packets)} frames, {c.failures} failed")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
