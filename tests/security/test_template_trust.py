"""The service acts only on a process it can prove a warm template made for it.

A template is an unprivileged process; the service is root. If a compromised template
could name any host process as "the sandbox I cloned", the service would write uid
maps for it, move it into a cgroup, shield it from the OOM killer and SIGKILL it. Here
the test takes the template's place (as root on the host it takes a copy of the
template's control socket and stops the template) and answers the service's next
request with a process the test started itself. The service must not touch that
process, and the request must still run (cold).
"""

from __future__ import annotations

import array
import ctypes
import os
import signal
import socket
import struct
import subprocess
import threading
import time
from typing import List, Optional

import pytest

import _service

SYS_pidfd_getfd = 438
TEMPLATE_SOCK_FD = 3


@pytest.fixture(scope="module")
def one_slot_svc(sandbox_isolates: str):
    # one warm slot: one template of each kind; no pre-started sandboxes, so that every
    # request the templates get is the test's own
    yield from _service.serve_module({"MAX_CONCURRENT": "1", "SANDBOX_POOL": "0"})


def plain_templates(svc) -> List[int]:
    """The service's templates of the plain kind (real uid SANDBOX_UID_BASE+2000)."""
    found = []
    for p in _service.host_pids():
        uids = _service.proc_uids(p)
        argv = _service.proc_cmdline(p).split(b"\0")
        if svc.uid_base + 2000 in uids and len(argv) > 3 and argv[3] == b"plain" and \
                svc.state_dir.encode() in b" ".join(argv):
            found.append(int(p))
    return found


def pidfd_getfd(pidfd: int, fd: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    r = libc.syscall(SYS_pidfd_getfd, pidfd, fd, 0)
    if r < 0:
        raise OSError(ctypes.get_errno(), "pidfd_getfd")
    return int(r)


def test_a_template_naming_a_foreign_process_is_not_believed(one_slot_svc) -> None:
    svc = one_slot_svc
    svc.wait_warm()
    templates = plain_templates(svc)
    # the template that serves plain Python: the one with the service's socket open
    assert templates, "no warm template of the plain kind found"
    foreign = subprocess.Popen(["sleep", "120"], stdin=subprocess.DEVNULL)
    stolen: Optional[socket.socket] = None
    stopped: List[int] = []
    socks: List[socket.socket] = []
    result = {}
    try:
        before = {
            "uid_map": open("/proc/%d/uid_map" % foreign.pid).read(),
            "cgroup": open("/proc/%d/cgroup" % foreign.pid).read(),
            "oom_score_adj": open("/proc/%d/oom_score_adj" % foreign.pid).read(),
        }
        # take the template's place: a copy of its end of the control socket, and the
        # template stopped (so that only the test answers)
        for t in templates:
            fd = os.pidfd_open(t)
            try:
                socks.append(socket.socket(fileno=pidfd_getfd(fd, TEMPLATE_SOCK_FD)))
            finally:
                os.close(fd)
            os.kill(t, signal.SIGSTOP)
            stopped.append(t)

        th = threading.Thread(target=lambda: result.setdefault(
            "res", svc.exec("print('ran', %s)" % _service.WARM_FLAG_PY, "python", timeout=20)), daemon=True)
        th.start()
        got = None
        deadline = time.monotonic() + 30
        while got is None and time.monotonic() < deadline:
            for s in socks:
                s.settimeout(0.2)
                try:
                    msg, anc, _, _ = s.recvmsg(65536, socket.CMSG_SPACE(8 * 4))
                except socket.timeout:
                    continue
                got = (s, msg, anc)
                break
        assert got, "the service sent the stopped template no request"
        stolen, msg, anc = got
        for level, kind, data in anc:  # the sandbox's pipes: not ours to keep
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds = array.array("i")
                fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
                for fd in fds:
                    os.close(fd)
        # "I cloned your sandbox: it is <the foreign process>", with a pidfd of it
        pidfd = os.pidfd_open(foreign.pid)
        try:
            stolen.sendmsg([struct.pack("i", foreign.pid)],
                           [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [pidfd]).tobytes())])
        finally:
            os.close(pidfd)
        th.join(60)
        assert not th.is_alive(), "the request did not finish"
        # a SIGKILL sent before the answer takes effect a moment later: give it that moment
        try:
            foreign.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass
        assert foreign.poll() is None, "the service killed the process the forged answer named"
        after = {
            "uid_map": open("/proc/%d/uid_map" % foreign.pid).read(),
            "cgroup": open("/proc/%d/cgroup" % foreign.pid).read(),
            "oom_score_adj": open("/proc/%d/oom_score_adj" % foreign.pid).read(),
        }
        assert after == before, "the service acted on the process the forged answer named: %s -> %s" % (
            before, after)
    finally:
        for t in stopped:
            _service.kill_pid(t, signal.SIGCONT)
        for s in socks:
            s.close()
        foreign.kill()
        foreign.wait(10)
    res = result["res"]
    # the execution still ran, cold (the template that answered so is replaced)
    assert res.status == 200 and res.out == "ran False\n", res.describe()
    svc.wait_warm()
    assert not set(plain_templates(svc)) & set(stopped), "the template that lied is still serving"
