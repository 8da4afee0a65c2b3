#!/usr/bin/python3
"""CPU per cold request: the cold service (SANDBOX_WARM=off) at concurrency 16 against
bubblewrap and the bare interpreter running the same Python hello.

On a machine whose cores are all busy, throughput is cores / CPU per request: this is
the figure the c16 throughput target is made of, measured without the wall clock
(other work on the machine changes wall times, not the CPU a request costs).

- service: `perf stat -e task-clock` of `hexr-sandbox serve` and everything it starts
  (sandboxes included), over a batch of N requests sent 16 at a time, minus the same
  for a batch of 0 (start-up and stop);
- bwrap and bare: perf stat of a shell loop running the program N times (bwrap with
  bench/run.py's BWRAP_FLAGS; the shell's own loop is a little of each).

Prints Markdown. Needs root and perf.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import run  # noqa: E402  (same directory: the bwrap policy, the environment)

HELLO = "print('hello')"
CONCURRENCY = 16


def task_clock(stderr: str) -> float:
    for ln in stderr.splitlines():
        f = ln.split(",")
        if len(f) > 2 and f[2].startswith("task-clock"):
            return float(f[0])
    raise SystemExit("perf stat printed no task-clock: " + stderr[-400:])


def service_cpu(binary: str, n: int) -> float:
    """ms of CPU of the service's whole tree, started, sent n requests, stopped."""
    env = dict(run.CLEAN_ENV, **run.OUR_ENV, SANDBOX_WARM="off")
    p = subprocess.Popen(["perf", "stat", "-x,", "-e", "task-clock", "--", binary, "serve", "--listen", "127.0.0.1:0"],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        port, seen, t0 = None, "", time.time()
        while port is None and time.time() - t0 < 30:
            line = p.stderr.readline()
            seen += line
            m = re.search(r"127\.0\.0\.1:(\d+)", line)
            if m:
                port = int(m.group(1))
        if port is None:
            raise SystemExit("the service did not say where it listens: " + seen[-400:])

        def one(_):
            req = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/exec",
                                         data=json.dumps({"language": "python", "code": HELLO}).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=60) as r:
                out = json.loads(r.read())
            if out.get("stdout") != "hello\n":
                raise SystemExit(f"unexpected result: {out}")

        with ThreadPoolExecutor(CONCURRENCY) as ex:
            list(ex.map(one, range(n)))
    finally:
        # the service is perf's child: stop it, and perf prints its count
        try:
            with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
                for pid in f.read().split():
                    os.kill(int(pid), signal.SIGTERM)
        except (OSError, ValueError):
            p.kill()
    return task_clock(p.communicate(timeout=60)[1])


def loop_cpu(argv: list[str], n: int) -> float:
    script = "i=0; while [ $i -lt %d ]; do %s >/dev/null; i=$((i+1)); done" % (
        n, " ".join("'%s'" % a.replace("'", "'\\''") for a in argv))
    r = subprocess.run(["perf", "stat", "-x,", "-e", "task-clock", "--", "/bin/sh", "-c", script],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600)
    return task_clock(r.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "hexr-sandbox"))
    ap.add_argument("-n", type=int, default=64, help="requests (and runs) per batch (default 64)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("cpu_per_request.py: run as root", file=sys.stderr)
        return 2
    clean = ["env", "-i"] + [f"{k}={v}" for k, v in run.CLEAN_ENV.items()]
    idle = service_cpu(args.bin, 0)
    svc = (service_cpu(args.bin, args.n) - idle) / args.n
    bwrap = loop_cpu(["bwrap"] + run.BWRAP_FLAGS + ["/usr/bin/python3", "-c", HELLO], args.n) / args.n
    bare = loop_cpu(clean + ["/usr/bin/python3", "-c", HELLO], args.n) / args.n
    print(f"CPU per Python hello, {args.n} each, `{' '.join(['bench/cpu_per_request.py'] + sys.argv[1:])}`, "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("| system | ms CPU per request | / bwrap |\n| --- | ---: | ---: |")
    print(f"| service, cold, c{CONCURRENCY} (start-up and stop, {idle:.0f} ms, subtracted) | {svc:.1f} | "
          f"{svc / bwrap:.2f} |")
    print(f"| bwrap | {bwrap:.1f} | 1.00 |")
    print(f"| bare python3 (no sandbox) | {bare:.1f} | {bare / bwrap:.2f} |")
    print(f"\nOn saturated cores the cold service's c{CONCURRENCY} throughput is about {bwrap / svc:.2f} x "
          f"bwrap's; with no overhead at all (the bare program) it would be {bwrap / bare:.2f} x.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
