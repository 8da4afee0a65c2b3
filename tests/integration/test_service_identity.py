"""Caller identity: native mTLS with SPIFFE IDs, X-Forwarded-Client-Cert from trusted
proxies, AUTH_ALLOW, per-caller quotas and fair queueing, execution records, caller
metrics, the start-up rules, and certificate reload on SIGHUP.

Certificates are made by Debian's openssl in a temporary directory (tests/integration/
_certs.py). Every connection goes to 127.0.0.1 or a unix socket this test created.

Run: /usr/bin/python3 -m pytest tests/integration/test_service_identity.py -q
"""

from __future__ import annotations

import http.client
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from _certs import Pki, https_request
from conftest import BIN, free_port, http_request, post_exec, wait_for

TD = "spiffe://example.org"
ALICE = f"{TD}/agents/alice"
BOB = f"{TD}/agents/bob"
CAROL = f"{TD}/agents/carol"
EVE = f"{TD}/intruders/eve"
ALLOW = f"{TD}/agents/*"


@pytest.fixture(scope="module")
def pki() -> Pki:
    d = tempfile.mkdtemp(prefix="hxs-pki-")
    p = Pki(Path(d))
    p.ca("ca", "hexr test CA")
    p.ca("other", "some other CA")
    p.leaf("server", "ca", ips=["127.0.0.1"], usage="serverAuth")
    p.leaf("server2", "ca", ips=["127.0.0.1"], usage="serverAuth")
    p.leaf("alice", "ca", uris=[ALICE])
    p.leaf("bob", "ca", uris=[BOB])
    p.leaf("eve", "ca", uris=[EVE])
    p.leaf("mallory", "other", uris=[ALICE])           # right ID, wrong CA
    p.self_signed("selfie", [ALICE])                     # right ID, nobody's CA
    p.leaf("old", "ca", uris=[ALICE], expired=True)
    p.leaf("twins", "ca", uris=[ALICE, BOB])
    p.leaf("nameless", "ca")                             # no URI SAN at all
    p.leaf("carol_other", "other", uris=[CAROL])         # accepted once "other" is trusted
    yield p
    shutil.rmtree(d, ignore_errors=True)


def mtls_env(pki: Pki, **extra: str) -> Dict[str, str]:
    env = {"TLS_CERT_FILE": pki.path("server", "pem"), "TLS_KEY_FILE": pki.path("server", "key"),
           "TLS_CLIENT_CA_FILE": pki.path("ca", "pem"), "AUTH_ALLOW": ALLOW}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def mtls(pki):
    """One mTLS service for the read-only cases."""
    from conftest import _launch, _stop_checked
    svc = _launch(mtls_env(pki), None)
    yield svc
    _stop_checked(svc)


def call(svc, pki: Pki, client: Optional[str], body: Any = None, method: str = "POST",
         path: str = "/api/v1/exec", headers: Optional[Dict[str, str]] = None):
    if body is None and method == "POST":
        body = {"code": "echo hi", "language": "bash"}
    return https_request(svc.address, pki.client_context(client), method, path, body, headers)


def exec_logs(svc) -> List[Dict[str, Any]]:
    return [r for r in svc.json_log() if r.get("event") == "exec"]


# ---- mTLS: who gets in -------------------------------------------------------------------------


def test_allowed_id_runs_and_is_logged_with_its_caller(mtls, pki):
    status, hdrs, res = call(mtls, pki, "alice")
    assert status == 200, res
    assert res["stdout"] == "hi\n"
    rec = mtls.exec_log(res["id"])
    assert rec["caller"] == ALICE and rec["outcome"] == "ok"


