# SPDX-License-Identifier: Apache-2.0
"""The guest agent in the real image, booted under QEMU with TCG (no KVM needed).

Each test boots one VM (a VM runs one execution, then powers itself off), speaks the
protocol to the agent through vmharness (an implementation of src/proto/proto.h
independent of the C host driver), and checks what came back and that the VM then
exited on its own. The image comes from the ctest fixture vm_image (HXS_VM_IMAGE).
No test asserts a time; timeouts only detect hangs."""

import base64
import os
import re
import signal
import struct
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import manifest  # noqa: E402
import vmharness as h  # noqa: E402

IMAGE = os.environ.get("HXS_VM_IMAGE", "")


def runtime_modules():
    """The import names of scripts/runtimes.txt: what the image must let a program import."""
    return [r[3] for r in manifest.rows() if r[3]]


@pytest.fixture
def vm():
    assert IMAGE and os.path.isfile(os.path.join(IMAGE, "manifest.json")), \
        "HXS_VM_IMAGE must name a built image (ctest runs the vm_image fixture first)"
    machine = h.VM(IMAGE)
    yield machine
    machine.close()


def powered_off(machine):
    """After EXIT or ERROR the agent powers the VM off: QEMU (-no-reboot) exits 0."""
    return machine.wait_exit(120) == 0


CANARY = r"""
import os, socket, sys
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
print("uid", os.getuid(), os.getgid(), os.geteuid())
print("caps", status["CapEff"].strip(), status["CapPrm"].strip(), status["CapBnd"].strip())
print("nnp", status["NoNewPrivs"].strip(), "seccomp", status["Seccomp"].strip())
print("ifaces", ",".join(sorted(n for _, n in socket.if_nameindex())))
print("host", socket.gethostname(), "cwd", os.getcwd(), "home", os.environ.get("HOME"))
print("env", os.environ.get("HXS_TEST"), "path", os.environ.get("PATH"))
print("stdin", sys.stdin.read())
print("code", open(__file__).read() == open("/code/main.py").read(), __file__)
for path in ("/hexr-probe", "/usr/hexr-probe", "/etc/passwd", "/code/main.py"):
    try:
        open(path, "w")
        print("writable", path)
    except OSError as e:
        print("denied", path, e.errno)
root_opts = [l.split()[5] for l in open("/proc/self/mountinfo") if l.split()[4] == "/"][-1]
print("rootflags", "ro" if "ro" in root_opts.split(",") else "rw", root_opts)
open("/tmp/x", "w").write("t")
open(os.path.expanduser("~/y"), "w").write("h")
print("scratch ok")
print("user", open("/etc/passwd").read().count("sandbox:x:1000:1000"))
import numpy, pandas
print("pandas", pandas.DataFrame({"a": numpy.arange(4)})["a"].sum())
import importlib
for m in MODULES:
    importlib.import_module(m)
print("imported", len(MODULES))
import matplotlib, matplotlib.pyplot as plt
plt.plot([1, 2])
plt.savefig("x.png")
png = open("x.png", "rb").read()
print("png", png[:8].hex(), len(png) > 1000, matplotlib.get_backend(), matplotlib.matplotlib_fname())
print("to stderr", file=sys.stderr)
sys.exit(3)
"""


