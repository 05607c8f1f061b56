#!/usr/bin/env python3
"""maglb speaks systemd's notify protocol (Type=notify): READY=1 once it
serves (after its "started:" line), RELOADING=1 then READY=1 around a SIGHUP
reload (published or refused), STOPPING=1 on SIGTERM, each with a STATUS line.
The test plays the service manager: a unix datagram socket named in
NOTIFY_SOCKET, a path one and an abstract ('@') one. maglb runs on a net_null
port in test mode (no namespaces). A NOTIFY_SOCKET nobody listens on is
logged once and changes nothing else."""
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import struct
import time
from datetime import datetime, timezone

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import lbtest  # noqa: E402

WAIT_S = 60  # generous: a loaded CI host starts EAL slowly
# SO_TIMESTAMPNS (asm-generic/socket.h; Python's socket module lacks it): the
# kernel stamps each datagram when it is sent, SCM_TIMESTAMPNS in recvmsg.
SO_TIMESTAMPNS = 35


class Daemon:
    """maglb on net_null with NOTIFY_SOCKET set; events (log lines and
    notifications) are recorded in the order they arrive, each with when it
    was made: a notification's send time (the kernel's stamp, ns), a log
    line's own timestamp (ms) (see sent_before)."""

    def __init__(self, tmp, name, config, notify_socket, listen=None):
        self.prefix = "mlb-notify-%d-%s" % (os.getpid(), name)
        self.listen = listen
        self.events = []  # ("log", line) or ("notify", {var: value})
        env = dict(os.environ, NOTIFY_SOCKET=notify_socket)
        cmd = [lbtest.MAGLB, "--no-huge", "--no-pci", "-m", "64", "-l", "0,1", "--file-prefix",
               self.prefix, "--vdev=net_null0,no-rx=1", "--", "--config", config,
               "--idle-sleep-us", "50"]
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        self._partial = b""

    def _pump(self, timeout):
        fds = [self.p.stdout] + ([self.listen] if self.listen else [])
        ready, _, _ = select.select(fds, [], [], timeout)
        for f in ready:
            if f is self.listen:
                raw, ancillary, _, _ = self.listen.recvmsg(65536, socket.CMSG_SPACE(16))
                data = raw.decode()
                sent_ns = next((struct.unpack("qq", d[:16]) for level, kind, d in ancillary
                                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS), None)
                fields = dict(l.split("=", 1) for l in data.split("\n") if "=" in l)
                lbtest.log("notify: %r" % data)
                self.events.append(("notify", fields,
                                    None if sent_ns is None else sent_ns[0] * 10**9 + sent_ns[1]))
            else:
                chunk = os.read(self.p.stdout.fileno(), 65536)
                if not chunk:
                    return False
                self._partial += chunk
                *lines, self._partial = self._partial.split(b"\n")
                for l in lines:
                    line = l.decode(errors="replace")
                    lbtest.log("maglb: " + line)
                    self.events.append(("log", line, log_stamp_ms(line)))
        return True

    def wait_for(self, pred, what):
        """Pumps until an event after those seen satisfies pred; returns its index."""
        start = len(self.events)
        deadline = time.monotonic() + WAIT_S
        while True:
            for i in range(start, len(self.events)):
                if pred(self.events[i]):
                    return i
            start = len(self.events)
            left = deadline - time.monotonic()
            if left <= 0 or (not self._pump(min(left, 1.0)) and self.p.poll() is not None):
                raise lbtest.TestFailure("no %s within %d s (exit %s)" % (what, WAIT_S, self.p.poll()))

    def wait_exit(self):
        deadline = time.monotonic() + WAIT_S
        while self.p.poll() is None and time.monotonic() < deadline:
            self._pump(0.5)
        while self._pump(0.2):  # the rest of the output and notifications
            pass
        return self.p.wait(timeout=5)

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        shutil.rmtree(os.path.join(lbtest.DPDK_RUN_DIR, self.prefix), ignore_errors=True)


def log_line(text):
    return lambda e: e[0] == "log" and text in e[1]


def notify(var, value=None):
    return lambda e: e[0] == "notify" and var in e[1] and (value is None or e[1][var] == value)


def first_index(events, pred):
    return next((i for i, e in enumerate(events) if pred(e)), None)


