"""Hostile code, resources: bombs and floods stay inside their sandbox's limits.

Every attack goes through the service, warm and cold (fixture `svc`), in all three
languages. The services of this module run with small limits so that the attacks hit
them quickly (SERVICE_ENV below). Each test asserts that the attack was contained (the
limit answered: EAGAIN, ENOSPC, EMFILE, E2BIG, an OOM kill, a time-out, truncated
output) and conftest.py then checks that the service answers a normal request and that
the host has no leftover process, mount, cgroup or file. No absolute time is asserted.
"""

from __future__ import annotations

import json
import shlex
import threading
import time
from typing import Dict

import pytest

from _service import LANGS, MiB, Result, errname, fill, marker, processes_with, wait_until
from hxstest.output import kept_len, split_kept, without_kill_line

TMPFS_MB = 16
PIDS_MAX = 96
OUTPUT_MAX = 1 << 20
SERVICE_ENV = {"SANDBOX_TMPFS_MB": str(TMPFS_MB), "SANDBOX_PIDS_MAX": str(PIDS_MAX),
               "MAX_OUTPUT_BYTES": str(OUTPUT_MAX), "MAX_CONCURRENT": "2"}


def assert_gone(m: str) -> None:
    assert wait_until(lambda: not processes_with(m), 10.0), "processes outlived their sandbox: %s" % \
        processes_with(m)


FORK_BOMB = {
    "python": r'''
import errno, os, time
n, err = 0, None
while n < 5000:
    try:
        pid = os.fork()
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e)); break
    if pid == 0:
        time.sleep(60); os._exit(0)
    n += 1
print(n, err, flush=True)
''',
    "javascript": r'''
const { spawn } = require('child_process');
let n = 0, err = null;
for (let i = 0; i < 200 && !err; i++) {
  try {
    const c = spawn('/bin/sleep', ['60'], { stdio: 'ignore' });
    c.on('error', (e) => { err = err || e.code; });
    if (c.pid) n++;
  } catch (e) { err = e.code; }
}
setTimeout(() => { console.log(n, err); process.exit(0); }, 500);
''',
    "bash": ":(){ :|:& };:\nwhile true; do wait; done\n",
}


@pytest.mark.parametrize("lang", LANGS)
def test_fork_bomb_is_contained(svc, lang: str) -> None:
    timeout = 2 if lang == "bash" else 20
    res = svc.run(FORK_BOMB[lang], lang, timeout=timeout)
    if lang == "bash":  # only builtins after the bomb: the shell runs until the time limit
        assert res.exit_code == 124 and res.timed_out is True, res.describe()
        return
    assert res.exit_code == 0, res.describe()
    n, err = res.out.split()
    assert err == "EAGAIN", "the bomb did not hit the process limit: " + res.describe()
    assert 4 < int(n) < PIDS_MAX, "%s processes before EAGAIN (SANDBOX_PIDS_MAX=%d)" % (n, PIDS_MAX)


