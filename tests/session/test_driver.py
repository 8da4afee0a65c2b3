"""The session drivers (src/session/drivers/), run directly on the host as a subprocess:
every op and event of docs/session-driver.md, state across cells, values and bundles,
display order, exceptions, interrupts, output framing, and hostile cells. No sandbox is
needed here; the session suites run the same drivers as the sandbox user inside one."""
import base64
import json
import os
import pathlib
import signal
import subprocess
import threading
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DRIVER = ROOT / "src" / "session" / "drivers" / "driver.py"
PYTHON = "/usr/bin/python3"


def have_module(name):
    r = subprocess.run([PYTHON, "-c", "import " + name], capture_output=True)
    return r.returncode == 0


class Driver:
    """One driver process; events are read as they come (the host's way: a driver that
    writes a lot never blocks on us)."""

    def __init__(self, language, cwd, ignore_sigint=False):
        # a sandbox may start its program with SIGINT ignored (inherited through exec)
        pre = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_sigint else None
        self.p = subprocess.Popen([PYTHON, "-B", str(DRIVER), "--language", language],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, cwd=str(cwd), preexec_fn=pre)
        self.events = []
        self.cond = threading.Condition()
        self.eof = False
        self.raw_lines = []
        threading.Thread(target=self._read, daemon=True).start()
        self.ready = self.wait(lambda e: e.get("ev") == "ready", 30)
        self.n = 0

    def _read(self):
        for line in self.p.stdout:
            self.raw_lines.append(line)
            ev = json.loads(line)
            with self.cond:
                self.events.append(ev)
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def send(self, **cmd):
        self.p.stdin.write((json.dumps(cmd) + "\n").encode())
        self.p.stdin.flush()

    def wait(self, pred, timeout=30):
        end = time.monotonic() + timeout
        with self.cond:
            while True:
                for e in self.events:
                    if pred(e):
                        return e
                if self.eof:
                    raise EOFError("driver ended: %r" % self.p.stderr.read()[-2000:])
                left = end - time.monotonic()
                assert left > 0, "no such event in %r" % self.events[-10:]
                self.cond.wait(left)

    def of(self, id_):
        with self.cond:
            return [e for e in self.events if e.get("id") == id_]

    def done(self, id_, timeout=30):
        return self.wait(lambda e: e.get("ev") == "done" and e.get("id") == id_, timeout)

    def cell(self, code, timeout=30):
        self.n += 1
        cid = "c%d" % self.n
        self.send(op="exec", id=cid, code=code, timeout_ms=30000)
        d = self.done(cid, timeout)
        d["events"] = self.of(cid)
        d["stdout"] = "".join(e.get("text", "") for e in d["events"] if e["ev"] == "stdout")
        d["stderr"] = "".join(e.get("text", "") for e in d["events"] if e["ev"] == "stderr")
        d["displays"] = [e["data"] for e in d["events"] if e["ev"] == "display"]
        return d

    def op(self, op, **kw):
        self.n += 1
        fid = "f%d" % self.n
        self.send(op=op, id=fid, **kw)
        d = self.done(fid)
        return d, [e for e in self.of(fid) if e["ev"] != "done"]

    def _tree(self):
        """The driver's descendants, from /proc."""
        seen, todo = [], [self.p.pid]
        while todo:
            pid = todo.pop()
            kids = []
            try:
                for tid in os.listdir("/proc/%d/task" % pid):
                    with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                        kids += [int(x) for x in f.read().split()]
            except (OSError, ValueError):
                pass
            seen += kids
            todo += kids
        return seen

    def close(self):
        if self.p.poll() is None:
            try:
                self.send(op="shutdown")
                self.p.stdin.close()
            except (BrokenPipeError, OSError):
                pass
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                # a cell that never ends: bash or node run in a session of their own
                # (no sandbox's PID namespace ends them here), so the whole tree goes
                tree = self._tree()
                self.p.kill()
                self.p.wait()
                for pid in tree:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
        self.p.stdout.close()
        self.p.stderr.close()


@pytest.fixture
def start(tmp_path):
    drivers = []

    def make(language, **kw):
        d = Driver(language, tmp_path, **kw)
        drivers.append(d)
        return d

    yield make
    for d in drivers:
        d.close()


