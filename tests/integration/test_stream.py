"""Server-Sent Events from POST /api/v1/exec (Accept: text/event-stream), through the real
service: the events and their order, the result event being the JSON answer, heartbeats
on a silent stream, errors before the start answered as JSON, and a client that goes
away: its sandbox is killed and its slot is free again.

Times are never asserted, only bounded by generous timeouts.

Run: /usr/bin/python3 -m pytest tests/integration/test_stream.py -q
"""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import uuid
from typing import Any, Dict, List, Tuple

from conftest import connection, get_metrics, post_exec, wait_for

SSE = {"Accept": "text/event-stream"}


def read_events(resp) -> Tuple[List[Tuple[str, Any]], List[str]]:
    """(events as (name, parsed data), comments) until the stream ends."""
    events: List[Tuple[str, Any]] = []
    comments: List[str] = []
    name, data = None, []
    for raw in resp:
        line = raw.decode("utf-8").rstrip("\n")
        if line.startswith(":"):
            comments.append(line[1:].strip())
        elif line.startswith("event: "):
            name = line[len("event: "):]
        elif line.startswith("data: "):
            data.append(line[len("data: "):])
        elif line == "" and name is not None:
            assert len(data) == 1, f"event {name}: data must be one line, got {data!r}"
            events.append((name, json.loads(data[0])))
            name, data = None, []
    return events, comments


def stream_exec(url: str, body: Dict[str, Any], timeout: float = 120.0):
    conn = connection(url, timeout)
    conn.request("POST", "/api/v1/exec", body=json.dumps(body).encode(),
                 headers={"Content-Type": "application/json", **SSE})
    resp = conn.getresponse()
    return conn, resp


def text_of(events, stream: str) -> str:
    return "".join(d["text"] if "text" in d else "" for n, d in events if n == stream)


def test_stream_events_then_the_result(service_url, openapi):
    conn, resp = stream_exec(service_url, {"language": "python", "code":
                             "import sys\nprint('one')\nprint('two', file=sys.stderr)\nprint('three')"})
    try:
        assert resp.status == 200
        assert resp.getheader("Content-Type").startswith("text/event-stream")
        assert resp.getheader("X-Request-Id")
        events, _ = read_events(resp)
    finally:
        conn.close()
    names = [n for n, _ in events]
    assert names[-1] == "result" and names.count("result") == 1, names
    assert set(names) <= {"stdout", "stderr", "file", "result"}, names
    result = events[-1][1]
    assert text_of(events, "stdout") == result["stdout"] == "one\nthree\n"
    assert text_of(events, "stderr") == result["stderr"] == "two\n"
    assert result["exit_code"] == 0 and result["id"] == resp.getheader("X-Request-Id")
    # the result event is what the JSON answer would be
    status, headers, plain = post_exec(service_url, {"language": "python", "code": "print('one')"})
    assert status == 200 and set(plain) == set(result)
    openapi.check_events("POST", "/api/v1/exec", events)
    openapi.check("POST", "/api/v1/exec", 200, {"content-type": "text/event-stream",
                                                 "x-request-id": resp.getheader("X-Request-Id")},
                  "")


def test_stream_heartbeat_on_silence(start_service):
    svc = start_service(env={"STREAM_HEARTBEAT": "1s"})
    conn, resp = stream_exec(svc.url, {"language": "bash", "code": "sleep 3; echo done"})
    try:
        assert resp.status == 200
        events, comments = read_events(resp)
    finally:
        conn.close()
    assert "keep-alive" in comments
    assert events[-1][0] == "result" and events[-1][1]["stdout"] == "done\n"


def test_stream_errors_before_the_start_are_json(service_url):
    conn, resp = stream_exec(service_url, {"language": "cobol", "code": "x"})
    try:
        body = resp.read()
    finally:
        conn.close()
    assert resp.status == 400
    assert resp.getheader("Content-Type").startswith("application/json")
    assert json.loads(body)["error"]["code"] == "invalid_request"


def pgrep(pattern: str) -> List[str]:
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True, timeout=30)
    return out.stdout.split()


