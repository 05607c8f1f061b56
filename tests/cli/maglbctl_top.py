#!/usr/bin/env python3
"""maglbctl top against a fake telemetry socket whose counters step by a
scripted amount per read: the rates it prints (per VIP, per backend, drops by
reason, only the non-zero ones), health and weights; the piped format (one
block per refresh, a blank line between, no escape sequences) and the
terminal one (redrawn, fitted to the width); hostile replies (missing fields,
numbers no counter holds, counters going back, another pid: "restarted", never
a negative rate); the daemon going away ("maglb stopped", status 0); SIGINT
and SIGTERM (status 0, nothing on stderr); a wrong command line (status 2) and
no daemon at the start (status 1)."""
import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import fake_telemetry  # noqa: E402

MAGLBCTL = sys.argv[1]
INTERVAL = 0.3
UINT64_MAX = 2**64 - 1

failures = 0


def check(ok, what, out="", err=""):
    global failures
    if not ok:
        print(f"FAIL {what}\nstdout {out[:4000]}\nstderr {err[:1500]!r}")
        failures += 1


class Daemon:
    """What the fake maglb answers at its k-th read (k counts /maglb/stats
    queries; a read asks it first, then the VIPs of that same read):
    counters step per read as `step` says, `edit(k, stats, vip)` may change
    them (hostile replies), `greeting` is its pid."""

    def __init__(self, edit=None):
        self.reads = 0
        self.lock = threading.Lock()
        self.edit = edit

    def replies(self, k):
        stats = {"generation": 3, "uptime_s": 60 + k, "workers": 2,
                 "rx_packets": 1000 * k, "rx_bytes": 100000 * k, "tx_packets": 990 * k, "tx_bytes": 99000 * k,
                 "dropped": 12 * k, "drop_no_vip": 9 * k, "drop_bad_checksum": 3 * k, "drop_ttl_exceeded": 0,
                 "tx_full": 0, "conntrack_occupied": 55}
        vip = {"name": "web", "address": "10.0.0.1", "protocol": "tcp", "port": 80, "forwarding": "gre",
               "generation": 3, "fingerprint": "00000000000000aa", "backend_total": 3, "backend_offset": 0,
               "packets": 900 * k, "bytes": 90000 * k, "new_flows": 30 * k, "announced": 1,
               "backend_names": ["be1", "be2", "be3"],
               "backend_addresses": ["10.0.0.11", "10.0.0.12", "10.0.0.13"],
               "backend_health": ["up", "down", "unchecked"],
               "backend_health_reasons": ["", "3 consecutive failures", ""],
               "backend_health_checks": ["tcp", "tcp", ""], "backend_last_probes": ["", "", ""],
               "backend_weights": [4, 2, 1], "backend_effective_weights": [2, 0, 1],
               "backend_table_entries": [151, 0, 100],
               "backend_packets": [600 * k, 0, 300 * k], "backend_bytes": [60000 * k, 0, 30000 * k],
               "backend_new_flows": [21 * k, 0, 9 * k], "backend_next_hop_resolved": [1, 1, 1],
               "backend_health_up": [1, 0, 1], "backend_health_checked": [1, 1, 0],
               "backend_health_held_down": [0, 1, 0], "backend_health_since_ms": [0, 0, 0],
               "backend_health_probes": [5, 5, 0], "backend_health_probe_failures": [0, 5, 0],
               "backend_health_transitions": [1, 1, 0]}
        if self.edit is not None:
            self.edit(k, stats, vip)
        return stats, vip

    def reply_text(self, cmd):
        with self.lock:
            if cmd == "/maglb/stats":
                self.reads += 1
            k = self.reads
        stats, vip = self.replies(k)
        if cmd == "/maglb/stats":
            return stats if isinstance(stats, str) else json.dumps(stats)
        if cmd.startswith("/maglb/vips"):
            return '{"generation": 3, "vip_total": 1, "vip_offset": 0, "names": ["web"]}'
        if cmd.startswith("/maglb/vip,"):
            return vip if isinstance(vip, str) else json.dumps(vip)
        if cmd == "/maglb/announce":
            return '{"state": "announcing", "routes": 1, "prefix_total": 1}'
        return "null"


def top(path, *args, timeout=30):
    return subprocess.run([MAGLBCTL, "top", "--socket", path, "--interval-s", str(INTERVAL), *args],
                          capture_output=True, text=True, timeout=timeout)


