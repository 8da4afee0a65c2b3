"""Faults around `hexr-sandbox serve`: the service SIGKILLed with a full house of running
sandboxes (nothing may survive it, and the next start on the same STATE_DIR sweeps what
the dead instance left), and sandbox set-up failing half-way for reasons the operator
can cause and repair: a missing root filesystem, a root without the interpreter, an
unusable STATE_DIR (at start and while running), a cgroup that cannot be created.

Each failure must be a clean 500 sandbox_setup_failed whose message says why, leave no
process, cgroup, mount or file behind, and the next good request (after the repair, or
after a restart with a good setting) must work.

How the cgroup failure is caused from outside: as root nothing stops the engine's
mkdir in cgroupfs (a read-only or foreign-owned parent is ignored by root, and a file
cannot be created in cgroupfs), but the names are predictable ("s<pid>.<start>-<seq>",
src/ns/cgroup.c): the test creates the next names in the last hierarchy the engine
writes, so the mkdir of a new execution fails with EEXIST after the earlier hierarchies
were created. That is a real half-way failure; removing those directories repairs it.

Times are never asserted except as generous hang bounds.

Run: /usr/bin/python3 -m pytest tests/integration/test_faults.py -q
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import warnings
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

import pytest

from hxstest import host as _cli
from conftest import BIN, free_port, get_metrics, http_request, post_exec, safe_rmtree, wait_for

HANG = 30.0          # hang detection for one request
LEAK_TIMEOUT = 15.0  # leftovers must be gone within this
LANGS = {"python": "print('ok')", "javascript": "console.log('ok')", "bash": "echo ok"}
MARK = "hxs-faults"


# ---- helpers ------------------------------------------------------------------------------------


@pytest.fixture
def state_dir() -> Iterator[str]:
    """A STATE_DIR of our own (services started with it share it), reachable by the
    sandbox's unprivileged root."""
    top = tempfile.mkdtemp(prefix=MARK + "-")
    os.chmod(top, 0o755)
    state = os.path.join(top, "state")
    os.mkdir(state, 0o755)
    yield state
    try:
        os.chmod(state, 0o755)
    except OSError:
        pass
    safe_rmtree(top)


def instance_name(pid: int) -> str:
    return "s%d.%d" % (pid, _cli.proc_start_time(pid))


_read = _cli.read_proc
_uids = _cli._status_uids
instance_processes = _cli.instance_processes


def template_processes(state: str) -> List[int]:
    return _cli.template_processes(state, _cli.uid_base())


def template_cgroups(state: str) -> Set[str]:
    names: Set[str] = set()
    for pid in template_processes(state):
        names |= set(re.findall(r"/hexr-sandbox/(s\d+\.\d+-\d+)", _read("/proc/%d/cgroup" % pid) or ""))
    return names


def exec_cgroups(pid: int, state: str, ignore: Set[str] = frozenset()) -> List[str]:
    """Execution cgroups (not the templates') of the instance of pid, in every hierarchy."""
    keep = template_cgroups(state)
    return [c for c in _cli.leftover_cgroups({pid}) if os.path.basename(c) not in keep and c not in ignore]


def leftovers(svc, state: str, ignore: Set[str] = frozenset()) -> List[str]:
    pid = svc.proc.pid
    problems = ["process: " + p for p in _cli.leaked_sandbox_processes({pid})]
    problems += ["cgroup: " + c for c in exec_cgroups(pid, state, ignore)]
    problems += ["mount: " + m for m in _cli.host_mounts_under(state)]
    root = os.path.join(state, "root")
    if os.path.isdir(root) and os.listdir(root):
        problems.append("STATE_DIR/root is not empty: %s" % os.listdir(root))
    return problems


def assert_nothing_left(svc, state: str, what: str, ignore: Set[str] = frozenset()) -> None:
    if not _cli.wait_until(lambda: not leftovers(svc, state, ignore), LEAK_TIMEOUT):
        raise AssertionError("left behind %s: %s" % (what, leftovers(svc, state, ignore)))


def sandbox_owned_files(since: float, extra: List[str]) -> List[str]:
    return _cli.sandbox_owned_files(_cli.uid_base(), since, extra)


def state_entries(state: str) -> Set[str]:
    found = set()
    for dirpath, dirnames, filenames in os.walk(state):
        rel = os.path.relpath(dirpath, state)
        for n in dirnames + filenames:
            found.add(os.path.normpath(os.path.join(rel, n)))
    return found


def run_ok(svc, languages=LANGS) -> None:
    for lang, code in languages.items():
        status, _, res = post_exec(svc.url, {"code": code, "language": lang}, timeout=HANG)
        assert status == 200 and res["stdout"] == "ok\n" and res["exit_code"] == 0, (lang, status, res)


