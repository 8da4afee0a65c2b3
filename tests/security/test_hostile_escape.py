"""Hostile code, escape and host access: every attack runs through the service.

Each test runs attack code in every language where the attack applies (Python,
JavaScript, Bash), through a service in warm and in cold mode (fixture `svc`,
conftest.py), and asserts that the attack failed; conftest.py then checks that the
service still answers normally and that the host has nothing left over.

Raw system calls are made from Python (ctypes) and from Bash (through perl's
syscall(), as shell scripts do); Node.js has no raw syscall interface, so those cases
have no JavaScript variant, but every case that a binary can carry out (mount,
unshare, strace, setarch, insmod, ...) is also driven from JavaScript's child_process.
Probes are non-destructive: files are opened for writing without writing, device
nodes or mounts that an attack managed to create are removed again.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import stat
from pathlib import Path
from typing import Dict, List

import pytest

from _service import LANGS, Result, errname, fill, sandbox_bin
from test_syscall_probe import DELIVERY, ProbeRun, probe_path

DENIED = ("ENOENT", "EACCES")
PY_SYSCALL = r'''
import ctypes, errno, os
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    conv = [a if isinstance(a, (bytes, ctypes.Array)) else ctypes.c_void_p(None) if a is None
            else ctypes.c_long(a) for a in args]
    ctypes.set_errno(0)
    r = _libc.syscall(ctypes.c_long(nr), *conv)
    if r >= 0:
        return "ok:%d" % r
    return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
'''
# perl's syscall() for Bash: prints "ok:RET" or the errno number, mapped on the host
PERL_SC = r'''sc() { perl -e 'my @a = map { /^-?\d+$/ ? $_ + 0 : $_ } @ARGV; my $n = shift @a; my $r = syscall($n, @a); print $r == -1 ? ($! + 0) : "ok:$r"' -- "$@"; }'''


def perl_errno(v: str) -> str:
    v = v.strip()
    if v.isdigit():
        return errno.errorcode.get(int(v), v)
    return v


def tab_rows(res: Result, key: str) -> Dict[str, str]:
    """Lines "key<TAB>name<TAB>value" as {name: value}."""
    out = {}
    for row in res.tab_list(key):
        name, _, value = row.partition("\t")
        out[name] = value
    return out


# ---- host files --------------------------------------------------------------------------

READ_CODE = {
    "python": r'''
import errno, json, os
def probe(p):
    try:
        if os.path.isdir(p):
            return "LIST " + " ".join(sorted(os.listdir(p))[:30])
        with open(p, "rb") as f:
            return "READ " + f.read(200).decode(errors="replace")
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps({"paths": {p: probe(p) for p in @PATHS@}, "root": sorted(os.listdir("/"))}))
''',
    "javascript": r'''
const fs = require('fs');
function probe(p) {
  try {
    if (fs.statSync(p).isDirectory()) return 'LIST ' + fs.readdirSync(p).sort().slice(0, 30).join(' ');
    return 'READ ' + fs.readFileSync(p, 'latin1').slice(0, 200);
  } catch (e) { return e.code; }
}
const paths = {};
for (const p of @PATHS@) paths[p] = probe(p);
console.log(JSON.stringify({ paths, root: fs.readdirSync('/').sort() }));
''',
    "bash": r'''
for p in @PATHS@; do
  if [ -d "$p" ]; then
    if out=$(ls -A -- "$p" 2>&1); then v="LIST $(echo "$out" | head -30 | tr '\n' ' ')"; else v=$out; fi
  elif out=$(head -c 200 -- "$p" 2>&1 | tr '\n\t' '  '; exit "${PIPESTATUS[0]}"); then v="READ $out"
  else v=$out; fi
  printf 'path\t%s\t%s\n' "$p" "$v"
done
printf 'root\t%s\n' "$(ls -A / | sort | tr '\n' ' ')"
''',
}

SANDBOX_ROOT = {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "dev", "proc", "tmp",
                "home", "code", "sys", "var", "run"}


def read_probe(svc, lang: str, paths: List[str]) -> Dict:
    res = svc.run(fill(READ_CODE[lang], lang, PATHS=paths), lang)
    assert res.exit_code == 0, res.describe()
    for s in (svc.secret_value, svc.file_secret):
        assert s not in res.out and s not in res.err, "a service secret leaked: " + res.describe()
    if lang == "bash":
        got = {k: (v if v.startswith(("LIST", "READ")) else errname(v)) for k, v in tab_rows(res, "path").items()}
        root = set(res.tabs()["root"].split())
    else:
        data = res.json()
        got, root = data["paths"], set(data["root"])
    assert set(got) == set(paths), res.describe()
    return {"paths": got, "root": root, "res": res}


@pytest.mark.parametrize("lang", LANGS)
def test_host_files_are_unreadable(svc, lang: str) -> None:
    binary = os.path.realpath(sandbox_bin())
    paths = [binary, os.path.dirname(binary), svc.secret_file, svc.state_dir, svc.workdir,
             str(Path(__file__).resolve().parents[2]), "/root", "/root/.bashrc", "/root/.ssh/id_rsa",
             "/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/var/log", "/var/run/docker.sock",
             "/run", "/srv", "/opt", "/boot", "/mnt", "/media", "/work", "/proc/1/environ",
             "/usr/../root", "/home/sandbox/../../root", "/../../../../etc/shadow"]
    got = read_probe(svc, lang, paths)
    # the sandbox's own /run holds its own /run/lock and nothing else
    bad = {p: v for p, v in got["paths"].items() if v not in DENIED and not (p == "/run" and v.split() == ["LIST", "lock"])}
    assert not bad, "host paths the sandbox could open (want ENOENT/EACCES): %s" % bad
    assert got["root"] <= SANDBOX_ROOT, "the sandbox's / has host entries: %s" % sorted(got["root"] - SANDBOX_ROOT)


PROC_ESCAPE = {
    "python": r'''
import errno, json, os
def probe(p):
    try:
        if os.path.isdir(p):
            return "LIST " + " ".join(sorted(os.listdir(p)))
        with open(p, "rb") as f:
            return "READ " + f.read(100).decode(errors="replace")
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
res = {p: probe(p) for p in @PATHS@}
res["slash"] = probe("/")
res["readlink-root"] = os.readlink("/proc/self/root")
os.chdir("/")
for _ in range(30):
    os.chdir("..")
res["dotdot"] = os.getcwd() + " " + probe(".")
print(json.dumps(res))
''',
    "javascript": r'''
const fs = require('fs');
function probe(p) {
  try {
    if (fs.statSync(p).isDirectory()) return 'LIST ' + fs.readdirSync(p).sort().join(' ');
    return 'READ ' + fs.readFileSync(p, 'latin1').slice(0, 100);
  } catch (e) { return e.code; }
}
const res = {};
for (const p of @PATHS@) res[p] = probe(p);
res.slash = probe('/');
res['readlink-root'] = fs.readlinkSync('/proc/self/root');
process.chdir('/');
for (let i = 0; i < 30; i++) process.chdir('..');
res.dotdot = process.cwd() + ' ' + probe('.');
console.log(JSON.stringify(res));
''',
    "bash": r'''
probe() {
  if [ -d "$1" ]; then
    if out=$(ls -A -- "$1" 2>&1); then echo "LIST $(echo "$out" | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//')"; else echo "$out"; fi
  elif out=$(head -c 100 -- "$1" 2>&1); then echo "READ $out"; else echo "$out"; fi
}
for p in @PATHS@; do printf 'path\t%s\t%s\n' "$p" "$(probe "$p" | tr '\t' ' ')"; done
printf 'path\tslash\t%s\n' "$(probe /)"
printf 'path\treadlink-root\t%s\n' "$(readlink /proc/self/root)"
cd /; for i in $(seq 30); do cd ..; done
printf 'path\tdotdot\t%s %s\n' "$(pwd -P)" "$(probe .)"
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_proc_root_and_dotdot_do_not_leave_the_sandbox(svc, lang: str) -> None:
    hidden = ["/proc/1/root", "/proc/1/root/etc/shadow", "/proc/1/cwd", "/proc/1/exe", "/proc/1/mem",
              "/proc/%d/root" % svc.pid, "/proc/%d/cwd" % svc.pid] + \
             ["/proc/%d/root" % p for p in svc.template_pids()]
    same_as_root = ["/proc/self/root/../../..", "/proc/self/cwd/../../../..", "/proc/self/root/.."]
    res = svc.run(fill(PROC_ESCAPE[lang], lang, PATHS=hidden + same_as_root), lang)
    assert res.exit_code == 0, res.describe()
    if lang == "bash":
        got = tab_rows(res, "path")
        got = {k: (v if v.startswith(("LIST", "READ")) or k in ("slash", "readlink-root", "dotdot") else errname(v))
               for k, v in got.items()}
    else:
        got = res.json()
    slash = got["slash"]
    assert slash.startswith("LIST ") and set(slash.split()[1:]) <= SANDBOX_ROOT, got
    bad = {p: got[p] for p in hidden if got[p] not in DENIED}
    assert not bad, "another root reachable through /proc: %s" % bad
    bad = {p: got[p] for p in same_as_root if got[p] != slash}
    assert not bad, "'..' above the sandbox's root shows something else than its root (%s): %s" % (slash, bad)
    assert got["readlink-root"] == "/", got
    assert got["dotdot"] == "/ " + slash, got


PIDS_CODE = {
    "python": r'''
import errno, json, os
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
cmds = {}
for p in pids:
    try:
        with open("/proc/%d/cmdline" % p, "rb") as f:
            cmds[p] = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError as e:
        cmds[p] = "error " + errno.errorcode.get(e.errno, "?")
kill, status = {}, {}
for t in @TARGETS@:
    try:
        os.kill(t, 0); kill[t] = "ok"
    except OSError as e:
        kill[t] = errno.errorcode.get(e.errno, str(e.errno))
    try:
        open("/proc/%d/status" % t).close(); status[t] = "ok"
    except OSError as e:
        status[t] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps({"pids": pids, "cmds": cmds, "kill": kill, "status": status}))
''',
    "javascript": r'''
const fs = require('fs');
const pids = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).map(Number).sort((a, b) => a - b);
const cmds = {}, kill = {}, status = {};
for (const p of pids) {
  try { cmds[p] = fs.readFileSync('/proc/' + p + '/cmdline', 'latin1').split('\0').join(' '); }
  catch (e) { cmds[p] = 'error ' + e.code; }
}
for (const t of @TARGETS@) {
  try { process.kill(t, 0); kill[t] = 'ok'; } catch (e) { kill[t] = e.code; }
  try { fs.readFileSync('/proc/' + t + '/status'); status[t] = 'ok'; } catch (e) { status[t] = e.code; }
}
console.log(JSON.stringify({ pids, cmds, kill, status }));
''',
    "bash": r'''
for d in /proc/[0-9]*; do printf 'pid\t%s\t%s\n' "${d#/proc/}" "$(tr '\0' ' ' < "$d/cmdline" 2>&1)"; done
for t in @TARGETS@; do
  if msg=$(kill -0 "$t" 2>&1); then printf 'kill\t%s\tok\n' "$t"; else printf 'kill\t%s\t%s\n' "$t" "$msg"; fi
  if msg=$(head -c1 "/proc/$t/status" 2>&1 >/dev/null); then printf 'status\t%s\tok\n' "$t"; else printf 'status\t%s\t%s\n' "$t" "$msg"; fi
done
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_host_processes_are_invisible(svc, lang: str) -> None:
    """The service's pid, its templates and the host's pid 1 are neither visible nor
    reachable with signals."""
    targets = [svc.pid] + svc.template_pids()
    assert all(t > 64 for t in targets), "host pids too small to tell apart from sandbox pids: %s" % targets
    res = svc.run(fill(PIDS_CODE[lang], lang, TARGETS=targets), lang)
    assert res.exit_code == 0, res.describe()
    if lang == "bash":
        cmds = tab_rows(res, "pid")
        kill = {k: errname(v) if v != "ok" else v for k, v in tab_rows(res, "kill").items()}
        status = {k: errname(v) if v != "ok" else v for k, v in tab_rows(res, "status").items()}
        pids = sorted(int(p) for p in cmds)
    else:
        data = res.json()
        cmds, kill, status, pids = data["cmds"], data["kill"], data["status"], data["pids"]
    assert 1 not in pids, "pid 1 (the sandbox's init, a copy of its creator) is visible: %s" % cmds
    assert pids and all(p < 64 for p in pids) and len(pids) <= 6, "the sandbox sees other processes: %s" % cmds
    text = " ".join(cmds.values())
    # (a warm program's own command line is the template's: see test_hostile_leaks)
    for needle in ("hexr-sandbox", svc.url.split("//")[-1], "_hxs_zygote.so"):
        assert needle not in text, "a visible process shows %r: %s" % (needle, cmds)
    assert all(v == "ESRCH" for v in kill.values()) and len(kill) == len(targets), \
        "signalling host pids %s: %s" % (targets, kill)
    assert all(v == "ENOENT" for v in status.values()), "host /proc entries: %s" % status
    with open("/proc/1/cmdline", "rb") as f:
        host_init = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    assert not host_init or host_init not in cmds.values(), "the host's init is visible: %s" % cmds


SYS_CODE = {
    "python": r'''
import errno, json, os
res = {}
for p in @PATHS@:
    try:
        fd = os.open(p, os.O_WRONLY)  # no O_CREAT, no O_TRUNC: nothing is written
        os.close(fd); res[p] = "OPENED"
    except OSError as e:
        res[p] = errno.errorcode.get(e.errno, str(e.errno))
for d in ("/sys", "/sys/fs", "/proc/sys"):
    try:
        os.mkdir(d); res["mkdir " + d] = "CREATED"; os.rmdir(d)
    except OSError as e:
        res["mkdir " + d] = errno.errorcode.get(e.errno, str(e.errno))
res["exists /sys"] = os.path.exists("/sys")
print(json.dumps(res))
''',
    "javascript": r'''
const fs = require('fs');
const res = {};
for (const p of @PATHS@) {
  try { fs.closeSync(fs.openSync(p, 'r+')); res[p] = 'OPENED'; } catch (e) { res[p] = e.code; }
}
for (const d of ['/sys', '/sys/fs', '/proc/sys']) {
  try { fs.mkdirSync(d); res['mkdir ' + d] = 'CREATED'; fs.rmdirSync(d); } catch (e) { res['mkdir ' + d] = e.code; }
}
res['exists /sys'] = fs.existsSync('/sys');
console.log(JSON.stringify(res));
''',
    "bash": r'''
for p in @PATHS@; do
  # append mode without writing: nothing is truncated or written
  if msg=$( (exec 3>>"$p") 2>&1); then printf 'r\t%s\tOPENED\n' "$p"; else printf 'r\t%s\t%s\n' "$p" "$msg"; fi
done
for d in /sys /sys/fs /proc/sys; do
  if msg=$(mkdir "$d" 2>&1); then printf 'r\tmkdir %s\tCREATED\n' "$d"; rmdir "$d"; else printf 'r\tmkdir %s\t%s\n' "$d" "$msg"; fi
done
if [ -e /sys ]; then printf 'r\texists /sys\ttrue\n'; else printf 'r\texists /sys\tfalse\n'; fi
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_no_sys_and_no_kernel_knobs(svc, lang: str) -> None:
    paths = ["/sys/kernel/uevent_helper", "/sys/fs/cgroup/cgroup.procs", "/sys/class/net/lo/mtu",
             "/sys/power/state", "/proc/sys/kernel/core_pattern", "/proc/sys/kernel/hostname",
             "/proc/sys/vm/drop_caches", "/proc/sysrq-trigger", "/proc/sys/kernel/modprobe",
             "/proc/self/../sys/kernel/core_pattern", "/proc/1/oom_score_adj"]
    res = svc.run(fill(SYS_CODE[lang], lang, PATHS=paths), lang)
    assert res.exit_code == 0, res.describe()
    if lang == "bash":
        got = {k: (v if v in ("OPENED", "CREATED", "true", "false") else errname(v))
               for k, v in tab_rows(res, "r").items()}
        got["exists /sys"] = got["exists /sys"] == "true"
    else:
        got = res.json()
    # /sys is the sandbox's own few files, not sysfs (test_hostile_proc.py): it exists
    got.pop("exists /sys")
    # /proc/self/setgroups exists but is not writable by the sandbox user
    bad = {k: v for k, v in got.items()
           if v not in ("ENOENT", "EACCES", "EROFS", "EPERM") and not (k.startswith("mkdir ") and v == "EEXIST")}
    assert not bad, "kernel knobs the sandbox could open for writing or create: %s" % bad


DEV_CODE = {
    "python": r'''
import errno, json, os, stat
res = {"dev": sorted(os.listdir("/dev")), "open": {}, "mknod": {}}
for p in @DEVICES@:
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK); os.close(fd); res["open"][p] = "OPENED"
    except OSError as e:
        res["open"][p] = errno.errorcode.get(e.errno, str(e.errno))
for d in ("/tmp", "/home/sandbox", "/dev/shm", "/dev"):
    for kind, mode, dev in (("mem", stat.S_IFCHR, os.makedev(1, 1)), ("kmsg", stat.S_IFCHR, os.makedev(1, 11)),
                            ("disk", stat.S_IFBLK, os.makedev(254, 0))):
        p = "%s/hxs-%s" % (d, kind)
        try:
            os.mknod(p, mode | 0o600, dev)
            res["mknod"][p] = "CREATED"
            try:
                os.close(os.open(p, os.O_RDONLY)); res["mknod"][p] += " OPENED"
            except OSError as e:
                res["mknod"][p] += " " + errno.errorcode.get(e.errno, "?")
            os.unlink(p)
        except OSError as e:
            res["mknod"][p] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(res))
''',
    "javascript": r'''
const fs = require('fs'), cp = require('child_process');
const res = { dev: fs.readdirSync('/dev').sort(), open: {}, mknod: {} };
for (const p of @DEVICES@) {
  try { fs.closeSync(fs.openSync(p, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK)); res.open[p] = 'OPENED'; }
  catch (e) { res.open[p] = e.code; }
}
for (const d of ['/tmp', '/home/sandbox', '/dev/shm', '/dev']) {
  for (const [kind, type, maj, min] of [['mem', 'c', '1', '1'], ['kmsg', 'c', '1', '11'], ['disk', 'b', '254', '0']]) {
    const p = d + '/hxs-' + kind;
    const r = cp.spawnSync('mknod', [p, type, maj, min], { encoding: 'utf8' });
    if (r.status === 0) { res.mknod[p] = 'CREATED'; fs.unlinkSync(p); }
    else res.mknod[p] = (r.stderr || String(r.error)).trim();
  }
}
console.log(JSON.stringify(res));
''',
    "bash": r'''
for e in $(ls -A /dev); do printf 'dev\t%s\n' "$e"; done
for p in @DEVICES@; do
  if msg=$( (exec 3<"$p") 2>&1); then printf 'open\t%s\tOPENED\n' "$p"; else printf 'open\t%s\t%s\n' "$p" "$msg"; fi
done
for d in /tmp /home/sandbox /dev/shm /dev; do
  for spec in "mem c 1 1" "kmsg c 1 11" "disk b 254 0"; do
    set -- $spec
    p="$d/hxs-$1"
    if msg=$(mknod "$p" "$2" "$3" "$4" 2>&1); then printf 'mknod\t%s\tCREATED\n' "$p"; rm -f "$p"
    else printf 'mknod\t%s\t%s\n' "$p" "$msg"; fi
  done
done
''',
}
# tty (the caller's controlling terminal: it has none), ptmx and pts (its own devpts) are the
# sandbox's own: test_hostile_proc.py
DEV_ALLOWED = {"null", "zero", "full", "random", "urandom", "fd", "stdin", "stdout", "stderr", "shm",
               "tty", "ptmx", "pts"}
DEVICES = ["/dev/mem", "/dev/kmem", "/dev/port", "/dev/kmsg", "/dev/sda", "/dev/vda", "/dev/nvme0n1",
           "/dev/console", "/dev/tty0", "/dev/net/tun", "/dev/fuse", "/dev/kvm", "/dev/loop0",
           "/dev/loop-control", "/dev/userfaultfd", "/dev/hpet", "/dev/rtc0", "/dev/dri/card0",
           "/dev/input/event0", "/dev/watchdog", "/dev/cpu/0/msr", "/dev/vsock", "/dev/vhost-net"]


@pytest.mark.parametrize("lang", LANGS)
def test_device_nodes_absent_and_mknod_fails(svc, lang: str) -> None:
    res = svc.run(fill(DEV_CODE[lang], lang, DEVICES=DEVICES), lang)
    assert res.exit_code == 0, res.describe()
    if lang == "bash":
        dev = set(res.tab_list("dev"))
        opened = {k: errname(v) if v != "OPENED" else v for k, v in tab_rows(res, "open").items()}
        mknod = tab_rows(res, "mknod")
    else:
        data = res.json()
        dev, opened, mknod = set(data["dev"]), data["open"], data["mknod"]
    assert dev <= DEV_ALLOWED, "device entries beyond the minimal /dev: %s" % sorted(dev - DEV_ALLOWED)
    assert opened and all(v == "ENOENT" for v in opened.values()), "host devices: %s" % opened
    assert len(mknod) == 12, res.describe()
    created = {k: v for k, v in mknod.items() if "CREATED" in v}
    assert not created, "mknod created device nodes: %s" % created
    # EPERM: no CAP_MKNOD (EROFS on read-only /dev would be fine too)
    bad = {k: v for k, v in mknod.items() if errname(v) not in ("EPERM", "EROFS", "EACCES")}
    assert not bad, "mknod did not fail with EPERM: %s" % bad


MOUNT_CODE = {
    "python": PY_SYSCALL + r'''
import json
def mountinfo():
    with open("/proc/self/mountinfo") as f:
        return [" ".join(l.split()[3:5]) for l in f]
before = mountinfo()
os.makedirs("/tmp/hxs-m", exist_ok=True)
dev_tmp = os.stat("/tmp").st_dev
res = {
    "mount tmpfs": sc(165, b"none", b"/tmp/hxs-m", b"tmpfs", 0, None),
    "mount bind /usr": sc(165, b"/usr", b"/tmp/hxs-m", None, 4096, None),  # MS_BIND
    "remount / rw": sc(165, None, b"/", None, 32 | 4096, None),  # MS_REMOUNT|MS_BIND
    "mount proc": sc(165, b"proc", b"/tmp/hxs-m", b"proc", 0, None),
    "umount2 /tmp": sc(166, b"/tmp", 2),  # MNT_DETACH
    "umount2 /proc": sc(166, b"/proc", 0),
    "pivot_root": sc(155, b"/tmp", b"/tmp/hxs-m"),
    "chroot": sc(161, b"/tmp"),
    "fsopen": sc(430, b"tmpfs", 0),
    "open_tree": sc(428, -100, b"/usr", 1),  # OPEN_TREE_CLONE
    "move_mount": sc(429, -100, b"/usr", -100, b"/tmp/hxs-m", 0),
    "mount_setattr": sc(442, -100, b"/", 0, bytes(32), 32),
    "fspick": sc(433, -100, b"/", 0),
}
res["unchanged"] = mountinfo() == before and os.stat("/tmp").st_dev == dev_tmp and not os.path.ismount("/tmp/hxs-m")
print(json.dumps(res))
''',
    "javascript": r'''
const fs = require('fs'), cp = require('child_process');
const mi = () => fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n').map((l) => l.split(' ').slice(3, 5).join(' ')).join('\n');
const before = mi();
fs.mkdirSync('/tmp/hxs-m', { recursive: true });
const res = {};
for (const [name, argv] of @COMMANDS@) {
  const r = cp.spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  res[name] = r.status === 0 ? 'ok' : ('rc=' + r.status + ' ' + (r.stderr || '').trim().split('\n')[0]);
}
res.unchanged = mi() === before;
console.log(JSON.stringify(res));
''',
    "bash": PERL_SC + r'''
before=$(awk '{print $4, $5}' /proc/self/mountinfo)
mkdir -p /tmp/hxs-m
run() { local name=$1; shift; if out=$("$@" 2>&1 </dev/null); then printf 'r\t%s\tok\n' "$name"; else printf 'r\t%s\trc=%s %s\n' "$name" "$?" "$(echo "$out" | head -1)"; fi; }
@BASH_RUNS@
printf 'r\tperl mount\t%s\n' "$(sc 165 none /tmp/hxs-m tmpfs 0 0)"
printf 'r\tperl umount2\t%s\n' "$(sc 166 /tmp 2)"
printf 'r\tperl chroot\t%s\n' "$(sc 161 /tmp)"
after=$(awk '{print $4, $5}' /proc/self/mountinfo)
[ "$before" = "$after" ] && ! mountpoint -q /tmp/hxs-m && printf 'r\tunchanged\ttrue\n' || printf 'r\tunchanged\tfalse\n'
''',
}
MOUNT_COMMANDS = [
    ("mount tmpfs", ["mount", "-t", "tmpfs", "none", "/tmp/hxs-m"]),
    ("mount bind", ["mount", "--bind", "/usr", "/tmp/hxs-m"]),
    ("remount rw", ["mount", "-o", "remount,rw", "/"]),
    ("umount /tmp", ["umount", "-l", "/tmp"]),
    ("umount /proc", ["umount", "/proc"]),
    ("chroot", ["/usr/sbin/chroot", "/tmp", "/bin/true"]),
    ("pivot_root", ["/usr/sbin/pivot_root", "/tmp", "/tmp/hxs-m"]),
]


@pytest.mark.parametrize("lang", LANGS)
def test_mount_umount_pivot_root_chroot_fail(svc, lang: str) -> None:
    code = MOUNT_CODE[lang]
    if lang == "javascript":
        code = fill(code, lang, COMMANDS=MOUNT_COMMANDS)
    elif lang == "bash":
        code = code.replace("@BASH_RUNS@", "\n".join(
            "run %s %s" % (json.dumps(n), " ".join(argv)) for n, argv in MOUNT_COMMANDS))
    res = svc.run(code, lang)
    assert res.exit_code == 0, res.describe()
    got = tab_rows(res, "r") if lang == "bash" else res.json()
    unchanged = got.pop("unchanged")
    assert unchanged in (True, "true"), "the sandbox's mounts changed: " + res.describe()
    succeeded = {k: v for k, v in got.items() if str(v).startswith("ok")}
    assert not succeeded, "mount operations that succeeded: %s" % succeeded
    if lang == "python":
        bad = {k: v for k, v in got.items() if v != "EPERM"}
        assert not bad, "mount calls not answered by the filter's EPERM: %s" % bad
    if lang == "bash":
        bad = {k: v for k, v in got.items() if k.startswith("perl") and perl_errno(v) != "EPERM"}
        assert not bad, bad


NS_FLAGS = {"CLONE_NEWNS": 0x20000, "CLONE_NEWUTS": 0x4000000, "CLONE_NEWIPC": 0x8000000,
            "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000, "CLONE_NEWNET": 0x40000000,
            "CLONE_NEWCGROUP": 0x2000000, "CLONE_NEWTIME": 0x80}
NS_CODE = {
    "python": PY_SYSCALL + r'''
import json
def inodes():
    return {n: os.stat("/proc/self/ns/" + n).st_ino for n in sorted(os.listdir("/proc/self/ns"))}
before = inodes()
res = {}
for name, flag in @FLAGS@.items():
    res["unshare " + name] = sc(272, flag)
    os.sys.stdout.flush()
    r = _libc.syscall(ctypes.c_long(56), ctypes.c_long(flag | 17), None, None, None, None)  # clone(flag|SIGCHLD)
    if r == 0:
        os._exit(0)  # the child of a clone that should not have happened
    if r > 0:
        os.waitpid(r, 0); res["clone " + name] = "ok:%d" % r
    else:
        res["clone " + name] = errno.errorcode.get(ctypes.get_errno(), "?")
for n in ("user", "mnt", "net", "pid", "ipc", "uts", "cgroup"):
    fd = os.open("/proc/self/ns/" + n, os.O_RDONLY)
    res["setns " + n] = sc(308, fd, 0)
    os.close(fd)
res["clone3"] = sc(435, bytes(88), 88)
res["unchanged"] = inodes() == before
print(json.dumps(res))
''',
    "javascript": r'''
const fs = require('fs'), cp = require('child_process');
const ino = () => fs.readdirSync('/proc/self/ns').map((n) => n + fs.statSync('/proc/self/ns/' + n).ino).join(',');
const before = ino();
const res = {};
for (const [name, argv] of @COMMANDS@) {
  const r = cp.spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  res[name] = r.status === 0 ? 'ok' : ('rc=' + r.status + ' ' + (r.stderr || '').trim().split('\n')[0]);
}
res.unchanged = ino() === before;
console.log(JSON.stringify(res));
''',
    "bash": PERL_SC + r'''
ino() { for n in /proc/self/ns/*; do stat -L -c '%n %i' "$n"; done; }
before=$(ino)
run() { local name=$1; shift; if out=$("$@" 2>&1 </dev/null); then printf 'r\t%s\tok\n' "$name"; else printf 'r\t%s\trc=%s %s\n' "$name" "$?" "$(echo "$out" | head -1)"; fi; }
@BASH_RUNS@
printf 'r\tperl unshare NEWUSER\t%s\n' "$(sc 272 268435456)"
printf 'r\tperl unshare NEWNET\t%s\n' "$(sc 272 1073741824)"
[ "$before" = "$(ino)" ] && printf 'r\tunchanged\ttrue\n' || printf 'r\tunchanged\tfalse\n'
''',
}
NS_COMMANDS = [
    ("unshare -U", ["unshare", "-U", "true"]), ("unshare -r", ["unshare", "-r", "id", "-u"]),
    ("unshare -n", ["unshare", "-n", "true"]), ("unshare -m", ["unshare", "-m", "true"]),
    ("unshare -pf", ["unshare", "-p", "-f", "true"]), ("unshare -i", ["unshare", "-i", "true"]),
    ("unshare -u", ["unshare", "-u", "true"]), ("unshare -C", ["unshare", "-C", "true"]),
    ("unshare -T", ["unshare", "-T", "true"]), ("unshare -Urm", ["unshare", "-U", "-r", "-m", "true"]),
    ("nsenter net", ["nsenter", "--net=/proc/self/ns/net", "true"]),
    ("nsenter user", ["nsenter", "-U", "-t", "1", "true"]),
]


@pytest.mark.parametrize("lang", LANGS)
def test_no_new_namespaces(svc, lang: str) -> None:
    code = NS_CODE[lang]
    if lang == "python":
        code = code.replace("@FLAGS@", json.dumps(NS_FLAGS))
    elif lang == "javascript":
        code = fill(code, lang, COMMANDS=NS_COMMANDS)
    else:
        code = code.replace("@BASH_RUNS@", "\n".join(
            "run %s %s" % (json.dumps(n), " ".join(argv)) for n, argv in NS_COMMANDS))
    res = svc.run(code, lang)
    assert res.exit_code == 0, res.describe()
    got = tab_rows(res, "r") if lang == "bash" else res.json()
    assert got.pop("unchanged") in (True, "true"), "the sandbox's namespaces changed: " + res.describe()
    succeeded = {k: v for k, v in got.items() if str(v).startswith("ok")}
    assert not succeeded, "new namespaces were created: %s" % succeeded
    if lang == "python":
        want = {k: ("ENOSYS" if k == "clone3" else "EPERM") for k in got}
        assert got == want, "namespace calls not answered by the filter: %s" % {
            k: v for k, v in got.items() if v != want[k]}
    if lang == "bash":
        assert {perl_errno(v) for k, v in got.items() if k.startswith("perl")} == {"EPERM"}, got


SETID_CODE = {
    "python": PY_SYSCALL + r'''
import json
res = {}
for name, call in (("setuid", lambda: os.setuid(0)), ("setgid", lambda: os.setgid(0)),
                   ("seteuid", lambda: os.seteuid(0)), ("setegid", lambda: os.setegid(0)),
                   ("setreuid", lambda: os.setreuid(0, 0)), ("setresuid", lambda: os.setresuid(0, 0, 0)),
                   ("setresgid", lambda: os.setresgid(0, 0, 0)), ("setgroups", lambda: os.setgroups([0]))):
    try:
        call(); res[name] = "ok"
    except OSError as e:
        res[name] = errno.errorcode.get(e.errno, str(e.errno))
# capset: every capability in the effective, permitted and inheritable sets
hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)
data = (ctypes.c_uint32 * 6)(*([0xffffffff] * 6))
res["capset all"] = sc(126, hdr, data)
res["ambient raise CAP_SYS_ADMIN"] = sc(157, 47, 2, 21, 0, 0)  # PR_CAP_AMBIENT, RAISE
res["keepcaps"] = sc(157, 8, 1, 0, 0, 0)  # PR_SET_KEEPCAPS (allowed, harmless)
res["ids"] = [os.getresuid(), os.getresgid(), os.getgroups()]
print(json.dumps(res))
''',
    "javascript": r'''
const res = {};
for (const [name, call] of [['setuid', () => process.setuid(0)], ['setgid', () => process.setgid(0)],
    ['seteuid', () => process.seteuid(0)], ['setegid', () => process.setegid(0)],
    ['setgroups', () => process.setgroups([0])], ['initgroups', () => process.initgroups('root', 0)]]) {
  try { call(); res[name] = 'ok'; } catch (e) { res[name] = e.code || String(e); }
}
res.ids = [process.getuid(), process.geteuid(), process.getgid(), process.getegid(), process.getgroups()];
console.log(JSON.stringify(res));
''',
    "bash": r'''
printf 'r\tperl setuid\t%s\n' "$(perl -e '$< = 0; $> = 0; print "$< $> ", $! + 0')"
printf 'r\tperl setgid\t%s\n' "$(perl -e '$( = 0; $) = "0 0"; print "$( | $)"')"
if out=$(setpriv --reuid=0 --regid=0 --clear-groups id -u 2>&1); then printf 'r\tsetpriv\tok %s\n' "$out"; else printf 'r\tsetpriv\t%s\n' "$out"; fi
printf 'r\tids\t%s %s %s %s\n' "$(id -ru)" "$(id -u)" "$(id -rg)" "$(id -g)"
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_setuid_and_setgid_calls_fail(svc, lang: str) -> None:
    res = svc.run(SETID_CODE[lang], lang)
    assert res.exit_code == 0, res.describe()
    if lang == "bash":
        got = tab_rows(res, "r")
        assert got["perl setuid"].split()[:2] == ["1000", "1000"], got
        assert got["perl setgid"].split()[0] == "1000" and got["perl setgid"].split("|")[1].split()[0] == "1000", got
        assert not got["setpriv"].startswith("ok"), got
        assert got["ids"] == "1000 1000 1000 1000", got
        return
    got = res.json()
    ids = got.pop("ids")
    if lang == "python":
        assert got.pop("keepcaps").startswith("ok"), got  # not over-blocked
        assert ids == [[1000] * 3, [1000] * 3, []], ids
    else:
        assert ids == [1000, 1000, 1000, 1000, []] or ids[:4] == [1000] * 4 and ids[4] in ([], [1000]), ids
    bad = {k: v for k, v in got.items() if v != "EPERM"}
    assert not bad, "identity changes that did not fail with EPERM: %s" % bad


SETUID_BIN_CODE = {
    "python": r'''
import json, os, subprocess, time
res = {"setuid_bit": bool(os.stat("/usr/bin/newgrp").st_mode & 0o4000)}
def status(pid):
    d = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":"); d[k] = v.split()
    return d
p = subprocess.Popen(["/usr/bin/newgrp", "root"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
for _ in range(500):
    try:
        s = status(p.pid)
    except OSError:
        break
    if s["Name"] == ["newgrp"] and s["State"][0] == "S":  # waiting for the password
        res["newgrp"] = {"Uid": s["Uid"], "Gid": s["Gid"], "CapEff": s["CapEff"]}
        break
    time.sleep(0.01)
p.kill(); p.wait()
for name, argv in (("su", ["su", "-c", "id", "root"]), ("firejail", ["firejail", "--noprofile", "id"]),
                   ("mount", ["mount", "-t", "tmpfs", "none", "/tmp"])):
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
        res[name] = [r.returncode, (r.stdout + r.stderr).decode(errors="replace")[-300:]]
    except (OSError, subprocess.TimeoutExpired) as e:
        res[name] = [-1, str(e)]
print(json.dumps(res))
''',
    "javascript": r'''
const fs = require('fs'), cp = require('child_process');
const res = { setuid_bit: (fs.statSync('/usr/bin/newgrp').mode & 0o4000) !== 0 };
const status = (pid) => {
  const d = {};
  for (const l of fs.readFileSync('/proc/' + pid + '/status', 'utf8').split('\n')) {
    const i = l.indexOf(':'); if (i > 0) d[l.slice(0, i)] = l.slice(i + 1).trim().split(/\s+/);
  }
  return d;
};
const p = cp.spawn('/usr/bin/newgrp', ['root'], { stdio: ['pipe', 'ignore', 'ignore'] });
let tries = 0;
const poll = () => {
  let s = null;
  try { s = status(p.pid); } catch (e) {}
  if (s && s.Name[0] === 'newgrp' && s.State[0] === 'S') res.newgrp = { Uid: s.Uid, Gid: s.Gid, CapEff: s.CapEff };
  if (res.newgrp || !s || ++tries > 500) return finish();
  setTimeout(poll, 10);
};
const finish = () => {
  p.kill('SIGKILL');
  for (const [name, argv] of [['su', ['su', '-c', 'id', 'root']], ['firejail', ['firejail', '--noprofile', 'id']],
                              ['mount', ['mount', '-t', 'tmpfs', 'none', '/tmp']]]) {
    const r = cp.spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 10000 });
    res[name] = [r.status === null ? -1 : r.status, ((r.stdout || '') + (r.stderr || '')).slice(-300)];
  }
  console.log(JSON.stringify(res));
};
poll();
''',
    "bash": r'''
[ -u /usr/bin/newgrp ] && printf 'setuid_bit\ttrue\n' || printf 'setuid_bit\tfalse\n'
sleep 20 | /usr/bin/newgrp root >/dev/null 2>&1 &
for i in $(seq 500); do
  for d in /proc/[0-9]*; do
    if [ "$(awk '$1 == "Name:" {print $2}' "$d/status" 2>/dev/null)" = newgrp ] &&
       [ "$(awk '$1 == "State:" {print $2}' "$d/status" 2>/dev/null)" = S ]; then
      printf 'newgrp.Uid\t%s\n' "$(awk '$1 == "Uid:" {print $2, $3, $4, $5}' "$d/status")"
      printf 'newgrp.Gid\t%s\n' "$(awk '$1 == "Gid:" {print $2, $3, $4, $5}' "$d/status")"
      printf 'newgrp.CapEff\t%s\n' "$(awk '$1 == "CapEff:" {print $2}' "$d/status")"
      kill -9 "${d#/proc/}"; break 2
    fi
  done
  sleep 0.01
done
pkill -9 -x sleep
out=$(su -c id root </dev/null 2>&1); printf 'su\t%s %s\n' "$?" "$(echo "$out" | tr '\n' ' ')"
out=$(firejail --noprofile id </dev/null 2>&1); printf 'firejail\t%s %s\n' "$?" "$(echo "$out" | tr '\n' ' ')"
out=$(mount -t tmpfs none /tmp </dev/null 2>&1); printf 'mount\t%s %s\n' "$?" "$(echo "$out" | tr '\n' ' ')"
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_setuid_binaries_run_without_privilege(svc, lang: str) -> None:
    """nosuid + no_new_privs: a setuid-root binary runs as the sandbox user. newgrp
    blocks on its password prompt, so its ids can be read while it runs."""
    if not os.stat("/usr/bin/newgrp").st_mode & stat.S_ISUID:
        pytest.skip("/usr/bin/newgrp is not setuid root on this host")
    res = svc.run(SETUID_BIN_CODE[lang], lang, timeout=30)
    assert res.exit_code == 0, res.describe()
    if lang == "bash":
        t = res.tabs()
        got = {"setuid_bit": t.get("setuid_bit") == "true"}
        if "newgrp.Uid" in t:
            got["newgrp"] = {"Uid": t["newgrp.Uid"].split(), "Gid": t["newgrp.Gid"].split(),
                             "CapEff": [t["newgrp.CapEff"]]}
        for k in ("su", "firejail", "mount"):
            rc, _, text = t[k].partition(" ")
            got[k] = [int(rc), text]
    else:
        got = res.json()
    assert got["setuid_bit"] is True, "the sandbox's /usr/bin/newgrp is not setuid (test meaningless): %s" % got
    assert "newgrp" in got, "newgrp never waited at its password prompt: " + res.describe()
    assert got["newgrp"]["Uid"] == ["1000"] * 4 and got["newgrp"]["Gid"] == ["1000"] * 4, \
        "a setuid-root binary ran with other ids: %s" % got["newgrp"]
    assert int(got["newgrp"]["CapEff"][0], 16) == 0, got["newgrp"]
    for k in ("su", "firejail"):
        assert "uid=0" not in got[k][1], "%s gave uid 0: %s" % (k, got[k])
    assert got["su"][0] != 0, got["su"]
    assert got["mount"][0] != 0, got["mount"]


PTRACE_CODE = {
    "python": PY_SYSCALL + r'''
import json, signal, time
res = {"traceme": sc(101, 0, 0, 0, 0)}
child = os.fork()
if child == 0:
    time.sleep(30); os._exit(0)
res["attach child"] = sc(101, 16, child, 0, 0)
res["seize child"] = sc(101, 0x4206, child, 0, 0)
res["attach parent"] = sc(101, 16, os.getppid(), 0, 0)
res["attach pid 1"] = sc(101, 16, 1, 0, 0)
buf = ctypes.create_string_buffer(64)
local = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 64)
res["process_vm_readv"] = sc(310, child, local, 1, local, 1, 0)
res["process_vm_writev"] = sc(311, child, local, 1, local, 1, 0)
pidfd = os.pidfd_open(child)
res["pidfd_getfd"] = sc(438, pidfd, 0, 0)
res["kcmp"] = sc(312, os.getpid(), child, 0, 0, 0)
os.close(pidfd)
for p in ("/proc/1/mem", "/proc/1/environ"):
    try:
        open(p, "rb").close(); res["open " + p] = "ok"
    except OSError as e:
        res["open " + p] = errno.errorcode.get(e.errno, "?")
os.kill(child, signal.SIGKILL); os.waitpid(child, 0)
print(json.dumps(res))
''',
    "javascript": r'''
const cp = require('child_process');
const res = {};
for (const [name, argv] of [['strace', ['strace', '-f', '-o', '/dev/null', 'true']],
                            ['gdb attach parent', ['gdb', '-batch', '-nx', '-p', String(process.pid), '-ex', 'detach']],
                            ['gdb attach 1', ['gdb', '-batch', '-nx', '-p', '1', '-ex', 'detach']],
                            ['gdb run', ['gdb', '-batch', '-nx', '-ex', 'run', '--args', '/bin/true']]]) {
  const r = cp.spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 20000 });
  res[name] = [r.status === null ? -1 : r.status, ((r.stdout || '') + (r.stderr || '')).slice(-400)];
}
console.log(JSON.stringify(res));
''',
    "bash": PERL_SC + r'''
printf 'sc\ttraceme\t%s\n' "$(sc 101 0 0 0 0)"
printf 'sc\tattach parent\t%s\n' "$(sc 101 16 $$ 0 0)"
printf 'sc\tattach 1\t%s\n' "$(sc 101 16 1 0 0)"
out=$(strace -f -o /dev/null true 2>&1); printf 'cmd\tstrace\t%s %s\n' "$?" "$(echo "$out" | tr '\n' ' ')"
out=$(gdb -batch -nx -p $$ -ex detach 2>&1 </dev/null); printf 'cmd\tgdb attach parent\t%s %s\n' "$?" "$(echo "$out" | tr '\n' ' ')"
out=$(gdb -batch -nx -ex run --args /bin/true 2>&1 </dev/null); printf 'cmd\tgdb run\t%s %s\n' "$?" "$(echo "$out" | tr '\n' ' ')"
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_ptrace_of_anything_fails(svc, lang: str) -> None:
    res = svc.run(PTRACE_CODE[lang], lang, timeout=30)
    assert res.exit_code == 0, res.describe()
    if lang == "python":
        got = res.json()
        opened = {k: got.pop(k) for k in list(got) if k.startswith("open ")}
        bad = {k: v for k, v in got.items() if v != "EPERM"}
        assert not bad, "ptrace-like calls not denied with EPERM: %s" % bad
        assert all(v in DENIED for v in opened.values()), opened
        return
    if lang == "bash":
        calls = {k: perl_errno(v) for k, v in tab_rows(res, "sc").items()}
        assert calls and set(calls.values()) == {"EPERM"}, calls
        cmds = {}
        for k, v in tab_rows(res, "cmd").items():
            rc, _, text = v.partition(" ")
            cmds[k] = [int(rc), text]
    else:
        cmds = res.json()
    for name, (rc, text) in cmds.items():
        # strace/gdb report the refused ptrace; nothing may get traced
        assert "Operation not permitted" in text, "%s was not refused ptrace: %s" % (name, [rc, text])
        if name == "strace":
            assert rc != 0, (name, rc, text)


# ---- the kernel's attack surface (raw syscalls: Python and Bash/perl) -------------------

KERNEL_CASES = {
    "keyrings": {
        "python": r'''
res = {"add_key": sc(248, b"user", b"hxs-key", b"secret", 6, -2),  # KEY_SPEC_PROCESS_KEYRING
       "keyctl join session": sc(250, 1, b"hxs-ring"),  # KEYCTL_JOIN_SESSION_KEYRING
       "keyctl get keyring id": sc(250, 0, -3, 0),  # KEYCTL_GET_KEYRING_ID, session
       "request_key": sc(249, b"user", b"hxs-key", None, 0)}
''',
        "bash": r'''
printf 'sc\tadd_key\t%s\n' "$(sc 248 user hxs-key secret 6 -2)"
printf 'sc\tkeyctl join session\t%s\n' "$(sc 250 1 hxs-ring)"
printf 'sc\trequest_key\t%s\n' "$(sc 249 user hxs-key 0 0)"
''',
    },
    "bpf": {
        "python": r'''
import struct
insns = struct.pack("<BBhi", 0xb7, 0, 0, 0) + struct.pack("<BBhi", 0x95, 0, 0, 0)  # r0 = 0; exit
ibuf = ctypes.create_string_buffer(insns)
lic = ctypes.create_string_buffer(b"GPL")
attr = ctypes.create_string_buffer(struct.pack("<IIQQIIQ", 1, 2, ctypes.addressof(ibuf), ctypes.addressof(lic), 0, 0, 0) + bytes(80))
res = {"BPF_PROG_LOAD socket filter": sc(321, 5, attr, 128)}
mattr = ctypes.create_string_buffer(struct.pack("<IIII", 2, 4, 8, 1) + bytes(112))  # BPF_MAP_TYPE_ARRAY
res["BPF_MAP_CREATE array"] = sc(321, 0, mattr, 128)
res["BPF_BTF_LOAD"] = sc(321, 18, bytes(128), 128)
''',
        "bash": r'''
printf 'sc\tBPF_MAP_CREATE\t%s\n' "$(perl -e 'my $a = pack("LLLL", 2, 4, 8, 1) . ("\0" x 112); my $r = syscall(321, 0, $a, 128); print $r == -1 ? ($! + 0) : "ok:$r"')"
printf 'sc\tBPF_PROG_LOAD\t%s\n' "$(perl -e 'my $a = "\0" x 128; my $r = syscall(321, 5, $a, 128); print $r == -1 ? ($! + 0) : "ok:$r"')"
''',
    },
    "perf_event_open": {
        "python": r'''
import struct
# PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, user space only: allowed by the kernel
# for one's own process at perf_event_paranoid <= 2, so only the filter says EPERM
flags = 1 | (1 << 5) | (1 << 6)  # disabled, exclude_kernel, exclude_hv
attr = ctypes.create_string_buffer(struct.pack("<IIQQQQ", 1, 128, 1, 0, 0, flags) + bytes(88))
res = {"perf_event_open self task-clock": sc(298, attr, 0, -1, -1, 0),
       "perf_event_open cpu-wide": sc(298, attr, -1, 0, -1, 0)}
''',
        "bash": r'''
printf 'sc\tperf_event_open\t%s\n' "$(perl -e 'my $a = pack("LLQQQQ", 1, 128, 1, 0, 0, 97) . ("\0" x 88); my $r = syscall(298, $a, 0, -1, -1, 0); print $r == -1 ? ($! + 0) : "ok:$r"')"
''',
    },
    "userfaultfd": {
        "python": r'''
res = {"userfaultfd user-mode-only": sc(323, 0o2000000 | 0o4000 | 1),  # O_CLOEXEC|O_NONBLOCK|UFFD_USER_MODE_ONLY
       "userfaultfd": sc(323, 0o2000000)}
try:
    open("/dev/userfaultfd", "rb").close(); res["/dev/userfaultfd"] = "ok"
except OSError as e:
    res["/dev/userfaultfd"] = errno.errorcode.get(e.errno, "?")
''',
        "bash": r'''
printf 'sc\tuserfaultfd\t%s\n' "$(sc 323 1)"
printf 'sc\tuserfaultfd cloexec\t%s\n' "$(sc 323 524288)"
''',
    },
    "io_uring": {
        "python": r'''
params = ctypes.create_string_buffer(120)
res = {"io_uring_setup": sc(425, 8, params), "io_uring_enter": sc(426, 0, 1, 0, 0, None, 0),
       "io_uring_register": sc(427, 0, 0, None, 0)}
''',
        "bash": r'''
printf 'sc\tio_uring_setup\t%s\n' "$(perl -e 'my $p = "\0" x 120; my $r = syscall(425, 8, $p); print $r == -1 ? ($! + 0) : "ok:$r"')"
printf 'sc\tio_uring_enter\t%s\n' "$(sc 426 0 1 0 0 0 0)"
''',
    },
    "kexec_and_modules": {
        "python": r'''
with open("/tmp/hxs.ko", "wb") as f:
    f.write(b"\x7fELF" + bytes(60))
fd = os.open("/tmp/hxs.ko", os.O_RDONLY)
image = b"\x7fELF" + bytes(60)
res = {"kexec_load": sc(246, 0, 0, None, 0), "kexec_file_load": sc(320, fd, -1, 1, b"\0", 4),
       "init_module": sc(175, image, len(image), b""), "finit_module": sc(313, fd, b"", 0),
       "delete_module": sc(176, b"hxs_no_such_module", 0o4000)}
os.close(fd); os.unlink("/tmp/hxs.ko")
import subprocess
for name, argv in (("insmod", ["/usr/sbin/insmod", "/tmp/hxs-mod.ko"]), ("rmmod", ["/usr/sbin/rmmod", "hxs_no_such_module"])):
    if name == "insmod":
        with open("/tmp/hxs-mod.ko", "wb") as f: f.write(image)
    try:
        r = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL)
        res[name] = "rc=%d %s" % (r.returncode, r.stderr.decode(errors="replace").strip()[:200])
    except OSError as e:  # the host has no kmod: nothing to run, nothing loaded
        res[name] = "not run: %s" % errno.errorcode.get(e.errno, e.errno)
''',
        "bash": r'''
head -c 64 /dev/zero > /tmp/hxs-mod.ko
printf 'sc\tkexec_load\t%s\n' "$(sc 246 0 0 0 0)"
printf 'sc\tinit_module\t%s\n' "$(perl -e 'my $i = "\x7fELF" . ("\0" x 60); my $p = ""; my $r = syscall(175, $i, 64, $p); print $r == -1 ? ($! + 0) : "ok:$r"' 2>&1)"
printf 'sc\tfinit_module\t%s\n' "$(perl -e 'open(my $f, "<", "/tmp/hxs-mod.ko") or die; my $p = ""; my $r = syscall(313, fileno($f), $p, 0); print $r == -1 ? ($! + 0) : "ok:$r"' 2>&1)"
printf 'sc\tdelete_module\t%s\n' "$(sc 176 hxs_no_such_module 2048)"
out=$(/usr/sbin/insmod /tmp/hxs-mod.ko 2>&1); printf 'cmd\tinsmod\trc=%s %s\n' "$?" "$out"
out=$(/usr/sbin/rmmod hxs_no_such_module 2>&1); printf 'cmd\trmmod\trc=%s %s\n' "$?" "$out"
rm -f /tmp/hxs-mod.ko
''',
        "javascript": r'''
const fs = require('fs'), cp = require('child_process');
fs.writeFileSync('/tmp/hxs-mod.ko', Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c, 0x46]), Buffer.alloc(60)]));
const res = {};
for (const [name, argv] of [['insmod', ['/usr/sbin/insmod', '/tmp/hxs-mod.ko']],
                            ['modprobe', ['/usr/sbin/modprobe', '-d', '/tmp', 'hxs-mod']],
                            ['rmmod', ['/usr/sbin/rmmod', 'hxs_no_such_module']]]) {
  const r = cp.spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  res[name] = 'rc=' + r.status + ' ' + (r.stderr || '').trim().slice(0, 200);
}
fs.unlinkSync('/tmp/hxs-mod.ko');
console.log(JSON.stringify(res));
''',
    },
}


@pytest.mark.parametrize("case,lang", [(c, lang) for c in sorted(KERNEL_CASES) for lang in LANGS
                                       if lang in KERNEL_CASES[c]])
def test_kernel_attack_surface_is_denied(svc, case: str, lang: str) -> None:
    """keyrings, bpf, perf_event_open, userfaultfd, io_uring, kexec and module loading.
    The arguments are ones the kernel itself would accept from an unprivileged process
    where it can (add_key, perf self-monitoring, userfaultfd user-mode-only, io_uring),
    so the EPERM is the filter's."""
    variants = KERNEL_CASES[case]
    if lang == "python":
        code = PY_SYSCALL + variants["python"] + "\nimport json\nprint(json.dumps(res))\n"
    elif lang == "bash":
        code = PERL_SC + "\n" + variants["bash"]
    else:
        code = variants["javascript"]
    res = svc.run(code, lang)
    assert res.exit_code == 0, res.describe()
    if lang == "python":
        got = res.json()
        cmds = {k: got.pop(k) for k in ("insmod", "rmmod") if k in got}
        if "/dev/userfaultfd" in got:
            assert got.pop("/dev/userfaultfd") == "ENOENT", got
    elif lang == "bash":
        got = {k: perl_errno(v) for k, v in tab_rows(res, "sc").items()}
        cmds = tab_rows(res, "cmd")
    else:
        got, cmds = {}, res.json()
    bad = {k: v for k, v in got.items() if v != "EPERM"}
    assert not bad, "%s: calls not denied with EPERM: %s" % (case, bad)
    for name, text in cmds.items():
        assert not text.startswith("rc=0"), "%s succeeded: %s" % (name, text)
    assert got or cmds, res.describe()


