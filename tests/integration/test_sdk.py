"""Integration tests of the hexr.sandbox Python SDK against the real service.

The fixtures ``service_url`` (``http://127.0.0.1:PORT``) and
``service_unix_url`` (``unix:/path/to.sock``) come from
tests/integration/conftest.py, which starts ``hexr-sandbox serve``.

Run: /usr/bin/python3 -m pytest tests/integration/test_sdk.py -q
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
SDK_DIR = ROOT / "sdk" / "python"
if str(SDK_DIR) not in sys.path:
    sys.path.insert(0, str(SDK_DIR))

import hexr.sandbox  # noqa: E402
from hexr.sandbox import (  # noqa: E402
    Client,
    ExecResult,
    SandboxOverloadedError,
    SandboxRequestError,
    SandboxUnavailableError,
)

URL_ENV = "HEXR_SANDBOX_URL"


@pytest.fixture(autouse=True)
def _sandbox_url(monkeypatch: pytest.MonkeyPatch, service_url: str) -> Iterator[None]:
    """Point the module-level functions at the test service."""
    monkeypatch.setenv(URL_ENV, service_url)
    yield


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def exec_async_retrying(client: Client, code: str, **kw: Any) -> ExecResult:
    """exec_async, waiting and retrying when the service answers 429.

    A bounded admission queue may turn away part of a burst; that is the
    contract (429 + Retry-After), not an SDK failure.
    """
    for _ in range(60):
        try:
            return await client.exec_async(code, **kw)
        except SandboxOverloadedError as err:
            await asyncio.sleep(min(err.retry_after if err.retry_after is not None else 0.5, 2.0))
    raise AssertionError("still overloaded after 60 attempts")


def assert_clean_success(result: ExecResult, stdout: str) -> None:
    assert result.stdout == stdout
    assert result.stderr == ""
    assert result.exit_code == 0 and result.ok is True
    assert result.output == result.stdout
    assert isinstance(result.duration_ms, int) and result.duration_ms >= 0
    assert isinstance(result.memory_used_mb, (int, float)) and result.memory_used_mb >= 0
    assert result.timed_out is False and result.oom_killed is False and result.signal is None
    assert result.stdout_truncated is False and result.stderr_truncated is False


# ---------------------------------------------------------------------------
# Basics


def test_exec_sync() -> None:
    assert_clean_success(hexr.sandbox.exec("print('hello')"), "hello\n")


def test_exec_async() -> None:
    assert_clean_success(asyncio.run(hexr.sandbox.exec_async("print('hello')")), "hello\n")


def test_client_with_explicit_url(service_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(URL_ENV, "http://127.0.0.1:{}".format(free_port()))  # must be ignored
    assert_clean_success(Client(url=service_url).exec("print(6 * 7)"), "42\n")


def test_twenty_concurrent_exec_async(service_url: str) -> None:
    client = Client(url=service_url)
    code = "import os\nn = int(os.environ['N'])\nprint(n, n * n)\n"

    async def main() -> Any:
        return await asyncio.gather(*(
            exec_async_retrying(client, code, env_vars={"N": str(i)}) for i in range(20)
        ))

    results = asyncio.run(main())
    assert len(results) == 20
    for i, result in enumerate(results):
        assert_clean_success(result, "{} {}\n".format(i, i * i))


def test_is_enabled_true(service_url: str) -> None:
    assert hexr.sandbox.is_enabled() is True
    assert Client(url=service_url).is_enabled() is True
    health = Client(url=service_url).health()
    assert health["status"] == "ok"


def test_is_enabled_false(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(URL_ENV, "http://127.0.0.1:{}".format(free_port()))
    assert hexr.sandbox.is_enabled() is False
    assert Client(url="unix:" + str(tmp_path / "absent.sock")).is_enabled() is False


def test_unreachable_service_raises_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(URL_ENV, "http://127.0.0.1:{}".format(free_port()))
    with pytest.raises(SandboxUnavailableError):
        hexr.sandbox.exec("print(1)")


@pytest.mark.parametrize("language,code", [
    ("python", "print(6 * 7)"),
    ("javascript", "console.log(6 * 7)"),
    ("js", "console.log(6 * 7)"),
    ("node", "console.log(6 * 7)"),
    ("bash", "echo $((6 * 7))"),
    ("shell", "echo $((6 * 7))"),
    ("sh", "echo $((6 * 7))"),
])
def test_languages_and_aliases(language: str, code: str) -> None:
    assert_clean_success(hexr.sandbox.exec(code, language=language), "42\n")


# ---------------------------------------------------------------------------
# Program outcomes are results, not exceptions


def test_failing_program_is_a_result() -> None:
    result = hexr.sandbox.exec("1/0")
    assert result.ok is False
    assert result.exit_code != 0 and result.exit_code == 1
    assert "ZeroDivisionError" in result.stderr
    assert result.stdout == "" and result.output == ""
    assert result.timed_out is False and result.oom_killed is False


def test_exit_status_is_passed_through() -> None:
    result = hexr.sandbox.exec("echo out; echo err >&2; exit 7", language="bash")
    assert (result.exit_code, result.stdout, result.stderr, result.ok) == (7, "out\n", "err\n", False)


def test_timeout_kills_and_flags() -> None:
    result = hexr.sandbox.exec("import time\nprint('start', flush=True)\ntime.sleep(60)\nprint('end')\n",
                               timeout=1)
    assert result.timed_out is True
    assert result.exit_code == 124 and result.ok is False
    # output written before the kill is kept; the program never got past its sleep
    assert result.stdout == "start\n"
    assert result.oom_killed is False


def test_killed_by_signal() -> None:
    result = hexr.sandbox.exec("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n")
    assert result.signal == 15 and result.exit_code == 128 + 15
    assert result.timed_out is False and result.oom_killed is False


def test_signal_dispositions_are_reset() -> None:
    # A program must start with default signal dispositions and an empty
    # signal mask, as on the host: `yes` dies of SIGPIPE silently (141),
    # rather than seeing EPIPE and complaining on stderr.
    result = hexr.sandbox.exec('yes | head -n 1; echo "${PIPESTATUS[@]}"', language="bash")
    assert (result.stdout, result.stderr, result.exit_code) == ("y\n141 0\n", "", 0)


def test_memory_limit_kills_and_flags() -> None:
    code = "chunks = []\nwhile True:\n    chunks.append(b'x' * (16 << 20))\n"
    result = hexr.sandbox.exec(code, memory_mb=64, timeout=20)
    assert result.oom_killed is True
    assert result.exit_code == 137 and result.ok is False
    assert result.timed_out is False


# ---------------------------------------------------------------------------
# Parameters


def test_env_vars() -> None:
    env = {"MY_VAR": "hello", "WITH_SPACE": "a b  c", "EQUALS": "x=y=z", "UNICODE": "héllo ✓", "EMPTY": ""}
    code = "import os, json\nprint(json.dumps({k: os.environ[k] for k in %r}, sort_keys=True))\n" % sorted(env)
    result = hexr.sandbox.exec(code, env_vars=env)
    assert result.ok, result.stderr
    assert json.loads(result.stdout) == env


ENV_DUMP = {
    # warm Python (from a template) and cold Python (a request env var that Python reads
    # at start-up sends it cold), and Bash
    "python": "import json, os, sys\nprint(json.dumps({'warm': '_hxs_zygote' in sys.modules, 'env': dict(os.environ),"
              " 'proc': open('/proc/self/environ', 'rb').read().decode(errors='replace')}))\n",
    "bash": "tr '\\0' '\\n' < /proc/self/environ; env",
}


def test_host_environment_does_not_leak(start_service: Any) -> None:
    """A secret in the service's own environment is nowhere inside a sandbox."""
    name = "HEXR_SDK_TEST_SECRET_" + os.urandom(4).hex().upper()
    secret = "must-not-leak-" + os.urandom(8).hex()
    svc = start_service(env={name: secret, "AWS_SECRET_ACCESS_KEY": secret})
    assert svc.proc.pid and secret in open("/proc/%d/environ" % svc.proc.pid, "rb").read().decode(errors="replace")
    client = Client(url=svc.url)
    deadline = time.monotonic() + 90
    while True:  # until a template answers: the warm path builds its environment differently
        warm = client.exec(ENV_DUMP["python"])
        assert warm.ok, warm.stderr
        if json.loads(warm.stdout)["warm"] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    cold = client.exec(ENV_DUMP["python"], env_vars={"PYTHONHASHSEED": "0"})
    bash = client.exec(ENV_DUMP["bash"], language="bash")
    assert json.loads(warm.stdout)["warm"] is True, "no warm template within 90 s: " + warm.stdout
    assert json.loads(cold.stdout)["warm"] is False, cold.stdout
    for result in (warm, cold, bash):
        assert result.ok, result.stderr
        assert secret not in result.stdout and name not in result.stdout, result.stdout
        assert "AWS_SECRET_ACCESS_KEY" not in result.stdout, result.stdout
    for result in (warm, cold):
        env = json.loads(result.stdout)["env"]
        assert set(env) <= {"PATH", "HOME", "LANG", "MPLBACKEND", "PYTHONUNBUFFERED", "PYTHONHASHSEED"}, env


