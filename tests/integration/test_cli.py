"""The `hexr-sandbox` CLI: exec, doctor, version, the seed examples, and crash recovery.

Every run goes through the real binary; results are compared with the same code run by
the host's interpreters outside the sandbox.
"""
import json
import os
import pathlib
import signal
import subprocess
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("HEXR_SANDBOX_BIN", str(ROOT / "build" / "hexr-sandbox"))
PY = "/usr/bin/python3"


def run(args, input=None, env=None, timeout=120):
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run([BIN] + args, input=input, capture_output=True, env=e, timeout=timeout)


def exec_json(code, *opts, env=None, timeout=120):
    p = run(["exec", "--json", *opts, "-c", code], env=env, timeout=timeout)
    assert p.stdout, p.stderr.decode()
    return json.loads(p.stdout), p.returncode


def host(argv, code):
    return subprocess.run(argv + [code], capture_output=True, timeout=120, cwd="/tmp")


# ---- the seed examples, byte for byte -------------------------------------------------

SEED_DESCRIBE = """
import pandas as pd
df = pd.DataFrame({'x': [1, 2, 3], 'y': [4, 5, 6]})
print(df.describe())
"""

SEED_STATS = """
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

SEED_PROFIT = """
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


@pytest.mark.parametrize("code", [SEED_DESCRIBE, SEED_STATS, SEED_PROFIT], ids=["describe", "stats", "profit"])
def test_seed_python_examples_match_host(code):
    p = run(["exec", "-c", code])
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout == host([PY, "-c"], code).stdout


def test_seed_describe_values():
    p = run(["exec", "-c", SEED_DESCRIBE])
    lines = p.stdout.decode().splitlines()
    rows = {ln.split()[0]: [float(v) for v in ln.split()[1:]] for ln in lines[1:]}
    assert rows["count"] == [3.0, 3.0]
    assert rows["mean"] == [2.0, 5.0]
    assert rows["std"] == [1.0, 1.0]
    assert rows["max"] == [3.0, 6.0]


def test_seed_stats_json():
    p = run(["exec", "-c", SEED_STATS])
    stats = json.loads(p.stdout)
    assert stats["mean"] == 85.0 and stats["median"] == 85.0 and stats["std"] == 7.0


def test_seed_zero_division():
    res, rc = exec_json("1/0")
    assert rc == 1 and res["exit_code"] == 1
    assert "ZeroDivisionError" in res["stderr"] and "Traceback" in res["stderr"]
    assert res["stdout"] == ""


def test_seed_shell_example():
    p = run(["exec", "-l", "shell", "-c", "ls -la /tmp && whoami && cat /etc/os-release"])
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode()
    assert "\nsandbox\n" in out
    assert out.endswith(pathlib.Path("/etc/os-release").read_text())
    listing = out.split("\nsandbox\n")[0].splitlines()
    assert listing[0] == "total 0"
    assert [ln.split()[-1] for ln in listing[1:]] == [".", ".."]


@pytest.mark.parametrize("lang,code,argv", [
    ("python", "print('Hello from Python')", [PY, "-c"]),
    ("javascript", "console.log('Hello from Node.js')", ["/usr/bin/node", "-e"]),
    ("bash", "echo 'Hello from Bash'", ["/usr/bin/bash", "-c"]),
])
def test_hello_in_every_language(lang, code, argv):
    p = run(["exec", "-l", lang, "-c", code])
    assert p.returncode == 0
    assert p.stdout == host(argv, code).stdout
    assert p.stdout.startswith(b"Hello from ")


def test_bash_uname_example():
    p = run(["exec", "-l", "bash", "-c", "echo 'Hello from Bash' && uname -a"])
    assert p.returncode == 0
    out = p.stdout.decode().splitlines()
    assert out[0] == "Hello from Bash"
    assert out[1].startswith("Linux sandbox ")  # our own hostname, not the host's


@pytest.mark.parametrize("alias", ["js", "node", "javascript"])
def test_javascript_aliases(alias):
    res, _ = exec_json("console.log(1+1)", "-l", alias)
    assert res["stdout"] == "2\n"


@pytest.mark.parametrize("alias", ["sh", "shell", "bash"])
def test_bash_aliases(alias):
    res, _ = exec_json("echo $((6*7))", "-l", alias)
    assert res["stdout"] == "42\n"


