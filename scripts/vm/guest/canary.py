#!/usr/bin/env python3
"""The owner's own program for the VM bench's hostile guests to aim at.

`canary.py SECRET SIGNAL_LOG` sleeps with SECRET in its command line (and the owner's
session puts it in its environment as LULL_VM_CANARY), and appends every signal it gets
(TERM, HUP, USR1, USR2, INT) to SIGNAL_LOG instead of dying, so a case can tell from
outside whether a guest reached it.

`canary.py workset FILE MIB ROUNDS_LOG` is an owner program with a working set: it maps
FILE (MIB MiB, made if missing), reads every page once a second, and appends one line per
round to ROUNDS_LOG with its own major page faults so far (from /proc/self/stat), so a
case can count the owner's major faults while a guest presses on memory and while none does.
"""
import mmap
import os
import signal
import sys
import time


def canary(secret, log):
    def note(sig, _frame):
        with open(log, "a") as f:
            f.write(f"{time.time():.1f} {signal.Signals(sig).name}\n")

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGINT):
        signal.signal(sig, note)
    assert secret
    while True:
        time.sleep(3600)


def major_faults():
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[9])


def workset(path, mib, rounds_log):
    size = int(mib) << 20
    if not os.path.exists(path) or os.path.getsize(path) != size:
        with open(path, "wb") as f:
            block = os.urandom(1 << 20)
            for _ in range(int(mib)):
                f.write(block)
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ)
    page = mmap.PAGESIZE
    while True:
        t0 = time.monotonic()
        total = 0
        for off in range(0, size, page):
            total += m[off]
        with open(rounds_log, "a") as log:
            log.write(f"{time.time():.1f} {major_faults()} {time.monotonic() - t0:.2f}\n")
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))


if __name__ == "__main__":
    if sys.argv[1] == "workset":
        workset(*sys.argv[2:5])
    else:
        canary(sys.argv[1], sys.argv[2])
