"""Files sent with an execution: the ``files=`` argument, and the multipart body (internal).

``files`` is a mapping ``{path: content}`` or an iterable of ``(path, content)``
pairs. ``content`` is ``bytes`` (sent as they are), ``str`` (sent as UTF-8 text)
or an :class:`os.PathLike` such as :class:`pathlib.Path` naming a local file to
upload (a ``str`` is always content, never a local path).

Small in-memory files go inline in the JSON request (``{"path", "content",
"encoding"}``). The request becomes ``multipart/form-data`` (one part
``request`` with the JSON, one part ``files`` per file, its filename the path)
when a local file is given, or when the in-memory files total more than
:data:`INLINE_LIMIT`. Local files are streamed from disk in
:data:`CHUNK` pieces, never read whole into memory, and re-read on a retry.
The paths are the service's to judge (its 400 names ``files[i].path``).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

__all__ = [
    "FileSpec", "FilesArg", "normalise", "JsonBody", "MultipartBody", "RawBody", "LocalFileError", "INLINE_LIMIT",
]

#: In-memory files totalling more than this go multipart instead of inline JSON.
INLINE_LIMIT = 1 << 20

#: Size of the pieces a local file is read and sent in.
CHUNK = 64 * 1024

Content = Union[bytes, bytearray, memoryview, str, "os.PathLike[str]"]
FilesArg = Union[Mapping[str, Content], Iterable[Tuple[str, Content]]]


class LocalFileError(OSError):
    """A local file being uploaded could not be read to the end (the upload is abandoned)."""


@dataclass(frozen=True)
class FileSpec:
    """One file to send: its bytes in memory, or a local file and the size it had."""

    path: str
    data: Optional[bytes] = None
    text: Optional[str] = None
    local: Optional[str] = None
    size: int = 0


def normalise(files: Any) -> List[FileSpec]:
    """Check the shape of ``files=`` and stat the local files it names.

    Raises:
        TypeError: ``files`` is not a mapping or pairs of path and content.
        OSError: a local file cannot be read (e.g. it does not exist).
    """
    if files is None:
        return []
    if isinstance(files, Mapping):
        pairs = list(files.items())
    elif isinstance(files, Iterable) and not isinstance(files, (str, bytes)):
        pairs = list(files)
    else:
        raise TypeError("files must be a mapping or a list of (path, content) pairs")
    return [_spec(i, pair) for i, pair in enumerate(pairs)]


def _spec(index: int, pair: Any) -> FileSpec:
    if not isinstance(pair, tuple) or len(pair) != 2:
        raise TypeError("files[{}] must be a (path, content) pair".format(index))
    path, content = pair
    if not isinstance(path, str):
        raise TypeError("files[{}]: the path must be a str, not {}".format(index, type(path).__name__))
    if isinstance(content, (bytes, bytearray, memoryview)):
        return FileSpec(path, data=bytes(content), size=len(content))
    if isinstance(content, str):
        return FileSpec(path, text=content, size=len(content))
    if isinstance(content, os.PathLike):
        local = os.fspath(content)
        st = os.stat(local)
        if not _is_regular(st.st_mode):
            raise OSError("files[{}]: {} is not a regular file".format(index, local))
        return FileSpec(path, local=str(local), size=st.st_size)
    raise TypeError(
        "files[{}]: content must be bytes, str or a pathlib.Path, not {}".format(
            index, type(content).__name__
        )
    )


def _is_regular(mode: int) -> bool:
    import stat

    return stat.S_ISREG(mode)


def needs_multipart(specs: List[FileSpec]) -> bool:
    """True when a local file is given or the in-memory files are large."""
    if any(s.local is not None for s in specs):
        return True
    return sum(s.size for s in specs) > INLINE_LIMIT


def inline_entry(spec: FileSpec) -> Dict[str, str]:
    """The JSON request's object for an in-memory file."""
    if spec.text is not None:
        return {"path": spec.path, "content": spec.text, "encoding": "utf-8"}
    assert spec.data is not None
    return {"path": spec.path, "content": base64.b64encode(spec.data).decode("ascii"), "encoding": "base64"}


