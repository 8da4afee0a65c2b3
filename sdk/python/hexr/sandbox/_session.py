"""Sessions: a sandbox that stays alive across calls (``/api/v1/sessions``).

:class:`Session` (blocking) and :class:`AsyncSession` (asyncio) are two faces of one
set of calls: :class:`_Calls` builds every request and reads every reply; the two
classes only move them, with the same transport, retry policy and stream interpreter
as :class:`~hexr.sandbox.Client`'s executions. Once the session has ended (closed
here, or ended by the service, which a 410, a 404 or a cell's ``session_ended``
says), every call raises :class:`~hexr.sandbox.SessionEndedError` without asking
the service again.
"""

from __future__ import annotations

import inspect
import re
import threading
import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from . import _files, _http, _request, _stream
from ._cell import CellResult, SessionInfo
from ._client import DEFAULT_TIMEOUT, Client, OutputCallback
from ._errors import SandboxInternalError, SessionEndedError
from ._files import FilesArg
from ._result import FileInfo

__all__ = ["Session", "AsyncSession", "FileEntry"]

SESSIONS_PATH = "/api/v1/sessions"

#: Called with each display's mime bundle as the cell shows it (may be async in AsyncSession).
DisplayCallback = Callable[[Dict[str, Any]], Any]


@dataclass(frozen=True)
class FileEntry:
    """One entry of :meth:`Session.list_files`.

    Attributes:
        path: Relative to the session's working directory.
        type: ``"file"``, ``"dir"`` or ``"other"`` (a symlink, a FIFO...).
        size: Bytes, for a file (0 otherwise).
    """

    path: str
    type: str
    size: int = 0


@dataclass(frozen=True)
class _Call:
    """One request to send and how to read its reply."""

    method: str
    path: str
    body: Any
    read_timeout: float
    accept: str = _request.ACCEPT_JSON
    ok: Tuple[int, ...] = (200,)


