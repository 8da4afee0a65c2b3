"""Files in and out of the Python SDK against a scripted service (issue 14).

In: ``files=`` inline in the JSON request (text as utf-8, bytes as base64), or
``multipart/form-data`` when a local file is given or the files are large, local
files streamed from disk (memory stays far below the file's size) and re-read
on a retry; ``return_files`` and ``stdin`` sent as given. Out: the result's
``files`` decoded from their encoding, their metadata, ``error`` and the
omitted-byte counts.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import socket
import threading
import tracemalloc
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest

from test_sdk_unit import BOTH, FakeServer, Reply, Seen, cli, error_doc, result_doc

from hexr.sandbox import (
    Client,
    ExecError,
    ExecResult,
    FileInfo,
    SandboxInternalError,
    SandboxRequestError,
)


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    server = FakeServer()
    server.reply(Reply(body=result_doc()))  # the default one reads the body as JSON
    try:
        yield server
    finally:
        server.stop()


def parse_multipart(seen: Seen) -> Tuple[Dict[str, Any], List[Tuple[str, bytes]]]:
    """The JSON request part and the (filename, bytes) file parts of a multipart request."""
    ctype = seen.headers["content-type"]
    assert ctype.startswith("multipart/form-data; boundary=")
    boundary = ctype.split("boundary=", 1)[1].encode()
    body = seen.body
    assert body.endswith(b"\r\n--" + boundary + b"--\r\n")
    parts = body[: -len(b"\r\n--" + boundary + b"--\r\n")].split(b"--" + boundary + b"\r\n")
    assert parts[0] == b""
    request: Dict[str, Any] = {}
    files: List[Tuple[str, bytes]] = []
    for i, part in enumerate(parts[1:]):
        head, _, content = part.partition(b"\r\n\r\n")
        if i < len(parts) - 2:
            assert content.endswith(b"\r\n")
            content = content[:-2]
        lines = head.decode().split("\r\n")
        disposition = lines[0]
        if i == 0:
            assert disposition == 'Content-Disposition: form-data; name="request"'
            assert lines[1] == "Content-Type: application/json"
            request = json.loads(content)
        else:
            prefix = 'Content-Disposition: form-data; name="files"; filename="'
            assert disposition.startswith(prefix) and disposition.endswith('"')
            files.append((disposition[len(prefix):-1], content))
    return request, files


# ---------------------------------------------------------------------------
# Files in: inline JSON


@BOTH
def test_small_files_go_inline(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    call(Client(fake.url), "x", files={"data.csv": "a,b\n1,2\n", "bin/x.bin": b"\x00\xff\x80"})
    seen = fake.requests[-1]
    assert seen.headers["content-type"] == "application/json"
    assert seen.json() == {
        "code": "x", "language": "python",
        "files": [
            {"path": "data.csv", "content": "a,b\n1,2\n", "encoding": "utf-8"},
            {"path": "bin/x.bin", "content": base64.b64encode(b"\x00\xff\x80").decode(), "encoding": "base64"},
        ],
    }


def test_files_as_pairs_keep_order_and_duplicates_for_the_service_to_judge(fake: FakeServer) -> None:
    fake.reply(Reply(status=400, body=error_doc("invalid_request", "files[1].path: collides with files[0]")))
    with pytest.raises(SandboxRequestError, match=r"files\[1\]\.path"):
        Client(fake.url).exec("x", files=[("a.txt", "1"), ("a.txt", b"2")])
    assert [f["path"] for f in fake.requests[-1].json()["files"]] == ["a.txt", "a.txt"]


def test_empty_files_are_sent_and_none_is_not(fake: FakeServer) -> None:
    Client(fake.url).exec("x", files={})
    assert fake.requests[-1].json()["files"] == []
    Client(fake.url).exec("x", files=None)
    assert "files" not in fake.requests[-1].json()


@BOTH
def test_return_files_and_stdin_are_sent(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    call(Client(fake.url), "x", return_files=("*.csv", "out/**"), stdin="line 1\nline 2\n")
    assert fake.requests[-1].json() == {
        "code": "x", "language": "python", "stdin": "line 1\nline 2\n", "return_files": ["*.csv", "out/**"],
    }
    call(Client(fake.url), "x", return_files="*.png", stdin=b"bytes that are text")
    body = fake.requests[-1].json()
    assert body["return_files"] == ["*.png"] and body["stdin"] == "bytes that are text"


@pytest.mark.parametrize("kw,message", [
    ({"files": 5}, "files must be a mapping"),
    ({"files": "a.txt"}, "files must be a mapping"),
    ({"files": [("a.txt",)]}, r"files\[0\] must be a \(path, content\) pair"),
    ({"files": {"a.txt": 3}}, r"files\[0\]: content must be bytes, str or a pathlib.Path"),
    ({"files": {5: "x"}}, r"files\[0\]: the path must be a str"),
    ({"stdin": 5}, "stdin must be a str"),
    ({"stdin": b"\xff"}, "stdin must be text"),
])
def test_wrong_types_are_refused_before_sending(fake: FakeServer, kw: Dict[str, Any], message: str) -> None:
    with pytest.raises(TypeError, match=message):
        Client(fake.url).exec("x", **kw)
    assert fake.requests == []


def test_missing_local_file_is_refused_before_sending(fake: FakeServer, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        Client(fake.url).exec("x", files={"a.csv": tmp_path / "missing.csv"})
    with pytest.raises(OSError, match="not a regular file"):
        Client(fake.url).exec("x", files={"a.csv": tmp_path})
    assert fake.requests == []


# ---------------------------------------------------------------------------
# Files in: multipart


@BOTH
def test_local_file_goes_multipart(fake: FakeServer, call: Callable[..., ExecResult], tmp_path: Path) -> None:
    local = tmp_path / "big.csv"
    local.write_bytes(b"a,b\n" + b"1,2\n" * 1000)
    call(Client(fake.url), "x", timeout=5, files=[("data/big.csv", local), ("note.txt", "héllo"), ("b", b"\x00")])
    seen = fake.requests[-1]
    assert int(seen.headers["content-length"]) == len(seen.body)
    request, files = parse_multipart(seen)
    assert request == {"code": "x", "language": "python", "timeout": 5}
    assert files == [("data/big.csv", local.read_bytes()), ("note.txt", "héllo".encode()), ("b", b"\x00")]


def test_large_in_memory_files_go_multipart(fake: FakeServer) -> None:
    big = bytes(range(256)) * (5 << 10)  # 1.25 MiB
    Client(fake.url).exec("x", files={"a.bin": big, "b.txt": "small"})
    request, files = parse_multipart(fake.requests[-1])
    assert "files" not in request
    assert files == [("a.bin", big), ("b.txt", b"small")]


def test_up_to_the_inline_limit_stays_json(fake: FakeServer) -> None:
    Client(fake.url).exec("x", files={"a.bin": b"\x01" * (1 << 20)})
    assert fake.requests[-1].headers["content-type"] == "application/json"


def test_multipart_refuses_a_path_it_cannot_quote(fake: FakeServer, tmp_path: Path) -> None:
    local = tmp_path / "f"
    local.write_bytes(b"x")
    with pytest.raises(ValueError, match="cannot be sent in a multipart upload"):
        Client(fake.url).exec("x", files={'a"b': local})
    assert fake.requests == []


def test_retry_sends_the_upload_again_from_disk(fake: FakeServer, tmp_path: Path) -> None:
    local = tmp_path / "f.bin"
    local.write_bytes(b"\x07" * 200_000)
    replies = [Reply(status=503, body=error_doc("draining", "draining")), Reply(body=result_doc())]
    fake.responder = lambda req: replies.pop(0)
    Client(fake.url, retries=1, retry_backoff=0.01).exec("x", files={"f.bin": local})
    assert len(fake.requests) == 2
    for seen in fake.requests:
        assert parse_multipart(seen)[1] == [("f.bin", local.read_bytes())]


class CountingServer:
    """Reads each request body in small pieces, keeping only its length and hash."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.url = "http://127.0.0.1:{}".format(self.sock.getsockname()[1])
        self.seen: List[Tuple[int, str]] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                f = conn.makefile("rb")
                length = 0
                while True:
                    line = f.readline()
                    if line in (b"\r\n", b""):
                        break
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                digest, left = hashlib.sha256(), length
                while left:
                    piece = f.read(min(left, 65536))
                    digest.update(piece)
                    left -= len(piece)
                self.seen.append((length, digest.hexdigest()))
                body = json.dumps(result_doc()).encode()
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    def stop(self) -> None:
        self.sock.close()
        self.thread.join(5)


