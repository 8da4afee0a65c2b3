"""Every SDK example of the three seed pages, run through the SDK against the real service.

The code strings are copied verbatim from the three seed pages of the specification. Each
result is compared with running the same code directly on the host
(/usr/bin/python3, /usr/bin/node, /bin/bash): the sandbox uses the host's
runtimes, so stdout must be byte-identical. Exceptions, each explained at its
test: random numbers (numpy.random.rand), `uname -a` (hostname/kernel are the
sandbox's own) and the shell example (whoami, /tmp, /etc/os-release are the
sandbox's own).

seed 002's ``hexr_agent`` / ``hexr_llm`` are not part of this project: the
decorated functions become plain functions and the LLM-generated code is a
fixed Fibonacci program.

A suite runs them by importing them into one of its test modules (``from
hxstest.seed_examples import *`` and the autouse ``_sandbox_url``), and provides a
``service_url`` fixture: the integration suite's service, the deploy suite's container.
"""

from __future__ import annotations

import asyncio
import platform
import re
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional

import pytest

from .paths import SDK_DIR

if str(SDK_DIR) not in sys.path:
    sys.path.insert(0, str(SDK_DIR))

import hexr.sandbox  # noqa: E402
from hexr.sandbox import ExecResult, SandboxRequestError  # noqa: E402

HOST_COMMAND = {
    "python": ["/usr/bin/python3", "-c"],
    "javascript": ["/usr/bin/node", "-e"],
    "bash": ["/bin/bash", "-c"],
}
HOST_COMMAND["shell"] = HOST_COMMAND["bash"]


@pytest.fixture(autouse=True)
def _sandbox_url(monkeypatch: pytest.MonkeyPatch, service_url: str) -> None:
    monkeypatch.setenv("HEXR_SANDBOX_URL", service_url)