THREAD_SPIN = {
    "python": r'''
import os, threading
for _ in range(6):
    if os.fork() == 0:
        while True: pass
def spin():
    while True: pass
for _ in range(8):
    threading.Thread(target=spin, daemon=True).start()
print("spinning", flush=True)
spin()
''',
    "javascript": r'''
const { Worker } = require('worker_threads');
for (let i = 0; i < 6; i++) new Worker('for (;;) {}', { eval: true });
console.log('spinning');
for (;;) {}
''',
    "bash": r'''
for i in 1 2 3 4 5 6 7 8; do ( while :; do :; done ) & done
echo spinning
while :; do :; done
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_cpu_spin_in_many_threads_is_stopped_at_the_time_limit(svc, lang: str) -> None:
    res = svc.run(THREAD_SPIN[lang], lang, timeout=2)
    assert res.exit_code == 124 and res.timed_out is True, res.describe()


MEMORY_BOMB = {
    "python": 'x = bytearray(b"\\1") * (300 << 20)\nprint("survived", len(x))\n',
    "javascript": "const b = []; for (let i = 0; i < 30; i++) b.push(Buffer.alloc(10 << 20, 1));\n"
                  "console.log('survived', b.length);\n",
    "bash": "x=$(head -c 300M /dev/zero | tr '\\0' x)\necho survived ${#x}\n",
}


@pytest.mark.parametrize("lang", LANGS)
def test_memory_bomb_is_oom_killed(svc, lang: str) -> None:
    res = svc.run(MEMORY_BOMB[lang], lang, memory_mb=48, timeout=30)
    assert res.exit_code == 137 and res.oom_killed is True, res.describe()
    assert "survived" not in res.out and not res.timed_out, res.describe()


FILL_CODE = {
    "python": r'''
import errno, json, os
chunk = b"\1" * (1 << 20)
res = {}
for d in ("/tmp", "/home/sandbox", "/dev/shm"):
    written, err, i = 0, None, 0
    while err is None and written < (200 << 20):
        try:
            with open("%s/fill-%d" % (d, i), "wb") as f:
                for _ in range(4):
                    written += f.write(chunk)
        except OSError as e:
            err = errno.errorcode.get(e.errno, str(e.errno))
        i += 1
    res[d] = [written, err]
print(json.dumps(res))
''',
    "javascript": r'''
const fs = require('fs');
const chunk = Buffer.alloc(1 << 20, 1);
const res = {};
for (const d of ['/tmp', '/home/sandbox', '/dev/shm']) {
  let written = 0, err = null;
  for (let i = 0; err === null && written < (200 << 20); i++) {
    let fd;
    try {
      fd = fs.openSync(d + '/fill-' + i, 'w');
      for (let j = 0; j < 4; j++) written += fs.writeSync(fd, chunk);
    } catch (e) { err = e.code; }
    if (fd !== undefined) fs.closeSync(fd);
  }
  res[d] = [written, err];
}
console.log(JSON.stringify(res));
''',
    "bash": r'''
for d in /tmp /home/sandbox /dev/shm; do
  i=0; msg=
  while [ $i -lt 60 ]; do
    if ! msg=$(head -c 4M /dev/zero 2>&1 > "$d/fill-$i"); then break; fi
    msg=; i=$((i + 1))
  done
  printf 'fill\t%s\t%s\t%s\n' "$d" "$(find "$d" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')" "$msg"
done
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_tmpfs_fill_stops_at_the_cap(svc, lang: str) -> None:
    res = svc.run(FILL_CODE[lang], lang, timeout=30)
    assert res.exit_code == 0, res.describe()
    if lang == "bash":
        got = {}
        for row in res.tab_list("fill"):
            d, size, msg = row.split("\t")
            got[d] = [int(size), errname(msg) if msg else None]
    else:
        got = res.json()
    caps = {"/tmp": TMPFS_MB * MiB, "/home/sandbox": TMPFS_MB * MiB, "/dev/shm": 16 * MiB}
    for d, cap in caps.items():
        written, err = got[d]
        assert err in ("ENOSPC", "EFBIG"), "filling %s did not stop at its cap: %s" % (d, got)
        assert written <= cap, "%s took %d bytes, more than its %d cap" % (d, written, cap)


MANY_FILES = {
    "python": r'''
import errno, os
n, err = 0, None
while n < 100000:
    try:
        os.close(os.open("/tmp/f%d" % n, os.O_WRONLY | os.O_CREAT, 0o600)); n += 1
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e.errno)); break
print(n, err)
''',
    "javascript": r'''
const fs = require('fs');
let n = 0, err = null;
while (n < 100000) {
  try { fs.closeSync(fs.openSync('/tmp/f' + n, 'w')); n++; } catch (e) { err = e.code; break; }
}
console.log(n, err);
''',
    "bash": r'''
cd /tmp && msg=$(seq -f 'f%.0f' 0 99999 | xargs touch 2>&1 | head -1)
echo "$(ls -f | grep -c '^f') $msg"
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_many_small_files_hit_the_inode_cap(svc, lang: str) -> None:
    res = svc.run(MANY_FILES[lang], lang, timeout=30)
    assert res.exit_code == 0 and not res.timed_out, res.describe()
    n, _, err = res.out.strip().partition(" ")
    assert errname(err) == "ENOSPC", "100k files did not hit the tmpfs inode cap: " + res.describe()
    assert 1000 < int(n) < 100000, res.describe()


FLOOD = {
    "python": 'import sys\nfor _ in range(48):\n    sys.stdout.write("o" * 65536)\n    sys.stderr.write("e" * 65536)\n',
    "javascript": "for (let i = 0; i < 48; i++) { process.stdout.write('o'.repeat(65536)); "
                  "process.stderr.write('e'.repeat(65536)); }\n",
    "bash": "for i in 1 2 3; do head -c 1M /dev/zero | tr '\\0' o; head -c 1M /dev/zero | tr '\\0' e >&2; done\n",
}


@pytest.mark.parametrize("lang", LANGS)
def test_output_flood_on_both_streams_is_capped(svc, lang: str) -> None:
    res = svc.run(FLOOD[lang], lang, timeout=30)
    assert res.exit_code == 0, res.describe()
    assert res.stdout_truncated is True and res.stderr_truncated is True, res.describe()
    for text, ch in ((res.out, "o"), (res.err, "e")):
        head, left_out, tail = split_kept(text)
        assert len(head) + len(tail) == OUTPUT_MAX and set(head + tail) == {ch}, res.describe()
        assert left_out == 3 * OUTPUT_MAX - OUTPUT_MAX, res.describe()


def test_endless_output_is_capped_and_stopped(svc) -> None:
    code = "import os\nwhile True:\n    os.write(1, b'x' * 65536)\n    os.write(2, b'y' * 65536)\n"
    res = svc.run(code, "python", timeout=1)
    # stopped by a limit: its time, or MAX_STREAM_BYTES, whichever comes first
    assert res.exit_code in (124, 137) and res["error"]["type"] in ("timeout", "output_limit"), res.describe()
    assert kept_len(res.out) == OUTPUT_MAX, res.describe()
    # (the kill line starts a line of its own: the newline before it is ours)
    assert kept_len(without_kill_line(res.err).rstrip("\n")) == OUTPUT_MAX, res.describe()


DAEMON = {
    "python": r'''
import os, time
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", [@M@, "1000"])
    os._exit(0)
os.waitpid(pid, 0)
for _ in range(200):
    found = False
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                found = found or open("/proc/%s/cmdline" % p, "rb").read().startswith(@M@.encode())
            except OSError:
                pass
    if found: break
    time.sleep(0.02)
print("daemon started" if found else "daemon missing", flush=True)
''',
    "javascript": r'''
const { spawn } = require('child_process');
const c = spawn('/bin/sleep', ['1000'], { argv0: @M@, detached: true, stdio: 'ignore' });
c.on('spawn', () => { console.log('daemon started'); c.unref(); });
''',
    "bash": r'''
export M=@M@
setsid bash -c 'exec -a "$M" sleep 1000' </dev/null >/dev/null 2>&1 &
disown
for i in $(seq 200); do pgrep -f "^$M" >/dev/null && break; sleep 0.02; done
pgrep -f "^$M" >/dev/null && echo "daemon started" || echo "daemon missing"
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_daemon_does_not_outlive_its_program(svc, lang: str) -> None:
    m = marker()
    res = svc.run(fill(DAEMON[lang], lang, M=m), lang, timeout=20)
    assert res.exit_code == 0 and "daemon started" in res.out, res.describe()
    assert_gone(m)


IGNORE_TERM = {
    "python": r'''
import os, signal, time
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
    signal.signal(s, signal.SIG_IGN)
for _ in range(3):
    if os.fork() == 0:
        os.execv("/bin/sh", [@M@, "-c", "trap '' TERM INT HUP QUIT; while :; do sleep 1; done"])
print("ignoring", flush=True)
while True:
    time.sleep(1)
''',
    "javascript": r'''
const { spawn } = require('child_process');
for (const s of ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT']) process.on(s, () => {});
for (let i = 0; i < 3; i++)
  spawn('/bin/sh', ['-c', "trap '' TERM INT HUP QUIT; while :; do sleep 1; done"], { argv0: @M@, stdio: 'ignore' });
console.log('ignoring');
setInterval(() => {}, 1000);
''',
    "bash": r'''
trap '' TERM INT HUP QUIT
for i in 1 2 3; do (exec -a @M@ sh -c "trap '' TERM INT HUP QUIT; while :; do sleep 1; done") & done
echo ignoring
while :; do sleep 1; done
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_processes_ignoring_sigterm_are_killed_at_the_time_limit(svc, lang: str) -> None:
    m = marker()
    res = svc.run(fill(IGNORE_TERM[lang], lang, M=m), lang, timeout=3)
    assert res.exit_code == 124 and res.timed_out is True, res.describe()
    assert "ignoring" in res.out, res.describe()
    assert_gone(m)


RECURSION = {
    "python": "import sys\nsys.setrecursionlimit(10 ** 7)\ndef f(n):\n    return f(n + 1) + 1\nf(0)\n",
    "javascript": "function f(n) { return f(n + 1) + 1; }\ntry { f(0); } catch (e) { console.log(e.name); }\n"
                  "const g = (n) => [g(n + 1)];\ng(0);\n",
    "bash": "f() { f; }\nf\n",
}


@pytest.mark.parametrize("lang", LANGS)
def test_deep_recursion_ends_as_an_ordinary_result(svc, lang: str) -> None:
    # bash grows its frames until the memory limit, in CPU time that grows faster than the
    # limit (about 1 s for 16 MB, 4 s for 32 MB, 10 s for 64 MB on a quiet 2-core machine):
    # the smallest limit leaves a busy machine, with suites side by side, room before the
    # time limit
    res = svc.run(RECURSION[lang], lang, timeout=30, memory_mb=16 if lang == "bash" else 64)
    assert not res.timed_out and res.exit_code != 0, res.describe()
    if lang == "javascript":
        assert "RangeError" in res.out, res.describe()
    if res.signal is not None:
        # the C stack overflows (SIGSEGV, or SIGABRT), or the frames fill the memory
        # limit first (Python 3.11 frames and bash's live on the heap): an OOM kill
        assert res.signal in (6, 11) or (res.signal == 9 and res.oom_killed), res.describe()
        assert res.exit_code == 128 + res.signal, res.describe()


HUGE_ENV = {
    "python": r'''
import errno, json, os, subprocess
res = {}
def run(name, argv, env):
    try:
        r = subprocess.run(argv, env=env, capture_output=True)
        res[name] = "ran rc=%d" % r.returncode
    except OSError as e:
        res[name] = errno.errorcode.get(e.errno, str(e.errno))
run("one 200k variable", ["/bin/true"], {"BIG": "x" * (200 << 10)})
run("300 x 100k variables", ["/bin/true"], {"V%d" % i: "x" * (100 << 10) for i in range(300)})
run("100k arguments", ["/bin/true"] + ["a" * 40] * 100000, {})
run("normal afterwards", ["/bin/true"], {"SMALL": "1"})
print(json.dumps(res))
''',
    "javascript": r'''
const cp = require('child_process');
const res = {};
const run = (name, args, env) => {
  const r = cp.spawnSync('/bin/true', args, { env });
  res[name] = r.error ? r.error.code : 'ran rc=' + r.status;
};
run('one 200k variable', [], { BIG: 'x'.repeat(200 << 10) });
const many = {}; for (let i = 0; i < 300; i++) many['V' + i] = 'x'.repeat(100 << 10);
run('300 x 100k variables', [], many);
run('100k arguments', new Array(100000).fill('a'.repeat(40)), {});
run('normal afterwards', [], { SMALL: '1' });
console.log(JSON.stringify(res));
''',
    "bash": r'''
big=$(head -c 204800 /dev/zero | tr '\0' x)
if out=$(BIG=$big /bin/true 2>&1); then echo "r	one 200k variable	ran rc=0"; else echo "r	one 200k variable	$out"; fi
hundred=${big:0:102400}
for ((i = 0; i < 300; i++)); do export V$i=$hundred; done
if out=$(/bin/true 2>&1); then echo "r	300 x 100k variables	ran rc=0"; else echo "r	300 x 100k variables	$out"; fi
for ((i = 0; i < 300; i++)); do unset V$i; done
a40=${big:0:40}
if out=$(/bin/true $(printf "$a40 %.0s" $(seq 100000)) 2>&1); then echo "r	100k arguments	ran rc=0"; else echo "r	100k arguments	$out"; fi
if out=$(SMALL=1 /bin/true 2>&1); then echo "r	normal afterwards	ran rc=0"; else echo "r	normal afterwards	$out"; fi
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_exec_with_a_huge_environment_or_argv_fails_cleanly(svc, lang: str) -> None:
    res = svc.run(HUGE_ENV[lang], lang, timeout=30)
    assert res.exit_code == 0 and not res.timed_out, res.describe()
    if lang == "bash":
        got = {}
        for row in res.tab_list("r"):
            k, _, v = row.partition("\t")
            got[k] = v if v.startswith("ran") else errname(v)
    else:
        got = res.json()
    assert got["normal afterwards"] == "ran rc=0", got
    for k in ("one 200k variable", "300 x 100k variables", "100k arguments"):
        assert got[k] == "E2BIG", "%s: %s" % (k, got)


ENV_COUNT = {
    "python": "import os\nprint(sum(1 for k, v in os.environ.items() if k.startswith('HXS_V') and v == 'v' * 240))\n",
    "javascript": "console.log(Object.entries(process.env).filter(([k, v]) => k.startsWith('HXS_V') && v === 'v'.repeat(240)).length);\n",
    "bash": "want=$(printf 'v%.0s' {1..240}); n=0\nfor k in $(compgen -e); do [[ $k == HXS_V* && ${!k} == \"$want\" ]] && n=$((n+1)); done\necho $n\n",
}


@pytest.mark.parametrize("lang", LANGS)
def test_env_vars_up_to_the_api_limit(svc, lang: str) -> None:
    """MAX_ENV_VARS (256) variables totalling just under MAX_ENV_BYTES (64k) all arrive;
    one more variable, or more bytes, is a 400 naming env_vars, never a crash."""
    full = {"HXS_V%03d" % i: "v" * 240 for i in range(256)}
    assert sum(len(k) + len(v) + 2 for k, v in full.items()) <= 64 << 10
    res = svc.run(ENV_COUNT[lang], lang, env_vars=full)
    assert res.exit_code == 0 and res.out.strip() == "256", res.describe()
    over = dict(full, HXS_V999="v")
    res = svc.exec(ENV_COUNT[lang], lang, env_vars=over)
    assert res.status == 400 and "env_vars" in json.dumps(res), res.describe()
    fat = {"HXS_A": "a" * (40 << 10), "HXS_B": "b" * (40 << 10)}
    res = svc.exec(ENV_COUNT[lang], lang, env_vars=fat)
    assert res.status == 400 and "env_vars" in json.dumps(res), res.describe()


FD_EXHAUST = {
    "python": r'''
import errno, os
fds, err = [], None
while len(fds) < 100000:
    try:
        fds.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e.errno)); break
print(len(fds), err)
''',
    "javascript": r'''
const fs = require('fs');
const fds = []; let err = null;
while (fds.length < 100000) { try { fds.push(fs.openSync('/dev/null', 'r')); } catch (e) { err = e.code; break; } }
console.log(fds.length, err);
''',
    "bash": r'''
n=0
while [ $n -lt 100000 ] && exec {fd}</dev/null; do n=$((n + 1)); done
echo "$n"
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_descriptor_exhaustion_stops_at_the_limit(svc, lang: str) -> None:
    res = svc.run(FD_EXHAUST[lang], lang, timeout=30)
    assert res.exit_code == 0 and not res.timed_out, res.describe()
    n, _, err = res.out.strip().partition(" ")
    if lang == "bash":  # bash reports the failed redirection on stderr
        err = res.err
    assert errname(err) == "EMFILE", res.describe()
    assert 100 < int(n) <= 1024, res.describe()


CRASH = {
    "python": "import ctypes, resource\nprint(resource.getrlimit(resource.RLIMIT_CORE), flush=True)\nctypes.string_at(0)\n",
    "javascript": "console.log('aborting');\nprocess.abort();\n",
    "bash": "ulimit -c; ulimit -c unlimited 2>&1; kill -SEGV $$\n",
}


@pytest.mark.parametrize("lang", LANGS)
def test_crash_is_reported_and_dumps_no_core(svc, lang: str) -> None:
    res = svc.run(CRASH[lang], lang, timeout=20)
    want = 6 if lang == "javascript" else 11
    assert res.signal == want and res.exit_code == 128 + want, res.describe()
    if lang == "python":
        assert res.out.startswith("(0, 0)"), res.describe()
    if lang == "bash":
        assert res.out.startswith("0\n"), res.describe()
        assert "not permitted" in res.out or "cannot modify limit" in res.out, res.describe()
    after = svc.run("ls -A /home/sandbox /tmp | grep -c core || true", "bash")
    assert after.out.strip() == "0", after.describe()


CPU_BOMB_MARKED = {
    "python": r'''
import os
for _ in range(4):
    if os.fork() == 0:
        os.execv("/bin/sh", [@M@, "-c", "while :; do :; done"])
print("spinning", flush=True)
while True:
    pass
''',
    "javascript": r'''
const { spawn } = require('child_process');
for (let i = 0; i < 4; i++) spawn('/bin/sh', ['-c', 'while :; do :; done'], { argv0: @M@, stdio: 'ignore' });
console.log('spinning');
setTimeout(() => { for (;;) {} }, 10);
''',
    "bash": r'''
for i in 1 2 3 4; do (exec -a @M@ sh -c 'while :; do :; done') & done
echo spinning
while :; do :; done
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_service_answers_while_an_attack_runs(svc, lang: str) -> None:
    """With a CPU bomb running, another request is still answered correctly."""
    box: Dict[str, Result] = {}
    m = marker()
    attack = fill(CPU_BOMB_MARKED[lang], lang, M=m)
    t = threading.Thread(target=lambda: box.setdefault("r", svc.run(attack, lang, timeout=4)), daemon=True)
    t.start()
    try:
        assert wait_until(lambda: processes_with(m), 30.0), "the attack did not start"
        res = svc.run("echo normal $((6 * 7))", "bash", timeout=20)
        assert res.exit_code == 0 and res.out == "normal 42\n", res.describe()
        assert processes_with(m), "the attack was over before the normal request was answered"
    finally:
        t.join(timeout=120)
    assert box["r"].timed_out is True, box["r"].describe()
    assert_gone(m)
