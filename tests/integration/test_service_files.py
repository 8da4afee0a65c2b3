"""Files in and out of POST /api/v1/exec through the real service: "files" and
"return_files" in the JSON request, every refused path a 400 naming files[i].path (a
size a 413), the same request as multipart/form-data with a 50 MiB file streamed
without the service's memory growing by anything like it, and "file" events in a
stream.

Run: /usr/bin/python3 -m pytest tests/integration/test_files.py -q
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import uuid
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from conftest import connection, post_exec

CSV = "city,temp\nOslo,3\nLima,19\nCairo,24\n"


def test_json_files_in_and_files_out(service_url, openapi):
    code = ("import csv, os\n"
            "rows = list(csv.DictReader(open('data/weather.csv')))\n"
            "print(len(rows), max(int(r['temp']) for r in rows))\n"
            "print(open('raw.bin', 'rb').read().hex())\n"
            "os.makedirs('output', exist_ok=True)\n"
            "open('output/summary.txt', 'w').write('hot: Cairo\\n')\n"
            "open('notes.md', 'w').write('# notes\\n')\n")
    status, headers, res = post_exec(service_url, {
        "code": code,
        "files": [{"path": "data/weather.csv", "content": CSV},
                  {"path": "raw.bin", "content": base64.b64encode(b"\x00\xff").decode(), "encoding": "base64"}],
        "return_files": ["*.md"],
    })
    assert status == 200, res
    assert res["stdout"] == "3 24\n00ff\n", res
    files = {f["path"]: f for f in res["files"]}
    assert set(files) == {"output/summary.txt", "notes.md"}
    assert files["output/summary.txt"]["content"] == "hot: Cairo\n"
    assert files["output/summary.txt"]["encoding"] == "utf-8"
    assert files["output/summary.txt"]["size"] == len("hot: Cairo\n")
    openapi.check("POST", "/api/v1/exec", 200, headers, res)


@pytest.mark.parametrize("files,index", [
    ([{"path": "/etc/passwd", "content": "x"}], 0),
    ([{"path": "a/../../b", "content": "x"}], 0),
    ([{"path": "..", "content": "x"}], 0),
    ([{"path": "ok.txt", "content": "x"}, {"path": "./ok.txt", "content": "y"}], 1),
    ([{"path": "a", "content": "x"}, {"path": "a/b", "content": "y"}], 1),
    ([{"path": "", "content": "x"}], 0),
    ([{"path": "bad\nname", "content": "x"}], 0),
])
def test_refused_paths_name_the_file(service_url, openapi, files, index):
    status, headers, res = post_exec(service_url, {"code": "print(1)", "files": files})
    assert status == 400, res
    assert res["error"]["code"] == "invalid_request"
    assert f"files[{index}].path" in res["error"]["message"], res
    openapi.check("POST", "/api/v1/exec", 400, headers, res)


def test_refused_shapes(service_url):
    for files, field in [("x", "files"), ([{"content": "x"}], "files[0].path"),
                         ([{"path": "a", "content": "!!", "encoding": "base64"}], "files[0].content"),
                         ([{"path": "a", "content": "x", "encoding": "latin-1"}], "files[0].encoding"),
                         ([{"path": "a", "content": "x", "mode": 7}], "files[0]")]:
        status, _, res = post_exec(service_url, {"code": "print(1)", "files": files})
        assert status == 400 and field in res["error"]["message"], (files, res)
    status, _, res = post_exec(service_url, {"code": "print(1)", "return_files": [""]})
    assert status == 400 and "return_files[0]" in res["error"]["message"], res


def test_too_many_and_too_large(start_service):
    svc = start_service(env={"MAX_FILES": "2", "MAX_FILE_BYTES": "1k", "MAX_FILES_BYTES": "1500"})
    three = [{"path": f"f{i}", "content": "x"} for i in range(3)]
    status, _, res = post_exec(svc.url, {"code": "print(1)", "files": three})
    assert status == 413 and "MAX_FILES" in res["error"]["message"], res
    status, res = post_multipart(svc.url, {"code": "print(1)"}, [(f"m{i}", b"x") for i in range(3)])
    assert status == 413 and "MAX_FILES" in res["error"]["message"], res
    status, _, res = post_exec(svc.url, {"code": "print(1)", "files": [{"path": "big", "content": "x" * 2000}]})
    assert status == 413 and "files[0].path" in res["error"]["message"], res
    # multipart: the same limits while the bytes come
    status, res = post_multipart(svc.url, {"code": "print(1)"}, [("big.bin", b"y" * 2000)])
    assert status == 413 and "files[0].path" in res["error"]["message"], res
    status, res = post_multipart(svc.url, {"code": "print(1)"},
                                 [("a", b"y" * 800), ("b", b"y" * 800)])
    assert status == 413 and "files[1].path" in res["error"]["message"], res


# ---- multipart --------------------------------------------------------------------------


def multipart_chunks(boundary: str, request: Dict[str, Any],
                     files: List[Tuple[str, Any]]) -> Iterator[bytes]:
    yield (f"--{boundary}\r\nContent-Disposition: form-data; name=\"request\"\r\n"
           f"Content-Type: application/json\r\n\r\n").encode()
    yield json.dumps(request).encode()
    for path, content in files:
        yield (f"\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; "
               f"filename=\"{path}\"\r\nContent-Type: application/octet-stream\r\n\r\n").encode()
        if isinstance(content, bytes):
            yield content
        else:
            yield from content
    yield f"\r\n--{boundary}--\r\n".encode()


def post_multipart(url: str, request: Dict[str, Any], files: List[Tuple[str, Any]],
                   length: int = -1, timeout: float = 300.0) -> Tuple[int, Any]:
    boundary = "hxs" + uuid.uuid4().hex
    if length < 0:
        length = sum(len(c) for c in multipart_chunks(boundary, request, files))
    conn = connection(url, timeout)
    try:
        conn.putrequest("POST", "/api/v1/exec")
        conn.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
        conn.putheader("Content-Length", str(length))
        conn.endheaders()
        for chunk in multipart_chunks(boundary, request, files):
            conn.send(chunk)
        resp = conn.getresponse()
        body = resp.read()
        return resp.status, json.loads(body)
    finally:
        conn.close()


def vm_kib(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise AssertionError(f"{key} not in /proc/{pid}/status")


def test_multipart_50mib_streams_without_holding_it(start_service):
    svc = start_service(env={"SANDBOX_TMPFS_MB": "128"})
    pid = svc.proc.pid
    size, block = 50 << 20, os.urandom(1 << 20)
    digest = hashlib.sha256(block * 50).hexdigest()
    # warm the service up, so what it allocates once is not counted
    status, _ = post_multipart(svc.url, {"code": "print(1)"}, [("warm.bin", block)])
    assert status == 200
    before = vm_kib(pid, "VmHWM")

    def blocks() -> Iterator[bytes]:
        for _ in range(size // len(block)):
            yield block

    code = ("import hashlib, os\n"
            "h = hashlib.sha256(open('data/big.bin', 'rb').read()).hexdigest()\n"
            "print(os.path.getsize('data/big.bin'), h, open('small.txt').read())\n")
    request = {"code": code, "language": "python", "timeout": 30,
               "files": [{"path": "small.txt", "content": "json part"}]}
    # the length without the file's bytes in memory: the parts' framing, plus its size
    # (post_multipart's boundaries are all as long as this one)
    framing = sum(len(c) for c in multipart_chunks("hxs" + "0" * 32, request, [("data/big.bin", b"")]))
    status, res = post_multipart(svc.url, request, [("data/big.bin", blocks())], length=framing + size)
    assert status == 200, res
    assert res["stdout"] == f"{size} {digest} json part\n", res["stderr"]
    after = vm_kib(pid, "VmHWM")
    print(f"service VmHWM {before} KiB before, {after} KiB after receiving {size >> 20} MiB")
    # far below the 50 MiB it received: the file went to disk, not to memory
    assert after - before < 16 * 1024, f"VmHWM grew by {after - before} KiB while receiving 50 MiB"


def test_multipart_refusals(service_url):
    status, res = post_multipart(service_url, {"code": "print(1)"}, [("", b"x")])
    assert status == 400 and "files[0].path" in res["error"]["message"], res
    status, res = post_multipart(service_url, {"code": "print(1)"}, [("/abs", b"x")])
    assert status == 400 and "files[0].path" in res["error"]["message"], res
    # no request part
    conn = connection(service_url, 60)
    try:
        body = b"--B\r\nContent-Disposition: form-data; name=\"files\"; filename=\"a\"\r\n\r\nx\r\n--B--\r\n"
        conn.request("POST", "/api/v1/exec", body=body,
                     headers={"Content-Type": "multipart/form-data; boundary=B"})
        resp = conn.getresponse()
        res = json.loads(resp.read())
    finally:
        conn.close()
    assert resp.status == 400 and "request" in res["error"]["message"], res


def test_upload_staging_budget_refuses_and_is_given_back(start_service):
    """UPLOAD_STAGING_BYTES bounds what all requests stage under STATE_DIR at once: an
    upload that would go past it is a 429 naming the setting, with Retry-After, and the
    bytes of a request are given back when it ends, so uploads fit again after it."""
    from conftest import get_metrics, wait_for
    svc = start_service(env={"UPLOAD_STAGING_BYTES": "1M", "MAX_FILE_BYTES": "2M", "MAX_FILES_BYTES": "2M"})
    staged = "hexr_sandbox_upload_staged_bytes"
    assert get_metrics(svc.url)["hexr_sandbox_upload_staging_max_bytes"] == 1 << 20
    code = "import os\nprint(os.path.getsize('a.bin'))\n"
    boundary = "hxs" + uuid.uuid4().hex
    chunks = list(multipart_chunks(boundary, {"code": code}, [("a.bin", b"x" * (700 << 10))]))
    conn = connection(svc.url, 120)
    try:
        # the first upload sends all but its last part, and holds its 700 KiB staged
        conn.putrequest("POST", "/api/v1/exec")
        conn.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
        conn.putheader("Content-Length", str(sum(len(c) for c in chunks)))
        conn.endheaders()
        for chunk in chunks[:-1]:
            conn.send(chunk)
        wait_for(lambda: get_metrics(svc.url)[staged] >= (700 << 10) - 256, 30, "the first upload staged")

        # a second one would go past 1 MiB: refused while its bytes arrive
        b2 = "hxs" + uuid.uuid4().hex
        body = b"".join(multipart_chunks(b2, {"code": "print(2)"}, [("b.bin", b"y" * (500 << 10))]))
        c2 = connection(svc.url, 120)
        try:
            c2.request("POST", "/api/v1/exec", body=body,
                       headers={"Content-Type": f"multipart/form-data; boundary={b2}"})
            resp = c2.getresponse()
            res = json.loads(resp.read())
        finally:
            c2.close()
        assert resp.status == 429, res
        assert res["error"]["code"] == "overloaded", res
        assert "UPLOAD_STAGING_BYTES" in res["error"]["message"], res
        assert int(resp.getheader("Retry-After")) >= 1
        # the refused upload gave its bytes back at once: only the first one's are held
        assert get_metrics(svc.url)[staged] < 1 << 20

        conn.send(chunks[-1])
        resp = conn.getresponse()
        res = json.loads(resp.read())
        assert resp.status == 200, res
        assert res["stdout"] == f"{700 << 10}\n", res
    finally:
        conn.close()
    # the first request ended: its bytes are given back, and the second upload fits now
    wait_for(lambda: get_metrics(svc.url)[staged] == 0, 30, "the staged bytes given back")
    status, res = post_multipart(svc.url, {"code": "import os\nprint(os.path.getsize('b.bin'))\n"},
                                 [("b.bin", b"y" * (900 << 10))])
    assert status == 200 and res["stdout"] == f"{900 << 10}\n", res
    assert get_metrics(svc.url)["hexr_sandbox_rejected_requests_total{reason=\"overloaded\"}"] == 1
    wait_for(lambda: get_metrics(svc.url)[staged] == 0, 30, "the staged bytes given back")


def test_stream_file_events(service_url, openapi):
    from test_stream import read_events
    conn = connection(service_url, 120)
    try:
        conn.request("POST", "/api/v1/exec", body=json.dumps({
            "code": "import os\nos.makedirs('output', exist_ok=True)\n"
                    "open('output/a.txt', 'w').write('A')\nprint('done')"}).encode(),
            headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
        resp = conn.getresponse()
        events, _ = read_events(resp)
    finally:
        conn.close()
    names = [n for n, _ in events]
    assert "file" in names and names[-1] == "result"
    assert names.index("file") < names.index("result")
    f = dict(events)["file"]
    assert f["path"] == "output/a.txt" and f["content"] == "A"
    openapi.check_events("POST", "/api/v1/exec", events)