TIOCSTI_CODE = {
    "python": PY_SYSCALL + r'''
import json, pty
c = ctypes.create_string_buffer(b"x")
res = {}
for fd in (0, 1, 2):
    res["TIOCSTI fd%d" % fd] = sc(16, fd, 0x5412, c)
    res["TIOCSTI|hibits fd%d" % fd] = sc(16, fd, 0x5412 | (1 << 32), c)
res["TIOCLINUX"] = sc(16, 0, 0x541C, c)
for p in ("/dev/tty", "/dev/console", "/dev/pts/0"):
    try:
        os.close(os.open(p, os.O_RDWR | os.O_NOCTTY)); res[p] = "ok"
    except OSError as e:
        res[p] = errno.errorcode.get(e.errno, "?")
# the sandbox's own pseudo-terminal: faking its input is refused too
master, slave = pty.openpty()
for name, fd in (("pty master", master), ("pty slave", slave)):
    res["TIOCSTI " + name] = sc(16, fd, 0x5412, c)
    res["TIOCSTI|hibits " + name] = sc(16, fd, 0x5412 | (1 << 32), c)
print(json.dumps(res))
''',
    "bash": PERL_SC + r'''
for fd in 0 1 2; do
  printf 'sc\tTIOCSTI fd%s\t%s\n' "$fd" "$(perl -e 'my $c = "x"; my $r = syscall(16, $ARGV[0] + 0, 0x5412, $c); print $r == -1 ? ($! + 0) : "ok:$r"' "$fd")"
  printf 'sc\tTIOCSTI|hibits fd%s\t%s\n' "$fd" "$(perl -e 'my $c = "x"; my $r = syscall(16, $ARGV[0] + 0, 0x5412 | (1 << 32), $c); print $r == -1 ? ($! + 0) : "ok:$r"' "$fd")"
done
printf 'sc\tperl ioctl\t%s\n' "$(perl -e 'my $c = "x"; my $r = ioctl(STDIN, 0x5412, $c); print $r ? "ok:0" : ($! + 0)')"
''',
}


