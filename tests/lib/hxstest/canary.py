"""The canary, and the one way the isolation and security suites run the sandbox.

Before any attack-like test runs, `require_isolation()` runs a small program inside a
sandbox and checks that the sandbox really isolates: no capability (CapEff, CapPrm,
CapBnd all zero), no_new_privs set, a seccomp filter in filter mode, and no network
interface but `lo`. If any of that is missing, attack code (fork bombs, the syscall
probe, ...) would be run against the host itself, so the whole pytest session stops
with `pytest.exit()` and a clear reason instead.

`run_exec()` runs `hexr-sandbox exec --json` (binary from $HEXR_SANDBOX_BIN, default
build/hexr-sandbox) with a timeout and returns the parsed result object; every CLI
process it starts is remembered in CLI_PIDS so that leak checks can find the cgroups
("s<pid>.<start>-<seq>") those runs created. Unless told not to (check_cli=False), it
also fails when the CLI's own exit status is not the program's exit code (the CLI's
contract) or when the CLI's stderr carries a sanitizer report (ASan, LSan, UBSan print
theirs after the JSON result, at exit or in teardown, where nothing else would see
them).

Used by the security suite (its conftest runs the canary first), the isolation tests
of the integration suite and anything else that runs the CLI. Standard library and
pytest only.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple, Union

import pytest

from .paths import ROOT, sandbox_bin  # noqa: F401  (sandbox_bin: callers import it from here)

CLI_PIDS: Set[int] = set()

# how long one CLI run may take before the test gives up on it (and kills it)
DEFAULT_PROC_TIMEOUT = 90.0

# what AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer print on stderr
SANITIZER_REPORT = re.compile(r"Sanitizer|runtime error")


class ExecResult(dict):
    """The JSON result object, plus the CLI's own exit status and stderr."""

    cli_rc: int = 0
    cli_stderr: str = ""
    cli_maxrss_kb: int = 0
    cli_pid: int = 0

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def describe(self) -> str:
        d = dict(self)
        for k in ("stdout", "stderr"):
            if isinstance(d.get(k), str) and len(d[k]) > 2000:
                d[k] = d[k][:2000] + "...[%d chars]" % len(d[k])
        return "cli rc=%d, cli stderr=%r, result=%s" % (self.cli_rc, self.cli_stderr[-2000:],
                                                        json.dumps(d, indent=1))


def run_exec(code: Union[str, bytes], language: str = "python", *, timeout: Optional[int] = None,
             memory_mb: Optional[int] = None, env_vars: Optional[Dict[str, str]] = None,
             settings: Optional[Dict[str, str]] = None, cli_env: Optional[Dict[str, str]] = None,
             via: Optional[str] = None, proc_timeout: float = DEFAULT_PROC_TIMEOUT,
             pass_fds: Iterable[int] = (), cli_stdin: bytes = b"",
             extra_args: Iterable[str] = (), check_cli: bool = True) -> ExecResult:
    """Runs code in a sandbox through the CLI and returns its result.

    settings: configuration variables (SANDBOX_TMPFS_MB, MAX_OUTPUT_BYTES, ...) added to
    the CLI's environment. cli_env: the whole environment of the CLI (default: ours).
    via: "arg" (-c CODE) or "stdin" (the code on the CLI's stdin, FILE "-"); default: -c
    for small text code, stdin otherwise. pass_fds: descriptors the CLI inherits.
    The result also carries cli_rc, cli_stderr, cli_pid and cli_maxrss_kb (peak RSS of
    the CLI process). check_cli: assert that cli_rc is the result's exit_code and that
    cli_stderr has no sanitizer report.
    """
    raw = code.encode() if isinstance(code, str) else code
    if via is None:
        via = "arg" if (len(raw) < 64 * 1024 and b"\0" not in raw) else "stdin"
    argv: List[str] = [sandbox_bin(), "exec", "--json", "-l", language]
    if timeout is not None:
        argv += ["-t", str(timeout)]
    if memory_mb is not None:
        argv += ["-m", str(memory_mb)]
    for k, v in (env_vars or {}).items():
        argv += ["-e", "%s=%s" % (k, v)]
    argv += list(extra_args)
    if via == "arg":
        argv += ["-c", raw.decode()]
        stdin_data = cli_stdin
    else:
        argv += ["-"]
        stdin_data = raw
    env = dict(os.environ if cli_env is None else cli_env)
    env.update(settings or {})
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd="/", pass_fds=tuple(pass_fds))
    CLI_PIDS.add(proc.pid)
    chunks: Dict[str, List[bytes]] = {"out": [], "err": []}

    def drain(name: str, f: Any) -> None:
        for block in iter(lambda: f.read(65536), b""):
            chunks[name].append(block)

    readers = [threading.Thread(target=drain, args=("out", proc.stdout), daemon=True),
               threading.Thread(target=drain, args=("err", proc.stderr), daemon=True)]
    for t in readers:
        t.start()

    def feed() -> None:
        try:
            proc.stdin.write(stdin_data)
        except OSError:
            pass
        finally:
            try:
                proc.stdin.close()
            except OSError:
                pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    deadline = time.monotonic() + proc_timeout
    status = rusage = None
    while True:
        pid, st, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            status, rusage = st, ru
            break
        if time.monotonic() > deadline:
            proc.kill()
            os.wait4(proc.pid, 0)
            proc.returncode = -9
            raise AssertionError("hexr-sandbox exec did not finish within %.0f s (stderr so far: %r)"
                                 % (proc_timeout, b"".join(chunks["err"])[-2000:]))
        time.sleep(0.01)
    proc.returncode = os.waitstatus_to_exitcode(status)
    for t in readers + [writer]:
        t.join(timeout=10)
    out = b"".join(chunks["out"])
    err = b"".join(chunks["err"])
    text = out.decode(errors="replace").strip()
    try:
        obj = json.loads(text.splitlines()[-1]) if text else None
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        raise AssertionError("hexr-sandbox exec printed no result (rc=%d, stdout=%r, stderr=%r)"
                             % (proc.returncode, text[-2000:], err.decode(errors="replace")[-2000:]))
    res = ExecResult(obj)
    res.cli_rc = proc.returncode
    res.cli_stderr = err.decode(errors="replace")
    res.cli_maxrss_kb = rusage.ru_maxrss
    res.cli_pid = proc.pid
    if check_cli:
        check_cli_outcome(res)
    return res


