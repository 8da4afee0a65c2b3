"""The :class:`Client` behind the module-level ``exec`` / ``exec_async`` / ``is_enabled``."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from typing import Any, Dict, List, Optional

from . import _http, _retry
from ._errors import SandboxInternalError, SandboxUnavailableError
from ._result import ExecResult

__all__ = ["Client", "DEFAULT_URL", "URL_ENV", "DEFAULT_TIMEOUT"]

#: Environment variable naming the service address, read at every call.
URL_ENV = "HEXR_SANDBOX_URL"

#: Address used when neither ``Client(url=...)`` nor ``HEXR_SANDBOX_URL`` is set.
DEFAULT_URL = "http://127.0.0.1:8080"

EXEC_PATH = "/api/v1/exec"
HEALTH_PATH = "/health"


class _DefaultTimeout(int):
    """The default ``timeout`` (30 s).

    It behaves as the int 30, but the SDK can tell it apart from an explicit
    ``timeout=30``: the default is not sent, so the service applies its own
    default (30 s by contract) and a service configured with a smaller
    ``MAX_EXECUTION_TIME`` does not reject calls that never asked for 30 s.
    """

    __slots__ = ()


#: Default execution timeout in seconds (shown as ``30`` in signatures).
DEFAULT_TIMEOUT: int = _DefaultTimeout(30)


class Client:
    """A connection profile for one sandbox service.

    Args:
        url: Service address: ``http://host:port``, ``https://host:port`` or
            ``unix:/path/to.sock``. ``None`` (the default) reads
            ``HEXR_SANDBOX_URL`` at every call and falls back to
            ``http://127.0.0.1:8080``.
        timeout_margin: Seconds added to an execution's ``timeout`` to get how
            long to wait for the reply (queueing, start-up, teardown).
        packages_margin: Further seconds of waiting when ``packages`` is not
            empty (the service may install them first).
        connect_timeout: Seconds allowed to establish the connection.
        health_timeout: Default time limit of :meth:`is_enabled`, in seconds.
        retries: Further attempts of an execution the service certainly did
            not run: the connection could not be made (the request was never
            sent), 503 (draining, or no instance behind a proxy), 429 with
            ``Retry-After`` (waited for). ``None`` (the default) reads
            ``HEXR_SANDBOX_RETRIES`` at every call (default 2); 0 turns
            retries off. Never retried: a connection lost or timed out after
            the request was sent (the code may be running), 429 without
            ``Retry-After``, any other status.
        retry_wait_max: Seconds of waiting between attempts, in all, at most
            (default 10); a ``Retry-After`` beyond what is left is not waited
            for: the error is raised at once.
        retry_backoff: First wait after a refused connection or a 503, in
            seconds, doubling per attempt, with jitter (half to all of it).

    Raises:
        ValueError: ``url`` is given but is not a valid address, or
            ``retries`` is not an integer from 0 to 10.

    The client holds no connection between calls (each request uses its own),
    so one instance may be shared by threads and event loops.
    """

    def __init__(
        self,
        url: Optional[str] = None,
        *,
        timeout_margin: float = 30.0,
        packages_margin: float = 60.0,
        connect_timeout: float = 10.0,
        health_timeout: float = 2.0,
        retries: Optional[int] = None,
        retry_wait_max: float = _retry.DEFAULT_RETRY_WAIT_MAX,
        retry_backoff: float = _retry.DEFAULT_RETRY_BACKOFF,
    ) -> None:
        self._address: Optional[_http.Address] = None if url is None else _http.parse_url(url)
        self.retries: Optional[int] = None if retries is None else _retry.check_retries(retries)
        self.retry_wait_max = float(retry_wait_max)
        self.retry_backoff = float(retry_backoff)
        self.timeout_margin = float(timeout_margin)
        self.packages_margin = float(packages_margin)
        self.connect_timeout = float(connect_timeout)
        self.health_timeout = float(health_timeout)

    def __repr__(self) -> str:
        shown = self._address.url if self._address is not None else "${} or {}".format(URL_ENV, DEFAULT_URL)
        return "Client(url={!r})".format(shown)

    @property
    def url(self) -> str:
        """The address the next call will use (explicit, from the environment, or default)."""
        if self._address is not None:
            return self._address.url
        return os.environ.get(URL_ENV) or DEFAULT_URL

    def _resolve(self) -> _http.Address:
        if self._address is not None:
            return self._address
        url = self.url
        try:
            return _http.parse_url(url)
        except ValueError as exc:
            raise SandboxUnavailableError(
                "{} is not a valid sandbox address: {}".format(URL_ENV, exc),
                code="invalid_url",
            ) from exc

    # ------------------------------------------------------------------ exec

    def exec(
        self,
        code: str,
        *,
        language: str = "python",
        timeout: int = DEFAULT_TIMEOUT,
        env_vars: Optional[Dict[str, str]] = None,
        packages: Optional[List[str]] = None,
        memory_mb: Optional[int] = None,
    ) -> ExecResult:
        """Run ``code`` in a fresh sandbox and return its result.

        Args:
            code: Source code (or shell script) to run.
            language: ``"python"`` (default), ``"javascript"`` (aliases ``"js"``,
                ``"node"``) or ``"bash"`` (aliases ``"shell"``, ``"sh"``).
            timeout: Wall-clock limit in seconds; the program is killed after
                it (``timed_out=True``, exit code 124). Left at its default it
                is not sent and the service's default (30 s) applies.
            env_vars: Environment variables to set inside the sandbox.
            packages: Python packages the program needs; already-available
                ones cost nothing, others are installed by the service if it can.
            memory_mb: Memory limit in MiB (service default when omitted).

        Returns:
            The :class:`ExecResult`, whatever the program's outcome.

        Raises:
            TypeError: ``code`` is not a ``str``.
            SandboxRequestError: the service rejected the request (its message
                names the field), e.g. an unknown language or a limit above the
                service's maximum.
            SandboxOverloadedError: the service is at capacity; see
                ``retry_after``.
            SandboxUnavailableError: the service cannot be reached or is
                draining.
            SandboxInternalError: the service failed or replied unexpectedly.

        What is safe to retry (a refused connection, 503, 429 with
        ``Retry-After``) is retried first, within the client's bounds
        (``retries``, ``retry_wait_max``); the error raised then carries
        ``attempts``.
        """
        body = _encode_request(code, language, timeout, env_vars, packages, memory_mb)
        address = self._resolve()

        def attempt() -> ExecResult:
            response = _http.request_sync(
                address,
                "POST",
                EXEC_PATH,
                body,
                connect_timeout=self.connect_timeout,
                read_timeout=self._read_timeout(timeout, packages),
            )
            return _exec_result(address, response)

        return self._policy().run(attempt)

    async def exec_async(
        self,
        code: str,
        *,
        language: str = "python",
        timeout: int = DEFAULT_TIMEOUT,
        env_vars: Optional[Dict[str, str]] = None,
        packages: Optional[List[str]] = None,
        memory_mb: Optional[int] = None,
    ) -> ExecResult:
        """Asynchronous :meth:`exec`: same arguments, result and exceptions.

        Runs on the event loop with non-blocking sockets (no threads), so many
        executions can be awaited concurrently, e.g. with ``asyncio.gather``.
        Cancelling the task closes the connection to the service.
        """
        body = _encode_request(code, language, timeout, env_vars, packages, memory_mb)
        address = self._resolve()

        async def attempt() -> ExecResult:
            response = await _http.request_async(
                address,
                "POST",
                EXEC_PATH,
                body,
                connect_timeout=self.connect_timeout,
                read_timeout=self._read_timeout(timeout, packages),
            )
            return _exec_result(address, response)

        return await self._policy().run_async(attempt)

    # ---------------------------------------------------------------- health

    def is_enabled(self, *, timeout: Optional[float] = None) -> bool:
        """Return True when the service answers ``GET /health`` with 200.

        Args:
            timeout: Seconds to wait for the answer (default
                ``health_timeout``, 2 s).

        Never raises: an invalid address, a refused connection, a slow or
        unhealthy (503) service all give ``False``.
        """
        limit = self.health_timeout if timeout is None else timeout
        try:
            address = self._resolve()
            response = _http.request_sync(
                address, "GET", HEALTH_PATH, None, connect_timeout=limit, read_timeout=limit
            )
            return response.status == 200
        except Exception:
            return False

    async def is_enabled_async(self, *, timeout: Optional[float] = None) -> bool:
        """Asynchronous :meth:`is_enabled`. Never raises."""
        limit = self.health_timeout if timeout is None else timeout
        try:
            address = self._resolve()
            response = await _http.request_async(
                address, "GET", HEALTH_PATH, None, connect_timeout=limit, read_timeout=limit
            )
            return response.status == 200
        except Exception:
            return False

    def health(self) -> Dict[str, Any]:
        """Return the service's ``/health`` document (status, backend, languages...).

        Raises:
            SandboxError: as for :meth:`exec` (a subclass); a 503 raises
                :class:`SandboxUnavailableError`.
        """
        address = self._resolve()
        response = _http.request_sync(
            address,
            "GET",
            HEALTH_PATH,
            None,
            connect_timeout=self.connect_timeout,
            read_timeout=self.connect_timeout + self.health_timeout,
        )
        if response.status != 200:
            raise _http.error_from_response(address, response)
        doc = _http.decode_json(address, response)
        if not isinstance(doc, dict):
            raise SandboxInternalError(
                "unexpected reply from the sandbox service at {}: /health is not a JSON object".format(
                    address.url
                ),
                status=response.status,
                code="bad_response",
            )
        return doc

    # --------------------------------------------------------------- helpers

    def _policy(self) -> _retry.Policy:
        retries = self.retries if self.retries is not None else _retry.retries_from_env()
        return _retry.Policy(retries, self.retry_wait_max, self.retry_backoff)

    def _read_timeout(self, timeout: Any, packages: Any) -> float:
        """How long to wait for an execution's reply."""
        try:
            seconds = float(timeout)
        except (TypeError, ValueError):
            seconds = float(DEFAULT_TIMEOUT)
        if math.isnan(seconds) or seconds < 0:
            seconds = float(DEFAULT_TIMEOUT)
        if math.isinf(seconds):
            seconds = 24 * 3600.0
        seconds += self.timeout_margin
        if packages:
            seconds += self.packages_margin
        return seconds