@pytest.mark.parametrize("lang", ["python", "bash"])
def test_tiocsti_cannot_fake_terminal_input(svc, lang: str) -> None:
    """TIOCSTI on every stdio descriptor (the kernel would say ENOTTY: stdio is
    /dev/null and pipes) and on the sandbox's own pseudo-terminal, also with junk in the
    upper 32 bits (CVE-2019-10063); and no terminal of the host to talk to."""
    res = svc.run(TIOCSTI_CODE[lang], lang)
    assert res.exit_code == 0, res.describe()
    if lang == "python":
        got = res.json()
        terms = {k: got.pop(k) for k in list(got) if k.startswith("/dev")}
        # no controlling terminal (ENXIO), no console, no pty but those it opens itself
        assert terms == {"/dev/tty": "ENXIO", "/dev/console": "ENOENT", "/dev/pts/0": "ENOENT"}, \
            "terminal devices: %s" % terms
    else:
        got = {k: perl_errno(v) for k, v in tab_rows(res, "sc").items()}
    bad = {k: v for k, v in got.items() if v != "EPERM"}
    assert not bad, "terminal ioctls not denied by the filter: %s" % bad


X32_CALLS = {"mount": 165, "umount2": 166, "unshare": 272, "setns": 308, "ptrace": 521, "bpf": 321,
             "keyctl": 250, "add_key": 248, "kexec_load": 528, "init_module": 175, "finit_module": 313,
             "perf_event_open": 298, "userfaultfd": 323, "io_uring_setup": 425, "open_by_handle_at": 304,
             "pivot_root": 155, "chroot": 161, "process_vm_readv": 539, "clone3": 435}
