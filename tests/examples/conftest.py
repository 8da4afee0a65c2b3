"""Fixtures of the examples' tests (examples/): a real service with default settings,
and examples/python importable (agent_loop) with the Python SDK of this tree.

The binary comes from $HEXR_SANDBOX_BIN (default build/hexr-sandbox). The service is
stopped at teardown and must exit 0 on SIGTERM.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

_ROOT = Path(__file__).resolve().parents[2]
for _p in (_ROOT / "tests" / "lib", _ROOT / "sdk" / "python", _ROOT / "examples" / "python"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from hxstest.service import Service, launch, stop_checked  # noqa: E402

ROOT = _ROOT
EXAMPLES = _ROOT / "examples"


@pytest.fixture(scope="session")
def service() -> Iterator[Service]:
    svc = launch(None, None)
    yield svc
    stop_checked(svc)


@pytest.fixture
def sandbox_url(service: Service, monkeypatch: pytest.MonkeyPatch) -> str:
    """The service, as HEXR_SANDBOX_URL for the module-level hexr.sandbox.exec."""
    monkeypatch.setenv("HEXR_SANDBOX_URL", service.url)
    return service.url
