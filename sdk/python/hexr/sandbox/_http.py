"""HTTP transport of the hexr.sandbox SDK (internal).

Two transports share one address parser and one reply interpreter:

* :func:`request_sync` uses :mod:`http.client` over a socket this module
  connects itself (TCP, TLS or a unix socket);
* :func:`request_async` speaks HTTP/1.1 by hand over :mod:`asyncio` streams
  (``open_connection`` / ``open_unix_connection``), so many requests can wait on
  the service at once without threads.

Both send ``Connection: close`` and read one response (``Content-Length``,
``chunked`` or until end of stream). A request body is bytes or a :class:`Body`
written piece by piece (a multipart upload streamed from disk). A reply is read
whole (:func:`request_sync`, :func:`request_async`) or opened and read as it
arrives (:func:`open_sync`, :func:`open_async`: Server-Sent Events).
"""

from __future__ import annotations

import asyncio
import email.utils
import errno
import http.client
import json
import math
import socket
import time
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, AsyncIterator, Dict, Iterator, Optional, Union

try:
    from typing import Protocol
except ImportError:  # Python < 3.8
    Protocol = object  # type: ignore[assignment,misc]

if TYPE_CHECKING:  # ssl is imported only when an https:// address is used
    import ssl

from ._files import JsonBody, LocalFileError
from ._errors import (
    SandboxError,
    SandboxInternalError,
    SandboxOverloadedError,
    SandboxRequestError,
    SandboxUnavailableError,
)

__all__ = [
    "Address",
    "Response",
    "parse_url",
    "request_sync",
    "request_async",
    "open_sync",
    "open_async",
    "SyncReply",
    "AsyncReply",
    "Body",
    "error_from_response",
    "decode_json",
    "parse_retry_after",
]

USER_AGENT = "hexr-sandbox-python"

# Upper bounds on what we accept from the service before calling it malformed.
_MAX_LINE = 64 * 1024
_MAX_HEADERS = 100
# How much of a reply body one read asks for.
_READ_SIZE = 64 * 1024


@dataclass(frozen=True)
class Address:
    """Where the sandbox service listens.

    Attributes:
        url: The address as given (for messages).
        scheme: ``"http"``, ``"https"`` or ``"unix"`` (HTTP over a unix socket).
        host: Host name or IP for TCP; ``"localhost"`` for unix sockets (used
            only in the ``Host`` header).
        port: TCP port (0 for unix sockets).
        socket_path: Filesystem path of the unix socket, or ``""``.
        base_path: Path prefix put before every API path (``""`` normally; e.g.
            ``"/sandbox"`` for ``http://proxy/sandbox``).
    """

    url: str
    scheme: str
    host: str
    port: int
    socket_path: str = ""
    base_path: str = ""

    @property
    def host_header(self) -> str:
        """Value of the HTTP ``Host`` header for this address."""
        if self.scheme == "unix":
            return "localhost"
        host = "[{}]".format(self.host) if ":" in self.host else self.host
        default_port = 443 if self.scheme == "https" else 80
        if self.port == default_port:
            return host
        return "{}:{}".format(host, self.port)