class _Calls:
    """The requests of one session and what their replies mean (no I/O here)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.id: Optional[str] = None
        self.info: Optional[SessionInfo] = None
        self.ended: Optional[SessionEndedError] = None
        self.lock = threading.Lock()

    # -- requests

    def create(self, language: str, memory_mb: Any, env_vars: Any, packages: Any, files: Any,
               idle_timeout: Any, lifetime: Any) -> _Call:
        body: Dict[str, Any] = {"language": language}
        for name, value in (("memory_mb", memory_mb), ("env_vars", env_vars), ("packages", packages),
                            ("idle_timeout", idle_timeout), ("lifetime", lifetime)):
            if value is not None:
                body[name] = dict(value) if name == "env_vars" else list(value) if name == "packages" else value
        out = _request.with_files(body, files)
        wait = self.client.connect_timeout + self.client.timeout_margin
        if packages:
            wait += self.client.packages_margin
        return _Call("POST", SESSIONS_PATH, out.body, wait, ok=(200, 201))

    def exec(self, code: Any, timeout: Any, files: Any, return_files: Any, streaming: bool) -> _Call:
        if not isinstance(code, str):
            raise TypeError("code must be a str, not {}".format(type(code).__name__))
        body: Dict[str, Any] = {"code": code}
        if timeout is not DEFAULT_TIMEOUT:
            body["timeout"] = timeout
        if return_files is not None:
            body["return_files"] = [return_files] if isinstance(return_files, str) else list(return_files)
        out = _request.with_files(body, files, streaming)
        return _Call("POST", self._path("/exec"), out.body, self.client._read_timeout(timeout, None),
                     accept=out.accept)

    def get(self) -> _Call:
        return _Call("GET", self._path(""), None, self._short())

    def delete(self) -> _Call:
        return _Call("DELETE", self._path(""), None, self._short(), ok=(200, 204))

    def interrupt(self) -> _Call:
        return _Call("POST", self._path("/interrupt"), None, self._short(), ok=(202,))

    def put_file(self, path: str, data: Any) -> _Call:
        spec = _files.normalise([(_checked_path(path), data)])[0]
        return _Call("PUT", self._path("/files/" + _quote_path(path)), _files.RawBody(spec),
                     self._short(), accept="application/json", ok=(200, 201))

    def get_file(self, path: str) -> _Call:
        return _Call("GET", self._path("/files/" + _quote_path(_checked_path(path))), None,
                     self._short(), accept="*/*")

    def list_files(self, path: str) -> _Call:
        if not isinstance(path, str):
            raise TypeError("path must be a str, not {}".format(type(path).__name__))
        query = "?path=" + urllib.parse.quote(path, safe="/") if path else ""
        return _Call("GET", self._path("/files") + query, None, self._short())

    # -- replies

    def created(self, address: _http.Address, response: _http.Response) -> SessionInfo:
        info = SessionInfo.from_response(_http.decode_json(address, response))
        self.id, self.info = info.id, info
        return info

    def check(self, address: _http.Address, call: _Call, response: _http.Response) -> None:
        """Raise for a reply that is not one of the call's successes."""
        if response.status in call.ok:
            return
        error = _http.error_from_response(address, response)
        if self.id is None:
            raise error                    # the create call: no session to have ended
        # a 404 of a files route is the session's only with its own code: a missing
        # file in a live session is "not_found", whatever its message says
        if response.status == 410 or (response.status == 404 and (
                not call.path.startswith(self._path("/files")) or error.code == "session_not_found")):
            raise self.end(error.message, _reason_of(response), response.status)
        raise error

    def end(self, message: str, reason: Optional[str], status: Optional[int] = 410) -> SessionEndedError:
        """Mark the session ended; the error every later call raises."""
        with self.lock:
            if self.ended is None:
                self.ended = SessionEndedError(message, status=status, reason=reason, session_id=self.id)
            return self.ended

    def guard(self) -> None:
        if self.ended is not None:
            raise self.ended
        if self.id is None:
            raise SandboxInternalError("the session was not created", code="not_created")

    def cell(self, result: CellResult) -> CellResult:
        if result.session is not None:
            self.info = result.session
        if result.status == "session_ended":
            why = result.error.message if result.error is not None else "the session ended"
            reason = (result.session.ended_reason if result.session is not None else None) or (
                result.error.type if result.error is not None else None)
            self.end("session {} has ended: {}".format(self.id, why), reason)
        return result

    def listed(self, address: _http.Address, response: _http.Response) -> List[FileEntry]:
        doc = _http.decode_json(address, response)
        items = doc.get("files") if isinstance(doc, dict) else None
        if not isinstance(items, list):
            raise _http._bad_response(address, "the file list has no 'files' array", response.status)
        out = []
        for item in items:
            if not isinstance(item, dict) or not isinstance(item.get("path"), str):
                raise _http._bad_response(address, "a file list entry has no 'path'", response.status)
            size = item.get("size") or 0
            out.append(FileEntry(item["path"], str(item.get("type") or "file"),
                                 size if isinstance(size, int) else 0))
        return out

    def written(self, address: _http.Address, response: _http.Response, path: str, length: int) -> FileInfo:
        doc = _http.decode_json(address, response) if response.body else {}
        if not isinstance(doc, dict):
            doc = {}
        size = doc.get("size")
        return FileInfo(doc.get("path") if isinstance(doc.get("path"), str) else path,
                        size if isinstance(size, int) and not isinstance(size, bool) else length,
                        doc.get("mime") if isinstance(doc.get("mime"), str) else "application/octet-stream")

    def interrupted(self, address: _http.Address, response: _http.Response) -> bool:
        doc = _http.decode_json(address, response) if response.body else {}
        return isinstance(doc, dict) and doc.get("interrupted") is True

    def info_of(self, address: _http.Address, response: _http.Response) -> SessionInfo:
        info = SessionInfo.from_response(_http.decode_json(address, response))
        self.info = info
        if info.ended:
            self.end("session {} has ended: {}".format(
                self.id, info.ended_message or info.ended_reason or "ended"), info.ended_reason)
        return info

    def _path(self, tail: str) -> str:
        return "{}/{}{}".format(SESSIONS_PATH, urllib.parse.quote(self.id or "", safe=""), tail)

    def _short(self) -> float:
        return self.client.connect_timeout + self.client.timeout_margin


