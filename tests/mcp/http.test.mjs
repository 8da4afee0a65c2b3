// The MCP server over Streamable HTTP (POST /mcp on `hexr-sandbox serve`), through the
// official TypeScript SDK's StreamableHTTPClientTransport: the shared tests, what only
// HTTP has (Origin, MCP-Protocol-Version, methods, identity and the allowlist, metrics
// and the access log), and the official conformance suite's server scenarios that apply
// to a server with these tools.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

import { startService } from "./service.mjs";
import { pidsNamed, transportTests, waitFor } from "./shared.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const TD = "spiffe://example.org";

let svc;
before(async () => {
  svc = await startService();
});
after(async () => {
  if (svc) assert.equal(await svc.stop(), 0, svc.log());
});

async function connectTo(url, headers = {}) {
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers } });
  const client = new Client({ name: "hexr-sandbox-tests", version: "1.0.0" });
  await client.connect(transport);
  return { client, close: () => client.close() };
}

transportTests("http", () => connectTo(svc.url));

async function post(url, body, headers = {}) {
  const r = await fetch(`${url}/mcp`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: r.status, headers: r.headers, text: await r.text() };
}

const INIT = {
  jsonrpc: "2.0", id: 1, method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } },
};

test("http: the answers the transport promises: JSON, 202, 400, 403 for Origin, 405", async () => {
  const init = await post(svc.url, INIT);
  assert.equal(init.status, 200);
  assert.match(init.headers.get("content-type"), /^application\/json/);
  assert.match(init.headers.get("mcp-session-id"), /^[0-9a-f]{32}$/);
  assert.equal(JSON.parse(init.text).result.protocolVersion, "2025-06-18");

  const note = await post(svc.url, { jsonrpc: "2.0", method: "notifications/initialized" });
  assert.equal(note.status, 202);
  assert.equal(note.text, "");
  assert.equal((await post(svc.url, { jsonrpc: "2.0", id: 9, result: {} })).status, 202);

  const garbage = await post(svc.url, "{not json");
  assert.equal(garbage.status, 400);
  assert.equal(JSON.parse(garbage.text).error.code, -32700);
  const unknown = await post(svc.url, { jsonrpc: "2.0", id: 2, method: "resources/list" });
  assert.equal(unknown.status, 200);
  assert.equal(JSON.parse(unknown.text).error.code, -32601);

  for (const origin of ["http://localhost:3000", "https://127.0.0.1", "http://[::1]:8080"])
    assert.equal((await post(svc.url, INIT, { Origin: origin })).status, 200, origin);
  for (const origin of ["http://evil.example", "http://localhost.evil.example", "null", "http://127.0.0.1:80/x"]) {
    const r = await post(svc.url, INIT, { Origin: origin });
    assert.equal(r.status, 403, origin);
    assert.match(JSON.parse(r.text).error.message, /^Origin: not allowed/);
  }

  assert.equal((await post(svc.url, INIT, { "MCP-Protocol-Version": "2025-03-26" })).status, 200);
  const v = await post(svc.url, INIT, { "MCP-Protocol-Version": "2099-01-01" });
  assert.equal(v.status, 400);
  assert.match(JSON.parse(v.text).error.message, /^MCP-Protocol-Version: not supported/);

  for (const method of ["GET", "DELETE"]) {
    const r = await fetch(`${svc.url}/mcp`, { method });
    assert.equal(r.status, 405, method);
    assert.equal(r.headers.get("allow"), "POST");
  }
  const ct = await post(svc.url, INIT, { "Content-Type": "text/plain" });
  assert.equal(ct.status, 415);

});

test("http: a call streams progress as events when the client accepts them, and is logged and counted", async () => {
  const r = await post(svc.url, {
    jsonrpc: "2.0", id: "s1", method: "tools/call",
    params: { name: "run_code", arguments: { language: "bash", code: "echo a; sleep 0.3; echo b" }, _meta: { progressToken: 7 } },
  });
  assert.equal(r.status, 200);
  assert.match(r.headers.get("content-type"), /^text\/event-stream/);
  const msgs = r.text.split("\n").filter((l) => l.startsWith("data: ")).map((l) => JSON.parse(l.slice(6)));
  const progress = msgs.filter((m) => m.method === "notifications/progress");
  assert.equal(progress.map((m) => m.params.message).join(""), "a\nb\n");
  assert.ok(progress.every((m) => m.params.progressToken === 7));
  const last = msgs[msgs.length - 1];
  assert.equal(last.id, "s1");
  assert.equal(last.result.structuredContent.stdout, "a\nb\n");

  // without a progressToken: one JSON answer
  const j = await post(svc.url, { jsonrpc: "2.0", id: "s2", method: "tools/call", params: { name: "run_code", arguments: { code: "print(1)" } } });
  assert.match(j.headers.get("content-type"), /^application\/json/);
  assert.equal(JSON.parse(j.text).result.structuredContent.stdout, "1\n");

  const metrics = await (await fetch(`${svc.url}/metrics`)).text();
  assert.match(metrics, /^hexr_sandbox_mcp_messages_total\{method="tools\/call",tool="run_code"\} [1-9]\d*$/m);
  assert.match(metrics, /^hexr_sandbox_mcp_messages_total\{method="initialize",tool=""\} [1-9]\d*$/m);
  assert.match(metrics, /^hexr_sandbox_http_requests_total\{route="\/mcp",status="200"\} [1-9]\d*$/m);
  const lines = svc.log().split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
  assert.ok(lines.some((l) => l.event === "exec" && l.route === "/mcp" && l.outcome === "ok"), svc.log());
});