@BOTH
def test_local_file_is_streamed_not_read_whole(call: Callable[..., ExecResult], tmp_path: Path) -> None:
    size = 48 << 20
    local = tmp_path / "big.bin"
    with open(local, "wb") as f:
        for i in range(size >> 20):
            f.write(bytes([i]) * (1 << 20))
    server = CountingServer()
    try:
        tracemalloc.start()
        call(Client(server.url), "x", files={"big.bin": local})
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        server.stop()
    assert peak < 4 << 20, "peak {} bytes while uploading {} bytes".format(peak, size)
    (length, _), = server.seen
    assert size < length < size + 2048


def test_a_local_file_that_shrank_abandons_the_upload(fake: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hexr.sandbox import _files

    local = tmp_path / "f.bin"
    local.write_bytes(b"x" * 100_000)
    real = _files.normalise

    def shrink_after_stat(files: Any) -> Any:
        local.write_bytes(b"x" * 100_000)
        specs = real(files)
        local.write_bytes(b"x" * 10)
        return specs

    monkeypatch.setattr(_files, "normalise", shrink_after_stat)
    with pytest.raises(_files.LocalFileError, match="shrank"):
        Client(fake.url).exec("x", files={"f.bin": local})
    with pytest.raises(_files.LocalFileError, match="shrank"):
        asyncio.run(Client(fake.url).exec_async("x", files={"f.bin": local}))


# ---------------------------------------------------------------------------
# Files out, error, omitted bytes


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))


