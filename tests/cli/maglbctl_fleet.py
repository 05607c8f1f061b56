#!/usr/bin/env python3
"""maglbctl fleet: config files and fake telemetry sockets that agree, that
differ (a backend, a weight, hash_seed, a missing VIP, effective weight and
health), sources that cannot be read, hostile replies (huge, malformed, deep,
endless, wrong types): the right exit status, what differs named, never a
crash. Route announcement: each instance's state, per VIP announced or not,
a VIP no instance announces warned of."""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import fake_telemetry  # noqa: E402

MAGLBCTL = sys.argv[1]
EXIT_OK, EXIT_DISAGREE, EXIT_USAGE, EXIT_UNREADABLE = 0, 1, 2, 3

failures = 0


def check(ok, what, p):
    global failures
    if not ok:
        print(f"FAIL {what}: rc {p.returncode}\nstdout {p.stdout[:3000]}\nstderr {p.stderr[:1500]!r}")
        failures += 1


def fleet(*args):
    return subprocess.run([MAGLBCTL, "fleet", *args], capture_output=True, text=True, timeout=60)


def config(seed=7, web=(("web-a", 1), ("web-b", 1), ("web-c", 2)), dns=True):
    text = f"[lb]\nhash_seed = {seed}\n"
    text += '[[vip]]\nname = "web"\naddress = "10.0.0.1"\nport = 80\ntable_size = 251\n'
    for i, (name, weight) in enumerate(web):
        text += f'  [[vip.backend]]\n  name = "{name}"\n  address = "10.1.0.{i + 1}"\n  weight = {weight}\n'
    if dns:
        text += ('[[vip]]\nname = "dns"\naddress = "10.0.0.2"\nport = 53\nprotocol = "udp"\ntable_size = 251\n'
                 '  [[vip.backend]]\n  name = "dns-1"\n  address = "10.2.0.1"\n')
    return text


tmp = tempfile.mkdtemp(prefix="mlb-fleet-test-")