def encode_json(body: Dict[str, Any]) -> bytes:
    """UTF-8 JSON; lone surrogates are sent escaped and left to the service to judge."""
    try:
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    except TypeError as exc:
        raise TypeError("the request cannot be encoded as JSON: {}".format(exc)) from exc
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(body, ensure_ascii=True, separators=(",", ":")).encode("ascii")


class JsonBody:
    """A JSON request body held in memory."""

    content_type = "application/json"

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.length = len(data)

    def chunks(self) -> Iterator[bytes]:
        yield self.data


class MultipartBody:
    """``multipart/form-data``: the JSON request, then one part per file.

    Its length is known before anything is sent (local files are sized when
    the request is built), so it goes with a ``Content-Length``. A local file
    that shrank since then makes :meth:`chunks` raise :class:`OSError`; one
    that grew is sent as it was (its first ``size`` bytes).
    """

    def __init__(self, request_json: bytes, specs: List[FileSpec]) -> None:
        self.boundary = "hexr-sandbox-" + secrets.token_hex(16)
        self.content_type = "multipart/form-data; boundary=" + self.boundary
        self._pieces: List[Union[bytes, FileSpec]] = []
        self._add(self._head('name="request"', "application/json") + request_json)
        for spec in specs:
            disposition = 'name="files"; filename="{}"'.format(_quoted(spec.path))
            self._add(b"\r\n" + self._head(disposition, "application/octet-stream"))
            if spec.local is not None:
                self._pieces.append(spec)
            elif spec.text is not None:
                self._add(spec.text.encode("utf-8"))
            else:
                assert spec.data is not None
                self._add(spec.data)
        self._add("\r\n--{}--\r\n".format(self.boundary).encode("ascii"))
        self.length = sum(len(p) if isinstance(p, bytes) else p.size for p in self._pieces)

    def _head(self, disposition: str, content_type: str) -> bytes:
        text = "--{}\r\nContent-Disposition: form-data; {}\r\nContent-Type: {}\r\n\r\n".format(
            self.boundary, disposition, content_type
        )
        return text.encode("utf-8")

    def _add(self, data: bytes) -> None:
        last = self._pieces[-1] if self._pieces else None
        if isinstance(last, bytes) and len(last) < CHUNK and len(data) < CHUNK:
            self._pieces[-1] += data
        else:
            self._pieces.append(data)

    def chunks(self) -> Iterator[bytes]:
        for piece in self._pieces:
            if isinstance(piece, bytes):
                for i in range(0, len(piece), CHUNK):
                    yield piece[i:i + CHUNK]
            else:
                yield from _read_local(piece)


class RawBody:
    """One file's bytes as the whole body (a session's file upload): in memory, or
    streamed from a local file in :data:`CHUNK` pieces (and re-read on a retry)."""

    content_type = "application/octet-stream"

    def __init__(self, spec: FileSpec) -> None:
        self.spec = spec
        if spec.text is not None:
            self._data: Optional[bytes] = spec.text.encode("utf-8")
        else:
            self._data = spec.data
        self.length = len(self._data) if self._data is not None else spec.size

    def chunks(self) -> Iterator[bytes]:
        if self._data is None:
            yield from _read_local(self.spec)
            return
        for i in range(0, len(self._data), CHUNK):
            yield self._data[i:i + CHUNK]


def _read_local(spec: FileSpec) -> Iterator[bytes]:
    assert spec.local is not None
    left = spec.size
    try:
        f = open(spec.local, "rb")
    except OSError as exc:
        raise LocalFileError("{} cannot be read any more: {}".format(spec.local, exc)) from exc
    with f:
        while left > 0:
            data = f.read(min(CHUNK, left))
            if not data:
                raise LocalFileError("{} shrank while it was being sent ({} bytes missing)".format(spec.local, left))
            left -= len(data)
            yield data


def _quoted(path: str) -> str:
    """A path as a quoted-string filename; the characters that cannot be quoted are refused."""
    bad = [c for c in path if c in '"\\' or ord(c) < 0x20 or ord(c) == 0x7F]
    if bad:
        raise ValueError(
            "file path {!r} cannot be sent in a multipart upload: it contains {!r}".format(path, bad[0])
        )
    return path