def host_run(code: str, language: str = "python", env_vars: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
    """Run ``code`` directly on the host with a small, clean environment."""
    with tempfile.TemporaryDirectory(prefix="hexr-host-") as cwd:
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": cwd, "LANG": "C.UTF-8"}
        env.update(env_vars or {})
        return subprocess.run(
            HOST_COMMAND[language] + [code],
            capture_output=True, text=True, env=env, cwd=cwd, timeout=120,
        )


def assert_same_as_host(result: ExecResult, code: str, language: str = "python",
                        env_vars: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
    host = host_run(code, language, env_vars)
    assert result.stdout == host.stdout
    assert result.exit_code == host.returncode
    return host


def describe_table(text: str) -> Dict[str, Dict[str, float]]:
    """Parse a printed DataFrame.describe() into {row: {column: value}}."""
    lines = [line for line in text.splitlines() if line.strip()]
    columns = lines[0].split()
    table: Dict[str, Dict[str, float]] = {}
    for line in lines[1:]:
        parts = line.split()
        if parts[0] not in ("count", "mean", "std", "min", "25%", "50%", "75%", "max"):
            continue
        assert len(parts) == len(columns) + 1, line
        table[parts[0]] = {col: float(value) for col, value in zip(columns, parts[1:])}
    return table


# ===========================================================================
# Seed 000: hexr.sandbox


SEED000_QUICK_START = """
import pandas as pd
df = pd.DataFrame({'x': [1, 2, 3], 'y': [4, 5, 6]})
print(df.describe())
"""


def test_seed000_quick_start(capsys: pytest.CaptureFixture) -> None:
    result = hexr.sandbox.exec(SEED000_QUICK_START)

    print(result.stdout)

    assert capsys.readouterr().out == result.stdout + "\n"
    assert result.ok, result.stderr
    # The seed shows six decimals; pandas decides the layout (here the host's
    # pandas), so check the values and byte-equality with the host run.
    assert describe_table(result.stdout) == {
        "count": {"x": 3.0, "y": 3.0},
        "mean": {"x": 2.0, "y": 5.0},
        "std": {"x": 1.0, "y": 1.0},
        "min": {"x": 1.0, "y": 4.0},
        "25%": {"x": 1.5, "y": 4.5},
        "50%": {"x": 2.0, "y": 5.0},
        "75%": {"x": 2.5, "y": 5.5},
        "max": {"x": 3.0, "y": 6.0},
    }
    assert_same_as_host(result, SEED000_QUICK_START)


def test_seed000_env_vars() -> None:
    result = hexr.sandbox.exec(
        "import os; print(os.environ['MY_VAR'])",
        env_vars={"MY_VAR": "hello"}
    )
    assert result.stdout == "hello\n" and result.ok
    assert_same_as_host(result, "import os; print(os.environ['MY_VAR'])", env_vars={"MY_VAR": "hello"})


FLOAT = r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?"


def random_triple(text: str) -> List[float]:
    match = re.fullmatch(r"\[\s*(" + FLOAT + r")\s+(" + FLOAT + r")\s+(" + FLOAT + r")\s*\]\n", text)
    assert match, repr(text)
    return [float(v) for v in match.groups()]


def test_seed000_packages() -> None:
    result = hexr.sandbox.exec(
        "import numpy; print(numpy.random.rand(3))",
        packages=["numpy"]
    )
    assert result.ok, result.stderr
    # Random numbers differ from run to run: compare the shape with a host run.
    values = random_triple(result.stdout)
    assert all(0.0 <= v < 1.0 for v in values)
    host = host_run("import numpy; print(numpy.random.rand(3))")
    random_triple(host.stdout)
    assert result.stderr == host.stderr == ""


def test_seed000_exec_result() -> None:
    result = hexr.sandbox.exec("print('hello')")

    assert result.stdout == "hello\n"       # "hello\n"
    assert result.stderr == ""              # ""
    assert result.exit_code == 0            # 0
    assert isinstance(result.duration_ms, int) and result.duration_ms >= 0  # 1234
    assert result.ok is True                # True (exit_code == 0)
    assert result.output == result.stdout   # Alias for stdout
    assert_same_as_host(result, "print('hello')")


def test_seed000_async_version() -> None:
    async def main() -> ExecResult:
        result = await hexr.sandbox.exec_async("print('hello')")
        return result

    result = asyncio.run(main())
    assert result.stdout == "hello\n" and result.stderr == "" and result.exit_code == 0 and result.ok
    assert_same_as_host(result, "print('hello')")


def test_seed000_check_availability(capsys: pytest.CaptureFixture) -> None:
    result = None
    if hexr.sandbox.is_enabled():
        result = hexr.sandbox.exec("print('sandbox available')")
    else:
        print("Sandbox not available in this environment")

    assert capsys.readouterr().out == ""
    assert result is not None and result.stdout == "sandbox available\n"
    assert_same_as_host(result, "print('sandbox available')")


SEED000_DATA_ANALYSIS = """
import pandas as pd
import json

data = [
    {"name": "Alice", "score": 92},
    {"name": "Bob", "score": 85},
    {"name": "Charlie", "score": 78}
]
df = pd.DataFrame(data)
print(json.dumps({
    "mean": df['score'].mean(),
    "median": df['score'].median(),
    "std": df['score'].std()
}))
"""


def test_seed000_data_analysis() -> None:
    result = hexr.sandbox.exec(SEED000_DATA_ANALYSIS, packages=["pandas"])

    import json
    stats = json.loads(result.stdout)

    assert stats == {"mean": 85.0, "median": 85.0, "std": 7.0}
    assert result.ok, result.stderr
    assert_same_as_host(result, SEED000_DATA_ANALYSIS)


def test_seed000_shell_commands(capsys: pytest.CaptureFixture) -> None:
    result = hexr.sandbox.exec(
        "ls -la /tmp && whoami && cat /etc/os-release",
        language="shell"
    )
    print(result.stdout)

    assert capsys.readouterr().out == result.stdout + "\n"
    assert result.ok, result.stderr
    # Not comparable with the host byte for byte: the sandbox has its own
    # (empty) /tmp and runs as the `sandbox` user; its /etc/os-release is the
    # host's, since the runtimes are the host's.
    with open("/etc/os-release", encoding="utf-8") as handle:
        os_release = handle.read()
    tail = "sandbox\n" + os_release
    assert result.stdout.endswith(tail), result.stdout
    listing = result.stdout[: len(result.stdout) - len(tail)].splitlines()
    assert listing[0].startswith("total "), listing
    entries = sorted(line.split()[-1] for line in listing[1:])
    assert entries == [".", ".."], listing
    assert all(line.startswith("d") for line in listing[1:]), listing


def test_seed000_error_handling(capsys: pytest.CaptureFixture) -> None:
    result = hexr.sandbox.exec("1/0")  # ZeroDivisionError

    if not result.ok:
        print(f"Exit code: {result.exit_code}")
        print(f"Error: {result.stderr}")

    printed = capsys.readouterr().out
    assert printed.startswith("Exit code: 1\nError: ")
    assert "ZeroDivisionError" in result.stderr
    host = assert_same_as_host(result, "1/0")
    # Tracebacks name the file (<string> on the host); the last line is the same.
    assert result.stderr.rstrip("\n").splitlines()[-1] == host.stderr.rstrip("\n").splitlines()[-1]
    assert host.stderr.rstrip("\n").splitlines()[-1] == "ZeroDivisionError: division by zero"


# ===========================================================================
# Seed 001: the service's request body, sent through the SDK

SEED001_REQUEST_CODE = "import pandas as pd\nprint(pd.DataFrame({'a': [1,2,3]}).describe())"


def test_seed001_request_body() -> None:
    result = hexr.sandbox.exec(SEED001_REQUEST_CODE, language="python", timeout=30, memory_mb=256)
    assert result.ok, result.stderr
    assert result.stdout.startswith("         a\ncount  3.0\nmean   2.0\n")  # as the seed's response shows
    assert isinstance(result.duration_ms, int)
    assert isinstance(result.memory_used_mb, (int, float))
    assert_same_as_host(result, SEED001_REQUEST_CODE)


# ===========================================================================
# Seed 002: code execution guide


SEED002_BASIC = """
import pandas as pd
import numpy as np

data = pd.DataFrame({
    'revenue': [100, 200, 150, 300, 250],
    'costs': [80, 150, 100, 200, 180],
})
data['profit'] = data['revenue'] - data['costs']
print(data.describe().to_string())
print(f"\\nTotal profit: ${data['profit'].sum()}")
"""


def test_seed002_basic_usage(capsys: pytest.CaptureFixture) -> None:
    from hexr.sandbox import exec

    def main() -> ExecResult:  # @hexr_agent(name="data-analyst", tenant="acme-corp") in the seed
        result = exec("""
import pandas as pd
import numpy as np

data = pd.DataFrame({
    'revenue': [100, 200, 150, 300, 250],
    'costs': [80, 150, 100, 200, 180],
})
data['profit'] = data['revenue'] - data['costs']
print(data.describe().to_string())
print(f"\\nTotal profit: ${data['profit'].sum()}")
""")

        print(result.stdout)
        return result

    result = main()
    assert capsys.readouterr().out == result.stdout + "\n"
    assert result.ok, result.stderr
    assert result.stdout.endswith("\n\nTotal profit: $290\n")
    table = describe_table(result.stdout.split("\n\nTotal profit")[0])
    assert table["count"] == {"revenue": 5.0, "costs": 5.0, "profit": 5.0}
    assert table["mean"] == {"revenue": 200.0, "costs": 142.0, "profit": 58.0}
    assert_same_as_host(result, SEED002_BASIC)


# Stands in for hexr_llm(prompt="Write Python code to calculate the first 20 Fibonacci numbers").
FIBONACCI_CODE = """\
def fibonacci(n):
    numbers = []
    a, b = 0, 1
    for _ in range(n):
        numbers.append(a)
        a, b = b, a + b
    return numbers


print(fibonacci(20))
"""


def test_seed002_llm_sandbox_pattern(capsys: pytest.CaptureFixture) -> None:
    from hexr.sandbox import exec

    def main() -> ExecResult:  # @hexr_agent(name="code-agent", tenant="acme-corp") in the seed
        # Ask LLM to generate analysis code
        code = FIBONACCI_CODE

        # Execute safely in a microVM
        result = exec(code, language="python", timeout=10)

        if result.exit_code == 0:
            print(f"Output: {result.stdout}")
        else:
            print(f"Error: {result.stderr}")
        return result

    result = main()
    expected = "[0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987, 1597, 2584, 4181]\n"
    assert result.stdout == expected
    assert capsys.readouterr().out == "Output: " + expected + "\n"
    assert_same_as_host(result, FIBONACCI_CODE)


def test_seed002_multi_language() -> None:
    from hexr.sandbox import exec

    # Python
    result = exec("print('Hello from Python')", language="python")
    assert result.stdout == "Hello from Python\n" and result.ok
    assert_same_as_host(result, "print('Hello from Python')", "python")

    # JavaScript
    result = exec("console.log('Hello from Node.js')", language="javascript")
    assert result.stdout == "Hello from Node.js\n" and result.ok
    assert_same_as_host(result, "console.log('Hello from Node.js')", "javascript")

    # Shell
    result = exec("echo 'Hello from Bash' && uname -a", language="bash")
    assert result.ok, result.stderr
    # `uname -a` names the sandbox's host name (and, in a microVM, its kernel),
    # so only its shape is compared with the host.
    lines = result.stdout.splitlines()
    assert len(lines) == 2 and result.stdout.endswith("\n")
    assert lines[0] == "Hello from Bash"
    assert lines[1].startswith("Linux ")
    assert lines[1].endswith(" {} GNU/Linux".format(platform.machine()))
    host = host_run("echo 'Hello from Bash' && uname -a", "bash")
    assert host.stdout.splitlines()[0] == lines[0]


def test_seed002_resource_limits() -> None:
    from hexr.sandbox import exec

    # The seed asks for timeout=60. With the default MAX_EXECUTION_TIME (30s)
    # the service must reject it with a 400 naming the field (limits are never
    # silently clamped); a service configured with a larger maximum runs it.
    try:
        result = exec(
            code="...",
            language="python",
            timeout=60,          # Max 60 seconds
            memory_mb=512,       # Max 512MB RAM
        )
    except SandboxRequestError as err:
        assert err.status == 400 and "timeout" in err.message
        result = exec(code="...", language="python", timeout=30, memory_mb=512)
    assert result.ok and result.stdout == "" and result.stderr == ""
    assert_same_as_host(result, "...")
