#!/usr/bin/env python3
"""A hostile guest for the VM bench: `hostile.py PROBE ARGS…`.

Each probe tries one thing a guest must never manage and prints one line per attempt:
`PROBE <name> REFUSED <how>` or `PROBE <name> REACHED <what it got>`, then
`HOSTILE DONE <probe>`. The case that submitted it reads the lines and also checks from
outside (the target still alive, the file not written, the limit unchanged): a guest that
is stopped before DONE, or prints no line for an attempt, fails the case too.
"""
import _thread
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time


def say(name, reached, detail):
    print(f"PROBE {name} {'REACHED' if reached else 'REFUSED'} {detail}", flush=True)


def err(e):
    return f"{type(e).__name__}: {e}"


def probe_socket(agent_sock, bus_sock, x_sock):
    """The agent's control socket, the owner's D-Bus session bus (its systemd user manager
    starts anything as the owner) and the owner's X display (keystrokes)."""
    for req, name in ((b'{"op":"status"}\n', "agent-status"), (b'{"op":"set_limits","interruptions_per_day":15}\n', "agent-set-limits")):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(5)
                s.connect(agent_sock)
                s.sendall(req)
                answer = s.makefile("rb").readline().decode(errors="replace").strip()
            refused = not answer or '"kind":"error"' in answer.replace(" ", "")
            say(name, not refused, f"connected; answer {answer[:160]!r}")
        except OSError as e:
            say(name, False, err(e))
    try:
        out = subprocess.run(
            ["lull", "limits", "--interruptions", "15"],
            env=dict(os.environ, LULL_SOCKET=agent_sock),
            capture_output=True,
            timeout=20,
        )
        text = (out.stdout + out.stderr).decode(errors="replace").strip().replace("\n", " | ")
        say("lull-limits-cli", out.returncode == 0, f"exit {out.returncode}: {text[:200]}")
    except (OSError, subprocess.TimeoutExpired) as e:
        say("lull-limits-cli", False, err(e))
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(bus_sock)
            s.sendall(b"\0AUTH EXTERNAL " + str(os.getuid()).encode().hex().encode() + b"\r\n")
            answer = s.recv(256).decode(errors="replace").strip()
        say("session-bus", answer.startswith("OK"), f"connected; auth answer {answer[:80]!r}")
    except OSError as e:
        say("session-bus", False, err(e))
    for path, name in ((x_sock, "x-display"), ("\0" + x_sock, "x-display-abstract")):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(5)
                s.connect(path)
                # X11 connection setup, little-endian, protocol 11.0, no authorisation.
                s.sendall(b"l\0\x0b\0\0\0\0\0\0\0\0\0")
                first = s.recv(8)
            # 1 = Success: the display is ours to read; 0 = Failed (no cookie), 2 = Authenticate.
            say(name, bool(first) and first[0] == 1, f"connected; setup status {first[:1].hex() or 'none'}")
        except OSError as e:
            say(name, False, err(e))


def read_proc(pid, what):
    with open(f"/proc/{pid}/{what}", "rb") as f:
        return f.read()


def probe_proc(reversed_secret, *pids):
    """Another process's command line and environment, by pid and by scanning /proc.

    The secret comes reversed: this guest's own command line, which the sandbox's init
    (pid 1 of the guest's PID namespace) also shows, must not contain the secret itself,
    or the scan would find the guest's own arguments and call them a leak.
    """
    secret = reversed_secret[::-1]
    for pid in pids:
        for what in ("cmdline", "environ"):
            try:
                data = read_proc(pid, what)
                shown = data.replace(b"\0", b" ")[:120].decode(errors="replace")
                say(f"{what}-{pid}", bool(data), f"read {len(data)} bytes: {shown!r}")
            except OSError as e:
                say(f"{what}-{pid}", False, err(e))
    seen, leaks = 0, []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        seen += 1
        for what in ("cmdline", "environ"):
            try:
                if secret.encode() in read_proc(entry, what):
                    leaks.append(f"{entry}/{what}")
            except OSError:
                pass
    say("scan-for-secret", bool(leaks), f"{seen} other processes visible; secret in {leaks[:10]}")


def probe_signal(canary, agent):
    """kill -0 and real signals to the owner's program and to the agent."""
    for pid, sig, name in ((canary, 0, "kill-0-owner"), (canary, signal.SIGTERM, "kill-TERM-owner"), (canary, signal.SIGUSR1, "kill-USR1-owner"),
                           (agent, 0, "kill-0-agent"), (agent, signal.SIGCONT, "kill-CONT-agent")):
        try:
            os.kill(int(pid), sig)
            say(name, True, f"signal {int(sig)} to {pid} delivered")
        except OSError as e:
            say(name, False, err(e))