@pytest.fixture
def py(start):
    return start("python")


# ---------------------------------------------------------------- python

def test_ready_first_with_language_and_version(py):
    assert py.events[0] == {"ev": "ready", "language": "python", "version": py.ready["version"]}
    assert py.ready["version"].startswith("3.")


def test_python_state_persists_and_last_expression_is_the_value(py):
    assert py.cell("x = 41")["value"] is None
    r = py.cell("x + 1")
    assert r["status"] == "ok" and r["value"] == {"text/plain": "42"} and r["exception"] is None
    assert py.cell("import math\ndef f(a):\n    return a * 2")["status"] == "ok"
    assert py.cell("f(math.floor(2.5))")["value"]["text/plain"] == "4"
    assert py.cell("__name__")["value"]["text/plain"] == "'__main__'"
    assert py.cell("x;")["value"] is None   # a trailing ';' hides the value, as in Jupyter


def test_python_classes_pickle_through_main(py):
    assert py.cell("import pickle\nclass P:\n    v = 3\npickle.loads(pickle.dumps(P())).v")["value"]["text/plain"] == "3"


def test_python_rich_values(py):
    r = py.cell("class R:\n    def _repr_html_(self): return '<b>r</b>'\n"
                "    def _repr_json_(self): return {'k': [1, 2]}\n"
                "    def _repr_png_(self): return b'\\x89PNG'\n"
                "    def __repr__(self): return 'R()'\nR()")
    assert r["value"]["text/plain"] == "R()"
    assert r["value"]["text/html"] == "<b>r</b>"
    assert r["value"]["application/json"] == {"k": [1, 2]}
    assert base64.b64decode(r["value"]["image/png"]) == b"\x89PNG"


def test_python_display_in_order_with_prints(py):
    r = py.cell("print('a')\ndisplay(1, 'two')\nprint('b')\ndisplay({'c': 3})\n'end'")
    evs = [(e["ev"], e.get("text") or e.get("data", {}).get("text/plain")) for e in r["events"] if e["ev"] != "done"]
    assert evs == [("stdout", "a\n"), ("display", "1"), ("display", "'two'"), ("stdout", "b\n"),
                   ("display", "{'c': 3}")]
    assert r["value"]["text/plain"] == "'end'"
    assert r["events"][-1]["ev"] == "done"


def test_python_ipython_display_without_ipython(py):
    r = py.cell("from IPython.display import display, HTML\ndisplay(HTML('<i>x</i>'))")
    assert r["status"] == "ok", r
    assert r["displays"][0]["text/html"] == "<i>x</i>"


def test_python_exception_without_driver_frames(py):
    r = py.cell("def g():\n    return 1 / 0\ng()")
    assert r["status"] == "exception" and r["value"] is None
    exc = r["exception"]
    assert exc["type"] == "ZeroDivisionError" and exc["message"] == "division by zero"
    assert "driver.py" not in exc["traceback"]
    assert "return 1 / 0" in exc["traceback"] and "<cell-1>" in exc["traceback"]
    assert py.cell("1 + 1")["value"]["text/plain"] == "2"


def test_python_syntax_error_and_system_exit(py):
    r = py.cell("def (:")
    assert r["status"] == "exception" and r["exception"]["type"] == "SyntaxError"
    assert "driver.py" not in r["exception"]["traceback"]
    r = py.cell("import sys; sys.exit(3)")
    assert r["exception"]["type"] == "SystemExit"
    assert py.cell("'alive'")["value"]["text/plain"] == "'alive'"


def test_python_top_level_await(py):
    r = py.cell("import asyncio\nawait asyncio.sleep(0.01)\n6 * 7")
    assert r["status"] == "ok" and r["value"]["text/plain"] == "42"
    # one loop for the session: a queue made in one cell works in the next
    py.cell("q = asyncio.Queue()\nawait q.put(5)")
    assert py.cell("await q.get()")["value"]["text/plain"] == "5"


def test_python_stdin_is_dev_null(py):
    r = py.cell("import sys\nsys.stdin.read()")
    assert r["value"]["text/plain"] == "''"


