"""Helpers of the hostile-code suite (tests/security/test_hostile_*.py).

Every hostile case runs real attack code THROUGH THE SERVICE (`hexr-sandbox serve`),
once with SANDBOX_WARM=on (Python starts from a warm template) and once with
SANDBOX_WARM=off: conftest.py parametrizes a module-scoped `svc` fixture with the two
modes. Each service started here

  * has a unique secret in its environment (and one in a 0600 file only its user can
    read), so leak tests can look for them from inside;
  * runs the canary through itself (all three languages; in warm mode a warm Python
    program too) before any attack, and stops the whole session if it fails;
  * is checked after every test: it still answers a normal request, a fresh sandbox is
    clean, (warm) Python still starts warm, and the host has no leftover process,
    mount, execution cgroup or file (the checks of tests/lib/hxstest/host.py, applied
    to the service's pid);
  * is stopped at the end of the module (SIGTERM, then SIGKILL) and must exit 0 and
    leave nothing behind: no cgroup of its instance, no template or sandbox process.

Programs print either one JSON object on their last line (Python, JavaScript) or
"key<TAB>value" lines (Bash); `Result.data` parses whichever it finds. Values are put
into code with fill(): JSON literals for Python and JavaScript, shell words for Bash.

Network rule for everything here: the only addresses ever used are 127.0.0.1 ports and
unix sockets that the test (or the service under test) opened itself. No name is ever
resolved except "localhost" inside the sandbox (from its /etc/hosts).
"""

from __future__ import annotations

import errno
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple, TypeVar

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
_LIB = str(ROOT / "tests" / "lib")  # the shared helpers (hxstest)
for _p in (str(HERE), _LIB):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from hxstest import host as _cli  # noqa: E402  host-side leak checks
from hxstest.client import http_request, post_exec  # noqa: E402,F401  (url, body, ...) -> (status, headers, body)
from hxstest.paths import sandbox_bin  # noqa: E402,F401
from hxstest.service import free_port, safe_rmtree, wait_listening  # noqa: E402,F401

LANGS = ("python", "javascript", "bash")
MODES = ("warm", "cold")
MiB = 1 << 20
T = TypeVar("T")

START_TIMEOUT = 60.0     # service start (ASan is slow)
WARM_TIMEOUT = 90.0      # templates becoming ready (the sci one imports pandas)
STOP_TIMEOUT = 45.0      # SIGTERM -> exit, before SIGKILL
LEAK_TIMEOUT = 10.0      # leftovers must be gone within this after a result
HTTP_SLACK = 90.0        # HTTP timeout = the execution's timeout + this

WARM_FLAG_PY = '"_hxs_zygote" in __import__("sys").modules'


def marker(prefix: str = "hxs-hostile-") -> str:
    return prefix + uuid.uuid4().hex[:16]


def wait_until(predicate: Callable[[], T], timeout: float, interval: float = 0.05) -> T:
    return _cli.wait_until(predicate, timeout, interval)


# ---- values into code, results out of it -----------------------------------------------

def lit(value: Any, lang: str) -> str:
    """value as a literal of lang: JSON for Python/JavaScript, shell word(s) for Bash
    (a list becomes several words)."""
    if lang == "bash":
        if isinstance(value, (list, tuple)):
            return " ".join(shlex.quote(str(v)) for v in value)
        return shlex.quote(str(value))
    if lang == "python" and isinstance(value, bool):
        return "True" if value else "False"
    return json.dumps(value)


def fill(code: str, lang: str, **values: Any) -> str:
    """Replaces @NAME@ in code with lit(values[NAME])."""
    for k, v in values.items():
        code = code.replace("@%s@" % k, lit(v, lang))
    left = re.findall(r"@[A-Z][A-Z0-9_]*@", code)
    assert not left, "unfilled placeholders %s" % left
    return code


_STRERROR = sorted(((os.strerror(n), name) for n, name in errno.errorcode.items()),
                   key=lambda t: -len(t[0]))


def errname(text: Any) -> str:
    """An errno name from an errno name (Python, Node) or a strerror() text (Bash,
    coreutils, perl)."""
    if text is None:
        return "None"
    s = str(text).strip()
    if re.fullmatch(r"E[A-Z0-9]+", s):
        return s
    for msg, name in _STRERROR:
        if msg and msg in s:
            return name
    return "OTHER: " + s


