#!/usr/bin/env python3
"""maglbctl stats against a fake telemetry socket that answers hostile
replies: it must fail with an error line and exit 1, never crash."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading

MAGLBCTL = sys.argv[1]


STATS = '{"generation": 1}'


def serve(sock, vip_body, stats_body):
    conn, _ = sock.accept()
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    conn.send(json.dumps({"version": "fake", "pid": 1, "max_output_len": 16384}).encode())
    while True:
        cmd = conn.recv(4096).decode()
        if not cmd:
            break
        if cmd == "/maglb/stats":
            body = stats_body
        elif cmd.startswith("/maglb/vips"):
            body = '{"generation": 1, "vip_total": 1, "vip_offset": 0, "names": ["v"]}'
        elif cmd.startswith("/maglb/vip,"):
            body = vip_body
        else:
            body = "null"
        conn.send(('{"%s": %s}' % (cmd.split(",")[0], body)).encode())
    conn.close()


def run(vip_body, fmt, stats_body=STATS):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.sock")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.bind(path)
        sock.listen(1)
        t = threading.Thread(target=serve, args=(sock, vip_body, stats_body), daemon=True)
        t.start()
        p = subprocess.run([MAGLBCTL, "stats", "--socket", path, "--format", fmt],
                           capture_output=True, text=True, timeout=30)
        sock.close()
        return p


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
print("ok" if failures == 0 else f"{failures} failure(s)")
sys.exit(1 if failures else 0)