def test_python_run_isolation_and_exit_status(vm):
    """Also, in the same boot (each boot costs seconds under TCG): every Python package
    of the runtime manifest imports, and matplotlib saves a PNG with the environment
    the engine gives (MPLBACKEND) and the image's /etc/matplotlibrc. Importing them all
    under TCG takes tens of seconds: a longer time limit, and the memory it needs."""
    assert vm.hello().startswith("hexr-agent ")
    mods = runtime_modules()
    assert {"matplotlib", "seaborn", "sklearn", "statsmodels", "PIL", "bs4"} <= set(mods)
    vm.start("MODULES = %r\n" % mods + CANARY, stdin=b"from the host", timeout_ms=600000, memory_mb=400,
             env=["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/sandbox", "LANG=C.UTF-8",
                  "MPLBACKEND=Agg", "HXS_TEST=a=b c"])
    r = vm.collect(timeout=600)  # the output comes at exit (a pipe: Python buffers it)
    assert r["error"] is None, r["error"]
    out = r["stdout"].decode()
    lines = dict(l.split(" ", 1) for l in out.splitlines())
    assert lines["uid"] == "1000 1000 1000"
    assert lines["caps"] == "0000000000000000 0000000000000000 0000000000000000"
    assert lines["nnp"] == "1 seccomp 2"
    assert lines["ifaces"] == "lo"
    assert lines["host"] == "sandbox cwd /home/sandbox home /home/sandbox"
    assert lines["env"] == "a=b c path /usr/local/bin:/usr/bin:/bin"
    assert lines["stdin"] == "from the host"
    assert lines["code"] == "True /code/main.py"
    assert "writable" not in lines, out
    # refused because the mounts are read-only (EROFS), not only because uid 1000 may
    # not write there (EACCES, which a writable root would give too)
    for path in ("/hexr-probe", "/usr/hexr-probe", "/etc/passwd", "/code/main.py"):
        assert f"denied {path} 30" in out.splitlines(), out
    assert lines["rootflags"].startswith("ro "), lines["rootflags"]
    assert lines["scratch"] == "ok"
    assert lines["user"] == "1"
    assert lines["pandas"] == "6"
    assert lines["imported"] == str(len(mods))
    assert lines["png"] == "89504e470d0a1a0a True agg /etc/matplotlibrc"
    # matplotlib notes on stderr when building its font cache (every fresh HOME builds one)
    # takes over 5 s, which under TCG on a busy host it can: its words, not the agent's
    stderr = r["stderr"].replace(b"Matplotlib is building the font cache; this may take a moment.\n", b"", 1)
    assert stderr == b"to stderr\n", r["stderr"]
    ex = r["exit"]
    assert os.WIFEXITED(ex["wait_status"]) and os.WEXITSTATUS(ex["wait_status"]) == 3
    assert ex["timed_out"] == 0 and ex["oom_killed"] == 0
    assert ex["memory_kb"] > 0
    assert powered_off(vm)


def test_garbage_partial_frames_and_malformed_headers_then_hello(vm):
    """Stale bytes before a conversation: garbage, headers that are wrong in each
    field, a valid header of another type whose payload never comes, a HELLO with the
    wrong length. The agent skips them all and answers the valid HELLO."""
    junk = bytearray(os.urandom(3000).replace(b"H", b"h"))
    vm.send(bytes(junk))
    vm.send(b"H\x01\x01\x00\x04\x00\x00\x00")            # bad version (1: before the files)
    vm.send(b"H\x02\x63\x00\x04\x00\x00\x00")            # bad type
    vm.send(b"H\x02\x01\x07\x04\x00\x00\x00")            # bad flags
    vm.send(b"H\x02\x01\x00\xff\xff\xff\x7f")            # payload too long
    vm.send(h.frame(h.HELLO, b"\x01\x02"))               # HELLO, wrong size
    vm.send(b"H\x02\x04\x00\x00\x00\x01\x00partial")     # CODE header, 64 KiB never sent
    vm.send(b"H\x02")                                    # a header cut short
    assert vm.hello(nonce=0xfeedf00d).startswith("hexr-agent ")
    # a second HELLO before RUN starts the conversation over
    assert vm.hello(nonce=7).startswith("hexr-agent ")
    # frames that do not belong in the conversation now are dropped
    vm.send(h.frame(h.KILL) + h.frame(h.STDOUT, b"x") + h.frame(h.START))
    # exit status 69: the status record's bytes hold an 'E' (0x45)
    r = vm.run("print('resynchronised')\nraise SystemExit(69)")
    assert r["error"] is None, r["error"]
    assert r["stdout"] == b"resynchronised\n"
    assert r["exit"]["wait_status"] == 69 << 8
    assert powered_off(vm)


def test_host_disconnects_and_reconnects(tmp_path):
    """A host that leaves half-way through a frame and comes back: the agent keeps
    the port, forgets the half frame, and answers the new host. Twice: once after a
    pause (the agent sees the port without a host), once without leaving at all (a
    reconnect too quick to see: the half frame is dropped when it stops arriving)."""
    machine = h.VM(IMAGE, path=str(tmp_path / "agent.sock"))
    try:
        machine.connect()
        machine.send(h.frame(h.HELLO, struct.pack("<I", 1)))
        assert machine.recv_frame()[0] == h.READY
        machine.send(b"H\x02\x03\x00\x00\x10\x00\x00" + b"\x01" * 100)   # RUN, cut short
        machine.disconnect()
        time.sleep(0.5)
        machine.connect()
        assert machine.hello(nonce=2).startswith("hexr-agent ")
        machine.send(b"H\x02\x03\x00\x00\x10\x00\x00" + b"\x01" * 100)   # and again
        assert machine.hello(nonce=3).startswith("hexr-agent ")
        r = machine.run("echo back; exit 0", language="bash")
        assert r["stdout"] == b"back\n" and r["exit"]["wait_status"] == 0
        assert powered_off(machine)
    finally:
        machine.close()


