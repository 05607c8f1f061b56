#!/usr/bin/python3
"""Checks `maglbctl analyze` end to end: its JSON parses, the invariants that
theory guarantees hold in the figures it prints, and --plot writes a PNG (or
fails cleanly). Fails where gnuplot is missing: --plot is part of the spec.

usage: check_analyze.py MAGLBCTL CONFIG.toml
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

CONSISTENT = {"ring", "rendezvous", "jump"}


def run(args):
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return {t["id"]: t for t in json.loads(out)["tables"]}


def main():
    ctl, config = sys.argv[1], sys.argv[2]
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)

    tables = run([ctl, "analyze", "--classic", "--format", "json"])
    for tid in ("classic_add_4_to_5", "classic_add_10_to_11"):
        for row in tables[tid]["rows"]:
            if row["scheme"] in CONSISTENT:
                check(row["between_old"] == 0, f"{tid}: {row['scheme']} moved keys between old servers")
                check(row["moved"] == row["to_new"], f"{tid}: {row['scheme']} moved != to_new")
            if row["scheme"] == "modulo":
                check(abs(row["moved"] - row["moved_theory"]) < 0.02, f"{tid}: modulo far from theory")
    for row in tables["classic_remove_1_of_5"]["rows"]:
        if row["scheme"] in {"ring", "rendezvous"} or (row["scheme"] == "jump" and row["removed"] == "S4"):
            check(row["between_survivors"] == 0, f"remove: {row['scheme']} {row['removed']} churned survivors")
    for row in tables["table_disruption"]["rows"]:
        if row["scheme"] in CONSISTENT:
            check(row["add_between_survivors"] == 0, f"table add: {row['scheme']} N={row['N']} churned")
        if row["scheme"] in {"ring", "rendezvous"}:
            check(row["remove_between_survivors"] == 0, f"table remove: {row['scheme']} N={row['N']} churned")
    # Every theory cell is a figure (JSON number), never a word.
    for tid, t in tables.items():
        for row in t["rows"]:
            for col, v in row.items():
                if col.endswith("_theory"):
                    check(isinstance(v, (int, float)) and not isinstance(v, bool),
                          f"{tid}: {row['scheme']} {col} is not a number: {v!r}")

    def near(row, measured, theory, tol, what):
        m, t = row[measured], row[theory]
        if isinstance(t, (int, float)):
            check(abs(m - t) <= tol, f"{what}: {measured} {m} vs {theory} {t} (tolerance {tol})")

    def under(row, measured, bound, what):
        m, b = row[measured], row[bound]
        if isinstance(b, (int, float)):
            check(m <= b, f"{what}: {measured} {m} above its bound {bound} {b}")

    # Jump and modulo reshuffle by a predicted amount; maglev stays under its stated
    # bound; the others move exactly nothing between survivors (checked above).
    # Tolerances: 4-5 sd of the sampling (10,000 keys: 0.02; 65,537 slots: 0.01).
    for tid in ("classic_add_4_to_5", "classic_add_10_to_11"):
        for row in tables[tid]["rows"]:
            if row["scheme"] == "modulo":
                near(row, "between_old", "between_old_theory", 0.02, f"{tid}: modulo")
            if row["scheme"] == "maglev":
                under(row, "between_old", "between_old_theory", f"{tid}: maglev")
    for row in tables["classic_remove_1_of_5"]["rows"]:
        what = f"remove {row['removed']}: {row['scheme']}"
        if row["scheme"] in {"jump", "modulo"}:
            near(row, "moved", "moved_theory", 0.02, what)
            near(row, "between_survivors", "between_survivors_theory", 0.02, what)
        if row["scheme"] == "maglev":
            under(row, "between_survivors", "between_survivors_theory", what)
    for row in tables["table_disruption"]["rows"]:
        what = f"table N={row['N']}: {row['scheme']}"
        if row["scheme"] in {"jump", "modulo"}:
            near(row, "remove_moved", "remove_theory", 0.01, what)
            near(row, "remove_between_survivors", "remove_between_theory", 0.01, what)
        if row["scheme"] == "modulo":
            near(row, "add_moved", "add_theory", 0.01, what)
            near(row, "add_between_survivors", "add_between_theory", 0.01, what)
        if row["scheme"] == "maglev":
            check(row["add_between_survivors"] <= 0.01, f"{what} above its 1% bound")
            under(row, "add_between_survivors", "add_between_theory", what)
            under(row, "remove_between_survivors", "remove_between_theory", what)

    rows = tables["bounded_load"]["rows"]
    check({r["eps"] for r in rows} == {0.25, 0.1}, "bounded load: epsilons 0.25 and 0.1")
    for row in rows:
        check(row["over_bound"] == 0, f"bounded load: {row['scheme']} eps {row['eps']} over the bound")
        if row["run"] == "arrivals":
            check(row["max_load_bounded"] <= row["bound_at_end"],
                  f"bounded load: {row['scheme']} eps {row['eps']} max load above bound")
    balance = {r["scheme"]: r for r in tables["classic_balance"]["rows"]}
    cvs = [balance[f"ring V={v}"]["sd/avg"] for v in (1, 10, 100, 1000)]
    check(cvs == sorted(cvs, reverse=True), f"ring balance does not improve with V: {cvs}")

    vips = run([ctl, "analyze", "--config", config, "--format", "json"])
    check(len(vips) > 0, "--config: no VIP tables")
    for t in vips.values():
        schemes = [r["scheme"] for r in t["rows"]]
        check(schemes == ["maglev", "ring", "rendezvous", "jump", "modulo"], f"{t['id']}: schemes {schemes}")
        check(sum(r["configured"] == "*" for r in t["rows"]) == 1, f"{t['id']}: one configured scheme")

    # --plot is part of the spec: a machine without gnuplot fails this check
    # rather than passing without it (scripts/install-deps.sh installs it).
    check(shutil.which("gnuplot") is not None,
          "gnuplot not found: --plot cannot be checked; install gnuplot-nox (scripts/install-deps.sh)")
    with tempfile.TemporaryDirectory() as d:
        # Where gnuplot is missing, maglbctl says so and writes nothing.
        png = os.path.join(d, "plot.png")
        r = subprocess.run([ctl, "analyze", "--classic", "--plot", png], capture_output=True, text=True,
                           env=dict(os.environ, PATH=d))
        check(r.returncode == 1 and "needs gnuplot" in r.stderr,
              f"--plot without gnuplot: exit {r.returncode}, {r.stderr!r}")
        check(not os.path.exists(png), "--plot without gnuplot: left a file")
    if shutil.which("gnuplot"):
        with tempfile.TemporaryDirectory() as d:
            for extra in (["--classic"], ["--config", config]):
                png = os.path.join(d, "plot.png")
                subprocess.run([ctl, "analyze", *extra, "--plot", png], check=True, capture_output=True)
                with open(png, "rb") as f:
                    check(f.read(8) == b"\x89PNG\r\n\x1a\n", f"--plot {extra}: not a PNG")
        with tempfile.TemporaryDirectory() as d:
            # A config with nothing to draw: refused before gnuplot runs, no file.
            draining = os.path.join(d, "draining.toml")
            with open(draining, "w") as f:
                f.write('[[vip]]\nname = "web"\naddress = "10.0.0.1"\n'
                        '[[vip.backend]]\nname = "a"\naddress = "10.1.0.1"\nweight = 0\n')
            png = os.path.join(d, "plot.png")
            r = subprocess.run([ctl, "analyze", "--config", draining, "--plot", png],
                               capture_output=True, text=True)
            check(r.returncode == 1, f"--plot, all draining: exit {r.returncode}, want 1")
            check("nothing to draw" in r.stderr, f"--plot, all draining: message {r.stderr!r}")
            check(not os.path.exists(png), "--plot, all draining: left a file")
            # gnuplot failing midway: the half-written file is removed.
            fake = os.path.join(d, "bin")
            os.mkdir(fake)
            with open(os.path.join(fake, "gnuplot"), "w") as f:
                f.write("#!/bin/sh\nout=$(sed -n 's/^set output \"\\(.*\\)\"$/\\1/p' \"$1\")\n"
                        "printf 'half a PNG' > \"$out\"\nexit 1\n")
            os.chmod(os.path.join(fake, "gnuplot"), 0o755)
            env = dict(os.environ, PATH=fake + os.pathsep + os.environ.get("PATH", ""))
            r = subprocess.run([ctl, "analyze", "--config", config, "--plot", png],
                               capture_output=True, text=True, env=env)
            check(r.returncode == 1, f"--plot, gnuplot failing: exit {r.returncode}, want 1")
            check("gnuplot failed" in r.stderr, f"--plot, gnuplot failing: message {r.stderr!r}")
            check(not os.path.exists(png), "--plot, gnuplot failing: left a half-written file")

    for f in failures:
        print("FAIL:", f)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
