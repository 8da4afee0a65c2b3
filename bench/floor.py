#!/usr/bin/python3
"""What this machine charges any sandbox before it does anything of its own.

    /usr/bin/python3 bench/floor.py [--rounds N] [--out DIR]

The cold `exec` target (Python hello <= 1.15 x bare) leaves 0.15 x a Python start for
everything a sandbox adds. Three costs of the machine come out of that budget whatever
the sandbox does, and this measures them side by side in one run:

1. A CPUID instruction. On a VM it traps to the hypervisor; glibc's start-up runs
   dozens of them (the CPU's features, then its caches, through CPUID leaves 2 and 4),
   so every process that starts glibc pays them once.
2. A process start: an exec of a static program that only exits, without a C library
   and with glibc's start-up (static and dynamic), spawned and reaped as the bench spawns
   its systems. A CLI in front of the sandboxed program is one more such start than the
   bare program, which pays its own.
3. The kernel's namespaces: clone3 of a child that exits at once, reaped, with no new
   namespace, a user namespace, each of the others beside it, and the six a sandbox needs
   (user, mount, pid, network, ipc, uts).

Bare `python3 -c "print('hello')"` and `bash -c true` are timed in the same rounds, as
the reference the budget is taken from. Rounds interleave every case (a VM's speed
drifts); figures are medians. Writes Markdown to stdout and OUT/floor.md (default
bench/results/). Needs a C compiler and glibc's static library (Debian: gcc, libc6-dev).
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# cpuid: microseconds per CPUID; ns: microseconds per clone3 + exit + reap, per flag set
PROBE_C = r"""
#define _GNU_SOURCE
#include <cpuid.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static double clone_us(unsigned long long flags)
{
        struct clone_args a;
        memset(&a, 0, sizeof(a));
        a.flags = flags;
        a.exit_signal = SIGCHLD;
        double t = now_us();
        long pid = syscall(SYS_clone3, &a, sizeof(a));
        if (pid == 0)
                _exit(0);
        if (pid < 0)
                return -1;
        waitpid((pid_t)pid, NULL, 0);
        return now_us() - t;
}

