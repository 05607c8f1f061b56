#!/usr/bin/python3
"""Writes the fuzz seed corpus (tests/fuzz/corpus/*.bin): valid frames of every
kind the packet path handles and malformed ones for every drop reason, built
with scapy (Debian's python3-scapy) so that they do not come from maglb's own
code. Deterministic: re-running it rewrites identical files.

The addresses match the harness's snapshot (tests/fuzz/packet_fuzzer.cc).
Usage: /usr/bin/python3 tests/fuzz/make_corpus.py [OUT_DIR]
"""
import os
import sys

from scapy.all import (ARP, GRE, ICMP, IP, UDP, Dot1AD, Dot1Q, Ether, ICMPv6DestUnreach,
                       ICMPv6EchoRequest, ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6NDOptSrcLLAddr,
                       ICMPv6PacketTooBig, ICMPv6TimeExceeded, IPerror, IPv6, IPv6ExtHdrDestOpt,
                       IPv6ExtHdrFragment, IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, IPv6, Raw,
                       TCP, TCPerror, UDPerror, conf, raw)

conf.verb = 0

OUR_MAC = "02:00:00:00:00:01"
PEER_MAC = "02:00:00:00:00:02"
LB4, LB6 = "192.0.2.10", "2001:db8::10"
VIP4, DNS4, DSR4 = "198.51.100.80", "198.51.100.53", "198.51.100.90"
VIP6 = "2001:db8:5::80"
CLIENT4, CLIENT6 = "10.1.2.3", "2001:db8:c::3"


def eth(*tags):
    e = Ether(dst=OUR_MAC, src=PEER_MAC)
    for t in tags:
        e = e / t
    return e


