"""The seccomp filter, checked from inside a sandbox by tests/security/probe.c.

The probe (static binary, path in $HXS_PROBE_BIN, else the CMake target hxs-probe next
to $HEXR_SANDBOX_BIN) is sent into a sandbox as part of the code: a Python program
base64-decodes it into /tmp (home if /tmp refuses to exec it) and execs it, so it runs
exactly like the sandboxed program would: sandbox user, no capabilities, no_new_privs,
the seccomp filter. It is never run on the host (it also refuses to run without a
seccomp filter). Each group of its checks is one test here, so a failure names the
syscalls and what the kernel answered instead of the filter.
"""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from hxstest.canary import ROOT, run_exec, sandbox_bin

PROBE_TIMEOUT_S = 30  # the default MAX_EXECUTION_TIME


def probe_path() -> str:
    env = os.environ.get("HXS_PROBE_BIN")
    if env:
        if not os.path.isfile(env):
            pytest.fail("HXS_PROBE_BIN=%s does not exist" % env)
        return env
    candidates = [Path(sandbox_bin()).resolve().parent / "tests" / "hxs-probe",
                  ROOT / "build" / "tests" / "hxs-probe"]
    for c in candidates:
        if c.is_file():
            return str(c)
    pytest.skip("the syscall probe is not built (set HXS_PROBE_BIN or build the hxs-probe target; "
                "looked at %s)" % ", ".join(map(str, candidates)))
    raise AssertionError("unreachable")


DELIVERY = r'''
import base64, os, sys
data = base64.b64decode(PROBE_B64)
for d in ("/tmp", "/home/sandbox"):
    path = d + "/hxs-probe"
    try:
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o755)
        sys.stdout.flush()
        os.execv(path, [path])
    except OSError as e:
        print("# cannot run the probe from %s: %s" % (d, e), flush=True)
sys.exit(4)
'''


class ProbeRun:
    def __init__(self, result) -> None:
        self.result = result
        self.lines = result.stdout.splitlines()
        self.checks: Dict[str, Tuple[bool, str]] = {}
        for line in self.lines:
            m = re.match(r"^(ok|FAIL) (\S+)", line)
            if m:
                self.checks[m.group(2)] = (m.group(1) == "ok", line)
        self.info = [line for line in self.lines if line.startswith("#")]

    def group(self, pattern: str) -> List[Tuple[str, bool, str]]:
        rx = re.compile(pattern)
        return [(name, ok, line) for name, (ok, line) in self.checks.items() if rx.search(name)]


@pytest.fixture(scope="module")
def probe() -> ProbeRun:
    data = Path(probe_path()).read_bytes()
    code = DELIVERY.replace("PROBE_B64", '"%s"' % base64.b64encode(data).decode())
    res = run_exec(code, "python", timeout=PROBE_TIMEOUT_S, proc_timeout=PROBE_TIMEOUT_S + 30,
                   via="stdin")
    run = ProbeRun(res)
    print("\n".join(run.info))
    return run


def assert_group(run: ProbeRun, pattern: str, min_count: int) -> None:
    checks = run.group(pattern)
    assert len(checks) >= min_count, (
        "expected at least %d probe checks matching %r, got %d; probe output:\n%s"
        % (min_count, pattern, len(checks), run.result.describe()))
    failed = [line for _, ok, line in checks if not ok]
    assert not failed, "%d of %d checks failed:\n%s" % (len(failed), len(checks), "\n".join(failed))


def test_probe_ran_to_the_end(probe: ProbeRun) -> None:
    r = probe.result
    assert r.exit_code in (0, 1), "the probe did not finish normally: %s" % r.describe()
    assert not r.timed_out and r.signal is None, r.describe()
    assert any(re.match(r"^# \d+ checks, \d+ failed$", line) for line in probe.lines), r.describe()
    # a truncated or mangled run must not look like a pass
    for name in ("x86_64.mount", "x86_64.ptrace", "x86_64.unshare", "x86_64.bpf", "x86_64.keyctl",
                 "x86_64.kexec_load", "x86_64.init_module", "x86_64.perf_event_open",
                 "x86_64.userfaultfd", "x86_64.io_uring_setup", "x86_64.clone3",
                 "x86_64.clone.CLONE_NEWUSER", "x86_64.unshare.CLONE_NEWUSER",
                 "x86_64.ioctl.TIOCSTI|hibits", "x86_64.socket.AF_PACKET", "allow.listen"):
        assert name in probe.checks, "probe check %s missing:\n%s" % (name, r.stdout)


