#!/usr/bin/python3
"""The live part of scripts/demo.sh: maglb on the namespace testbed, real
HTTP through each VIP beside the table's shares, then a backend added while
a long download streams. Uses the e2e harness (lbtest), so everything is torn
down however it ends."""
import os
import re
import shutil
import signal
import subprocess
import time

import lbtest
import test_prometheus
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


# web-gre is checked over HTTP through the kernel interface maglb0 (the host's
# own TCP stack on the data port), and ramps a recovered backend in over 4 s.
HEALTH = """
[kernel]
interface = "maglb0"

[health]
rebuild_interval_ms = 500
slow_start_steps = 4

[[health_check]]
name = "http"
type = "http"
interval_ms = 500
timeout_ms = 300
rise = 2
fall = 2
"""


def with_health(text):
    return (text.replace('name = "web-gre"\n', 'name = "web-gre"\nhealth_check = "http"\nslow_start_s = 4\n') + HEALTH
            + '\n[metrics]\nlisten = "%s"\n' % test_prometheus.LISTEN)


def show_prometheus(tb):
    banner("Prometheus: a real server scraping maglb's /metrics every second, then a PromQL query")
    if shutil.which("prometheus") is None:
        print("  (prometheus is not installed: scripts/install-deps.sh installs it)")
        return
    print("  # curl http://%s/metrics | head" % test_prometheus.LISTEN)
    lines = [l for l in test_prometheus.scrape().splitlines() if l.startswith("maglb_backend_packets_total")]
    print("  " + "\n  ".join(lines[:4]))
    prom_dir = os.path.join(tb.tmp, "prometheus")
    os.makedirs(prom_dir)
    test_prometheus.prometheus_config(os.path.join(prom_dir, "prometheus.yml"))
    with open(os.path.join(prom_dir, "prometheus.log"), "w") as prom_log:
        prom = subprocess.Popen(
            ["ip", "netns", "exec", "mlb-lb", "prometheus", "--config.file=" + os.path.join(prom_dir, "prometheus.yml"),
             "--storage.tsdb.path=" + os.path.join(prom_dir, "data"),
             "--web.listen-address=" + test_prometheus.PROM_LISTEN, "--log.level=warn"],
            stdout=prom_log, stderr=subprocess.STDOUT)
    try:
        tb.wait_for(lambda: [float(x["value"][1]) for x in test_prometheus.query('up{job="maglb"}')] == [1.0],
                    "Prometheus scraping maglb", 60)
        counts = tb.curl_many(VIP["ipip"], 60)
        print("\n  60 requests through web-ipip: %s" % dict(sorted(counts.items())))
        expr = 'rate(maglb_backend_packets_total{vip="web-ipip"}[15s])'
        rates = {}

        def positive():
            rates.clear()
            rates.update(test_prometheus.by_backend(test_prometheus.query(expr)))
            return sum(1 for v in rates.values() if v > 0) == len([b for b in counts if counts[b] > 0])

        tb.wait_for(positive, "rates in Prometheus", 30)
        print("  PromQL %s:" % expr)
        for b, v in sorted(rates.items()):
            print("    backend=%s  %.2f packets/s" % (b, v))
    finally:
        prom.send_signal(signal.SIGTERM)
        try:
            prom.wait(timeout=10)
        except subprocess.TimeoutExpired:
            prom.kill()
            prom.wait(timeout=5)


def vip_table(tb, vip):
    out = run([lbtest.MAGLBCTL, "stats", "--prefix", tb.prefix]).stdout
    for block in out.split("\n\n"):
        if block.startswith('vip "%s"' % vip):
            return "  " + block.strip().replace("\n", "\n  ")
    return "  (vip %s not in maglbctl stats)" % vip


def backend(tb, vip, name):
    return {b["name"]: b for b in tb.stats()["vips"][vip]["backends"]}[name]