def frames():
    f = {}
    payload = Raw(b"x" * 32)
    # Valid traffic to VIPs: every header combination.
    f["tcp4_syn"] = eth() / IP(src=CLIENT4, dst=VIP4) / TCP(sport=40000, dport=80, flags="S")
    f["tcp4_ack_data"] = eth() / IP(src=CLIENT4, dst=VIP4) / TCP(sport=40000, dport=80, flags="PA") / payload
    f["tcp4_fin"] = eth() / IP(src=CLIENT4, dst=VIP4) / TCP(sport=40000, dport=80, flags="FA")
    f["tcp4_rst"] = eth() / IP(src=CLIENT4, dst=VIP4) / TCP(sport=40000, dport=80, flags="R")
    f["tcp4_wildcard_port"] = eth() / IP(src=CLIENT4, dst=VIP4) / TCP(sport=40001, dport=8080, flags="S")
    f["tcp4_options"] = (eth() / IP(src=CLIENT4, dst=VIP4, options=b"\x94\x04\x00\x00") /
                         TCP(sport=40000, dport=80, flags="S", options=[("MSS", 1460), ("SAckOK", b""),
                                                                       ("WScale", 7)]))
    f["udp4_dns"] = eth() / IP(src=CLIENT4, dst=DNS4) / UDP(sport=5353, dport=53) / payload
    f["tcp4_dsr"] = eth() / IP(src=CLIENT4, dst=DSR4) / TCP(sport=40000, dport=80, flags="S")
    f["udp4_draining_vip"] = eth() / IP(src=CLIENT4, dst="198.51.100.91") / UDP(sport=1, dport=2)
    f["vlan1_tcp4"] = eth(Dot1Q(vlan=100)) / IP(src=CLIENT4, dst=VIP4) / TCP(dport=80, flags="S")
    f["vlan2_tcp4"] = eth(Dot1AD(vlan=10), Dot1Q(vlan=100)) / IP(src=CLIENT4, dst=VIP4) / TCP(dport=80, flags="S")
    f["tcp6_syn"] = eth() / IPv6(src=CLIENT6, dst=VIP6) / TCP(sport=40000, dport=443, flags="S")
    f["udp6_any_port"] = eth() / IPv6(src=CLIENT6, dst=VIP6) / UDP(sport=4000, dport=4500) / payload
    f["tcp6_hbh"] = eth() / IPv6(src=CLIENT6, dst=VIP6) / IPv6ExtHdrHopByHop() / TCP(dport=443, flags="S")
    f["tcp6_routing"] = (eth() / IPv6(src=CLIENT6, dst=VIP6) / IPv6ExtHdrRouting(addresses=["2001:db8::99"],
                                                                                    segleft=0) /
                         TCP(dport=443, flags="S"))
    f["tcp6_dstopts"] = eth() / IPv6(src=CLIENT6, dst=VIP6) / IPv6ExtHdrDestOpt() / TCP(dport=443, flags="S")
    f["tcp6_atomic_frag"] = eth() / IPv6(src=CLIENT6, dst=VIP6) / IPv6ExtHdrFragment(m=0, offset=0) / TCP(dport=443)
    f["vlan1_udp6"] = eth(Dot1Q(vlan=7)) / IPv6(src=CLIENT6, dst=VIP6) / UDP(dport=53) / payload
    # Big enough for the ICMP too-big (DF) and fragmentation (no DF) paths: MTU 1400.
    f["tcp4_big_df"] = eth() / IP(src=CLIENT4, dst=VIP4, flags="DF") / TCP(dport=80, flags="PA") / Raw(b"b" * 1400)
    f["udp4_big_nodf"] = eth() / IP(src=CLIENT4, dst=DNS4, flags=0) / UDP(dport=53) / Raw(b"c" * 1400)
    f["tcp6_big"] = eth() / IPv6(src=CLIENT6, dst=VIP6) / TCP(dport=443, flags="PA") / Raw(b"d" * 1400)
    # Fragments.
    f["frag4_first"] = eth() / IP(src=CLIENT4, dst=DNS4, flags="MF", id=7) / UDP(dport=53) / Raw(b"e" * 64)
    f["frag4_later"] = eth() / IP(src=CLIENT4, dst=DNS4, frag=9, id=7, proto=17) / Raw(b"f" * 40)
    f["frag6_first"] = (eth() / IPv6(src=CLIENT6, dst=VIP6) / IPv6ExtHdrFragment(m=1, offset=0, id=9) /
                        UDP(dport=53) / Raw(b"g" * 64))
    f["frag6_later"] = (eth() / IPv6(src=CLIENT6, dst=VIP6) / IPv6ExtHdrFragment(m=0, offset=9, id=9, nh=17) /
                        Raw(b"h" * 40))
    # ICMP errors about a backend's reply (source = VIP).
    f["icmp4_frag_needed"] = (eth() / IP(src="203.0.113.200", dst=VIP4) / ICMP(type=3, code=4, nexthopmtu=1400) /
                              IPerror(src=VIP4, dst=CLIENT4) / TCPerror(sport=80, dport=40000))
    f["icmp4_time_exceeded"] = (eth() / IP(src="203.0.113.200", dst=DNS4) / ICMP(type=11, code=0) /
                                IPerror(src=DNS4, dst=CLIENT4) / UDPerror(sport=53, dport=5353))
    f["icmp6_too_big"] = (eth() / IPv6(src="2001:db8:77::1", dst=VIP6) / ICMPv6PacketTooBig(mtu=1280) /
                          IPv6(src=VIP6, dst=CLIENT6) / TCP(sport=443, dport=40000, flags="A") / Raw(b"i" * 100))
    f["icmp6_unreach"] = (eth() / IPv6(src="2001:db8:77::1", dst=VIP6) / ICMPv6DestUnreach(code=4) /
                          IPv6(src=VIP6, dst=CLIENT6) / UDP(sport=4500, dport=4000))
    f["icmp6_time_exceeded"] = (eth() / IPv6(src="2001:db8:77::1", dst=VIP6) / ICMPv6TimeExceeded() /
                                IPv6(src=VIP6, dst=CLIENT6) / IPv6ExtHdrDestOpt() / UDP(sport=1, dport=2))
    # Local traffic.
    f["arp_request"] = (Ether(dst="ff:ff:ff:ff:ff:ff", src=PEER_MAC) /
                        ARP(op=1, hwsrc=PEER_MAC, psrc="192.0.2.1", pdst=LB4))
    f["arp_reply"] = eth() / ARP(op=2, hwsrc=PEER_MAC, psrc="192.0.2.1", hwdst=OUR_MAC, pdst=LB4)
    f["nd_ns"] = (Ether(dst="33:33:ff:00:00:10", src=PEER_MAC) /
                  IPv6(src="2001:db8::1", dst="ff02::1:ff00:10", hlim=255) / ICMPv6ND_NS(tgt=LB6) /
                  ICMPv6NDOptSrcLLAddr(lladdr=PEER_MAC))
    f["nd_ns_dad"] = (Ether(dst="33:33:ff:00:00:10", src=PEER_MAC) /
                      IPv6(src="::", dst="ff02::1:ff00:10", hlim=255) / ICMPv6ND_NS(tgt=LB6))
    f["nd_na"] = eth() / IPv6(src="2001:db8::1", dst=LB6, hlim=255) / ICMPv6ND_NA(tgt="2001:db8::1", S=1, O=1)
    f["echo4_local"] = eth() / IP(src=CLIENT4, dst=LB4) / ICMP(type=8, id=1, seq=1) / payload
    f["echo4_vip_options"] = eth() / IP(src=CLIENT4, dst=VIP4, options=b"\x01\x01\x01\x00") / ICMP(id=2) / payload
    f["echo6_local"] = eth() / IPv6(src=CLIENT6, dst=LB6) / ICMPv6EchoRequest(id=3, seq=1) / payload
    f["echo6_vip_hbh"] = eth() / IPv6(src=CLIENT6, dst=VIP6) / IPv6ExtHdrHopByHop() / ICMPv6EchoRequest(id=4)
    # The kernel interface: to our address (up to it), and as the kernel
    # sends them: tunnel probes from mapped ports (61001: a backend that
    # exists; 61002: one that is gone), to a VIP of each mode, v4 and v6.
    f["tcp4_to_kernel"] = eth() / IP(src=CLIENT4, dst=LB4) / TCP(sport=40000, dport=22, flags="S")
    f["udp6_to_kernel"] = eth() / IPv6(src=CLIENT6, dst=LB6) / UDP(sport=4000, dport=53) / payload
    kernel = Ether(dst=PEER_MAC, src=OUR_MAC)
    f["probe4_gre"] = kernel / IP(src=LB4, dst=VIP4) / TCP(sport=61001, dport=80, flags="S")
    f["probe4_stale"] = kernel / IP(src=LB4, dst=VIP4) / TCP(sport=61002, dport=80, flags="S")
    f["probe4_dsr"] = kernel / IP(src=LB4, dst=DSR4) / TCP(sport=61001, dport=80, flags="PA") / payload
    f["probe4_udp"] = kernel / IP(src=LB4, dst=DNS4) / UDP(sport=61003, dport=53) / payload
    f["probe6_tcp"] = kernel / IPv6(src=LB6, dst=VIP6) / TCP(sport=61001, dport=443, flags="S")
    f["probe4_big_df"] = kernel / IP(src=LB4, dst=VIP4, flags="DF") / TCP(sport=61001, dport=80, flags="PA") / Raw(b"p" * 1400)
    # Other traffic and malformed frames.
    f["other_dst"] = eth() / IP(src=CLIENT4, dst="10.9.9.9") / TCP(dport=80)
    f["gre_to_us"] = eth() / IP(src=CLIENT4, dst=LB4) / GRE() / IP(src=CLIENT4, dst=VIP4) / TCP(dport=80)
    f["lldp"] = Ether(dst="01:80:c2:00:00:0e", src=PEER_MAC, type=0x88CC) / Raw(b"\x02\x07\x04" + b"\x00" * 40)
    f["three_vlans"] = eth(Dot1Q(vlan=1), Dot1Q(vlan=2), Dot1Q(vlan=3)) / IP(src=CLIENT4, dst=VIP4) / TCP(dport=80)
    return f


