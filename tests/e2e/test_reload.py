#!/usr/bin/python3
"""End to end, live reload: long-lived TCP transfers survive adding,
re-weighting and removing *other* backends byte for byte; a drained backend
(weight 0) keeps its flow and takes no new ones; a removed backend takes no
new connections; an invalid edit is refused (file:line logged) while traffic
goes on, and the corrected file is picked up; so are a dangling link and a
symlink loop put in its place; maglbctl stats reads every page of a VIP with
600 backends and of a list of 600+ VIPs. Telemetry times every reload from
its trigger to the workers (/maglb/reloads), and the worker's latency
histogram (/maglb/latency) grows with the traffic."""
import json
import os
import re
import signal
import sys

import lbtest
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import fake_telemetry  # noqa: E402
from lbtest import VIP, check, log

STREAM_BYTES = 6_000_000   # 16 KiB every 25 ms: about 9.5 s
NEW_CONNECTIONS = 120


def test():
    backends = {m: {"be1": 1, "be2": 1, "be3": 1} for m in VIP}
    with lbtest.Testbed(lbtest.config_text(backends)) as tb:
        a = tb.start_stream(VIP["gre"], STREAM_BYTES, delay_ms=25)
        b = tb.start_stream(VIP["l2dsr"], STREAM_BYTES, delay_ms=25)
        pinned = {"gre": a.backend(), "l2dsr": b.backend(), "ipip": "be1"}
        log("streams: gre via %s, l2dsr via %s" % (pinned["gre"], pinned["l2dsr"]))

        # 1. add a backend everywhere (editor-style: write + rename)
        for m in VIP:
            backends[m]["be4"] = 1
        tb.reload(lbtest.config_text(backends), atomic=True)
        check(a.running() and b.running(), "streams still running after adding be4")
        # 2. re-weight another backend (in-place write)
        others = {m: sorted(x for x in ("be1", "be2", "be3") if x != pinned[m]) for m in VIP}
        for m in VIP:
            backends[m][others[m][0]] = 3
        tb.reload(lbtest.config_text(backends), atomic=False)
        check(a.running() and b.running(), "streams still running after re-weighting %s" %
              {m: others[m][0] for m in ("gre", "l2dsr")})
        # 3. remove yet another backend
        removed = {m: others[m][1] for m in VIP}
        for m in VIP:
            del backends[m][removed[m]]
        tb.reload(lbtest.config_text(backends))
        check(a.running() and b.running(), "streams still running after removing %s" %
              {m: removed[m] for m in ("gre", "l2dsr")})
        log(tb.read_log().strip().splitlines()[-1])
        a.check("gre stream across add/re-weight/remove")
        b.check("l2dsr stream across add/re-weight/remove")

        # 4. drain the backend of a live stream; remove-check the removed one
        c = tb.start_stream(VIP["gre"], 3_000_000, delay_ms=25)
        drained = c.backend()
        backends["gre"][drained] = 0
        tb.reload(lbtest.config_text(backends))
        counts = tb.curl_many(VIP["gre"], NEW_CONNECTIONS)
        log("new connections after draining %s (removed %s): %s" % (drained, removed["gre"], counts))
        check(sum(counts.values()) == NEW_CONNECTIONS, "all %d new connections answered" % NEW_CONNECTIONS)
        check(drained not in counts, "drained backend %s takes no new connections" % drained)
        check(removed["gre"] not in counts, "removed backend %s takes no new connections" % removed["gre"])
        v = tb.stats()["vips"]["web-gre"]
        i = v["backend_names"].index(drained)
        check(v["backend_weights"][i] == 0 and v["backend_table_entries"][i] == 0,
              "telemetry shows %s with weight 0 and no table entries" % drained)
        c.check("stream on the drained backend %s" % drained)

        # 5. an invalid edit is refused; traffic goes on; the fix is picked up
        gen = tb.generation()
        good = lbtest.config_text(backends)
        bad = good.replace('table_size = 4099', 'table_size = 4100', 1)  # not a prime
        bad_line = bad.splitlines().index('table_size = 4100') + 1
        tb.write_config(bad)
        tb.wait_for(lambda: "refused" in tb.read_log(), "the refusal log line", 10)
        line = [x for x in tb.read_log().splitlines() if "refused" in x][-1]
        log(line)
        check(re.search(r"reload \(file changed\) refused: .*maglb\.toml:%d: " % bad_line, line) is not None,
              "refusal logged with file:line (line %d)" % bad_line)
        st = tb.stats()["stats"]
        check(st["generation"] == gen and st["reloads_refused"] == 1,
              "still generation %d; reloads_refused = 1" % gen)
        counts = tb.curl_many(VIP["gre"], 30)
        check(sum(counts.values()) == 30, "traffic goes on under the old config (30/30)")
        backends["gre"][drained] = 1
        tb.reload(lbtest.config_text(backends))
        check(tb.generation() == gen + 1 and tb.stats()["stats"]["last_refusal"] == "",
              "the corrected file is picked up (generation %d)" % (gen + 1))
        counts = tb.curl_many(VIP["gre"], NEW_CONNECTIONS)
        log("after undraining %s: %s" % (drained, counts))
        check(counts.get(drained, 0) > 0, "%s takes new connections again" % drained)

        # 6. a removed backend's tracked flow moves on its next packet: the
        # new backend knows nothing of the connection, so it is reset.
        d = tb.start_stream(VIP["gre"], 3_000_000, delay_ms=25)
        gone = d.backend()
        repinned = tb.stats()["stats"]["conntrack_repinned"]
        del backends["gre"][gone]
        tb.reload(lbtest.config_text(backends))
        rc, err, data = d.finish(60)
        log("stream on removed %s: curl rc %d after %d bytes (%s)" % (gone, rc, len(data), err.strip()))
        check(rc != 0 and len(data) < 3_000_000, "the stream of removed backend %s ends (moved, reset)" % gone)
        check(tb.stats()["stats"]["conntrack_repinned"] > repinned, "conntrack_repinned counted the move")
        backends["gre"][gone] = 1
        tb.reload(lbtest.config_text(backends))

        # 7. a VIP added live serves at once; removed, its traffic is dropped
        new_vip = ('[[vip]]\nname = "web-new"\naddress = "10.100.0.4"\nprotocol = "tcp"\nport = 80\n'
                   'forwarding = "ipip"\ntable_size = 251\n'
                   '  [[vip.backend]]\n  name = "be2"\n  address = "10.0.0.12"\n'
                   '  [[vip.backend]]\n  name = "be3"\n  address = "10.0.0.13"\n')
        tb.reload(lbtest.config_text(backends, extra=new_vip))
        counts = tb.curl_many("10.100.0.4", 40)
        log("added VIP web-new (be2, be3): %s" % counts)
        check(sum(counts.values()) == 40 and set(counts) == {"be2", "be3"},
              "a VIP added live serves 40/40 requests over its two backends")
        check("+vip web-new" in tb.read_log(), "the reload log names the added VIP")
        no_vip = tb.stats()["stats"]["drop_no_vip"]
        tb.reload(lbtest.config_text(backends))
        counts = tb.curl_many("10.100.0.4", 1, timeout=30)
        check(not counts and tb.stats()["stats"]["drop_no_vip"] > no_vip,
              "once removed, its traffic is dropped and counted as no_vip")

        # 8. SIGHUP reloads too (for setups where inotify cannot see the file)
        gen = tb.generation()
        tb.proc.send_signal(signal.SIGHUP)
        tb.wait_for(lambda: tb.generation() == gen + 1, "generation %d after SIGHUP" % (gen + 1), 10)
        check("reload (SIGHUP): generation %d: no VIP changed; 0 tables built" % (gen + 1) in tb.read_log(),
              "SIGHUP reload logged; an unchanged file rebuilds no table")

        # 9. a VIP with 600 backends: more than one telemetry reply holds (an
        # array takes 512 entries, a reply 16 KB); maglbctl reads every page
        big = ['[[vip]]', 'name = "web-big"', 'address = "10.100.0.4"', 'protocol = "tcp"',
               'port = 80', 'forwarding = "gre"', 'table_size = 4099']
        big_addrs = ["10.1.%d.%d" % (i // 200, 1 + i % 200) for i in range(600)]
        for i, addr in enumerate(big_addrs):
            big += ['  [[vip.backend]]', '  name = "big-backend-%03d"' % i, '  address = "%s"' % addr,
                    '  weight = %d' % (1 + i % 3)]
        tb.reload(lbtest.config_text(backends, extra="\n".join(big) + "\n"))
        tb.wait_for(lambda: all(tb.stats()["vips"]["web-big"]["backend_next_hop_resolved"]),
                    "web-big's next hop (the gateway) resolved", 10)
        v = tb.stats()["vips"]["web-big"]
        arrays = [k for k, a in v.items() if k.startswith("backend_") and isinstance(a, list)]
        check(v["backend_total"] == 600 and len(arrays) >= 20 and all(len(v[k]) == 600 for k in arrays),
              "maglbctl stats --format json: every backend array of web-big holds 600 entries (%s)"
              % {k: len(v[k]) for k in arrays})
        check(v["backend_health"] == ["unchecked"] * 600 and v["backend_effective_weights"] == v["backend_weights"] and
              len(v["backends"]) == 600 and
              all(b["health"] == "unchecked" and b["effective_weight"] == b["weight"] for b in v["backends"]),
              "web-big unchecked: health \"unchecked\", effective weight = weight, one object per backend")
        check(v["backend_names"] == ["big-backend-%03d" % i for i in range(600)] and
              v["backend_addresses"] == big_addrs and
              v["backend_weights"] == [1 + i % 3 for i in range(600)] and
              sum(v["backend_table_entries"]) == 4099,
              "names, addresses and weights in order; table entries sum to 4099")
        r = lbtest.run([lbtest.MAGLBCTL, "stats", "--prefix", tb.prefix], timeout=10)
        rows = [x for x in r.stdout.splitlines() if x.startswith("  big-backend-")]
        check(len(rows) == 600 and all(x.split()[1] == a and x.split()[-1] == "resolved"
                                       for x, a in zip(rows, big_addrs)) and
              all("?" not in x for x in rows) and "INCOMPLETE" not in r.stdout and r.stderr == "",
              "maglbctl stats (table): 600 web-big rows, each with its address and resolved next hop")

        # 10. 600 VIPs: more than one /maglb/vips reply holds (512 entries an
        # array); maglbctl reads every page and lists every VIP
        many = []
        for i in range(600):
            many += ['[[vip]]', 'name = "many-%03d"' % i,
                     'address = "10.102.%d.%d"' % (i // 200, 1 + i % 200), 'protocol = "udp"',
                     'port = 53', 'forwarding = "gre"', 'table_size = 251',
                     '  [[vip.backend]]', '  name = "be1"', '  address = "%s"' % lbtest.BACKENDS["be1"]]
        tb.reload(lbtest.config_text(backends, extra="\n".join(many) + "\n"))
        want = ["many-%03d" % i for i in range(600)]
        r = lbtest.run([lbtest.MAGLBCTL, "stats", "--prefix", tb.prefix, "--format", "json"], timeout=60)
        listed = json.loads(r.stdout)["vips"]
        check(all(n in listed for n in want) and len(listed) > 600 and r.stderr == "",
              "maglbctl stats --format json lists all %d VIPs (600 many-NNN among them)" % len(listed))
        r = lbtest.run([lbtest.MAGLBCTL, "stats", "--prefix", tb.prefix], timeout=60)
        shown = re.findall(r'^vip "(many-\d+)"', r.stdout, re.M)
        check(shown == want and "INCOMPLETE" not in r.stdout and r.stderr == "",
              "maglbctl stats (table) shows all 600 many-NNN VIPs, in order, exit 0")

        # 11. the config replaced by a dangling link, then a symlink loop: each
        # attempt is refused, logged and counted; then a good file is loaded
        gen = tb.generation()
        refused = tb.stats()["stats"]["reloads_refused"]
        for target, says in (("missing.toml", "No such file or directory"),
                             (os.path.basename(tb.config_path), "Too many levels of symbolic links")):
            tmp = tb.config_path + ".lnk"
            os.symlink(target, tmp)
            os.rename(tmp, tb.config_path)
            refused += 1
            tb.wait_for(lambda: tb.stats()["stats"]["reloads_refused"] == refused,
                        "reloads_refused = %d" % refused, 10)
            line = [x for x in tb.read_log().splitlines() if "refused" in x][-1]
            check(says in line and "still serving generation %d" % gen in line and
                  tb.generation() == gen, "a config replaced by a link to %s: refused, logged (%s)"
                  % (target, line.split("maglb: ", 1)[-1]))
        tb.reload(lbtest.config_text(backends))
        check(tb.stats()["stats"]["last_refusal"] == "", "then a good file is picked up")

        # 12. every reload above timed from its trigger to the workers
        check_reload_timing(tb)
        check_latency_grows(tb)

    check_incomplete_reply()
    check_cut_vip_list()


def check_reload_timing(tb):
    r = tb.telemetry("/maglb/reloads")
    stats = tb.stats()["stats"]
    recent = r["recent"]
    n = len(recent["generation"])
    rows = [dict(zip(recent, values)) for values in zip(*recent.values())]
    check(all(len(a) == n for a in recent.values()) and 0 < n <= 64 and
          r["applied"] + r["unchanged"] == stats["reloads_ok"] and r["refused"] == stats["reloads_refused"],
          "/maglb/reloads: %d recent reloads; applied %d + unchanged %d = reloads_ok, refused %d = reloads_refused"
          % (n, r["applied"], r["unchanged"], r["refused"]))
    reached = [x for x in rows if x["outcome"] != "refused"]
    refused = [x for x in rows if x["outcome"] == "refused"]
    check(all(0 < x["event_ns"] <= x["published_ns"] <= x["workers_ns"] for x in reached) and
          all(x["event_ns"] > 0 and x["published_ns"] == 0 and x["workers_ns"] == 0 for x in refused) and
          len(refused) >= 2 and rows[-1]["outcome"] == "applied" and rows[-1]["generation"] == tb.generation(),
          "each reload: trigger <= swap <= workers; the refused ones with their trigger only; the last is "
          "the running generation")
    check(r["file_to_workers_count"] == r["applied"] + r["unchanged"] and
          max(x["workers_ns"] - x["event_ns"] for x in reached) <= r["file_to_workers_ns_max"] and
          r["file_to_workers_ns_max"] <= r["file_to_workers_ns_sum"],
          "every reload that reached the workers is timed: %d, at most %.1f ms, mean %.1f ms"
          % (r["file_to_workers_count"], r["file_to_workers_ns_max"] / 1e6,
             r["file_to_workers_ns_sum"] / 1e6 / max(1, r["file_to_workers_count"])))
    line = [x for x in tb.read_log().splitlines() if "reload (file changed): generation" in x][-1]
    check(re.search(r"; applied to workers [0-9.]+ (us|ms|s) after the file change$", line) is not None,
          "the reload's log line says how long it took (%s)" % line.split("; ")[-1])


def check_latency_grows(tb):
    def timed(reply):
        return sum(sum(c) for c in reply["per_worker"].values())

    before = tb.telemetry("/maglb/latency")
    counts = tb.curl_many(VIP["gre"], 10)
    after = tb.telemetry("/maglb/latency")
    bounds = after["bucket_upper_ns"]
    check(len(bounds) == 169 and bounds == sorted(bounds) and after["tsc_hz"] > 0 and
          list(after["per_worker"]) == ["0"] and all(len(c) == len(bounds) + 1 for c in after["per_worker"].values()),
          "/maglb/latency: 169 bounds, one array of 170 counts for the one worker")
    grown = timed(after) - timed(before)
    check(sum(counts.values()) == 10 and grown >= 10 * 3 and
          all(a >= b for a, b in zip(after["per_worker"]["0"], before["per_worker"]["0"])),
          "10 curl requests: the latency histogram counts %d more frames sent, no bucket shrank" % grown)
    # The argument is the first worker of a page: anything but digits (or
    # more of them than any worker count) is refused, and past the last
    # worker the page is empty; maglb keeps answering.
    for arg in ("abc", "-1", "1e3", "0x1", "99999999999999999999", "0,0"):
        check(tb.telemetry("/maglb/latency," + arg) is None, "/maglb/latency,%s: refused (null)" % arg)
    past = tb.telemetry("/maglb/latency,5")
    check(past is not None and not past.get("per_worker"), "/maglb/latency,5 (one worker): an empty page")
    check(timed(tb.telemetry("/maglb/latency")) >= timed(after), "and /maglb/latency still answers")


def fake_maglb_stats(reply, fmt="table"):
    """maglbctl stats against a fake telemetry socket; reply(cmd) is the
    value it answers to cmd (None: null)."""
    return fake_telemetry.maglbctl_stats(lbtest.MAGLBCTL, lambda cmd: json.dumps(reply(cmd)), fmt)


def check_incomplete_reply():
    """maglbctl stats against a fake telemetry socket answering as a maglb
    that cut its reply (DPDK's limits, before paging): it must say so, not
    print blanks and zeros."""
    vip = {"name": "old", "address": "10.100.0.9", "protocol": "tcp", "port": 80, "fingerprint": "00",
           "backend_names": ["a", "b", "c"], "backend_addresses": ["10.0.0.1", "10.0.0.2"],
           "backend_weights": [1, 1, 1]}
    replies = {"/maglb/stats": {"generation": 1}, "/maglb/vips": {"generation": 1, "names": ["old"]},
               "/maglb/vip,old": vip}
    for fmt in ("table", "json"):
        r = fake_maglb_stats(replies.get, fmt)
        check(r.returncode == 1 and 'warning: vip "old": incomplete reply' in r.stderr and
              "backend_addresses has 2 of 3" in r.stderr and "backend_bytes missing" in r.stderr,
              "maglbctl stats --format %s: a cut reply is named on stderr, exit 1 (%s)"
              % (fmt, r.stderr.strip()))
    r = fake_maglb_stats(replies.get)
    row_c = [x.split() for x in r.stdout.splitlines() if x.startswith("  c ")]
    # Columns: backend address health weight eff_weight entries packets bytes new_flows next_hop
    # (health and eff_weight "?": this maglb is older than health checks).
    check(row_c == [["c", "?", "?", "1", "?", "?", "?", "?", "?", "?"]] and "INCOMPLETE" in r.stdout,
          "the table marks what is missing with ? (row c: %s)" % row_c)


def check_cut_vip_list():
    """A VIP list cut short (a page that brings nothing, or an older maglb
    at DPDK's 512-entry limit) is never printed with exit 0."""
    def vip(name):
        v = {"name": name, "address": "10.100.0.9", "protocol": "tcp", "port": 80, "fingerprint": "00",
             "generation": 1, "backend_total": 1, "backend_offset": 0}
        for k in ("backend_names", "backend_addresses"):
            v[k] = ["a"]
        for k in ("backend_weights", "backend_table_entries", "backend_packets", "backend_bytes",
                  "backend_new_flows", "backend_next_hop_resolved"):
            v[k] = [1]
        return v

    def paged(cmd):
        pages = {"/maglb/vips": ["a", "b"], "/maglb/vips,2": []}
        if cmd in pages:
            return {"generation": 1, "vip_total": 3, "vip_offset": int(cmd.partition(",")[2] or 0),
                    "names": pages[cmd], "fingerprints": ["00"] * len(pages[cmd])}
        return {"generation": 1} if cmd == "/maglb/stats" else vip(cmd.split(",")[1])

    for fmt in ("table", "json"):
        r = fake_maglb_stats(paged, fmt)
        check(r.returncode == 1 and "incomplete VIP list from maglb: 2 of 3 VIP names" in r.stderr and
              (fmt == "json" or "INCOMPLETE: VIPs are missing" in r.stdout),
              "maglbctl stats --format %s: a VIP list cut short is named, exit 1 (%s)"
              % (fmt, r.stderr.strip()))

    def unpaged(cmd):  # a maglb from before paging: 512 names, maybe more
        if cmd == "/maglb/vips":
            return {"generation": 1, "names": ["v%d" % i for i in range(512)]}
        return {"generation": 1} if cmd == "/maglb/stats" else vip(cmd.split(",")[1])

    r = fake_maglb_stats(unpaged)
    check(r.returncode == 1 and "the list may be cut" in r.stderr and r.stdout.count('\nvip "') == 512,
          "maglbctl stats: 512 names from a maglb that does not page: warned, exit 1 (%s)"
          % r.stderr.strip())


if __name__ == "__main__":
    lbtest.main(test)
