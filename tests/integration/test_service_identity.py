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

from _certs import Pki, https_request, xfcc_cert
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
    # the service's own SVID: its trust domain is the one of CAs that name none
    p.leaf("server", "ca", uris=[f"{TD}/sandbox"], ips=["127.0.0.1"], usage="serverAuth")
    p.leaf("server2", "ca", uris=[f"{TD}/sandbox"], ips=["127.0.0.1"], usage="serverAuth")
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


def test_plain_http_to_a_tls_port_gets_nothing(mtls, pki):
    # the port is open (a refused connection would prove nothing)...
    assert call(mtls, pki, None, method="GET", path="/health")[0] == 200
    # ...and plain HTTP on it gets no HTTP answer
    with pytest.raises((http.client.HTTPException, OSError)) as e:
        http_request("http://" + mtls.address, "GET", "/health", timeout=10)
    assert not isinstance(e.value, ConnectionRefusedError), e.value


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
    n = [0]
    def start(**env: str):
        full = {"TRUSTED_PROXIES": "unix", "AUTH_ALLOW": ALLOW}
        full.update(env)
        n[0] += 1
        return start_service(env=full, listen=f"unix:{d}/s{n[0]}.sock")
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


# ---- trust domains: an ID is believed only from its own trust domain's CAs ---------------------------

PROD = "spiffe://prod.example"
PARTNER = "spiffe://partner.example"
VICTIM = f"{PROD}/agents/victim"
RUNNER = f"{PARTNER}/ci/runner"
FED_ALLOW = f"{PROD}/agents/*,{RUNNER},{PARTNER}/ci/runner2,spiffe://elsewhere.example"


@pytest.fixture(scope="module")
def fed() -> Pki:
    """Two trust domains federated into one service, as in the README's example."""
    d = tempfile.mkdtemp(prefix="hxs-fed-")
    p = Pki(Path(d))
    p.ca("ca_prod", "prod root", uris=[PROD])
    p.ca("ca_partner", "partner root", uris=[PARTNER])
    p.ca("ca_plain", "root naming no trust domain")               # belongs to the service's own
    p.ca("int_prod", "prod intermediate", issuer="ca_prod")       # no URI: its issuer's
    p.ca("int_partner", "partner intermediate", issuer="ca_partner")
    p.ca("ca_other", "nobody's root", uris=["spiffe://elsewhere.example"])
    p.ca("int_conflict", "prod CA naming partner", issuer="ca_prod", uris=[PARTNER])
    p.ca("ca_prod2", "prod root, rotated", uris=[PROD])
    p.leaf("server", "ca_prod", uris=[f"{PROD}/sandbox"], ips=["127.0.0.1"], usage="serverAuth")
    p.leaf("server_anon", "ca_prod", ips=["127.0.0.1"], usage="serverAuth")  # no SPIFFE ID
    p.leaf("victim", "ca_prod", uris=[VICTIM])
    p.leaf("victim_int", "int_prod", uris=[f"{PROD}/agents/via-intermediate"])
    p.leaf("victim2", "ca_prod2", uris=[f"{PROD}/agents/rotated"])
    p.leaf("runner", "ca_partner", uris=[RUNNER])
    p.leaf("runner2", "int_partner", uris=[f"{PARTNER}/ci/runner2"])
    # the partner's CAs mint IDs of prod's trust domain, under the allowed prefix
    p.leaf("forged", "ca_partner", uris=[VICTIM])
    p.leaf("forged_int", "int_partner", uris=[f"{PROD}/agents/victim2"])
    p.leaf("plain_alice", "ca_plain", uris=[f"{PROD}/agents/alice"])
    p.leaf("plain_forged", "ca_plain", uris=[RUNNER])             # own-domain CA, partner ID
    p.leaf("stranger", "ca_other", uris=["spiffe://elsewhere.example/x"])
    p.leaf("proxy", "ca_prod", uris=[f"{PROD}/envoy"])
    p.leaf("noeku", "ca_prod", uris=[f"{PROD}/agents/noeku"], usage=None)
    p.leaf("signer", "ca_prod", uris=[f"{PROD}/agents/signer"], key_usage="digitalSignature,keyCertSign")
    p.bundle("all", "ca_prod", "ca_partner", "ca_plain", "int_partner")
    p.bundle("prod_bundle", "ca_prod")
    p.bundle("partner_bundle", "ca_partner", "int_partner")
    yield p
    shutil.rmtree(d, ignore_errors=True)