def test_stream_client_gone_kills_and_frees_the_slot(start_service):
    svc = start_service(env={"MAX_CONCURRENT": "1"})
    marker = f"hxs-stream-marker-{uuid.uuid4().hex[:12]}"
    conn, resp = stream_exec(svc.url, {"language": "bash", "timeout": 30,
                                       "code": f"echo start; exec -a {marker} sleep 60"})
    try:
        assert resp.status == 200
        wait_for(lambda: pgrep(marker), 30, "the sandboxed process to run")
        assert get_metrics(svc.url)["hexr_sandbox_active_executions"] == 1
    finally:
        # hang up without reading to the end
        if conn.sock:
            conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
    wait_for(lambda: not pgrep(marker), 15, "the sandboxed process to be killed")
    wait_for(lambda: get_metrics(svc.url)["hexr_sandbox_active_executions"] == 0, 15, "the slot freed")
    m = get_metrics(svc.url)
    assert m['hexr_sandbox_executions_total{language="bash",outcome="killed"}'] == 1
    status, _, res = post_exec(svc.url, {"code": "echo again", "language": "bash"})
    assert status == 200 and res["stdout"] == "again\n"


def test_stream_waits_for_a_slot_then_streams(start_service):
    """A streamed request that queued first gets its stream once a slot frees up."""
    svc = start_service(env={"MAX_CONCURRENT": "1"})
    first, first_resp = stream_exec(svc.url, {"language": "bash", "code": "sleep 2; echo first"})
    try:
        wait_for(lambda: get_metrics(svc.url)["hexr_sandbox_active_executions"] == 1, 30, "first runs")
        second, second_resp = stream_exec(svc.url, {"language": "bash", "code": "echo second"})
        try:
            events, _ = read_events(second_resp)
        finally:
            second.close()
        assert second_resp.status == 200 and events[-1][1]["stdout"] == "second\n"
        events, _ = read_events(first_resp)
        assert events[-1][1]["stdout"] == "first\n"
    finally:
        first.close()


def test_stream_finishes_through_a_drain(start_service):
    """SIGTERM while a stream runs: the execution may finish, its client gets every
    event up to the result, then the service exits."""
    import signal
    svc = start_service()
    conn, resp = stream_exec(svc.url, {"language": "bash", "code": "sleep 2; echo done"})
    try:
        assert resp.status == 200
        wait_for(lambda: get_metrics(svc.url)["hexr_sandbox_active_executions"] == 1, 30, "it runs")
        svc.signal(signal.SIGTERM)
        events, _ = read_events(resp)
    finally:
        conn.close()
    assert events[-1][0] == "result" and events[-1][1]["stdout"] == "done\n", events
    assert svc.wait(60) == 0


def test_stream_events_come_while_the_program_runs(start_service):
    """Order, not timing: the first output event is read while the execution still
    holds its slot, long before its time limit ends it."""
    svc = start_service(env={"MAX_CONCURRENT": "1"})
    conn, resp = stream_exec(svc.url, {"language": "python", "timeout": 20, "code":
                             "import time\nprint('early', flush=True)\ntime.sleep(30)"})
    try:
        assert resp.status == 200
        # the program's writes may come as several events ("early", then "\n")
        name, text = None, ""
        for raw in resp:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                name = line[7:]
                assert name == "stdout", name
            elif line.startswith("data: ") and name:
                text += json.loads(line[6:])["text"]
                if text == "early\n":
                    break
        assert text == "early\n", text
        assert get_metrics(svc.url)["hexr_sandbox_active_executions"] == 1
    finally:
        if conn.sock:
            conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
    wait_for(lambda: get_metrics(svc.url)["hexr_sandbox_active_executions"] == 0, 15, "the slot freed")


def test_stream_bytes_that_are_not_utf8_come_as_base64(service_url):
    conn, resp = stream_exec(service_url, {"language": "bash", "code": "printf 'ok\\n'; printf '\\377\\376'"})
    try:
        events, _ = read_events(resp)
    finally:
        conn.close()
    chunks = [d for n, d in events if n == "stdout"]
    raw = b"".join(base64.b64decode(d["base64"]) if "base64" in d else d["text"].encode() for d in chunks)
    assert raw == b"ok\n\xff\xfe", chunks
    assert any("base64" in d for d in chunks), chunks


def test_stream_kill_line_and_error(service_url, openapi):
    """A program the sandbox ends: its stderr events end with the engine's line saying
    why, and the result's error says the same."""
    conn, resp = stream_exec(service_url, {"language": "bash", "timeout": 1,
                                           "code": "echo before; sleep 10"})
    try:
        events, _ = read_events(resp)
    finally:
        conn.close()
    result = events[-1][1]
    assert text_of(events, "stdout") == "before\n"
    assert text_of(events, "stderr") == result["stderr"]
    assert result["stderr"].endswith("hexr-sandbox: killed: time limit of 1 s exceeded\n"), result["stderr"]
    assert result["error"]["type"] == "timeout"
    openapi.check_events("POST", "/api/v1/exec", events)
