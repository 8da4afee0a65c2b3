"""An execution from a pre-started sandbox sees no trace of an earlier one.

Python, JavaScript and Bash run from pre-started single-use sandboxes (SANDBOX_POOL, on
by default; Python's forked from a warm template): each was started ahead of time with
its interpreter waiting for code, serves one execution and is destroyed. Here a first execution leaves everything it can behind
(files in every writable place, a detached process carrying a marker, a secret in its
own memory and output, its random state), and a second one, from another pre-started
sandbox of the same service, searches for it: its files, its environment, every
process it can see, their command lines and every readable region of their memory, and
draws its own random numbers. Both must have run pooled (the service's log says so),
and a control token the second one plants itself must be found by the same search, so
that "nothing found" means something. Through a service that ran the canary first.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from typing import Any, Dict, List

import pytest

import _service
from _service import assert_ran

# The search, run by python3 inside the second sandbox. The needles come as two halves
# (argv 1+2: the trace, 3+4: the control) and are never put together in its memory: a
# hit is a first half followed by the second.
SCAN = r'''
import json, os, sys
pairs = {"trace": (sys.argv[1].encode(), sys.argv[2].encode()),
         "control": (sys.argv[3].encode(), sys.argv[4].encode())}
# the control: in a file, and in this process's memory, whole
ctl = sys.argv[3] + sys.argv[4]
with open("/tmp/control.txt", "w") as f:
    f.write(ctl)
ctl_bytes = ctl.encode()
found = {k: [] for k in pairs}
scanned = {"files": 0, "regions": 0, "bytes": 0, "pids": []}

def look(where, buf):
    for k, (a, b) in pairs.items():
        i = buf.find(a)
        while i >= 0:
            if buf[i + len(a):i + len(a) + len(b)] == b:
                found[k].append(where)
                break
            i = buf.find(a, i + 1)

for top in ("/tmp", "/home/sandbox", "/dev/shm", "/var/tmp", "/run"):
    for d, _, names in os.walk(top):
        for n in names:
            p = os.path.join(d, n)
            try:
                with open(p, "rb") as f:
                    look("file " + p, f.read(1 << 24))
                scanned["files"] += 1
            except OSError:
                pass
look("environ self", b"\0".join(k + b"=" + v for k, v in os.environb.items()))
for pid in sorted(os.listdir("/proc"), key=lambda s: (len(s), s)):
    if not pid.isdigit():
        continue
    scanned["pids"].append(pid)
    for what in ("cmdline", "environ"):
        try:
            with open("/proc/%s/%s" % (pid, what), "rb") as f:
                look("%s %s" % (what, pid), f.read())
        except OSError:
            pass
    try:
        with open("/proc/%s/maps" % pid) as f:
            maps = f.read().splitlines()
        mem = open("/proc/%s/mem" % pid, "rb", buffering=0)
    except OSError:
        continue
    with mem:
        for line in maps:
            fields = line.split()
            if fields[1][0] != "r" or (len(fields) > 5 and fields[5] in ("[vvar]", "[vsyscall]")):
                continue
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            pos = lo
            while pos < hi:
                n = min(hi - pos, 1 << 24)
                try:
                    mem.seek(pos)
                    chunk = mem.read(n)
                except (OSError, ValueError, OverflowError):
                    break
                if not chunk:
                    break
                look("memory %s %s" % (pid, fields[-1] if len(fields) > 5 else "anon"), chunk)
                scanned["bytes"] += len(chunk)
                pos += len(chunk)
            scanned["regions"] += 1
print(json.dumps({"found": found, "scanned": scanned}))
'''
SCAN_B64 = base64.b64encode(SCAN.encode()).decode()

# The first execution: files everywhere it may write, a detached process whose command
# line and memory carry the trace, the trace in its output and memory, random numbers.
LEAVE = {
    "python": r'''
import json, os, random, subprocess
trace = "@TRACE@"
for d in ("/tmp", "/home/sandbox", "/dev/shm"):
    with open(d + "/left-" + trace, "w") as f:
        f.write(trace)
kept = (trace * 64).encode()
subprocess.Popen(["/bin/sh", "-c", "exec sleep 300 " + trace], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(json.dumps({"trace": trace, "random": [random.random(), random.random()],
                  "bytes": os.urandom(16).hex()}))
''',
    "javascript": r'''
const fs = require("fs"), cp = require("child_process"), crypto = require("crypto");
const trace = "@TRACE@";
for (const d of ["/tmp", "/home/sandbox", "/dev/shm"]) fs.writeFileSync(d + "/left-" + trace, trace);
globalThis.kept = Buffer.from(trace.repeat(64));
const child = cp.spawn("/bin/sh", ["-c", "exec sleep 300 " + trace], {detached: true, stdio: "ignore"});
child.unref();
console.log(JSON.stringify({trace, random: [Math.random(), Math.random()],
                            bytes: crypto.randomBytes(16).toString("hex")}));
''',
    "bash": r'''
trace=@TRACE@
for d in /tmp /home/sandbox /dev/shm; do printf '%s' "$trace" > "$d/left-$trace"; done
kept=$trace$trace$trace
(exec -a "sleep-$trace" sleep 300 &) </dev/null >/dev/null 2>&1
printf 'trace\t%s\nrandom\t%s %s %s\nsrandom\t%s\n' "$trace" $RANDOM $RANDOM $RANDOM "$SRANDOM"
''',
}

# The second: the same random draws, then the search (python3 from stdin).
SEARCH = {
    "python": r'''
import base64, json, os, random, subprocess, sys
r = subprocess.run(["python3", "-", "@A@", "@B@", "@C@", "@D@"], input=base64.b64decode("@SCAN@"),
                   capture_output=True)
sys.stderr.write(r.stderr.decode())
print(json.dumps({"scan": json.loads(r.stdout), "random": [random.random(), random.random()],
                  "bytes": os.urandom(16).hex()}))
''',
    "javascript": r'''
const cp = require("child_process"), crypto = require("crypto");
const r = cp.spawnSync("python3", ["-", "@A@", "@B@", "@C@", "@D@"],
                       {input: Buffer.from("@SCAN@", "base64"), maxBuffer: 1 << 26});
process.stderr.write(r.stderr);
const scan = JSON.parse(r.stdout.toString());
console.log(JSON.stringify({scan, random: [Math.random(), Math.random()],
                            bytes: crypto.randomBytes(16).toString("hex")}));
''',
    "bash": r'''
printf 'random\t%s %s %s\nsrandom\t%s\n' $RANDOM $RANDOM $RANDOM "$SRANDOM"
printf 'scan\t'
printf '%s' "@SCAN@" | base64 -d | python3 - @A@ @B@ @C@ @D@
''',
}


@pytest.fixture(scope="module")
def pool_svc(sandbox_isolates: str):
    yield from _service.serve_module()


def pool_state(svc) -> Dict[str, Any]:
    status, body = svc.health()
    assert status == 200 and isinstance(body, dict) and "pool" in body, body
    return body["pool"]


def wait_pool_ready(svc) -> Dict[str, Any]:
    """Every pre-started sandbox ready, and one of them waiting in its interpreter."""
    deadline = time.monotonic() + 30
    while True:
        st = pool_state(svc)
        if st["target"] > 0 and st["ready"] == st["target"]:
            time.sleep(0.5)  # an interpreter that has just started reaches its open
            return st
        assert time.monotonic() < deadline, "the pre-started sandboxes never became ready: %s" % st
        time.sleep(0.1)


def starts_logged(svc, ids: List[str]) -> List[str]:
    starts = {}
    for line in svc.log():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("event") == "exec" and rec.get("id") in ids:
            starts[rec["id"]] = rec.get("start")
    return [starts.get(i, "?") for i in ids]


def run_pooled(svc, code: str, lang: str) -> Any:
    """Runs code, which must be served by a pre-started sandbox; retried while none is
    ready yet (then it ran cold, which proves nothing here)."""
    for _ in range(5):
        wait_pool_ready(svc)
        res = assert_ran(svc.run(code, lang, timeout=30))
        for _ in range(50):
            got = starts_logged(svc, [res["id"]])[0]
            if got != "?":
                break
            time.sleep(0.1)
        if got == "pooled":
            return res
    pytest.fail("%s never ran from a pre-started sandbox (last start: %s)" % (lang, got))


@pytest.mark.parametrize("lang", ["python", "javascript", "bash"])
def test_a_pooled_execution_finds_nothing_of_the_previous_one(pool_svc, lang: str) -> None:
    svc = pool_svc
    assert pool_state(svc)["target"] > 0, "SANDBOX_POOL is on by default"
    trace = "hxs-pool-trace-" + uuid.uuid4().hex
    control = "hxs-pool-control-" + uuid.uuid4().hex
    first = run_pooled(svc, LEAVE[lang].replace("@TRACE@", trace), lang)
    assert trace in first.out, first.describe()
    half, chalf = len(trace) // 2, len(control) // 2
    code = (SEARCH[lang].replace("@SCAN@", SCAN_B64)
            .replace("@A@", trace[:half]).replace("@B@", trace[half:])
            .replace("@C@", control[:chalf]).replace("@D@", control[chalf:]))
    assert trace not in code and control not in code
    second = run_pooled(svc, code, lang)
    if lang != "bash":
        a, b = first.json(), second.json()
        scan = b["scan"]
        assert a["random"] != b["random"] and a["bytes"] != b["bytes"], (a, b)
    else:
        a, b = first.tabs(), second.tabs()
        scan = json.loads(b["scan"])
        assert (a["random"], a["srandom"]) != (b["random"], b["srandom"]), (a, b)
    found, scanned = scan["found"], scan["scanned"]
    # the search works: it finds the control in the file and in its own memory
    assert any(w.startswith("file ") for w in found["control"]), scan
    assert any(w.startswith("memory ") for w in found["control"]), scan
    assert scanned["regions"] > 10 and scanned["bytes"] > 1 << 20, scanned
    # and it finds nothing of the first execution anywhere
    assert found["trace"] == [], "the second execution found the first one's trace: %s" % found["trace"]
    # no process of the first one: the sandbox's PID 1, the program and the search only
    assert len(scanned["pids"]) <= 4, scanned["pids"]
