"""hexr.sandbox: run untrusted code in a throwaway, isolated sandbox.

Python SDK of the hexr-sandbox service (standard library only)::

    import hexr.sandbox

    result = hexr.sandbox.exec("print('hello')")
    result.stdout       # "hello\\n"
    result.exit_code    # 0
    result.ok           # True

The service address comes from ``HEXR_SANDBOX_URL`` (read at every call;
default ``http://127.0.0.1:8080``; ``unix:/path/to.sock`` for a unix socket),
or use a :class:`Client` with an explicit ``url``.

Files go in and come back, and output can be followed as it is printed::

    result = hexr.sandbox.exec(
        "import pandas as pd; df = pd.read_csv('data.csv'); df.plot(); "
        "import matplotlib.pyplot as plt; plt.show()",
        files={"data.csv": "a,b\\n1,2\\n3,4\\n"},
        on_stdout=lambda text: print(text, end=""),
    )
    result.files["output/figure-1.png"]    # bytes of the chart

    async for event in hexr.sandbox.stream("print(1)"):
        ...                                # "stdout", "stderr", "file", then "result"

A program that fails (non-zero exit, timeout, out of memory) gives an
:class:`ExecResult`; a service that cannot be reached or rejects the request
raises a :class:`SandboxError` subclass.

Retries: what the service certainly did not run is retried, bounded: a
connection that could not be made (the request was never sent), 503 (draining,
or no instance behind a load balancer), 429 with ``Retry-After`` (waited for);
at most ``HEXR_SANDBOX_RETRIES`` further attempts (default 2; 0 turns them
off) and 10 s of waiting in all. A connection lost after the request was sent
is never retried: the code may have run. See :class:`Client`.

A session keeps one sandbox and its interpreter alive across calls (state,
last-expression values, rich outputs, as a Jupyter kernel gives them)::

    with hexr.sandbox.Session(language="python") as s:
        s.exec("x = 41")
        assert s.exec("x + 1").value == "42"

``hexr`` is a PEP 420 namespace package: this SDK installs only
``hexr/sandbox/`` so it can sit beside other ``hexr.*`` packages.
"""

from __future__ import annotations

from typing import AsyncIterator, Dict, Iterable, Iterator, List, Optional

from ._client import DEFAULT_TIMEOUT, DEFAULT_URL, URL_ENV, Client, OutputCallback
from ._errors import (
    SandboxError,
    SandboxInternalError,
    SandboxOverloadedError,
    SandboxRequestError,
    SandboxUnavailableError,
    SessionEndedError,
)
from ._cell import CellException, CellOutput, CellResult, SessionInfo
from ._files import FilesArg
from ._result import ExecError, ExecResult, FileInfo
from ._session import AsyncSession, FileEntry, Session
from ._stream import StreamEvent

__version__ = "0.1.0"

__all__ = [
    "exec",
    "exec_async",
    "stream",
    "stream_sync",
    "is_enabled",
    "Client",
    "ExecResult",
    "ExecError",
    "FileInfo",
    "StreamEvent",
    "Session",
    "AsyncSession",
    "SessionInfo",
    "CellResult",
    "CellOutput",
    "CellException",
    "FileEntry",
    "SessionEndedError",
    "SandboxError",
    "SandboxUnavailableError",
    "SandboxRequestError",
    "SandboxOverloadedError",
    "SandboxInternalError",
    "DEFAULT_URL",
    "URL_ENV",
    "__version__",
]

# The client used by the module-level functions. Its url is None, so it reads
# HEXR_SANDBOX_URL at every call.
_default_client = Client()


