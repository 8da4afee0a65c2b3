#!/usr/bin/python3
"""Cold `hexr-sandbox exec` against the bare interpreter, paired, for one or more builds.

    bench/cold_pair.py BIN[,BIN...] [ROUNDS]      (default 40 rounds)

Each round runs, one after the other and in a new order every round: bare `python3 -c
"print('hello')"` and `bash -c true`, then for each binary `exec -l python` and `exec -l
bash` of the same code (all with the clean environment of bench/run.py). Prints each
p50 and its ratio to bare's p50, pair by pair: on a shared VM whose speed drifts,
ratios taken within a round are what compare two builds (bench/results/cold.md).
"""
import os
import random
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import CLEAN_ENV, OUR_ENV  # noqa: E402

PY = "print('hello')"
CASES = {"python": (["/usr/bin/python3", "-c", PY], PY), "bash": (["/usr/bin/bash", "-c", "true"], "true")}


def timed(argv, env) -> float:
    t = time.monotonic()
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    dt = time.monotonic() - t
    if p.returncode != 0:
        raise SystemExit("%s failed (%d): %s" % (" ".join(argv), p.returncode, p.stderr.decode()[-500:]))
    return dt * 1000


def main() -> None:
    bins = [os.path.abspath(b) for b in sys.argv[1].split(",")]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    ours = dict(CLEAN_ENV, **OUR_ENV)
    runs = [("bare", lang, argv, CLEAN_ENV) for lang, (argv, _) in CASES.items()]
    runs += [(b, lang, [b, "exec", "-l", lang, "-t", "30", "-m", "512", "-c", code], ours)
             for b in bins for lang, (_, code) in CASES.items()]
    times = {(who, lang): [] for who, lang, _, _ in runs}
    ratios = {(b, lang): [] for b in bins for lang in CASES}
    for _ in range(3):  # warm the page cache and the cgroups' parents
        for _, _, argv, env in runs:
            timed(argv, env)
    for _ in range(rounds):
        random.shuffle(runs)
        got = {(who, lang): timed(argv, env) for who, lang, argv, env in runs}
        for k, v in got.items():
            times[k].append(v)
        for b in bins:
            for lang in CASES:
                ratios[(b, lang)].append(got[(b, lang)] / got[("bare", lang)])
    print("%d rounds, load average at the end %s" % (rounds, " ".join("%.2f" % x for x in os.getloadavg())))
    print("| system | language | p50 ms | p50 × bare | median of the paired ratios |")
    print("| --- | --- | ---: | ---: | ---: |")
    for lang in CASES:
        bare = statistics.median(times[("bare", lang)])
        print("| bare | %s | %.1f | 1.00 | |" % (lang, bare))
        for b in bins:
            p50 = statistics.median(times[(b, lang)])
            print("| `%s exec` | %s | %.1f | %.2f | %.2f |" % (os.path.relpath(b), lang, p50, p50 / bare,
                                                              statistics.median(ratios[(b, lang)])))


if __name__ == "__main__":
    main()
