#!/usr/bin/python3
"""End to end: real TCP (curl) and UDP through every forwarding mode with the
expected shares; ARP, ND and ping of the LB; non-VIP traffic dropped and
counted; telemetry readable by dpdk-telemetry.py; SIGTERM exits cleanly."""
import json
import shutil

import lbtest
from lbtest import VIP, LB_IP, LB_IP6, LB_MAC, check, log, ns, run

HTTP_REQUESTS = 240   # per VIP: 80 expected per backend, sd ~7.3
UDP_REQUESTS = 90


def shares_ok(counts, backends, n, tolerance=0.4):
    """Every backend within +-40% of its fair share (5+ sd at these sizes)."""
    fair = n / len(backends)
    return (sum(counts.values()) == n and set(counts) == set(backends)
            and all(abs(counts[b] - fair) <= tolerance * fair for b in backends))


def test():
    # Two workers: two queue pairs (net_af_packet's kernel fanout spreads flows).
    with lbtest.Testbed(workers=2) as tb:
        backends = ["be1", "be2", "be3"]
        client_ports = {}  # per IPv4 VIP: the distinct client ports (each a flow to the LB)
        for mode, vip in VIP.items():
            counts = tb.curl_many(vip, HTTP_REQUESTS)
            client_ports[mode] = len(set(tb.curl_ports))
            log("tcp %-5s %s: %s, %d distinct client ports" % (mode, vip, dict(sorted(counts.items())),
                                                                client_ports[mode]))
            check(shares_ok(counts, backends, HTTP_REQUESTS),
                  "%s: %d curl requests all answered, each backend near 1/3" % (mode, HTTP_REQUESTS))
        for mode, vip in lbtest.VIP6.items():
            counts = tb.curl_many(vip, HTTP_REQUESTS)
            log("tcp6 %-5s %s: %s" % (mode, vip, dict(sorted(counts.items()))))
            check(shares_ok(counts, backends, HTTP_REQUESTS),
                  "IPv6 VIP via %s: %d curl requests all answered, each backend near 1/3" %
                  (mode, HTTP_REQUESTS))
        for mode, vip in VIP.items():
            counts = tb.udp_many(vip, UDP_REQUESTS)
            log("udp %-5s %s: %s" % (mode, vip, dict(sorted(counts.items()))))
            check(shares_ok(counts, backends, UDP_REQUESTS, 0.6),
                  "%s: %d UDP echoes all answered, each backend serves some" % (mode, UDP_REQUESTS))

        s = tb.stats()
        for mode in VIP:
            # One new flow per distinct 5-tuple at least: a connection on a
            # port an earlier one had used is that closed flow's tuple, pinned.
            v = s["vips"]["web-" + mode]
            check(sum(v["backend_new_flows"]) >= client_ports[mode] >= HTTP_REQUESTS - 5 and v["packets"] > 0,
                  "web-%s counters: %d new flows for %d connections from %d distinct client ports, %d packets "
                  "(conntrack: untracked %d, evictions %d, repinned %d)" %
                  (mode, sum(v["backend_new_flows"]), HTTP_REQUESTS, client_ports[mode], v["packets"],
                   s["stats"]["conntrack_untracked"], s["stats"]["conntrack_evictions"],
                   s["stats"]["conntrack_repinned"]))
        occupied = s["stats"]["conntrack_occupied_per_worker"]
        check(len(occupied) == 2 and all(n > 0 for n in occupied),
              "both workers track flows (conntrack occupancy per worker: %s)" % occupied)
        check(len({v["fingerprint"] for v in s["vips"].values()}) == 1,
              "equal backend sets give equal table fingerprints across VIPs")
        # The fingerprint maglbctl computes offline from the same file matches.
        offline = run([lbtest.MAGLBCTL, "table", "--config", tb.config_path, "--vip", "web-gre"]).stdout
        check(s["vips"]["web-gre"]["fingerprint"] in offline,
              "live fingerprint equals `maglbctl table`'s for the same config")

        # ARP / ND / ping of the LB's own addresses, from the router.
        ns("mlb-router", "ip", "neigh", "flush", "dev", "br0")
        r = ns("mlb-router", "ping", "-c", "3", "-i", "0.2", "-W", "1", LB_IP, check_rc=False)
        check(r.returncode == 0 and " 0% packet loss" in r.stdout, "ping %s: 3/3 answered" % LB_IP)
        neigh = ns("mlb-router", "ip", "neigh", "show", LB_IP).stdout
        check(LB_MAC in neigh, "the router resolved %s to %s by ARP" % (LB_IP, LB_MAC))
        r = ns("mlb-router", "ping", "-6", "-c", "3", "-i", "0.2", "-W", "1", LB_IP6, check_rc=False)
        check(r.returncode == 0 and " 0% packet loss" in r.stdout, "ping %s: 3/3 answered (ND + ICMPv6)" % LB_IP6)
        local = tb.stats()["stats"]
        check(local["arp_replies"] >= 1 and local["nd_replies"] >= 1 and local["echo_replies"] >= 6,
              "counted: arp_replies %d, nd_replies %d, echo_replies %d" %
              (local["arp_replies"], local["nd_replies"], local["echo_replies"]))

        # Non-VIP traffic: an address the router sends to the LB that no VIP
        # has, and a VIP address on a port no VIP serves.
        before = tb.stats()["stats"]
        code = ("import socket\n"
                "for i in range(50):\n"
                "  s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.sendto(b'x',('10.100.0.9',9999)); s.close()\n"
                "  s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.sendto(b'x',('10.100.0.1',9999)); s.close()\n")
        ns("mlb-client", "/usr/bin/python3", "-c", code)
        tb.wait_for(lambda: tb.stats()["stats"]["drop_no_vip"] >= before["drop_no_vip"] + 50
                    and tb.stats()["stats"]["drop_vip_no_service"] >= before["drop_vip_no_service"] + 50,
                    "non-VIP drops counted")
        after = tb.stats()["stats"]
        check(True, "non-VIP traffic dropped and counted: no_vip +%d, vip_no_service +%d" %
              (after["drop_no_vip"] - before["drop_no_vip"],
               after["drop_vip_no_service"] - before["drop_vip_no_service"]))

        # dpdk-telemetry.py reads the same commands.
        tool = shutil.which("dpdk-telemetry.py")
        if tool:
            r = run([tool, "-f", tb.prefix], input="/maglb/vips\n", timeout=20)
            out = r.stdout[r.stdout.find("{\"/maglb/vips\""):]
            vips = json.loads(out[:out.rfind("}") + 1])["/maglb/vips"]
            check(vips["generation"] == 1 and "web-gre" in vips["names"],
                  "dpdk-telemetry.py -f %s answers /maglb/vips" % tb.prefix)
        # Leaving the with-block sends SIGTERM and checks exit code 0 + log line.


if __name__ == "__main__":
    lbtest.main(test)
