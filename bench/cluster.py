#!/usr/bin/python3
"""Three instances behind HAProxy on loopback, under a steady load of executions.

    /usr/bin/python3 bench/cluster.py [--quick] [--bin build/hexr-sandbox] [--out bench/results/cluster.md]

Starts three `hexr-sandbox serve` (127.0.0.1, free ports, MAX_CONCURRENT=2 each) and
HAProxy (Debian's haproxy) in front of them on 127.0.0.1, with health checks on
/health, `maxconn` per server equal to the instance's slots (HAProxy queues the rest),
and retries of what is safe to retry (`retry-on conn-failure 503`, redispatched to
another instance). Worker threads send executions through HAProxy with the Python
SDK (its own retries on) the whole time, through these phases:

  steady     all three up
  sigterm    SIGTERM to s1: it drains (503 for new requests, running ones finish),
             HAProxy takes it out; once it exited it is started again and rejoins
  sigkill    SIGKILL to s2 while it runs executions: those fail, nothing else; it is
             started again (its start sweeps what the dead one left) and rejoins
  rejoined   all three up again

For each phase: requests sent, succeeded, failed (by error), latency percentiles,
and how many requests each instance served (HAProxy's counters). Writes the Markdown
report (default bench/results/cluster.md). Numbers, not assertions: the test suite
(tests/deploy/test_cluster.py) runs the same scenario short and checks the outcomes.
Everything stays on 127.0.0.1; every process started here is stopped at the end.
"""

from __future__ import annotations

import argparse
import collections
import csv
import io
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from typing import Any, Callable, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for _p in (os.path.join(ROOT, "sdk", "python"), os.path.join(ROOT, "tests", "lib"), HERE):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from hxstest import host as _cli  # noqa: E402  (the test suites' host inspection helpers)
from hexr.sandbox import Client, SandboxError  # noqa: E402
from run import log, pct  # noqa: E402

CODE = "import time; time.sleep(0.2); print('ok')"
SLOTS = 2  # MAX_CONCURRENT of each instance
PHASES = ("steady", "sigterm", "sigkill", "rejoined")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    v = _cli.wait_until(pred, timeout, interval)
    if not v:
        raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
    return v


def http_get(url: str, timeout: float = 5.0) -> Optional[Dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        try:
            return json.loads(e.read())
        except ValueError:
            return None
    except (OSError, ValueError):
        return None


class Instance:
    """One `hexr-sandbox serve` on 127.0.0.1:port with its own STATE_DIR."""

    def __init__(self, name: str, binary: str, workdir: str, env: Dict[str, str]):
        self.name = name
        self.binary = binary
        self.port = free_port()
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, mode=0o755)
        os.chmod(self.dir, 0o755)
        self.state = os.path.join(self.dir, "state")
        # DRAIN_QUIET at its default whatever the caller's environment says: the SIGTERM
        # phase is what it is for
        self.env = dict(os.environ, STATE_DIR=self.state, MAX_CONCURRENT=str(SLOTS), SANDBOX_BACKEND="namespaces",
                        DRAIN_QUIET="1s", **env)
        self.env.pop("LISTEN_ADDRESS", None)
        self.proc: Optional[subprocess.Popen] = None
        self.starts = 0
        self.pids: List[int] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> str:
        return os.path.join(self.dir, f"serve-{self.starts}.log")

    def start(self) -> None:
        self.starts += 1
        with open(self.log_path, "wb") as f:
            self.proc = subprocess.Popen([self.binary, "serve", "--listen", f"127.0.0.1:{self.port}"], env=self.env,
                                         stdin=subprocess.DEVNULL, stdout=f, stderr=f, start_new_session=True)
        self.pids.append(self.proc.pid)

    def wait_healthy(self, timeout: float = 60) -> None:
        def ok() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log_text()}")
            h = http_get(self.url + "/health")
            return bool(h and h.get("status") == "ok")

        wait_for(ok, timeout, f"{self.name} to be healthy")

    def log_text(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def signal(self, signo: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signo)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=timeout)

    def stop(self, timeout: float = 60) -> Optional[int]:
        """SIGTERM (a drain), then SIGKILL after timeout; the exit status."""
        return None if self.proc is None else _cli.terminate(self.proc, timeout)


