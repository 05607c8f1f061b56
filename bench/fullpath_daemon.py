"""What bench/fullpath.py reads from a running maglb beyond `maglbctl stats`,
and the config churn of its reload runs. No DPDK here: the parsing and the
arithmetic are tested against a fake telemetry socket
(bench/fullpath_daemon_test.py).

- telemetry(path, cmd): one DPDK telemetry v2 request (SOCK_SEQPACKET: read
  the greeting, send the command, read the JSON reply).
- /maglb/latency: per-worker histograms of a packet's time from receive to
  transmit inside maglb; read_latency() reads every page (",FIRST" while
  worker_offset + the workers returned < worker_total), latency_histogram()
  checks and sums a reply, histogram_diff() takes two cumulative reads
  apart, percentile_ns() reads a percentile off the buckets.
- /maglb/reloads: the daemon's last 64 reload records; ReloadPoller collects
  them during a window, match_reloads() ties each to the config rename that
  caused it.
Both take per_worker as a list of count lists or as a dict {"0": counts,
...}, and "recent" as a list of records or as parallel arrays
{"generation": [...], "outcome": [...], ...}: the shape asked for in issue
13 and the one the daemon side was built with.
- Reloader: rewrites the config N times a second (a temp file in the same
  directory renamed over it), cycling through valid configs.
- accounting(): rx = tx + counted drops from two `maglbctl stats` reads.
"""

import bisect
import json
import os
import socket
import threading
import time


class TelemetryError(Exception):
    pass