def test_scientific_stack_importable():
    res, _ = exec_json("import numpy, pandas, scipy, scipy.linalg; print(scipy.linalg.det(numpy.eye(3)))")
    assert res["exit_code"] == 0, res["stderr"]
    assert res["stdout"] == "1.0\n"


# ---- the result object and exit codes --------------------------------------------------

def test_json_fields():
    res, rc = exec_json("import sys; print('out'); print('err', file=sys.stderr); sys.exit(7)")
    assert rc == 7
    assert set(res) >= {"stdout", "stderr", "exit_code", "execution_time_ms", "memory_used_mb", "timed_out",
                        "oom_killed", "signal", "stdout_truncated", "stderr_truncated"}
    assert res["stdout"] == "out\n" and res["stderr"] == "err\n" and res["exit_code"] == 7
    assert res["signal"] is None and res["timed_out"] is False and res["oom_killed"] is False
    assert res["memory_used_mb"] >= 1 and res["execution_time_ms"] >= 0


def test_killed_by_signal_is_128_plus_n():
    res, rc = exec_json("kill -TERM $$", "-l", "bash")
    assert res["exit_code"] == 128 + signal.SIGTERM and res["signal"] == signal.SIGTERM and rc == 143


def test_timeout_is_124():
    res, rc = exec_json("while True: pass", "-t", "1")
    assert rc == 124 and res["exit_code"] == 124 and res["timed_out"] is True


def test_memory_limit_is_137():
    res, rc = exec_json("x = bytearray(300 * 1024 * 1024); print('survived')", "-m", "64")
    assert rc == 137 and res["oom_killed"] is True and res["exit_code"] == 137
    assert "survived" not in res["stdout"]
    assert res["memory_used_mb"] >= 60


def test_memory_reported():
    small, _ = exec_json("print(1)")
    big, _ = exec_json("x = bytearray(120 * 1024 * 1024); x[::4096] = b'x' * len(x[::4096]); print(1)")
    assert big["exit_code"] == 0
    assert big["memory_used_mb"] >= 120 > small["memory_used_mb"]


def test_stdin_and_file_and_dash(tmp_path):
    f = tmp_path / "prog.py"
    f.write_text("import sys; print(sys.stdin.read().upper())")
    data = tmp_path / "in.txt"
    data.write_text("abc")
    p = run(["exec", "--stdin", str(data), str(f)])
    assert p.stdout == b"ABC\n"
    p = run(["exec", "-l", "bash", "-"], input=b"echo from-stdin")
    assert p.stdout == b"from-stdin\n"
    # without --stdin the program reads EOF
    p = run(["exec", "-c", "import sys; print(repr(sys.stdin.read()))"])
    assert p.stdout == b"''\n"


def test_large_code_beyond_argv_limit():
    # 2 MiB of code: more than one argv string may hold (128 KiB)
    body = "s = '" + "ab" * (1 << 20) + "'\nprint(len(s))\n"
    p = run(["exec", "-"], input=body.encode())
    assert p.returncode == 0, p.stderr[-500:]
    assert p.stdout == b"2097152\n"


def test_code_with_awkward_bytes():
    code = b"printf '%s\\n' \"q'uo\\\"te\" '$(id)' '`id`'  # \xff\xfe not utf-8\n"
    p = run(["exec", "-l", "bash", "-"], input=code)
    assert p.returncode == 0
    assert p.stdout == b"q'uo\"te\n$(id)\n`id`\n"


# ---- errors name the problem -------------------------------------------------------------

@pytest.mark.parametrize("args,needle", [
    (["-m", "4096"], "memory_mb: 4096 exceeds the maximum 512"),
    (["-t", "999"], "timeout: 999 exceeds the maximum 30"),
    (["-t", "0"], "timeout"),
    (["-l", "cobol"], "language"),
    (["-e", "1BAD=x"], "env_vars"),
    (["-e", "NOEQUALS"], "env_vars"),
])
def test_bad_options_are_named(args, needle):
    p = run(["exec", *args, "-c", "print(1)"])
    assert p.returncode == 125
    assert needle in p.stderr.decode()


def test_limits_follow_settings():
    p = run(["exec", "-m", "600", "-c", "print(1)"], env={"MAX_MEMORY_MB": "1024"})
    assert p.returncode == 0 and p.stdout == b"1\n"
    p = run(["exec", "-c", "print(1)"], env={"MAX_MEMORY_MB": "many"})
    assert p.returncode == 125 and "MAX_MEMORY_MB" in p.stderr.decode()


