"""The SDK's bounded retries of what is safe to retry (hexr/sandbox/_retry.py).

Retried: a connection that could not be made (the request was never sent), 503
(draining, or a proxy with no instance), 429 with Retry-After. Not retried: a
connection lost after the request was sent, 429 without Retry-After, 500, 502.
Bounded by the number of attempts and by the total wait.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, List

import pytest

from test_sdk_unit import FakeServer, Reply, Seen, error_doc, free_port, result_doc

import hexr.sandbox
from hexr.sandbox import (
    Client,
    ExecResult,
    SandboxInternalError,
    SandboxOverloadedError,
    SandboxUnavailableError,
)
from hexr.sandbox import _http

RETRIES_UNDER_TEST = True  # conftest.py: leave HEXR_SANDBOX_RETRIES alone


@pytest.fixture
def fake() -> Any:
    server = FakeServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _default_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HEXR_SANDBOX_RETRIES", raising=False)
    monkeypatch.delenv("HEXR_SANDBOX_URL", raising=False)


def call_sync(client: Client, code: str) -> ExecResult:
    return client.exec(code)


def call_async(client: Client, code: str) -> ExecResult:
    return asyncio.run(client.exec_async(code))


BOTH = pytest.mark.parametrize("call", [call_sync, call_async], ids=["sync", "async"])


def sequence(fake: FakeServer, replies: List[Reply]) -> None:
    """Answer the n-th request with replies[n] (the last one from then on)."""
    lock = threading.Lock()
    count = [0]

    def responder(req: Seen) -> Reply:
        with lock:
            i = min(count[0], len(replies) - 1)
            count[0] += 1
        return replies[i]

    fake.responder = responder


def fast(url: str, **kw: Any) -> Client:
    kw.setdefault("retry_backoff", 0.01)
    return Client(url, **kw)


DRAINING = Reply(status=503, body=error_doc("draining", "the service is shutting down"))
OK = Reply(body=result_doc(stdout="ran\n"))


@BOTH
def test_503_draining_is_retried_until_it_runs(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    sequence(fake, [DRAINING, DRAINING, OK])
    result = call(fast(fake.url, retries=2), "x")
    assert result.stdout == "ran\n"
    assert len(fake.requests) == 3


@BOTH
def test_a_proxy_503_without_our_body_is_retried(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    sequence(fake, [Reply(status=503, body="<html>No server is available</html>",
                          headers={"Content-Type": "text/html"}), OK])
    assert call(fast(fake.url), "x").stdout == "ran\n"
    assert len(fake.requests) == 2


@BOTH
def test_429_with_retry_after_is_waited_for(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    sequence(fake, [Reply(status=429, headers={"Retry-After": "0.05"}, body=error_doc("overloaded", "busy")), OK])
    assert call(fast(fake.url), "x").stdout == "ran\n"
    assert len(fake.requests) == 2


@BOTH
def test_429_without_retry_after_is_not_retried(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    sequence(fake, [Reply(status=429, body=error_doc("overloaded", "busy")), OK])
    with pytest.raises(SandboxOverloadedError) as info:
        call(fast(fake.url), "x")
    assert len(fake.requests) == 1 and info.value.attempts == 1


@BOTH
def test_retry_after_beyond_the_wait_budget_is_raised_at_once(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    sequence(fake, [Reply(status=429, headers={"Retry-After": "30"}, body=error_doc("overloaded", "busy")), OK])
    with pytest.raises(SandboxOverloadedError) as info:
        call(fast(fake.url, retry_wait_max=1.0), "x")
    assert info.value.retry_after == 30.0
    assert len(fake.requests) == 1 and info.value.attempts == 1


@pytest.mark.parametrize("reply,cls", [
    (Reply(status=500, body=error_doc("sandbox_setup_failed", "no cgroup")), SandboxInternalError),
    (Reply(status=502, body="<html>Bad Gateway</html>", headers={"Content-Type": "text/html"}),
     SandboxUnavailableError),
    (Reply(status=504, body="<html>Gateway Timeout</html>", headers={"Content-Type": "text/html"}),
     SandboxUnavailableError),
    # the request was sent and the connection closed before a reply: it may have run
    (Reply(raw=b""), SandboxUnavailableError),
], ids=["500", "502", "504", "closed-after-send"])
@BOTH
def test_what_may_have_run_is_not_retried(fake: FakeServer, call: Callable[..., ExecResult], reply: Reply,
                                          cls: type) -> None:
    sequence(fake, [reply, OK])
    with pytest.raises(cls) as info:
        call(fast(fake.url, retries=3), "x")
    assert len(fake.requests) == 1 and info.value.attempts == 1


@BOTH
def test_attempts_are_bounded(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    sequence(fake, [DRAINING])
    with pytest.raises(SandboxUnavailableError) as info:
        call(fast(fake.url, retries=3), "x")
    assert len(fake.requests) == 4 and info.value.attempts == 4
    assert info.value.status == 503 and info.value.code == "draining"


@BOTH
def test_refused_connection_is_retried_then_raised(call: Callable[..., ExecResult]) -> None:
    url = "http://127.0.0.1:{}".format(free_port())
    with pytest.raises(SandboxUnavailableError) as info:
        call(fast(url, retries=2), "x")
    assert info.value.code == "connection_failed" and info.value.attempts == 3


@BOTH
def test_refused_before_sending_then_served(fake: FakeServer, call: Callable[..., ExecResult],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The first attempt's connection is refused (the real error of a closed port);
    the second reaches the service."""
    refused = "http://127.0.0.1:{}".format(free_port())
    real_sync, real_async = _http.request_sync, _http.request_async
    calls = [0]

    def target(address: Any) -> Any:
        calls[0] += 1
        return _http.parse_url(refused) if calls[0] == 1 else address

    monkeypatch.setattr(_http, "request_sync", lambda a, *p, **k: real_sync(target(a), *p, **k))

    async def req_async(a: Any, *p: Any, **k: Any) -> Any:
        return await real_async(target(a), *p, **k)

    monkeypatch.setattr(_http, "request_async", req_async)
    assert call(fast(fake.url), "x").stdout == "x"
    assert calls[0] == 2 and len(fake.requests) == 1


def test_module_level_exec_retries_by_default(fake: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEXR_SANDBOX_URL", fake.url)
    sequence(fake, [DRAINING, OK])
    assert hexr.sandbox.exec("x").stdout == "ran\n"
    assert len(fake.requests) == 2


def test_env_turns_retries_off_and_is_checked(fake: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    sequence(fake, [DRAINING, OK])
    monkeypatch.setenv("HEXR_SANDBOX_RETRIES", "0")
    with pytest.raises(SandboxUnavailableError):
        Client(fake.url).exec("x")
    assert len(fake.requests) == 1
    monkeypatch.setenv("HEXR_SANDBOX_RETRIES", "many")
    with pytest.raises(ValueError, match="HEXR_SANDBOX_RETRIES must be an integer from 0 to 10"):
        Client(fake.url).exec("x")
    with pytest.raises(ValueError, match="retries must be an integer from 0 to 10"):
        Client(fake.url, retries=11)