def parse_url(url: str) -> Address:
    """Parse a sandbox service address.

    Accepted forms:

    * ``http://host:port`` (port defaults to 80), optionally with a path prefix;
    * ``https://host:port`` (TLS, verified against the system CA store);
    * ``unix:/path/to.sock`` (also ``unix:///path/to.sock``): HTTP over a unix
      socket;
    * ``http+unix://%2Fpath%2Fto.sock``: the same, in the percent-encoded form
      used by some HTTP clients;
    * ``host:port`` or ``:port`` (as in ``LISTEN_ADDRESS``): taken as
      ``http://``; an empty host means ``127.0.0.1``.

    Raises:
        ValueError: when ``url`` is not one of these forms.
    """
    if not isinstance(url, str):
        raise ValueError("sandbox URL must be a str, not {}".format(type(url).__name__))
    text = url.strip()
    if not text:
        raise ValueError("sandbox URL is empty")
    if text.startswith("unix:"):
        path = text[len("unix:"):]
        if path.startswith("//"):
            path = path[2:]
        if not path:
            raise ValueError("sandbox URL {!r} names no socket path".format(url))
        return Address(url=url, scheme="unix", host="localhost", port=0, socket_path=path)
    if "://" not in text:
        text = "http://" + text
    parts = urllib.parse.urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme == "http+unix":
        path = urllib.parse.unquote(parts.netloc)
        if not path:
            raise ValueError("sandbox URL {!r} names no socket path".format(url))
        return Address(
            url=url,
            scheme="unix",
            host="localhost",
            port=0,
            socket_path=path,
            base_path=parts.path.rstrip("/"),
        )
    if scheme not in ("http", "https"):
        raise ValueError(
            "sandbox URL {!r}: unsupported scheme {!r} (use http://host:port, "
            "https://host:port or unix:/path/to.sock)".format(url, parts.scheme)
        )
    try:
        port = parts.port
    except ValueError:
        raise ValueError("sandbox URL {!r} has an invalid port".format(url)) from None
    if parts.username is not None or parts.password is not None:
        raise ValueError("sandbox URL {!r}: user information is not supported".format(url))
    host = parts.hostname or "127.0.0.1"
    if port is None:
        port = 443 if scheme == "https" else 80
    return Address(
        url=url,
        scheme=scheme,
        host=host,
        port=port,
        base_path=parts.path.rstrip("/"),
    )


@dataclass(frozen=True)
class Response:
    """One HTTP response: status, reason phrase, headers (lower-case names), body."""

    status: int
    reason: str
    headers: Dict[str, str]
    body: bytes


class Body(Protocol):
    """A request body of known length written in pieces."""

    content_type: str
    length: int

    def chunks(self) -> Iterator[bytes]: ...


BodyArg = Union[bytes, Body, None]


def _as_body(body: BodyArg) -> Optional[Body]:
    if isinstance(body, (bytes, bytearray)):
        return JsonBody(bytes(body))
    return body


def _request_headers(address: Address, body: Optional[Body], accept: str) -> Dict[str, str]:
    headers = {
        "Host": address.host_header,
        "User-Agent": _user_agent(),
        "Accept": accept,
        "Connection": "close",
    }
    if body is not None:
        headers["Content-Type"] = body.content_type
        headers["Content-Length"] = str(body.length)
    return headers


def _user_agent() -> str:
    from . import __version__  # late import: the package imports this module

    return "{}/{}".format(USER_AGENT, __version__)


#: Environment variables for https:// addresses (read at every connection, so a
#: rotated SVID is picked up): the CA bundle that verifies the service (default: the
#: system store) and the client certificate and key for mTLS (a SPIFFE X.509-SVID).
CA_FILE_ENV = "HEXR_SANDBOX_CA_FILE"
CERT_FILE_ENV = "HEXR_SANDBOX_CERT_FILE"
KEY_FILE_ENV = "HEXR_SANDBOX_KEY_FILE"


def _tls_context() -> "ssl.SSLContext":
    import os
    import ssl

    ca = os.environ.get(CA_FILE_ENV) or None
    ctx = ssl.create_default_context(cafile=ca)
    cert = os.environ.get(CERT_FILE_ENV) or None
    key = os.environ.get(KEY_FILE_ENV) or None
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


# --------------------------------------------------------------------------
# Error helpers


def _unavailable(address: Address, detail: str, code: str) -> SandboxUnavailableError:
    return SandboxUnavailableError(
        "sandbox service at {} is unavailable: {}".format(address.url, detail), code=code
    )


def _bad_response(address: Address, detail: str, status: Optional[int] = None) -> SandboxInternalError:
    return SandboxInternalError(
        "unexpected reply from the sandbox service at {}: {}".format(address.url, detail),
        status=status,
        code="bad_response",
    )


