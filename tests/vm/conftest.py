"""The microVM suite's fixtures: services from the shared helpers (tests/lib, hxstest),
and host sockets a jailed VMM must not reach."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Callable, Iterator

import pytest

_LIB = str(Path(__file__).resolve().parents[1] / "lib")  # the shared helpers (hxstest)
if _LIB not in sys.path:
    sys.path.insert(0, _LIB)

from hxstest.openapi import OpenAPI, load_openapi  # noqa: E402
from hxstest.service import Service, service_factory  # noqa: E402


@pytest.fixture
def start_service() -> Iterator[Callable[..., Service]]:
    """A factory start_service(env=None, listen=None) -> Service, for tests that need
    their own settings; every service it started is stopped at teardown and must have
    exited 0 on SIGTERM."""
    yield from service_factory()


@pytest.fixture(scope="session")
def openapi() -> OpenAPI:
    return load_openapi()


@pytest.fixture
def host_sockets():
    """Listening unix sockets on the host, mode 0777 (anyone may connect), under /tmp
    and /run: what a jailed VMM must not reach."""
    paths, socks = [], []
    for d in ("/tmp", "/run"):
        path = os.path.join(d, f"hxs-jail-probe-{os.getpid()}.sock")
        if os.path.exists(path):
            os.unlink(path)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        os.chmod(path, 0o777)
        s.listen(4)
        paths.append(path)
        socks.append(s)
    yield paths
    for s in socks:
        s.close()
    for p in paths:
        os.unlink(p)
