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
import errno
import os
import select
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


class TakenPlace:
    """The test in the plain template's place: a copy of its end of the control socket,
    and the template stopped (so that only the test answers)."""

    def __init__(self, svc) -> None:
        self.svc = svc
        self.templates = plain_templates(svc)
        # the template that serves plain Python: the one with the service's socket open
        assert self.templates, "no warm template of the plain kind found"
        self.stopped: List[int] = []
        self.socks: List[socket.socket] = []
        self.result: dict = {}
        self.thread: Optional[threading.Thread] = None

    def __enter__(self) -> "TakenPlace":
        for t in self.templates:
            fd = os.pidfd_open(t)
            try:
                self.socks.append(socket.socket(fileno=pidfd_getfd(fd, TEMPLATE_SOCK_FD)))
            finally:
                os.close(fd)
            os.kill(t, signal.SIGSTOP)
            self.stopped.append(t)
        return self

    def __exit__(self, *exc) -> None:
        for t in self.stopped:
            _service.kill_pid(t, signal.SIGCONT)
        for s in self.socks:
            s.close()

    def request(self):
        """Sends the service a Python request; returns (our copy of the socket, the
        request's seq) once the template's request is in."""
        self.thread = threading.Thread(target=lambda: self.result.setdefault(
            "res", self.svc.exec("print('ran', %s)" % _service.WARM_FLAG_PY, "python", timeout=20)), daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            # no settimeout: it would make the socket non-blocking for the template too
            ready, _, _ = select.select(self.socks, [], [], 0.2)
            for s in ready:
                try:
                    msg, anc, _, _ = s.recvmsg(65536, socket.CMSG_SPACE(8 * 4), socket.MSG_DONTWAIT)
                except BlockingIOError:
                    continue
                for level, kind, data in anc:  # the sandbox's pipes: not ours to keep
                    if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                        fds = array.array("i")
                        fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
                        for fd in fds:
                            os.close(fd)
                return s, struct.unpack_from("I", msg, 4)[0]  # template.h: seq follows the magic
        raise AssertionError("the service sent the stopped template no request")

    def answer(self, sock: socket.socket, pid: int, seq: int, pidfd: Optional[int] = None) -> None:
        anc = [] if pidfd is None else [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [pidfd]).tobytes())]
        sock.sendmsg([struct.pack("iI", pid, seq)], anc)

    def outcome(self):
        self.thread.join(60)
        assert not self.thread.is_alive(), "the request did not finish"
        return self.result["res"]


def foreign_state(pid: int) -> dict:
    return {k: open("/proc/%d/%s" % (pid, k)).read() for k in ("uid_map", "cgroup", "oom_score_adj")}


def test_a_template_naming_a_foreign_process_is_not_believed(one_slot_svc) -> None:
    svc = one_slot_svc
    svc.wait_warm()
    foreign = subprocess.Popen(["sleep", "120"], stdin=subprocess.DEVNULL)
    try:
        before = foreign_state(foreign.pid)
        with TakenPlace(svc) as place:
            sock, seq = place.request()
            # "I cloned your sandbox: it is <the foreign process>", with a pidfd of it
            pidfd = os.pidfd_open(foreign.pid)
            try:
                place.answer(sock, foreign.pid, seq, pidfd)
            finally:
                os.close(pidfd)
            res = place.outcome()
            # a SIGKILL sent before the answer takes effect a moment later: give it that moment
            try:
                foreign.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
            assert foreign.poll() is None, "the service killed the process the forged answer named"
            after = foreign_state(foreign.pid)
            assert after == before, "the service acted on the process the forged answer named: %s -> %s" % (
                before, after)
            stopped = place.stopped
    finally:
        foreign.kill()
        foreign.wait(10)
    # the execution still ran, cold (the template that answered so is replaced)
    assert res.status == 200 and res.out == "ran False\n", res.describe()
    svc.wait_warm()
    assert not set(plain_templates(svc)) & set(stopped), "the template that lied is still serving"


def test_a_late_answer_to_an_earlier_request_is_not_this_ones(one_slot_svc) -> None:
    """A request can get two answers (PID 1 answers for itself, and the template does
    too when PID 1 was killed before it could note that it had): the second one waits
    in the socket. The next request must not take it for its own, which would name a
    sandbox long gone and have a sound template replaced."""
    svc = one_slot_svc
    svc.wait_warm()
    gone = subprocess.Popen(["true"], stdin=subprocess.DEVNULL)
    gone_pidfd = os.pidfd_open(gone.pid)
    gone.wait(10)
    try:
        with TakenPlace(svc) as place:
            sock, seq = place.request()
            # first the late answer of the request before (a pidfd of a process reaped),
            # then this request's: "could not clone" (the request runs cold, and a
            # template that says so is not replaced)
            place.answer(sock, gone.pid, seq - 1, gone_pidfd)
            place.answer(sock, -errno.EAGAIN, seq)
            res = place.outcome()
            stopped = place.stopped
    finally:
        os.close(gone_pidfd)
    assert res.status == 200 and res.out == "ran False\n", res.describe()
    svc.wait_warm()
    assert set(plain_templates(svc)) == set(stopped), "a template was replaced over a late answer"
    res = svc.exec("print('ran', %s)" % _service.WARM_FLAG_PY, "python", timeout=20)
    assert res.status == 200 and res.out == "ran True\n", res.describe()
