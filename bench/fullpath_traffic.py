"""Traffic for bench/fullpath.py: pcap files of TCP packets toward the bench VIP.

Pure Python (struct; no numpy, no scapy: scapy builds ~20k packets/s, this
~300k/s). Every frame is 60 bytes on the wire less the FCS (Ethernet + IPv4 +
TCP, padded), IPv4 header checksum correct, TCP checksum 0 (the LB does not
look at it). Flow i has source 100.64.0.0 + (i mod 2^22) (so up to 4M flows are
distinct by address alone) and a source port that varies with i, and, past 4M
flows, with i // 2^22 too (flows with the same address differ in port: up to
64000 x 4M distinct flows); destination the VIP.

Can be run alone: python3 bench/fullpath_traffic.py MIX FLOWS OUT.pcap
"""

import itertools
import random
import struct
import sys

DST_MAC = bytes.fromhex("027063617000")  # net_pcap's MAC for its first port: 02:70:63:61:70:<index>
SRC_MAC = bytes.fromhex("020000000099")
VIP = bytes([198, 51, 100, 80])
VIP_PORT = 80
CLIENT_BASE = (100 << 24) | (64 << 16)  # 100.64.0.0/10
FRAME_LEN = 60

TCP_SYN = 0x02
TCP_ACK = 0x10

_PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
_RECORD_HEADER = struct.pack("<IIII", 0, 0, FRAME_LEN, FRAME_LEN)
_ETH = DST_MAC + SRC_MAC + b"\x08\x00"
# IPv4: version/IHL, TOS, total length 40, id 0, DF, TTL 64, TCP; the checksum
# sums the constant words once, the source address per packet.
_IP_CONST_SUM = 0x4500 + 40 + 0x4000 + ((64 << 8) | 6) + ((VIP[0] << 8) | VIP[1]) + ((VIP[2] << 8) | VIP[3])
_PAD = b"\x00" * (FRAME_LEN - 14 - 20 - 20)


ADDRESS_BITS = 22  # 100.64.0.0/10


def frame(flow, flags):
    """The 60-byte frame of flow `flow` with TCP `flags`, its record header first."""
    src = CLIENT_BASE + (flow & ((1 << ADDRESS_BITS) - 1))
    s = _IP_CONST_SUM + (src >> 16) + (src & 0xFFFF)
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    ip = struct.pack("!BBHHHBBHI4s", 0x45, 0, 40, 0, 0x4000, 64, 6, (~s) & 0xFFFF, src, VIP)
    # Below 4M flows this is 1024 + (flow * 7919) % 64000, as before (the same
    # files); flows that share an address (the same flow mod 2^22) are
    # flow >> 22 apart in port, so they differ while that is below 64000.
    sport = 1024 + ((flow & ((1 << ADDRESS_BITS) - 1)) * 7919 + (flow >> ADDRESS_BITS)) % 64000
    tcp = struct.pack("!HHIIBBHHH", sport, VIP_PORT, 1 + flow, 1, 0x50, flags, 65535, 0, 0)
    return _RECORD_HEADER + _ETH + ip + tcp + _PAD


def zipf_sample(flows, packets, s, rng):
    """`packets` flow indices drawn Zipf(s) over `flows` flows; the rank of a
    flow is shuffled so that hot flows are not neighbours in address."""
    cum = list(itertools.accumulate(1.0 / (k ** s) for k in range(1, flows + 1)))
    ranks = rng.choices(range(flows), cum_weights=cum, k=packets)
    perm = list(range(flows))
    rng.shuffle(perm)
    return [perm[r] for r in ranks]


def build(mix, flows, packets, seed=1):
    """The pcap records (bytes, without the file header) and a description.

    mix: "uniform"  every flow once, ACK (packets = flows);
         "zipf"     `packets` ACKs, flows drawn Zipf(1.0) over `flows`;
         "syn"      `packets` SYNs, each its own flow (flows = packets);
         "mix90"    90% ACKs uniform over `flows` established flows, 10% SYNs
                    of flows never repeated within the file."""
    rng = random.Random(seed)
    if mix == "uniform":
        order = list(range(flows))
        rng.shuffle(order)
        recs = [frame(f, TCP_ACK) for f in order]
        return b"".join(recs), {"packets": flows, "distinct": flows}
    if mix == "zipf":
        table = [frame(f, TCP_ACK) for f in range(flows)]
        picks = zipf_sample(flows, packets, 1.0, rng)
        return b"".join(table[f] for f in picks), {"packets": packets, "distinct": len(set(picks))}
    if mix == "syn":
        order = list(range(packets))
        rng.shuffle(order)
        return b"".join(frame(f, TCP_SYN) for f in order), {"packets": packets, "distinct": packets}
    if mix == "mix90":
        table = [frame(f, TCP_ACK) for f in range(flows)]
        recs = []
        new_flow = flows
        for _ in range(packets):
            if rng.random() < 0.1:
                recs.append(frame(new_flow, TCP_SYN))
                new_flow += 1
            else:
                recs.append(table[rng.randrange(flows)])
        return b"".join(recs), {"packets": packets, "distinct": new_flow}
    raise ValueError("unknown mix %r" % mix)


def write(path, records):
    with open(path, "wb") as f:
        f.write(_PCAP_HEADER)
        f.write(records)


def pcap_header():
    return _PCAP_HEADER


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: fullpath_traffic.py uniform|zipf|syn|mix90 FLOWS OUT.pcap")
    n = int(sys.argv[2])
    recs, info = build(sys.argv[1], n, max(n, 2 * n if sys.argv[1] != "uniform" else n))
    write(sys.argv[3], recs)
    print(info)
