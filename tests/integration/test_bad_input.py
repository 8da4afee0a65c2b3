"""Hostile and malformed input to `hexr-sandbox serve`, beyond the field-by-field cases
of test_service.py (whose BAD_BODIES and malformed bodies are not repeated here).

Every case asserts the documented status (docs/openapi.yaml: 400 invalid_request whose
message names the field or the problem, 413, ...) and then that the service still runs
a normal request promptly and that no sandbox of it was left behind (no process of the
sandbox uids, no execution cgroup of the instance; the host-side checks of hxstest.host).

Slow clients: a background group of sockets (a slow-loris trickling header bytes, a
truncated body, a body that never comes) is started by the first test and judged by
the last one, so their waits overlap the rest of the file instead of adding to it.

Times are never asserted except as generous hang bounds. The whole file takes about a
minute (dominated by the 60 s the slow-loris is given).

Run: /usr/bin/python3 -m pytest tests/integration/test_bad_input.py -q
"""

from __future__ import annotations

import json
import os
import re
import select
import socket
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import pytest

from hxstest import host as _cli
from conftest import post_exec
from test_service import BAD_BODIES  # covered there; the generated cases below skip them

HANG = 30.0           # a normal request must answer within this (hang detection only)
LEAK_TIMEOUT = 10.0   # leftovers must be gone within this after a reply
SLOW_LIMIT = 60.0     # a slow client must have been closed by then (the idle timeout is 30 s)
NORMAL = {"code": "echo ok", "language": "bash"}


# ---- helpers ------------------------------------------------------------------------------------


def state_dir_of(svc) -> str:
    return os.path.join(svc.workdir, "state")


def template_cgroups(svc) -> set:
    """Cgroup names of the service's warm templates (alive as long as it is)."""
    uid = _cli.uid_base() + 2000
    needle = state_dir_of(svc).encode()
    names = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/status" % pid) as f:
                uids = next((ln.split()[1:] for ln in f if ln.startswith("Uid:")), [])
            if str(uid) not in uids:
                continue
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if needle not in f.read():
                    continue
            with open("/proc/%s/cgroup" % pid) as f:
                names |= set(re.findall(r"/hexr-sandbox/(s\d+\.\d+-\d+)", f.read()))
        except OSError:
            continue
    return names


def leftovers(svc) -> List[str]:
    """Sandbox processes and execution cgroups of this service instance."""
    pid = svc.proc.pid
    keep = template_cgroups(svc)
    problems = ["process: " + p for p in _cli.leaked_sandbox_processes({pid})]
    problems += ["cgroup: " + c for c in _cli.leftover_cgroups({pid}) if os.path.basename(c) not in keep]
    return problems


def assert_still_serving(svc, what: str = "") -> None:
    """A normal request is answered, and nothing of any sandbox is left."""
    assert svc.proc.poll() is None, f"the service died {what}:\n" + "\n".join(svc.log[-30:])
    try:
        status, _, res = post_exec(svc.url, NORMAL, timeout=HANG)
    except OSError as e:
        raise AssertionError(f"no answer to a normal request within {HANG}s {what}: {e!r}") from e
    assert status == 200 and res["stdout"] == "ok\n", (what, status, res)
    if not _cli.wait_until(lambda: not leftovers(svc), LEAK_TIMEOUT):
        raise AssertionError(f"left behind {what}: {leftovers(svc)}")


def rejected(svc, openapi, body: Any, status: int, headers: Optional[Dict[str, str]] = None
             ) -> Tuple[str, str]:
    """POSTs body, asserts the status and the documented error shape; returns (code, message)."""
    got, hdrs, res = post_exec(svc.url, body, headers=headers, timeout=HANG)
    assert got == status, (got, res)
    assert isinstance(res, dict) and set(res) == {"error"}, res
    openapi.check("POST", "/api/v1/exec", got, hdrs, res)
    return res["error"]["code"], res["error"]["message"]


def raw_request(body: bytes, content_length: Optional[int] = None, extra: bytes = b"") -> bytes:
    n = len(body) if content_length is None else content_length
    return (b"POST /api/v1/exec HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n%s\r\n%s" % (n, extra, body))


def tcp(svc, timeout: float = HANG) -> socket.socket:
    host, port = svc.address.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=timeout)


