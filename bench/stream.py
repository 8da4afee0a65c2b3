#!/usr/bin/python3
"""Streaming and uploads through `hexr-sandbox serve`: the time from a program's first
write to its first event at the client (Accept: text/event-stream), and the throughput
of a multipart upload (a file streamed into the sandbox, its size printed back).

The program prints the wall clock (CLOCK_REALTIME, the same clock inside a namespace
sandbox) at the moment it writes; the client subtracts it from the time it read the
event, so the figure is the service's streaming path alone, without the sandbox's
start. Writes bench/results/stream.md.

Run: /usr/bin/python3 bench/stream.py [-n 30] [--upload-mib 50]
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
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def first_event_ms(port: int, code: str, language: str) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", "/api/v1/exec", body=json.dumps({"code": code, "language": language}),
                     headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
        resp = conn.getresponse()
        assert resp.status == 200, resp.status
        for raw in resp:
            line = raw.decode()
            if line.startswith("data: ") and '"text"' in line:
                now = time.time_ns()
                printed = int(json.loads(line[6:])["text"].split()[0])
                for _ in resp:  # read to the end, so the next one starts on a free slot
                    pass
                return (now - printed) / 1e6
        raise AssertionError("no stdout event")
    finally:
        conn.close()


def upload_mib_s(port: int, mib: int) -> float:
    boundary = "hxs" + uuid.uuid4().hex
    block = os.urandom(1 << 20)
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"request\"\r\n\r\n"
            + json.dumps({"code": "import os; print(os.path.getsize('big.bin'))", "timeout": 30})
            + f"\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"big.bin\"\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        start = time.monotonic()
        conn.putrequest("POST", "/api/v1/exec")
        conn.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
        conn.putheader("Content-Length", str(len(head) + mib * len(block) + len(tail)))
        conn.endheaders()
        conn.send(head)
        for _ in range(mib):
            conn.send(block)
        conn.send(tail)
        resp = conn.getresponse()
        res = json.loads(resp.read())
        took = time.monotonic() - start
        assert resp.status == 200 and res["stdout"] == f"{mib << 20}\n", res
        return mib / took
    finally:
        conn.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=str(ROOT / "build" / "hexr-sandbox"))
    ap.add_argument("-n", type=int, default=30)
    ap.add_argument("--upload-mib", type=int, default=50)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="hxs-bench-stream-"))
    os.chmod(work, 0o755)
    (work / "state").mkdir(mode=0o755)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"PATH": "/usr/bin:/bin", "STATE_DIR": str(work / "state"),
           "SANDBOX_TMPFS_MB": str(max(64, args.upload_mib * 2)),
           "MAX_FILE_BYTES": f"{max(64, args.upload_mib + 1)}M",
           "MAX_FILES_BYTES": f"{max(128, args.upload_mib + 1)}M"}
    log = open(work / "serve.log", "wb")
    svc = subprocess.Popen([args.binary, "serve", "--listen", f"127.0.0.1:{port}"], env=env,
                           stdout=log, stderr=log, start_new_session=True)
    py = "import time, sys\nsys.stdout.write(f'{time.time_ns()} \\n'); sys.stdout.flush()\ntime.sleep(0.2)"
    js = "process.stdout.write(`${BigInt(Date.now()) * 1000000n} \\n`); setTimeout(() => {}, 200)"
    sh = "echo \"$(date +%s%N) \"; sleep 0.2"
    try:
        deadline = time.monotonic() + 30
        while b"listening on" not in (work / "serve.log").read_bytes():
            if time.monotonic() > deadline or svc.poll() is not None:
                raise RuntimeError((work / "serve.log").read_text())
            time.sleep(0.05)
        time.sleep(2)  # the warm templates
        rows = []
        for name, code, lang in [("Python", py, "python"), ("JavaScript", js, "javascript"), ("Bash", sh, "bash")]:
            first_event_ms(port, code, lang)  # warm-up
            xs = sorted(first_event_ms(port, code, lang) for _ in range(args.n))
            rows.append((name, xs))
        up = []
        if args.upload_mib:  # 0: streaming only
            upload_mib_s(port, 1)  # warm-up
            up = sorted(upload_mib_s(port, args.upload_mib) for _ in range(3))
    finally:
        svc.send_signal(signal.SIGTERM)
        try:
            svc.wait(timeout=45)
        except subprocess.TimeoutExpired:
            svc.kill()
            svc.wait()
        log.close()
        shutil.rmtree(work, ignore_errors=True)

    out = ["# Streaming and uploads", "",
           f"`/usr/bin/python3 bench/stream.py -n {args.n} --upload-mib {args.upload_mib}`: one service, "
           "requests one at a time.", "",
           "Time from the program's first write to its stdout event read by the client:", "",
           "| language | p50 | p90 | max |", "| --- | ---: | ---: | ---: |"]
    for name, xs in rows:
        out.append(f"| {name} | {statistics.median(xs):.2f} ms | {xs[int(0.9 * (len(xs) - 1))]:.2f} ms | {xs[-1]:.2f} ms |")
    if up:
        out += ["", f"Multipart upload of {args.upload_mib} MiB into the sandbox, end to end (the "
                f"program prints its size): median {statistics.median(up):.0f} MiB/s over 3 runs "
                f"({up[0]:.0f} to {up[-1]:.0f})."]
    text = "\n".join(out) + "\n"
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    (ROOT / "bench" / "results" / "stream.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
