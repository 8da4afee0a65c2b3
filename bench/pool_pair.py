#!/usr/bin/python3
"""Pooled Bash hello against bare Bash, paired, for one or more builds.

    bench/pool_pair.py BIN[,BIN...] [ROUNDS]      (GAP=seconds between requests, default 0.02)

Starts one `hexr-sandbox serve` per binary (SANDBOX_POOL=4, DEFAULT_MEMORY_MB=512, a STATE_DIR of its
own), waits for its pools, then runs ROUNDS rounds, interleaved: bare `bash -c 'echo hello'`, then for
each service a pooled `echo hello` over one keep-alive connection and a GET /health (the HTTP round
trip, the floor), GAP apart. Prints each p50, its ratio to bare's p50 and how the requests started
(from the service's log: pooled or cold). Run as root, like the services (bench/results/pool.md).
"""
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "SANDBOX_WARM": "on", "SANDBOX_POOL": "4",
       "SANDBOX_POOL_MEMORY_MB": "4096", "DEFAULT_MEMORY_MB": "512", "SANDBOX_BACKEND": "namespaces"}
BODY = json.dumps({"code": "echo hello", "language": "bash", "timeout": 30, "memory_mb": 512}).encode()


def start(binary: str, k: int):
    work = tempfile.mkdtemp(prefix="hxs-pool-pair-")
    os.chmod(work, 0o755)
    state = os.path.join(work, "state")
    os.mkdir(state, 0o755)
    port = 20000 + (os.getpid() * 7 + k) % 20000
    log = open(os.path.join(work, "log"), "wb")
    proc = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:%d" % port], env=dict(ENV, STATE_DIR=state),
                            stdout=log, stderr=log)
    return proc, port, work


def connect_when_full(port: int) -> http.client.HTTPConnection:
    for _ in range(600):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("GET", "/health")
            pool = json.loads(c.getresponse().read())["pool"]
            if pool["target"] and pool["ready"] == pool["target"]:
                time.sleep(0.5)  # the interpreters reach their FIFO's open
                return c
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit("the pools never filled on port %d" % port)


def main() -> None:
    bins = sys.argv[1].split(",")
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 80
    gap = float(os.environ.get("GAP", "0.02"))
    svcs = [start(b, k) for k, b in enumerate(bins)]
    try:
        conns = [connect_when_full(port) for _, port, _ in svcs]
        bare, pool, health = [], [[] for _ in bins], [[] for _ in bins]
        for _ in range(rounds):
            t0 = time.perf_counter()
            subprocess.run(["/usr/bin/bash", "-c", "echo hello"], stdout=subprocess.PIPE, env={"PATH": "/usr/bin"})
            bare.append(time.perf_counter() - t0)
            for i, c in enumerate(conns):
                time.sleep(gap)
                t0 = time.perf_counter()
                c.request("POST", "/api/v1/exec", body=BODY, headers={"Content-Type": "application/json"})
                res = json.loads(c.getresponse().read())
                pool[i].append(time.perf_counter() - t0)
                assert res.get("stdout") == "hello\n", res
                time.sleep(gap)
                t0 = time.perf_counter()
                c.request("GET", "/health")
                c.getresponse().read()
                health[i].append(time.perf_counter() - t0)
        b50 = statistics.median(bare)
        print("bare p50 %.2f ms" % (b50 * 1e3))
        for i, b in enumerate(bins):
            with open(os.path.join(svcs[i][2], "log")) as f:
                starts = [json.loads(line).get("start") for line in f if line.startswith("{") and '"start"' in line]
            p50 = statistics.median(pool[i])
            print("%s: pooled bash p50 %.2f ms (%.2f x bare), p90 %.2f ms; GET /health p50 %.2f ms; starts %s" %
                  (b, p50 * 1e3, p50 / b50, sorted(pool[i])[int(len(pool[i]) * 0.9)] * 1e3,
                   statistics.median(health[i]) * 1e3, {s: starts.count(s) for s in set(starts) if s}))
    finally:
        for proc, _, work in svcs:
            proc.terminate()
            proc.wait(30)
            subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