def show_health(tb):
    banner("Health checks: be2's HTTP server stops (HTTP checks of web-gre every 500 ms, fall 2, rise 2)")
    subprocess.run([lbtest.TESTBED, "kernel-routes", "maglb0"], check=True, capture_output=True,
                   env=tb.testbed_env(), pass_fds=(tb.lock.fileno(),))
    tb.wait_for(lambda: backend(tb, "web-gre", "be2")["health"] == "up", "be2 up", 20)
    print(vip_table(tb, "web-gre"))
    subprocess.run([lbtest.TESTBED, "service", "be2", "server", "stop"], check=True, capture_output=True,
                   env=tb.testbed_env(), pass_fds=(tb.lock.fileno(),))
    tb.wait_for(lambda: backend(tb, "web-gre", "be2")["effective_weight"] == 0, "be2 out of the table", 20)
    print("\n  " + [x for x in tb.read_log().splitlines() if "backend be2:" in x][-1].split("maglb: ")[1])
    print("  " + [x for x in tb.read_log().splitlines() if "health (" in x][-1].split("maglb: ")[1][:150])
    print()
    print(vip_table(tb, "web-gre"))
    print()
    show_distribution(tb, "gre", 120)
    banner("be2's server starts again: up after 2 good checks, then slow start over 4 s")
    subprocess.run([lbtest.TESTBED, "service", "be2", "server", "start"], check=True, capture_output=True,
                   env=tb.testbed_env(), pass_fds=(tb.lock.fileno(),))
    t0 = time.time()
    last = None
    while time.time() - t0 < 15:
        b2, b1 = backend(tb, "web-gre", "be2"), backend(tb, "web-gre", "be1")
        now = (b2["health"], b2["effective_weight"], b1["effective_weight"], b2["entries"])
        if now != last:
            print("  t=%4.1fs  be2 %-5s effective weight %d (be1: %d), table entries %d" % ((time.time() - t0,) + now))
            last = now
        if b2["health"] == "up" and b2["effective_weight"] == b1["effective_weight"] == 1:
            break
        time.sleep(0.2)
    print()
    show_distribution(tb, "gre", 120)


def show_capture(tb):
    banner("Packet capture: dpdk-dumpcap attached to the running maglb, tshark decoding")
    path = os.path.join(tb.tmp, "demo.pcapng")
    cmd = ["dpdk-dumpcap", "--file-prefix", tb.prefix, "-i", "net_pcap0", "-w", path]
    print("  # ip netns exec mlb-lb " + " ".join(cmd))
    err_path = path + ".err"
    with open(err_path, "w") as err:
        p = subprocess.Popen(["ip", "netns", "exec", "mlb-lb"] + cmd, stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.time() + 30
    while "Packets captured:" not in open(err_path).read():  # its callbacks are in
        if p.poll() is not None or time.time() > deadline:
            p.kill()
            raise lbtest.TestFailure("dpdk-dumpcap did not start:\n" + open(err_path).read())
        time.sleep(0.1)
    print("  one curl through web-gre, one through web-ipip, then Ctrl-C")
    for mode in ("gre", "ipip"):
        tb.curl_many(VIP[mode], 1)
    p.send_signal(signal.SIGINT)
    p.wait(timeout=15)
    print("  " + open(err_path).read().strip().splitlines()[-1])
    # The client's SYNs only (health probes of the backends are SYNs too).
    syns = "ip.src == 10.0.1.2 && tcp.flags.syn == 1 && tcp.flags.ack == 0"
    print("  # tshark -r demo.pcapng -Y '%s'   (each SYN in, and out to a backend)" % syns)
    r = run(["tshark", "-r", path, "-Y", syns, "-T", "fields",
             "-e", "frame.packet_flags_direction", "-e", "ip.src", "-e", "ip.dst", "-e", "ip.proto",
             "-e", "tcp.srcport", "-e", "tcp.dstport"])
    for line in r.stdout.splitlines():
        direction, src, dst, proto, sport, dport = line.split("\t")
        hops = list(zip(src.split(","), dst.split(","), proto.split(",")))
        outer = "".join("%s > %s %s | " % (s, d, {"47": "GRE", "4": "IP-in-IP"}[pr]) for s, d, pr in hops[:-1])
        print("    %-3s %s%s:%s > %s:%s TCP SYN" % ("in" if int(direction, 16) & 3 == 1 else "out", outer,
                                                 hops[-1][0], sport, hops[-1][1], dport))


def main():
    backends = {m: {"be1": 1, "be2": 1, "be3": 1} for m in VIP}
    banner("Test topology: client -> router -> maglb (DPDK net_pcap on a veth) -> be1..be3, "
           "replies straight back (DSR)")
    # On hugepages, so that dpdk-dumpcap can attach (show_capture).
    with lbtest.Testbed(with_health(lbtest.config_text(backends)), hugepages="try") as tb:
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
        tb.reload(with_health(lbtest.config_text(backends)))
        print("  " + [x for x in tb.read_log().splitlines() if "reload" in x][-1].split("maglb: ")[1][:160] + " ...")
        print("  stream still running: %s" % stream.running())
        stream.check("the stream across the reload")

        banner("New connections after the change (be4 takes its quarter; the rest stay put)")
        show_distribution(tb, "gre", REQUESTS)

        banner("maglbctl stats (from the running daemon, over DPDK telemetry)")
        out = run([lbtest.MAGLBCTL, "stats", "--prefix", tb.prefix]).stdout
        print("\n".join(out.split("\n\n")[:2]))

        show_health(tb)
        show_prometheus(tb)
        if tb.huge_dir is not None:
            show_capture(tb)
        else:
            print("\n(no packet capture: this machine gave no hugepages, and a capture tool cannot attach to "
                  "a --no-huge maglb)")
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
