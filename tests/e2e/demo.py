#!/usr/bin/python3
"""The live part of scripts/demo.sh: maglb on the namespace testbed, real
HTTP through each VIP beside the table's shares, then a backend added while
a long download streams. Uses the e2e harness (lbtest), so everything is torn
down however it ends."""
import os
import re
import subprocess

import lbtest
from lbtest import VIP, run

REQUESTS = 300


def banner(text):
    print("\n== %s\n" % text, flush=True)


def table_shares(config_path, vip):
    """{backend: share %} from `maglbctl table` (what the table promises)."""
    out = run([lbtest.MAGLBCTL, "table", "--config", config_path, "--vip", vip]).stdout
    shares = {}
    for line in out.splitlines():
        m = re.match(r"\s+(\S+)\s+\S+\s+\d+\s+\d+\s+([\d.]+)%", line)
        if m:
            shares[m.group(1)] = float(m.group(2))
    return shares


def show_distribution(tb, mode, n):
    counts = tb.curl_many(VIP[mode], n)
    shares = table_shares(tb.config_path, "web-" + mode)
    print("  vip web-%s (%s, %s): %d requests with curl from the client" % (mode, VIP[mode], mode, n))
    print("    %-8s %8s %10s %12s" % ("backend", "served", "observed", "table share"))
    for b in sorted(set(shares) | set(counts)):
        print("    %-8s %8d %9.1f%% %11.1f%%" % (b, counts.get(b, 0), 100.0 * counts.get(b, 0) / n,
                                               shares.get(b, 0.0)))
    return counts


def main():
    backends = {m: {"be1": 1, "be2": 1, "be3": 1} for m in VIP}
    banner("Test topology: client -> router -> maglb (DPDK net_pcap on a veth) -> be1..be3, "
           "replies straight back (DSR)")
    with lbtest.Testbed(lbtest.config_text(backends)) as tb:
        print([x for x in tb.read_log().splitlines() if "started:" in x][0])
        print("  backends decapsulate GRE / IP-in-IP in user space (maglb-decap); L2 DSR needs none")

        banner("%d HTTP requests through each VIP: who served them, beside the table's shares" % REQUESTS)
        for mode in VIP:
            show_distribution(tb, mode, REQUESTS)
            print()
        for mode in VIP:
            print("  udp echo via %-5s: %s" % (mode, dict(sorted(tb.udp_many(VIP[mode], 60).items()))))

        banner("Live change: add backend be4 while a long download streams through web-gre")
        stream = tb.start_stream(VIP["gre"], 8_000_000, delay_ms=20)
        print("  streaming 8 MB from %s (via %s) ..." % (VIP["gre"], stream.backend()))
        old_path = os.path.join(tb.tmp, "old.toml")
        new_path = os.path.join(tb.tmp, "new.toml")
        with open(old_path, "w") as f:
            f.write(lbtest.config_text(backends))
        for m in VIP:
            backends[m]["be4"] = 1
        with open(new_path, "w") as f:
            f.write(lbtest.config_text(backends))
        print("  preview: maglbctl diff old.toml new.toml (vip web-gre)\n")
        diff = run([lbtest.MAGLBCTL, "diff", old_path, new_path]).stdout
        block = diff.split('vip "web-gre"')[1].split("\n\n")[0]
        print('  vip "web-gre"' + block.replace("\n", "\n  ") + "\n")
        tb.reload(lbtest.config_text(backends))
        print("  " + [x for x in tb.read_log().splitlines() if "reload" in x][-1].split("maglb: ")[1][:160] + " ...")
        print("  stream still running: %s" % stream.running())
        stream.check("the stream across the reload")

        banner("New connections after the change (be4 takes its quarter; the rest stay put)")
        show_distribution(tb, "gre", REQUESTS)

        banner("maglbctl stats (from the running daemon, over DPDK telemetry)")
        out = run([lbtest.MAGLBCTL, "stats", "--prefix", tb.prefix]).stdout
        print("\n".join(out.split("\n\n")[:2]))
        banner("Stopping maglb (SIGTERM) and tearing the testbed down")


if __name__ == "__main__":
    try:
        main()
    except lbtest.TestFailure as e:
        print("demo failed: %s" % e)
        raise SystemExit(1)
    except subprocess.TimeoutExpired as e:
        print("demo failed: timeout: %s" % e)
        raise SystemExit(1)
