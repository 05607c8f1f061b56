#!/usr/bin/python3
"""End to end, two-arm: clients' packets come in on port 0 (lb0, the router's
br0), encapsulated packets leave by port 1 (lb1, the router's br1, gateway
10.0.2.1, given as a static [[neighbor]]: never asked by ARP), which takes
port 0's MAC; replies to ARP/ping go back out of the port they came in on."""
import lbtest
from lbtest import VIP, LB_IP, check, log, ns


def tx_packets(dev):
    out = ns("mlb-lb", "cat", "/sys/class/net/%s/statistics/tx_packets" % dev).stdout
    return int(out.strip())


def test():
    vips = {m: {"be1": 1, "be2": 1, "be3": 1} for m in ("gre", "ipip")}
    config = lbtest.config_text(vips, gateway_v4="10.0.2.1", ipv6_vips=False,
                                neighbors={"10.0.2.1": "02:4d:4c:00:02:01"})
    with lbtest.Testbed(config, two_arm=True) as tb:
        check("two-arm" in tb.read_log(), "maglb started two-arm")
        before = {d: tx_packets(d) for d in ("lb0", "lb1")}
        for mode in ("gre", "ipip"):
            counts = tb.curl_many(VIP[mode], 90)
            log("tcp %-4s: %s" % (mode, dict(sorted(counts.items()))))
            check(sum(counts.values()) == 90 and len(counts) == 3,
                  "%s: 90/90 curl requests answered by all three backends" % mode)
        after = {d: tx_packets(d) for d in ("lb0", "lb1")}
        sent = {d: after[d] - before[d] for d in after}
        log("frames sent since: %s" % sent)
        check(sent["lb1"] >= 180 * 3 and sent["lb0"] < 20,
              "encapsulated packets left by the backend port lb1, not lb0")
        r = ns("mlb-router", "ping", "-c", "3", "-i", "0.2", "-W", "1", LB_IP, check_rc=False)
        check(r.returncode == 0, "ping %s on the front port answered" % LB_IP)
        st = tb.stats()["stats"]
        check("neighbor 10.0.2.1" not in tb.read_log() and st["arp_requests_sent"] == 0,
              "the static [[neighbor]] gateway was used without ARP (arp_requests_sent %d)" %
              st["arp_requests_sent"])


if __name__ == "__main__":
    lbtest.main(test)
