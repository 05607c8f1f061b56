#!/usr/bin/env python3
"""maglbctl drain against fake telemetry sockets whose greeting names real
processes: a child named "maglb" gets exactly one SIGUSR1 and --wait sees it
go; hostile greetings (pid 0, -1, 1, huge, a string, a float, a process that
is not maglb, one that is gone) signal nothing and say why; an instance that
announces nothing is refused, one already draining is not signalled again."""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import fake_telemetry  # noqa: E402

MAGLBCTL = sys.argv[1]
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_UNREADABLE = 0, 1, 2, 3
DRAIN_MS = 1000

failures = 0
# Should maglbctl ever signal this test (its pid in a greeting), it is seen.
signals_here = []
signal.signal(signal.SIGUSR1, lambda *_: signals_here.append(signal.SIGUSR1))


def check(ok, what, p=None):
    global failures
    if not ok:
        detail = f": rc {p.returncode}\nstdout {p.stdout[:2000]}\nstderr {p.stderr[:1500]!r}" if p else ""
        print(f"FAIL {what}{detail}")
        failures += 1


tmp = tempfile.mkdtemp(prefix="mlb-drain-test-")

# A child whose comm is "maglb" (prctl): on its first SIGUSR1 it leaves a
# marker and, in mode "drain", exits 1 s later as maglb does after its drain;
# a second SIGUSR1 makes it exit 7 (maglb stops at once on one). Mode
# "exit-soon" exits after 1 s whatever comes; "stay" stays (30 s at most).
CHILD = r'''
import ctypes, os, signal, sys, time
ctypes.CDLL(None).prctl(15, b"maglb", 0, 0, 0)  # PR_SET_NAME
marker, mode = sys.argv[1], sys.argv[2]
got = []
def on_usr1(sig, frame):
    if got:
        os._exit(7)
    got.append(1)
    open(marker, "w").close()
signal.signal(signal.SIGUSR1, on_usr1)
print("ready", flush=True)
start = time.monotonic()
while time.monotonic() - start < 30:
    if mode == "drain" and got:
        time.sleep(1.0)
        sys.exit(0)
    if mode == "exit-soon" and time.monotonic() - start > 1.0:
        sys.exit(0)
    time.sleep(0.02)
'''
children = []


def maglb_child(mode):
    """A python child named maglb; returns (Popen, its marker path)."""
    marker = os.path.join(tmp, f"signalled-{len(children)}")
    c = subprocess.Popen([sys.executable, "-c", CHILD, marker, mode], stdout=subprocess.PIPE, text=True)
    children.append(c)
    assert c.stdout.readline().strip() == "ready"
    return c, marker


def announce(state, routes=2, drain_until=0):
    return json.dumps({"state": state, "table": 4242, "routes": routes, "route_changes": 5, "route_errors": 0,
                       "drain_until_unix_ms": drain_until, "prefix_total": 3,
                       "prefixes": ["10.100.0.1/32", "10.100.0.2/32", "10.100.0.3/32"],
                       "announced": [1, 1, 0] if routes else [0, 0, 0],
                       "reasons": ["web: 3 of 3 backends serving", "dns: 1 of 1 backends serving",
                                   "no serving backend (mail: 0 of 2 backends serving)"]})


def following(marker):
    """reply_text of a maglb that announces until the marker exists, then
    drains for DRAIN_MS."""
    def reply_text(cmd):
        if cmd == "/maglb/announce":
            if os.path.exists(marker):
                return announce("draining", 0, int(os.stat(marker).st_mtime * 1000) + DRAIN_MS)
            return announce("announcing")
        return "null"
    return reply_text


def fixed(text):
    return lambda cmd: text if cmd == "/maglb/announce" else "null"


def drain(path, *args):
    return subprocess.run([MAGLBCTL, "drain", "--socket", path, *args], capture_output=True, text=True,
                          timeout=60)


def greeting(pid):
    return {"version": "DPDK 22.11.4", "pid": pid, "max_output_len": 16384}


