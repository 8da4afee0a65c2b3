// What every transport of the MCP server must do, driven by the official TypeScript
// SDK's client: stdio.test.mjs and http.test.mjs register these with their own
// connect(). The seed's pandas example is compared with the same code run on the host
// (the sandbox uses the host's runtimes, so the output is byte-identical).

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const BIN = process.env.HEXR_SANDBOX_BIN || join(ROOT, "build", "hexr-sandbox");

// seed 000, "Data analysis with pandas", verbatim
export const PANDAS_SEED = `import pandas as pd
df = pd.DataFrame({'x': [1, 2, 3], 'y': [4, 5, 6]})
print(df.describe())
`;

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function waitFor(check, seconds, what) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${seconds}s waiting for ${what}`);
    await sleep(50);
  }
}

/** Host processes whose argv[0] is exactly name (a program that exec'd itself so). */
export function pidsNamed(name) {
  const found = [];
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const argv0 = readFileSync(`/proc/${pid}/cmdline`, "latin1").split("\0")[0];
      if (argv0 === name) found.push(Number(pid));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

function hostPython(code) {
  const r = spawnSync("/usr/bin/python3", ["-c", code], { encoding: "utf8", env: { PATH: "/usr/bin:/bin", LANG: "C.UTF-8" } });
  return r.stdout;
}

const texts = (result) => result.content.filter((c) => c.type === "text").map((c) => c.text);

/**
 * Registers the shared tests. connect() returns {client, close}: a connected
 * @modelcontextprotocol/sdk Client.
 */
export function transportTests(name, connect) {
  test(`${name}: initialize negotiates ${"2025-11-25"} and names the server`, async () => {
    const { client, close } = await connect();
    try {
      const info = client.getServerVersion();
      assert.equal(info.name, "hexr-sandbox");
      assert.match(info.version, /^\d+\.\d+\.\d+/);
      assert.deepEqual(client.getServerCapabilities().tools, { listChanged: false });
      await client.ping();
    } finally {
      await close();
    }
  });

  test(`${name}: tools/list gives run_code with schemas and annotations, in a fixed order`, async () => {
    const { client, close } = await connect();
    try {
      const a = await client.listTools();
      const b = await client.listTools();
      assert.deepEqual(a, b);
      const names = a.tools.map((t) => t.name);
      assert.equal(names[0], "run_code");
      const run = a.tools[0];
      assert.equal(run.inputSchema.type, "object");
      assert.deepEqual(run.inputSchema.required, ["code"]);
      assert.equal(run.outputSchema.type, "object");
      assert.deepEqual(run.annotations, {
        title: "Run code in a sandbox", readOnlyHint: false, destructiveHint: false,
        idempotentHint: false, openWorldHint: false,
      });
    } finally {
      await close();
    }
  });

  test(`${name}: the seed's pandas example prints what it prints on the host`, async () => {
    const { client, close } = await connect();
    try {
      await client.listTools(); // the client validates structuredContent against outputSchema
      const r = await client.callTool({ name: "run_code", arguments: { language: "python", code: PANDAS_SEED } });
      assert.notEqual(r.isError, true, JSON.stringify(r));
      const want = hostPython(PANDAS_SEED);
      assert.match(want, /count\s+3\.0/);
      assert.equal(r.structuredContent.stdout, want);
      assert.equal(r.structuredContent.exit_code, 0);
      assert.equal(r.structuredContent.error, null);
      assert.equal(texts(r)[0], want);
      assert.ok(texts(r).includes("exit status 0"));
    } finally {
      await close();
    }
  });

  test(`${name}: a chart comes back as an image, a CSV as an embedded resource`, async () => {
    const { client, close } = await connect();
    try {
      await client.listTools();
      const code = [
        "import matplotlib.pyplot as plt",
        "plt.plot([1, 2, 3], [4, 1, 9])",
        "plt.show()",
        "open('output/t.csv', 'w').write('a,b\\n1,2\\n')",
      ].join("\n");
      const r = await client.callTool({ name: "run_code", arguments: { code } });
      assert.notEqual(r.isError, true, JSON.stringify(r));
      const images = r.content.filter((c) => c.type === "image");
      assert.equal(images.length, 1);
      assert.equal(images[0].mimeType, "image/png");
      const png = Buffer.from(images[0].data, "base64");
      assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
      const res = r.content.filter((c) => c.type === "resource");
      assert.equal(res.length, 1);
      assert.equal(res[0].resource.uri, "file:///home/sandbox/output/t.csv");
      assert.equal(res[0].resource.text, "a,b\n1,2\n");
      const paths = r.structuredContent.files.map((f) => f.path).sort();
      assert.deepEqual(paths, ["output/figure-1.png", "output/t.csv"]);
    } finally {
      await close();
    }
  });

  test(`${name}: files go in, a failing program is isError, bad arguments are isError naming them`, async () => {
    const { client, close } = await connect();
    try {
      await client.listTools();
      const r = await client.callTool({
        name: "run_code",
        arguments: { language: "bash", code: "cat in/a.txt; echo oops >&2; exit 3", files: [{ path: "in/a.txt", content: "hello" }] },
      });
      assert.equal(r.isError, true);
      assert.equal(r.structuredContent.exit_code, 3);
      assert.equal(r.structuredContent.stdout, "hello");
      assert.ok(texts(r).includes("stderr:\noops\n"));
      assert.ok(texts(r).includes("exit status 3"));

      const t = await client.callTool({ name: "run_code", arguments: { code: "import time; time.sleep(5)", timeout: 1 } });
      assert.equal(t.isError, true);
      assert.equal(t.structuredContent.exit_code, 124);
      assert.equal(t.structuredContent.error.type, "timeout");
      assert.ok(texts(t).some((s) => s.startsWith("exit status 124; timeout: ")), JSON.stringify(t.content));

      const bad = await client.callTool({ name: "run_code", arguments: { code: "1", timeout: "soon" } });
      assert.equal(bad.isError, true);
      assert.match(texts(bad)[0], /^timeout: must be an integer number of seconds/);
      const typo = await client.callTool({ name: "run_code", arguments: { code: "1", langauge: "python" } });
      assert.equal(typo.isError, true);
      assert.match(texts(typo)[0], /^langauge: unknown argument/);

      await assert.rejects(client.callTool({ name: "no_such_tool", arguments: {} }), /-32602|unknown tool/i);
    } finally {
      await close();
    }
  });

  test(`${name}: output comes as progress when asked for`, async () => {
    const { client, close } = await connect();
    try {
      await client.listTools();
      const seen = [];
      const r = await client.callTool(
        { name: "run_code", arguments: { language: "bash", code: "echo one; sleep 0.5; echo two" } },
        undefined,
        { onprogress: (p) => seen.push(p) },
      );
      assert.notEqual(r.isError, true);
      assert.equal(r.structuredContent.stdout, "one\ntwo\n");
      // The SDK runs a notification's handler in a microtask but a response's at once,
      // and drops its progress handler with the response: a last progress message that
      // reaches it in the same read as the response is lost on the client's side. So
      // what the client sees is the output's beginning, and at least what came half a
      // second before the end; that the server sends every chunk before the response is
      // checked on the wire (stdio.test.mjs).
      const streamed = seen.map((p) => p.message).join("");
      assert.ok(streamed.startsWith("one\n") && "one\ntwo\n".startsWith(streamed), JSON.stringify(streamed));
      for (let i = 1; i < seen.length; i++) assert.ok(seen[i].progress > seen[i - 1].progress);
    } finally {
      await close();
    }
  });

  test(`${name}: a cancelled call ends its sandbox, and the server goes on`, async () => {
    const { client, close } = await connect();
    try {
      const marker = `hxs-mcp-cancel-${process.pid}-${Date.now()}`;
      const ac = new AbortController();
      const call = client.callTool(
        { name: "run_code", arguments: { language: "bash", code: `exec -a ${marker} sleep 60`, timeout: 30 } },
        undefined,
        { signal: ac.signal },
      );
      call.catch(() => {});
      await waitFor(() => pidsNamed(marker).length > 0, 20, "the sandbox's sleep to start");
      ac.abort("enough");
      await assert.rejects(call);
      await waitFor(() => pidsNamed(marker).length === 0, 15, "the cancelled sandbox to end");
      const r = await client.callTool({ name: "run_code", arguments: { code: "print(2 + 2)" } });
      assert.equal(r.structuredContent.stdout, "4\n");
    } finally {
      await close();
    }
  });

  test(`${name}: a cancelled session_exec interrupts its cell, and the session lives on`, async () => {
    const { client, close } = await connect();
    try {
      const created = await client.callTool({ name: "session_create", arguments: { language: "python" } });
      const sid = created.structuredContent.id;
      await client.callTool({ name: "session_exec", arguments: { session_id: sid, code: "x = 5" } });
      const marker = `hxs-mcp-interrupt-${process.pid}-${Date.now()}`;
      const code = "import subprocess\ntry:\n" +
        `    subprocess.run(['bash', '-c', 'exec -a ${marker} sleep 60'])\n` +
        "except KeyboardInterrupt:\n    cut = 'interrupted'\n    raise";
      const ac = new AbortController();
      const call = client.callTool({ name: "session_exec", arguments: { session_id: sid, code, timeout: 30 } },
        undefined, { signal: ac.signal });
      call.catch(() => {});
      await waitFor(() => pidsNamed(marker).length > 0, 20, "the cell's sleep to start");
      ac.abort("enough");
      await assert.rejects(call);
      // interrupted, not left to its 30 s limit: what it started is gone, its state stays
      await waitFor(() => pidsNamed(marker).length === 0, 15, "the interrupted cell's sleep to end");
      const r = await client.callTool({ name: "session_exec", arguments: { session_id: sid, code: "(x, cut)" } });
      assert.equal(r.structuredContent.value, "(5, 'interrupted')", JSON.stringify(r.structuredContent));
      assert.equal(r.structuredContent.session.state, "idle");
      await client.callTool({ name: "session_close", arguments: { session_id: sid } });
    } finally {
      await close();
    }
  });

  test(`${name}: several calls run at once`, async () => {
    const { client, close } = await connect();
    try {
      await client.listTools();
      const t0 = Date.now();
      const rs = await Promise.all([1, 2].map((i) =>
        client.callTool({ name: "run_code", arguments: { language: "bash", code: `sleep 1; echo ${i}` } })));
      assert.deepEqual(rs.map((r) => r.structuredContent.stdout), ["1\n", "2\n"]);
      assert.ok(Date.now() - t0 < 1900, `took ${Date.now() - t0} ms: ran one after the other`);
    } finally {
      await close();
    }
  });

  test(`${name}: a session keeps its state across calls, its files too, and ends when closed`, async () => {
    const { client, close } = await connect();
    try {
      const names = (await client.listTools()).tools.map((t) => t.name);
      assert.deepEqual(names, ["run_code", "session_create", "session_exec", "session_write_file",
        "session_read_file", "session_list_files", "session_close"]);
      const created = await client.callTool({ name: "session_create", arguments: { language: "python" } });
      assert.notEqual(created.isError, true, JSON.stringify(created));
      const sid = created.structuredContent.id;
      assert.equal(created.structuredContent.state, "idle");

      const a = await client.callTool({ name: "session_exec", arguments: { session_id: sid, code: "x = 41\nprint('set')" } });
      assert.equal(a.structuredContent.stdout, "set\n");
      const b = await client.callTool({ name: "session_exec", arguments: { session_id: sid, code: "x + 1" } });
      assert.equal(b.structuredContent.value, "42");
      assert.ok(b.content.some((c) => c.type === "text" && c.text === "value: 42"));

      const e = await client.callTool({ name: "session_exec", arguments: { session_id: sid, code: "1/0" } });
      assert.equal(e.isError, true);
      assert.equal(e.structuredContent.exception.type, "ZeroDivisionError");

      const chart = await client.callTool({ name: "session_exec", arguments: {
        session_id: sid, code: "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()" } });
      assert.equal(chart.content.filter((c) => c.type === "image" && c.mimeType === "image/png").length, 1);

      const w = await client.callTool({ name: "session_write_file", arguments: { session_id: sid, path: "data/in.csv", content: "a,b\n1,2\n" } });
      assert.deepEqual(w.structuredContent, { path: "data/in.csv", size: 8 });
      const used = await client.callTool({ name: "session_exec", arguments: {
        session_id: sid, code: "import pandas as pd\nprint(int(pd.read_csv('data/in.csv')['b'].sum()))\nopen('out.txt', 'w').write('made')" } });
      assert.equal(used.structuredContent.stdout, "2\n");
      const rd = await client.callTool({ name: "session_read_file", arguments: { session_id: sid, path: "out.txt" } });
      assert.equal(rd.content[0].resource.text, "made");
      const ls = await client.callTool({ name: "session_list_files", arguments: { session_id: sid } });
      assert.ok(ls.structuredContent.files.some((f) => f.path === "data" && f.type === "dir"), JSON.stringify(ls));
      const missing = await client.callTool({ name: "session_read_file", arguments: { session_id: sid, path: "nope.txt" } });
      assert.equal(missing.isError, true);
      const escape = await client.callTool({ name: "session_write_file", arguments: { session_id: sid, path: "../x", content: "" } });
      assert.equal(escape.isError, true);
      assert.match(escape.content[0].text, /^path: /);

      const closed = await client.callTool({ name: "session_close", arguments: { session_id: sid } });
      assert.equal(closed.structuredContent.state, "ended");
      assert.equal(closed.structuredContent.ended_reason, "deleted");
      const after = await client.callTool({ name: "session_exec", arguments: { session_id: sid, code: "x" } });
      assert.equal(after.isError, true);
      assert.match(after.content[0].text, /^session_id: no open session/);
    } finally {
      await close();
    }
  });
}
