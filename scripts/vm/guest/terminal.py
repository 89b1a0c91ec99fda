#!/usr/bin/env python3
"""The owner's terminal in the VM bench.

`terminal.py serve SOCKET` runs in the owner's autologin session on tty1 (its logind
session scope on seat0, with the session's DISPLAY, XAUTHORITY, XDG_RUNTIME_DIR and
D-Bus address): each command it is sent runs there as if typed into the owner's terminal,
so `lull up` and the owner's own programs start where an owner's would. Only root may
send commands (SO_PEERCRED): a guest running as the owner's uid must not borrow it.

`terminal.py run SOCKET [--timeout S] -- COMMAND` (as root) sends one shell command,
prints its stdout and stderr and exits with its exit status (124 on timeout). A command
that leaves something running must redirect that program's output (`cmd >log 2>&1 &`).
"""
import json
import os
import socket
import socketserver
import struct
import subprocess
import sys


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        creds = self.request.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", creds)
        if uid != 0:
            self.wfile.write(b'{"rc": 126, "out": "", "err": "terminal: only root may send commands\\n"}\n')
            return
        req = json.loads(self.rfile.readline())
        try:
            done = subprocess.run(
                ["/bin/bash", "-c", req["cmd"]],
                cwd=os.path.expanduser("~"),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=req.get("timeout", 120),
            )
            reply = {"rc": done.returncode, "out": done.stdout.decode(errors="replace"), "err": done.stderr.decode(errors="replace")}
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode(errors="replace")
            reply = {"rc": 124, "out": out, "err": f"terminal: timed out after {e.timeout} s\n"}
        self.wfile.write(json.dumps(reply).encode() + b"\n")


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def serve(path):
    if os.path.exists(path):
        os.unlink(path)
    with Server(path, Handler) as server:
        os.chmod(path, 0o600)
        print(f"terminal: serving on {path}", flush=True)
        server.serve_forever()


def run(path, timeout, cmd):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(path)
        s.sendall(json.dumps({"cmd": cmd, "timeout": timeout}).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    reply = json.loads(data)
    sys.stdout.write(reply["out"])
    sys.stderr.write(reply["err"])
    return reply["rc"]


def main(argv):
    if len(argv) >= 2 and argv[0] == "serve":
        serve(argv[1])
        return 0
    if len(argv) >= 3 and argv[0] == "run":
        path, rest, timeout = argv[1], argv[2:], 120
        if rest[:1] == ["--timeout"]:
            timeout, rest = float(rest[1]), rest[2:]
        if rest[:1] == ["--"]:
            rest = rest[1:]
        return run(path, timeout, " ".join(rest))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