def _encode_request(
    code: Any,
    language: Any,
    timeout: Any,
    env_vars: Any,
    packages: Any,
    memory_mb: Any,
) -> bytes:
    """Build the JSON body of ``POST /api/v1/exec``.

    Only ``code`` is checked here; everything else is the service's to
    validate (its 400 names the field and the rule). Parameters left at their
    defaults are omitted, except ``code`` and ``language``.
    """
    if not isinstance(code, str):
        raise TypeError("code must be a str, not {}".format(type(code).__name__))
    body: Dict[str, Any] = {"code": code, "language": language}
    if timeout is not DEFAULT_TIMEOUT:
        body["timeout"] = timeout
    if memory_mb is not None:
        body["memory_mb"] = memory_mb
    if env_vars is not None:
        body["env_vars"] = dict(env_vars) if isinstance(env_vars, Mapping) else env_vars
    if packages is not None:
        if isinstance(packages, Iterable) and not isinstance(packages, (str, bytes, Mapping)):
            packages = list(packages)
        body["packages"] = packages
    try:
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    except TypeError as exc:
        raise TypeError("the request cannot be encoded as JSON: {}".format(exc)) from exc
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates: send them escaped and let the service judge them.
        return json.dumps(body, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def _exec_result(address: _http.Address, response: _http.Response) -> ExecResult:
    if response.status != 200:
        raise _http.error_from_response(address, response)
    return ExecResult.from_response(_http.decode_json(address, response))
