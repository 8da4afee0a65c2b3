"""The one builder of ``POST /api/v1/exec`` requests, for both transports (internal).

Only ``code`` (and the shape of ``files``) is checked here; everything else is
the service's to validate (its 400 names the field and the rule). Parameters
left at their defaults are omitted, except ``code`` and ``language``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Dict, Union

from . import _files

__all__ = ["Outgoing", "build", "with_files", "ACCEPT_JSON", "ACCEPT_EVENTS"]

ACCEPT_JSON = "application/json"
ACCEPT_EVENTS = "text/event-stream"


@dataclass(frozen=True)
class Outgoing:
    """A request ready to send: its body and the reply it asks for."""

    body: Union[_files.JsonBody, _files.MultipartBody]
    accept: str

    @property
    def streaming(self) -> bool:
        return self.accept == ACCEPT_EVENTS


def build(
    code: Any,
    *,
    language: Any,
    timeout: Any,
    send_timeout: bool,
    env_vars: Any,
    packages: Any,
    memory_mb: Any,
    files: Any = None,
    return_files: Any = None,
    stdin: Any = None,
    streaming: bool = False,
) -> Outgoing:
    """Build the request; ``streaming`` asks for Server-Sent Events.

    Raises:
        TypeError: ``code`` is not a ``str``, ``stdin`` not text, or ``files``
            is not a mapping or pairs of path and content.
        OSError: a local file named in ``files`` cannot be read.
        ValueError: a path cannot be carried by a multipart upload.
    """
    if not isinstance(code, str):
        raise TypeError("code must be a str, not {}".format(type(code).__name__))
    body: Dict[str, Any] = {"code": code, "language": language}
    if send_timeout:
        body["timeout"] = timeout
    if memory_mb is not None:
        body["memory_mb"] = memory_mb
    if env_vars is not None:
        body["env_vars"] = dict(env_vars) if isinstance(env_vars, Mapping) else env_vars
    if packages is not None:
        body["packages"] = _listed(packages)
    if stdin is not None:
        body["stdin"] = _stdin_text(stdin)
    if return_files is not None:
        body["return_files"] = [return_files] if isinstance(return_files, str) else _listed(return_files)
    return with_files(body, files, streaming)


def with_files(body: Dict[str, Any], files: Any, streaming: bool = False) -> Outgoing:
    """``body`` with ``files=``: inline in the JSON, or the multipart form (one
    ``request`` part, one ``files`` part per file) when they are local or large.
    Also what a session's create and cell requests send (the same form).

    Raises:
        TypeError, OSError, ValueError: as for :func:`build`.
    """
    specs = _files.normalise(files)
    accept = ACCEPT_EVENTS if streaming else ACCEPT_JSON
    if not _files.needs_multipart(specs):
        if files is not None:
            body["files"] = [_files.inline_entry(s) for s in specs]
        return Outgoing(_files.JsonBody(_files.encode_json(body)), accept)
    return Outgoing(_files.MultipartBody(_files.encode_json(body), specs), accept)


def _listed(value: Any) -> Any:
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping)):
        return list(value)
    return value


def _stdin_text(stdin: Any) -> str:
    if isinstance(stdin, str):
        return stdin
    if isinstance(stdin, (bytes, bytearray)):
        try:
            return bytes(stdin).decode("utf-8")
        except UnicodeDecodeError:
            raise TypeError("stdin must be text (bytes given are not valid UTF-8)") from None
    raise TypeError("stdin must be a str, not {}".format(type(stdin).__name__))