def test_python_interrupt_keeps_state(py):
    py.cell("x = 41")
    py.send(op="exec", id="slow", code="import time\nprint('in', flush=True)\nfor i in range(1000):\n"
                                        "    time.sleep(0.05)\n")
    py.wait(lambda e: e.get("ev") == "stdout" and e.get("id") == "slow", 30)   # its code runs
    py.send(op="interrupt", id="slow")
    d = py.done("slow", 30)
    assert d["status"] == "interrupted" and d["exception"]["type"] == "KeyboardInterrupt"
    # the cell's frame is there, the driver's SIGINT handler that raised it is not
    tb = d["exception"]["traceback"]
    assert 'File "<cell-2>", line ' in tb, tb     # wherever in the cell it landed
    assert "driver.py" not in tb and "on_sigint" not in tb, tb
    assert py.cell("x + 1")["value"]["text/plain"] == "42"


def test_python_interrupt_stops_a_blocking_sleep_and_a_busy_loop(py):
    py.send(op="exec", id="s1", code="import time\ntime.sleep(100)")
    time.sleep(0.5)
    t = time.monotonic()
    py.send(op="interrupt", id="s1")
    assert py.done("s1", 30)["status"] == "interrupted"
    assert time.monotonic() - t < 30   # not the 100 s it would sleep
    py.send(op="exec", id="s2", code="while True:\n    pass")
    time.sleep(0.5)
    py.send(op="interrupt", id="s2")
    assert py.done("s2", 30)["status"] == "interrupted"


def test_python_interrupt_stops_what_the_cell_started_and_spares_earlier_children(py):
    py.cell("import subprocess\nserver = subprocess.Popen(['sleep', '300'])")
    py.send(op="exec", id="s1", code="import os\nos.system('sleep 100')\nprint('not reached')")
    time.sleep(0.7)
    t = time.monotonic()
    py.send(op="interrupt", id="s1")
    d = py.done("s1", 30)
    assert d["status"] == "interrupted" and time.monotonic() - t < 30   # not the 100 s it would sleep
    assert "not reached" not in "".join(e.get("text", "") for e in py.of("s1"))
    py.send(op="exec", id="s2", code="import subprocess\nsubprocess.run(['sh', '-c', 'sleep 100; echo x'])")
    time.sleep(0.7)
    py.send(op="interrupt", id="s2")
    assert py.done("s2", 30)["status"] == "interrupted"
    assert py.cell("server.poll()")["value"] is None        # still running
    py.cell("server.kill(); server.wait()")


@pytest.mark.parametrize("wait", ["time.sleep(100)", "while True:\n        pass"])
def test_python_interrupt_is_raised_once(py, wait):
    py.send(op="exec", id="s", code="import time\ncaught = 0\ntry:\n    print('in', flush=True)\n    %s\n"
                                   "except KeyboardInterrupt:\n    caught += 1\n    for i in range(3000000):\n"
                                   "        pass\ncaught" % wait)
    py.wait(lambda e: e.get("ev") == "stdout" and e.get("id") == "s", 30)     # inside the try
    py.send(op="interrupt", id="s")
    d = py.done("s", 30)
    assert d["status"] == "ok" and d["value"]["text/plain"] == "1", d


def test_python_interrupt_survives_a_cell_that_ignores_sigint(py):
    py.cell("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)")
    py.send(op="exec", id="s1", code="import time\ntime.sleep(100)")
    time.sleep(0.5)
    py.send(op="interrupt", id="s1")
    assert py.done("s1", 30)["status"] == "interrupted"


def test_a_forked_child_ends_with_the_cell(py):
    r = py.cell("import os\npid = os.fork()\nif pid == 0:\n    print('child')\nelse:\n    os.waitpid(pid, 0)\n"
                "'parent'")
    assert r["value"]["text/plain"] == "'parent'"
    time.sleep(0.3)
    assert len([e for e in py.events if e["ev"] == "done" and e["id"] == r["id"]]) == 1
    assert py.cell("1")["value"]["text/plain"] == "1"


def test_a_big_put_is_linear(py, tmp_path):
    data = os.urandom(48 << 20)
    t = time.monotonic()
    d, _ = py.op("put", path="big.bin", base64=base64.b64encode(data).decode())
    assert d["status"] == "ok" and (tmp_path / "big.bin").read_bytes() == data
    assert time.monotonic() - t < 60   # quadratic reading took minutes


