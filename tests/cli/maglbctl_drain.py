#!/usr/bin/env python3
"""maglbctl drain against fake telemetry sockets: a process named "maglb"
that serves its own socket (the kernel names it as the server, SO_PEERCRED)
gets exactly one SIGUSR1 and --wait sees it go; a greeting whose pid is not
the process serving the socket (a maglb in a container, a socket served by
one process naming another, another maglb even) is refused before anything
else; hostile greetings (pid 0, -1, 1, huge, a string, a float, a process
that is not maglb, one that is gone) signal nothing and say why; an instance
that announces nothing is refused, one already draining is not signalled
again."""
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

def announce(state, routes=2, drain_until=0):
    return json.dumps({"state": state, "table": 4242, "routes": routes, "route_changes": 5, "route_errors": 0,
                       "drain_until_unix_ms": drain_until, "prefix_total": 3,
                       "prefixes": ["10.100.0.1/32", "10.100.0.2/32", "10.100.0.3/32"],
                       "announced": [1, 1, 0] if routes else [0, 0, 0],
                       "reasons": ["web: 3 of 3 backends serving", "dns: 1 of 1 backends serving",
                                   "no serving backend (mail: 0 of 2 backends serving)"]})


def fixed(text):
    return lambda cmd: text if cmd == "/maglb/announce" else "null"


def drain(path, *args):
    return subprocess.run([MAGLBCTL, "drain", "--socket", path, *args], capture_output=True, text=True,
                          timeout=60)


def greeting(pid):
    return {"version": "DPDK 22.11.4", "pid": pid, "max_output_len": 16384}


# A fake maglb: a child that makes its own telemetry socket listen, so the
# kernel names it as the socket's server. argv: the support dir, the comm to
# take (prctl; "" keeps python's), the socket path, a mode, the
# /maglb/announce reply ("follow": announcing until signalled, then draining
# for DRAIN_MS; else the reply's JSON text), the greeting (JSON; "pid":
# "self" is its own pid as it sees it), and who serves:
# - "serve": it answers itself. On its first SIGUSR1 it leaves a marker (the
#   socket path + ".signalled") and, in mode "drain", exits 1 s later as
#   maglb does after its drain; a second SIGUSR1 makes it exit 7 (maglb stops
#   at once on one). Mode "exit-soon" exits after 1 s whatever comes; "stay"
#   stays (30 s at most).
# - "exec:PATH": a forked child answers; this process execs PATH 30.
# - "exit": a forked child answers; this process exits at once.
# A forked answerer lives until the test closes its stdin (60 s at most).
# It prints "ready PID", PID the process that answers.
SERVER = r"""
import ctypes, json, os, select, signal, sys, time
support, name, path, mode, reply, hello, after = sys.argv[1:8]
sys.path.insert(0, support)
import fake_telemetry
if name:
    ctypes.CDLL(None).prctl(15, name.encode(), 0, 0, 0)  # PR_SET_NAME
marker = path + ".signalled"
got = []
def on_usr1(sig, frame):
    if got:
        os._exit(7)
    got.append(1)
    open(marker, "w").close()
signal.signal(signal.SIGUSR1, on_usr1)
hello = json.loads(hello)
if isinstance(hello, dict) and hello.get("pid") == "self":
    hello["pid"] = os.getpid()
def reply_text(cmd):
    if cmd != "/maglb/announce":
        return "null"
    if reply != "follow":
        return reply
    if os.path.exists(marker):
        return json.dumps(dict(json.loads(ANNOUNCING), state="draining", routes=0,
                               drain_until_unix_ms=int(os.stat(marker).st_mtime * 1000) + DRAIN_MS))
    return ANNOUNCING
srv = fake_telemetry.listen(path)  # this process: the server, to the kernel
if after == "serve":
    fake_telemetry.answer_on(srv, reply_text, hello)
    print("ready", os.getpid(), flush=True)
    start = time.monotonic()
    while time.monotonic() - start < 30:
        if mode == "drain" and got:
            time.sleep(1.0)
            sys.exit(0)
        if mode == "exit-soon" and time.monotonic() - start > 1.0:
            sys.exit(0)
        time.sleep(0.02)
    sys.exit(0)
answerer = os.fork()
if answerer == 0:
    fake_telemetry.answer_on(srv, reply_text, hello)
    select.select([sys.stdin], [], [], 60)
    os._exit(0)
srv.close()
print("ready", answerer, flush=True)
if after == "exit":
    os._exit(0)
target = after.split(":", 1)[1]
os.execv(target, [target, "30"])
"""
SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support")
children = []


