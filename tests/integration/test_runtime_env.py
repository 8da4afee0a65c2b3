"""The runtime a program sees: what a small Linux machine has, sized to the sandbox.

Programs (often written by a model) read /proc/cpuinfo, /proc/meminfo, /proc/stat,
/proc/uptime, /proc/loadavg and /proc/self/mountinfo, run ps, top, free, nproc and df,
ask Node for os.cpus() and os.totalmem(), look up services (/etc/services), write to
/var/tmp and open pseudo-terminals. Each test runs that in the sandbox, in the languages
where it applies, through the CLI (cold) and through a service (Python warm, from a
template, and cold), and checks that the numbers are the sandbox's own: MemTotal is
memory_mb, the CPUs are SANDBOX_CPUS rounded up (at most the CPUs the sandbox may run
on), the uptime counts from the sandbox's start.

What must stay unreachable behind these files (the masked /proc entries, /proc/sys
writes, the host's /sys) is tested by tests/security/test_hostile_proc.py, behind the
canary. No absolute time is asserted: the uptime is compared with the run's own wall
time as the test measured it.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import time
from typing import Any, Dict, Iterator, Optional

import pytest

from hxstest.host import CLI_PIDS, leftover_cgroups, require_isolation, run_exec, wait_until
from conftest import Service, _launch, _stop_checked, post_exec

WARM_FLAG = '"_hxs_zygote" in __import__("sys").modules'


def host_cpus() -> int:
    return len(os.sched_getaffinity(0))


def shown_cpus(share: float) -> int:
    """What the sandbox must show for SANDBOX_CPUS=share: rounded up, at most ours."""
    return min(math.ceil(share), host_cpus())


def last_json(stdout: str) -> Dict[str, Any]:
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError("no JSON line in: %r" % stdout[-3000:])


@pytest.fixture(scope="module", autouse=True)
def canary_and_leftovers() -> Iterator[None]:
    require_isolation()
    yield
    ours = set(CLI_PIDS)
    assert wait_until(lambda: not leftover_cgroups(ours), timeout=5.0), \
        "execution cgroups left behind: %s" % leftover_cgroups(ours)


# ---- the machine: /proc, /sys, the tools ------------------------------------------------

MACHINE = {
    "python": r'''
import json, os, re, subprocess
def run(*argv):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    return {"rc": p.returncode, "out": p.stdout, "err": p.stderr[-500:]}
r = {}
for f in ("cpuinfo", "meminfo", "stat", "uptime", "loadavg", "self/mountinfo", "swaps"):
    with open("/proc/" + f) as fh:
        r[f] = fh.read()
with open("/sys/devices/system/cpu/online") as fh:
    r["online"] = fh.read()
r["cpu_count"] = os.cpu_count()
r["sysconf_conf"] = os.sysconf("SC_NPROCESSORS_CONF")
for name, argv in (("ps", ["ps", "-e", "-o", "pid=,args="]), ("top", ["top", "-b", "-n1"]),
                   ("free", ["free", "-k"]), ("nproc", ["nproc"]), ("df", ["df", "-k"])):
    r[name] = run(*argv)
with open("/proc/uptime") as fh:
    r["uptime_end"] = fh.read()
r["warm"] = @WARM@
print(json.dumps(r))
''',
    "javascript": r'''
const os = require('os'), fs = require('fs'), cp = require('child_process');
const run = (cmd, args) => { const p = cp.spawnSync(cmd, args, { encoding: 'utf8' }); return { rc: p.status, out: p.stdout, err: (p.stderr || '').slice(-500) }; };
console.log(JSON.stringify({ cpus: os.cpus().length, model: os.cpus()[0].model, totalmem: os.totalmem(),
  freemem: os.freemem(), uptime: os.uptime(), loadavg: os.loadavg(),
  meminfo: fs.readFileSync('/proc/meminfo', 'utf8'), ps: run('ps', ['-e', '-o', 'pid=,args=']) }));
''',
    "bash": r'''
printf 'nproc\t%s\n' "$(nproc)"
printf 'cpuinfo\t%s\n' "$(grep -c '^processor' /proc/cpuinfo)"
printf 'statcpus\t%s\n' "$(grep -c '^cpu[0-9]' /proc/stat)"
printf 'memtotal\t%s\n' "$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)"
printf 'free\t%s\n' "$(free -k | awk '/^Mem:/ {print $2}')"
printf 'uptime\t%s\n' "$(cut -d' ' -f1 /proc/uptime)"
printf 'top\t%s\n' "$(top -b -n1 | grep -c '^%Cpu')"
printf 'ps\t%s\n' "$(ps -e -o pid= | wc -l)"
printf 'df\t%s\n' "$(df -k /tmp | awk 'NR == 2 {print $6}')"
printf 'loadavg\t%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
''',
}


def meminfo_kb(text: str, key: str) -> int:
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise AssertionError("no %s in meminfo:\n%s" % (key, text))


def check_python(r: Dict[str, Any], memory_mb: int, cpus: int, wall_s: float) -> None:
    kb = memory_mb * 1024
    assert meminfo_kb(r["meminfo"], "MemTotal") == kb, r["meminfo"]
    assert meminfo_kb(r["meminfo"], "MemAvailable") <= kb and meminfo_kb(r["meminfo"], "SwapTotal") == 0
    procs = [line for line in r["cpuinfo"].splitlines() if line.startswith("processor")]
    assert len(procs) == cpus, r["cpuinfo"][:2000]
    assert "model name" in r["cpuinfo"] or "vendor_id" in r["cpuinfo"], r["cpuinfo"][:2000]
    assert sum(1 for line in r["stat"].splitlines() if line.startswith("cpu") and line[3:4].isdigit()) == cpus
    assert r["online"].strip() == ("0" if cpus == 1 else "0-%d" % (cpus - 1))
    assert r["cpu_count"] == cpus and r["sysconf_conf"] == cpus, r
    # the uptime counts from the sandbox's start: no longer than this run took
    up0, up1 = float(r["uptime"].split()[0]), float(r["uptime_end"].split()[0])
    assert 0 <= up0 <= up1 <= wall_s + 0.05, (r["uptime"], r["uptime_end"], wall_s)
    load = r["loadavg"].split()
    assert len(load) == 5 and all(float(x) >= 0 for x in load[:3]), r["loadavg"]
    assert any(" / / " in line for line in r["self/mountinfo"].splitlines()), r["self/mountinfo"]
    assert r["swaps"].startswith("Filename") and len(r["swaps"].splitlines()) == 1, r["swaps"]
    for tool in ("ps", "top", "free", "nproc", "df"):
        assert r[tool]["rc"] == 0, "%s failed: %s" % (tool, r[tool])
    assert "ps -e" in r["ps"]["out"] and len(r["ps"]["out"].splitlines()) <= 6, r["ps"]
    assert "%.1f total" % memory_mb in r["top"]["out"], r["top"]["out"]
    mem_row = [line.split() for line in r["free"]["out"].splitlines() if line.startswith("Mem:")]
    assert mem_row and int(mem_row[0][1]) == kb, r["free"]["out"]
    assert 1 <= int(r["nproc"]["out"]) <= host_cpus(), r["nproc"]  # nproc counts the affinity mask
    assert any(line.split()[-1] == "/tmp" for line in r["df"]["out"].splitlines()[1:]), r["df"]["out"]


def check_javascript(r: Dict[str, Any], memory_mb: int, cpus: int, wall_s: float) -> None:
    assert r["cpus"] == cpus, r
    assert r["model"], r
    assert r["totalmem"] == memory_mb << 20, r
    assert 0 < r["freemem"] <= r["totalmem"], r
    assert 0 <= r["uptime"] <= wall_s + 1, r  # os.uptime() is whole seconds on Linux
    assert len(r["loadavg"]) == 3, r
    assert r["ps"]["rc"] == 0 and "ps -e" in r["ps"]["out"], r["ps"]


def check_bash(out: str, memory_mb: int, cpus: int, wall_s: float) -> None:
    got = dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)
    assert int(got["cpuinfo"]) == cpus and int(got["statcpus"]) == cpus, got
    assert int(got["memtotal"]) == memory_mb * 1024 and int(got["free"]) == memory_mb * 1024, got
    assert 1 <= int(got["nproc"]) <= host_cpus(), got
    assert 0 <= float(got["uptime"]) <= wall_s + 0.05, (got, wall_s)
    assert got["top"] == "1" and 1 <= int(got["ps"]) <= 6 and got["df"] == "/tmp", got
    assert len(got["loadavg"].split()) == 3, got


def check_machine(lang: str, out: str, memory_mb: int, cpus: int, wall_s: float) -> Optional[bool]:
    """Asserts the machine view; returns whether Python ran warm (None for others)."""
    if lang == "bash":
        check_bash(out, memory_mb, cpus, wall_s)
        return None
    r = last_json(out)
    if lang == "python":
        check_python(r, memory_mb, cpus, wall_s)
        return r["warm"]
    check_javascript(r, memory_mb, cpus, wall_s)
    return None


def machine_code(lang: str) -> str:
    return MACHINE[lang].replace("@WARM@", WARM_FLAG)


@pytest.mark.parametrize("share", [0.5, 1.5])
@pytest.mark.parametrize("lang", ["python", "javascript", "bash"])
def test_machine_shows_the_sandbox_limits_cli(lang: str, share: float) -> None:
    memory_mb = 96 if lang != "javascript" else 160
    t0 = time.monotonic()
    res = run_exec(machine_code(lang), lang, memory_mb=memory_mb, timeout=30,
                   settings={"SANDBOX_CPUS": str(share)})
    wall = time.monotonic() - t0
    assert res.exit_code == 0, res.describe()
    check_machine(lang, res.stdout, memory_mb, shown_cpus(share), wall)


SERVICE_SHARE = 1.5


@pytest.fixture(scope="module", params=["warm", "cold"])
def runtime_service(request: pytest.FixtureRequest) -> Iterator[Service]:
    svc = _launch({"SANDBOX_WARM": "on" if request.param == "warm" else "off",
                   "SANDBOX_CPUS": str(SERVICE_SHARE)}, None)
    svc.mode = request.param  # type: ignore[attr-defined]
    try:
        if request.param == "warm":
            def warm() -> bool:
                st, _, body = post_exec(svc.url, {"code": "print(%s)" % WARM_FLAG}, timeout=60)
                return st == 200 and body.get("stdout", "").strip() == "True"
            assert wait_until(warm, timeout=90.0, interval=0.2), "the warm template never answered"
        yield svc
    finally:
        _stop_checked(svc)


def service_run(svc: Service, code: str, lang: str, memory_mb: int) -> tuple:
    t0 = time.monotonic()
    status, _, body = post_exec(svc.url, {"code": code, "language": lang, "memory_mb": memory_mb,
                                          "timeout": 30}, timeout=120)
    wall = time.monotonic() - t0
    assert status == 200 and body.get("exit_code") == 0, body
    return body, wall


@pytest.mark.parametrize("lang", ["python", "javascript", "bash"])
def test_machine_shows_the_sandbox_limits_service(runtime_service: Service, lang: str) -> None:
    memory_mb = 112 if lang != "javascript" else 176
    body, wall = service_run(runtime_service, machine_code(lang), lang, memory_mb)
    warm = check_machine(lang, body["stdout"], memory_mb, shown_cpus(SERVICE_SHARE), wall)
    if lang == "python":
        assert warm is (runtime_service.mode == "warm"), body  # type: ignore[attr-defined]


# ---- /etc/services and /etc/protocols ---------------------------------------------------

SERVICES = {
    "python": r'''
import json, socket
print(json.dumps({"http": socket.getservbyname("http", "tcp"), "https": socket.getservbyname("https"),
                  "domain_udp": socket.getservbyname("domain", "udp"),
                  "gai": socket.getaddrinfo("localhost", "http", type=socket.SOCK_STREAM)[0][4][1],
                  "port_name": socket.getservbyport(22), "tcp": socket.getprotobyname("tcp"),
                  "udp": socket.getprotobyname("udp")}))
''',
    "bash": r'''
# no awk: it is reached through /etc/alternatives, which a host without /etc lacks
printf 'http\t%s\n' "$(getent services http | tr -s ' ' | cut -d' ' -f2)"
printf 'udp\t%s\n' "$(getent protocols udp | tr -s ' ' | cut -d' ' -f2)"
''',
}


def check_services(lang: str, out: str) -> None:
    if lang == "python":
        assert last_json(out) == {"http": 80, "https": 443, "domain_udp": 53, "gai": 80,
                                  "port_name": "ssh", "tcp": 6, "udp": 17}, out
    else:
        got = dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)
        assert got == {"http": "80/tcp", "udp": "17"}, out


@pytest.mark.parametrize("lang", ["python", "bash"])
def test_services_and_protocols(lang: str) -> None:
    res = run_exec(SERVICES[lang], lang, timeout=30)
    assert res.exit_code == 0, res.describe()
    check_services(lang, res.stdout)


@pytest.mark.parametrize("lang", ["python", "bash"])
def test_services_and_protocols_without_netbase(lang: str, tmp_path) -> None:
    """A host without /etc/services (no netbase): the sandbox gets a standard set. The
    CLI runs in a mount namespace of its own where the host's /etc is an empty tmpfs."""
    code = tmp_path / "code"
    code.write_text(SERVICES[lang])
    os.chmod(tmp_path, 0o755)
    binary = os.environ.get("HEXR_SANDBOX_BIN") or os.path.join(
        os.path.dirname(__file__), "..", "..", "build", "hexr-sandbox")
    script = "mount -t tmpfs -o size=64k hxs-no-etc /etc && exec %s exec --json -l %s %s" % (
        shlex.quote(os.path.realpath(binary)), lang, shlex.quote(str(code)))
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                       capture_output=True, text=True, timeout=90, cwd="/")
    assert p.returncode == 0, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    res = json.loads(p.stdout.strip().splitlines()[-1])
    assert res["exit_code"] == 0, res
    check_services(lang, res["stdout"])


