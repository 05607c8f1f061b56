#!/usr/bin/python3
"""A test backend: an HTTP server that answers with its own name, and a UDP echo.

GET /                -> "<name>\n" (header X-Backend: <name>)
GET /echo            -> 200, then every byte the client sends is echoed back
                        until it closes (tests/e2e/echo_streams.py)
GET /stream?bytes=N&chunk=C&delay_ms=D
                     -> N bytes of stream_bytes(N), sent C bytes at a time with
                        D ms between chunks: a long-lived transfer whose
                        content the client can check byte for byte.
UDP <port> on every --udp-bind address -> "<name> " + payload. (Bound per
address so that the reply leaves from the VIP the client sent to.)
Standard library only.
"""
import argparse
import hashlib
import http.server
import socket
import socketserver
import sys
import threading
import time
import urllib.parse

BLOCK = 4096


def stream_block(i):
    """The i-th 4 KiB block of every /stream body (deterministic)."""
    seed = hashlib.sha256(b"maglb-stream-%d" % i).digest()
    return (seed * (BLOCK // len(seed) + 1))[:BLOCK]


def stream_bytes(n):
    """The whole body of /stream?bytes=n (for the client's check)."""
    out = bytearray()
    i = 0
    while len(out) < n:
        out += stream_block(i)
        i += 1
    return bytes(out[:n])


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    server_version = "maglb-test-backend"

    def log_message(self, fmt, *args):  # quiet: one line per request would flood logs
        pass

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        name = self.server.backend_name
        if url.path == "/stream":
            q = urllib.parse.parse_qs(url.query)
            n = int(q.get("bytes", ["1048576"])[0])
            chunk = max(1, int(q.get("chunk", ["16384"])[0]))
            delay = int(q.get("delay_ms", ["10"])[0]) / 1000.0
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.send_header("X-Backend", name)
            self.end_headers()
            sent, i, pending = 0, 0, b""
            try:
                while sent < n:
                    while len(pending) < chunk and sent + len(pending) < n:
                        pending += stream_block(i)
                        i += 1
                    piece = pending[:min(chunk, n - sent)]
                    pending = pending[len(piece):]
                    self.wfile.write(piece)
                    self.wfile.flush()
                    sent += len(piece)
                    if delay > 0 and sent < n:
                        time.sleep(delay)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        if url.path == "/echo":
            # The rest of the connection is echoed back byte for byte: a
            # long-lived flow whose every round trip crosses the LB (the
            # client's bytes) and the direct return path (the echo).
            self.send_response(200)
            self.send_header("X-Backend", name)
            self.end_headers()
            self.wfile.flush()
            try:
                while True:
                    data = self.rfile.read1(65536)
                    if not data:
                        break
                    self.wfile.write(data)
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError, TimeoutError, OSError):
                pass
            self.close_connection = True
            return
        body = (name + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Backend", name)
        self.end_headers()
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


class Server6(Server):
    address_family = socket.AF_INET6

    def server_bind(self):
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        super().server_bind()


def udp_echo(name, addr, port):
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.bind((addr, port))
    prefix = (name + " ").encode()
    while True:
        data, peer = s.recvfrom(65535)
        s.sendto(prefix + data, peer)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--name", required=True)
    p.add_argument("--http-port", type=int, default=80)
    p.add_argument("--udp-port", type=int, default=7777)
    p.add_argument("--udp-bind", default="")
    a = p.parse_args()
    servers = [Server(("0.0.0.0", a.http_port), Handler)]
    try:
        servers.append(Server6(("::", a.http_port), Handler))
    except OSError as e:
        print("backend_server: no IPv6 HTTP: %s" % e, file=sys.stderr)
    for s in servers:
        s.backend_name = a.name
        threading.Thread(target=s.serve_forever, daemon=True).start()
    for addr in filter(None, a.udp_bind.split(",")):
        threading.Thread(target=udp_echo, args=(a.name, addr, a.udp_port), daemon=True).start()
    print("backend_server %s: http :%d, udp echo :%d on %s" % (a.name, a.http_port, a.udp_port, a.udp_bind),
          file=sys.stderr, flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
