#!/usr/bin/env python3
"""bench/fullpath_daemon.py against a fake DPDK telemetry socket
(tests/support/fake_telemetry.py) and hostile replies; the reloader on real
files. No DPDK, no root: `python3 bench/fullpath_daemon_test.py`."""

import json
import os
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "support"))
import fake_telemetry  # noqa: E402
import fullpath  # noqa: E402
import fullpath_daemon as d  # noqa: E402
import fullpath_traffic as traffic  # noqa: E402

BOUNDS = [1000, 2000, 4000, 8000]


def latency_value(*workers):
    return {"bucket_upper_ns": BOUNDS, "per_worker": [list(w) for w in workers], "tsc_hz": 2_100_000_000}


class Telemetry(unittest.TestCase):
    def test_reads_the_value_of_the_command(self):
        value = latency_value([1, 2, 3, 4, 5])
        with fake_telemetry.serve(lambda cmd: json.dumps(value)) as path:
            self.assertEqual(d.telemetry(path, "/maglb/latency"), value)

    def test_an_unknown_command_says_so(self):
        # DPDK answers a command nobody registered with null.
        with fake_telemetry.serve(lambda cmd: "null") as path:
            with self.assertRaisesRegex(d.TelemetryError, "does not know /maglb/latency"):
                d.telemetry(path, "/maglb/latency")

    def test_a_reply_that_is_not_json(self):
        with fake_telemetry.serve(lambda cmd: '{"cut": ') as path:
            with self.assertRaisesRegex(d.TelemetryError, "not JSON"):
                d.telemetry(path, "/maglb/latency")

    def test_a_bad_greeting(self):
        with fake_telemetry.serve(lambda cmd: "1", greeting="hello") as path:
            with self.assertRaisesRegex(d.TelemetryError, "greeting"):
                d.telemetry(path, "/maglb/latency")

    def test_no_socket(self):
        with self.assertRaisesRegex(d.TelemetryError, "/nonexistent/sock"):
            d.telemetry("/nonexistent/sock", "/maglb/latency", timeout=1)