def _timed_out(address: Address, seconds: float) -> SandboxUnavailableError:
    return _unavailable(
        address, "no reply within {:g} s".format(seconds), code="timeout"
    )


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return "{}: {}".format(type(exc).__name__, text) if text else type(exc).__name__


# --------------------------------------------------------------------------
# Unix socket connection
#
# A non-blocking connect() to a unix socket whose listen queue is full fails
# with EAGAIN: unlike TCP's EINPROGRESS it is not "in progress", nothing can be
# waited on, and asyncio's sock_connect wrongly takes the socket for connected
# (later reads fail with EINVAL). Python's socket.connect with a timeout raises
# BlockingIOError in that case. A burst of clients against a busy service
# fills the queue, so both transports retry with a short back-off until the
# connect timeout.

_UNIX_RETRY_FIRST = 0.005
_UNIX_RETRY_MAX = 0.1


def _unix_try_connect(path: str) -> Optional[socket.socket]:
    """One non-blocking connect: the socket, or None when the queue is full."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.connect(path)
    except (BlockingIOError, InterruptedError):
        sock.close()
        return None
    except BaseException:
        sock.close()
        raise
    return sock


def _queue_full(path: str, timeout: float) -> OSError:
    return OSError(
        errno.EAGAIN, "listen queue of {} stayed full for {:g} s".format(path, timeout)
    )


def _connect_unix_sync(path: str, timeout: float) -> socket.socket:
    """Connect to the unix socket ``path`` (blocking mode is left to the caller)."""
    deadline = time.monotonic() + timeout
    delay = _UNIX_RETRY_FIRST
    while True:
        sock = _unix_try_connect(path)
        if sock is not None:
            return sock
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _queue_full(path, timeout)
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, _UNIX_RETRY_MAX)


async def _connect_unix_async(path: str, timeout: float) -> socket.socket:
    """Asynchronous :func:`_connect_unix_sync` (sleeps on the event loop)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    delay = _UNIX_RETRY_FIRST
    while True:
        sock = _unix_try_connect(path)
        if sock is not None:
            return sock
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise _queue_full(path, timeout)
        await asyncio.sleep(min(delay, remaining))
        delay = min(delay * 2, _UNIX_RETRY_MAX)


# --------------------------------------------------------------------------
# Synchronous transport (http.client)


class _Connection(http.client.HTTPConnection):
    """An ``HTTPConnection`` to an :class:`Address` (TCP, TLS or unix socket).

    The connection is made with ``connect_timeout``; every later socket
    operation uses the (longer) read timeout given as ``timeout``.
    """

    def __init__(self, address: Address, connect_timeout: float, read_timeout: float) -> None:
        super().__init__(address.host, address.port or 80, timeout=read_timeout)
        self._address = address
        self._connect_timeout = connect_timeout

    def connect(self) -> None:
        address = self._address
        if address.scheme == "unix":
            sock = _connect_unix_sync(address.socket_path, self._connect_timeout)
        else:
            sock = socket.create_connection((address.host, address.port), self._connect_timeout)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        try:
            if address.scheme == "https":
                sock.settimeout(self._connect_timeout)
                sock = _tls_context().wrap_socket(sock, server_hostname=address.host)
            sock.settimeout(self.timeout)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


def request_sync(
    address: Address,
    method: str,
    path: str,
    body: BodyArg = None,
    *,
    connect_timeout: float,
    read_timeout: float,
    accept: str = "application/json",
) -> Response:
    """Send one request and return the response.

    Raises:
        SandboxUnavailableError: cannot connect, no reply in time, or the
            connection closed before a status line arrived.
        SandboxInternalError: the reply is not well-formed HTTP.
        OSError: a local file of the body could not be read.
    """
    reply = open_sync(
        address, method, path, body,
        connect_timeout=connect_timeout, read_timeout=read_timeout, accept=accept,
    )
    try:
        return reply.read_all()
    finally:
        reply.close()