HAPROXY_CFG = """\
global
    maxconn 1000
    stats socket {sock} mode 600 level admin

defaults
    mode http
    timeout connect 1s
    timeout client 120s
    timeout server 120s
    timeout queue 60s
    # what an instance certainly did not run: the connection failed (not sent), or
    # it answered 503 (draining); to another instance. Never an empty or cut reply.
    retries 3
    retry-on conn-failure 503
    option redispatch 1

frontend sandbox
    bind 127.0.0.1:{port}
    default_backend instances

backend instances
    balance leastconn
    # an execution's record lives on the instance that ran it: remember which one
    # served each X-Request-Id, and send GET /api/v1/executions/{{id}} there
    stick-table type string len 32 size 100k expire 1h
    stick store-response res.hdr(x-request-id)
    stick match path,field(5,/) if {{ path_beg /api/v1/executions/ }}
    option httpchk GET /health
    http-check expect status 200
    default-server inter 200ms fall 1 rise 2 maxconn {slots}
{servers}
"""


class HAProxy:
    def __init__(self, workdir: str, instances: List[Instance]):
        self.port = free_port()
        self.sock = os.path.join(workdir, "haproxy.sock")
        self.cfg = os.path.join(workdir, "haproxy.cfg")
        servers = "\n".join(f"    server {i.name} 127.0.0.1:{i.port} check" for i in instances)
        with open(self.cfg, "w") as f:
            f.write(HAPROXY_CFG.format(sock=self.sock, port=self.port, slots=SLOTS, servers=servers))
        self.log = os.path.join(workdir, "haproxy.log")
        self.proc: Optional[subprocess.Popen] = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
        check = subprocess.run([haproxy, "-c", "-f", self.cfg], capture_output=True, text=True, timeout=30)
        if check.returncode != 0:
            raise RuntimeError(f"haproxy -c: {check.stdout}{check.stderr}")
        with open(self.log, "wb") as f:
            self.proc = subprocess.Popen([haproxy, "-db", "-f", self.cfg], stdin=subprocess.DEVNULL, stdout=f,
                                         stderr=f, start_new_session=True)
        wait_for(lambda: os.path.exists(self.sock), 30, "haproxy's stats socket")

    def stats(self) -> Dict[str, Dict[str, str]]:
        """Per server of the backend: HAProxy's CSV row (status, scur, stot, ...)."""
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(self.sock)
            s.sendall(b"show stat\n")
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        text = data.decode().lstrip("# ")
        rows = csv.DictReader(io.StringIO(text))
        return {r["svname"]: r for r in rows if r.get("pxname") == "instances" and r["svname"] not in
                ("BACKEND", "FRONTEND")}

    def status(self, name: str) -> str:
        return self.stats()[name]["status"]

    def served(self) -> Dict[str, int]:
        return {n: int(r["stot"] or 0) for n, r in self.stats().items()}

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGUSR1)  # soft stop: finish what is in flight
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


class Load:
    """Worker threads sending executions through HAProxy until stopped."""

    def __init__(self, url: str, workers: int, max_requests: int):
        self.client = Client(url, retries=2, retry_wait_max=10.0)
        self.workers = workers
        self.max_requests = max_requests
        self.phase = "steady"
        self.records: List[Dict[str, Any]] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads: List[threading.Thread] = []

    def _work(self) -> None:
        while not self.stopping.is_set():
            with self.lock:
                if len(self.records) >= self.max_requests:
                    return
            t0 = time.monotonic()
            rec: Dict[str, Any] = {"start": t0}
            try:
                r = self.client.exec(CODE, timeout=10)
                rec["ok"] = r.exit_code == 0 and r.stdout == "ok\n"
                if not rec["ok"]:
                    rec["error"] = f"exit {r.exit_code}: {r.stderr.strip()[-80:]}"
            except SandboxError as e:
                rec["ok"] = False
                rec["error"] = f"{type(e).__name__} {e.status} {e.code}"
                rec["attempts"] = e.attempts
            rec["latency"] = time.monotonic() - t0
            with self.lock:
                # counted in the phase it ended in (a request cut by a kill ends then)
                rec["phase"] = self.phase
                self.records.append(rec)

    def start(self) -> None:
        for _ in range(self.workers):
            t = threading.Thread(target=self._work, daemon=True)
            t.start()
            self.threads.append(t)

    def set_phase(self, phase: str) -> None:
        with self.lock:
            self.phase = phase

    def count(self) -> int:
        with self.lock:
            return len(self.records)

    def stop(self) -> None:
        self.stopping.set()
        for t in self.threads:
            t.join(120)