test("http: a client that goes away ends its call's sandbox", async () => {
  const marker = `hxs-mcp-gone-${process.pid}-${Date.now()}`;
  const ac = new AbortController();
  const r = fetch(`${svc.url}/mcp`, {
    method: "POST", signal: ac.signal,
    headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call",
      params: { name: "run_code", arguments: { language: "bash", code: `exec -a ${marker} sleep 60` } } }),
  });
  r.catch(() => {});
  await waitFor(() => pidsNamed(marker).length > 0, 20, "the sandbox's sleep to start");
  ac.abort();
  await waitFor(() => pidsNamed(marker).length === 0, 15, "the abandoned sandbox to end");
  await waitFor(() => /"route":"\/mcp","status":499,.*"outcome":"killed","error":"client_disconnected"/.test(svc.log()), 10,
    "the access log to say so");
});

test("http: MCP_ALLOWED_ORIGINS replaces the loopback default", async () => {
  const s = await startService({ MCP_ALLOWED_ORIGINS: "https://app.example.com, http://localhost:5173" });
  try {
    assert.equal((await post(s.url, INIT, { Origin: "https://app.example.com" })).status, 200);
    assert.equal((await post(s.url, INIT, { Origin: "http://localhost:5173" })).status, 200);
    assert.equal((await post(s.url, INIT, { Origin: "http://localhost:3000" })).status, 403);
    assert.equal((await post(s.url, INIT)).status, 200); // no Origin: not a browser
  } finally {
    assert.equal(await s.stop(), 0);
  }
});

test("http: a caller the allowlist does not name is refused, one it names runs code", async () => {
  // identity from a trusted proxy's X-Forwarded-Client-Cert (tests/integration/test_service_identity.py)
  const s = await startService({ AUTH_ALLOW: `${TD}/agents/*`, TRUSTED_PROXIES: "127.0.0.1" });
  try {
    const eve = { "X-Forwarded-Client-Cert": `URI=${TD}/intruders/eve` };
    const r = await post(s.url, INIT, eve);
    assert.equal(r.status, 403, r.text);
    await assert.rejects(connectTo(s.url, eve), /forbidden.*is not allowed \(AUTH_ALLOW\)/);
    await assert.rejects(connectTo(s.url), /forbidden/); // no identity at all

    const alice = { "X-Forwarded-Client-Cert": `URI=${TD}/agents/alice` };
    const bob = { "X-Forwarded-Client-Cert": `URI=${TD}/agents/bob` };
    const { client, close } = await connectTo(s.url, alice);
    const other = await connectTo(s.url, bob);
    try {
      const res = await client.callTool({ name: "run_code", arguments: { code: "print('hi')" } });
      assert.equal(res.structuredContent.stdout, "hi\n");
      // a session is its caller's: another caller cannot name it
      const sid = (await client.callTool({ name: "session_create", arguments: { language: "bash" } })).structuredContent.id;
      assert.equal((await client.callTool({ name: "session_exec", arguments: { session_id: sid, code: "X=1" } })).isError, false);
      const theirs = await other.client.callTool({ name: "session_exec", arguments: { session_id: sid, code: "echo hi" } });
      assert.equal(theirs.isError, true);
      assert.match(theirs.content[0].text, /^session_id: no open session/);
      const again = await client.callTool({ name: "session_exec", arguments: { session_id: sid, code: "echo $X" } });
      assert.equal(again.structuredContent.stdout, "1\n");
      await client.callTool({ name: "session_close", arguments: { session_id: sid } });
    } finally {
      await close();
      await other.close();
    }
  } finally {
    assert.equal(await s.stop(), 0);
  }
});

// The conformance suite's server scenarios. These two apply to any server and must
// pass; docs/mcp.md says what the others expect (mostly the suite's own sample tools).
test("http: the official conformance suite: server-initialize and tools-list pass", async () => {
  const out = mkdtempSync(join(tmpdir(), "hxs-mcp-conformance-"));
  try {
    for (const scenario of ["server-initialize", "tools-list", "ping"]) {
      const r = spawnSync(process.execPath, [
        join(HERE, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js"),
        "server", "--url", `${svc.url}/mcp`, "--scenario", scenario, "-o", out,
      ], { encoding: "utf8", timeout: 120_000 });
      const text = r.stdout + r.stderr;
      assert.match(text, /Passed: 1\/1, 0 failed/, `${scenario}:\n${text}`);
    }
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