@pytest.mark.parametrize("client,needle", [
    ("eve", f"caller {EVE} is not allowed"),
    ("mallory", "not issued by a trusted CA"),
    ("selfie", "not issued by a trusted CA"),
    (None, "no client certificate"),
    ("old", "expired"),
    ("twins", "more than one URI SAN"),
    ("nameless", "no URI SAN"),
])
def test_refused_clients_get_403(mtls, pki, client, needle, openapi):
    status, hdrs, res = call(mtls, pki, client)
    assert status == 403, res
    openapi.check("POST", "/api/v1/exec", status, hdrs, res)
    assert res["error"]["code"] == "forbidden"
    assert needle in res["error"]["message"], res
    rec = mtls.exec_log(hdrs["x-request-id"])
    assert rec["status"] == 403 and rec["error"] == "forbidden"
    assert rec.get("caller") in (None, EVE)  # only a verified, refused ID is named
    # nothing ran
    assert "exit_code" not in rec


def test_refused_clients_see_nothing_else_either(mtls, pki):
    for path in ("/metrics", "/api/v1/executions/" + "0" * 32, "/nowhere"):
        status, _, res = call(mtls, pki, "selfie", method="GET", path=path)
        assert status == 403, (path, res)
    # a prober without a certificate may ask for health
    status, _, h = call(mtls, pki, None, method="GET", path="/health")
    assert status == 200 and h["status"] == "ok"


def test_plain_http_to_a_tls_port_gets_nothing(mtls):
    with pytest.raises((http.client.HTTPException, OSError)):
        http_request("http://" + mtls.address, "GET", "/health", timeout=10)


def test_client_xfcc_is_ignored_without_trust(mtls, pki):
    # alice cannot claim to be bob by sending the header herself
    status, hdrs, res = call(mtls, pki, "alice", headers={"X-Forwarded-Client-Cert": f"By={TD}/x;URI={BOB}"})
    assert status == 200
    assert mtls.exec_log(res["id"])["caller"] == ALICE
    assert any(r.get("event") == "auth" and res["id"] in r["message"] and "ignored" in r["message"]
               for r in mtls.json_log())


# ---- execution records ---------------------------------------------------------------------------


def test_execution_record_only_for_its_caller(mtls, pki, openapi):
    status, _, res = call(mtls, pki, "alice", {"code": "echo out; echo err >&2; exit 3", "language": "bash"})
    assert status == 200 and res["exit_code"] == 3
    path = "/api/v1/executions/" + res["id"]
    status, hdrs, rec = call(mtls, pki, "alice", method="GET", path=path)
    assert status == 200, rec
    openapi.check("GET", "/api/v1/executions/{id}", status, hdrs, rec)
    assert rec["id"] == res["id"] and rec["caller"] == ALICE and rec["language"] == "bash"
    assert rec["exit_code"] == 3 and rec["outcome"] == "error"
    assert rec["stdout_bytes"] == 4 and rec["stderr_bytes"] == 4
    assert "stdout" not in rec and "code" not in rec  # never the output or the code
    # bob, allowed too, gets the same answer as for an id that never existed
    status, hdrs, other = call(mtls, pki, "bob", method="GET", path=path)
    assert status == 404 and other["error"]["code"] == "not_found"
    openapi.check("GET", "/api/v1/executions/{id}", status, hdrs, other)
    status, _, never = call(mtls, pki, "bob", method="GET", path="/api/v1/executions/" + "f" * 32)
    assert status == 404 and never["error"]["message"] == other["error"]["message"]
    status, _, _ = call(mtls, pki, "alice", method="GET", path="/api/v1/executions/not-an-id")
    assert status == 404
    status, hdrs, _ = call(mtls, pki, "alice", method="POST", path=path, body={})
    assert status == 405 and "GET" in hdrs["allow"]


def test_execution_records_are_bounded(start_service, pki):
    svc = start_service(env=mtls_env(pki, EXECUTION_RECORDS="2"))
    ids = [call(svc, pki, "alice", {"code": "true", "language": "bash"})[2]["id"] for _ in range(3)]
    assert call(svc, pki, "alice", method="GET", path="/api/v1/executions/" + ids[0])[0] == 404
    for i in ids[1:]:
        assert call(svc, pki, "alice", method="GET", path="/api/v1/executions/" + i)[0] == 200