def files_doc() -> List[Dict[str, Any]]:
    return [
        {"path": "output/figure-1.png", "size": len(PNG), "mime": "image/png", "encoding": "base64",
         "content": base64.b64encode(PNG).decode(), "truncated": False},
        {"path": "output/summary.csv", "size": 8, "mime": "text/csv", "encoding": "utf-8",
         "content": "a,b\n1,2\n", "truncated": False},
        {"path": "output/huge.bin", "size": 1 << 30, "mime": "application/octet-stream",
         "encoding": "base64", "content": "", "truncated": True},
    ]


@BOTH
def test_returned_files_are_decoded(fake: FakeServer, call: Callable[..., ExecResult]) -> None:
    fake.reply(Reply(body=result_doc(files=files_doc())))
    result = call(Client(fake.url), "x")
    assert result.files == {"output/figure-1.png": PNG, "output/summary.csv": b"a,b\n1,2\n"}
    assert list(result.files) == ["output/figure-1.png", "output/summary.csv"]
    assert result.file_info == (
        FileInfo("output/figure-1.png", len(PNG), "image/png", False),
        FileInfo("output/summary.csv", 8, "text/csv", False),
        FileInfo("output/huge.bin", 1 << 30, "application/octet-stream", True),
    )
    assert result.error is None
    assert "files=['output/figure-1.png', 'output/summary.csv', 'output/huge.bin']" in repr(result)


def test_result_round_trips_through_to_dict() -> None:
    doc = result_doc(files=files_doc(), error={"type": "timeout", "message": "killed: time limit of 1 s exceeded"},
                     stdout_omitted_bytes=12345, stderr_omitted_bytes=0)
    result = ExecResult.from_response(doc)
    assert ExecResult.from_response(result.to_dict()) == result
    assert result.to_dict()["files"] == files_doc()
    assert json.dumps(result.to_dict())


def test_error_and_omitted_bytes(fake: FakeServer) -> None:
    message = "killed: time limit of 1 s exceeded"
    fake.reply(Reply(body=result_doc(
        exit_code=124, timed_out=True, stderr="hexr-sandbox: " + message + "\n",
        error={"type": "timeout", "message": message}, stdout_omitted_bytes=999, stderr_omitted_bytes=7)))
    result = Client(fake.url).exec("x")
    assert result.error == ExecError("timeout", message)
    assert (result.stdout_omitted_bytes, result.stderr_omitted_bytes) == (999, 7)
    assert "error=ExecError(type='timeout'" in repr(result)


