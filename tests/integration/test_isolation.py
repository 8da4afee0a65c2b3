"""Each isolation property, proven by trying to break it from inside the sandbox.

Everything goes through `hexr-sandbox exec --json` (binary from $HEXR_SANDBOX_BIN,
default build/hexr-sandbox), in every language where the attack applies (python,
javascript, bash). Before the first test, the canary (tests/lib/hxstest/canary.py) checks
that the sandbox isolates at all; if not, the session stops before any attack code
runs. After every test, and again after the last one, a check that the runs left
nothing on the host: no execution cgroup of the test's CLI processes, no mount under
STATE_DIR, no process of the sandbox uid range. It runs after every test because each
new engine sweeps the cgroups of dead predecessors: a check only at the end would see
the last run's leftovers and nobody else's. Every CLI run must also exit with the
program's exit code and print no sanitizer report (canary.run_exec checks both).

A few properties are only visible from the host, and are read there while a program
runs (it exec's a `sleep` named after a marker, which the test then ends): the
execution cgroup's limits (memory, no swap, CPU share, pids) and PID 1's own
no_new_privs, seccomp mode and capabilities.

A few tests go through the service instead (fixtures of conftest.py): `exec` is always
cold, and only the service runs Python from warm templates, whose programs are not
exec'ed (so close-on-exec protects nothing there), and whose sandboxes are cloned by
the template rather than by the engine.

Host-side resources are only ever our own: listeners this test opens on 127.0.0.1 and
in the abstract unix namespace, a `sleep` it starts, secret files it creates (and
removes). No absolute times are asserted; every subprocess and wait has a timeout.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from typing import Callable, Dict, Iterator, List, Tuple

import pytest

from hxstest.output import kept_len, split_kept
from hxstest.host import (CLI_PIDS, ExecResult, cgroup_dirs, engine_cgroup_owner, engine_cgroup_parents,
                  host_mounts_under, leaked_sandbox_processes, leftover_cgroups, pids_named,
                  proc_status, processes_with, read_proc, require_isolation, run_exec,
                  sandbox_init_of, state_dir, wait_until)

LANGS = ["python", "javascript", "bash"]
MAIN_FILE = {"python": "/code/main.py", "javascript": "/code/main.js", "bash": "/code/main.sh"}
MiB = 1 << 20
ERRNO_BY_MESSAGE = {  # bash and coreutils print strerror(), not the errno name
    "Read-only file system": "EROFS", "Permission denied": "EACCES",
    "No such file or directory": "ENOENT", "No space left on device": "ENOSPC",
    "File too large": "EFBIG", "Connection refused": "ECONNREFUSED",
    "No such process": "ESRCH", "No such device or address": "ENXIO",
}


def marker() -> str:
    return "hxs-iso-" + uuid.uuid4().hex[:16]


def errno_of(message: str) -> str:
    for text, name in ERRNO_BY_MESSAGE.items():
        if text in message:
            return name
    return "OTHER: " + message.strip()


def run_ok(code: str, language: str, **kw) -> ExecResult:
    res = run_exec(code, language, **kw)
    assert res.exit_code == 0 and not res.timed_out, res.describe()
    return res


def json_out(res: ExecResult) -> Dict:
    try:
        return json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise AssertionError("no JSON on the last line of stdout: " + res.describe()) from None


def tab_lines(res: ExecResult) -> Dict[str, str]:
    out = {}
    for line in res.stdout.splitlines():
        key, _, value = line.partition("\t")
        out[key] = value
    return out


def sh_words(items: List[str]) -> str:
    return " ".join(shlex.quote(i) for i in items)


# ---- canary first, leak checks after every test and at the end ------------------------------


def leftovers_of(ours: set) -> List[str]:
    """What the CLI processes `ours` left on the host."""
    problems = []
    if not wait_until(lambda: not leftover_cgroups(ours), timeout=5.0):
        problems.append("execution cgroups left behind: %s" % leftover_cgroups(ours))
    mounts = host_mounts_under(state_dir())
    if mounts:
        problems.append("mounts on the host under STATE_DIR %s: %s" % (state_dir(), mounts))
    if not wait_until(lambda: not leaked_sandbox_processes(ours), timeout=5.0):
        problems.append("processes of the sandbox uid range left behind: %s"
                        % leaked_sandbox_processes(ours))
    return problems


@pytest.fixture(scope="module", autouse=True)
def canary_and_leftovers() -> Iterator[None]:
    require_isolation()  # pytest.exit()s the session if the sandbox does not isolate
    yield
    problems = leftovers_of(set(CLI_PIDS))
    assert not problems, "; ".join(problems)


@pytest.fixture(autouse=True)
def no_leftovers_after_each_test(canary_and_leftovers: None) -> Iterator[None]:
    """Checked right after the test, before the next CLI's start-up sweep of dead
    engines' cgroups can erase what this test's runs left."""
    before = set(CLI_PIDS)
    yield
    ours = set(CLI_PIDS) - before
    if ours:
        problems = leftovers_of(ours)
        assert not problems, "after this test's %d CLI run(s): %s" % (len(ours), "; ".join(problems))


# ---- read-only root, writable capped scratch ----------------------------------------------

RO_FILES = ["/usr/hxs-w", "/usr/bin/hxs-w", "/usr/bin/env", "/etc/hxs-w", "/etc/passwd",
            "/etc/hosts", "/hxs-w", "/code/hxs-w", "/dev/hxs-w", "/home/hxs-w"]
RO_DIRS = ["/usr/hxs-d", "/etc/hxs-d", "/hxs-d", "/code/hxs-d", "/home/hxs-d", "/dev/hxs-d"]
RO_UNLINK = ["/etc/passwd", "/usr/bin/env"]

RO_CODE = {
    "python": r'''
import errno, json, os
def name(e): return errno.errorcode.get(e.errno, str(e.errno))
res = {}
for p in FILES:
    try:
        with open(p, "a") as f: f.write("x")
        res["write " + p] = "ok"
    except OSError as e: res["write " + p] = name(e)
for p in DIRS:
    try: os.mkdir(p); res["mkdir " + p] = "ok"
    except OSError as e: res["mkdir " + p] = name(e)
for p in UNLINK:
    try: os.unlink(p); res["unlink " + p] = "ok"
    except OSError as e: res["unlink " + p] = name(e)
ro = {p: bool(os.statvfs(p).f_flag & os.ST_RDONLY) for p in MOUNTS}
nosuid = {p: bool(os.statvfs(p).f_flag & os.ST_NOSUID) for p in MOUNTS}
nodev = {p: bool(os.statvfs(p).f_flag & os.ST_NODEV) for p in MOUNTS}
print(json.dumps({"errors": res, "ro": ro, "nosuid": nosuid, "nodev": nodev}))
''',
    "javascript": r'''
const fs = require('fs');
const res = {};
for (const p of FILES) { try { fs.appendFileSync(p, 'x'); res['write ' + p] = 'ok'; } catch (e) { res['write ' + p] = e.code; } }
for (const p of DIRS) { try { fs.mkdirSync(p); res['mkdir ' + p] = 'ok'; } catch (e) { res['mkdir ' + p] = e.code; } }
for (const p of UNLINK) { try { fs.unlinkSync(p); res['unlink ' + p] = 'ok'; } catch (e) { res['unlink ' + p] = e.code; } }
// per-mount options of the last mount on each path (Node has no statvfs)
const mounts = fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter(Boolean).map((l) => l.split(' '));
const opts = {};
for (const p of MOUNTS) { opts[p] = null; for (const f of mounts) if (f[4] === p) opts[p] = f[5]; }
console.log(JSON.stringify({ errors: res, opts }));
''',
    "bash": r'''
for p in FILES; do
  if msg=$( { echo x >> "$p"; } 2>&1 ); then echo "write $p	ok"; else echo "write $p	$msg"; fi
done
for p in DIRS; do
  if msg=$(mkdir "$p" 2>&1); then echo "mkdir $p	ok"; else echo "mkdir $p	$msg"; fi
done
for p in UNLINK; do
  if msg=$(rm -f "$p" 2>&1); then echo "unlink $p	ok"; else echo "unlink $p	$msg"; fi
done
for p in MOUNTS; do
  opts=$(awk -v p="$p" '$5 == p { print $6 }' /proc/self/mountinfo | tail -n 1)
  echo "mount $p	$opts"
done
''',
}


# Mount points whose read-only flag is checked directly: the sandbox user gets EACCES
# from the root-owned directories even on a writable mount, which would hide a missing
# read-only remount.
RO_MOUNTS = ["/", "/usr", "/dev", "/etc/ssl"]
RW_MOUNTS = ["/tmp", "/home/sandbox", "/dev/shm"]


def ro_code(lang: str) -> str:
    files = RO_FILES + [MAIN_FILE[lang]]
    unlink = RO_UNLINK + [MAIN_FILE[lang]]
    words = sh_words if lang == "bash" else json.dumps
    code = RO_CODE[lang].replace("FILES", words(files)).replace("DIRS", words(RO_DIRS))
    return code.replace("UNLINK", words(unlink)).replace("MOUNTS", words(RO_MOUNTS + RW_MOUNTS))


def flags_from_options(opts: Dict[str, str]) -> Dict[str, Dict[str, bool]]:
    """{"ro": {mount: bool}, "nosuid": ..., "nodev": ...} from mountinfo's per-mount
    options ("ro,nosuid,nodev,relatime")."""
    missing = [p for p, o in opts.items() if not o]
    assert not missing, "no mount at %s in /proc/self/mountinfo: %s" % (missing, opts)
    return {flag: {p: flag in o.split(",") for p, o in opts.items()} for flag in ("ro", "nosuid", "nodev")}


def assert_read_only_root(lang: str, res: ExecResult) -> None:
    """Judges RO_CODE's output: every write failed, and the mount flags say why (the
    sandbox user gets EACCES from root-owned paths even on a writable mount, so the
    errors alone cannot show a missing read-only remount)."""
    if lang == "bash":
        lines = tab_lines(res)
        flags = flags_from_options({k[len("mount "):]: v for k, v in lines.items() if k.startswith("mount ")})
        got = {k: errno_of(v) if v != "ok" else v for k, v in lines.items() if not k.startswith("mount ")}
    else:
        out = json_out(res)
        got = out["errors"]
        flags = out if lang == "python" else flags_from_options(out["opts"])
    want = {**{p: True for p in RO_MOUNTS}, **{p: False for p in RW_MOUNTS}}
    assert flags["ro"] == want, "read-only flags of the sandbox's mounts: %s" % flags["ro"]
    # no setuid binary can raise privileges, no device node can be used from the
    # writable or host-backed mounts
    assert all(flags["nosuid"].values()), "mounts without nosuid: %s" % flags["nosuid"]
    assert all(v for k, v in flags["nodev"].items() if k != "/dev"), "mounts without nodev: %s" % flags["nodev"]
    files, unlink = RO_FILES + [MAIN_FILE[lang]], RO_UNLINK + [MAIN_FILE[lang]]
    expected_keys = ({"write " + p for p in files} | {"mkdir " + p for p in RO_DIRS}
                     | {"unlink " + p for p in unlink})
    assert set(got) == expected_keys, got
    bad = {k: v for k, v in got.items() if v not in ("EROFS", "EACCES")}
    assert not bad, "writes that did not fail with EROFS/EACCES: %s" % bad


@pytest.mark.parametrize("lang", LANGS)
def test_root_filesystem_is_read_only(lang: str) -> None:
    assert_read_only_root(lang, run_ok(ro_code(lang), lang))


def test_root_filesystem_is_read_only_warm(service_url: str) -> None:
    """The same checks in a sandbox a warm template cloned (through the service)."""
    res = warm_exec(service_url, ro_code("python"))
    assert res["exit_code"] == 0, res
    assert_read_only_root("python", ExecResult(res))


TMPFS_MB = 8
SCRATCH_CODE = {
    "python": r'''
import errno, json, os
res = {}
chunk = b"\1" * (1 << 20)
for d in ("/tmp", "/home/sandbox"):
    with open(d + "/small.txt", "w") as f: f.write("hello " + d)
    with open(d + "/small.txt") as f: res[d + " small"] = f.read()
    written, err = 0, None
    try:
        for name in ("a", "b"):
            fd = os.open(d + "/" + name, os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                for _ in range(5):
                    written += os.write(fd, chunk)
            finally:
                os.close(fd)
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e.errno))
    res[d + " fill"] = [written, err]
    for name in ("a", "b"):
        try: os.unlink(d + "/" + name)
        except OSError: pass
    st = os.statvfs(d)
    res[d + " size"] = st.f_blocks * st.f_frsize
# one file beyond the cap: the tmpfs fills first (its size is also the file size limit,
# which test_file_size_limit shows where a filesystem is larger)
written, err = 0, None
try:
    with open("/tmp/big", "wb", buffering=0) as f:
        for _ in range(12):
            written += f.write(chunk)
except OSError as e:
    err = errno.errorcode.get(e.errno, str(e.errno))
res["big"] = [written, err]
print(json.dumps(res))
''',
    "javascript": r'''
const fs = require('fs');
const res = {};
const chunk = Buffer.alloc(1 << 20, 1);
for (const d of ['/tmp', '/home/sandbox']) {
  fs.writeFileSync(d + '/small.txt', 'hello ' + d);
  res[d + ' small'] = fs.readFileSync(d + '/small.txt', 'utf8');
  let written = 0, err = null;
  try {
    for (const name of ['a', 'b']) {
      const fd = fs.openSync(d + '/' + name, 'w');
      try { for (let i = 0; i < 5; i++) written += fs.writeSync(fd, chunk); } finally { fs.closeSync(fd); }
    }
  } catch (e) { err = e.code; }
  res[d + ' fill'] = [written, err];
  for (const name of ['a', 'b']) { try { fs.unlinkSync(d + '/' + name); } catch (e) {} }
}
console.log(JSON.stringify(res));
''',
    "bash": r'''
for d in /tmp /home/sandbox; do
  echo "hello $d" > "$d/small.txt" && echo "$d small	$(cat "$d/small.txt")"
  head -c 5M /dev/zero > "$d/a"; echo "$d a	$?"
  msg=$(head -c 5M /dev/zero 2>&1 > "$d/b"); echo "$d b	$?	$msg"
  echo "$d total	$(( $(stat -c %s "$d/a") + $(stat -c %s "$d/b") ))"
  rm -f "$d/a" "$d/b"
done
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_tmp_and_home_are_writable_and_capped(lang: str) -> None:
    res = run_ok(SCRATCH_CODE[lang], lang, settings={"SANDBOX_TMPFS_MB": str(TMPFS_MB)})
    cap = TMPFS_MB * MiB
    if lang == "bash":
        got = tab_lines(res)
        for d in ("/tmp", "/home/sandbox"):
            assert got[d + " small"] == "hello " + d, res.describe()
            assert got[d + " a"] == "0", res.describe()
            rc, _, msg = got[d + " b"].partition("\t")
            assert rc != "0" and errno_of(msg) in ("ENOSPC", "EFBIG"), res.describe()
            assert 5 * MiB < int(got[d + " total"]) <= cap, res.describe()
        return
    got = json_out(res)
    for d in ("/tmp", "/home/sandbox"):
        assert got[d + " small"] == "hello " + d, got
        written, err = got[d + " fill"]
        assert err in ("ENOSPC", "EFBIG"), "filling %s past %d MiB did not fail: %s" % (d, TMPFS_MB, got)
        assert 5 * MiB < written <= cap, got
        if lang == "python":
            assert got[d + " size"] == cap, "%s is not a %d MiB filesystem: %s" % (d, TMPFS_MB, got)
    if lang == "python":
        written, err = got["big"]
        assert err in ("ENOSPC", "EFBIG") and written <= cap, got


def test_nothing_persists_between_executions() -> None:
    m = marker()
    run_ok("echo x > /tmp/%s && echo x > ~/%s && echo written" % (m, m), "bash")
    res = run_ok("ls -A /tmp /home/sandbox; test -e /tmp/%s -o -e ~/%s && echo FOUND; true" % (m, m),
                 "bash")
    assert "FOUND" not in res.stdout and m not in res.stdout, res.describe()


# ---- network -------------------------------------------------------------------------------


@pytest.fixture
def host_listener() -> Iterator[socket.socket]:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    s.setblocking(False)
    yield s
    s.close()


def assert_no_connection_arrived(listener: socket.socket) -> None:
    try:
        conn, peer = listener.accept()
    except BlockingIOError:
        return
    conn.close()
    raise AssertionError("a connection from %s reached the host listener" % (peer,))


TCP_CODE = {
    "python": r'''
import errno, socket
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.settimeout(5)
try:
    s.connect(("127.0.0.1", PORT))
    print("CONNECTED")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e)))
''',
    "javascript": r'''
const net = require('net');
const c = net.connect({ host: '127.0.0.1', port: PORT });
c.setTimeout(5000, () => { console.log('TIMEOUT'); c.destroy(); });
c.on('connect', () => { console.log('CONNECTED'); c.destroy(); });
c.on('error', (e) => console.log(e.code));
''',
    "bash": r'''
if msg=$( { exec 3<>/dev/tcp/127.0.0.1/PORT; } 2>&1 ); then echo CONNECTED; else echo "$msg"; fi
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_host_loopback_listener_is_unreachable(lang: str, host_listener: socket.socket) -> None:
    port = host_listener.getsockname()[1]
    res = run_ok(TCP_CODE[lang].replace("PORT", str(port)), lang)
    answer = res.stdout.strip()
    if lang == "bash":
        answer = errno_of(answer) if answer != "CONNECTED" else answer
    assert answer == "ECONNREFUSED", "connecting to the host's 127.0.0.1:%d: %s" % (port, res.describe())
    assert_no_connection_arrived(host_listener)


def test_host_unix_sockets_are_unreachable() -> None:
    name = marker()
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind("\0" + name)
    abstract.listen(4)
    abstract.setblocking(False)
    tmpdir = tempfile.mkdtemp(prefix="hxs-iso-")
    path = os.path.join(tmpdir, "sock")
    filesock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    filesock.bind(path)
    filesock.listen(4)
    filesock.setblocking(False)
    try:
        code = r'''
import errno, json, socket
res = {}
for label, addr in (("abstract", "\0" + NAME), ("path", PATH)):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(addr); res[label] = "CONNECTED"
    except OSError as e:
        res[label] = errno.errorcode.get(e.errno, str(e))
print(json.dumps(res))
'''.replace("NAME", json.dumps(name)).replace("PATH", json.dumps(path))
        got = json_out(run_ok(code, "python"))
        assert got == {"abstract": "ECONNREFUSED", "path": "ENOENT"}, got
        assert_no_connection_arrived(abstract)
        assert_no_connection_arrived(filesock)
    finally:
        abstract.close()
        filesock.close()
        os.unlink(path)
        os.rmdir(tmpdir)


IFACE_CODE = {
    "python": r'''
import json, socket
with open("/proc/self/net/dev") as f:
    dev = [line.split(":")[0].strip() for line in f.readlines()[2:]]
with open("/proc/self/net/route") as f:
    routes = f.readlines()[1:]
print(json.dumps({"if_nameindex": sorted(n for _, n in socket.if_nameindex()), "dev": sorted(dev),
                  "route": routes}))
''',
    "javascript": r'''
const os = require('os');
console.log(JSON.stringify({ interfaces: Object.keys(os.networkInterfaces()).sort() }));
''',
    "bash": r'''
ip -o link | while read -r idx name rest; do echo "link	${name%:}"; done
ip route | sed 's/^/main4	/'
ip -6 route | sed 's/^/main6	/'
ip route show table all | sed 's/^/all4	/'
ip -6 route show table all | sed 's/^/all6	/'
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_only_loopback_network(lang: str) -> None:
    res = run_ok(IFACE_CODE[lang], lang)
    if lang == "python":
        got = json_out(res)
        assert got["if_nameindex"] == ["lo"] and got["dev"] == ["lo"], got
        assert got["route"] == [], "IPv4 routes in the main table: %s" % got
    elif lang == "javascript":
        assert json_out(res)["interfaces"] in ([], ["lo"]), res.describe()
    else:
        lines = [line.split("\t", 1) for line in res.stdout.splitlines()]
        links = [v for k, v in lines if k == "link"]
        assert links == ["lo"], res.describe()
        assert not [v for k, v in lines if k in ("main4", "main6") and "dev lo" not in v], res.describe()
        routes = [v for k, v in lines if k in ("all4", "all6")]
        assert routes, "no loopback routes at all: " + res.describe()
        assert all("dev lo" in v and not v.startswith("default") for v in routes), res.describe()


# ---- processes -------------------------------------------------------------------------------


@pytest.fixture
def host_sleeper() -> Iterator[Tuple[int, str]]:
    m = marker()
    proc = subprocess.Popen([m, "300"], executable="/bin/sleep", stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: processes_with(m), timeout=5.0), "the host sleep did not start"
        yield proc.pid, m
    finally:
        proc.kill()
        proc.wait(timeout=10)


PS_CODE = {
    "python": r'''
import errno, json, os
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
cmds = {}
for p in pids:
    try:
        with open("/proc/%d/cmdline" % p, "rb") as f:
            cmds[p] = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError as e:
        cmds[p] = "error %d" % e.errno
try:
    os.kill(HOSTPID, 0); kill = "ok"
except OSError as e:
    kill = errno.errorcode.get(e.errno, str(e))
print(json.dumps({"pids": pids, "cmds": cmds, "kill": kill}))
''',
    "javascript": r'''
const fs = require('fs');
const pids = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).map(Number).sort((a, b) => a - b);
const cmds = {};
for (const p of pids) {
  try { cmds[p] = fs.readFileSync('/proc/' + p + '/cmdline', 'latin1').split('\0').join(' '); }
  catch (e) { cmds[p] = 'error ' + e.code; }
}
let kill = 'ok';
try { process.kill(HOSTPID, 0); } catch (e) { kill = e.code; }
console.log(JSON.stringify({ pids, cmds, kill }));
''',
    "bash": r'''
for d in /proc/[0-9]*; do echo "pid	${d#/proc/}	$(tr '\0' ' ' < "$d/cmdline" 2>&1)"; done
if msg=$(kill -0 HOSTPID 2>&1); then echo "kill	ok"; else echo "kill	$msg"; fi
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_host_processes_are_invisible(lang: str, host_sleeper: Tuple[int, str]) -> None:
    host_pid, m = host_sleeper
    res = run_ok(PS_CODE[lang].replace("HOSTPID", str(host_pid)), lang)
    assert m not in res.stdout, "the sandbox sees the host process %d: %s" % (host_pid, res.describe())
    if lang == "bash":
        pids = [int(line.split("\t")[1]) for line in res.stdout.splitlines() if line.startswith("pid\t")]
        kill = errno_of(tab_lines(res)["kill"])
        limit = 6  # bash, its command substitutions and tr
    else:
        got = json_out(res)
        pids, kill = got["pids"], got["kill"]
        limit = 3
    assert 1 <= len(pids) <= limit, "the sandbox sees more than its own processes: %s" % res.describe()
    assert host_pid not in pids
    assert kill == "ESRCH", "signalling host pid %d: %s" % (host_pid, res.describe())


def test_other_sandboxes_are_invisible_and_unreachable() -> None:
    """A second sandbox running at the same time cannot see or connect to the first."""
    m = marker()
    port = 20000 + int(uuid.uuid4().hex[:4], 16) % 30000
    first_code = r'''
import os, socket
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.bind(("127.0.0.1", PORT))
s.listen(4)
os.set_inheritable(s.fileno(), True)
os.execv("/bin/sleep", [MARKER, "4"])
'''.replace("PORT", str(port)).replace("MARKER", json.dumps(m))
    box: Dict[str, ExecResult] = {}
    t = threading.Thread(target=lambda: box.setdefault("r", run_exec(first_code, "python", timeout=20)),
                         daemon=True)
    t.start()
    try:
        # argv[0]: our CLI carries the marker in its code argument
        assert wait_until(lambda: pids_named(m), timeout=10.0), "the first sandbox did not start"
        second = r'''
import errno, json, os, socket
cmds = []
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f: cmds.append(f.read().decode(errors="replace"))
        except OSError: pass
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.settimeout(5)
try:
    s.connect(("127.0.0.1", PORT)); conn = "CONNECTED"
except OSError as e:
    conn = errno.errorcode.get(e.errno, str(e))
print(json.dumps({"cmds": cmds, "connect": conn}))
'''.replace("PORT", str(port))
        res = run_ok(second, "python")
        assert m not in res.stdout, "the second sandbox sees the first: " + res.describe()
        assert json_out(res)["connect"] == "ECONNREFUSED", res.describe()
    finally:
        t.join(timeout=60)
    first = box.get("r")
    assert first is not None and first.exit_code == 0, first.describe() if first else "no result"


# ---- host files, environment, descriptors -------------------------------------------------------


@pytest.fixture
def host_secrets() -> Iterator[Tuple[str, List[str]]]:
    secret = "HXS-SECRET-" + uuid.uuid4().hex
    paths = []
    for d in ("/var/tmp", "/root", "/tmp"):
        if not os.path.isdir(d) or not os.access(d, os.W_OK):
            continue
        p = os.path.join(d, "hxs-iso-secret-" + uuid.uuid4().hex[:12])
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, secret.encode() + b"\n")
        os.close(fd)
        paths.append(p)
    assert paths, "no writable host directory for the secret file"
    try:
        yield secret, paths
    finally:
        for p in paths:
            os.unlink(p)


HOSTFILE_CODE = {
    "python": r'''
import errno, json
res = {}
for p in PATHS:
    try:
        with open(p, "rb") as f: res[p] = "READ " + f.read(300).decode(errors="replace")
    except OSError as e:
        res[p] = errno.errorcode.get(e.errno, str(e))
print(json.dumps(res))
''',
    "javascript": r'''
const fs = require('fs');
const res = {};
for (const p of PATHS) {
  try { res[p] = 'READ ' + fs.readFileSync(p, 'latin1').slice(0, 300); } catch (e) { res[p] = e.code; }
}
console.log(JSON.stringify(res));
''',
    "bash": r'''
for p in PATHS; do
  if out=$(head -c 300 "$p" 2>&1); then echo "$p	READ $out"; else echo "$p	$out"; fi
done
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_host_files_are_unreadable(lang: str, host_secrets: Tuple[str, List[str]]) -> None:
    secret, paths = host_secrets
    probes = list(paths) + ["/proc/1/root" + p for p in paths] + \
        ["/usr/.." + p for p in paths] + ["/etc/shadow", "/etc/gshadow", "/proc/1/environ",
                                         "/root/.bash_history", "/var/run/docker.sock"]
    code = HOSTFILE_CODE[lang]
    code = code.replace("PATHS", sh_words(probes) if lang == "bash" else json.dumps(probes))
    res = run_ok(code, lang)
    assert secret not in res.stdout and secret not in res.stderr, res.describe()
    got = tab_lines(res) if lang == "bash" else json_out(res)
    if lang == "bash":
        got = {k: errno_of(v) if not v.startswith("READ") else v for k, v in got.items()}
    assert set(got) == set(probes), res.describe()
    bad = {k: v for k, v in got.items() if v not in ("ENOENT", "EACCES")}
    assert not bad, "host paths that did not fail with ENOENT/EACCES: %s" % bad
    assert got["/etc/shadow"] == "ENOENT"


ENV_CODE = {
    "python": r'''
import json, os
with open("/proc/self/environ", "rb") as f: raw = f.read().decode(errors="replace")
print(json.dumps({"env": dict(os.environ), "proc": raw}))
''',
    "javascript": r'''
const fs = require('fs');
console.log(JSON.stringify({ env: process.env, proc: fs.readFileSync('/proc/self/environ', 'latin1') }));
''',
    "bash": r'''
env -0 | tr '\0' '\n' | grep -v '^_=' | sed 's/^/env	/'
tr '\0' '\n' < /proc/self/environ | sed 's/^/proc	/'
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_host_environment_does_not_leak(lang: str) -> None:
    secret_name = "HXS_SECRET_" + uuid.uuid4().hex[:12].upper()
    secret_value = "hxs-secret-value-" + uuid.uuid4().hex
    cli_env = dict(os.environ)
    cli_env[secret_name] = secret_value
    cli_env["AWS_SECRET_ACCESS_KEY"] = secret_value
    given = {"HXS_GIVEN": "given-" + uuid.uuid4().hex[:8], "WITH_SPACE": "a b=c 'q' $(x)"}
    res = run_ok(ENV_CODE[lang], lang, cli_env=cli_env, env_vars=given)
    assert secret_value not in res.stdout and secret_name not in res.stdout, res.describe()
    if lang == "bash":
        env = dict(line.split("\t", 1)[1].split("=", 1) for line in res.stdout.splitlines()
                   if line.startswith("env\t"))
        extra_ok = {"PWD", "SHLVL", "OLDPWD"}
    else:
        env = json_out(res)["env"]
        extra_ok = set()
    for k, v in given.items():
        assert env.get(k) == v, "env_vars %s=%r missing inside: %s" % (k, v, env)
    assert env.get("HOME") == "/home/sandbox", env
    assert env.get("MPLBACKEND") == "Agg", env  # matplotlib without a display
    assert env.get("PYTHONUNBUFFERED") == "1", env  # nothing printed is lost on a kill
    expected = {"PATH", "HOME", "LANG", "MPLBACKEND", "PYTHONUNBUFFERED"} | set(given)
    unexpected = set(env) - expected - extra_ok
    assert not unexpected, "variables inside the sandbox that nobody asked for: %s" % {
        k: env[k] for k in unexpected}


@pytest.mark.parametrize("lang", ["python", "bash"])
def test_host_descriptors_do_not_leak(lang: str, host_secrets: Tuple[str, List[str]]) -> None:
    secret, paths = host_secrets
    fd = os.open(paths[0], os.O_RDONLY)  # inheritable: the CLI gets it, the sandbox must not
    try:
        code = {
            "python": r'''
import json, os
fds = {}
for fd in sorted(os.listdir("/proc/self/fd"), key=int):
    try: fds[fd] = os.readlink("/proc/self/fd/" + fd)
    except OSError: fds[fd] = None  # the directory listing itself
try:
    got = os.read(FD, 100).decode(errors="replace")
except OSError as e:
    got = "error %d" % e.errno
print(json.dumps({"fds": fds, "read": got}))
'''.replace("FD", str(fd)),
            "bash": "ls -l /proc/self/fd | sed 1d; head -c 100 <&%d 2>&1; true" % fd,
        }[lang]
        res = run_ok(code, lang, pass_fds=(fd,))
    finally:
        os.close(fd)
    assert secret not in res.stdout and paths[0] not in res.stdout, res.describe()
    if lang == "python":
        fds = json_out(res)["fds"]
        assert set(fds) <= {"0", "1", "2", "3"}, fds
        assert fds["0"] == "/dev/null" and fds["1"].startswith("pipe:") and fds["2"].startswith("pipe:"), fds
        assert [v for k, v in fds.items() if int(k) > 2] in ([], [None]), fds


# ---- privileges and identity -------------------------------------------------------------------

IDENTITY_CODE = {
    "python": r'''
import json, os, pwd, socket
st = dict(l.rstrip("\n").split(":\t", 1) for l in open("/proc/self/status") if ":\t" in l)
maps = {m: [l.split() for l in open("/proc/self/" + m)] for m in ("uid_map", "gid_map")}
print(json.dumps({"status": st, "maps": maps, "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(),
                  "groups": os.getgroups(), "user": pwd.getpwuid(os.getuid()).pw_name,
                  "hostname": socket.gethostname(), "nodename": os.uname().nodename}))
''',
    "javascript": r'''
const fs = require('fs'), os = require('os');
const st = {};
for (const l of fs.readFileSync('/proc/self/status', 'utf8').split('\n')) {
  const i = l.indexOf(':\t'); if (i > 0) st[l.slice(0, i)] = l.slice(i + 2);
}
console.log(JSON.stringify({ status: st, uid: process.getuid(), euid: process.geteuid(), gid: process.getgid(),
  groups: process.getgroups(), user: os.userInfo().username, hostname: os.hostname(), nodename: os.hostname() }));
''',
    "bash": r'''
grep -E '^(Cap|NoNewPrivs|Seccomp)' /proc/self/status | sed 's/:\t/\t/; s/^/status\t/'
echo "uid	$(id -u)"; echo "euid	$(id -u)"; echo "gid	$(id -g)"; echo "groups	$(id -G)"
echo "user	$(whoami)"; echo "hostname	$(hostname)"; echo "nodename	$(uname -n)"
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_unprivileged_identity(lang: str) -> None:
    res = run_ok(IDENTITY_CODE[lang], lang)
    if lang == "bash":
        st, got = {}, {}
        for line in res.stdout.splitlines():
            parts = line.split("\t")
            if parts[0] == "status":
                st[parts[1]] = parts[2]
            else:
                got[parts[0]] = parts[1]
        got = {"status": st, "uid": int(got["uid"]), "euid": int(got["euid"]), "gid": int(got["gid"]),
               "groups": [int(g) for g in got["groups"].split()], "user": got["user"],
               "hostname": got["hostname"], "nodename": got["nodename"]}
    else:
        got = json_out(res)
    st = got["status"]
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(st[cap], 16) == 0, "%s is %s" % (cap, st[cap])
    assert st["NoNewPrivs"].strip() == "1", st
    assert st["Seccomp"].strip() == "2", st
    assert (got["uid"], got["euid"], got["gid"]) == (1000, 1000, 1000), got
    assert got["groups"] in ([1000], []), got
    assert got["user"] == "sandbox", got
    assert got["hostname"] == "sandbox" and got["nodename"] == "sandbox", got
    if lang == "python":
        # user namespace: only the sandbox's root and user are mapped, to unprivileged
        # host ids (never host root), one id each
        for name, lines in got["maps"].items():
            assert 1 <= len(lines) <= 2 and all(int(n) == 1 for _, _, n in lines), (name, lines)
            assert all(int(host) >= 1000 for _, host, _ in lines), (name, lines)


DEV_EXPECTED = {"null", "zero", "full", "random", "urandom", "fd", "stdin", "stdout", "stderr", "shm",
                "tty", "ptmx", "pts"}  # tty: no controlling terminal (ENXIO); ptmx, pts: its own devpts
DEV_CODE = {
    "python": r'''
import errno, json, os
res = {"dev": sorted(os.listdir("/dev"))}
try:
    open("/dev/tty", "rb"); res["tty"] = "opened"
except OSError as e:
    res["tty"] = errno.errorcode.get(e.errno, str(e))
with open("/dev/null", "w") as f: f.write("x")
with open("/dev/zero", "rb") as f: res["zero"] = f.read(4).hex()
with open("/dev/urandom", "rb") as f: res["urandom"] = len(f.read(16))
print(json.dumps(res))
''',
    "javascript": r'''
const fs = require('fs');
const res = { dev: fs.readdirSync('/dev').sort() };
try { fs.openSync('/dev/tty', 'r'); res.tty = 'opened'; } catch (e) { res.tty = e.code; }
console.log(JSON.stringify(res));
''',
    "bash": r'''
ls -A /dev | sed 's/^/dev	/'
if msg=$( { : < /dev/tty; } 2>&1 ); then echo "tty	opened"; else echo "tty	$msg"; fi
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_dev_is_minimal(lang: str) -> None:
    res = run_ok(DEV_CODE[lang], lang)
    if lang == "bash":
        dev = {line.split("\t", 1)[1] for line in res.stdout.splitlines() if line.startswith("dev\t")}
        tty = errno_of(tab_lines(res)["tty"])
    else:
        got = json_out(res)
        dev, tty = set(got["dev"]), got["tty"]
        if lang == "python":
            assert got["zero"] == "00000000" and got["urandom"] == 16, got
    assert dev == DEV_EXPECTED, "unexpected /dev entries: extra %s, missing %s" % (
        sorted(dev - DEV_EXPECTED), sorted(DEV_EXPECTED - dev))
    assert tty in ("ENOENT", "ENXIO"), "opening /dev/tty: %s" % tty


# ---- limits ------------------------------------------------------------------------------------

OOM_CODE = {
    "python": 'x = bytearray(b"\\1") * (200 << 20)\nprint("survived", len(x))\n',
    "javascript": "const b = Buffer.alloc(200 << 20, 1);\nconsole.log('survived', b.length);\n",
    "bash": "x=$(head -c 200M /dev/zero | tr '\\0' x)\necho survived ${#x}\n",
}


@pytest.mark.parametrize("lang", LANGS)
def test_memory_limit_kills_with_137(lang: str) -> None:
    res = run_exec(OOM_CODE[lang], lang, memory_mb=64, timeout=30)
    assert res.exit_code == 137 and res.oom_killed is True, res.describe()
    assert res.timed_out is False and "survived" not in res.stdout, res.describe()


def test_program_cannot_escape_the_oom_killer() -> None:
    # PID 1 is shielded from the OOM killer (-1000); the program it forks must not be
    # able to take that shield back
    code = r'''
try:
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("-1000")
    print("lowered to", open("/proc/self/oom_score_adj").read().strip(), flush=True)
except OSError as e:
    print("cannot lower:", e.errno, flush=True)
x = bytearray(b"\1") * (200 << 20)
print("survived", len(x))
'''
    res = run_exec(code, "python", memory_mb=64, timeout=20)
    assert "lowered" not in res.stdout, res.describe()
    assert res.exit_code == 137 and res.oom_killed is True, res.describe()


# RLIMIT_FSIZE is SANDBOX_TMPFS_MB, the size of /tmp and of home: there the filesystem
# fills before a file reaches the limit. /dev/shm is a fixed 16 MiB, so with a smaller
# SANDBOX_TMPFS_MB the limit itself answers (EFBIG, or SIGXFSZ for a program that does
# not ignore it).
FSIZE_MB = 4
FSIZE_CODE = {
    "python": r'''
import errno, json, os, resource
st = os.statvfs("/dev/shm")
written, err = 0, None
try:
    with open("/dev/shm/big", "wb", buffering=0) as f:
        for _ in range(8):
            written += f.write(b"\1" * (1 << 20))
except OSError as e:
    err = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps({"limit": resource.getrlimit(resource.RLIMIT_FSIZE), "written": written, "err": err,
                  "shm": st.f_blocks * st.f_frsize}))
''',
    "bash": r'''
echo "limit	$(ulimit -f)"
head -c 8M /dev/zero > /dev/shm/big 2>/dev/null; echo "rc	$?"
echo "size	$(stat -c %s /dev/shm/big)"
echo "shm	$(( $(stat -f -c '%b * %S' /dev/shm) ))"
''',
}


@pytest.mark.parametrize("lang", ["python", "bash"])
def test_file_size_limit(lang: str) -> None:
    res = run_ok(FSIZE_CODE[lang], lang, settings={"SANDBOX_TMPFS_MB": str(FSIZE_MB)})
    cap = FSIZE_MB * MiB
    if lang == "python":
        got = json_out(res)
        assert got["shm"] > cap, "/dev/shm is not larger than the file size limit, nothing to see: %s" % got
        assert got["limit"] == [cap, cap], got
        # Python ignores SIGXFSZ: the write that would pass the limit fails with EFBIG
        assert (got["written"], got["err"]) == (cap, "EFBIG"), got
    else:
        got = tab_lines(res)
        assert int(got["shm"]) > cap, res.describe()
        assert got["limit"] == str(cap // 1024), res.describe()  # ulimit -f counts KiB
        # head is killed by SIGXFSZ (128 + 25) when it passes the limit
        assert (got["rc"], got["size"]) == (str(128 + signal.SIGXFSZ), str(cap)), res.describe()


def test_tmpfs_pages_count_as_memory() -> None:
    """A /tmp larger than the memory limit: filling it gets the program OOM-killed at
    the memory limit (tmpfs pages are charged to the sandbox's cgroup), not the host's
    memory spent."""
    code = r'''
import os
fd = os.open("/tmp/fill", os.O_WRONLY | os.O_CREAT, 0o600)
chunk = b"\1" * (1 << 20)
for mib in range(1, 301):
    os.write(fd, chunk)
    print("wrote", mib, flush=True)
print("survived")
'''
    res = run_exec(code, "python", memory_mb=64, timeout=30, settings={"SANDBOX_TMPFS_MB": "512"})
    assert res.exit_code == 137 and res.oom_killed is True, res.describe()
    assert "survived" not in res.stdout, res.describe()
    wrote = [int(line.split()[1]) for line in res.stdout.splitlines() if line.startswith("wrote ")]
    assert wrote and 8 < wrote[-1] <= 64, "MiB written to /tmp before the kill: %s" % wrote[-1:]


# ---- seen from the host, while the program runs ----------------------------------------------

SLEEPER_CODE = r'''
import os, sys
print("warm" if "_hxs_zygote" in sys.modules else "cold", flush=True)
os.execv("/bin/sleep", [MARKER, "600"])
'''
CG_FILES = ["memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "memory.swappiness", "memory.max",
            "memory.swap.max", "cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.max", "pids.max"]


def host_view(pid: int) -> Dict:
    """What the host sees of a running sandbox program: its execution cgroups' limits
    and its PID 1."""
    dirs = cgroup_dirs(pid)
    files = {}
    for name in CG_FILES:
        ctrl = name.split(".")[0]
        text = read_proc(os.path.join(dirs[ctrl], name)) if ctrl in dirs else None
        files[name] = text.strip() if text is not None else None
    init = sandbox_init_of(pid)
    return {"pid": pid, "owner": engine_cgroup_owner(pid), "dirs": dirs, "files": files, "init": init,
            "init_status": proc_status(init) if init else {}}


def run_and_view(start: Callable[[str], Dict]) -> Tuple[Dict, Dict]:
    """start(code) runs SLEEPER_CODE and returns its result; meanwhile the host views
    the program (a sleep named after a fresh marker), then ends it with SIGTERM."""
    m = marker()
    box: Dict[str, object] = {}

    def target() -> None:
        try:
            box["res"] = start(SLEEPER_CODE.replace("MARKER", json.dumps(m)))
        except BaseException as e:  # handed to the test below
            box["err"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    try:
        wait_until(lambda: pids_named(m) or not t.is_alive(), timeout=60.0)
        pids = pids_named(m)
        assert len(pids) == 1, "the program did not start (or twice): %s, %s" % (pids, box)
        view = host_view(pids[0])
    finally:
        for pid in pids_named(m):  # only the sleep our program became
            os.kill(pid, signal.SIGTERM)
        t.join(timeout=90)
    if "err" in box:
        raise box["err"]  # type: ignore[misc]
    assert "res" in box, "the run did not finish after its program was ended"
    return box["res"], view  # type: ignore[return-value]


def host_has_swap() -> bool:
    return len((read_proc("/proc/swaps") or "").splitlines()) > 1


def assert_limits(view: Dict, memory_mb: int, cpus_milli: int, pids_max: int) -> None:
    f, dirs = view["files"], view["dirs"]
    mem = memory_mb * MiB
    if dirs.get("memory") == dirs.get(""):  # pure cgroup v2
        assert f["memory.max"] == str(mem), f
        assert f["memory.swap.max"] == "0" or (f["memory.swap.max"] is None and not host_has_swap()), \
            "the sandbox may swap: %s" % f
        assert f["cpu.max"] == "%d 100000" % (cpus_milli * 100), "CPU share: %s" % f
    else:
        assert f["memory.limit_in_bytes"] == str(mem), f
        # memory+swap equal to memory: no swap at all
        assert f["memory.memsw.limit_in_bytes"] == str(mem) or \
            (f["memory.memsw.limit_in_bytes"] is None and not host_has_swap()), "the sandbox may swap: %s" % f
        assert f["memory.swappiness"] == "0", f
        assert "cpu" in dirs, "no cpu cgroup: the CPU share is not enforced (%s)" % dirs
        assert (f["cpu.cfs_quota_us"], f["cpu.cfs_period_us"]) == (str(cpus_milli * 100), "100000"), \
            "CPU share: %s" % f
    assert f["pids.max"] == str(pids_max), f


def assert_init_hardened(view: Dict) -> None:
    """PID 1 of the sandbox (which the program cannot see) holds no privilege either."""
    st = view["init_status"]
    assert view["init"] and view["init"] != view["pid"] and st, "no PID 1 found for %s" % view
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(st[cap], 16) == 0, "PID 1's %s is %s" % (cap, st[cap])
    assert st["NoNewPrivs"] == "1", "PID 1's NoNewPrivs is %s" % st["NoNewPrivs"]
    assert st["Seccomp"] == "2", "PID 1's Seccomp is %s" % st["Seccomp"]
    assert "0" not in st["Uid"].split() and "0" not in st["Gid"].split(), \
        "PID 1 runs as host root: Uid %s, Gid %s" % (st["Uid"], st["Gid"])


def test_limits_and_pid1_seen_from_the_host() -> None:
    def start(code: str) -> Dict:
        return run_exec(code, "python", timeout=30, memory_mb=96,
                        settings={"SANDBOX_CPUS": "0.5", "SANDBOX_PIDS_MAX": "64"})

    res, view = run_and_view(start)
    assert (res["exit_code"], res["signal"], res["stdout"]) == (128 + signal.SIGTERM, signal.SIGTERM, "cold\n"), \
        res.describe()
    assert view["owner"] in CLI_PIDS, "not our CLI's sandbox: %s" % view
    assert_limits(view, memory_mb=96, cpus_milli=500, pids_max=64)
    assert_init_hardened(view)


def test_limits_and_pid1_seen_from_the_host_warm(service) -> None:
    warm_exec(service.url, "pass")  # the templates are ready

    def start(code: str) -> Dict:
        status, res = _post_exec(service.url, {"code": code, "language": "python", "timeout": 30,
                                               "memory_mb": 96})
        assert status == 200, (status, res)
        return res

    res, view = run_and_view(start)
    assert (res["exit_code"], res["signal"], res["stdout"]) == (128 + signal.SIGTERM, signal.SIGTERM, "warm\n"), res
    assert view["owner"] == service.proc.pid, "not the service's sandbox: %s" % view
    cpus = float(os.environ.get("SANDBOX_CPUS") or 1)
    pids_max = int(os.environ.get("SANDBOX_PIDS_MAX") or 256)
    assert_limits(view, memory_mb=96, cpus_milli=int(round(cpus * 1000)), pids_max=pids_max)
    assert_init_hardened(view)


PROC_SHOWN = {"self", "thread-self", "mounts", "net", "sysvipc", "uptime", "version", "sys",
              "cpuinfo", "meminfo", "stat", "loadavg", "swaps"}


def test_proc_shows_only_processes() -> None:
    # every other top-level entry (kcore, kallsyms, sysrq-trigger, ...) is masked: an
    # empty entry the sandbox user cannot open (tests/security/test_hostile_proc.py)
    code = r"""
import errno, json, os
res = {}
for e in os.listdir("/proc"):
    if e.isdigit() or e in @SHOWN@: continue
    try:
        if os.path.isdir("/proc/" + e): os.listdir("/proc/" + e)
        else: open("/proc/" + e, "rb").close()
        res[e] = "opened"
    except OSError as x: res[e] = errno.errorcode.get(x.errno, str(x.errno))
print(json.dumps(res))
""".replace("@SHOWN@", json.dumps(sorted(PROC_SHOWN)))
    got = json_out(run_ok(code, "python"))
    assert all(v == "EACCES" for v in got.values()), \
        "/proc shows more than processes and the sandbox's own files (sys, kcore, sysrq-trigger...): %s" % got


DAEMON_CODE = {
    "python": r'''
import os, time
def visible():
    for p in os.listdir("/proc"):
        if p.isdigit() and p != str(os.getpid()):
            try:
                with open("/proc/%s/cmdline" % p, "rb") as f:
                    if f.read().startswith(MARKER.encode()): return True
            except OSError: pass
    return False
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", [MARKER, "1000"])
    os._exit(0)
os.waitpid(pid, 0)
for _ in range(200):
    if visible(): break
    time.sleep(0.02)
print("daemon started" if visible() else "daemon missing", flush=True)
if STAY: time.sleep(1000)
''',
    "javascript": r'''
const { spawn } = require('child_process');
const c = spawn('/bin/sleep', ['1000'], { argv0: MARKER, detached: true, stdio: 'ignore' });
c.on('spawn', () => { console.log('daemon started'); c.unref(); if (STAY) setInterval(() => {}, 1000); });
''',
    "bash": r'''
export M=MARKER
setsid bash -c 'exec -a "$M" sleep 1000' </dev/null >/dev/null 2>&1 &
for i in $(seq 200); do pgrep -f "^$M" >/dev/null && break; sleep 0.02; done
pgrep -f "^$M" >/dev/null && echo "daemon started" || echo "daemon missing"
if [ STAY = 1 ]; then sleep 1000; fi
''',
}


def daemon_code(lang: str, m: str, stay: bool) -> str:
    code = DAEMON_CODE[lang]
    if lang == "bash":
        return code.replace("MARKER", shlex.quote(m)).replace("STAY", "1" if stay else "0")
    stay_lit = {"python": "True" if stay else "False", "javascript": "true" if stay else "false"}[lang]
    return code.replace("MARKER", json.dumps(m)).replace("STAY", stay_lit)


@pytest.mark.parametrize("lang", LANGS)
def test_time_limit_kills_daemonized_grandchild(lang: str) -> None:
    m = marker()
    res = run_exec(daemon_code(lang, m, stay=True), lang, timeout=3)
    assert res.exit_code == 124 and res.timed_out is True, res.describe()
    assert "daemon started" in res.stdout, res.describe()
    left = wait_until(lambda: not processes_with(m), timeout=5.0)
    assert left, "the daemon survived the time limit: %s" % processes_with(m)


def test_program_exit_kills_daemonized_grandchild() -> None:
    m = marker()
    res = run_ok(daemon_code("python", m, stay=False), "python", timeout=20)
    assert "daemon started" in res.stdout, res.describe()
    assert wait_until(lambda: not processes_with(m), timeout=5.0), \
        "the daemon outlived the program: %s" % processes_with(m)


FORK_BOMB_PY = r'''
import errno, os, time
n, err = 0, None
while n < 5000:
    try:
        pid = os.fork()
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e))
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    n += 1
print(n, err, flush=True)
'''


def assert_host_healthy_after(res: ExecResult) -> None:
    true = subprocess.run(["/bin/true"], timeout=30)
    assert true.returncode == 0, "the host cannot fork any more"
    pids = {res.cli_pid}
    assert wait_until(lambda: not leftover_cgroups(pids), timeout=5.0), \
        "execution cgroups left: %s" % leftover_cgroups(pids)
    assert wait_until(lambda: not leaked_sandbox_processes(pids), timeout=5.0), \
        "sandbox processes left: %s" % leaked_sandbox_processes(pids)


def test_fork_bomb_is_contained_python() -> None:
    res = run_ok(FORK_BOMB_PY, "python", timeout=25)
    n, err = res.stdout.split()
    assert err == "EAGAIN", res.describe()
    assert 8 < int(n) < 256, "forks before EAGAIN: %s (SANDBOX_PIDS_MAX is 256)" % n
    assert_host_healthy_after(res)


def test_fork_bomb_is_contained_bash() -> None:
    # only builtins after the bomb, so the main shell runs until the time limit
    code = ":(){ :|:& };:\nwhile true; do wait; done\n"
    res = run_exec(code, "bash", timeout=3, proc_timeout=60)
    assert res.exit_code == 124 and res.timed_out is True, res.describe()
    assert_host_healthy_after(res)


FLOOD_CODE = {
    "python": 'import sys\nsys.stdout.write("o" * (3 << 20))\nsys.stdout.flush()\nsys.stderr.write("e" * (3 << 20))\n',
    "javascript": "process.stdout.write('o'.repeat(3 << 20));\nprocess.stderr.write('e'.repeat(3 << 20));\n",
    "bash": "head -c 3M /dev/zero | tr '\\0' o\nhead -c 3M /dev/zero | tr '\\0' e >&2\n",
}


@pytest.mark.parametrize("lang", LANGS)
def test_output_flood_is_capped(lang: str) -> None:
    res = run_ok(FLOOD_CODE[lang], lang, timeout=20)
    assert res.stdout_truncated is True and res.stderr_truncated is True, res.describe()
    for text, ch, omitted in ((res.stdout, "o", res.stdout_omitted_bytes), (res.stderr, "e", res.stderr_omitted_bytes)):
        head, left_out, tail = split_kept(text)
        assert len(head) + len(tail) == MiB and set(head + tail) == {ch}, res.describe()
        assert left_out == omitted == (3 << 20) - MiB, res.describe()


def test_output_cap_is_configurable() -> None:
    res = run_ok(FLOOD_CODE["python"], "python", settings={"MAX_OUTPUT_BYTES": "4096"})
    assert kept_len(res.stdout) == 4096 and kept_len(res.stderr) == 4096, res.describe()
    assert res.stdout_truncated is True and res.stderr_truncated is True, res.describe()
    small = run_ok("print('x' * 100)", "python", settings={"MAX_OUTPUT_BYTES": "4096"})
    assert small.stdout == "x" * 100 + "\n" and small.stdout_truncated is False, small.describe()


def test_endless_output_is_not_buffered() -> None:
    code = "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n"
    res = run_exec(code, "python", timeout=2)
    # stopped by a limit: its time, or MAX_STREAM_BYTES, whichever comes first
    assert res.error and res.error["type"] in ("timeout", "output_limit"), res.describe()
    assert res.exit_code in (124, 137), res.describe()
    assert res.stdout_truncated is True and kept_len(res.stdout) == MiB, res.describe()
    # the CLI holds the capped output, not everything the program wrote
    assert res.cli_maxrss_kb < 128 * 1024, "the CLI grew to %d KiB" % res.cli_maxrss_kb


# ---- code delivery and stdin -------------------------------------------------------------------


def test_arbitrary_bytes_in_bash_code() -> None:
    odd = b"\xff\xfe q\"uo`te $(x) $HOME"
    script = (b"#!/bin/bash\necho start\n"
              b"# a comment with NUL \0 and invalid UTF-8 \xff\xfe\xc3\x28 and ` $(rm -rf /) \" '\n"
              b"s='" + odd + b"'\n"
              b"printf '%s' \"$s\" | od -An -tx1 | tr -d ' \\n'; echo\n"
              b"echo \"dq: \\$(echo no) \\`echo no\\` $(echo yes) `echo yes2`\"\n"
              b"echo 'sq: $(echo no) `echo no`'\n"
              b"echo end\n")
    res = run_ok(script, "bash", via="stdin")
    assert res.stdout == ("start\n%s\ndq: $(echo no) `echo no` yes yes2\nsq: $(echo no) `echo no`\nend\n"
                          % odd.hex()), res.describe()


def test_arbitrary_bytes_in_python_and_javascript_code() -> None:
    py = ("# -*- coding: latin-1 -*-\n# invalid UTF-8 in a comment: \xff\xfe\xc3\x28\n"
          "s = '\xff\xfe'\nq = \"\"\"it's \"quoted\" `tick` $(sub) ${x} \\\\ \"\"\"\n"
          "print(s.encode('latin-1').hex(), q)\n").encode("latin-1")
    res = run_ok(py, "python", via="stdin")
    assert res.stdout == "fffe it's \"quoted\" `tick` $(sub) ${x} \\ \n", res.describe()
    js = (b"// invalid UTF-8 in a comment: \xff\xfe\xc3\x28\n"
          b"const s = 'a\0b';\n"
          b"const q = `it's \"quoted\" \\`tick\\` $(sub) ${1 + 1}`;\n"
          b"console.log(s.length, s.charCodeAt(1), q);\n")
    res = run_ok(js, "javascript", via="stdin")
    assert res.stdout == "3 0 it's \"quoted\" `tick` $(sub) 2\n", res.describe()


@pytest.mark.parametrize("lang", LANGS)
def test_program_larger_than_argv_limit(lang: str) -> None:
    data = ("0123456789abcdef" * (2 * MiB // 16))
    digest = hashlib.sha256(data.encode()).hexdigest()
    code = {
        "python": 'DATA = "%s"\nimport hashlib\nwith open("/proc/self/cmdline", "rb") as f: n = len(f.read())\n'
                  'print(len(DATA), hashlib.sha256(DATA.encode()).hexdigest(), n)\n' % data,
        "javascript": 'const DATA = "%s";\nconst n = require("fs").readFileSync("/proc/self/cmdline").length;\n'
                      'console.log(DATA.length, require("crypto").createHash("sha256").update(DATA).digest("hex"), n);\n'
                      % data,
        "bash": ("# %s\n" % ("x" * 1000)) * (2 * MiB // 1003 + 1)
                + 'n=$(wc -c < /proc/$$/cmdline)\necho "%d %s $n"\n' % (len(data), digest),
    }[lang]
    assert len(code) > 2 * MiB > 128 * 1024
    res = run_ok(code, lang, via="stdin", timeout=30)
    length, got_digest, cmdline = res.stdout.split()
    assert (int(length), got_digest) == (len(data), digest), res.describe()
    assert int(cmdline) < 4096, "the code went through argv (%s bytes of cmdline)" % cmdline


STDIN_CODE = {
    "python": 'import json, os, sys\nprint(json.dumps({"data": sys.stdin.read(), "fd0": os.readlink("/proc/self/fd/0")}))\n',
    "javascript": "const fs = require('fs');\nconsole.log(JSON.stringify({ data: fs.readFileSync(0, 'utf8'), "
                  "fd0: fs.readlinkSync('/proc/self/fd/0') }));\n",
    "bash": 'if read -r line; then d="got:$line"; else d=""; fi\n'
            'printf \'{"data": "%s", "fd0": "%s"}\\n\' "$d" "$(readlink /proc/self/fd/0)"\n',
}


@pytest.mark.parametrize("lang", LANGS)
def test_stdin_is_dev_null(lang: str) -> None:
    # the CLI's own stdin carries data; the program must not see it
    got = json_out(run_ok(STDIN_CODE[lang], lang, via="arg", cli_stdin=b"host stdin data\n"))
    assert got == {"data": "", "fd0": "/dev/null"}, got


# ---- warm executions (service only) ----------------------------------------------------------
#
# `exec` is always cold; the service runs Python from warm templates, where the program
# is not exec'ed but returns into Python inside the new sandbox. Close-on-exec then does
# not close anything, so this checks what such a program holds.

WARM_PROBE = r'''
import json, os, struct, sys
warm = "_hxs_zygote" in sys.modules
fds = {}
for fd in sorted(os.listdir("/proc/self/fd"), key=int):
    try: fds[fd] = os.readlink("/proc/self/fd/" + fd)
    except OSError: fds[fd] = None  # the directory listing itself
forged = []
for fd, target in fds.items():
    if int(fd) > 2 and target and target.startswith("pipe:") and target not in (fds["1"], fds["2"]):
        try:
            os.write(int(fd), b"S" + struct.pack("i", 0))  # "exited with status 0"
            forged.append(fd)
        except OSError:
            pass
print(json.dumps({"warm": warm, "fds": fds, "forged": forged}), flush=True)
os._exit(3)
'''


def _post_exec(url: str, body: Dict) -> Tuple[int, Dict]:
    import http.client
    import re
    m = re.match(r"^http://([^/:]+):(\d+)/?$", url)
    assert m, "unsupported service URL %r" % url
    conn = http.client.HTTPConnection(m.group(1), int(m.group(2)), timeout=60)
    try:
        conn.request("POST", "/api/v1/exec", body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"{}")
    finally:
        conn.close()


WARM_FLAG = 'import sys as _hxs_sys\nprint("warm" if "_hxs_zygote" in _hxs_sys.modules else "cold", flush=True)\n'


def warm_exec(url: str, code: str, timeout: int = 20, **body: object) -> Dict:
    """Runs Python code through the service in a sandbox cloned by a warm template,
    retrying while the templates start. Returns the result, with the first stdout line
    (the warm flag this adds) removed."""
    deadline = time.monotonic() + 90
    while True:
        status, res = _post_exec(url, {"code": WARM_FLAG + code, "language": "python", "timeout": timeout,
                                       **body})
        assert status == 200, (status, res)
        first, _, rest = res.get("stdout", "").partition("\n")
        if first == "warm":
            res["stdout"] = rest
            return res
        if time.monotonic() > deadline:
            pytest.fail("no warm template became ready within 90 s (last result: %s)" % res)
        time.sleep(0.5)


def test_warm_program_holds_only_stdio_and_cannot_forge_its_result(service_url: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        status, res = _post_exec(service_url, {"code": WARM_PROBE, "language": "python", "timeout": 20})
        assert status == 200, (status, res)
        got = json.loads(res["stdout"].strip().splitlines()[-1]) if res.get("stdout", "").strip() else None
        if got and got["warm"]:
            break
        if time.monotonic() > deadline:
            pytest.fail("no warm template became ready within 60 s (last result: %s)" % res)
        time.sleep(0.5)
    # the program exited with 3 after writing "status 0" into every extra pipe it holds
    assert res["exit_code"] == 3, ("a warm program forged its result through inherited pipe(s) %s: "
                                   "reported %s; its descriptors: %s" % (got["forged"], res, got["fds"]))
    extra = {k: v for k, v in got["fds"].items() if int(k) > 2 and v is not None}
    assert not extra, "descriptors a warm program inherited besides stdio: %s" % extra


def test_engine_cgroup_parents_exist() -> None:
    """Sanity for the leak check at the end: it looks where the engine creates cgroups."""
    run_ok("pass", "python")
    assert engine_cgroup_parents(), "no hexr-sandbox cgroup directory found under our own cgroups"
