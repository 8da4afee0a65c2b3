"""Shared by the SDK unit tests.

The SDK retries what is safe to retry (HEXR_SANDBOX_RETRIES, default 2). The tests
that check how one reply maps to a result or an error want exactly one attempt, so
retries are off unless a test module sets ``RETRIES_UNDER_TEST = True``
(test_sdk_retries.py, which sets them per test).
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _one_attempt_unless_testing_retries(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if not getattr(request.module, "RETRIES_UNDER_TEST", False):
        monkeypatch.setenv("HEXR_SANDBOX_RETRIES", "0")
