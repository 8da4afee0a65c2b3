"""Exceptions raised by the hexr.sandbox SDK.

A program that fails inside the sandbox (non-zero exit, timeout, out of memory)
is *not* an exception: it is an :class:`~hexr.sandbox.ExecResult`. These
exceptions mean the execution could not happen or its result could not be read.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

__all__ = [
    "SandboxError",
    "SandboxUnavailableError",
    "SandboxRequestError",
    "SandboxOverloadedError",
    "SandboxInternalError",
    "SessionEndedError",
]


class SandboxError(Exception):
    """Base class of every error the SDK raises.

    Attributes:
        message: Human-readable explanation. For errors reported by the service
            this is the server's ``error.message``, verbatim.
        code: Machine-readable error code: the server's ``error.code`` when the
            service answered with an error document, otherwise an SDK code such
            as ``"connection_failed"``, ``"timeout"`` or ``"bad_response"``.
        status: HTTP status of the service's reply, or ``None`` when no reply
            was received.
        attempts: How many times the request was tried before this error
            was raised (1 when it was not retried; see ``Client(retries=...)``).
    """

    attempts: int = 1

    def __init__(
        self,
        message: str,
        *,
        status: Optional[int] = None,
        code: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.message: str = message
        self.status: Optional[int] = status
        self.code: Optional[str] = code

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return "{}(message={!r}, status={!r}, code={!r})".format(
            type(self).__name__, self.message, self.status, self.code
        )

    def _state(self) -> Dict[str, Any]:
        return {"status": self.status, "code": self.code}

    def __reduce__(self) -> Tuple[Any, ...]:
        # Keep status/code (and subclass extras) across pickling, which the
        # default Exception pickling (positional args only) would drop.
        return (_rebuild, (type(self), self.message, self._state()))


def _rebuild(cls: type, message: str, state: Dict[str, Any]) -> SandboxError:
    """Recreate a pickled :class:`SandboxError` (internal)."""
    return cls(message, **state)


class SandboxUnavailableError(SandboxError):
    """The service cannot be reached or says it cannot run sandboxes now.

    Raised when the connection is refused, the address does not resolve or does
    not answer in time, the connection is dropped before any reply, or the
    service answers 503 (draining or unhealthy); also for 502/504 from a proxy
    in front of it. Retrying later, or elsewhere, may succeed.
    """


class SandboxRequestError(SandboxError):
    """The service rejected the request (HTTP 4xx other than 429).

    Typical statuses: 400 invalid request (the message names the field and the
    rule), 413 body too large, 415 not JSON, 422 e.g. a package that cannot be
    found. Sending the same request again will fail the same way.
    """


class SandboxOverloadedError(SandboxError):
    """The service is at capacity (HTTP 429).

    Attributes:
        retry_after: Seconds the service asked the client to wait before
            retrying (from the ``Retry-After`` header), or ``None`` if absent or
            unparsable.
    """

    def __init__(
        self,
        message: str,
        *,
        status: Optional[int] = 429,
        code: Optional[str] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        super().__init__(message, status=status, code=code)
        self.retry_after: Optional[float] = retry_after

    def __repr__(self) -> str:
        return "{}(message={!r}, status={!r}, code={!r}, retry_after={!r})".format(
            type(self).__name__, self.message, self.status, self.code, self.retry_after
        )

    def _state(self) -> Dict[str, Any]:
        state = super()._state()
        state["retry_after"] = self.retry_after
        return state


class SandboxInternalError(SandboxError):
    """The service failed (HTTP 500) or replied with something unexpected.

    HTTP 500 means the sandbox could not be set up (the message says why). This
    class is also used for replies the SDK cannot understand: invalid JSON, a
    malformed HTTP response, or a status the contract does not define.
    """


class SessionEndedError(SandboxRequestError):
    """The session is over: closed by the caller, or ended by the service (idle
    timeout, lifetime, a cell that would not stop, memory limit, crash, service
    shutdown). Raised by every call on it from then on (HTTP 410, or 404 once the
    service has forgotten it); make a new session to go on.

    Attributes:
        reason: Why it ended, as the service names it (``"idle_timeout"``,
            ``"lifetime"``, ``"cell_timeout"``, ``"memory_limit"``,
            ``"crashed"``, ``"protocol"``, ``"shutdown"``, ``"deleted"``), or
            ``None`` when the service did not say.
        session_id: The session's id.
    """

    def __init__(
        self,
        message: str,
        *,
        status: Optional[int] = 410,
        code: Optional[str] = "session_ended",
        reason: Optional[str] = None,
        session_id: Optional[str] = None,
    ) -> None:
        super().__init__(message, status=status, code=code)
        self.reason: Optional[str] = reason
        self.session_id: Optional[str] = session_id

    def _state(self) -> Dict[str, Any]:
        state = super()._state()
        state.update(reason=self.reason, session_id=self.session_id)
        return state
