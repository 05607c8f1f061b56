#!/usr/bin/python3
"""End to end: active health checks through the kernel interface (maglb0).

Real backends (tests/e2e/backend_server.py), real kernel TCP stacks, real curl:
- a backend whose HTTP server is stopped goes down within fall x interval + one
  rebuild, takes 0 of the new connections after that, and the streams to the
  other backends never break; restarted, it comes back after rise x interval,
  ramping in by slow start;
- a backend flapping every second causes a bounded number of rebuilds and no
  other flow moves;
- with one backend's decapsulation stopped its tunnel check goes down while its
  direct check stays up;
- every backend down: keep_last keeps the table (fail open), drop empties it
  (counted no_backend);
- the checks keep working while 1000 malformed frames and a reload storm hit
  the LB; a reload keeps the health of unchanged backends; a removed backend's
  checks stop."""
import os
import re
import subprocess
import time

import lbtest
from lbtest import BACKENDS, LB_IP, UDP_PORT, VIP, TestFailure, check, log, ns
from test_malformed import SENDER

INTERVAL_MS = 300
TIMEOUT_MS = 200
RISE, FALL = 2, 2
REBUILD_MS = 500
FLAP_WINDOW_S, FLAP_MAX, HOLD_DOWN_S = 30, 4, 6
SLOW_START_S, SLOW_START_STEPS = 3, 3
CHECKED = ("web-gre", "web-ipip", "web-l2dsr", "echo-gre")


def config(backends=("be1", "be2", "be3"), l2dsr_backends=None, echo_l2dsr_weight=1, weights=None):
    out = ['[lb]', 'ipv4 = "%s"' % LB_IP, 'ipv6 = "fd00::10"', 'gateway_v4 = "10.0.0.1"',
           'gateway_v6 = "fd00::1"', '',
           '[conntrack]', 'capacity = 65536', 'tcp_established_timeout_s = 600', '',
           '[kernel]', 'interface = "maglb0"', 'ipv4_prefix_len = 24', '',
           '[health]', 'rebuild_interval_ms = %d' % REBUILD_MS, 'flap_window_s = %d' % FLAP_WINDOW_S,
           'flap_max_transitions = %d' % FLAP_MAX, 'hold_down_s = %d' % HOLD_DOWN_S,
           'slow_start_steps = %d' % SLOW_START_STEPS, '']
    timing = ['interval_ms = %d' % INTERVAL_MS, 'timeout_ms = %d' % TIMEOUT_MS, 'rise = %d' % RISE,
              'fall = %d' % FALL]
    out += ['[[health_check]]', 'name = "http-tunnel"', 'type = "http"', 'via = "tunnel"',
            'http_path = "/"', 'http_status = 200'] + timing + ['']
    out += ['[[health_check]]', 'name = "http-direct"', 'type = "http"', 'via = "direct"',
            'http_body_contains = "be"'] + timing + ['']
    vips = [("web-gre", VIP["gre"], "tcp", 80, "gre", '"http-tunnel"', 'keep_last', backends),
            ("web-ipip", VIP["ipip"], "tcp", 80, "ipip", '"http-direct"', 'drop', backends),
            ("web-l2dsr", VIP["l2dsr"], "tcp", 80, "l2dsr", None, 'keep_last', l2dsr_backends or backends),
            ("echo-gre", VIP["gre"], "udp", UDP_PORT, "gre", None, 'keep_last', backends),
            ("echo-l2dsr", VIP["l2dsr"], "udp", UDP_PORT, "l2dsr", False, 'keep_last', backends)]
    for name, addr, proto, port, fwd, check_ref, all_down, members in vips:
        out += ['[[vip]]', 'name = "%s"' % name, 'address = "%s"' % addr, 'protocol = "%s"' % proto,
                'port = %d' % port, 'forwarding = "%s"' % fwd, 'table_size = 4099']
        if check_ref is not False:
            out += ['slow_start_s = %d' % SLOW_START_S, 'all_down = "%s"' % all_down]
            if name == "web-ipip":  # its flows follow the table when their backend goes down
                out.append('down_flows = "move"')
            if check_ref:
                out.append('health_check = %s' % check_ref)
        for b in members:
            w = echo_l2dsr_weight if name == "echo-l2dsr" and b == "be2" else (weights or {}).get(b, 1)
            out += ['  [[vip.backend]]', '  name = "%s"' % b, '  address = "%s"' % BACKENDS[b],
                    '  weight = %d' % w]
        if name == "web-l2dsr":  # inline: a plain TCP connect
            out += ['  [vip.health_check]', '  type = "tcp"'] + ['  ' + t for t in timing]
        if name == "echo-gre":  # a UDP echo through the tunnel
            out += ['  [vip.health_check]', '  type = "udp"', '  via = "tunnel"', '  udp_payload = "hc"'] + \
                   ['  ' + t for t in timing]
        out.append('')
    return "\n".join(out) + "\n"


