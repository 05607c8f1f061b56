#!/usr/bin/env python3
"""maglbctl stats against a fake telemetry socket that answers hostile
replies: it must fail with an error line and exit 1, never crash."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import fake_telemetry  # noqa: E402

MAGLBCTL = sys.argv[1]


STATS = '{"generation": 1}'


def run(vip_body, fmt, stats_body=STATS):
    """vip_body and stats_body: raw JSON text (deeper than Python's json nests)."""
    def reply_text(cmd):
        if cmd == "/maglb/stats":
            return stats_body
        if cmd.startswith("/maglb/vips"):
            return '{"generation": 1, "vip_total": 1, "vip_offset": 0, "names": ["v"]}'
        if cmd.startswith("/maglb/vip,"):
            return vip_body
        return "null"
    return fake_telemetry.maglbctl_stats(MAGLBCTL, reply_text, fmt)


failures = 0
depth = 60000  # far past any reply of maglb's; recursing per level overflows the stack
deep = '{"name": "v", "generation": 1, "x": ' + "[" * depth + "]" * depth + "}"
for fmt in ("json", "table"):
    p = run(deep, fmt)
    if p.returncode != 1 or "unreadable reply" not in p.stderr:
        print(f"FAIL deep nesting, --format {fmt}: rc {p.returncode}, stderr {p.stderr[:300]!r}")
        failures += 1
# Nesting as deep as the old parser took still reads.
ok = '{"name": "v", "generation": 1, "x": ' + "[" * 30 + "]" * 30 + "}"
p = run(ok, "json")
if p.returncode != 1 or "unreadable reply" in p.stderr or '"x": [[[' not in p.stdout:
    print(f"FAIL 30 levels: rc {p.returncode}, stderr {p.stderr[:300]!r}")
    failures += 1
# Numbers no counter can hold read as 0 (negative) or the largest (too big),
# never as whatever a float-to-integer cast leaves.
odd = ('{"generation": 1, "rx_packets": -5, "rx_bytes": 1e30, "tx_packets": -1.5, '
       '"tx_bytes": 18446744073709551615, "dropped": 7.9}')
p = run('{"name": "v", "generation": 1}', "table", odd)
want = "rx 0 packets 18446744073709551615 bytes; tx 0 packets 18446744073709551615 bytes; dropped 7"
if want not in p.stdout:
    print(f"FAIL out-of-range numbers: rc {p.returncode}, stdout {p.stdout[:400]!r}")
    failures += 1
# Totals no maglb can have, answered one name or backend per page, would be
# paged for ever: refused at once. A VIP reply that is no object is an error,
# not a VIP that went away (null).
def run_vips(vips_body, vip_body, fmt):
    def reply_text(cmd):
        if cmd == "/maglb/stats":
            return STATS
        if cmd.startswith("/maglb/vips"):
            return vips_body
        return vip_body if cmd.startswith("/maglb/vip,") else "null"
    return fake_telemetry.maglbctl_stats(MAGLBCTL, reply_text, fmt)


endless_vips = '{"generation": 1, "vip_total": 1e300, "vip_offset": 0, "names": ["v"]}'
one_vip = '{"generation": 1, "vip_total": 1, "vip_offset": 0, "names": ["v"]}'
endless_backends = ('{"name": "v", "generation": 1, "fingerprint": "00", "backend_total": 18446744073709551615, '
                    '"backend_offset": 0, "backend_names": ["a"]}')
for what, vips_body, vip_body, says in [
        ("an endless VIP list", endless_vips, "{}", "more than any maglb serves"),
        ("an endless backend list", one_vip, endless_backends, "more than any maglb serves"),
        ("a VIP reply that is an array", one_vip, "[1, 2]", "not an object")]:
    for fmt in ("json", "table"):
        p = run_vips(vips_body, vip_body, fmt)
        if p.returncode != 1 or says not in p.stderr:
            print(f"FAIL {what}, --format {fmt}: rc {p.returncode}, stderr {p.stderr[:300]!r}")
            failures += 1
print("ok" if failures == 0 else f"{failures} failure(s)")
sys.exit(1 if failures else 0)