# (a) A maglb that announces: one SIGUSR1, the withdrawal and the drain's end
# reported; it forwards on (still running when drain returns), then exits 0
# by itself: it got one signal, not two.
c, marker = maglb_child("drain")
with fake_telemetry.serve(following(marker), greeting(c.pid)) as path:
    p = drain(path)
    check(p.returncode == EXIT_OK and os.path.exists(marker) and re.search(
        rf"^maglb {c.pid} \(socket {re.escape(path)}\) draining: 2 routes withdrawn from table 4242; "
        r"forwarding until \d\d:\d\d:\d\d UTC, then it exits$", p.stdout, re.M) is not None, "drain", p)
    check(c.poll() is None, "drain returns while maglb forwards on")
    check(c.wait(10) == 0, "maglb got exactly one SIGUSR1")

# --wait: returns once it has exited.
c, marker = maglb_child("drain")
with fake_telemetry.serve(following(marker), greeting(c.pid)) as path:
    p = drain(path, "--wait")
    check(p.returncode == EXIT_OK and "draining: 2 routes withdrawn" in p.stdout
          and re.search(rf"maglb {c.pid} \(socket \S+\) stopped \(waited \d+\.\d s\)", p.stdout) is not None
          and c.poll() == 0, "drain --wait", p)

# A real executable named maglb (sleep through a symlink: comm is "maglb",
# /proc/PID/exe is sleep): it dies of the SIGUSR1, which is what it got.
sleep_as_maglb = os.path.join(tmp, "maglb")
os.symlink("/bin/sleep", sleep_as_maglb)
c = subprocess.Popen([sleep_as_maglb, "30"])
children.append(c)
for _ in range(100):  # until exec has renamed it
    with open(f"/proc/{c.pid}/comm") as f:
        if f.read().strip() == "maglb":
            break
    time.sleep(0.01)
with fake_telemetry.serve(fixed(announce("announcing")), greeting(c.pid)) as path:
    p = drain(path)
    check(p.returncode == EXIT_OK and "stopped on SIGUSR1 before it reported draining" in p.stdout, "sleep", p)
    check(c.wait(10) == -signal.SIGUSR1, f"sleep named maglb died of SIGUSR1 (rc {c.returncode})")

# (b) Hostile greetings: nothing signalled, an error naming what came.
bystander = subprocess.Popen(["/bin/sleep", "30"])  # comm "sleep": not maglb
children.append(bystander)
gone = subprocess.Popen(["/bin/true"])
gone.wait()  # its pid names no process now
hostile = [
    ("pid 0", greeting(0), EXIT_UNREADABLE, "pid is 0, not a process id"),
    ("pid -1", greeting(-1), EXIT_UNREADABLE, "pid is -1, not a process id"),
    ("a negative pid", greeting(-os.getpid()), EXIT_UNREADABLE, "not a process id"),
    ("a huge pid", greeting(2 ** 63), EXIT_UNREADABLE, "not a process id"),
    ("past PID_MAX_LIMIT", greeting(4194305), EXIT_UNREADABLE, "not a process id"),
    ("a string pid", greeting(str(os.getpid())), EXIT_UNREADABLE, "not a process id"),
    ("a float pid", greeting(float(os.getpid())), EXIT_UNREADABLE, "not a process id"),
    ("an array pid", greeting([os.getpid()]), EXIT_UNREADABLE, "not a process id"),
    ("no pid", {"version": "DPDK 22.11.4"}, EXIT_UNREADABLE, "names no pid"),
    ("a greeting that is no JSON", "pid=1", EXIT_UNREADABLE, "names no pid"),
    ("init", greeting(1), EXIT_ERROR, "process 1 (the pid the telemetry socket names) is"),
    ("this test (python)", greeting(os.getpid()), EXIT_ERROR, "not maglb: nothing signalled"),
    ("a sleep", greeting(bystander.pid), EXIT_ERROR, f'process {bystander.pid} (the pid the telemetry socket '
                                                    'names) is "sleep"'),
    ("a gone process", greeting(gone.pid), EXIT_ERROR, f"no process {gone.pid} is running"),
]
for what, hello, rc, says in hostile:
    with fake_telemetry.serve(fixed(announce("announcing")), hello) as path:
        p = drain(path)
        check(p.returncode == rc and says in p.stderr and "nothing signalled" in p.stderr and p.stdout == ""
              and "\n" == p.stderr[-1] and p.stderr.count("\n") == 1, f"hostile greeting: {what}", p)
time.sleep(0.2)
check(signals_here == [], "this test was never signalled")
check(bystander.poll() is None, "the sleep was never signalled")

