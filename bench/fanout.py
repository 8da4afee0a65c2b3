"""Workloads of many requests at once, for bench/run.py: what admission does with them.

- sleep fan-out: N one-second `time.sleep(1)` at once through a service with default
  settings. They use no CPU: all should run at once and end in about a second, none
  turned away (429).
- mixed: CPU-bound loops and sleepers at once through the same service: the sleepers
  still end in about their sleep (the CPU-bound ones do not hold them back), and the
  CPU-bound ones share the cores evenly (their batch takes about what the cores allow).
- burst: 10 x cores Python hellos at once: their p99 against perfect scheduling (the
  burst over the cores, times the sequential p50).

Each function fires its requests from threads released together by a barrier, one
connection per thread, and returns a dict for raw.json.
"""
from __future__ import annotations

import statistics
import threading
import time

SLEEP_CODE = "import time\ntime.sleep(1)\n"
CPU_N = 3_000_000
CPU_CODE = f"s = 0\nfor i in range({CPU_N}):\n    s += i % 7\nprint(s)\n"


def fire(system, jobs: list[tuple[str, str]]) -> list[tuple[float, bool, str | None, float]]:
    """Runs every (language, code) at once; returns (latency s, ok, error, end time) each."""
    out: list = [None] * len(jobs)
    barrier = threading.Barrier(len(jobs))

    def one(i: int, lang: str, code: str) -> None:
        barrier.wait()
        r = system.run(lang, code, lambda o: True)
        out[i] = (r.lat, r.ok, r.err, time.perf_counter())
        system.close()

    threads = [threading.Thread(target=one, args=(i, lang, code), daemon=True)
               for i, (lang, code) in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return [x if x else (float("nan"), False, "no answer", float("nan")) for x in out]


def rejected(results) -> int:
    return sum(1 for _, ok, err, _ in results if not ok and err and err.startswith("HTTP 429"))


def sleep_fanout(system, n: int = 20) -> dict:
    t0 = time.perf_counter()
    res = fire(system, [("python", SLEEP_CODE)] * n)
    return {"n": n, "ok": sum(1 for r in res if r[1]), "rejected_429": rejected(res),
            "wall_s": max(r[3] for r in res) - t0, "max_latency_s": max(r[0] for r in res),
            "errors": sorted({r[2] for r in res if r[2]})[:3]}


def mixed(system, cores: int, n_sleep: int = 10) -> dict:
    """2 x cores CPU-bound loops with n_sleep sleepers; the loops' p50 alone first."""
    alone = [system.run("python", CPU_CODE, lambda o: True).lat for _ in range(3)]
    system.close()
    n_cpu = 2 * cores
    t0 = time.perf_counter()
    res = fire(system, [("python", CPU_CODE)] * n_cpu + [("python", SLEEP_CODE)] * n_sleep)
    cpu, sleep = res[:n_cpu], res[n_cpu:]
    cpu_alone = statistics.median(alone)
    perfect = n_cpu / cores * cpu_alone
    return {"n_cpu": n_cpu, "n_sleep": n_sleep, "cpu_alone_s": cpu_alone,
            "ok": sum(1 for r in res if r[1]), "rejected_429": rejected(res),
            "sleep_max_latency_s": max(r[0] for r in sleep),
            "cpu_batch_s": max(r[3] for r in cpu) - t0, "cpu_batch_perfect_s": perfect,
            "errors": sorted({r[2] for r in res if r[2]})[:3]}


def burst(system, cores: int, seq_p50_s: float | None) -> dict:
    n = 10 * cores
    res = fire(system, [("python", "print('hello')")] * n)
    lat = sorted(r[0] for r in res)
    k = (len(lat) - 1) * 0.99
    lo = int(k)
    p99 = lat[lo] + (lat[min(lo + 1, len(lat) - 1)] - lat[lo]) * (k - lo)
    perfect = n / cores * seq_p50_s if seq_p50_s else None
    return {"n": n, "ok": sum(1 for r in res if r[1]), "rejected_429": rejected(res), "p99_s": p99,
            "seq_p50_s": seq_p50_s, "perfect_s": perfect,
            "errors": sorted({r[2] for r in res if r[2]})[:3]}
