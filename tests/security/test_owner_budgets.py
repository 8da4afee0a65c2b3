"""No sandbox spends host root's, or another sandbox's, per-user kernel budgets.

The kernel charges inotify instances and watches (and the other counters it keeps per
user: namespaces, fanotify groups, ...) at every level of the user-namespace chain, and
at the host's level to the uid that owns the sandbox's user namespace. Each live
sandbox has an owner uid of its own (SANDBOX_UID_BASE+4000 onwards), and its own user
namespace caps the counters (SANDBOX_INOTIFY_INSTANCES, SANDBOX_INOTIFY_WATCHES).

Here a cold and a warm sandbox each take every inotify instance and watch they can get
and hold them; while both hold, host root, a concurrent warm sandbox and a concurrent
cold sandbox each create an inotify instance and a watch. The hogs hold only until
the test has looked (it signals them), a few seconds; the service runs the canary
first, and the hogs run only once two idle sandboxes, read from the host, have shown
user namespaces of owners of their own (not root, not a uid every sandbox shares).
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import signal
import struct
import tempfile
import threading
import uuid
from typing import Dict, List, Tuple

import pytest

import _service
from _service import Result, WARM_FLAG_PY, assert_ran

INSTANCES = 32     # the default of SANDBOX_INOTIFY_INSTANCES
WATCHES = 300      # SANDBOX_INOTIFY_WATCHES for this service (the default is larger)
OWNER_POOL = 1024  # owner uids from SANDBOX_UID_BASE+4000, shared by the engines on the host
HOLD_TIMEOUT = 20  # only against a hang: the test releases the hogs itself

NS_GET_OWNER_UID = 0xB704

# Takes every inotify instance and watch it can, renames itself to say it holds them,
# waits for SIGUSR1 (from the test on the host), reports. Runs as Python, warm or cold.
HOG = r'''
import ctypes, json, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(15, b"@HOG@", 0, 0, 0)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
fds, inst_errno = [], 0
while len(fds) < 1000:
    fd = libc.inotify_init1(0)
    if fd < 0:
        inst_errno = ctypes.get_errno()
        break
    fds.append(fd)
wd = 0
watch_errno = 0
if fds:
    os.makedirs("/tmp/w", exist_ok=True)
    for i in range(@FILES@):
        p = "/tmp/w/%d" % i
        open(p, "w").close()
        if libc.inotify_add_watch(fds[0], p.encode(), 0x2) < 0:  # IN_MODIFY
            watch_errno = ctypes.get_errno()
            break
        wd += 1
libc.prctl(15, b"@HOLD@", 0, 0, 0)
got = signal.sigtimedwait({signal.SIGUSR1}, @TIMEOUT@)
print(json.dumps({"instances": len(fds), "inst_errno": inst_errno, "watches": wd,
                  "watch_errno": watch_errno, "released": got is not None,
                  "warm": @WARM@}))
'''

# One instance and one watch, right now.
ONE = r'''
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
e1 = ctypes.get_errno() if fd < 0 else 0
wd = libc.inotify_add_watch(fd, b"/tmp", 0x100) if fd >= 0 else -1  # IN_CREATE
e2 = ctypes.get_errno() if wd < 0 else 0
print(json.dumps({"fd": fd, "errno": os.strerror(e1) if e1 else "", "wd": wd,
                  "watch_errno": os.strerror(e2) if e2 else "", "warm": @WARM@}))
'''


@pytest.fixture(scope="module")
def budget_svc(sandbox_isolates: str):
    yield from _service.serve_module({"MAX_CONCURRENT": "6", "SANDBOX_INOTIFY_WATCHES": str(WATCHES)})


def cold(python: str) -> Dict[str, object]:
    """A Python program as a cold start (Bash running python3)."""
    return {"code": "exec /usr/bin/python3 - <<'HXSEOF'\n%s\nHXSEOF\n" % python, "lang": "bash"}


def fill(code: str, **kw: object) -> str:
    for k, v in kw.items():
        code = code.replace("@%s@" % k, str(v))
    return code


def ns_owner(pid: int) -> int:
    fd = os.open("/proc/%d/ns/user" % pid, os.O_RDONLY)
    try:
        buf = bytearray(4)
        fcntl.ioctl(fd, NS_GET_OWNER_UID, buf)
        return struct.unpack("I", buf)[0]
    finally:
        os.close(fd)


def host_inotify() -> str:
    """inotify_init1 and a watch as host root: "" or what failed."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(0)
    if fd < 0:
        return "inotify_init1: " + os.strerror(ctypes.get_errno())
    try:
        with tempfile.TemporaryDirectory(prefix="hxs-inotify-") as d:
            if libc.inotify_add_watch(fd, d.encode(), 0x100) < 0:
                return "inotify_add_watch: " + os.strerror(ctypes.get_errno())
    finally:
        os.close(fd)
    return ""


# Names itself, waits for SIGUSR1 (from the test), takes nothing.
IDLE = r'''
import ctypes, signal
ctypes.CDLL(None).prctl(15, b"@NAME@", 0, 0, 0)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
print(signal.sigtimedwait({signal.SIGUSR1}, @TIMEOUT@) is not None)
'''