def fed_env(p: Pki, **extra: str) -> Dict[str, str]:
    env = {"TLS_CERT_FILE": p.path("server", "pem"), "TLS_KEY_FILE": p.path("server", "key"),
           "AUTH_ALLOW": FED_ALLOW}
    env.update(extra)
    return env


def fed_call(svc, p: Pki, client: Optional[str], method: str = "POST", path: str = "/api/v1/exec",
             body: Any = None, chain=(), headers=None, source: Optional[str] = None):
    if body is None and method == "POST":
        body = {"code": "echo ran", "language": "bash"}
    return https_request(svc.address, p.client_context(client, "ca_prod", chain), method, path, body,
                         headers)


def refused_without_running(svc, hdrs, res, needle: str) -> None:
    assert res["error"]["code"] == "forbidden" and needle in res["error"]["message"], res
    rec = svc.exec_log(hdrs["x-request-id"])
    assert rec["status"] == 403 and "exit_code" not in rec, rec


@pytest.fixture(scope="module")
def federated(fed):
    """Both trust domains' CAs in one TLS_CLIENT_CA_FILE, each attributed by its SAN."""
    from conftest import _launch, _stop_checked
    svc = _launch(fed_env(fed, TLS_CLIENT_CA_FILE=fed.path("all", "pem")), None)
    yield svc
    _stop_checked(svc)


def test_each_trust_domain_is_believed_from_its_own_cas(federated, fed):
    status, _, res = fed_call(federated, fed, "victim")
    assert status == 200 and res["stdout"] == "ran\n", res
    assert federated.exec_log(res["id"])["caller"] == VICTIM
    status, _, res2 = fed_call(federated, fed, "runner")
    assert status == 200 and federated.exec_log(res2["id"])["caller"] == RUNNER
    # a leaf of prod's intermediate (not in the bundle), the client sending the intermediate
    status, _, res3 = fed_call(federated, fed, "victim_int", chain=["int_prod"])
    assert status == 200, res3
    # a CA naming no trust domain is the service's own (that of its SVID: prod.example)
    status, _, res4 = fed_call(federated, fed, "plain_alice")
    assert status == 200 and federated.exec_log(res4["id"])["caller"] == f"{PROD}/agents/alice"
    assert any(r.get("event") == "start" and "trust bundles:" in r["message"] and "partner.example (2 CAs)"
               in r["message"] for r in federated.json_log()), federated.log_text()


def test_forged_leaf_from_another_trust_domains_ca_runs_nothing(federated, fed):
    """The partner's CA mints spiffe://prod.example/agents/victim (allowed by the
    prod.example/agents/* prefix): no execution, and no access to the victim's record."""
    status, _, mine = fed_call(federated, fed, "victim", body={"code": "echo secret work", "language": "bash"})
    assert status == 200
    before = [r for r in exec_logs(federated) if r.get("status") == 200]
    for client, chain in (("forged", ()), ("forged_int", ("int_partner",)), ("forged_int", ())):
        status, hdrs, res = fed_call(federated, fed, client, chain=chain)
        assert status == 403, (client, res)
        refused_without_running(federated, hdrs, res, "not issued by a trusted CA of its trust domain prod.example")
        status, hdrs, rec = fed_call(federated, fed, client, method="GET", path="/api/v1/executions/" + mine["id"])
        assert status == 403 and "id" not in rec, rec
    # an own-domain CA cannot mint the partner's IDs either
    status, hdrs, res = fed_call(federated, fed, "plain_forged")
    assert status == 403
    refused_without_running(federated, hdrs, res, "of its trust domain partner.example")
    assert [r for r in exec_logs(federated) if r.get("status") == 200] == before