def _checked_path(path: Any) -> str:
    if not isinstance(path, str):
        raise TypeError("path must be a str, not {}".format(type(path).__name__))
    if not path:
        raise ValueError("path is empty")
    return path


def _quote_path(path: str) -> str:
    return urllib.parse.quote(path, safe="/")


def _reason_of(response: _http.Response) -> Optional[str]:
    """The ended reason a 410 may carry (``error.reason``, or ``session.ended_reason``)."""
    import json

    try:
        doc = json.loads(response.body.decode("utf-8", "replace"))
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    err = doc.get("error")
    if isinstance(err, dict) and isinstance(err.get("reason"), str):
        return err["reason"]
    sess = doc.get("session")
    if isinstance(sess, dict) and isinstance(sess.get("ended_reason"), str):
        return sess["ended_reason"]
    # "the session has ended (idle_timeout): ..." as the service words it
    m = re.search(r"\bended \(([a-z_]+)\)", err.get("message", "") if isinstance(err, dict) else "")
    return m.group(1) if m else None


def _client_of(client: Optional[Client], url: Optional[str]) -> Client:
    if client is not None and url is not None:
        raise ValueError("give client or url, not both")
    if client is not None:
        return client
    return Client(url) if url is not None else Client()


def _callback_for(event: _stream.StreamEvent, on_stdout: Any, on_stderr: Any, on_display: Any) -> Tuple[Any, Any]:
    if event.type == "stdout":
        return on_stdout, event.text
    if event.type == "stderr":
        return on_stderr, event.text
    if event.type == "display":
        return on_display, event.bundle
    return None, None


