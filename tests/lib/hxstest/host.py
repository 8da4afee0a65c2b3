"""Host-side views of what sandboxes leave behind, and the CLI runner.

Leftover (leak) checks only blame what this test process started: cgroups named
"s<pid>.<start>-<seq>" after one of our CLI or service processes, and processes of the
sandbox uid range that sit in such a cgroup, in no engine cgroup at all, or in the
cgroup of an engine that is no longer running. A colleague's service running at the
same time on this machine therefore cannot make these checks fail, and cannot hide our
own leaks.

A running service keeps pre-started single-use sandboxes for every language
(SANDBOX_POOL): they are not leftovers while they wait for code. Only exactly that is
let through (waiting_pooled_sandbox): a cgroup of a live engine holding its PID 1 (the
init) and one program, `/usr/bin/python3 /code/main.py` (a warm template's fork),
`/usr/bin/node /code/main.js` or `/usr/bin/bash /code/main.sh`, blocked opening its
code FIFO (the kernel's wait_for_partner). Once the code is in, the
interpreter has left that open; a program of an execution is never let through.

The CLI runner and the canary (hxstest.canary) are re-exported here, so a test that
runs the CLI and checks the host imports one module.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from .canary import CLI_PIDS, ExecResult, check_isolation, require_isolation, run_exec, sandbox_bin  # noqa: F401
from .waits import wait_until

__all__ = [
    "CLI_PIDS", "ExecResult", "check_isolation", "require_isolation", "run_exec", "sandbox_bin",
    "state_dir", "uid_base", "sandbox_host_uids", "engine_cgroup_parents", "leftover_cgroups",
    "host_mounts_under", "leaked_sandbox_processes", "processes_with", "wait_until",
    "pids_named", "proc_status", "cgroup_dirs", "sandbox_init_of", "engine_cgroup_owner",
]

CG_ROOT = "/sys/fs/cgroup"
CG_DIRNAME = "hexr-sandbox"
ENGINE_CG_RE = re.compile(r"^s(\d+)\.(\d+)-(\d+)$")


def state_dir() -> str:
    return os.environ.get("STATE_DIR") or "/run/hexr-sandbox"


def uid_base() -> int:
    return int(os.environ.get("SANDBOX_UID_BASE") or 1000000)


def sandbox_host_uids() -> Set[int]:
    return {uid_base(), uid_base() + 1000}


def _own_cgroups() -> Dict[str, str]:
    """controller ("" for the v2 line) -> our cgroup path, as the engine reads it."""
    out: Dict[str, str] = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            parts = line.rstrip("\n").split(":", 2)
            if len(parts) != 3:
                continue
            ctrls, path = parts[1], parts[2]
            path = "" if path == "/" else path
            if ctrls == "":
                out[""] = path
            for c in ctrls.split(","):
                if c:
                    out[c] = path
    return out


def engine_cgroup_parents() -> List[str]:
    """The directories the engine creates its per-execution cgroups in."""
    own = _own_cgroups()
    parents = []
    if os.path.exists(os.path.join(CG_ROOT, "cgroup.controllers")):  # pure v2
        parents.append("%s%s/%s" % (CG_ROOT, own.get("", ""), CG_DIRNAME))
    else:
        for ctrl in ("memory", "pids", "cpu"):
            if ctrl in own:
                parents.append("%s/%s%s/%s" % (CG_ROOT, ctrl, own[ctrl], CG_DIRNAME))
        if "" in own:
            parents.append("%s/unified%s/%s" % (CG_ROOT, own[""], CG_DIRNAME))
    return [p for p in parents if os.path.isdir(p)]


def proc_start_time(pid: int) -> Optional[int]:
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[19])


def engine_alive(pid: int, start: int) -> bool:
    return proc_start_time(pid) == start


POOL_PROGRAMS = (b"/usr/bin/python3\0/code/main.py\0", b"/usr/bin/node\0/code/main.js\0",
                 b"/usr/bin/bash\0/code/main.sh\0")


def _read_bytes(path: str) -> Optional[bytes]:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _ppid(pid: str) -> Optional[str]:
    text = (_read_bytes("/proc/%s/status" % pid) or b"").decode(errors="replace")
    m = re.search(r"^PPid:\s*(\d+)", text, re.M)
    return m.group(1) if m else None


def waiting_pooled_sandbox(cgroup_dir: str) -> bool:
    """A pre-started sandbox of a live engine that has never been given code (see the
    module docstring): its init and its interpreter blocked opening the code FIFO."""
    m = ENGINE_CG_RE.match(os.path.basename(cgroup_dir))
    if not m or not engine_alive(int(m.group(1)), int(m.group(2))):
        return False
    procs = (_read_bytes(os.path.join(cgroup_dir, "cgroup.procs")) or b"").split()
    if len(procs) != 2:
        return False
    procs = [p.decode() for p in procs]
    for init, prog in (procs, procs[::-1]):
        if (_read_bytes("/proc/%s/cmdline" % init) or b"").startswith(b"hxs-init\0") and \
                _read_bytes("/proc/%s/cmdline" % prog) in POOL_PROGRAMS and _ppid(prog) == init and \
                _read_bytes("/proc/%s/wchan" % prog) == b"wait_for_partner":
            return True
    return False


def waiting_pooled_name(name: str) -> bool:
    """The execution cgroup `name` (s<pid>.<start>-<seq>) is a waiting pre-started sandbox."""
    return any(waiting_pooled_sandbox(os.path.join(parent, name)) for parent in engine_cgroup_parents())


def _pooled_cgroup_of(pid: str) -> bool:
    """pid is in a waiting pre-started sandbox (in any hierarchy's copy of its cgroup)."""
    text = (_read_bytes("/proc/%s/cgroup" % pid) or b"").decode(errors="replace")
    m = re.search(r"/%s/(s\d+\.\d+-\d+)" % CG_DIRNAME, text)
    return bool(m) and any(waiting_pooled_sandbox(os.path.join(parent, m.group(1)))
                           for parent in engine_cgroup_parents())


def leftover_cgroups(pids: Set[int]) -> List[str]:
    """Execution cgroups created by the engines of the given CLI processes."""
    left = []
    for parent in engine_cgroup_parents():
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            m = ENGINE_CG_RE.match(name)
            if m and int(m.group(1)) in pids and os.path.isdir(os.path.join(parent, name)) and \
                    not any(waiting_pooled_sandbox(os.path.join(p, name)) for p in engine_cgroup_parents()):
                left.append(os.path.join(parent, name))
    return sorted(left)


def host_mounts_under(path: str) -> List[str]:
    path = os.path.realpath(path).rstrip("/")
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mnt = line.split()[4].replace("\\040", " ")
            if mnt == path or mnt.startswith(path + "/"):
                found.append(line.strip())
    return found


def _status_uids(pid: str) -> Set[int]:
    try:
        with open("/proc/%s/status" % pid) as f:
            for line in f:
                if line.startswith("Uid:"):
                    return {int(x) for x in line.split()[1:]}
    except OSError:
        pass
    return set()


def _engine_cgroup_of(pid: str) -> Optional[Tuple[int, int]]:
    try:
        with open("/proc/%s/cgroup" % pid) as f:
            text = f.read()
    except OSError:
        return None
    m = re.search(r"/%s/s(\d+)\.(\d+)-\d+" % CG_DIRNAME, text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _engine_parent_alive(pid: str, excluded: Set[int], uids: Set[int]) -> bool:
    """pid's sandbox hangs from a running engine that is not one of `excluded`: the first
    ancestor that is not a sandbox process is a hexr-sandbox process. That is how a
    sandbox of an engine in another pid namespace (the service in a container) is told
    apart: its cgroup names the engine by its pid in the container, which means nothing
    here. A sandbox whose engine died has been reparented to an init, not an engine."""
    for _ in range(8):
        parent = _ppid(pid)
        if parent is None or parent in ("0", "1"):
            return False
        if not (_status_uids(parent) & uids):
            return int(parent) not in excluded and \
                b"hexr-sandbox" in (_read_bytes("/proc/%s/cmdline" % parent) or b"")
        pid = parent
    return False


def leaked_sandbox_processes(pids: Set[int]) -> List[str]:
    """Processes running as the sandbox's host uids that are ours or nobody's."""
    uids = sandbox_host_uids()
    leaks = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or not (_status_uids(pid) & uids):
            continue
        owner = _engine_cgroup_of(pid)
        if owner is not None and owner[0] not in pids and engine_alive(*owner):
            continue  # a sandbox of another engine that is running right now
        if owner is not None and _engine_parent_alive(pid, pids, uids):
            continue  # the same, of an engine in another pid namespace (a container)
        if owner is not None and _pooled_cgroup_of(pid):
            continue  # a pre-started sandbox of a live engine, waiting for code
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")[:200]
        except OSError:
            continue  # gone meanwhile
        leaks.append("pid %s uids %s cgroup owner %s: %s" % (pid, sorted(_status_uids(pid)), owner, cmd))
    return leaks


def processes_with(marker: str) -> List[str]:
    """Host processes whose command line contains marker (pgrep -f), except ourselves."""
    needle = marker.encode()
    found = []
    me = os.getpid()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if needle in cmd:
            found.append("%s: %s" % (pid, cmd.replace(b"\0", b" ").decode(errors="replace")[:200]))
    return found


def pids_named(marker: str) -> List[int]:
    """Host processes whose argv[0] is exactly marker (a program that exec'd itself
    under that name). Unlike processes_with(), this never matches the CLI that carries
    the marker somewhere in its code argument."""
    needle = marker.encode()
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            argv = (read_proc("/proc/%s/cmdline" % pid, "rb") or b"").split(b"\0")
            if argv[0] == needle:
                found.append(int(pid))
    return found


def proc_status(pid: int) -> Dict[str, str]:
    """/proc/<pid>/status as {field: value}; empty when the process is gone."""
    out: Dict[str, str] = {}
    for line in (read_proc("/proc/%d/status" % pid) or "").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key] = value.strip()
    return out


def cgroup_dirs(pid: int) -> Dict[str, str]:
    """The host directories of a process's cgroups: controller -> directory, and "" for
    its cgroup v2 one (under /sys/fs/cgroup/unified on a hybrid host)."""
    v2_root = CG_ROOT if os.path.exists(os.path.join(CG_ROOT, "cgroup.controllers")) else CG_ROOT + "/unified"
    out: Dict[str, str] = {}
    for line in (read_proc("/proc/%d/cgroup" % pid) or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[1] == "":
            out[""] = v2_root + parts[2]
        for ctrl in parts[1].split(","):
            if ctrl and not ctrl.startswith("name="):
                out[ctrl] = "%s/%s%s" % (CG_ROOT, ctrl, parts[2])
    if "" in out and v2_root == CG_ROOT:  # pure v2: every controller lives in the one tree
        for ctrl in ("memory", "pids", "cpu"):
            out.setdefault(ctrl, out[""])
    return out


def engine_cgroup_owner(pid: int) -> Optional[int]:
    """The pid of the engine (CLI or service) whose execution cgroup pid is in."""
    owner = _engine_cgroup_of(str(pid))
    return owner[0] if owner else None


def sandbox_init_of(pid: int) -> Optional[int]:
    """The host pid of PID 1 of the pid namespace pid runs in: the nearest ancestor
    that is pid 1 in its own namespace, which must be pid's namespace."""
    try:
        ns = os.readlink("/proc/%d/ns/pid" % pid)
    except OSError:
        return None
    cur = pid
    for _ in range(64):
        st = proc_status(cur)
        nspid = st.get("NSpid", "").split()
        if len(nspid) >= 2 and nspid[-1] == "1":
            try:
                return cur if os.readlink("/proc/%d/ns/pid" % cur) == ns else None
            except OSError:
                return None
        ppid = int(st.get("PPid", "0") or 0)
        if ppid <= 1:
            return None
        cur = ppid
    return None


def read_proc(path: str, mode: str = "r") -> Any:
    """A /proc (or any) file's content, None when it is gone."""
    try:
        with open(path, mode) as f:
            return f.read()
    except OSError:
        return None


def instance_processes(instance: str) -> Dict[str, List[int]]:
    """Host pids in the execution cgroups of one engine instance (s<pid>.<start>), by
    cgroup name."""
    out: Dict[str, List[int]] = {}
    pat = re.compile(r"/hexr-sandbox/(%s-\d+)$" % re.escape(instance), re.M)
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            for name in set(pat.findall(read_proc("/proc/%s/cgroup" % pid) or "")):
                out.setdefault(name, []).append(int(pid))
    return out


def template_processes(state_dir: str, base: int) -> List[int]:
    """The warm templates (uid base+2000) of the services that use this STATE_DIR."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and base + 2000 in _status_uids(p)
            and state_dir.encode() in (read_proc("/proc/%s/cmdline" % p, "rb") or b"")]


def terminate(proc: "subprocess.Popen", timeout: float) -> Optional[int]:
    """SIGTERM, then SIGKILL after timeout. Returns the exit status."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
    return proc.returncode


def sandbox_owned_files(base: int, since: float, extra: Sequence[str] = ()) -> List[str]:
    """Files owned by the sandbox host uids (base..base+2000), modified since `since`,
    in the host's scratch directories and `extra`."""
    found = []
    for d in ["/tmp", "/var/tmp", "/dev/shm", *extra]:
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if base <= st.st_uid <= base + 2000 and st.st_mtime >= since - 1:
                found.append("%s (uid %d)" % (e.path, st.st_uid))
    return found
