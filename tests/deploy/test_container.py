"""The OCI image (`make image`) started by deploy/container/run.sh, on loopback only.

- every seed example through the Python SDK against the container (the shared seed
  tests of tests/lib/hxstest/seed_examples.py, which the integration suite runs too,
  collected here with `service_url` pointing at the container);
- the image: built from scratch (one layer, no base image), tini then the entrypoint,
  the settings as environment variables, the runtime manifest inside;
- least privilege: with fewer privileges than docs/deploy.md gives, the service
  refuses to start and names what is missing; the warm tier works with its three
  extra capabilities;
- SIGTERM (`podman stop`) drains: a running execution finishes, the container exits 0.

Needs $HXS_OCI_IMAGE (ctest's deploy/image-build fixture). Runs in the normal build
tree only: the image holds that tree's binary (see tests/CMakeLists.txt).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

import hxstest
from conftest import SDK_DIR, oci_image, podman, start_container, wait_health

if str(SDK_DIR) not in sys.path:
    sys.path.insert(0, str(SDK_DIR))

# The seed examples, verbatim, against the container.
from hxstest.seed_examples import *  # noqa: E402,F401,F403
from hxstest.seed_examples import _sandbox_url  # noqa: E402,F401  (autouse: HEXR_SANDBOX_URL)


@pytest.fixture(scope="session")
def service_url(container_url: str) -> str:
    return container_url


def image_inspect() -> dict:
    return json.loads(podman("image", "inspect", oci_image()).stdout)[0]


def test_image_is_built_from_scratch_with_the_settings_as_environment() -> None:
    img = image_inspect()
    assert len(img["RootFS"]["Layers"]) == 1, "one layer of our own: no base image"
    cfg = img["Config"]
    assert cfg["Entrypoint"] == ["/usr/bin/tini", "--", "/usr/lib/hexr-sandbox/entrypoint.sh"]
    assert cfg["Cmd"] == ["serve"]
    env = dict(e.split("=", 1) for e in cfg["Env"])
    for name in ("LISTEN_ADDRESS", "MAX_EXECUTION_TIME", "MAX_MEMORY_MB", "SANDBOX_BACKEND", "SANDBOX_WARM"):
        assert name in env, name
    assert env["LISTEN_ADDRESS"] == ":8080"
    assert "8080/tcp" in cfg["ExposedPorts"]
    assert cfg["StopSignal"] == "SIGTERM"


def test_runtime_manifest_names_the_packages_and_the_binary() -> None:
    r = podman("run", "--runtime", "runc", "--rm", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
               "--entrypoint", "/usr/bin/cat", oci_image(), "/usr/share/hexr-sandbox/manifest.json")
    m = json.loads(r.stdout)
    for p in ("python3", "python3-pandas", "nodejs", "bash", "libmicrohttpd12", "tini"):
        assert p in m["packages"], p
    assert len(m["binary_sha256"]) == 64
    assert len(m["http_sha256"]) == 64


def test_container_health_says_namespaces(container_url: str) -> None:
    h = wait_health(container_url)
    assert h["status"] == "ok" and h["backend"] == "namespaces"


def run_refused(flags: list, env: dict) -> subprocess.CompletedProcess:
    cmd = ["podman", "--runtime", "runc", "run", "--rm", "--cgroupns", "private",
           "--ulimit", "nofile=16384:16384", "--ulimit", "nproc=16384:16384", "--env", "ALLOW_NON_LOOPBACK=on"]
    for k, v in env.items():
        cmd += ["--env", f"{k}={v}"]
    return subprocess.run(cmd + flags + [oci_image()], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_refuses_to_start_without_cap_sys_admin_for_the_entrypoint() -> None:
    """Without CAP_SYS_ADMIN the entrypoint cannot remount the cgroup subtree or mount
    a visible /proc: the service names both and exits, rather than failing every
    execution."""
    r = run_refused(["--cap-drop", "ALL", "--cap-add", "SETUID", "--cap-add", "SETGID"], {})
    assert r.returncode == 1, r.stderr
    assert "lacks what sandboxes need" in r.stderr
    assert "is not writable" in r.stderr and "/sys/fs/cgroup/memory" in r.stderr
    assert "/proc: a sandbox cannot mount its own /proc" in r.stderr


def test_refuses_to_start_without_setuid() -> None:
    r = run_refused(["--cap-drop", "ALL", "--cap-add", "SYS_ADMIN", "--cap-add", "SETPCAP", "--cap-add", "SETGID"], {})
    assert r.returncode == 1, r.stderr
    assert "capability CAP_SETUID (add --cap-add SETUID)" in r.stderr
    assert "CAP_SETGID" not in r.stderr


def test_refuses_host_cgroup_namespace() -> None:
    r = run_refused(["--cgroupns", "host", "--cap-drop", "ALL", "--cap-add", "SYS_ADMIN", "--cap-add", "SETPCAP",
                     "--cap-add", "SETUID", "--cap-add", "SETGID"], {})
    assert r.returncode == 1, r.stderr
    assert "--cgroupns=private" in r.stderr


def test_warm_needs_three_more_capabilities_and_then_runs_warm() -> None:
    r = run_refused(["--cap-drop", "ALL", "--cap-add", "SYS_ADMIN", "--cap-add", "SETPCAP", "--cap-add", "SETUID",
                     "--cap-add", "SETGID"], {"SANDBOX_WARM": "on"})
    assert r.returncode == 1, r.stderr
    assert "CAP_DAC_OVERRIDE" in r.stderr and "CAP_KILL" in r.stderr and "SANDBOX_WARM=off" in r.stderr

    c = start_container("--env SANDBOX_WARM=on --cap-add DAC_OVERRIDE --cap-add KILL")
    try:
        h = wait_health(c.url)
        hxstest.wait_for(lambda: wait_health(c.url)["warm"]["templates_ready"] >= 1, 60, "a warm template")
        status, headers, body = hxstest.post_exec(c.url, {"code": "print(6*7)"})
        assert status == 200 and body["stdout"] == "42\n", body
        assert h["warm"]["enabled"] is True
        # warm, or from the pre-started Python sandbox a warm template cloned
        assert any('"start":"warm"' in line or '"start":"pooled"' in line for line in c.logs().splitlines()), c.logs()
    finally:
        c.stop()


def test_podman_stop_drains_a_running_execution() -> None:
    c = start_container()
    try:
        wait_health(c.url)
        out = {}

        def run() -> None:
            out["r"] = hxstest.post_exec(c.url, {"code": "import time; time.sleep(2); print('done')"}, timeout=60)

        t = threading.Thread(target=run)
        t.start()
        hxstest.wait_for(lambda: wait_health(c.url)["active"] == 1, 30, "the execution to start")
        stop = subprocess.Popen(["podman", "stop", "-t", "40", c.name], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        t.join(60)
        assert not t.is_alive()
        status, _, body = out["r"]
        assert status == 200 and body["stdout"] == "done\n", body
        _, err = stop.communicate(timeout=60)
        assert stop.returncode == 0, err
        assert b"resorting to SIGKILL" not in err, err
    finally:
        c.stop()