class Responses:
    """Reads HTTP/1.1 responses (Content-Length delimited) from one socket, in order."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = b""

    def _fill(self) -> bool:
        chunk = self.sock.recv(65536)
        self.buf += chunk
        return bool(chunk)

    def next(self) -> Tuple[int, Dict[str, str], Any]:
        while b"\r\n\r\n" not in self.buf:
            if not self._fill():
                raise EOFError("connection closed before a response: %r" % self.buf[:200])
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        hdrs = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
        n = int(hdrs.get("content-length", "0"))
        while len(self.buf) < n:
            if not self._fill():
                raise EOFError("connection closed inside a response body")
        body, self.buf = self.buf[:n], self.buf[n:]
        parsed: Any = body.decode("utf-8", "replace")
        if hdrs.get("content-type", "").startswith("application/json") and body:
            parsed = json.loads(body)
        return status, hdrs, parsed


# ---- slow clients, in the background ------------------------------------------------------------


class SlowClient(threading.Thread):
    """One misbehaving connection. Sends `first` at once, then `trickle` one byte per
    `interval` seconds (or nothing), optionally half-closes, and records when the
    service closed the connection (closed_after) and anything it answered."""

    def __init__(self, svc, name: str, first: bytes, trickle: bytes = b"", interval: float = 1.0,
                 shut_wr: bool = False, limit: float = SLOW_LIMIT):
        super().__init__(name=name, daemon=True)
        self.svc, self.first, self.trickle, self.interval = svc, first, trickle, interval
        self.shut_wr, self.limit = shut_wr, limit
        self.closed_after: Optional[float] = None
        self.received = b""
        self.sent = 0
        self.error: Optional[str] = None

    def run(self) -> None:
        t0 = time.monotonic()
        try:
            s = tcp(self.svc)
        except OSError as e:
            self.error = repr(e)
            return
        with s:
            try:
                s.sendall(self.first)
                self.sent = len(self.first)
                if self.shut_wr:
                    s.shutdown(socket.SHUT_WR)
                pending = self.trickle
                while time.monotonic() - t0 < self.limit:
                    readable, _, _ = select.select([s], [], [], self.interval)
                    if readable:
                        try:
                            data = s.recv(4096)
                        except ConnectionResetError:
                            data = b""
                        if not data:
                            self.closed_after = time.monotonic() - t0
                            return
                        self.received += data
                        continue
                    if pending:
                        s.send(pending[:1])
                        pending = pending[1:]
                        self.sent += 1
            except (BrokenPipeError, ConnectionResetError):
                self.closed_after = time.monotonic() - t0


@pytest.fixture(scope="module")
def slow_clients(service):
    clients = [
        # slow-loris: a header line that never ends, one byte per second
        SlowClient(service, "slow-loris", b"GET /health HTTP/1.1\r\nHost: t\r\nX-Slow: ",
                   trickle=b"a" * 1000, interval=1.0),
        # a body announced as 100 bytes, 9 sent, then the client half-closes
        SlowClient(service, "truncated-then-shut", raw_request(b'{"code":"', content_length=100),
                   shut_wr=True),
        # headers complete, the announced body never comes
        SlowClient(service, "body-never-sent", raw_request(b"", content_length=100)),
    ]
    for c in clients:
        c.start()
    yield {c.name: c for c in clients}
    for c in clients:
        c.join(timeout=SLOW_LIMIT + 10)


def test_slow_clients_do_not_stop_others(service, slow_clients):
    """While a slow-loris trickles its headers and two clients sit on unfinished bodies,
    other clients are served as usual."""
    time.sleep(3)  # let the trickle get going
    for _ in range(3):
        assert_still_serving(service, "while slow clients are connected")
    assert all(c.is_alive() or c.closed_after is not None for c in slow_clients.values())


# ---- malformed JSON -----------------------------------------------------------------------------


MALFORMED = [
    b'{"code":"x",}',                      # trailing comma
    b'{"code":"x"',                        # unterminated object
    b'{"code":"x" "language":"bash"}',     # missing comma
    b'{code:"x"}',                         # unquoted key
    b'{"code":"a\nb"}',                    # raw control character in a string
    b'{"code":"a\tb"}',
    b'{"code":"\\x41"}',                   # invalid escape
    b'{"code":"\\u12"}',                   # short \u escape
    b'{"code":"x","timeout":NaN}',
    b'{"code":"x","timeout":Infinity}',
    b'{"code":"x","timeout":-Infinity}',
    b'{"code":"x","timeout":01}',          # leading zero
    b'{"code":"x","timeout":0x10}',
    b'{"code":"x","timeout":+5}',
    b'{"code":"x","timeout":1.}',
    b'{"code":"x"} /* comment */',
    b'{"code":"x"}}',
    b'{"code":"x"}\x00',                   # trailing NUL byte
    b"\x00",
    b"\x1f\x8b\x08\x00\x00\x00\x00\x00",   # a gzip header sent as if it were JSON
    b"[" * 100_000,                        # deep nesting, arrays
    b'{"a":' * 100_000,                    # deep nesting, objects
    b'{"code":"x","env_vars":' + b"[" * 5000 + b"]" * 5000 + b"}",  # too deep inside a field
]


@pytest.mark.parametrize("raw", MALFORMED, ids=lambda r: repr(r[:24]))
def test_malformed_json_is_400_naming_the_body(service, openapi, raw):
    code, msg = rejected(service, openapi, raw, 400)
    assert code == "invalid_request"
    assert msg.startswith("body: invalid JSON at line "), msg
    if len(raw) > 10_000:
        assert "depth" in msg, msg          # names the problem
        assert len(msg) < 400, msg          # and does not echo the body
    assert_still_serving(service, f"after {raw[:24]!r}")


# ---- invalid UTF-8 and lone surrogates, in every string field ------------------------------------


BAD_UTF8 = [
    b"\xc0\xaf",            # overlong '/'
    b"\xe0\x80\xaf",        # overlong, 3 bytes
    b"\xed\xa0\x80",        # a surrogate (U+D800) encoded in UTF-8
    b"\xf4\x90\x80\x80",    # above U+10FFFF
    b"\xf8\x88\x80\x80\x80",  # 5-byte form
    b"\x80",                # lone continuation byte
    b"ok\xe2\x82",          # truncated sequence at the end of the string
    bytes(range(0x80, 0x100)),  # "binary" code
]
UTF8_PLACES = [
    lambda s: b'{"code":"' + s + b'"}',
    lambda s: b'{"code":"x","language":"' + s + b'"}',
    lambda s: b'{"code":"x","env_vars":{"A":"' + s + b'"}}',
    lambda s: b'{"code":"x","env_vars":{"' + s + b'":"v"}}',
    lambda s: b'{"code":"x","stdin":"' + s + b'"}',
    lambda s: b'{"code":"x","packages":["' + s + b'"]}',
    lambda s: b'{"code":"x","' + s + b'":1}',
]


@pytest.mark.parametrize("place", range(len(UTF8_PLACES)),
                         ids=["code", "language", "env-value", "env-name", "stdin", "packages", "key"])
def test_invalid_utf8_is_400(service, openapi, place):
    for bad in BAD_UTF8:
        code, msg = rejected(service, openapi, UTF8_PLACES[place](bad), 400)
        assert code == "invalid_request"
        assert msg.startswith("body: invalid JSON") and "unable to decode byte" in msg, (bad, msg)
    assert_still_serving(service)


@pytest.mark.parametrize("escape", ["\\udc00", "\\ud800\\u0041", "\\ud800\\ud800", "x\\udfff"])
@pytest.mark.parametrize("where", ["stdin", "env_vars", "language"])
def test_lone_surrogate_escapes_are_400(service, openapi, where, escape):
    s = '"%s"' % escape
    body = {"stdin": '{"code":"x","stdin":%s}' % s,
            "env_vars": '{"code":"x","env_vars":{"A":%s}}' % s,
            "language": '{"code":"x","language":%s}' % s}[where].encode()
    code, msg = rejected(service, openapi, body, 400)
    assert code == "invalid_request" and "body: invalid JSON" in msg and "invalid Unicode" in msg, msg
    assert_still_serving(service)


# ---- U+0000 --------------------------------------------------------------------------------------


@pytest.mark.parametrize("env", [{"A\u0000B": "x"}, {"\u0000": "x"}], ids=["middle", "alone"])
def test_nul_in_env_name_is_400_naming_env_vars(service, openapi, env):
    # The contract: a 400 whose message names the field (env_vars) and the rule.
    code, msg = rejected(service, openapi, {"code": "x", "env_vars": env}, 400)
    assert code == "invalid_request"
    assert "env_vars" in msg, (
        "a U+0000 in an env_vars name is rejected, but the message does not name env_vars "
        "(jansson refuses NUL in object keys before the field rules run): %r" % msg)
    assert_still_serving(service)


@pytest.mark.parametrize("value", ["\u0000", "x\u0000", "\u0000x", "a\u0000b\u0000c"])
def test_nul_in_env_value_is_400_naming_env_vars(service, openapi, value):
    code, msg = rejected(service, openapi, {"code": "x", "env_vars": {"OK": "1", "V": value}}, 400)
    assert code == "invalid_request" and msg.startswith("env_vars: ") and "NUL" in msg, msg
    assert_still_serving(service)


def test_nul_in_bash_code_reaches_bash(service):
    # The contract: code "may contain U+0000"; bash refuses a script with a NUL in its
    # first line itself: that is a result (200), not a rejection.
    status, _, res = post_exec(service.url, {"code": "echo a\u0000b", "language": "bash"}, timeout=HANG)
    assert status == 200, res
    assert res["exit_code"] == 126 and "binary" in res["stderr"], res
    assert_still_serving(service)


NUL_PY = ["print(1)\u0000", "print(1)\u0000print(2)", "print(1)\n\u0000\nprint(2)\n"]


def test_nul_in_python_code_runs_alike_warm_and_cold(service, start_service):
    """Warm starts promise to run the code as `python3 /code/main.py` would (README):
    code with U+0000 must give the cold result, not a traceback of the template's runner."""
    cold = start_service(env={"SANDBOX_WARM": "off"})
    differences = []
    for code in NUL_PY:
        results = {}
        for mode, svc in (("warm", service), ("cold", cold)):
            status, _, res = post_exec(svc.url, {"code": code}, timeout=HANG)
            assert status == 200, (mode, res)
            results[mode] = res
        w, c = results["warm"], results["cold"]
        if (w["exit_code"], w["stdout"]) != (c["exit_code"], c["stdout"]) or "_run" in w["stderr"]:
            differences.append("%r: warm exit %s stdout %r stderr %r | cold exit %s stdout %r stderr %r" % (
                code, w["exit_code"], w["stdout"], w["stderr"][-160:], c["exit_code"], c["stdout"],
                c["stderr"][-160:]))
    assert not differences, "warm and cold Python differ on code containing U+0000:\n" + "\n".join(differences)
    assert_still_serving(service)
    assert_still_serving(cold)


