#!/usr/bin/python3
"""End to end, the Prometheus exporter ([metrics] listen): /metrics, fetched
with curl inside the LB's namespace, passes `promtool check metrics` and
agrees with `maglbctl stats`; a real Prometheus server in the namespace
scrapes it every second while curl traffic flows through web-gre, whose
third backend is drained (weight 0), and a PromQL query over its HTTP API
gives a positive packet rate for exactly the two backends that served; the
per-worker busy ratio is a ratio, and histogram_quantile reads the packet
latency histogram (a time between 64 ns and 134 ms). Hostile clients (a 1 MB header, other
paths and methods, 50 idle and 50 busy connections at once) are refused
while scrapes go on, and Prometheus sees no failed scrape. A reload that
changes [metrics] listen says it applies at the next restart."""
import json
import os
import re
import shutil
import signal
import subprocess
import time

import lbtest
from lbtest import VIP, check, log

LISTEN = "127.0.0.1:9469"
PROM_LISTEN = "127.0.0.1:9090"
SERVED = ("be1", "be2")
DRAINED = "be3"
CONNECTIONS = 60

# Run inside mlb-lb by python3: the hostile clients, then a scrape while 50
# idle connections are still open. Prints one JSON object.
HOSTILE = r"""
import json, socket, sys, threading
HOST, PORT = "127.0.0.1", 9469
def exchange(data, timeout=5.0):
    s = socket.create_connection((HOST, PORT), timeout=timeout)
    try:
        try:
            s.sendall(data)
        except OSError:
            pass  # refused before reading it all
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        return out.split(b"\r\n", 1)[0].decode("latin-1")
    finally:
        s.close()
def get(path, method="GET"):
    return exchange(("%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % (method, path)).encode())
r = {}
r["big_header"] = exchange(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n")
r["other_path"] = get("/admin")
r["post"] = get("/metrics", "POST")
idle = [socket.create_connection((HOST, PORT)) for _ in range(50)]
for s in idle[:10]:
    s.sendall(b"GET /metr")  # stalled mid-request
busy = []
def hammer():
    busy.append(get("/nope"))
threads = [threading.Thread(target=hammer) for _ in range(50)]
for t in threads:
    t.start()
r["scrape_during"] = get("/metrics")
for t in threads:
    t.join()
r["busy"] = sorted(set(busy))
r["busy_count"] = len(busy)
for s in idle:
    s.close()
r["scrape_after"] = get("/metrics")
print(json.dumps(r))
"""


def curl_lb(url, *args, timeout=20):
    return lbtest.ns("mlb-lb", "curl", "-sS", "-f", "-m", "10", *args, url, timeout=timeout)


def scrape():
    return curl_lb("http://%s/metrics" % LISTEN).stdout