X32_CODE = {
    "python": PY_SYSCALL + r'''
import json
X32 = 0x40000000
res = {"getpid": sc(X32 | 39)}
for name, nr in @CALLS@.items():
    res[name] = sc(X32 | nr, 0, 0, 0, 0, 0)
res["mount tmpfs"] = sc(X32 | 165, b"none", b"/tmp", b"tmpfs", 0, None)
res["unshare NEWUSER"] = sc(X32 | 272, 0x10000000)
res["clone NEWUSER"] = sc(X32 | 56, 0x10000000 | 17, 0, 0, 0, 0)
if res["clone NEWUSER"] == "ok:0":
    os._exit(0)
print(json.dumps(res))
''',
    "bash": PERL_SC + r'''
X32=1073741824
printf 'sc\tgetpid\t%s\n' "$(sc $((X32 | 39)))"
for pair in @PAIRS@; do
  printf 'sc\t%s\t%s\n' "${pair%%=*}" "$(sc $((X32 | ${pair#*=})) 0 0 0 0 0)"
done
printf 'sc\tunshare NEWUSER\t%s\n' "$(sc $((X32 | 272)) 268435456)"
''',
}


@pytest.mark.parametrize("lang", ["python", "bash"])
def test_x32_syscall_numbers_do_not_bypass_the_filter(svc, lang: str) -> None:
    code = X32_CODE[lang]
    if lang == "python":
        code = code.replace("@CALLS@", json.dumps(X32_CALLS))
    else:
        code = code.replace("@PAIRS@", " ".join("%s=%d" % kv for kv in X32_CALLS.items()))
    res = svc.run(code, lang)
    assert res.exit_code == 0, res.describe()
    got = res.json() if lang == "python" else {k: perl_errno(v) for k, v in tab_rows(res, "sc").items()}
    getpid = got.pop("getpid")
    x32_enabled = getpid.startswith("ok")
    # The filter runs before the kernel looks the number up, so it answers whether or not
    # the kernel has x32: EPERM (ENOSYS for clone3). A kernel without x32 answers ENOSYS
    # to a number the filter let through, so ENOSYS elsewhere is a missing x32 rule.
    bad = {k: v for k, v in got.items() if v != ("ENOSYS" if k == "clone3" else "EPERM")}
    assert not bad, "x32 calls (x32 %s in the kernel) that the filter did not answer: %s" % (
        "enabled" if x32_enabled else "disabled", bad)


