"""A sandbox's PID 1 holds none of the service's memory, and none of its privileges.

PID 1 builds the sandbox, forks the program, drops every privilege and then execs a
small static init: from then on it is a fresh process image. Read from the host (as
root, read-only) while a program sleeps, its memory holds neither a secret from the
service's environment nor the code of another request in flight, and its status shows
no_new_privs, the seccomp filter and no capabilities. Checked for a cold sandbox
(cloned from the service) and a warm one (cloned from a template). The service runs
the canary first.
"""

from __future__ import annotations

import threading
import uuid
from typing import Dict, List, Tuple

import pytest

import _service

HOLD_S = 15  # the sandboxes sleep at most this long; the test ends them sooner


@pytest.fixture(scope="module")
def pid1_svc(sandbox_isolates: str):
    yield from _service.serve_module({"MAX_CONCURRENT": "4"})


def status(pid: int) -> Dict[str, str]:
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def memory_holds(pid: int, needles: Dict[str, bytes]) -> Tuple[List[str], int]:
    """Which needles are in the readable memory of pid, and how many bytes were read."""
    found, total = set(), 0
    with open("/proc/%d/maps" % pid) as maps, open("/proc/%d/mem" % pid, "rb", buffering=0) as mem:
        for line in maps:
            f = line.split()
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            if "r" not in f[1] or hi - lo > 1 << 30 or (len(f) > 5 and f[5] == "[vvar]"):
                continue
            try:
                mem.seek(lo)
                data = mem.read(hi - lo)
            except OSError:
                continue
            total += len(data)
            for name, needle in needles.items():
                if needle in data:
                    found.add(name)
    return sorted(found), total


# The program names itself (so the host finds it) and sleeps; its parent is PID 1.
SLEEPER = {
    "bash": 'exec -a @NAME@ sleep @HOLD@',
    "python": 'import ctypes, time\nctypes.CDLL(None).prctl(15, b"@NAME@", 0, 0, 0)\ntime.sleep(@HOLD@)',
}


@pytest.mark.parametrize("lang", ["bash", "python"])
def test_pid1_is_a_fresh_image_without_privileges(pid1_svc, lang: str) -> None:
    svc = pid1_svc
    victim_marker = "hxs-victim-code-" + uuid.uuid4().hex
    victim_name = "hxvi" + uuid.uuid4().hex[:8]
    name = "hxp1" + uuid.uuid4().hex[:8]
    results: Dict[str, _service.Result] = {}

    def run(key: str, code: str, lang_: str) -> None:
        results[key] = svc.exec(code, lang_, timeout=HOLD_S + 5)

    # another caller's request in flight, with a marker in its code: the service holds
    # it while it runs
    victim_code = "# %s\nexec -a %s sleep %d" % (victim_marker, victim_name, HOLD_S)
    threads = [threading.Thread(target=run, args=("victim", victim_code, "bash"), daemon=True)]
    threads[0].start()
    programs: List[int] = []
    try:
        programs += _service.wait_named({"victim": victim_name}, threads, 30).values()
        assert programs, "the other request did not start: %s" % results
        code = SLEEPER[lang].replace("@NAME@", name).replace("@HOLD@", str(HOLD_S))
        threads.append(threading.Thread(target=run, args=("target", code, lang), daemon=True))
        threads[1].start()
        program = _service.wait_named({"target": name}, threads[1:], 30).get("target")
        assert program, "the sandboxed program did not start: %s" % results
        programs.append(program)
        init = int(status(program)["PPid"])
        st = status(init)
        nspid = st.get("NSpid", "").split()
        assert nspid and nspid[-1] == "1", "the program's parent %d is not its sandbox's PID 1: %s" % (init, st)
        found, read = memory_holds(init, {
            "a secret of the service's environment": svc.secret_value.encode(),
            "another request's code": victim_marker.encode(),
        })
        assert read > 0, "nothing of PID 1's memory could be read"
        assert not found, "PID 1 of a %s sandbox (host pid %d, %s) holds %s" % (
            lang, init, st.get("Name"), ", ".join(found))
        assert st.get("NoNewPrivs") == "1", st
        assert st.get("Seccomp") == "2", st
        for key in ("CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb"):
            assert int(st.get(key, "1"), 16) == 0, (key, st)
        assert st.get("Uid", "").split()[0] not in ("0", str(svc.uid_base + 2000)), st
    finally:
        for pid in programs:  # the test's own sandboxed programs
            if pid:
                _service.kill_pid(pid)
        for t in threads:
            t.join(HOLD_S + 30)
    for key in ("victim", "target"):
        res = results[key]
        assert res.status == 200 and res.get("signal") == 9, res.describe()
