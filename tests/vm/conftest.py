"""The microVM suite reuses the integration suite's service fixtures and helpers."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

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
