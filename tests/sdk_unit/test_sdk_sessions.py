"""Sessions in the Python SDK against a scripted service (issue 15).

The fake service keeps sessions as the HTTP API does (create, info, exec as JSON or
as an event stream, files, delete, 404 for an unknown id, 410 once ended) and runs a
cell's code in a Python namespace of its own, so the client's side is checked: the
requests it sends, how replies become CellResult / SessionInfo / FileEntry, the
streamed callbacks, SessionEndedError (410, 404, a cell that ended the session, after
close), the sync and async faces, and that they share one transport and its retries.
"""

from __future__ import annotations

import ast
import asyncio
import base64
import contextlib
import io
import json
import re
import threading
import urllib.parse
from typing import Any, Dict, Iterator, List, Optional

import pytest

from test_sdk_unit import FakeServer, Reply, Seen, error_doc

import hexr.sandbox
from hexr.sandbox import (
    AsyncSession,
    CellResult,
    Client,
    FileEntry,
    SandboxError,
    SandboxOverloadedError,
    SandboxRequestError,
    Session,
    SessionEndedError,
    SessionInfo,
)

SESSION_RE = re.compile(r"^/api/v1/sessions/([^/?]+)(/exec|/files(?:/(.*))?)?(?:\?(.*))?$")


def session_doc(sid: str, **kw: Any) -> Dict[str, Any]:
    doc = {"id": sid, "language": "python", "state": "idle", "created_at": "2026-12-01T15:00:00Z",
           "expires_at": "2026-12-01T16:00:00Z", "idle_expires_at": "2026-12-01T15:10:00Z",
           "memory_mb": 512, "cells": 0, "ended_reason": None, "ended_message": None}
    doc.update(kw)
    return doc


def sse(event: str, data: Any) -> bytes:
    return "event: {}\ndata: {}\n\n".format(event, json.dumps(data)).encode()