# ---- wrong types, every field ----------------------------------------------------------------------


SAMPLES = {"int": 7, "float": 2.5, "str": "s", "true": True, "false": False, "list": [], "list1": ["x"],
           "obj": {}, "obj1": {"k": "v"}}
ALLOWED = {"code": {"str"}, "language": {"str"}, "timeout": {"int"}, "memory_mb": {"int"},
           "env_vars": {"obj", "obj1"}, "packages": {"list", "list1"}, "stdin": {"str"}}


def _type_cases() -> List[Tuple[str, Dict[str, Any], str]]:
    known = [b for b, _ in BAD_BODIES]
    cases = []
    for field, ok in ALLOWED.items():
        for kind, value in SAMPLES.items():
            if kind in ok:
                continue
            body = {"code": value} if field == "code" else {"code": "x", field: value}
            cases.append((f"{field}={kind}", body, field))
    for kind, value in SAMPLES.items():
        if kind != "str":
            cases.append((f"env_vars.A={kind}", {"code": "x", "env_vars": {"A": value}}, "env_vars"))
            cases.append((f"packages[0]={kind}", {"code": "x", "packages": [value]}, "packages"))
    cases = [c for c in cases if c[1] not in known]
    # deeply nested (within the parser's depth limit of 2048) where a flat value belongs
    deep = b"[" * 2000 + b'"x"' + b"]" * 2000
    cases.append(("packages=deep", b'{"code":"x","packages":%s}' % deep, "packages"))
    cases.append(("stdin=deep", b'{"code":"x","stdin":%s}' % deep, "stdin"))
    cases.append(("unknown=deep", b'{"code":"x","deep":%s}' % deep, "deep"))
    return cases