def test_a_result_without_the_new_fields_has_neutral_values() -> None:
    result = ExecResult.from_response(result_doc())
    assert (result.files, result.file_info, result.error) == ({}, (), None)
    assert (result.stdout_omitted_bytes, result.stderr_omitted_bytes) == (0, 0)
    assert "files" not in result.to_dict() and "error" not in result.to_dict()
    assert ExecResult.from_response(result_doc(files=None, error=None)) == result
    hash(result)  # still hashable (files is left out of the hash)


@pytest.mark.parametrize("overrides", [
    {"files": {}},
    {"files": ["x"]},
    {"files": [{"size": 1}]},
    {"files": [{"path": "a", "encoding": "base64", "content": "!!"}]},
    {"files": [{"path": "a", "encoding": "gzip", "content": ""}]},
    {"files": [{"path": "a", "size": -1}]},
    {"files": [{"path": "a", "truncated": "no"}]},
    {"error": "timeout"},
    {"error": {"type": 5}},
], ids=["not-array", "not-object", "no-path", "bad-base64", "bad-encoding", "bad-size", "bad-truncated",
        "error-string", "error-type"])
def test_unusable_files_or_error_are_internal_errors(fake: FakeServer, overrides: Dict[str, Any]) -> None:
    fake.reply(Reply(body=result_doc(**overrides)))
    with pytest.raises(SandboxInternalError) as info:
        Client(fake.url).exec("x")
    assert info.value.code == "bad_response"


# ---------------------------------------------------------------------------
# Command line: --file, --return, --out


def test_cli_sends_files_and_return_globs(fake: FakeServer, tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_bytes(b"a,b\n1,2\n")
    (tmp_path / "odd:name.txt").write_bytes(b"colon")
    proc = cli(["--file", str(tmp_path / "a.csv"), "--file", str(tmp_path / "a.csv") + ":data/in.csv",
                "--file", str(tmp_path / "odd:name.txt"), "--return", "*.log", "--return", "out/**", "-c", "x"], fake.url)
    assert proc.returncode == 0, proc.stderr
    request, files = parse_multipart(fake.requests[-1])
    assert request == {"code": "x", "language": "python", "return_files": ["*.log", "out/**"]}
    assert files == [("a.csv", b"a,b\n1,2\n"), ("data/in.csv", b"a,b\n1,2\n"), ("odd:name.txt", b"colon")]


def test_cli_refuses_a_missing_local_file(fake: FakeServer, tmp_path: Path) -> None:
    proc = cli(["--file", str(tmp_path / "missing.csv") + ":x.csv", "-c", "x"], fake.url)
    assert proc.returncode == 2 and b"no such local file" in proc.stderr
    assert fake.requests == []


def test_cli_writes_returned_files_under_out_and_never_outside(fake: FakeServer, tmp_path: Path) -> None:
    out = tmp_path / "out"
    fake.reply(Reply(body=result_doc(stdout="", files=files_doc())))
    proc = cli(["--out", str(out), "-c", "x"], fake.url)
    assert proc.returncode == 0, proc.stderr
    assert (out / "output" / "figure-1.png").read_bytes() == PNG
    assert (out / "output" / "summary.csv").read_bytes() == b"a,b\n1,2\n"
    assert not (out / "output" / "huge.bin").exists()  # truncated: not returned

    (tmp_path / "elsewhere").mkdir()
    (out / "link").symlink_to(tmp_path / "elsewhere")
    hostile = [dict(files_doc()[1], path=p) for p in ("../escape.txt", "/abs.txt", "link/through.txt", "link/sub/deep.txt", "a//b.txt")]
    fake.reply(Reply(body=result_doc(stdout="", files=hostile + [dict(files_doc()[1], path="fine.txt")])))
    proc = cli(["--out", str(out), "-c", "x"], fake.url)
    assert proc.returncode == 2
    for name in ("../escape.txt", "/abs.txt", "link/through.txt", "link/sub/deep.txt", "a//b.txt"):
        assert repr(name).encode() in proc.stderr
    assert not (tmp_path / "escape.txt").exists() and list((tmp_path / "elsewhere").iterdir()) == []
    assert (out / "fine.txt").read_bytes() == b"a,b\n1,2\n"