def open_sync(
    address: Address,
    method: str,
    path: str,
    body: BodyArg = None,
    *,
    connect_timeout: float,
    read_timeout: float,
    accept: str = "application/json",
) -> "SyncReply":
    """Send one request and read the reply's head; the body is the caller's
    to read (:meth:`SyncReply.chunks` or :meth:`SyncReply.read_all`) and the
    reply to close. Errors as for :func:`request_sync`."""
    conn = _Connection(address, connect_timeout, read_timeout)
    try:
        try:
            conn.connect()
        except OSError as exc:
            raise _unavailable(address, _describe(exc), "connection_failed") from exc
        _send_sync(conn, address, method, path, _as_body(body), accept, read_timeout)
        try:
            resp = conn.getresponse()
        except socket.timeout as exc:
            raise _timed_out(address, read_timeout) from exc
        except (ConnectionError, http.client.RemoteDisconnected) as exc:
            raise _unavailable(
                address, "connection closed before a reply ({})".format(_describe(exc)),
                "connection_closed",
            ) from exc
        except (http.client.HTTPException, OSError, ValueError) as exc:
            raise _bad_response(address, _describe(exc)) from exc
    except BaseException:
        conn.close()
        raise
    return SyncReply(address, conn, resp, read_timeout)


def _send_sync(
    conn: "_Connection", address: Address, method: str, path: str,
    body: Optional[Body], accept: str, read_timeout: float,
) -> None:
    pieces = iter(body.chunks()) if body is not None else iter(())
    try:
        conn.putrequest(method, address.base_path + path, skip_host=True, skip_accept_encoding=True)
        for name, value in _request_headers(address, body, accept).items():
            conn.putheader(name, value)
        conn.endheaders(next(pieces, None))
        for piece in pieces:
            conn.send(piece)
    except LocalFileError:
        raise
    except socket.timeout as exc:
        raise _timed_out(address, read_timeout) from exc
    except OSError:
        # The service may have answered (e.g. 413) and closed before reading
        # the whole body: try to read its reply.
        pass


class SyncReply:
    """A reply whose head has been read; its body is read as it arrives."""

    def __init__(self, address: Address, conn: "_Connection", resp: Any, read_timeout: float) -> None:
        self.address = address
        self.status: int = resp.status
        self.reason: str = resp.reason or ""
        self.headers: Dict[str, str] = _header_dict(resp.getheaders())
        self._conn = conn
        self._resp = resp
        self._read_timeout = read_timeout

    def chunks(self) -> Iterator[bytes]:
        """The body's bytes, as they arrive (each read waits at most the read timeout)."""
        while True:
            data = self._read(lambda: self._resp.read1(_READ_SIZE))
            if not data:
                return
            yield data

    def read_all(self) -> Response:
        """The whole reply."""
        data = self._read(self._resp.read)
        return Response(self.status, self.reason, self.headers, data)

    def _read(self, fn: Any) -> bytes:
        address = self.address
        try:
            return fn()
        except socket.timeout as exc:
            raise _timed_out(address, self._read_timeout) from exc
        except ConnectionError as exc:
            raise _unavailable(
                address, "connection lost while reading the reply ({})".format(_describe(exc)),
                "connection_closed",
            ) from exc
        except (http.client.HTTPException, OSError, ValueError) as exc:
            raise _bad_response(address, _describe(exc), self.status) from exc

    def close(self) -> None:
        self._conn.close()


def _header_dict(pairs: Any) -> Dict[str, str]:
    result: Dict[str, str] = {}
    for name, value in pairs:
        key = name.strip().lower()
        if key in result:
            result[key] = result[key] + ", " + value.strip()
        else:
            result[key] = value.strip()
    return result


# --------------------------------------------------------------------------
# Asynchronous transport (asyncio streams, HTTP/1.1 by hand)