TYPE_CASES = _type_cases()


@pytest.mark.parametrize("body,field", [c[1:] for c in TYPE_CASES], ids=[c[0] for c in TYPE_CASES])
def test_wrong_type_is_400_naming_the_field(service, openapi, body, field):
    code, msg = rejected(service, openapi, body, 400)
    assert code == "invalid_request"
    assert msg.startswith(field), msg
    assert len(msg) < 400, msg
    assert_still_serving(service)


# ---- numbers: timeout and memory_mb ---------------------------------------------------------------


NUMBERS = ["1e308", "-1e308", "1e-300", "0.0", "-0.0", "1E1", "5e0", "-1", "0",
           str(2 ** 63 - 1), str(-(2 ** 63)), str(2 ** 32), str(2 ** 32 + 30)]
HUGE_NUMBERS = [str(2 ** 63), str(2 ** 64), str(10 ** 30), "1e400"]


@pytest.mark.parametrize("field", ["timeout", "memory_mb"])
def test_out_of_range_numbers_are_400_naming_the_field(service, openapi, field):
    for number in NUMBERS:
        code, msg = rejected(service, openapi, b'{"code":"x","%s":%s}' % (field.encode(), number.encode()), 400)
        assert code == "invalid_request" and msg.startswith(field + ": "), (number, msg)
    # Beyond 64 bits jansson stops parsing: the message names the problem ("too big
    # integer", with the column), not the field; reported, accepted here.
    for number in HUGE_NUMBERS:
        code, msg = rejected(service, openapi, b'{"code":"x","%s":%s}' % (field.encode(), number.encode()), 400)
        assert code == "invalid_request", msg
        assert field in msg or "too big integer" in msg or "overflow" in msg, (number, msg)
    assert_still_serving(service)


