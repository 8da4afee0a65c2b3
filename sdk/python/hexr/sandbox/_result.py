"""The :class:`ExecResult` returned by every successful call to the service."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional

from ._errors import SandboxInternalError

__all__ = ["ExecResult"]


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
        return data

    @classmethod
    def from_response(cls, data: Any) -> "ExecResult":
        """Build an ``ExecResult`` from the service's decoded 200 response.

        Fields the contract marks as always present but older or minimal
        services may omit (``timed_out``, ``signal``...) get their neutral
        default; unknown fields are ignored. A document without an integer
        ``exit_code``, or with fields of the wrong type, raises
        :class:`~hexr.sandbox.SandboxInternalError`.
        """
        if not isinstance(data, Mapping):
            raise _bad("the response is not a JSON object")
        exit_code = data.get("exit_code")
        if not _is_int(exit_code):
            raise _bad("the response has no integer 'exit_code'")
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
        )


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