def check_cli_outcome(res: ExecResult) -> None:
    """The CLI exits with the program's exit code and reports nothing of its own."""
    assert res.cli_rc == res.get("exit_code"), \
        "the CLI exited with %d, the result says %r: %s" % (res.cli_rc, res.get("exit_code"), res.describe())
    report = SANITIZER_REPORT.search(res.cli_stderr)
    assert report is None, "a sanitizer report on the CLI's stderr: %s" % res.describe()


# ---- the canary ---------------------------------------------------------------------

CANARY_CODE = r"""
import json, os, socket
st = {}
with open("/proc/self/status") as f:
    for line in f:
        k, _, v = line.partition(":")
        st[k] = v.strip()
try:
    ifaces = sorted(name for _, name in socket.if_nameindex())
except OSError as e:
    ifaces = ["error: %s" % e]
print(json.dumps({"status": {k: st.get(k) for k in
                             ("CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb", "NoNewPrivs", "Seccomp")},
                  "ifaces": ifaces, "uid": os.getuid(), "euid": os.geteuid()}))
"""

_canary: Optional[Tuple[bool, str]] = None


def check_isolation() -> Tuple[bool, str]:
    """Runs the canary (once per process); returns (isolated, reason)."""
    global _canary
    if _canary is not None:
        return _canary
    problems: List[str] = []
    try:
        # the CLI's own status is checked by every other test; a bad one must not read
        # as "the sandbox does not isolate"
        res = run_exec(CANARY_CODE, "python", timeout=20, proc_timeout=60, check_cli=False)
    except (AssertionError, OSError, subprocess.SubprocessError) as e:
        _canary = (False, "the canary could not run a sandbox: %s" % e)
        return _canary
    if res.exit_code != 0:
        _canary = (False, "the canary program failed inside the sandbox: %s" % res.describe())
        return _canary
    try:
        info = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        _canary = (False, "the canary printed no report: %s" % res.describe())
        return _canary
    st = info.get("status", {})
    for key in ("CapEff", "CapPrm", "CapBnd"):
        v = st.get(key)
        if v is None or int(v, 16) != 0:
            problems.append("%s is %s (must be all zero)" % (key, v))
    if st.get("NoNewPrivs") != "1":
        problems.append("NoNewPrivs is %s (must be 1)" % st.get("NoNewPrivs"))
    if st.get("Seccomp") != "2":
        problems.append("Seccomp is %s (must be 2, filter mode)" % st.get("Seccomp"))
    if info.get("ifaces") != ["lo"]:
        problems.append("network interfaces are %s (must be only lo)" % info.get("ifaces"))
    if info.get("uid") == 0 or info.get("euid") == 0:
        problems.append("the program runs as uid 0")
    if problems:
        _canary = (False, "; ".join(problems))
    else:
        _canary = (True, "isolated: no capabilities, no_new_privs, seccomp filter, only lo")
    return _canary


def require_isolation() -> None:
    """Stops the whole pytest session unless the canary says the sandbox isolates."""
    ok, reason = check_isolation()
    if not ok:
        pytest.exit("CANARY FAILED, the sandbox does not isolate, no attack code will run: %s"
                    % reason, returncode=3)
