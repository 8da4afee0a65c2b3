#!/usr/bin/python3
"""Where does the cold path's time go? A breakdown of `hexr-sandbox exec -l bash -c true`
and of the cold Python hello (`exec -l python -c "print('hello')"`).

1. CPU time (perf stat task-clock: every process of the run, user + kernel) and wall
   time of a ladder of commands, each adding one cost to the one before:
   bare bash, our binary doing nothing (`version`: exec + dynamic linking), the kernel's
   namespaces alone (`unshare` with the same six namespaces), bubblewrap, and ours.
2. A phase timeline of one run (strace with a seccomp-bpf filter, so only the syscalls
   that mark phases stop the process): start-up, engine set-up, sandbox construction
   (clone3 to the program's execve), the program, teardown (its exit to our waitid),
   clean-up.
3. strace -c -f -w: the syscalls that take the most wall time in one run.
4. perf record of the cold Python hello: its CPU by process and library (our binary and
   the kernel working for it, the interpreter), against the bare interpreter's.

Writes Markdown to stdout and to OUT/profile.md (default bench/results/).
Needs perf (Debian: linux-perf) for 1 and strace for 2 and 3; skips what is missing.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def perf_stat(argv: list[str], runs: int) -> tuple[float, float, float] | None:
    """(task-clock ms, elapsed ms, elapsed ± ms) averaged over runs, or None."""
    if not shutil.which("perf"):
        return None
    r = subprocess.run(["perf", "stat", "-x,", "-r", str(runs), "-e", "task-clock", "--"] + argv,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600)
    clock = None
    for line in r.stderr.splitlines():
        f = line.split(",")
        if len(f) > 2 and f[2].startswith("task-clock"):
            try:
                clock = float(f[0])
            except ValueError:  # "<not counted>"
                pass
    if clock is None:
        sys.stderr.write(f"perf stat {' '.join(argv)}: {r.stderr.strip()[-300:]}\n")
    # -x does not print the elapsed time; time the same number of runs ourselves
    lat = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        lat.append((time.perf_counter() - t0) * 1000)
    return clock, statistics.median(lat), statistics.pstdev(lat)


def timeline(binary: str) -> list[tuple[str, float]] | None:
    if not shutil.which("strace"):
        return None
    out = "/tmp/hxs-profile-strace.txt"
    r = subprocess.run(["strace", "-f", "--seccomp-bpf", "-ttt", "-o", out,
                        "-e", "trace=execve,clone3,pivot_root,exit_group,waitid,rmdir",
                        binary, "exec", "-l", "bash", "-c", "true"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    if r.returncode != 0:
        return None
    with open(out) as f:
        lines = f.read().splitlines()
    os.unlink(out)
    marks: dict[str, float] = {}
    first_pid = None
    for ln in lines:
        m = re.match(r"(\d+)\s+(\d+\.\d+)\s+(.*)", ln)
        if not m:
            continue
        pid, t, rest = int(m.group(1)), float(m.group(2)), m.group(3)
        if first_pid is None:
            first_pid = pid
            marks["start"] = t
        if rest.startswith("clone3(") and pid == first_pid:
            marks.setdefault("clone3", t)
        elif rest.startswith("pivot_root("):
            marks.setdefault("pivot_root", t)
        elif rest.startswith('execve("/usr/bin/bash"'):
            marks.setdefault("program execve", t)
        elif rest.startswith("exit_group(") and pid != first_pid and "program exit" not in marks:
            marks["program exit"] = t
        elif rest.startswith("waitid(") and pid == first_pid:
            marks.setdefault("waitid", t)
        elif rest.startswith("+++ exited") and pid == first_pid:
            marks["end"] = t
    order = ["start", "clone3", "pivot_root", "program execve", "program exit", "waitid", "end"]
    if not all(k in marks for k in order):
        return None
    names = {
        ("start", "clone3"): "start-up: exec, dynamic linking, engine set-up (config, cgroup layout and "
                             "sweep; an older build compiles the seccomp filter here), cgroup creation",
        ("clone3", "pivot_root"): "sandbox construction 1: clone3 (6 namespaces), id maps, cgroup attach, "
                                  "mounts of the new root",
        ("pivot_root", "program execve"): "sandbox construction 2: pivot_root, bounding set, no_new_privs, "
                                          "seccomp, the program's spawn, its capabilities, rlimits, execve",
        ("program execve", "program exit"): "the program (bash -c true, under this sandbox)",
        ("program exit", "waitid"): "teardown: PID 1 exits, namespaces torn down, we are told",
        ("waitid", "end"): "clean-up: cgroups removed, result printed, exit",
    }
    return [(names[(a, b)], (marks[b] - marks[a]) * 1000) for a, b in zip(order, order[1:])]


def syscall_top(binary: str, n: int = 12) -> list[str] | None:
    if not shutil.which("strace"):
        return None
    out = "/tmp/hxs-profile-strace-c.txt"
    subprocess.run(["strace", "-f", "-c", "-w", "-o", out, binary, "exec", "-l", "bash", "-c", "true"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    try:
        with open(out) as f:
            lines = f.read().splitlines()
        os.unlink(out)
    except OSError:
        return None
    return lines[:2 + n]


CLEAN_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}
HELLO = "print('hello')"


def cpu_by_dso(argv: list[str], runs: int, env: dict | None = None) -> list[tuple[str, float]] | None:
    """perf record of runs runs of argv: (process / library, ms of CPU per run), largest first."""
    if not shutil.which("perf"):
        return None
    data = "/tmp/hxs-profile-perf.data"
    loop = f"for i in $(seq {runs}); do \"$@\" >/dev/null 2>&1; done"
    r = subprocess.run(["perf", "record", "-q", "-F", "4999", "-o", data, "--", "sh", "-c", loop, "sh"] + argv,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, timeout=600)
    if r.returncode != 0:
        return None
    rep = subprocess.run(["perf", "report", "-i", data, "--sort", "comm,dso", "--stdio", "-F", "period,comm,dso",
                          "--no-children", "-g", "none"], capture_output=True, text=True, timeout=120)
    os.unlink(data)
    rows = []
    for line in rep.stdout.splitlines():
        f = line.split()
        if len(f) >= 3 and f[0].isdigit():
            rows.append((f"{f[1]} {' '.join(f[2:])}", int(f[0])))
    # the period of cpu-clock samples is in ns: ms per run
    out = [(name, n / 1e6 / runs) for name, n in rows if name.split()[0] not in ("sh", "seq")]
    return sorted(out, key=lambda x: -x[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "hexr-sandbox"))
    ap.add_argument("--runs", type=int, default=40, help="runs per command (default 40)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--name", default="profile.md", help="file written in --out (default profile.md)")
    ap.add_argument("--cpu-shares", type=int, default=8192,
                    help="run in a cpu cgroup of its own with these shares, as run.py does (0: don't)")
    args = ap.parse_args()
    b = os.path.abspath(args.bin)
    if os.geteuid() != 0:
        print("profile_cold.py: run as root", file=sys.stderr)
        return 2
    sys.path.insert(0, HERE)
    import run  # noqa: E402  (same directory: the cpu cgroup helpers)
    groups = run.enter_cpu_cgroup(args.cpu_shares)
    try:
        return profile(args, b)
    finally:
        run.leave_cpu_cgroup(groups)


UNSHARE = ["unshare", "--user", "--map-root-user", "--pid", "--mount", "--net", "--ipc", "--uts", "--cgroup",
           "--fork"]


def floor_argv() -> list[str]:
    """What no sandbox of ours can do without: the six namespaces, a cgroup in each
    hierarchy the engine limits (v1: memory, pids, cpu; v2: one) made, joined, left and
    removed, and the program. sh adds its own start (about the `bash -c true` row)."""
    base = "/sys/fs/cgroup"
    hier = [h for h in ("memory", "pids", "cpu") if os.path.isdir(f"{base}/{h}")] or [""]
    dirs = [f"{base}/{h}/hxs-floor-$$".replace("//", "/") for h in hier]
    prog = " ".join(UNSHARE + ["env", "-i"] + [f"{k}={v}" for k, v in CLEAN_ENV.items()] +
                    ["/usr/bin/python3", "-c", '"print(\'hello\')"'])
    script = (f"mkdir {' '.join(dirs)} && " + " && ".join(f"echo $$ > {d}/cgroup.procs" for d in dirs) +
              f" && {prog}; " + "; ".join(f"echo $$ > {os.path.dirname(d)}/cgroup.procs" for d in dirs) +
              f"; rmdir {' '.join(dirs)}")
    return ["/bin/sh", "-c", script]


def profile(args, b: str) -> int:
    ladder = [
        ("`bash -c true` (the floor)", ["/usr/bin/bash", "-c", "true"]),
        ("`hexr-sandbox version` (our binary starting and exiting)", [b, "version"]),
        ("`unshare -U -r -p -m -n -i -u -f bash -c true` (the kernel's six namespaces)",
         ["unshare", "--user", "--map-root-user", "--pid", "--mount", "--net", "--ipc", "--uts", "--fork",
          "/usr/bin/bash", "-c", "true"]),
        ("`bwrap --unshare-all ... bash -c true`",
         ["bwrap", "--unshare-all", "--unshare-user", "--uid", "1000", "--gid", "1000", "--die-with-parent",
          "--new-session", "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib64", "/lib64",
          "--symlink", "usr/lib", "/lib", "--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev",
          "/usr/bin/bash", "-c", "true"]),
        ("`hexr-sandbox exec -l bash -c true`", [b, "exec", "-l", "bash", "-c", "true"]),
        ("`python3 -c \"print('hello')\"` (bare, clean environment)",
         ["env", "-i"] + [f"{k}={v}" for k, v in CLEAN_ENV.items()] + ["/usr/bin/python3", "-c", HELLO]),
        ("`unshare ... python3 -c \"print('hello')\"` (the same six namespaces around it)",
         UNSHARE + ["env", "-i"] + [f"{k}={v}" for k, v in CLEAN_ENV.items()] + ["/usr/bin/python3", "-c", HELLO]),
        ("the floor: a cgroup per hierarchy we use made, joined and removed around the line above (sh)",
         floor_argv()),
        ("`hexr-sandbox exec -l python -c \"print('hello')\"`", [b, "exec", "-l", "python", "-c", HELLO]),
    ]
    L = ["# Cold path profile: `hexr-sandbox exec`, Bash and Python\n",
         f"Binary: `{b}`\n",
         f"{time.strftime('%Y-%m-%d %H:%M')}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
         f"{os.cpu_count()} cores, `{' '.join(['bench/profile_cold.py'] + sys.argv[1:])}`\n"]
    L.append("## CPU and wall time\n")
    if shutil.which("perf"):
        L.append(f"CPU = perf stat task-clock (all processes of one run, user + kernel; excludes work "
                 f"the kernel defers to its own threads, e.g. network namespace clean-up), mean of "
                 f"{args.runs} runs; wall = median of {args.runs} more runs.\n")
        L.append("| command | CPU ms | wall ms (± sd) |\n| --- | ---: | ---: |")
        for label, argv in ladder:
            if not shutil.which(argv[0]) and not os.path.exists(argv[0]):
                continue
            r = perf_stat(argv, args.runs)
            if r:
                cpu = f"{r[0]:.1f}" if r[0] is not None else "?"
                L.append(f"| {label} | {cpu} | {r[1]:.1f} (± {r[2]:.1f}) |")
        L.append("")
    else:
        L.append("perf is missing (apt-get install -y linux-perf): no CPU breakdown.\n")
    k = max(5, args.runs // 4)
    tls = [t for t in (timeline(b) for _ in range(k)) if t]
    if tls:
        L.append("## Phases of a run\n")
        L.append(f"strace --seccomp-bpf stopping only at the syscalls that mark phases (the rest run "
                 f"untraced; each stop still adds a little); median of {len(tls)} runs.\n")
        L.append("| phase | ms (median) | share |\n| --- | ---: | ---: |")
        meds = [(name, statistics.median(t[i][1] for t in tls)) for i, (name, _) in enumerate(tls[0])]
        total = sum(ms for _, ms in meds)
        for name, ms in meds:
            L.append(f"| {name} | {ms:.1f} | {ms / total * 100:.0f}% |")
        L.append(f"| total (sum of medians) | {total:.1f} | |")
        L.append("")
    top = syscall_top(b)
    if top:
        L.append("## Syscalls by wall time (strace -c -f -w, one run; strace slows every syscall)\n")
        L.append("```")
        L.extend(top)
        L.append("```\n")
    py = cpu_by_dso([b, "exec", "-l", "python", "-c", HELLO], args.runs)
    bare = cpu_by_dso(["/usr/bin/python3", "-c", HELLO], args.runs, env=CLEAN_ENV)
    if py and bare:
        L.append("## Cold Python hello: where the CPU goes\n")
        L.append(f"perf record -F 4999 of {args.runs} runs each; ms of CPU per run by process and "
                 f"library (the process is named after what it runs: `hexr-sandbox` is our binary, "
                 f"the sandbox's PID 1 and the program before its execve; `python3` the program "
                 f"after it). Rows under 0.1 ms left out.\n")
        L.append("| process / library | ours, ms | bare, ms |\n| --- | ---: | ---: |")
        b_by = dict(bare)
        names = [n for n, _ in py] + [n for n, _ in bare if n not in dict(py)]
        py_by = dict(py)
        for n in names:
            x, y = py_by.get(n, 0.0), b_by.get(n, 0.0)
            if max(x, y) >= 0.1:
                L.append(f"| {n} | {x:.2f} | {y:.2f} |")
        L.append(f"| total | {sum(py_by.values()):.2f} | {sum(b_by.values()):.2f} |")
        L.append("")
    text = "\n".join(L)
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, args.name), "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