def test_packages_already_available_are_no_ops() -> None:
    host = subprocess.run(
        ["/usr/bin/python3", "-c", "import numpy, pandas; print(numpy.__version__, pandas.__version__)"],
        capture_output=True, text=True, check=True,
    ).stdout
    result = hexr.sandbox.exec(
        "import numpy, pandas; print(numpy.__version__, pandas.__version__)",
        packages=["numpy", "pandas"],
    )
    assert_clean_success(result, host)
    assert json.dumps(result.to_dict())  # serialisable


def test_explicit_default_limits_are_accepted() -> None:
    assert_clean_success(hexr.sandbox.exec("print(1)", timeout=30, memory_mb=256), "1\n")


def test_large_code_is_not_an_argument() -> None:
    code = "x = 1\n" * 40000 + "print('big', x)\n"  # 240 KB > MAX_ARG_STRLEN (128 KiB)
    assert_clean_success(hexr.sandbox.exec(code), "big 1\n")


def test_unicode_output() -> None:
    assert_clean_success(hexr.sandbox.exec("print('héllo ✓ 日本 \U0001f600')"), "héllo ✓ 日本 \U0001f600\n")


def test_fresh_sandbox_per_call() -> None:
    first = hexr.sandbox.exec("open('/tmp/hexr-sdk-marker', 'w').write('x'); print('written')")
    assert_clean_success(first, "written\n")
    second = hexr.sandbox.exec("import os; print(os.path.exists('/tmp/hexr-sdk-marker'))")
    assert_clean_success(second, "False\n")


