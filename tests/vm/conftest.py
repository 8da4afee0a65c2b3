"""The microVM suite reuses the integration suite's service fixtures and helpers."""

from __future__ import annotations

import importlib.util
import os
import socket
import sys
from pathlib import Path

import pytest

_INTEGRATION = Path(__file__).resolve().parents[1] / "integration"
if str(_INTEGRATION) not in sys.path:
    sys.path.insert(0, str(_INTEGRATION))

_spec = importlib.util.spec_from_file_location("hxs_integration_conftest", _INTEGRATION / "conftest.py")
assert _spec and _spec.loader
_it = importlib.util.module_from_spec(_spec)
sys.modules["hxs_integration_conftest"] = _it
_spec.loader.exec_module(_it)

start_service = _it.start_service  # the fixture: a service per test, stopped and checked after
openapi = _it.openapi              # docs/openapi.yaml, to check responses against


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