def test_interrupt_between_cells_is_harmless(py):
    py.send(op="interrupt", id="nothing")
    time.sleep(0.2)
    assert py.cell("1")["value"]["text/plain"] == "1"


@pytest.mark.parametrize("language, first, loop, after", [
    ("python", "import time\ntime.sleep(0.5)\nx = 5", "while True:\n    pass", "x"),
    ("bash", "sleep 0.5; x=5", "while :; do :; done", "echo $x"),
    ("javascript", "var x = 5; await new Promise(r => setTimeout(r, 500))", "for (;;) {}", "x"),
])
def test_a_cell_interrupted_before_it_began_never_runs(start, language, first, loop, after):
    # the engine may interrupt a cell it has sent before the driver takes it up (its
    # caller left at once): the interrupt must not be lost, or the loop runs on
    d = start(language)
    d.send(op="exec", id="a", code=first, timeout_ms=30000)
    d.send(op="exec", id="b", code=loop, timeout_ms=30000)
    d.send(op="interrupt", id="b")
    assert d.done("a", 30)["status"] == "ok"
    r = d.done("b", 30)
    assert r["status"] == "interrupted" and r["exception"]["type"] == "KeyboardInterrupt", r
    assert [e["ev"] for e in d.of("b")] == ["done"]
    r = d.cell(after)
    assert r["status"] == "ok" and ("5" in r["stdout"] or r["value"]["text/plain"] == "5"), r


def test_raw_fd_writes_and_children_are_framed(py):
    r = py.cell("import os, subprocess\nos.write(1, b'raw1\\n')\nos.write(2, b'raw2\\n')\n"
                "subprocess.run(['sh', '-c', 'echo child; echo childerr >&2'])\nNone")
    assert "raw1\n" in r["stdout"] and "child\n" in r["stdout"]
    assert "raw2\n" in r["stderr"] and "childerr\n" in r["stderr"]


def test_binary_output_as_base64(py):
    r = py.cell("import os\nos.write(1, bytes(range(256)))\nNone")
    got = b"".join(base64.b64decode(e["base64"]) if "base64" in e else e["text"].encode()
                   for e in r["events"] if e["ev"] == "stdout")
    assert got == bytes(range(256))
    assert any("base64" in e for e in r["events"] if e["ev"] == "stdout")


def test_utf8_cut_by_reads_stays_text(py):
    r = py.cell("import sys\nfor i in range(20000):\n    sys.stdout.write('é€😀')\nNone")
    evs = [e for e in r["events"] if e["ev"] == "stdout"]
    assert all("text" in e for e in evs)
    assert "".join(e["text"] for e in evs) == "é€😀" * 20000


def test_huge_output_does_not_deadlock(py):
    r = py.cell("import sys\nfor i in range(200000):\n    print('x' * 99)\n"
                "import os\nos.write(2, b'e' * (8 << 20))\n'done'", timeout=120)
    assert r["value"]["text/plain"] == "'done'"
    assert len(r["stdout"]) == 200000 * 100
    assert len(r["stderr"]) == 8 << 20
    assert max(len(line) for line in py.raw_lines) < 1 << 20


def test_cell_closing_fd_1_and_2(py):
    r = py.cell("import os\nos.close(1)\nos.close(2)\n'still'")
    assert r["value"]["text/plain"] == "'still'"
    r = py.cell("print('lost')\n5")
    assert r["value"]["text/plain"] == "5"


def test_forged_protocol_line_is_only_output(py):
    forged = json.dumps({"ev": "done", "id": "c1", "status": "ok", "value": {"text/plain": "forged"}})
    r = py.cell("print(%r)\n'real'" % forged)
    assert r["value"]["text/plain"] == "'real'"
    assert forged in r["stdout"]


def test_cell_writing_to_the_protocol_fd_ends_no_worse_than_its_own_session(py):
    # user code shares the driver's process: it can find the protocol's fd and write to it.
    # The host must treat whatever arrives as hostile; here we only check the driver
    # itself goes on answering.
    code = ("import os\nfor fd in range(3, 64):\n    try:\n        t = os.readlink('/proc/self/fd/%d' % fd)\n"
            "    except OSError:\n        continue\n")
    r = py.cell(code + "'ok'")
    assert r["value"]["text/plain"] == "'ok'"


