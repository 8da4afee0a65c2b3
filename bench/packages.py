#!/usr/bin/python3
"""packages=: the first request with one extra package (installed) against the same
request once cached, and a request without packages, on one service in one run.

    /usr/bin/python3 bench/packages.py [--binary build/hexr-sandbox] [-n 15]

Builds its own small pure-Python wheels into a temporary wheelhouse (one per "first"
sample, so each first request really installs), starts `hexr-sandbox serve` on
127.0.0.1 with a temporary package cache, and writes bench/results/packages.md.
Requests run one at a time; ratios are to the request without packages.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def wheel(house: Path, name: str) -> None:
    mod = name.replace("-", "_")
    info = f"{mod}-1.0.dist-info"
    path = house / f"{mod}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{mod}/__init__.py", "VALUE = 42\n")
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    os.chmod(path, 0o644)


def post(port: int, body: dict) -> float:
    t0 = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/api/v1/exec", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    reply = json.loads(r.read())
    c.close()
    dt = (time.monotonic() - t0) * 1000
    assert r.status == 200 and reply["stdout"] == "42\n", reply
    return dt


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=str(ROOT / "build" / "hexr-sandbox"))
    ap.add_argument("-n", type=int, default=15)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="hxs-bench-pkg-"))
    os.chmod(work, 0o755)
    house, state = work / "wheels", work / "state"
    house.mkdir(mode=0o755)
    state.mkdir(mode=0o755)
    for i in range(args.n + 1):
        wheel(house, f"hxs-bench-{i}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"PATH": "/usr/bin:/bin", "STATE_DIR": str(state), "PACKAGES_WHEELHOUSE": str(house),
           "PACKAGES_CACHE_DIR": str(work / "cache")}
    log = open(work / "serve.log", "wb")
    svc = subprocess.Popen([args.binary, "serve", "--listen", f"127.0.0.1:{port}"], env=env,
                           stdout=log, stderr=log, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while b"listening on" not in (work / "serve.log").read_bytes():
            if time.monotonic() > deadline or svc.poll() is not None:
                raise RuntimeError((work / "serve.log").read_text())
            time.sleep(0.05)
        time.sleep(2)  # let the warm templates start, so "none" is the usual warm path
        code = "print(42)"
        imp = "import hxs_bench_{i}; print(hxs_bench_{i}.VALUE)"
        for _ in range(2):  # warm-up: one of each kind
            post(port, {"code": code})
            post(port, {"code": imp.format(i=args.n), "packages": [f"hxs-bench-{args.n}"]})
        none, cold, first, cached = [], [], [], []
        for i in range(args.n):  # interleaved, so drift hits all of them alike
            none.append(post(port, {"code": code}))
            # a PYTHON* variable makes a request start cold, as one with installed packages does
            cold.append(post(port, {"code": code, "env_vars": {"PYTHONHASHSEED": "0"}}))
            first.append(post(port, {"code": imp.format(i=i), "packages": [f"hxs-bench-{i}"]}))
            cached.append(post(port, {"code": imp.format(i=args.n), "packages": [f"hxs-bench-{args.n}"]}))
    finally:
        svc.send_signal(signal.SIGTERM)
        try:
            svc.wait(timeout=45)
        except subprocess.TimeoutExpired:
            svc.kill()
            svc.wait()
        log.close()
        shutil.rmtree(work, ignore_errors=True)

    p50 = statistics.median
    base = p50(none)
    rows = [("no packages (warm)", none), ("no packages, cold", cold),
            ("one extra package, first request (installs)", first),
            ("one extra package, cached", cached)]
    out = ["# packages=: first and cached request with one extra package", "",
           f"`/usr/bin/python3 bench/packages.py -n {args.n}`: one service (warm starts on), "
           "requests one at a time, interleaved; client-side latency.", "",
           "| request | p50 | p90 | × no packages |", "| --- | ---: | ---: | ---: |"]
    for name, xs in rows:
        p90 = sorted(xs)[int(0.9 * (len(xs) - 1))]
        out.append(f"| {name} | {p50(xs):.0f} ms | {p90:.0f} ms | {p50(xs) / base:.2f} × |")
    text = "\n".join(out) + "\n"
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    (ROOT / "bench" / "results" / "packages.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