def setup_failed(svc, lang: str, code: Optional[str] = None) -> Tuple[str, Dict[str, str]]:
    """A request that must fail to set up: asserts 500 sandbox_setup_failed, returns
    (message, headers)."""
    status, hdrs, res = post_exec(svc.url, {"code": code or LANGS[lang], "language": lang}, timeout=HANG)
    assert status == 500, (lang, status, res)
    assert set(res) == {"error"} and res["error"]["code"] == "sandbox_setup_failed", res
    msg = res["error"]["message"]
    assert msg, res
    return msg, hdrs


def wait_warm(svc, timeout: float = 60.0) -> None:
    wait_for(lambda: http_request(svc.url, "GET", "/health")[2]["warm"]["templates_ready"] == 2, timeout,
             "the warm templates to be ready")


def health(svc) -> Tuple[int, Dict[str, Any]]:
    status, _, h = http_request(svc.url, "GET", "/health", timeout=HANG)
    return status, h


def raw_post(svc, body: Dict[str, Any]) -> socket.socket:
    host, port = svc.address.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=HANG)
    data = json.dumps(body).encode()
    s.sendall(b"POST /api/v1/exec HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
    return s


# ---- (a) SIGKILL with every slot busy -------------------------------------------------------------


SLEEPERS = ([{"code": "import time\nprint('up', flush=True)\ntime.sleep(100)", "language": "python"}] * 6 +
            [{"code": "console.log('up'); setTimeout(() => {}, 100000)", "language": "javascript"}] * 5 +
            [{"code": "echo up; sleep 100", "language": "bash"}] * 5)


def test_sigkill_with_every_slot_busy_leaves_nothing_and_the_next_start_sweeps(start_service, state_dir):
    t_start = time.time()
    env = {"MAX_CONCURRENT": "16", "MAX_QUEUE": "4", "MAX_EXECUTION_TIME": "120s", "STATE_DIR": state_dir}
    svc = start_service(env=env)
    pid = svc.proc.pid
    inst = instance_name(pid)
    wait_warm(svc)  # so that the Python sleepers run warm, through the templates
    baseline_state = state_entries(state_dir)

    socks = [raw_post(svc, dict(b, timeout=100)) for b in SLEEPERS]
    try:
        templates = template_cgroups(state_dir)

        user = _cli.uid_base() + 1000  # the sandbox user: a program past its set-up

        def running() -> bool:
            groups = {n: p for n, p in instance_processes(inst).items()
                      if n not in templates and not _cli.waiting_pooled_name(n)}
            # PID 1 and a program running as the sandbox user in each of the 16 cgroups
            return len(groups) == 16 and all(
                len(p) >= 2 and any(user in _uids(str(x)) for x in p) for p in groups.values())

        wait_for(running, 60, "16 sandboxes with their programs running")
        _, h = health(svc)
        assert h["active"] == 16 and h["queued"] == 0, h
        before = sum(len(p) for p in instance_processes(inst).values())
        template_pids = template_processes(state_dir)
        # a template of each kind (plain, sci) per warm owner slot, one slot per
        # execution that may run at once
        assert len(template_pids) == 2 * 16, template_pids

        svc.proc.send_signal(signal.SIGKILL)
        assert svc.wait(timeout=30) == -signal.SIGKILL

        # Nothing of the dead instance survives it: sandboxes (PID 1, programs, their
        # children) and templates all die with it.
        def survivors() -> List[str]:
            left = ["%s: %s" % (n, p) for n, p in instance_processes(inst).items()]
            left += ["template %d" % p for p in template_processes(state_dir)]
            left += _cli.leaked_sandbox_processes({pid})
            return left

        if not _cli.wait_until(lambda: not survivors(), 30):
            raise AssertionError("processes outlived the SIGKILLed service (%d before): %s"
                                 % (before, survivors()))
        # Every client sees its connection end (no reply is possible), none hangs.
        for s in socks:
            s.settimeout(10)
            try:
                data = s.recv(4096)
            except ConnectionResetError:
                data = b""
            assert data == b"", data[:200]
    finally:
        for s in socks:
            s.close()

    # What the dead instance left: its cgroup directories (a SIGKILLed process removes
    # nothing). Nothing is mounted on the host, ever.
    assert _cli.host_mounts_under(state_dir) == []
    left_before = _cli.leftover_cgroups({pid})
    if not left_before:
        warnings.warn("the dead instance's cgroups were already swept (another engine on this "
                      "host started meanwhile): the restart's own sweep is not exercised")

    # The same settings and STATE_DIR again: the start sweeps the predecessor.
    svc2 = start_service(env=env)
    run_ok(svc2)
    still = _cli.leftover_cgroups({pid})
    assert still == [], "cgroups of the SIGKILLed instance survived the next start (%d before): %s" % (
        len(left_before), still)
    assert_nothing_left(svc2, state_dir, "by the restarted service")
    new = sorted(e for e in state_entries(state_dir) - baseline_state)
    assert new == [], "new files in STATE_DIR: %s" % new
    assert state_entries(state_dir) <= {"root", "templates", "templates/_hxs_zygote.so"}, state_entries(state_dir)
    owned = sandbox_owned_files(t_start, [state_dir])
    assert owned == [], owned
    # and it runs a full house again
    results = []
    socks = [raw_post(svc2, {"code": "echo again", "language": "bash"}) for _ in range(4)]
    for s in socks:
        with s:
            s.settimeout(HANG)
            data = b""
            while b'"id"' not in data:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            results.append(data)
    assert all(r.startswith(b"HTTP/1.1 200") and b'"stdout":"again\\n"' in r for r in results), results


# ---- (b) set-up failing half-way ---------------------------------------------------------------------


def test_missing_rootfs_is_a_clean_500_and_a_good_restart_works(start_service, state_dir):
    missing = "/nonexistent-%s-rootfs" % MARK
    svc = start_service(env={"SANDBOX_ROOTFS": missing, "STATE_DIR": state_dir})
    lost = []
    n = 0
    for _ in range(10):  # several rounds: the message must say why every time
        for lang in LANGS:
            msg, hdrs = setup_failed(svc, lang)
            n += 1
            if missing not in msg:
                lost.append("%s: %r" % (lang, msg))
    rec = svc.exec_log(hdrs["x-request-id"])
    assert rec["outcome"] == "setup_failed" and rec["status"] == 500, rec
    m = get_metrics(svc.url)
    assert sum(m['hexr_sandbox_executions_total{language="%s",outcome="setup_failed"}' % lang]
               for lang in LANGS) == n
    assert_nothing_left(svc, state_dir, "by failed set-ups (missing rootfs)")
    assert svc.stop() == 0

    fixed = start_service(env={"STATE_DIR": state_dir})
    run_ok(fixed)
    assert_nothing_left(fixed, state_dir, "after the restart")
    assert not lost, ("%d of %d sandbox_setup_failed replies do not say why (the rootfs %s is "
                      "missing); the engine reported its own later error instead of the child's:\n%s"
                      % (len(lost), n, missing, "\n".join(lost)))


@pytest.fixture
def bare_rootfs() -> Iterator[str]:
    """A root filesystem whose /usr has the directories but no interpreter."""
    top = tempfile.mkdtemp(prefix=MARK + "-rootfs-")
    os.chmod(top, 0o755)
    for d in ("usr/bin", "usr/lib", "usr/lib64"):
        os.makedirs(os.path.join(top, d), 0o755)
    yield top
    if not _cli.host_mounts_under(top):
        shutil.rmtree(top, ignore_errors=True)


def test_rootfs_without_the_interpreter_is_a_clean_500_and_repairable(start_service, state_dir, bare_rootfs):
    # Cold only: a warm Python is a copy of the template (the host's interpreter, already
    # loaded), so it does not need /usr/bin/python3 in the sandbox root (README, warm starts).
    svc = start_service(env={"SANDBOX_ROOTFS": bare_rootfs, "SANDBOX_WARM": "off", "STATE_DIR": state_dir})
    interpreters = {"python": "python3", "javascript": "node", "bash": "bash"}
    bad = []
    for lang, exe in interpreters.items():
        msg, _ = setup_failed(svc, lang)
        want = "executing /usr/bin/%s: No such file or directory" % exe
        assert want in msg, msg
        if not msg.endswith(want):
            bad.append("%s: %r" % (lang, msg))
    status, h = health(svc)
    assert status == 503 and h["status"] == "unhealthy" and bare_rootfs in h["message"], h
    assert_nothing_left(svc, state_dir, "by failed set-ups (no interpreter)")

    # Repair in place: the root's /usr becomes the host's. No restart needed.
    shutil.rmtree(os.path.join(bare_rootfs, "usr"))
    os.symlink("/usr", os.path.join(bare_rootfs, "usr"))
    run_ok(svc)
    wait_for(lambda: health(svc)[0] == 200, 10, "/health to recover")
    assert_nothing_left(svc, state_dir, "after the repair")
    assert not bad, "the 500 message carries bytes after the reason (the next report record?):\n" + "\n".join(bad)


def test_state_dir_unusable_while_running_is_a_clean_500_and_repairable(start_service, state_dir):
    svc = start_service(env={"STATE_DIR": state_dir})
    wait_warm(svc)  # Python through the templates, the others cold: both paths fail alike
    root = os.path.join(state_dir, "root")
    lost = []
    n = 0

    def failing_round(breakage: str, needle: str, rounds: int = 3) -> None:
        nonlocal n
        for _ in range(rounds):
            for lang in LANGS:
                msg, _ = setup_failed(svc, lang)
                n += 1
                if needle not in msg:
                    lost.append("%s, %s: %r" % (breakage, lang, msg))

    # 1. STATE_DIR no longer searchable by the sandbox's unprivileged root
    os.chmod(state_dir, 0o700)
    try:
        failing_round("STATE_DIR mode 0700", root)
        wait_for(lambda: health(svc)[0] == 503, 10, "/health to say unhealthy")
        status, h = health(svc)
        assert h["status"] == "unhealthy" and "STATE_DIR" in h["message"] and state_dir in h["message"], h
        assert_nothing_left(svc, state_dir, "by failed set-ups (STATE_DIR 0700)")
    finally:
        os.chmod(state_dir, 0o755)
    run_ok(svc)
    wait_for(lambda: health(svc)[0] == 200, 10, "/health to recover")

    # 2. the mount point removed
    os.rmdir(root)
    try:
        failing_round("STATE_DIR/root removed", root)
        wait_for(lambda: health(svc)[0] == 503, 10, "/health to say unhealthy")
        assert root in health(svc)[1]["message"]
        assert_nothing_left(svc, state_dir, "by failed set-ups (no mount point)")
    finally:
        if not os.path.isdir(root):
            os.mkdir(root, 0o755)
    run_ok(svc)
    wait_for(lambda: health(svc)[0] == 200, 10, "/health to recover")
    assert_nothing_left(svc, state_dir, "after the repair")
    assert not lost, ("%d of %d sandbox_setup_failed replies do not say why (nothing names %s); "
                      "the child's report was not read:\n%s" % (len(lost), n, root, "\n".join(lost)))


@pytest.mark.parametrize("breakage", ["file", "unsearchable-parent"])
def test_state_dir_unusable_at_start_stops_the_start_cleanly(breakage):
    top = tempfile.mkdtemp(prefix=MARK + "-")
    try:
        if breakage == "file":
            os.chmod(top, 0o755)
            state = os.path.join(top, "state")
            with open(state, "w") as f:
                f.write("not a directory\n")
        else:
            os.chmod(top, 0o700)      # mkdtemp's mode: the sandbox's root cannot pass
            state = os.path.join(top, "state")
        env = dict(os.environ, STATE_DIR=state)
        env.pop("LISTEN_ADDRESS", None)
        proc = subprocess.Popen([BIN, "serve", "--listen", "127.0.0.1:%d" % free_port()], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate(timeout=30)
            raise AssertionError("serve did not stop with an unusable STATE_DIR (%s): %s" % (breakage, err[-500:]))
        text = err.decode(errors="replace")
        assert proc.returncode not in (0, None), text
        assert "listening on" not in text, text
        assert state in text or top in text, text
        assert _cli.leftover_cgroups({proc.pid}) == []
        assert template_processes(state) == []
    finally:
        os.chmod(top, 0o755)
        safe_rmtree(top)


def test_cgroup_creation_refused_is_a_clean_500_and_repairable(start_service, state_dir):
    # The cold path's failure is what is checked: a pre-started JavaScript or Bash
    # sandbox (SANDBOX_POOL), whose cgroup was made before the fault, would rightly
    # serve the request. test_pool.py covers the pool under this fault.
    svc = start_service(env={"STATE_DIR": state_dir, "SANDBOX_POOL": "0"})
    wait_warm(svc)  # the templates have taken their cgroup numbers
    inst = instance_name(svc.proc.pid)
    parents = _cli.engine_cgroup_parents()
    assert parents, "no engine cgroup directory found"
    last = parents[-1]          # the hierarchy the engine creates last (v1) or the only one (v2)
    used = [int(m.group(1)) for p in parents for n in os.listdir(p)
            for m in [re.fullmatch(re.escape(inst) + r"-(\d+)", n)] if m]
    first = max(used, default=0) + 1
    made: List[str] = []
    try:
        for seq in range(first, first + 12):
            d = os.path.join(last, "%s-%d" % (inst, seq))
            os.mkdir(d)
            made.append(d)
        hdrs: Dict[str, str] = {}
        for _ in range(2):
            for lang in LANGS:
                msg, hdrs = setup_failed(svc, lang)
                assert msg == "creating cgroup %s: File exists" % last, msg
        rec = svc.exec_log(hdrs["x-request-id"])
        assert rec["outcome"] == "setup_failed" and rec["status"] == 500, rec
        # the hierarchies created before the failing one were removed again
        assert_nothing_left(svc, state_dir, "by refused cgroup creations", ignore=set(made))
    finally:
        for d in made:
            try:
                os.rmdir(d)
            except OSError:
                pass
    run_ok(svc)
    assert_nothing_left(svc, state_dir, "after the repair")