class _NoReply(Exception):
    """The connection ended before a status line arrived (internal)."""


class _Malformed(Exception):
    """The reply is not well-formed HTTP/1.x (internal)."""


async def request_async(
    address: Address,
    method: str,
    path: str,
    body: BodyArg = None,
    *,
    connect_timeout: float,
    read_timeout: float,
    accept: str = "application/json",
) -> Response:
    """Asynchronous :func:`request_sync`: same arguments, result and errors.

    ``read_timeout`` bounds the whole exchange after the connection is made.
    """
    reply = await open_async(
        address, method, path, body,
        connect_timeout=connect_timeout, read_timeout=read_timeout, accept=accept,
    )
    try:
        return await reply.read_all()
    finally:
        await reply.aclose()


async def open_async(
    address: Address,
    method: str,
    path: str,
    body: BodyArg = None,
    *,
    connect_timeout: float,
    read_timeout: float,
    accept: str = "application/json",
) -> "AsyncReply":
    """Asynchronous :func:`open_sync`; ``read_timeout`` bounds the whole
    exchange, the body's reading included."""
    try:
        if address.scheme == "unix":
            sock = await _connect_unix_async(address.socket_path, connect_timeout)
            opening = asyncio.open_unix_connection(sock=sock, limit=_MAX_LINE)
        elif address.scheme == "https":
            opening = asyncio.open_connection(
                address.host,
                address.port,
                ssl=_tls_context(),
                server_hostname=address.host,
                ssl_handshake_timeout=connect_timeout,
                limit=_MAX_LINE,
            )
        else:
            opening = asyncio.open_connection(address.host, address.port, limit=_MAX_LINE)
        reader, writer = await asyncio.wait_for(opening, connect_timeout)
    except asyncio.TimeoutError as exc:
        raise _unavailable(
            address, "no connection within {:g} s".format(connect_timeout), "connection_failed"
        ) from exc
    except OSError as exc:
        raise _unavailable(address, _describe(exc), "connection_failed") from exc

    deadline = asyncio.get_running_loop().time() + read_timeout
    try:
        head = await asyncio.wait_for(
            _exchange(reader, writer, address, method, path, _as_body(body), accept), read_timeout
        )
    except BaseException as exc:
        await _close_writer(writer)
        if isinstance(exc, asyncio.TimeoutError):
            raise _timed_out(address, read_timeout) from exc
        if isinstance(exc, _NoReply):
            raise _unavailable(
                address, "connection closed before a reply ({})".format(exc), "connection_closed"
            ) from exc
        if isinstance(exc, _Malformed):
            raise _bad_response(address, str(exc)) from exc
        raise
    status, reason, headers = head
    return AsyncReply(address, reader, writer, method, status, reason, headers, deadline, read_timeout)


async def _close_writer(writer: asyncio.StreamWriter) -> None:
    writer.close()
    try:
        await asyncio.wait_for(writer.wait_closed(), 1.0)
    except (asyncio.TimeoutError, OSError):
        pass


class AsyncReply:
    """Asynchronous :class:`SyncReply`."""

    def __init__(
        self, address: Address, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
        method: str, status: int, reason: str, headers: Dict[str, str],
        deadline: float, read_timeout: float,
    ) -> None:
        self.address = address
        self.status = status
        self.reason = reason
        self.headers = headers
        self._reader = reader
        self._writer = writer
        self._method = method
        self._deadline = deadline
        self._read_timeout = read_timeout

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive, within the exchange's deadline."""
        loop = asyncio.get_running_loop()
        pieces = _body_pieces(self._reader, self._method, self.status, self.headers)
        try:
            while True:
                remaining = self._deadline - loop.time()
                try:
                    if remaining <= 0:
                        raise asyncio.TimeoutError
                    piece = await asyncio.wait_for(pieces.__anext__(), remaining)
                except StopAsyncIteration:
                    return
                except asyncio.TimeoutError as exc:
                    raise _timed_out(self.address, self._read_timeout) from exc
                except ConnectionError as exc:
                    raise _unavailable(
                        self.address,
                        "connection lost while reading the reply ({})".format(_describe(exc)),
                        "connection_closed",
                    ) from exc
                except (_Malformed, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                        ValueError, OSError) as exc:
                    raise _bad_response(self.address, _describe(exc), self.status) from exc
                yield piece
        finally:
            await pieces.aclose()

    async def read_all(self) -> Response:
        """The whole reply."""
        parts = [piece async for piece in self.chunks()]
        return Response(self.status, self.reason, self.headers, b"".join(parts))

    async def aclose(self) -> None:
        await _close_writer(self._writer)