def test_denied_syscalls_x86_64(probe: ProbeRun) -> None:
    assert_group(probe, r"^x86_64\.(?!socket\.|socketpair\.|clone\.|ioctl\.|unshare\.)", 60)


def test_calls_newer_than_libseccomp_are_denied(probe: ProbeRun) -> None:
    # statmount, listmount and open_tree_attr have no name in the libseccomp this is built
    # with: the filter denies them by number, on every ABI (x32: EPERM, or ENOSYS when
    # the kernel lacks x32)
    names = ["%s.%s" % (abi, call) for call in ("statmount", "listmount", "open_tree_attr")
             for abi in ("x86_64", "i386", "x32")
             if abi != "i386" or not any("i386 ABI: not available" in line for line in probe.info)]
    missing = [n for n in names if n not in probe.checks]
    assert not missing, "probe checks missing: %s\n%s" % (missing, probe.result.stdout)
    failed = [probe.checks[n][1] for n in names if not probe.checks[n][0]]
    assert not failed, "\n".join(failed)


def test_denied_syscalls_i386(probe: ProbeRun) -> None:
    if any("i386 ABI: not available" in line for line in probe.info):
        pytest.skip("this kernel refuses the i386 entry (int $0x80 faults), nothing to bypass: "
                    + next(line for line in probe.info if "i386" in line))
    assert_group(probe, r"^i386\.(?!socket\.|socketpair\.|socketcall\.|clone\.|ioctl\.|unshare\.)", 60)
    assert_group(probe, r"^i386\.(clone|unshare|ioctl)\.", 10)


def test_denied_syscalls_x32(probe: ProbeRun) -> None:
    assert_group(probe, r"^x32\.", 60)
    answers = {}
    for name, ok, line in probe.group(r"^x32\."):
        m = re.search(r"\((E[A-Z]+)", line)
        answers.setdefault(m.group(1) if m else "plain", []).append(name)
    print("x32 answers: " + ", ".join("%s: %d" % (k, len(v)) for k, v in sorted(answers.items())))
    # The filter runs before the kernel looks the number up, with or without x32 in the
    # kernel: a kernel's ENOSYS ("x32 disabled in the kernel") means the filter let it by.
    passed = [line for _, _, line in probe.group(r"^x32\.") if "x32 disabled in the kernel" in line]
    assert not passed, "x32 calls the filter did not answer:\n" + "\n".join(passed)


def test_no_new_namespaces(probe: ProbeRun) -> None:
    assert_group(probe, r"^x86_64\.(clone|unshare)\.", 10)
    assert_group(probe, r"^(x86_64|x32|i386)\.unshare\.CLONE_NEWTIME$", 2)


def test_ioctl_compared_on_low_32_bits(probe: ProbeRun) -> None:
    assert_group(probe, r"^x86_64\.ioctl\.", 5)


def test_denied_socket_families(probe: ProbeRun) -> None:
    assert_group(probe, r"^x86_64\.socket\.[A-Za-z0-9_]+$", 30)
    assert_group(probe, r"^x32\.socket\.", 30)
    if not any("i386 ABI: not available" in line for line in probe.info):
        assert_group(probe, r"^i386\.(socket|socketcall)\.", 40)


def test_socketpair_gets_the_socket_family_rules(probe: ProbeRun) -> None:
    # socketpair() creates its sockets through the family's code first: an unfiltered
    # socketpair would reach (and load) every family socket() is denied
    assert_group(probe, r"^x86_64\.socketpair\.[A-Za-z0-9_]+$", 30)
    assert_group(probe, r"^x86_64\.socketpair\..*\|hibits$", 30)
    assert_group(probe, r"^x32\.socketpair\.", 30)
    if not any("i386 ABI: not available" in line for line in probe.info):
        assert_group(probe, r"^i386\.(socketpair|socketcall\.socketpair)\.", 60)
    for name in ("x86_64.socketpair.AF_TIPC", "x86_64.socketpair.AF_KCM", "x86_64.socket.AF_RXRPC",
                 "x86_64.socket.AF_SMC", "allow.socketpair.AF_UNIX", "allow.socket.AF_NETLINK"):
        assert name in probe.checks, "probe check %s missing:\n%s" % (name, probe.result.stdout)


def test_socket_family_compared_on_low_32_bits(probe: ProbeRun) -> None:
    # socket() takes an int: a family with junk in the upper half of the register is the
    # same family to the kernel, so the filter must compare the low 32 bits only
    assert_group(probe, r"^x86_64\.socket\..*\|hibits$", 20)


def test_filter_does_not_over_block(probe: ProbeRun) -> None:
    assert_group(probe, r"^allow\.", 14)