# ---- metrics -------------------------------------------------------------------------------------


def test_metrics_carry_bounded_caller_labels(start_service, pki):
    svc = start_service(env=mtls_env(pki, METRICS_CALLERS="1"))
    assert call(svc, pki, "alice")[0] == 200
    assert call(svc, pki, "bob")[0] == 200
    assert call(svc, pki, "bob")[0] == 200
    status, _, text = call(svc, pki, "alice", method="GET", path="/metrics")
    assert status == 200
    check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True,
                           timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f'hexr_sandbox_caller_executions_total{{caller="{ALICE}",outcome="ok"}} 1' in text
    assert 'hexr_sandbox_caller_executions_total{caller="other",outcome="ok"} 2' in text
    assert BOB not in text  # past METRICS_CALLERS: folded into "other"
    assert 'hexr_sandbox_rejected_requests_total{reason="forbidden"} 0' in text


# ---- behind a proxy: X-Forwarded-Client-Cert ---------------------------------------------------------


@pytest.fixture
def unix_proxy_service(start_service):
    d = tempfile.mkdtemp(prefix="hxs-xfcc-")
    def start(**env: str):
        full = {"TRUSTED_PROXIES": "unix", "AUTH_ALLOW": ALLOW}
        full.update(env)
        return start_service(env=full, listen=f"unix:{d}/s.sock")
    yield start
    shutil.rmtree(d, ignore_errors=True)


def xfcc(uri: str, prior: str = "") -> str:
    own = f'By={TD}/envoy;Hash=0123abcd;Subject="CN=agent,O=acme";URI={uri}'
    return f"{prior},{own}" if prior else own


def test_xfcc_from_a_trusted_unix_peer(unix_proxy_service):
    svc = unix_proxy_service()
    bash = {"code": "true", "language": "bash"}
    status, _, res = post_exec(svc.url, bash, headers={"X-Forwarded-Client-Cert": xfcc(ALICE)})
    assert status == 200, res
    assert svc.exec_log(res["id"])["caller"] == ALICE
    # the last element is the proxy's direct client; earlier hops do not count
    status, _, res = post_exec(svc.url, bash, headers={"X-Forwarded-Client-Cert": xfcc(BOB, prior=f"URI={EVE}")})
    assert status == 200 and svc.exec_log(res["id"])["caller"] == BOB
    status, _, res = post_exec(svc.url, bash, headers={"X-Forwarded-Client-Cert": f'URI="{BOB}"'})
    assert status == 200 and svc.exec_log(res["id"])["caller"] == BOB
    refused = [
        (xfcc(EVE), "not allowed"),
        (xfcc(ALICE, prior=f"URI={BOB}").replace(f"URI={ALICE}", f"URI={EVE}"), "not allowed"),
        (f"By={TD}/envoy;Hash=00;DNS=a.example", "no SPIFFE ID"),
        (f"URI={ALICE};URI={BOB}", "more than one URI"),
        (f'URI="{ALICE}', "unterminated"),
        ("URI=spiffe://Example.ORG/agents/alice", "malformed"),
        (f"URI={TD}/agents/../admin", "malformed"),
        (f"URI=https://example.org/agents/alice", "malformed"),
        ("", "malformed"),
    ]
    for header, needle in refused:
        status, _, res = post_exec(svc.url, bash, headers={"X-Forwarded-Client-Cert": header})
        assert status == 403, (header, res)
        assert needle in res["error"]["message"], (header, res)
    status, _, res = post_exec(svc.url, bash)
    assert status == 403 and "no caller identity" in res["error"]["message"]
    # two headers: ambiguous, refused
    conn = http.client.HTTPConnection("localhost")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(svc.url[len("unix:"):])
    conn.sock = s
    conn.putrequest("POST", "/api/v1/exec")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("X-Forwarded-Client-Cert", f"URI={ALICE}")
    conn.putheader("X-Forwarded-Client-Cert", f"URI={BOB}")
    data = b'{"code":"true","language":"bash"}'
    conn.putheader("Content-Length", str(len(data)))
    conn.endheaders(data)
    resp = conn.getresponse()
    assert resp.status == 403 and b"sent 2 times" in resp.read()
    conn.close()


