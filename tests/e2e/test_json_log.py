#!/usr/bin/python3
"""End to end: maglb with --log-format json, and maglbctl top on it.

- every line maglb writes (DPDK's own lines included) is one JSON object with
  ts, level, event and msg; a neighbour resolution names the backends behind
  the address, a health transition its vip and backend, a reload its
  generation and what it touched; lbtest's start and stop detection reads the
  msg;
- maglbctl top, piped, prints a block per refresh in which the backends that
  served while curl ran show a positive packet rate (and one that did not
  serve shows 0), and exits with status 0 saying "maglb stopped" once maglb
  is stopped."""
import json
import os
import re
import select
import subprocess
import time

import lbtest
from lbtest import BACKENDS, LB_IP, VIP, TestFailure, check, log

VIP_NAME = "web-l2dsr"
TIMING = ['interval_ms = 300', 'timeout_ms = 200', 'rise = 2', 'fall = 2']


def config(weights):
    out = ['[lb]', 'ipv4 = "%s"' % LB_IP, 'gateway_v4 = "10.0.0.1"', '',
           '[kernel]', 'interface = "maglb0"', 'ipv4_prefix_len = 24', '',
           '[health]', 'rebuild_interval_ms = 500', '',
           '[[vip]]', 'name = "%s"' % VIP_NAME, 'address = "%s"' % VIP["l2dsr"], 'protocol = "tcp"',
           'port = 80', 'forwarding = "l2dsr"', 'table_size = 4099']
    for b, w in weights.items():
        out += ['  [[vip.backend]]', '  name = "%s"' % b, '  address = "%s"' % BACKENDS[b], '  weight = %d' % w]
    out += ['  [vip.health_check]', '  type = "tcp"'] + ['  ' + t for t in TIMING]
    return "\n".join(out) + "\n"


def backends_of(tb):
    return {b["name"]: b for b in tb.stats()["vips"][VIP_NAME]["backends"]}


def events(tb):
    """Every line of maglb's log as JSON; a line that is none fails the test."""
    out = []
    for n, line in enumerate(tb.read_log().splitlines(), 1):
        try:
            j = json.loads(line)
        except ValueError:
            raise TestFailure("maglb's log line %d is no JSON: %r" % (n, line[:300]))
        check_fields = isinstance(j, dict) and all(isinstance(j.get(k), str) for k in ("ts", "level", "event", "msg"))
        if not check_fields:
            raise TestFailure("maglb's log line %d lacks ts/level/event/msg: %r" % (n, line[:300]))
        out.append(j)
    return out


def test():
    with lbtest.Testbed(config({"be1": 1, "be2": 1, "be3": 1}), extra_args=("--log-format", "json")) as tb:
        # The checks go straight to the backends' segment (maglb0 is on it): no routes needed.
        tb.wait_for(lambda: all(b["health"] == "up" for b in backends_of(tb).values()), "every backend up", 30)
        top = subprocess.Popen([lbtest.MAGLBCTL, "top", "--prefix", tb.prefix, "--interval-s", "0.5"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        top_out = b""

        def read_top(wait_s):
            nonlocal top_out
            deadline = time.time() + wait_s
            while time.time() < deadline:
                r, _, _ = select.select([top.stdout], [], [], 0.1)
                if r:
                    chunk = os.read(top.stdout.fileno(), 65536)
                    if not chunk:
                        return
                    top_out += chunk
        try:
            # be3 drained by a reload first: it serves nothing while curl runs.
            tb.reload(config({"be1": 1, "be2": 1, "be3": 0}))
            read_top(1.5)
            counts = tb.curl_many(VIP["l2dsr"], 60)
            check(sum(counts.values()) == 60 and "be3" not in counts, "60 of 60 answered by be1/be2 (%s)" % counts)
            read_top(1.5)
            # A health transition.
            subprocess.run([lbtest.TESTBED, "service", "be1", "server", "stop"], check=True, capture_output=True,
                           timeout=30, env=tb.testbed_env(), pass_fds=(tb.lock.fileno(),))
            tb.wait_for(lambda: backends_of(tb)["be1"]["health"] == "down", "be1 down", 15)
            read_top(1.0)
            rc, _ = tb.stop()
            check(rc == 0, "maglb stopped with status 0")
            read_top(5.0)
            try:
                rest, err = top.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                top.kill()
                rest, err = top.communicate()
                raise TestFailure("maglbctl top did not end after maglb stopped")
        finally:
            if top.poll() is None:
                top.kill()
                top.wait()
        text = (top_out + rest).decode(errors="replace")
        check(top.returncode == 0 and "maglb stopped" in text and err == b"",
              "maglbctl top ends with status 0 and 'maglb stopped' once maglb is gone (rc %s, stderr %r)"
              % (top.returncode, err[:300]))

        # --- maglbctl top saw the traffic -----------------------------------
        blocks = [b for b in text.split("\n\n") if b.startswith("maglb ")]
        check(len(blocks) >= 4, "maglbctl top printed a block per refresh (%d)" % len(blocks))

        def rate(block, name):
            for line in block.splitlines():
                cells = line.split()
                if cells and cells[0] == name:
                    # backend rows: name address health weight eff_weight pkts/s ...
                    try:
                        return float(cells[5])
                    except (IndexError, ValueError):
                        return None
            return None
        served = [b for b in counts]
        busy = [b for b in blocks if all((rate(b, s) or 0) > 0 for s in served)]
        check(busy, "a refresh shows a positive packet rate for every backend that served (%s)" % served)
        check(all(rate(b, "be3") == 0.0 for b in busy),
              "be3, drained, shows 0 packets/s in those refreshes")
        check(any(re.search(r"^\s+be1\s+\S+\s+down", b, re.M) for b in blocks),
              "a refresh shows be1 down")

        # --- the JSON log -----------------------------------------------------
        evs = events(tb)
        log("%d JSON log lines, events %s" % (len(evs), sorted({e["event"] for e in evs})))
        check(any(e["msg"].startswith("started:") for e in evs), "the start line is an event (msg 'started: ...')")
        check(any(e["msg"].startswith("stopped on SIGTERM") for e in evs), "the stop line is an event")
        trans = [e for e in evs if e["event"] == "health_transition" and e.get("vip") == VIP_NAME
                 and e.get("backend") == "be1" and e.get("to") == "down"]
        check(len(trans) == 1 and trans[0]["level"] == "warning" and "consecutive failures" in trans[0]["reason"]
              and trans[0]["msg"].startswith("vip %s backend be1: up -> down (" % VIP_NAME),
              "be1 going down is one health_transition event with vip, backend, from/to and reason (%s)"
              % trans)
        reloads = [e for e in evs if e["event"] == "reload"]
        check(len(reloads) == 1 and reloads[0].get("generation") == 2 and reloads[0].get("vips") == [VIP_NAME]
              and reloads[0].get("backends") == ["%s/be3" % VIP_NAME],
              "the reload is an event with its generation, VIPs and backends (%s)" % reloads)
        neigh = [e for e in evs if e["event"] == "neighbor_resolved" and e.get("address") == BACKENDS["be2"]]
        check(neigh and "%s/be2" % VIP_NAME in neigh[0].get("backends", []) and neigh[0].get("mac"),
              "be2's next hop resolving is an event naming the backends behind it (%s)" % neigh[:1])


if __name__ == "__main__":
    lbtest.main(test)
