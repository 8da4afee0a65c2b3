"""Fixtures that start the real `hexr-sandbox serve` for the integration suites.

Fixtures (other suites depend on these names):

    service_url        session: "http://127.0.0.1:PORT" of a service with default settings
    service_unix_url   session: "unix:/tmp/.../sock" of a service listening on a unix socket
    start_service      function: factory start_service(env=None, listen=None) -> Service,
                       for tests that need their own settings; stopped at teardown
    openapi            session: checks served responses against docs/openapi.yaml

Helpers: post_exec(url, body, headers=None, timeout=...) -> (status, headers, json_or_text)
and http_request(url, method, path, ...) for any route; both speak unix: URLs too.

The binary comes from $HEXR_SANDBOX_BIN (default build/hexr-sandbox). Every process
started here is stopped at teardown (SIGTERM, then SIGKILL), every wait has a timeout.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("HEXR_SANDBOX_BIN") or str(ROOT / "build" / "hexr-sandbox")
OPENAPI = ROOT / "docs" / "openapi.yaml"

START_TIMEOUT = 30.0   # seconds for "listening on" to appear
STOP_TIMEOUT = 45.0    # seconds after SIGTERM before SIGKILL (DRAIN_TIMEOUT is 30s by default)
LISTEN_RE = re.compile(r"^hexr-sandbox: listening on (\S+)")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _mounts_under(path: str) -> List[str]:
    """Mount points at or below path (in our mount namespace)."""
    found = []
    real = os.path.realpath(path)
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                mp = line.split()[4].encode().decode("unicode_escape")
                if mp == real or mp.startswith(real + "/"):
                    found.append(mp)
    except OSError:
        pass
    return found


def safe_rmtree(path: str) -> None:
    """rmtree that never descends into a mount (a leaked bind mount of the host's /usr
    must not be emptied by a test's cleanup)."""
    if not os.path.exists(path):
        return
    if _mounts_under(path):
        return  # leave it; the engine's next start sweeps it
    shutil.rmtree(path, ignore_errors=True)


class Service:
    """A running `hexr-sandbox serve`: .url, .proc, .log (stderr lines), .stop()."""

    def __init__(self, proc: subprocess.Popen, log_path: str, workdir: str, listen: str):
        self.proc = proc
        self.log_path = log_path
        self.workdir = workdir
        self.listen = listen
        self.address = ""
        self.url = ""
        self.returncode: Optional[int] = None

    @property
    def log(self) -> List[str]:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read().splitlines()
        except OSError:
            return []

    def log_text(self) -> str:
        return "\n".join(self.log)

    def json_log(self) -> List[Dict[str, Any]]:
        out = []
        for line in self.log:
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out

    def exec_log(self, request_id: str, timeout: float = 10.0) -> Dict[str, Any]:
        """The log line of one execution request, waiting for it to be written."""
        deadline = time.monotonic() + timeout
        while True:
            for rec in self.json_log():
                if rec.get("event") == "exec" and rec.get("id") == request_id:
                    return rec
            if time.monotonic() > deadline:
                raise AssertionError(f"no log line for request {request_id}:\n{self.log_text()}")
            time.sleep(0.05)

    def wait_started(self, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.log:
                m = LISTEN_RE.match(line)
                if m:
                    self.address = m.group(1)
                    self.url = self.address if self.address.startswith("unix:") else "http://" + self.address
                    return
            if self.proc.poll() is not None:
                raise RuntimeError(f"hexr-sandbox serve exited with {self.proc.returncode}:\n{self.log_text()}")
            time.sleep(0.02)
        raise RuntimeError(f"hexr-sandbox serve did not start within {timeout}s:\n{self.log_text()}")

    def signal(self, signo: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signo)

    def wait(self, timeout: float) -> int:
        self.returncode = self.proc.wait(timeout=timeout)
        return self.returncode

    def stop(self, timeout: float = STOP_TIMEOUT) -> Optional[int]:
        """SIGTERM, then SIGKILL after timeout. Returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self.returncode = self.proc.returncode
        safe_rmtree(self.workdir)
        return self.returncode


def _launch(env: Optional[Dict[str, str]], listen: Optional[str]) -> Service:
    attempts = 1 if listen else 3  # a picked free port can be taken before we bind it
    last: Optional[BaseException] = None
    for _ in range(attempts):
        workdir = tempfile.mkdtemp(prefix="hxs-it-")
        # The sandbox's root (an unprivileged uid on the host) must be able to reach
        # STATE_DIR's mount point: mkdtemp's 0700 would stop it.
        os.chmod(workdir, 0o755)
        state = os.path.join(workdir, "state")
        os.mkdir(state, 0o755)
        addr = listen or f"127.0.0.1:{free_port()}"
        full_env = dict(os.environ)
        full_env.pop("LISTEN_ADDRESS", None)
        full_env["STATE_DIR"] = state
        full_env.update(env or {})
        log_path = os.path.join(workdir, "serve.log")
        try:
            with open(log_path, "wb") as logf:
                proc = subprocess.Popen([BIN, "serve", "--listen", addr], env=full_env,
                                        stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                        start_new_session=True)
        except OSError:
            safe_rmtree(workdir)
            raise
        svc = Service(proc, log_path, workdir, addr)
        try:
            svc.wait_started()
            return svc
        except RuntimeError as e:
            last = e
            svc.stop(timeout=5)
            if "in use" not in str(e) and "Address already" not in str(e):
                break
    raise last if last else RuntimeError("could not start the service")


def _stop_checked(svc: Service) -> None:
    """Stops svc and fails if it did not exit 0 (a crash, a sanitizer report, a drain
    that hung and needed SIGKILL)."""
    rc = svc.stop()
    if rc != 0:
        tail = "\n".join(svc.log[-40:])
        pytest.fail(f"hexr-sandbox serve ({svc.listen}) exited with {rc} on SIGTERM:\n{tail}",
                    pytrace=False)


@pytest.fixture(scope="session")
def service() -> Iterator[Service]:
    svc = _launch(None, None)
    yield svc
    _stop_checked(svc)


@pytest.fixture(scope="session")
def service_url(service: Service) -> str:
    return service.url


@pytest.fixture(scope="session")
def unix_service() -> Iterator[Service]:
    sockdir = tempfile.mkdtemp(prefix="hxs-sock-")
    svc = _launch(None, f"unix:{sockdir}/sock")
    yield svc
    _stop_checked(svc)
    shutil.rmtree(sockdir, ignore_errors=True)


@pytest.fixture(scope="session")
def service_unix_url(unix_service: Service) -> str:
    return unix_service.url


@pytest.fixture
def start_service() -> Iterator[Callable[..., Service]]:
    started: List[Service] = []

    def start(env: Optional[Dict[str, str]] = None, listen: Optional[str] = None) -> Service:
        svc = _launch(env, listen)
        started.append(svc)
        return svc

    yield start
    failed = []
    for svc in started:
        already = svc.returncode is not None or svc.proc.poll() is not None
        rc = svc.stop()
        if rc != 0 and not already:
            failed.append(f"{svc.listen}: exit {rc}\n" + "\n".join(svc.log[-40:]))
    if failed:
        pytest.fail("services did not stop cleanly on SIGTERM:\n" + "\n".join(failed), pytrace=False)


# ---- HTTP helpers --------------------------------------------------------------------


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


def connection(url: str, timeout: float = 60.0) -> http.client.HTTPConnection:
    if url.startswith("unix:"):
        return _UnixHTTPConnection(url[len("unix:"):], timeout)
    m = re.match(r"^http://([^/:]+|\[[^\]]+\]):(\d+)/?$", url)
    assert m, f"unsupported test URL {url!r}"
    host = m.group(1).strip("[]")
    return http.client.HTTPConnection(host, int(m.group(2)), timeout=timeout)


def http_request(url: str, method: str, path: str, body: Union[None, bytes, Dict[str, Any], Any] = None,
                 headers: Optional[Dict[str, str]] = None, timeout: float = 60.0,
                 ) -> Tuple[int, Dict[str, str], Any]:
    """One request on a new connection. Returns (status, headers with lowercase names,
    parsed JSON or text). A dict body is sent as JSON with Content-Type application/json
    unless headers name another; a header given as None is left out."""
    hdrs = dict(headers or {})
    data: Optional[bytes] = None
    if body is not None:
        data = body if isinstance(body, (bytes, bytearray)) else json.dumps(body).encode()
        if not any(k.lower() == "content-type" for k in hdrs):
            hdrs["Content-Type"] = "application/json"
    hdrs = {k: v for k, v in hdrs.items() if v is not None}  # None: leave the header out
    conn = connection(url, timeout)
    try:
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        raw = resp.read()
        rh = {k.lower(): v for k, v in resp.getheaders()}
        status = resp.status
    finally:
        conn.close()
    ctype = rh.get("content-type", "")
    parsed: Any = raw.decode("utf-8", errors="replace")
    if ctype.startswith("application/json") and raw:
        parsed = json.loads(raw)
    return status, rh, parsed


def post_exec(url: str, body: Union[bytes, Dict[str, Any]], headers: Optional[Dict[str, str]] = None,
              timeout: float = 120.0, path: str = "/api/v1/exec") -> Tuple[int, Dict[str, str], Any]:
    return http_request(url, "POST", path, body, headers, timeout)


def get_metrics(url: str) -> Dict[str, float]:
    """Samples of /metrics as {'name{labels}': value}."""
    status, _, text = http_request(url, "GET", "/metrics", timeout=30)
    assert status == 200
    out: Dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


# ---- OpenAPI conformance ---------------------------------------------------------------


class OpenAPI:
    """Checks a served response against docs/openapi.yaml: the path, method and status
    are documented, and the body matches the schema (a small validator for the subset
    the document uses: type, nullable, required, properties, additionalProperties,
    items, enum, minimum, pattern, $ref)."""

    def __init__(self, doc: Dict[str, Any]):
        self.doc = doc

    def _resolve(self, node: Dict[str, Any]) -> Dict[str, Any]:
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            assert ref.startswith("#/"), ref
            cur: Any = self.doc
            for part in ref[2:].split("/"):
                cur = cur[part]
            node = cur
        return node

    def validate(self, value: Any, schema: Dict[str, Any], where: str = "$") -> None:
        schema = self._resolve(schema)
        if value is None:
            assert schema.get("nullable", False), f"{where}: null where the schema does not allow it"
            return
        t = schema.get("type")
        checks = {
            "object": lambda v: isinstance(v, dict),
            "array": lambda v: isinstance(v, list),
            "string": lambda v: isinstance(v, str),
            "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            "boolean": lambda v: isinstance(v, bool),
        }
        if t:
            assert checks[t](value), f"{where}: {value!r} is not of type {t}"
        if "enum" in schema:
            assert value in schema["enum"], f"{where}: {value!r} not in {schema['enum']}"
        if "minimum" in schema:
            assert value >= schema["minimum"], f"{where}: {value!r} < minimum {schema['minimum']}"
        if "pattern" in schema:
            assert re.search(schema["pattern"], value), f"{where}: {value!r} does not match {schema['pattern']}"
        if t == "object":
            props = schema.get("properties", {})
            for req in schema.get("required", []):
                assert req in value, f"{where}: required field {req!r} missing in {value!r}"
            extra = schema.get("additionalProperties", True)
            for k, v in value.items():
                if k in props:
                    self.validate(v, props[k], f"{where}.{k}")
                elif extra is False:
                    raise AssertionError(f"{where}: field {k!r} not in the schema")
                elif isinstance(extra, dict):
                    self.validate(v, extra, f"{where}.{k}")
        if t == "array" and "items" in schema:
            for i, v in enumerate(value):
                self.validate(v, schema["items"], f"{where}[{i}]")

    def check(self, method: str, path: str, status: int, headers: Dict[str, str], body: Any) -> None:
        paths = self.doc["paths"]
        assert path in paths, f"{path} is not documented"
        op = paths[path].get(method.lower())
        assert op is not None, f"{method} {path} is not documented"
        resp = op["responses"].get(str(status))
        assert resp is not None, f"{method} {path} -> {status} is not documented"
        resp = self._resolve(resp)
        for name, h in (resp.get("headers") or {}).items():
            h = self._resolve(h)
            assert name.lower() in headers, f"{method} {path} -> {status}: header {name} missing"
            sch = self._resolve(h["schema"])
            raw = headers[name.lower()]
            self.validate(int(raw) if sch.get("type") == "integer" else raw, sch, f"header {name}")
        content = resp.get("content") or {}
        if not content:
            return
        ctype = headers.get("content-type", "").split(";")[0].strip()
        assert ctype in content, f"{method} {path} -> {status}: content type {ctype!r} not documented"
        self.validate(body, content[ctype]["schema"], f"{method} {path} {status}")


@pytest.fixture(scope="session")
def openapi() -> OpenAPI:
    try:
        import yaml  # Debian python3-yaml
    except ImportError:  # pragma: no cover - the setup script installs it
        pytest.fail("python3-yaml is needed to read docs/openapi.yaml (apt-get install python3-yaml)")
    with open(OPENAPI, encoding="utf-8") as f:
        return OpenAPI(yaml.safe_load(f))