# ---- /var/tmp and /run/lock ---------------------------------------------------------------

SCRATCH = r'''
import errno, json, os, stat
r = {"modes": {d: oct(stat.S_IMODE(os.stat(d).st_mode)) for d in ("/tmp", "/var/tmp", "/run/lock")},
     "left": {d: os.listdir(d) for d in ("/tmp", "/var/tmp", "/run/lock")},
     "same_fs": len({os.statvfs(d).f_fsid for d in ("/tmp", "/var/tmp", "/run/lock")}) == 1,
     "var_lock": os.path.realpath("/var/lock")}
for d in ("/tmp", "/var/tmp", "/run/lock"):
    with open(d + "/hxs-mark", "w") as f:
        f.write(d)
r["distinct"] = [open(d + "/hxs-mark").read() for d in ("/tmp", "/var/tmp", "/run/lock", "/var/lock")]
# one cap for the three: @HALF@ MiB in /tmp, then as much into /var/tmp and /run/lock
chunk = b"x" * (1 << 20)
def fill(path, mib):
    try:
        with open(path, "wb") as f:
            for _ in range(mib):
                f.write(chunk)
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
r["fill"] = [fill("/tmp/a", @HALF@), fill("/var/tmp/b", @HALF@), fill("/run/lock/c", @HALF@)]
print(json.dumps(r))
'''