def test_events_are_strict_json(py):
    py.cell("print('\\x00nul')\nclass Q:\n    def __repr__(self): return '\\ud800x\\x00'\nQ()")
    py.cell("class J:\n    def _repr_json_(self): return {'n': float('nan')}\nJ()")
    py.cell("import sys\nsys.stderr.write('partial line without newline')\nNone")
    for line in py.raw_lines:
        s = line.decode("utf-8")       # strict: fails on a lone surrogate's bytes
        assert "\\u0000" not in s
        json.loads(s, parse_constant=lambda c: pytest.fail("non-JSON constant %s" % c))


@pytest.mark.skipif(not have_module("pandas"), reason="pandas is not installed for /usr/bin/python3")
def test_pandas_dataframe_html(py):
    r = py.cell("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2], 'b': [3, 4]})\ndf")
    assert r["status"] == "ok", r
    assert "<table" in r["value"]["text/html"]
    assert "a  b" in r["value"]["text/plain"]
    r = py.cell("df.a.sum()")
    assert r["value"]["text/plain"] == "3"


@pytest.mark.skipif(not have_module("matplotlib"), reason="matplotlib is not installed for /usr/bin/python3")
def test_matplotlib_show_open_figures_and_figure_values(py, tmp_path):
    r = py.cell("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nprint('before')\nplt.show()\nprint('after')")
    assert r["status"] == "ok", r
    kinds = [e["ev"] for e in r["events"]]
    assert kinds == ["stdout", "display", "stdout", "done"], kinds
    assert base64.b64decode(r["displays"][0]["image/png"])[:4] == b"\x89PNG"
    r = py.cell("plt.figure()\nplt.plot([3, 1])\nNone")     # left open: shown at the end
    assert len(r["displays"]) == 1 and "image/png" in r["displays"][0]
    r = py.cell("fig, ax = plt.subplots()\nax.plot([1, 5])\nfig")   # the value, not twice
    assert base64.b64decode(r["value"]["image/png"])[:4] == b"\x89PNG"
    assert r["displays"] == []
    assert py.cell("len(plt.get_fignums())")["value"]["text/plain"] == "0"
    assert not (tmp_path / "output").exists()    # nothing saved as exec's charts hook does


# ---------------------------------------------------------------- files

def test_put_get_list(py, tmp_path):
    d, _ = py.op("put", path="a//./b.csv", base64=base64.b64encode(b"x,y\n1,2\n").decode())
    assert d["status"] == "ok" and d["path"] == "a/b.csv" and d["size"] == 8
    assert (tmp_path / "a" / "b.csv").read_bytes() == b"x,y\n1,2\n"
    d, evs = py.op("get", path="a/b.csv", max_bytes=1000)
    assert d["status"] == "ok"
    assert evs == [{"ev": "file", "id": d["id"], "path": "a/b.csv", "size": 8, "offset": 0,
                    "base64": base64.b64encode(b"x,y\n1,2\n").decode(), "truncated": False}]
    d, evs = py.op("get", path="a/b.csv", max_bytes=3, offset=2)
    assert base64.b64decode(evs[0]["base64"]) == b"y\n1" and evs[0]["truncated"] is True
    (tmp_path / "z.txt").write_text("zz")
    d, evs = py.op("list", path="")
    assert [(e["path"], e["type"], e["size"]) for e in evs] == [("a", "dir", 0), ("z.txt", "file", 2)]
    d, evs = py.op("list", path="a")
    assert [e["path"] for e in evs] == ["a/b.csv"]
    d, evs = py.op("list", path="", max_entries=1)
    assert len(evs) == 1 and d["truncated"] is True


