// `hexr-sandbox mcp --url URL`: the stdio server forwarding every message to a
// service's /mcp, driven by the official TypeScript SDK's StdioClientTransport: the
// shared tests over http://, then a unix socket, and https:// with a client certificate
// (mTLS) that the service's allowlist names, and one it does not.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

import { startService } from "./service.mjs";
import { BIN, transportTests } from "./shared.mjs";

const TD = "spiffe://example.org";

async function connectVia(args, env = {}) {
  const transport = new StdioClientTransport({
    command: BIN, args: ["mcp", ...args], env: { PATH: process.env.PATH || "/usr/bin:/bin", ...env }, stderr: "pipe",
  });
  const client = new Client({ name: "hexr-sandbox-tests", version: "1.0.0" });
  await client.connect(transport);
  return { client, close: () => client.close() };
}

let svc;
before(async () => {
  svc = await startService();
});
after(async () => {
  if (svc) assert.equal(await svc.stop(), 0, svc.log());
});

transportTests("stdio --url", () => connectVia(["--url", svc.url]));

test("stdio --url: a unix socket, and a service that is not there", async () => {
  const dir = mkdtempSync(join(tmpdir(), "hxs-mcp-unix-"));
  const sock = join(dir, "s.sock");
  const s = await startService({ LISTEN_ADDRESS: `unix:${sock}` });
  try {
    const { client, close } = await connectVia(["--url", `unix:${sock}`]);
    try {
      const r = await client.callTool({ name: "run_code", arguments: { code: "print(6 * 7)" } });
      assert.equal(r.structuredContent.stdout, "42\n");
    } finally {
      await close();
    }
  } finally {
    assert.equal(await s.stop(), 0);
    rmSync(dir, { recursive: true, force: true });
  }
  await assert.rejects(connectVia(["--url", `unix:${sock}`]), /connecting to unix:/);
});

/** A CA, a server certificate for 127.0.0.1, client certificates with SPIFFE IDs. */
function makePki() {
  const dir = mkdtempSync(join(tmpdir(), "hxs-mcp-pki-"));
  const run = (args) => {
    const r = spawnSync("/usr/bin/openssl", args, { cwd: dir, encoding: "utf8", timeout: 60_000 });
    if (r.status !== 0) throw new Error(`openssl ${args.join(" ")}: ${r.stderr}`);
  };
  const key = (n) => run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", `${n}.key`]);
  key("ca");
  run(["req", "-x509", "-new", "-key", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=ca",
    "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
  const leaf = (n, alt, usage) => {
    key(n);
    writeFileSync(join(dir, `${n}.ext`), ["basicConstraints=critical,CA:FALSE",
      "keyUsage=critical,digitalSignature,keyEncipherment", `extendedKeyUsage=${usage}`, `subjectAltName=${alt}`].join("\n") + "\n");
    run(["req", "-new", "-key", `${n}.key`, "-out", `${n}.csr`, "-subj", `/CN=${n}`]);
    run(["x509", "-req", "-in", `${n}.csr`, "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1",
      "-out", `${n}.pem`, "-extfile", `${n}.ext`]);
  };
  leaf("server", `URI:${TD}/sandbox,IP:127.0.0.1`, "serverAuth");
  leaf("alice", `URI:${TD}/agents/alice`, "clientAuth");
  leaf("eve", `URI:${TD}/intruders/eve`, "clientAuth");
  return { dir, p: (n, ext) => join(dir, `${n}.${ext}`) };
}

test("stdio --url https://: mTLS with the SDKs' options; a caller the allowlist does not name is refused", async () => {
  const pki = makePki();
  const s = await startService({
    TLS_CERT_FILE: pki.p("server", "pem"), TLS_KEY_FILE: pki.p("server", "key"),
    TLS_CLIENT_CA_FILE: pki.p("ca", "pem"), AUTH_ALLOW: `${TD}/agents/*`,
  });
  const url = s.url.replace("http://", "https://");
  try {
    const { client, close } = await connectVia(
      ["--url", url, "--ca-file", pki.p("ca", "pem"), "--cert-file", pki.p("alice", "pem"), "--key-file", pki.p("alice", "key")]);
    try {
      const r = await client.callTool({ name: "run_code", arguments: { code: "print('over mTLS')" } });
      assert.equal(r.structuredContent.stdout, "over mTLS\n");
    } finally {
      await close();
    }
    // the same through the SDKs' environment variables
    const viaEnv = await connectVia(["--url", url], {
      HEXR_SANDBOX_CA_FILE: pki.p("ca", "pem"), HEXR_SANDBOX_CERT_FILE: pki.p("alice", "pem"),
      HEXR_SANDBOX_KEY_FILE: pki.p("alice", "key"),
    });
    await viaEnv.close();

    await assert.rejects(connectVia(["--url", url, "--ca-file", pki.p("ca", "pem"), "--cert-file", pki.p("eve", "pem"),
      "--key-file", pki.p("eve", "key")]), /HTTP 403: caller spiffe:\/\/example.org\/intruders\/eve is not allowed/);
    // a service whose certificate no trusted CA signed
    await assert.rejects(connectVia(["--url", url]), /TLS with 127\.0\.0\.1/);
  } finally {
    assert.equal(await s.stop(), 0);
    rmSync(pki.dir, { recursive: true, force: true });
  }
});