def test_timeout_kills_and_output_is_capped(vm):
    vm.hello()
    code = "import sys\nsys.stdout.write('x' * 100000)\nsys.stdout.flush()\nwhile True: pass\n"
    r = vm.run(code, timeout_ms=3000, output_max=1000)
    assert r["error"] is None, r["error"]
    assert r["stdout"] == b"x" * 1001   # output_max + 1: the host sees the truncation
    ex = r["exit"]
    assert ex["timed_out"] == 1
    assert os.WIFSIGNALED(ex["wait_status"]) and os.WTERMSIG(ex["wait_status"]) == signal.SIGKILL
    assert powered_off(vm)


CHART = r"""
import os
import pandas as pd
import matplotlib.pyplot as plt
df = pd.read_csv("data/sales.csv")
print("rows", len(df), "total", df["amount"].sum(), "mean", df["amount"].mean())
os.makedirs("output", exist_ok=True)
os.symlink("/etc/shadow", "output/shadow")
os.symlink("/etc/passwd", "passwd.txt")
with open("notes.txt", "w") as f:
    f.write("kept")
df.plot(x="month", y="amount")
plt.show()
"""


def test_files_in_pandas_chart_out(vm):
    """A CSV in, summarised with pandas; the chart plt.show() draws comes back as
    output/figure-1.png (the charts hook of the image's Python), a return glob brings
    notes.txt; symlinks (to /etc/shadow under output/, to /etc/passwd matching the glob)
    bring nothing back. Importing pandas and matplotlib under TCG takes a while."""
    vm.hello()
    csv = b"month,amount\n1,10\n2,20\n3,12\n"
    vm.start(CHART, files=[("data/sales.csv", csv)], return_globs=["*.txt"], timeout_ms=600000,
             memory_mb=400, env=["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/sandbox", "LANG=C.UTF-8",
                                 "MPLBACKEND=Agg"])
    r = vm.collect(timeout=600)
    assert r["error"] is None, r["error"]
    assert r["stdout"] == b"rows 3 total 42 mean 14.0\n", (r["stdout"], r["stderr"])
    assert r["exit"]["wait_status"] == 0, r["stderr"]
    files = {f["path"]: f for f in r["files"]}
    assert sorted(files) == ["notes.txt", "output/figure-1.png"], files.keys()
    png = files["output/figure-1.png"]
    assert png["data"].startswith(b"\x89PNG\r\n\x1a\n") and png["size"] == len(png["data"]) > 1000
    assert not png.get("truncated") and png["len"] == png["size"]
    assert files["notes.txt"]["data"] == b"kept"
    assert powered_off(vm)


def test_time_limit_keeps_unflushed_output_and_the_files(vm):
    """At the time limit the program gets SIGTERM and a moment to flush (the charts
    hook flushes Python's buffers), then the sandbox is frozen, its files taken as they
    are, and killed."""
    vm.hello()
    code = ("import os, time\nos.makedirs('output')\nopen('output/partial.txt', 'w').write('half')\n"
            "print('unflushed before the limit')\nwhile True: time.sleep(0.01)\n")
    r = vm.run(code, timeout_ms=8000)
    assert r["error"] is None, r["error"]
    assert r["stdout"] == b"unflushed before the limit\n", r
    assert r["exit"]["timed_out"] == 1
    assert [(f["path"], f["data"]) for f in r["files"]] == [("output/partial.txt", b"half")]
    assert powered_off(vm)


STILL_RUNNING = ("import os, signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                 "os.makedirs('output')\nopen('output/partial.txt', 'w').write('frozen')\n"
                 "print('started', flush=True)\nwhile True: time.sleep(0.01)\n")


def test_still_running_after_sigterm_is_frozen_and_keeps_its_files(vm):
    """A program that ignores SIGTERM is still running 150 ms after it: the sandbox is
    frozen, its files taken as they are, then killed."""
    vm.hello()
    r = vm.run(STILL_RUNNING, timeout_ms=8000)
    assert r["error"] is None, r["error"]
    assert r["stdout"] == b"started\n" and r["exit"]["timed_out"] == 1, r
    assert [(f["path"], f["data"]) for f in r["files"]] == [("output/partial.txt", b"frozen")]
    assert powered_off(vm)