def run_cold_and_warm(svc, codes: Dict[str, str]) -> Tuple[List[threading.Thread], Dict[str, Result]]:
    """codes["cold"] as a cold start and codes["warm"] warm, each from a thread of its own;
    the results land in the dict as they come."""
    results: Dict[str, Result] = {}

    def run(mode: str) -> None:
        req = cold(codes[mode]) if mode == "cold" else {"code": codes[mode], "lang": "python"}
        results[mode] = svc.exec(req["code"], req["lang"], timeout=HOLD_TIMEOUT + 8)

    threads = [threading.Thread(target=run, args=(m,), daemon=True) for m in codes]
    for t in threads:
        t.start()
    return threads, results


def owners_of_idle_sandboxes(svc) -> Dict[str, int]:
    """The owner uids of the user namespaces of a cold and a warm sandbox, read from the
    host while they wait."""
    tag = uuid.uuid4().hex[:6]
    names = {"cold": "hxidl" + tag + "c", "warm": "hxidl" + tag + "w"}
    threads, results = run_cold_and_warm(svc, {m: fill(IDLE, NAME=n, TIMEOUT=HOLD_TIMEOUT)
                                              for m, n in names.items()})
    owners: Dict[str, int] = {}
    pids: Dict[str, int] = {}
    try:
        pids = _service.wait_named(names, threads, HOLD_TIMEOUT)
        assert len(pids) == 2, "the idle sandboxes did not start: %s" % {m: r.describe() for m, r in results.items()}
        owners = {m: ns_owner(p) for m, p in pids.items()}
    finally:
        for pid in pids.values():
            _service.kill_pid(pid, signal.SIGUSR1)
        for t in threads:
            t.join(HOLD_TIMEOUT + 60)
    for mode in names:
        assert_ran(results[mode])
    return owners


def owner_problems(owners: Dict[str, int], base: int) -> List[str]:
    problems = []
    if len(set(owners.values())) != len(owners):
        problems.append("the sandboxes' user namespaces have one owner: %s" % owners)
    for mode, uid in owners.items():
        if uid in (0, base, base + 1000, base + 2000) or not base + 4000 <= uid < base + 4000 + OWNER_POOL:
            problems.append("the %s sandbox's user namespace belongs to uid %d" % (mode, uid))
    return problems


def test_no_sandbox_spends_root_s_or_another_sandbox_s_inotify_budget(budget_svc) -> None:
    svc = budget_svc
    base = svc.uid_base
    # First, without taking anything: are the owners the sandboxes' own? If not, taking
    # every instance would take host root's (or every warm sandbox's): stop here.
    bad = owner_problems(owners_of_idle_sandboxes(svc), base)
    assert not bad, "not hogging anything, since:\n" + "\n".join(bad)
    tag = uuid.uuid4().hex[:6]
    hogs = {"cold": ("hxhog" + tag + "c", "hxhld" + tag + "c"), "warm": ("hxhog" + tag + "w", "hxhld" + tag + "w")}
    threads, results = run_cold_and_warm(svc, {
        m: fill(HOG, HOG=h[0], HOLD=h[1], FILES=WATCHES + 50, TIMEOUT=HOLD_TIMEOUT, WARM=WARM_FLAG_PY)
        for m, h in hogs.items()})
    held: Dict[str, int] = {}
    try:
        held = _service.wait_named({m: h[1] for m, h in hogs.items()}, threads, HOLD_TIMEOUT)
        assert len(held) == 2, "the hogs did not get to hold their budgets: %s" % {
            m: r.describe() for m, r in results.items()}

        # while both hold: host root, a concurrent warm and a concurrent cold sandbox
        host = host_inotify()
        warm = svc.exec(fill(ONE, WARM=WARM_FLAG_PY), "python", timeout=30)
        c = cold(fill(ONE, WARM=WARM_FLAG_PY))
        cold_res = svc.exec(c["code"], c["lang"], timeout=30)
        owners = {m: ns_owner(p) for m, p in held.items()}
        still = {m: bool(_service.named_pid(hogs[m][1])) for m in hogs}
    finally:
        for pid in held.values():
            _service.kill_pid(pid, signal.SIGUSR1)
        for t in threads:
            t.join(HOLD_TIMEOUT + 60)

    assert all(still.values()), "a hog stopped holding before the checks were done: %s" % still
    problems: List[str] = []
    if host:
        problems.append("host root could not use inotify while sandboxes held theirs: %s" % host)
    for name, res in (("warm", warm), ("cold", cold_res)):
        assert_ran(res)
        got = res.json()
        if got["fd"] < 0 or got["wd"] < 0:
            problems.append("a concurrent %s sandbox could not use inotify: %s" % (name, res.out.strip()))
    assert warm.json()["warm"] is True, "the concurrent Python check did not run warm: " + warm.describe()

    # each sandbox's user namespace has an owner of its own, not root nor a shared uid
    problems += owner_problems(owners, base)

    # the hogs: stopped by their own namespace's limits, not the host's
    for mode in hogs:
        res = assert_ran(results[mode])
        got = res.json()
        assert got["released"], "the %s hog was not released by the test: %s" % (mode, res.describe())
        assert got["warm"] is (mode == "warm"), res.describe()
        if got["instances"] != INSTANCES or got["inst_errno"] != 24:
            problems.append("the %s hog held %s inotify instances (%s): the sandbox's limit is %d" % (
                mode, got["instances"], os.strerror(got["inst_errno"] or 0), INSTANCES))
        if got["watches"] != WATCHES or got["watch_errno"] != 28:
            problems.append("the %s hog held %s watches (%s): the sandbox's limit is %d" % (
                mode, got["watches"], os.strerror(got["watch_errno"] or 0), WATCHES))
    assert not problems, "\n".join(problems)
