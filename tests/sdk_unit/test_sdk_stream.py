"""Streamed executions in the Python SDK against a scripted service (issue 14).

The SSE parser (lines split across reads, CR/LF/CRLF, comments as heartbeats,
multi-line data), the events (text and base64 chunks, files, the result, an
error event mapped to the SandboxError its HTTP status would give),
``on_stdout`` / ``on_stderr``, ``stream()`` / ``stream_sync()``, the JSON
fallback of a service that does not stream, and retries: a stream is opened
again after a 503, never once the service began it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from typing import Any, Callable, Dict, Iterator, List, Union

import pytest

from test_sdk_unit import BOTH, FakeServer, Reply, cli, error_doc, result_doc

import hexr.sandbox
from hexr.sandbox import (
    Client,
    ExecResult,
    SandboxInternalError,
    SandboxOverloadedError,
    SandboxRequestError,
    SandboxUnavailableError,
    StreamEvent,
)
from hexr.sandbox import _sse

RETRIES_UNDER_TEST = True  # conftest.py: these tests set retries on each Client
WAIT = 5.0  # how long a scripted server waits for the client to react


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    server = FakeServer()
    try:
        yield server
    finally:
        server.stop()


def sse(event: str, data: Any) -> bytes:
    return "event: {}\ndata: {}\n\n".format(event, json.dumps(data)).encode()


Piece = Union[bytes, Callable[[Any], None]]


def stream_reply(pieces: List[Piece], *, content_type: str = "text/event-stream", framing: str = "close") -> Reply:
    """A 200 reply written piece by piece (a callable piece is run in between, given the handler)."""

    def script(handler: Any) -> None:
        head = "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nCache-Control: no-cache\r\nConnection: close\r\n".format(
            content_type)
        if framing == "chunked":
            head += "Transfer-Encoding: chunked\r\n"
        handler.wfile.write(head.encode() + b"\r\n")
        handler.wfile.flush()
        for piece in pieces:
            if callable(piece):
                piece(handler)
                continue
            data = b"%x\r\n%s\r\n" % (len(piece), piece) if framing == "chunked" else piece
            handler.wfile.write(data)
            handler.wfile.flush()
        if framing == "chunked":
            handler.wfile.write(b"0\r\n\r\n")
            handler.wfile.flush()

    return Reply(script=script)


RESULT = result_doc(stdout="one\ntwo\n", stderr="warn\n")
EVENTS = [
    sse("stdout", {"text": "one\n"}),
    b": keep-alive\n\n",
    sse("stderr", {"text": "warn\n"}),
    sse("stdout", {"text": "two\n"}),
    sse("result", RESULT),
]


def collect(call: Callable[..., ExecResult], client: Client, code: str = "x", **kw: Any) -> Any:
    got: List[tuple] = []
    result = call(client, code, on_stdout=lambda t: got.append(("out", t)),
                  on_stderr=lambda t: got.append(("err", t)), **kw)
    return result, got


# ---------------------------------------------------------------------------
# Parser


def parse_all(data: bytes, step: int) -> tuple:
    parser = _sse.Parser()
    events: List[_sse.RawEvent] = []
    for i in range(0, len(data), step):
        events += parser.feed(data[i:i + step])
    return events, parser.comments


STREAM = (b": hello\r\n\r\nevent: stdout\r\ndata: {\"text\": \"a\"}\r\n\r\n"
          b"event: multi\rdata: one\rdata:two\r\rdata: plain\n\n"
          b"event: no-data\n\n: keep-alive\n\nevent: stderr\nid: 7\nretry: 10\ndata: {\"text\": \"\xc3\xa9\"}\n\n")
PARSED = [
    _sse.RawEvent("stdout", '{"text": "a"}'),
    _sse.RawEvent("multi", "one\ntwo"),
    _sse.RawEvent("message", "plain"),
    _sse.RawEvent("stderr", '{"text": "\u00e9"}'),
]


@pytest.mark.parametrize("step", [1, 2, 3, 5, 7, 64, 100000])
def test_parser_gives_the_same_events_whatever_the_reads(step: int) -> None:
    assert parse_all(STREAM, step) == (PARSED, 2)


def test_parser_holds_a_cr_that_may_start_a_crlf() -> None:
    parser = _sse.Parser()
    assert parser.feed(b"data: x\r") == []
    assert parser.feed(b"\n") == []  # the LF completes the CRLF: not an empty line
    assert parser.feed(b"\r\n") == [_sse.RawEvent("message", "x")]


def test_parser_bounds_an_event() -> None:
    parser = _sse.Parser(max_event_bytes=100)
    parser.feed(b"data: " + b"x" * 50 + b"\n")
    with pytest.raises(_sse.EventTooLarge):
        parser.feed(b"data: " + b"x" * 60)


def test_large_event_in_many_reads() -> None:
    payload = "y" * (3 << 20)
    data = ("event: result\ndata: " + payload + "\n\n").encode()
    events, _ = parse_all(data, 65536)
    assert events == [_sse.RawEvent("result", payload)]


# ---------------------------------------------------------------------------
# Callbacks


@BOTH
def test_callbacks_get_the_chunks_in_order(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    fake.reply(stream_reply(EVENTS))
    result, got = collect(call, Client(fake.url))
    assert got == [("out", "one\n"), ("err", "warn\n"), ("out", "two\n")]
    assert result == ExecResult.from_response(RESULT)
    seen = fake.requests[-1]
    assert seen.headers["accept"] == "text/event-stream"
    assert seen.json() == {"code": "x", "language": "python"}


@BOTH
def test_only_one_callback_is_enough(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    fake.reply(stream_reply(EVENTS))
    got: List[str] = []
    result = call(Client(fake.url), "x", on_stderr=got.append)
    assert got == ["warn\n"] and result.stdout == "one\ntwo\n"


@BOTH
def test_chunks_arrive_before_the_program_ends(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    """The service sends the result only once the client has seen the first chunk."""
    seen_first = threading.Event()
    waited = []

    def wait_for_client(handler: Any) -> None:
        waited.append(seen_first.wait(WAIT))

    fake.reply(stream_reply([sse("stdout", {"text": "early\n"}), wait_for_client, sse("result", RESULT)]))
    result = call(Client(fake.url), "x", on_stdout=lambda t: seen_first.set())
    assert waited == [True] and result.exit_code == 0


def test_async_callbacks_are_awaited(fake: FakeServer) -> None:
    fake.reply(stream_reply(EVENTS))
    got: List[str] = []

    async def slow(text: str) -> None:
        await asyncio.sleep(0.01)
        got.append(text)

    asyncio.run(Client(fake.url).exec_async("x", on_stdout=slow))
    assert got == ["one\n", "two\n"]


@BOTH
def test_base64_chunks_are_decoded(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    raw = b"caf\xe9 \xff\n"
    fake.reply(stream_reply([sse("stdout", {"base64": base64.b64encode(raw).decode()}), sse("result", RESULT)]))
    result, got = collect(call, Client(fake.url))
    assert got == [("out", raw.decode("utf-8", "replace"))]


@BOTH
def test_chunked_framing(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    blob = b"".join(EVENTS)
    pieces: List[Piece] = [blob[i:i + 9] for i in range(0, len(blob), 9)]
    fake.reply(stream_reply(pieces, framing="chunked"))
    result, got = collect(call, Client(fake.url))
    assert got == [("out", "one\n"), ("err", "warn\n"), ("out", "two\n")] and result.stdout == "one\ntwo\n"


@BOTH
def test_a_callback_that_raises_ends_the_execution(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    closed = []

    def wait_for_close(handler: Any) -> None:
        handler.connection.settimeout(WAIT)
        closed.append(handler.connection.recv(1) == b"")

    fake.reply(stream_reply([sse("stdout", {"text": "a"}), wait_for_close]))

    def boom(text: str) -> None:
        raise KeyError("stop")

    with pytest.raises(KeyError):
        call(Client(fake.url), "x", on_stdout=boom)
    fake.stop()  # joins the handler
    assert closed == [True]


# ---------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize("doc,cls,status", [
    (error_doc("draining", "shutting down"), SandboxUnavailableError, 503),
    (error_doc("too_large", "output too large"), SandboxRequestError, 413),
    (error_doc("internal", "the sandbox failed"), SandboxInternalError, 500),
    (error_doc("whatever", "new code"), SandboxInternalError, 500),
    (dict(error_doc("x", "explicit status"), status=429), SandboxOverloadedError, 429),
], ids=["draining", "too_large", "internal", "unknown", "explicit-status"])
@BOTH
def test_error_event_is_the_status_error(fake: FakeServer, call: Callable[..., ExecResult],
                                         doc: Dict[str, Any], cls: type, status: int) -> None:
    fake.reply(stream_reply([sse("stdout", {"text": "a"}), sse("error", doc)]))
    with pytest.raises(cls) as info:
        collect(call, Client(fake.url, retries=2, retry_backoff=0.01))
    assert info.value.status == status
    assert (info.value.code, info.value.message) == (doc["error"]["code"], doc["error"]["message"])
    assert len(fake.requests) == 1 and info.value.attempts == 1


@BOTH
def test_error_event_before_any_output_is_not_retried_either(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    fake.reply(stream_reply([sse("error", error_doc("draining", "shutting down"))]))
    with pytest.raises(SandboxUnavailableError):
        collect(call, Client(fake.url, retries=2, retry_backoff=0.01))
    assert len(fake.requests) == 1


@BOTH
def test_a_503_before_the_stream_is_retried(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    replies = [Reply(status=503, body=error_doc("draining", "d")), stream_reply(EVENTS)]
    fake.responder = lambda req: replies.pop(0)
    result, got = collect(call, Client(fake.url, retries=2, retry_backoff=0.01))
    assert len(fake.requests) == 2 and result.stdout == "one\ntwo\n" and len(got) == 3


@BOTH
def test_refusal_before_the_stream_is_the_status_error(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    fake.reply(Reply(status=400, body=error_doc("invalid_request", "files[0].path: must be relative")))
    with pytest.raises(SandboxRequestError, match=r"files\[0\]\.path"):
        collect(call, Client(fake.url, retries=0))


@pytest.mark.parametrize("pieces", [
    [sse("stdout", {"text": "a"})],
    [sse("stdout", {"text": "a"}), b"event: result\ndata: {\"exit"],
], ids=["no-result", "cut-result"])
@BOTH
def test_a_stream_that_ends_without_its_result(fake: FakeServer, call: Callable[..., ExecResult],
                                               pieces: List[Piece]) -> None:
    fake.reply(stream_reply(pieces))
    with pytest.raises(SandboxUnavailableError) as info:
        collect(call, Client(fake.url, retries=2, retry_backoff=0.01))
    assert info.value.code == "connection_closed" and len(fake.requests) == 1


@pytest.mark.parametrize("piece", [
    b"event: stdout\ndata: not json\n\n",
    sse("stdout", {"nothing": 1}),
    sse("stdout", {"base64": "!!"}),
    sse("result", {"stdout": "no exit code"}),
    sse("file", {"size": 3}),
], ids=["not-json", "no-text", "bad-base64", "bad-result", "bad-file"])
def test_unusable_events_are_internal_errors(fake: FakeServer, piece: bytes) -> None:
    fake.reply(stream_reply([piece, sse("result", RESULT)]))
    with pytest.raises(SandboxInternalError) as info:
        collect(call_sync, Client(fake.url, retries=0))
    assert info.value.code == "bad_response"


def test_unknown_events_are_ignored(fake: FakeServer) -> None:
    fake.reply(stream_reply([sse("progress", {"pct": 5}), b"data: {}\n\n"] + EVENTS))
    result, got = collect(call_sync, Client(fake.url, retries=0))
    assert len(got) == 3 and result.exit_code == 0


# ---------------------------------------------------------------------------
# A service that answers JSON


@BOTH
def test_json_answer_to_a_streamed_request(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    fake.reply(Reply(body=RESULT))
    result, got = collect(call, Client(fake.url, retries=0))
    assert got == [("out", "one\ntwo\n"), ("err", "warn\n")]
    assert result == ExecResult.from_response(RESULT)


# ---------------------------------------------------------------------------
# stream() and stream_sync()


FILE = {"path": "output/a.txt", "size": 2, "mime": "text/plain", "encoding": "utf-8", "content": "hi",
        "truncated": False}


def stream_events(client: Client, style: str, **kw: Any) -> List[StreamEvent]:
    if style == "sync":
        return list(client.stream_sync("x", **kw))

    async def main() -> List[StreamEvent]:
        return [event async for event in client.stream("x", **kw)]

    return asyncio.run(main())


STYLES = pytest.mark.parametrize("style", ["sync", "async"])


@STYLES
def test_stream_yields_every_event_then_the_result(fake: FakeServer, style: str) -> None:
    result_with_file = dict(RESULT, files=[FILE])
    fake.reply(stream_reply([sse("stdout", {"text": "one\n"}), sse("file", FILE),
                             sse("stderr", {"base64": base64.b64encode(b"\xff").decode()}),
                             sse("result", result_with_file)]))
    events = stream_events(Client(fake.url, retries=0), style, stdin="in", files={"a": "b"})
    assert [e.type for e in events] == ["stdout", "file", "stderr", "result"]
    assert (events[0].text, events[0].data) == ("one\n", b"one\n")
    assert events[1].file is not None and events[1].file.path == "output/a.txt" and events[1].data == b"hi"
    assert (events[2].text, events[2].data) == ("\ufffd", b"\xff")
    assert events[3].result == ExecResult.from_response(result_with_file)
    assert events[3].result is not None and events[3].result.files == {"output/a.txt": b"hi"}
    body = fake.requests[-1].json()
    assert body["stdin"] == "in" and body["files"] == [{"path": "a", "content": "b", "encoding": "utf-8"}]


@STYLES
def test_stream_of_a_json_answer(fake: FakeServer, style: str) -> None:
    fake.reply(Reply(body=dict(RESULT, files=[FILE])))
    events = stream_events(Client(fake.url, retries=0), style)
    assert [e.type for e in events] == ["stdout", "stderr", "file", "result"]


@STYLES
def test_leaving_the_stream_early_closes_the_connection(fake: FakeServer, style: str) -> None:
    closed = []

    def wait_for_close(handler: Any) -> None:
        handler.connection.settimeout(WAIT)
        closed.append(handler.connection.recv(1) == b"")

    fake.reply(stream_reply([sse("stdout", {"text": "a"}), wait_for_close]))
    client = Client(fake.url, retries=0)
    if style == "sync":
        gen = client.stream_sync("x")
        assert next(gen).type == "stdout"
        gen.close()
    else:
        async def main() -> None:
            agen = client.stream("x")
            async for event in agen:
                assert event.type == "stdout"
                break
            await agen.aclose()  # type: ignore[attr-defined]

        asyncio.run(main())
    fake.stop()
    assert closed == [True]


def test_stream_checks_its_arguments_at_once(fake: FakeServer) -> None:
    with pytest.raises(TypeError):
        hexr.sandbox.stream(b"x")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        hexr.sandbox.stream_sync("x", files=5)  # type: ignore[arg-type]
    assert fake.requests == []


def test_module_level_stream_uses_the_environment(fake: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEXR_SANDBOX_URL", fake.url)
    fake.reply(stream_reply(EVENTS))
    assert [e.type for e in hexr.sandbox.stream_sync("x")] == ["stdout", "stderr", "stdout", "result"]
    got: List[str] = []
    assert hexr.sandbox.exec("x", on_stdout=got.append).exit_code == 0 and got == ["one\n", "two\n"]


def call_sync(client: Client, code: str, **kw: Any) -> ExecResult:
    return client.exec(code, **kw)


def test_cli_copies_the_output_as_it_comes(fake: FakeServer) -> None:
    fake.reply(stream_reply(EVENTS[:-1] + [sse("result", dict(RESULT, exit_code=4))]))
    proc = cli(["-c", "x"], fake.url)
    assert proc.returncode == 4
    assert (proc.stdout, proc.stderr) == (b"one\ntwo\n", b"warn\n")
    assert fake.requests[-1].headers["accept"] == "text/event-stream"
    fake.reply(Reply(body=dict(RESULT, exit_code=4)))
    proc = cli(["--json", "-c", "x"], fake.url)
    assert json.loads(proc.stdout)["exit_code"] == 4
    assert fake.requests[-1].headers["accept"] == "application/json"