def run_scenario(binary: str, quick: bool, workdir: str, report: Callable[[str], None] = log) -> Dict[str, Any]:
    """Runs the four phases; returns what happened (phases, events, instances)."""
    steady_s = 2.0 if quick else 20.0
    workers = 4 if quick else 8
    instances = [Instance(f"s{i + 1}", binary, workdir, {}) for i in range(3)]
    lb = HAProxy(workdir, instances)
    load = Load(lb.url, workers, max_requests=2000 if quick else 20000)
    events: Dict[str, Any] = {}
    served: Dict[str, Dict[str, int]] = {}
    killed, killed_start = 0, None
    try:
        for i in instances:
            i.start()
        for i in instances:
            i.wait_healthy()
        lb.start()
        wait_for(lambda: all(lb.status(i.name) == "UP" for i in instances), 30, "HAProxy to see all three UP")
        report(f"3 instances on {[i.port for i in instances]}, HAProxy on {lb.port}, {workers} workers")

        load.start()
        before = lb.served()
        time.sleep(steady_s)

        # SIGTERM: s1 drains and leaves; then it is started again
        s1 = instances[0]
        mid = lb.served()
        served["steady"] = {k: mid[k] - before[k] for k in mid}
        load.set_phase("sigterm")
        wait_for(lambda: int(lb.stats()["s1"]["scur"] or 0) > 0, 30, "s1 to be running an execution")
        s1.signal(signal.SIGTERM)
        events["sigterm_at_running_on_s1"] = int(lb.stats()["s1"]["scur"] or 0)
        events["s1_exit"] = s1.wait(timeout=60)
        wait_for(lambda: lb.status("s1").startswith("DOWN"), 30, "HAProxy to take s1 out")
        down_served = lb.served()["s1"]
        time.sleep(steady_s / 2)
        events["s1_served_while_down"] = lb.served()["s1"] - down_served
        s1.start()
        s1.wait_healthy()
        wait_for(lambda: lb.status("s1") == "UP", 30, "s1 to rejoin")
        report(f"sigterm: s1 exited {events['s1_exit']} and rejoined")

        # SIGKILL: s2 dies with executions running
        s2 = instances[1]
        mid2 = lb.served()
        served["sigterm"] = {k: mid2[k] - mid[k] for k in mid2}
        load.set_phase("sigkill")
        wait_for(lambda: int(lb.stats()["s2"]["scur"] or 0) > 0, 30, "s2 to be running an execution")
        st = lb.stats()["s2"]
        running, sent_before = int(st["scur"] or 0), int(st["stot"] or 0)
        killed = s2.pids[-1]
        killed_start = _cli.proc_start_time(killed)
        s2.signal(signal.SIGKILL)
        events["sigkill_running_on_s2"] = running
        events["s2_exit"] = s2.wait(timeout=30)
        wait_for(lambda: lb.status("s2").startswith("DOWN"), 30, "HAProxy to take s2 out")
        # requests HAProxy handed s2 between the kill and its health check failing: a
        # dying process's listening socket still completes handshakes until it is
        # closed, so some are sent and then reset (HAProxy answers 502)
        events["sent_to_s2_after_kill"] = int(lb.stats()["s2"]["stot"] or 0) - sent_before
        # its sandboxes and templates die with it (not at once: give them 30 s)
        t_kill = time.monotonic()
        try:
            wait_for(lambda: check_leftovers(killed, killed_start, s2.state)["processes"] == 0, 30,
                     "the dead instance's processes to go", interval=0.1)
        except TimeoutError:
            pass
        events["s2_processes_gone_s"] = time.monotonic() - t_kill
        time.sleep(steady_s / 2)
        events["on_dead_s2"] = on_dead = check_leftovers(killed, killed_start, s2.state)
        s2.start()
        s2.wait_healthy()
        wait_for(lambda: lb.status("s2") == "UP", 30, "s2 to rejoin")
        report(f"sigkill: s2 had {running} running; left behind before the restart: {on_dead}")

        mid3 = lb.served()
        served["sigkill"] = {k: mid3[k] - mid2[k] for k in mid3}
        load.set_phase("rejoined")
        time.sleep(steady_s / 2)
        events["records"] = check_records(lb.url)
        time.sleep(steady_s / 2)
        load.stop()
        end = lb.served()
        served["rejoined"] = {k: end[k] - mid3[k] for k in end}
    finally:
        load.stop()
        lb.stop()
        events["stop_exit"] = {i.name: i.stop() for i in instances}
    if killed:
        events["after_restart_leftovers"] = check_leftovers(killed, killed_start, instances[1].state)
    return {"phases": summarize(load.records, served), "events": events, "instances": instances,
            "workers": workers, "steady_s": steady_s}


