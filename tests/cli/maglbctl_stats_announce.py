#!/usr/bin/env python3
"""maglbctl stats shows route announcement: the totals' announce line and the
VIP's "announced" (table), /maglb/announce under "announce" (--format json);
an older maglb without the command (not reported, exit 0), an [announce]-less
one (off), a draining one, and hostile replies (arrays of different lengths,
wrong types, huge numbers, control characters, a cut list, no object): no
crash, "?" where a value is unusable."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import fake_telemetry  # noqa: E402

MAGLBCTL = sys.argv[1]

failures = 0


def check(ok, what, p):
    global failures
    if not ok:
        print(f"FAIL {what}: rc {p.returncode}\nstdout {p.stdout[:3000]}\nstderr {p.stderr[:1000]!r}")
        failures += 1


def vip(announced=None):
    v = {"name": "web", "address": "10.100.0.1", "protocol": "tcp", "port": 80, "forwarding": "gre",
         "algorithm": "maglev", "table_size": 251, "fingerprint": "00000000000000aa", "generation": 3,
         "backend_total": 0, "backend_offset": 0, "packets": 0, "bytes": 0, "new_flows": 0,
         "backend_health": []}
    if announced is not None:
        v["announced"] = announced
    for key in ("backend_names", "backend_addresses", "backend_health_reasons", "backend_health_checks",
                "backend_last_probes", "backend_weights", "backend_effective_weights", "backend_table_entries",
                "backend_packets", "backend_bytes", "backend_new_flows", "backend_next_hop_resolved",
                "backend_health_up", "backend_health_checked", "backend_health_held_down",
                "backend_health_since_ms", "backend_health_probes", "backend_health_probe_failures",
                "backend_health_transitions"):
        v[key] = []
    return v


ANNOUNCING = {"state": "announcing", "table": 4242, "routes": 2, "route_changes": 5, "route_errors": 1,
              "drain_until_unix_ms": 0, "prefix_total": 3,
              "prefixes": ["10.100.0.1/32", "10.100.0.2/32", "2001:db8::1/128"], "announced": [1, 0, 1],
              "reasons": ["web-gre: 3 of 3 backends serving", "no serving backend (dns: 0 of 1 backends serving)",
                          "web6: 1 of 1 backends serving"]}


def run(announce_text, fmt, vip_reply=None):
    vip_text = json.dumps(vip_reply if vip_reply is not None else vip(1))

    def reply_text(cmd):
        if cmd == "/maglb/stats":
            return '{"generation": 3, "announce_ready": 1}'
        if cmd.startswith("/maglb/vips"):
            return '{"generation": 3, "vip_total": 1, "vip_offset": 0, "names": ["web"]}'
        if cmd.startswith("/maglb/vip,"):
            return vip_text
        if cmd == "/maglb/announce":
            return announce_text
        return "null"
    return fake_telemetry.maglbctl_stats(MAGLBCTL, reply_text, fmt)


def announce_line(p):
    return next((line.strip() for line in p.stdout.splitlines() if line.strip().startswith("announce:")), None)


def vip_title(p):
    return next((line for line in p.stdout.splitlines() if line.startswith('vip "web"')), "")


# An announcing maglb: the line as the brief has it, the VIP's flag.
p = run(json.dumps(ANNOUNCING), "table")
check(p.returncode == 0 and p.stderr == "" and announce_line(p) ==
      "announce: announcing, table 4242, 2 of 3 routes (10.100.0.1/32 yes: web-gre: 3 of 3 backends serving; "
      "10.100.0.2/32 no: no serving backend (dns: 0 of 1 backends serving); 2001:db8::1/128 yes: web6: 1 of 1 "
      "backends serving); route changes 5, errors 1", "announce line", p)
check("fingerprint 00000000000000aa  announced yes  packets" in vip_title(p), "VIP announced yes", p)
p = run(json.dumps(ANNOUNCING), "table", vip(0))
check("  announced no  " in vip_title(p), "VIP announced no", p)

# JSON: the reply under "announce", as sent; the VIP's "announced" kept.
p = run(json.dumps(ANNOUNCING), "json")
try:
    doc = json.loads(p.stdout)
    ok = doc["announce"] == ANNOUNCING and doc["vips"]["web"]["announced"] == 1 and "stats" in doc
except (ValueError, KeyError, TypeError):
    ok = False
check(ok and p.returncode == 0, "json announce", p)

# Draining: until when.
drain = dict(ANNOUNCING, state="draining", routes=0, announced=[0, 0, 0], drain_until_unix_ms=1796149802000)
p = run(json.dumps(drain), "table")
check(announce_line(p).startswith("announce: draining until 2026-12-01T18:30:02Z, table 4242, 0 of 3 routes ("),
      "draining line", p)

# No [announce]: off. An older maglb (no command, no VIP flag): not reported,
# no warning, exit 0; JSON null.
p = run(json.dumps(dict(ANNOUNCING, state="off", routes=0, prefixes=[], announced=[], reasons=[], prefix_total=0)),
        "table")
check(announce_line(p) == "announce: off (no [announce] in the config)" and p.returncode == 0, "off", p)
p = run("null", "table", vip())
check(p.returncode == 0 and p.stderr == "" and announce_line(p) ==
      "announce: not reported (this maglb is older than route announcement)" and "announced" not in vip_title(p),
      "older maglb", p)
p = run("null", "json", vip())
try:
    ok = json.loads(p.stdout)["announce"] is None
except (ValueError, KeyError, TypeError):
    ok = False
check(ok and p.returncode == 0, "older maglb json", p)

# Hostile replies: rendered without a crash, "?" where unusable.
hostile = [
    ("shorter announced and reasons", dict(ANNOUNCING, announced=[1], reasons=[]),
     "(10.100.0.1/32 yes: ?; 10.100.0.2/32 ?: ?; 2001:db8::1/128 ?: ?)"),
    ("longer announced and reasons", dict(ANNOUNCING, prefixes=["10.100.0.1/32"], announced=[1, 1, 1, 1],
                                          reasons=["a", "b", "c"]), "(10.100.0.1/32 yes: a; the reply lists 1 of 3)"),
    ("non-string reasons and prefixes", dict(ANNOUNCING, prefixes=[7, None, {"x": 1}], reasons=[[1], 2, None]),
     "(? yes: ?; ? no: ?; ? yes: ?)"),
    ("announced not 0/1", dict(ANNOUNCING, announced=[2, -1, "1"]), "10.100.0.1/32 ?: web-gre"),
    ("huge numbers", dict(ANNOUNCING, table=2 ** 64 + 1, routes=-3, prefix_total=1e300, route_changes=1.5e19),
     "table 18446744073709551615, 0 of 18446744073709551615 routes"),
    ("arrays that are no arrays", dict(ANNOUNCING, prefixes="10.0.0.1/32", announced={"a": 1}, reasons=3),
     "2 of 3 routes (the reply lists 0 of 3); route changes 5"),
    ("control characters", dict(ANNOUNCING, state="ann\x1b[2Jouncing", prefixes=["10.100.0.1/32\x1b]0;x\x07"],
                                reasons=["r\x1b[31m"]), "announce: ann?[2Jouncing, table 4242"),
    ("a state that is no string", dict(ANNOUNCING, state=5), "announce: ?, table 4242"),
    ("a draining end past any clock", dict(ANNOUNCING, state="draining", drain_until_unix_ms=2 ** 63),
     "announce: draining until ?, table"),
    ("an empty object", {}, "announce: ?, table 0, 0 of 0 routes; route changes 0, errors 0"),
    ("a long list", dict(ANNOUNCING, prefix_total=1000, prefixes=[f"10.1.{i // 256}.{i % 256}/32" for i in range(1000)],
                         announced=[1] * 1000, reasons=["x"] * 1000), "; 968 more: see --format json); route"),
]
for what, reply, says in hostile:
    p = run(json.dumps(reply), "table")
    line = announce_line(p) or ""
    check(p.returncode == 0 and says in line and "\x1b" not in p.stdout + p.stderr and len(line) < 8000,
          f"hostile: {what}", p)
    p = run(json.dumps(reply), "json")
    try:
        ok = json.loads(p.stdout)["announce"] == json.loads(json.dumps(reply))
    except (ValueError, KeyError, TypeError):
        ok = False
    check(ok and p.returncode == 0, f"hostile json: {what}", p)

# Replies that are no object or no JSON: a warning, exit 1, the rest shown.
for what, text, says in [("an array", "[1, 2]", "not an object"), ("a string", '"on"', "not an object"),
                         ("malformed", '{"state": ', "unreadable reply to /maglb/announce")]:
    for fmt in ("table", "json"):
        p = run(text, fmt)
        check(p.returncode == 1 and "maglbctl: warning: route announcement: " in p.stderr and says in p.stderr
              and ('vip "web"' if fmt == "table" else '"web": {') in p.stdout,
              f"unreadable announce: {what}, --format {fmt}", p)
        if fmt == "table":
            check((announce_line(p) or "").startswith("announce: unreadable ("), f"unreadable line: {what}", p)
        else:
            try:
                ok = json.loads(p.stdout)["announce"] is None
            except (ValueError, KeyError, TypeError):
                ok = False
            check(ok, f"unreadable announce json null: {what}", p)

# The VIP's flag when hostile.
for value in (2, -1, "1", None, 1.0):
    p = run(json.dumps(ANNOUNCING), "table", vip(value) if value is not None else dict(vip(), announced=None))
    check(p.returncode == 0 and "  announced ?  " in vip_title(p), f"VIP announced {value!r}", p)

print("ok" if failures == 0 else f"{failures} failure(s)")
sys.exit(1 if failures else 0)
