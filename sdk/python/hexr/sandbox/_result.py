"""The :class:`ExecResult` returned by every successful call to the service,
with the returned files' metadata (:class:`FileInfo`) and why the sandbox ended
the program (:class:`ExecError`)."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ._errors import SandboxInternalError

__all__ = ["ExecResult", "ExecError", "FileInfo"]


@dataclass(frozen=True)
class ExecError:
    """Why the sandbox ended the program (``ExecResult.error``); not an exception.

    Attributes:
        type: ``"timeout"``, ``"memory_limit"``, ``"output_limit"``,
            ``"signal"`` or ``"killed"`` (the service's name of the end reason).
        message: The same in plain words, e.g.
            ``"killed: time limit of 30 s exceeded"`` (also the last line of
            ``stderr``, after ``"hexr-sandbox: "``).
    """

    type: str
    message: str


@dataclass(frozen=True)
class FileInfo:
    """One file the program left for the caller (``ExecResult.file_info``).

    Attributes:
        path: Path relative to the sandbox's working directory (e.g.
            ``"output/figure-1.png"``).
        size: The file's size in the sandbox, in bytes.
        mime: Media type guessed by the service from the extension.
        truncated: True when the file did not fit in the service's return
            budget: its bytes were not sent (it is not in ``ExecResult.files``).
    """

    path: str
    size: int
    mime: str = "application/octet-stream"
    truncated: bool = False

    @classmethod
    def from_response(cls, data: Any, where: str = "files[]") -> Tuple["FileInfo", bytes]:
        """Decode one file object of the service (``{"path", "size", "mime",
        "encoding", "content", "truncated"}``) into its metadata and its bytes."""
        if not isinstance(data, Mapping):
            raise _bad("'{}' is not an object".format(where))
        path = data.get("path")
        if not isinstance(path, str) or not path:
            raise _bad("'{}.path' is not a non-empty string".format(where))
        content = _str_field(data, "content")
        encoding = data.get("encoding") or "utf-8"
        if encoding == "utf-8":
            raw = content.encode("utf-8", "surrogatepass")
        elif encoding == "base64":
            try:
                raw = base64.b64decode(content, validate=True)
            except (binascii.Error, ValueError):
                raise _bad("'{}.content' is not valid base64".format(where)) from None
        else:
            raise _bad("'{}.encoding' is {!r}, not 'utf-8' or 'base64'".format(where, encoding))
        size = data.get("size", len(raw))
        if not _is_int(size) or size < 0:
            raise _bad("'{}.size' is not a size".format(where))
        mime = data.get("mime") or "application/octet-stream"
        if not isinstance(mime, str):
            raise _bad("'{}.mime' is not a string".format(where))
        return cls(path, size, mime, _bool_field(data, "truncated")), raw

    def to_dict(self, content: bytes) -> Dict[str, Any]:
        """The service's file object for this file with ``content`` as its bytes."""
        doc: Dict[str, Any] = {"path": self.path, "size": self.size, "mime": self.mime}
        text = _as_text(content) if self.mime.startswith("text/") else None
        if text is not None:
            doc.update(encoding="utf-8", content=text)
        else:
            doc.update(encoding="base64", content=base64.b64encode(content).decode("ascii"))
        doc["truncated"] = self.truncated
        return doc


def _as_text(content: bytes) -> Optional[str]:
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _preview(text: str, limit: int = 60) -> str:
    """Return ``repr(text)``, shortened to about ``limit`` characters."""
    if len(text) <= limit:
        return repr(text)
    return repr(text[:limit]) + "...(+{} chars)".format(len(text) - limit)