async def _exchange(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    address: Address,
    method: str,
    path: str,
    body: Optional[Body],
    accept: str,
) -> "tuple[int, str, Dict[str, str]]":
    head = "{} {} HTTP/1.1\r\n".format(method, address.base_path + path)
    for name, value in _request_headers(address, body, accept).items():
        head += "{}: {}\r\n".format(name, value)
    head += "\r\n"
    try:
        writer.write(head.encode("latin-1"))
        for piece in body.chunks() if body is not None else ():
            writer.write(piece)
            await writer.drain()
        await writer.drain()
    except LocalFileError:
        raise
    except OSError:
        # As in request_sync: the service may have replied before reading it all.
        pass
    try:
        return await _read_head(reader)
    except ConnectionError as exc:
        raise _NoReply(_describe(exc)) from exc
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
        raise _Malformed(_describe(exc)) from exc
    except OSError as exc:
        raise _Malformed(_describe(exc)) from exc


async def _read_line(reader: asyncio.StreamReader) -> bytes:
    line = await reader.readline()
    if line and not line.endswith(b"\n"):
        raise _Malformed("the reply ended in the middle of a line")
    return line


async def _read_headers(reader: asyncio.StreamReader) -> Dict[str, str]:
    pairs = []
    while True:
        line = await _read_line(reader)
        if not line:
            raise _Malformed("the reply ended inside the headers")
        if line in (b"\r\n", b"\n"):
            break
        if len(pairs) >= _MAX_HEADERS:
            raise _Malformed("more than {} header lines".format(_MAX_HEADERS))
        text = line.decode("latin-1").rstrip("\r\n")
        if text[:1] in (" ", "\t") and pairs:
            # obsolete line folding: continuation of the previous header
            name, value = pairs[-1]
            pairs[-1] = (name, value + " " + text.strip())
            continue
        name, sep, value = text.partition(":")
        if not sep or not name or name != name.strip():
            raise _Malformed("invalid header line {!r}".format(text[:100]))
        pairs.append((name, value))
    return _header_dict(pairs)


async def _read_head(reader: asyncio.StreamReader) -> "tuple[int, str, Dict[str, str]]":
    first = True
    while True:
        line = await _read_line(reader)
        if not line:
            if first:
                raise _NoReply("end of stream")
            raise _Malformed("the reply ended after an interim response")
        first = False
        text = line.decode("latin-1").rstrip("\r\n")
        version, _, rest = text.partition(" ")
        code_text, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or len(code_text) != 3 or not code_text.isdigit():
            raise _Malformed("invalid status line {!r}".format(text[:100]))
        status = int(code_text)
        headers = await _read_headers(reader)
        if 100 <= status < 200:
            continue  # interim response (100 Continue...): the real one follows
        return status, reason.strip(), headers


async def _body_pieces(
    reader: asyncio.StreamReader, method: str, status: int, headers: Dict[str, str]
) -> AsyncIterator[bytes]:
    if method == "HEAD" or status in (204, 304):
        return
    if _is_chunked(headers):
        async for piece in _iter_chunked(reader):
            yield piece
    elif "content-length" in headers:
        left = _content_length(headers["content-length"])
        while left > 0:
            data = await reader.read(min(left, _READ_SIZE))
            if not data:
                raise asyncio.IncompleteReadError(b"", left)
            left -= len(data)
            yield data
    else:
        while True:
            data = await reader.read(_READ_SIZE)
            if not data:
                return
            yield data


