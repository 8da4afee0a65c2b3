"""What a session's calls return: :class:`SessionInfo` (the service's session
object) and :class:`CellResult` (one cell's answer, an :class:`ExecResult` with the
interpreter's value, rich outputs and exception)."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

from ._result import ExecError, ExecResult, _bad, _files_field, _int_field, _str_field, _bool_field

__all__ = ["SessionInfo", "CellResult", "CellOutput", "CellException"]

CELL_STATUSES = ("ok", "exception", "interrupted", "session_ended")


@dataclass(frozen=True)
class SessionInfo:
    """A session as the service describes it (``GET /api/v1/sessions/{id}``).

    Attributes:
        id: The session's id.
        language: ``"python"``, ``"javascript"`` or ``"bash"``.
        state: ``"starting"``, ``"idle"``, ``"busy"`` or ``"ended"``.
        created_at, expires_at, idle_expires_at: RFC 3339 UTC times (``""``
            when the service did not send one): when it was made, when its
            lifetime ends it, when it ends if left idle.
        memory_mb: Its memory limit, for the whole session.
        cells: How many cells it has run.
        ended_reason: ``None`` while it lives; then why it ended
            (``"deleted"``, ``"idle_timeout"``, ``"lifetime"``,
            ``"cell_timeout"``, ``"memory_limit"``, ``"crashed"``,
            ``"protocol"``, ``"shutdown"``).
        ended_message: The same in plain words, or ``None``.
    """

    id: str
    language: str = ""
    state: str = ""
    created_at: str = ""
    expires_at: str = ""
    idle_expires_at: str = ""
    memory_mb: int = 0
    cells: int = 0
    ended_reason: Optional[str] = None
    ended_message: Optional[str] = None

    @property
    def ended(self) -> bool:
        return self.state == "ended" or self.ended_reason is not None

    @classmethod
    def from_response(cls, data: Any) -> "SessionInfo":
        if not isinstance(data, Mapping):
            raise _bad("the session is not a JSON object")
        sid = data.get("id")
        if not isinstance(sid, str) or not sid:
            raise _bad("the session has no string 'id'")
        return cls(
            id=sid,
            language=_str_field(data, "language"),
            state=_str_field(data, "state"),
            created_at=_str_field(data, "created_at"),
            expires_at=_str_field(data, "expires_at"),
            idle_expires_at=_str_field(data, "idle_expires_at"),
            memory_mb=_int_field(data, "memory_mb"),
            cells=_int_field(data, "cells"),
            ended_reason=_optional_str(data, "ended_reason"),
            ended_message=_optional_str(data, "ended_message"),
        )


@dataclass(frozen=True)
class CellOutput:
    """One rich output of a cell, in order (``display()``, ``plt.show()``, a figure
    left open).

    Attributes:
        type: ``"display"``.
        data: The mime bundle: ``{"text/plain": ..., "text/html": ...,
            "image/png": <base64>, "application/json": {...}}``.
    """

    type: str
    data: Dict[str, Any]

    @property
    def text(self) -> Optional[str]:
        """``text/plain`` of the bundle."""
        value = self.data.get("text/plain")
        return value if isinstance(value, str) else None

    @property
    def png(self) -> Optional[bytes]:
        """``image/png`` of the bundle as bytes, or ``None``."""
        return _image(self.data, "image/png")


@dataclass(frozen=True)
class CellException:
    """What a cell raised (Python), threw (JavaScript) or why it failed (bash:
    ``type`` ``"ExitStatus"``). Not an exception of the SDK: the session goes on.

    Attributes:
        type: ``"ZeroDivisionError"``, ``"TypeError"``, ``"KeyboardInterrupt"``...
        message: ``str()`` of it.
        traceback: The interpreter's traceback text (without the driver's frames).
    """

    type: str
    message: str = ""
    traceback: str = ""


@dataclass(frozen=True, repr=False)
class CellResult(ExecResult):
    """One cell's answer: the usual :class:`ExecResult` fields (``stdout``,
    ``stderr``, their truncation, ``duration_ms``, ``files``, ``error``) and:

    Attributes:
        status: ``"ok"``, ``"exception"``, ``"interrupted"`` (its time limit
            interrupted it, state kept) or ``"session_ended"`` (the session ended
            while it ran: ``error`` says why; the next call raises
            :class:`SessionEndedError`).
        value: ``text/plain`` of the last expression's value (``"42"``), or
            ``None``.
        value_data: The value's whole mime bundle (``text/html`` of a
            DataFrame, ``image/png`` of a figure), or ``None``.
        outputs: The cell's rich outputs, in order (:class:`CellOutput`).
        exception: What the cell raised (:class:`CellException`), or ``None``.
        session: The session after the cell (:class:`SessionInfo`), or ``None``.

    ``ok`` is True when ``status`` is ``"ok"``; ``exit_code`` is 0 then and 1
    otherwise (a cell has no exit status of its own).
    """

    status: str = "ok"
    value: Optional[str] = None
    value_data: Optional[Dict[str, Any]] = None
    outputs: Tuple[CellOutput, ...] = ()
    exception: Optional[CellException] = None
    session: Optional[SessionInfo] = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def png(self) -> Optional[bytes]:
        """``image/png`` of the value as bytes (a matplotlib Figure), or ``None``."""
        return _image(self.value_data or {}, "image/png")

    def __repr__(self) -> str:
        parts = ["status={!r}".format(self.status)]
        if self.value is not None:
            parts.append("value={!r}".format(self.value if len(self.value) <= 60 else self.value[:60] + "..."))
        if self.exception is not None:
            parts.append("exception={}: {}".format(self.exception.type, self.exception.message[:60]))
        if self.stdout:
            parts.append("stdout={!r}".format(self.stdout[:60]))
        if self.stderr:
            parts.append("stderr={!r}".format(self.stderr[:60]))
        if self.outputs:
            parts.append("outputs={}".format(len(self.outputs)))
        if self.error is not None:
            parts.append("error={!r}".format(self.error))
        return "CellResult({})".format(", ".join(parts))

    def to_dict(self) -> Dict[str, Any]:
        data = super().to_dict()
        for key in ("exit_code", "memory_used_mb", "timed_out", "oom_killed", "signal"):
            data.pop(key, None)
        data.update(
            status=self.status,
            value=self.value,
            value_data=self.value_data,
            outputs=[{"type": o.type, "data": o.data} for o in self.outputs],
            exception=None if self.exception is None else {
                "type": self.exception.type, "message": self.exception.message,
                "traceback": self.exception.traceback,
            },
        )
        return data

    @classmethod
    def from_response(cls, data: Any) -> "CellResult":
        """Build a ``CellResult`` from the service's cell answer (``POST
        /api/v1/sessions/{id}/exec``). Unknown fields are ignored; fields of the
        wrong type raise :class:`~hexr.sandbox.SandboxInternalError`."""
        if not isinstance(data, Mapping):
            raise _bad("the cell result is not a JSON object")
        status = data.get("status")
        if status not in CELL_STATUSES:
            raise _bad("the cell result's 'status' is {!r}".format(status))
        info, files = _files_field(data)
        value = data.get("value")
        if value is not None and not isinstance(value, str):
            raise _bad("'value' is neither null nor a string")
        value_data = data.get("value_data")
        if value_data is not None and not isinstance(value_data, dict):
            raise _bad("'value_data' is neither null nor an object")
        session = data.get("session")
        return cls(
            stdout=_str_field(data, "stdout"),
            stderr=_str_field(data, "stderr"),
            exit_code=0 if status == "ok" else 1,
            duration_ms=_int_field(data, "execution_time_ms"),
            stdout_truncated=_bool_field(data, "stdout_truncated"),
            stderr_truncated=_bool_field(data, "stderr_truncated"),
            id=_optional_str(data, "id"),
            files=files,
            file_info=info,
            error=_cell_error(data),
            stdout_omitted_bytes=_int_field(data, "stdout_omitted_bytes"),
            stderr_omitted_bytes=_int_field(data, "stderr_omitted_bytes"),
            status=status,
            value=value,
            value_data=value_data,
            outputs=_outputs(data),
            exception=_exception(data),
            session=None if session is None else SessionInfo.from_response(session),
        )


def _optional_str(data: Mapping[str, Any], name: str) -> Optional[str]:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _bad("'{}' is neither null nor a string".format(name))
    return value


def _cell_error(data: Mapping[str, Any]) -> Optional[ExecError]:
    value = data.get("error")
    if value is None:
        return None
    if not isinstance(value, Mapping) or not isinstance(value.get("type"), str):
        raise _bad("'error' is neither null nor an object with a string 'type'")
    message = value.get("message") or ""
    return ExecError(value["type"], message if isinstance(message, str) else str(message))


def _outputs(data: Mapping[str, Any]) -> Tuple[CellOutput, ...]:
    value = data.get("outputs")
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _bad("'outputs' is not an array")
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, Mapping) or not isinstance(item.get("data"), dict):
            raise _bad("'outputs[{}]' has no 'data' object".format(i))
        kind = item.get("type") or "display"
        out.append(CellOutput(kind if isinstance(kind, str) else "display", item["data"]))
    return tuple(out)


def _exception(data: Mapping[str, Any]) -> Optional[CellException]:
    value = data.get("exception")
    if value is None:
        return None
    if not isinstance(value, Mapping) or not isinstance(value.get("type"), str):
        raise _bad("'exception' is neither null nor an object with a string 'type'")
    return CellException(
        value["type"],
        value.get("message") if isinstance(value.get("message"), str) else "",
        value.get("traceback") if isinstance(value.get("traceback"), str) else "",
    )


def _image(bundle: Mapping[str, Any], mime: str) -> Optional[bytes]:
    value = bundle.get(mime)
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