def fake_maglb(reply="follow", mode="stay", name="maglb", hello=None, after="serve", wrap=()):
    """Starts SERVER; returns (Popen, socket path, marker path, the pid that
    answers as the child printed it)."""
    path = os.path.join(tmp, f"sock-{len(children)}")
    code = SERVER.replace("ANNOUNCING", repr(announce("announcing"))).replace("DRAIN_MS", str(DRAIN_MS))
    hello = json.dumps(hello if hello is not None else greeting("self"))
    c = subprocess.Popen([*wrap, sys.executable, "-c", code, SUPPORT, name, path, mode, reply, hello, after],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    children.append(c)
    line = c.stdout.readline().split()
    assert len(line) == 2 and line[0] == "ready", line
    return c, path, path + ".signalled", int(line[1])


# (a) A maglb that announces: one SIGUSR1, the withdrawal and the drain's end
# reported; it forwards on (still running when drain returns), then exits 0
# by itself: it got one signal, not two.
c, path, marker, _ = fake_maglb(mode="drain")
p = drain(path)
check(p.returncode == EXIT_OK and os.path.exists(marker) and re.search(
    rf"^maglb {c.pid} \(socket {re.escape(path)}\) draining: 2 routes withdrawn from table 4242; "
    r"forwarding until \d\d:\d\d:\d\d UTC, then it exits$", p.stdout, re.M) is not None, "drain", p)
check(c.poll() is None, "drain returns while maglb forwards on")
check(c.wait(10) == 0, "maglb got exactly one SIGUSR1")

# --wait: returns once it has exited.
c, path, marker, _ = fake_maglb(mode="drain")
p = drain(path, "--wait")
check(p.returncode == EXIT_OK and "draining: 2 routes withdrawn" in p.stdout
      and re.search(rf"maglb {c.pid} \(socket \S+\) stopped \(waited \d+\.\d s\)", p.stdout) is not None
      and c.poll() == 0, "drain --wait", p)

# A real executable named maglb (sleep through a symlink: comm is "maglb",
# /proc/PID/exe is sleep), which made the socket listen before its exec (a
# forked child answers on it): it dies of the SIGUSR1, which is what it got.
sleep_as_maglb = os.path.join(tmp, "maglb")
os.symlink("/bin/sleep", sleep_as_maglb)
c, path, marker, answerer = fake_maglb(reply=announce("announcing"), name="", after="exec:" + sleep_as_maglb)
for _ in range(100):  # until exec has renamed it
    with open(f"/proc/{c.pid}/comm") as f:
        if f.read().strip() == "maglb":
            break
    time.sleep(0.01)
# The greeting (the answerer's) names the process that listened: exec kept
# its pid.
p = drain(path)
check(p.returncode == EXIT_OK and "stopped on SIGUSR1 before it reported draining" in p.stdout, "sleep", p)
check(c.wait(10) == -signal.SIGUSR1, f"sleep named maglb died of SIGUSR1 (rc {c.returncode})")
c.stdin.close()  # the answerer goes

# (b) The greeting's pid is not the process serving the socket: refused
# before anything else (no announce asked, nothing signalled), exit 1.
# A maglb in a container (its own pid namespace) greets with its pid there,
# 1; from here it is another process, and pid 1 here is init.
if subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True).returncode == 0:
    c, path, marker, inside = fake_maglb(wrap=("unshare", "--pid", "--fork", "--kill-child"))
    with open(f"/proc/{c.pid}/task/{c.pid}/children") as f:
        outside = int(f.read().split()[0])  # the python under unshare, seen from here
    p = drain(path)
    check(inside == 1 and p.returncode == EXIT_ERROR and
          f"its greeting names pid 1, but the process serving it is {outside} here" in p.stderr
          and "another pid namespace" in p.stderr and "nothing signalled" in p.stderr and p.stdout == ""
          and not os.path.exists(marker), "a maglb in a container (greeting pid 1)", p)
    c.kill()
    c.wait()
    # The other way round: maglbctl in a pid namespace that does not see
    # the server (the kernel says pid 0).
    c, path, marker, _ = fake_maglb()
    p = subprocess.run(["unshare", "--pid", "--fork", MAGLBCTL, "drain", "--socket", path], capture_output=True,
                       text=True, timeout=60)
    check(p.returncode == EXIT_ERROR and "in a pid namespace this one does not see" in p.stderr
          and "nothing signalled" in p.stderr and not os.path.exists(marker), "maglbctl in a pid namespace", p)
    c.kill()
else:
    print("skipped: the pid namespace cases (unshare --pid: not root?)")

# A socket served by one maglb whose greeting names another maglb (a pid of
# another namespace that is, here, a maglb too): neither is signalled,
# though the other passes the comm check.
other, _, other_marker, _ = fake_maglb(mode="stay")
c, path, marker, _ = fake_maglb(hello=greeting(other.pid))
p = drain(path)
check(p.returncode == EXIT_ERROR and f"its greeting names pid {other.pid}, but the process serving it is "
      f"{c.pid} here" in p.stderr and p.stderr.count("\n") == 1 and p.stdout == ""
      and not os.path.exists(marker) and not os.path.exists(other_marker), "a greeting naming another maglb", p)
