#!/usr/bin/env python3
"""`meson install` puts maglb, maglbctl, the example config and the systemd
units where the build says (meson introspect --installed), and the installed
units pass `systemd-analyze verify`: the files as installed (into a DESTDIR),
with only ExecStart's binary path moved into that DESTDIR, since verify
insists that the binary exists. The plain unit and an instance of the
template are verified; any line verify prints fails the test (it reports
bad keys and values as warnings and still exits 0). A broken copy must be
caught, so that the check is known to bite.

Usage: test_units.py BUILD_DIR MAGLBCTL"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

DRAIN_S_DEFAULT = 10  # [announce] drain_s's default (README, config reference)


class TestFailure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)
    print("ok: " + msg, flush=True)


def verify(unit_path_or_name, cwd):
    """systemd-analyze verify's rc and everything it printed."""
    p = subprocess.run(["systemd-analyze", "verify", "--man=no", unit_path_or_name], cwd=cwd,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    return p.returncode, p.stdout.strip()


def directive(text, key):
    m = re.search(r"(?m)^%s=(.*)$" % re.escape(key), text)
    return m.group(1) if m else None


def seconds(value):
    m = re.fullmatch(r"(\d+)(s|min)?", value or "")
    if not m:
        raise TestFailure("cannot read a duration from %r" % value)
    return int(m.group(1)) * (60 if m.group(2) == "min" else 1)


def main():
    build, maglbctl = sys.argv[1], sys.argv[2]
    if shutil.which("systemd-analyze") is None:
        print("skipped: no systemd-analyze (systemd not installed)")
        return 77
    installed = json.loads(subprocess.run(["meson", "introspect", "--installed", build], check=True,
                                          stdout=subprocess.PIPE, text=True).stdout)
    by_name = {os.path.basename(dst): dst for dst in installed.values()}
    for name in ("maglb", "maglbctl", "maglb.toml.example", "maglb.env.example", "maglb.service",
                 "maglb@.service"):
        check(name in by_name, "the build installs %s (%s)" % (name, by_name.get(name)))
    check(os.path.basename(os.path.dirname(by_name["maglb"])) == "sbin",
          "maglb goes to an sbin directory: %s" % by_name["maglb"])
    sysconf_maglb = os.path.dirname(by_name["maglb.toml.example"])
    check(os.path.dirname(by_name["maglb.env.example"]) == sysconf_maglb,
          "both examples go to %s" % sysconf_maglb)

    tmp = tempfile.mkdtemp(prefix="mlb-install-")
    try:
        dest = os.path.join(tmp, "root")
        p = subprocess.run(["meson", "install", "-C", build, "--destdir", dest, "--no-rebuild", "--quiet"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        check(p.returncode == 0, "meson install --destdir: rc %d %s" % (p.returncode, p.stdout.strip()))

        def staged(path):
            return dest + path

        for name, path in sorted(by_name.items()):
            check(os.path.isfile(staged(path)), "installed: %s" % path)
        for binary in ("maglb", "maglbctl"):
            check(os.access(staged(by_name[binary]), os.X_OK), "%s is executable" % binary)
        # The installed example is a config maglbctl (and so maglb) loads.
        p = subprocess.run([maglbctl, "table", "--config", staged(by_name["maglb.toml.example"])],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        check(p.returncode == 0, "the installed maglb.toml.example loads (maglbctl table)%s"
              % ("" if p.returncode == 0 else ": rc %d %s" % (p.returncode, p.stdout[-500:])))

        verify_dir = os.path.join(tmp, "verify")
        os.mkdir(verify_dir)
        for unit, name, config in (("maglb.service", "maglb", "maglb"), ("maglb@.service", "%i", "%i")):
            with open(staged(by_name[unit])) as f:
                text = f.read()
            exec_start = directive(text, "ExecStart")
            check(exec_start is not None and exec_start.split()[0] == by_name["maglb"],
                  "%s: ExecStart runs the installed maglb (%s)" % (unit, exec_start))
            check(("--file-prefix %s " % name) in exec_start and
                  ("--config %s/%s.toml" % (sysconf_maglb, config)) in exec_start,
                  "%s: EAL prefix %s, config %s/%s.toml" % (unit, name, sysconf_maglb, config))
            check(directive(text, "EnvironmentFile") == "%s/%s.env" % (sysconf_maglb, config),
                  "%s: environment from %s/%s.env" % (unit, sysconf_maglb, config))
            check(directive(text, "Type") == "notify", "%s: Type=notify" % unit)
            check(directive(text, "ExecReload") == "/bin/kill -HUP $MAINPID", "%s: reload is SIGHUP" % unit)
            check(directive(text, "Restart") == "on-failure", "%s: Restart=on-failure" % unit)
            stop_s = seconds(directive(text, "TimeoutStopSec"))
            check(directive(text, "KillSignal") == "SIGTERM" and stop_s > DRAIN_S_DEFAULT,
                  "%s: SIGTERM stops, TimeoutStopSec %d s > the default drain_s %d s"
                  % (unit, stop_s, DRAIN_S_DEFAULT))
            check(directive(text, "RuntimeDirectory") == "dpdk/%s" % name,
                  "%s: the EAL runtime directory /run/dpdk/%s is the unit's" % (unit, name))
            caps = set((directive(text, "CapabilityBoundingSet") or "").split())
            check(caps and caps <= {"CAP_IPC_LOCK", "CAP_NET_ADMIN", "CAP_NET_RAW"},
                  "%s: capabilities bounded to %s" % (unit, sorted(caps)))
            with open(os.path.join(verify_dir, unit), "w") as f:
                f.write(text.replace("ExecStart=" + by_name["maglb"],
                                     "ExecStart=" + staged(by_name["maglb"]), 1))
        for unit in ("maglb.service", "maglb@lb1.service"):
            rc, out = verify(unit, verify_dir)
            check(rc == 0 and out == "", "systemd-analyze verify %s: rc %d, output %r" % (unit, rc, out))

        # The check bites: a bad value (verify's warning, rc 0) and a missing binary.
        bad_dir = os.path.join(tmp, "bad")
        os.mkdir(bad_dir)
        with open(os.path.join(verify_dir, "maglb.service")) as f:
            good = f.read()
        with open(os.path.join(bad_dir, "maglb.service"), "w") as f:
            f.write(good.replace("Type=notify", "Type=notifyy"))
        rc, out = verify("maglb.service", bad_dir)
        check("notifyy" in out, "a bad Type= is reported: %r" % out)
        with open(os.path.join(bad_dir, "maglb.service"), "w") as f:
            f.write(good.replace(staged(by_name["maglb"]), staged(by_name["maglb"]) + "-missing"))
        rc, out = verify("maglb.service", bad_dir)
        check(rc != 0 and "not executable" in out, "a missing ExecStart binary fails: rc %d %r" % (rc, out))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except TestFailure as e:
        print("FAIL: %s" % e)
        sys.exit(1)