def malformed(f):
    m = {}
    syn = raw(f["tcp4_syn"])
    m["trunc_eth"] = syn[:13]
    m["trunc_ip"] = syn[:14 + 12]
    m["trunc_tcp"] = syn[:14 + 20 + 10]
    bad = bytearray(syn); bad[14] = 0x44; m["bad_ihl"] = bytes(bad)
    bad = bytearray(syn); bad[14] = 0x65; m["bad_version"] = bytes(bad)
    bad = bytearray(syn); bad[16:18] = b"\xff\xff"; m["bad_total_length"] = bytes(bad)
    bad = bytearray(syn); bad[14 + 20 + 12] = 0xF0; m["bad_tcp_offset"] = bytes(bad)
    ext = raw(f["tcp6_dstopts"])
    bad = bytearray(ext); bad[14 + 41] = 0xFF; m["bad_ip6_ext_len"] = bytes(bad)
    chain = (eth() / IPv6(src=CLIENT6, dst=VIP6) /
             (IPv6ExtHdrDestOpt() / IPv6ExtHdrDestOpt() / IPv6ExtHdrDestOpt() / IPv6ExtHdrDestOpt() /
              IPv6ExtHdrDestOpt() / IPv6ExtHdrDestOpt() / IPv6ExtHdrDestOpt() / IPv6ExtHdrDestOpt() /
              IPv6ExtHdrDestOpt()) / TCP(dport=443))
    m["ip6_ext_chain_too_long"] = raw(chain)
    m["ping_of_death_frag"] = raw(eth() / IP(src=CLIENT4, dst=DNS4, frag=8189, proto=17) / Raw(b"z" * 64))
    icmp = bytearray(raw(f["icmp4_frag_needed"]))
    m["icmp_error_truncated"] = bytes(icmp[:14 + 20 + 8 + 20 + 2])
    bad = bytearray(raw(f["echo4_local"])); bad[-1] ^= 0xFF; m["echo_bad_checksum"] = bytes(bad)
    nd = bytearray(raw(f["nd_ns"])); nd[14 + 7] = 64; m["nd_bad_hop_limit"] = bytes(nd)
    arp = bytearray(raw(f["arp_request"])); arp[14 + 4] = 8; m["arp_bad_hlen"] = bytes(arp)
    return m


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")
    os.makedirs(out_dir, exist_ok=True)
    f = frames()
    all_frames = {k: raw(v) for k, v in f.items()}
    all_frames.update(malformed(f))
    for name, data in sorted(all_frames.items()):
        with open(os.path.join(out_dir, name + ".bin"), "wb") as fh:
            fh.write(data)
    print(f"make_corpus: {len(all_frames)} frames in {out_dir}")


if __name__ == "__main__":
    main()