I386_CODE = r'''
import ctypes, errno, json, mmap, os
# sys32(nr, a, b, c): int $0x80 with eax=nr, ebx=a, ecx=b, edx=c; returns eax sign-extended
CODE = bytes.fromhex("534989c889f889f389d14489c2cd804863c05bc3")
buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
buf.write(CODE)
addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
sys32 = ctypes.CFUNCTYPE(ctypes.c_long, ctypes.c_long, ctypes.c_long, ctypes.c_long, ctypes.c_long)(addr)
os.sys.stdout.flush()
pid = os.fork()
if pid == 0:
    os._exit(0 if sys32(20, 0, 0, 0) == os.getpid() else 1)  # i386 getpid
_, st = os.waitpid(pid, 0)
if os.WIFSIGNALED(st):
    print(json.dumps({"available": False, "why": "int $0x80 killed the probe with signal %d" % os.WTERMSIG(st)}))
    raise SystemExit(0)
def name(r):
    return "ok:%d" % r if r >= 0 else errno.errorcode.get(-r, str(-r))
res = {"available": True, "getpid ok": sys32(20, 0, 0, 0) == os.getpid(),
       "mount": name(sys32(21, 1, 1, 1)), "unshare NEWUSER": name(sys32(310, 0x10000000, 0, 0)),
       "ptrace TRACEME": name(sys32(26, 0, 0, 0)), "keyctl": name(sys32(288, 0x7fff, 0, 0)),
       "bpf": name(sys32(357, 0x7fff, 0, 0)), "chroot": name(sys32(61, 1, 0, 0)),
       "setns": name(sys32(346, -1, 0, 0)), "kexec_load": name(sys32(283, 0, 0, 0))}
print(json.dumps(res))
'''


