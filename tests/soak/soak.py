#!/usr/bin/python3
"""Soak test of `hexr-sandbox serve`: thousands of mixed executions at full concurrency
against a service of its own, every result checked against what that kind of program
must produce, the service's memory and descriptors watched, and the host checked for
leftovers at the end. Not part of `make test` (not registered in ctest).

    /usr/bin/python3 tests/soak/soak.py [--executions N] [--concurrency C] [--bin PATH]

It starts `hexr-sandbox serve` on a free 127.0.0.1 port with a temporary STATE_DIR,
runs a canary first (CapEff 0, NoNewPrivs 1, Seccomp 2, no interface but lo, in every
language) and runs no hostile probe if the canary fails. The probes are non-destructive
and only ever touch 127.0.0.1 from inside the sandbox.

Exit status: 0 when every result was the expected one, the service's RSS and open
descriptors stayed flat, it stopped cleanly and left nothing behind; 1 otherwise;
2 when the canary or the start failed.

Standard library only (Python 3.9+); run as root, like the service.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tests" / "lib") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests" / "lib"))
from hxstest import host as _cli  # noqa: E402  host-side views shared by every suite
from hxstest.service import free_port, wait_listening  # noqa: E402

MiB = 1 << 20

# settings the soak service runs with (the rest are the defaults)
PIDS_MAX = 128
OUTPUT_MAX = 1 << 20


# ---- the service ---------------------------------------------------------------------------------


proc_start_time = _cli.proc_start_time


class Service:
    def __init__(self, binary: str, slots: int):
        self.top = tempfile.mkdtemp(prefix="hxs-soak-")
        os.chmod(self.top, 0o755)     # the sandbox's unprivileged root must reach STATE_DIR
        self.state = os.path.join(self.top, "state")
        os.mkdir(self.state, 0o755)
        self.port = free_port()
        self.log_path = os.path.join(self.top, "serve.log")
        env = dict(os.environ)
        env.pop("LISTEN_ADDRESS", None)
        env.update(STATE_DIR=self.state, MAX_CONCURRENT=str(slots), MAX_QUEUE="256", QUEUE_TIMEOUT="300s",
                   SANDBOX_PIDS_MAX=str(PIDS_MAX), MAX_OUTPUT_BYTES=str(OUTPUT_MAX))
        self.uid_base = int(env.get("SANDBOX_UID_BASE") or 1000000)
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:%d" % self.port], env=env,
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        self.pid = self.proc.pid
        wait_listening(self.proc, self.log_path, 30)
        self.start = proc_start_time(self.pid)
        self.instance = "s%d.%d" % (self.pid, self.start)

    def log_text(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    # -- requests -------------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Optional[Dict[str, Any]] = None,
                timeout: float = 120) -> Tuple[int, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, body=data,
                         headers={"Content-Type": "application/json"} if data is not None else {})
            resp = conn.getresponse()
            raw = resp.read()
            ctype = resp.getheader("Content-Type", "")
        finally:
            conn.close()
        return resp.status, json.loads(raw) if ctype.startswith("application/json") else raw.decode()

    def metrics(self) -> Dict[str, float]:
        _, text = self.request("GET", "/metrics", timeout=30)
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                k, _, v = line.rpartition(" ")
                out[k] = float(v)
        return out

    # -- the service process ------------------------------------------------------------------------

    def rss_kb(self) -> int:
        with open("/proc/%d/status" % self.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return -1

    def fds(self) -> int:
        return len(os.listdir("/proc/%d/fd" % self.pid))

    def stop(self, timeout: float = 60) -> Optional[int]:
        return _cli.terminate(self.proc, timeout)

    def cleanup(self) -> None:
        if not host_mounts_under(self.top):
            shutil.rmtree(self.top, ignore_errors=True)


# ---- host-side leftovers (the checks of tests/lib/hxstest/host.py, for one instance) -------------


engine_cgroup_parents = _cli.engine_cgroup_parents


def instance_cgroups(instance: str) -> List[str]:
    found = []
    for parent in engine_cgroup_parents():
        try:
            found += [os.path.join(parent, n) for n in os.listdir(parent) if n.startswith(instance + "-")]
        except OSError:
            pass
    return sorted(found)


_read = _cli.read_proc
_uids = _cli._status_uids
processes_by_cgroup = _cli.instance_processes


def template_processes(svc: Service) -> List[int]:
    return _cli.template_processes(svc.state, svc.uid_base)


def template_cgroup_names(svc: Service) -> Set[str]:
    names: Set[str] = set()
    for pid in template_processes(svc):
        names |= set(re.findall(r"/hexr-sandbox/(s\d+\.\d+-\d+)", _read("/proc/%d/cgroup" % pid) or ""))
    return names


def kept_cgroup_names(svc: Service) -> Set[str]:
    """The templates' cgroups, and those of pre-started sandboxes waiting for code
    (SANDBOX_POOL; exactly that, see hxstest.host.waiting_pooled_sandbox)."""
    names = template_cgroup_names(svc)
    for c in instance_cgroups(svc.instance):
        if _cli.waiting_pooled_name(os.path.basename(c)):
            names.add(os.path.basename(c))
    return names


def sandbox_user_processes(svc: Service) -> List[str]:
    """Processes running as the sandbox's host uids inside this instance's cgroups, or in
    no engine cgroup at all; not those of waiting pre-started sandboxes."""
    uids = {svc.uid_base, svc.uid_base + 1000}
    kept = kept_cgroup_names(svc)
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or not (_uids(pid) & uids):
            continue
        cg = _read("/proc/%s/cgroup" % pid) or ""
        if any("/hexr-sandbox/%s\n" % n in cg for n in kept):
            continue
        if svc.instance + "-" in cg or "/hexr-sandbox/s" not in cg:
            cmd = (_read("/proc/%s/cmdline" % pid, "rb") or b"").replace(b"\0", b" ")[:120]
            found.append("%s: %s" % (pid, cmd.decode(errors="replace")))
    return found


def host_mounts_under(path: str) -> List[str]:
    path = os.path.realpath(path).rstrip("/")
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mnt = line.split()[4].replace("\\040", " ")
            if mnt == path or mnt.startswith(path + "/"):
                found.append(mnt)
    return found


def wait_until(pred: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(0.2)


# ---- the canary ------------------------------------------------------------------------------------


CANARY = {
    "python": r'''
import json, socket
st = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
ifs = sorted(n for _, n in socket.if_nameindex())
try:
    dev = [l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]]
except OSError:
    dev = None
print(json.dumps({"CapEff": st["CapEff"].strip(), "NoNewPrivs": st["NoNewPrivs"].strip(),
                  "Seccomp": st["Seccomp"].strip(), "ifaces": ifs, "net_dev": dev}))
''',
    "javascript": r'''
const fs = require('fs');
const st = {};
for (const l of fs.readFileSync('/proc/self/status', 'utf8').split('\n')) {
  const i = l.indexOf(':'); if (i > 0) st[l.slice(0, i)] = l.slice(i + 1).trim();
}
const ifaces = Object.keys(require('os').networkInterfaces()).sort();
console.log(JSON.stringify({CapEff: st.CapEff, NoNewPrivs: st.NoNewPrivs, Seccomp: st.Seccomp, ifaces}));
''',
    "bash": r'''
get() { sed -n "s/^$1:[[:space:]]*//p" /proc/self/status; }
printf '{"CapEff":"%s","NoNewPrivs":"%s","Seccomp":"%s"}\n' "$(get CapEff)" "$(get NoNewPrivs)" "$(get Seccomp)"
''',
}


def canary(svc: Service) -> List[str]:
    problems = []
    for lang, code in CANARY.items():
        for _ in range(2):  # Python: a warm and (if the template is not ready yet) a cold start alike
            status, res = svc.request("POST", "/api/v1/exec", {"code": code, "language": lang, "timeout": 20})
            if status != 200 or res.get("exit_code") != 0:
                problems.append("%s: the canary did not run: %s %s" % (lang, status, res))
                continue
            info = json.loads(res["stdout"].strip().splitlines()[-1])
            if info["CapEff"] != "0000000000000000":
                problems.append("%s: CapEff %s" % (lang, info["CapEff"]))
            if info["NoNewPrivs"] != "1":
                problems.append("%s: NoNewPrivs %s" % (lang, info["NoNewPrivs"]))
            if info["Seccomp"] != "2":
                problems.append("%s: Seccomp %s" % (lang, info["Seccomp"]))
            if "ifaces" in info and info["ifaces"] not in (["lo"], []):
                problems.append("%s: network interfaces %s" % (lang, info["ifaces"]))
            if info.get("net_dev") not in (None, ["lo"]):
                problems.append("%s: /proc/net/dev lists %s" % (lang, info["net_dev"]))
    return problems


# ---- the mix ----------------------------------------------------------------------------------------

Check = Callable[[int, Dict[str, Any]], Optional[str]]


def expect(exit_code: int = 0, stdout: Optional[str] = None, contains: str = "", stderr_has: str = "",
           timed_out: bool = False, oom: bool = False, signal_: Optional[int] = None,
           truncated: bool = False, stdout_in: Tuple[str, ...] = ()) -> Check:
    def check(status: int, r: Dict[str, Any]) -> Optional[str]:
        if status != 200:
            return "status %s: %s" % (status, r)
        got = (r["exit_code"], r["timed_out"], r["oom_killed"], r["signal"], r["stdout_truncated"])
        want = (exit_code, timed_out, oom, signal_, truncated)
        if got != want:
            return "exit/timed_out/oom/signal/truncated %s, want %s; stderr %r" % (got, want, r["stderr"][-300:])
        if stdout is not None and r["stdout"] != stdout:
            return "stdout %r, want %r" % (r["stdout"][:200], stdout)
        if stdout_in and r["stdout"] not in stdout_in:
            return "stdout %r, want one of %r" % (r["stdout"][:200], stdout_in)
        if contains and contains not in r["stdout"]:
            return "stdout %r lacks %r" % (r["stdout"][:200], contains)
        if stderr_has and stderr_has not in r["stderr"]:
            return "stderr %r lacks %r" % (r["stderr"][-300:], stderr_has)
        if truncated and not (0 < len(r["stdout"].encode()) <= OUTPUT_MAX * 3):  # U+FFFD may triple bytes
            return "truncated stdout of %d bytes" % len(r["stdout"])
        return None
    return check


def hostile_check(status: int, r: Dict[str, Any]) -> Optional[str]:
    if status != 200 or r["exit_code"] != 0:
        return "status %s exit %s: %r %r" % (status, r.get("exit_code"), r.get("stdout"), r.get("stderr", "")[-300:])
    try:
        report = json.loads(r["stdout"].strip().splitlines()[-1])
    except (ValueError, IndexError):
        return "no report: %r" % r["stdout"][:300]
    broken = {k: v for k, v in report.items() if v != "denied"}
    return "not denied: %s" % broken if broken else None


HOSTILE = r'''
import ctypes, errno, json, os, socket
out = {}
def probe(name, fn):
    try:
        fn()
        out[name] = "ALLOWED"
    except OSError as e:
        out[name] = "denied"
def read_shadow():
    open("/etc/shadow").read()
def host_service():
    socket.create_connection(("127.0.0.1", %(port)d), timeout=2).close()
def become_root():
    os.setuid(0)
def write_usr():
    open("/usr/hxs-soak-probe", "w").close()
def unshare_user():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x10000000) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
def mount_tmpfs():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"none", b"/tmp", b"tmpfs", 0, None) != 0:
        raise OSError(ctypes.get_errno(), "mount")
def raw_socket():
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close()
def ptrace_pid1():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, 1, None, None) != 0:
        raise OSError(ctypes.get_errno(), "ptrace")
for n, f in [("read /etc/shadow", read_shadow), ("connect to the host's service port", host_service),
             ("setuid(0)", become_root), ("write /usr", write_usr), ("unshare(CLONE_NEWUSER)", unshare_user),
             ("mount", mount_tmpfs), ("AF_PACKET socket", raw_socket), ("ptrace PID 1", ptrace_pid1)]:
    probe(n, f)
print(json.dumps(out))
'''

FORK_BOMB_PY = r'''
import errno, os, time
n, err = 0, None
while n < 5000:
    try:
        pid = os.fork()
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e)); break
    if pid == 0:
        time.sleep(60); os._exit(0)
    n += 1
print("limited" if err == "EAGAIN" and n < %d else "NOT LIMITED", n, err)
''' % PIDS_MAX


def kinds(port: int, hostile: bool) -> List[Tuple[str, int, Callable[[random.Random], Tuple[Dict[str, Any], Check]]]]:
    """(name, weight, make(rng) -> (request body, check))."""
    def py_ok(g):
        n = g.randrange(1, 10 ** 6)
        return {"code": "print(sum(range(%d)))" % n}, expect(stdout="%d\n" % (n * (n - 1) // 2))

    def js_ok(g):
        a, b = g.randrange(10 ** 6), g.randrange(10 ** 6)
        return {"code": "console.log(%d * %d)" % (a, b), "language": "javascript"}, expect(stdout="%d\n" % (a * b))

    def bash_ok(g):
        a, b = g.randrange(10 ** 6), g.randrange(10 ** 6)
        return {"code": "echo $((%d + %d))" % (a, b), "language": "bash"}, expect(stdout="%d\n" % (a + b))

    def py_sci(g):
        n = g.randrange(1, 10 ** 5)
        code = ("import numpy as np, pandas as pd\n"
                "print(int(np.arange(%d).sum()), len(pd.DataFrame({'x': range(%d)})))" % (n, n % 100))
        return {"code": code}, expect(stdout="%d %d\n" % (n * (n - 1) // 2, n % 100))

    def fail(g):
        k = g.randrange(1, 120)
        lang = g.choice(["python", "javascript", "bash"])
        code = {"python": "import sys; sys.exit(%d)", "javascript": "process.exit(%d)", "bash": "exit %d"}[lang] % k
        return {"code": code, "language": lang}, expect(exit_code=k)

    def exception(g):
        lang = g.choice(["python", "javascript"])
        code = {"python": "raise ValueError('soak')", "javascript": "throw new Error('soak')"}[lang]
        return {"code": code, "language": lang}, expect(exit_code=1, stderr_has="soak")

    def killed(g):
        return {"code": "kill -SEGV $$", "language": "bash"}, expect(exit_code=139, signal_=11)

    def timeout(g):
        lang = g.choice(["python", "bash", "javascript"])
        code = {"python": "import time\nprint('t', flush=True)\ntime.sleep(30)", "bash": "echo t; sleep 30",
                "javascript": "console.log('t'); setTimeout(() => {}, 30000)"}[lang]
        # what was printed before the kill is kept (a slow start may not get that far)
        return {"code": code, "language": lang, "timeout": 1}, expect(exit_code=124, timed_out=True, signal_=9,
                                                                      stdout_in=("", "t\n"))

    def oom(g):
        lang = g.choice(["python", "javascript"])
        code = {"python": "x = bytearray(200 * 1024 * 1024)\nx[::4096] = b'x' * len(x[::4096])\nprint('survived')",
                "javascript": "const a = []; for (;;) a.push(Buffer.alloc(1 << 20, 1));"}[lang]
        return {"code": code, "language": lang, "memory_mb": 64}, expect(exit_code=137, oom=True, signal_=9)

    def flood(g):
        lang = g.choice(["python", "bash"])
        code = {"python": "import sys\nfor _ in range(48): sys.stdout.write('x' * 65536)",
                "bash": "head -c 3000000 /dev/zero | tr '\\0' y"}[lang]
        return {"code": code, "language": lang}, expect(truncated=True)

    def fork_bomb(g):
        if g.random() < 0.5:
            return {"code": FORK_BOMB_PY, "timeout": 20}, expect(contains="limited ")
        return ({"code": ":(){ :|:& };:\nwhile true; do wait; done\n", "language": "bash", "timeout": 2},
                expect(exit_code=124, timed_out=True, signal_=9))

    def stdin_env(g):
        word = "".join(g.choice("abcdefghij\u00e9\u2603") for _ in range(g.randrange(1, 40)))
        if g.random() < 0.5:
            return ({"code": "import sys, os; print(sys.stdin.read()[::-1] + os.environ['SOAK'])", "stdin": word,
                     "env_vars": {"SOAK": "!"}}, expect(stdout=word[::-1] + "!\n"))
        return ({"code": 'printf "%s|%s\\n" "$SOAK_A" "$(cat)"', "language": "bash", "stdin": word,
                 "env_vars": {"SOAK_A": word}}, expect(stdout="%s|%s\n" % (word, word)))

    def probe(g):
        return {"code": HOSTILE % {"port": port}, "timeout": 20}, hostile_check

    table = [("python ok", 20, py_ok), ("javascript ok", 10, js_ok), ("bash ok", 15, bash_ok),
             ("python numpy/pandas", 4, py_sci), ("non-zero exit", 8, fail), ("exception", 5, exception),
             ("killed by signal", 3, killed), ("timeout", 4, timeout), ("oom", 4, oom), ("output flood", 4, flood),
             ("fork bomb", 3, fork_bomb), ("stdin+env", 8, stdin_env)]
    if hostile:
        table.append(("hostile probe", 4, probe))
    return table


# ---- the run -----------------------------------------------------------------------------------------


def percentile(values: List[float], p: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--executions", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=4, help="requests in flight at once (and service slots)")
    ap.add_argument("--slots", type=int, default=0, help="MAX_CONCURRENT of the service (default: --concurrency)")
    ap.add_argument("--bin", default=os.environ.get("HEXR_SANDBOX_BIN") or str(ROOT / "build" / "hexr-sandbox"))
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--rss-tolerance-mb", type=float, default=16.0, help="allowed RSS growth after warm-up")
    ap.add_argument("--fd-tolerance", type=int, default=2, help="allowed growth of open descriptors")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    slots = args.slots or args.concurrency
    print("soak: %d executions, %d in flight, %d slots, seed %d, %s" % (args.executions, args.concurrency, slots,
                                                                         seed, args.bin), flush=True)
    try:
        svc = Service(args.bin, slots)
    except (RuntimeError, OSError) as e:
        print("soak: %s" % e, file=sys.stderr)
        return 2
    failures: List[str] = []
    try:
        # warm templates first, so that the baseline is a service in its steady state
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            _, h = svc.request("GET", "/health")
            if h["warm"]["templates_ready"] == h["warm"]["templates_total"]:
                break
            time.sleep(0.2)
        problems = canary(svc)
        if problems:
            print("soak: CANARY FAILED, no hostile probe is run:\n  " + "\n  ".join(problems), file=sys.stderr)
            return 2
        print("soak: canary ok (CapEff 0, NoNewPrivs 1, Seccomp 2, only lo; python, javascript, bash)", flush=True)

        table = kinds(svc.port, hostile=True)
        names = [t[0] for t in table]
        rng = random.Random(seed)
        plan = rng.choices(range(len(table)), weights=[t[1] for t in table], k=args.executions)
        # a short warm-up of every kind before the baseline (allocator pools, caches)
        warm_rng = random.Random(seed + 1)
        for i in range(len(table)):
            body, check = table[i][2](warm_rng)
            status, res = svc.request("POST", "/api/v1/exec", body)
            err = check(status, res)
            if err:
                failures.append("warm-up %s: %s" % (table[i][0], err))
        samples: Dict[str, Tuple[int, int]] = {"start": (svc.rss_kb(), svc.fds())}
        m0 = svc.metrics()

        lock = threading.Lock()
        done = 0
        latencies: Dict[str, List[float]] = {n: [] for n in names}
        counts: Dict[str, int] = {n: 0 for n in names}
        unexpected: Dict[str, int] = {n: 0 for n in names}
        peak = [samples["start"][0], samples["start"][1]]

        def one(i: int, k: int) -> None:
            nonlocal done
            g = random.Random(seed * 1_000_003 + i)
            body, check = table[k][2](g)
            t0 = time.monotonic()
            try:
                status, res = svc.request("POST", "/api/v1/exec", body, timeout=180)
                err = check(status, res)
            except (OSError, http.client.HTTPException, ValueError) as e:
                err = "request failed: %r" % e
            dt = time.monotonic() - t0
            with lock:
                done += 1
                counts[names[k]] += 1
                latencies[names[k]].append(dt)
                if err:
                    unexpected[names[k]] += 1
                    if len(failures) < 50:
                        failures.append("#%d %s: %s" % (i, names[k], err))
                if done == args.executions // 2:
                    samples["middle"] = (svc.rss_kb(), svc.fds())
                if done % 100 == 0:
                    print("soak: %d/%d done, %d unexpected" % (done, args.executions, sum(unexpected.values())),
                          flush=True)

        stop_sampling = threading.Event()

        def sampler() -> None:
            while not stop_sampling.wait(2.0):
                try:
                    rss, fds = svc.rss_kb(), svc.fds()
                except OSError:
                    return
                peak[0], peak[1] = max(peak[0], rss), max(peak[1], fds)

        sampler_thread = threading.Thread(target=sampler, daemon=True)
        sampler_thread.start()
        t_start = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.concurrency) as pool:
            list(pool.map(lambda ik: one(*ik), enumerate(plan)))
        wall = time.monotonic() - t_start
        stop_sampling.set()

        # the service is idle again: let executions' cgroups and descriptors settle
        settled = wait_until(lambda: not [c for c in instance_cgroups(svc.instance)
                                          if os.path.basename(c) not in kept_cgroup_names(svc)], 15)
        time.sleep(1.0)
        samples["end"] = (svc.rss_kb(), svc.fds())
        m1 = svc.metrics()

        # ---- checks ----
        executions_counted = sum(v - m0.get(k, 0) for k, v in m1.items()
                                 if k.startswith("hexr_sandbox_executions_total{"))
        if executions_counted != args.executions:
            failures.append("metrics count %d executions, %d were sent" % (executions_counted, args.executions))
        restarts_key = "hexr_sandbox_warm_template_restarts_total"
        restarts = m1.get(restarts_key, 0) - m0.get(restarts_key, 0)
        rss0, fd0 = samples["start"]
        rss1, fd1 = samples["end"]
        if rss1 - rss0 > args.rss_tolerance_mb * 1024:
            failures.append("service RSS grew from %d to %d KiB (tolerance %.0f MiB)"
                            % (rss0, rss1, args.rss_tolerance_mb))
        if fd1 - fd0 > args.fd_tolerance:
            failures.append("service descriptors grew from %d to %d" % (fd0, fd1))
        leftover_cgroups = [c for c in instance_cgroups(svc.instance)
                            if os.path.basename(c) not in kept_cgroup_names(svc)]
        if leftover_cgroups:
            failures.append("execution cgroups left while idle: %s" % leftover_cgroups[:10])
        kept = kept_cgroup_names(svc)
        procs = {n: p for n, p in processes_by_cgroup(svc.instance).items() if n not in kept}
        if procs:
            failures.append("processes in execution cgroups while idle: %s" % procs)
        stray = sandbox_user_processes(svc)
        if stray:
            failures.append("sandbox-user processes while idle: %s" % stray[:10])
        mounts = host_mounts_under(svc.top)
        if mounts:
            failures.append("mounts on the host under the soak's directory: %s" % mounts)
        root_left = os.listdir(os.path.join(svc.state, "root"))
        if root_left:
            failures.append("STATE_DIR/root is not empty: %s" % root_left)
        if svc.proc.poll() is not None:
            failures.append("the service died (exit %s)" % svc.proc.returncode)

        # ---- stop, and what the stop leaves ----
        templates = template_processes(svc)
        rc = svc.stop()
        if rc != 0:
            failures.append("the service exited with %s on SIGTERM" % rc)
        if not wait_until(lambda: not instance_cgroups(svc.instance), 15):
            failures.append("cgroups of the stopped service left: %s" % instance_cgroups(svc.instance)[:10])
        alive = [p for p in templates if os.path.exists("/proc/%d" % p) and
                 svc.state.encode() in (_read("/proc/%d/cmdline" % p, "rb") or b"")]
        if alive:
            failures.append("warm templates outlived the service: %s" % alive)
        if not wait_until(lambda: not sandbox_user_processes(svc), 15):
            failures.append("sandbox processes outlived the service: %s" % sandbox_user_processes(svc)[:10])
        crashes = [ln for ln in svc.log_text().splitlines() if "AddressSanitizer" in ln or "runtime error" in ln]
        if crashes:
            failures.append("sanitizer reports in the service log: %s" % crashes[:5])

        # ---- summary ----
        all_lat = [x for v in latencies.values() for x in v]
        print()
        print("%-22s %6s %10s %9s %9s" % ("kind", "count", "unexpected", "p50 ms", "p99 ms"))
        for n in names:
            print("%-22s %6d %10d %9.0f %9.0f" % (n, counts[n], unexpected[n], percentile(latencies[n], 50) * 1000,
                                                  percentile(latencies[n], 99) * 1000))
        print("%-22s %6d %10d %9.0f %9.0f" % ("all", len(all_lat), sum(unexpected.values()),
                                              percentile(all_lat, 50) * 1000, percentile(all_lat, 99) * 1000))
        print()
        print("executions %d in %.1f s: %.1f/s at %d in flight (%d slots); template restarts %d"
              % (len(all_lat), wall, len(all_lat) / wall if wall else 0, args.concurrency, slots, restarts))
        mid = samples.get("middle", (-1, -1))
        print("service RSS KiB: start %d, middle %d, end %d, peak %d" % (rss0, mid[0], rss1, peak[0]))
        print("service fds:     start %d, middle %d, end %d, peak %d" % (fd0, mid[1], fd1, peak[1]))
        print("leftovers: %s" % ("none" if not (leftover_cgroups or procs or stray or mounts or root_left)
                                 else "see failures"))
        if not settled:
            print("note: execution cgroups were still present 15 s after the last reply")
    finally:
        if svc.proc.poll() is None:
            svc.stop()
        svc.cleanup()
    if failures:
        print("\nFAILED (%d):\n  %s" % (len(failures), "\n  ".join(failures)))
        return 1
    print("\nOK: every result as expected, RSS and descriptors flat, nothing left behind")
    return 0


if __name__ == "__main__":
    sys.exit(main())