check(other.poll() is None and c.poll() is None, "neither maglb was signalled")
other.kill()
c.kill()

# A process not named maglb serving its own socket: the comm check refuses.
c, path, marker, _ = fake_maglb(name="")
p = drain(path)
check(p.returncode == EXIT_ERROR and f'process {c.pid} (the pid the telemetry socket names) is "python'
      in p.stderr and "not maglb: nothing signalled" in p.stderr and not os.path.exists(marker)
      and c.poll() is None, "a server that is not maglb", p)
c.kill()

# The process that made the socket listen is gone (a child of its answers):
# the kernel still names it; nothing signalled.
c, path, marker, answerer = fake_maglb(after="exit")
c.wait()
p = drain(path)
check(p.returncode == EXIT_ERROR and "nothing signalled" in p.stderr and p.stdout == ""
      and (f"no process {c.pid} is running" in p.stderr or "does not see" in p.stderr),
      "the socket's listener is gone", p)
c.stdin.close()

# Hostile greetings of a socket this test serves (the kernel names this test
# as the server): nothing signalled, an error naming what came. A pid that is
# no pid is refused first (exit 3); any other pid but this test's is not the
# server (exit 1); this test's own is no maglb.
bystander = subprocess.Popen(["/bin/sleep", "30"])  # comm "sleep": not maglb
children.append(bystander)
gone = subprocess.Popen(["/bin/true"])
gone.wait()  # its pid names no process now
not_server = f"but the process serving it is {os.getpid()} here"
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
    ("init", greeting(1), EXIT_ERROR, f"its greeting names pid 1, {not_server}"),
    ("this test (python)", greeting(os.getpid()), EXIT_ERROR, "not maglb: nothing signalled"),
    ("a sleep", greeting(bystander.pid), EXIT_ERROR, f"its greeting names pid {bystander.pid}, {not_server}"),
    ("a gone process", greeting(gone.pid), EXIT_ERROR, f"its greeting names pid {gone.pid}, {not_server}"),
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
    c, path, marker, _ = fake_maglb(reply=text)
    p = drain(path, "--wait")
    check(p.returncode == EXIT_USAGE and "nothing is announced" in p.stderr and "SIGTERM instead" in p.stderr
          and not os.path.exists(marker), f"refused: {what}", p)
    c.kill()

# Replies drain does not understand: no signal, exit 3.
for what, text in [("an unknown state", json.dumps({"state": "exploding"})), ("no state", "{}"),
                   ("a state that is a number", json.dumps({"state": 1})), ("an array", "[1]"),
                   ("malformed", '{"state": ')]:
    c, path, marker, _ = fake_maglb(reply=text)
    p = drain(path)
    check(p.returncode == EXIT_UNREADABLE and not os.path.exists(marker) and p.stdout == "",
          f"unreadable announce: {what}", p)
    c.kill()

# (d) Already draining: said so, not signalled again; --wait returns when it
# exits by itself.
until = int(time.time() * 1000) + DRAIN_MS
c, path, marker, _ = fake_maglb(reply=announce("draining", 0, until), mode="exit-soon")
p = drain(path, "--wait")
check(p.returncode == EXIT_OK and f"maglb {c.pid} (socket {path}) is already draining (forwarding until "
      in p.stdout and "not signalled again" in p.stdout and " stopped (waited " in p.stdout
      and not os.path.exists(marker) and c.poll() == 0, "already draining, --wait", p)

# A drain end no clock shows (hostile): "?", and --wait falls back to its
# own bound rather than waiting for ever; it still returns on the exit.
c, path, marker, _ = fake_maglb(reply=announce("draining", 0, 2 ** 63), mode="exit-soon")
p = drain(path, "--wait")
check(p.returncode == EXIT_OK and "(forwarding until ?, then it exits)" in p.stdout and " stopped (waited "
      in p.stdout and c.poll() == 0, "already draining, a hostile end, --wait", p)

# --wait bounded: a maglb that does not exit; exit 3, not signalled again.
c, path, marker, _ = fake_maglb(reply=announce("draining", 0, until))
p = drain(path, "--wait", "--timeout-s", "1")
check(p.returncode == EXIT_UNREADABLE and "still running after 1 s" in p.stderr and c.poll() is None
      and not os.path.exists(marker), "--wait times out", p)
c.kill()

# Signalled, but it never reports draining: exit 3 after a while, one signal.
c, path, marker, _ = fake_maglb(reply=announce("announcing"))
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
    if c.stdin:
        c.stdin.close()  # a forked answerer goes with it
    if c.poll() is None:
        c.kill()
        c.wait()
print("ok" if failures == 0 else f"{failures} failure(s)")
sys.exit(1 if failures else 0)