class Session:
    """A sandbox that stays alive across calls, with a live interpreter::

        with hexr.sandbox.Session(language="python") as s:
            s.exec("x = 41")
            assert s.exec("x + 1").value == "42"

    The session is created by the constructor (``POST /api/v1/sessions``) and
    ended by :meth:`close` (or leaving the ``with`` block). It is one sandbox with
    every isolation property an execution has; its memory limit covers the whole
    session; the service ends it after ``idle_timeout`` seconds without a cell and
    after ``lifetime`` seconds in all (within the service's maxima). Sessions do
    not survive a restart of the service.

    Args:
        language: ``"python"`` (default), ``"javascript"`` or ``"bash"``.
        client: The :class:`Client` to use (its address, timeouts and retries);
            or ``url`` for a new one; neither: ``HEXR_SANDBOX_URL``.
        memory_mb, env_vars, packages, files: As for an execution; ``files`` are
            in the working directory before the first cell.
        idle_timeout: Seconds without a cell before the service ends it.
        lifetime: Seconds before the service ends it, busy or not.

    Raises:
        SandboxRequestError: the service refused it (the message names the field).
        SandboxOverloadedError: too many sessions (``retry_after``).
        SandboxUnavailableError, SandboxInternalError: as for an execution.

    A session's calls run one cell at a time in arrival order; one instance may be
    shared by threads (their cells queue on the service).
    """

    def __init__(
        self,
        language: str = "python",
        *,
        client: Optional[Client] = None,
        url: Optional[str] = None,
        memory_mb: Optional[int] = None,
        env_vars: Optional[Dict[str, str]] = None,
        packages: Optional[List[str]] = None,
        files: Optional[FilesArg] = None,
        idle_timeout: Optional[int] = None,
        lifetime: Optional[int] = None,
    ) -> None:
        self._calls = _Calls(_client_of(client, url))
        self._address = self._calls.client._resolve()
        call = self._calls.create(language, memory_mb, env_vars, packages, files, idle_timeout, lifetime)
        response = self._send(call)
        self._calls.created(self._address, response)

    def __repr__(self) -> str:
        info = self._calls.info
        state = "ended" if self._calls.ended is not None else info.state if info else "?"
        return "Session(id={!r}, language={!r}, state={!r})".format(
            self._calls.id, info.language if info else None, state)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def id(self) -> str:
        """The session's id."""
        return self._calls.id or ""

    @property
    def closed(self) -> bool:
        """True once the session has ended (closed here or by the service, as far
        as this object knows)."""
        return self._calls.ended is not None

    def _send(self, call: _Call) -> _http.Response:
        def attempt() -> _http.Response:
            response = _http.request_sync(
                self._address, call.method, call.path, call.body,
                connect_timeout=self._calls.client.connect_timeout, read_timeout=call.read_timeout,
                accept=call.accept,
            )
            if response.status not in call.ok:
                self._calls.check(self._address, call, response)
            return response

        return self._calls.client._policy().run(attempt)

    def exec(
        self,
        code: str,
        *,
        timeout: int = DEFAULT_TIMEOUT,
        files: Optional[FilesArg] = None,
        return_files: Optional[Iterable[str]] = None,
        on_stdout: Optional[OutputCallback] = None,
        on_stderr: Optional[OutputCallback] = None,
        on_display: Optional[DisplayCallback] = None,
    ) -> CellResult:
        """Run one cell in the session and return its :class:`CellResult`.

        Args:
            code: The cell. Python: its last expression is the value; state
                (variables, imports, figures, files) persists. Bash: sourced in
                the session's bash (cwd, variables, functions persist).
                JavaScript: global bindings persist; top-level ``await`` works.
            timeout: Seconds; past it the cell is interrupted (Python:
                ``KeyboardInterrupt``, state kept, ``status`` ``"interrupted"``),
                and if it does not stop the session ends (``status``
                ``"session_ended"``). Left at its default it is not sent (the
                service's default applies).
            files: Files written into the working directory first (as for an
                execution).
            return_files: Globs of files to return besides ``output/``'s.
            on_stdout, on_stderr: Called with each chunk of output as it is
                printed (the cell is then streamed).
            on_display: Called with each display's mime bundle as it is shown.

        Returns:
            The result, whatever the cell did: check ``status`` / ``ok``.

        Raises:
            SessionEndedError: the session has ended (``reason`` says why).
            SandboxOverloadedError: too many cells queued on this session.
            SandboxRequestError, SandboxUnavailableError, SandboxInternalError:
                as for an execution.
        """
        self._calls.guard()
        streaming = on_stdout is not None or on_stderr is not None or on_display is not None
        call = self._calls.exec(code, timeout, files, return_files, streaming)
        if not streaming:
            response = self._send(call)
            return self._calls.cell(CellResult.from_response(_http.decode_json(self._address, response)))
        reply = self._open(call)
        try:
            for event in _stream.events_sync(reply, CellResult.from_response):
                callback, arg = _callback_for(event, on_stdout, on_stderr, on_display)
                if callback is not None:
                    callback(arg)
                if event.result is not None:
                    assert isinstance(event.result, CellResult)
                    return self._calls.cell(event.result)
        finally:
            reply.close()
        raise AssertionError("unreachable: a stream ends with its result or an error")

    def _open(self, call: _Call) -> _http.SyncReply:
        def attempt() -> _http.SyncReply:
            reply = _http.open_sync(
                self._address, call.method, call.path, call.body, accept=call.accept,
                connect_timeout=self._calls.client.connect_timeout, read_timeout=call.read_timeout,
            )
            if reply.status != 200:
                try:
                    response = reply.read_all()
                finally:
                    reply.close()
                self._calls.check(self._address, call, response)
            return reply

        return self._calls.client._policy().run(attempt)

    def write_file(self, path: str, data: Any) -> FileInfo:
        """Write a file into the session's working directory (its directories are
        made). ``data``: ``bytes``, ``str`` (UTF-8) or a :class:`pathlib.Path` of a
        local file (streamed). Returns the path (as the service normalized it)
        and size. Raises :class:`SandboxRequestError` for a path the service
        refuses (the message names it), :class:`SessionEndedError` once ended."""
        self._calls.guard()
        call = self._calls.put_file(path, data)
        return self._calls.written(self._address, self._send(call), path, call.body.length)

    def read_file(self, path: str) -> bytes:
        """The bytes of a file of the session's working directory. Raises
        :class:`SandboxRequestError` (404) when there is no such file."""
        self._calls.guard()
        return self._send(self._calls.get_file(path)).body

    def list_files(self, path: str = "") -> List[FileEntry]:
        """The entries of a directory of the session (``""``: the working
        directory), as :class:`FileEntry` objects."""
        self._calls.guard()
        return self._calls.listed(self._address, self._send(self._calls.list_files(path)))

    def info(self) -> SessionInfo:
        """The session as the service sees it now (state, expiry, cells). An ended
        session's info is still returned while the service remembers it."""
        if self._calls.id is None:
            self._calls.guard()
        return self._calls.info_of(self._address, self._send(self._calls.get()))

    def interrupt(self) -> bool:
        """Interrupt the running cell, as Jupyter's "interrupt kernel" does (Python:
        ``KeyboardInterrupt``; bash and javascript: SIGINT): the session and its
        state stay, the cell's own ``exec`` returns with ``status`` "interrupted"
        and ``error.type`` "cancelled". True when a cell was running. A cell that
        does not stop within 2 s ends the session (``cell_timeout``)."""
        self._calls.guard()
        return self._calls.interrupted(self._address, self._send(self._calls.interrupt()))

    def close(self) -> None:
        """End the session (``DELETE``); nothing of it is left. Idempotent; a
        session the service already ended is not an error here."""
        if self._calls.ended is not None or self._calls.id is None:
            self._calls.end("session {} is closed".format(self._calls.id), "deleted")
            return
        try:
            self._send(self._calls.delete())
        except SessionEndedError:
            pass
        self._calls.end("session {} is closed".format(self._calls.id), "deleted")