def test_xfcc_from_an_untrusted_peer_is_ignored(start_service):
    # The proxy is at another address: 127.0.0.1 is not trusted to name callers.
    svc = start_service(env={"TRUSTED_PROXIES": "192.0.2.7", "AUTH_ALLOW": ALLOW})
    status, hdrs, res = post_exec(svc.url, {"code": "true", "language": "bash"},
                                  headers={"X-Forwarded-Client-Cert": xfcc(ALICE)})
    assert status == 403 and "no caller identity" in res["error"]["message"]
    assert any(r.get("event") == "auth" and hdrs["x-request-id"] in r["message"] and "ignored" in r["message"]
               for r in svc.json_log())


def test_xfcc_trusted_by_address(start_service):
    svc = start_service(env={"TRUSTED_PROXIES": "192.0.2.7, 127.0.0.1", "AUTH_ALLOW": f"{TD}/agents/alice"})
    status, _, res = post_exec(svc.url, {"code": "true", "language": "bash"},
                               headers={"X-Forwarded-Client-Cert": xfcc(ALICE)})
    assert status == 200 and svc.exec_log(res["id"])["caller"] == ALICE
    status, _, res = post_exec(svc.url, {"code": "true", "language": "bash"},
                               headers={"X-Forwarded-Client-Cert": xfcc(BOB)})
    assert status == 403  # an exact entry allows exactly that ID


def test_xfcc_behind_mtls_proxy(start_service, pki):
    # Envoy presenting its own certificate: the connection must verify, then the
    # header (from a trusted address) names the caller.
    svc = start_service(env=mtls_env(pki, TRUSTED_PROXIES="127.0.0.1"))
    status, _, res = call(svc, pki, "eve", headers={"X-Forwarded-Client-Cert": xfcc(ALICE)})
    assert status == 200, res
    assert svc.exec_log(res["id"])["caller"] == ALICE
    # but an unverified connection gets nowhere, whatever it claims
    status, _, res = call(svc, pki, "selfie", headers={"X-Forwarded-Client-Cert": xfcc(ALICE)})
    assert status == 403


# ---- quotas and fairness ---------------------------------------------------------------------------


def test_per_minute_quota(unix_proxy_service, openapi):
    svc = unix_proxy_service(QUOTA_PER_MINUTE="2")
    bash = {"code": "true", "language": "bash"}
    a = {"X-Forwarded-Client-Cert": xfcc(ALICE)}
    assert post_exec(svc.url, bash, headers=a)[0] == 200
    assert post_exec(svc.url, bash, headers=a)[0] == 200
    status, hdrs, res = post_exec(svc.url, bash, headers=a)
    assert status == 429, res
    openapi.check("POST", "/api/v1/exec", status, hdrs, res)
    assert res["error"]["code"] == "quota_exceeded" and "QUOTA_PER_MINUTE" in res["error"]["message"]
    assert 1 <= int(hdrs["retry-after"]) <= 60
    # another caller has its own bucket
    assert post_exec(svc.url, bash, headers={"X-Forwarded-Client-Cert": xfcc(BOB)})[0] == 200