def test_var_tmp_and_run_lock_are_private_scratch_sharing_the_tmp_cap() -> None:
    tmpfs_mb, half = 16, 7
    code = SCRATCH.replace("@HALF@", str(half))
    results = [run_exec(code, "python", memory_mb=96, timeout=30,
                        settings={"SANDBOX_TMPFS_MB": str(tmpfs_mb)}) for _ in range(2)]
    for res in results:
        assert res.exit_code == 0, res.describe()
        r = last_json(res.stdout)
        assert r["modes"] == {"/tmp": "0o1777", "/var/tmp": "0o1777", "/run/lock": "0o1777"}, r
        # private: nothing of the previous sandbox is there
        assert r["left"] == {"/tmp": [], "/var/tmp": [], "/run/lock": []}, r
        assert r["same_fs"] and r["var_lock"] == "/run/lock", r
        assert r["distinct"] == ["/tmp", "/var/tmp", "/run/lock", "/run/lock"], r
        # 3 x 7 MiB do not fit in one 16 MiB tmpfs: the third write runs out of space
        assert r["fill"][:2] == ["ok", "ok"] and r["fill"][2] == "ENOSPC", r


# ---- pseudo-terminals ---------------------------------------------------------------------

PTY = {
    "python": r'''
import errno, json, os, pty, subprocess
r = {}
try:
    open("/dev/tty"); r["tty"] = "opened"
except OSError as e:
    r["tty"] = errno.errorcode[e.errno]
m, s = os.openpty()
r["openpty"] = os.ttyname(s)
os.write(m, b"ping\n"); r["echo"] = os.read(s, 100).decode()
os.close(m); os.close(s)
pid, fd = pty.fork()
if pid == 0:
    # the child has the pty as its controlling terminal: /dev/tty is that
    with open("/dev/tty", "w") as t:
        t.write("via-dev-tty " + os.ttyname(0) + "\n")
    os._exit(0)
out = b""
while True:
    try:
        d = os.read(fd, 1024)
    except OSError:
        break
    if not d:
        break
    out += d
os.waitpid(pid, 0)
os.close(fd)
r["pty_fork"] = out.decode()
p = subprocess.run(["script", "-qc", "tty; echo in-script", "/dev/null"], capture_output=True, text=True, timeout=30)
r["script"] = [p.returncode, p.stdout]
held, err = [], None
while len(held) < 64:
    try:
        held.append(os.openpty())
    except OSError as e:
        err = errno.errorcode[e.errno]; break
r["ptys_max"] = [len(held), err]
r["warm"] = @WARM@
print(json.dumps(r))
''',
    "bash": r'''
if msg=$( { : < /dev/tty; } 2>&1 ); then echo "tty	opened"; else echo "tty	$msg"; fi
script -qc 'tty; echo in-script' /dev/null | tr -d '\r' | sed 's/^/script	/'
''',
    "javascript": r'''
const cp = require('child_process'), fs = require('fs');
let tty; try { fs.openSync('/dev/tty', 'r'); tty = 'opened'; } catch (e) { tty = e.code; }
const p = cp.spawnSync('script', ['-qc', 'tty; echo in-script', '/dev/null'], { encoding: 'utf8' });
console.log(JSON.stringify({ tty, script: [p.status, p.stdout] }));
''',
}


