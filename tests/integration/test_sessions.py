"""Sessions through the service (/api/v1/sessions, docs/sessions.md): state across cells,
the last expression's value and rich outputs, exceptions, an interrupt at the time limit
that keeps state, a stuck cell ending its session with the reason, files in a live
session, streaming, bash and javascript state; idle expiry and lifetime leaving nothing
behind; another caller's 404; the quotas; many sessions at once; SIGTERM and SIGKILL of
the service. Every answer is checked against docs/openapi.yaml.

The cells are backend-neutral: the `backend` parameter runs them under the namespace
backend, and under the microVM backend too when HXS_TEST_SESSIONS_VM=1 (its environment
as tests/vm sets it: SANDBOX_VM_IMAGE_DIR...).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import tempfile
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from conftest import http_request, safe_rmtree, wait_for
from hxstest import host as _host
from hxstest.client import connection

BACKENDS = ["namespaces"] + (["qemu"] if os.environ.get("HXS_TEST_SESSIONS_VM") == "1" else [])
PREFIX = "/api/v1/sessions"
TD = "spiffe://example.org"
ALICE, BOB = f"{TD}/agents/alice", f"{TD}/agents/bob"


# ---- helpers ------------------------------------------------------------------------------------


class Api:
    """Requests to one service, each answer checked against the OpenAPI document."""

    def __init__(self, svc, openapi, caller: Optional[str] = None):
        self.svc, self.openapi, self.caller = svc, openapi, caller

    def call(self, method: str, path: str, body: Any = None, doc_path: Optional[str] = None,
             headers: Optional[Dict[str, str]] = None, timeout: float = 60) -> Tuple[int, Dict[str, str], Any]:
        hdrs = dict(headers or {})
        if self.caller:
            hdrs["X-Forwarded-Client-Cert"] = f"URI={self.caller}"
        status, rh, res = http_request(self.svc.url, method, path, body, hdrs, timeout=timeout)
        if doc_path and method != "HEAD":
            self.openapi.check(method, doc_path, status, rh, res)
        return status, rh, res

    def create(self, expect: int = 201, **body: Any) -> Dict[str, Any]:
        status, _, res = self.call("POST", PREFIX, body, PREFIX)
        assert status == expect, res
        return res

    def cell(self, sid: str, code: str, expect: int = 200, **extra: Any) -> Dict[str, Any]:
        status, _, res = self.call("POST", f"{PREFIX}/{sid}/exec", dict(code=code, **extra),
                                   PREFIX + "/{id}/exec")
        assert status == expect, res
        return res

    def info(self, sid: str) -> Tuple[int, Any]:
        status, _, res = self.call("GET", f"{PREFIX}/{sid}", doc_path=PREFIX + "/{id}")
        return status, res

    def delete(self, sid: str) -> int:
        return self.call("DELETE", f"{PREFIX}/{sid}", doc_path=PREFIX + "/{id}")[0]


def backend_env(backend: str) -> Dict[str, str]:
    return {"SANDBOX_BACKEND": backend}


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def svc(backend) -> Iterator[Any]:
    from conftest import _launch, _stop_checked
    s = _launch(backend_env(backend), None)
    yield s
    _stop_checked(s)


@pytest.fixture
def api(svc, openapi) -> Api:
    return Api(svc, openapi)


@pytest.fixture
def py(api) -> Iterator[str]:
    sid = api.create(language="python")["id"]
    yield sid
    api.delete(sid)


@pytest.fixture
def own_state() -> Iterator[str]:
    top = tempfile.mkdtemp(prefix="hxs-sessions-")
    os.chmod(top, 0o755)
    state = os.path.join(top, "state")
    os.mkdir(state, 0o755)
    yield state
    safe_rmtree(top)


def leftovers(svc, state: str) -> List[str]:
    """Sandbox processes, execution cgroups and mounts the service left (templates aside)."""
    pid = svc.proc.pid
    templates = set()
    for t in _host.template_processes(state, _host.uid_base()):
        cg = _host.read_proc("/proc/%d/cgroup" % t) or ""
        templates |= {part.rsplit("/", 1)[-1] for part in cg.split() if "/hexr-sandbox/" in part}
    problems = ["process: " + p for p in _host.leaked_sandbox_processes({pid})]
    problems += ["cgroup: " + c for c in _host.leftover_cgroups({pid}) if os.path.basename(c) not in templates]
    problems += ["mount: " + m for m in _host.host_mounts_under(state)]
    root = os.path.join(state, "root")
    if os.path.isdir(root) and os.listdir(root):
        problems.append("STATE_DIR/root is not empty")
    return problems


def assert_nothing_left(svc, state: str) -> None:
    if not _host.wait_until(lambda: not leftovers(svc, state), 15):
        raise AssertionError("left behind: %s" % leftovers(svc, state))


def events(svc, path: str, body: Dict[str, Any]) -> List[Tuple[str, Any]]:
    conn = connection(svc.url, 60)
    try:
        conn.request("POST", path, body=json.dumps(body),
                     headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
        resp = conn.getresponse()
        assert resp.status == 200
        assert resp.getheader("Content-Type") == "text/event-stream"
        text = resp.read().decode()
    finally:
        conn.close()
    out = []
    for block in text.split("\n\n"):
        lines = [ln for ln in block.split("\n") if ln and not ln.startswith(":")]
        if lines:
            name = lines[0].split(": ", 1)[1]
            out.append((name, json.loads(lines[1].split(": ", 1)[1])))
    return out


# ---- cells --------------------------------------------------------------------------------------


def test_state_values_and_exceptions(api, py):
    assert api.cell(py, "x = 41")["value"] is None
    res = api.cell(py, "print('hi')\nx + 1")
    assert res["status"] == "ok" and res["stdout"] == "hi\n" and res["value"] == "42", res
    assert res["value_data"] == {"text/plain": "42"} and res["session"]["cells"] == 2
    assert res["session"]["state"] == "idle" and res["session"]["id"] == py
    res = api.cell(py, "import math\ndef f(n):\n    return 1 / n\nf(0)")
    assert res["status"] == "exception" and res["value"] is None, res
    exc = res["exception"]
    assert exc["type"] == "ZeroDivisionError" and exc["message"] == "division by zero", exc
    assert "f(0)" in exc["traceback"] and "/opt/hexr-session" not in exc["traceback"].split("line 2")[0]
    assert api.cell(py, "math.sqrt(x + 8)")["value"] == "7.0"


def test_rich_outputs_dataframe_and_figure(api, py):
    res = api.cell(py, "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})\ndf")
    assert res["status"] == "ok", res
    assert "<table" in res["value_data"]["text/html"] and "a" in res["value"]
    res = api.cell(py, "import matplotlib.pyplot as plt\nfig = plt.figure()\nplt.plot([1, 2, 3])\nfig")
    assert res["status"] == "ok", res
    png = res["value_data"].get("image/png") or next(
        (o["data"]["image/png"] for o in res["outputs"] if "image/png" in o["data"]), None)
    assert png and base64.b64decode(png)[:8] == b"\x89PNG\r\n\x1a\n", res
    res = api.cell(py, "display(df)\ndisplay(1)\nNone")
    assert [o["type"] for o in res["outputs"]] == ["display", "display"], res
    assert "text/html" in res["outputs"][0]["data"] and res["outputs"][1]["data"]["text/plain"] == "1"


def test_interrupt_at_the_time_limit_keeps_state(api, py):
    api.cell(py, "x = 'kept'")
    t0 = time.monotonic()
    res = api.cell(py, "while True: pass", timeout=1)
    assert time.monotonic() - t0 < 2.5
    assert res["status"] == "interrupted" and res["error"]["type"] == "timeout", res
    assert res["exception"]["type"] == "KeyboardInterrupt"
    assert api.cell(py, "x")["value"] == "'kept'"


def test_a_cell_that_does_not_stop_ends_its_session(api, py):
    # a regular expression never checks for signals: the interrupt cannot land
    res = api.cell(py, "import re\nre.match(r'(a+)+b', 'a' * 64)", timeout=1)
    assert res["status"] == "session_ended" and res["error"]["type"] == "timeout", res
    assert res["session"]["state"] == "ended" and res["session"]["ended_reason"] == "cell_timeout"
    status, info = api.info(py)
    assert status == 200 and info["state"] == "ended" and info["ended_reason"] == "cell_timeout", info
    status, _, err = api.call("POST", f"{PREFIX}/{py}/exec", {"code": "1"}, PREFIX + "/{id}/exec")
    assert status == 410 and err["error"]["code"] == "session_ended", err
    assert err["error"]["reason"] == "cell_timeout" and "cell_timeout" in err["error"]["message"], err


def test_bash_and_javascript_keep_their_state(api):
    sh = api.create(language="bash")["id"]
    api.cell(sh, "cd /tmp && X=5 && f() { echo \"f$1\"; }")
    assert api.cell(sh, "f $X; pwd")["stdout"] == "f5\n/tmp\n"
    api.delete(sh)
    js = api.create(language="javascript")["id"]
    api.cell(js, "let a = 20; const b = 1; function g(n) { return n * 2 }")
    res = api.cell(js, "console.log('hey'); g(a + b)")
    assert res["stdout"] == "hey\n" and res["value"] == "42", res
    api.delete(js)


def test_cells_queue_in_arrival_order(api, py):
    import threading
    results: Dict[int, Any] = {}

    def run(i: int) -> None:
        results[i] = api.cell(py, f"import time\ntime.sleep(0.05)\nseen = globals().get('seen', []) + [{i}]\nseen")
    threads = []
    for i in range(4):
        t = threading.Thread(target=run, args=(i,))
        t.start()
        threads.append(t)
        time.sleep(0.02)
    for t in threads:
        t.join(30)
    final = api.cell(py, "seen")["value"]
    assert sorted(json.loads(final)) == [0, 1, 2, 3] and len(results) == 4, (final, results)
    assert json.loads(final) == [0, 1, 2, 3]


def test_streaming_a_cell(svc, api, py, openapi):
    evs = events(svc, f"{PREFIX}/{py}/exec",
                 {"code": "import os\nos.makedirs('output', exist_ok=True)\nprint('one', flush=True)\n"
                          "display({'a': 1})\nopen('output/r.txt', 'w').write('r')\n6 * 7"})
    openapi.check_events("POST", PREFIX + "/{id}/exec", evs)
    names = [n for n, _ in evs]
    assert names[-1] == "result" and "stdout" in names and "display" in names and "file" in names, names
    assert names.index("stdout") < names.index("display") < names.index("file")
    result = evs[-1][1]
    assert result["value"] == "42" and [f["path"] for f in result["files"]] == ["output/r.txt"], result


# ---- files --------------------------------------------------------------------------------------


def test_files_of_a_live_session(api, py):
    status, _, res = api.call("PUT", f"{PREFIX}/{py}/files/data/in.csv", b"a,b\n1,2\n",
                              PREFIX + "/{id}/files/{path}", headers={"Content-Type": "application/octet-stream"})
    assert status == 201 and res == {"path": "data/in.csv", "size": 8}, res
    assert api.cell(py, "import pandas as pd\nint(pd.read_csv('data/in.csv').b.sum())")["value"] == "2"
    api.cell(py, "open('data/out.bin', 'wb').write(bytes(range(256)))")
    status, hdrs, _ = api.call("GET", f"{PREFIX}/{py}/files/data/in.csv", doc_path=None)
    assert status == 200 and hdrs["content-type"] == "text/csv"
    conn = connection(api.svc.url, 30)
    conn.request("GET", f"{PREFIX}/{py}/files/data/out.bin")
    resp = conn.getresponse()
    assert resp.status == 200 and resp.read() == bytes(range(256))
    conn.close()
    status, _, res = api.call("GET", f"{PREFIX}/{py}/files?path=data", doc_path=PREFIX + "/{id}/files")
    assert status == 200 and sorted(e["path"] for e in res["files"]) == ["data/in.csv", "data/out.bin"], res
    status, _, res = api.call("GET", f"{PREFIX}/{py}/files/nope.txt", doc_path=PREFIX + "/{id}/files/{path}")
    assert status == 404 and res["error"]["code"] == "not_found", res   # the session is there
    for bad in ("../etc/passwd", "a/../../b"):
        status, _, res = api.call("PUT", f"{PREFIX}/{py}/files/{bad}", b"x", PREFIX + "/{id}/files/{path}",
                                  headers={"Content-Type": "application/octet-stream"})
        assert status in (400, 404), (bad, res)
    # a cell's own files in, and return_files out
    res = api.cell(py, "open('b.txt').read() + open('sub/c.txt').read()",
                   files=[{"path": "b.txt", "content": "bee"}, {"path": "sub/c.txt", "content": "c"}],
                   return_files=["*.txt"])
    assert res["value"] == "'beec'" and sorted(f["path"] for f in res["files"]) == ["b.txt"], res
    res = api.cell(py, "1", files=[{"path": "/abs", "content": "x"}], expect=400)
    assert "files[0].path" in res["error"]["message"], res


# ---- the session's life -------------------------------------------------------------------------


def test_create_checks_its_fields(api):
    for body, field in (({"language": "cobol"}, "language"), ({"code": "1"}, "code"),
                        ({"idle_timeout": 0}, "idle_timeout"), ({"lifetime": "1h"}, "lifetime"),
                        ({"idle_timeout": 10 ** 6}, "idle_timeout"), ({"memory_mb": 1}, "memory_mb")):
        status, _, res = api.call("POST", PREFIX, body, PREFIX)
        assert status == 400 and field in res["error"]["message"], (body, res)
    sid = api.create()["id"]
    status, _, res = api.call("POST", f"{PREFIX}/{sid}/exec", {"code": "1", "stdin": "x"}, PREFIX + "/{id}/exec")
    assert status == 400 and "stdin" in res["error"]["message"], res
    status, _, res = api.call("GET", PREFIX, doc_path=PREFIX)
    assert status == 200 and sid in [s["id"] for s in res["sessions"]], res
    assert api.delete(sid) == 204
    assert api.info(sid)[0] == 404 and api.delete(sid) == 404
    status, res = api.info("0" * 32)
    assert status == 404 and res["error"]["code"] == "session_not_found", res


def test_idle_timeout_and_lifetime_end_it_and_leave_nothing(start_service, openapi, own_state):
    svc = start_service(env={"STATE_DIR": own_state, "SANDBOX_WARM": "off"})
    api = Api(svc, openapi)
    idle = api.create(idle_timeout=1)
    life = api.create(lifetime=2, idle_timeout=60)
    assert idle["idle_expires_at"] and life["expires_at"]
    wait_for(lambda: api.info(idle["id"])[1]["state"] == "ended", 10, "the idle session to end")
    _, info = api.info(idle["id"])
    assert info["ended_reason"] == "idle_timeout" and info["idle_expires_at"] is None, info
    # busy past its lifetime: ended all the same
    res = api.cell(life["id"], "import time\ntime.sleep(30)", timeout=30)
    assert res["status"] == "session_ended" and res["session"]["ended_reason"] == "lifetime", res
    assert_nothing_left(svc, own_state)
    _, h, metrics = http_request(svc.url, "GET", "/metrics")
    assert 'hexr_sandbox_sessions_ended_total{reason="idle_timeout"} 1' in metrics
    assert 'hexr_sandbox_sessions_ended_total{reason="lifetime"} 1' in metrics
    assert "hexr_sandbox_sessions 0" in metrics


def test_another_caller_gets_404(start_service, openapi):
    svc = start_service(env={"TRUSTED_PROXIES": "127.0.0.1", "AUTH_ALLOW": f"{TD}/agents/*"})
    alice, bob = Api(svc, openapi, ALICE), Api(svc, openapi, BOB)
    sid = alice.create()["id"]
    assert bob.info(sid)[0] == 404
    status, _, _ = bob.call("POST", f"{PREFIX}/{sid}/exec", {"code": "1"}, PREFIX + "/{id}/exec")
    assert status == 404
    status, _, res = bob.call("GET", f"{PREFIX}/{sid}/files/x", doc_path=PREFIX + "/{id}/files/{path}")
    assert status == 404 and res["error"]["code"] == "session_not_found", res
    assert bob.call("POST", f"{PREFIX}/{sid}/interrupt", doc_path=PREFIX + "/{id}/interrupt")[0] == 404
    assert bob.delete(sid) == 404
    assert bob.call("GET", PREFIX, doc_path=PREFIX)[2] == {"sessions": []}
    assert alice.cell(sid, "2 + 2")["value"] == "4"
    assert Api(svc, openapi).call("GET", PREFIX)[0] == 403  # no identity at all


def test_quotas_answer_429_with_retry_after(start_service, openapi):
    svc = start_service(env={"MAX_SESSIONS": "2", "MAX_SESSIONS_PER_CALLER": "1", "TRUSTED_PROXIES": "127.0.0.1",
                             "AUTH_ALLOW": f"{TD}/agents/*"})
    alice, bob, carol = (Api(svc, openapi, f"{TD}/agents/{n}") for n in ("alice", "bob", "carol"))
    a = alice.create()["id"]
    status, hdrs, res = alice.call("POST", PREFIX, {}, PREFIX)
    assert status == 429 and res["error"]["code"] == "quota_exceeded" and int(hdrs["retry-after"]) >= 1, res
    bob.create()
    status, hdrs, res = carol.call("POST", PREFIX, {}, PREFIX)
    assert status == 429 and res["error"]["code"] == "overloaded" and "retry-after" in hdrs, res
    assert alice.delete(a) == 204
    carol.create()


def test_many_sessions_at_once_within_memory(start_service, openapi):
    svc = start_service(env={"MAX_SESSIONS": "8", "MAX_SESSIONS_PER_CALLER": "8"})
    api = Api(svc, openapi)
    ids = [api.create(memory_mb=64)["id"] for _ in range(8)]
    for i, sid in enumerate(ids):
        api.cell(sid, f"x = {i}")
    assert [api.cell(sid, "x * 10")["value"] for sid in ids] == [str(i * 10) for i in range(8)]
    _, _, h = http_request(svc.url, "GET", "/health")
    assert h["sessions"]["live"] == 8 and h["memory_held_mb"] >= 8 * 64, h
    assert api.call("POST", PREFIX, {}, PREFIX)[0] == 429
    # one session's memory limit is its own
    res = api.cell(ids[0], "b = bytearray(200 << 20)", timeout=20)
    assert res["status"] in ("session_ended", "exception"), res
    if res["status"] == "session_ended":
        assert res["session"]["ended_reason"] == "memory_limit", res
    assert api.cell(ids[1], "x")["value"] == "1"


@pytest.mark.parametrize("signo", [signal.SIGTERM, signal.SIGKILL])
def test_the_service_stopping_leaves_nothing(start_service, openapi, own_state, signo):
    svc = start_service(env={"STATE_DIR": own_state, "SANDBOX_WARM": "off"})
    api = Api(svc, openapi)
    ids = [api.create(language=lang)["id"] for lang in ("python", "javascript", "bash")]
    for sid in ids:
        api.cell(sid, "1")
    pid = svc.proc.pid
    svc.signal(signo)
    rc = svc.wait(timeout=30)
    assert rc == (0 if signo == signal.SIGTERM else -signal.SIGKILL)
    if signo == signal.SIGTERM:
        assert any("ending 3 sessions" in line for line in svc.log), svc.log[-10:]
    left = lambda: _host.leaked_sandbox_processes({pid}) + _host.host_mounts_under(own_state)  # noqa: E731
    assert _host.wait_until(lambda: not left(), 15), left()
    if signo == signal.SIGTERM:
        assert _host.leftover_cgroups({pid}) == []


# ---- the CLI ------------------------------------------------------------------------------------


def test_cli_session_keeps_state_between_cells(own_state):
    import subprocess
    from conftest import BIN
    env = dict(os.environ, STATE_DIR=own_state)
    cells = "x = 41\n%%\nprint('hi')\nx + 1\n%%\n1/0\n%%\nx\n"
    p = subprocess.run([BIN, "session"], input=cells, capture_output=True, text=True, env=env, timeout=60)
    assert p.stdout == "hi\n42\n41\n", (p.stdout, p.stderr)
    assert "ZeroDivisionError: division by zero" in p.stderr and p.returncode == 1, p.stderr
    p = subprocess.run([BIN, "session", "-l", "bash", "--json"], input="X=3\n%%\necho $X\n", capture_output=True,
                       text=True, env=env, timeout=60)
    results = [json.loads(line) for line in p.stdout.splitlines()]
    assert p.returncode == 0 and [r["stdout"] for r in results] == ["", "3\n"], (p.stdout, p.stderr)
    p = subprocess.run([BIN, "session", "-t", "1"], input="while True: pass\n%%\n'after'\n", capture_output=True,
                       text=True, env=env, timeout=60)
    assert p.stdout == "'after'\n" and "time limit of 1 s" in p.stderr and p.returncode == 1, (p.stdout, p.stderr)


def test_large_files_come_out_whole(api, py):
    # larger than one protocol line may carry: read in chunks
    big = 5 << 20
    res = api.cell(py, f"import os\nos.makedirs('output', exist_ok=True)\n"
                       f"open('output/big.bin', 'wb').write(bytes(range(256)) * ({big} // 256))")
    assert res["status"] == "ok" and res["session"]["state"] == "idle", res
    (f,) = res["files"]
    assert f["path"] == "output/big.bin" and f["size"] == big and not f["truncated"], {k: f[k] for k in ("size", "truncated")}
    assert base64.b64decode(f["content"]) == bytes(range(256)) * (big // 256)
    conn = connection(api.svc.url, 60)
    conn.request("GET", f"{PREFIX}/{py}/files/output/big.bin")
    resp = conn.getresponse()
    assert resp.status == 200 and resp.read() == bytes(range(256)) * (big // 256)
    conn.close()
    data = os.urandom(3 << 20)
    status, _, res = api.call("PUT", f"{PREFIX}/{py}/files/up.bin", data, PREFIX + "/{id}/files/{path}",
                              headers={"Content-Type": "application/octet-stream"})
    assert status == 201 and res["size"] == len(data), res
    assert api.cell(py, "import hashlib\nhashlib.sha256(open('up.bin','rb').read()).hexdigest()")["value"] == \
        repr(__import__("hashlib").sha256(data).hexdigest())


def test_a_cell_as_multipart_with_files(api, py):
    import uuid
    boundary = "hxs" + uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"request\"\r\n"
            f"Content-Type: application/json\r\n\r\n").encode()
    body += json.dumps({"code": "open('in/data.bin', 'rb').read().count(b'z')", "return_files": ["in/*"]}).encode()
    body += (f"\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"in/data.bin\"\r\n"
             f"Content-Type: application/octet-stream\r\n\r\n").encode() + b"z" * 100000
    body += f"\r\n--{boundary}--\r\n".encode()
    status, _, res = api.call("POST", f"{PREFIX}/{py}/exec", body, PREFIX + "/{id}/exec",
                              headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    assert status == 200 and res["value"] == "100000", res
    assert [f["path"] for f in res["files"]] == ["in/data.bin"] and res["files"][0]["size"] == 100000


def test_a_driver_that_dies_ends_the_session_as_crashed(api, py):
    res = api.cell(py, "import os\nos._exit(3)")
    assert res["status"] == "session_ended" and res["session"]["ended_reason"] == "crashed", res
    assert "status 3" in res["session"]["ended_message"], res
    status, _, err = api.call("GET", f"{PREFIX}/{py}/files", doc_path=PREFIX + "/{id}/files")
    assert status == 410 and err["error"]["code"] == "session_ended", err
    assert err["error"]["reason"] == "crashed", err


# 'a' is printed inside the try: once the stream has carried it, an interrupt can only
# land where the handler catches it
LOOP = ("try:\n    print('a', flush=True)\n    while True:\n        pass\n"
        "except KeyboardInterrupt:\n    cut = 'interrupted'\n    raise")


def open_stream(svc, sid: str, code: str, timeout: float = 30):
    """A streamed cell whose first stdout event has arrived (so its code runs)."""
    conn = connection(svc.url, 30)
    conn.request("POST", f"{PREFIX}/{sid}/exec", body=json.dumps({"code": code, "timeout": timeout}),
                 headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
    resp = conn.getresponse()
    assert resp.status == 200
    # the raw chunked stream (chunk sizes, comments, events), read line by line
    line = b""
    while line != b"event: stdout\n":
        line = resp.fp.readline()
        assert line, "the stream ended before the cell printed"
    return conn, resp


def test_a_stream_client_that_leaves_does_not_end_the_session(svc, api, py):
    api.cell(py, "x = 7")
    conn, _ = open_stream(svc, py, LOOP, timeout=30)
    conn.close()
    # the cell is interrupted (not left to its 30 s limit): the next one answers at once,
    # within less than that limit, and the session with its state lives on
    res = api.call("POST", f"{PREFIX}/{py}/exec", {"code": "(x, cut)"}, PREFIX + "/{id}/exec", timeout=20)[2]
    assert res["status"] == "ok" and res["value"] == "(7, 'interrupted')", res
    assert res["session"]["state"] == "idle", res


def test_a_json_client_that_leaves_interrupts_its_cell(svc, api, py):
    api.cell(py, "x = 8")
    conn = connection(svc.url, 30)
    conn.request("POST", f"{PREFIX}/{py}/exec", body=json.dumps({"code": "while True: pass", "timeout": 30}),
                 headers={"Content-Type": "application/json"})
    wait_for(lambda: api.info(py)[1]["state"] == "busy", 20, "the cell to run")
    conn.close()
    res = api.call("POST", f"{PREFIX}/{py}/exec", {"code": "x"}, PREFIX + "/{id}/exec", timeout=20)[2]
    assert res["status"] == "ok" and res["value"] == "8", res


def test_the_interrupt_route_stops_the_running_cell(svc, api, py):
    api.cell(py, "x = 9")
    path = PREFIX + "/{id}/interrupt"
    conn, resp = open_stream(svc, py, LOOP, timeout=30)
    try:
        status, _, body = api.call("POST", f"{PREFIX}/{py}/interrupt", doc_path=path)
        assert status == 202 and body == {"interrupted": True}, body
        # the raw chunked stream, read up to the result event's data line
        line = b""
        while line != b"event: result\n":
            line = resp.fp.readline()
            assert line, "the stream ended before its result"
        result = json.loads(resp.fp.readline().decode().split("data: ", 1)[1])
    finally:
        conn.close()
    assert result["status"] == "interrupted" and result["error"]["type"] == "cancelled", result
    assert result["exception"]["type"] == "KeyboardInterrupt", result
    assert result["session"]["state"] == "idle", result
    # nothing running: nothing to interrupt, the session stays
    status, _, body = api.call("POST", f"{PREFIX}/{py}/interrupt", doc_path=path)
    assert status == 202 and body == {"interrupted": False}, body
    assert api.cell(py, "(x, cut)")["value"] == "(9, 'interrupted')"
    assert api.call("POST", f"{PREFIX}/{'0' * 32}/interrupt", doc_path=path)[0] == 404


def test_a_session_is_a_sandbox(api, py):
    # no network, shown without leaving loopback: only `lo`, and a listener this test
    # opened on the host's 127.0.0.1 cannot be reached from the session
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    code = ("import os, socket\nout = {}\n"
            "out['ifaces'] = sorted(n for _, n in socket.if_nameindex())\n"
            f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n    out['net'] = 'open'\n"
            "except OSError as e:\n    out['net'] = type(e).__name__\n"
            "try:\n    open('/opt/hexr-session/driver.py', 'a')\n    out['driver'] = 'writable'\n"
            "except OSError as e:\n    out['driver'] = type(e).__name__\n"
            "out['uid'] = os.getuid()\nout['root'] = sorted(os.listdir('/'))\nout")
    res = api.cell(py, code)
    assert res["status"] == "ok", res
    out = eval(res["value"])  # a dict repr of strings and ints
    try:
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing from the session reached the host's listener
    finally:
        listener.close()
    assert out["ifaces"] == ["lo"], out
    assert out["net"] != "open" and out["driver"] != "writable" and out["uid"] != 0, out
    assert "home" in out["root"] and "root" not in out["root"], out