def blocks_of(out):
    return [b for b in out.split("\n\n") if b.strip()]


def row(block, name):
    """The cells of the row named `name` ("web", "be1") in a block; None if none."""
    for line in block.splitlines():
        cells = line.split()
        if cells and cells[0] == name:
            return cells
    return None


def near(text, want):
    """A printed rate within the bounds of a scripted step: the time between
    two reads is the interval or more, never less, so the rate is at most
    about step / interval: between half of it and a tenth more (the
    refreshes keep to a schedule, so one gap can be a late wake-up short of
    the interval); generous bounds for a loaded machine."""
    try:
        v = float(text)
    except ValueError:
        return False
    return want * 0.5 <= v <= want * 1.1 + 0.05


# Rates from scripted replies, the piped format.
d = Daemon()
with fake_telemetry.serve(d.reply_text) as path:
    p = top(path, "--iterations", "3")
bs = blocks_of(p.stdout)
check(p.returncode == 0 and len(bs) == 3, f"3 refreshes: rc {p.returncode}, {len(bs)} blocks", p.stdout, p.stderr)
check("\x1b" not in p.stdout, "piped output carries no escape sequence", p.stdout)
check(p.stdout.endswith("\n\n") and "\n\n\n" not in p.stdout, "blocks end with one blank line", p.stdout)
for i, b in enumerate(bs):
    check(b.startswith("maglb ") and "generation 3" in b, f"block {i} heading", b)
    web, be1, be2, be3 = row(b, "web"), row(b, "be1"), row(b, "be2"), row(b, "be3")
    if None in (web, be1, be2, be3):
        check(False, f"block {i}: every VIP and backend has a row", b)
        continue
    # web: 10.0.0.1 tcp/80 gre 1/3? | pkts/s bytes/s flows/s announced
    check(web[-1] == "yes" and near(web[-4], 900 / INTERVAL) and near(web[-3], 90000 / INTERVAL)
          and near(web[-2], 30 / INTERVAL), f"block {i}: VIP rates {web}", b)
    # be1: address health weight eff pkts/s bytes/s flows/s
    check(be1[1:5] == ["10.0.0.11", "up", "4", "2"] and near(be1[5], 600 / INTERVAL)
          and near(be1[6], 60000 / INTERVAL) and near(be1[7], 21 / INTERVAL), f"block {i}: be1 {be1}", b)
    check(be2[1:6] == ["10.0.0.12", "down", "(held)", "2", "0"] and be2[6:9] == ["0.0", "0.0", "0.0"],
          f"block {i}: be2 {be2}", b)
    check(be3[2:5] == ["unchecked", "1", "1"] and near(be3[5], 300 / INTERVAL), f"block {i}: be3 {be3}", b)
    m = re.search(r"^rx (\S+) pkts/s (\S+) bytes/s; tx (\S+) pkts/s", b, re.M)
    check(m is not None and near(m[1], 1000 / INTERVAL) and near(m[3], 990 / INTERVAL), f"block {i}: rx/tx", b)
    m = re.search(r"^drops/s: (\S+) \(no_vip (\S+), bad_checksum (\S+)\)$", b, re.M)
    check(m is not None and near(m[1], 12 / INTERVAL) and near(m[2], 9 / INTERVAL) and near(m[3], 3 / INTERVAL),
          f"block {i}: drops by reason, only the non-zero ones", b)
    check("ttl_exceeded" not in b and "tx_full" not in b, f"block {i}: zero drop reasons are left out", b)
    check("announce: announcing, 1 of 1 routes" in b, f"block {i}: announce line", b)

# Hostile replies: values missing or of the wrong type print "?", numbers no
# counter holds never crash nor print a made-up rate; a backend array cut short.
def hostile(k, stats, vip):
    del stats["rx_bytes"]
    stats["tx_packets"] = 1e30 * k   # a float: no counter
    stats["tx_bytes"] = -5           # negative: no counter
    stats["drop_no_vip"] = UINT64_MAX if k > 2 else 0  # the largest step there is
    vip["backend_packets"] = [600 * k]  # be2, be3 missing
    vip["backend_weights"] = ["4", None, {"x": 1}]
    vip["backend_health"] = ["up", 7, "\x1b[2Jevil"]
    del vip["new_flows"]
    vip["backend_names"] = ["be1", "be2", "be3\n\x07"]


d = Daemon(hostile)
with fake_telemetry.serve(d.reply_text) as path:
    p = top(path, "--iterations", "2")
