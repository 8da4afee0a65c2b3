// The MCP server over stdio (`hexr-sandbox mcp`), through the official TypeScript SDK's
// StdioClientTransport: the shared tests, and what only stdio has (logs on stderr,
// a clean exit at the end of stdin that ends what runs).

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { test } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

import { BIN, pidsNamed, transportTests, waitFor } from "./shared.mjs";

function env() {
  const e = { PATH: process.env.PATH || "/usr/bin:/bin", SANDBOX_BACKEND: process.env.SANDBOX_BACKEND || "namespaces" };
  for (const k of ["STATE_DIR", "SANDBOX_UID_BASE", "HOME"]) if (process.env[k]) e[k] = process.env[k];
  return e;
}

async function connect() {
  const transport = new StdioClientTransport({ command: BIN, args: ["mcp"], env: env(), stderr: "pipe" });
  const client = new Client({ name: "hexr-sandbox-tests", version: "1.0.0" });
  await client.connect(transport);
  return { client, close: () => client.close() };
}

transportTests("stdio", connect);

test("stdio: only JSON-RPC on stdout, logs on stderr; the end of stdin ends what runs", async () => {
  const proc = spawn(BIN, ["mcp"], { env: env(), stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  let err = "";
  proc.stdout.on("data", (d) => (out += d));
  proc.stderr.on("data", (d) => (err += d));
  const exited = new Promise((r) => proc.on("exit", (code) => r(code)));
  const marker = `hxs-mcp-eof-${process.pid}-${Date.now()}`;
  const send = (m) => proc.stdin.write(JSON.stringify(m) + "\n");
  send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "t", version: "1" } } });
  send({ jsonrpc: "2.0", method: "notifications/initialized" });
  send({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "run_code", arguments: { code: "print('x')" } } });
  await waitFor(() => out.split("\n").filter(Boolean).length >= 2, 30, "two replies");
  proc.stdin.write("not json\n");
  send({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "run_code", arguments: { language: "bash", code: `exec -a ${marker} sleep 60` } } });
  await waitFor(() => pidsNamed(marker).length > 0, 20, "the sleep to start");
  proc.stdin.end();
  assert.equal(await exited, 0);
  await waitFor(() => pidsNamed(marker).length === 0, 10, "the running sandbox to end");
  const lines = out.split("\n").filter(Boolean).map((l) => JSON.parse(l));
  assert.equal(lines[0].result.protocolVersion, "2025-03-26");
  assert.equal(lines[1].id, 2);
  assert.equal(lines[1].result.structuredContent.stdout, "x\n");
  assert.equal(lines[2].error.code, -32700);
  assert.equal(lines.length, 3); // the cancelled-by-EOF call is never answered
  assert.match(err, /^hexr-sandbox mcp: run_code 2: exit status 0/m);
});

test("stdio: on the wire, every chunk of output comes as progress, in order, before the response", async () => {
  const proc = spawn(BIN, ["mcp"], { env: env(), stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  proc.stdout.on("data", (d) => (out += d));
  proc.stderr.resume();
  const exited = new Promise((r) => proc.on("exit", (code) => r(code)));
  const send = (m) => proc.stdin.write(JSON.stringify(m) + "\n");
  try {
    send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } });
    send({ jsonrpc: "2.0", method: "notifications/initialized" });
    send({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "run_code", arguments: { language: "bash", code: "echo one; sleep 0.2; echo two; sleep 0.2; printf three" }, _meta: { progressToken: "p" } } });
    await waitFor(() => out.split("\n").some((l) => l.startsWith('{"jsonrpc":"2.0","id":2,')), 30, "the response");
  } finally {
    proc.stdin.end();
  }
  assert.equal(await exited, 0);
  const lines = out.split("\n").filter(Boolean).map((l) => JSON.parse(l));
  const end = lines.findIndex((m) => m.id === 2);
  const progress = lines.slice(0, end).filter((m) => m.method === "notifications/progress");
  assert.equal(lines[end].result.structuredContent.stdout, "one\ntwo\nthree");
  assert.equal(progress.map((m) => m.params.message).join(""), "one\ntwo\nthree");
  assert.ok(progress.every((m) => m.params.progressToken === "p"));
  assert.deepEqual(progress.map((m) => m.params.progress), progress.map((_, i, a) => a.slice(0, i + 1).reduce((n, m) => n + m.params.message.length, 0)));
  assert.ok(!lines.slice(end + 1).some((m) => m.method === "notifications/progress"), "no progress after the response");
});

test("stdio: a session is this process's own: another client's id is unknown, and it ends with the process", async () => {
  const one = await connect();
  const two = await connect();
  try {
    const sid = (await one.client.callTool({ name: "session_create", arguments: { language: "bash" } })).structuredContent.id;
    const r = await one.client.callTool({ name: "session_exec", arguments: { session_id: sid, code: "cd /tmp; X=7" } });
    assert.equal(r.structuredContent.status, "ok");
    const keep = await one.client.callTool({ name: "session_exec", arguments: { session_id: sid, code: "echo $X $PWD" } });
    assert.equal(keep.structuredContent.stdout, "7 /tmp\n");
    const other = await two.client.callTool({ name: "session_exec", arguments: { session_id: sid, code: "echo hi" } });
    assert.equal(other.isError, true);
  } finally {
    await one.close();
    await two.close();
  }
});
