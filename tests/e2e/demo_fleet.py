#!/usr/bin/python3
"""`scripts/demo.sh fleet`: two maglb instances behind a BIRD router with ECMP
(scripts/testbed.sh fleet-up 2), long-lived connections through one VIP, one
instance killed with SIGKILL, and the connections going on through the other.
Uses the e2e fleet harness (test_fleet.py), so everything is torn down
however it ends."""
import collections
import signal
import time

import lbtest
from lbtest import MAGLBCTL, run
from test_fleet import VIP, Fleet, RouteWatch, Streams, stall_summary, wait_nexthops


def banner(text):
    print("\n== %s\n" % text, flush=True)


def main():
    with Fleet(2, bfd=True) as fleet:
        banner("Two maglb instances (mlb-lb-a 10.0.0.21, mlb-lb-b 10.0.0.22), each with BIRD beside it")
        for n in ("a", "b"):
            fleet.start(n)
        wait_nexthops(fleet, ("a", "b"))
        print(lbtest.ns("mlb-router", "ip", "route", "show", VIP).stdout)
        print("  each instance's BIRD learns kernel table 4242, where maglb puts the VIPs it can serve:")
        print("  " + lbtest.ns("mlb-lb-a", "ip", "route", "show", "table", "4242").stdout.replace("\n", "\n  "))
        r = fleet.fleet_check()
        print("\n".join(r.stdout.splitlines()[:4]))

        banner("60 long-lived TCP connections to %s (an echo every 50 ms, each checked byte for byte)" % VIP)
        streams = Streams(fleet, 60, 10, 46000)
        before = {46000 + i: fleet.instance_of(46000 + i) for i in range(60)}
        split = collections.Counter(before.values())
        print("  the router's ECMP hash sends %d through a and %d through b" % (split["a"], split["b"]))
        time.sleep(2)

        banner("SIGKILL maglb a (no withdrawal: the router learns it from BFD)")
        watch = RouteWatch(fleet)
        t_kill = time.time()
        fleet.signal("a", signal.SIGKILL)
        conns = streams.result()
        watch.end()
        gone = watch.first_without("a", t_kill)
        fleet.wait_exit("a")
        print("  the router's route lost a after %.2f s:" % (gone - t_kill))
        print("  " + lbtest.ns("mlb-router", "ip", "route", "show", VIP).stdout.strip())
        via_a = [c for c in conns if before[c["sport"]] == "a"]
        ok = sum(c["ok"] for c in conns)
        print("\n  %d of %d connections finished intact; the %d that went through a went on through b, "
              "which sent each to the same backend (same table, no shared state)" % (ok, len(conns), len(via_a)))
        print("  longest round trip of a's connections (the failover they saw): %s" % stall_summary(via_a))
        print("  of b's own connections: %s" % stall_summary([c for c in conns if before[c["sport"]] == "b"]))
        per_backend = collections.Counter(c["backend"] for c in via_a)
        print("  a's connections by backend: %s" % dict(sorted(per_backend.items())))

        banner("b's view (maglbctl stats)")
        out = run([MAGLBCTL, "stats", "--prefix", fleet.prefix("b")]).stdout
        for line in out.splitlines():
            if line.strip().startswith(("announce:", "conntrack:")) or line.startswith('vip "web-gre"'):
                print("  " + line.strip()[:200])


if __name__ == "__main__":
    lbtest.main(main)
