"""HTTP helpers for the service under test: one request per connection, over TCP
(http://host:port) or a unix socket (unix:/path), with a timeout; JSON in and out."""

from __future__ import annotations

import http.client
import json
import re
import socket
from typing import Any, Dict, Optional, Tuple, Union

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