def test_files_seen_by_the_cell_and_relative_to_the_start_dir(py, tmp_path):
    py.op("put", path="data.txt", base64=base64.b64encode(b"hello").decode())
    assert py.cell("open('data.txt').read()")["value"]["text/plain"] == "'hello'"
    py.cell("import os\nos.makedirs('sub', exist_ok=True)\nos.chdir('sub')\nopen('made.txt', 'w').write('m')")
    d, evs = py.op("get", path="sub/made.txt")
    assert base64.b64decode(evs[0]["base64"]) == b"m"
    d, _ = py.op("put", path="later.txt", base64="")
    assert (tmp_path / "later.txt").exists()


@pytest.mark.parametrize("path,type_", [
    ("/etc/passwd", "InvalidPath"), ("../x", "InvalidPath"), ("a/../../x", "InvalidPath"),
    ("", "InvalidPath"), ("./", "InvalidPath"), ("a\nb", "InvalidPath"), ("x" * 256, "InvalidPath"),
    ("missing.txt", "FileNotFoundError"),
])
def test_bad_paths(py, path, type_):
    d, evs = py.op("get", path=path)
    assert d["status"] == "error" and d["error"]["type"] == type_, d
    assert evs == []


def test_symlinks_are_not_followed(py, tmp_path):
    secret = tmp_path.parent / ("secret-" + tmp_path.name)
    secret.write_text("secret")
    try:
        (tmp_path / "link").symlink_to(secret)
        (tmp_path / "dirlink").symlink_to(tmp_path.parent)
        for p in ("link", "dirlink/" + secret.name):
            d, evs = py.op("get", path=p)
            assert d["status"] == "error" and evs == [], d
        d, _ = py.op("put", path="link", base64=base64.b64encode(b"over").decode())
        assert d["status"] == "error"
        d, _ = py.op("put", path="dirlink/new", base64="")
        assert d["status"] == "error"
        assert secret.read_text() == "secret"
        assert not (tmp_path.parent / "new").exists()
        d, evs = py.op("list", path="")
        assert {e["path"]: e["type"] for e in evs}["link"] == "other"
    finally:
        secret.unlink()


def test_special_files_are_skipped(py, tmp_path):
    os.mkfifo(tmp_path / "fifo")
    d, evs = py.op("get", path="fifo")
    assert d["status"] == "error" and d["error"]["type"] == "NotARegularFile"


def test_collect_output_and_globs(py, tmp_path):
    (tmp_path / "output" / "deep").mkdir(parents=True)
    (tmp_path / "output" / "a.txt").write_text("a")
    (tmp_path / "output" / "deep" / "b.txt").write_text("bb")
    (tmp_path / "r.csv").write_text("1,2")
    (tmp_path / "s" / "t").mkdir(parents=True)
    (tmp_path / "s" / "t" / "u.csv").write_text("u")
    (tmp_path / ".hidden.csv").write_text("h")
    (tmp_path / "output" / "link.txt").symlink_to(tmp_path / "r.csv")
    os.mkfifo(tmp_path / "output" / "fifo")
    d, evs = py.op("collect", globs=[], max_files=10, max_bytes=1000)
    assert [e["path"] for e in evs] == ["output/a.txt", "output/deep/b.txt"]
    d, evs = py.op("collect", globs=["*.csv", "s/**"], max_files=10, max_bytes=1000)
    assert [e["path"] for e in evs] == ["output/a.txt", "output/deep/b.txt", "r.csv", "s/t/u.csv"]
    assert base64.b64decode(evs[2]["base64"]) == b"1,2"
    d, evs = py.op("collect", globs=["*.csv"], max_files=2, max_bytes=1000)
    assert len(evs) == 2
    d, evs = py.op("collect", globs=[], max_files=10, max_bytes=1)
    assert evs[0]["truncated"] is False and evs[1]["truncated"] is True and "base64" not in evs[1]


def test_bad_commands(py):
    py.send(op="nope", id="z1")
    assert py.done("z1")["error"]["type"] == "ProtocolError"
    py.p.stdin.write(b"not json\n")
    py.p.stdin.flush()
    py.wait(lambda e: e.get("ev") == "done" and e.get("id") is None)
    assert py.cell("1")["value"]["text/plain"] == "1"


def test_shutdown_and_eof_end_the_driver(start):
    d = start("python")
    d.send(op="shutdown")
    assert d.p.wait(timeout=10) == 0
    d = start("bash")
    d.p.stdin.close()
    assert d.p.wait(timeout=10) == 0