class Histogram(unittest.TestCase):
    def test_sums_the_workers(self):
        bounds, counts = d.latency_histogram(latency_value([1, 2, 3, 4, 5], [10, 20, 30, 40, 50]))
        self.assertEqual(bounds, BOUNDS)
        self.assertEqual(counts, [11, 22, 33, 44, 55])

    def test_takes_workers_as_a_dict_in_worker_order(self):
        value = {"bucket_upper_ns": BOUNDS, "per_worker": {"10": [0, 0, 0, 0, 1], "2": [1, 2, 3, 4, 5]}}
        self.assertEqual(d.latency_histogram(value), (BOUNDS, [1, 2, 3, 4, 6]))
        with self.assertRaisesRegex(ValueError, "worker numbers"):
            d.latency_histogram({"bucket_upper_ns": BOUNDS, "per_worker": {"w0": [0] * 5}})
        with self.assertRaisesRegex(ValueError, r"per_worker\[2\]: 4 counts"):
            d.latency_histogram({"bucket_upper_ns": BOUNDS, "per_worker": {"2": [0] * 4}})
        with self.assertRaisesRegex(ValueError, "per_worker"):
            d.latency_histogram({"bucket_upper_ns": BOUNDS, "per_worker": {}})

    def test_reads_every_page(self):
        # 5 workers, two a page, as the daemon pages a reply over 16 KB.
        workers = {str(w): [w, 0, 0, 0, 1] for w in range(5)}

        def reply(cmd):
            first = int(cmd.split(",")[1]) if "," in cmd else 0
            page = {k: v for k, v in workers.items() if first <= int(k) < first + 2}
            return json.dumps({"bucket_upper_ns": BOUNDS, "worker_total": 5, "worker_offset": first,
                               "per_worker": page, "tsc_hz": 1})

        with fake_telemetry.serve(reply) as path:
            merged = d.read_latency(lambda cmd: d.telemetry(path, cmd))
        self.assertEqual(sorted(merged["per_worker"]), ["0", "1", "2", "3", "4"])
        self.assertEqual(d.latency_histogram(merged), (BOUNDS, [10, 0, 0, 0, 5]))

    def test_a_page_that_brings_nothing_is_an_error(self):
        def reply(cmd):
            return json.dumps({"bucket_upper_ns": BOUNDS, "worker_total": 3, "worker_offset": 0,
                               "per_worker": {"0": [0] * 5}})

        with fake_telemetry.serve(reply) as path:
            with self.assertRaisesRegex(ValueError, "no further workers"):
                d.read_latency(lambda cmd: d.telemetry(path, cmd))

    def test_refuses_bad_fields(self):
        bad = [
            ("not a dict", "want a dict"),
            ({"per_worker": [[0] * 5]}, "bucket_upper_ns"),
            (dict(latency_value([0] * 5), bucket_upper_ns=[]), "empty"),
            (dict(latency_value([0] * 5), bucket_upper_ns=[1000, 1000, 2000, 3000]), "not increasing at 1"),
            (dict(latency_value([0] * 5), bucket_upper_ns=[1000, 900, 2000, 3000]), "not increasing at 1"),
            (dict(latency_value([0] * 5), bucket_upper_ns=[1000, 2000.5, 3000, 4000]), "integers"),
            (dict(latency_value([0] * 5), bucket_upper_ns=[-1, 2000, 3000, 4000]), "integers"),
            (latency_value([0] * 4), r"per_worker\[0\]: 4 counts for 4 bounds"),
            (latency_value([0] * 5, [0] * 6), r"per_worker\[1\]: 6 counts"),
            (latency_value([0, 0, -1, 0, 0]), r"per_worker\[0\]"),
            (latency_value([0, 0, True, 0, 0]), r"per_worker\[0\]"),
            ({"bucket_upper_ns": BOUNDS, "per_worker": []}, "per_worker"),
            ({"bucket_upper_ns": BOUNDS, "per_worker": [1, 2, 3, 4, 5]}, r"per_worker\[0\]"),
        ]
        for value, msg in bad:
            with self.subTest(value=value):
                with self.assertRaisesRegex(ValueError, msg):
                    d.latency_histogram(value)

    def test_diff_of_two_reads(self):
        a = d.latency_histogram(latency_value([1, 2, 3, 4, 5]))
        b = d.latency_histogram(latency_value([1, 7, 3, 9, 6]))
        self.assertEqual(d.histogram_diff(a, b), (BOUNDS, [0, 5, 0, 5, 1]))
        with self.assertRaisesRegex(ValueError, "went down"):
            d.histogram_diff(b, a)
        other = (BOUNDS[:-1] + [9000], b[1])
        with self.assertRaisesRegex(ValueError, "changed"):
            d.histogram_diff(a, other)

    def test_percentiles_read_the_bucket_bound(self):
        # 100 packets: 50 <= 1 us, 49 in (1, 2] us, 1 over 8 us.
        counts = [50, 49, 0, 0, 1]
        self.assertEqual(d.percentile_ns(BOUNDS, counts, 0.5), 1000)
        self.assertEqual(d.percentile_ns(BOUNDS, counts, 0.99), 2000)
        # Rank 7 of 100, not 8 (0.07 * 100 is 7.000000000000001 in floating point).
        self.assertEqual(d.percentile_ns(BOUNDS, [7, 93, 0, 0, 0], 0.07), 1000)
        self.assertEqual(d.percentile_ns(BOUNDS, counts, 0.999), float("inf"))
        self.assertEqual(d.percentile_ns(BOUNDS, [0, 0, 0, 0, 0], 0.5), None)
        self.assertEqual(d.percentile_ns(BOUNDS, [0, 0, 0, 3, 0], 0.5), 8000)
        # 1000 packets, the slowest 2 in the third bucket: p99.9 is rank 999.
        self.assertEqual(d.percentile_ns(BOUNDS, [998, 0, 2, 0, 0], 0.999), 4000)
        self.assertEqual(d.percentile_ns(BOUNDS, [999, 0, 1, 0, 0], 0.999), 1000)


def record(gen, event, outcome="applied", published=None, workers=None):
    published = event + 100 if published is None else published
    workers = published + 100 if workers is None else workers
    return {"generation": gen, "outcome": outcome, "event_ns": event, "published_ns": published,
            "workers_ns": workers}