def telemetry(path, cmd, timeout=5.0):
    """The value of DPDK telemetry command `cmd` at socket `path` (the reply
    is {"<cmd>": value}). Raises TelemetryError when the socket cannot be
    reached, the reply is not that JSON, or the daemon does not know the
    command (DPDK answers an unknown one with null)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(timeout)
    try:
        s.connect(path)
        greeting = s.recv(65536)
        try:
            max_len = int(json.loads(greeting.decode()).get("max_output_len", 16384))
        except (ValueError, AttributeError, TypeError):
            raise TelemetryError("%s: greeting is not DPDK telemetry's: %r" % (path, greeting[:80]))
        s.send(cmd.encode())
        # One datagram holds the whole reply; take more than it may be, so
        # that an oversized one shows as bad JSON rather than silently cut.
        reply = s.recv(max(max_len, 16384) * 2)
    except OSError as e:
        raise TelemetryError("%s: %s: %s" % (path, cmd, e))
    finally:
        s.close()
    key = cmd.split(",", 1)[0]
    try:
        obj = json.loads(reply.decode())
    except (ValueError, UnicodeDecodeError):
        raise TelemetryError("%s: %s: reply is not JSON (%d bytes: %r...)" % (path, cmd, len(reply), reply[:80]))
    if not isinstance(obj, dict) or key not in obj:
        raise TelemetryError("%s: %s: reply lacks the key %s: %r" % (path, cmd, key, str(obj)[:200]))
    if obj[key] is None:
        raise TelemetryError("maglb does not know %s (a build without it?)" % key)
    return obj[key]


def _int_list(v, what):
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v):
        raise ValueError("%s: want a list of integers >= 0, got %r" % (what, str(v)[:120]))
    return v


def _rank(q, n):
    """ceil(q * n), at least 1, in integers (q in steps of 1e-6): 0.07 * 100
    is 7.000000000000001 in floating point, whose ceiling is 8."""
    return min(n, max(1, -(-round(q * 1_000_000) * n // 1_000_000)))


def latency_histogram(reply):
    """(bounds, counts) from a /maglb/latency value: bucket_upper_ns, finite
    and strictly increasing; per_worker, each with len(bounds) + 1 counts
    (the last one is the overflow bucket, above the last bound), summed over
    the workers. Raises ValueError naming the field that is wrong."""
    if not isinstance(reply, dict):
        raise ValueError("/maglb/latency: want a dict, got %r" % str(reply)[:120])
    bounds = _int_list(reply.get("bucket_upper_ns"), "bucket_upper_ns")
    if not bounds:
        raise ValueError("bucket_upper_ns: empty")
    for i in range(1, len(bounds)):
        if bounds[i] <= bounds[i - 1]:
            raise ValueError("bucket_upper_ns: not increasing at %d (%d after %d)" % (i, bounds[i], bounds[i - 1]))
    workers = reply.get("per_worker")
    if isinstance(workers, dict):
        try:
            order = sorted(workers, key=int)
        except ValueError:
            raise ValueError("per_worker: keys must be worker numbers, got %r" % str(list(workers))[:120])
        named = [(k, workers[k]) for k in order]
    elif isinstance(workers, list):
        named = list(enumerate(workers))
    else:
        named = []
    if not named:
        raise ValueError("per_worker: want count lists (a list, or a dict by worker), got %r" % str(workers)[:120])
    total = [0] * (len(bounds) + 1)
    for w, counts in named:
        _int_list(counts, "per_worker[%s]" % w)
        if len(counts) != len(bounds) + 1:
            raise ValueError("per_worker[%s]: %d counts for %d bounds (want bounds + 1, the last for overflow)"
                             % (w, len(counts), len(bounds)))
        total = [a + b for a, b in zip(total, counts)]
    return bounds, total


def read_latency(read, max_pages=64):
    """/maglb/latency with every worker: read(cmd) answers one command; pages
    follow while worker_offset + the workers returned < worker_total. One
    reply with per_worker merged (a dict by worker)."""
    first = read("/maglb/latency")
    if not isinstance(first, dict) or "worker_total" not in first:
        return first
    merged = dict(first)
    workers = first.get("per_worker")
    merged["per_worker"] = dict(workers) if isinstance(workers, dict) else \
        {str(i): c for i, c in enumerate(workers or [])}
    total = first["worker_total"]
    if not isinstance(total, int) or isinstance(total, bool) or total < 0:
        raise ValueError("worker_total: want an integer >= 0, got %r" % (total,))
    for _ in range(max_pages):
        if len(merged["per_worker"]) >= total:
            return merged
        have = len(merged["per_worker"])
        page = read("/maglb/latency,%d" % have)
        got = page.get("per_worker") if isinstance(page, dict) else None
        new = {k: v for k, v in got.items() if k not in merged["per_worker"]} if isinstance(got, dict) else {}
        if not new or page.get("bucket_upper_ns") != first.get("bucket_upper_ns"):
            raise ValueError("/maglb/latency,%d: no further workers (%d of %d)" % (have, have, total))
        merged["per_worker"].update(new)
    raise ValueError("/maglb/latency: %d workers not read in %d pages" % (total, max_pages))


def histogram_diff(before, after):
    """What happened between two cumulative reads of latency_histogram()."""
    (b1, c1), (b2, c2) = before, after
    if b1 != b2:
        raise ValueError("bucket_upper_ns changed between reads (maglb restarted?)")
    d = [y - x for x, y in zip(c1, c2)]
    if any(x < 0 for x in d):
        raise ValueError("a latency count went down between reads (maglb restarted?)")
    return b2, d


def percentile_ns(bounds, counts, q):
    """The upper bound of the bucket that holds quantile q (0 < q <= 1) of
    the packets: the packet of rank ceil(q * total) took at most this long.
    None when there are no packets; float('inf') when it is in the overflow
    bucket (longer than the last bound)."""
    total = sum(counts)
    if total == 0:
        return None
    rank = _rank(q, total)
    seen = 0
    for i, c in enumerate(counts):
        seen += c
        if seen >= rank:
            return bounds[i] if i < len(bounds) else float("inf")
    return float("inf")


_RECORD_FIELDS = ("generation", "event_ns", "published_ns", "workers_ns")


def reload_records(reply):
    """The records of a /maglb/reloads value, checked: a list of dicts with
    integer generation/event_ns/published_ns/workers_ns and an outcome."""
    if not isinstance(reply, dict):
        raise ValueError("/maglb/reloads: want a dict, got %r" % str(reply)[:120])
    recent = reply.get("recent")
    if isinstance(recent, dict):
        # Parallel arrays, one per field.
        fields = _RECORD_FIELDS + ("outcome",)
        arrays = [recent.get(f) for f in fields]
        if not all(isinstance(a, list) for a in arrays):
            raise ValueError("recent: want an array for each of %s" % ", ".join(fields))
        if len({len(a) for a in arrays}) != 1:
            raise ValueError("recent: arrays of different lengths (%s)" % ", ".join(
                "%s %d" % (f, len(a)) for f, a in zip(fields, arrays)))
        recent = [dict(zip(fields, values)) for values in zip(*arrays)]
    if not isinstance(recent, list):
        raise ValueError("recent: want a list, got %r" % str(recent)[:120])
    out = []
    for i, r in enumerate(recent):
        if not isinstance(r, dict):
            raise ValueError("recent[%d]: want a dict" % i)
        for f in _RECORD_FIELDS:
            v = r.get(f)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError("recent[%d].%s: want an integer >= 0, got %r" % (i, f, v))
        if r.get("outcome") not in ("applied", "refused", "unchanged"):
            raise ValueError("recent[%d].outcome: %r is not applied/refused/unchanged" % (i, r.get("outcome")))
        out.append({f: r[f] for f in _RECORD_FIELDS + ("outcome",)})
    return out


class ReloadPoller(threading.Thread):
    """Reads /maglb/reloads every `period` s until stop(), keeping every
    record seen once (the daemon keeps only its last 64). errors: what went
    wrong (the first few); the totals of the first and last replies too."""

    def __init__(self, read, period=0.1):
        super().__init__(daemon=True)
        self.read, self.period = read, period
        self.records = {}
        self.first = self.last = None
        self.errors = []
        self.polls = 0
        self.max_gap_s = 0.0
        self._done = threading.Event()

    def poll(self):
        try:
            reply = self.read()
            recs = reload_records(reply)
        except (TelemetryError, ValueError) as e:
            if len(self.errors) < 5 and str(e) not in self.errors:
                self.errors.append(str(e))
            return
        self.polls += 1
        if self.first is None:
            self.first = reply
        self.last = reply
        for r in recs:
            self.records[(r["generation"], r["event_ns"], r["outcome"])] = r

    def run(self):
        last = time.monotonic()
        while not self._done.is_set():
            self.poll()
            now = time.monotonic()
            self.max_gap_s = max(self.max_gap_s, now - last)
            last = now
            self._done.wait(self.period)
        self.poll()

    def stop(self):
        self._done.set()
        self.join(10)


def nearest_rank(sorted_values, q):
    """The value of rank ceil(q * n) in sorted_values (None if empty)."""
    if not sorted_values:
        return None
    return sorted_values[_rank(q, len(sorted_values)) - 1]


def match_reloads(renames, records):
    """Ties the daemon's reload records to the renames that caused them.

    renames: CLOCK_MONOTONIC ns of each rename, taken just before it (so it
    never comes after the daemon's event). Each record (reload_records())
    whose event is at or after the first rename is matched to the newest
    rename at or before its event_ns. A rename that no record matched was
    coalesced (a later rename came before the daemon read the file), unless
    it came after the last record's event (pending: no record yet).
    Returns counts and the file-rename -> workers latencies (ns) of the
    applied records."""
    renames = sorted(renames)
    out = {"renames": len(renames), "records": 0, "applied": 0, "refused": 0, "unchanged": 0,
           "matched_renames": 0, "coalesced": 0, "pending": 0, "repeat_records": 0,
           "latencies_ns": [], "generation_gaps": 0}
    if not renames:
        return out
    recs = sorted((r for r in records if r["event_ns"] >= renames[0]), key=lambda r: (r["event_ns"], r["generation"]))
    matched = set()
    gens = []
    for r in recs:
        out["records"] += 1
        out[r["outcome"]] += 1
        i = bisect.bisect_right(renames, r["event_ns"]) - 1
        if i in matched:
            out["repeat_records"] += 1  # a second record for one rename
        matched.add(i)
        if r["outcome"] == "applied":
            gens.append(r["generation"])
            if r["workers_ns"] >= renames[i]:
                out["latencies_ns"].append(r["workers_ns"] - renames[i])
    out["matched_renames"] = len(matched)
    last_event = recs[-1]["event_ns"] if recs else -1
    out["pending"] = sum(1 for t in renames if t > last_event)
    out["coalesced"] = len(renames) - len(matched) - out["pending"]
    gens.sort()
    # Applied reloads publish consecutive generations: a gap is a record the
    # poller missed (more than 64 between two polls).
    out["generation_gaps"] = sum(b - a - 1 for a, b in zip(gens, gens[1:]) if b > a + 1)
    out["latencies_ns"].sort()
    return out


class Reloader(threading.Thread):
    """Rewrites `path` `hz` times a second until stop(): each time writes
    the next of `texts` (cycling) to a temp file in the same directory and
    renames it over `path` (what an operator's deploy does: the daemon never
    reads a half-written file). renames: the CLOCK_MONOTONIC ns just before
    each rename. late: ticks that came after the next one was due (the
    schedule restarts from now, no catching up in a burst)."""

    def __init__(self, path, texts, hz=100.0):
        super().__init__(daemon=True)
        self.path, self.texts, self.period = path, texts, 1.0 / hz
        self.renames = []
        self.late = 0
        self.error = None
        self._done = threading.Event()

    def run(self):
        tmp = os.path.join(os.path.dirname(os.path.abspath(self.path)),
                           ".%s.reload-tmp" % os.path.basename(self.path))
        due = time.monotonic()
        i = 0
        try:
            while not self._done.is_set():
                with open(tmp, "w") as f:
                    f.write(self.texts[i % len(self.texts)])
                t = time.monotonic_ns()
                os.rename(tmp, self.path)
                self.renames.append(t)
                i += 1
                due += self.period
                delay = due - time.monotonic()
                if delay < 0:
                    self.late += 1
                    due = time.monotonic()
                    delay = 0
                self._done.wait(delay)
        except OSError as e:
            self.error = str(e)

    def stop(self):
        self._done.set()
        self.join(10)


DROP_PREFIX = "drop_"


def accounting(before, after):
    """rx = tx + counted drops between two `maglbctl stats` reads (dicts),
    taken with no packet in flight: unaccounted is what no counter explains.
    Frames passed to the kernel count as handled. tx_full (refused by the TX
    ring after the pipeline counted them in tx) is shown beside it: counted,
    but lost."""
    def d(k):
        return int(after.get(k, 0)) - int(before.get(k, 0))
    reasons = {k[len(DROP_PREFIX):]: d(k) for k in after if k.startswith(DROP_PREFIX) and d(k)}
    rx, tx, dropped, to_kernel = d("rx_packets"), d("tx_packets"), d("dropped"), d("to_kernel_packets")
    return {"rx": rx, "tx": tx, "dropped": dropped, "to_kernel": to_kernel, "tx_full": d("tx_full"),
            "drop_reasons": reasons, "reasons_sum": sum(reasons.values()),
            "unaccounted": rx - tx - dropped - to_kernel}