int main(int argc, char **argv)
{
        if (argc == 3 && strcmp(argv[1], "cpuid") == 0) {
                int n = atoi(argv[2]);
                unsigned a, b, c, d;
                double t = now_us();
                for (int i = 0; i < n; i++)
                        __cpuid_count(4, i & 3, a, b, c, d);
                printf("%.3f\n", (now_us() - t) / n);
                return 0;
        }
        if (argc == 3 && strcmp(argv[1], "clone") == 0) {
                double us = clone_us(strtoull(argv[2], NULL, 0));
                if (us < 0) {
                        perror("clone3");
                        return 1;
                }
                printf("%.1f\n", us);
                return 0;
        }
        return 2;
}
"""

EXIT_S = ".globl _start\n_start:\n\tmov $60, %eax\n\txor %edi, %edi\n\tsyscall\n"
EMPTY_C = "int main(void) { return 0; }\n"

NS = {"user": 0x10000000, "mount": 0x00020000, "pid": 0x20000000, "network": 0x40000000,
      "ipc": 0x08000000, "uts": 0x04000000}
CLONES = [("no new namespace", 0), ("user", NS["user"])] + \
    [("user + " + k, NS["user"] | v) for k, v in NS.items() if k != "user"] + \
    [("the six (user, mount, pid, network, ipc, uts)", sum(NS.values()))]


def build(tmp: str) -> dict:
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise SystemExit("floor.py: no C compiler (Debian: gcc)")
    progs = {}
    for name, src, ext, flags in (("probe", PROBE_C, "c", ["-O2"]),
                                  ("nolibc", EXIT_S, "s", ["-nostdlib", "-static"]),
                                  ("static", EMPTY_C, "c", ["-O2", "-static"]),
                                  ("dynamic", EMPTY_C, "c", ["-O2"])):
        path = os.path.join(tmp, f"{name}.{ext}")
        with open(path, "w") as f:
            f.write(src)
        out = os.path.join(tmp, name)
        r = subprocess.run([cc, *flags, "-o", out, path], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise SystemExit(f"floor.py: building {name}: {r.stderr.strip()[-400:]} "
                             "(a static one needs glibc's static library, Debian: libc6-dev)")
        progs[name] = out
    return progs


def spawn_ms(argv: list[str]) -> float:
    """Spawn to reap, as a bench harness sees a system: the wall milliseconds."""
    t = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                         file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
    _, status = os.waitpid(pid, 0)
    dt = (time.perf_counter() - t) * 1000
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"floor.py: {' '.join(argv)} failed ({status})")
    return dt


def probe(progs: dict, *args: str) -> float:
    r = subprocess.run([progs["probe"], *args], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise SystemExit(f"floor.py: probe {' '.join(args)}: {r.stderr.strip()}")
    return float(r.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=200, help="interleaved rounds (default 200)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"), help="output directory")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="hxs-floor-") as tmp:
        progs = build(tmp)
        starts = [("a static program that only exits, no C library", [progs["nolibc"]]),
                  ("the same with glibc's start-up, static", [progs["static"]]),
                  ("the same, dynamic (ld.so, libc.so)", [progs["dynamic"]]),
                  ("bare `bash -c true`", ["/usr/bin/bash", "-c", "true"]),
                  ("bare `python3 -c \"print('hello')\"`", ["/usr/bin/python3", "-c", "print('hello')"])]
        cases = [("start", i) for i in range(len(starts))] + [("clone", i) for i in range(len(CLONES))] + \
            [("cpuid", 0)]
        got: dict = {c: [] for c in cases}
        for c in cases:  # once untimed: page cache, lazy set-up
            if c[0] == "start":
                spawn_ms(starts[c[1]][1])
        for _ in range(args.rounds):
            random.shuffle(cases)
            for kind, i in cases:
                if kind == "start":
                    got[(kind, i)].append(spawn_ms(starts[i][1]))
                elif kind == "clone":
                    got[(kind, i)].append(probe(progs, "clone", str(CLONES[i][1])) / 1000)
                else:
                    got[(kind, i)].append(probe(progs, "cpuid", "200"))
    med = {c: statistics.median(v) for c, v in got.items()}
    cpuid_us = med[("cpuid", 0)]
    nolibc, static, dynamic = (med[("start", i)] for i in range(3))
    py = med[("start", 4)]
    ns_none, ns_six = med[("clone", 0)], med[("clone", len(CLONES) - 1)]
    glibc = static - nolibc
    budget = 0.15 * py

    L = ["# What this machine charges any sandbox", ""]
    L.append(f"`/usr/bin/python3 bench/floor.py --rounds {args.rounds}`, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
             f"load average at the end {' '.join('%.2f' % x for x in os.getloadavg())}; "
             f"{args.rounds} interleaved rounds, medians.")
    L += ["", "## Process starts (spawn to reap, wall)", "", "| program | ms |", "| --- | ---: |"]
    L += [f"| {name} | {med[('start', i)]:.2f} |" for i, (name, _) in enumerate(starts)]
    L += ["", "## Namespaces (clone3 of a child that exits at once, to its reap, wall)", "",
          "| new namespaces | ms |", "| --- | ---: |"]
    L += [f"| {name} | {med[('clone', i)]:.2f} |" for i, (name, _) in enumerate(CLONES)]
    L += ["", f"One CPUID instruction: {cpuid_us:.2f} us (mean of 200, median of the rounds).", "",
          "## What it leaves of the cold target's budget", "",
          f"Python hello <= 1.15 x bare leaves {budget:.2f} ms (0.15 x {py:.2f}) for everything a "
          f"sandbox adds. glibc's start-up costs {glibc:.2f} ms a process here (about "
          f"{glibc * 1000 / cpuid_us:.0f} CPUIDs' worth), which a CLI in front of the program pays "
          f"once more than bare does; the six namespaces cost {ns_six - ns_none:.2f} ms over a plain "
          f"child. Together {glibc + ns_six - ns_none:.2f} ms, {100 * (glibc + ns_six - ns_none) / budget:.0f} % "
          f"of the budget, before any cgroup, root file system, /proc, seccomp filter or teardown.", ""]
    text = "\n".join(L)
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "floor.md"), "w") as f:
        f.write(text)
    sys.stderr.write(f"wrote {os.path.join(args.out, 'floor.md')}\n")


if __name__ == "__main__":
    main()