def samples(text, family):
    """{labels-text: value} of one family's samples."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"%s(\{[^}]*\})? (\S+)$" % re.escape(family), line)
        if m:
            out[m.group(1) or ""] = float(m.group(2))
    return out


def query(expr):
    r = lbtest.ns("mlb-lb", "curl", "-sS", "-f", "-m", "10", "-G", "--data-urlencode", "query=" + expr,
                  "http://%s/api/v1/query" % PROM_LISTEN, timeout=20)
    reply = json.loads(r.stdout)
    if reply.get("status") != "success":
        raise lbtest.TestFailure("query %s: %s" % (expr, r.stdout))
    return reply["data"]["result"]


def by_backend(result):
    return {s["metric"].get("backend"): float(s["value"][1]) for s in result}


def prometheus_config(path):
    with open(path, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n  - job_name: maglb\n    static_configs:\n"
                "      - targets: ['%s']\n" % LISTEN)


def test():
    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        raise lbtest.TestFailure("prometheus / promtool not installed (scripts/install-deps.sh installs them)")
    backends = {m: {"be1": 1, "be2": 1, "be3": 1} for m in VIP}
    backends["gre"] = {"be1": 1, "be2": 1, DRAINED: 0}
    config = lbtest.config_text(backends, extra='\n[metrics]\nlisten = "%s"\n' % LISTEN)
    with lbtest.Testbed(config) as tb:
        check("metrics: serving Prometheus metrics on http://%s/metrics" % LISTEN in tb.read_log(),
              "maglb logs where it serves /metrics")

        # 1. The exposition as curl fetches it: promtool accepts it, and it
        # says what maglbctl stats says.
        text = scrape()
        with open(os.path.join(tb.tmp, "metrics.txt"), "w") as f:
            f.write(text)
        p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True,
                           timeout=30)
        check(p.returncode == 0 and p.stdout.strip() == "" and p.stderr.strip() == "",
              "promtool check metrics accepts /metrics (%d lines)%s" %
              (len(text.splitlines()), "" if p.returncode == 0 else ": " + p.stdout + p.stderr))
        head = curl_lb("http://%s/metrics" % LISTEN, "-I").stdout
        check(re.search(r"(?i)content-type: text/plain; version=0\.0\.4", head) is not None,
              "HEAD /metrics: the exposition's content type")
        info = samples(text, "maglb_vip_info")
        stats = tb.stats()
        web_gre = [k for k in info if 'vip="web-gre"' in k]
        check(len(web_gre) == 1 and 'fingerprint="%s"' % stats["vips"]["web-gre"]["fingerprint"] in web_gre[0]
              and 'forwarding="gre"' in web_gre[0] and 'address="%s"' % VIP["gre"] in web_gre[0],
              "maglb_vip_info of web-gre: its address, forwarding and the fingerprint maglbctl shows (%s)"
              % (web_gre[0] if web_gre else None))
        check(samples(text, "maglb_generation") == {"": float(stats["stats"]["generation"])},
              "maglb_generation is the running generation")
        weights = samples(text, "maglb_backend_effective_weights")
        check(weights.get('{vip="web-gre",backend="%s"}' % DRAINED) == 0.0 and
              weights.get('{vip="web-gre",backend="be1"}') == 1.0,
              "effective weights: %s drained (0), be1 at 1" % DRAINED)

        # 2. A real Prometheus server scraping it every second.
        prom_dir = os.path.join(tb.tmp, "prometheus")
        os.makedirs(prom_dir)
        prometheus_config(os.path.join(prom_dir, "prometheus.yml"))
        prom_log = open(os.path.join(prom_dir, "prometheus.log"), "w")
        prom = subprocess.Popen(
            ["ip", "netns", "exec", "mlb-lb", "prometheus",
             "--config.file=" + os.path.join(prom_dir, "prometheus.yml"),
             "--storage.tsdb.path=" + os.path.join(prom_dir, "data"),
             "--web.listen-address=" + PROM_LISTEN, "--log.level=warn"],
            stdout=prom_log, stderr=subprocess.STDOUT)
        try:
            tb.wait_for(lambda: lbtest.ns("mlb-lb", "curl", "-sf", "-m", "2", "http://%s/-/ready" % PROM_LISTEN,
                                          check_rc=False).returncode == 0, "Prometheus ready", 60)
            tb.wait_for(lambda: [float(s["value"][1]) for s in query('up{job="maglb"}')] == [1.0],
                        "Prometheus scraping maglb (up == 1)", 30)
            log("Prometheus (pid %d) scrapes maglb every second" % prom.pid)

            counts = tb.curl_many(VIP["gre"], CONNECTIONS)
            check(sum(counts.values()) == CONNECTIONS and all(counts.get(b, 0) > 0 for b in SERVED)
                  and counts.get(DRAINED, 0) == 0,
                  "%d connections to web-gre answered by %s only: %s" % (CONNECTIONS, "+".join(SERVED), counts))
            expr = 'rate(maglb_backend_packets_total{vip="web-gre"}[15s])'
            rates = {}

            def served_rates():
                rates.clear()
                rates.update(by_backend(query(expr)))
                return all(rates.get(b, 0) > 0 for b in SERVED)

            tb.wait_for(served_rates, "a positive rate for %s in Prometheus" % "+".join(SERVED), 30)
            check(set(rates) == {"be1", "be2", "be3"} and all(rates[b] > 0 for b in SERVED)
                  and rates[DRAINED] == 0,
                  "PromQL %s: positive for exactly %s, 0 for the drained %s (%s)"
                  % (expr, "+".join(SERVED), DRAINED, {b: round(v, 2) for b, v in sorted(rates.items())}))
            busy = query("rate(maglb_worker_busy_polls_total[15s]) / rate(maglb_worker_polls_total[15s])")
            ratios = [float(s["value"][1]) for s in busy]
            check(len(ratios) == 1 and 0 < ratios[0] <= 1 and busy[0]["metric"].get("worker") == "0"
                  and busy[0]["metric"].get("queue") == "0",
                  "busy ratio of worker 0 (rate(busy_polls) / rate(polls)): %s" % ratios)
            p99 = query("histogram_quantile(0.99, rate(maglb_packet_latency_seconds_bucket[15s]))")
            values = [float(s["value"][1]) for s in p99]
            check(len(values) == 1 and 64e-9 <= values[0] <= 0.134217728 and p99[0]["metric"].get("worker") == "0",
                  "PromQL histogram_quantile(0.99) of maglb_packet_latency_seconds for worker 0: %s s" % values)

            # 3. Hostile clients, while Prometheus keeps scraping.
            r = json.loads(lbtest.ns("mlb-lb", "/usr/bin/python3", "-c", HOSTILE, timeout=90).stdout)
            check(r["big_header"].startswith("HTTP/1.1 431"), "a 1 MB header: %s" % r["big_header"])
            check(r["other_path"].startswith("HTTP/1.1 404"), "GET /admin: %s" % r["other_path"])
            check(r["post"].startswith("HTTP/1.1 405"), "POST /metrics: %s" % r["post"])
            check(r["busy"] == ["HTTP/1.1 404 Not Found"] and r["busy_count"] == 50,
                  "50 concurrent GET /nope: all 404 (%s)" % r["busy"])
            check(r["scrape_during"] == "HTTP/1.1 200 OK",
                  "a scrape while 50 idle and 50 busy connections are open: %s" % r["scrape_during"])
            check(r["scrape_after"] == "HTTP/1.1 200 OK", "and one after them: %s" % r["scrape_after"])
            time.sleep(2.5)  # two more scrapes
            targets = json.loads(lbtest.ns("mlb-lb", "curl", "-sSf", "-m", "10",
                                           "http://%s/api/v1/targets" % PROM_LISTEN).stdout)
            active = targets["data"]["activeTargets"]
            check(len(active) == 1 and active[0]["health"] == "up" and active[0]["lastError"] == "",
                  "Prometheus' target stays up, its last scrape without error (%s)"
                  % {k: active[0].get(k) for k in ("health", "lastError", "lastScrapeDuration")} if active else "")
            failed = query('count_over_time(up{job="maglb"}[1m]) - sum_over_time(up{job="maglb"}[1m])')
            check([float(s["value"][1]) for s in failed] == [0.0],
                  "no failed scrape in the last minute (%s)" % [s["value"][1] for s in failed])
        finally:
            prom.send_signal(signal.SIGTERM)
            try:
                prom.wait(timeout=15)
            except subprocess.TimeoutExpired:
                prom.kill()
                prom.wait(timeout=5)
            prom_log.close()

        # 4. After the traffic, the counters Prometheus reads are maglbctl's.
        text = scrape()
        counted = samples(text, "maglb_packet_latency_seconds_count")
        labels = [k for k in counted if 'worker="0"' in k]
        timed = counted[labels[0]] if len(labels) == 1 else 0
        inf = samples(text, "maglb_packet_latency_seconds_bucket").get(labels[0][:-1] + ',le="+Inf"}' if labels else "")
        check(timed > CONNECTIONS and inf == timed and samples(text, "maglb_reload_apply_seconds_count") == {"": 0.0},
              "maglb_packet_latency_seconds of worker 0 counts %d frames (its +Inf bucket too); no reload yet" % timed)
        stats = tb.stats()["vips"]["web-gre"]
        packets = samples(text, "maglb_backend_packets_total")
        for name, value in zip(stats["backend_names"], stats["backend_packets"]):
            check(packets.get('{vip="web-gre",backend="%s"}' % name) == float(value),
                  "maglb_backend_packets_total of %s = maglbctl's %d" % (name, value))

        # 5. A reload that moves the exporter applies at the next restart:
        # until then it serves where it is. One that only moves [metrics]
        # down the file says nothing of it.
        backends["ipip"]["be1"] = 2
        tb.reload(lbtest.config_text(backends, extra='\n\n\n[metrics]\nlisten = "%s"\n' % LISTEN))
        note = "[metrics] listen applies at the next restart"
        check(note not in tb.read_log(), "a reload with [metrics] unchanged (three lines lower) says nothing of it")
        tb.reload(lbtest.config_text(backends, extra='\n[metrics]\nlisten = "127.0.0.1:9470"\n'))
        tb.wait_for(lambda: note in tb.read_log(), "the reload's log line about [metrics]", 10)
        text = scrape()
        check("maglb_generation 3\n" in text, "after the reloads, /metrics still on %s (generation 3)" % LISTEN)
        check(samples(text, "maglb_reload_apply_seconds_count") == {"": 2.0} and
              samples(text, "maglb_reload_apply_seconds_sum")[""] > 0,
              "maglb_reload_apply_seconds: both reloads timed (%.1f ms in all)"
              % (1e3 * samples(text, "maglb_reload_apply_seconds_sum")[""]))


if __name__ == "__main__":
    lbtest.main(test)