def test_an_id_whose_trust_domain_has_no_bundle_is_refused(federated, fed):
    # elsewhere.example is allowed, but the service has no bundle for it (its CA is unknown)
    status, hdrs, res = fed_call(federated, fed, "stranger")
    assert status == 403
    refused_without_running(federated, hdrs, res, "trust domain elsewhere.example has no trust bundle")


def test_svids_must_be_client_leaves(federated, fed):
    status, hdrs, res = fed_call(federated, fed, "noeku")
    assert status == 403
    refused_without_running(federated, hdrs, res, "no extended key usage")
    status, hdrs, res = fed_call(federated, fed, "signer")
    assert status == 403
    refused_without_running(federated, hdrs, res, "may sign certificates")


def test_trust_bundles_per_trust_domain(start_service, fed):
    """SPIFFE_TRUST_BUNDLES: every certificate of a file, intermediates included, is a CA
    of that file's trust domain only."""
    svc = start_service(env=fed_env(fed, SPIFFE_TRUST_BUNDLES=(
        f"prod.example={fed.path('prod_bundle', 'pem')}, partner.example={fed.path('partner_bundle', 'pem')}")))
    assert fed_call(svc, fed, "victim")[0] == 200
    assert fed_call(svc, fed, "runner")[0] == 200
    # issued by the partner's intermediate, which its bundle holds: the client sends no chain
    status, _, res = fed_call(svc, fed, "runner2")
    assert status == 200 and svc.exec_log(res["id"])["caller"] == f"{PARTNER}/ci/runner2", res
    for client in ("forged", "forged_int"):
        status, hdrs, res = fed_call(svc, fed, client)
        assert status == 403
        refused_without_running(svc, hdrs, res, "not issued by a trusted CA of its trust domain prod.example")
    # ca_plain is in no bundle now
    status, hdrs, res = fed_call(svc, fed, "plain_alice")
    assert status == 403 and "not issued by a trusted CA" in res["error"]["message"], res


def test_sighup_reloads_the_trust_bundles(start_service, fed, tmp_path):
    prod = tmp_path / "prod.pem"
    prod.write_text(Path(fed.path("ca_prod", "pem")).read_text())
    svc = start_service(env=fed_env(fed, SPIFFE_TRUST_BUNDLES=f"prod.example={prod}"))
    assert fed_call(svc, fed, "victim")[0] == 200
    assert fed_call(svc, fed, "victim2")[0] == 403
    prod.write_text(Path(fed.path("ca_prod2", "pem")).read_text())   # the root rotates
    svc.signal(signal.SIGHUP)
    wait_for(lambda: any(r.get("event") == "reload" and "prod.example (1 CA)" in r["message"]
                         for r in svc.json_log()), 10, "the reload")
    assert fed_call(svc, fed, "victim2")[0] == 200
    status, _, res = fed_call(svc, fed, "victim")
    assert status == 403 and "not issued by a trusted CA" in res["error"]["message"], res
    # a bundle that does not load keeps the current ones
    prod.write_text(Path(fed.path("ca_partner", "pem")).read_text())  # names partner.example
    svc.signal(signal.SIGHUP)
    wait_for(lambda: any(r.get("event") == "reload" and "keeping" in r["message"] and "partner.example"
                         in r["message"] for r in svc.json_log()), 10, "the refused reload")
    assert fed_call(svc, fed, "victim2")[0] == 200