def test_concurrent_quota(unix_proxy_service):
    svc = unix_proxy_service(QUOTA_CONCURRENT_PER_CALLER="1", MAX_CONCURRENT="4")
    a = {"X-Forwarded-Client-Cert": xfcc(ALICE)}
    results: Dict[str, Any] = {}
    t = threading.Thread(target=lambda: results.setdefault(
        "slow", post_exec(svc.url, {"code": "sleep 3", "language": "bash"}, headers=a)))
    t.start()
    try:
        wait_for(lambda: _active(svc) == 1, 30, "the first execution to start")
        status, hdrs, res = post_exec(svc.url, {"code": "true", "language": "bash"}, headers=a)
        assert status == 429 and res["error"]["code"] == "quota_exceeded", res
        assert "QUOTA_CONCURRENT_PER_CALLER" in res["error"]["message"]
        assert int(hdrs["retry-after"]) >= 1
        # bob is not held back by alice's quota
        assert post_exec(svc.url, {"code": "true", "language": "bash"},
                         headers={"X-Forwarded-Client-Cert": xfcc(BOB)})[0] == 200
    finally:
        t.join(60)
    assert results["slow"][0] == 200
    # with the slot back, alice runs again
    assert post_exec(svc.url, {"code": "true", "language": "bash"}, headers=a)[0] == 200


def _active(svc) -> int:
    status, _, h = http_request(svc.url, "GET", "/health")
    return h.get("active", 0) if status == 200 else 0


def test_fair_queue_between_two_callers(unix_proxy_service):
    """One slot; alice fills the queue first, bob arrives last and still runs second of
    the waiting ones, not after all of alice's; alice cannot queue past her cap."""
    svc = unix_proxy_service(MAX_CONCURRENT="1", MAX_QUEUE="16", QUOTA_QUEUE_PER_CALLER="3",
                             QUEUE_TIMEOUT="2m")
    a = {"X-Forwarded-Client-Cert": xfcc(ALICE)}
    b = {"X-Forwarded-Client-Cert": xfcc(BOB)}
    out: Dict[str, Any] = {}

    def send(name: str, headers: Dict[str, str]) -> None:
        out[name] = post_exec(svc.url, {"code": f"sleep 0.5; echo {name}", "language": "bash"}, headers=headers)

    threads = []

    def start(name: str, headers: Dict[str, str], queued: int) -> None:
        t = threading.Thread(target=send, args=(name, headers))
        t.start()
        threads.append(t)
        wait_for(lambda: _queued(svc) == queued or name in out, 30, f"{name} to be admitted")

    try:
        start("a1", a, 0)
        wait_for(lambda: _active(svc) == 1, 30, "a1 to run")
        start("a2", a, 1)
        start("a3", a, 2)
        start("a4", a, 3)
        # alice's fourth waiting request: over QUOTA_QUEUE_PER_CALLER
        status, _, res = post_exec(svc.url, {"code": "true", "language": "bash"}, headers=a)
        assert status == 429 and res["error"]["code"] == "quota_exceeded", res
        assert "QUOTA_QUEUE_PER_CALLER" in res["error"]["message"]
        start("b1", b, 4)
    finally:
        for t in threads:
            t.join(120)
    for name in ("a1", "a2", "a3", "a4", "b1"):
        assert out[name][0] == 200 and out[name][2]["stdout"] == f"{name}\n", out[name]
    order = [r["id"] for r in exec_logs(svc) if r.get("status") == 200]
    pos = {name: order.index(out[name][2]["id"]) for name in out}
    assert pos["a1"] < pos["a2"] < pos["a3"] < pos["a4"]  # FIFO within a caller
    assert pos["b1"] < pos["a3"], f"bob waited behind alice's queue: {pos}"


def _queued(svc) -> int:
    status, _, h = http_request(svc.url, "GET", "/health")
    return h.get("queued", -1) if status == 200 else -1


# ---- start-up rules ----------------------------------------------------------------------------------


