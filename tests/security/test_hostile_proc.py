"""Hostile code against the machine view: /proc, /sys, the terminal, the clock.

The sandbox shows a full procfs of its own pid namespace, a few /sys files and its
own pseudo-terminals (tests/integration/test_runtime_env.py checks that programs find
them). Behind them must stay what they would widen: every /proc entry but the allow
list is masked (read and write both fail, nothing is read), /proc/sys cannot be written,
/proc/sysrq-trigger, kcore, kallsyms, keys, timer_list and the rest cannot be opened,
/sys is not sysfs (no host cgroup tree, no /sys/kernel, no /sys/firmware), the host's
processes do not show in ps or top, the caller's terminal cannot be reached, a sandbox
cannot take more than its share of the kernel's ptys, and the engine's paths do not
show in mountinfo.

Every case runs through the hostile suite's services (warm and cold, conftest.py), after
the canary; the terminal case runs the CLI under a pseudo-terminal of the test's own.
Probes only open files (writes are opened without O_TRUNC or O_CREAT and nothing is
written) and only signal processes the test started.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import signal
import subprocess
import termios
import time
from typing import Dict, Iterator, List, Tuple

import pytest

from _service import LANGS, errname, fill, marker, sandbox_bin

# top-level /proc entries the sandbox shows; every other one must be masked
PROC_SHOWN = {"self", "thread-self", "mounts", "net", "sysvipc", "uptime", "version", "sys",
              "cpuinfo", "meminfo", "stat", "loadavg", "swaps"}
# named ones, whether or not this kernel has them (absent ones must be ENOENT)
PROC_DANGEROUS = ["sysrq-trigger", "kcore", "kallsyms", "keys", "key-users", "timer_list", "timer_stats",
                  "sched_debug", "schedstat", "kmsg", "kpagecount", "kpageflags", "kpagecgroup", "slabinfo",
                  "vmallocinfo", "pagetypeinfo", "zoneinfo", "buddyinfo", "vmstat", "config.gz", "modules",
                  "iomem", "ioports", "interrupts", "softirqs", "diskstats", "partitions", "cmdline",
                  "locks", "latency_stats", "mtrr", "acpi", "scsi", "asound", "bus", "driver", "fs", "irq",
                  "tty", "pressure", "dynamic_debug", "bootconfig", "mdstat", "cgroups"]
DENIED = ("EACCES", "ENOENT", "EROFS", "EPERM", "EISDIR")


def host_proc_entries() -> List[str]:
    return sorted(e for e in os.listdir("/proc") if not e.isdigit())


# ---- masked /proc entries -----------------------------------------------------------------

MASK_CODE = {
    "python": r'''
import errno, json, os
def name(e): return errno.errorcode.get(e.errno, str(e.errno))
entries = sorted(e for e in os.listdir("/proc") if not e.isdigit())
res = {}
for e in sorted((set(entries) - set(@SHOWN@)) | set(@NAMED@) | set(@HOST@)):
    p = "/proc/" + e
    r = {}
    try:
        if os.path.isdir(p) and not os.path.islink(p):
            r["list"] = "LISTED %d" % len(os.listdir(p))
        else:
            with open(p, "rb") as f:
                r["read"] = "READ %d" % len(f.read(64))
    except OSError as x:
        r["read"] = name(x)
    try:
        os.close(os.open(p, os.O_WRONLY)); r["write"] = "OPENED"
    except OSError as x:
        r["write"] = name(x)
    res[e] = r
print(json.dumps({"entries": entries, "probes": res}))
''',
    "javascript": r'''
const fs = require('fs');
const entries = fs.readdirSync('/proc').filter((e) => !/^\d+$/.test(e)).sort();
const probe = new Set([...entries.filter((e) => !@SHOWN@.includes(e)), ...@NAMED@, ...@HOST@]);
const res = {};
for (const e of [...probe].sort()) {
  const p = '/proc/' + e, r = {};
  try {
    const st = fs.lstatSync(p);
    if (st.isDirectory()) r.list = 'LISTED ' + fs.readdirSync(p).length;
    else r.read = 'READ ' + fs.readFileSync(p).length;
  } catch (x) { r.read = x.code; }
  try { fs.closeSync(fs.openSync(p, fs.constants.O_WRONLY)); r.write = 'OPENED'; } catch (x) { r.write = x.code; }
  res[e] = r;
}
console.log(JSON.stringify({ entries, probes: res }));
''',
    "bash": r'''
shown=" "; for e in @SHOWN@; do shown="$shown$e "; done
for d in /proc/*; do e=${d#/proc/}; case $e in *[!0-9]*) printf 'entry\t%s\n' "$e";; esac; done
probe=""
for d in /proc/*; do e=${d#/proc/}; case $e in *[!0-9]*) case $shown in *" $e "*) ;; *) probe="$probe $e";; esac;; esac; done
for e in $probe @NAMED@ @HOST@; do
  p=/proc/$e
  if [ -d "$p" ] && [ ! -L "$p" ]; then
    if out=$(ls -A "$p" 2>&1); then printf 'list\t%s\tLISTED\n' "$e"; else printf 'list\t%s\t%s\n' "$e" "$out"; fi
  elif out=$(head -c 64 "$p" 2>&1 >/dev/null); then printf 'read\t%s\tREAD\n' "$e"
  else printf 'read\t%s\t%s\n' "$e" "$out"; fi
  if out=$( (exec 3>>"$p") 2>&1); then printf 'write\t%s\tOPENED\n' "$e"; else printf 'write\t%s\t%s\n' "$e" "$out"; fi
done
''',
}


def parse_mask(res, lang: str) -> Tuple[List[str], Dict[str, Dict[str, str]]]:
    if lang != "bash":
        data = res.json()
        return data["entries"], data["probes"]
    entries, probes = [], {}
    for line in res.out.splitlines():
        f = line.split("\t")
        if f[0] == "entry":
            entries.append(f[1])
        elif f[0] in ("read", "list", "write") and len(f) >= 3:
            v = f[2] if f[2] in ("READ", "LISTED", "OPENED") else errname(f[2])
            probes.setdefault(f[1], {})[f[0]] = v
    return entries, probes


@pytest.mark.parametrize("lang", LANGS)
def test_masked_proc_entries_cannot_be_read_or_written(svc, lang: str) -> None:
    host = host_proc_entries()
    shown = sorted(PROC_SHOWN)
    code = fill(MASK_CODE[lang], lang, SHOWN=shown, NAMED=PROC_DANGEROUS, HOST=sorted(set(host) - PROC_SHOWN))
    res = svc.run(code, lang, timeout=30)
    assert res.exit_code == 0, res.describe()
    entries, probes = parse_mask(res, lang)
    # the host's entries are all there (masked), so a program sees a normal /proc
    missing = sorted(set(host) - set(entries))
    assert not missing, "host /proc entries absent from the sandbox's: %s" % missing
    assert set(probes) >= (set(entries) - PROC_SHOWN) | set(PROC_DANGEROUS), res.describe()
    bad = {e: r for e, r in probes.items() if any(v not in DENIED for v in r.values())}
    assert not bad, "masked /proc entries the sandbox could open: %s" % bad
    # present ones are masked (EACCES), not merely missing
    present = set(entries) - PROC_SHOWN
    unmasked = {e: r for e, r in probes.items() if e in present and r.get("read", r.get("list")) != "EACCES"}
    assert not unmasked, "present /proc entries that are not masked: %s" % unmasked
    assert len(present) >= 10, "fewer masked entries than any kernel has: %s" % sorted(present)


# ---- /proc/sys and /sys -----------------------------------------------------------------

SYS_CODE = {
    "python": r'''
import ctypes, errno, json, os
def name(e): return errno.errorcode.get(e.errno, str(e.errno))
res = {"write": {}, "absent": {}}
for p in @WRITES@:
    try:
        os.close(os.open(p, os.O_WRONLY)); res["write"][p] = "OPENED"
    except OSError as e:
        res["write"][p] = name(e)
for p in @ABSENT@:
    try:
        os.stat(p); res["absent"][p] = "EXISTS"
    except OSError as e:
        res["absent"][p] = name(e)
for d in ("/sys/fs", "/sys/hxs-new", "/sys/devices/system/cpu/hxs-new"):
    try:
        os.mkdir(d); res["write"]["mkdir " + d] = "CREATED"; os.rmdir(d)
    except OSError as e:
        res["write"]["mkdir " + d] = name(e)
res["proc_sys_ro"] = bool(os.statvfs("/proc/sys").f_flag & os.ST_RDONLY)
res["osrelease"] = open("/proc/sys/kernel/osrelease").read().strip()
buf = ctypes.create_string_buffer(256)
assert ctypes.CDLL(None, use_errno=True).statfs(b"/sys", buf) == 0
res["sys_magic"] = hex(ctypes.c_long.from_buffer(buf).value)
res["sys"] = sorted(os.listdir("/sys"))
res["cpu"] = sorted(os.listdir("/sys/devices/system/cpu"))
print(json.dumps(res))
''',
    "bash": r'''
for p in @WRITES@; do
  if out=$( (exec 3>>"$p") 2>&1); then printf 'write\t%s\tOPENED\n' "$p"; else printf 'write\t%s\t%s\n' "$p" "$out"; fi
done
for p in @ABSENT@; do
  if [ -e "$p" ]; then printf 'absent\t%s\tEXISTS\n' "$p"; else printf 'absent\t%s\tENOENT\n' "$p"; fi
done
if out=$(echo 1 2>&1 > /proc/sys/net/ipv4/ip_forward); then printf 'echo\tip_forward\tWRITTEN\n'; else printf 'echo\tip_forward\t%s\n' "$out"; fi
printf 'fstype\t/sys\t%s\n' "$(stat -f -c %T /sys)"
printf 'ls\t/sys\t%s\n' "$(ls -A /sys | tr '\n' ' ')"
''',
}
SYS_WRITES = ["/proc/sys/kernel/hostname", "/proc/sys/kernel/domainname", "/proc/sys/kernel/core_pattern",
              "/proc/sys/kernel/modprobe", "/proc/sys/vm/drop_caches", "/proc/sys/net/ipv4/ip_forward",
              "/proc/sys/net/core/somaxconn", "/proc/sys/fs/file-max", "/proc/sys/user/max_user_namespaces",
              "/proc/sysrq-trigger",
              "/sys/devices/system/cpu/online", "/sys/devices/system/cpu/cpu0"]
SYS_ABSENT = ["/sys/fs/cgroup", "/sys/fs/cgroup/cgroup.procs", "/sys/fs/cgroup/memory/memory.limit_in_bytes",
              "/sys/kernel", "/sys/kernel/uevent_helper", "/sys/kernel/security", "/sys/kernel/debug",
              "/sys/kernel/mm", "/sys/firmware", "/sys/firmware/dmi/tables/DMI", "/sys/firmware/acpi/tables",
              "/sys/class", "/sys/class/net/lo", "/sys/block", "/sys/bus", "/sys/module", "/sys/power/state",
              "/sys/devices/virtual", "/sys/devices/system/memory", "/sys/hypervisor"]


@pytest.mark.parametrize("lang", ["python", "bash"])
def test_proc_sys_is_read_only_and_sys_is_not_sysfs(svc, lang: str) -> None:
    hostname = open("/proc/sys/kernel/hostname").read()
    res = svc.run(fill(SYS_CODE[lang], lang, WRITES=SYS_WRITES, ABSENT=SYS_ABSENT), lang, timeout=30)
    assert res.exit_code == 0, res.describe()
    if lang == "python":
        data = res.json()
        writes, absent = data["write"], data["absent"]
        assert data["proc_sys_ro"] is True, data
        assert data["osrelease"] == os.uname().release, data  # /proc/sys stays readable
        # tmpfs (the root's), not sysfs (0x62656572)
        assert data["sys_magic"] == hex(0x01021994), data
        assert data["sys"] == ["devices"], data
        assert set(data["cpu"]) - {"online", "possible", "present"} and \
            all(e.startswith("cpu") or e in ("online", "possible", "present") for e in data["cpu"]), data
    else:
        rows = [line.split("\t") for line in res.out.splitlines()]
        writes = {r[1]: (r[2] if r[2] == "OPENED" else errname(r[2])) for r in rows if r[0] == "write"}
        absent = {r[1]: r[2] for r in rows if r[0] == "absent"}
        misc = {r[0]: r[2] for r in rows if r[0] in ("echo", "fstype", "ls")}
        assert errname(misc["echo"]) in ("EROFS", "EACCES"), misc
        assert misc["fstype"] == "tmpfs" and misc["ls"].split() == ["devices"], misc
    assert set(writes) >= set(SYS_WRITES), res.describe()
    bad = {k: v for k, v in writes.items() if v not in DENIED}
    assert not bad, "kernel knobs the sandbox could open for writing: %s" % bad
    assert all(v == "ENOENT" for v in absent.values()) and set(absent) == set(SYS_ABSENT), \
        "host sysfs paths visible in the sandbox: %s" % {k: v for k, v in absent.items() if v != "ENOENT"}
    assert open("/proc/sys/kernel/hostname").read() == hostname


# ---- processes: ps, top, /proc/1 ---------------------------------------------------------

@pytest.fixture
def host_sleeper() -> Iterator[Tuple[int, str]]:
    m = marker("hxs-proc-")
    proc = subprocess.Popen([m, "300"], executable="/bin/sleep", stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield proc.pid, m
    finally:
        proc.kill()
        proc.wait(timeout=10)


PS_CODE = {
    "python": r'''
import errno, json, os, subprocess
ps = subprocess.run(["ps", "-e", "-o", "pid=,args="], capture_output=True, text=True, timeout=30)
top = subprocess.run(["top", "-b", "-n1", "-w", "512"], capture_output=True, text=True, timeout=30)
one = {}
for f in ("root", "cwd", "exe", "environ", "cmdline", "status", "mem", "maps", "stat", "fd"):
    try:
        os.stat("/proc/1/" + f); one[f] = "EXISTS"
    except OSError as e:
        one[f] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps({"ps": [ps.returncode, ps.stdout], "top": [top.returncode, top.stdout], "one": one}))
''',
    "javascript": r'''
const cp = require('child_process'), fs = require('fs');
const ps = cp.spawnSync('ps', ['-e', '-o', 'pid=,args='], { encoding: 'utf8' });
const top = cp.spawnSync('top', ['-b', '-n1', '-w', '512'], { encoding: 'utf8' });
const one = {};
for (const f of ['root', 'cwd', 'exe', 'environ', 'cmdline', 'status', 'mem', 'maps', 'stat', 'fd']) {
  try { fs.statSync('/proc/1/' + f); one[f] = 'EXISTS'; } catch (e) { one[f] = e.code; }
}
console.log(JSON.stringify({ ps: [ps.status, ps.stdout], top: [top.status, top.stdout], one }));
''',
    "bash": r'''
ps -e -o pid=,args= | sed 's/^/ps\t/'
top -b -n1 -w 512 | sed 's/^/top\t/'
for f in root cwd exe environ cmdline status mem maps stat fd; do
  if [ -e /proc/1/$f ]; then printf 'one\t%s\tEXISTS\n' "$f"; else printf 'one\t%s\tENOENT\n' "$f"; fi
done
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_ps_and_top_show_only_the_sandbox(svc, lang: str, host_sleeper: Tuple[int, str]) -> None:
    _, m = host_sleeper
    res = svc.run(PS_CODE[lang], lang, timeout=30)
    assert res.exit_code == 0, res.describe()
    if lang == "bash":
        ps = "\n".join(res.tab_list("ps"))
        top = "\n".join(res.tab_list("top"))
        one = {r.split("\t")[0]: r.split("\t")[1] for r in res.tab_list("one")}
    else:
        data = res.json()
        assert data["ps"][0] == 0 and data["top"][0] == 0, data
        ps, top, one = data["ps"][1], data["top"][1], data["one"]
    assert m not in ps and m not in top, "a host process shows in the sandbox: " + res.describe()
    pids = [int(line.split()[0]) for line in ps.splitlines() if line.strip()]
    assert pids and 1 not in pids and all(p < 64 for p in pids) and len(pids) <= 6, \
        "ps -e shows more than the sandbox's own processes: %s" % ps
    # (a warm program's own command line is the template's: see test_hostile_leaks)
    for needle in ("hexr-sandbox", svc.url.split("//")[-1]):
        assert needle not in ps and needle not in top, (needle, ps, top)
    assert "Tasks:" in top and len(one) == 10 and all(v == "ENOENT" for v in one.values()), \
        "/proc/1 (the sandbox's init, a copy of its creator) is reachable: %s" % one


# ---- terminals, ptys, clock ---------------------------------------------------------------

TERM_CODE = r'''
import errno, json, os
def name(e): return errno.errorcode.get(e.errno, str(e.errno))
r = {"tty_nr": int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[4]), "sid": os.getsid(0),
     "pts": sorted(os.listdir("/dev/pts"))}
for p in ("/dev/tty", "/dev/pts/@HOSTPTY@", "/dev/console"):
    try:
        os.close(os.open(p, os.O_RDWR | os.O_NOCTTY)); r[p] = "OPENED"
    except OSError as e:
        r[p] = name(e)
print(json.dumps(r))
'''


def test_callers_terminal_is_unreachable(sandbox_isolates: str) -> None:
    """The CLI started from a terminal: the sandbox must not share its session and
    controlling terminal (/dev/tty would be the caller's), nor see its pty."""
    master, slave = pty.openpty()
    host_pty = os.ttyname(slave).rsplit("/", 1)[1]

    def own_terminal() -> None:
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    code = TERM_CODE.replace("@HOSTPTY@", host_pty)
    proc = subprocess.Popen([sandbox_bin(), "exec", "--json", "-c", code], stdin=slave,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=own_terminal, cwd="/")
    os.close(slave)
    try:
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    typed = b""
    while select.select([master], [], [], 0)[0]:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        typed += chunk
    os.close(master)
    assert proc.returncode == 0, (out[-2000:], err[-2000:])
    res = json.loads(out.decode().strip().splitlines()[-1])
    assert res["exit_code"] == 0, res
    r = json.loads(res["stdout"].strip().splitlines()[-1])
    assert r["tty_nr"] == 0, "the sandbox has a controlling terminal: %s" % r
    assert r["sid"] == 1, "the sandbox is in its caller's session: %s" % r  # its init leads its own
    assert r["/dev/tty"] == "ENXIO" and r["/dev/console"] == "ENOENT", r
    assert r["/dev/pts/" + host_pty] == "ENOENT" and r["pts"] == ["ptmx"], r
    assert not typed, "the sandbox wrote to its caller's terminal: %r" % typed


PTY_CODE = r'''
import ctypes, errno, fcntl, json, os, struct, termios
def name(e): return errno.errorcode.get(e.errno, str(e.errno))
r = {}
held = []
while len(held) < 200:
    try:
        held.append(os.openpty())
    except OSError as e:
        r["stop"] = name(e); break
r["held"] = len(held)
m, s = held[0]
for fd, side in ((m, "master"), (s, "slave")):
    try:
        fcntl.ioctl(fd, termios.TIOCSETD, struct.pack("i", 0)); r["TIOCSETD " + side] = "ok"
    except OSError as e:
        r["TIOCSETD " + side] = name(e)
libc = ctypes.CDLL(None, use_errno=True)
r["unshare time"] = "ok" if libc.unshare(0x80) == 0 else errno.errorcode[ctypes.get_errno()]
try:
    with open("/proc/self/timens_offsets", "w") as f:
        f.write("boottime 100000 0\n")
    r["timens_offsets"] = "written"
except OSError as e:
    r["timens_offsets"] = name(e)
r["uptime"] = float(open("/proc/uptime").read().split()[0])
print(json.dumps(r))
'''


def test_pty_budget_line_disciplines_and_clock(svc) -> None:
    t0 = time.monotonic()
    res = svc.run(PTY_CODE, "python", timeout=30)
    wall = time.monotonic() - t0
    assert res.exit_code == 0, res.describe()
    r = res.json()
    # 16 ptys at most: the kernel's pty budget is shared by every sandbox and container
    assert r["held"] == 16 and r["stop"] == "ENOSPC", r
    # no line discipline changes (n_gsm, n_hdlc, ...: a long history of kernel bugs)
    assert r["TIOCSETD master"] == "EPERM" and r["TIOCSETD slave"] == "EPERM", r
    # the clock the sandbox was given stays: no new time namespace, no offsets written
    assert r["unshare time"] == "EPERM" and r["timens_offsets"] in ("EACCES", "EPERM"), r
    assert 0 <= r["uptime"] <= wall + 0.05, (r, wall)


# ---- what mountinfo tells ---------------------------------------------------------------

MOUNTINFO_CODE = r'''
import json
print(json.dumps({"mountinfo": open("/proc/self/mountinfo").read()}))
'''


def test_mountinfo_names_no_engine_path(svc) -> None:
    """The sandbox's mounts name no path of the engine (STATE_DIR, the mount point, the
    service's files): what was built for it shows as the sandbox's own paths."""
    res = svc.run(MOUNTINFO_CODE, "python", timeout=30)
    assert res.exit_code == 0, res.describe()
    text = res.json()["mountinfo"]
    for needle in (svc.state_dir, svc.workdir, os.path.dirname(os.path.realpath(sandbox_bin()))):
        assert needle not in text, "mountinfo shows %s:\n%s" % (needle, text)
    roots = {line.split()[4]: line.split()[3] for line in text.splitlines()}
    for mp in ("/tmp", "/var/tmp", "/run/lock", "/proc/meminfo", "/proc/cpuinfo", "/proc/stat"):
        assert roots.get(mp) == mp, "%s is not the sandbox's own: %s" % (mp, roots.get(mp))
