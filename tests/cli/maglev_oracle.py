#!/usr/bin/python3
"""An independent oracle for Maglev placement: the paper's population written
again in Python over python3-xxhash (Debian's binding of the reference xxHash),
compared slot by slot and fingerprint by fingerprint with `maglbctl table`.

The C++ builder and this script share only the documented definition (seeds,
turn order, weights as credits, fingerprint layout), so a change to placement
in either shows up here; the golden fingerprints in maglev_test.cc are the
values this script computes.
"""
import os
import struct
import subprocess
import sys
import tempfile

import xxhash

OFFSET_SEED = 0x6D61676C622D6F66  # "maglb-of"
SKIP_SEED = 0x6D61676C622D736B    # "maglb-sk"
FP_SEED = 0x6D61676C622D6670      # "maglb-fp"


def xxh64(data, seed):
    return xxhash.xxh64_intdigest(data.encode() if isinstance(data, str) else data, seed)


def populate(backends, m):
    """Slot -> backend index, or None when every weight is 0."""
    active = [i for i, (_, w) in enumerate(backends) if w > 0]
    if not active:
        return None
    active.sort(key=lambda i: (xxh64(backends[i][0], OFFSET_SEED), backends[i][0].encode()))
    max_w = max(backends[i][1] for i in active)
    offset = [xxh64(backends[i][0], OFFSET_SEED) % m for i in active]
    skip = [xxh64(backends[i][0], SKIP_SEED) % (m - 1) + 1 for i in active]
    nxt = [0] * len(active)
    credit = [0] * len(active)
    entry = [-1] * m
    filled = 0
    while True:
        for k, i in enumerate(active):
            credit[k] += backends[i][1]
            if credit[k] < max_w:
                continue
            credit[k] -= max_w
            c = (offset[k] + nxt[k] * skip[k]) % m
            while entry[c] >= 0:
                nxt[k] += 1
                c = (offset[k] + nxt[k] * skip[k]) % m
            entry[c] = i
            nxt[k] += 1
            filled += 1
            if filled == m:
                return entry


def fingerprint(backends, entry, m):
    present = sorted({i for i in entry},
                     key=lambda i: (xxh64(backends[i][0], FP_SEED), backends[i][0].encode()))
    rank = {i: r for r, i in enumerate(present)}
    data = struct.pack('<QQ', m, len(present))
    for i in present:
        name = backends[i][0].encode()
        data += struct.pack('<Q', len(name)) + name
    data += b''.join(struct.pack('<H', rank[i]) for i in entry)
    return xxh64(data, FP_SEED)


CASES = [
    # The golden configs of maglev_test.cc.
    ("golden-1", [("web-a", 1), ("web-b", 1), ("web-c", 2), ("web-d", 0)], 65537),
    ("golden-2", [("be-%d" % i, 1) for i in range(5)], 251),
    # Weighted, draining, skewed, many backends.
    ("weighted", [("node-%d" % i, 1 + i % 5) for i in range(40)], 4099),
    ("skewed", [("heavy", 900)] + [("light-%d" % i, 1) for i in range(60)], 4099),
    ("many", [("b%d" % i, 1) for i in range(200)], 1009),
]


def main():
    ctl = sys.argv[1]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, backends, m in CASES:
            path = os.path.join(tmp, name + ".toml")
            with open(path, "w") as f:
                f.write('[[vip]]\nname = "v"\naddress = "10.0.0.1"\ntable_size = %d\n' % m)
                for i, (b, w) in enumerate(backends):
                    f.write('[[vip.backend]]\nname = "%s"\naddress = "10.1.%d.%d"\nweight = %d\n'
                            % (b, i // 250, i % 250 + 1, w))
            entry = populate(backends, m)
            want_fp = fingerprint(backends, entry, m)
            dump = subprocess.run([ctl, "table", "--config", path, "--dump"], check=True,
                                  capture_output=True, text=True).stdout.split("\n")[:-1]
            table = subprocess.run([ctl, "table", "--config", path], check=True,
                                   capture_output=True, text=True).stdout
            want_dump = [backends[i][0] for i in entry]
            got_fp = next(l.split()[1] for l in table.splitlines() if "fingerprint" in l)
            ok = dump == want_dump and got_fp == "%016x" % want_fp
            diffs = sum(1 for a, b in zip(dump, want_dump) if a != b)
            print("%-9s M=%-6d N=%-3d fingerprint oracle %016x maglbctl %s slots differing %d: %s"
                  % (name, m, len(backends), want_fp, got_fp, diffs, "ok" if ok else "MISMATCH"))
            failures += not ok
    print("%d passed, %d failed" % (len(CASES) - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
