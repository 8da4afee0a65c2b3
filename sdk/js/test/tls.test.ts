/**
 * https:// and mTLS against a service with TLS_CERT_FILE, TLS_KEY_FILE and
 * TLS_CLIENT_CA_FILE, with certificates made by openssl in a temporary directory: the
 * client certificate from the options or from HEXR_SANDBOX_CERT_FILE /
 * HEXR_SANDBOX_KEY_FILE, in one file or two; no client certificate (403); a CA the
 * client does not trust and files it cannot read (no connection: retried, within the
 * bounds, like every connection that could not be made).
 */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import * as hexr from "../src/index.js";
import {
  CA_FILE_ENV,
  CERT_FILE_ENV,
  Client,
  KEY_FILE_ENV,
  SandboxRequestError,
  SandboxUnavailableError,
  URL_ENV,
} from "../src/index.js";
import { Pki } from "./pki.js";
import { type Service, startService, waitFor } from "./service.js";

const ALICE = "spiffe://example.org/agents/alice";

let pki: Pki;
let svc: Service;
let url: string;

before(async () => {
  pki = new Pki();
  pki.ca("ca");
  pki.ca("other");
  pki.leaf("server", "ca", { ips: ["127.0.0.1"] }, "serverAuth");
  pki.leaf("alice", "ca", { uris: [ALICE] }, "clientAuth");
  svc = await startService({
    env: {
      TLS_CERT_FILE: pki.path("server", "pem"),
      TLS_KEY_FILE: pki.path("server", "key"),
      TLS_CLIENT_CA_FILE: pki.path("ca", "pem"),
      AUTH_ALLOW: "spiffe://example.org/agents/*",
    },
  });
  url = "https://" + svc.address;
});

after(async () => {
  const rc = await svc.stop();
  pki.remove();
  assert.equal(rc, 0, "the service did not stop cleanly:\n" + svc.log().slice(-3000));
});

/** The caller the service logged for execution `id` (waiting for its log line). */
async function callerOf(id: string | null): Promise<unknown> {
  const rec = await waitFor(() => svc.jsonLog().find((r) => r["event"] === "exec" && r["id"] === id), 10,
    `the log line of ${id}`);
  return rec["caller"];
}

describe("mTLS", { concurrency: true }, () => {
  test("a client certificate from the options names the caller", async () => {
    const client = new Client({
      url,
      caFile: pki.path("ca", "pem"),
      certFile: pki.path("alice", "pem"),
      keyFile: pki.path("alice", "key"),
    });
    const result = await client.exec("echo hi", { language: "bash" });
    assert.equal(result.stdout, "hi\n");
    assert.equal(await callerOf(result.id), ALICE);
    assert.equal(await client.isEnabled(), true);
  });

  test("certificate and key in one file", async () => {
    const client = new Client({ url, caFile: pki.path("ca", "pem"), certFile: pki.combined("alice") });
    const result = await client.exec("print('one file')");
    assert.equal(result.stdout, "one file\n");
    assert.equal(await callerOf(result.id), ALICE);
  });

  test("without a client certificate: 403 forbidden, a SandboxRequestError", async () => {
    const client = new Client({ url, caFile: pki.path("ca", "pem") });
    await assert.rejects(client.exec("echo hi", { language: "bash" }), (err: unknown) => {
      assert.ok(err instanceof SandboxRequestError, String(err));
      assert.equal(err.status, 403);
      assert.equal(err.code, "forbidden");
      assert.match(err.message, /no client certificate/);
      return true;
    });
    assert.equal(await client.isEnabled(), true); // a prober may ask for /health
  });

  test("a service certificate the client cannot verify: no connection", async () => {
    for (const options of [{}, { caFile: pki.path("other", "pem") }]) {
      const client = new Client({
        url, ...options, certFile: pki.path("alice", "pem"), keyFile: pki.path("alice", "key"), retryBackoff: 0.01,
      });
      await assert.rejects(client.exec("echo hi", { language: "bash" }), (err: unknown) => {
        assert.ok(err instanceof SandboxUnavailableError, String(err));
        assert.equal(err.code, "connection_failed");
        assert.match(err.message, /certificate/i);
        assert.equal(err.attempts, 3); // nothing was sent: retried within the bounds
        return true;
      });
      assert.equal(await client.isEnabled(), false);
    }
  });

  test("a certificate file that cannot be read: no connection, naming the file", async () => {
    const missing = pki.path("nobody", "pem");
    const client = new Client({ url, caFile: pki.path("ca", "pem"), certFile: missing, retries: 0 });
    await assert.rejects(client.exec("echo hi", { language: "bash" }), (err: unknown) => {
      assert.ok(err instanceof SandboxUnavailableError, String(err));
      assert.equal(err.code, "connection_failed");
      assert.ok(err.message.includes(`cannot read the TLS certificate file ${missing}`), err.message);
      return true;
    });
  });
});

describe("mTLS from the environment", () => {
  test("HEXR_SANDBOX_CA_FILE, _CERT_FILE and _KEY_FILE, read at every call", async () => {
    const saved = { ...process.env };
    try {
      process.env[URL_ENV] = url;
      process.env[CA_FILE_ENV] = pki.path("ca", "pem");
      process.env[CERT_FILE_ENV] = pki.path("alice", "pem");
      process.env[KEY_FILE_ENV] = pki.path("alice", "key");
      const result = await hexr.exec("console.log('from env')", { language: "js" });
      assert.equal(result.stdout, "from env\n");
      assert.equal(await callerOf(result.id), ALICE);

      delete process.env[CERT_FILE_ENV];
      delete process.env[KEY_FILE_ENV];
      await assert.rejects(hexr.exec("print(1)"), (err: unknown) => err instanceof SandboxRequestError && err.status === 403);
    } finally {
      for (const name of [URL_ENV, CA_FILE_ENV, CERT_FILE_ENV, KEY_FILE_ENV]) {
        if (saved[name] === undefined) delete process.env[name];
        else process.env[name] = saved[name];
      }
    }
  });
});