def test_unavailable_backend_is_an_error():
    p = run(["exec", "--backend", "firecracker", "-c", "print(1)"])
    assert p.returncode == 125 and "firecracker" in p.stderr.decode()


def test_doctor_and_version():
    p = run(["doctor"])
    out = p.stdout.decode()
    assert p.returncode == 0, out
    for item in ("namespaces", "cgroups", "seccomp", "landlock", "kvm"):
        assert item in out
    assert "backend: namespaces" in out and "a sandbox ran" in out
    v = run(["version"])
    assert v.returncode == 0 and v.stdout.startswith(b"hexr-sandbox ")
    h = run(["--help"])
    assert b"MAX_EXECUTION_TIME" in h.stdout and b"LISTEN_ADDRESS" in h.stdout


def _linked(binary):
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=30).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def test_the_cli_links_no_tls_and_hands_serve_to_its_sibling(tmp_path, start_service):
    """exec and the rest start without GnuTLS and the HTTP server; serve and mcp --url
    run hexr-sandbox-http from the binary's own directory, with the same arguments, and
    say so when it is not there."""
    libs = _linked(BIN)
    assert "libjansson.so.4" in libs, libs  # ldd worked
    assert not {lib for lib in libs if lib.startswith(("libgnutls", "libmicrohttpd"))}, libs
    http = os.path.join(os.path.dirname(BIN), "hexr-sandbox-http")
    assert "libmicrohttpd.so.12" in _linked(http)
    # nothing that runs sandboxes loads libseccomp: their filter is the build's
    # (src/ns/seccomp-bpf.c); only the build's tools and the tests compile one
    zygote = os.path.join(os.path.dirname(BIN), "_hxs_zygote.so")
    for f in (BIN, http, zygote):
        assert not {lib for lib in _linked(f) if lib.startswith("libseccomp")}, f
    # the hand-over keeps argv: serve's own error for a bad option comes back
    p = run(["serve", "--no-such-option"])
    assert p.returncode == 2 and b"no-such-option" in p.stderr, p.stderr
    # ... and the process keeps its name for ps (not "hexr-sandbox-ht")
    svc = start_service({"SANDBOX_WARM": "off", "SANDBOX_POOL": "0"})
    assert os.readlink("/proc/%d/exe" % svc.proc.pid) == os.path.realpath(http)
    assert pathlib.Path("/proc/%d/comm" % svc.proc.pid).read_text() == "hexr-sandbox\n"
    lone = tmp_path / "hexr-sandbox"
    lone.write_bytes(pathlib.Path(BIN).read_bytes())
    lone.chmod(0o755)
    for args in (["serve", "--listen", "127.0.0.1:0"], ["mcp", "--url", "http://127.0.0.1:9/"]):
        p = subprocess.run([str(lone)] + args, input=b"", capture_output=True, timeout=60)
        assert p.returncode == 125, (args, p.stderr)
        assert ("%s: No such file or directory" % (tmp_path / "hexr-sandbox-http")).encode() in p.stderr, p.stderr
    p = subprocess.run([str(lone), "exec", "-c", "print(6 * 7)"], capture_output=True, timeout=120)
    assert p.returncode == 0 and p.stdout == b"42\n", p.stderr


# ---- a killed CLI leaves nothing behind ----------------------------------------------------

def _engine_cgroups():
    """The engines' cgroups in every hexr-sandbox directory of the hierarchies. Other
    engines (another suite, a colleague's service) create and remove theirs while this
    walks, so a directory gone meanwhile is passed over (os.walk ignores it), where
    Path.glob would raise."""
    found = []
    for top, dirs, _ in os.walk("/sys/fs/cgroup"):
        if os.path.basename(top) == "hexr-sandbox":
            found += [d for d in dirs if d.startswith("s")]
    return found


def _pgrep(marker):
    """Processes whose command line starts with marker: the sandbox's sleepers (exec -a),
    not the CLI, whose -c argument also contains it."""
    return subprocess.run(["pgrep", "-f", "^" + marker], capture_output=True).stdout.split()


