"""What a program prints, and why it ended, in words (issue 14, output).

Through the CLI (cold, namespace backend) and the service (warm Python templates):
- over MAX_OUTPUT_BYTES the result keeps the head and the tail with a marker line that
  says how many bytes were left out (stdout_omitted_bytes / stderr_omitted_bytes);
- a program ended by the sandbox gets a last stderr line saying so, the same in the CLI's
  plain output, and an `error` object ({"type", "message"}), null when it ended by itself;
- past MAX_STREAM_BYTES the program is killed (output_limit);
- what Python and Node printed before a kill is kept, flushed or not;
- the CLI's plain mode prints the program's output as it comes, before the program ends.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from conftest import BIN, post_exec
from hxstest.canary import run_exec
from hxstest.output import split_kept, wait_warm_ready

MiB = 1 << 20


# ---- head and tail ---------------------------------------------------------------------------

def test_head_and_tail_are_kept_with_a_marker() -> None:
    code = ("import sys\nprint('FIRST-LINE')\nfor i in range(200000):\n    print('line %06d' % i)\n"
            "print('Traceback: the answer is 42', file=sys.stderr)\nprint('LAST-LINE')\n")
    res = run_exec(code, "python", timeout=30)
    assert res.exit_code == 0 and res.error is None, res.describe()
    assert res.stdout_truncated is True and res.stderr_truncated is False, res.describe()
    head, omitted, tail = split_kept(res.stdout)
    total = len("FIRST-LINE\n") + 200000 * len("line 000000\n") + len("LAST-LINE\n")
    assert head.startswith("FIRST-LINE\nline 000000\n"), res.describe()
    assert tail.endswith("line 199999\nLAST-LINE\n"), res.describe()
    assert len(head) == len(tail) == MiB // 2, res.describe()
    assert omitted == res.stdout_omitted_bytes == total - MiB, res.describe()
    assert res.stderr == "Traceback: the answer is 42\n" and res.stderr_omitted_bytes == 0, res.describe()


def test_output_under_the_cap_is_whole() -> None:
    res = run_exec("import sys; sys.stdout.write('y' * (1 << 20))", "python")
    assert res.stdout == "y" * MiB and res.stdout_truncated is False, res.describe()
    assert res.stdout_omitted_bytes == 0 and res.error is None, res.describe()


# ---- why it ended --------------------------------------------------------------------------

def kill_line(res) -> str:
    assert res.stderr.endswith("\n"), res.describe()
    return res.stderr.rstrip("\n").rsplit("\n", 1)[-1]


def test_time_limit_says_so() -> None:
    res = run_exec("import time\nprint('started')\ntime.sleep(60)\n", "python", timeout=1)
    assert res.timed_out is True and res.exit_code == 124, res.describe()
    assert res.error == {"type": "timeout", "message": "killed: time limit of 1 s exceeded"}, res.describe()
    assert res.stderr == "hexr-sandbox: killed: time limit of 1 s exceeded\n", res.describe()
    assert res.stdout == "started\n", res.describe()


def test_memory_limit_says_so() -> None:
    code = "x = []\nwhile True:\n    x.append(bytearray(16 << 20))\n"
    res = run_exec(code, "python", memory_mb=64, timeout=20)
    assert res.oom_killed is True and res.exit_code == 137, res.describe()
    assert res.error == {"type": "memory_limit", "message": "killed: memory limit of 64 MB exceeded"}, res.describe()
    assert kill_line(res) == "hexr-sandbox: killed: memory limit of 64 MB exceeded", res.describe()


@pytest.mark.parametrize("lang,code", [
    ("python", "import os\nwhile True:\n    os.write(1, b'z' * 65536)\n"),
    ("bash", "yes zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"),
])
def test_output_limit_kills_and_says_so(lang: str, code: str) -> None:
    res = run_exec(code, lang, timeout=30, settings={"MAX_OUTPUT_BYTES": "4096", "MAX_STREAM_BYTES": "1M"})
    assert res.exit_code == 137 and res.signal == 9 and res.timed_out is False, res.describe()
    assert res.error == {"type": "output_limit", "message": "killed: output limit of 1 MiB exceeded"}, res.describe()
    assert kill_line(res) == "hexr-sandbox: killed: output limit of 1 MiB exceeded", res.describe()
    assert res.stdout_omitted_bytes >= MiB - 4096, res.describe()


def test_stream_limit_below_the_output_cap_is_refused() -> None:
    p = subprocess.run([BIN, "exec", "-c", "print(1)"], capture_output=True, timeout=60,
                       env=dict(os.environ, MAX_OUTPUT_BYTES="2M", MAX_STREAM_BYTES="1M"))
    assert p.returncode != 0 and b"MAX_STREAM_BYTES" in p.stderr, p


def test_killed_by_a_signal_says_which() -> None:
    res = run_exec("echo before; kill -SEGV $$", "bash")
    assert res.exit_code == 128 + 11 and res.signal == 11, res.describe()
    assert res.error == {"type": "signal", "message": "killed by signal 11 (SIGSEGV)"}, res.describe()
    assert res.stderr == "hexr-sandbox: killed by signal 11 (SIGSEGV)\n", res.describe()


def test_a_program_ending_by_itself_has_no_error() -> None:
    res = run_exec("import sys; print('err', file=sys.stderr); sys.exit(3)", "python")
    assert res.exit_code == 3 and res.error is None, res.describe()
    assert res.stderr == "err\n", res.describe()


def test_kill_line_starts_a_line_of_its_own() -> None:
    res = run_exec("import sys, time\nsys.stderr.write('no newline')\ntime.sleep(60)\n", "python", timeout=1)
    assert res.stderr == "no newline\nhexr-sandbox: killed: time limit of 1 s exceeded\n", res.describe()


def test_cli_plain_mode_prints_the_kill_line() -> None:
    p = subprocess.run([BIN, "exec", "-t", "1", "-c", "import time; print('hi'); time.sleep(60)"],
                       capture_output=True, timeout=60)
    assert p.returncode == 124, p
    assert p.stdout == b"hi\n", p
    assert p.stderr == b"hexr-sandbox: killed: time limit of 1 s exceeded\n", p


# ---- nothing printed is lost -------------------------------------------------------------------

UNFLUSHED = {
    "python": "import sys, time\nprint('line one')\nsys.stdout.write('no newline, not flushed')\n"
              "sys.stderr.write('err not flushed')\ntime.sleep(60)\n",
    "javascript": "process.stdout.write('line one\\n');\nprocess.stdout.write('no newline, not flushed');\n"
                  "process.stderr.write('err not flushed');\nconst end = Date.now() + 60000;\n"
                  "while (Date.now() < end) {}\n",
}


@pytest.mark.parametrize("lang", sorted(UNFLUSHED))
def test_unflushed_output_is_kept_on_a_time_limit(lang: str) -> None:
    # 3 s: a cold node on a loaded machine reaches its first line well within it
    res = run_exec(UNFLUSHED[lang], lang, timeout=3)
    assert res.timed_out is True, res.describe()
    assert res.stdout == "line one\nno newline, not flushed", res.describe()
    assert res.stderr == "err not flushed\nhexr-sandbox: killed: time limit of 3 s exceeded\n", res.describe()


def test_unflushed_output_is_kept_on_a_time_limit_warm(service_url) -> None:
    wait_warm_ready(service_url)
    # the service starts Python from warm templates once they are ready: several runs,
    # so that warm ones are among them
    for _ in range(3):
        status, _, res = post_exec(service_url, {"code": UNFLUSHED["python"], "timeout": 1})
        assert status == 200, res
        assert res["stdout"] == "line one\nno newline, not flushed", res
        assert res["stderr"] == "err not flushed\nhexr-sandbox: killed: time limit of 1 s exceeded\n", res
        assert res["error"]["type"] == "timeout", res


# ---- streaming -------------------------------------------------------------------------------

def test_cli_plain_mode_streams_as_the_program_prints() -> None:
    code = "import time\nprint('tick', flush=True)\ntime.sleep(3)\nprint('done')\n"
    proc = subprocess.Popen([BIN, "exec", "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        start = time.monotonic()
        first = proc.stdout.readline()
        seen_after = time.monotonic() - start
        assert first == b"tick\n", first
        assert proc.poll() is None, "the first line came only once the program had ended"
        rest, err = proc.communicate(timeout=60)
        assert rest == b"done\n" and err == b"", (rest, err)
        assert proc.returncode == 0
        assert seen_after < 3, "the first line took %.1f s" % seen_after
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