def backends_of(stats, vip):
    """{backend name: its JSON object} of one VIP (maglbctl stats --format json)."""
    return {b["name"]: b for b in stats["vips"][vip]["backends"]}


def health(tb, vip, backend):
    return backends_of(tb.stats(), vip)[backend]["health"]


def testbed(tb, *args):
    subprocess.run([lbtest.TESTBED, "service"] + list(args), check=True, capture_output=True, timeout=30,
                   env=tb.testbed_env(), pass_fds=(tb.lock.fileno(),))


def nft_block(backend, on, new_only=False):
    """Drops (on) or accepts again TCP to port 80 in one backend's namespace:
    every segment, or (new_only) only new connections, so that the check fails
    while the backend still serves the connections it has."""
    nsb = "mlb-" + backend
    ns(nsb, "nft", "delete", "table", "inet", "mlbhc", check_rc=False)
    if on:
        ns(nsb, "nft", "add", "table", "inet", "mlbhc")
        ns(nsb, "nft", "add", "chain", "inet", "mlbhc", "in", "{ type filter hook input priority 0; }")
        ns(nsb, "nft", "add", "rule", "inet", "mlbhc", "in", "tcp", "dport", "80",
           *(["ct", "state", "new"] if new_only else []), "drop")


def wait_health(tb, pairs, want, timeout):
    tb.wait_for(lambda: all(health(tb, v, b) == want for v, b in pairs),
                "%s %s" % (", ".join("%s/%s" % p for p in pairs), want), timeout)


def rebuilds(tb):
    return tb.stats()["stats"]["health_rebuilds"]