def test_kill_that_keeps_the_files(vm):
    """KILL with HXP_KILL_KEEP_FILES (the host's output limit): the program is stopped and
    its files come back before EXIT; a plain KILL (below, JavaScript) takes none."""
    vm.hello()
    vm.start(STILL_RUNNING)
    ftype, payload = vm.recv_frame(180)
    assert (ftype, payload) == (h.STDOUT, b"started\n")
    vm.send(h.frame(h.KILL, struct.pack("<I", 1)))
    r = vm.collect()
    assert r["exit"]["timed_out"] == 0
    assert os.WTERMSIG(r["exit"]["wait_status"]) == signal.SIGKILL
    assert [(f["path"], f["data"]) for f in r["files"]] == [("output/partial.txt", b"frozen")]
    assert powered_off(vm)


def test_memory_limit_is_an_oom_kill(vm):
    vm.hello()
    r = vm.run("b = []\nwhile True: b.append(bytearray(1 << 20))\n", memory_mb=48)
    assert r["error"] is None, r["error"]
    ex = r["exit"]
    assert ex["oom_killed"] == 1 and ex["timed_out"] == 0
    assert os.WIFSIGNALED(ex["wait_status"]) and os.WTERMSIG(ex["wait_status"]) == signal.SIGKILL
    assert powered_off(vm)


def test_kill_from_the_host_and_javascript(vm):
    vm.hello()
    vm.start("console.log('started'); setInterval(() => {}, 1000);", language="javascript")
    ftype, payload = vm.recv_frame(180)
    assert (ftype, payload) == (h.STDOUT, b"started\n")
    vm.send(h.frame(h.KILL))
    r = vm.collect()
    ex = r["exit"]
    assert ex["timed_out"] == 0 and r["files"] == []
    assert os.WIFSIGNALED(ex["wait_status"]) and os.WTERMSIG(ex["wait_status"]) == signal.SIGKILL
    assert powered_off(vm)


def _bad_language():
    p = bytearray(h.run_payload(b"print(1)"))
    p[6:10] = struct.pack("<I", 7)  # the first TLV is the language
    return h.frame(h.RUN, bytes(p))


VIOLATIONS = {
    "env without =": (h.frame(h.RUN, h.run_payload(b"print(1)", env=["NO_EQUALS_SIGN"])), b"RUN"),
    "unknown language": (_bad_language(), b"language"),
    "more code than announced": (h.frame(h.RUN, h.run_payload(b"print(1)")) +
                                 h.frame(h.CODE, b"print(1)\nprint(2)"), b"code_len"),
    "START before the code": (h.frame(h.RUN, h.run_payload(b"print(1)")) +
                              h.frame(h.CODE, b"pri") + h.frame(h.START), b"code"),
    "START before stdin": (h.frame(h.RUN, h.run_payload(b"", stdin=b"abc")) + h.frame(h.START),
                           b"stdin"),
    # the path rule again in the guest: what the host would have refused
    "a file path with ..": (h.frame(h.RUN, h.run_payload(b"print(1)", files=[("../x", b"1")])) +
                            h.frame(h.CODE, b"print(1)") + h.frame(h.STDIN) + h.file_frames("../x", b"1"),
                            b"FILE"),
}


@pytest.mark.parametrize("case", sorted(VIOLATIONS))
def test_a_host_that_breaks_the_rules_gets_an_error_and_the_vm_ends(vm, case):
    data, word = VIOLATIONS[case]
    vm.hello()
    vm.send(data)
    ftype, text = vm.recv_frame()
    assert ftype == h.ERROR and word in text, (ftype, text)
    assert powered_off(vm)


PROBE_DELIVERY = r"""
import base64, os, sys
data = base64.b64decode(PROBE_B64)
path = "/tmp/hxs-probe"
with open(path, "wb") as f:
    f.write(data)
os.chmod(path, 0o755)
sys.stdout.flush()
os.execv(path, [path])
"""


def test_the_syscall_probe_finds_the_namespace_backends_filter(vm):
    """tests/security/probe.c, run as the program in the VM: every denied system call
    (x86_64, i386, x32) must be refused by the filter, as in a namespace sandbox."""
    probe = os.environ.get("HXS_PROBE_BIN", "")
    assert os.path.isfile(probe), "HXS_PROBE_BIN must name the built hxs-probe"
    code = PROBE_DELIVERY.replace("PROBE_B64", '"%s"' % base64.b64encode(open(probe, "rb").read()).decode())
    vm.hello()
    r = vm.run(code)
    assert r["error"] is None, r["error"]
    out = r["stdout"].decode()
    failed = [line for line in out.splitlines() if line.startswith("FAIL ")]
    passed = [line for line in out.splitlines() if line.startswith("ok ")]
    assert not failed, "\n".join(failed)
    assert len(passed) > 100, out[-2000:]
    assert re.search(r"^# \d+ checks, 0 failed$", out, re.M), out[-2000:]
    assert r["exit"]["wait_status"] == 0
    assert powered_off(vm)
