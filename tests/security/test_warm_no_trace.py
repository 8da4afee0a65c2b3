"""A warm execution finds nothing of the one before it in its own memory.

A warm program is a copy of its template, and the sandbox's PID 1 runs in the template's
own memory until it execs its init (src/ns/zygote-module.c): the payload (code and
environment) is mapped there and the files are copied there. Here a first warm execution
gets a trace in its code, its environment and a file it is sent, and keeps it in its own
memory; a second one, from the same template (sequential requests take the same slot),
reads every readable region of its own memory and searches for it. Both must have run
warm, and a control the second one plants in its own memory must be found by the same
search, so that "nothing found" means something. Through a service that ran the canary
first.
"""

from __future__ import annotations

import json
import uuid

import pytest

import _service
from _service import WARM_FLAG_PY, assert_ran

# The search, in the second program. The needles come as halves (the trace's, then the
# control's) and are never put together: a hit is a first half followed by the second.
SCAN = r'''
import json, sys
pairs = {"trace": (@A@, @B@), "control": (@C@, @D@)}
control = (pairs["control"][0] + pairs["control"][1]) * 4  # held whole, in this memory
found = {k: [] for k in pairs}
regions = 0
with open("/proc/self/maps") as f:
    maps = f.read().splitlines()
with open("/proc/self/mem", "rb", buffering=0) as mem:
    for line in maps:
        fields = line.split()
        if fields[1][0] != "r" or (len(fields) > 5 and fields[5] in ("[vvar]", "[vsyscall]")):
            continue
        lo, hi = (int(x, 16) for x in fields[0].split("-"))
        try:
            mem.seek(lo)
            buf = mem.read(hi - lo)
        except (OSError, ValueError, OverflowError):
            continue
        regions += 1
        for k, (a, b) in pairs.items():
            i = buf.find(a)
            while i >= 0:
                if buf[i + len(a):i + len(a) + len(b)] == b:
                    found[k].append(fields[-1] if len(fields) > 5 else "anon " + fields[0])
                    break
                i = buf.find(a, i + 1)
print(json.dumps({"found": found, "regions": regions, "warm": @WARM@}))
'''

LEAVE = r'''
import os
trace = "@TRACE@"
kept = [trace * 16, os.environ["HXS_TRACE"], open("data/trace.txt").read()]
print(@WARM@)
'''


@pytest.fixture(scope="module")
def trace_svc(sandbox_isolates: str):
    yield from _service.serve_module()


@pytest.mark.parametrize("kind", ["plain", "sci"])
def test_a_warm_execution_finds_nothing_of_the_previous_one(trace_svc, kind: str) -> None:
    svc = trace_svc
    svc.wait_warm()
    head = "# numpy\n" if kind == "sci" else ""
    trace = "hxs-warm-trace-" + uuid.uuid4().hex
    control = "hxs-warm-control-" + uuid.uuid4().hex
    first = assert_ran(svc.run(head + LEAVE.replace("@TRACE@", trace).replace("@WARM@", WARM_FLAG_PY),
                               env_vars={"HXS_TRACE": trace},
                               extra={"files": [{"path": "data/trace.txt", "content": trace}]}))
    assert first.out.strip() == "True", "the first execution did not run warm: " + first.describe()
    half_t, half_c = len(trace) // 2, len(control) // 2
    scan = (SCAN.replace("@A@", repr(trace[:half_t].encode())).replace("@B@", repr(trace[half_t:].encode()))
            .replace("@C@", repr(control[:half_c].encode())).replace("@D@", repr(control[half_c:].encode()))
            .replace("@WARM@", WARM_FLAG_PY))
    second = assert_ran(svc.run(head + scan, timeout=30))
    got = second.json()
    assert got["warm"] is True, "the search did not run warm: " + second.describe()
    assert got["regions"] > 10 and got["found"]["control"], (
        "the search does not find what it planted itself: %s" % json.dumps(got)[:2000])
    assert not got["found"]["trace"], "a warm execution found the previous one's trace in %s" % got["found"]["trace"]