class FakeSessions:
    """The session routes, with a real Python namespace standing in for the driver."""

    def __init__(self) -> None:
        self.sessions: Dict[str, Dict[str, Any]] = {}
        self.n = 0
        self.lock = threading.Lock()
        self.end_on_next_cell: Optional[str] = None
        self.create_status: List[int] = []   # statuses to answer POST /sessions with first

    def __call__(self, req: Seen) -> Reply:
        path = req.path
        if path == "/api/v1/sessions" and req.method == "POST":
            if self.create_status:
                status = self.create_status.pop(0)
                return Reply(status=status, body=error_doc("overloaded", "too many sessions"),
                             headers={"Retry-After": "0"} if status == 429 else {})
            return self.create(req)
        if path == "/api/v1/sessions" and req.method == "GET":
            return Reply(body={"sessions": [s["doc"] for s in self.sessions.values()]})
        m = SESSION_RE.match(path)
        if not m or m.group(1) not in self.sessions:
            return Reply(status=404, body=error_doc("session_not_found", "no such session"))
        s = self.sessions[m.group(1)]
        tail, fpath, query = m.group(2), m.group(3), m.group(4)
        if tail is None and req.method == "GET":
            return Reply(body=s["doc"])
        if tail is None and req.method == "DELETE":
            del self.sessions[m.group(1)]
            return Reply(status=204, body=b"")
        if s["doc"]["state"] == "ended":
            return Reply(status=410, body={"error": {"code": "session_ended", "reason": s["doc"]["ended_reason"],
                                                     "message": "session ended: " + s["doc"]["ended_message"]}})
        if tail == "/exec" and req.method == "POST":
            return self.exec(s, req)
        if tail == "/files" and req.method == "GET":
            sub = urllib.parse.parse_qs(query or "").get("path", [""])[0]
            names = sorted(p for p in s["files"] if (p.startswith(sub + "/") if sub else True))
            return Reply(body={"files": [{"path": p, "type": "file", "size": len(s["files"][p])} for p in names]})
        if fpath is not None and req.method == "PUT":
            p = urllib.parse.unquote(fpath)
            if p.startswith("/") or ".." in p.split("/"):
                return Reply(status=400, body=error_doc("invalid_request", "path: %s: must be relative" % p))
            s["files"][p] = req.body
            return Reply(status=201, body={"path": p, "size": len(req.body)})
        if fpath is not None and req.method == "GET":
            p = urllib.parse.unquote(fpath)
            if p not in s["files"]:
                return Reply(status=404, body=error_doc("not_found", "%s: no such file" % p))
            return Reply(body=s["files"][p], headers={"Content-Type": "application/octet-stream"})
        return Reply(status=405, body=error_doc("method_not_allowed", "no"))

    def create(self, req: Seen) -> Reply:
        body = req.json()
        with self.lock:
            self.n += 1
            sid = "s-%d" % self.n
        doc = session_doc(sid, language=body.get("language", "python"), memory_mb=body.get("memory_mb", 512))
        files = {f["path"]: (base64.b64decode(f["content"]) if f.get("encoding") == "base64" else f["content"].encode())
                 for f in body.get("files", [])}
        self.sessions[sid] = {"doc": doc, "ns": {}, "files": files, "create": body}
        return Reply(status=201, body=doc)

    def run(self, s: Dict[str, Any], code: str) -> Dict[str, Any]:
        out, displays = io.StringIO(), []
        ns = s["ns"]
        ns["display"] = lambda obj: displays.append({"text/plain": repr(obj)})
        value, exc, status = None, None, "ok"
        try:
            tree = ast.parse(code)
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            with contextlib.redirect_stdout(out):
                exec(compile(tree, "<cell>", "exec"), ns)
                if last is not None:
                    v = eval(compile(ast.Expression(last.value), "<cell>", "eval"), ns)
                    value = None if v is None else repr(v)
        except Exception as e:
            status = "exception"
            exc = {"type": type(e).__name__, "message": str(e), "traceback": "Traceback...\n"}
        s["doc"]["cells"] += 1
        return {"id": "c%d" % s["doc"]["cells"], "status": status, "stdout": out.getvalue(), "stderr": "",
                "stdout_truncated": False, "stderr_truncated": False, "stdout_omitted_bytes": 0,
                "stderr_omitted_bytes": 0, "execution_time_ms": 3, "value": value,
                "value_data": None if value is None else {"text/plain": value},
                "outputs": [{"type": "display", "data": d} for d in displays],
                "exception": exc, "error": None, "files": [], "session": s["doc"]}

    def exec(self, s: Dict[str, Any], req: Seen) -> Reply:
        body = req.json()
        if self.end_on_next_cell:
            s["doc"].update(state="ended", ended_reason=self.end_on_next_cell,
                            ended_message="the cell did not stop at its time limit")
            self.end_on_next_cell = None
            result = {"id": "cx", "status": "session_ended", "stdout": "", "stderr": "", "value": None,
                      "value_data": None, "outputs": [], "exception": None, "files": [],
                      "error": {"type": "timeout", "message": "the cell did not stop at its time limit"},
                      "session": s["doc"]}
        else:
            result = self.run(s, body["code"])
        s["last_exec"] = body
        if req.headers.get("accept") != "text/event-stream":
            return Reply(body=result)
        data = b""
        if result["stdout"]:
            data += sse("stdout", {"text": result["stdout"]})
        for o in result.get("outputs", []):
            data += sse("display", {"data": o["data"]})
        data += sse("stderr", {"base64": base64.b64encode(b"\xff!").decode()})
        data += sse("result", result)
        return Reply(body=data, headers={"Content-Type": "text/event-stream"})


@pytest.fixture
def service() -> Iterator[Any]:
    server = FakeServer()
    fake = FakeSessions()
    server.responder = fake
    server.sessions = fake  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        server.stop()


def test_the_seed_example(service: FakeServer) -> None:
    with Session(language="python", url=service.url) as s:
        s.exec("x = 41")
        assert s.exec("x + 1").value == "42"
    assert [r.method for r in service.requests] == ["POST", "POST", "POST", "DELETE"]
    assert service.requests[0].path == "/api/v1/sessions"
    assert service.requests[0].json() == {"language": "python"}
    assert service.requests[1].path == "/api/v1/sessions/s-1/exec"
    assert service.requests[1].json() == {"code": "x = 41"}


