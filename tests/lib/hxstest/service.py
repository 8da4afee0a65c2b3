"""Starting and stopping the real `hexr-sandbox serve`, and cleaning up after it.

launch(env, listen) starts a service in a temporary directory of its own (its STATE_DIR
and log live there), on a free loopback port unless told where, and waits until it
says where it listens; Service.stop() sends SIGTERM, then SIGKILL after a timeout, and
removes the directory without ever descending into a mount; stop_checked() also fails
the test unless the service exited 0. Every wait here has a timeout.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

from .paths import BIN

START_TIMEOUT = 30.0   # seconds for "listening on" to appear
STOP_TIMEOUT = 45.0    # seconds after SIGTERM before SIGKILL (DRAIN_TIMEOUT is 30s by default)
LISTEN_RE = re.compile(r"^hexr-sandbox: listening on (\S+)")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _mounts_under(path: str) -> List[str]:
    """Mount points at or below path (in our mount namespace)."""
    found = []
    real = os.path.realpath(path)
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                mp = line.split()[4].encode().decode("unicode_escape")
                if mp == real or mp.startswith(real + "/"):
                    found.append(mp)
    except OSError:
        pass
    return found


def safe_rmtree(path: str) -> None:
    """rmtree that never descends into a mount (a leaked bind mount of the host's /usr
    must not be emptied by a test's cleanup)."""
    if not os.path.exists(path):
        return
    if _mounts_under(path):
        return  # leave it; the engine's next start sweeps it
    shutil.rmtree(path, ignore_errors=True)


def read_lines(path: str) -> List[str]:
    """A log file's lines; none while it does not exist."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []


def wait_listening(proc: subprocess.Popen, log_path: str, timeout: float = START_TIMEOUT) -> str:
    """The address a starting `hexr-sandbox serve` says it listens on ("hexr-sandbox:
    listening on ADDR" in its log). RuntimeError with the log when the process exits
    first, or when timeout seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in read_lines(log_path):
            m = LISTEN_RE.match(line)
            if m:
                return m.group(1)
        if proc.poll() is not None:
            raise RuntimeError(f"hexr-sandbox serve exited with {proc.returncode}:\n"
                               + "\n".join(read_lines(log_path)))
        time.sleep(0.02)
    raise RuntimeError(f"hexr-sandbox serve did not start within {timeout}s:\n" + "\n".join(read_lines(log_path)))


class Service:
    """A running `hexr-sandbox serve`: .url, .proc, .log (stderr lines), .stop()."""

    def __init__(self, proc: subprocess.Popen, log_path: str, workdir: str, listen: str):
        self.proc = proc
        self.log_path = log_path
        self.workdir = workdir
        self.listen = listen
        self.address = ""
        self.url = ""
        self.returncode: Optional[int] = None

    @property
    def log(self) -> List[str]:
        return read_lines(self.log_path)

    def log_text(self) -> str:
        return "\n".join(self.log)

    def json_log(self) -> List[Dict[str, Any]]:
        out = []
        for line in self.log:
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out

    def exec_log(self, request_id: str, timeout: float = 10.0) -> Dict[str, Any]:
        """The log line of one execution request, waiting for it to be written."""
        deadline = time.monotonic() + timeout
        while True:
            for rec in self.json_log():
                if rec.get("event") == "exec" and rec.get("id") == request_id:
                    return rec
            if time.monotonic() > deadline:
                raise AssertionError(f"no log line for request {request_id}:\n{self.log_text()}")
            time.sleep(0.05)

    def wait_started(self, timeout: float = START_TIMEOUT) -> None:
        self.address = wait_listening(self.proc, self.log_path, timeout)
        self.url = self.address if self.address.startswith("unix:") else "http://" + self.address

    def signal(self, signo: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signo)

    def wait(self, timeout: float) -> int:
        self.returncode = self.proc.wait(timeout=timeout)
        return self.returncode

    def stop(self, timeout: float = STOP_TIMEOUT) -> Optional[int]:
        """SIGTERM, then SIGKILL after timeout. Returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self.returncode = self.proc.returncode
        safe_rmtree(self.workdir)
        return self.returncode


def launch(env: Optional[Dict[str, str]], listen: Optional[str]) -> Service:
    attempts = 1 if listen else 3  # a picked free port can be taken before we bind it
    last: Optional[BaseException] = None
    for _ in range(attempts):
        workdir = tempfile.mkdtemp(prefix="hxs-it-")
        # The sandbox's root (an unprivileged uid on the host) must be able to reach
        # STATE_DIR's mount point: mkdtemp's 0700 would stop it.
        os.chmod(workdir, 0o755)
        state = os.path.join(workdir, "state")
        os.mkdir(state, 0o755)
        addr = listen or f"127.0.0.1:{free_port()}"
        full_env = dict(os.environ)
        full_env.pop("LISTEN_ADDRESS", None)
        full_env["STATE_DIR"] = state
        # No load balancer waits on a test's service: once drained it may exit at once
        # (the drain tests and the cluster scenario set DRAIN_QUIET themselves).
        full_env.setdefault("DRAIN_QUIET", "0")
        full_env.update(env or {})
        log_path = os.path.join(workdir, "serve.log")
        try:
            with open(log_path, "wb") as logf:
                proc = subprocess.Popen([BIN, "serve", "--listen", addr], env=full_env,
                                        stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                        start_new_session=True)
        except OSError:
            safe_rmtree(workdir)
            raise
        svc = Service(proc, log_path, workdir, addr)
        try:
            svc.wait_started()
            return svc
        except RuntimeError as e:
            last = e
            svc.stop(timeout=5)
            if "in use" not in str(e) and "Address already" not in str(e):
                break
    raise last if last else RuntimeError("could not start the service")


def stop_checked(svc: Service) -> None:
    """Stops svc and fails if it did not exit 0 (a crash, a sanitizer report, a drain
    that hung and needed SIGKILL)."""
    rc = svc.stop()
    if rc != 0:
        tail = "\n".join(svc.log[-40:])
        pytest.fail(f"hexr-sandbox serve ({svc.listen}) exited with {rc} on SIGTERM:\n{tail}",
                    pytrace=False)


def service_factory() -> Iterator[Callable[..., Service]]:
    """The body of a `start_service` fixture (`yield from service_factory()`): yields
    start(env=None, listen=None) -> Service; at teardown stops every service it started
    and fails the test if one that was still running did not exit 0 on SIGTERM."""
    started: List[Service] = []

    def start(env: Optional[Dict[str, str]] = None, listen: Optional[str] = None) -> Service:
        svc = launch(env, listen)
        started.append(svc)
        return svc

    yield start
    failed = []
    for svc in started:
        already = svc.returncode is not None or svc.proc.poll() is not None
        rc = svc.stop()
        if rc != 0 and not already:
            failed.append(f"{svc.listen}: exit {rc}\n" + "\n".join(svc.log[-40:]))
    if failed:
        pytest.fail("services did not stop cleanly on SIGTERM:\n" + "\n".join(failed), pytrace=False)