def test_i386_int80_does_not_bypass_the_filter(svc) -> None:
    res = svc.run(I386_CODE, "python")
    assert res.exit_code == 0, res.describe()
    got = res.json()
    if not got["available"]:
        pytest.skip("the i386 ABI cannot run on this host (%s): no int $0x80 entry to bypass "
                    "the filter with" % got["why"])
    assert got.pop("available") is True and got.pop("getpid ok") is True, got
    bad = {k: v for k, v in got.items() if v != "EPERM"}
    assert not bad, "i386 calls not denied by the filter: %s" % bad


PERSONALITY_SH = ('uname -m; grep -E "^(Seccomp|NoNewPrivs|CapEff):" /proc/self/status | tr -s "\\t" " "; '
                  'unshare -U true 2>/dev/null; echo unshare=$?')
PERSONALITY_CODE = {
    "python": PY_SYSCALL + r'''
import json, subprocess
res = {"query": sc(135, 0xffffffff)}
# ADDR_NO_RANDOMIZE | READ_IMPLIES_EXEC | ADDR_COMPAT_LAYOUT | PER_LINUX32
res["set"] = sc(135, 0x0040000 | 0x0400000 | 0x0200000 | 0x0008)
res["uname"] = os.uname().machine
r = subprocess.run(["/bin/sh", "-c", @SH@], capture_output=True, text=True)
res["child"] = r.stdout.split("\n")
# the zero page stays unmappable (mmap_min_addr), whatever the personality
res["mmap zero"] = sc(9, 0, 4096, 3, 0x32, -1, 0)  # PROT_READ|WRITE, MAP_PRIVATE|ANON|FIXED
print(json.dumps(res))
''',
    "javascript": r'''
const cp = require('child_process');
const r = cp.spawnSync('setarch', ['i686', '-R', '-X', '-L', '/bin/sh', '-c', @SH@], { encoding: 'utf8' });
console.log(JSON.stringify({ child: (r.stdout || '').split('\n'), rc: r.status, err: r.stderr }));
''',
    "bash": r'''
setarch i686 -R -X -L /bin/sh -c @SH@ | sed 's/^/child\t/'
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_personality_tricks_keep_every_restriction(svc, lang: str) -> None:
    res = svc.run(fill(PERSONALITY_CODE[lang], lang, SH=PERSONALITY_SH), lang)
    assert res.exit_code == 0, res.describe()
    if lang == "bash":
        child = res.tab_list("child")
    else:
        got = res.json()
        child = got["child"]
        if lang == "python":
            assert got["set"].startswith("ok") and got["uname"] == "i686", got  # allowed, and took effect
            assert got["mmap zero"] in ("EPERM", "EACCES"), "mapped page zero: %s" % got
    child = [c for c in child if c]
    assert child[0] == "i686", "the personality did not take effect (test meaningless): %s" % res.describe()
    assert "Seccomp: 2" in child and "NoNewPrivs: 1" in child and "CapEff: 0000000000000000" in child, \
        "a program under another personality lost a restriction: %s" % child
    assert "unshare=1" in child, child


FD_CODE = {
    "python": r'''
import errno, fcntl, json, os
fds = {}
for fd in sorted(os.listdir("/proc/self/fd"), key=int):
    try: fds[fd] = os.readlink("/proc/self/fd/" + fd)
    except OSError: fds[fd] = None  # the directory listing itself
listing = [k for k, v in fds.items() if v is None]
open_fds = []
for fd in range(0, 1024):
    try:
        fcntl.fcntl(fd, fcntl.F_GETFD); open_fds.append(fd)
    except OSError:
        pass
print(json.dumps({"fds": fds, "open": open_fds, "listing": listing}))
''',
    "javascript": r'''
const fs = require('fs');
const fds = {};
for (const fd of fs.readdirSync('/proc/self/fd')) {
  try { fds[fd] = fs.readlinkSync('/proc/self/fd/' + fd); } catch (e) { fds[fd] = null; }
}
console.log(JSON.stringify({ fds }));
''',
    "bash": r'''
# not `ls | awk`: while bash sets up a pipeline it holds that pipe's read end itself,
# and ls, listing bash's descriptors, may see it. A file opened by the child is not ours.
ls -l /proc/$$/fd > /tmp/fds.txt
awk '/->/ { print "fd\t" $(NF-2) "\t" $NF }' /tmp/fds.txt
rm -f /tmp/fds.txt
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_no_descriptors_inherited_from_the_service(svc, lang: str) -> None:
    """Only stdio plus what the interpreter opens itself: no socket at all (the
    service's listener, its clients), no pipe of another sandbox or of the engine."""
    res = svc.run(FD_CODE[lang], lang)
    assert res.exit_code == 0, res.describe()
    if lang == "bash":
        fds = tab_rows(res, "fd")
    else:
        data = res.json()
        fds = {k: v for k, v in data["fds"].items() if v is not None}
    assert fds.get("0") == "/dev/null", fds
    assert fds.get("1", "").startswith("pipe:") and fds.get("2", "").startswith("pipe:") and fds["1"] != fds["2"], fds
    extra = {k: v for k, v in fds.items() if int(k) > 2}
    sockets = {k: v for k, v in extra.items() if v.startswith("socket:")}
    assert not sockets, "sockets inherited by the sandbox: %s" % sockets
    # a pipe the interpreter made has both ends here (libuv's signal and async pipes);
    # a single end is someone else's
    counts: Dict[str, int] = {}
    for v in extra.values():
        counts[v] = counts.get(v, 0) + 1
    lone = {k: v for k, v in extra.items() if v.startswith("pipe:") and (counts[v] < 2 or v in (fds["1"], fds["2"]))}
    assert not lone, "pipe ends inherited by the sandbox: %s (all: %s)" % (lone, fds)
    files = {k: v for k, v in extra.items() if v.startswith("/")
             and not (v == "/dev/null" or v.startswith(("/code/main.", "/proc/")))}
    assert not files, "files open in the sandbox that it did not open: %s" % files
    if lang == "python":
        hidden = set(data["open"]) - {int(k) for k in data["fds"]}
        assert not hidden, "descriptors open but not listed: %s" % hidden
        assert {int(k) for k in data["fds"]} - set(data["open"]) <= {int(x) for x in data["listing"]}, data


# ---- the C probe, through the service ----------------------------------------------------

PROBE_JS = r'''
const fs = require('fs'), cp = require('child_process');
fs.writeFileSync('/tmp/hxs-probe', Buffer.from(@B64@, 'base64'), { mode: 0o755 });
const r = cp.spawnSync('/tmp/hxs-probe', [], { stdio: 'inherit' });
process.exit(r.status === null ? 99 : r.status);
'''
PROBE_BASH = "base64 -d > /tmp/hxs-probe <<'EOF'\n@B64@\nEOF\nchmod 755 /tmp/hxs-probe\nexec /tmp/hxs-probe\n"


@pytest.mark.parametrize("lang", LANGS)
def test_syscall_probe_through_the_service(svc, lang: str) -> None:
    """tests/security/probe.c: every denied syscall answered with the filter's errno
    on x86_64, x32 and (where the host has it) i386; warm Python included."""
    data = Path(probe_path()).read_bytes()
    b64 = base64.b64encode(data).decode()
    if lang == "python":
        code = DELIVERY.replace("PROBE_B64", '"%s"' % b64)
    elif lang == "javascript":
        code = PROBE_JS.replace("@B64@", '"%s"' % b64)
    else:
        wrapped = "\n".join(b64[i:i + 76] for i in range(0, len(b64), 76))
        code = PROBE_BASH.replace("@B64@", wrapped)
    res = svc.run(code, lang, timeout=30)
    run = ProbeRun(res)
    summary = [line for line in run.lines if line.startswith("# ") and " checks, " in line]
    assert summary, "the probe did not finish: " + res.describe()
    failed = [line for line in run.lines if line.startswith("FAIL")]
    assert not failed, "%d probe checks failed through the %s service:\n%s" % (
        len(failed), svc.mode, "\n".join(failed))
    assert res.exit_code == 0 and len(run.checks) >= 200, res.describe()
    for name in ("x86_64.mount", "x86_64.ptrace", "x86_64.clone.CLONE_NEWUSER", "x86_64.ioctl.TIOCSTI|hibits",
                 "x86_64.socket.AF_PACKET", "x32.mount", "allow.listen", "allow.fork"):
        assert name in run.checks, "probe check %s missing" % name
