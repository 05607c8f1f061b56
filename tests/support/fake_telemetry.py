"""A fake DPDK telemetry socket for `maglbctl stats` / `fleet` tests: it
answers each command with whatever a test says, hostile or cut short, as no
real maglb would."""
import contextlib
import json
import os
import socket
import subprocess
import tempfile
import threading


def answer_on(srv, reply_text, greeting=None):
    """Answers every connection to the listening socket `srv` as serve()
    does, in threads of this process, until srv is closed. The process that
    made srv listen is the one the kernel names as its server (SO_PEERCRED),
    whichever process answers. Returns the accepting thread."""
    if greeting is None:
        greeting = {"version": "fake", "pid": 1, "max_output_len": 16384}

    def hello():  # greeting may be a function, called per connection
        g = greeting() if callable(greeting) else greeting
        return (g if isinstance(g, str) else json.dumps(g)).encode()

    def answer(conn):
        with conn:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)  # big hostile replies
            try:
                conn.send(hello())
                while True:
                    cmd = conn.recv(4096).decode()
                    if not cmd:
                        break
                    conn.send(('{"%s": %s}' % (cmd.split(",", 1)[0], reply_text(cmd))).encode())
            except OSError:
                pass  # the client went away (it refused a reply)

    def accept():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return  # closed: the context ended
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    return t


def listen(path):
    """A SOCK_SEQPACKET socket bound to `path`, listening."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    srv.bind(path)
    srv.listen(4)
    return srv


@contextlib.contextmanager
def serve(reply_text, greeting=None):
    """A socket that answers command cmd with {"<cmd up to its first comma>":
    reply_text(cmd)}; reply_text returns the value's JSON text. It greets
    each connection with `greeting` (a dict, or the text itself, or a
    function returning either per connection; by default DPDK's fields,
    pid 1). Yields its path; it takes any number of connections while the
    context lasts. Its server, to the kernel, is this process."""
    with tempfile.TemporaryDirectory(prefix="mlb-fake-telemetry-") as d:
        path = os.path.join(d, "dpdk_telemetry.v2")
        srv = listen(path)
        t = answer_on(srv, reply_text, greeting)
        try:
            yield path
        finally:
            srv.shutdown(socket.SHUT_RDWR)
            srv.close()
            t.join(5)


def maglbctl_stats(maglbctl, reply_text, fmt="table"):
    """Runs `maglbctl stats --format fmt` against serve(reply_text). Returns
    the CompletedProcess."""
    with serve(reply_text) as path:
        return subprocess.run([maglbctl, "stats", "--socket", path, "--format", fmt],
                              capture_output=True, text=True, timeout=30)