# ---------------------------------------------------------------------------
# Rejected requests


def test_unknown_language_is_a_400_naming_the_field() -> None:
    with pytest.raises(SandboxRequestError) as info:
        hexr.sandbox.exec("IDENTIFICATION DIVISION.", language="cobol")
    err = info.value
    assert err.status == 400
    assert "language" in err.message.lower()
    assert err.code and isinstance(err.code, str)


def test_unknown_language_async() -> None:
    with pytest.raises(SandboxRequestError) as info:
        asyncio.run(hexr.sandbox.exec_async("x", language="cobol"))
    assert info.value.status == 400 and "language" in info.value.message.lower()


@pytest.mark.parametrize("kwargs,field", [
    ({"timeout": 10 ** 6}, "timeout"),
    ({"memory_mb": 10 ** 7}, "memory_mb"),
    ({"timeout": -1}, "timeout"),
    ({"env_vars": {"A": 1}}, "env_vars"),
    ({"packages": "numpy"}, "packages"),
])
def test_invalid_parameters_are_400s_naming_the_field(kwargs: Any, field: str) -> None:
    with pytest.raises(SandboxRequestError) as info:
        hexr.sandbox.exec("print(1)", **kwargs)
    assert info.value.status == 400
    assert field in info.value.message


# ---------------------------------------------------------------------------
# Unix socket


def test_unix_socket_url(service_unix_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert service_unix_url.startswith("unix:")
    client = Client(url=service_unix_url)
    assert_clean_success(client.exec("print('over unix')"), "over unix\n")
    assert_clean_success(asyncio.run(client.exec_async("print('async unix')")), "async unix\n")
    assert client.is_enabled() is True
    monkeypatch.setenv(URL_ENV, service_unix_url)
    assert_clean_success(hexr.sandbox.exec("print('env unix')"), "env unix\n")
    assert hexr.sandbox.is_enabled() is True


def test_unix_socket_concurrent(service_unix_url: str) -> None:
    client = Client(url=service_unix_url)

    async def main() -> Any:
        return await asyncio.gather(*(
            exec_async_retrying(client, "print({})".format(i)) for i in range(8)
        ))

    for i, result in enumerate(asyncio.run(main())):
        assert_clean_success(result, "{}\n".format(i))


# ---------------------------------------------------------------------------
# Command line


def test_cli_against_service(service_url: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(SDK_DIR), HEXR_SANDBOX_URL=service_url)
    proc = subprocess.run(
        [sys.executable, "-m", "hexr.sandbox", "-e", "WHO=cli", "-"],
        input=b"import os, sys\nprint('hi', os.environ['WHO'])\nprint('oops', file=sys.stderr)\nsys.exit(5)\n",
        capture_output=True, env=env, timeout=120,
    )
    assert proc.returncode == 5
    assert proc.stdout == b"hi cli\n" and proc.stderr == b"oops\n"
    proc = subprocess.run(
        [sys.executable, "-m", "hexr.sandbox", "-l", "cobol", "-c", "x"],
        capture_output=True, env=env, timeout=120,
    )
    assert proc.returncode == 2 and b"language" in proc.stderr