def write(name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


base = write("base.toml", config())
# The same backends listed in another order (and other addresses): the same tables.
reordered = write("reordered.toml", config(web=(("web-c", 2), ("web-a", 1), ("web-b", 1))))
one_less = write("one_less.toml", config(web=(("web-a", 1), ("web-b", 1))))
reweighted = write("reweighted.toml", config(web=(("web-a", 1), ("web-b", 3), ("web-c", 2))))
other_seed = write("other_seed.toml", config(seed=8))
no_dns = write("no_dns.toml", config(dns=False))
broken = write("broken.toml", config() + "\nbogus_key = 1\n")

# Agreeing configs: exit 0, every VIP "agree", both sources listed.
p = fleet("--config", base, "--config", reordered)
check(p.returncode == EXIT_OK and 'vip "web": agree' in p.stdout and 'vip "dns": agree' in p.stdout
      and "sources agree on 2 VIPs" in p.stdout, "agreeing configs", p)

# One backend fewer: exit 1, the backend named, the source that has it named.
p = fleet("--config", base, "--config", one_less)
check(p.returncode == EXIT_DISAGREE and 'vip "web": DISAGREE' in p.stdout
      and f"only config {base} has web-c" in p.stdout and 'vip "dns": agree' in p.stdout,
      "a backend fewer", p)
# Its backend rows mark web-c absent there.
check(re.search(r"web-c +config \S*one_less.toml +- +- +absent +DIFFERS", p.stdout) is not None,
      "absent backend row", p)

# A weight: exit 1, which backend and both weights.
p = fleet("--config", base, "--config", reweighted)
check(p.returncode == EXIT_DISAGREE and f"web-b: weight 1 on config {base}, 3 on config {reweighted}" in p.stdout,
      "a weight", p)

# hash_seed: exit 1 even though every table agrees.
p = fleet("--config", base, "--config", other_seed)
check(p.returncode == EXIT_DISAGREE and "hash_seed differs" in p.stdout
      and f"config {base}: 7, config {other_seed}: 8" in p.stdout and 'vip "web": agree' in p.stdout,
      "hash_seed", p)

# A VIP missing on one source.
p = fleet("--config", base, "--config", no_dns)
check(p.returncode == EXIT_DISAGREE and f'vip "dns": missing on config {no_dns}' in p.stdout, "missing VIP", p)
check(re.search(r"config \S*no_dns.toml +config +MISSING", p.stdout) is not None, "MISSING row", p)

# JSON: the same report, problems among the notes.
p = fleet("--format", "json", "--config", base, "--config", no_dns)
try:
    doc = json.loads(p.stdout)
    ids = [t["id"] for t in doc["tables"]]
    summary = doc["tables"][0]
    ok = (ids[0] == "sources" and "vip:dns" in ids and "vip:web:backends" in ids and "DISAGREE" in summary["title"]
          and any("missing on" in n for n in summary["notes"]))
except (ValueError, KeyError, IndexError, TypeError):
    ok = False
check(ok and p.returncode == EXIT_DISAGREE, "--format json", p)

# Unreadable sources: exit 3, each named on stderr; the readable ones still shown.
missing_file = os.path.join(tmp, "nonexistent.toml")
p = fleet("--config", base, "--config", missing_file, "--config", broken)
check(p.returncode == EXIT_UNREADABLE and f"config {missing_file}: cannot be read" in p.stderr
      and re.search(r"config \S*broken.toml: cannot be read: \S*broken.toml:\d+: ", p.stderr) is not None
      and "2 of 3 sources could not be read" in p.stdout, "unreadable configs", p)
# Unreadable wins over a disagreement among the readable ones (still shown).
p = fleet("--config", base, "--config", reweighted, "--config", missing_file)
check(p.returncode == EXIT_UNREADABLE and "the readable sources DISAGREE" in p.stdout
      and "web-b: weight 1 on" in p.stdout, "unreadable and disagreeing", p)
p = fleet("--config", base, "--prefix", "mlb-fleet-test-no-such-prefix")
check(p.returncode == EXIT_UNREADABLE
      and "/var/run/dpdk/mlb-fleet-test-no-such-prefix/dpdk_telemetry.v2" in p.stderr
      and "prefix mlb-fleet-test-no-such-prefix: cannot be read" in p.stderr, "unreachable prefix", p)

# Usage errors: exit 2.
for args, says in [((["--config", base]), "at least 2 sources"), ((["--config", base, "--bogus"]), "unexpected"),
                   ((["--format", "xml", "--config", base, "--config", base]), "table or json"),
                   ((["--config", base, "--config"]), "unexpected")]:
    p = fleet(*args)
    check(p.returncode == EXIT_USAGE and says in p.stderr, f"usage {args}", p)


# Live sources, over fake telemetry sockets.
def fingerprint_of(path, vip):
    out = subprocess.run([MAGLBCTL, "table", "--config", path, "--vip", vip], capture_output=True, text=True,
                         check=True).stdout
    return re.search(r"fingerprint ([0-9a-f]{16})", out).group(1)


WEB_FP = fingerprint_of(base, "web")
DNS_FP = fingerprint_of(base, "dns")


def vip_reply(name, fingerprint, names, weights, effective, health, generation=4):
    n = len(names)
    return {"name": name, "address": "10.0.0.1", "protocol": "tcp", "port": 80, "forwarding": "gre",
            "algorithm": "maglev", "table_size": 251, "fingerprint": fingerprint, "generation": generation,
            "backend_total": n, "backend_offset": 0, "packets": 0, "bytes": 0, "new_flows": 0,
            "bounded_load_passed": 0, "bounded_load_over": 0,
            "backend_names": names, "backend_addresses": [f"10.1.0.{i + 1}" for i in range(n)],
            "backend_health": health, "backend_health_reasons": [""] * n, "backend_health_checks": [""] * n,
            "backend_last_probes": [""] * n, "backend_weights": weights, "backend_effective_weights": effective,
            "backend_table_entries": [0] * n, "backend_packets": [0] * n, "backend_bytes": [0] * n,
            "backend_new_flows": [0] * n, "backend_next_hop_resolved": [1] * n,
            "backend_health_up": [1] * n, "backend_health_checked": [1] * n, "backend_health_held_down": [0] * n,
            "backend_health_since_ms": [0] * n, "backend_health_probes": [0] * n,
            "backend_health_probe_failures": [0] * n, "backend_health_transitions": [0] * n}


def instance(vips, generation=4, raw=None, announce="null"):
    """reply_text for a fake maglb serving `vips` ({name: reply dict}); raw
    overrides the text of /maglb/vip,NAME replies; announce is the text of
    /maglb/announce's (null: a maglb older than route announcement)."""
    def reply_text(cmd):
        if cmd == "/maglb/announce":
            return announce
        if cmd == "/maglb/stats":
            return json.dumps({"generation": generation})
        if cmd.startswith("/maglb/vips"):
            return json.dumps({"generation": generation, "vip_total": len(vips), "vip_offset": 0,
                               "names": list(vips)})
        if cmd.startswith("/maglb/vip,"):
            name = cmd.split(",", 2)[1]
            if raw is not None:
                return raw
            return json.dumps(vips[name]) if name in vips else "null"
        return "null"
    return reply_text


WEB_NAMES = ["web-a", "web-b", "web-c"]
healthy = {"web": vip_reply("web", WEB_FP, WEB_NAMES, [1, 1, 2], [1, 1, 2], ["up", "up", "up"]),
           "dns": vip_reply("dns", DNS_FP, ["dns-1"], [1], [1], ["unchecked"])}
one_down = dict(healthy, web=vip_reply("web", "00000000000000aa", WEB_NAMES, [1, 1, 2], [1, 0, 2],
                                       ["up", "down", "up"], generation=9))

with fake_telemetry.serve(instance(healthy)) as a, fake_telemetry.serve(instance(healthy, 5)) as b, \
        fake_telemetry.serve(instance(one_down, 9)) as c:
    # Two instances and their config agree: exit 0; generations and health shown.
    p = fleet("--socket", a, "--socket", b, "--config", base)
    check(p.returncode == EXIT_OK and "sources agree on 2 VIPs" in p.stdout
          and re.search(rf"socket {re.escape(b)} +5 +not reported +2", p.stdout) is not None
          and re.search(rf"socket {re.escape(b)} +4 +{WEB_FP}", p.stdout) is not None
          and re.search(rf"web-c +socket {re.escape(a)} +2 +2 +up ", p.stdout) is not None
          and "telemetry does not report it" in p.stdout, "live sources agree", p)
    # One instance sees web-b down: different fingerprints, the backend and its health named.
    p = fleet("--socket", a, "--socket", c)
    check(p.returncode == EXIT_DISAGREE and 'vip "web": DISAGREE' in p.stdout and 'vip "dns": agree' in p.stdout
          and f"web-b: effective weight 1 (up) on socket {a}, effective weight 0 (down) on socket {c}" in p.stdout,
          "live sources disagree", p)
    # Against a config: the live instance serves web-b at 0, the config builds it at 1.
    p = fleet("--config", base, "--socket", c)
    check(p.returncode == EXIT_DISAGREE
          and f"web-b: weight 1 (health unknown) on config {base}, effective weight 0 (down) on socket {c}"
          in p.stdout, "live vs config", p)
    # JSON of live sources: numbers as numbers, health as sent.
    p = fleet("--format", "json", "--socket", a, "--socket", c)
    try:
        rows = next(t for t in json.loads(p.stdout)["tables"] if t["id"] == "vip:web:backends")["rows"]
        ok = {"backend": "web-b", "source": f"socket {c}", "weight": 1, "eff_weight": 0, "health": "down",
              "differs": "DIFFERS"} in rows
    except (ValueError, KeyError, StopIteration, TypeError):
        ok = False
    check(ok and p.returncode == EXIT_DISAGREE, "live --format json", p)

# A VIP whose backends all weigh 0 has no table on either side: the
# daemon's fingerprint of an empty table is 0, as the config's.
drained = write("drained.toml", config(web=(("web-a", 0), ("web-b", 0), ("web-c", 0)), dns=False))
empty = {"web": vip_reply("web", "0" * 16, WEB_NAMES, [0, 0, 0], [0, 0, 0], ["unchecked"] * 3)}
with fake_telemetry.serve(instance(empty)) as e:
    p = fleet("--config", drained, "--socket", e)
    check(p.returncode == EXIT_OK and 'vip "web": agree' in p.stdout, "drained VIP, no table", p)

# Hostile replies: exit 3 naming the source, a clear error, no crash.
good = instance(healthy)
depth = 60000
hostile = [
    ("a huge reply", '{"name": "web", "x": "' + "A" * (3 << 20) + '"}', "unreadable reply"),
    ("malformed JSON", '{"name": "web", "generation": ', "unreadable reply"),
    ("deep nesting", '{"x": ' + "[" * depth + "]" * depth + "}", "unreadable reply"),
    ("an endless backend list", json.dumps(dict(healthy["web"], backend_total=18446744073709551615)),
     "more than any maglb serves"),
    ("names that are not strings", json.dumps(dict(healthy["web"], backend_names=[1, 2, 3])), "has no name"),
    ("a missing array", json.dumps({k: v for k, v in healthy["web"].items() if k != "backend_weights"}),
     "incomplete reply"),
    ("no fingerprint", json.dumps({k: v for k, v in healthy["web"].items() if k != "fingerprint"}),
     "no table fingerprint"),
    ("a reply that is an array", "[1, 2]", "not an object"),
]
with fake_telemetry.serve(good) as a:
    for what, raw, says in hostile:
        with fake_telemetry.serve(instance(healthy, raw=raw)) as h:
            for fmt in ("table", "json"):
                p = fleet("--format", fmt, "--socket", a, "--socket", h)
                check(p.returncode == EXIT_UNREADABLE and f"socket {h}: cannot be read" in p.stderr
                      and says in p.stderr and len(p.stderr) < 4000, f"hostile: {what}, --format {fmt}", p)
    # Control characters in names reach no terminal.
    evil = {"w\x1b[2Jeb": vip_reply("w\x1b[2Jeb", "00", ["b\x1b]0;x\x07"], [1], [1], ["up\x1b[31m"])}
    with fake_telemetry.serve(instance(evil)) as h:
        p = fleet("--socket", a, "--socket", h)
        check(p.returncode == EXIT_DISAGREE and "\x1b" not in p.stdout + p.stderr and "w?[2Jeb" in p.stdout,
              "control characters", p)


# Route announcement: each instance's state and, per VIP, whether it
# announces it; a VIP no instance announces is a warning, not a disagreement.
def announce(state, web, dns):
    reasons = {1: "serving", 0: "no serving backend (0 of 1 backends serving)"}
    return json.dumps({"state": state, "table": 4242, "routes": web + dns, "route_changes": 2, "route_errors": 0,
                       "drain_until_unix_ms": 0, "prefix_total": 2, "prefixes": ["10.0.0.1/32", "10.0.0.2/32"],
                       "announced": [web, dns], "reasons": [f"web: {reasons[web]}", f"dns: {reasons[dns]}"]})


def announced(vips, web, dns):
    out = {name: dict(v) for name, v in vips.items()}
    out["web"]["announced"], out["dns"]["address"] = web, "10.0.0.2"
    out["dns"]["announced"] = dns
    return out


def vip_row(p, vip, source):
    """The fields of source's row in vip's table (text output)."""
    inside = False
    for line in p.stdout.splitlines():
        if line.startswith(f'vip "{vip}"'):
            inside = True
        elif inside and line.split()[:2] == source.split():
            return line.split()
        elif inside and not line.startswith(" "):
            inside = False
    return None


serving = announced(healthy, 1, 0)
with fake_telemetry.serve(instance(serving, announce=announce("announcing", 1, 0))) as a, \
        fake_telemetry.serve(instance(serving, 5, announce=announce("announcing", 1, 0))) as b:
    p = fleet("--socket", a, "--socket", b)
    check(p.returncode == EXIT_OK and "sources agree on 2 VIPs; 1 warning(s)" in p.stdout
          and vip_row(p, "web", f"socket {a}")[-1] == "yes" and vip_row(p, "dns", f"socket {b}")[-1] == "no"
          and re.search(rf"socket {re.escape(a)} +4 +not reported +2 +announcing", p.stdout) is not None
          and f'vip "dns": WARNING: no instance announces it (socket {a} announcing: dns: no serving backend '
          f'(0 of 1 backends serving); socket {b} announcing: dns: no serving backend' in p.stdout
          and 'vip "web": WARNING' not in p.stdout, "announced shown, an unannounced VIP warned", p)
    p = fleet("--format", "json", "--socket", a, "--socket", b)
    try:
        doc = json.loads(p.stdout)
        web = next(t for t in doc["tables"] if t["id"] == "vip:web")["rows"]
        ok = ([r["announced"] for r in web] == ["yes", "yes"] and doc["tables"][0]["rows"][0]["announce"] == "announcing"
              and any("no instance announces it" in n for n in doc["tables"][0]["notes"]))
    except (ValueError, KeyError, StopIteration, TypeError):
        ok = False
    check(ok and p.returncode == EXIT_OK, "announced in json", p)

# One instance draining (announces nothing), the other announces both: no warning.
with fake_telemetry.serve(instance(announced(healthy, 0, 0), announce=announce("draining", 0, 0))) as a, \
        fake_telemetry.serve(instance(announced(healthy, 1, 1), announce=announce("announcing", 1, 1))) as b:
    p = fleet("--socket", a, "--socket", b)
    check(p.returncode == EXIT_OK and "WARNING" not in p.stdout and vip_row(p, "web", f"socket {a}")[-1] == "no"
          and re.search(rf"socket {re.escape(a)} +4 +not reported +2 +draining", p.stdout) is not None,
          "draining instance", p)
# No instance has [announce] (off), or none reports it (older): nothing to warn of.
off = announce("off", 0, 0)
with fake_telemetry.serve(instance(announced(healthy, 0, 0), announce=off)) as a, \
        fake_telemetry.serve(instance(healthy)) as b:
    p = fleet("--socket", a, "--socket", b, "--config", base)
    check(p.returncode == EXIT_OK and "WARNING" not in p.stdout and vip_row(p, "web", f"socket {b}")[-1] == "-"
          and vip_row(p, "web", f"config {base}")[-1] == "-"
          and re.search(rf"socket {re.escape(b)} +4 +not reported +2 +not reported", p.stdout) is not None
          and re.search(rf"socket {re.escape(a)} +4 +not reported +2 +off", p.stdout) is not None,
          "announce off and not reported", p)
# Both announce a VIP whose tables differ: the disagreement, and the announced state beside it.
with fake_telemetry.serve(instance(announced(healthy, 1, 1), announce=announce("announcing", 1, 1))) as a, \
        fake_telemetry.serve(instance(announced(one_down, 1, 1), 9, announce=announce("announcing", 1, 1))) as c:
    p = fleet("--socket", a, "--socket", c)
    check(p.returncode == EXIT_DISAGREE and 'vip "web": DISAGREE' in p.stdout
          and vip_row(p, "web", f"socket {c}")[-1] == "yes" and vip_row(p, "web", f"socket {a}")[-1] == "yes",
          "disagreeing tables, both announced", p)
# Hostile announce replies and flags: shown as "?", never a crash nor a refused source.
hostile_announce = [
    ("no object", "[1]"), ("malformed", '{"state": '), ("a number state", json.dumps({"state": 7})),
    ("ragged arrays", json.dumps({"state": "announcing", "prefixes": ["10.0.0.1/32", 3, None], "announced": [1],
                                  "reasons": [None, "x"]})),
    ("prefixes no array", json.dumps({"state": "announcing", "prefixes": "10.0.0.1/32", "reasons": {"a": 1}})),
    ("control characters", json.dumps({"state": "ann\x1b[2J", "prefixes": ["10.0.0.2/32"], "reasons": ["\x1b]0;x"]})),
]
for what, text in hostile_announce:
    with fake_telemetry.serve(instance(announced(healthy, 2, -1), announce=text)) as h, \
            fake_telemetry.serve(instance(healthy)) as b:
        for fmt in ("table", "json"):
            p = fleet("--format", fmt, "--socket", h, "--socket", b)
            check(p.returncode == EXIT_OK and "\x1b" not in p.stdout + p.stderr and "agree on 2 VIPs" in p.stdout
                  and (fmt == "json" or vip_row(p, "web", f"socket {h}")[-1] == "?"),
                  f"hostile announce: {what}, --format {fmt}", p)

print("ok" if failures == 0 else f"{failures} failure(s)")
sys.exit(1 if failures else 0)
