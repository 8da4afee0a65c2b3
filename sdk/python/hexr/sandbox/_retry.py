"""Bounded retries of what is safe to retry.

An execution is retried only when the service certainly did not run it:

- the connection could not be made (refused, no route, connect timeout): the
  request was never sent (error code ``connection_failed``);
- HTTP 503: the service is draining (or a proxy in front has no instance to send
  it to) and took no new execution;
- HTTP 429 *with* ``Retry-After``: the service (or the caller's quota) is at
  capacity and said when to come back; the SDK waits that long.

Never retried: a connection lost or timed out after the request was sent (the
code may be running), 429 without ``Retry-After``, 502/504 from a proxy (the
request may have reached an instance), and every other status.

Bounds: at most ``retries`` further attempts (default 2, from
``HEXR_SANDBOX_RETRIES``; 0 turns retries off), and at most ``retry_wait_max``
seconds of waiting in all (default 10): a ``Retry-After`` beyond what is left is
not waited for, the error is raised at once. Waits between connection failures
and 503s grow from ``retry_backoff`` (0.25 s) doubling, with jitter (between half
and all of it), so clients that lost the same instance do not come back together.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from typing import Awaitable, Callable, Optional, TypeVar

from ._errors import SandboxError, SandboxOverloadedError, SandboxUnavailableError

RETRIES_ENV = "HEXR_SANDBOX_RETRIES"
DEFAULT_RETRIES = 2
MAX_RETRIES = 10
DEFAULT_RETRY_WAIT_MAX = 10.0
DEFAULT_RETRY_BACKOFF = 0.25

T = TypeVar("T")


def retries_from_env() -> int:
    """``HEXR_SANDBOX_RETRIES`` (read at every call), or the default 2."""
    text = os.environ.get(RETRIES_ENV)
    if text is None or text.strip() == "":
        return DEFAULT_RETRIES
    return check_retries(text, RETRIES_ENV)


def check_retries(value: object, what: str = "retries") -> int:
    try:
        n = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        n = -1
    if isinstance(value, bool) or not 0 <= n <= MAX_RETRIES:
        raise ValueError("{} must be an integer from 0 to {}, not {!r}".format(what, MAX_RETRIES, value))
    return n


def delay_for(exc: SandboxError, attempt: int, backoff: float) -> Optional[float]:
    """Seconds to wait before trying again after ``exc`` (attempt 0 was the first
    try), or None when ``exc`` must not be retried."""
    if isinstance(exc, SandboxOverloadedError):
        return exc.retry_after  # None without Retry-After: not retried
    if isinstance(exc, SandboxUnavailableError) and (exc.code == "connection_failed" or exc.status == 503):
        step = backoff * (2 ** attempt)
        return step * (0.5 + random.random() / 2)
    return None


class Policy:
    def __init__(self, retries: int, wait_max: float, backoff: float) -> None:
        self.retries = retries
        self.wait_max = wait_max
        self.backoff = backoff

    def next_wait(self, exc: SandboxError, attempt: int, waited: float) -> Optional[float]:
        if attempt >= self.retries:
            return None
        delay = delay_for(exc, attempt, self.backoff)
        if delay is None or waited + delay > self.wait_max:
            return None
        return delay

    def run(self, attempt_fn: Callable[[], T]) -> T:
        waited = 0.0
        attempt = 0
        while True:
            try:
                return attempt_fn()
            except SandboxError as exc:
                delay = self.next_wait(exc, attempt, waited)
                if delay is None:
                    exc.attempts = attempt + 1
                    raise
            time.sleep(delay)
            waited += delay
            attempt += 1

    async def run_async(self, attempt_fn: Callable[[], Awaitable[T]]) -> T:
        waited = 0.0
        attempt = 0
        while True:
            try:
                return await attempt_fn()
            except SandboxError as exc:
                delay = self.next_wait(exc, attempt, waited)
                if delay is None:
                    exc.attempts = attempt + 1
                    raise
            await asyncio.sleep(delay)
            waited += delay
            attempt += 1
