"""Test PKI for the identity suite (test_service_identity.py), made with Debian's
`openssl` command into a temporary directory: CAs (roots and intermediates, with or
without a SPIFFE URI SAN naming their trust domain), a server certificate for
127.0.0.1, client certificates with SPIFFE URI SANs, and the bad ones (another CA,
self-signed, expired, two URI SANs, none, no extended key usage). Nothing here touches
the network.

    pki = Pki(tmpdir)
    pki.ca("ca")                                  -> ca.pem / ca.key
    pki.ca("int", issuer="ca", uris=["spiffe://td"]) -> an intermediate CA
    pki.leaf("alice", "ca", uris=["spiffe://..."]) -> alice.pem / alice.key
    pki.client_context("alice")                   -> ssl.SSLContext trusting ca.pem
    pki.bundle("b", "ca", "int")                  -> b.pem, the certificates one after the other
    xfcc_cert(pki, "alice", chain=["int"])        -> Cert="..." and Chain="..." as Envoy writes them
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

OPENSSL = "/usr/bin/openssl"


def _run(args: Sequence[str], cwd: Path) -> None:
    r = subprocess.run([OPENSSL] + list(args), cwd=cwd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)}: {r.stderr}")


class Pki:
    def __init__(self, directory: Path):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)

    def path(self, name: str, ext: str) -> str:
        return str(self.dir / f"{name}.{ext}")

    def _key(self, name: str) -> None:
        _run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
              "-out", f"{name}.key"], self.dir)

    def ca(self, name: str, cn: Optional[str] = None, uris: Sequence[str] = (),
           issuer: Optional[str] = None) -> None:
        """A root CA, or with issuer an intermediate CA signed by that CA; uris become
        URI SANs (a CA names its SPIFFE trust domain as spiffe://td)."""
        self._key(name)
        lines = ["basicConstraints=critical,CA:TRUE", "keyUsage=critical,keyCertSign,cRLSign"]
        if uris:
            lines.append("subjectAltName=" + ",".join(f"URI:{u}" for u in uris))
        ext = self.dir / f"{name}.ext"
        ext.write_text("\n".join(lines) + "\n")
        if issuer is None:
            _run(["req", "-x509", "-new", "-key", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
                  "-subj", f"/CN={cn or name}", "-extensions", "v3",
                  "-config", self._req_conf(name, ext.name)], self.dir)
            return
        _run(["req", "-new", "-key", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn or name}"],
             self.dir)
        _run(["x509", "-req", "-in", f"{name}.csr", "-CA", f"{issuer}.pem", "-CAkey", f"{issuer}.key",
              "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", "-extfile", ext.name], self.dir)

    def bundle(self, name: str, *certs: str) -> str:
        """name.pem holding the PEM certificates of certs, in order; returns its path."""
        text = "".join(Path(self.path(c, "pem")).read_text() for c in certs)
        path = self.dir / f"{name}.pem"
        path.write_text(text)
        return str(path)

    def _ext(self, name: str, uris: Sequence[str], ips: Sequence[str], usage: Optional[str],
             key_usage: str = "digitalSignature,keyEncipherment") -> str:
        sans = [f"URI:{u}" for u in uris] + [f"IP:{i}" for i in ips]
        lines = ["basicConstraints=critical,CA:FALSE", f"keyUsage=critical,{key_usage}"]
        if usage:
            lines.append(f"extendedKeyUsage={usage}")
        if sans:
            lines.append("subjectAltName=" + ",".join(sans))
        ext = self.dir / f"{name}.ext"
        ext.write_text("\n".join(lines) + "\n")
        return ext.name

    def leaf(self, name: str, ca: str, uris: Sequence[str] = (), ips: Sequence[str] = (),
             usage: Optional[str] = "clientAuth", expired: bool = False,
             key_usage: str = "digitalSignature,keyEncipherment") -> None:
        """A certificate signed by ca; usage None: no extended key usage at all."""
        self._key(name)
        ext = self._ext(name, uris, ips, usage, key_usage)
        _run(["req", "-new", "-key", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}"], self.dir)
        if not expired:
            _run(["x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
                  "-CAcreateserial", "-days", "1", "-out", f"{name}.pem", "-extfile", ext], self.dir)
            return
        # Validity in the past: `openssl ca` takes explicit dates.
        db = self.dir / f"{name}.db"
        db.mkdir(exist_ok=True)
        (db / "index.txt").write_text("")
        (db / "serial").write_text("1000\n")
        conf = self.dir / f"{name}.ca.cnf"
        conf.write_text(
            "[ca]\ndefault_ca = d\n[d]\n"
            f"database = {db}/index.txt\nnew_certs_dir = {db}\nserial = {db}/serial\n"
            "default_md = sha256\npolicy = p\nunique_subject = no\n[p]\ncommonName = supplied\n")
        _run(["ca", "-batch", "-config", conf.name, "-cert", f"{ca}.pem", "-keyfile", f"{ca}.key",
              "-in", f"{name}.csr", "-out", f"{name}.pem", "-notext",
              "-startdate", "20200101000000Z", "-enddate", "20200102000000Z",
              "-extfile", ext], self.dir)

    def self_signed(self, name: str, uris: Sequence[str]) -> None:
        self._key(name)
        ext = self._ext(name, uris, (), "clientAuth")
        _run(["req", "-x509", "-new", "-key", f"{name}.key", "-out", f"{name}.pem", "-days", "1",
              "-subj", f"/CN={name}", "-extensions", "v3", "-config", self._req_conf(name, ext)],
             self.dir)

    def _req_conf(self, name: str, ext: str) -> str:
        conf = self.dir / f"{name}.req.cnf"
        conf.write_text("[req]\ndistinguished_name = dn\n[dn]\n[v3]\n" + (self.dir / ext).read_text())
        return conf.name

    def client_context(self, client: Optional[str], server_ca: str = "ca",
                       chain: Sequence[str] = ()) -> ssl.SSLContext:
        """Trusts server_ca; presents client's certificate, followed by the certificates
        of chain (intermediates) when given."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(self.path(server_ca, "pem"))
        ctx.check_hostname = False  # the server certificate names 127.0.0.1 by IP
        if client:
            cert = self.path(client, "pem")
            if chain:
                cert = self.bundle(f"{client}-chain", client, *chain)
            ctx.load_cert_chain(cert, self.path(client, "key"))
        return ctx


def xfcc_cert(pki: Pki, leaf: Optional[str] = None, chain: Optional[Sequence[str]] = None) -> str:
    """The Cert= and Chain= pairs of X-Forwarded-Client-Cert as Envoy writes them: the
    URL-encoded PEM of the client's certificate, and of its chain (the leaf first)."""
    from urllib.parse import quote
    pairs = []
    if leaf:
        pairs.append('Cert="%s"' % quote(Path(pki.path(leaf, "pem")).read_text(), safe=""))
    if chain is not None:
        text = "".join(Path(pki.path(c, "pem")).read_text() for c in chain)
        pairs.append('Chain="%s"' % quote(text, safe=""))
    return ";".join(pairs)


def https_request(address: str, ctx: ssl.SSLContext, method: str, path: str,
                  body: Any = None, headers: Optional[Dict[str, str]] = None,
                  timeout: float = 120.0) -> Tuple[int, Dict[str, str], Any]:
    """One HTTPS request to address ("127.0.0.1:PORT") on a new connection."""
    host, _, port = address.rpartition(":")
    assert host == "127.0.0.1", address
    hdrs = dict(headers or {})
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        hdrs.setdefault("Content-Type", "application/json")
    conn = http.client.HTTPSConnection(host, int(port), timeout=timeout, context=ctx)
    try:
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        raw = resp.read()
        rh = {k.lower(): v for k, v in resp.getheaders()}
        status = resp.status
    finally:
        conn.close()
    parsed: Any = raw.decode("utf-8", errors="replace")
    if rh.get("content-type", "").startswith("application/json") and raw:
        parsed = json.loads(raw)
    return status, rh, parsed