def _is_chunked(headers: Dict[str, str]) -> bool:
    codings = [c.strip().lower() for c in headers.get("transfer-encoding", "").split(",")]
    return bool(codings) and codings[-1] == "chunked"


def _content_length(value: str) -> int:
    values = {v.strip() for v in value.split(",")}
    if len(values) != 1:
        raise _Malformed("conflicting Content-Length {!r}".format(value))
    text = values.pop()
    if not text.isdigit():
        raise _Malformed("invalid Content-Length {!r}".format(value))
    return int(text)


async def _iter_chunked(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while True:
        line = await _read_line(reader)
        if not line:
            raise _Malformed("the reply ended inside a chunked body")
        size_text = line.split(b";", 1)[0].strip()
        try:
            if not size_text or size_text.lstrip(b"0123456789abcdefABCDEF"):
                raise ValueError
            size = int(size_text, 16)
        except ValueError:
            raise _Malformed("invalid chunk size {!r}".format(line[:40])) from None
        if size == 0:
            break
        while size > 0:
            data = await reader.read(min(size, _READ_SIZE))
            if not data:
                raise asyncio.IncompleteReadError(b"", size)
            size -= len(data)
            yield data
        end = await _read_line(reader)
        if end not in (b"\r\n", b"\n"):
            raise _Malformed("chunk not followed by CRLF")
    # trailer section, ended by an empty line (tolerate a missing one at EOF)
    while True:
        line = await _read_line(reader)
        if not line or line in (b"\r\n", b"\n"):
            break


# --------------------------------------------------------------------------
# Interpreting replies


def decode_json(address: Address, response: Response) -> Any:
    """Decode the JSON body of ``response``.

    Raises:
        SandboxInternalError: the body is not valid JSON.
    """
    try:
        return json.loads(response.body.decode("utf-8", "replace"))
    except ValueError as exc:
        raise _bad_response(
            address, "the body is not valid JSON ({})".format(exc), response.status
        ) from exc


def parse_retry_after(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """Seconds to wait from a ``Retry-After`` header (delay or HTTP date), or None."""
    if value is None:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if math.isnan(seconds) or math.isinf(seconds):
        return None
    return max(0.0, seconds)


def error_from_response(address: Address, response: Response) -> SandboxError:
    """Map a non-200 reply to the matching :class:`SandboxError` subclass.

    ``{"error": {"code", "message"}}`` bodies give the exception's ``code`` and
    ``message`` verbatim; other bodies produce a message naming the status.
    """
    status = response.status
    code: Optional[str] = None
    message: Optional[str] = None
    try:
        doc = json.loads(response.body.decode("utf-8", "replace"))
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        err = doc.get("error")
        if isinstance(err, dict):
            if isinstance(err.get("message"), str):
                message = err["message"]
            if isinstance(err.get("code"), str):
                code = err["code"]
        elif isinstance(err, str):
            message = err
    if message is None:
        message = "HTTP {} {}".format(status, response.reason).rstrip()
        snippet = response.body[:200].decode("utf-8", "replace").strip()
        if snippet:
            message += ": " + snippet
        message = "sandbox service at {} replied {}".format(address.url, message)
    if code is None:
        code = "http_{}".format(status)

    if status == 429:
        return SandboxOverloadedError(
            message,
            status=status,
            code=code,
            retry_after=parse_retry_after(response.headers.get("retry-after")),
        )
    if status in (502, 503, 504):
        return SandboxUnavailableError(message, status=status, code=code)
    if 400 <= status < 500:
        return SandboxRequestError(message, status=status, code=code)
    return SandboxInternalError(message, status=status, code=code)