bs = blocks_of(p.stdout)
check(p.returncode == 0 and len(bs) == 2, f"hostile: rc {p.returncode}, {len(bs)} blocks", p.stdout, p.stderr)
if len(bs) == 2:
    b = bs[1]
    check("\x1b" not in p.stdout and "\x07" not in p.stdout, "hostile: no control byte reaches the output", b)
    check(re.search(r"^rx \S+ pkts/s \? bytes/s; tx \? pkts/s \? bytes/s", b, re.M) is not None,
          "hostile: missing and non-counter totals rate '?'", b)
    check(re.search(r"no_vip [5-9]\.[0-9]+e\+19", b) is not None, "hostile: a 2^64 step prints as a number", b)
    be1, be2, be3 = row(b, "be1"), row(b, "be2"), row(b, "be3??")
    check(be1 is not None and be1[3] == "?" and near(be1[5], 600 / INTERVAL), f"hostile: be1 {be1}", b)
    check(be2 is not None and be2[2:5] == ["?", "(held)", "?"] and be2[6] == "?", f"hostile: be2 {be2}", b)
    check(be3 is not None and be3[2] == "?[2Jevil", f"hostile: be3 {be3}", b)
    web = row(b, "web")
    check(web is not None and web[-2] == "?", f"hostile: VIP without new_flows {web}", b)

# Counters going back: the whole maglb (its rx, its uptime, its pid) says
# "restarted" and starts over; one backend's says so for that backend.
# Never a negative rate.
for what, edit, says in [
        ("rx back", lambda k, s, v: s.update(rx_packets=10**9 if k < 3 else 5), "rx_packets went back"),
        ("uptime back", lambda k, s, v: s.update(uptime_s=1000 + k if k < 3 else 1), "up 1s, was 1002s"),
        ("backend back", lambda k, s, v: v.update(backend_packets=[10**9 if k < 3 else 7, 0, 300 * k]),
         "counters went back for web/be1")]:
    d = Daemon(edit)
    with fake_telemetry.serve(d.reply_text) as path:
        p = top(path, "--iterations", "3")
    bs = blocks_of(p.stdout)
    check(p.returncode == 0 and len(bs) == 3, f"{what}: rc {p.returncode}, {len(bs)} blocks", p.stdout, p.stderr)
    rates = re.findall(r"(?<![\w.])-\d", p.stdout)
    check(not rates, f"{what}: no negative rate", p.stdout)
    if len(bs) == 3:
        check(says in bs[1] and says not in bs[0], f"{what}: said in the refresh it happened", p.stdout)
        if what == "backend back":
            check("restarted" not in p.stdout and row(bs[1], "be1")[5] == "-" and near(row(bs[1], "be3")[5], 300 / INTERVAL),
                  f"{what}: that backend alone starts over", p.stdout)
            check(near(row(bs[2], "be1")[5], 0.0) or row(bs[2], "be1")[5] == "0.0", f"{what}: then rates again", bs[2])
        else:
            check("restarted (" in bs[1] and row(bs[1], "be1")[5] == "-", f"{what}: restarted, no rates", bs[1])
            check(near(row(bs[2], "be1")[5], 600 / INTERVAL), f"{what}: rates again after", bs[2])

# Another process answering at the same socket (its greeting's pid): restarted.
connections = [0]


def greeting():
    connections[0] += 1
    return {"version": "fake", "pid": 100 if connections[0] <= 2 else 200, "max_output_len": 16384}


d = Daemon()
with fake_telemetry.serve(d.reply_text, greeting=greeting) as path:
    p = top(path, "--iterations", "3")
bs = blocks_of(p.stdout)
check(p.returncode == 0 and len(bs) == 3 and "restarted (pid 200, was 100)" in bs[1]
      and "restarted" not in bs[0] + bs[2] and near(row(bs[2], "be1")[5], 600 / INTERVAL),
      f"another pid: rc {p.returncode}", p.stdout, p.stderr)


# The daemon going away mid-run: "maglb stopped", status 0.
def read_blocks(proc, n, timeout=20):
    """Reads proc's stdout until n blocks (blank-line ended) came or it ended."""
    out = ""
    deadline = time.monotonic() + timeout
    while out.count("\n\n") < n and time.monotonic() < deadline:
        r, _, _ = select.select([proc.stdout], [], [], 0.2)
        if r:
            chunk = os.read(proc.stdout.fileno(), 65536).decode(errors="replace")
            if not chunk:
                break
            out += chunk
    return out