def check_leftovers(pid: int, start: Optional[int], state: str) -> Dict[str, int]:
    """What the engine of process pid (started at `start`, in clock ticks) left on the
    host: processes in its execution cgroups, its warm templates, sandbox processes
    outside any live engine's cgroup, its cgroup directories (a SIGKILLed process
    removes nothing: they stay until an engine starts and sweeps them), mounts."""
    procs = [f"{name}: {p}" for name, p in _cli.instance_processes(f"s{pid}.{start}").items()] if start else []
    procs += [f"template {p}" for p in _cli.template_processes(state, _cli.uid_base())]
    procs += _cli.leaked_sandbox_processes({pid})
    return {"processes": len(procs), "cgroups": len(_cli.leftover_cgroups({pid})),
            "mounts": len(_cli.host_mounts_under(state)), "process_list": procs}


def check_records(url: str, n: int = 9) -> Dict[str, int]:
    """Executions through HAProxy, then each one's record through HAProxy: found only
    when the record request reaches the instance that ran it."""
    found = 0
    for _ in range(n):
        req = urllib.request.Request(url + "/api/v1/exec", data=json.dumps({"code": "print(1)"}).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                rid = r.headers["X-Request-Id"]
        except (OSError, ValueError):
            continue
        try:
            with urllib.request.urlopen(f"{url}/api/v1/executions/{rid}", timeout=30) as r:
                found += json.loads(r.read()).get("id") == rid
        except (OSError, ValueError):
            pass
    return {"sent": n, "found": found}


def summarize(records: List[Dict[str, Any]], served: Dict[str, Dict[str, int]]) -> Dict[str, Dict[str, Any]]:
    out = {}
    for phase in PHASES:
        recs = [r for r in records if r["phase"] == phase]
        lat = [r["latency"] * 1000 for r in recs if r["ok"]]
        errors = collections.Counter(r.get("error", "") for r in recs if not r["ok"])
        out[phase] = {
            "sent": len(recs), "ok": sum(1 for r in recs if r["ok"]), "failed": sum(1 for r in recs if not r["ok"]),
            "errors": dict(errors), "p50_ms": pct(lat, 50), "p90_ms": pct(lat, 90), "p99_ms": pct(lat, 99),
            "max_ms": max(lat) if lat else float("nan"), "served": served.get(phase, {}),
        }
    return out


def write_report(path: str, result: Dict[str, Any], quick: bool, binary: str) -> None:
    ev = result["events"]
    lines = [
        "# Three instances behind HAProxy",
        "",
        f"`/usr/bin/python3 bench/cluster.py{' --quick' if quick else ''}` on {platform.node() and 'a'} "
        f"{os.cpu_count()}-CPU machine, {time.strftime('%d %b %Y')}: three `hexr-sandbox serve` on 127.0.0.1 "
        f"(MAX_CONCURRENT={SLOTS} each, warm starts on), HAProxy {haproxy_version()} in front (leastconn, "
        f"`maxconn {SLOTS}` per server, health checks on /health every 200 ms, `retry-on conn-failure 503`), "
        f"{result['workers']} threads sending `{CODE}` through the Python SDK (retries on), "
        f"{result['steady_s']:.0f} s per steady phase. Latencies are of the requests that succeeded, "
        "in milliseconds, from the client (queueing in HAProxy included).",
        "",
        "| phase | sent | ok | failed | p50 | p90 | p99 | max | served by s1 / s2 / s3 | failures |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for phase, p in result["phases"].items():
        sv = p["served"]
        served = " / ".join(str(sv.get(n, 0)) for n in ("s1", "s2", "s3"))
        errs = "; ".join(f"{n}× {e}" for e, n in p["errors"].items()) or "none"
        lines.append(f"| {phase} | {p['sent']} | {p['ok']} | {p['failed']} | {p['p50_ms']:.0f} | {p['p90_ms']:.0f} "
                     f"| {p['p99_ms']:.0f} | {p['max_ms']:.0f} | {served} | {errs} |")
    lines += [
        "",
        "What happened:",
        "",
        f"- **sigterm**: s1 had {ev['sigterm_at_running_on_s1']} execution(s) running when it got SIGTERM; it "
        f"finished them and exited {ev['s1_exit']}. HAProxy sent it {ev['s1_served_while_down']} requests while it "
        "was down; requests that reached it while draining got 503 and were sent to another instance "
        "(HAProxy's retry-on, then the SDK's).",
        f"- **sigkill**: s2 had {ev['sigkill_running_on_s2']} execution(s) running when it was SIGKILLed (exit "
        f"{ev['s2_exit']}), and HAProxy counted {ev['sent_to_s2_after_kill']} more connections to it before its "
        "health check failed (most refused, and retried elsewhere; a dying process's listening socket still "
        "completes some handshakes until it is closed). Those are the requests that can fail, as 502: the "
        "connection drops after the request was sent, which neither HAProxy nor the SDK retries (the code may "
        "have run). Its sandboxes and warm "
        f"templates were gone {ev['s2_processes_gone_s']:.1f} s after the kill. Left on the host by the dead "
        f"instance before its restart: {ev['on_dead_s2']['processes']} processes, {ev['on_dead_s2']['mounts']} "
        f"mounts, {ev['on_dead_s2']['cgroups']} empty cgroup directories; after the restart (whose start sweeps "
        f"them): {ev['after_restart_leftovers']['cgroups']} cgroups.",
        f"- **records**: {ev['records']['found']} of {ev['records']['sent']} `GET /api/v1/executions/{{id}}` "
        "through HAProxy found their record: a stick table learns which instance served each `X-Request-Id`.",
        f"- **stop**: every instance exited {sorted(set(map(str, ev['stop_exit'].values())))} on SIGTERM at the end.",
        "",
    ]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def haproxy_version() -> str:
    try:
        out = subprocess.run(["haproxy", "-v"], capture_output=True, text=True, timeout=10).stdout
        return out.split()[2]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="short phases (seconds instead of tens of seconds)")
    ap.add_argument("--bin", default=os.environ.get("HEXR_SANDBOX_BIN") or os.path.join(ROOT, "build", "hexr-sandbox"))
    ap.add_argument("--out", default=os.path.join(HERE, "results", "cluster.md"))
    args = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="hxs-cluster-")
    os.chmod(workdir, 0o755)
    try:
        result = run_scenario(args.bin, args.quick, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    write_report(args.out, result, args.quick, args.bin)
    for phase, p in result["phases"].items():
        log(f"{phase}: sent {p['sent']}, failed {p['failed']}, p50 {p['p50_ms']:.0f} ms, p99 {p['p99_ms']:.0f} ms")
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