def exec(  # noqa: A001 - the seed's API name; shadows the builtin in this module only
    code: str,
    *,
    language: str = "python",
    timeout: int = DEFAULT_TIMEOUT,
    env_vars: Optional[Dict[str, str]] = None,
    packages: Optional[List[str]] = None,
    memory_mb: Optional[int] = None,
    files: Optional[FilesArg] = None,
    return_files: Optional[Iterable[str]] = None,
    stdin: Optional[str] = None,
    on_stdout: Optional[OutputCallback] = None,
    on_stderr: Optional[OutputCallback] = None,
) -> ExecResult:
    """Run ``code`` in a fresh sandbox and return its :class:`ExecResult`.

    Args:
        code: Source code (or shell script) to run.
        language: ``"python"`` (default), ``"javascript"`` (aliases ``"js"``,
            ``"node"``) or ``"bash"`` (aliases ``"shell"``, ``"sh"``).
        timeout: Wall-clock limit in seconds (default 30); after it the
            program is killed, ``timed_out`` is True and ``exit_code`` 124.
        env_vars: Environment variables to set inside the sandbox.
        packages: Python packages the code needs (already-available ones are
            no-ops).
        memory_mb: Memory limit in MiB (the service's default when omitted).
        files: Files written into the working directory first:
            ``{path: content}`` or ``[(path, content)]``; content ``bytes``,
            ``str`` (text) or a :class:`pathlib.Path` to upload from disk.
        return_files: Globs of files to return besides ``output/``'s.
        stdin: Text given to the program on its standard input.
        on_stdout: Called with each chunk of stdout as it is printed.
        on_stderr: Called with each chunk of stderr as it is printed.

    Returns:
        The result, whatever the program's outcome: check ``result.ok``.

    Raises:
        TypeError: ``code`` is not a ``str`` (or ``files``/``stdin`` are
            of the wrong type).
        OSError: a local file given in ``files`` cannot be read.
        SandboxRequestError: the service rejected the request (e.g. unknown
            language, limit above its maximum); the message names the field.
        SandboxOverloadedError: the service is at capacity (``retry_after``).
        SandboxUnavailableError: the service is unreachable or draining.
        SandboxInternalError: the service failed or replied unexpectedly.
    """
    return _default_client.exec(
        code,
        language=language,
        timeout=timeout,
        env_vars=env_vars,
        packages=packages,
        memory_mb=memory_mb,
        files=files,
        return_files=return_files,
        stdin=stdin,
        on_stdout=on_stdout,
        on_stderr=on_stderr,
    )


async def exec_async(
    code: str,
    *,
    language: str = "python",
    timeout: int = DEFAULT_TIMEOUT,
    env_vars: Optional[Dict[str, str]] = None,
    packages: Optional[List[str]] = None,
    memory_mb: Optional[int] = None,
    files: Optional[FilesArg] = None,
    return_files: Optional[Iterable[str]] = None,
    stdin: Optional[str] = None,
    on_stdout: Optional[OutputCallback] = None,
    on_stderr: Optional[OutputCallback] = None,
) -> ExecResult:
    """Asynchronous :func:`exec`: same arguments, result and exceptions.

    Uses asyncio sockets directly (no threads), so concurrent calls overlap::

        results = await asyncio.gather(*(exec_async(c) for c in codes))

    The callbacks may be coroutine functions.
    """
    return await _default_client.exec_async(
        code,
        language=language,
        timeout=timeout,
        env_vars=env_vars,
        packages=packages,
        memory_mb=memory_mb,
        files=files,
        return_files=return_files,
        stdin=stdin,
        on_stdout=on_stdout,
        on_stderr=on_stderr,
    )


def stream(
    code: str,
    *,
    language: str = "python",
    timeout: int = DEFAULT_TIMEOUT,
    env_vars: Optional[Dict[str, str]] = None,
    packages: Optional[List[str]] = None,
    memory_mb: Optional[int] = None,
    files: Optional[FilesArg] = None,
    return_files: Optional[Iterable[str]] = None,
    stdin: Optional[str] = None,
) -> AsyncIterator[StreamEvent]:
    """Run ``code`` and iterate over its :class:`StreamEvent` s as they happen::

        async for event in hexr.sandbox.stream(code):
            if event.type == "stdout":
                print(event.text, end="")
            elif event.type == "result":
                result = event.result      # the ExecResult, always last

    Arguments and errors as for :func:`exec`; leaving the loop early ends
    the execution. See :meth:`Client.stream`.
    """
    return _default_client.stream(
        code,
        language=language,
        timeout=timeout,
        env_vars=env_vars,
        packages=packages,
        memory_mb=memory_mb,
        files=files,
        return_files=return_files,
        stdin=stdin,
    )


def stream_sync(
    code: str,
    *,
    language: str = "python",
    timeout: int = DEFAULT_TIMEOUT,
    env_vars: Optional[Dict[str, str]] = None,
    packages: Optional[List[str]] = None,
    memory_mb: Optional[int] = None,
    files: Optional[FilesArg] = None,
    return_files: Optional[Iterable[str]] = None,
    stdin: Optional[str] = None,
) -> Iterator[StreamEvent]:
    """Synchronous :func:`stream`: a generator of the same events."""
    return _default_client.stream_sync(
        code,
        language=language,
        timeout=timeout,
        env_vars=env_vars,
        packages=packages,
        memory_mb=memory_mb,
        files=files,
        return_files=return_files,
        stdin=stdin,
    )


def is_enabled(*, timeout: Optional[float] = None) -> bool:
    """Return True when the sandbox service answers its health check.

    True when ``GET /health`` at ``HEXR_SANDBOX_URL`` returns 200 within
    ``timeout`` seconds (default 2). Never raises.
    """
    return _default_client.is_enabled(timeout=timeout)