def test_the_seed_example_through_the_environment(service: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEXR_SANDBOX_URL", service.url)
    with hexr.sandbox.Session(language="python") as s:
        s.exec("x = 41")
        assert s.exec("x + 1").value == "42"


def test_create_sends_what_was_set(service: FakeServer) -> None:
    s = Session("bash", url=service.url, memory_mb=256, env_vars={"A": "1"}, packages=["tabulate"],
                files={"a.txt": "hi", "b.bin": b"\x00\x01"}, idle_timeout=60, lifetime=600)
    body = service.requests[0].json()
    assert body["language"] == "bash" and body["memory_mb"] == 256 and body["env_vars"] == {"A": "1"}
    assert body["packages"] == ["tabulate"] and body["idle_timeout"] == 60 and body["lifetime"] == 600
    assert body["files"] == [{"path": "a.txt", "content": "hi", "encoding": "utf-8"},
                             {"path": "b.bin", "content": "AAE=", "encoding": "base64"}]
    assert s.id == "s-1" and "s-1" in repr(s)
    s.close()


def test_cell_result_fields(service: FakeServer) -> None:
    with Session(url=service.url) as s:
        r = s.exec("print('hi')\ndisplay([1])\n6 * 7", timeout=5, return_files=["*.csv"])
        assert isinstance(r, CellResult) and isinstance(r, hexr.sandbox.ExecResult)
        assert r.status == "ok" and r.ok and r.exit_code == 0
        assert r.value == "42" and r.value_data == {"text/plain": "42"}
        assert r.stdout == "hi\n" and r.id == "c1"
        assert [(o.type, o.text) for o in r.outputs] == [("display", "[1]")]
        assert r.exception is None and r.error is None
        assert isinstance(r.session, SessionInfo) and r.session.cells == 1
        assert service.requests[-1].json() == {"code": "print('hi')\ndisplay([1])\n6 * 7", "timeout": 5,
                                               "return_files": ["*.csv"]}
        e = s.exec("1 / 0")
        assert e.status == "exception" and not e.ok and e.exit_code == 1
        assert e.exception is not None and e.exception.type == "ZeroDivisionError"
        assert e.exception.message == "division by zero"
        assert "ZeroDivisionError" in repr(e)
        assert e.to_dict()["exception"]["type"] == "ZeroDivisionError"


def test_streamed_cell_calls_back_in_order(service: FakeServer) -> None:
    seen: List[Any] = []
    with Session(url=service.url) as s:
        r = s.exec("print('a')\ndisplay(2)\n3", on_stdout=lambda t: seen.append(("out", t)),
                   on_stderr=lambda t: seen.append(("err", t)), on_display=lambda b: seen.append(("disp", b)))
        assert service.requests[-1].headers["accept"] == "text/event-stream"
    assert seen == [("out", "a\n"), ("disp", {"text/plain": "2"}), ("err", "\ufffd!")]
    assert r.value == "3"


def test_files(service: FakeServer, tmp_path: Any) -> None:
    local = tmp_path / "big.bin"
    local.write_bytes(b"z" * 300000)
    with Session(url=service.url) as s:
        info = s.write_file("data/a b.csv", "x,y\n")
        assert (info.path, info.size) == ("data/a b.csv", 4)
        assert service.requests[-1].method == "PUT"
        assert service.requests[-1].path == "/api/v1/sessions/s-1/files/data/a%20b.csv"
        assert service.requests[-1].headers["content-type"] == "application/octet-stream"
        s.write_file("raw.bin", b"\x00\xff")
        assert s.write_file("big.bin", local).size == 300000
        assert s.read_file("data/a b.csv") == b"x,y\n"
        assert s.read_file("raw.bin") == b"\x00\xff"
        assert s.list_files() == [FileEntry("big.bin", "file", 300000), FileEntry("data/a b.csv", "file", 4),
                                  FileEntry("raw.bin", "file", 2)]
        assert [e.path for e in s.list_files("data")] == ["data/a b.csv"]
        assert service.requests[-1].path == "/api/v1/sessions/s-1/files?path=data"
        with pytest.raises(SandboxRequestError) as err:
            s.read_file("missing.txt")
        assert err.value.status == 404 and not isinstance(err.value, SessionEndedError)
        with pytest.raises(SandboxRequestError) as err:
            s.write_file("../x", "no")
        assert err.value.status == 400 and "must be relative" in err.value.message


def test_info(service: FakeServer) -> None:
    with Session(url=service.url) as s:
        s.exec("1")
        info = s.info()
        assert info.id == s.id and info.state == "idle" and info.cells == 1 and info.memory_mb == 512
        assert info.expires_at == "2026-12-01T16:00:00Z" and not info.ended


def test_a_cell_that_ends_the_session_then_the_next_call_raises(service: FakeServer) -> None:
    s = Session(url=service.url)
    service.sessions.end_on_next_cell = "cell_timeout"  # type: ignore[attr-defined]
    r = s.exec("while True: pass", timeout=1)
    assert r.status == "session_ended" and r.error is not None and r.error.type == "timeout"
    n = len(service.requests)
    with pytest.raises(SessionEndedError) as err:
        s.exec("1")
    assert err.value.reason == "cell_timeout" and err.value.session_id == "s-1"
    assert "time limit" in str(err.value)
    assert isinstance(err.value, SandboxError)
    assert len(service.requests) == n     # known ended: not asked again
    assert s.info().ended_reason == "cell_timeout"
    s.close()


def test_ended_by_the_service_410(service: FakeServer) -> None:
    s = Session(url=service.url)
    service.sessions.sessions["s-1"]["doc"].update(  # type: ignore[attr-defined]
        state="ended", ended_reason="idle_timeout", ended_message="idle for 600 s")
    with pytest.raises(SessionEndedError) as err:
        s.exec("1")
    assert err.value.status == 410 and err.value.reason == "idle_timeout" and "idle for 600 s" in str(err.value)
    for call in (lambda: s.exec("1"), lambda: s.write_file("a", "b"), lambda: s.read_file("a"), s.list_files):
        with pytest.raises(SessionEndedError):
            call()
    s.close()  # no error


def test_the_reason_from_the_message_of_a_410(service: FakeServer) -> None:
    s = Session(url=service.url)
    service.responder = lambda req: Reply(status=410, body=error_doc(
        "session_ended", "the session has ended (lifetime): it lived 3600 s"))
    with pytest.raises(SessionEndedError) as err:
        s.read_file("a")
    assert err.value.reason == "lifetime"
    s.close()


def test_a_file_route_404_for_the_session_is_session_ended(service: FakeServer) -> None:
    s = Session(url=service.url)
    service.responder = lambda req: Reply(status=404, body=error_doc(
        "session_not_found", "no session with this id for this caller"))
    with pytest.raises(SessionEndedError):
        s.read_file("a")
    s.close()


def test_a_missing_file_is_told_by_its_code_not_its_words(service: FakeServer) -> None:
    s = Session(url=service.url)
    service.responder = lambda req: Reply(status=404, body=error_doc("not_found", "no session file named a"))
    with pytest.raises(SandboxRequestError) as err:
        s.read_file("a")
    assert not isinstance(err.value, SessionEndedError) and err.value.code == "not_found"
    assert not s.closed
    service.responder = service.sessions  # type: ignore[attr-defined]
    s.close()


def test_a_410s_reason_is_its_own_field(service: FakeServer) -> None:
    s = Session(url=service.url)
    service.responder = lambda req: Reply(status=410, body={"error": {
        "code": "session_ended", "message": "the session has ended (lifetime): words", "reason": "idle_timeout"}})
    with pytest.raises(SessionEndedError) as err:
        s.exec("1")
    assert err.value.reason == "idle_timeout"
    s.close()


def test_forgotten_by_the_service_404(service: FakeServer) -> None:
    s = Session(url=service.url)
    del service.sessions.sessions["s-1"]  # type: ignore[attr-defined]
    with pytest.raises(SessionEndedError) as err:
        s.exec("1")
    assert err.value.status == 404
    s.close()


def test_after_close_every_call_raises_and_close_is_idempotent(service: FakeServer) -> None:
    s = Session(url=service.url)
    s.close()
    s.close()
    assert s.closed
    assert [r.method for r in service.requests] == ["POST", "DELETE"]
    with pytest.raises(SessionEndedError) as err:
        s.exec("1")
    assert err.value.reason == "deleted"
    with pytest.raises(SessionEndedError):
        s.info()


def test_create_refused_is_not_session_ended(service: FakeServer) -> None:
    service.sessions.create_status = [400]  # type: ignore[attr-defined]
    with pytest.raises(SandboxRequestError) as err:
        Session(url=service.url)
    assert not isinstance(err.value, SessionEndedError)


def test_create_is_retried_after_429_with_retry_after(service: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    service.sessions.create_status = [429]  # type: ignore[attr-defined]
    with pytest.raises(SandboxOverloadedError):
        Session(url=service.url)           # conftest: no retries by default
    service.sessions.create_status = [429]  # type: ignore[attr-defined]
    s = Session(client=Client(service.url, retries=2))
    assert s.id == "s-1"
    s.close()


def test_code_must_be_text(service: FakeServer) -> None:
    with Session(url=service.url) as s:
        with pytest.raises(TypeError):
            s.exec(b"1")  # type: ignore[arg-type]


def test_client_and_url_are_exclusive(service: FakeServer) -> None:
    with pytest.raises(ValueError):
        Session(client=Client(service.url), url=service.url)


# ---------------------------------------------------------------- async

def test_async_session(service: FakeServer) -> None:
    async def main() -> None:
        async with AsyncSession(language="python", url=service.url) as s:
            await s.exec("x = 41")
            assert (await s.exec("x + 1")).value == "42"
            await s.write_file("f.txt", "ff")
            assert await s.read_file("f.txt") == b"ff"
            assert [e.path for e in await s.list_files()] == ["f.txt"]
            assert (await s.info()).cells == 2
            seen: List[str] = []

            async def on_out(t: str) -> None:
                seen.append(t)
            r = await s.exec("print('p')\n5", on_stdout=on_out)
            assert r.value == "5" and seen == ["p\n"]
        assert s.closed
        with pytest.raises(SessionEndedError):
            await s.exec("1")

    asyncio.run(main())
    assert [r.method for r in service.requests][0] == "POST"
    assert service.requests[-1].method == "DELETE"


def test_async_create_and_concurrent_sessions(service: FakeServer) -> None:
    async def one(i: int) -> str:
        s = await AsyncSession.create("python", url=service.url)
        try:
            await s.exec("v = %d" % i)
            return (await s.exec("v * 2")).value or ""
        finally:
            await s.close()

    async def main() -> List[str]:
        return list(await asyncio.gather(*(one(i) for i in range(5))))

    assert asyncio.run(main()) == [str(i * 2) for i in range(5)]
    assert service.sessions.sessions == {}  # type: ignore[attr-defined]


def test_async_ended_session(service: FakeServer) -> None:
    async def main() -> None:
        s = await AsyncSession.create(url=service.url)
        service.sessions.end_on_next_cell = "memory_limit"  # type: ignore[attr-defined]
        r = await s.exec("x = [0] * 10**10")
        assert r.status == "session_ended"
        with pytest.raises(SessionEndedError) as err:
            await s.write_file("a", "b")
        assert err.value.reason == "memory_limit"
        await s.close()

    asyncio.run(main())


def test_session_ended_error_pickles_with_its_reason() -> None:
    import pickle

    err = SessionEndedError("gone", reason="lifetime", session_id="s-9")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is SessionEndedError and isinstance(back, SandboxRequestError)
    assert (back.message, back.status, back.code, back.reason, back.session_id) == (
        "gone", 410, "session_ended", "lifetime", "s-9")


def test_async_session_starts_on_first_use(service: FakeServer) -> None:
    async def main() -> None:
        s = AsyncSession(url=service.url)
        assert s.id == "" and not service.requests
        assert (await s.exec("2 + 2")).value == "4"
        assert s.id == "s-1"
        await s.close()

    asyncio.run(main())
    assert [r.method for r in service.requests] == ["POST", "POST", "DELETE"]
