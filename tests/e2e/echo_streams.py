#!/usr/bin/python3
"""Long-lived TCP connections through a VIP that notice any stall or break.

Opens --count connections to http://VIP/echo (tests/e2e/backend_server.py),
each from its own source port (--sport-base + i, so that a test can ask the
router which instance each one crosses), then sends one 32-byte message per
connection every --interval-ms for --duration-s, and checks that every byte
comes back in order. Per connection it reports the backend, the longest round
trip of a message (the stall the flow saw: a failover shows here) and whether
it ended cleanly (every byte echoed, then EOF after our close) or broke (reset,
no echo within --broken-after-s, or a byte that differs).

Writes one JSON object to --out (or stdout) when done:
{"connections": [{"sport", "backend", "messages", "max_rtt_ms", "ok", "error"}...]}
and, once every connection is established, the line "established" to stdout
(a test starts breaking things only then). Standard library only; one thread.
"""
import argparse
import hashlib
import json
import selectors
import socket
import sys
import time


def message(conn, seq):
    return hashlib.sha256(b"echo-%d-%d" % (conn, seq)).digest()  # 32 bytes


class Conn:
    def __init__(self, index, sock, sport):
        self.index, self.sock, self.sport = index, sock, sport
        self.backend = None
        self.header = b""
        self.sent = []        # send time of each message
        self.received = 0     # echoed bytes checked so far
        self.max_rtt = 0.0
        self.error = None
        self.outbuf = b""     # messages not yet taken by the socket
        self.closed_write = False
        self.eof = False

    @property
    def done(self):
        return self.error is not None or self.eof


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vip", required=True)
    ap.add_argument("--port", type=int, default=80)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--sport-base", type=int, default=41000)
    ap.add_argument("--duration-s", type=float, default=20)
    ap.add_argument("--interval-ms", type=float, default=50)
    ap.add_argument("--broken-after-s", type=float, default=15)
    ap.add_argument("--out")
    a = ap.parse_args()

    family = socket.AF_INET6 if ":" in a.vip else socket.AF_INET
    sel = selectors.DefaultSelector()
    conns = []
    for i in range(a.count):
        s = socket.socket(family, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.bind(("", a.sport_base + i))
        s.settimeout(5)
        s.connect((a.vip, a.port))
        s.sendall(b"GET /echo HTTP/1.0\r\nHost: %s\r\n\r\n" % a.vip.encode())
        s.setblocking(False)
        c = Conn(i, s, a.sport_base + i)
        conns.append(c)
        sel.register(s, selectors.EVENT_READ, c)

    # Headers first: a message sent before them would be echoed after them.
    deadline = time.monotonic() + 10
    while any(c.backend is None and c.error is None for c in conns) and time.monotonic() < deadline:
        for key, _ in sel.select(0.2):
            c = key.data
            try:
                data = c.sock.recv(4096)
            except (ConnectionError, OSError) as e:
                c.error = "headers: %s" % e
                continue
            if not data:
                c.error = "closed before its headers"
                continue
            c.header += data
            if b"\r\n\r\n" in c.header:
                head, _, rest = c.header.partition(b"\r\n\r\n")
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"x-backend:"):
                        c.backend = line.split(b":", 1)[1].strip().decode()
                if rest:
                    c.error = "bytes before any message"
    for c in conns:
        if c.backend is None and c.error is None:
            c.error = "no headers within 10 s"
    print("established", flush=True)

    start = time.monotonic()
    next_send = start
    while True:
        now = time.monotonic()
        sending = now - start < a.duration_s
        if sending and now >= next_send:
            for c in conns:
                if c.done or c.closed_write:
                    continue
                c.outbuf += message(c.index, len(c.sent))
                c.sent.append(now)  # its round trip counts from now, queued or not
            next_send += a.interval_ms / 1000.0
        for c in conns:
            if c.outbuf and not c.done:
                try:
                    c.outbuf = c.outbuf[c.sock.send(c.outbuf):]
                except BlockingIOError:
                    pass  # the send buffer is full (a stall): again next round
                except (ConnectionError, OSError) as e:
                    c.error = "send: %s" % e
        if not sending:
            for c in conns:
                if not c.done and not c.closed_write and not c.outbuf and c.received == 32 * len(c.sent):
                    c.sock.shutdown(socket.SHUT_WR)
                    c.closed_write = True
        for c in conns:
            if not c.done and c.received < 32 * len(c.sent):
                waiting = now - c.sent[c.received // 32]
                if waiting > a.broken_after_s:
                    c.error = "no echo for %.1f s" % waiting
        if all(c.done for c in conns):
            break
        timeout = max(0.0, min(next_send - time.monotonic(), 0.05)) if sending else 0.05
        for key, _ in sel.select(timeout):
            c = key.data
            if c.done:
                continue
            try:
                data = c.sock.recv(65536)
            except BlockingIOError:
                continue
            except (ConnectionError, OSError) as e:
                c.error = "recv: %s" % e
                continue
            t = time.monotonic()
            if not data:
                if c.received == 32 * len(c.sent) and c.closed_write:
                    c.eof = True
                else:
                    c.error = "closed by the peer after %d of %d bytes" % (c.received, 32 * len(c.sent))
                continue
            pos = 0
            while pos < len(data):
                seq, off = divmod(c.received, 32)
                if seq >= len(c.sent):
                    c.error = "echo of a byte never sent"
                    break
                want = message(c.index, seq)[off:]
                got = data[pos:pos + len(want)]
                if got != want[:len(got)]:
                    c.error = "echo differs in message %d" % seq
                    break
                pos += len(got)
                c.received += len(got)
                if c.received % 32 == 0:
                    c.max_rtt = max(c.max_rtt, t - c.sent[seq])
        if time.monotonic() - start > a.duration_s + a.broken_after_s + 10:
            for c in conns:
                if not c.done:
                    c.error = "did not finish"
            break

    out = {"connections": [{"sport": c.sport, "backend": c.backend, "messages": len(c.sent),
                            "max_rtt_ms": round(c.max_rtt * 1000, 1), "ok": c.error is None and c.eof,
                            "error": c.error} for c in conns]}
    for c in conns:
        c.sock.close()
    text = json.dumps(out)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