class AsyncSession:
    """Asynchronous :class:`Session`: same arguments, results and errors::

        async with hexr.sandbox.AsyncSession(language="python") as s:
            await s.exec("x = 41")
            assert (await s.exec("x + 1")).value == "42"

    The session is created by ``async with`` (or ``await AsyncSession.create(...)``,
    or ``await s.start()``); the constructor sends nothing. The callbacks of
    :meth:`exec` may be coroutine functions.
    """

    def __init__(
        self,
        language: str = "python",
        *,
        client: Optional[Client] = None,
        url: Optional[str] = None,
        memory_mb: Optional[int] = None,
        env_vars: Optional[Dict[str, str]] = None,
        packages: Optional[List[str]] = None,
        files: Optional[FilesArg] = None,
        idle_timeout: Optional[int] = None,
        lifetime: Optional[int] = None,
    ) -> None:
        self._calls = _Calls(_client_of(client, url))
        self._create = (language, memory_mb, env_vars, packages, files, idle_timeout, lifetime)
        self._address: Optional[_http.Address] = None

    @classmethod
    async def create(cls, language: str = "python", **kw: Any) -> "AsyncSession":
        """Make the session and return it started."""
        s = cls(language, **kw)
        await s.start()
        return s

    async def start(self) -> "AsyncSession":
        """Create the session on the service (once)."""
        if self._calls.id is None:
            self._address = self._calls.client._resolve()
            response = await self._send(self._calls.create(*self._create))
            self._calls.created(self._address, response)
        return self

    async def __aenter__(self) -> "AsyncSession":
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        info = self._calls.info
        state = "ended" if self._calls.ended is not None else info.state if info else "not started"
        return "AsyncSession(id={!r}, state={!r})".format(self._calls.id, state)

    @property
    def id(self) -> str:
        return self._calls.id or ""

    @property
    def closed(self) -> bool:
        return self._calls.ended is not None

    async def _send(self, call: _Call) -> _http.Response:
        assert self._address is not None
        address = self._address

        async def attempt() -> _http.Response:
            response = await _http.request_async(
                address, call.method, call.path, call.body,
                connect_timeout=self._calls.client.connect_timeout, read_timeout=call.read_timeout,
                accept=call.accept,
            )
            if response.status not in call.ok:
                self._calls.check(address, call, response)
            return response

        return await self._calls.client._policy().run_async(attempt)

    async def _open(self, call: _Call) -> _http.AsyncReply:
        assert self._address is not None
        address = self._address

        async def attempt() -> _http.AsyncReply:
            reply = await _http.open_async(
                address, call.method, call.path, call.body, accept=call.accept,
                connect_timeout=self._calls.client.connect_timeout, read_timeout=call.read_timeout,
            )
            if reply.status != 200:
                try:
                    response = await reply.read_all()
                finally:
                    await reply.aclose()
                self._calls.check(address, call, response)
            return reply

        return await self._calls.client._policy().run_async(attempt)

    async def exec(
        self,
        code: str,
        *,
        timeout: int = DEFAULT_TIMEOUT,
        files: Optional[FilesArg] = None,
        return_files: Optional[Iterable[str]] = None,
        on_stdout: Optional[OutputCallback] = None,
        on_stderr: Optional[OutputCallback] = None,
        on_display: Optional[DisplayCallback] = None,
    ) -> CellResult:
        """See :meth:`Session.exec`."""
        await self.start()
        self._calls.guard()
        assert self._address is not None
        streaming = on_stdout is not None or on_stderr is not None or on_display is not None
        call = self._calls.exec(code, timeout, files, return_files, streaming)
        if not streaming:
            response = await self._send(call)
            return self._calls.cell(CellResult.from_response(_http.decode_json(self._address, response)))
        reply = await self._open(call)
        events = _stream.events_async(reply, CellResult.from_response)
        try:
            async for event in events:
                callback, arg = _callback_for(event, on_stdout, on_stderr, on_display)
                if callback is not None:
                    returned = callback(arg)
                    if inspect.isawaitable(returned):
                        await returned
                if event.result is not None:
                    assert isinstance(event.result, CellResult)
                    return self._calls.cell(event.result)
        finally:
            await events.aclose()  # type: ignore[attr-defined]
            await reply.aclose()
        raise AssertionError("unreachable: a stream ends with its result or an error")

    async def write_file(self, path: str, data: Any) -> FileInfo:
        """See :meth:`Session.write_file`."""
        await self.start()
        self._calls.guard()
        assert self._address is not None
        call = self._calls.put_file(path, data)
        return self._calls.written(self._address, await self._send(call), path, call.body.length)

    async def read_file(self, path: str) -> bytes:
        """See :meth:`Session.read_file`."""
        await self.start()
        self._calls.guard()
        return (await self._send(self._calls.get_file(path))).body

    async def list_files(self, path: str = "") -> List[FileEntry]:
        """See :meth:`Session.list_files`."""
        await self.start()
        self._calls.guard()
        assert self._address is not None
        return self._calls.listed(self._address, await self._send(self._calls.list_files(path)))

    async def info(self) -> SessionInfo:
        """See :meth:`Session.info`."""
        await self.start()
        assert self._address is not None
        return self._calls.info_of(self._address, await self._send(self._calls.get()))

    async def interrupt(self) -> bool:
        """See :meth:`Session.interrupt`."""
        await self.start()
        self._calls.guard()
        assert self._address is not None
        return self._calls.interrupted(self._address, await self._send(self._calls.interrupt()))

    async def close(self) -> None:
        """See :meth:`Session.close`."""
        if self._calls.ended is not None or self._calls.id is None:
            self._calls.end("session {} is closed".format(self._calls.id), "deleted")
            return
        try:
            await self._send(self._calls.delete())
        except SessionEndedError:
            pass
        self._calls.end("session {} is closed".format(self._calls.id), "deleted")
