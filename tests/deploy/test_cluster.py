"""Three instances behind HAProxy on loopback, under steady load: the short run of
bench/cluster.py's scenario (the same code), with the outcomes checked.

- steady and rejoined: no request fails;
- SIGTERM to one instance: it drains and exits 0, HAProxy stops sending to it, no
  request fails (a request that reaches it while it drains gets 503, retried
  elsewhere by HAProxy and the SDK; its drain ends only once requests stopped for
  DRAIN_QUIET, so HAProxy never hands it one as its socket closes);
- SIGKILL to one: only requests on it fail (running there, or handed to it between
  the kill and its health check failing; as 502: cut after they were sent, which
  nothing retries), its sandboxes and templates die with it, nothing is
  mounted, its cgroups are swept when it starts again, and it rejoins;
- an execution's record (GET /api/v1/executions/{id}) is found through HAProxy, which
  routes it to the instance that ran it;
- every instance exits 0 on SIGTERM at the end.

Percentiles are in bench/results/cluster.md (bench/cluster.py), never asserted here.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile

import hxstest
from conftest import ROOT


def load_bench():
    spec = importlib.util.spec_from_file_location("hxs_bench_cluster", ROOT / "bench" / "cluster.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_three_instances_behind_haproxy() -> None:
    cluster = load_bench()
    with tempfile.TemporaryDirectory(prefix="hxs-cluster-") as workdir:
        os.chmod(workdir, 0o755)
        result = cluster.run_scenario(hxstest.BIN, True, workdir)
    phases, ev = result["phases"], result["events"]
    summary = {p: (v["sent"], v["failed"], v["errors"]) for p, v in phases.items()}

    for phase in ("steady", "sigterm", "rejoined"):
        assert phases[phase]["sent"] > 0, summary
        assert phases[phase]["failed"] == 0, summary

    assert ev["s1_exit"] == 0, "the SIGTERMed instance must drain and exit 0"
    assert ev["s1_served_while_down"] == 0, "HAProxy kept sending to the stopped instance"

    assert ev["s2_exit"] == -9
    # on it: running there, or handed to it by HAProxy before its health check failed
    assert phases["sigkill"]["failed"] <= ev["sigkill_running_on_s2"] + ev["sent_to_s2_after_kill"], (summary, ev)
    assert all("502" in e or "connection_closed" in e for e in phases["sigkill"]["errors"]), summary
    assert ev["on_dead_s2"]["processes"] == 0, ev["on_dead_s2"]
    assert ev["on_dead_s2"]["mounts"] == 0, ev["on_dead_s2"]
    assert ev["after_restart_leftovers"]["cgroups"] == 0, ev["after_restart_leftovers"]

    assert ev["records"]["found"] == ev["records"]["sent"], ev["records"]

    served = phases["rejoined"]["served"]
    assert served["s1"] > 0 and served["s2"] > 0, f"a restarted instance did not rejoin: {served}"
    assert ev["stop_exit"] == {"s1": 0, "s2": 0, "s3": 0}, ev["stop_exit"]