# (c) Nothing announced ([announce] unset; an older maglb): refused, exit 2,
# no signal.
for what, text in [("state off", announce("off", 0)), ("an older maglb", "null")]:
    c, marker = maglb_child("stay")
    with fake_telemetry.serve(fixed(text), greeting(c.pid)) as path:
        p = drain(path, "--wait")
        check(p.returncode == EXIT_USAGE and "nothing is announced" in p.stderr and "SIGTERM instead" in p.stderr
              and not os.path.exists(marker), f"refused: {what}", p)
    c.kill()

# Replies drain does not understand: no signal, exit 3.
for what, text in [("an unknown state", json.dumps({"state": "exploding"})), ("no state", "{}"),
                   ("a state that is a number", json.dumps({"state": 1})), ("an array", "[1]"),
                   ("malformed", '{"state": ')]:
    c, marker = maglb_child("stay")
    with fake_telemetry.serve(fixed(text), greeting(c.pid)) as path:
        p = drain(path)
        check(p.returncode == EXIT_UNREADABLE and not os.path.exists(marker) and p.stdout == "",
              f"unreadable announce: {what}", p)
    c.kill()

# (d) Already draining: said so, not signalled again; --wait returns when it
# exits by itself.
c, marker = maglb_child("exit-soon")
until = int(time.time() * 1000) + DRAIN_MS
with fake_telemetry.serve(fixed(announce("draining", 0, until)), greeting(c.pid)) as path:
    p = drain(path, "--wait")
    check(p.returncode == EXIT_OK and f"maglb {c.pid} (socket {path}) is already draining (forwarding until "
          in p.stdout and "not signalled again" in p.stdout and " stopped (waited " in p.stdout
          and not os.path.exists(marker) and c.poll() == 0, "already draining, --wait", p)

# A drain end no clock shows (hostile): "?", and --wait falls back to its
# own bound rather than waiting for ever; it still returns on the exit.
c, marker = maglb_child("exit-soon")
with fake_telemetry.serve(fixed(announce("draining", 0, 2 ** 63)), greeting(c.pid)) as path:
    p = drain(path, "--wait")
    check(p.returncode == EXIT_OK and "(forwarding until ?, then it exits)" in p.stdout and " stopped (waited "
          in p.stdout and c.poll() == 0, "already draining, a hostile end, --wait", p)

# --wait bounded: a maglb that does not exit; exit 3, not signalled again.
c, marker = maglb_child("stay")
with fake_telemetry.serve(fixed(announce("draining", 0, until)), greeting(c.pid)) as path:
    p = drain(path, "--wait", "--timeout-s", "1")
    check(p.returncode == EXIT_UNREADABLE and "still running after 1 s" in p.stderr and c.poll() is None
          and not os.path.exists(marker), "--wait times out", p)
c.kill()

# Signalled, but it never reports draining: exit 3 after a while, one signal.
c, marker = maglb_child("stay")
with fake_telemetry.serve(fixed(announce("announcing")), greeting(c.pid)) as path:
    p = drain(path)
    check(p.returncode == EXIT_UNREADABLE and 'reports "announcing", not draining' in p.stderr
          and os.path.exists(marker) and c.poll() is None, "never reports draining", p)
c.kill()

# Unreachable, and usage errors.
p = subprocess.run([MAGLBCTL, "drain", "--prefix", "mlb-drain-test-no-such-prefix"], capture_output=True,
                   text=True, timeout=30)
check(p.returncode == EXIT_UNREADABLE and "/var/run/dpdk/mlb-drain-test-no-such-prefix/dpdk_telemetry.v2"
      in p.stderr, "unreachable", p)
for args, says in [(["--timeout-s", "5"], "bounds --wait"), (["--wait", "--timeout-s", "0"], "from 1 to"),
                   (["--wait", "--timeout-s", "x"], "not 'x'"), (["--bogus"], "unexpected argument"),
                   (["--wait", "--timeout-s"], "unexpected argument")]:
    p = subprocess.run([MAGLBCTL, "drain", *args], capture_output=True, text=True, timeout=30)
    check(p.returncode == EXIT_USAGE and says in p.stderr, f"usage {args}", p)

for c in children:
    if c.poll() is None:
        c.kill()
        c.wait()
print("ok" if failures == 0 else f"{failures} failure(s)")
sys.exit(1 if failures else 0)
