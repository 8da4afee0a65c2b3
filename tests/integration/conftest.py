"""Fixtures that start the real `hexr-sandbox serve` for the integration suites.

Fixtures (other suites depend on these names):

    service_url        session: "http://127.0.0.1:PORT" of a service with default settings
    service_unix_url   session: "unix:/tmp/.../sock" of a service listening on a unix socket
    start_service      function: factory start_service(env=None, listen=None) -> Service,
                       for tests that need their own settings; stopped at teardown
    openapi            session: checks served responses against docs/openapi.yaml

The helpers come from tests/lib (hxstest), shared by every suite, and are re-exported
here for this suite's tests (`from conftest import post_exec, ...`): post_exec(url, body,
headers=None, timeout=...) -> (status, headers, json_or_text) and http_request(url,
method, path, ...) for any route, both over unix: URLs too; free_port, wait_for,
get_metrics, Service, _launch, _stop_checked, safe_rmtree.

The binary comes from $HEXR_SANDBOX_BIN (default build/hexr-sandbox). Every process
started here is stopped at teardown (SIGTERM, then SIGKILL), every wait has a timeout.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterator

import pytest

_LIB = str(Path(__file__).resolve().parents[1] / "lib")  # the shared helpers (hxstest)
if _LIB not in sys.path:
    sys.path.insert(0, _LIB)

from hxstest.client import connection, get_metrics, http_request, post_exec  # noqa: E402,F401
from hxstest.openapi import OPENAPI, OpenAPI, load_openapi  # noqa: E402,F401
from hxstest.paths import BIN, ROOT  # noqa: E402,F401
from hxstest.service import (LISTEN_RE, START_TIMEOUT, STOP_TIMEOUT, Service, free_port,  # noqa: E402,F401
                             safe_rmtree, service_factory)
from hxstest.service import launch as _launch, stop_checked as _stop_checked  # noqa: E402
from hxstest.waits import wait_for  # noqa: E402,F401


@pytest.fixture(scope="session")
def service() -> Iterator[Service]:
    svc = _launch(None, None)
    yield svc
    _stop_checked(svc)


@pytest.fixture(scope="session")
def service_url(service: Service) -> str:
    return service.url


@pytest.fixture(scope="session")
def unix_service() -> Iterator[Service]:
    sockdir = tempfile.mkdtemp(prefix="hxs-sock-")
    svc = _launch(None, f"unix:{sockdir}/sock")
    yield svc
    _stop_checked(svc)
    shutil.rmtree(sockdir, ignore_errors=True)


@pytest.fixture(scope="session")
def service_unix_url(unix_service: Service) -> str:
    return unix_service.url


@pytest.fixture
def start_service() -> Iterator[Callable[..., Service]]:
    """A factory start_service(env=None, listen=None) -> Service, for tests that need
    their own settings; every service it started is stopped at teardown and must have
    exited 0 on SIGTERM."""
    yield from service_factory()


@pytest.fixture(scope="session")
def openapi() -> OpenAPI:
    return load_openapi()