def test():
    with lbtest.Testbed(config()) as tb:
        # The kernel's route to the VIPs (tunnel probes) and beyond the segment.
        subprocess.run([lbtest.TESTBED, "kernel-routes", "maglb0"], check=True, capture_output=True, timeout=30,
                       env=tb.testbed_env(), pass_fds=(tb.lock.fileno(),))
        every = [(v, b) for v in CHECKED for b in ("be1", "be2", "be3")]
        # Every backend starts up ("not yet checked"); wait for probes that
        # passed (tunnel probes fail until the kernel has its route).
        tb.wait_for(lambda: all(o["health"] == "up" and o["probes"] >= 3 and o["last_probe"].startswith(
            ("HTTP status 200", "connected", "reply of")) for v, b in every
            for o in [backends_of(tb.stats(), v)[b]]), "every check passing", 30)
        s = tb.stats()
        for v, b in every:
            o = backends_of(s, v)[b]
            check(o["probes"] > 0 and o["effective_weight"] == o["weight"] and "check" in o,
                  "%s/%s: checked (%s), up, effective weight %d" % (v, b, o["check"], o["effective_weight"]))
        check(all(o["health"] == "unchecked" for o in backends_of(s, "echo-l2dsr").values()),
              "a VIP without a check shows its backends as unchecked")
        check(s["stats"]["to_kernel_packets"] > 0 and s["stats"]["from_kernel_packets"] > 0,
              "the probes went through the kernel interface (%d frames from it, %d to it)"
              % (s["stats"]["from_kernel_packets"], s["stats"]["to_kernel_packets"]))

        # --- a backend's server stops -----------------------------------
        streams = [tb.start_stream(VIP["l2dsr"], 6 << 20, delay_ms=25) for _ in range(4)]
        on = {st: st.backend() for st in streams}
        log("streams on %s" % sorted(on.values()))
        repinned0 = tb.stats()["stats"]["conntrack_repinned"]
        t0 = time.time()  # before the stop: it returns once the server has exited
        testbed(tb, "be1", "server", "stop")
        down_pairs = [("web-gre", "be1"), ("web-ipip", "be1"), ("web-l2dsr", "be1")]
        bound = (FALL * INTERVAL_MS + TIMEOUT_MS + REBUILD_MS) / 1000.0
        wait_health(tb, down_pairs, "down", 15)
        took = time.time() - t0
        log("be1 reported down %.1f s after its server stopped (fall x interval + timeout + rebuild = %.1f s)"
            % (took, bound))
        tb.wait_for(lambda: all(backends_of(tb.stats(), v)["be1"]["entries"] == 0 for v, _ in down_pairs),
                    "be1 out of the tables", 10)
        s = tb.stats()
        o = backends_of(s, "web-gre")["be1"]
        check(o["effective_weight"] == 0 and o["weight"] == 1 and "consecutive failures" in o["health_reason"],
              "web-gre/be1: down, effective weight 0 of 1, reason \"%s\"" % o["health_reason"])
        check(re.search(r"vip web-gre backend be1: up -> down \(%d consecutive failures: " % FALL,
                        tb.read_log()) is not None, "the transition is logged once with its reason")
        for vip in (VIP["gre"], VIP["ipip"], VIP["l2dsr"]):
            counts = tb.curl_many(vip, 30)
            check(sum(counts.values()) == 30 and "be1" not in counts,
                  "%s: 30 of 30 new connections answered, 0 by be1 (%s)" % (vip, counts))
        for st, b in on.items():
            if b != "be1":
                st.check("stream on %s while be1 went down" % b)
            else:
                st.finish()
        check(tb.stats()["stats"]["conntrack_repinned"] == repinned0, "no tracked flow was moved")

        # --- it comes back, ramping in ------------------------------------
        testbed(tb, "be1", "server", "start")
        t0 = time.time()
        seen = set()

        def ramped():
            o = backends_of(tb.stats(), "web-gre")
            be1, be2 = o["be1"], o["be2"]
            if be1["health"] == "up" and 0 < be1["effective_weight"] < be2["effective_weight"]:
                seen.add((be1["effective_weight"], be2["effective_weight"]))
            return be1["health"] == "up" and be1["effective_weight"] == be2["effective_weight"] == 1
        tb.wait_for(ramped, "be1 up and ramped to its full weight", 20)
        log("be1 back after %.1f s; slow start steps seen (be1, others): %s" % (time.time() - t0, sorted(seen)))
        check(len(seen) >= 1, "be1 served a reduced share during its slow start (%s)" % sorted(seen))
        counts = tb.curl_many(VIP["gre"], 60)
        check(counts.get("be1", 0) > 0 and sum(counts.values()) == 60,
              "be1 serves again after its slow start (%s)" % counts)

        # --- direct vs tunnel -------------------------------------------
        testbed(tb, "be2", "decap", "stop")
        wait_health(tb, [("web-gre", "be2")], "down", 15)
        time.sleep(4 * INTERVAL_MS / 1000.0)
        s = tb.stats()
        check(backends_of(s, "web-ipip")["be2"]["health"] == "up" and
              backends_of(s, "web-l2dsr")["be2"]["health"] == "up",
              "be2's decapsulation stopped: tunnel check down (%s), direct checks up"
              % backends_of(s, "web-gre")["be2"]["health_reason"])
        testbed(tb, "be2", "decap", "start")
        wait_health(tb, [("web-gre", "be2")], "up", 15)

        # --- a check fails while the backend still serves ---------------
        # New flows of every VIP to be2 alone (the others drained), two
        # streams, then the weights back: the streams stay pinned to be2.
        tb.reload(config(weights={"be1": 0, "be3": 0}))
        pinned = tb.start_stream(VIP["l2dsr"], 6 << 20, delay_ms=25)   # down_flows = "pin"
        moving = tb.start_stream(VIP["ipip"], 6 << 20, delay_ms=25)    # down_flows = "move"
        check(pinned.backend() == "be2" and moving.backend() == "be2", "two streams on be2 (web-l2dsr, web-ipip)")
        tb.reload(config())
        repinned0 = tb.stats()["stats"]["conntrack_repinned"]
        nft_block("be2", True, new_only=True)
        wait_health(tb, [("web-l2dsr", "be2"), ("web-ipip", "be2")], "down", 15)
        pinned.check("web-l2dsr (pin): the stream on be2, which its check calls down but which still serves it")
        rc, _, data = moving.finish()
        check(rc != 0 and len(data) < 6 << 20,
              "web-ipip (move): the stream on be2 moved to the table's new choice, which reset it (curl rc %d "
              "after %d bytes)" % (rc, len(data)))
        check(tb.stats()["stats"]["conntrack_repinned"] > repinned0, "the moved flow counted as repinned")
        nft_block("be2", False)
        wait_health(tb, [(v, "be2") for v in CHECKED], "up", 15)

        # --- a flapping backend -----------------------------------------
        flap_streams = [tb.start_stream(VIP["l2dsr"], 16 << 20, delay_ms=30) for _ in range(3)]
        flap_on = {st: st.backend() for st in flap_streams}
        rebuilds0, repinned0 = rebuilds(tb), tb.stats()["stats"]["conntrack_repinned"]
        log("be3 flaps every second for 30 s (tcp/80 dropped, then accepted)")
        t_end = time.time() + 30
        blocked = False
        while time.time() < t_end:
            blocked = not blocked
            nft_block("be3", blocked)
            time.sleep(1.0)
        nft_block("be3", False)
        flap_rebuilds = rebuilds(tb) - rebuilds0
        s = tb.stats()
        flap_vips = ("web-gre", "web-ipip", "web-l2dsr")
        transitions = {v: backends_of(s, v)["be3"]["transitions"] for v in flap_vips}
        # Per VIP at most FLAP_MAX transitions before the hold-down and the one
        # into it, and the slow-start steps of the ups among them; each makes
        # at most one rebuild (those of several VIPs coalesce). Without the
        # hold-down it would be one per transition: ~30 per VIP.
        per_vip = FLAP_MAX + 1 + (FLAP_MAX // 2) * (SLOW_START_STEPS - 1)
        bound = len(flap_vips) * per_vip
        check(flap_rebuilds <= bound,
              "30 s of flapping: %d rebuilds (bound %d = %d VIPs x (flap_max_transitions %d + 1 + %d "
              "slow-start steps)); transitions %s"
              % (flap_rebuilds, bound, len(flap_vips), FLAP_MAX, per_vip - FLAP_MAX - 1, transitions))
        check(all(backends_of(s, v)["be3"]["health"] == "down" for v in flap_vips),
              "be3 is held down right after flapping")
        for st, b in flap_on.items():
            if b != "be3":
                st.check("stream on %s through 30 s of be3 flapping" % b)
            else:
                st.finish()  # be3's own: its packets were dropped half the time
        check(tb.stats()["stats"]["conntrack_repinned"] == repinned0, "no tracked flow moved while be3 flapped")
        wait_health(tb, [(v, "be3") for v in flap_vips], "up", HOLD_DOWN_S + 15)
        check("stable for" in backends_of(tb.stats(), "web-gre")["be3"]["health_reason"],
              "be3 back only after %d s of stability" % HOLD_DOWN_S)

        # --- every backend down -----------------------------------------
        drops0 = tb.stats()["stats"]["drop_no_backend"]
        for b in ("be1", "be2", "be3"):
            nft_block(b, True)
        wait_health(tb, [(v, b) for v in ("web-gre", "web-ipip") for b in ("be1", "be2", "be3")], "down", 15)
        time.sleep(REBUILD_MS / 1000.0 + 0.5)
        fp_down = tb.stats()["vips"]["web-gre"]["fingerprint"]
        time.sleep(4 * INTERVAL_MS / 1000.0)
        s = tb.stats()
        check(s["vips"]["web-gre"]["fingerprint"] == fp_down and
              sum(o["entries"] for o in backends_of(s, "web-gre").values()) == 4099,
              "web-gre (keep_last): every backend down, the table it had before the last one went down "
              "still serves (fingerprint %s, all 4099 slots)" % fp_down)
        check(sum(o["entries"] for o in backends_of(s, "web-ipip").values()) == 0,
              "web-ipip (drop): every backend down, its table is empty")
        check(re.search(r"vip web-gre: EVERY BACKEND IS DOWN: keeping the last table", tb.read_log()) and
              re.search(r"vip web-ipip: EVERY BACKEND IS DOWN: dropping", tb.read_log()),
              "both policies logged loudly")
        for _ in range(3):
            ns("mlb-client", "curl", "-s", "-m", "1", "http://%s/" % VIP["ipip"], check_rc=False)
        check(tb.stats()["stats"]["drop_no_backend"] > drops0, "web-ipip's new flows dropped as no_backend")
        for b in ("be1", "be2", "be3"):
            nft_block(b, False)
        wait_health(tb, [(v, b) for v in ("web-gre", "web-ipip") for b in ("be1", "be2", "be3")], "up", 20)

        # --- malformed frames and a reload storm ------------------------
        probes0 = backends_of(tb.stats(), "web-gre")["be1"]["probes"]
        sender = subprocess.Popen(["ip", "netns", "exec", "mlb-router", "/usr/bin/python3", "-c", SENDER,
                                   lbtest.LB_MAC, "1000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for i in range(20):
            tb.write_config(config(echo_l2dsr_weight=1 + i % 2))
            time.sleep(0.05)
        testbed(tb, "be1", "server", "stop")
        wait_health(tb, [("web-gre", "be1")], "down", 20)
        out, _ = sender.communicate(timeout=120)
        check(sender.returncode == 0 and out.strip() == b"1000", "1000 malformed frames sent")
        testbed(tb, "be1", "server", "start")
        wait_health(tb, [("web-gre", "be1")], "up", 20)
        s = tb.stats()
        check(backends_of(s, "web-gre")["be1"]["probes"] > probes0,
              "checks kept working through 1000 malformed frames and 20 reloads (be1 went down and up)")

        # --- reload: unchanged backends keep their state; a removed one's checks stop
        tb.wait_for(lambda: backends_of(tb.stats(), "web-l2dsr")["be3"]["health"] == "up", "be3 up", 20)
        before = backends_of(tb.stats(), "web-l2dsr")
        tb.reload(config(l2dsr_backends=("be1", "be2")))
        after = backends_of(tb.stats(), "web-l2dsr")
        check("be3" not in after, "web-l2dsr: be3 removed")
        check(after["be2"]["probes"] >= before["be2"]["probes"] and after["be2"]["health"] == "up",
              "be2 keeps its health state and counters through the reload (probes %d -> %d)"
              % (before["be2"]["probes"], after["be2"]["probes"]))
        check(re.search(r"vip web-l2dsr backend be3: health check stopped", tb.read_log()) is not None,
              "the removed backend's check stopped")


if __name__ == "__main__":
    lbtest.main(test)
