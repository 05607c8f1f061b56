#!/usr/bin/env python3
"""maglbctl stats shows backend health (table and --format json) from a fake
telemetry socket: what a maglb with health checks sends, what an older maglb
sends (no health: "?" and null, never a made-up value), and hostile health
replies (wrong lengths, wrong types, huge or control-laden strings, times out
of range): no crash, "?"/null where a value is unusable."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import fake_telemetry  # noqa: E402

MAGLBCTL = sys.argv[1]

STATS = {"generation": 3, "uptime_s": 60, "workers": 1, "health_probes": 40, "health_probe_failures": 12,
         "health_transitions": 3, "health_rebuilds": 2}
SINCE_MS = 1796149802000  # 2026-12-01T18:30:02Z


def vip_reply(**override):
    """A /maglb/vip reply of a maglb with health checks: be1 unchecked, be2
    down by its tunnel check, be3 up and slow-starting."""
    v = {"name": "web", "address": "10.0.0.1", "protocol": "tcp", "port": 80, "forwarding": "gre",
         "algorithm": "maglev", "table_size": 251, "fingerprint": "00000000000000aa", "generation": 3,
         "backend_total": 3, "backend_offset": 0,
         "packets": 10, "bytes": 1000, "new_flows": 2, "bounded_load_passed": 0, "bounded_load_over": 0,
         "backend_names": ["be1", "be2", "be3"],
         "backend_addresses": ["10.0.0.11", "10.0.0.12", "10.0.0.13"],
         "backend_health": ["unchecked", "down", "up"],
         "backend_health_reasons": ["", "3 consecutive failures: connect timeout 500 ms", "2 consecutive successes"],
         "backend_health_checks": ["", "http via tunnel to 10.100.0.1:80", "tcp direct to 10.0.0.13:80"],
         "backend_last_probes": ["", "connect timeout 500 ms", "connected in 1 ms"],
         "backend_weights": [1, 2, 4],
         "backend_effective_weights": [1, 0, 2],
         "backend_table_entries": [100, 0, 151],
         "backend_packets": [5, 0, 5], "backend_bytes": [500, 0, 500], "backend_new_flows": [1, 0, 1],
         "backend_next_hop_resolved": [1, 1, 0],
         "backend_health_up": [1, 0, 1], "backend_health_checked": [0, 1, 1], "backend_health_held_down": [0, 0, 0],
         "backend_health_since_ms": [0, SINCE_MS, SINCE_MS + 5000],
         "backend_health_probes": [0, 40, 30], "backend_health_probe_failures": [0, 12, 0],
         "backend_health_transitions": [0, 3, 1]}
    v.update(override)
    return v


def run(vip, fmt, stats=STATS):
    vip_text = vip if isinstance(vip, str) else json.dumps(vip)
    stats_text = json.dumps(stats)

    def reply_text(cmd):
        if cmd == "/maglb/stats":
            return stats_text
        if cmd.startswith("/maglb/vips"):
            return '{"generation": 3, "vip_total": 1, "vip_offset": 0, "names": ["web"]}'
        if cmd.startswith("/maglb/vip,"):
            return vip_text
        return "null"
    return fake_telemetry.maglbctl_stats(MAGLBCTL, reply_text, fmt)


failures = 0


def check(ok, what, p):
    global failures
    if not ok:
        print(f"FAIL {what}: rc {p.returncode}\nstdout {p.stdout[:3000]}\nstderr {p.stderr[:1000]!r}")
        failures += 1


def backends_of(p):
    """The backends objects of --format json; None if the output is no JSON."""
    try:
        return json.loads(p.stdout)["vips"]["web"]["backends"]
    except (ValueError, KeyError, TypeError):
        return None


def table_row(p, name):
    """The table row of backend `name`, split on blanks; None if none."""
    for line in p.stdout.splitlines():
        f = line.split()
        if f and f[0] == name:
            return f
    return None


# 1. A maglb with health checks: the table's columns and notes.
p = run(vip_reply(), "table")
check(p.returncode == 0 and p.stderr == "", "healthy reply: exit 0, no warning", p)
head = next((line.split() for line in p.stdout.splitlines() if line.split()[:1] == ["backend"]), None)
check(head is not None and head[:5] == ["backend", "address", "health", "weight", "eff_weight"],
      "columns backend address health weight eff_weight", p)
check(table_row(p, "be1")[:5] == ["be1", "10.0.0.11", "unchecked", "1", "1"], "be1 row", p)
check(table_row(p, "be2")[:6] == ["be2", "10.0.0.12", "down", "2", "0", "0"], "be2 row: down, eff 0", p)
check(table_row(p, "be3")[:5] == ["be3", "10.0.0.13", "up", "4", "2"], "be3 row: up, ramping", p)
want = ("be2: down since 2026-12-01T18:30:02Z (3 consecutive failures: connect timeout 500 ms); "
        "http via tunnel to 10.100.0.1:80; probes 40, failed 12, transitions 3; last probe: connect timeout 500 ms")
check(want in p.stdout, "be2's note", p)
check("be3: up since 2026-12-01T18:30:07Z (2 consecutive successes); tcp direct to 10.0.0.13:80; "
      "probes 30, failed 0, transitions 1" in p.stdout, "be3's note", p)
check("be1:" not in p.stdout, "no note for an unchecked backend", p)
check("health: 40 probes, 12 failed, 3 transitions, 2 rebuilds" in p.stdout, "totals' health line", p)

# 2. The same in JSON: one object per backend, the arrays kept.
p = run(vip_reply(), "json")
b = backends_of(p)
check(p.returncode == 0 and b is not None and len(b) == 3, "json: 3 backends objects", p)
if b:
    check(b[1] == {"name": "be2", "address": "10.0.0.12", "weight": 2, "effective_weight": 0, "health": "down",
                   "health_reason": "3 consecutive failures: connect timeout 500 ms", "health_since_ms": SINCE_MS,
                   "health_held_down": False, "entries": 0, "packets": 0, "bytes": 0, "new_flows": 0,
                   "next_hop_resolved": True, "probes": 40, "probe_failures": 12, "transitions": 3,
                   "check": "http via tunnel to 10.100.0.1:80", "last_probe": "connect timeout 500 ms"},
          "json: be2's object", p)
    check(all("health" in x and "effective_weight" in x for x in b), "json: health and effective_weight on every backend", p)
    check([x["health"] for x in b] == ["unchecked", "down", "up"] and
          [x["effective_weight"] for x in b] == [1, 0, 2], "json: health and effective weights", p)
    check(json.loads(p.stdout)["vips"]["web"]["backend_health"] == ["unchecked", "down", "up"],
          "json: the arrays stay", p)

# 3. An older maglb: no health arrays, no health counters. No gap, no warning:
# health "?" in the table, null in JSON.
old = vip_reply()
for k in [k for k in old if k.startswith("backend_health") or k in ("backend_last_probes", "backend_effective_weights")]:
    del old[k]
old_stats = {k: v for k, v in STATS.items() if not k.startswith("health_")}
p = run(old, "table", old_stats)
check(p.returncode == 0 and "INCOMPLETE" not in p.stdout and p.stderr == "", "older maglb: exit 0, complete", p)
check(table_row(p, "be2")[:6] == ["be2", "10.0.0.12", "?", "2", "?", "0"], "older maglb: health and eff_weight ?", p)
check("health: not reported" in p.stdout, "older maglb: says health is not reported", p)
p = run(old, "json", old_stats)
b = backends_of(p)
check(p.returncode == 0 and b is not None and len(b) == 3 and
      all(x["health"] is None and x["effective_weight"] is None and x["probes"] is None for x in b) and
      [x["weight"] for x in b] == [1, 2, 4], "older maglb, json: health null, weights kept", p)

# 4. A reply with health but a health array cut short: a gap (exit 1, said),
# the missing values "?" / null.
short = vip_reply(backend_health=["unchecked"], backend_effective_weights=[1, 0])
for fmt in ("table", "json"):
    p = run(short, fmt)
    check(p.returncode == 1 and "backend_health has 1 of 3" in p.stderr and
          "backend_effective_weights has 2 of 3" in p.stderr, f"short arrays, {fmt}: exit 1, said", p)
p = run(short, "table")
check(table_row(p, "be2")[2] == "?", "short: be2 health ?", p)
check(table_row(p, "be3")[4] == "?", "short: be3 eff_weight ?", p)
check("be2:" not in p.stdout, "short: no note without a health value", p)
p = run(short, "json")
b = backends_of(p)
check(b is not None and [x["health"] for x in b] == ["unchecked", None, None] and
      [x["effective_weight"] for x in b] == [1, 0, None], "short, json: nulls", p)
# Longer arrays than there are backends: the extra entries are not shown.
p = run(vip_reply(backend_health=["up", "up", "up", "down", "down"]), "json")
b = backends_of(p)
check(p.returncode == 0 and b is not None and len(b) == 3, "long arrays: still 3 backends", p)

# 5. Wrong types: health a number, an object; counters strings, negative,
# floats; booleans out of 0/1. "?" in the table, null in JSON.
bad = vip_reply(backend_health=[1, {"x": 1}, None], backend_health_reasons=[5, [], "ok"],
                backend_effective_weights=["1", -1, 2.5], backend_health_probes=["40", -3, 1e30],
                backend_health_held_down=[2, "1", -1], backend_next_hop_resolved=[7, "1", None],
                backend_health_checks=[None, 3, "c"], backend_last_probes=[1, 2, 3])
p = run(bad, "table")
check(p.returncode == 0 and all(table_row(p, n)[2] == "?" for n in ("be1", "be2", "be3")),
      "bad types: health ?", p)
check(all(table_row(p, n)[-1] == "?" for n in ("be1", "be2", "be3")), "bad types: next_hop ?", p)
check("be2:" not in p.stdout, "bad types: no note without a health string", p)
p = run(bad, "json")
b = backends_of(p)
check(b is not None and all(x["health"] is None and x["effective_weight"] is None and x["probes"] is None and
                            x["health_held_down"] is None and x["next_hop_resolved"] is None for x in b) and
      [x["health_reason"] for x in b] == [None, None, "ok"] and [x["check"] for x in b] == [None, None, "c"],
      "bad types, json: nulls", p)

# 6. Times out of range: since 0, past year 9999, negative, a float, a string:
# "since ?" in the note, the number as sent (or null) in JSON.
for since in (0, 253402300800000, 18446744073709551615, -5, 1.5e12, "x"):
    r = vip_reply(backend_health_since_ms=[0, since, since])
    p = run(r, "table")
    check(p.returncode == 0 and "be2: down since ? (3 consecutive failures" in p.stdout,
          f"since {since!r}: '?'", p)
    p = run(r, "json")
    b = backends_of(p)
    want = since if isinstance(since, int) and since >= 0 else None
    check(b is not None and b[1]["health_since_ms"] == want, f"since {since!r}, json", p)

# 7. Huge and hostile strings: a 200 KB reason, escape sequences, a health
# string no maglb sends. The table bounds and cleans them; JSON carries them.
huge = "x" * 200000
r = vip_reply(backend_health=["unchecked", "down\x1b[2J", huge], backend_health_reasons=["", huge, "\x1b]0;pwned\x07"],
              backend_health_checks=["", "c" * 300, "tcp"])
p = run(r, "table")
check(p.returncode == 0, "hostile strings: exit 0", p)
check("\x1b" not in p.stdout and "\x07" not in p.stdout, "hostile strings: no control character reaches the terminal", p)
check(max(len(line) for line in p.stdout.splitlines()) < 2000, "hostile strings: lines bounded", p)
check("be2: down?[2J since" in p.stdout and "x" * 197 + "..." in p.stdout, "hostile strings: cleaned and cut", p)
p = run(r, "json")
b = backends_of(p)
check(p.returncode == 0 and b is not None and b[1]["health_reason"] == huge and b[2]["health"] == huge,
      "hostile strings, json: carried as sent", p)

# 8. Health arrays that are no arrays: a gap, never a crash.
for value in ('"down"', "7", "{}", "null"):
    text = json.dumps(vip_reply()).replace('"backend_health": ["unchecked", "down", "up"]',
                                           '"backend_health": ' + value)
    for fmt in ("table", "json"):
        p = run(text, fmt)
        check(p.returncode == 1 and "backend_health missing" in p.stderr, f"backend_health {value}, {fmt}", p)

print("ok" if failures == 0 else f"{failures} failure(s)")
sys.exit(1 if failures else 0)
