"""A fake DPDK telemetry socket for `maglbctl stats` tests: it answers each
command with whatever a test says, hostile or cut short, as no real maglb
would."""
import json
import os
import socket
import subprocess
import tempfile
import threading


def maglbctl_stats(maglbctl, reply_text, fmt="table"):
    """Runs `maglbctl stats --format fmt` against a socket that answers
    command cmd with {"<cmd up to its first comma>": reply_text(cmd)};
    reply_text returns the value's JSON text. Returns the CompletedProcess."""
    with tempfile.TemporaryDirectory(prefix="mlb-fake-telemetry-") as d:
        path = os.path.join(d, "dpdk_telemetry.v2")
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            srv.bind(path)
            srv.listen(1)

            def serve():
                conn, _ = srv.accept()
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)  # big hostile replies
                conn.send(json.dumps({"version": "fake", "pid": 1, "max_output_len": 16384}).encode())
                while True:
                    cmd = conn.recv(4096).decode()
                    if not cmd:
                        break
                    conn.send(('{"%s": %s}' % (cmd.split(",", 1)[0], reply_text(cmd))).encode())
                conn.close()

            t = threading.Thread(target=serve, daemon=True)
            t.start()
            r = subprocess.run([maglbctl, "stats", "--socket", path, "--format", fmt],
                               capture_output=True, text=True, timeout=30)
            t.join(5)
            return r
        finally:
            srv.close()