def log_stamp_ms(line):
    """A log line's leading UTC timestamp (2026-12-02T06:54:25.040Z), in ms
    since the epoch; None without one."""
    try:
        stamp = datetime.strptime(line[:24], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None
    return int(stamp.timestamp() * 1000 + 0.5)


def sent_before(events, notified, logged):
    """Whether notification `notified` was sent before log line `logged` was
    written (indices into events). The two come through different channels
    (a datagram, a pipe): when both are waiting at one read, the order they
    are read in says nothing, so the times they carry decide, the
    datagram's in ns against the line's in ms; within the line's millisecond
    the order of arrival decides, as it must without a finer clock."""
    sent_ns, line_ms = events[notified][2], events[logged][2]
    if sent_ns is not None and line_ms is not None:
        if sent_ns < line_ms * 10**6:
            return True
        if sent_ns >= (line_ms + 1) * 10**6:
            return False
    return notified < logged


def lifecycle(tmp, name, config, vips, backends, address, bind_to):
    listen = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listen.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    listen.bind(bind_to)
    d = Daemon(tmp, name, config, address, listen)
    try:
        ready = d.wait_for(notify("READY", "1"), "READY=1")
        started = first_index(d.events, log_line("maglb: started:"))
        lbtest.check(started is not None and started < ready,
                     "%s: READY=1 arrives after the 'started:' line" % name)
        status = d.events[ready][1].get("STATUS", "")
        want = "serving generation 1: %d VIPs, %d backends" % (vips, backends)
        lbtest.check(status == want, "%s: STATUS '%s' (want '%s')" % (name, status, want))
        lbtest.check(first_index(d.events, notify("STOPPING")) is None,
                     "%s: no STOPPING=1 while it serves" % name)

        # A reload of the same file: RELOADING=1, then READY=1 at generation 2.
        d.p.send_signal(signal.SIGHUP)
        reloading = d.wait_for(notify("RELOADING", "1"), "RELOADING=1 after SIGHUP")
        lbtest.check(d.events[reloading][1].get("MONOTONIC_USEC", "").isdigit(),
                     "%s: RELOADING=1 carries MONOTONIC_USEC" % name)
        again = d.wait_for(notify("READY", "1"), "READY=1 after the reload")
        lbtest.check(d.events[again][1].get("STATUS", "").startswith("serving generation 2:"),
                     "%s: READY=1 after the reload shows generation 2: %s" % (name, d.events[again][1]))

        # A refused reload ends the reload too: READY=1, the refusal in STATUS.
        with open(config) as f:
            good = f.read()
        with open(config, "w") as f:
            f.write(good + "\n[lb]\n")  # a second [lb] table: a TOML error
        d.wait_for(notify("RELOADING", "1"), "RELOADING=1 for the bad file")
        refused = d.wait_for(notify("READY", "1"), "READY=1 after the refused reload")
        status = d.events[refused][1].get("STATUS", "")
        lbtest.check(status.startswith("serving generation 2: ") and "last reload refused: " in status
                     and config in status and "\n" not in status,
                     "%s: a refused reload is READY=1 again, STATUS names it: %s" % (name, status))
        with open(config, "w") as f:
            f.write(good)
        d.wait_for(notify("READY", "1"), "READY=1 after the file is good again")

        d.p.send_signal(signal.SIGTERM)
        stopping = d.wait_for(notify("STOPPING", "1"), "STOPPING=1 after SIGTERM")
        rc = d.wait_exit()
        stopped = first_index(d.events, log_line("maglb: stopped on SIGTERM"))
        lbtest.check(rc == 0 and stopped is not None and sent_before(d.events, stopping, stopped),
                     "%s: STOPPING=1 before the 'stopped on SIGTERM' line, exit 0 (exit %s; sent at %s ns, "
                     "line at %s ms)" % (name, rc, d.events[stopping][2],
                                         None if stopped is None else d.events[stopped][2]))
        lbtest.check(d.events[stopping][1].get("STATUS") == "stopping (SIGTERM)",
                     "%s: STOPPING's STATUS: %s" % (name, d.events[stopping][1]))
        lbtest.check(not any("cannot notify" in e[1] for e in d.events if e[0] == "log"),
                     "%s: no notify warning while a manager listens" % name)
    finally:
        d.close()
        listen.close()


def main():
    if os.geteuid() != 0:
        print("skipped: needs root (DPDK runtime directory)")
        return 77
    tmp = tempfile.mkdtemp(prefix="mlb-notify-")
    try:
        config = os.path.join(tmp, "maglb.toml")
        text = lbtest.config_text()
        with open(config, "w") as f:
            f.write(text)
        vips, backends = text.count("[[vip]]"), text.count("[[vip.backend]]")
        path = os.path.join(tmp, "notify.sock")
        lifecycle(tmp, "path", config, vips, backends, path, path)
        abstract = "mlb-notify-%d" % os.getpid()
        lifecycle(tmp, "abstract", config, vips, backends, "@" + abstract, "\0" + abstract)

        # Nobody listens: one warning, and it serves and stops as ever.
        d = Daemon(tmp, "nobody", config, os.path.join(tmp, "no-such.sock"))
        try:
            d.wait_for(log_line("maglb: started:"), "the 'started:' line")
            d.p.send_signal(signal.SIGTERM)
            rc = d.wait_exit()
            warnings = [e[1] for e in d.events if e[0] == "log" and "cannot notify the service manager" in e[1]]
            lbtest.check(rc == 0 and len(warnings) == 1,
                         "nobody listening: exit 0 (%s) with one warning: %s" % (rc, warnings))
        finally:
            d.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except lbtest.TestFailure as e:
        print("FAIL: %s" % e)
        sys.exit(1)
