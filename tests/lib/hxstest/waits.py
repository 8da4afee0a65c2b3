"""Waits with timeouts: every wait of the suites ends, and says what it waited for.

wait_for raises when the time is up (for "this must happen"); wait_until returns the
last value instead (for "see whether this happens", e.g. that something stays absent).
"""

from __future__ import annotations

import time
from typing import Any, Callable, TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    """Polls predicate until it returns something true; AssertionError naming `what`
    after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def wait_until(predicate: Callable[[], T], timeout: float, interval: float = 0.1) -> T:
    """Polls predicate until it returns something true or timeout passes; returns the last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)
