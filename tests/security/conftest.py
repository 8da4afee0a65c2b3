"""Security suite fixtures: the canary runs first, and stops everything if it fails.

The session-scoped autouse fixture runs a small program inside a sandbox and checks
that it is isolated (capabilities, no_new_privs, seccomp, only `lo`) before any test of
this directory runs attack-like code (see canary.py). If the check fails the session
ends with pytest.exit() and the reason.
"""

from __future__ import annotations

import os
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import canary  # noqa: E402  (needs the path above)


@pytest.fixture(scope="session", autouse=True)
def sandbox_isolates() -> str:
    canary.require_isolation()
    return canary.check_isolation()[1]