def test_limits_exactly_at_the_bounds_are_accepted(service):
    for body in ({"timeout": 30}, {"timeout": 1}, {"memory_mb": 512}, {"memory_mb": 16}):
        status, _, res = post_exec(service.url, dict(NORMAL, **body), timeout=HANG)
        assert status == 200 and res["stdout"] == "ok\n", (body, res)
    assert_still_serving(service)


# ---- language ------------------------------------------------------------------------------------


@pytest.mark.parametrize("language", ["", " python", "python ", "PYTHON", "python3", "node.js", "ruby",
                                      "bash\n", "\u00e9", "java\u200bscript", "x" * 10_000])
def test_unknown_language_is_400_naming_it(service, openapi, language):
    code, msg = rejected(service, openapi, {"code": "x", "language": language}, 400)
    assert code == "invalid_request" and msg.startswith("language: ") and "not supported" in msg, msg
    assert "python, javascript, bash" in msg
    assert len(msg) < 400, "an unbounded echo of the request: %d bytes" % len(msg)
    assert_still_serving(service)


# ---- env_vars ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["A=B", "=A", "A=", "=", "A B", "A.B", "-A", "A\n", "\u00c4", "A\u00e9",
                                  "$A", "A\u0001"])
def test_bad_env_name_is_400_naming_env_vars(service, openapi, name):
    code, msg = rejected(service, openapi, {"code": "x", "env_vars": {name: "v"}}, 400)
    assert code == "invalid_request" and msg.startswith("env_vars: ") and "[A-Za-z_]" in msg, msg
    assert_still_serving(service)


def test_env_var_count_and_size_limits(service, openapi):
    many = {f"V{i}": "x" for i in range(10_000)}
    code, msg = rejected(service, openapi, {"code": "x", "env_vars": many}, 400)
    assert msg == "env_vars: 10000 variables exceeds the maximum 256", msg
    code, msg = rejected(service, openapi, {"code": "x", "env_vars": dict(list(many.items())[:257])}, 400)
    assert msg.startswith("env_vars: 257 variables exceeds the maximum 256"), msg
    code, msg = rejected(service, openapi, {"code": "x", "env_vars": {"BIG": "v" * 70_000}}, 400)
    assert msg.startswith("env_vars: ") and "exceeds the maximum 65536" in msg, msg
    code, msg = rejected(service, openapi, {"code": "x", "env_vars": {"N" * 70_000: "v"}}, 400)
    assert msg.startswith("env_vars: "), msg
    assert len(msg) < 400, "the 70000-byte name is echoed back"
    # exactly the maximum runs, and every variable arrives
    status, _, res = post_exec(service.url, {"code": 'echo "$V0 $V254 ${V255-unset} $_under"', "language": "bash",
                                             "env_vars": dict(list(many.items())[:255], _under="u")},
                               timeout=HANG)
    assert status == 200 and res["stdout"] == "x x unset u\n", res
    assert_still_serving(service)