# ---------------------------------------------------------------- bash

def test_bash_state_status_and_exit(start, tmp_path):
    b = start("bash")
    assert b.ready["language"] == "bash" and b.ready["version"].startswith("5")
    r = b.cell("x=5\nf() { echo \"f$1\"; }\nmkdir -p d && cd d")
    assert r["status"] == "ok" and r["value"] is None and r["exit_status"] == 0
    r = b.cell("f $x; pwd")
    assert r["stdout"] == "f5\n%s\n" % (tmp_path / "d")
    r = b.cell("echo err >&2; false")
    assert r["status"] == "exception" and r["exception"]["type"] == "ExitStatus"
    assert r["exit_status"] == 1 and r["stderr"] == "err\n"
    r = b.cell("cat")          # stdin is /dev/null: does not wait, nor eat commands
    assert r["status"] == "ok"
    r = b.cell("exit 3")
    assert r["exception"]["type"] == "ProcessExited" and "exit status 3" in r["exception"]["message"]
    assert b.cell("echo ${x:-gone}")["stdout"] == "gone\n"


def test_bash_interrupt_keeps_state(start):
    b = start("bash")
    b.cell("x=7")
    b.send(op="exec", id="s", code="echo start; sleep 100; echo after")
    b.wait(lambda e: e.get("ev") == "stdout" and e.get("id") == "s", 30)
    t = time.monotonic()
    b.send(op="interrupt", id="s")
    d = b.done("s", 30)
    assert time.monotonic() - t < 30   # not the 100 s it would sleep
    assert d["status"] == "interrupted"
    assert "after" not in "".join(e.get("text", "") for e in b.of("s"))
    b.send(op="exec", id="s2", code="while :; do :; done")
    time.sleep(0.5)
    b.send(op="interrupt", id="s2")
    assert b.done("s2", 30)["status"] == "interrupted"
    assert b.cell("echo $x")["stdout"] == "7\n"


def test_bash_interrupt_reaches_a_command_that_missed_the_first(start):
    """A SIGINT can reach bash's foreground command before it is ready for it (between
    its fork and its exec, where bash's own handler takes it): here a command that
    ignores SIGINT for its first second. The interrupt is sent again while the cell
    runs, so the cell still ends long before its command would, and bash keeps its
    state."""
    b = start("bash")
    b.cell("x=7")
    code = ("echo start\n/usr/bin/python3 -c 'import signal, time\n"
            "signal.signal(signal.SIGINT, signal.SIG_IGN)\nprint(\"armed\", flush=True)\n"
            "time.sleep(1)\nsignal.signal(signal.SIGINT, signal.SIG_DFL)\ntime.sleep(100)'\necho after\n")
    b.send(op="exec", id="s", code=code)
    b.wait(lambda e: e.get("ev") == "stdout" and e.get("id") == "s" and "armed" in e.get("text", ""), 30)
    t = time.monotonic()
    b.send(op="interrupt", id="s")
    d = b.done("s", 30)
    assert time.monotonic() - t < 30   # not the 100 s its command would sleep
    assert d["status"] == "interrupted", d
    assert "after" not in "".join(e.get("text", "") for e in b.of("s"))
    assert b.cell("echo $x")["stdout"] == "7\n"


def test_bash_cell_redirecting_its_output_does_not_silence_the_next(start):
    b = start("bash")
    r = b.cell("exec >/dev/null 2>&1\necho hidden")
    assert r["stdout"] == ""
    r = b.cell("echo visible; echo err >&2")
    assert r["stdout"] == "visible\n" and r["stderr"] == "err\n"


def test_exit_with_a_background_job_holding_the_pipes(start):
    b = start("bash")
    r = b.cell("sleep 30 &\nexit 2", timeout=15)
    assert r["exception"]["type"] == "ProcessExited"
    assert b.cell("echo again")["stdout"] == "again\n"


def test_bash_builtins_redefined_by_the_cell(start):
    b = start("bash")
    b.cell("printf() { :; }\nsource() { :; }\nread() { :; }")
    assert b.cell("echo ok")["stdout"] == "ok\n"


# ---------------------------------------------------------------- javascript

