#!/usr/bin/python3
"""Sessions against fresh executions, through one service on this machine.

  /usr/bin/python3 bench/sessions.py [-n RUNS] [--sessions K] [--out bench/results/sessions.md]

Measures (p50, p90 over RUNS, interleaved):
  - a small cell (`1 + 1`): its round trip in a live session, against POST /api/v1/exec
    of the same code (warm templates on, as the service runs by default);
  - a follow-up on a loaded DataFrame: in a session the DataFrame is built once and each
    cell asks one question of it; the exec has to build it every time;
  - memory per idle Python session: K sessions started and left idle, their sandboxes'
    memory cgroups read (what the host pays per session), after a `import pandas` cell
    and without.
The service runs from $HEXR_SANDBOX_BIN (default build/hexr-sandbox) with a STATE_DIR of
its own, and is stopped at the end.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "lib"))

from hxstest.client import http_request  # noqa: E402
from hxstest.service import launch, safe_rmtree  # noqa: E402

SMALL = "1 + 1"
LOAD = "import pandas as pd, numpy as np\ndf = pd.DataFrame({'a': np.arange(2_000_000), 'b': np.arange(2_000_000) % 7})\n"
QUESTION = "int(df[df.b == 3].a.sum())"


def post(url, path, body):
    t0 = time.perf_counter()
    status, _, res = http_request(url, "POST", path, body, timeout=120)
    ms = (time.perf_counter() - t0) * 1000
    assert status in (200, 201), (status, res)
    return ms, res


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def row(name, xs):
    return f"| {name} | {pct(xs, 50):.1f} ms | {pct(xs, 90):.1f} ms | {len(xs)} |"


def session_memory(pid: int) -> list:
    """Bytes each of the instance's sandboxes' memory cgroups holds now."""
    out = []
    for base in glob.glob("/sys/fs/cgroup/**/hexr-sandbox", recursive=True):
        for d in glob.glob(os.path.join(base, f"s{pid}.*-*")):
            for name in ("memory.current", "memory.usage_in_bytes"):
                p = os.path.join(d, name)
                if os.path.exists(p):
                    out.append(int(open(p).read()))
                    break
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=30)
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "sessions.md"))
    a = ap.parse_args()
    top = tempfile.mkdtemp(prefix="hxs-bench-sessions-")
    os.chmod(top, 0o755)
    state = os.path.join(top, "state")
    os.mkdir(state, 0o755)
    svc = launch({"STATE_DIR": state, "SANDBOX_BACKEND": "namespaces", "MAX_SESSIONS": "64",
                  "MAX_SESSIONS_PER_CALLER": "64", "MAX_EXECUTION_TIME": "120s"}, None)
    url = svc.url
    try:
        time.sleep(2)  # the warm templates
        ms, s = post(url, "/api/v1/sessions", {"language": "python", "memory_mb": 512})
        create = [ms]
        sid = s["id"]
        cell = lambda code: post(url, f"/api/v1/sessions/{sid}/exec", {"code": code})  # noqa: E731
        execp = lambda code: post(url, "/api/v1/exec", {"code": code, "memory_mb": 512})  # noqa: E731
        cell(LOAD)
        small_s, small_e, follow_s, follow_e = [], [], [], []
        for _ in range(a.n):
            small_s.append(cell(SMALL)[0])
            small_e.append(execp("print(" + SMALL + ")")[0])
            ms, r = cell(QUESTION)
            assert r["status"] == "ok", r
            follow_s.append(ms)
            follow_e.append(execp(LOAD + "print(" + QUESTION + ")")[0])
        for _ in range(4):
            ms, s2 = post(url, "/api/v1/sessions", {"language": "python"})
            create.append(ms)
            http_request(url, "DELETE", f"/api/v1/sessions/{s2['id']}")
        http_request(url, "DELETE", f"/api/v1/sessions/{sid}")
        time.sleep(1)
        # memory per idle session
        ids = [post(url, "/api/v1/sessions", {"language": "python"})[1]["id"] for _ in range(a.sessions)]
        time.sleep(1)
        bare = session_memory(svc.proc.pid)
        for i in ids:
            post(url, f"/api/v1/sessions/{i}/exec", {"code": "import pandas as pd"})
        time.sleep(1)
        with_pandas = session_memory(svc.proc.pid)
        for i in ids:
            http_request(url, "DELETE", f"/api/v1/sessions/{i}")
    finally:
        svc.stop()
        safe_rmtree(top)
    mib = lambda xs: statistics.mean(xs) / (1 << 20) if xs else float("nan")  # noqa: E731
    lines = [
        "# Sessions against fresh executions",
        "",
        f"`/usr/bin/python3 bench/sessions.py -n {a.n} --sessions {a.sessions}`, {time.strftime('%d %b %Y')},"
        f" {os.cpu_count()} CPUs; one service (namespaces backend, warm templates on), requests one at a time.",
        "",
        "| what | p50 | p90 | runs |",
        "| --- | ---: | ---: | ---: |",
        row("small cell in a live session (`1 + 1`)", small_s),
        row("the same as a fresh `exec`", small_e),
        row("follow-up on a loaded 2M-row DataFrame, in the session", follow_s),
        row("the same as a fresh `exec` (builds the DataFrame again)", follow_e),
        row("POST /api/v1/sessions (answered once the driver is ready)", create),
        "",
        f"Memory per idle Python session (its sandbox's memory cgroup, mean of {a.sessions}):"
        f" {mib(bare):.1f} MiB just started, {mib(with_pandas):.1f} MiB after `import pandas`.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
