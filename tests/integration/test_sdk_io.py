"""The Python SDK's input and output options (issue 14) against the real service.

stdin, the output callbacks and stream(): what the callbacks and the stream's
chunks carry adds up to the result's output, whether the service streams its
answer (Server-Sent Events) or answers it whole. Why the sandbox ended a program
(ExecResult.error) and the head and tail of a long output.

Run: /usr/bin/python3 -m pytest tests/integration/test_sdk_io.py -q
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any, List

import pytest

ROOT = Path(__file__).resolve().parents[2]
SDK_DIR = ROOT / "sdk" / "python"
if str(SDK_DIR) not in sys.path:
    sys.path.insert(0, str(SDK_DIR))

from hexr.sandbox import Client, StreamEvent  # noqa: E402

PRINTS = (
    "import sys, time\n"
    "for i in range(3):\n"
    "    print('out', i, flush=True)\n"
    "    print('err', i, file=sys.stderr, flush=True)\n"
    "    time.sleep(0.05)\n"
)


@pytest.fixture
def client(service_url: str) -> Client:
    return Client(url=service_url)


def test_stdin_reaches_the_program(client: Client) -> None:
    result = client.exec("import sys\nprint(sys.stdin.read().upper(), end='')", stdin="abc\ndéf\n")
    assert result.ok and result.stdout == "ABC\nDÉF\n"


def test_callbacks_carry_the_whole_output(client: Client) -> None:
    out: List[str] = []
    err: List[str] = []
    result = client.exec(PRINTS, on_stdout=out.append, on_stderr=err.append)
    assert result.ok
    assert "".join(out) == result.stdout == "out 0\nout 1\nout 2\n"
    assert "".join(err) == result.stderr == "err 0\nerr 1\nerr 2\n"


def test_async_callbacks_carry_the_whole_output(client: Client) -> None:
    out: List[str] = []
    result = asyncio.run(client.exec_async(PRINTS, language="python", on_stdout=out.append))
    assert "".join(out) == result.stdout == "out 0\nout 1\nout 2\n"


def _check_events(events: List[StreamEvent]) -> None:
    assert events[-1].type == "result" and [e.type for e in events].count("result") == 1
    result = events[-1].result
    assert result is not None and result.ok
    assert "".join(e.text for e in events if e.type == "stdout") == result.stdout == "out 0\nout 1\nout 2\n"
    assert b"".join(e.data for e in events if e.type == "stderr") == result.stderr.encode()


def test_stream_sync(client: Client) -> None:
    _check_events(list(client.stream_sync(PRINTS)))


def test_stream_async(client: Client) -> None:
    async def main() -> Any:
        return [event async for event in client.stream(PRINTS)]

    _check_events(asyncio.run(main()))


def test_stream_of_bash_with_stdin(client: Client) -> None:
    events = list(client.stream_sync("cat; echo done", language="bash", stdin="piped\n"))
    result = events[-1].result
    assert result is not None and result.stdout == "piped\ndone\n"


def test_a_program_that_ends_by_itself_has_no_error(client: Client) -> None:
    result = client.exec("import sys; sys.exit(3)")
    assert result.exit_code == 3 and result.error is None


def test_a_time_limit_is_said_in_words(client: Client) -> None:
    result = client.exec("import time\nprint('before', end='')\ntime.sleep(30)\n", timeout=1)
    assert result.timed_out
    assert result.error is not None and result.error.type == "timeout"
    assert result.error.message == "killed: time limit of 1 s exceeded"
    assert result.stderr.endswith("hexr-sandbox: " + result.error.message + "\n")
    assert result.stdout == "before"  # not flushed by the program, kept all the same


def test_a_memory_limit_is_said_in_words(client: Client) -> None:
    result = client.exec("x = bytearray(200 * 1024 * 1024)", memory_mb=64)
    assert result.oom_killed
    assert result.error is not None and result.error.type == "memory_limit"
    assert result.stderr.endswith("hexr-sandbox: " + result.error.message + "\n")


def test_a_long_output_keeps_its_head_and_tail(client: Client) -> None:
    result = client.exec("print('HEAD'); print('x' * 3000000); print('TAIL')")
    assert result.stdout_truncated and result.stdout_omitted_bytes > 0
    assert result.stdout.startswith("HEAD\n") and result.stdout.endswith("TAIL\n")
    assert "[hexr-sandbox: {} bytes left out]".format(result.stdout_omitted_bytes) in result.stdout


def test_chunks_arrive_while_the_program_runs(client: Client) -> None:
    """Output a second apart comes in separate chunks: it was streamed, not dumped at the end."""
    chunks: List[str] = []
    code = "import time\nprint('first', flush=True)\ntime.sleep(0.5)\nprint('second', flush=True)\n"
    result = client.exec(code, on_stdout=chunks.append)
    assert result.ok and "".join(chunks) == "first\nsecond\n"
    first = next(i for i, c in enumerate(chunks) if "first" in c)
    second = next(i for i, c in enumerate(chunks) if "second" in c)
    assert first < second, chunks


def test_stream_gives_the_exact_bytes_of_output_that_is_not_utf8(client: Client) -> None:
    """The service streams a chunk that is not UTF-8 as base64: the event has its bytes."""
    code = "import sys\nsys.stdout.buffer.write(b'caf\\xe9\\n')\n"
    events = list(client.stream_sync(code))
    assert b"".join(e.data for e in events if e.type == "stdout") == b"caf\xe9\n"
    assert "".join(e.text for e in events if e.type == "stdout") == "caf\ufffd\n"