def probe_ptrace(*pids):
    """PTRACE_ATTACH, /proc/PID/mem and process_vm_readv on the owner's processes."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    for pid in map(int, pids):
        r = libc.ptrace(16, pid, None, None)  # PTRACE_ATTACH
        if r == 0:
            os.waitpid(pid, 0x40000000)  # __WALL
            libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
            say(f"ptrace-attach-{pid}", True, "attached")
        else:
            say(f"ptrace-attach-{pid}", False, os.strerror(ctypes.get_errno()))
        try:
            with open(f"/proc/{pid}/maps") as m:
                start = int(m.readline().split("-")[0], 16)
            with open(f"/proc/{pid}/mem", "rb") as f:
                f.seek(start)
                say(f"proc-mem-{pid}", True, f"read {len(f.read(16))} bytes")
        except (OSError, ValueError) as e:
            say(f"proc-mem-{pid}", False, err(e))


def probe_daemon(marker, seconds):
    """Double fork and setsid: a grandchild in its own session that ignores SIGTERM and
    SIGHUP, writing a heartbeat file; the job itself ends at once."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
            os.execvp("python3", ["python3", "-c", DAEMON, marker, seconds])
        os._exit(0)
    os.wait()
    print(f"DAEMON started: a setsid grandchild ({marker}) beats for {seconds} s; the job ends now", flush=True)


DAEMON = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
end = time.time() + float(sys.argv[2])
while time.time() < end:
    with open("heartbeat", "a") as f:
        f.write(f"{time.time():.1f}\\n")
    time.sleep(0.5)
"""


def probe_forkbomb(bound, hold_s="15"):
    """Threads, then processes, without end (stopped at `bound` tasks so that a machine
    with no limit stays usable for the next cases); holds them `hold_s` seconds."""
    bound = int(bound)
    threading.stack_size(64 * 1024)
    stop, got = threading.Lock(), 1
    stop.acquire()
    try:
        # _thread, not threading: no start-up handshake per thread, so the bomb is quick
        # even under emulation.
        while got < bound:
            _thread.start_new_thread(stop.acquire, ())
            got += 1
        say("threads", True, f"{got} tasks without a refusal (bound {bound})")
    except RuntimeError as e:
        say("threads", False, f"refused at {got} tasks: {e}")
    children, forks_refused = [], 0
    for _ in range(20):
        try:
            pid = os.fork()
        except OSError as e:
            forks_refused += 1
            last = err(e)
            continue
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        children.append(pid)
    say("fork", forks_refused == 0, f"{len(children)} forks succeeded, {forks_refused} refused" + (f" ({last})" if forks_refused else ""))
    print(f"BOMB holding {got} threads and {len(children)} processes", flush=True)
    time.sleep(float(hold_s))
    for pid in children:
        os.kill(pid, signal.SIGKILL)


def probe_memory(bound_mib, progress, hold_s="0"):
    """Allocate and touch memory without end (stopped at `bound_mib`); then
    keep what it got and touch it again every second for `hold_s` seconds (a guest that keeps
    pressing on memory)."""
    chunks, got = [], 0
    with open(progress, "a") as log:
        try:
            while got < int(bound_mib):
                chunks.append(bytearray(b"\x01" * (32 << 20)))
                got += 32
                log.write(f"{got}\n")
                log.flush()
            say("allocate", True, f"{got} MiB allocated and touched, nothing stopped it")
        except MemoryError:
            say("allocate", False, f"MemoryError at {got} MiB")
    end = time.monotonic() + float(hold_s)
    while time.monotonic() < end:
        for c in chunks:
            for off in range(0, len(c), 4096):
                c[off] = 2
        time.sleep(1)


def probe_disk(bound_mib):
    """Fill the work directory as fast as it can, towards `bound_mib`: 128-MiB files,
    preallocated in one call while that is allowed, else written 1 MiB at a time. The
    bytes are zeros: the guest's file system allocates a block for each all the same
    (what the agent's disk guard counts), and the VM's host keeps them as zero clusters
    rather than 4 GiB of data (scripts/vm/run.sh)."""
    got, i, prealloc = 0, 0, True
    block = bytes(1 << 20)
    try:
        while got < int(bound_mib):
            fd = os.open(f"fill-{i:04d}", os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                os.write(fd, block)
                if prealloc:
                    try:
                        os.posix_fallocate(fd, 0, 128 << 20)
                    except OSError as e:
                        prealloc = False
                        print(f"PREALLOC refused ({err(e)}): writing instead", flush=True)
                if not prealloc:
                    for _ in range(127):
                        os.write(fd, block)
            finally:
                os.close(fd)
            got, i = got + 128, i + 1
            print(f"DISK {got} MiB", flush=True)
        say("fill", True, f"{got} MiB in the work directory, nothing stopped it")
    except OSError as e:
        say("fill", False, f"refused at {got} MiB: {err(e)}")


def probe_stdout(mib):
    """Write without end to stdout (stopped at `mib`)."""
    block, done = b"x" * ((1 << 20) - 1) + b"\n", 0
    try:
        for done in range(1, int(mib) + 1):
            sys.stdout.buffer.write(block)
        sys.stdout.flush()
        sys.stderr.write(f"PROBE stdout REACHED wrote {done} MiB to stdout\n")
    except OSError as e:
        sys.stderr.write(f"PROBE stdout REFUSED after {done} MiB: {err(e)}\n")
    sys.stderr.write("HOSTILE DONE stdout\n")
    sys.stderr.flush()


def probe_tcp(*targets):
    """TCP connections to this machine's services and outward."""
    for target in targets:
        host, port = target.rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=5) as s:
                s.settimeout(3)
                try:
                    banner = s.recv(64)
                except OSError:
                    banner = b""
            say(f"tcp-{target}", True, f"connected{'; got ' + repr(banner[:40]) if banner else ''}")
        except OSError as e:
            say(f"tcp-{target}", False, err(e))