@dataclass(frozen=True, repr=False)
class ExecResult:
    """Outcome of one execution in a sandbox.

    A program that exits with a non-zero status, runs out of time or memory,
    or is killed by a signal still produces an ``ExecResult``; inspect
    :attr:`ok`, :attr:`exit_code`, :attr:`timed_out` and :attr:`oom_killed`.

    Attributes:
        stdout: Everything the program wrote to standard output (decoded text).
        stderr: Everything the program wrote to standard error.
        exit_code: The program's exit status; ``128 + N`` when killed by
            signal ``N``; ``124`` when the time limit was reached; ``137`` when
            the memory limit was reached.
        duration_ms: Wall-clock execution time in milliseconds (the service's
            ``execution_time_ms``).
        memory_used_mb: Peak memory use reported by the service, in MiB.
        timed_out: True when the time limit killed the program.
        oom_killed: True when the memory limit killed the program.
        signal: Number of the signal that killed the program, or ``None``.
        stdout_truncated: True when stdout exceeded the service's output cap
            and the excess was dropped.
        stderr_truncated: Same for stderr.
        id: The service's identifier of this execution, when it sends one.
        files: The files the program left (under ``output/`` or matching
            ``return_files``), path to bytes, in path order; files over the
            return budget are not in it (see ``file_info``).
        file_info: Metadata of every returned file, those whose bytes were
            left out (``truncated``) included.
        error: ``None`` when the program ended by itself; else an
            :class:`ExecError` saying why the sandbox ended it.
        stdout_omitted_bytes: Bytes left out of the middle of ``stdout`` (its
            head and tail are kept, with a marker line between them).
        stderr_omitted_bytes: Same for ``stderr``.
    """

    stdout: str
    stderr: str
    exit_code: int
    duration_ms: int = 0
    memory_used_mb: float = 0
    timed_out: bool = False
    oom_killed: bool = False
    signal: Optional[int] = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    id: Optional[str] = None
    files: Dict[str, bytes] = field(default_factory=dict, hash=False)
    file_info: Tuple[FileInfo, ...] = ()
    error: Optional[ExecError] = None
    stdout_omitted_bytes: int = 0
    stderr_omitted_bytes: int = 0

    @property
    def ok(self) -> bool:
        """True when the program exited with status 0."""
        return self.exit_code == 0

    @property
    def output(self) -> str:
        """Alias of :attr:`stdout`."""
        return self.stdout

    def __repr__(self) -> str:
        parts = ["exit_code={!r}".format(self.exit_code)]
        parts.append("ok={!r}".format(self.ok))
        parts.append("duration_ms={!r}".format(self.duration_ms))
        parts.append("memory_used_mb={!r}".format(self.memory_used_mb))
        if self.timed_out:
            parts.append("timed_out=True")
        if self.oom_killed:
            parts.append("oom_killed=True")
        if self.signal is not None:
            parts.append("signal={!r}".format(self.signal))
        parts.append("stdout={}".format(_preview(self.stdout)))
        if self.stdout_truncated:
            parts.append("stdout_truncated=True")
        parts.append("stderr={}".format(_preview(self.stderr)))
        if self.stderr_truncated:
            parts.append("stderr_truncated=True")
        if self.id is not None:
            parts.append("id={!r}".format(self.id))
        if self.file_info:
            parts.append("files={!r}".format([f.path for f in self.file_info]))
        if self.error is not None:
            parts.append("error={!r}".format(self.error))
        return "ExecResult({})".format(", ".join(parts))

    def to_dict(self) -> Dict[str, Any]:
        """Return the result in the shape of the service's JSON response.

        Keys follow the HTTP API (``execution_time_ms`` rather than
        ``duration_ms``); ``id`` is included only when the service sent one.
        """
        data: Dict[str, Any] = {
            "stdout": self.stdout,
            "stderr": self.stderr,
            "exit_code": self.exit_code,
            "execution_time_ms": self.duration_ms,
            "memory_used_mb": self.memory_used_mb,
            "timed_out": self.timed_out,
            "oom_killed": self.oom_killed,
            "signal": self.signal,
            "stdout_truncated": self.stdout_truncated,
            "stderr_truncated": self.stderr_truncated,
        }
        if self.id is not None:
            data["id"] = self.id
        if self.file_info:
            data["files"] = [f.to_dict(self.files.get(f.path, b"")) for f in self.file_info]
        if self.error is not None:
            data["error"] = {"type": self.error.type, "message": self.error.message}
        if self.stdout_omitted_bytes or self.stderr_omitted_bytes:
            data["stdout_omitted_bytes"] = self.stdout_omitted_bytes
            data["stderr_omitted_bytes"] = self.stderr_omitted_bytes
        return data

    @classmethod
    def from_response(cls, data: Any) -> "ExecResult":
        """Build an ``ExecResult`` from the service's decoded 200 response.

        Fields the contract marks as always present but older or minimal
        services may omit (``timed_out``, ``signal``...) get their neutral
        default; unknown fields are ignored. A document without an integer
        ``exit_code``, or with fields of the wrong type, raises
        :class:`~hexr.sandbox.SandboxInternalError`. ``files``, ``error`` and
        the omitted-byte counts are absent from services that predate them.
        """
        if not isinstance(data, Mapping):
            raise _bad("the response is not a JSON object")
        exit_code = data.get("exit_code")
        if not _is_int(exit_code):
            raise _bad("the response has no integer 'exit_code'")
        info, files = _files_field(data)
        return cls(
            stdout=_str_field(data, "stdout"),
            stderr=_str_field(data, "stderr"),
            exit_code=exit_code,
            duration_ms=_int_field(data, "execution_time_ms"),
            memory_used_mb=_number_field(data, "memory_used_mb"),
            timed_out=_bool_field(data, "timed_out"),
            oom_killed=_bool_field(data, "oom_killed"),
            signal=_optional_int_field(data, "signal"),
            stdout_truncated=_bool_field(data, "stdout_truncated"),
            stderr_truncated=_bool_field(data, "stderr_truncated"),
            id=_optional_id_field(data, "id"),
            files=files,
            file_info=info,
            error=_error_field(data),
            stdout_omitted_bytes=_int_field(data, "stdout_omitted_bytes"),
            stderr_omitted_bytes=_int_field(data, "stderr_omitted_bytes"),
        )