def test_sigkill_of_the_cli_kills_the_sandbox_and_next_start_sweeps(tmp_path):
    marker = f"hxs-orphan-{os.getpid()}"
    proc = subprocess.Popen([BIN, "exec", "-t", "30", "-l", "bash", "-c",
                             f"(exec -a {marker} sleep 60) & (setsid bash -c 'exec -a {marker} sleep 60' &); wait"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while time.time() < deadline and len(_pgrep(marker)) < 2:
        time.sleep(0.05)
    assert len(_pgrep(marker)) == 2, "the sandbox did not start its two sleepers: %s" % _pgrep(marker)
    mine = [c for c in _engine_cgroups() if c.startswith(f"s{proc.pid}.")]
    assert mine, "the execution's cgroup should exist while it runs"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.time() + 10
    while time.time() < deadline and _pgrep(marker):
        time.sleep(0.05)
    assert not _pgrep(marker), "sandbox processes outlived the killed CLI"
    # the dead CLI's cgroups are still there until the next engine sweeps them
    p = run(["exec", "-c", "print(1)"])
    assert p.returncode == 0
    assert not [c for c in _engine_cgroups() if c.startswith(f"s{proc.pid}.")]


def _ignore_signals_like_a_careless_parent():
    """preexec_fn: SIG_IGN for SIGPIPE, SIGUSR1 and the two real-time signals libc
    reserves (32, 33), set through the system call (libc refuses those two)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)

    class KSigaction(ctypes.Structure):
        _fields_ = [("handler", ctypes.c_void_p), ("flags", ctypes.c_ulong),
                    ("restorer", ctypes.c_void_p), ("mask", ctypes.c_uint64)]

    ign = KSigaction(1, 0, None, 0)  # SIG_IGN
    for sig in (signal.SIGPIPE, signal.SIGUSR1, 32, 33):
        libc.syscall(13, sig, ctypes.byref(ign), None, 8)  # rt_sigaction


def test_program_starts_with_default_dispositions_whatever_the_parent_ignored():
    probe = [BIN, "exec", "-l", "bash", "-c", "grep SigIgn /proc/self/status"]
    parent = subprocess.run(["bash", "-c", "grep SigIgn /proc/self/status"], capture_output=True,
                            preexec_fn=_ignore_signals_like_a_careless_parent, timeout=30)
    assert parent.stdout.strip() != b"SigIgn:\t0000000000000000"  # the parent's state did carry over
    r = subprocess.run(probe, capture_output=True, preexec_fn=_ignore_signals_like_a_careless_parent,
                       timeout=120)
    assert r.returncode == 0, r
    assert r.stdout.strip() == b"SigIgn:\t0000000000000000", r.stdout


def test_cgroup_v2_without_the_controllers_fails_closed():
    """A pure cgroup v2 view in which the memory and pids controllers cannot be enabled
    (here: a private mount namespace with only a cgroup2 mount; this host binds those
    controllers to v1): no sandbox runs without its limits, and doctor says why."""
    script = ("umount -R /sys/fs/cgroup 2>/dev/null; mount -t cgroup2 none /sys/fs/cgroup || exit 99; "
              "grep -qw memory /sys/fs/cgroup/cgroup.controllers && exit 98; "
              '"$0" exec -c "print(1)"; echo "exec=$?"; "$0" doctor; echo "doctor=$?"')
    r = subprocess.run(["unshare", "-m", "sh", "-c", script, BIN], capture_output=True, timeout=120)
    out = r.stdout.decode() + r.stderr.decode()
    if r.returncode in (98, 99):
        pytest.skip("cannot build the cgroup v2 view here (%d): %s" % (r.returncode, out[-300:]))
    assert "exec=125" in out and "doctor=1" in out, out
    assert "memory and pids controllers" in out, out
    assert "\n1\n" not in r.stdout.decode(), out  # the program never ran
    # The engine had moved itself into a supervisor-<pid> leaf of the v2 hierarchy (the
    # host's own v2 hierarchy here); the next engine start sweeps the dead one.
    assert run(["exec", "-l", "bash", "-c", "true"]).returncode == 0
    v2 = "/sys/fs/cgroup/unified/hexr-sandbox"
    if os.path.isdir(v2):
        dead = [d for d in os.listdir(v2) if d.startswith("supervisor-")
                and not os.path.exists("/proc/%s" % d.split("-", 1)[1])]
        assert not dead, dead