def check_pty(lang: str, out: str) -> Optional[bool]:
    if lang == "bash":
        rows = [line.split("\t", 1) for line in out.splitlines() if "\t" in line]
        assert rows[0] == ["tty", rows[0][1]] and "No such device or address" in rows[0][1], out
        script = [v for k, v in rows if k == "script"]
        assert len(script) == 2 and script[0].startswith("/dev/pts/") and script[1] == "in-script", out
        return None
    r = last_json(out)
    assert r["tty"] == "ENXIO", r  # no controlling terminal, as on any machine
    lines = r["script"][1].replace("\r", "").splitlines()
    assert r["script"][0] == 0 and lines[0].startswith("/dev/pts/") and lines[1] == "in-script", r
    if lang == "javascript":
        return None
    assert r["openpty"].startswith("/dev/pts/") and r["echo"].strip() == "ping", r
    assert r["pty_fork"].replace("\r", "").startswith("via-dev-tty /dev/pts/"), r
    # a sandbox holds at most 16 ptys at once (the kernel's budget is shared)
    assert r["ptys_max"] == [16, "ENOSPC"], r
    return r["warm"]


@pytest.mark.parametrize("lang", ["python", "javascript", "bash"])
def test_pseudo_terminals_cli(lang: str) -> None:
    code = PTY[lang].replace("@WARM@", WARM_FLAG)
    res = run_exec(code, lang, timeout=30)
    assert res.exit_code == 0, res.describe()
    check_pty(lang, res.stdout)


def test_pseudo_terminals_service(runtime_service: Service) -> None:
    body, _ = service_run(runtime_service, PTY["python"].replace("@WARM@", WARM_FLAG), "python", 128)
    assert check_pty("python", body["stdout"]) is (runtime_service.mode == "warm"), body  # type: ignore[attr-defined]