@pytest.mark.parametrize("env,needle", [
    # a CA naming no trust domain, and no own trust domain to give it (@x: x.pem of the PKI)
    ({"TLS_CERT_FILE": "@server_anon", "TLS_CLIENT_CA_FILE": "@ca_plain"}, "SPIFFE_TRUST_DOMAIN"),
    ({"TLS_CLIENT_CA_FILE": "@ca_prod", "SPIFFE_TRUST_DOMAIN": "spiffe://prod.example"}, "SPIFFE_TRUST_DOMAIN"),
    ({"TLS_CLIENT_CA_FILE": "@ca_prod", "SPIFFE_TRUST_DOMAIN": "Prod.Example"}, "SPIFFE_TRUST_DOMAIN"),
    # an intermediate naming a trust domain other than its issuer's
    ({"TLS_CLIENT_CA_FILE": "@ca_prod+int_conflict"}, "issued by a CA of trust domain prod.example"),
    # a bundle's CA naming another trust domain, or not a CA
    ({"SPIFFE_TRUST_BUNDLES": "prod.example=@ca_partner"}, "names trust domain partner.example"),
    ({"SPIFFE_TRUST_BUNDLES": "prod.example=@victim"}, "not a CA certificate"),
    ({"SPIFFE_TRUST_BUNDLES": "prod.example"}, "trust-domain=/path"),
    ({"SPIFFE_TRUST_BUNDLES": "spiffe://prod.example=@ca_prod"}, "without spiffe://"),
    ({"SPIFFE_TRUST_BUNDLES": "Prod.example=@ca_prod"}, "trust domain has a character"),
    ({"SPIFFE_TRUST_BUNDLES": "prod.example=relative.pem"}, "absolute path"),
    ({"SPIFFE_TRUST_BUNDLES": "prod.example=@ca_prod,prod.example=@ca_prod2"}, "listed twice"),
    ({"SPIFFE_TRUST_BUNDLES": "prod.example=/nonexistent.pem"}, "/nonexistent.pem"),
    # bundles with nothing to verify: no mTLS, no proxy
    ({"TLS_CERT_FILE": None, "TLS_KEY_FILE": None, "SPIFFE_TRUST_BUNDLES": "prod.example=@ca_prod"},
     "SPIFFE_TRUST_BUNDLES"),
    # a proxy's SPIFFE ID needs mTLS to be verified
    ({"TLS_CERT_FILE": None, "TLS_KEY_FILE": None, "TRUSTED_PROXIES": f"127.0.0.1,{PROD}/envoy"},
     "TRUSTED_PROXIES"),
    ({"TLS_CLIENT_CA_FILE": "@ca_prod", "TRUSTED_PROXIES": f"{PROD}/envoy/"}, "TRUSTED_PROXIES"),
])
def test_trust_configuration_errors_stop_the_start(fed, env, needle):
    import re

    def resolve(v: str) -> str:
        return re.sub(r"@([\w+]+)", lambda m: fed.bundle("cfg-" + m.group(1).replace("+", "-"),
                                                          *m.group(1).split("+")), v)

    full = fed_env(fed)
    for k, v in env.items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = resolve(v)
    if (env.get("TLS_CERT_FILE") or "").startswith("@"):
        full["TLS_KEY_FILE"] = fed.path(env["TLS_CERT_FILE"][1:], "key")
    r = serve(full)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert needle in r.stderr and "listening" not in r.stderr, r.stderr


# ---- a proxy that forwards the certificate: the same rule -------------------------------------------


@pytest.fixture
def fed_proxy(start_service, fed):
    d = tempfile.mkdtemp(prefix="hxs-fedx-")
    def start(**env: str):
        full = {"TRUSTED_PROXIES": "unix", "AUTH_ALLOW": FED_ALLOW,
                "SPIFFE_TRUST_BUNDLES": f"prod.example={fed.path('prod_bundle', 'pem')},"
                                        f"partner.example={fed.path('partner_bundle', 'pem')}"}
        full.update(env)
        return start_service(env={k: v for k, v in full.items() if v is not None}, listen=f"unix:{d}/s.sock")
    yield start
    shutil.rmtree(d, ignore_errors=True)


