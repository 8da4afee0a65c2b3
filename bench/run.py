#!/usr/bin/python3
"""Side-by-side latency, throughput and memory benchmark for hexr-sandbox.

Runs the same code, in one session on one machine, through:

  bare      the interpreter itself (/usr/bin/python3 -c, node -e, bash -c): the floor
  bwrap     bubblewrap with a policy comparable to ours (see BWRAP_FLAGS)
  firejail  firejail with a policy as close as it works as root (see FIREJAIL_FLAGS)
  cli       `hexr-sandbox exec` (cold: a new sandbox per request)
  service   `hexr-sandbox serve`, POST /api/v1/exec over HTTP on 127.0.0.1 (cold)
  ...       one more system per entry of SERVICE_CONFIGS (e.g. a warm-start service)

and writes report.md, latency.png and raw.json to --out (default bench/results/).
Absolute times on a shared VM mean little; the ratios within one run are the point.

Standard library only, plus matplotlib for the chart (skipped if missing).
Run with Debian's /usr/bin/python3. See bench/README.md.
"""
from __future__ import annotations

import argparse
import datetime
import http.client
import json
import math
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

# --------------------------------------------------------------------------------------
# What runs the code

INTERP = {
    "python": ["/usr/bin/python3", "-c"],
    "javascript": ["/usr/bin/node", "-e"],
    "bash": ["/usr/bin/bash", "-c"],
}

# bubblewrap, a policy comparable to hexr-sandbox's: every namespace (user, pid, net,
# ipc, uts, cgroup), unprivileged uid 1000, read-only /usr, only the /etc entries the
# runtimes need (ours synthesizes /etc and binds the same few), private /tmp, own /proc
# and a minimal /dev, a clean environment, killed with its parent, new session (no
# TIOCSTI). No resource limits: bwrap has none of its own.
BWRAP_FLAGS = [
    "--unshare-all", "--unshare-user", "--uid", "1000", "--gid", "1000",
    "--die-with-parent", "--new-session",
    "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp",
    "--setenv", "LANG", "C.UTF-8", "--setenv", "MPLBACKEND", "Agg",
    "--ro-bind", "/usr", "/usr",
    "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
    "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin",
    "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
    "--ro-bind-try", "/etc/alternatives", "/etc/alternatives",
    "--ro-bind-try", "/etc/python3", "/etc/python3",
    "--ro-bind-try", "/etc/python3.11", "/etc/python3.11",
    "--ro-bind-try", "/etc/ssl", "/etc/ssl",
    "--ro-bind-try", "/etc/localtime", "/etc/localtime",
    "--ro-bind-try", "/etc/matplotlibrc", "/etc/matplotlibrc",
    "--ro-bind-try", "/etc/fonts", "/etc/fonts",
    "--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev", "--chdir", "/tmp",
]

# firejail as root, without a profile: no network, empty private home, private /tmp
# and /dev, no capabilities, no_new_privs, firejail's default seccomp filter. (As root
# the program still runs as uid 0: firejail runs it as the invoking user; --noroot is
# accepted but does not change that here.)
FIREJAIL_FLAGS = [
    "--quiet", "--noprofile", "--net=none", "--private", "--private-tmp", "--private-dev",
    "--caps.drop=all", "--nonewprivs", "--seccomp",
]

# Settings of our CLI and service for the whole run. MAX_OUTPUT_BYTES is raised so the
# 10 MB output row is captured whole (the default 1M would truncate it); the cap only
# bounds a buffer that grows as output arrives, so it costs the other rows nothing.
OUR_ENV = {
    # the namespace backend (bench/vm.py measures the microVM one): on a KVM host with a
    # built guest image, auto would pick qemu
    "SANDBOX_BACKEND": "namespaces",
    "MAX_CONCURRENT": "16",
    "MAX_QUEUE": "256",
    "MAX_OUTPUT_BYTES": "16M",
    "QUEUE_TIMEOUT": "60s",
}
# Every system gets the same small environment, the one our sandbox gives its programs.
# The host's matters: e.g. NODE_EXTRA_CA_CERTS, set on this machine, makes every node
# start-up parse the CA bundle (+80 ms CPU), which a sandbox that clears the
# environment never pays.
CLEAN_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", "MPLBACKEND": "Agg"}
TIMEOUT_S = 30      # per-request time limit asked of our sandbox
MEMORY_MB = 512     # per-request memory limit asked of our sandbox

# Service configurations: (system name, extra environment for `hexr-sandbox serve`).
# One service is started per entry; another is one line here, or
# `--service-config NAME:VAR=VAL` on the command line. An entry naming a variable the
# binary does not list in its --help is skipped (and reported n/a), so this file works
# with builds from before warm starts (SANDBOX_WARM) as well as after.
SERVICE_CONFIGS = [
    ("service", {"SANDBOX_WARM": "off"}),      # cold: a fresh interpreter per request
    ("service-warm", {"SANDBOX_WARM": "on"}),  # warm: Python forked from a pre-initialised template
    # warm, and pre-started single-use sandboxes of each kind (Python from each warm
    # template, JavaScript, Bash): they serve requests of DEFAULT_MEMORY_MB only, so that
    # is the memory_mb asked here. The pools hold at most SANDBOX_POOL_MEMORY_MB and a
    # quarter of MEMORY_BUDGET_MB (counted by their memory_mb, not what they use, about
    # 3 MiB each): 4 kinds x 4 x 512 MB, so that the 4 per kind asked for are kept (a
    # concurrency-1 cell sends a system blocks of 5 requests back to back)
    ("service-pool", {"SANDBOX_WARM": "on", "SANDBOX_POOL": "4", "SANDBOX_POOL_MEMORY_MB": "8192",
                      "DEFAULT_MEMORY_MB": str(MEMORY_MB), "MEMORY_BUDGET_MB": "32768"}),
]
WARM_SYSTEM = "service-warm"   # the system the warm-start targets are read from

# --------------------------------------------------------------------------------------
# Workloads

PANDAS_CODE = ("import pandas as pd\n"
               "df = pd.DataFrame({'x': [1, 2, 3], 'y': [4, 5, 6]})\n"
               "print(df.describe())")

NUMPY_CODE = """\
import numpy as np
import scipy.linalg
rng = np.random.default_rng(0)
a = rng.standard_normal((300, 300)) + 300 * np.eye(300)
b = rng.standard_normal(300)
x = scipy.linalg.solve(a, b)
spec = np.fft.rfft(rng.standard_normal(1 << 20))
print("residual %.1e fft0 %.3f" % (np.abs(a @ x - b).max(), abs(spec[0])))
"""

OUTPUT_BYTES = 10 * 1024 * 1024
OUTPUT_CODE = "import sys\nsys.stdout.write(('x' * 1023 + '\\n') * 10240)\n"

# A chart as a model writes it. matplotlib's font cache lives in HOME: the sandboxes
# (ours, bwrap's and firejail's private /tmp) build it on every run, bare only once.
CHART_CODE = """\
import os
import matplotlib.pyplot as plt
plt.plot([1, 2])
path = os.path.expanduser("~/chart-%d.png" % os.getpid())
plt.savefig(path)
print("png", open(path, "rb").read(4) == b"\\x89PNG", os.path.getsize(path) > 1000)
os.unlink(path)
"""