class ReloadRecords(unittest.TestCase):
    def test_checks_every_field(self):
        good = record(2, 1000)
        self.assertEqual(d.reload_records({"recent": [good]}), [good])
        for field, value, msg in [("generation", "2", "generation"), ("event_ns", -1, "event_ns"),
                                  ("workers_ns", 1.5, "workers_ns"), ("published_ns", None, "published_ns"),
                                  ("outcome", "done", "outcome"), ("event_ns", True, "event_ns")]:
            with self.subTest(field=field, value=value):
                with self.assertRaisesRegex(ValueError, msg):
                    d.reload_records({"recent": [dict(good, **{field: value})]})
        with self.assertRaisesRegex(ValueError, "recent"):
            d.reload_records({"recent": None})
        with self.assertRaisesRegex(ValueError, r"recent\[0\]"):
            d.reload_records({"recent": [5]})

    def test_takes_parallel_arrays(self):
        a, b = record(2, 1000), record(3, 2000, outcome="refused", published=0, workers=0)
        arrays = {f: [a[f], b[f]] for f in a}
        self.assertEqual(d.reload_records({"recent": arrays}), [a, b])
        self.assertEqual(d.reload_records({"recent": {f: [] for f in a}}), [])
        short = dict(arrays, workers_ns=[1])
        with self.assertRaisesRegex(ValueError, "different lengths"):
            d.reload_records({"recent": short})
        with self.assertRaisesRegex(ValueError, "an array for each"):
            d.reload_records({"recent": {k: v for k, v in arrays.items() if k != "outcome"}})
        with self.assertRaisesRegex(ValueError, r"recent\[1\].outcome"):
            d.reload_records({"recent": dict(arrays, outcome=["applied", "lost"])})

    def test_matches_records_to_the_newest_rename_before_them(self):
        renames = [1000, 2000, 2100, 2200, 5000, 9000]
        records = [
            record(1, 10),                        # before the first rename: startup, ignored
            record(2, 1050, workers=1300),        # rename 1000: 300 ns
            record(3, 2250, workers=2700),        # renames 2000, 2100 coalesced into 2200: 500 ns
            record(3, 5010, outcome="unchanged", published=0, workers=0),  # rename 5000
        ]
        m = d.match_reloads(renames, records)
        self.assertEqual(m["records"], 3)
        self.assertEqual((m["applied"], m["unchanged"], m["refused"]), (2, 1, 0))
        self.assertEqual(m["latencies_ns"], [300, 500])
        self.assertEqual(m["matched_renames"], 3)
        self.assertEqual(m["coalesced"], 2)
        self.assertEqual(m["pending"], 1)  # 9000: no record yet
        self.assertEqual(m["repeat_records"], 0)
        self.assertEqual(m["generation_gaps"], 0)

    def test_counts_missed_generations_and_repeats(self):
        renames = [1000, 2000, 3000]
        records = [record(2, 1001), record(5, 2001), record(6, 2002), record(7, 3001)]
        m = d.match_reloads(renames, records)
        self.assertEqual(m["generation_gaps"], 2)  # 3 and 4 never seen
        self.assertEqual(m["repeat_records"], 1)   # 5 and 6 both after rename 2000
        self.assertEqual(m["coalesced"], 0)
        self.assertEqual(d.match_reloads([], records)["records"], 0)

    def test_poller_keeps_records_that_roll_off(self):
        # The daemon keeps its last 64; the poller must keep them all.
        made = []
        lock = threading.Lock()

        def reply(cmd):
            with lock:
                made.append(record(len(made) + 2, 1000 * (len(made) + 1)))
                recent = made[-64:]
            return json.dumps({"recent": recent, "applied": len(made), "file_to_workers_ns_max": 200,
                               "file_to_workers_ns_sum": 200 * len(made), "file_to_workers_count": len(made)})

        with fake_telemetry.serve(reply) as path:
            p = d.ReloadPoller(lambda: d.telemetry(path, "/maglb/reloads"), period=0.005)
            p.start()
            time.sleep(0.3)
            p.stop()
        self.assertEqual(p.errors, [])
        self.assertGreater(p.polls, 5)
        self.assertEqual(len(p.records), len(made))
        self.assertEqual(p.last["applied"], len(made))

    def test_poller_records_errors(self):
        with fake_telemetry.serve(lambda cmd: "null") as path:
            p = d.ReloadPoller(lambda: d.telemetry(path, "/maglb/reloads"), period=0.01)
            p.start()
            time.sleep(0.05)
            p.stop()
        self.assertEqual(p.polls, 0)
        self.assertTrue(p.errors and "does not know /maglb/reloads" in p.errors[0], p.errors)


