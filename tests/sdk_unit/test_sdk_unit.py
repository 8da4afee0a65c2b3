"""Unit tests of the hexr.sandbox Python SDK against an in-process fake service.

The fake service (http.server in a thread, on TCP and on a unix socket) returns
canned replies: these tests check the *client* (request encoding, reply
decoding, error mapping, transports, CLI), not the sandbox.

Run: /usr/bin/python3 -m pytest tests/sdk_unit -q
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import email.utils
import http.server
import json
import os
import pickle
import shutil
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

ROOT = Path(__file__).resolve().parents[2]
SDK_DIR = ROOT / "sdk" / "python"
if str(SDK_DIR) not in sys.path:
    sys.path.insert(0, str(SDK_DIR))

import hexr.sandbox  # noqa: E402
from hexr.sandbox import (  # noqa: E402
    Client,
    ExecResult,
    SandboxError,
    SandboxInternalError,
    SandboxOverloadedError,
    SandboxRequestError,
    SandboxUnavailableError,
)
from hexr.sandbox import _http  # noqa: E402

URL_ENV = "HEXR_SANDBOX_URL"
# a gated reply is held until the test opens the gate, or this long (a hang guard:
# a client that waited this long for it has already failed the test)
GATE_TIMEOUT = 30.0


# ---------------------------------------------------------------------------
# Fake service


@dataclass
class Reply:
    """What the fake service answers to one request."""

    status: int = 200
    body: Any = None  # dict/list -> JSON; str -> UTF-8; bytes -> as is
    headers: Dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    gate: Optional[threading.Event] = None  # answer only once the test sets it
    mode: str = "length"  # "length" | "chunked" | "close" (no length, close ends body)
    raw: Optional[bytes] = None  # written verbatim instead of a response
    read_body: bool = True
    script: Optional[Callable[[Any], None]] = None  # given the handler, writes the reply itself


@dataclass
class Seen:
    """One request the fake service received."""

    method: str
    path: str
    headers: Dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))


def result_doc(**overrides: Any) -> Dict[str, Any]:
    doc: Dict[str, Any] = {
        "stdout": "hello\n",
        "stderr": "",
        "exit_code": 0,
        "execution_time_ms": 12,
        "memory_used_mb": 3,
        "timed_out": False,
        "oom_killed": False,
        "signal": None,
        "stdout_truncated": False,
        "stderr_truncated": False,
        "id": "ex-1",
    }
    doc.update(overrides)
    return doc


def error_doc(code: str, message: str) -> Dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def default_responder(req: Seen) -> Reply:
    """Health is ok; exec echoes the code as stdout."""
    if req.path.endswith("/health"):
        return Reply(body={"status": "ok", "backend": "fake", "languages": ["python"]})
    if req.path.endswith("/api/v1/exec"):
        return Reply(body=result_doc(stdout=req.json()["code"]))
    return Reply(status=404, body=error_doc("not_found", "no such resource"))


def encode_body(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8")
    return json.dumps(body).encode("utf-8")


def chunked(data: bytes, size: int = 7) -> bytes:
    """Chunked encoding of ``data`` with a chunk extension and a trailer."""
    out = b""
    for i in range(0, len(data), size):
        piece = data[i:i + size]
        ext = b";note=x" if i == 0 else b""
        out += b"%x%s\r\n%s\r\n" % (len(piece), ext, piece)
    return out + b"0\r\nX-Trailer: yes\r\n\r\n"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def _serve(self) -> None:
        fake: FakeServer = self.server.fake
        with fake.lock:
            fake.in_flight += 1
            fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
        try:
            headers = {k.lower(): v for k, v in self.headers.items()}
            probe = Seen(self.command, self.path, headers, b"")
            reply = fake.responder(probe) if fake.peek else None
            length = int(headers.get("content-length", "0") or 0)
            if reply is None or reply.read_body:
                body = self.rfile.read(length) if length else b""
            else:
                body = b""
            seen = Seen(self.command, self.path, headers, body)
            with fake.lock:
                fake.requests.append(seen)
            if reply is None:
                reply = fake.responder(seen)
            if reply.delay:
                time.sleep(reply.delay)
            if reply.gate is not None:
                reply.gate.wait(GATE_TIMEOUT)
            self.close_connection = True
            if reply.script is not None:
                reply.script(self)
                return
            if reply.raw is not None:
                self.wfile.write(reply.raw)
                self.wfile.flush()
                return
            data = encode_body(reply.body)
            self.send_response(reply.status)
            has_type = any(k.lower() == "content-type" for k in reply.headers)
            if not has_type:
                self.send_header("Content-Type", "application/json")
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if reply.mode == "chunked":
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(chunked(data))
            elif reply.mode == "close":
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
            else:
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
            self.wfile.flush()
        finally:
            with fake.lock:
                fake.in_flight -= 1

    do_GET = _serve
    do_POST = _serve
    do_PUT = _serve
    do_DELETE = _serve


class _TCPServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that gave up (timeouts) make writes fail: expected here


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


class FakeServer:
    """A canned-reply HTTP service in a background thread (TCP or unix socket)."""

    def __init__(self, unix_path: Optional[str] = None, backlog: int = 128, start_delay: float = 0.0) -> None:
        self.responder: Callable[[Seen], Reply] = default_responder
        self.peek = False  # call responder before reading the body (for read_body=False)
        self.requests: List[Seen] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.unix_path = unix_path
        tcp_cls = type("TCP", (_TCPServer,), {"request_queue_size": backlog})
        unix_cls = type("Unix", (_UnixServer,), {"request_queue_size": backlog})
        if unix_path is None:
            self.server: socketserver.BaseServer = tcp_cls(("127.0.0.1", 0), Handler)
            self.url = "http://127.0.0.1:{}".format(self.server.server_address[1])
        else:
            self.server = unix_cls(unix_path, Handler)
            self.url = "unix:" + unix_path
        self.server.fake = self  # type: ignore[attr-defined]
        self.start_delay = start_delay
        self._stopping = threading.Event()
        self._serving = threading.Event()
        self.thread = threading.Thread(target=self._serve, kwargs={"poll_interval": 0.05})
        self.thread.daemon = True
        self.thread.start()

    def _serve(self, poll_interval: float) -> None:
        # connections queue up in the listen backlog during start_delay
        if self._stopping.wait(self.start_delay):
            return
        self._serving.set()
        self.server.serve_forever(poll_interval=poll_interval)

    def reply(self, reply: Reply) -> None:
        """Answer every request with ``reply``."""
        self.responder = lambda req: reply

    def stop(self) -> None:
        self._stopping.set()
        if self._serving.is_set():
            self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    server = FakeServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def short_tmp() -> Iterator[str]:
    """A short directory path (unix socket paths are limited to 107 bytes)."""
    path = tempfile.mkdtemp(prefix="hxsdk", dir="/tmp")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def fake_unix(short_tmp: str) -> Iterator[FakeServer]:
    server = FakeServer(unix_path=os.path.join(short_tmp, "s.sock"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _no_ambient_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(URL_ENV, raising=False)


def free_port() -> int:
    """A TCP port on 127.0.0.1 with nothing listening (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# Both call styles, so every behaviour is checked for the sync and async paths.
def call_sync(client: Client, code: str, **kw: Any) -> ExecResult:
    return client.exec(code, **kw)


def call_async(client: Client, code: str, **kw: Any) -> ExecResult:
    return run(client.exec_async(code, **kw))


BOTH = pytest.mark.parametrize("call", [call_sync, call_async], ids=["sync", "async"])


# ---------------------------------------------------------------------------
# Results


@BOTH
def test_result_fields_are_mapped(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    fake.reply(Reply(body=result_doc(
        stdout="out\n", stderr="err\n", exit_code=137, execution_time_ms=1234,
        memory_used_mb=45.5, timed_out=False, oom_killed=True, signal=9,
        stdout_truncated=True, stderr_truncated=False, id="abc",
    )))
    result = call(Client(fake.url), "x")
    assert result == ExecResult(
        stdout="out\n", stderr="err\n", exit_code=137, duration_ms=1234,
        memory_used_mb=45.5, timed_out=False, oom_killed=True, signal=9,
        stdout_truncated=True, stderr_truncated=False, id="abc",
    )
    assert result.ok is False
    assert result.output == "out\n"


def test_minimal_response_gets_defaults(fake: FakeServer) -> None:
    # The response body exactly as printed in seed 001.
    fake.reply(Reply(body={
        "stdout": "         a\ncount  3.0\nmean   2.0\n...", "stderr": "",
        "exit_code": 0, "execution_time_ms": 234, "memory_used_mb": 45,
    }))
    result = Client(fake.url).exec("x")
    assert result.ok and result.exit_code == 0
    assert result.duration_ms == 234 and result.memory_used_mb == 45
    assert (result.timed_out, result.oom_killed, result.signal, result.id) == (False, False, None, None)
    assert (result.stdout_truncated, result.stderr_truncated) == (False, False)


def test_numeric_id_is_accepted_as_text() -> None:
    assert ExecResult.from_response(result_doc(id=42)).id == "42"


def test_result_is_frozen_and_has_a_useful_repr() -> None:
    result = ExecResult.from_response(result_doc(stdout="x" * 500, exit_code=1, timed_out=True))
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.exit_code = 0  # type: ignore[misc]
    text = repr(result)
    assert text.startswith("ExecResult(") and "exit_code=1" in text and "ok=False" in text
    assert "timed_out=True" in text and "(+440 chars)" in text and len(text) < 300
    assert ExecResult.from_response(result.to_dict()) == result


def test_timeout_result_is_not_an_exception(fake: FakeServer) -> None:
    fake.reply(Reply(body=result_doc(stdout="", exit_code=124, timed_out=True)))
    result = hexr.sandbox.Client(fake.url).exec("while True: pass", timeout=1)
    assert result.timed_out and result.exit_code == 124 and not result.ok


@pytest.mark.parametrize("body", [
    b"not json",
    b"[1, 2]",
    json.dumps({"stdout": "x"}).encode(),
    json.dumps(result_doc(exit_code="0")).encode(),
    json.dumps(result_doc(exit_code=True)).encode(),
    json.dumps(result_doc(stdout=5)).encode(),
    json.dumps(result_doc(timed_out="no")).encode(),
], ids=["not-json", "array", "no-exit-code", "string-exit-code", "bool-exit-code", "bad-stdout", "bad-bool"])
@BOTH
def test_unusable_200_reply_is_internal_error(fake: FakeServer, call: Callable[..., ExecResult], body: bytes) -> None:
    fake.reply(Reply(body=body))
    with pytest.raises(SandboxInternalError) as info:
        call(Client(fake.url), "x")
    assert info.value.code == "bad_response"
    assert info.value.status == 200


@BOTH
def test_unicode_round_trip(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    code = "print('héllo ✓ 日本 \U0001f600')"
    result = call(Client(fake.url), code)
    assert result.stdout == code
    seen = fake.requests[-1]
    assert seen.body.decode("utf-8") == json.dumps(
        {"code": code, "language": "python"}, ensure_ascii=False, separators=(",", ":"))


@BOTH
def test_large_request_and_reply(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    code = "# " + "x" * (3 << 20) + "\nprint(1)\n"
    result = call(Client(fake.url), code)
    assert result.stdout == code
    assert int(fake.requests[-1].headers["content-length"]) == len(fake.requests[-1].body)


# ---------------------------------------------------------------------------
# Requests


@BOTH
def test_request_omits_parameters_left_at_default(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    call(Client(fake.url), "print(1)")
    seen = fake.requests[-1]
    assert (seen.method, seen.path) == ("POST", "/api/v1/exec")
    assert seen.json() == {"code": "print(1)", "language": "python"}
    assert seen.headers["content-type"] == "application/json"
    assert seen.headers["host"] == fake.url[len("http://"):]
    assert seen.headers["user-agent"].startswith("hexr-sandbox-python/")


@BOTH
def test_request_sends_parameters_the_caller_set(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    call(Client(fake.url), "x", language="bash", timeout=30, memory_mb=128,
         env_vars={"A": "1", "B": "two words"}, packages=("pandas", "numpy"))
    assert fake.requests[-1].json() == {
        "code": "x", "language": "bash", "timeout": 30, "memory_mb": 128,
        "env_vars": {"A": "1", "B": "two words"}, "packages": ["pandas", "numpy"],
    }


def test_empty_collections_are_sent(fake: FakeServer) -> None:
    Client(fake.url).exec("x", env_vars={}, packages=[])
    assert fake.requests[-1].json() == {"code": "x", "language": "python", "env_vars": {}, "packages": []}


def test_signature_matches_the_seed() -> None:
    import inspect

    for fn in (hexr.sandbox.exec, hexr.sandbox.exec_async, Client.exec, Client.exec_async):
        params = inspect.signature(fn).parameters
        names = [n for n in params if n != "self"]
        # the seed's parameters, in its order; issue 14's after them, keyword-only
        assert names[:6] == ["code", "language", "timeout", "env_vars", "packages", "memory_mb"]
        assert names[6:] == ["files", "return_files", "stdin", "on_stdout", "on_stderr"]
        for name in names[1:]:
            assert params[name].kind is inspect.Parameter.KEYWORD_ONLY
        for name in names[6:]:
            assert params[name].default is None
        assert params["code"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        assert params["language"].default == "python"
        assert params["timeout"].default == 30 and repr(params["timeout"].default) == "30"
        assert params["env_vars"].default is None and params["packages"].default is None
        assert params["memory_mb"].default is None
    assert asyncio.iscoroutinefunction(hexr.sandbox.exec_async)


def test_code_must_be_a_string(fake: FakeServer) -> None:
    with pytest.raises(TypeError):
        Client(fake.url).exec(b"print(1)")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        run(Client(fake.url).exec_async(None))  # type: ignore[arg-type]
    assert fake.requests == []


def test_other_parameters_are_left_to_the_server(fake: FakeServer) -> None:
    fake.reply(Reply(status=400, body=error_doc(
        "invalid_request", "language: must be one of python, javascript, bash (got 'cobol')")))
    with pytest.raises(SandboxRequestError) as info:
        Client(fake.url).exec("x", language="cobol", timeout=-5, memory_mb=0)
    assert fake.requests[-1].json() == {"code": "x", "language": "cobol", "timeout": -5, "memory_mb": 0}
    assert info.value.message == "language: must be one of python, javascript, bash (got 'cobol')"
    assert str(info.value) == info.value.message
    assert (info.value.status, info.value.code) == (400, "invalid_request")


# ---------------------------------------------------------------------------
# Errors


ERROR_CASES = [
    (400, SandboxRequestError), (413, SandboxRequestError), (415, SandboxRequestError),
    (422, SandboxRequestError), (404, SandboxRequestError), (429, SandboxOverloadedError),
    (500, SandboxInternalError), (501, SandboxInternalError), (503, SandboxUnavailableError),
    (502, SandboxUnavailableError), (504, SandboxUnavailableError), (302, SandboxInternalError),
    (201, SandboxInternalError),
]


@pytest.mark.parametrize("status,cls", ERROR_CASES, ids=[str(s) for s, _ in ERROR_CASES])
@BOTH
def test_error_statuses_map_to_classes(fake: FakeServer, call: Callable[..., ExecResult], status: int, cls: type) -> None:
    message = "status {} said: ünïcode \"quoted\" message".format(status)
    fake.reply(Reply(status=status, body=error_doc("code_{}".format(status), message)))
    with pytest.raises(cls) as info:
        call(Client(fake.url), "x")
    err = info.value
    assert isinstance(err, SandboxError)
    assert (err.status, err.code, err.message) == (status, "code_{}".format(status), message)


@BOTH
def test_non_json_error_body_still_maps(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    fake.reply(Reply(status=502, body="<html>Bad Gateway</html>", headers={"Content-Type": "text/html"}))
    with pytest.raises(SandboxUnavailableError) as info:
        call(Client(fake.url), "x")
    assert info.value.status == 502 and info.value.code == "http_502"
    assert "502" in info.value.message and "Bad Gateway" in info.value.message


@pytest.mark.parametrize("header,expected", [
    ("3", 3.0), ("0", 0.0), (" 12 ", 12.0), ("1.5", 1.5), (None, None), ("soon", None), ("-4", 0.0),
])
@BOTH
def test_retry_after(fake: FakeServer, call: Callable[..., ExecResult], header: Optional[str], expected: Optional[float]) -> None:
    headers = {} if header is None else {"Retry-After": header}
    fake.reply(Reply(status=429, headers=headers, body=error_doc("overloaded", "too many executions")))
    with pytest.raises(SandboxOverloadedError) as info:
        call(Client(fake.url), "x")
    assert info.value.retry_after == expected
    assert info.value.message == "too many executions" and info.value.status == 429


def test_retry_after_http_date() -> None:
    now = time.time()
    value = email.utils.formatdate(now + 120, usegmt=True)
    got = _http.parse_retry_after(value, now=now)
    assert got is not None and 118 <= got <= 121


@BOTH
def test_refused_connection_is_unavailable(call: Callable[..., ExecResult]) -> None:
    url = "http://127.0.0.1:{}".format(free_port())
    with pytest.raises(SandboxUnavailableError) as info:
        call(Client(url), "x")
    assert info.value.status is None and info.value.code == "connection_failed"
    assert url in info.value.message


@BOTH
def test_missing_unix_socket_is_unavailable(call: Callable[..., ExecResult], short_tmp: str) -> None:
    with pytest.raises(SandboxUnavailableError):
        call(Client("unix:" + os.path.join(short_tmp, "nope.sock")), "x")


@BOTH
def test_no_reply_in_time_is_unavailable_timeout(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    gate = threading.Event()  # the reply comes only after the client gave up
    fake.reply(Reply(body=result_doc(), gate=gate))
    try:
        with pytest.raises(SandboxUnavailableError) as info:
            call(Client(fake.url, timeout_margin=0.3), "x", timeout=0)
    finally:
        gate.set()
    assert info.value.code == "timeout"


@BOTH
def test_connection_closed_without_reply_is_unavailable(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    fake.reply(Reply(raw=b""))
    with pytest.raises(SandboxUnavailableError) as info:
        call(Client(fake.url), "x")
    assert info.value.code == "connection_closed"


@pytest.mark.parametrize("raw", [
    b"garbage\r\n\r\n",
    b"HTTP/1.1 2000 OK\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"short\"",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
], ids=["garbage", "bad-status", "short-body", "bad-chunk"])
@BOTH
def test_malformed_reply_is_internal_error(fake: FakeServer, call: Callable[..., ExecResult], raw: bytes) -> None:
    fake.reply(Reply(raw=raw))
    with pytest.raises(SandboxInternalError) as info:
        call(Client(fake.url), "x")
    assert info.value.code == "bad_response"


@BOTH
def test_early_413_is_read_even_if_body_not_consumed(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    # The service rejects a too-large body from its headers, replies and
    # closes without reading the body; the client must report the 413 rather
    # than a broken connection. Replies with a small body that still fits the
    # socket buffers, so the test does not depend on TCP reset timing.
    fake.peek = True
    fake.reply(Reply(status=413, body=error_doc("too_large", "body exceeds 1048576 bytes"), read_body=False))
    with pytest.raises(SandboxRequestError) as info:
        call(Client(fake.url), "x" * 1000)
    assert info.value.status == 413 and info.value.message == "body exceeds 1048576 bytes"


def test_exceptions_pickle_with_their_attributes() -> None:
    err = SandboxOverloadedError("busy", status=429, code="overloaded", retry_after=2.0)
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is SandboxOverloadedError
    assert (copy.message, copy.status, copy.code, copy.retry_after) == ("busy", 429, "overloaded", 2.0)
    err2 = SandboxRequestError("bad", status=400, code="invalid_request")
    copy2 = pickle.loads(pickle.dumps(err2))
    assert (type(copy2), copy2.message, copy2.status, copy2.code) == (SandboxRequestError, "bad", 400, "invalid_request")
    for cls in (SandboxUnavailableError, SandboxRequestError, SandboxOverloadedError, SandboxInternalError):
        assert issubclass(cls, SandboxError) and issubclass(cls, Exception)


# ---------------------------------------------------------------------------
# Transports


@pytest.mark.parametrize("mode", ["chunked", "close", "length"])
@BOTH
def test_reply_framings(fake: FakeServer, call: Callable[..., ExecResult], mode: str) -> None:
    stdout = "line {}\n" * 50
    fake.reply(Reply(body=result_doc(stdout=stdout), mode=mode))
    assert call(Client(fake.url), "x").stdout == stdout


@BOTH
def test_chunked_with_extensions_and_trailer(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    body = json.dumps(result_doc(stdout="chunky ✓\n")).encode("utf-8")
    raw = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(body, 5)
    fake.reply(Reply(raw=raw))
    assert call(Client(fake.url), "x").stdout == "chunky ✓\n"


@BOTH
def test_interim_100_continue_is_skipped(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    body = json.dumps(result_doc(stdout="after continue\n")).encode()
    raw = (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)) + body
    fake.reply(Reply(raw=raw))
    assert call(Client(fake.url), "x").stdout == "after continue\n"


@BOTH
def test_unix_socket_url(fake_unix: FakeServer, call: Callable[..., ExecResult]) -> None:
    result = call(Client(fake_unix.url), "print('unix')")
    assert result.stdout == "print('unix')"
    seen = fake_unix.requests[-1]
    assert seen.path == "/api/v1/exec" and seen.headers["host"] == "localhost"


def test_unix_socket_url_from_environment(fake_unix: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(URL_ENV, fake_unix.url)
    assert hexr.sandbox.exec("a").stdout == "a"
    assert run(hexr.sandbox.exec_async("b")).stdout == "b"
    assert hexr.sandbox.is_enabled() is True
    monkeypatch.setenv(URL_ENV, "unix:///" + fake_unix.url[len("unix:/"):])  # unix:///path form
    assert hexr.sandbox.exec("c").stdout == "c"


@pytest.mark.parametrize("style", ["async", "sync"])
def test_unix_socket_with_full_listen_queue(short_tmp: str, style: str) -> None:
    # The service accepts nothing for a while and its listen queue holds one
    # connection: the other clients get EAGAIN from connect() and must retry
    # until the service catches up, not fail.
    server = FakeServer(unix_path=os.path.join(short_tmp, "q.sock"), backlog=1, start_delay=0.8)
    try:
        client = Client(server.url)
        if style == "async":
            async def burst() -> Any:
                return await asyncio.gather(*(client.exec_async("a{}".format(i)) for i in range(6)))

            got = [r.stdout for r in run(burst())]
        else:
            with concurrent.futures.ThreadPoolExecutor(6) as pool:
                got = list(pool.map(lambda i: client.exec("a{}".format(i)).stdout, range(6)))
        assert got == ["a{}".format(i) for i in range(6)]
    finally:
        server.stop()


def test_unix_socket_queue_full_until_timeout(short_tmp: str) -> None:
    server = FakeServer(unix_path=os.path.join(short_tmp, "f.sock"), backlog=0, start_delay=60)
    holders = []
    try:
        # fill the listen queue with connections that are never accepted
        for _ in range(8):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.setblocking(False)
            try:
                sock.connect(server.unix_path or "")
            except BlockingIOError:
                sock.close()
                break
            holders.append(sock)
        client = Client(server.url, connect_timeout=0.3)
        with pytest.raises(SandboxUnavailableError) as info:
            client.exec("x")
        assert info.value.code == "connection_failed" and "full" in info.value.message
        with pytest.raises(SandboxUnavailableError) as info:
            run(client.exec_async("x"))
        assert info.value.code == "connection_failed" and "full" in info.value.message
    finally:
        for sock in holders:
            sock.close()
        server.stop()


def test_url_path_prefix_is_kept(fake: FakeServer) -> None:
    fake.reply(Reply(body=result_doc()))
    Client(fake.url + "/sandbox/").exec("x")
    assert fake.requests[-1].path == "/sandbox/api/v1/exec"


@pytest.mark.parametrize("url,expected", [
    ("http://127.0.0.1:8080", ("http", "127.0.0.1", 8080, "", "")),
    ("http://example.com", ("http", "example.com", 80, "", "")),
    ("https://example.com/x/", ("https", "example.com", 443, "", "/x")),
    ("http://[::1]:9000", ("http", "::1", 9000, "", "")),
    ("127.0.0.1:9000", ("http", "127.0.0.1", 9000, "", "")),
    (":9000", ("http", "127.0.0.1", 9000, "", "")),
    ("unix:/run/hexr.sock", ("unix", "localhost", 0, "/run/hexr.sock", "")),
    ("unix:///run/hexr.sock", ("unix", "localhost", 0, "/run/hexr.sock", "")),
    ("unix:rel.sock", ("unix", "localhost", 0, "rel.sock", "")),
    ("http+unix://%2Frun%2Fhexr.sock", ("unix", "localhost", 0, "/run/hexr.sock", "")),
])
def test_parse_url(url: str, expected: tuple) -> None:
    a = _http.parse_url(url)
    assert (a.scheme, a.host, a.port, a.socket_path, a.base_path) == expected


def test_host_header_forms() -> None:
    assert _http.parse_url("http://[::1]:9000").host_header == "[::1]:9000"
    assert _http.parse_url("http://h").host_header == "h"
    assert _http.parse_url("https://h:443").host_header == "h"


@pytest.mark.parametrize("url", ["", "ftp://x", "http://h:notaport", "unix:", "http://u:p@h:1"])
def test_invalid_explicit_url_raises_value_error(url: str) -> None:
    with pytest.raises(ValueError):
        Client(url)


# ---------------------------------------------------------------------------
# HEXR_SANDBOX_URL


def test_default_url() -> None:
    assert Client().url == "http://127.0.0.1:8080" == hexr.sandbox.DEFAULT_URL


def test_environment_is_read_at_call_time(monkeypatch: pytest.MonkeyPatch, short_tmp: str) -> None:
    first, second = FakeServer(), FakeServer(unix_path=os.path.join(short_tmp, "b.sock"))
    try:
        client = Client()  # created before the variable is set
        monkeypatch.setenv(URL_ENV, first.url)
        assert hexr.sandbox.exec("one").stdout == "one"
        assert client.exec("two").stdout == "two"
        monkeypatch.setenv(URL_ENV, second.url)
        assert hexr.sandbox.exec("three").stdout == "three"
        assert run(client.exec_async("four")).stdout == "four"
        assert [r.json()["code"] for r in first.requests] == ["one", "two"]
        assert [r.json()["code"] for r in second.requests] == ["three", "four"]
        assert client.url == second.url
    finally:
        first.stop()
        second.stop()


def test_explicit_url_ignores_environment(fake: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(URL_ENV, "http://127.0.0.1:{}".format(free_port()))
    assert Client(fake.url).exec("x").stdout == "x"


def test_invalid_environment_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(URL_ENV, "ftp://nowhere")
    with pytest.raises(TypeError):  # the caller's mistake is reported first
        hexr.sandbox.exec(b"x")  # type: ignore[arg-type]
    with pytest.raises(SandboxUnavailableError) as info:
        hexr.sandbox.exec("x")
    assert info.value.code == "invalid_url" and URL_ENV in info.value.message
    assert hexr.sandbox.is_enabled() is False


# ---------------------------------------------------------------------------
# is_enabled


def test_is_enabled_true(fake: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(URL_ENV, fake.url)
    assert hexr.sandbox.is_enabled() is True
    assert fake.requests[-1].method == "GET" and fake.requests[-1].path == "/health"
    assert run(Client(fake.url).is_enabled_async()) is True
    assert Client(fake.url).health()["status"] == "ok"


def test_is_enabled_false_when_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(URL_ENV, "http://127.0.0.1:{}".format(free_port()))
    assert hexr.sandbox.is_enabled() is False
    assert run(Client().is_enabled_async()) is False


def test_is_enabled_false_for_missing_unix_socket(short_tmp: str) -> None:
    assert Client("unix:" + os.path.join(short_tmp, "none.sock")).is_enabled() is False


def test_is_enabled_false_when_unhealthy(fake: FakeServer) -> None:
    fake.reply(Reply(status=503, body=error_doc("draining", "shutting down")))
    assert Client(fake.url).is_enabled() is False
    with pytest.raises(SandboxUnavailableError):
        Client(fake.url).health()


def test_is_enabled_false_when_slow(fake: FakeServer) -> None:
    gate = threading.Event()  # healthy, but only after the client gave up
    fake.reply(Reply(body={"status": "ok"}, gate=gate))
    try:
        assert Client(fake.url).is_enabled(timeout=0.3) is False
    finally:
        gate.set()


# ---------------------------------------------------------------------------
# exec_async concurrency


class _NoThreadsExecutor(concurrent.futures.ThreadPoolExecutor):
    """Default executor that fails any attempt to hand work to a thread."""

    def submit(self, fn: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        raise AssertionError("exec_async used the default executor (threads): {!r}".format(fn))


def test_exec_async_is_concurrent_without_threads(fake: FakeServer) -> None:
    fake.responder = lambda req: Reply(body=result_doc(stdout=req.json()["code"]))
    client = Client(fake.url)
    # the concurrent calls are answered only once all ten are in flight: calls made one
    # after the other would never get there (and fail when the barrier gives up)
    barrier = threading.Barrier(10, timeout=GATE_TIMEOUT)

    def all_in_flight(req: Seen) -> Reply:
        barrier.wait()
        return Reply(body=result_doc(stdout=req.json()["code"]))

    async def main() -> Any:
        asyncio.get_running_loop().set_default_executor(_NoThreadsExecutor(max_workers=1))
        for i in range(3):
            assert (await client.exec_async("s{}".format(i))).stdout == "s{}".format(i)
        fake.max_in_flight = 0
        fake.responder = all_in_flight
        tasks = [asyncio.ensure_future(client.exec_async("c{}".format(i))) for i in range(10)]
        return await asyncio.gather(*tasks)

    results = run(main())
    assert [r.stdout for r in results] == ["c{}".format(i) for i in range(10)]
    assert fake.max_in_flight == 10


def test_exec_async_cancellation_closes_connection(fake: FakeServer) -> None:
    fake.reply(Reply(body=result_doc(), delay=1.0))

    async def main() -> None:
        task = asyncio.ensure_future(Client(fake.url).exec_async("x"))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main())
    assert len(fake.requests) == 1


# ---------------------------------------------------------------------------
# Command line


def cli(args: List[str], url: str, stdin: bytes = b"", timeout: float = 30) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SDK_DIR)
    env[URL_ENV] = url
    return subprocess.run(
        [sys.executable, "-m", "hexr.sandbox"] + args,
        input=stdin, capture_output=True, env=env, timeout=timeout, cwd=str(ROOT),
    )


def test_cli_runs_stdin_and_exits_with_sandbox_code(fake: FakeServer) -> None:
    fake.reply(Reply(body=result_doc(stdout="out ✓\n", stderr="err\n", exit_code=7)))
    proc = cli(["-l", "bash", "-t", "5", "-m", "64", "-e", "A=1=2", "-e", "B=", "-"], fake.url, b"echo hi\n")
    assert proc.returncode == 7
    assert proc.stdout == "out ✓\n".encode() and proc.stderr == b"err\n"
    assert fake.requests[-1].json() == {
        "code": "echo hi\n", "language": "bash", "timeout": 5, "memory_mb": 64,
        "env_vars": {"A": "1=2", "B": ""},
    }


def test_cli_runs_file_and_code_option(fake: FakeServer, tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text("print('from file')\n", encoding="utf-8")
    proc = cli([str(script)], fake.url)
    assert proc.returncode == 0 and proc.stdout == b"print('from file')\n"
    proc = cli(["-c", "print(2)", "-p", "numpy"], fake.url)
    assert proc.returncode == 0 and proc.stdout == b"print(2)"
    assert fake.requests[-1].json() == {"code": "print(2)", "language": "python", "packages": ["numpy"]}


def test_cli_json_output(fake: FakeServer) -> None:
    doc = result_doc(stdout="x\n", exit_code=3)
    fake.reply(Reply(body=doc))
    proc = cli(["--json", "-c", "x"], fake.url)
    assert proc.returncode == 3
    assert json.loads(proc.stdout) == doc


def test_cli_request_error_exits_2(fake: FakeServer) -> None:
    fake.reply(Reply(status=400, body=error_doc("invalid_request", "language: unknown 'cobol'")))
    proc = cli(["-l", "cobol", "-c", "x"], fake.url)
    assert proc.returncode == 2
    assert b"language: unknown 'cobol'" in proc.stderr and proc.stdout == b""


def test_cli_overloaded_and_internal_exit_2(fake: FakeServer) -> None:
    fake.reply(Reply(status=429, headers={"Retry-After": "1"}, body=error_doc("overloaded", "busy")))
    assert cli(["-c", "x"], fake.url).returncode == 2
    fake.reply(Reply(status=500, body=error_doc("setup_failed", "no cgroup")))
    proc = cli(["-c", "x"], fake.url)
    assert proc.returncode == 2 and b"no cgroup" in proc.stderr


def test_cli_unavailable_exits_3(fake: FakeServer) -> None:
    proc = cli(["-c", "x"], "http://127.0.0.1:{}".format(free_port()))
    assert proc.returncode == 3 and b"unavailable" in proc.stderr
    fake.reply(Reply(status=503, body=error_doc("draining", "service is draining")))
    proc = cli(["-c", "x"], fake.url)
    assert proc.returncode == 3 and b"service is draining" in proc.stderr


def test_cli_usage_errors_exit_2(fake: FakeServer) -> None:
    assert cli(["-e", "NOEQUALS", "-c", "x"], fake.url).returncode == 2
    assert cli(["-c", "x", "file.py"], fake.url).returncode == 2
    assert cli(["/nonexistent/file.py"], fake.url).returncode == 2
    assert cli(["--url", "ftp://x", "-c", "x"], fake.url).returncode == 2
    assert fake.requests == []


def test_cli_unix_socket(fake_unix: FakeServer) -> None:
    proc = cli(["-c", "hello"], fake_unix.url)
    assert proc.returncode == 0 and proc.stdout == b"hello"