def probe_read(*roots):
    """Every file under each root: opened and read (the guest's own work directory
    excepted). One line per root, naming up to 10 files it could read."""
    own = os.path.realpath(os.getcwd())
    for root in roots:
        if not os.path.isdir(root):
            try:
                with open(root, "rb") as f:
                    f.read(1)
                say(f"read-{root}", True, "read")
            except OSError as e:
                say(f"read-{root}", False, err(e))
            continue
        readable, denied, listed = [], 0, 0
        for dirpath, dirnames, filenames in os.walk(root, onerror=lambda e: None):
            if os.path.realpath(dirpath).startswith(own):
                dirnames[:] = []
                continue
            listed += 1
            for name in filenames:
                path = os.path.join(dirpath, name)
                try:
                    with open(path, "rb") as f:
                        f.read(1)
                    readable.append(path)
                except OSError:
                    denied += 1
        if not readable and not listed:
            try:
                os.listdir(root)
            except OSError as e:
                say(f"read-{root}", False, f"cannot list: {err(e)}")
                continue
        say(f"read-{root}", bool(readable), f"{len(readable)} files read, {denied} refused, {listed} directories listed: {readable[:10]}")


def probe_write(marker, *dirs):
    """Create a file in each directory (and append to each file named) outside the work
    directory; then one inside it, which must work."""
    for target in dirs:
        try:
            if os.path.isdir(target):
                path = os.path.join(target, marker)
                with open(path, "x") as f:
                    f.write("written by a guest\n")
                say(f"write-{target}", True, f"created {path}")
            else:
                with open(target, "a") as f:
                    f.write(f"\n# {marker}\n")
                say(f"write-{target}", True, "appended")
        except OSError as e:
            say(f"write-{target}", False, err(e))
    with open(marker, "x") as f:
        f.write("inside the work directory\n")
    print(f"OWN-WORKDIR-WRITE ok {os.getcwd()}", flush=True)


PROBES = {
    "socket": probe_socket,
    "proc": probe_proc,
    "signal": probe_signal,
    "ptrace": probe_ptrace,
    "daemon": probe_daemon,
    "forkbomb": probe_forkbomb,
    "memory": probe_memory,
    "disk": probe_disk,
    "stdout": probe_stdout,
    "tcp": probe_tcp,
    "read": probe_read,
    "write": probe_write,
}

if __name__ == "__main__":
    name, args = sys.argv[1], sys.argv[2:]
    # The stdout probe's own lines go to stderr: its stdout is the flood.
    # The work directory as the guest sees it (its sandbox may show it as /work), and a
    # mark file in it by which the bench finds it from the host's side.
    mark = f".lull-vm-workdir-{os.getpid()}-{time.time_ns()}"
    try:
        open(mark, "x").close()
    except OSError:
        mark = "none"
    start = f"HOSTILE START {name} uid={os.getuid()} pid={os.getpid()} cwd={os.getcwd()} mark={mark}"
    print(start, file=sys.stderr if name == "stdout" else sys.stdout, flush=True)
    PROBES[name](*args)
    if name != "stdout":
        print(f"HOSTILE DONE {name}", flush=True)