def envoy_xfcc(p: Pki, uri: Optional[str], leaf: Optional[str] = None, chain=None) -> str:
    pairs = [f"By={PROD}/envoy", "Hash=0123abcd"]
    forwarded = xfcc_cert(p, leaf, chain)
    if forwarded:
        pairs.append(forwarded)
    pairs.append('Subject="CN=x"')
    if uri:
        pairs.append(f"URI={uri}")
    return ";".join(pairs)


def test_xfcc_forwarded_certificate_is_verified_against_its_trust_domain(fed_proxy, fed):
    svc = fed_proxy()
    bash = {"code": "echo ran", "language": "bash"}

    def post(header: str):
        return post_exec(svc.url, bash, headers={"X-Forwarded-Client-Cert": header})

    status, _, res = post(envoy_xfcc(fed, VICTIM, "victim"))
    assert status == 200 and svc.exec_log(res["id"])["caller"] == VICTIM, res
    status, _, res = post(envoy_xfcc(fed, f"{PROD}/agents/via-intermediate", "victim_int",
                                     chain=["victim_int", "int_prod"]))
    assert status == 200, res
    status, _, res = post(envoy_xfcc(fed, None, "runner"))     # no URI=: the certificate names the caller
    assert status == 200 and svc.exec_log(res["id"])["caller"] == RUNNER, res
    refused = [
        (envoy_xfcc(fed, VICTIM, "forged"), "not issued by a trusted CA of its trust domain prod.example"),
        (envoy_xfcc(fed, f"{PROD}/agents/victim2", None, chain=["forged_int", "int_partner"]),
         "not issued by a trusted CA of its trust domain prod.example"),
        (envoy_xfcc(fed, None, "forged"), "not issued by a trusted CA"),
        (envoy_xfcc(fed, f"{PROD}/agents/other", "victim"), "is not the SPIFFE ID of the forwarded certificate"),
        (envoy_xfcc(fed, VICTIM, "victim", chain=["runner"]), "Cert is not the first certificate of Chain"),
        (envoy_xfcc(fed, "spiffe://elsewhere.example/x", "stranger"), "has no trust bundle"),
        (f'Cert="not%20a%20certificate";URI={VICTIM}', "Cert is not one PEM certificate"),
        (f'Cert="%ZZ";URI={VICTIM}', "malformed"),
    ]
    for header, needle in refused:
        status, hdrs, res = post(header)
        assert status == 403, (needle, res)
        refused_without_running(svc, hdrs, res, needle)
    # URI= alone: the proxy is the one that verified it (README)
    status, _, res = post(f"URI={VICTIM}")
    assert status == 200, res


def test_xfcc_certificate_without_any_bundle_is_refused(fed_proxy, fed):
    svc = fed_proxy(SPIFFE_TRUST_BUNDLES=None)
    status, hdrs, res = post_exec(svc.url, {"code": "true", "language": "bash"},
                                  headers={"X-Forwarded-Client-Cert": envoy_xfcc(fed, VICTIM, "victim")})
    assert status == 403
    refused_without_running(svc, hdrs, res, "no trust bundles are configured")


def test_proxy_trust_bound_to_its_spiffe_id(start_service, fed):
    svc = start_service(env=fed_env(fed, TLS_CLIENT_CA_FILE=fed.path("all", "pem"),
                                    TRUSTED_PROXIES=f"127.0.0.1,{PROD}/envoy"))
    h = {"X-Forwarded-Client-Cert": f"By={PROD}/envoy;URI={RUNNER}"}
    status, _, res = fed_call(svc, fed, "proxy", headers=h)
    assert status == 200 and svc.exec_log(res["id"])["caller"] == RUNNER, res
    # another valid client at the proxy's address cannot name anyone: it runs as itself
    status, _, res = fed_call(svc, fed, "victim", headers=h)
    assert status == 200 and svc.exec_log(res["id"])["caller"] == VICTIM, res
    assert any(r.get("event") == "auth" and res["id"] in r["message"] and "ignored" in r["message"]
               for r in svc.json_log())
    # the proxy itself, naming nobody, is nobody
    status, hdrs, res = fed_call(svc, fed, "proxy")
    assert status == 403
    refused_without_running(svc, hdrs, res, "the proxy is not a caller itself")


