"""Streamed executions (internal): the one interpreter of an event-stream reply,
fed by either transport, and the :class:`StreamEvent` it produces.

The service answers ``Accept: text/event-stream`` with ``stdout`` / ``stderr``
chunks (``{"text"}``, or ``{"base64"}`` when the bytes are not UTF-8), ``file``
events (a session's cell also ``display`` events: ``{"data": {mime bundle}}``), then
one ``result`` (the JSON answer's object: an execution's or a cell's, parsed by the
``parse_result`` the caller gives); an ``error`` event
(``{"error": {"code", "message"}}``) when it fails after the stream began is
raised as the :class:`SandboxError` subclass its HTTP status would have given.

Retrying is decided when the stream is opened (a 503 or a 429 before the
program started), never once a 200 stream has begun: by then the code runs.
A service that answers with plain JSON (it does not stream) still gives the
events: its stdout and stderr each as one chunk, its files, then the result.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Dict, Iterator, List, Optional

from . import _http, _sse
from ._errors import SandboxError, SandboxUnavailableError
from ._result import ExecResult, FileInfo

__all__ = ["StreamEvent", "open_sync", "open_async", "events_sync", "events_async"]

EVENT_TYPES = ("stdout", "stderr", "file", "display", "result")

#: Turns a result event's (or a JSON answer's) document into the result object.
ResultParser = Callable[[Any], ExecResult]

# The HTTP status the service gives each error code, for an `error` event,
# which carries no status of its own (unless it has a "status" member).
_STATUS_OF_CODE = {
    "invalid_request": 400,
    "forbidden": 403,
    "method_not_allowed": 405,
    "too_large": 413,
    "unsupported_media_type": 415,
    "not_found": 422,
    "overloaded": 429,
    "quota_exceeded": 429,
    "draining": 503,
    "shutdown": 503,
}


@dataclass(frozen=True)
class StreamEvent:
    """One event of a streamed execution (see :func:`hexr.sandbox.stream`).

    Attributes:
        type: ``"stdout"``, ``"stderr"``, ``"file"``, ``"display"`` (a
            session's cell only) or ``"result"`` (the last one of every stream).
        text: For ``stdout`` / ``stderr``: the chunk as text (bytes that are
            not UTF-8 replaced by U+FFFD); ``""`` otherwise.
        data: The chunk's bytes (``stdout`` / ``stderr``) or the file's bytes
            (``file``); ``b""`` otherwise.
        file: For ``file``: the file's :class:`FileInfo`.
        result: For ``result``: the :class:`ExecResult`, exactly what
            ``exec`` would have returned (a session's :class:`CellResult`).
        bundle: For ``display``: the mime bundle shown (``{"text/plain": ...,
            "image/png": base64...}``); ``None`` otherwise.
    """

    type: str
    text: str = ""
    data: bytes = b""
    file: Optional[FileInfo] = None
    result: Optional[ExecResult] = None
    bundle: Optional[Dict[str, Any]] = None


def _bad(address: _http.Address, detail: str) -> SandboxError:
    return _http._bad_response(address, detail, 200)


def _ended(address: _http.Address) -> SandboxError:
    return SandboxUnavailableError(
        "sandbox service at {} ended the stream before the result".format(address.url),
        status=200,
        code="connection_closed",
    )


def interpret(
    address: _http.Address, raw: _sse.RawEvent, parse_result: ResultParser = ExecResult.from_response
) -> Optional[StreamEvent]:
    """One parsed event as a :class:`StreamEvent`; None for types we do not know."""
    if raw.type not in EVENT_TYPES and raw.type != "error":
        return None
    try:
        doc = json.loads(raw.data)
    except ValueError:
        raise _bad(address, "the {} event's data is not JSON".format(raw.type)) from None
    if raw.type == "error":
        raise _error_event(address, raw.data, doc)
    if raw.type == "result":
        try:
            return StreamEvent("result", result=parse_result(doc))
        except SandboxError as exc:
            raise _bad(address, "result event: " + exc.message) from None
    if raw.type == "file":
        try:
            info, content = FileInfo.from_response(doc, "file")
        except SandboxError as exc:
            raise _bad(address, "file event: " + exc.message) from None
        return StreamEvent("file", data=content, file=info)
    if raw.type == "display":
        data = doc.get("data") if isinstance(doc, dict) else None
        if not isinstance(data, dict):
            raise _bad(address, "the display event has no 'data' object")
        return StreamEvent("display", bundle=data)
    return _output(address, raw.type, doc)


def _output(address: _http.Address, stream: str, doc: Any) -> StreamEvent:
    if isinstance(doc, dict) and isinstance(doc.get("text"), str):
        text = doc["text"]
        return StreamEvent(stream, text=text, data=text.encode("utf-8", "surrogatepass"))
    if isinstance(doc, dict) and isinstance(doc.get("base64"), str):
        try:
            data = base64.b64decode(doc["base64"], validate=True)
        except (binascii.Error, ValueError):
            raise _bad(address, "the {} event's base64 is not valid".format(stream)) from None
        return StreamEvent(stream, text=data.decode("utf-8", "replace"), data=data)
    raise _bad(address, "the {} event has neither 'text' nor 'base64'".format(stream))


def _error_event(address: _http.Address, data: str, doc: Any) -> SandboxError:
    status = doc.get("status") if isinstance(doc, dict) else None
    if not isinstance(status, int) or isinstance(status, bool) or not 400 <= status <= 599:
        err = doc.get("error") if isinstance(doc, dict) else None
        code = err.get("code") if isinstance(err, dict) else None
        status = _STATUS_OF_CODE.get(code, 500) if isinstance(code, str) else 500
    response = _http.Response(status, "", {}, data.encode("utf-8", "replace"))
    return _http.error_from_response(address, response)


class Interpreter:
    """Turns an event-stream body, fed in the pieces it arrived in, into events."""

    def __init__(self, address: _http.Address, parse_result: ResultParser = ExecResult.from_response) -> None:
        self.address = address
        self.parse_result = parse_result
        self.parser = _sse.Parser()
        self.done = False

    def feed(self, chunk: bytes) -> List[StreamEvent]:
        try:
            raws = self.parser.feed(chunk)
        except _sse.EventTooLarge as exc:
            raise _bad(self.address, str(exc)) from None
        events: List[StreamEvent] = []
        for raw in raws:
            event = interpret(self.address, raw, self.parse_result)
            if event is not None:
                events.append(event)
                if event.type == "result":
                    self.done = True
                    break
        return events

    def end(self) -> None:
        if not self.done:
            raise _ended(self.address)


def is_event_stream(headers: Any) -> bool:
    return headers.get("content-type", "").split(";")[0].strip().lower() == "text/event-stream"


def from_json(
    address: _http.Address, response: _http.Response, parse_result: ResultParser = ExecResult.from_response
) -> List[StreamEvent]:
    """The events of a service that answered the whole result as JSON."""
    result = parse_result(_http.decode_json(address, response))
    events = []
    if result.stdout:
        events.append(StreamEvent("stdout", text=result.stdout, data=result.stdout.encode("utf-8", "replace")))
    if result.stderr:
        events.append(StreamEvent("stderr", text=result.stderr, data=result.stderr.encode("utf-8", "replace")))
    for info in result.file_info:
        events.append(StreamEvent("file", data=result.files.get(info.path, b""), file=info))
    events.append(StreamEvent("result", result=result))
    return events


# ---------------------------------------------------------------- transports


def open_sync(address: _http.Address, path: str, body: Any, **kw: Any) -> _http.SyncReply:
    """Open the stream; a status other than 200 is raised as its error."""
    reply = _http.open_sync(address, "POST", path, body, accept="text/event-stream", **kw)
    if reply.status != 200:
        try:
            response = reply.read_all()
        finally:
            reply.close()
        raise _http.error_from_response(address, response)
    return reply


async def open_async(address: _http.Address, path: str, body: Any, **kw: Any) -> _http.AsyncReply:
    reply = await _http.open_async(address, "POST", path, body, accept="text/event-stream", **kw)
    if reply.status != 200:
        try:
            response = await reply.read_all()
        finally:
            await reply.aclose()
        raise _http.error_from_response(address, response)
    return reply


def events_sync(reply: _http.SyncReply, parse_result: ResultParser = ExecResult.from_response) -> Iterator[StreamEvent]:
    """The events of an opened stream, ending with the result."""
    if not is_event_stream(reply.headers):
        yield from from_json(reply.address, reply.read_all(), parse_result)
        return
    interpreter = Interpreter(reply.address, parse_result)
    for chunk in reply.chunks():
        yield from interpreter.feed(chunk)
        if interpreter.done:
            return
    interpreter.end()


async def events_async(
    reply: _http.AsyncReply, parse_result: ResultParser = ExecResult.from_response
) -> AsyncIterator[StreamEvent]:
    if not is_event_stream(reply.headers):
        for event in from_json(reply.address, await reply.read_all(), parse_result):
            yield event
        return
    interpreter = Interpreter(reply.address, parse_result)
    chunks = reply.chunks()
    try:
        async for chunk in chunks:
            for event in interpreter.feed(chunk):
                yield event
            if interpreter.done:
                return
    finally:
        await chunks.aclose()  # type: ignore[attr-defined]
    interpreter.end()
