"""Sessions through the Python SDK against the real service (issue 15): the seed
example, state across cells in the three languages, last-expression values and rich
outputs (a DataFrame's HTML, a figure's PNG), display order, exceptions, a cell
interrupted at its time limit with its state kept, a stuck cell ending the session
(and the next call raising SessionEndedError with the reason), files in a live
session, streamed cells, and the async face.

Run: /usr/bin/python3 -m pytest tests/integration/test_sdk_sessions.py -q
"""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path
from typing import Any, List

import pytest

ROOT = Path(__file__).resolve().parents[2]
SDK_DIR = ROOT / "sdk" / "python"
if str(SDK_DIR) not in sys.path:
    sys.path.insert(0, str(SDK_DIR))

import hexr.sandbox  # noqa: E402
from hexr.sandbox import AsyncSession, Client, SandboxRequestError, Session, SessionEndedError  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def client(service_url: str) -> Client:
    return Client(url=service_url)


def test_the_seed_example(service_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEXR_SANDBOX_URL", service_url)
    with hexr.sandbox.Session(language="python") as s:
        s.exec("x = 41")
        assert s.exec("x + 1").value == "42"


def test_python_state_values_and_exceptions(client: Client) -> None:
    with Session("python", client=client) as s:
        r = s.exec("import math\ndef f(a):\n    return a * 2\nprint('defined')")
        assert r.status == "ok" and r.stdout == "defined\n" and r.value is None
        assert s.exec("f(math.floor(20.5))").value == "40"
        r = s.exec("def g():\n    return 1 / 0\ng()")
        assert r.status == "exception" and not r.ok
        assert r.exception is not None and r.exception.type == "ZeroDivisionError"
        assert r.exception.message == "division by zero"
        assert "return 1 / 0" in r.exception.traceback and "driver.py" not in r.exception.traceback
        assert s.exec("f(1)").value == "2"
        assert s.info().cells == 4


def test_dataframe_html_figure_png_and_display_order(client: Client) -> None:
    with Session("python", client=client) as s:
        r = s.exec("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2], 'b': [3, 4]})\ndf")
        assert r.status == "ok", r
        assert r.value_data is not None and "<table" in r.value_data["text/html"]
        assert r.value is not None and "a  b" in r.value
        r = s.exec("import matplotlib.pyplot as plt\nprint('before')\ndisplay('shown')\n"
                   "plt.plot([1, 3, 2])\nplt.show()\nprint('after')")
        assert r.status == "ok", r
        assert [o.text for o in r.outputs][0] == "'shown'"
        assert len(r.outputs) == 2 and r.outputs[1].png is not None and r.outputs[1].png.startswith(PNG_MAGIC)
        assert r.stdout == "before\nafter\n"
        assert r.files == {}        # shown, not saved to output/ as exec's chart hook does
        r = s.exec("fig, ax = plt.subplots()\nax.plot([2, 1])\nfig")
        assert r.png is not None and r.png.startswith(PNG_MAGIC) and r.outputs == ()
        r = s.exec("df.a.sum()")
        assert r.value == "3"


def test_a_cell_over_its_time_limit_is_interrupted_and_state_kept(client: Client) -> None:
    with Session("python", client=client) as s:
        s.exec("x = 41")
        r = s.exec("import time\nwhile True:\n    time.sleep(0.1)", timeout=1)
        assert r.status == "interrupted"
        assert r.exception is not None and r.exception.type == "KeyboardInterrupt"
        assert s.exec("x + 1").value == "42"


@pytest.mark.parametrize("language,setup,stuck,check", [
    ("bash", "X=7", "sleep 100", "echo $X"),
    ("javascript", "let kept = 7", "while (true) {}", "kept"),
])
def test_bash_and_javascript_cells_interrupted_at_their_limit(client: Client, language: str, setup: str,
                                                              stuck: str, check: str) -> None:
    with Session(language, client=client) as s:
        s.exec(setup)
        r = s.exec(stuck, timeout=1)
        assert r.status == "interrupted", r
        r = s.exec(check)
        assert (r.stdout if language == "bash" else r.value) == ("7\n" if language == "bash" else "7")


def test_a_stuck_cell_ends_the_session_and_the_next_call_says_why(client: Client) -> None:
    s = Session("python", client=client)
    try:
        r = s.exec("import re\nre.match(r'(a+)+b', 'a' * 64)", timeout=1)
        assert r.status == "session_ended"
        assert r.error is not None
        with pytest.raises(SessionEndedError) as err:
            s.exec("1")
        assert err.value.reason == "cell_timeout"
    finally:
        s.close()


def test_files_in_a_live_session(client: Client, tmp_path: Path) -> None:
    local = tmp_path / "local.bin"
    local.write_bytes(bytes(range(256)) * 100)
    with Session("python", client=client, files={"seed.txt": "seeded"}) as s:
        assert s.exec("open('seed.txt').read()").value == "'seeded'"
        info = s.write_file("data/in.csv", "a,b\n1,2\n")
        assert info.size == 8
        s.write_file("data/local.bin", local)
        assert s.exec("import pandas as pd\nint(pd.read_csv('data/in.csv').b.sum())").value == "2"
        s.exec("open('data/out.txt', 'w').write('made here')")
        assert s.read_file("data/out.txt") == b"made here"
        assert s.read_file("data/local.bin") == local.read_bytes()
        names = {e.path: e for e in s.list_files("data")}
        assert set(names) == {"data/in.csv", "data/local.bin", "data/out.txt"}
        assert names["data/local.bin"].size == 25600 and names["data/local.bin"].type == "file"
        assert "data" in {e.path for e in s.list_files()}
        with pytest.raises(SandboxRequestError) as err:
            s.read_file("../etc/passwd")
        assert err.value.status == 400
        with pytest.raises(SandboxRequestError):
            s.read_file("missing.txt")
        r = s.exec("import os\nos.makedirs('output', exist_ok=True)\nopen('output/r.txt', 'w').write('r')")
        assert r.files.get("output/r.txt") == b"r"


def test_bash_and_javascript_keep_their_state(client: Client) -> None:
    with Session("bash", client=client) as b:
        b.exec("cd /tmp && X=5 && f() { echo \"f$1\"; }")
        r = b.exec("f $X; pwd")
        assert r.stdout == "f5\n/tmp\n" and r.status == "ok"
        r = b.exec("false")
        assert r.status == "exception" and r.exception is not None and r.exception.type == "ExitStatus"
    with Session("javascript", client=client) as j:
        j.exec("let x = 41; function g() { return 'g'; }")
        assert j.exec("x + 1").value == "42"
        assert j.exec("const v = await Promise.resolve(3);\nv * 2").value == "6"
        assert j.exec("g() + v").value == "'g3'"


def test_a_streamed_cell(client: Client) -> None:
    out: List[str] = []
    shown: List[dict] = []
    with Session("python", client=client) as s:
        r = s.exec("import time\nfor i in range(3):\n    print(i, flush=True)\ndisplay(7)\n'end'",
                   on_stdout=out.append, on_display=shown.append)
        assert r.value == "'end'"
    assert "".join(out) == "0\n1\n2\n"
    assert shown == [{"text/plain": "7"}]


# 'in' is printed inside the try: once the client has it, the interrupt can only land
# where the handler catches it (printed before the try, a loaded machine could deliver
# it between the print and the try)
LOOP = ("try:\n    print('in', flush=True)\n    while True:\n        pass\n"
        "except KeyboardInterrupt:\n    cut = 'interrupted'\n    raise")


def test_interrupt_stops_the_running_cell_and_keeps_the_state(client: Client) -> None:
    with Session("python", client=client) as s:
        s.exec("x = 3")
        started = threading.Event()
        results: List[Any] = []
        cell = threading.Thread(target=lambda: results.append(
            s.exec(LOOP, timeout=30, on_stdout=lambda _text: started.set())))
        cell.start()
        assert started.wait(30)
        assert s.interrupt() is True
        cell.join(20)
        assert not cell.is_alive(), "the cell ran on after its interrupt"
        r = results[0]
        assert r.status == "interrupted" and r.error is not None and r.error.type == "cancelled", r
        assert r.exception is not None and r.exception.type == "KeyboardInterrupt"
        assert s.interrupt() is False      # nothing running
        assert s.exec("(x, cut)").value == "(3, 'interrupted')"


def test_async_interrupt(service_url: str) -> None:
    async def main() -> None:
        async with AsyncSession("python", url=service_url) as s:
            await s.exec("x = 4")
            started = asyncio.Event()
            cell = asyncio.ensure_future(s.exec(LOOP, timeout=30, on_stdout=lambda _text: started.set()))
            await asyncio.wait_for(started.wait(), 30)
            assert await s.interrupt() is True
            r = await asyncio.wait_for(cell, 20)
            assert r.status == "interrupted" and r.error is not None and r.error.type == "cancelled", r
            assert (await s.exec("(x, cut)")).value == "(4, 'interrupted')"

    asyncio.run(main())


def test_closed_sessions_raise(client: Client) -> None:
    s = Session("python", client=client)
    sid = s.id
    s.close()
    with pytest.raises(SessionEndedError):
        s.exec("1")
    other = Session("python", client=client)
    try:
        assert other.id != sid
    finally:
        other.close()


def test_async_session(service_url: str) -> None:
    async def main() -> None:
        async with AsyncSession("python", url=service_url) as s:
            await s.exec("x = 41")
            assert (await s.exec("x + 1")).value == "42"
            await s.write_file("a.txt", "A")
            assert await s.read_file("a.txt") == b"A"
        with pytest.raises(SessionEndedError):
            await s.exec("x")

    asyncio.run(main())


# What docs/session-driver.md says the host sees when a cell misbehaves: user code
# shares the Python driver's process, so it can reach the protocol's fds.
FIND_PROTO_FD = (
    "import os, stat\n"
    "def proto_fds():\n"
    "    out = []\n"
    "    for fd in range(3, 64):\n"
    "        try:\n"
    "            st = os.fstat(fd)\n"
    "        except OSError:\n"
    "            continue\n"
    "        if stat.S_ISFIFO(st.st_mode) and os.get_blocking(fd) and (os.O_WRONLY & __import__('fcntl').fcntl(fd, __import__('fcntl').F_GETFL)):\n"
    "            out.append(fd)\n"
    "    return out\n"
)


def test_a_cell_forging_an_over_long_protocol_line_ends_its_session_as_protocol(client: Client) -> None:
    s = Session("python", client=client)
    try:
        r = s.exec(FIND_PROTO_FD + "for fd in proto_fds():\n    os.write(fd, b'{' + b'x' * (5 << 20))\n")
        assert r.status == "session_ended", r
        with pytest.raises(SessionEndedError) as err:
            s.exec("1")
        assert err.value.reason == "protocol"
    finally:
        s.close()


def test_a_cell_closing_every_fd_ends_its_session_without_a_hang(client: Client) -> None:
    s = Session("python", client=client)
    try:
        r = s.exec("import os\nos.closerange(3, 1024)\nprint('gone')", timeout=5)
        assert r.status == "session_ended", r
        with pytest.raises(SessionEndedError) as err:
            s.exec("1")
        assert err.value.reason in ("crashed", "protocol")
    finally:
        s.close()