def test_javascript_state_values_and_errors(start):
    j = start("javascript")
    assert j.ready["language"] == "javascript"
    r = j.cell("let x = 41; const f = (a) => a * 2; function g() { return 'g'; }\nconsole.log('hi')")
    assert r["status"] == "ok" and r["stdout"] == "hi\n"
    assert j.cell("x + 1")["value"]["text/plain"] == "42"
    assert j.cell("f(x) + g()")["value"]["text/plain"] == "'82g'"
    assert j.cell("require('path').basename('/a/b.js')")["value"]["text/plain"] == "'b.js'"
    r = j.cell("({a: [1, 2]})")
    assert r["value"]["application/json"] == {"a": [1, 2]}
    r = j.cell("function h() { null.p }\nh()")
    exc = r["exception"]
    assert r["status"] == "exception" and exc["type"] == "TypeError"
    assert "driver.js" not in exc["traceback"] and "cell-" in exc["traceback"]
    assert j.cell("x")["value"]["text/plain"] == "41"


def test_javascript_top_level_await(start):
    j = start("javascript")
    r = j.cell("const r = await new Promise((ok) => setTimeout(() => ok(7), 10));\nr * 2")
    assert r["status"] == "ok" and r["value"]["text/plain"] == "14"
    assert j.cell("r + 1")["value"]["text/plain"] == "8"
    r = j.cell("await Promise.reject(new RangeError('no'))")
    assert r["exception"]["type"] == "RangeError"


def test_javascript_interrupt_keeps_state(start):
    j = start("javascript")
    j.cell("let kept = 'yes'")
    j.send(op="exec", id="s", code="while (true) {}")
    time.sleep(0.5)
    j.send(op="interrupt", id="s")
    assert j.done("s", 30)["status"] == "interrupted"
    j.send(op="exec", id="s2", code="await new Promise(() => {})")
    time.sleep(0.5)
    j.send(op="interrupt", id="s2")
    assert j.done("s2", 30)["status"] == "interrupted"
    j.send(op="exec", id="s3", code="require('child_process').execSync('sleep 100')")
    time.sleep(0.5)
    j.send(op="interrupt", id="s3")
    assert j.done("s3", 30)["status"] == "interrupted"
    assert j.cell("kept")["value"]["text/plain"] == "'yes'"


def test_javascript_interrupt_spares_what_earlier_cells_started(start):
    j = start("javascript")
    j.cell("const srv = require('child_process').spawn('sleep', ['300'])")
    j.send(op="exec", id="s", code="require('child_process').execSync('sleep 100')")
    time.sleep(0.7)
    j.send(op="interrupt", id="s")
    assert j.done("s", 30)["status"] == "interrupted"
    assert j.cell("[srv.exitCode, srv.signalCode]")["value"]["text/plain"] == "[ null, null ]"
    j.cell("srv.kill('SIGKILL')")


def test_javascript_process_exit_restarts(start):
    j = start("javascript")
    r = j.cell("process.exit(4)")
    assert r["exception"]["type"] == "ProcessExited"
    assert j.cell("1 + 1")["value"]["text/plain"] == "2"


@pytest.mark.parametrize("language,code", [
    ("python", "import time\ntime.sleep(100)"), ("bash", "sleep 100"),
    ("javascript", "while (true) {}"),
])
def test_interrupt_when_started_with_sigint_ignored(start, language, code):
    d = start(language, ignore_sigint=True)
    d.send(op="exec", id="s", code=code)
    time.sleep(0.7)
    d.send(op="interrupt", id="s")
    assert d.done("s", 30)["status"] == "interrupted"
    assert d.cell("1" if language != "bash" else "true")["status"] == "ok"


@pytest.mark.parametrize("language,code", [
    ("bash", "yes abcdefghij | head -c 5000000; echo; echo tail"),
    ("javascript", "process.stdout.write('abcdefghij\\n'.repeat(500000)); console.log('tail')"),
])
def test_huge_output_of_children_is_all_there_before_done(start, language, code):
    d = start(language)
    r = d.cell(code, timeout=120)
    assert r["status"] == "ok", r
    assert r["stdout"].endswith("tail\n") and len(r["stdout"]) > 5000000