@pytest.mark.parametrize("raw,needle", [
    (b'{"code":"x","env_vars":{"A":"1","A":"2"}}', "A"),
    (b'{"code":"x","\\u0063ode":"y"}', "u0063ode"),     # the same key, escaped (named as written)
    (b'{"code":"x","env_vars":{},"env_vars":{}}', "env_vars"),
    (b'{"code":"x","stdin":"a","stdin":"a"}', "stdin"),
    (b'{"code":"x","nope":1,"nope":2}', "nope"),
])
def test_duplicate_keys_are_400(service, openapi, raw, needle):
    code, msg = rejected(service, openapi, raw, 400)
    assert code == "invalid_request" and "more than once" in msg and needle in msg, msg
    assert_still_serving(service)


# ---- code: empty, odd, and at its size limit -------------------------------------------------------


@pytest.mark.parametrize("language", ["python", "javascript", "bash"])
@pytest.mark.parametrize("code", ["", " \n\t\n"], ids=["empty", "whitespace"])
def test_empty_code_runs_and_succeeds(service, language, code):
    status, _, res = post_exec(service.url, {"code": code, "language": language}, timeout=HANG)
    assert status == 200, res
    assert (res["exit_code"], res["stdout"], res["stderr"]) == (0, "", ""), res


def test_control_and_noncharacter_code_points_reach_the_interpreter(service):
    odd = "".join(chr(c) for c in range(1, 32) if c not in (10, 13)) + "\u007f\ufffe\uffff\U0010ffff"
    code = "# %s\nimport sys\nsrc = open(sys.argv[0], encoding='utf-8').read()\nprint(len(src.split(chr(10))[0]))" % odd
    status, _, res = post_exec(service.url, {"code": code}, timeout=HANG)
    assert status == 200 and res["stdout"] == "%d\n" % (2 + len(odd)), res


