"""Fixtures for the deployment suite (tests/deploy).

The service helpers come from tests/lib (hxstest, shared by every suite): `launch`,
`Service`, `free_port`, `post_exec`, `http_request`, `wait_for`, `get_metrics`.

    container_url    session: the OCI image started by deploy/container/run.sh on a free
                     loopback port (needs $HXS_OCI_IMAGE, set by ctest in the normal
                     build tree); stopped with `podman stop` at teardown, which must drain
                     and exit 0
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
SDK_DIR = ROOT / "sdk" / "python"
RUN_SH = ROOT / "deploy" / "container" / "run.sh"


_LIB = str(ROOT / "tests" / "lib")  # the shared helpers (hxstest)
if _LIB not in sys.path:
    sys.path.insert(0, _LIB)

import hxstest  # noqa: E402


def oci_image() -> str:
    image = os.environ.get("HXS_OCI_IMAGE")
    assert image, "HXS_OCI_IMAGE is not set: the ctest fixture deploy/image-build builds the image and sets it"
    return image


def podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(["podman", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    if check and r.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} exited {r.returncode}: {r.stderr.strip()[-600:]}")
    return r


def container_exists(name: str) -> bool:
    r = podman("ps", "-a", "--filter", f"name=^{name}$", "--format", "{{.Names}}", check=False)
    return name in r.stdout.split()


def wait_health(url: str, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                return json.loads(r.read())
        except Exception as e:  # connection refused while it starts, 503 while warming
            last = str(e)
        time.sleep(0.2)
    raise AssertionError(f"{url}/health did not answer 200 within {timeout}s: {last}")


class Container:
    def __init__(self, port: int, name: str):
        self.port = port
        self.name = name
        self.url = f"http://127.0.0.1:{port}"

    def logs(self) -> str:
        r = podman("logs", self.name, check=False)
        return r.stdout + r.stderr

    def stop(self, timeout: int = 45) -> None:
        if container_exists(self.name):
            podman("stop", "-t", str(timeout), self.name, timeout=timeout + 30, check=False)
        # --rm: gone once it stopped
        hxstest.wait_for(lambda: not container_exists(self.name), 30, f"container {self.name} to be removed")


def start_container(extra_flags: str = "") -> Container:
    port = hxstest.free_port()
    env = dict(os.environ, HEXR_PODMAN_FLAGS=extra_flags)
    r = subprocess.run([str(RUN_SH), str(port), oci_image()], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, f"run.sh {port} failed: {r.stderr}"
    return Container(port, f"hexr-sandbox-{port}")


@pytest.fixture(scope="session")
def container() -> Iterator[Container]:
    c = start_container()
    try:
        wait_health(c.url)
    except AssertionError:
        logs = c.logs()
        c.stop()
        raise AssertionError(f"the container did not become healthy:\n{logs}")
    yield c
    c.stop()


@pytest.fixture(scope="session")
def container_url(container: Container) -> str:
    return container.url
