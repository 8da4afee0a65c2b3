"""The :class:`Client` behind the module-level ``exec`` / ``exec_async`` / ``is_enabled``."""

from __future__ import annotations

import inspect
import math
import os
from typing import Any, AsyncIterator, Callable, Dict, Iterable, Iterator, List, Optional

from . import _http, _request, _retry, _stream
from ._errors import SandboxInternalError, SandboxUnavailableError
from ._files import FilesArg
from ._result import ExecResult
from ._stream import StreamEvent

#: A callback given each chunk of output as text (it may be async with exec_async).
OutputCallback = Callable[[str], Any]

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
        files: Optional[FilesArg] = None,
        return_files: Optional[Iterable[str]] = None,
        stdin: Optional[str] = None,
        on_stdout: Optional[OutputCallback] = None,
        on_stderr: Optional[OutputCallback] = None,
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
            files: Files written into the working directory before the
                program starts: ``{path: content}`` or ``[(path, content)]``,
                content ``bytes``, ``str`` (UTF-8 text) or a
                :class:`pathlib.Path` naming a local file to upload (streamed
                from disk, multipart). Paths are relative to the working
                directory.
            return_files: Globs (relative to the working directory, ``**``
                across directories) of files to return besides those under
                ``output/``; see ``ExecResult.files``.
            stdin: Text given to the program on its standard input.
            on_stdout: Called with each chunk of standard output as the
                program prints it (the request is then streamed); the result
                still holds the whole (capped) output.
            on_stderr: The same for standard error.

        Returns:
            The :class:`ExecResult`, whatever the program's outcome.

        Raises:
            TypeError: ``code`` is not a ``str``, or ``files`` / ``stdin``
                have the wrong type.
            OSError: a local file given in ``files`` cannot be read.
            SandboxRequestError: the service rejected the request (its message
                names the field), e.g. an unknown language, a limit above the
                service's maximum or a file path it refuses.
            SandboxOverloadedError: the service is at capacity; see
                ``retry_after``.
            SandboxUnavailableError: the service cannot be reached or is
                draining.
            SandboxInternalError: the service failed or replied unexpectedly.

        What is safe to retry (a refused connection, 503, 429 with
        ``Retry-After``) is retried first, within the client's bounds
        (``retries``, ``retry_wait_max``); the error raised then carries
        ``attempts``. A streamed execution is never sent again once the
        service has begun its stream. An exception raised by a callback ends
        the execution (the connection is closed) and is raised from here.
        """
        out = self._build(
            code, language, timeout, env_vars, packages, memory_mb, files, return_files, stdin,
            streaming=on_stdout is not None or on_stderr is not None,
        )
        address = self._resolve()
        read_timeout = self._read_timeout(timeout, packages)
        if out.streaming:
            reply = self._open_sync(address, out, read_timeout)
            try:
                for event in _stream.events_sync(reply):
                    callback = on_stdout if event.type == "stdout" else on_stderr if event.type == "stderr" else None
                    if callback is not None:
                        callback(event.text)
                    if event.result is not None:
                        return event.result
            finally:
                reply.close()
            raise AssertionError("unreachable: a stream ends with its result or an error")

        def attempt() -> ExecResult:
            response = _http.request_sync(
                address,
                "POST",
                EXEC_PATH,
                out.body,
                connect_timeout=self.connect_timeout,
                read_timeout=read_timeout,
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
        files: Optional[FilesArg] = None,
        return_files: Optional[Iterable[str]] = None,
        stdin: Optional[str] = None,
        on_stdout: Optional[OutputCallback] = None,
        on_stderr: Optional[OutputCallback] = None,
    ) -> ExecResult:
        """Asynchronous :meth:`exec`: same arguments, result and exceptions.

        Runs on the event loop with non-blocking sockets (no threads), so many
        executions can be awaited concurrently, e.g. with ``asyncio.gather``.
        Cancelling the task closes the connection to the service. The
        callbacks may be coroutine functions (they are awaited in order).
        """
        out = self._build(
            code, language, timeout, env_vars, packages, memory_mb, files, return_files, stdin,
            streaming=on_stdout is not None or on_stderr is not None,
        )
        address = self._resolve()
        read_timeout = self._read_timeout(timeout, packages)
        if out.streaming:
            reply = await self._open_async(address, out, read_timeout)
            events = _stream.events_async(reply)
            try:
                async for event in events:
                    callback = on_stdout if event.type == "stdout" else on_stderr if event.type == "stderr" else None
                    if callback is not None:
                        returned = callback(event.text)
                        if inspect.isawaitable(returned):
                            await returned
                    if event.result is not None:
                        return event.result
            finally:
                await events.aclose()  # type: ignore[attr-defined]
                await reply.aclose()
            raise AssertionError("unreachable: a stream ends with its result or an error")

        async def attempt() -> ExecResult:
            response = await _http.request_async(
                address,
                "POST",
                EXEC_PATH,
                out.body,
                connect_timeout=self.connect_timeout,
                read_timeout=read_timeout,
            )
            return _exec_result(address, response)

        return await self._policy().run_async(attempt)

    # ---------------------------------------------------------------- stream

    def stream(
        self,
        code: str,
        *,
        language: str = "python",
        timeout: int = DEFAULT_TIMEOUT,
        env_vars: Optional[Dict[str, str]] = None,
        packages: Optional[List[str]] = None,
        memory_mb: Optional[int] = None,
        files: Optional[FilesArg] = None,
        return_files: Optional[Iterable[str]] = None,
        stdin: Optional[str] = None,
    ) -> AsyncIterator[StreamEvent]:
        """Run ``code`` and iterate over its events as they happen::

            async for event in client.stream("print(1)"):
                if event.type == "stdout":
                    print(event.text, end="")
                elif event.type == "result":
                    result = event.result

        Arguments as for :meth:`exec` (without the callbacks). Events:
        ``stdout`` / ``stderr`` chunks (``.text``, ``.data``), ``file``
        (``.file``, ``.data``), and last ``result`` (``.result``, the
        :class:`ExecResult`). Leaving the loop early closes the connection,
        which ends the execution. Errors as for :meth:`exec`, raised from
        the iteration (an error the service reports in the stream too).
        """
        out = self._build(
            code, language, timeout, env_vars, packages, memory_mb, files, return_files, stdin,
            streaming=True,
        )
        return self._stream_async(out, self._read_timeout(timeout, packages))

    async def _stream_async(self, out: _request.Outgoing, read_timeout: float) -> AsyncIterator[StreamEvent]:
        address = self._resolve()
        reply = await self._open_async(address, out, read_timeout)
        events = _stream.events_async(reply)
        try:
            async for event in events:
                yield event
        finally:
            await events.aclose()  # type: ignore[attr-defined]
            await reply.aclose()

    def stream_sync(
        self,
        code: str,
        *,
        language: str = "python",
        timeout: int = DEFAULT_TIMEOUT,
        env_vars: Optional[Dict[str, str]] = None,
        packages: Optional[List[str]] = None,
        memory_mb: Optional[int] = None,
        files: Optional[FilesArg] = None,
        return_files: Optional[Iterable[str]] = None,
        stdin: Optional[str] = None,
    ) -> Iterator[StreamEvent]:
        """Synchronous :meth:`stream`: a generator of the same events.
        Closing it (or leaving a ``for`` loop over it) ends the execution."""
        out = self._build(
            code, language, timeout, env_vars, packages, memory_mb, files, return_files, stdin,
            streaming=True,
        )
        return self._stream_sync(out, self._read_timeout(timeout, packages))

    def _stream_sync(self, out: _request.Outgoing, read_timeout: float) -> Iterator[StreamEvent]:
        address = self._resolve()
        reply = self._open_sync(address, out, read_timeout)
        try:
            yield from _stream.events_sync(reply)
        finally:
            reply.close()

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

    def _build(
        self, code: Any, language: Any, timeout: Any, env_vars: Any, packages: Any, memory_mb: Any,
        files: Any, return_files: Any, stdin: Any, *, streaming: bool,
    ) -> _request.Outgoing:
        return _request.build(
            code, language=language, timeout=timeout, send_timeout=timeout is not DEFAULT_TIMEOUT,
            env_vars=env_vars, packages=packages, memory_mb=memory_mb, files=files,
            return_files=return_files, stdin=stdin, streaming=streaming,
        )

    def _open_sync(self, address: _http.Address, out: _request.Outgoing, read_timeout: float) -> _http.SyncReply:
        """Open a stream, retrying what is safe (nothing can have run before a 200)."""
        return self._policy().run(lambda: _stream.open_sync(
            address, EXEC_PATH, out.body, connect_timeout=self.connect_timeout, read_timeout=read_timeout,
        ))

    async def _open_async(self, address: _http.Address, out: _request.Outgoing, read_timeout: float) -> _http.AsyncReply:
        return await self._policy().run_async(lambda: _stream.open_async(
            address, EXEC_PATH, out.body, connect_timeout=self.connect_timeout, read_timeout=read_timeout,
        ))

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


def _exec_result(address: _http.Address, response: _http.Response) -> ExecResult:
    if response.status != 200:
        raise _http.error_from_response(address, response)
    return ExecResult.from_response(_http.decode_json(address, response))