def serve(env: Dict[str, str], listen: str = "127.0.0.1:0"):
    full = dict(os.environ)
    full.update(env)
    return subprocess.run([BIN, "serve", "--listen", listen], env=full, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("env,needle", [
    ({"AUTH_ALLOW": ALLOW}, "AUTH_ALLOW"),                                   # nobody could be recognised
    ({"TRUSTED_PROXIES": "127.0.0.1"}, "AUTH_ALLOW"),                        # identities, no allowlist
    ({"TRUSTED_PROXIES": "127.0.0.1", "AUTH_ALLOW": "example.org"}, "AUTH_ALLOW"),
    ({"TRUSTED_PROXIES": "127.0.0.1", "AUTH_ALLOW": f"{TD}/*"}, "AUTH_ALLOW"),
    ({"TRUSTED_PROXIES": "127.0.0.1", "AUTH_ALLOW": f"{TD}/a/../b"}, "AUTH_ALLOW"),
    ({"TRUSTED_PROXIES": "proxy.example", "AUTH_ALLOW": ALLOW}, "TRUSTED_PROXIES"),
    ({"TRUSTED_PROXIES": "10.0.0.0/8", "AUTH_ALLOW": ALLOW}, "TRUSTED_PROXIES"),
    ({"TRUSTED_PROXIES": "unix", "AUTH_ALLOW": ALLOW}, "TRUSTED_PROXIES"),   # on a TCP port
    ({"TLS_CERT_FILE": "/nonexistent.pem"}, "TLS_CERT_FILE"),
    ({"TLS_KEY_FILE": "/nonexistent.key"}, "TLS_KEY_FILE"),
    ({"QUOTA_PER_MINUTE": "1000001"}, "QUOTA_PER_MINUTE"),
    ({"QUOTA_CONCURRENT_PER_CALLER": "5000"}, "QUOTA_CONCURRENT_PER_CALLER"),
    ({"METRICS_CALLERS": "1001"}, "METRICS_CALLERS"),
    ({"EXECUTION_RECORDS": "0"}, "EXECUTION_RECORDS"),
])
def test_bad_identity_settings_stop_the_start(env, needle):
    r = serve(env)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert needle in r.stderr and "listening" not in r.stderr, r.stderr


def test_bad_certificate_files_stop_the_start(pki, tmp_path):
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    cases = [
        ({"TLS_CERT_FILE": pki.path("server", "pem"), "TLS_KEY_FILE": pki.path("alice", "key")}, "TLS_KEY_FILE"),
        ({"TLS_CERT_FILE": str(garbage), "TLS_KEY_FILE": pki.path("server", "key")}, "TLS_CERT_FILE"),
        (mtls_env(pki, TLS_CLIENT_CA_FILE=str(garbage)), "TLS_CLIENT_CA_FILE"),
        (mtls_env(pki, TLS_CLIENT_CA_FILE=str(tmp_path)), "TLS_CLIENT_CA_FILE"),
    ]
    for env, needle in cases:
        r = serve(env)
        assert r.returncode == 2, (env, r.stderr)
        assert needle in r.stderr, r.stderr


def test_non_loopback_allowed_with_identity(start_service, pki):
    port = free_port()
    svc = start_service(env=mtls_env(pki), listen=f":{port}")
    status, _, res = https_request(f"127.0.0.1:{port}", pki.client_context("alice"), "POST", "/api/v1/exec",
                                   {"code": "true", "language": "bash"})
    assert status == 200, res


def test_tls_without_client_ca_is_not_identity(pki):
    r = serve({"TLS_CERT_FILE": pki.path("server", "pem"), "TLS_KEY_FILE": pki.path("server", "key")},
              listen=":0")
    assert r.returncode == 2 and "ALLOW_NON_LOOPBACK" in r.stderr, r.stderr


# ---- reload on SIGHUP --------------------------------------------------------------------------------


def _server_cert_der(address: str, ctx: ssl.SSLContext) -> bytes:
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=30) as raw:
        with ctx.wrap_socket(raw) as tls:
            return tls.getpeercert(binary_form=True)


def _der(pem_path: str) -> bytes:
    return ssl.PEM_cert_to_DER_cert(Path(pem_path).read_text())