d = Daemon()
with fake_telemetry.serve(d.reply_text) as path:
    proc = subprocess.Popen([MAGLBCTL, "top", "--socket", path, "--interval-s", str(INTERVAL)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = read_blocks(proc, 2)
try:
    rest, err = proc.communicate(timeout=15)
except subprocess.TimeoutExpired:
    proc.kill()
    rest, err = proc.communicate()
out += rest.decode(errors="replace")
check(proc.returncode == 0 and "maglb stopped" in out and err == b"",
      f"daemon gone: rc {proc.returncode}, 'maglb stopped'", out, err.decode(errors="replace"))

# SIGINT and SIGTERM: status 0 at once, nothing on stderr; piped and on a
# terminal.
for sig in (signal.SIGINT, signal.SIGTERM):
    d = Daemon()
    with fake_telemetry.serve(d.reply_text) as path:
        proc = subprocess.Popen([MAGLBCTL, "top", "--socket", path, "--interval-s", "5"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(1)  # its first read is done; it waits for the next
        t0 = time.monotonic()
        proc.send_signal(sig)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        check(proc.returncode == 0 and err == b"" and time.monotonic() - t0 < 3,
              f"{sig.name} (piped): rc {proc.returncode} after {time.monotonic() - t0:.1f}s", out.decode(), err.decode())


def on_terminal(path, cols, rows, until_blocks, sig=None, iterations=None, env=None):
    """Runs top on a pseudo-terminal of cols x rows; returns (rc, output)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    args = [MAGLBCTL, "top", "--socket", path, "--interval-s", str(INTERVAL)]
    if iterations:
        args += ["--iterations", str(iterations)]
    proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    attrs_before = termios.tcgetattr(master)
    out = b""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if out.count(b"\x1b[J") >= until_blocks and sig is not None:
            proc.send_signal(sig)
            sig = None
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break  # the child closed the terminal
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    try:
        rc = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
    check(termios.tcgetattr(master) == attrs_before, "terminal modes unchanged")
    os.close(master)
    return rc, out.decode(errors="replace")


d = Daemon()
with fake_telemetry.serve(d.reply_text) as path:
    rc, out = on_terminal(path, 60, 40, 2, iterations=2)
    # The view redraws at the top of the screen, each line cleared to its
    # end; lines fit 60 columns (the addresses go first).
    views = [v for v in out.split("\x1b[H") if "\x1b[J" in v]
    check(rc == 0 and len(views) == 2, f"terminal: rc {rc}, {len(views)} views", out)
    for v in views:
        lines = [line.replace("\x1b[K", "").rstrip("\r") for line in v.split("\x1b[J")[0].split("\n")]
        check(all(len(line) <= 60 for line in lines), "terminal: every line fits 60 columns", v)
        check("10.0.0.11" not in v and row("\n".join(lines), "be1") is not None,
              "terminal: too narrow for addresses, rows kept", v)
    rc, out = on_terminal(path, 200, 8, 1, iterations=1)
    views = [v for v in out.split("\x1b[H") if "\x1b[J" in v]
    check(rc == 0 and len(views) == 1 and "more lines" in views[-1] and views[-1].count("\n") <= 8,
          "terminal: a short one shows what fits and says how much more", out)
    rc, out = on_terminal(path, 200, 40, 1, sig=signal.SIGINT)
    check(rc == 0 and "Traceback" not in out, f"terminal: SIGINT ends with status 0 (rc {rc})", out)

# A wrong command line: status 2. No daemon at the start: status 1.
for args in (["--interval-s", "0"], ["--interval-s", "nan"], ["--iterations", "-1"], ["--iterations", "x"],
             ["--bogus"], ["--interval-s"]):
    p = subprocess.run([MAGLBCTL, "top", *args], capture_output=True, text=True, timeout=10)
    check(p.returncode == 2 and "maglbctl top:" in p.stderr, f"usage {args}: rc {p.returncode}", p.stdout, p.stderr)
p = subprocess.run([MAGLBCTL, "top", "--socket", "/nonexistent/dpdk_telemetry.v2", "--iterations", "1"],
                   capture_output=True, text=True, timeout=10)
check(p.returncode == 1 and "cannot connect" in p.stderr, f"no daemon: rc {p.returncode}", p.stdout, p.stderr)

print("ok" if failures == 0 else f"{failures} failure(s)")
sys.exit(1 if failures else 0)