class Reloader(unittest.TestCase):
    def test_renames_whole_files_at_its_rate(self):
        texts = ["a = 1\n" * 100, "b = 2\n" * 200, "c = 3\n"]
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "lb.toml")
            with open(path, "w") as f:
                f.write(texts[2])
            seen, stop = set(), threading.Event()

            def reader():  # every read sees one whole config, never a mix
                while not stop.is_set():
                    with open(path) as f:
                        seen.add(f.read())

            t = threading.Thread(target=reader)
            t.start()
            r = d.Reloader(path, texts, hz=200)
            r.start()
            time.sleep(0.5)
            r.stop()
            stop.set()
            t.join()
            self.assertIsNone(r.error)
            self.assertGreater(len(r.renames), 20)  # ~100 at 200 Hz, on a loaded machine fewer
            self.assertEqual(r.renames, sorted(r.renames))
            self.assertTrue(seen <= set(texts), [s[:10] for s in seen - set(texts)])
            self.assertEqual(sorted(os.listdir(tmp)), ["lb.toml"])  # no temp file left behind


class Accounting(unittest.TestCase):
    def test_books(self):
        before = {"rx_packets": 10, "tx_packets": 8, "dropped": 2, "drop_no_vip": 2}
        after = {"rx_packets": 110, "tx_packets": 95, "dropped": 12, "drop_no_vip": 7, "drop_no_backend": 5,
                 "to_kernel_packets": 3, "tx_full": 4}
        a = d.accounting(before, after)
        self.assertEqual((a["rx"], a["tx"], a["dropped"], a["to_kernel"], a["tx_full"]), (100, 87, 10, 3, 4))
        self.assertEqual(a["drop_reasons"], {"no_vip": 5, "no_backend": 5})
        self.assertEqual(a["reasons_sum"], 10)
        self.assertEqual(a["unaccounted"], 0)
        self.assertEqual(d.accounting({}, {"rx_packets": 5, "tx_packets": 3})["unaccounted"], 2)


class SplitPcap(unittest.TestCase):
    """--workers N with replay: one rx_pcap per queue, every flow in one file."""

    def records(self, path):
        with open(path, "rb") as f:
            header, body = f.read(24), f.read()
        size = 16 + traffic.FRAME_LEN
        return header, [body[i:i + size] for i in range(0, len(body), size)]

    def test_each_flow_lands_in_one_file_and_nothing_is_lost(self):
        with tempfile.TemporaryDirectory() as tmp:
            pcap = os.path.join(tmp, "zipf.pcap")
            recs, info = traffic.build("zipf", 300, 3000)
            traffic.write(pcap, recs)
            header, whole = self.records(pcap)
            parts = fullpath.split_pcap(pcap, 3)
            self.assertEqual(len(parts), 3)
            owner, total = {}, 0
            for i, part in enumerate(parts):
                h, rs = self.records(part)
                self.assertEqual(h, header)
                self.assertGreater(len(rs), 0)
                total += len(rs)
                for r in rs:
                    self.assertEqual(owner.setdefault(r[16 + 26:16 + 38], i), i)
            self.assertEqual(total, len(whole))
            self.assertEqual(sorted(r for p in parts for r in self.records(p)[1]), sorted(whole))
            self.assertEqual(len(owner), info["distinct"])
            # Cached: the same files, not rewritten.
            mtimes = [os.path.getmtime(p) for p in parts]
            self.assertEqual(fullpath.split_pcap(pcap, 3), parts)
            self.assertEqual([os.path.getmtime(p) for p in parts], mtimes)

    def test_too_few_flows_for_the_queues_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            pcap = os.path.join(tmp, "one.pcap")
            recs, _ = traffic.build("zipf", 1, 50)
            traffic.write(pcap, recs)
            with self.assertRaisesRegex(ValueError, "no frames hash to"):
                fullpath.split_pcap(pcap, 2)


if __name__ == "__main__":
    unittest.main()