def test_sighup_reloads_certificates_and_keeps_connections(start_service, pki, tmp_path):
    cert, key, ca = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    shutil.copy(pki.path("server", "pem"), cert)
    shutil.copy(pki.path("server", "key"), key)
    shutil.copy(pki.path("ca", "pem"), ca)
    svc = start_service(env={"TLS_CERT_FILE": str(cert), "TLS_KEY_FILE": str(key), "TLS_CLIENT_CA_FILE": str(ca),
                             "AUTH_ALLOW": f"{TD}/agents/*"})
    assert _server_cert_der(svc.address, pki.client_context("alice")) == _der(pki.path("server", "pem"))
    assert call(svc, pki, "carol_other")[0] == 403  # "other" CA not trusted yet

    # A keep-alive connection opened before the reload.
    host, _, port = svc.address.rpartition(":")
    conn = http.client.HTTPSConnection(host, int(port), timeout=60, context=pki.client_context("alice"))
    try:
        conn.request("GET", "/api/v1/executions/" + "0" * 32)
        r = conn.getresponse()
        r.read()
        assert r.status == 404  # authenticated, nothing there
        sock_before = conn.sock

        # Rotate: a new server certificate, and the bundle now trusts both CAs.
        shutil.copy(pki.path("server2", "pem"), cert)
        shutil.copy(pki.path("server2", "key"), key)
        ca.write_text(Path(pki.path("ca", "pem")).read_text() + Path(pki.path("other", "pem")).read_text())
        svc.signal(signal.SIGHUP)
        wait_for(lambda: any(r.get("event") == "reload" and "reloaded" in r["message"] for r in svc.json_log()),
                 10, "the reload")

        # the old connection is still up and still served
        conn.request("POST", "/api/v1/exec", body=b'{"code":"echo same","language":"bash"}',
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        assert r.status == 200 and b"same" in r.read()
        assert conn.sock is sock_before, "the connection was re-opened"
    finally:
        conn.close()
    # new handshakes get the new certificate; the new CA's clients are let in
    assert _server_cert_der(svc.address, pki.client_context("alice")) == _der(pki.path("server2", "pem"))
    status, _, res = call(svc, pki, "carol_other")
    assert status == 200, res
    assert svc.exec_log(res["id"])["caller"] == CAROL

    # A broken file at the next reload: the current certificates stay.
    key.write_text("not a key\n")
    svc.signal(signal.SIGHUP)
    wait_for(lambda: any(r.get("event") == "reload" and "keeping" in r["message"] for r in svc.json_log()),
             10, "the refused reload")
    assert call(svc, pki, "alice")[0] == 200
    assert _server_cert_der(svc.address, pki.client_context("alice")) == _der(pki.path("server2", "pem"))
    assert svc.proc.poll() is None


# ---- the Python SDK over mTLS ------------------------------------------------------------------------


def test_sdk_over_mtls(mtls, pki):
    sdk = Path(__file__).resolve().parents[2] / "sdk" / "python"
    prog = ("import hexr.sandbox as s\n"
            "print(s.exec('print(6*7)').stdout, end='')\n"
            "import os\n"
            "del os.environ['HEXR_SANDBOX_CERT_FILE'], os.environ['HEXR_SANDBOX_KEY_FILE']\n"
            "try:\n"
            "    s.exec('print(1)')\n"
            "except s.SandboxRequestError as e:\n"
            "    print('refused:', e)\n")
    env = dict(os.environ, PYTHONPATH=str(sdk), HEXR_SANDBOX_URL="https://" + mtls.address,
               HEXR_SANDBOX_CA_FILE=pki.path("ca", "pem"), HEXR_SANDBOX_CERT_FILE=pki.path("alice", "pem"),
               HEXR_SANDBOX_KEY_FILE=pki.path("alice", "key"))
    r = subprocess.run(["/usr/bin/python3", "-c", prog], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "42"
    assert lines[1].startswith("refused:") and "no client certificate" in lines[1], lines
