"""deploy/systemd: the unit file, checked by systemd-analyze verify, and what it
promises tried for real with the service (no systemd manager runs here).

- `systemd-analyze verify` prints nothing for the unit (it exits 0 even for unknown
  keys, so any output is a failure; a broken copy shows the check can fail);
- the service under the unit's capability bounding set and NoNewPrivileges, with the
  unit's environment file: warm and cold Python (pandas), JavaScript and Bash run,
  SIGHUP (ExecReload) reloads, SIGTERM (KillMode=mixed: the service alone) drains a
  running execution and exits 0;
- TimeoutStopSec leaves room for DRAIN_TIMEOUT and the 10 s the service then takes.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Dict, List

import pytest

import hxstest
from conftest import ROOT

UNIT = ROOT / "deploy" / "systemd" / "hexr-sandbox.service"
ENV_FILE = ROOT / "deploy" / "systemd" / "hexr-sandbox.env"


def unit_service_section() -> Dict[str, List[str]]:
    out: Dict[str, List[str]] = {}
    section = None
    for line in UNIT.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line
            continue
        if section == "[Service]":
            k, _, v = line.partition("=")
            out.setdefault(k, []).append(v)
    return out


def verify(text: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="hxs-unit-") as d:
        path = Path(d) / "hexr-sandbox.service"
        path.write_text(text)
        return subprocess.run(["systemd-analyze", "verify", "--man=no", str(path)], capture_output=True, text=True,
                              timeout=60, cwd=d)


def rendered_unit() -> str:
    # as installed: ExecStart names the binary (verify checks it is executable)
    return UNIT.read_text().replace("/usr/local/bin/hexr-sandbox", hxstest.BIN)


def test_systemd_analyze_verify_is_silent() -> None:
    r = verify(rendered_unit())
    assert r.returncode == 0 and r.stdout.strip() == "" and r.stderr.strip() == "", r.stdout + r.stderr


def test_verify_catches_a_broken_unit() -> None:
    broken = rendered_unit().replace("KillMode=mixed", "KillMode=mixd")
    r = verify(broken)
    assert "kill mode" in (r.stdout + r.stderr).lower()


def test_stop_timeout_covers_the_drain() -> None:
    svc = unit_service_section()
    assert svc["KillMode"] == ["mixed"] and svc["KillSignal"] == ["SIGTERM"]
    assert svc["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert svc["Delegate"] == ["yes"]
    timeout = int(re.fullmatch(r"(\d+)s?", svc["TimeoutStopSec"][0]).group(1))
    drain = 30  # DRAIN_TIMEOUT's default (the env file leaves it)
    assert timeout > drain + 10, "TimeoutStopSec must let a drain finish and the service exit"


def env_file() -> Dict[str, str]:
    env = {}
    for line in ENV_FILE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            k, _, v = line.partition("=")
            env[k] = v
    return env


def test_service_under_the_units_privileges() -> None:
    svc = unit_service_section()
    caps = svc["CapabilityBoundingSet"][0].split()
    assert svc["NoNewPrivileges"] == ["yes"]
    bounding = "-all," + ",".join("+" + c[len("CAP_"):].lower() for c in caps)
    with tempfile.TemporaryDirectory(prefix="hxs-unit-") as d:
        os.chmod(d, 0o755)
        env = dict(os.environ)
        env.update(env_file())
        env["STATE_DIR"] = os.path.join(d, "run")  # RuntimeDirectory=
        env["SANDBOX_BACKEND"] = "namespaces"
        addr = f"127.0.0.1:{hxstest.free_port()}"
        env["LISTEN_ADDRESS"] = addr
        log = os.path.join(d, "log")
        with open(log, "wb") as f:
            proc = subprocess.Popen(["setpriv", "--no-new-privs", f"--bounding-set={bounding}",
                                     "--inh-caps=-all", hxstest.BIN, "serve"], env=env, stdout=f, stderr=f,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        s = hxstest.Service(proc, log, d, addr)
        try:
            s.wait_started()
            def warm_ready() -> bool:
                w = hxstest.http_request(s.url, "GET", "/health")[2].get("warm", {})
                return w.get("templates_total", 0) >= 1 and w.get("templates_ready") == w.get("templates_total")

            hxstest.wait_for(warm_ready, 60, "the warm templates")
            files = {"python": "import os; os.makedirs('output', exist_ok=True); open('output/a.txt', 'w').write('hi')",
                     "javascript": "const fs = require('fs'); fs.mkdirSync('output', {recursive: true}); "
                                   "fs.writeFileSync('output/a.txt', 'hi')",
                     "bash": "mkdir -p output; printf hi > output/a.txt"}
            # each warm template and pre-started sandbox serves more than once: without
            # CAP_SYS_PTRACE the service looks at a sandbox's PID 1 as its owner uid, and
            # a template must stay one it may look at after its first sandbox
            for _ in range(3):
                for body, out in (({"code": "print(6*7)"}, "42\n"),
                                  ({"code": "import pandas as pd; print(pd.Series([1,2,3]).sum())"}, "6\n"),
                                  ({"code": "console.log(6*7)", "language": "javascript"}, "42\n"),
                                  ({"code": "echo $((6*7))", "language": "bash"}, "42\n")):
                    status, _, res = hxstest.post_exec(s.url, body)
                    assert status == 200 and res["stdout"] == out and res["exit_code"] == 0, res
                # files out, through PID 1's root
                for lang, code in files.items():
                    status, _, res = hxstest.post_exec(s.url, {"code": code, "language": lang})
                    assert status == 200 and [(f["path"], f["content"]) for f in res["files"]] == \
                        [("output/a.txt", "hi")], (lang, res)
            starts = [json.loads(line) for line in s.log if line.startswith("{")]
            python = [r["start"] for r in starts if r.get("event") == "exec" and r.get("language") == "python"]
            assert "warm" in python or "pooled" in python, s.log_text()
            # once a template served, Python never fell back to cold (a template the service
            # could not check would be replaced, and its requests run cold meanwhile)
            first = next(i for i, how in enumerate(python) if how != "cold")
            assert "cold" not in python[first:], (python, s.log_text())

            proc.send_signal(signal.SIGHUP)
            hxstest.wait_for(lambda: any('"event":"reload"' in line for line in s.log), 30, "the reload line")

            got = {}
            t = threading.Thread(target=lambda: got.update(r=hxstest.post_exec(
                s.url, {"code": "import time; time.sleep(1.5); print('done')"})))
            t.start()
            hxstest.wait_for(lambda: hxstest.http_request(s.url, "GET", "/health")[2].get("active") == 1, 30,
                           "the execution to start")
            proc.send_signal(signal.SIGTERM)
            t.join(60)
            assert got["r"][0] == 200 and got["r"][2]["stdout"] == "done\n", got
            assert proc.wait(timeout=45) == 0, s.log_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
