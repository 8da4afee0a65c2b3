#!/usr/bin/python3
"""The canonical agent job end to end: a CSV in, a pandas summary, a matplotlib chart
back as a PNG. Through `hexr-sandbox serve` (POST /api/v1/exec with "files"; the chart
comes back from plt.show() as output/figure-1.png, the program saves nothing), cold
(SANDBOX_WARM=off: a fresh interpreter per request) and warm (SANDBOX_WARM=on: forked
from a template that has pandas imported), beside the bare interpreter doing the same
in a temporary directory (it saves the figure itself: it has no charts hook). Every
request's answer is checked (the summary printed, a valid PNG back). Requests go one
at a time, interleaved. Writes bench/results/chart.md.

Run: /usr/bin/python3 bench/chart.py [-n 20] [--binary build/hexr-sandbox]
"""

from __future__ import annotations

import argparse
import base64
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ROWS = 200
CSV = "month,region,amount\n" + "".join(f"{i % 12 + 1},{'NSEW'[i % 4]},{(i * 37) % 101}\n" for i in range(ROWS))
JOB = """\
import pandas as pd
import matplotlib.pyplot as plt
df = pd.read_csv("data/sales.csv")
print(df.groupby("region")["amount"].sum().to_string())
df.groupby("month")["amount"].mean().plot(title="mean amount by month")
plt.show()
"""
# the bare interpreter has no charts hook: it saves the figure where the hook would
BARE_JOB = JOB.replace("plt.show()", "import os\nos.makedirs('output', exist_ok=True)\n"
                                     "plt.savefig('output/figure-1.png')")
SUMS = {r: sum((i * 37) % 101 for i in range(ROWS) if "NSEW"[i % 4] == r) for r in "NSEW"}


def summary_ok(out: str) -> bool:
    got = dict(line.split() for line in out.splitlines()[1:5])
    return out.startswith("region\n") and got == {r: str(v) for r, v in SUMS.items()}


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def png_ok(data: bytes) -> bool:
    return data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000


def run_bare(work: Path) -> float:
    d = Path(tempfile.mkdtemp(dir=work, prefix="bare-"))
    (d / "data").mkdir()
    (d / "data" / "sales.csv").write_text(CSV)
    # one HOME for every bare run: matplotlib's font cache is built once, in the untimed
    # round (the floor; a sandbox's home is fresh each time)
    home = work / "bare-home"
    home.mkdir(exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "MPLBACKEND": "Agg", "LANG": "C.UTF-8"}
    start = time.monotonic()
    p = subprocess.run(["/usr/bin/python3", "-c", BARE_JOB], cwd=d, env=env, capture_output=True, timeout=120)
    took = (time.monotonic() - start) * 1000
    assert p.returncode == 0 and summary_ok(p.stdout.decode()), p
    assert png_ok((d / "output" / "figure-1.png").read_bytes())
    shutil.rmtree(d)
    return took


def run_service(port: int) -> float:
    body = json.dumps({"code": JOB, "language": "python", "timeout": 30,
                       "files": [{"path": "data/sales.csv", "content": CSV}]})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        start = time.monotonic()
        conn.request("POST", "/api/v1/exec", body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        res = json.loads(resp.read())
        took = (time.monotonic() - start) * 1000
    finally:
        conn.close()
    assert resp.status == 200 and res["exit_code"] == 0 and summary_ok(res["stdout"]), res
    files = {f["path"]: f for f in res["files"]}
    assert png_ok(base64.b64decode(files["output/figure-1.png"]["content"])), res["files"]
    return took


class Service:
    def __init__(self, binary: str, work: Path, name: str, warm: bool):
        self.dir = work / name
        self.dir.mkdir(mode=0o755)
        (self.dir / "state").mkdir(mode=0o755)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        env = {"PATH": "/usr/bin:/bin", "STATE_DIR": str(self.dir / "state"), "SANDBOX_BACKEND": "namespaces",
               "SANDBOX_WARM": "on" if warm else "off"}
        self.log = open(self.dir / "serve.log", "wb")
        self.proc = subprocess.Popen([binary, "serve", "--listen", f"127.0.0.1:{self.port}"], env=env,
                                     stdout=self.log, stderr=self.log, start_new_session=True)
        deadline = time.monotonic() + 30
        while b"listening on" not in (self.dir / "serve.log").read_bytes():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError((self.dir / "serve.log").read_text())
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=45)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=str(ROOT / "build" / "hexr-sandbox"))
    ap.add_argument("-n", type=int, default=20)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="hxs-bench-chart-"))
    os.chmod(work, 0o755)
    cold = warm = None
    times: dict[str, list[float]] = {"bare": [], "service, cold": [], "service, warm": []}
    try:
        cold = Service(args.binary, work, "cold", warm=False)
        warm = Service(args.binary, work, "warm", warm=True)
        time.sleep(3)  # the warm templates import pandas
        # one untimed round: page cache, font cache of the bare run's HOME (fresh each time)
        run_bare(work), run_service(cold.port), run_service(warm.port)
        for _ in range(args.n):
            times["bare"].append(run_bare(work))
            times["service, cold"].append(run_service(cold.port))
            times["service, warm"].append(run_service(warm.port))
    finally:
        for s in (cold, warm):
            if s:
                s.stop()
        shutil.rmtree(work, ignore_errors=True)

    bare50 = statistics.median(times["bare"])
    out = ["# A chart job end to end", "",
           f"`/usr/bin/python3 bench/chart.py -n {args.n}`: a {ROWS}-row CSV sent in the request's `files`, "
           "`pandas.read_csv`, a group-by summary printed, a line chart drawn and `plt.show()`; the PNG "
           "comes back in the result's `files` (checked: the summary, a valid PNG). The bare interpreter "
           "does the same in a temporary directory and saves the figure itself. One request at a time, "
           "interleaved; milliseconds, client side.", "",
           "| system | p50 | p99 | max | p50 / bare |", "| --- | ---: | ---: | ---: | ---: |"]
    for name, xs in times.items():
        out.append(f"| {name} | {statistics.median(xs):.0f} ms | {pct(xs, 99):.0f} ms | {max(xs):.0f} ms | "
                   f"{statistics.median(xs) / bare50:.2f} |")
    text = "\n".join(out) + "\n"
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    (ROOT / "bench" / "results" / "chart.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