def test_code_size_limit_counts_bytes(service, openapi):
    limit = 4 * 1024 * 1024  # MAX_CODE_BYTES default
    body = {"code": "echo ok\n" + "#" * (limit - 8), "language": "bash"}
    status, _, res = post_exec(service.url, body, timeout=HANG)
    assert status == 200 and res["stdout"] == "ok\n", res
    code, msg = rejected(service, openapi, {"code": "#" * (limit + 1)}, 400)
    assert msg == "code: %d bytes exceeds the maximum %d" % (limit + 1, limit), msg
    # 2 Mi + 1 characters, but each is 2 bytes in UTF-8: over the byte limit
    raw = json.dumps({"code": "\u00e9" * (limit // 2 + 1)}, ensure_ascii=False).encode()
    code, msg = rejected(service, openapi, raw, 400)
    assert msg == "code: %d bytes exceeds the maximum %d" % (limit + 2, limit), msg
    assert_still_serving(service)


def test_stdin_size_limit(service, openapi):
    limit = 1024 * 1024  # MAX_STDIN_BYTES default
    status, _, res = post_exec(service.url, {"code": "wc -c", "language": "bash", "stdin": "s" * limit},
                               timeout=HANG)
    assert status == 200 and res["stdout"].strip() == str(limit), res
    code, msg = rejected(service, openapi, {"code": "wc -c", "language": "bash", "stdin": "s" * (limit + 1)}, 400)
    assert msg == "stdin: %d bytes exceeds the maximum %d" % (limit + 1, limit), msg
    assert_still_serving(service)


# ---- huge and truncated bodies ---------------------------------------------------------------------


def test_body_above_the_default_maximum_is_413(service, openapi):
    raw = b'{"code":"' + b"#" * 9_000_000 + b'"}'   # MAX_BODY_BYTES default 8M
    code, msg = rejected(service, openapi, raw, 413)
    assert code == "too_large" and msg.startswith("body: ") and str(8 * 1024 * 1024) in msg, msg
    assert_still_serving(service)


def test_huge_body_with_expect_continue_is_refused_before_it_is_sent(service):
    with tcp(service) as s:
        s.sendall(b"POST /api/v1/exec HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 20000000\r\nExpect: 100-continue\r\n\r\n")
        status, _, res = Responses(s).next()
    assert status == 413 and res["error"]["code"] == "too_large", (status, res)
    assert "20000000 bytes exceeds the maximum" in res["error"]["message"], res
    assert_still_serving(service)


def _executions(svc) -> float:
    from conftest import get_metrics
    return sum(v for k, v in get_metrics(svc.url).items() if k.startswith("hexr_sandbox_executions_total{"))


def test_body_shorter_than_content_length_then_close(service):
    before = _executions(service)
    for part in (b"", b"{", b'{"code":"print(1)"', b'{"code":"print(1)"}'):
        with tcp(service) as s:
            s.sendall(raw_request(part, content_length=len(part) + 50))
        # a client that left gets nothing; the service must not run a sandbox for it
    _cli.wait_until(lambda: sum(1 for r in service.json_log() if r.get("event") == "exec"
                                and r.get("outcome") == "client_disconnected") >= 4, LEAK_TIMEOUT)
    assert _executions(service) == before, "a sandbox ran for a request whose body never arrived"
    assert_still_serving(service, "after truncated bodies")


def test_body_longer_than_content_length(service, openapi):
    """The first Content-Length bytes are the body; what follows belongs to the next
    request on the connection (here garbage) and must not leak into the first."""
    with tcp(service) as s:
        s.sendall(raw_request(b'{"code":"echo one","language":"bash"}GARBAGE\r\n\r\n', content_length=37))
        status, hdrs, res = Responses(s).next()
        assert status == 200 and res["stdout"] == "one\n", res
    with tcp(service) as s:
        s.sendall(raw_request(b'{"code":"echo one","language":"bash"}', content_length=10))
        status, hdrs, res = Responses(s).next()
        assert status == 400 and res["error"]["message"].startswith("body: invalid JSON"), res
    assert_still_serving(service)


def test_truncated_chunked_body_then_close(service):
    with tcp(service) as s:
        s.sendall(b"POST /api/v1/exec HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n40\r\n{\"code\":\"echo hi\",")
    with tcp(service) as s:
        s.sendall(b"POST /api/v1/exec HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n")   # not a chunk size
        try:
            status, _, _ = Responses(s).next()
            assert 400 <= status < 500, status
        except (EOFError, ConnectionResetError):
            pass
    assert_still_serving(service)


def _all_responses(s: socket.socket) -> Tuple[List[Tuple[int, Dict[str, str], Any]], bytes]:
    """Every response on s until the service closes it, and any bytes left over."""
    rd = Responses(s)
    got = []
    while True:
        try:
            got.append(rd.next())
        except (EOFError, ConnectionResetError):
            return got, rd.buf


@pytest.mark.parametrize("framing,needle", [
    (b"Content-Length: 5\r\nContent-Length: 50\r\n", "Content-Length: sent more than once"),
    (b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", "Content-Length and Transfer-Encoding"),
    (b"Transfer-Encoding: gzip\r\n", "only chunked"),
    (b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", "Transfer-Encoding: sent more than once"),
])
def test_ambiguous_body_framing_is_400_and_ends_the_connection(service, framing, needle):
    """Where two HTTP parsers (a proxy's and ours) could disagree on where the body
    ends, a request could be smuggled behind it: refused, and nothing after it read."""
    smuggled = b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n"
    with tcp(service) as s:
        s.sendall(b"POST /api/v1/exec HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n" + framing +
                  b"\r\n0\r\n\r\n" + smuggled)
        got, rest = _all_responses(s)
    assert [g[0] for g in got] == [400], [g[:1] + g[2:] for g in got]
    status, hdrs, res = got[0]
    assert res["error"]["code"] == "invalid_request" and needle in res["error"]["message"], res
    assert hdrs.get("connection") == "close", hdrs
    # and on any route, for the same reason
    with tcp(service) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n" + framing + b"\r\n0\r\n\r\n" + smuggled)
        got, _ = _all_responses(s)
    assert [g[0] for g in got] == [400], [g[:1] + g[2:] for g in got]
    assert_still_serving(service)


@pytest.fixture(scope="module")
def small_body_service():
    from conftest import _launch, _stop_checked
    svc = _launch({"MAX_BODY_BYTES": "1024"}, None)
    yield svc
    _stop_checked(svc)


def test_oversized_body_from_a_client_that_writes_first_gets_413(small_body_service):
    """urllib writes the whole body before it reads: it must read the 413, not a reset,
    however far the body goes past MAX_BODY_BYTES."""
    import urllib.error
    import urllib.request
    svc = small_body_service
    for size in (5_000, 20_000_000):
        body = b'{"code":"' + b"#" * size + b'"}'
        req = urllib.request.Request(svc.url + "/api/v1/exec", data=body,
                                     headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=HANG)
        assert e.value.code == 413, size
        res = json.loads(e.value.read())
        assert res["error"]["code"] == "too_large" and "exceeds the maximum 1024" in res["error"]["message"]
    # refused for another reason, the same: the reply, not a reset
    req = urllib.request.Request(svc.url + "/nowhere", data=b"x" * 20_000_000,
                                 headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=HANG)
    assert e.value.code == 404
    assert_still_serving(svc)


def test_oversized_chunked_body_gets_413(small_body_service):
    """A chunked body has no length to refuse up front: past MAX_BODY_BYTES it is read
    and dropped to its end (up to a bound), then answered."""
    import http.client
    svc = small_body_service
    host, port = svc.address.rsplit(":", 1)

    def chunks():
        for _ in range(32):
            yield b"#" * 65536

    conn = http.client.HTTPConnection(host, int(port), timeout=HANG)
    try:
        conn.request("POST", "/api/v1/exec", body=chunks(), headers={"Content-Type": "application/json"},
                     encode_chunked=True)
        resp = conn.getresponse()
        res = json.loads(resp.read())
    finally:
        conn.close()
    assert resp.status == 413 and res["error"]["code"] == "too_large", res
    assert "more than 1024 bytes" in res["error"]["message"], res
    assert_still_serving(svc)


def test_oversized_headers_are_refused_cleanly(service):
    with tcp(service) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n")
        try:
            status, _, _ = Responses(s).next()
            assert status in (400, 413, 431), status
        except (EOFError, ConnectionResetError):
            pass
    assert_still_serving(service)


# ---- connections ------------------------------------------------------------------------------------


def test_pipelined_requests_are_answered_in_order(service):
    with tcp(service) as s:
        s.sendall(raw_request(json.dumps({"code": "sleep 0.5; echo A", "language": "bash"}).encode())
                  + raw_request(json.dumps({"code": "print('B')"}).encode())
                  + b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n"
                  + raw_request(b'{"code":')   # a bad one in the middle
                  + raw_request(json.dumps({"code": "console.log('C')", "language": "js"}).encode()))
        rd = Responses(s)
        got = [rd.next() for _ in range(5)]
    assert [g[0] for g in got] == [200, 200, 200, 400, 200], [g[:1] + g[2:] for g in got]
    assert got[0][2]["stdout"] == "A\n" and got[1][2]["stdout"] == "B\n" and got[4][2]["stdout"] == "C\n"
    assert got[2][2]["status"] == "ok"
    ids = [g[1]["x-request-id"] for g in got]
    assert len(set(ids)) == 5
    assert_still_serving(service)


def test_many_idle_connections(start_service):
    """More idle clients than MAX_CONNECTIONS, none of which sends a request line: the
    service keeps serving (a newcomer takes the place of the oldest of them), and never
    answers an idle one."""
    svc = start_service(env={"MAX_CONNECTIONS": "16", "MAX_CONNECTIONS_PER_ADDRESS": "16"})
    idle = [tcp(svc) for _ in range(20)]
    try:
        for s in idle[:3]:
            s.sendall(b"GET /he")      # some with a partial request line, the rest silent
        assert_still_serving(svc, "with 20 idle connections for 16 slots")
        m = __import__("conftest").get_metrics(svc.url)
        assert m['hexr_sandbox_connections_closed_total{reason="replaced"}'] >= 20 - 12, m
        closed = 0
        for s in idle:
            s.settimeout(0.2)
            try:
                data = s.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                data = b""
            assert data == b"", f"an idle connection was answered: {data!r}"
            closed += 1
        assert closed >= 20 - 12
    finally:
        for s in idle:
            s.close()
    assert_still_serving(svc, "after the idle connections left")


# ---- last: the slow clients ---------------------------------------------------------------------------


def test_slow_clients_are_closed_eventually(service, slow_clients):
    """The slow clients started by the first test: the service closed each within
    SLOW_LIMIT (its idle timeout is 30 s), and never answered an incomplete request."""
    for c in slow_clients.values():
        c.join(timeout=SLOW_LIMIT + 10)
    problems = []
    for name, c in slow_clients.items():
        assert c.error is None, (name, c.error)
        if c.closed_after is None:
            problems.append("%s: still connected after %.0f s (%d bytes sent%s)"
                            % (name, SLOW_LIMIT, c.sent, ", one per %.0f s" % c.interval if c.trickle else ""))
        if c.received and not c.received.startswith(b"HTTP/1.1 4"):
            problems.append("%s: answered: %r" % (name, c.received[:80]))
    assert not problems, (
        "slow clients were not closed; the 30 s connection timeout counts only inactivity, so a "
        "client sending a byte a second holds its connection (and MAX_CONNECTIONS of them hold "
        "the service) forever:\n" + "\n".join(problems))
    assert_still_serving(service)
