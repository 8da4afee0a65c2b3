"""Files in and files out (issue 14), through the CLI (cold) and the service (warm).

In: `--file LOCAL[:PATH]` puts a file into the working directory (/home/sandbox) before
the program starts, owned by the sandbox user; every refused path (absolute, "..", a
collision, too many, too large) fails naming the field and the path.
Out: regular files under output/ and those matching --return globs come back in the
result's "files", in path order; no symlink is followed (a link to /etc/shadow returns
nothing of the host), special files are skipped, the budgets hold. A program the sandbox
ends (its output limit; still running after the time limit's SIGTERM) is frozen first, and
its files come back as they are then.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import tempfile

import pytest

from conftest import BIN, post_exec
from hxstest.canary import run_exec
from hxstest.output import wait_warm_ready


def files_of(res) -> dict:
    out = {}
    for f in res["files"]:
        assert set(f) == {"path", "size", "mime", "encoding", "content", "truncated"}, f
        data = f["content"].encode() if f["encoding"] == "utf-8" else base64.b64decode(f["content"])
        out[f["path"]] = (f, data)
    return out


@pytest.fixture
def tmp():
    with tempfile.TemporaryDirectory() as d:
        yield d


# ---- files in --------------------------------------------------------------------------------

def test_a_file_sent_is_in_the_working_directory(tmp) -> None:
    local = os.path.join(tmp, "sales.csv")
    with open(local, "w") as f:
        f.write("region,amount\nnorth,10\nsouth,32\n")
    code = ("import os, csv\nst = os.stat('data/sales.csv')\n"
            "print(os.getcwd(), st.st_uid, oct(st.st_mode & 0o777), oct(os.stat('data').st_mode & 0o777))\n"
            "print(sum(int(r['amount']) for r in csv.DictReader(open('data/sales.csv'))))\n")
    res = run_exec(code, "python", extra_args=["--file", local + ":data/sales.csv"])
    assert res.exit_code == 0, res.describe()
    assert res.stdout == "/home/sandbox 1000 0o644 0o755\n42\n", res.describe()


def test_a_large_file_arrives_whole(tmp) -> None:
    local = os.path.join(tmp, "blob.bin")
    data = os.urandom(20 << 20)
    with open(local, "wb") as f:
        f.write(data)
    code = "import hashlib; print(hashlib.sha256(open('blob.bin','rb').read()).hexdigest())"
    res = run_exec(code, "python", extra_args=["--file", local], settings={"SANDBOX_TMPFS_MB": "64"})
    assert res.exit_code == 0 and res.stdout.strip() == hashlib.sha256(data).hexdigest(), res.describe()


def cli_refusal(tmp, args, settings=None):
    p = subprocess.run([BIN, "exec", *args, "-c", "print(1)"], capture_output=True, timeout=60,
                       env=dict(os.environ, **(settings or {})))
    assert p.returncode == 125, p
    return p.stderr.decode()


@pytest.mark.parametrize("path,field,words", [
    ("/etc/passwd", "files[0].path", "must be relative"),
    ("../x.csv", "files[0].path", "must not contain .."),
    ("a/../../x", "files[0].path", "must not contain .."),
])
def test_bad_paths_are_refused_by_name(tmp, path, field, words) -> None:
    local = os.path.join(tmp, "f")
    open(local, "w").close()
    msg = cli_refusal(tmp, ["--file", local + ":" + path])
    assert field in msg and path in msg and words in msg, msg


def test_colliding_paths_are_refused(tmp) -> None:
    local = os.path.join(tmp, "f")
    open(local, "w").close()
    msg = cli_refusal(tmp, ["--file", local + ":d/x", "--file", local + ":d//x"])
    assert "files[1].path" in msg and "d/x" in msg and "twice" in msg, msg
    msg = cli_refusal(tmp, ["--file", local + ":d/x", "--file", local + ":d"])
    assert "files[0].path" in msg and "d/x" in msg, msg


def test_too_many_and_too_large_are_refused(tmp) -> None:
    local = os.path.join(tmp, "f")
    with open(local, "wb") as f:
        f.write(b"x" * 5000)
    msg = cli_refusal(tmp, ["--file", local + ":a", "--file", local + ":b", "--file", local + ":c"],
                      {"MAX_FILES": "2"})
    assert "files:" in msg and "MAX_FILES" in msg, msg
    msg = cli_refusal(tmp, ["--file", local + ":big.bin"], {"MAX_FILE_BYTES": "4096"})
    assert "files[0].path" in msg and "big.bin" in msg and "MAX_FILE_BYTES" in msg, msg
    msg = cli_refusal(tmp, ["--file", local + ":a", "--file", local + ":b"], {"MAX_FILES_BYTES": "8k"})
    assert "MAX_FILES_BYTES" in msg, msg


# ---- files out -------------------------------------------------------------------------------

def test_output_files_come_back_in_path_order() -> None:
    code = ("import os\nos.makedirs('output/sub', exist_ok=True)\n"
            "open('output/b.txt','w').write('bee\\n')\nopen('output/a.bin','wb').write(bytes(range(256)))\n"
            "open('output/sub/c.json','w').write('{}')\nopen('not-returned.txt','w').write('x')\nraise SystemExit(3)\n")
    res = run_exec(code, "python")
    assert res.exit_code == 3, res.describe()
    assert [f["path"] for f in res["files"]] == ["output/a.bin", "output/b.txt", "output/sub/c.json"], res.describe()
    got = files_of(res)
    assert got["output/a.bin"][1] == bytes(range(256)) and got["output/a.bin"][0]["encoding"] == "base64"
    assert got["output/b.txt"][1] == b"bee\n" and got["output/b.txt"][0]["encoding"] == "utf-8"
    assert got["output/b.txt"][0]["mime"] == "text/plain" and got["output/b.txt"][0]["size"] == 4
    assert got["output/sub/c.json"][0]["mime"] == "application/json"


def test_symlinks_and_special_files_return_nothing_of_the_host() -> None:
    code = ("import os\nos.makedirs('output', exist_ok=True)\n"
            "os.symlink('/etc/shadow', 'output/shadow')\nos.symlink('/etc', 'output/etc')\n"
            "os.symlink('/proc/1/root/etc/passwd', 'output/passwd')\n"
            "os.mkfifo('output/fifo')\nopen('output/real.txt','w').write('ok')\n")
    res = run_exec(code, "python", timeout=20)
    assert res.exit_code == 0, res.describe()
    assert [f["path"] for f in res["files"]] == ["output/real.txt"], res.describe()
    assert "root:" not in str(res["files"]), res.describe()


def test_output_itself_a_symlink_is_not_followed() -> None:
    res = run_exec("import os; os.symlink('/etc', 'output')", "python")
    assert res.exit_code == 0 and res["files"] == [], res.describe()


def test_return_globs() -> None:
    code = ("import os\nos.makedirs('deep/er', exist_ok=True)\nopen('result.csv','w').write('a,b\\n')\n"
            "open('deep/er/notes.txt','w').write('n')\nopen('skip.log','w').write('s')\n")
    res = run_exec(code, "python", extra_args=["--return", "*.csv", "--return", "**/*.txt"])
    assert [f["path"] for f in res["files"]] == ["deep/er/notes.txt", "result.csv"], res.describe()


def test_return_budgets() -> None:
    code = ("import os\nos.makedirs('output', exist_ok=True)\n"
            "for n in ('a', 'b', 'c'):\n    open('output/' + n, 'w').write(n * 3000)\n")
    res = run_exec(code, "python", settings={"MAX_RETURN_BYTES": "4k"})
    files = {f["path"]: f for f in res["files"]}
    assert files["output/a"]["truncated"] is False and len(files["output/a"]["content"]) > 0, res.describe()
    assert files["output/b"]["truncated"] is True and files["output/b"]["size"] == 3000, res.describe()
    assert files["output/b"]["content"] == "", res.describe()
    res = run_exec(code, "python", settings={"MAX_RETURN_FILES": "2"})
    assert [f["path"] for f in res["files"]] == ["output/a", "output/b"], res.describe()


KILLED_WITH_FILES = {
    # past MAX_STREAM_BYTES: killed for its output
    "output_limit": ("import os, sys\nos.makedirs('output')\nopen('output/partial.txt','w').write('before the kill')\n"
                     "sys.stdout.flush()\nwhile True: sys.stdout.write('x' * 65536)\n",
                     {"MAX_OUTPUT_BYTES": "4096", "MAX_STREAM_BYTES": "1M"}),
    # ignores SIGTERM, so it is still running 150 ms after it: killed at its time limit
    "timeout": ("import os, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nos.makedirs('output')\n"
                "open('output/partial.txt','w').write('before the kill')\nwhile True: time.sleep(0.01)\n", {}),
}


@pytest.mark.parametrize("end", sorted(KILLED_WITH_FILES))
def test_files_come_back_when_the_sandbox_kills_the_program(end: str) -> None:
    code, settings = KILLED_WITH_FILES[end]
    res = run_exec(code, "python", timeout=2, settings=settings)
    assert res.error is not None and res.error["type"] == end, res.describe()
    got = files_of(res)
    assert list(got) == ["output/partial.txt"], res.describe()
    assert got["output/partial.txt"][1] == b"before the kill", res.describe()


def test_cli_out_writes_the_returned_files(tmp) -> None:
    code = "import os\nos.makedirs('output/x', exist_ok=True)\nopen('output/x/y.txt','w').write('why')\n"
    p = subprocess.run([BIN, "exec", "--out", tmp, "-c", code], capture_output=True, timeout=60)
    assert p.returncode == 0, p
    with open(os.path.join(tmp, "output/x/y.txt")) as f:
        assert f.read() == "why"


def test_files_out_warm(service_url) -> None:
    wait_warm_ready(service_url)
    code = "import os\nos.makedirs('output', exist_ok=True)\nopen('output/w.txt','w').write('warm')\n"
    for _ in range(3):  # warm templates serve some of these once ready
        status, _, res = post_exec(service_url, {"code": code})
        assert status == 200, res
        assert [(f["path"], f["content"]) for f in res["files"]] == [("output/w.txt", "warm")], res