def _files_field(data: Mapping[str, Any]) -> Tuple[Tuple[FileInfo, ...], Dict[str, bytes]]:
    value = data.get("files")
    if value is None:
        return (), {}
    if not isinstance(value, list):
        raise _bad("'files' is not an array")
    info: List[FileInfo] = []
    files: Dict[str, bytes] = {}
    for i, item in enumerate(value):
        meta, raw = FileInfo.from_response(item, "files[{}]".format(i))
        info.append(meta)
        if not meta.truncated:
            files[meta.path] = raw
    return tuple(info), files


def _error_field(data: Mapping[str, Any]) -> Optional[ExecError]:
    value = data.get("error")
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _bad("'error' is neither null nor an object")
    kind, message = value.get("type"), value.get("message", "")
    if not isinstance(kind, str) or not isinstance(message, str):
        raise _bad("'error' has no string 'type' and 'message'")
    return ExecError(kind, message)


def _bad(detail: str) -> SandboxInternalError:
    return SandboxInternalError(
        "unexpected response from the sandbox service: " + detail,
        status=200,
        code="bad_response",
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _str_field(data: Mapping[str, Any], name: str) -> str:
    value = data.get(name, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _bad("'{}' is not a string".format(name))
    return value


def _optional_id_field(data: Mapping[str, Any], name: str) -> Optional[str]:
    value = data.get(name)
    if value is None:
        return None
    if _is_int(value):
        return str(value)  # informational only: accept a numeric id too
    if not isinstance(value, str):
        raise _bad("'{}' is not a string".format(name))
    return value


def _int_field(data: Mapping[str, Any], name: str) -> int:
    value = data.get(name, 0)
    if value is None:
        return 0
    if not _is_number(value):
        raise _bad("'{}' is not a number".format(name))
    return int(round(value))


def _number_field(data: Mapping[str, Any], name: str) -> float:
    value = data.get(name, 0)
    if value is None:
        return 0
    if not _is_number(value):
        raise _bad("'{}' is not a number".format(name))
    return value


def _optional_int_field(data: Mapping[str, Any], name: str) -> Optional[int]:
    value = data.get(name)
    if value is None:
        return None
    if not _is_int(value):
        raise _bad("'{}' is not an integer".format(name))
    return value


def _bool_field(data: Mapping[str, Any], name: str) -> bool:
    value = data.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _bad("'{}' is not a boolean".format(name))
    return value
