"""The HTTP API of `hexr-sandbox serve`: every request field, every response field,
every error status with its message, /health, /metrics, and conformance of what is
served with docs/openapi.yaml.

Run: /usr/bin/python3 -m pytest tests/integration/test_service.py -q
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
from typing import Any, Dict, Optional, Tuple

import pytest

from conftest import get_metrics, http_request, post_exec

RESULT_FIELDS = {"stdout", "stderr", "exit_code", "execution_time_ms", "memory_used_mb", "timed_out",
                 "oom_killed", "signal", "stdout_truncated", "stderr_truncated", "stdout_omitted_bytes",
                 "stderr_omitted_bytes", "error", "files", "id"}


@pytest.fixture
def api(service_url, openapi):
    """Requests to the shared service; every response is checked against the OpenAPI
    document before the test sees it."""

    def call(method: str, path: str, body: Any = None, headers: Optional[Dict[str, str]] = None,
             timeout: float = 120.0) -> Tuple[int, Dict[str, str], Any]:
        status, hdrs, parsed = http_request(service_url, method, path, body, headers, timeout)
        if method != "HEAD" and path in openapi.doc["paths"]:
            openapi.check(method, path, status, hdrs, parsed)
        assert re.fullmatch(r"[0-9a-f]{32}", hdrs.get("x-request-id", "")), hdrs
        return status, hdrs, parsed

    return call


def run(api, body: Any, path: str = "/api/v1/exec", headers=None) -> Dict[str, Any]:
    status, hdrs, res = api("POST", path, body, headers)
    assert status == 200, (status, res)
    assert set(res) == RESULT_FIELDS
    assert res["id"] == hdrs["x-request-id"]
    return res


def error_of(api, body: Any, status: int, headers=None, path: str = "/api/v1/exec") -> str:
    got, hdrs, res = api("POST", path, body, headers)
    assert got == status, (got, res)
    assert isinstance(res, dict) and set(res) == {"error"}, res
    assert set(res["error"]) == {"code", "message"}
    assert res["error"]["message"], res
    return res["error"]["code"] + ": " + res["error"]["message"]


# ---- results ------------------------------------------------------------------------------


def test_python_result_has_every_field(api):
    res = run(api, {"code": "print('hello')"})
    assert res["stdout"] == "hello\n"
    assert res["stderr"] == ""
    assert res["exit_code"] == 0
    assert isinstance(res["execution_time_ms"], int) and res["execution_time_ms"] >= 0
    assert isinstance(res["memory_used_mb"], int) and res["memory_used_mb"] >= 0
    assert res["timed_out"] is False and res["oom_killed"] is False
    assert res["signal"] is None
    assert res["stdout_truncated"] is False and res["stderr_truncated"] is False


def test_execute_alias(api):
    res = run(api, {"code": "print(6 * 7)"}, path="/execute")
    assert res["stdout"] == "42\n"


@pytest.mark.parametrize("language,code", [
    ("python", "print('hi')"),
    ("javascript", "console.log('hi')"),
    ("js", "console.log('hi')"),
    ("node", "console.log('hi')"),
    ("bash", "echo hi"),
    ("shell", "echo hi"),
    ("sh", "echo hi"),
])
def test_languages_and_aliases(api, language, code):
    assert run(api, {"code": code, "language": language})["stdout"] == "hi\n"


def test_default_language_is_python(api):
    assert run(api, {"code": "import sys; print(sys.version_info[0])"})["stdout"] == "3\n"


def test_failing_program_is_a_result(api):
    res = run(api, {"code": "echo out; echo err >&2; exit 3", "language": "bash"})
    assert (res["stdout"], res["stderr"], res["exit_code"], res["signal"]) == ("out\n", "err\n", 3, None)


def test_python_exception(api):
    res = run(api, {"code": "1/0"})
    assert res["exit_code"] == 1 and "ZeroDivisionError" in res["stderr"]


def test_killed_by_signal(api):
    res = run(api, {"code": "kill -SEGV $$", "language": "bash"})
    assert res["signal"] == 11 and res["exit_code"] == 139, res


def test_timeout(api):
    res = run(api, {"code": "echo started; sleep 30", "language": "bash", "timeout": 1})
    assert res["timed_out"] is True and res["exit_code"] == 124, res
    assert res["stdout"] == "started\n"


def test_memory_limit(api):
    code = "x = bytearray(200 * 1024 * 1024)\nprint(len(x))"
    res = run(api, {"code": code, "memory_mb": 64})
    assert res["oom_killed"] is True and res["exit_code"] == 137, res


def test_memory_within_limit(api):
    res = run(api, {"code": "x = bytearray(20 * 1024 * 1024); print(len(x))", "memory_mb": 128})
    assert res["exit_code"] == 0 and res["stdout"] == str(20 * 1024 * 1024) + "\n"


def test_env_vars(api):
    res = run(api, {"code": "echo \"$GREETING-$OTHER\"", "language": "bash",
                    "env_vars": {"GREETING": "hello world", "OTHER": "x=y"}})
    assert res["stdout"] == "hello world-x=y\n"


def test_stdin(api):
    res = run(api, {"code": "import sys; print(sys.stdin.read().upper())", "stdin": "abc\ndef"})
    assert res["stdout"] == "ABC\nDEF\n"


def test_stdin_absent_is_empty(api):
    assert run(api, {"code": "wc -c", "language": "bash"})["stdout"].strip() == "0"


def test_null_fields_mean_not_given(api):
    res = run(api, {"code": "print(1)", "language": None, "timeout": None, "memory_mb": None,
                    "env_vars": None, "packages": None, "stdin": None})
    assert res["stdout"] == "1\n"


def test_nul_in_code_reaches_the_interpreter(api):
    # JavaScript allows a raw U+0000 inside a string literal: the bytes arrive intact.
    res = run(api, {"code": 'console.log(JSON.stringify("a\u0000b"))', "language": "javascript"})
    assert res["stdout"] == '"a\\u0000b"\n', res


def test_nul_in_stdin_reaches_the_program(api):
    res = run(api, {"code": "import sys; print(sys.stdin.buffer.read())", "stdin": "a\u0000b"})
    assert res["stdout"] == "b'a\\x00b'\n"


def test_unicode_round_trip(api):
    res = run(api, {"code": "print('h\u00e9llo \u2603 \U0001F600')"})
    assert res["stdout"] == "h\u00e9llo \u2603 \U0001F600\n"


def test_invalid_utf8_output_is_replaced(api):
    raw = b"a\xffb\xe2\x82c\xed\xa0\x80d\xf0\x9f\x98"
    code = f"import sys; sys.stdout.buffer.write({raw!r}); sys.stderr.buffer.write(b'\\xc3')"
    res = run(api, {"code": code})
    assert res["stdout"] == raw.decode("utf-8", errors="replace")
    assert res["stderr"] == "\ufffd"


def test_output_is_capped_and_flagged(api):
    res = run(api, {"code": "import sys; sys.stdout.write('x' * 3_000_000); print('e', file=sys.stderr)"})
    assert res["stdout_truncated"] is True and res["stderr_truncated"] is False
    # MAX_OUTPUT_BYTES: the first and last half MiB, and the marker between them
    omitted = 3_000_000 - 1024 * 1024
    assert res["stdout"] == "x" * (512 * 1024) + "\n[hexr-sandbox: %d bytes left out]\n" % omitted + "x" * (512 * 1024)
    assert res["stdout_omitted_bytes"] == omitted and res["stderr_omitted_bytes"] == 0
    assert res["stderr"] == "e\n"


def test_request_ids_are_unique(api):
    ids = {run(api, {"code": "true", "language": "bash"})["id"] for _ in range(3)}
    assert len(ids) == 3


def test_charset_parameter_accepted(api):
    res = run(api, {"code": "print(1)"}, headers={"Content-Type": "Application/JSON; charset=utf-8"})
    assert res["stdout"] == "1\n"


# ---- 400: every field and type --------------------------------------------------------------


BAD_BODIES = [
    # (body, field the message must name)
    ({}, "code"),
    ({"code": None}, "code"),
    ({"code": 1}, "code"),
    ({"code": ["print(1)"]}, "code"),
    ({"code": {"a": 1}}, "code"),
    ({"code": True}, "code"),
    ({"code": "x", "language": 1}, "language"),
    ({"code": "x", "language": "cobol"}, "language"),
    ({"code": "x", "language": "Python"}, "language"),
    ({"code": "x", "language": "py\u0000thon"}, "language"),
    ({"code": "x", "language": ["python"]}, "language"),
    ({"code": "x", "timeout": 1.5}, "timeout"),
    ({"code": "x", "timeout": 1.0}, "timeout"),
    ({"code": "x", "timeout": "5"}, "timeout"),
    ({"code": "x", "timeout": True}, "timeout"),
    ({"code": "x", "timeout": -1}, "timeout"),
    ({"code": "x", "timeout": 0}, "timeout"),
    ({"code": "x", "timeout": [5]}, "timeout"),
    ({"code": "x", "timeout": {"s": 5}}, "timeout"),
    ({"code": "x", "timeout": 31}, "timeout"),             # above MAX_EXECUTION_TIME=30s
    ({"code": "x", "timeout": 10 ** 12}, "timeout"),
    ({"code": "x", "memory_mb": 64.5}, "memory_mb"),
    ({"code": "x", "memory_mb": "64"}, "memory_mb"),
    ({"code": "x", "memory_mb": False}, "memory_mb"),
    ({"code": "x", "memory_mb": -5}, "memory_mb"),
    ({"code": "x", "memory_mb": 0}, "memory_mb"),
    ({"code": "x", "memory_mb": 8}, "memory_mb"),          # below the minimum 16
    ({"code": "x", "memory_mb": 513}, "memory_mb"),        # above MAX_MEMORY_MB=512
    ({"code": "x", "memory_mb": 10 ** 15}, "memory_mb"),
    ({"code": "x", "env_vars": ["A=1"]}, "env_vars"),
    ({"code": "x", "env_vars": "A=1"}, "env_vars"),
    ({"code": "x", "env_vars": {"A": 1}}, "env_vars"),
    ({"code": "x", "env_vars": {"A": None}}, "env_vars"),
    ({"code": "x", "env_vars": {"A": ["x"]}}, "env_vars"),
    ({"code": "x", "env_vars": {"1BAD": "x"}}, "env_vars"),
    ({"code": "x", "env_vars": {"BAD-NAME": "x"}}, "env_vars"),
    ({"code": "x", "env_vars": {"": "x"}}, "env_vars"),
    ({"code": "x", "env_vars": {"A": "x\u0000y"}}, "env_vars"),
    ({"code": "x", "packages": "numpy"}, "packages"),
    ({"code": "x", "packages": {"numpy": "1"}}, "packages"),
    ({"code": "x", "packages": [1]}, "packages"),
    ({"code": "x", "packages": [None]}, "packages"),
    ({"code": "x", "packages": ["nu\u0000mpy"]}, "packages"),
    ({"code": "x", "packages": ["--index-url=http://evil"]}, "packages"),
    ({"code": "x", "packages": ["git+https://x/y.git"]}, "packages"),
    ({"code": "x", "stdin": 1}, "stdin"),
    ({"code": "x", "stdin": ["a"]}, "stdin"),
    ({"code": "x", "tiemout": 3}, "tiemout"),
    ({"code": "x", "Code": "y"}, "Code"),
    ({"code": "x", "memory": 64}, "memory"),
]


@pytest.mark.parametrize("body,field", BAD_BODIES, ids=[f"{i}-{f}" for i, (_, f) in enumerate(BAD_BODIES)])
def test_invalid_field_is_400_naming_it(api, body, field):
    text = error_of(api, body, 400)
    assert text.startswith("invalid_request: "), text
    assert field in text.split(": ", 1)[1], text


def test_unknown_field_message_lists_the_fields(api):
    text = error_of(api, {"code": "x", "envvars": {}}, 400)
    assert "envvars" in text and "unknown field" in text and "env_vars" in text


@pytest.mark.parametrize("raw,needle", [
    (b'{"code":"a","code":"b"}', "code"),                 # duplicate key names the key
    (b'{"code":"a","timeout":1,"timeout":2}', "timeout"),
    (b'{"code":"x"} trailing', "body"),
    (b'{"code":"x"}{"code":"y"}', "body"),
    (b'{"code":"\xff\xfe"}', "body"),                      # invalid UTF-8
    (b'{"code":"\\ud800"}', "body"),                       # lone surrogate escape
    (b'{"code":', "body"),
    (b"", "body"),
    (b"   ", "body"),
    (b"[]", "body"),
    (b'"print(1)"', "body"),
    (b"42", "body"),
    (b"null", "body"),
    (b"{'code': 'x'}", "body"),
    (b'{"co\\u0000de":"x"}', "body"),                      # NUL in a key
])
def test_malformed_body_is_400(api, raw, needle):
    text = error_of(api, raw, 400)
    assert text.startswith("invalid_request: ") and needle in text, text


# ---- other statuses ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/api/v1", "/api/v1/exec/", "/api/v1/exec/x", "/api/v2/exec",
                                  "/health/", "/HEALTH", "/metrics.txt", "/execute/x", "/api/v1/runtimes/"])
def test_unknown_path_is_404(service_url, openapi, path):
    for method in ("GET", "POST"):
        status, hdrs, res = http_request(service_url, method, path, {"code": "x"} if method == "POST" else None)
        assert status == 404, (method, path, status, res)
        assert res["error"]["code"] == "not_found"
        openapi.validate(res, {"$ref": "#/components/schemas/Error"})


@pytest.mark.parametrize("method,path,allow", [
    ("GET", "/api/v1/exec", "POST"),
    ("PUT", "/api/v1/exec", "POST"),
    ("DELETE", "/execute", "POST"),
    ("HEAD", "/execute", "POST"),
    ("POST", "/health", "GET"),
    ("DELETE", "/health", "GET"),
    ("POST", "/metrics", "GET"),
    ("PUT", "/api/v1/runtimes", "GET"),
    ("OPTIONS", "/metrics", "GET"),
])
def test_wrong_method_is_405_with_allow(service_url, openapi, method, path, allow):
    status, hdrs, res = http_request(service_url, method, path)
    assert status == 405
    assert allow in hdrs.get("allow", ""), hdrs
    if method != "HEAD":
        assert res["error"]["code"] == "method_not_allowed"
        assert method.lower() != "post" or "GET" in res["error"]["message"]
        openapi.validate(res, {"$ref": "#/components/schemas/Error"})


@pytest.mark.parametrize("ctype", [None, "text/plain", "application/x-www-form-urlencoded",
                                   "application/jsonx", "application/json-seq", "json"])
def test_wrong_content_type_is_415(api, ctype):
    headers = {"Content-Type": ctype}  # None: no Content-Type at all
    text = error_of(api, b'{"code":"print(1)"}', 415, headers=headers)
    assert text.startswith("unsupported_media_type: ") and "application/json" in text


def test_package_that_does_not_exist_is_422(api):
    text = error_of(api, {"code": "print(1)", "packages": ["no-such-pkg-xyz"]}, 422)
    assert text.startswith("not_found: ") and "no-such-pkg-xyz" in text, text


def test_body_too_large_by_content_length_is_413(start_service, openapi):
    svc = start_service(env={"MAX_BODY_BYTES": "2048"})
    host, port = svc.address.rsplit(":", 1)
    # Only the headers: the service must answer from Content-Length alone.
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(b"POST /api/v1/exec HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100000000\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < 10:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), data
    err = json.loads(body[: body.rindex(b"}") + 1])
    assert err["error"]["code"] == "too_large" and "body" in err["error"]["message"]
    openapi.validate(err, {"$ref": "#/components/schemas/Error"})


def test_body_somewhat_too_large_gets_a_clean_413(start_service, openapi):
    """A client that sends the whole body without waiting (no Expect: 100-continue)
    still reads the 413: the service drains a body up to twice the limit first."""
    svc = start_service(env={"MAX_BODY_BYTES": "2048"})
    for _ in range(5):
        status, hdrs, res = post_exec(svc.url, {"code": "#" * 3500})
        assert status == 413, res
        assert res["error"]["code"] == "too_large" and "exceeds the maximum 2048" in res["error"]["message"]
        openapi.check("POST", "/api/v1/exec", status, hdrs, res)


def test_body_too_large_while_reading_is_413(start_service, openapi):
    """Chunked upload, no Content-Length: the limit holds while reading."""
    svc = start_service(env={"MAX_BODY_BYTES": "2048"})
    host, port = svc.address.rsplit(":", 1)
    import http.client

    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    body = json.dumps({"code": "#" * 3000}).encode()
    conn.request("POST", "/api/v1/exec", body=iter([body[:1000], body[1000:]]),
                 headers={"Content-Type": "application/json"}, encode_chunked=True)
    resp = conn.getresponse()
    res = json.loads(resp.read())
    conn.close()
    assert resp.status == 413, res
    assert res["error"]["code"] == "too_large"
    openapi.check("POST", "/api/v1/exec", 413, {k.lower(): v for k, v in resp.getheaders()}, res)


def test_body_just_under_the_limit_is_read(start_service):
    svc = start_service(env={"MAX_BODY_BYTES": "2048"})
    body = {"code": "print(1) #" + "x" * 1900}
    assert len(json.dumps(body)) < 2048
    status, _, res = post_exec(svc.url, body)
    assert status == 200 and res["stdout"] == "1\n"


def test_code_above_max_code_bytes_is_400(start_service):
    svc = start_service(env={"MAX_CODE_BYTES": "1k"})
    status, _, res = post_exec(svc.url, {"code": "#" * 2000})
    assert status == 400 and "code" in res["error"]["message"], res


# ---- /health ------------------------------------------------------------------------------------


def test_health(api):
    status, hdrs, h = api("GET", "/health")
    assert status == 200
    assert hdrs["content-type"].startswith("application/json")
    assert h["status"] == "ok"
    assert h["languages"] == ["python", "javascript", "bash"]
    assert h["backend"] in ("namespaces", "qemu", "firecracker")
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", h["version"])
    assert h["max_concurrent"] >= 2
    assert h["active"] >= 0 and h["queued"] >= 0
    warm = h["warm"]
    assert isinstance(warm["enabled"], bool) and 0 <= warm["templates_ready"] <= warm["templates_total"]


def test_health_head(service_url):
    status, hdrs, body = http_request(service_url, "HEAD", "/health")
    assert status == 200 and body == ""


def test_health_version_matches_cli(service_url):
    from conftest import BIN
    _, _, h = http_request(service_url, "GET", "/health")
    out = subprocess.run([BIN, "version"], capture_output=True, text=True, timeout=30).stdout
    assert h["version"] in out


# ---- /metrics -----------------------------------------------------------------------------------


def test_metrics_pass_promtool(service_url):
    run_any = post_exec(service_url, {"code": "true", "language": "bash"})
    assert run_any[0] == 200
    status, hdrs, text = http_request(service_url, "GET", "/metrics")
    assert status == 200
    assert hdrs["content-type"].startswith("text/plain")
    check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True,
                           timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr


def test_metrics_families_present(service_url):
    m = get_metrics(service_url)
    for lang in ("python", "javascript", "bash"):
        for outcome in ("ok", "error", "timeout", "oom", "killed", "setup_failed"):
            assert f'hexr_sandbox_executions_total{{language="{lang}",outcome="{outcome}"}}' in m
    for reason in ("invalid_request", "too_large", "unsupported_media_type", "not_found", "overloaded",
                   "queue_timeout", "draining", "forbidden", "quota_exceeded"):
        assert f'hexr_sandbox_rejected_requests_total{{reason="{reason}"}}' in m
    assert "hexr_sandbox_active_executions" in m and "hexr_sandbox_queued_executions" in m
    assert 'hexr_sandbox_execution_duration_seconds_bucket{le="+Inf"}' in m
    assert "hexr_sandbox_execution_duration_seconds_sum" in m
    for name in ("hexr_sandbox_warm_enabled", "hexr_sandbox_warm_templates_ready", "hexr_sandbox_warm_templates",
                 "hexr_sandbox_warm_template_restarts_total", "hexr_sandbox_max_concurrent_executions",
                 "hexr_sandbox_draining"):
        assert name in m, name
    for source in ("image", "cached", "installed"):
        assert f'hexr_sandbox_packages_total{{source="{source}"}}' in m


def test_metrics_move(service_url):
    before = get_metrics(service_url)
    assert post_exec(service_url, {"code": "exit 0", "language": "bash"})[0] == 200
    assert post_exec(service_url, {"code": "exit 4", "language": "bash"})[0] == 200
    assert post_exec(service_url, {"code": "sleep 10", "language": "bash", "timeout": 1})[0] == 200
    assert post_exec(service_url, {"code": "x", "timeout": 0})[0] == 400
    assert post_exec(service_url, b"{}", headers={"Content-Type": "text/plain"})[0] == 415
    after = get_metrics(service_url)

    def delta(key: str) -> float:
        return after.get(key, 0) - before.get(key, 0)

    assert delta('hexr_sandbox_executions_total{language="bash",outcome="ok"}') == 1
    assert delta('hexr_sandbox_executions_total{language="bash",outcome="error"}') == 1
    assert delta('hexr_sandbox_executions_total{language="bash",outcome="timeout"}') == 1
    assert delta('hexr_sandbox_rejected_requests_total{reason="invalid_request"}') == 1
    assert delta('hexr_sandbox_rejected_requests_total{reason="unsupported_media_type"}') == 1
    assert delta('hexr_sandbox_execution_duration_seconds_count') == 3
    assert delta('hexr_sandbox_execution_duration_seconds_sum') >= 1.0  # the timeout ran >= 1s
    assert delta('hexr_sandbox_http_requests_total{route="/api/v1/exec",status="200"}') == 3
    assert delta('hexr_sandbox_http_requests_total{route="/api/v1/exec",status="400"}') == 1
    assert delta('hexr_sandbox_http_requests_total{route="/api/v1/exec",status="415"}') == 1
    assert delta('hexr_sandbox_http_requests_total{route="/metrics",status="200"}') == 1
    buckets = [v for k, v in after.items() if k.startswith("hexr_sandbox_execution_duration_seconds_bucket")]
    assert buckets == sorted(buckets), "histogram buckets must be cumulative"


# ---- the log ------------------------------------------------------------------------------------


def test_one_log_line_per_execution(service):
    secret_code, secret_env = "sekrit-code-4242", "sekrit-env-4343"
    xfcc = ('By=spiffe://cluster.local/ns/hexr/sa/sandbox;Hash=abcd;Subject="O=acme,CN=agent";'
            'URI=spiffe://cluster.local/ns/acme/sa/agent-one')
    status, hdrs, res = post_exec(service.url, {"code": f"echo ok # {secret_code}", "language": "bash",
                                                "env_vars": {"TOKEN": secret_env}, "timeout": 7,
                                                "memory_mb": 100},
                                  headers={"X-Forwarded-Client-Cert": xfcc})
    assert status == 200
    rec = service.exec_log(res["id"])
    # No identities configured: the header comes from an unverified client, so it names
    # nobody (test_service_identity.py covers trusted proxies); it is logged as ignored.
    assert "caller" not in rec
    assert any(r.get("event") == "auth" and res["id"] in r.get("message", "") and "ignored" in r["message"]
               for r in service.json_log())
    assert rec["language"] == "bash" and rec["timeout"] == 7 and rec["memory_mb"] == 100
    assert rec["outcome"] == "ok" and rec["exit_code"] == 0 and rec["status"] == 200
    assert rec["start"] == "cold"  # bash never starts from a warm template
    assert rec["code_bytes"] == len(f"echo ok # {secret_code}")
    assert isinstance(rec["execution_time_ms"], int) and isinstance(rec["memory_used_mb"], int)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", rec["ts"])
    text = service.log_text()
    assert secret_code not in text and secret_env not in text
    assert sum(1 for r in service.json_log() if r.get("id") == res["id"]) == 1


def test_log_line_for_rejected_request(service):
    status, hdrs, res = post_exec(service.url, {"code": "x", "timeout": -3})
    assert status == 400
    rec = service.exec_log(hdrs["x-request-id"])
    assert rec["status"] == 400 and rec["error"] == "invalid_request" and rec["outcome"] == "rejected"


def test_program_starts_with_clean_signal_state(api):
    """The service blocks SIGTERM/SIGINT/SIGHUP (signalfd) and ignores SIGPIPE; none of
    that may reach the sandboxed program."""
    res = run(api, {"code": 'grep -E "^Sig(Blk|Ign)" /proc/self/status; yes | head -1 >/dev/null; '
                            'echo "pipe ${PIPESTATUS[0]}"', "language": "bash"})
    assert "SigBlk:\t0000000000000000" in res["stdout"], res["stdout"]
    assert "SigIgn:\t0000000000000000" in res["stdout"], res["stdout"]
    assert "pipe 141" in res["stdout"], res["stdout"]  # `yes` died of SIGPIPE


# ---- a host that cannot run sandboxes -----------------------------------------------------------


def test_sandbox_setup_failure_is_500_with_the_reason(start_service, openapi):
    svc = start_service(env={"SANDBOX_ROOTFS": "/nonexistent-hxs-rootfs"})
    status, hdrs, res = post_exec(svc.url, {"code": "print(1)"})
    assert status == 500, res
    assert res["error"]["code"] == "sandbox_setup_failed"
    assert "/nonexistent-hxs-rootfs" in res["error"]["message"]
    openapi.check("POST", "/api/v1/exec", status, hdrs, res)
    m = get_metrics(svc.url)
    assert m['hexr_sandbox_executions_total{language="python",outcome="setup_failed"}'] == 1
    rec = svc.exec_log(hdrs["x-request-id"])
    assert rec["outcome"] == "setup_failed" and rec["status"] == 500
    # the service itself carries on
    assert http_request(svc.url, "GET", "/metrics")[0] == 200


def test_health_is_503_unhealthy_when_sandboxes_cannot_run(start_service, openapi):
    svc = start_service(env={"SANDBOX_ROOTFS": "/nonexistent-hxs-rootfs"})
    status, hdrs, h = http_request(svc.url, "GET", "/health")
    openapi.check("GET", "/health", status, hdrs, h)
    assert status == 503 and h["status"] == "unhealthy" and h.get("message"), h


# ---- the OpenAPI document itself ----------------------------------------------------------------


def test_openapi_refs_resolve(openapi):
    def walk(node, where):
        if isinstance(node, dict):
            if "$ref" in node:
                openapi._resolve(node)  # raises KeyError when dangling
            for k, v in node.items():
                walk(v, f"{where}/{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}[{i}]")

    walk(openapi.doc, "#")
    assert set(openapi.doc["paths"]) == {"/api/v1/exec", "/execute", "/api/v1/executions/{id}", "/health",
                                          "/metrics", "/api/v1/runtimes", "/api/v1/sessions",
                                          "/api/v1/sessions/{id}", "/api/v1/sessions/{id}/exec",
                                          "/api/v1/sessions/{id}/interrupt",
                                          "/api/v1/sessions/{id}/files", "/api/v1/sessions/{id}/files/{path}",
                                          "/mcp"}


def test_openapi_request_fields_are_the_served_ones(api, openapi):
    schema = openapi.doc["components"]["schemas"]["ExecRequest"]
    valid = {"code": "print(1)", "language": "python", "timeout": 5, "memory_mb": 64,
             "env_vars": {"A": "b"}, "packages": [], "stdin": "",
             "files": [{"path": "a.txt", "content": "x", "encoding": "utf-8"}], "return_files": ["*.txt"]}
    assert set(schema["properties"]) == set(valid)
    assert schema["required"] == ["code"]
    res = run(api, valid)  # every documented field is accepted at once
    assert res["stdout"] == "1\n"
    result_schema = openapi.doc["components"]["schemas"]["ExecResult"]
    assert set(result_schema["required"]) == set(result_schema["properties"]) == RESULT_FIELDS
