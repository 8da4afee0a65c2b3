"""The start-up check for containers (src/engine/hostcheck.c), on the host.

The service believes it is in a container when the `container` variable is set (as
podman sets it); setpriv then takes away what a container runtime would. Without the
check, the service started and every execution failed with a 500.
"""

from __future__ import annotations

import os
import subprocess
import tempfile

import hxstest

BIN = hxstest.BIN


def serve(drop: str, env: dict, timeout: float = 30) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="hxs-hc-") as d:
        os.chmod(d, 0o755)
        full = dict(os.environ, container="test", STATE_DIR=os.path.join(d, "state"))
        full.update(env)
        cmd = ["setpriv", f"--bounding-set=-{drop}", f"--inh-caps=-{drop}", BIN, "serve",
               "--listen", f"127.0.0.1:{hxstest.free_port()}"]
        return subprocess.run(cmd, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)


def test_refuses_without_setuid_and_setgid_naming_both() -> None:
    r = serve("setuid,-setgid", {"SANDBOX_WARM": "off"})
    assert r.returncode == 1, r.stderr
    assert "lacks what sandboxes need" in r.stderr
    assert "capability CAP_SETUID (add --cap-add SETUID)" in r.stderr
    assert "capability CAP_SETGID (add --cap-add SETGID)" in r.stderr
    assert "listening on" not in r.stderr


def test_warm_templates_need_cap_sys_admin() -> None:
    r = serve("sys_admin", {"SANDBOX_WARM": "on", "SANDBOX_BACKEND": "namespaces"})
    assert r.returncode == 1, r.stderr
    assert "capability CAP_SYS_ADMIN (warm templates, SANDBOX_WARM=on" in r.stderr
    assert "or set SANDBOX_WARM=off" in r.stderr


def test_without_warm_cap_sys_admin_is_not_asked_for() -> None:
    """The cold path needs no CAP_SYS_ADMIN: the service starts and runs code."""
    svc = None
    with tempfile.TemporaryDirectory(prefix="hxs-hc-") as d:
        os.chmod(d, 0o755)
        env = dict(os.environ, container="test", STATE_DIR=os.path.join(d, "state"), SANDBOX_WARM="off")
        log = os.path.join(d, "log")
        addr = f"127.0.0.1:{hxstest.free_port()}"
        with open(log, "wb") as f:
            proc = subprocess.Popen(["setpriv", "--bounding-set=-sys_admin", "--inh-caps=-sys_admin", BIN, "serve",
                                     "--listen", addr], env=env, stdout=f, stderr=f, stdin=subprocess.DEVNULL)
        svc = hxstest.Service(proc, log, d, addr)
        try:
            svc.wait_started()
            status, _, body = hxstest.post_exec(svc.url, {"code": "echo ok", "language": "bash"})
            assert status == 200 and body["stdout"] == "ok\n", body
        finally:
            proc.terminate()
            assert proc.wait(timeout=45) == 0, svc.log_text()


def test_doctor_reports_the_container_check() -> None:
    env = dict(os.environ, container="test")
    r = subprocess.run(["setpriv", "--bounding-set=-setuid", "--inh-caps=-setuid", BIN, "doctor"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 1
    assert any(l.startswith("MISSING") and "container" in l and "CAP_SETUID" in l for l in r.stdout.splitlines()), r.stdout