class Result(dict):
    """The response of POST /api/v1/exec, plus .status, .lang and parsing helpers."""

    status: int = 0
    lang: str = ""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def describe(self) -> str:
        d = dict(self)
        for k in ("stdout", "stderr"):
            if isinstance(d.get(k), str) and len(d[k]) > 3000:
                d[k] = d[k][:1500] + "...[%d chars]..." % len(d[k]) + d[k][-1500:]
        return "HTTP %d (%s): %s" % (self.status, self.lang, json.dumps(d, indent=1))

    @property
    def out(self) -> str:
        return self.get("stdout") or ""

    @property
    def err(self) -> str:
        return self.get("stderr") or ""

    def json(self) -> Any:
        for line in reversed(self.out.splitlines()):
            if line.strip().startswith("{"):
                try:
                    return json.loads(line)
                except ValueError:
                    break
        raise AssertionError("no JSON object on the last line of stdout: " + self.describe())

    def tabs(self) -> Dict[str, str]:
        out: Dict[str, str] = {}
        for line in self.out.splitlines():
            if "\t" in line:
                k, _, v = line.partition("\t")
                out[k] = v
        return out

    def tab_list(self, key: str) -> List[str]:
        return [line.split("\t", 1)[1] for line in self.out.splitlines() if line.startswith(key + "\t")]

    @property
    def data(self) -> Dict[str, Any]:
        if self.lang == "bash":
            return self.tabs()
        return self.json()


def assert_ran(res: Result, exit_code: Optional[int] = 0) -> Result:
    assert res.status == 200, "the request did not run: " + res.describe()
    assert not res.get("timed_out"), res.describe()
    if exit_code is not None:
        assert res.get("exit_code") == exit_code, res.describe()
    return res


# ---- host-side views --------------------------------------------------------------------

proc_uids = _cli._status_uids


def proc_cmdline(pid: str) -> bytes:
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            return f.read()
    except OSError:
        return b""


def host_pids() -> List[str]:
    return [p for p in os.listdir("/proc") if p.isdigit()]


def processes_with(needle: str) -> List[str]:
    return _cli.processes_with(needle)


def pids_with(needle: str) -> List[int]:
    raw = needle.encode()
    me = os.getpid()
    return [int(p) for p in host_pids() if int(p) != me and raw in proc_cmdline(p)]