def test_metrics_allow(start_service, fed):
    svc = start_service(env=fed_env(fed, TLS_CLIENT_CA_FILE=fed.path("all", "pem"),
                                    METRICS_ALLOW=f"{PARTNER}/ci/runner"))
    assert fed_call(svc, fed, "victim")[0] == 200
    status, _, res = fed_call(svc, fed, "victim", method="GET", path="/metrics")
    assert status == 403 and "METRICS_ALLOW" in res["error"]["message"], res
    status, _, text = fed_call(svc, fed, "runner", method="GET", path="/metrics")
    assert status == 200 and VICTIM in text


def test_oversized_body_over_tls_gets_its_reply(start_service, fed):
    """A client that writes its whole body before reading (http.client) reads the 413,
    and a refused one its 403, not a reset (the close lingers)."""
    svc = start_service(env=fed_env(fed, TLS_CLIENT_CA_FILE=fed.path("all", "pem"), MAX_BODY_BYTES="1024"))
    big = {"code": "#" * 16_000_000, "language": "bash"}
    status, _, res = fed_call(svc, fed, "victim", body=big)
    assert status == 413 and res["error"]["code"] == "too_large", res
    status, _, res = fed_call(svc, fed, "stranger", body=big)
    assert status == 403, res
    assert fed_call(svc, fed, "victim")[0] == 200


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


def test_one_caller_cannot_hold_every_slot_by_default(unix_proxy_service):
    """Default quotas, identities on, MAX_CONCURRENT 2: alice's two long executions
    would hold both slots past bob's QUEUE_TIMEOUT; by default she holds one, her second
    waits (and times out, naming the quota), and bob runs meanwhile."""
    svc = unix_proxy_service(MAX_CONCURRENT="2", QUEUE_TIMEOUT="3s")
    a = {"X-Forwarded-Client-Cert": xfcc(ALICE)}
    out: Dict[str, Any] = {}

    def send(name: str) -> None:
        out[name] = post_exec(svc.url, {"code": f"sleep 8; echo {name}", "language": "bash"}, headers=a)

    threads = [threading.Thread(target=send, args=(n,)) for n in ("a1", "a2")]
    try:
        for t in threads:
            t.start()
        wait_for(lambda: _active(svc) + _queued(svc) == 2, 30, "alice's two requests to be admitted")
        assert _active(svc) == 1 and _queued(svc) == 1, "alice holds both slots"
        status, _, res = post_exec(svc.url, {"code": "echo bob", "language": "bash"},
                                   headers={"X-Forwarded-Client-Cert": xfcc(BOB)})
        assert status == 200 and res["stdout"] == "bob\n", res
        assert len(out) < 2, "bob was served only after alice's executions"
    finally:
        for t in threads:
            t.join(60)
    codes = sorted(out[n][0] for n in out)
    assert codes == [200, 429], out
    late = next(v for v in out.values() if v[0] == 429)[2]
    assert late["error"]["code"] == "quota_exceeded" and "QUOTA_RUNNING_PER_CALLER 1" in late["error"]["message"]
    # set to MAX_CONCURRENT, one caller may use every slot again
    svc2 = unix_proxy_service(MAX_CONCURRENT="2", QUOTA_RUNNING_PER_CALLER="2")
    both = [threading.Thread(target=lambda: post_exec(svc2.url, {"code": "sleep 2", "language": "bash"},
                                                      headers=a)) for _ in range(2)]
    for t in both:
        t.start()
    wait_for(lambda: _active(svc2) == 2, 30, "both of alice's executions to run")
    for t in both:
        t.join(60)


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
