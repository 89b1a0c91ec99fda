#!/usr/bin/env python3
"""The VM bench's view of the owner's pool (run by root in the guest): the coordinator's
HTTP API with the admin key `lull up` wrote, so that waiting for a job costs one process
polling, not a `lull` command a second.

  pool.py DATA_DIR wait JOB SECONDS   until the job ends; prints its state (exit 1 if not)
  pool.py DATA_DIR output JOB         what its guest wrote: stdout, then stderr
  pool.py DATA_DIR exit JOB           the exit status the pool recorded
  pool.py DATA_DIR cancel JOB         cancels it (a case's clean-up)
"""
import json
import os
import sys
import time
import urllib.error
import urllib.request


def call(data_dir, method, path):
    with open(os.path.join(data_dir, "coordinator.url")) as f:
        url = f.read().strip()
    with open(os.path.join(data_dir, "coordinator-admin.key")) as f:
        key = f.read().strip()
    req = urllib.request.Request(url + path, method=method, headers={"Authorization": f"Bearer {key}"})
    if method == "POST":
        req.data = b"{}"
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read() or b"null")


def main(data_dir, verb, job, seconds="0"):
    if verb == "wait":
        end, state = time.monotonic() + float(seconds), "unknown"
        while time.monotonic() < end:
            try:
                state = call(data_dir, "GET", f"/api/v1/jobs/{job}")["state"]
            except (OSError, urllib.error.URLError, KeyError, ValueError) as e:
                state = f"unknown ({e})"
            if state in ("completed", "failed", "cancelled"):
                print(state)
                return 0
            time.sleep(0.5)
        print(state)
        return 1
    if verb in ("output", "exit"):
        tasks = call(data_dir, "GET", f"/api/v1/jobs/{job}/output").get("tasks", [])
        for t in tasks:
            if verb == "exit":
                print("" if t.get("exit_code") is None else t["exit_code"])
                continue
            out = t.get("output") or {}
            sys.stdout.write(out.get("stdout", ""))
            sys.stdout.write(out.get("stderr", ""))
        return 0
    if verb == "cancel":
        try:
            call(data_dir, "POST", f"/api/v1/jobs/{job}/cancel")
        except urllib.error.HTTPError as e:
            print(f"cancel: {e}", file=sys.stderr)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
