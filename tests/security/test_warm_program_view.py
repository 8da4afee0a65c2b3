"""A warm program sees itself as a cold one would: not the template it was cloned from.

A warm program is a copy of a template's process image. What the kernel shows of a
process (its command line, its mappings, its environment block) came from the
template: the zygote's source and the service's STATE_DIR in the argv, the module's
path in the maps. Checked from inside, warm and cold side by side, through a service
that ran the canary first.
"""

from __future__ import annotations

import json

import pytest

import _service
from _service import WARM_FLAG_PY, assert_ran

VIEW = r'''
import json, sys
with open("/proc/self/cmdline", "rb") as f:
    cmdline = f.read()
with open("/proc/self/maps") as f:
    maps = f.read()
with open("/proc/self/environ", "rb") as f:
    environ = f.read()
print(json.dumps({"cmdline": cmdline.decode("latin1"), "maps": maps, "environ": environ.decode("latin1"),
                  "warm": @WARM@}))
'''


@pytest.fixture(scope="module")
def view_svc(sandbox_isolates: str):
    yield from _service.serve_module()


def test_a_warm_program_shows_no_trace_of_its_template(view_svc) -> None:
    svc = view_svc
    svc.wait_warm()
    code = VIEW.replace("@WARM@", WARM_FLAG_PY)
    warm = assert_ran(svc.exec(code, "python")).json()
    # PYTHON* variables are read at interpreter start-up only: the request runs cold
    cold = assert_ran(svc.exec(code, "python", env_vars={"PYTHONHASHSEED": "0"})).json()
    assert warm["warm"] is True and cold["warm"] is False, (warm["warm"], cold["warm"])
    assert warm["cmdline"] == cold["cmdline"] == "/usr/bin/python3\0/code/main.py\0", (
        "a warm program's command line is %r (a cold one's %r)" % (warm["cmdline"][:300], cold["cmdline"]))
    for what in ("maps", "environ"):
        assert svc.state_dir not in warm[what], "a warm program's /proc/self/%s names STATE_DIR %s:\n%s" % (
            what, svc.state_dir, warm[what])
    assert "import _hxs_zygote" not in warm["cmdline"] and "_hxs_zygote" not in json.dumps(cold)
