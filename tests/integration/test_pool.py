"""Pre-started single-use sandboxes (SANDBOX_POOL) give what a cold start gives.

Python, JavaScript and Bash run from sandboxes started ahead of time, their interpreter
waiting on the code FIFO at /code/main.* (Python's forked from a warm template): the
same command line, so the same argv, __file__, __filename, $0, line numbers, tracebacks,
syntax errors and stack format as a cold run. Each program below runs through a service
with the pools on (it must be logged "pooled") and through one with SANDBOX_POOL=0
(logged "cold", or "warm" for Python), and the results must be the same: output, exit
code, error messages, the kill lines of the time and memory limits. What the pool cannot
serve exactly (stdin, env_vars, another memory_mb, code that may read its own file such
as an ES module) runs as it would without the pool, and still runs.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any, Dict, List, Tuple

import pytest

from conftest import get_metrics, http_request, post_exec, wait_for

SAME = ("stdout", "stderr", "exit_code", "timed_out", "oom_killed", "signal", "stdout_truncated",
        "stdout_omitted_bytes")

PROGRAMS = {
    "python": {
        "hello": ("import sys, os\nprint('hi', __name__, sys.path[0], os.getcwd(), sorted(os.environ))", {}),
        # the parser reads the line of a syntax error by the file's name, which a FIFO
        # cannot give twice
        "syntax error": ("x = 1\ny = (\n", {}),
        "syntax error inside": ("def f(:\n    pass\n", {}),
        "syntax warning": ("if 1 is 1:\n    print('lit')\n", {}),
        # the interpreter's own traceback printer opens the file again
        "uncaught exception": ("def f():\n    return 1 / 0\nf()\n", {}),
        "exception in a thread": ("import threading\ndef g():\n    raise ValueError(7)\n"
                                  "t = threading.Thread(target=g)\nt.start()\nt.join()\nprint('after')\n", {}),
        "unraisable": ("class A:\n    def __del__(self):\n        raise KeyError(1)\na = A()\ndel a\nprint(4)\n", {}),
        "warning": ("import warnings\nwarnings.warn('careful')\n", {}),
        "source of a function": ("import inspect\ndef h():\n    return 1\nprint(inspect.getsource(h), end='')\n"
                                 "print(h.__code__.co_filename)\n", {}),
        "exit 3": ("print('bye')\nraise SystemExit(3)\n", {}),
        # from the scientific template's pre-started sandbox
        "pandas": ("import pandas as pd\nprint(pd.DataFrame({'a': [1, 2, 4]}).describe())\n", {}),
        "large output": ("import sys\nsys.stdout.write('y' * (3 << 20))\nprint('done', file=sys.stderr)\n", {}),
        "time limit": ("print('spin', flush=True)\nwhile True:\n    pass\n", {"timeout": 4}),
        "memory limit": ("a = []\nwhile True:\n    a.append(bytearray(1 << 20))\n", {}),
    },
    "javascript": {
        "hello": ('console.log("hi", process.argv, require.main === module, module.id, '
                  'typeof require, process.cwd())', {}),
        "syntax error": ("let x = (;\n", {}),
        "uncaught exception": ("function f() { null.x }\nf()\n", {}),
        "exit 3": ('console.log("bye"); process.exit(3)', {}),
        "large output": ('process.stdout.write("y".repeat(3 << 20)); console.error("done")', {}),
        # the limit leaves a cold start on a loaded machine time to print before its spin
        "time limit": ('console.log("spin"); while (true) {}', {"timeout": 4}),
        "memory limit": ("const a = []; while (true) a.push(new Array(1e6).fill(1));", {}),
        "env and meminfo": ('const fs = require("fs"); console.log(JSON.stringify(process.env), '
                            'fs.readFileSync("/proc/meminfo", "utf8").split("\\n")[0], '
                            'fs.readFileSync("/dev/stdin").length)', {}),
    },
    "bash": {
        "hello": ('echo "hi $LINENO ${BASH_LINENO[*]} $-"; f() { echo "in f $LINENO"; }; f', {}),
        "syntax error": ("echo start\nif then fi\n", {}),
        "command not found": ("echo a\nno_such_command_here\necho b\n", {}),
        "exit 4": ("(exit 3); echo $?; exit 4", {}),
        "set -e": ("set -e\nfalse\necho never\n", {}),
        "large output": ("head -c 3000000 /dev/zero | tr '\\0' y; echo done >&2", {}),
        "time limit": ("echo spin; while :; do :; done", {"timeout": 4}),
        "env and stdin": ("env | sort; head -1 /proc/meminfo; wc -c < /dev/stdin; stat -L -c %F /dev/stdin", {}),
    },
}

# run as without the pool (cold; Python warm) even with the pool on, and still right
COLD_ANYWAY = {
    "python": [
        ("stdin", "print('got ' + input())", {"stdin": "abc\n"}, "got abc\n"),
        ("its own file", "print(len(open(__file__).read()))", {}, "@LEN@"),
        ("env_vars", "import os\nprint(os.environ['X'])", {"env_vars": {"X": "1"}}, "1\n"),
        ("memory_mb", "print('m')", {"memory_mb": 128}, "m\n"),
        ("its CPU time", "import time\nprint(time.process_time() < 5)", {}, "True\n"),
    ],
    "javascript": [
        ("stdin", 'process.stdin.on("data", d => console.log("got " + d))', {"stdin": "abc"}, "got abc\n"),
        ("an ES module", 'import fs from "fs";\nconsole.log(typeof fs.readFileSync)', {}, "function\n"),
        ("its own file", 'console.log(require("fs").readFileSync(__filename, "utf8").length)', {}, "@LEN@"),
        ("env_vars", "console.log(process.env.X)", {"env_vars": {"X": "1"}}, "1\n"),
        ("memory_mb", 'console.log("m")', {"memory_mb": 128}, "m\n"),
        ("its uptime", "console.log(process.uptime() < 5, performance.now() < 5000)", {}, "true true\n"),
    ],
    "bash": [
        ("stdin", "read x; echo got $x", {"stdin": "abc\n"}, "got abc\n"),
        ("its own file", 'wc -c < "$0"', {}, "@LEN@"),
        ("env_vars", "echo $X", {"env_vars": {"X": "1"}}, "1\n"),
        ("its uptime", "echo $SECONDS", {}, "0\n"),
        ("a long script", "x=1\n" * 1100 + "echo $x", {}, "1\n"),
    ],
}


def pool_state(svc) -> Dict[str, Any]:
    status, _, h = http_request(svc.url, "GET", "/health")
    assert status == 200 and "pool" in h, h
    return h["pool"]


def run(svc, lang: str, code: str, extra: Dict[str, Any], want: str) -> Tuple[Dict[str, Any], str]:
    """Runs code on svc; with want "pooled", waits for a ready pre-started sandbox first
    and retries a run that found none ready (it ran cold)."""
    for _ in range(8):
        if want == "pooled":
            deadline = time.monotonic() + 30
            while pool_state(svc)["ready"] < pool_state(svc)["target"]:
                assert time.monotonic() < deadline, pool_state(svc)
                time.sleep(0.05)
            time.sleep(0.3)  # its interpreter reaches the FIFO's open
        status, _, res = post_exec(svc.url, dict({"language": lang, "code": code}, **extra), timeout=120)
        assert status == 200, (status, res)
        start = svc.exec_log(res["id"])["start"]
        if start == want or want != "pooled":
            return res, start
    pytest.fail(f"{lang} {code[:40]!r} never ran from a pre-started sandbox")


def same_text(v: Any) -> Any:
    """What must be equal: an object's address in a message is the process's own."""
    return re.sub(r"0x[0-9a-f]+", "0x?", v) if isinstance(v, str) else v


# how the language starts without a pool
UNPOOLED = {"python": "warm", "javascript": "cold", "bash": "cold"}


@pytest.mark.parametrize("lang", ["python", "javascript", "bash"])
def test_pooled_runs_give_what_cold_runs_give(start_service, lang: str) -> None:
    pooled_svc = start_service(env={"SANDBOX_POOL": "1"})
    cold_svc = start_service(env={"SANDBOX_POOL": "0"})
    assert pool_state(pooled_svc)["target"] >= 1 and pool_state(cold_svc)["target"] == 0
    if lang == "python":
        wait_for(lambda: health(cold_svc)["warm"]["templates_ready"] == health(cold_svc)["warm"]["templates_total"],
                 90, "the warm templates")
    for name, (code, extra) in PROGRAMS[lang].items():
        pooled, how = run(pooled_svc, lang, code, extra, "pooled")
        cold, cold_how = run(cold_svc, lang, code, extra, UNPOOLED[lang])
        assert (how, cold_how) == ("pooled", UNPOOLED[lang]), name
        diff = {k: (pooled.get(k), cold.get(k)) for k in SAME if same_text(pooled.get(k)) != same_text(cold.get(k))}
        assert not diff, f"{lang} {name}: pooled and cold differ: {diff}"
    # the limits really ended them, with their own lines
    res, _ = run(pooled_svc, lang, *PROGRAMS[lang]["time limit"], "pooled")
    assert res["timed_out"] and "time limit of 4 s exceeded" in res["stderr"], res
    if lang != "bash":
        res, _ = run(pooled_svc, lang, *PROGRAMS[lang]["memory limit"], "pooled")
        assert res["oom_killed"] and "memory limit" in res["stderr"], res
    st = pool_state(pooled_svc)
    assert st["served"] >= len(PROGRAMS[lang]) and st["memory_mb"] <= st["memory_max_mb"], st


@pytest.mark.parametrize("lang", ["python", "javascript", "bash"])
def test_what_the_pool_cannot_serve_exactly_runs_cold(start_service, lang: str) -> None:
    svc = start_service(env={})
    assert pool_state(svc)["languages"][lang]["target"] >= 1, "the pools are on by default"
    if lang == "python":
        wait_for(lambda: health(svc)["warm"]["templates_ready"] == health(svc)["warm"]["templates_total"],
                 90, "the warm templates")
    for name, code, extra, out in COLD_ANYWAY[lang]:
        out = out.replace("@LEN@", "%d\n" % len(code))
        res, how = run(svc, lang, code, extra, "cold")
        assert how == UNPOOLED[lang], (name, how)
        assert res["exit_code"] == 0 and res["stdout"] == out, (name, res)


def test_a_refill_the_host_refuses_leaves_nothing_and_recovers(start_service) -> None:
    """While the engine cannot create cgroups (the next names already exist), a ready
    pre-started sandbox still serves (its cgroup was made before), its refill fails and
    leaves nothing behind, later requests run cold and fail as cold ones do, and once
    the names are free again the pool fills up by itself."""
    import os
    import re

    from hxstest import host as _cli

    svc = start_service(env={})
    st = pool_state(svc)
    res, how = run(svc, "bash", "echo ok", {}, "pooled")
    assert how == "pooled" and res["stdout"] == "ok\n", res
    deadline = time.monotonic() + 30
    while pool_state(svc)["ready"] < st["target"]:
        assert time.monotonic() < deadline, pool_state(svc)
        time.sleep(0.05)
    inst = "s%d.%d" % (svc.proc.pid, _cli.proc_start_time(svc.proc.pid))
    parents = _cli.engine_cgroup_parents()
    last = parents[-1]
    used = [int(m.group(1)) for p in parents for n in os.listdir(p)
            for m in [re.fullmatch(re.escape(inst) + r"-(\d+)", n)] if m]
    first = max(used, default=0) + 1
    made = []
    try:
        for seq in range(first, first + 12):
            d = os.path.join(last, "%s-%d" % (inst, seq))
            os.mkdir(d)
            made.append(d)
        res, how = run(svc, "bash", "echo ok", {}, "pooled")
        assert how == "pooled" and res["stdout"] == "ok\n", res
        time.sleep(1.5)  # the refill was tried, and failed
        assert pool_state(svc)["ready"] < st["target"], pool_state(svc)
        status, _, res = post_exec(svc.url, {"language": "bash", "code": "echo ok"}, timeout=60)
        assert status == 500 and "File exists" in res["error"]["message"], (status, res)
        templates = {n for pid in _cli.pids_named("python3") if b"Warm templates" in
                     (_cli.read_proc("/proc/%d/cmdline" % pid, "rb") or b"")
                     for n in re.findall(r"/hexr-sandbox/(s\d+\.\d+-\d+)", _cli.read_proc("/proc/%d/cgroup" % pid) or "")}
        left = [c for c in _cli.leftover_cgroups({svc.proc.pid}) if c not in made and os.path.basename(c) not in templates]
        assert not left, left
        assert not _cli.leaked_sandbox_processes({svc.proc.pid})
    finally:
        for d in made:
            try:
                os.rmdir(d)
            except OSError:
                pass
    deadline = time.monotonic() + 60
    while pool_state(svc)["ready"] < st["target"]:
        assert time.monotonic() < deadline, "the pool never refilled after the repair: %s" % pool_state(svc)
        time.sleep(0.2)
    res, how = run(svc, "bash", "echo ok", {}, "pooled")
    assert res["stdout"] == "ok\n", res


def health(svc) -> Dict[str, Any]:
    status, _, h = http_request(svc.url, "GET", "/health")
    assert status == 200, h
    return h


def test_health_reports_what_the_pools_hold_by_language(start_service) -> None:
    svc = start_service(env={"SANDBOX_POOL": "2", "SANDBOX_POOL_MEMORY_MB": "768", "DEFAULT_MEMORY_MB": "128",
                             "MEMORY_BUDGET_MB": "4096"})
    wait_for(lambda: pool_state(svc)["ready"] == pool_state(svc)["target"], 60, "the pools to fill")
    st = pool_state(svc)
    # 768 MB is six of 128 MB: two per language
    assert st["target"] == 6 and st["memory_max_mb"] == 768 and st["memory_limit_mb"] == 768, st
    langs = st["languages"]
    assert sorted(langs) == ["bash", "javascript", "python"], st
    for lang in langs.values():
        assert lang == {"ready": 2, "target": 2, "memory_mb": 256}, st
    assert st["memory_mb"] == sum(v["memory_mb"] for v in langs.values()) == 768, st
    assert st["ready"] == sum(v["ready"] for v in langs.values()), st


def test_pools_give_their_memory_to_executions_and_refill_after(start_service) -> None:
    """MEMORY_BUDGET_MB 1024 leaves the pools a quarter: one JavaScript and one Bash
    sandbox of 128 MB. Four executions of 256 MB (which no pre-started sandbox serves)
    need the whole budget: they all run at once, none waits or is turned away, the pools
    give up what they hold as the budget fills and are not refilled into it, and what
    runs and what the pools hold never exceed the budget. Once they end the pools fill
    up again."""
    svc = start_service(env={"MEMORY_BUDGET_MB": "1024", "DEFAULT_MEMORY_MB": "128", "MAX_CONCURRENT": "8",
                             "SANDBOX_POOL": "4"})
    wait_for(lambda: pool_state(svc)["ready"] == 2, 60, "the pools to fill")
    assert pool_state(svc)["memory_mb"] == 256, pool_state(svc)
    body = {"code": "sleep 4; echo done", "language": "bash", "memory_mb": 256}
    out: List[Any] = [None] * 4
    threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, post_exec(svc.url, body, timeout=120)))
               for i in range(4)]
    for t in threads:
        t.start()
    seen: List[Tuple[int, int, int]] = []
    while any(t.is_alive() for t in threads):
        h = health(svc)
        seen.append((h["active"], h["memory_held_mb"], h["pool"]["memory_mb"]))
        assert h["memory_held_mb"] + h["pool"]["memory_mb"] <= h["memory_budget_mb"], h
        assert h["queued"] == 0, h
        if h["active"] == 4:
            assert h["pool"]["ready"] == 0 and h["pool"]["memory_limit_mb"] == 0, h
        time.sleep(0.1)
    assert [r[0] for r in out] == [200] * 4 and all(r[2]["stdout"] == "done\n" for r in out), out
    assert any(a == 4 for a, _, _ in seen), seen
    m = get_metrics(svc.url)
    assert m.get('hexr_sandbox_http_requests_total{route="/api/v1/exec",status="429"}', 0) == 0
    wait_for(lambda: pool_state(svc)["ready"] == 2, 60, "the pools to refill")
    res, how = run(svc, "bash", "echo ok", {}, "pooled")
    assert how == "pooled" and res["stdout"] == "ok\n", res


def test_sigterm_with_ready_pools_leaves_nothing(start_service) -> None:
    """A service stopped while its pre-started sandboxes wait for code destroys them
    on its way out: no process, cgroup or mount of it is left, and it exits 0."""
    import os
    import signal

    from hxstest import host as _cli

    svc = start_service(env={"SANDBOX_POOL": "2"})
    wait_for(lambda: pool_state(svc)["ready"] == pool_state(svc)["target"], 60, "the pools to fill")
    target = pool_state(svc)["target"]
    pid = svc.proc.pid
    inst = "s%d.%d" % (pid, _cli.proc_start_time(pid))
    wait_for(lambda: len([n for n in _cli.instance_processes(inst) if _cli.waiting_pooled_name(n)]) == target,
             60, "every pre-started interpreter to wait on its FIFO")
    state = os.path.join(svc.workdir, "state")
    svc.proc.send_signal(signal.SIGTERM)
    assert svc.wait(timeout=60) == 0, "\n".join(svc.log[-40:])
    assert _cli.instance_processes(inst) == {}
    assert _cli.leftover_cgroups({pid}) == []
    assert _cli.leaked_sandbox_processes({pid}) == []
    assert _cli.host_mounts_under(state) == []
    root = os.path.join(state, "root")
    assert not os.path.isdir(root) or os.listdir(root) == [], os.listdir(root)