CPU_N = 12_000_000
CPU_CODE = f"s = 0\nfor i in range({CPU_N}):\n    s += i % 7\nprint(s)\n"
CPU_EXPECT = str(sum(i % 7 for i in range(7)) * (CPU_N // 7) + sum(range(CPU_N % 7)))

# name: (language, code, check(stdout bytes) -> bool, light?)
WORKLOADS = {
    "hello-python": ("python", "print('hello')", lambda o: o == b"hello\n", True),
    "hello-javascript": ("javascript", "console.log('hello')", lambda o: o == b"hello\n", True),
    "hello-bash": ("bash", "echo hello", lambda o: o == b"hello\n", True),
    "pandas-describe": ("python", PANDAS_CODE,
                        lambda o: b"count" in o and b"max" in o and b"6.0" in o, False),
    "numpy-scipy": ("python", NUMPY_CODE, lambda o: o.startswith(b"residual "), False),
    "matplotlib-chart": ("python", CHART_CODE, lambda o: o == b"png True True\n", False),
    "output-10mb": ("python", OUTPUT_CODE, lambda o: len(o) == OUTPUT_BYTES, False),
    "cpu-loop": ("python", CPU_CODE, lambda o: o.strip() == CPU_EXPECT.encode(), False),
}

# requests per (system, workload, concurrency) cell
PLAN_FULL = {True: {1: 30, 4: 48, 16: 96}, False: {1: 16, 4: 8}}
PLAN_QUICK = {True: {1: 6, 16: 16}, False: {1: 2}}
WARMUP = {"full": 2, "quick": 1}  # untimed requests per (system, workload); the last one takes peak RSS
# The mixed load and the burst are one batch each; a full run repeats them and reports
# the median batch (a VM's neighbours can take a core away for part of one)
ADMISSION_REPEATS = {"full": 3, "quick": 1}

# --------------------------------------------------------------------------------------
# Small helpers


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def pct(xs: list[float], p: float) -> float:
    """Percentile by linear interpolation between closest ranks."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    k = (len(s) - 1) * p / 100.0
    f = math.floor(k)
    c = min(f + 1, len(s) - 1)
    return s[f] + (s[c] - s[f]) * (k - f)


def cmd_out(argv: list[str]) -> str:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        return (r.stdout or r.stderr).strip().splitlines()[0]
    except Exception as e:  # noqa: BLE001 - a version string is best effort
        return f"? ({e.__class__.__name__})"


TIME_BIN = "/usr/bin/time"  # GNU time, for peak RSS (Debian package `time`)


# --------------------------------------------------------------------------------------
# Systems


class Result:
    __slots__ = ("lat", "ok", "rss_kb", "mem_mb", "server_ms", "parse_ms", "err")

    def __init__(self, lat, ok, rss_kb=None, mem_mb=None, server_ms=None, parse_ms=None, err=None):
        self.lat, self.ok, self.rss_kb, self.mem_mb = lat, ok, rss_kb, mem_mb
        self.server_ms, self.parse_ms, self.err = server_ms, parse_ms, err


class SubprocessSystem:
    """Runs each request as a child process: bare, bwrap, firejail, our CLI."""

    def __init__(self, name: str, prefix: list[str], env: dict | None = None, cli: str | None = None,
                 rss_visible: bool = True):
        self.name, self.prefix, self.cli = name, prefix, cli
        self.rss_visible = rss_visible
        self.env = {**CLEAN_ENV, **(env or {})}

    def argv(self, lang: str, code: str) -> list[str]:
        if self.cli:
            return [self.cli, "exec", "-l", lang, "-t", str(TIMEOUT_S), "-m", str(MEMORY_MB), "-c", code]
        return self.prefix + INTERP[lang] + [code]

    def describe(self, lang: str = "python") -> str:
        argv = self.argv(lang, "CODE")
        if self.cli:
            env = " ".join(f"{k}={v}" for k, v in OUR_ENV.items())
            argv = [env, "hexr-sandbox"] + argv[1:]
        return "env -i " + " ".join(f"{k}={v}" for k, v in CLEAN_ENV.items()) + " " + " ".join(argv)

    def run(self, lang: str, code: str, check, measure_rss: bool = False) -> Result:
        """One request. With measure_rss, under `/usr/bin/time -f %M`: the peak RSS of
        the largest single process of the request's tree (what wait4 reports). Not
        done on timed requests: it adds a process, and ru_maxrss of a child forked
        from this Python process would count this process's pages until its exec."""
        argv = self.argv(lang, code)
        rss_file = None
        if measure_rss and self.rss_visible and os.access(TIME_BIN, os.X_OK):
            fd, rss_file = tempfile.mkstemp(prefix="hxs-bench-rss-")
            os.close(fd)
            argv = [TIME_BIN, "-f", "%M", "-o", rss_file] + argv
        t0 = time.perf_counter()
        try:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=self.env, cwd="/tmp")
            try:
                out, err = p.communicate(timeout=TIMEOUT_S + 30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
                return Result(time.perf_counter() - t0, False, err="timeout")
            # the output as text, as the service hands it over: the same work on both sides
            out.decode("utf-8", "replace")
            lat = time.perf_counter() - t0
            rss = None
            if rss_file:
                with open(rss_file) as f:
                    m = re.findall(r"^(\d+)$", f.read(), re.M)
                rss = int(m[-1]) if m else None
        except OSError as e:
            return Result(time.perf_counter() - t0, False, err=str(e))
        finally:
            if rss_file:
                os.unlink(rss_file)
        ok = p.returncode == 0 and check(out)
        return Result(lat, ok, rss_kb=rss,
                      err=None if ok else f"rc={p.returncode} out={out[:80]!r} err={err[:200]!r}")

    def close(self):
        pass


class Service:
    """One `hexr-sandbox serve` on a free 127.0.0.1 port; always stopped by stop()."""

    def __init__(self, name: str, binary: str, env: dict, logdir: str):
        self.name, self.binary, self.extra_env = name, binary, env
        self.proc = None
        self.port = None
        self.logpath = os.path.join(logdir, f"{name}.log")
        self.logf = None
        self.idle_rss_kb = None
        self.idle_pss_kb = None
        self.settle_s = None

    def start(self) -> None:
        # port 0: the kernel picks a free port, the service prints which
        self.port = None
        env = {**CLEAN_ENV, **OUR_ENV, **self.extra_env}
        self.logf = open(self.logpath, "wb")
        self.proc = subprocess.Popen([self.binary, "serve", "--listen", "127.0.0.1:0"],
                                     stdin=subprocess.DEVNULL, stdout=self.logf, stderr=self.logf,
                                     env=env, start_new_session=True)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; see {self.logpath}")
            if self.port is None:
                with open(self.logpath, "rb") as f:
                    m = re.search(rb"listening on 127\.0\.0\.1:(\d+)", f.read())
                if not m:
                    time.sleep(0.05)
                    continue
                self.port = int(m.group(1))
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/health")
                r = c.getresponse()
                r.read()
                c.close()
                if r.status == 200:
                    self.settle_s = wait_idle(self.proc.pid, timeout=30)
                    self.idle_rss_kb, self.idle_pss_kb = proc_mem(self.proc.pid)
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not answer /health within 15 s; see {self.logpath}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            except ProcessLookupError:
                pass
        if self.logf:
            self.logf.close()
            self.logf = None


class ServiceSystem:
    """POST /api/v1/exec over one keep-alive HTTP connection per client thread."""

    def __init__(self, svc: Service):
        self.svc = svc
        self.name = svc.name
        self.local = threading.local()

    def describe(self, lang: str = "python") -> str:
        env = " ".join(f"{k}={v}" for k, v in {**CLEAN_ENV, **OUR_ENV, **self.svc.extra_env}.items())
        return (f"env -i {env} hexr-sandbox serve --listen 127.0.0.1:0; POST /api/v1/exec "
                f'{{"code": CODE, "language": "{lang}", "timeout": {TIMEOUT_S}, "memory_mb": {MEMORY_MB}}}')

    def _conn(self) -> http.client.HTTPConnection:
        c = getattr(self.local, "conn", None)
        if c is None:
            c = http.client.HTTPConnection("127.0.0.1", self.svc.port, timeout=TIMEOUT_S + 30)
            self.local.conn = c
        return c

    def run(self, lang: str, code: str, check, measure_rss: bool = False) -> Result:
        body = json.dumps({"code": code, "language": lang, "timeout": TIMEOUT_S,
                           "memory_mb": MEMORY_MB}).encode()
        t0 = time.perf_counter()
        try:
            c = self._conn()
            c.request("POST", "/api/v1/exec", body=body, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            data = r.read()
            status = r.status
        except (OSError, http.client.HTTPException) as e:
            getattr(self.local, "conn", None) and self.local.conn.close()
            self.local.conn = None
            return Result(time.perf_counter() - t0, False, err=f"{e.__class__.__name__}: {e}")
        t_parse = time.perf_counter()
        try:
            res = json.loads(data)
        except ValueError:
            res = {}
        lat = time.perf_counter() - t0
        parse_ms = (time.perf_counter() - t_parse) * 1000
        if status != 200:
            return Result(lat, False, err=f"HTTP {status}: {data[:200]!r}")
        out = res.get("stdout", "").encode()
        ok = res.get("exit_code") == 0 and not res.get("stdout_truncated") and check(out)
        return Result(lat, ok, mem_mb=res.get("memory_used_mb"), server_ms=res.get("execution_time_ms"),
                      parse_ms=parse_ms,
                      err=None if ok else f"exit={res.get('exit_code')} out={out[:80]!r} "
                                          f"err={res.get('stderr', '')[:200]!r}")

    def close(self):
        c = getattr(self.local, "conn", None)
        if c:
            c.close()
        self.local = threading.local()


# --------------------------------------------------------------------------------------
# Running cells


def run_batch(system, lang: str, code: str, check, conc: int, n: int) -> tuple[list[Result], float]:
    """n requests with conc client threads; returns results and wall time."""
    results: list[Result] = []
    lock = threading.Lock()
    left = [n]

    def worker():
        while True:
            with lock:
                if left[0] <= 0:
                    break
                left[0] -= 1
            r = system.run(lang, code, check)
            with lock:
                results.append(r)
        if isinstance(system, ServiceSystem):
            system.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(conc)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=(TIMEOUT_S + 60) * n)
    return results, time.perf_counter() - t0


def summarize(results: list[Result], wall: float) -> dict:
    ok = [r for r in results if r.ok]
    lat = [r.lat * 1000 for r in ok]
    rss = [r.rss_kb for r in ok if r.rss_kb]
    mem = [r.mem_mb for r in ok if r.mem_mb is not None]
    srv = [r.server_ms for r in ok if r.server_ms is not None]
    parse = [r.parse_ms for r in ok if r.parse_ms is not None]
    errors = [r.err for r in results if not r.ok][:3]
    return {
        "n": len(results), "ok": len(ok), "wall_s": wall,
        "p50_ms": pct(lat, 50), "p90_ms": pct(lat, 90), "p99_ms": pct(lat, 99),
        "mean_ms": statistics.fmean(lat) if lat else float("nan"),
        "throughput_rps": len(ok) / wall if wall > 0 else float("nan"),
        "peak_rss_mb": (statistics.median(rss) / 1024) if rss else None,
        "memory_used_mb": statistics.median(mem) if mem else None,
        "server_p50_ms": pct(srv, 50) if srv else None,
        "client_parse_p50_ms": pct(parse, 50) if parse else None,
        "latencies_ms": [round(x, 3) for x in lat],
        "errors": errors,
    }


def run_cells(systems: list, workloads: list[str], plan: dict, concs: list[int] | None,
              iterations: int | None, warmup: int, raw: dict) -> None:
    """For each workload and concurrency, every system, interleaved: at concurrency 1
    request by request, otherwise in 3 rounds, so that drift of a noisy VM is spread
    over all systems rather than landing on one."""
    for wname in workloads:
        lang, code, check, light = WORKLOADS[wname]
        cells = plan[light]
        levels = [c for c in (concs or sorted(cells)) if (concs or c in cells)]
        rss: dict[str, list[int]] = {}
        for s in systems:  # warm caches (page cache, .pyc), check the system works, take peak RSS
            for i in range(warmup):
                r = s.run(lang, code, check, measure_rss=i == warmup - 1)
                if not r.ok:
                    log(f"  warm-up {s.name}/{wname} failed: {r.err}")
                elif r.rss_kb:
                    rss.setdefault(s.name, []).append(r.rss_kb)
        for conc in levels:
            n = iterations if iterations else cells.get(conc, max(cells.values()))
            n = max(n, conc)
            # blocks of a few requests per system, rotating: outside noise is spread over
            # all systems, while each block still pays its own system's after-effects
            # (e.g. the kernel tearing down the namespaces of its last requests)
            rounds = max(1, min(6, n // 4)) if conc == 1 else min(3, max(1, n // (2 * conc)))
            per = [n // rounds + (1 if i < n % rounds else 0) for i in range(rounds)]
            acc = {s.name: ([], 0.0) for s in systems}
            t_cell = time.perf_counter()
            for i, k in enumerate(per):
                order = systems[i % len(systems):] + systems[:i % len(systems)]
                for s in order:
                    res, wall = run_batch(s, lang, code, check, conc, k)
                    rs, w = acc[s.name]
                    acc[s.name] = (rs + res, w + wall)
            line = []
            for s in systems:
                rs, w = acc[s.name]
                summ = summarize(rs, w)
                if rss.get(s.name):
                    summ["peak_rss_mb"] = max(rss[s.name]) / 1024
                summ.update(workload=wname, language=lang, concurrency=conc, system=s.name)
                raw["cells"].append(summ)
                line.append(f"{s.name} {summ['p50_ms']:.0f}ms" + ("" if summ["ok"] == summ["n"]
                                                                 else f" ({summ['n'] - summ['ok']} FAILED)"))
                for e in summ["errors"]:
                    log(f"    {s.name} error: {e}")
            log(f"{wname} c={conc} n={n} ({time.perf_counter() - t_cell:.0f}s): " + ", ".join(line))


# --------------------------------------------------------------------------------------
# Memory


def proc_mem(pid: int) -> tuple[int | None, int | None]:
    """(RSS, PSS) in kB of one process, or (None, None) if it is gone."""
    rss = pss = None
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except OSError:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss = int(line.split()[1])
        except OSError:
            pass
    return rss, pss


def proc_table() -> dict[int, tuple[int, str, int, int]]:
    """pid -> (ppid, comm, uid, utime+stime ticks) for every process."""
    t = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                s = f.read()
            uid = os.stat(f"/proc/{d}").st_uid
        except OSError:
            continue
        rp = s.rfind(")")
        comm = s[s.find("(") + 1:rp]
        fields = s[rp + 2:].split()
        t[int(d)] = (int(fields[1]), comm, uid, int(fields[11]) + int(fields[12]))
    return t


def wait_idle(pid: int, timeout: float) -> float:
    """Waits until pid and its descendants stop using CPU (a warm service's templates
    have finished their imports); returns the seconds waited."""
    t0 = time.monotonic()
    last, quiet = None, 0
    while time.monotonic() - t0 < timeout:
        table = proc_table()
        ticks = sum(table[p][3] for p in [pid] + descendants(pid, table) if p in table)
        quiet = quiet + 1 if last is not None and ticks - last <= 1 else 0
        if quiet >= 4:
            break
        last = ticks
        time.sleep(0.25)
    return time.monotonic() - t0


def descendants(root: int, table: dict) -> list[int]:
    kids: dict[int, list[int]] = {}
    for pid, (ppid, *_) in table.items():
        kids.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        for k in kids.get(p, []):
            out.append(k)
            todo.append(k)
    return out


def memory_cgroup_usage(pid: int) -> int | None:
    """memory.usage_in_bytes (cgroup v1) or memory.current (v2) of pid's memory cgroup."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    path = None
    for line in lines:
        hid, ctrls, cg = line.split(":", 2)
        if "memory" in ctrls.split(","):
            path = f"/sys/fs/cgroup/memory{cg}/memory.usage_in_bytes"
            break
        if hid == "0" and ctrls == "" and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            path = f"/sys/fs/cgroup{cg}/memory.current"
    if not path:
        return None
    try:
        with open(path) as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


SLEEP_S = 4         # how long each memory-probe sleeper sleeps (--quick: 2.5)
UID_BASE = int(os.environ.get("SANDBOX_UID_BASE", "1000000"))  # host uid of a sandbox's root


def tree_mem(pids: list[int]) -> tuple[int, int, int]:
    """(processes, RSS kB, PSS kB) summed over pids."""
    n = rss = pss = 0
    for p in pids:
        r, q = proc_mem(p)
        if r is None:
            continue
        n, rss, pss = n + 1, rss + r, pss + (q or 0)
    return n, rss, pss


def service_trees(svc_pid: int, table: dict) -> tuple[list[list[int]], list[int]]:
    """The sandboxes below a service (each: its PID 1, mapped to UID_BASE on the host,
    and what runs under it) and the service's other processes (itself, templates)."""
    desc = descendants(svc_pid, table)
    roots = [p for p in desc if table[p][2] == UID_BASE and table.get(table[p][0], (0, "", -1))[2] != UID_BASE]
    trees = [[r] + descendants(r, table) for r in roots]
    inside = {p for t in trees for p in t}
    return trees, [svc_pid] + [p for p in desc if p not in inside]


def measure_memory(systems: list, n: int, sleep_s: float, raw: dict) -> None:
    """While n Python sleepers run at once under each system, sums RSS and PSS over the
    processes each request created; for a service, over each sandbox's processes, with
    the service's own processes (itself, warm templates) counted apart; for our
    sandboxes also the memory cgroup's usage."""
    log(f"memory: {n} concurrent Python sleepers per system")
    code = f"import time\ntime.sleep({sleep_s})\n"
    raw["memory_sleep_s"] = sleep_s
    out = {}
    for s in systems:
        is_service = isinstance(s, ServiceSystem)
        procs, threads = [], []
        entry: dict = {"requests": n}
        if is_service:
            svc_pid = s.svc.proc.pid
            table = proc_table()
            _, fixed = service_trees(svc_pid, table)
            entry["service_processes_idle"] = len(fixed)
            _, entry["service_rss_kb_idle"], entry["service_pss_kb_idle"] = tree_mem(fixed)

            def fire():
                s.run("python", code, lambda o: True)
                s.close()

            threads = [threading.Thread(target=fire, daemon=True) for _ in range(n)]
            for t in threads:
                t.start()
        else:
            for _ in range(n):
                procs.append(subprocess.Popen(s.argv("python", code), stdin=subprocess.DEVNULL,
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                              env=s.env, cwd="/tmp"))
        # wait until every request has its python3 running, then let it settle
        deadline = time.monotonic() + sleep_s - 1
        trees: list[list[int]] = []
        fixed: list[int] = []
        while time.monotonic() < deadline:
            table = proc_table()
            if is_service:
                trees, fixed = service_trees(svc_pid, table)
            else:
                trees = [[p.pid] + descendants(p.pid, table) for p in procs]
            ready = sum(1 for tr in trees if any(table.get(p, (0, ""))[1].startswith("python3") and
                                                 (not is_service or table[p][2] != UID_BASE) for p in tr))
            if ready >= n:
                break
            time.sleep(0.05)
        time.sleep(0.5)
        nproc = rss = pss = 0
        cg_total, cg_seen = 0, set()
        for tr in trees:
            k, r, q = tree_mem(tr)
            nproc, rss, pss = nproc + k, rss + r, pss + q
            for p in tr:
                try:
                    with open(f"/proc/{p}/cgroup") as f:
                        key = f.read()
                except OSError:
                    continue
                if key not in cg_seen and "hexr-sandbox" in key:
                    cg_seen.add(key)
                    cg_total += memory_cgroup_usage(p) or 0
        running = max(len(trees), 1)
        entry.update(running=len(trees), processes=nproc, rss_kb_per_request=rss / running,
                     pss_kb_per_request=pss / running)
        if cg_seen:
            entry["cgroup_kb_per_request"] = cg_total / 1024 / len(cg_seen)
        if is_service:
            entry["service_processes_busy"] = len(fixed)
            _, entry["service_rss_kb_busy"], entry["service_pss_kb_busy"] = tree_mem(fixed)
            entry["service_rss_kb_fresh"] = s.svc.idle_rss_kb
            entry["service_pss_kb_fresh"] = s.svc.idle_pss_kb
        out[s.name] = entry
        for t in threads:
            t.join(timeout=sleep_s + 30)
        for p in procs:
            try:
                p.wait(timeout=sleep_s + 30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        log(f"  {s.name}: {len(trees)} running, {nproc} processes, "
            f"RSS {entry['rss_kb_per_request'] / 1024:.1f} MB / PSS {entry['pss_kb_per_request'] / 1024:.1f} MB "
            "per request" + (f", cgroup {entry['cgroup_kb_per_request'] / 1024:.1f} MB" if cg_seen else "")
            + (f"; service processes {entry['service_rss_kb_busy'] / 1024:.1f} MB RSS" if is_service else ""))
    raw["memory"] = out


def measure_admission(systems: list, run_bin: str, args, raw: dict, services: list) -> None:
    """The sleep fan-out and the mixed load through a service with default settings, and
    the burst through the warm service (bench/fanout.py)."""
    import fanout  # noqa: E402  (same directory)

    if args.systems and "service-defaults" not in args.systems.split(","):
        return
    cores = os.cpu_count() or 1
    # the service's own defaults, not OUR_ENV's fixed slots and long queue
    svc = Service("service-defaults", run_bin, {"MAX_CONCURRENT": "0", "MAX_QUEUE": "64",
                                                "QUEUE_TIMEOUT": "10s", "MAX_OUTPUT_BYTES": "1M"}, args.out)
    svc.start()
    services.append(svc)
    system = ServiceSystem(svc)
    log("admission: 20 sleepers at once, then CPU-bound loops and sleepers mixed (service-defaults)")
    raw["fanout"] = fanout.sleep_fanout(system, 20)
    log(f"  fan-out: {raw['fanout']}")
    repeats = ADMISSION_REPEATS["quick" if args.quick else "full"]
    mixed_ratio = lambda y: y["cpu_batch_s"] / y["cpu_batch_perfect_s"]  # noqa: E731
    raw["mixed"] = median_batch([fanout.mixed(system, cores) for _ in range(repeats)], mixed_ratio,
                                ("sleep_max_latency_s",))
    log(f"  mixed: {raw['mixed']}")
    # The same loads through the bare interpreter: how close this machine itself comes to
    # "what the cores allow". On a VM whose second vCPU speeds page-fault-heavy work (a
    # Python start) up far less than pure computation, no system can do better than this.
    bare = next((s for s in systems if s.name == "bare"), None)
    if bare:
        raw["mixed_bare"] = median_batch([fanout.mixed(bare, cores) for _ in range(repeats)], mixed_ratio,
                                         ("sleep_max_latency_s",))
        log(f"  mixed, bare: {raw['mixed_bare']}")
    burst_on = next((s for s in systems if s.name == WARM_SYSTEM), None) or \
        next((s for s in systems if s.name == "service"), None)
    for key, on in (("burst", burst_on), ("burst_bare", bare)):
        if on:
            seq = cell(raw, "hello-python", 1, on.name)
            seq_s = seq["p50_ms"] / 1000 if seq and seq["ok"] else None
            raw[key] = median_batch([fanout.burst(on, cores, seq_s) for _ in range(repeats)],
                                    lambda y: y["p99_s"])
            raw[key]["system"] = on.name
            log(f"  {key}: {raw[key]}")


def median_batch(runs: list, key, worst: tuple = ()) -> dict:
    """The median of several batches of one admission measurement by key (the figure its
    target reads), with every batch's figure beside it ("runs"); a request that failed or
    was turned away in any batch counts against the result, and so does the worst of
    each figure named in worst."""
    med = dict(sorted(runs, key=key)[len(runs) // 2])
    med["runs"] = [round(key(r), 3) for r in runs]
    for k in worst:
        med[k] = max(r[k] for r in runs)
    med["ok"] = min(r["ok"] for r in runs)
    med["rejected_429"] = sum(r["rejected_429"] for r in runs)
    med["errors"] = sorted({e for r in runs for e in r["errors"]})[:3]
    return med


# --------------------------------------------------------------------------------------
# Report


def cell(raw: dict, w: str, c: int, s: str) -> dict | None:
    for x in raw["cells"]:
        if x["workload"] == w and x["concurrency"] == c and x["system"] == s:
            return x
    return None


def fmt(v, spec=".0f", none="–"):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return none
    return format(v, spec)


def ratio(a, b):
    if a is None or b is None or not b or math.isnan(a) or math.isnan(b):
        return None
    return a / b


def machine_floor(bare: dict | None, measure) -> str:
    """The same load through the bare interpreter, as text for a target's figure."""
    if not bare or bare.get("ok") != bare.get("n", bare.get("n_cpu", 0) + bare.get("n_sleep", 0)):
        return ""
    r = measure(bare)
    return f"; bare, the same load: {fmt(r, '.2f')} ×" if r is not None else ""


def targets(raw: dict) -> list[tuple[str, str, str]]:
    """(target, measured, verdict)"""
    out = []
    systems = raw["systems"]
    warm = WARM_SYSTEM in systems

    def p50(w, s, c=1):
        x = cell(raw, w, c, s)
        return x["p50_ms"] if x and x["ok"] else None

    def thr(w, s, c):
        x = cell(raw, w, c, s)
        return x["throughput_rps"] if x and x["ok"] else None

    def verdict(r, limit, le=True):
        if r is None:
            return "n/a (not measured)"
        return "PASS" if (r <= limit if le else r >= limit) else "MISS"

    services = [s for s in systems if s.startswith("service")]

    def best(w, c=1):
        """The best service system's p50 over bare's in workload w (and which)."""
        rs = [(ratio(p50(w, s, c), p50(w, "bare", c)), s) for s in services]
        rs = [x for x in rs if x[0] is not None]
        return min(rs) if rs else (None, None)

    for label, w, limit in (("Python hello via the service, warm: p50 ≤ 0.5 × bare", "hello-python", 0.5),
                            ("seed pandas example via the service, warm: p50 ≤ 0.1 × bare", "pandas-describe", 0.1)):
        if not warm:
            out.append((label, "–", "n/a (no warm mode)"))
        else:
            # warm, or from a pre-started sandbox a warm template cloned (service-pool:
            # its DEFAULT_MEMORY_MB is the bench's memory_mb, which the pool must match)
            r, s = best(w)
            out.append((label, f"{fmt(r, '.2f')} ×" + (f" ({s})" if s else ""), verdict(r, limit)))
    r = ratio(p50("hello-python", "cli"), p50("hello-python", "bare"))
    out.append(("cold path: `hexr-sandbox exec` Python hello p50 ≤ 1.15 × bare", f"{fmt(r, '.2f')} ×",
                verdict(r, 1.15)))
    for label, w, limit in (("JavaScript hello via the service: p50 ≤ 0.7 × bare", "hello-javascript", 0.7),
                            ("Bash hello via the service: p50 ≤ 1.5 × bare", "hello-bash", 1.5),
                            ("10 MB of output via the service: p50 ≤ 1.2 × bare", "output-10mb", 1.2)):
        r, s = best(w)
        out.append((label, f"{fmt(r, '.2f')} ×" + (f" ({s})" if s else ""), verdict(r, limit)))
    if "service" in systems:
        r = ratio(thr("hello-python", "service", 16), thr("hello-python", "bwrap", 16))
        out.append(("service (cold): Python hello throughput at concurrency 16 ≥ 1.5 × bubblewrap",
                    f"{fmt(r, '.2f')} ×", verdict(r, 1.5, le=False)))
    if warm:
        r = ratio(thr("hello-python", WARM_SYSTEM, 16), thr("hello-python", "bwrap", 16))
        out.append((f"{WARM_SYSTEM}: Python hello throughput at concurrency 16 ≥ 2 × bubblewrap",
                    f"{fmt(r, '.2f')} ×", verdict(r, 2.0, le=False)))
    b = raw.get("burst")
    if b:
        r = ratio(b["p99_s"], b["perfect_s"])
        out.append((f"burst of {b['n']} Python hellos ({b['system']}): p99 ≤ 1.3 × perfect scheduling",
                    f"{fmt(r, '.2f')} × ({b['p99_s'] * 1000:.0f} ms against {fmt(b['perfect_s'] and b['perfect_s'] * 1000)} ms"
                    + batches(b, lambda v: f"{v * 1000:.0f}") + ")"
                    + (f", {b['n'] - b['ok']} failed" if b["ok"] < b["n"] else "")
                    + machine_floor(raw.get("burst_bare"), lambda y: ratio(y["p99_s"], y["perfect_s"])),
                    verdict(r, 1.3) if b["ok"] == b["n"] else "MISS"))
    f = raw.get("fanout")
    if f:
        good = f["ok"] == f["n"] and f["rejected_429"] == 0
        out.append((f"{f['n']} concurrent `time.sleep(1)`, default settings: all end in about a second (≤ 1.5 s), no 429",
                    f"{f['wall_s']:.2f} s, {f['ok']}/{f['n']} ok, {f['rejected_429']} × 429",
                    "PASS" if good and f["wall_s"] <= 1.5 else "MISS"))
    x = raw.get("mixed")
    if x:
        good = x["ok"] == x["n_cpu"] + x["n_sleep"] and x["rejected_429"] == 0
        r = ratio(x["cpu_batch_s"], x["cpu_batch_perfect_s"])
        out.append((f"mixed: {x['n_cpu']} CPU-bound + {x['n_sleep']} sleepers at once: sleepers ≤ 1.5 s, "
                    f"CPU-bound batch ≤ 1.3 × what the cores allow",
                    f"sleepers {x['sleep_max_latency_s']:.2f} s, CPU batch {fmt(r, '.2f')} ×"
                    + batches(x, lambda v: f"{v:.2f}")
                    + machine_floor(raw.get("mixed_bare"), lambda y: ratio(y["cpu_batch_s"], y["cpu_batch_perfect_s"])),
                    "PASS" if good and x["sleep_max_latency_s"] <= 1.5 and r is not None and r <= 1.3 else "MISS"))
    mem = raw.get("memory") or {}
    ours = [(n, e["pss_kb_per_request"]) for n, e in mem.items() if n == "cli" or n.startswith("service")]
    if ours:
        worst = max(ours, key=lambda e: e[1])
        out.append((f"memory per idle sandbox ({raw.get('memory_sleepers', 16)} sleepers, PSS) ≤ 5 MiB on every path",
                    ", ".join(f"{n} {v / 1024:.1f}" for n, v in ours) + " MiB",
                    "PASS" if worst[1] <= 5 * 1024 else "MISS"))
    return out


def batches(x: dict, show) -> str:
    """", median of 3 batches: a, b, c" for a repeated admission measurement."""
    runs = x.get("runs") or []
    return f", median of {len(runs)} batches: {', '.join(show(v) for v in runs)}" if len(runs) > 1 else ""


def render_report(raw: dict, png_ok: bool) -> str:
    L = []
    m = raw["machine"]
    L.append("# hexr-sandbox benchmark\n")
    L.append(f"Run {raw['started']} — `{raw['command']}` ({raw['duration_s']:.0f} s)\n")
    L.append(f"Machine: {m['cpu']} × {m['cores']} cores, {m['mem_gb']:.0f} GiB, kernel {m['kernel']}, "
             f"load average at start {m['loadavg']}, at the end {raw.get('loadavg_end', '?')}"
             + (f"; the run had nice {m['nice']}" if m.get("nice") else "")
             + (f"; it ran in a cpu cgroup of its own with cpu.shares {raw['cpu_cgroup']['shares']} "
                "(so that no system gets a different CPU share from autogroups or a shared cgroup)"
                if raw.get("cpu_cgroup") else "") + ". "
             f"{m['hexr']} ({m['git']}{', build type ' + m['build_type'] if m.get('build_type') else ''}); "
             f"{m['python']}, node {m['node']}, {m['bash']}; bwrap {m['bwrap']}; {m['firejail']}.\n")
    try:
        busy = max(float(m["loadavg"].split()[0]), float(raw.get("loadavg_end", "0").split()[0])) > m["cores"]
    except (ValueError, IndexError):
        busy = False
    if busy:
        L.append(f"**The machine was busy with other work during this run (load average above its "
                 f"{m['cores']} cores): expect noisier numbers than usual, even in the ratios.**\n")
    L.append("Absolute times on this shared VM move between runs; compare the **× bare** ratios, "
             "which come from one interleaved run. Latency is measured by the client: process "
             "spawn to exit and its output decoded as text (bare, bwrap, firejail, cli) or request sent to response parsed "
             "(service). p99 of a few dozen samples is close to the maximum.\n")

    L.append("## Targets\n")
    L.append("| target | measured | verdict |\n| --- | --- | --- |")
    for t, mv, v in targets(raw):
        L.append(f"| {t} | {mv} | {v} |")
    L.append("")

    L.append("## Latency and throughput\n")
    L.append("`ok` = requests whose exit code and output were right. `× bare` = this system's p50 "
             "(or throughput) over bare's in the same cell. `peak RSS` = peak RSS of the largest single "
             "process of a request's process tree, from an untimed run under `/usr/bin/time -f %M` "
             "(for cli that is the sandboxed interpreter, our supervisor being smaller; for bwrap it cannot "
             "be seen this way: with --unshare-pid the program's usage is not passed up to bwrap's parent); "
             "`mem_used` = "
             "median `memory_used_mb` our sandbox reported "
             "(its memory cgroup's peak; shared library pages already cached by the host are not "
             "charged to it).\n")
    L.append("| workload | conc | system | ok | p50 ms | p90 ms | p99 ms | p50 × bare | req/s | req/s × bare "
             "| peak RSS MB | mem_used MB |")
    L.append("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    seen = []
    for x in raw["cells"]:
        k = (x["workload"], x["concurrency"])
        if k not in seen:
            seen.append(k)
    for w, c in seen:
        b = cell(raw, w, c, "bare")
        for s in raw["systems"]:
            x = cell(raw, w, c, s)
            if not x:
                continue
            rl = ratio(x["p50_ms"], b["p50_ms"]) if b else None
            rt = ratio(x["throughput_rps"], b["throughput_rps"]) if b else None
            L.append(f"| {w} | {c} | {s} | {x['ok']}/{x['n']} | {fmt(x['p50_ms'])} | {fmt(x['p90_ms'])} | "
                     f"{fmt(x['p99_ms'])} | {fmt(rl, '.2f')} | {fmt(x['throughput_rps'], '.1f')} | "
                     f"{fmt(rt, '.2f')} | {fmt(x['peak_rss_mb'], '.1f')} | {fmt(x['memory_used_mb'], '.0f')} |")
    L.append("")
    # the service rows include the client's json.loads of the reply: shown, never taken out
    parses = []
    for w, c in seen:
        b = cell(raw, w, c, "bare")
        for s in raw["systems"]:
            x = cell(raw, w, c, s)
            cp = x and x.get("client_parse_p50_ms")
            if cp and b and x["p50_ms"] and cp >= 0.05 * x["p50_ms"]:
                parses.append(f"{w} at {c}, {s}: {cp:.1f} ms ({ratio(cp, b['p50_ms']):.2f} × bare's p50)")
    if parses:
        L.append("Of the service rows' p50, the client's own `json.loads` of the reply (p50, where it is "
                 "at least 5 % of the latency): " + "; ".join(parses) + ".\n")

    mem = raw.get("memory")
    if mem:
        L.append("## Memory while sandboxes run\n")
        n = next((v.get("requests") for v in mem.values() if v.get("requests")), "?")
        L.append(f"{n} Python sleepers (`time.sleep({raw.get('memory_sleep_s')})`) at once under each system. Per request: "
                 "the sum over the processes that request created (bare: python3; bwrap: two bwrap "
                 "processes and python3; firejail: two firejail processes and python3; cli: "
                 "`hexr-sandbox exec`, the sandbox's PID 1 and python3; service: the sandbox's PID 1 "
                 "and its program, with the service's own processes (itself and any warm templates) "
                 "counted apart below). RSS counts shared pages (libraries, the interpreter, pages a "
                 "warm sandbox shares with its template) in full in every process; PSS divides them "
                 "among their users, so PSS is the fairer per-sandbox cost. `cgroup` = our "
                 "sandbox's memory cgroup usage (pages charged to it; file pages first touched "
                 "outside it are not).\n")
        L.append("| system | running | processes | RSS MB / request | PSS MB / request | PSS − bare MB "
                 "| cgroup MB / request |")
        L.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        bare_pss = mem.get("bare", {}).get("pss_kb_per_request")
        for s in raw["systems"]:
            e = mem.get(s)
            if not e or "running" not in e:
                continue
            over = (e["pss_kb_per_request"] - bare_pss) / 1024 if bare_pss and s != "bare" else None
            cg = e.get("cgroup_kb_per_request")
            L.append(f"| {s} | {e['running']}/{e['requests']} | {e['processes']} | "
                     f"{e['rss_kb_per_request'] / 1024:.1f} | {e['pss_kb_per_request'] / 1024:.1f} | "
                     f"{fmt(over, '+.1f')} | {fmt(cg and cg / 1024, '.1f')} |")
        L.append("")
        L.append("Service processes (the service itself, plus warm templates when on):\n")
        L.append("| service | just started: RSS / PSS MB | idle after the latency runs: processes, RSS / PSS MB "
                 "| with the sleepers running: RSS / PSS MB |")
        L.append("| --- | ---: | ---: | ---: |")
        mb = lambda v: fmt(v and v / 1024, ".1f")  # noqa: E731
        for s in raw["systems"]:
            e = mem.get(s, {})
            if "service_rss_kb_idle" not in e:
                continue
            L.append(f"| {s} | {mb(e.get('service_rss_kb_fresh'))} / {mb(e.get('service_pss_kb_fresh'))} (process "
                     f"only) | {e.get('service_processes_idle')}: {mb(e.get('service_rss_kb_idle'))} / "
                     f"{mb(e.get('service_pss_kb_idle'))} | {mb(e.get('service_rss_kb_busy'))} / "
                     f"{mb(e.get('service_pss_kb_busy'))} |")
        L.append("")

    L.append("## How each system ran the code\n")
    for s, d in raw["describe"].items():
        L.append(f"- **{s}**: `{d}`")
    L.append("")
    if png_ok:
        L.append("![latency](latency.png)\n")
    if raw.get("failures"):
        L.append("## Failures\n")
        for f in raw["failures"]:
            L.append(f"- {f}")
        L.append("")
    return "\n".join(L)


def render_png(raw: dict, path: str) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is missing: no latency.png (apt-get install -y python3-matplotlib, or bench/setup.sh)")
        return False
    systems = raw["systems"]
    workloads = []
    for x in raw["cells"]:
        if x["concurrency"] == 1 and x["workload"] not in workloads:
            workloads.append(x["workload"])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(16, 6.5), gridspec_kw={"width_ratios": [2.3, 1]})
    width = 0.8 / max(len(systems), 1)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, s in enumerate(systems):
        xs, p50s, lo, hi = [], [], [], []
        for j, w in enumerate(workloads):
            x = cell(raw, w, 1, s)
            if not x or not x["ok"]:
                continue
            xs.append(j + (i - (len(systems) - 1) / 2) * width)
            p50s.append(x["p50_ms"])
            lo.append(0)
            hi.append(max(x["p99_ms"] - x["p50_ms"], 0))
        ax1.bar(xs, p50s, width, label=s, color=colors[i % len(colors)], yerr=[lo, hi], capsize=2,
                error_kw={"elinewidth": 0.8})
    ax1.set_yscale("log")
    ax1.set_xticks(range(len(workloads)))
    ax1.set_xticklabels(workloads, rotation=20, ha="right")
    ax1.set_ylabel("latency ms (bar p50, whisker to p99), log scale")
    ax1.set_title("Latency per request, concurrency 1")
    ax1.grid(axis="y", which="both", alpha=0.3)
    ax1.legend(fontsize=8)
    for i, s in enumerate(systems):
        pts = sorted((x["concurrency"], x["throughput_rps"]) for x in raw["cells"]
                     if x["workload"] == "hello-python" and x["system"] == s and x["ok"])
        if pts:
            ax2.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=s, color=colors[i % len(colors)])
    ax2.set_xscale("log", base=2)
    ax2.set_xticks([1, 4, 16])
    ax2.set_xticklabels(["1", "4", "16"])
    ax2.set_xlabel("concurrent clients")
    ax2.set_ylabel("requests / s")
    ax2.set_title("Throughput, Python hello")
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=8)
    fig.suptitle(f"hexr-sandbox vs bare / bubblewrap / firejail — {raw['started'][:16]}, "
                 f"{raw['machine']['cores']} cores", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------------------
# Main


CPU_ROOT = "/sys/fs/cgroup/cpu"


def enter_cpu_cgroup(shares: int) -> tuple[str, str] | None:
    """Moves this process (and so everything it starts) into a cgroup v1 cpu group of
    its own, returning (new group, old group).

    Why: with autogroup scheduling, each new session gets its own scheduling group
    (bwrap --new-session makes one per request), while our sandboxes sit in one
    `hexr-sandbox` cpu cgroup shared with every other hexr-sandbox on the host. On a
    machine busy with other work that hands the systems very different CPU shares.
    Inside a cpu cgroup that is not the root, autogroups do not apply, our engine puts
    its sandboxes below this group (it nests its cgroups under its own), and everything
    in the run competes on equal terms; `shares` sets how much the run weighs against
    the rest of the machine (1024 = one ordinary process group)."""
    if shares <= 0 or not os.path.exists(f"{CPU_ROOT}/cpu.shares"):
        return None
    own = None
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            if "cpu" in ctrls.split(","):
                own = path
    if own is None:
        return None
    old = CPU_ROOT + own.rstrip("/")
    new = f"{old}/hxs-bench-{os.getpid()}"
    try:
        os.makedirs(new, exist_ok=True)
        with open(f"{new}/cpu.shares", "w") as f:
            f.write(str(shares))
        with open(f"{new}/cgroup.procs", "w") as f:
            f.write(str(os.getpid()))
    except OSError as e:
        log(f"not using a cpu cgroup of our own ({e}): CPU shares may differ between systems under load")
        return None
    return new, old


def leave_cpu_cgroup(groups: tuple[str, str] | None) -> None:
    if not groups:
        return
    new, old = groups
    try:
        with open(f"{old}/cgroup.procs", "w") as f:
            f.write(str(os.getpid()))
    except OSError:
        return
    for dirpath, _, _ in sorted(os.walk(new), key=lambda t: -t[0].count("/")):
        for _ in range(20):
            try:
                os.rmdir(dirpath)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)


def machine_info(binary: str) -> dict:
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem_gb = float("nan")
    git = cmd_out(["git", "-C", REPO, "describe", "--always", "--dirty"])
    build_type = None
    cache = os.path.join(os.path.dirname(os.path.abspath(binary)), "CMakeCache.txt")
    try:
        with open(cache) as f:
            mt = re.search(r"^CMAKE_BUILD_TYPE:STRING=(.*)$", f.read(), re.M)
            build_type = (mt.group(1) or "none") if mt else None
    except OSError:
        pass
    return {
        "cpu": cpu, "cores": os.cpu_count(), "mem_gb": mem_gb, "kernel": platform.release(),
        "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg()), "nice": os.nice(0),
        "hexr": cmd_out([binary, "version"]), "git": git, "build_type": build_type,
        "python": cmd_out(["/usr/bin/python3", "--version"]), "node": cmd_out(["/usr/bin/node", "--version"]),
        "bash": cmd_out(["/usr/bin/bash", "--version"]).replace("GNU bash, version ", "bash "),
        "bwrap": cmd_out(["bwrap", "--version"]).replace("bubblewrap ", ""),
        "firejail": cmd_out(["firejail", "--version"]),
    }


def parse_service_config(s: str) -> tuple[str, dict]:
    name, _, rest = s.partition(":")
    env = {}
    for kv in filter(None, rest.split(",")):
        k, sep, v = kv.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"--service-config {s!r}: expected NAME:VAR=VALUE[,VAR=VALUE]")
        env[k] = v
    if not name:
        raise argparse.ArgumentTypeError("--service-config needs a NAME")
    return name, env


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Writes OUT/report.md, OUT/latency.png, OUT/raw.json. See bench/README.md.")
    ap.add_argument("--quick", action="store_true", help="few iterations; light workloads at concurrency 1 and 16, "
                    "heavy ones at 1 only (< 2 min)")
    ap.add_argument("--iterations", type=int, metavar="N", help="requests per (system, workload, concurrency) cell")
    ap.add_argument("--concurrency", metavar="LIST", help="comma-separated levels for every workload (default: "
                    "1,4,16 for hello workloads, 1,4 for the others; --quick: 1,16 and 1)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"), help="output directory (default bench/results)")
    ap.add_argument("--only", metavar="WORKLOAD", help="comma-separated workloads: " + ", ".join(WORKLOADS))
    ap.add_argument("--systems", metavar="LIST", help="comma-separated subset of bare,bwrap,firejail,cli and the "
                    "service names (bare is always run: it is the reference)")
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "hexr-sandbox"), help="hexr-sandbox binary")
    ap.add_argument("--service-config", action="append", type=parse_service_config, default=[],
                    metavar="NAME:VAR=VAL[,VAR=VAL]",
                    help="one more service system with extra environment, e.g. service-warm:HXS_WARM=1")
    ap.add_argument("--cpu-shares", type=int, default=8192, metavar="N",
                    help="run everything in a cpu cgroup of its own with these cpu.shares (default 8192; "
                         "0: stay where we are). See enter_cpu_cgroup")
    ap.add_argument("--memory-sleepers", type=int, metavar="N", help="concurrent sleepers for the memory probe "
                    "(default 16, --quick 4; 0 skips it)")
    args = ap.parse_args()

    if os.geteuid() != 0:
        print("run.py: run as root (our sandbox needs it to set up uid maps and cgroups)", file=sys.stderr)
        return 2
    binary = os.path.abspath(args.bin)
    if not os.access(binary, os.X_OK):
        print(f"run.py: {binary} is not an executable; build it first:\n"
              "  cmake -S . -B build && cmake --build build -j2 --target hexr-sandbox", file=sys.stderr)
        return 2
    missing = [(t, pkg) for t, pkg in (("bwrap", "bubblewrap"), ("firejail", "firejail")) if not shutil.which(t)]
    if missing:
        pkgs = " ".join(p for _, p in missing)
        print(f"run.py: missing {', '.join(t for t, _ in missing)}; install with:\n"
              f"  apt-get install -y {pkgs}     (or: bench/setup.sh)", file=sys.stderr)
        return 2
    for lang, argv in INTERP.items():
        if not os.access(argv[0], os.X_OK):
            print(f"run.py: {argv[0]} ({lang}) is missing", file=sys.stderr)
            return 2
    workloads = list(WORKLOADS)
    if args.only:
        workloads = [w.strip() for w in args.only.split(",") if w.strip()]
        bad = [w for w in workloads if w not in WORKLOADS]
        if bad:
            print(f"run.py: unknown workload {', '.join(bad)}; choose from {', '.join(WORKLOADS)}", file=sys.stderr)
            return 2
    concs = [int(c) for c in args.concurrency.split(",")] if args.concurrency else None
    plan = PLAN_QUICK if args.quick else PLAN_FULL
    sleepers = args.memory_sleepers if args.memory_sleepers is not None else (4 if args.quick else 16)

    # Which service configurations this binary can run: one that sets a variable the
    # binary does not know (e.g. SANDBOX_WARM before warm starts) is skipped.
    help_text = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=10).stdout
    service_configs, skipped = [], {}
    for name, env in list(SERVICE_CONFIGS) + list(args.service_config):
        unknown = [k for k in env if not re.search(rf"^\s*{re.escape(k)}\s", help_text, re.M)]
        if unknown:
            skipped[name] = f"this binary does not know {', '.join(unknown)}"
            log(f"skipping {name}: {skipped[name]}")
            continue
        service_configs = [c for c in service_configs if c[0] != name] + [(name, env)]

    os.makedirs(args.out, exist_ok=True)
    started = datetime.datetime.now().astimezone()
    raw = {"started": started.isoformat(timespec="seconds"),
           "command": " ".join(["bench/run.py"] + sys.argv[1:]),
           "machine": machine_info(binary), "cells": [], "failures": [], "skipped": skipped,
           "settings": {"our_env": OUR_ENV, "timeout_s": TIMEOUT_S, "memory_mb": MEMORY_MB,
                        "service_configs": service_configs, "plan": {str(k): v for k, v in plan.items()}}}

    # Run a private copy of the binary (and what sits beside it: the HTTP half that runs
    # serve, the warm template's module), so that a rebuild of build/ during the run
    # cannot mix two versions in one report.
    snap = tempfile.mkdtemp(prefix="hxs-bench-")
    os.chmod(snap, 0o755)
    for f in ("hexr-sandbox", "hexr-sandbox-http", "_hxs_zygote.so"):
        src = binary if f == "hexr-sandbox" else os.path.join(os.path.dirname(binary), f)
        if os.path.exists(src):
            shutil.copy2(src, os.path.join(snap, os.path.basename(binary) if f == "hexr-sandbox" else f))
    run_bin = os.path.join(snap, os.path.basename(binary))

    cpu_groups = enter_cpu_cgroup(args.cpu_shares)
    raw["cpu_cgroup"] = {"path": cpu_groups[0], "shares": args.cpu_shares} if cpu_groups else None
    if cpu_groups:
        log(f"running in cpu cgroup {cpu_groups[0]} (cpu.shares {args.cpu_shares})")

    bare = SubprocessSystem("bare", [])
    all_systems = [bare, SubprocessSystem("bwrap", ["bwrap"] + BWRAP_FLAGS, rss_visible=False),
                   SubprocessSystem("firejail", ["firejail"] + FIREJAIL_FLAGS),
                   SubprocessSystem("cli", [], env=OUR_ENV, cli=run_bin)]
    services: list[Service] = []
    t_start = time.perf_counter()
    try:
        for name, env in service_configs:
            svc = Service(name, run_bin, env, args.out)
            log(f"starting {name} ({' '.join(f'{k}={v}' for k, v in env.items()) or 'default settings'})")
            svc.start()
            log(f"  {name} on 127.0.0.1:{svc.port}, RSS {svc.idle_rss_kb} kB, idle after {svc.settle_s:.1f} s")
            services.append(svc)
            all_systems.append(ServiceSystem(svc))
        systems = all_systems
        if args.systems:
            want = {s.strip() for s in args.systems.split(",")} | {"bare"}
            systems = [s for s in all_systems if s.name in want]
        raw["systems"] = [s.name for s in systems]
        raw["describe"] = {s.name: s.describe() for s in systems}
        log(f"systems: {', '.join(raw['systems'])}; workloads: {', '.join(workloads)}")

        run_cells(systems, workloads, plan, concs, args.iterations,
                  WARMUP["quick" if args.quick else "full"], raw)

        measure_admission(systems, run_bin, args, raw, services)
        if sleepers > 0:
            raw["memory_sleepers"] = sleepers
            measure_memory(systems, sleepers, 2.5 if args.quick else SLEEP_S, raw)
    finally:
        for svc in services:
            svc.stop()
        shutil.rmtree(snap, ignore_errors=True)
        leave_cpu_cgroup(cpu_groups)
    raw["duration_s"] = time.perf_counter() - t_start
    raw["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    for x in raw["cells"]:
        if x["ok"] < x["n"]:
            raw["failures"].append(f"{x['workload']} c={x['concurrency']} {x['system']}: "
                                   f"{x['n'] - x['ok']}/{x['n']} failed, e.g. {x['errors'][:1]}")

    with open(os.path.join(args.out, "raw.json"), "w") as f:
        json.dump(raw, f, indent=1)
    png_ok = render_png(raw, os.path.join(args.out, "latency.png"))
    report = render_report(raw, png_ok)
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write(report)
    print()
    print("Targets:")
    for t, mv, v in targets(raw):
        print(f"  {v:<20} {mv:>8}  {t}")
    print(f"\nwrote {args.out}/report.md, raw.json" + (", latency.png" if png_ok else "")
          + f" in {raw['duration_s']:.0f} s")
    return 1 if raw["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