def kill_pid(pid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def host_listener_tcp() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    s.setblocking(False)
    return s


def host_listener_udp() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.setblocking(False)
    return s


def host_abstract_listener(name: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("\0" + name)
    s.listen(16)
    s.setblocking(False)
    return s


def drain_tcp(listener: socket.socket) -> List[str]:
    """Connections that reached a non-blocking listener (closed at once)."""
    got = []
    while True:
        try:
            conn, peer = listener.accept()
        except (BlockingIOError, InterruptedError):
            return got
        got.append(str(peer))
        conn.close()


def drain_udp(sock: socket.socket, wait: float = 0.3) -> List[bytes]:
    got = []
    deadline = time.monotonic() + wait
    while True:
        try:
            data, _ = sock.recvfrom(65536)
            got.append(data)
            continue
        except (BlockingIOError, InterruptedError):
            pass
        if time.monotonic() >= deadline:
            return got
        time.sleep(0.02)


# ---- the service ------------------------------------------------------------------------

CANARY = {
    "python": r'''
import json, os, sys
st = {}
with open("/proc/self/status") as f:
    for line in f:
        k, _, v = line.partition(":")
        st[k] = v.strip()
with open("/proc/self/net/dev") as f:
    ifaces = sorted(l.split(":")[0].strip() for l in f.readlines()[2:])
print(json.dumps({"status": {k: st.get(k) for k in ("CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb",
                                                    "NoNewPrivs", "Seccomp")},
                  "ifaces": ifaces, "uid": os.getuid(), "euid": os.geteuid(),
                  "warm": "_hxs_zygote" in sys.modules}))
''',
    "javascript": r'''
const fs = require('fs');
const st = {};
for (const l of fs.readFileSync('/proc/self/status', 'utf8').split('\n')) {
  const i = l.indexOf(':'); if (i > 0) st[l.slice(0, i)] = l.slice(i + 1).trim();
}
const ifaces = fs.readFileSync('/proc/self/net/dev', 'utf8').split('\n').slice(2)
  .filter((l) => l.includes(':')).map((l) => l.split(':')[0].trim()).sort();
const keep = {};
for (const k of ['CapEff', 'CapPrm', 'CapBnd', 'CapInh', 'CapAmb', 'NoNewPrivs', 'Seccomp']) keep[k] = st[k];
console.log(JSON.stringify({ status: keep, ifaces, uid: process.getuid(), euid: process.geteuid(), warm: false }));
''',
    "bash": r'''
for k in CapEff CapPrm CapBnd CapInh CapAmb NoNewPrivs Seccomp; do
  printf 'status.%s\t%s\n' "$k" "$(awk -v k="$k:" '$1 == k { print $2 }' /proc/self/status)"
done
printf 'ifaces\t%s\n' "$(tail -n +3 /proc/self/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\n' ' ' | sed 's/ $//')"
printf 'uid\t%s\neuid\t%s\n' "$(id -ru)" "$(id -u)"
''',
}


def canary_problems(res: Result) -> Tuple[List[str], bool]:
    """What the canary says is missing; and whether the program ran warm."""
    if res.status != 200 or res.get("exit_code") != 0:
        return ["the canary program did not run: " + res.describe()], False
    if res.lang == "bash":
        t = res.tabs()
        info = {"status": {k[len("status."):]: v for k, v in t.items() if k.startswith("status.")},
                "ifaces": t.get("ifaces", "").split(), "uid": int(t.get("uid", "-1")),
                "euid": int(t.get("euid", "-1")), "warm": False}
    else:
        info = res.json()
    problems = []
    st = info.get("status", {})
    for key in ("CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb"):
        v = st.get(key)
        if v is None or int(v, 16) != 0:
            problems.append("%s is %s (must be all zero)" % (key, v))
    if st.get("NoNewPrivs") != "1":
        problems.append("NoNewPrivs is %s (must be 1)" % st.get("NoNewPrivs"))
    if st.get("Seccomp") != "2":
        problems.append("Seccomp is %s (must be 2, filter mode)" % st.get("Seccomp"))
    if info.get("ifaces") != ["lo"]:
        problems.append("network interfaces are %s (must be only lo)" % info.get("ifaces"))
    if info.get("uid") in (0, -1) or info.get("euid") in (0, -1):
        problems.append("the program runs as uid %s/%s" % (info.get("uid"), info.get("euid")))
    return ["%s: %s" % (res.lang, p) for p in problems], bool(info.get("warm"))


class HostileService:
    """One `hexr-sandbox serve` for the hostile suite (see the module docstring)."""

    def __init__(self, mode: str, env: Optional[Dict[str, str]] = None, listen: Optional[str] = None):
        assert mode in MODES
        self.mode = mode
        self.warm = mode == "warm"
        self.secret_name = "HXS_HOSTILE_SECRET_" + uuid.uuid4().hex[:10].upper()
        self.secret_value = "hxs-service-secret-" + uuid.uuid4().hex
        self.file_secret = "hxs-file-secret-" + uuid.uuid4().hex
        self.workdir = tempfile.mkdtemp(prefix="hxs-hostile-")
        # the sandbox's root (an unprivileged host uid) must reach STATE_DIR/root
        os.chmod(self.workdir, 0o755)
        self.state_dir = os.path.join(self.workdir, "state")
        os.mkdir(self.state_dir, 0o755)
        self.secret_file = os.path.join(self.workdir, "service-secret.txt")
        fd = os.open(self.secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, self.file_secret.encode() + b"\n")
        os.close(fd)
        self.log_path = os.path.join(self.workdir, "serve.log")
        self.uid_base = int((env or {}).get("SANDBOX_UID_BASE") or os.environ.get("SANDBOX_UID_BASE") or 1000000)
        full = dict(os.environ)
        full.pop("LISTEN_ADDRESS", None)
        full.update({"STATE_DIR": self.state_dir, "SANDBOX_WARM": "on" if self.warm else "off",
                     self.secret_name: self.secret_value, "AWS_SECRET_ACCESS_KEY": self.secret_value,
                     "HEXR_API_TOKEN": self.secret_value})
        full.setdefault("DRAIN_QUIET", "0")  # no load balancer: exit once drained
        full.update(env or {})
        self.env = full
        self.started_at = time.time()
        self.proc: Optional[subprocess.Popen] = None
        self.url = ""
        self.port = 0
        self.unix_path = ""
        self.returncode: Optional[int] = None
        self._launch(listen)
        self.pid = self.proc.pid
        self.state_baseline = self._state_entries()

    # -- process -------------------------------------------------------------------------

    def _launch(self, listen: Optional[str]) -> None:
        attempts = 1 if listen else 3
        last = ""
        for _ in range(attempts):
            addr = listen or "127.0.0.1:%d" % free_port()
            with open(self.log_path, "wb") as logf:
                self.proc = subprocess.Popen([sandbox_bin(), "serve", "--listen", addr], env=self.env,
                                             stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                             cwd="/", start_new_session=True)
            try:
                address = wait_listening(self.proc, self.log_path, START_TIMEOUT)
            except RuntimeError:
                address = ""
            if address:
                if address.startswith("unix:"):
                    self.url, self.unix_path = address, address[len("unix:"):]
                else:
                    self.url = "http://" + address
                    self.port = int(address.rsplit(":", 1)[1])
                return
            last = self.log_text()
            self._terminate(5)
            if "in use" not in last:
                break
        raise RuntimeError("hexr-sandbox serve did not start:\n" + last[-4000:])

    def log(self) -> List[str]:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read().splitlines()
        except OSError:
            return []

    def log_text(self, tail: int = 60) -> str:
        return "\n".join(self.log()[-tail:])

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _terminate(self, timeout: float) -> Optional[int]:
        if self.proc is None:
            return None
        return _cli.terminate(self.proc, timeout)

    # -- requests ------------------------------------------------------------------------

    def exec(self, code: str, lang: str = "python", *, timeout: int = 20, memory_mb: Optional[int] = None,
             env_vars: Optional[Dict[str, str]] = None, extra: Optional[Dict[str, Any]] = None,
             http_timeout: Optional[float] = None) -> Result:
        body: Dict[str, Any] = {"code": code, "language": lang, "timeout": timeout}
        if memory_mb is not None:
            body["memory_mb"] = memory_mb
        if env_vars is not None:
            body["env_vars"] = env_vars
        body.update(extra or {})
        status, _, parsed = post_exec(self.url, body, timeout=http_timeout or timeout + HTTP_SLACK)
        res = Result(parsed if isinstance(parsed, dict) else {"body": parsed})
        res.status = status
        res.lang = lang
        return res

    def run(self, code: str, lang: str = "python", **kw: Any) -> Result:
        """exec() that must give 200 (whatever the program's own outcome)."""
        res = self.exec(code, lang, **kw)
        assert res.status == 200, "the service did not run the program: " + res.describe()
        return res

    def health(self) -> Tuple[int, Any]:
        status, _, body = http_request(self.url, "GET", "/health", timeout=60)
        return status, body

    # -- canary and warm-up --------------------------------------------------------------

    def wait_warm(self) -> None:
        """Waits until both templates (plain, sci) answer; fails if they never do."""
        deadline = time.monotonic() + WARM_TIMEOUT
        pending = {"plain": "print(%s)" % WARM_FLAG_PY,
                   "sci": "# numpy\nprint(%s)" % WARM_FLAG_PY}
        last: Dict[str, str] = {}
        while pending:
            for kind, code in list(pending.items()):
                res = self.exec(code, "python", timeout=30)
                last[kind] = res.describe()
                if res.status == 200 and res.out.strip() == "True":
                    del pending[kind]
            if not pending:
                return
            if time.monotonic() > deadline or not self.alive():
                raise AssertionError("warm templates %s did not become ready within %.0f s: %s\nlog:\n%s"
                                     % (sorted(pending), WARM_TIMEOUT, last, self.log_text()))
            time.sleep(0.3)

    def canary(self) -> List[str]:
        problems: List[str] = []
        for lang in LANGS:
            res = self.exec(CANARY[lang], lang, timeout=30)
            p, warm = canary_problems(res)
            problems += p
            if lang == "python" and self.warm and not warm:
                problems.append("python: the canary did not run warm although SANDBOX_WARM=on")
        if self.warm:  # the sci template too
            res = self.exec("# numpy\n" + CANARY["python"], "python", timeout=30)
            p, warm = canary_problems(res)
            problems += ["sci template: " + x for x in p]
            if not warm:
                problems.append("python (sci template): the canary did not run warm")
        return problems

    # -- leftovers -----------------------------------------------------------------------

    def template_pids(self) -> List[int]:
        uid = self.uid_base + 2000
        needle = self.state_dir.encode()
        return [int(p) for p in host_pids() if uid in proc_uids(p) and needle in proc_cmdline(p)]

    def _cgroup_names_of(self, pids: Iterable[int]) -> Set[str]:
        names = set()
        for pid in pids:
            try:
                with open("/proc/%d/cgroup" % pid) as f:
                    text = f.read()
            except OSError:
                continue
            names |= set(re.findall(r"/hexr-sandbox/(s\d+\.\d+-\d+)", text))
        return names

    def leftover_exec_cgroups(self) -> List[str]:
        keep = self._cgroup_names_of(self.template_pids())
        return [p for p in _cli.leftover_cgroups({self.pid}) if os.path.basename(p) not in keep]

    def leaked_processes(self) -> List[str]:
        return _cli.leaked_sandbox_processes({self.pid})

    def _state_entries(self) -> Set[str]:
        found = set()
        for dirpath, dirnames, filenames in os.walk(self.state_dir):
            rel = os.path.relpath(dirpath, self.state_dir)
            for n in dirnames + filenames:
                found.add(os.path.normpath(os.path.join(rel, n)))
        return found

    def new_state_entries(self) -> List[str]:
        return sorted(self._state_entries() - self.state_baseline)

    def sandbox_owned_host_files(self) -> List[str]:
        """Files owned by the sandbox host uids in the host's scratch directories."""
        return _cli.sandbox_owned_files(self.uid_base, self.started_at, [self.workdir])

    def leftovers(self) -> List[str]:
        problems = []
        if not wait_until(lambda: not self.leaked_processes(), LEAK_TIMEOUT):
            problems.append("sandbox processes left on the host: %s" % self.leaked_processes())
        if not wait_until(lambda: not self.leftover_exec_cgroups(), LEAK_TIMEOUT):
            problems.append("execution cgroups left: %s" % self.leftover_exec_cgroups())
        mounts = _cli.host_mounts_under(self.workdir)
        if mounts:
            problems.append("mounts on the host under the service's STATE_DIR: %s" % mounts)
        try:
            root_left = os.listdir(os.path.join(self.state_dir, "root"))
        except OSError as e:
            root_left = ["(cannot list: %s)" % e]
        if root_left:
            problems.append("STATE_DIR/root (the sandbox mount point) is not empty: %s" % root_left)
        new = [e for e in self.new_state_entries() if not e.startswith("templates/_hxs_zygote.so")]
        if new:
            problems.append("new files under STATE_DIR: %s" % new)
        files = self.sandbox_owned_host_files()
        if files:
            problems.append("files owned by sandbox uids on the host: %s" % files)
        return problems

    # -- after every test ----------------------------------------------------------------

    SANITY_BASH = ('printf "ok\\t%s\\t%s\\t%s\\n" "$(hostname)" "$(id -u)" '
                   '"$(find /tmp /home/sandbox /dev/shm -mindepth 1 2>&1 | wc -l)"')
    SANITY_PY = ('import os, socket\nprint(%s, sum(len(os.listdir(d)) for d in ("/tmp", "/home/sandbox", '
                 '"/dev/shm")), os.getuid(), socket.gethostname())' % WARM_FLAG_PY)

    def check_unaffected(self, python: bool = False) -> List[str]:
        """The service still answers a normal request with a clean, fresh sandbox, and
        the host has no leftovers. The normal request is Bash, or with python=True a
        Python program (which must start warm in warm mode: the templates survived)."""
        if not self.alive():
            return ["the service died (exit %s):\n%s" % (self.proc.returncode, self.log_text())]
        problems = []
        try:
            if not python:
                res = self.exec(self.SANITY_BASH, "bash", timeout=20)
                if res.status != 200 or res.out != "ok\tsandbox\t1000\t0\n":
                    problems.append("a normal bash request afterwards: " + res.describe())
            else:
                res = self.exec(self.SANITY_PY, "python", timeout=20)
                want = "%s 0 1000 sandbox\n" % self.warm
                if res.status != 200 or res.out != want:
                    problems.append("a normal python request afterwards (want %r): %s" % (want, res.describe()))
        except OSError as e:
            problems.append("the service does not answer any more: %s\n%s" % (e, self.log_text()))
        return problems + self.leftovers()

    # -- the end ---------------------------------------------------------------------------

    def stop_and_check(self) -> List[str]:
        """Stops the service (SIGTERM) and checks it exited 0 and left nothing behind."""
        problems = []
        templates = self.template_pids()
        cg_prefix = "s%d." % self.pid
        rc = self._terminate(STOP_TIMEOUT)
        self.returncode = rc
        if rc != 0:
            problems.append("the service exited with %s on SIGTERM:\n%s" % (rc, self.log_text()))
        for pid in templates:
            if not wait_until(lambda: not os.path.exists("/proc/%d" % pid) or
                              self.state_dir.encode() not in proc_cmdline(str(pid)), LEAK_TIMEOUT):
                problems.append("warm template %d outlived the service" % pid)
                kill_pid(pid)

        def cgroups_left() -> List[str]:
            left = []
            for parent in _cli.engine_cgroup_parents():
                try:
                    left += [os.path.join(parent, n) for n in os.listdir(parent) if n.startswith(cg_prefix)]
                except OSError:
                    pass
            return left

        if not wait_until(lambda: not cgroups_left(), LEAK_TIMEOUT):
            problems.append("cgroups of the stopped service left: %s" % cgroups_left())
        if not wait_until(lambda: not self.leaked_processes(), LEAK_TIMEOUT):
            problems.append("sandbox processes outlived the service: %s" % self.leaked_processes())
        left = pids_with(self.state_dir)
        if left:
            problems.append("processes naming the service's STATE_DIR outlived it: %s" % left)
            for pid in left:
                kill_pid(pid)
        mounts = _cli.host_mounts_under(self.workdir)
        if mounts:
            problems.append("mounts left under the service's directory: %s" % mounts)
        else:
            safe_rmtree(self.workdir)
        return problems

    def kill_now(self) -> None:
        """Emergency stop (set-up failures): SIGTERM, then SIGKILL; removes the directory."""
        self._terminate(10)
        for pid in pids_with(self.state_dir):
            kill_pid(pid)
        if not _cli.host_mounts_under(self.workdir):
            safe_rmtree(self.workdir)


def start_service(mode: str, env: Optional[Dict[str, str]] = None, listen: Optional[str] = None
                  ) -> HostileService:
    """Starts a service, waits for its templates (warm), runs the canary through it.
    A failing canary ends the whole pytest session: no attack code runs."""
    svc = HostileService(mode, env, listen)
    try:
        if svc.warm:
            svc.wait_warm()
        problems = svc.canary()
    except BaseException:
        svc.kill_now()
        raise
    if problems:
        svc.kill_now()
        pytest.exit("CANARY FAILED through the service (%s mode), the sandbox does not isolate, "
                    "no attack code will run: %s" % (mode, "; ".join(problems)), returncode=3)
    return svc


def serve_module(env: Optional[Dict[str, str]] = None) -> Iterator[HostileService]:
    """The body of a module fixture: a warm service of a test module's own (which can
    run cold too: Bash, or Python with PYTHON* variables), stopped and checked after
    the module. `yield from serve_module({...})`."""
    s = start_service("warm", env)
    yield s
    problems = s.stop_and_check()
    if problems:
        pytest.fail("the service (%s) did not end cleanly:\n%s" % (s.url, "\n".join(problems)), pytrace=False)


def wait_named(names: Dict[str, str], threads: Sequence[Any], timeout: float) -> Dict[str, int]:
    """Host pids of processes named (comm, or argv[0]) names[k], for each k, once all are
    there; stops early when a thread (the request that should start one) has ended."""
    found: Dict[str, int] = {}
    deadline = time.monotonic() + timeout
    while len(found) < len(names) and time.monotonic() < deadline and all(t.is_alive() for t in threads):
        for key, name in names.items():
            pid = named_pid(name)
            if pid:
                found[key] = pid
        time.sleep(0.05)
    return found


def named_pid(name: str) -> Optional[int]:
    """The host process named `name`: its comm (prctl) or its argv[0] (exec -a)."""
    for p in host_pids():
        try:
            with open("/proc/%s/comm" % p) as f:
                comm = f.read().strip()
        except OSError:
            continue
        if name == comm or name == proc_cmdline(p).split(b"\0")[0].decode(errors="replace"):
            return int(p)
    return None


# ---- running the same thing in many languages ----------------------------------------

def by_lang(lang: str, table: Dict[str, str]) -> str:
    if lang not in table:
        pytest.skip("no %s variant" % lang)
    return table[lang]


def only_small_pids(pids: Sequence[int], limit: int = 64) -> bool:
    return all(0 < p < limit for p in pids)
