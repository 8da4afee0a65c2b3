/**
 * Sessions against the real service: state kept across cells in Python, JavaScript
 * and Bash; the last expression's value and its mime bundle; a chart displayed and
 * streamed; an exception and an interrupted cell as results (the state kept); a cell
 * its caller stopped waiting for, or interrupt(), interrupts it (state kept); files
 * written, read and listed; `await using` and `close()` (the id is gone afterwards);
 * SessionEndedError for a session closed, idle past its timeout, or killed at its
 * memory limit; 429 past MAX_SESSIONS.
 */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  Client,
  SandboxOverloadedError,
  SandboxRequestError,
  Session,
  SessionEndedError,
} from "../src/index.js";
import { rawRequest, type Service, startService, waitFor } from "./service.js";

let svc: Service;
let client: Client;

before(async () => {
  svc = await startService({ env: { MAX_SESSIONS: "3" } });
  client = new Client({ url: svc.url, retries: 0 });
});

after(async () => {
  assert.equal(await svc.stop(), 0, "the service did not stop cleanly:\n" + svc.log().slice(-3000));
});

const PNG = Buffer.from("\x89PNG\r\n\x1a\n", "latin1");

describe("cells", () => {
  test("Python keeps its state; the last expression's value and its mime bundle", async () => {
    await using s = await Session.create({ client, language: "python" });
    assert.equal(s.language, "python");
    assert.match(s.id, /^[0-9a-f]{32}$/);
    const first = await s.exec("x = 41");
    assert.equal(first.status, "ok");
    assert.equal(first.value, null);
    const r = await s.exec("x + 1");
    assert.equal(r.value, "42");
    assert.deepEqual(r.valueData, { "text/plain": "42" });
    assert.equal(r.ok, true);
    assert.equal(r.session?.cells, 2);
    assert.equal(s.last.cells, 2);
    const df = await s.exec("import pandas as pd\npd.DataFrame({'a': [1, 2]})");
    assert.match(String(df.valueData?.["text/html"]), /<table/);
  });

  test("a chart is displayed, streamed with the output, and kept in outputs", async () => {
    await using s = await Session.create({ client });
    const got: string[] = [];
    const r = await s.exec("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()\nprint('drawn')", {
      onStdout: (t) => void got.push("out:" + t),
      onDisplay: (d) => void got.push("display:" + Object.keys(d).sort().join(",")),
    });
    assert.deepEqual(got, ["display:image/png,text/plain", "out:drawn\n"]);
    assert.equal(r.stdout, "drawn\n");
    assert.equal(r.outputs.length, 1);
    const png = Buffer.from(String(r.outputs[0]!.data["image/png"]), "base64");
    assert.deepEqual(png.subarray(0, 8), PNG);
  });

  test("an exception and an interrupted cell are results; the state is kept", async () => {
    await using s = await Session.create({ client });
    await s.exec("kept = 'yes'");
    const e = await s.exec("1/0");
    assert.equal(e.status, "exception");
    assert.equal(e.ok, false);
    assert.deepEqual([e.exception?.type, e.exception?.message], ["ZeroDivisionError", "division by zero"]);
    assert.match(e.exception!.traceback, /ZeroDivisionError/);
    const t = await s.exec("import time\nprint('waiting', flush=True)\ntime.sleep(30)", { timeout: 1 });
    assert.equal(t.status, "interrupted");
    assert.equal(t.error?.type, "timeout");
    assert.equal(t.stdout, "waiting\n");
    assert.equal((await s.exec("kept")).value, "'yes'");
  });

  test("a cell whose caller stopped waiting (signal) is interrupted; the state stays, the next cell runs", async () => {
    await using s = await Session.create({ client });
    await s.exec("x = 6");
    // printed inside the try: once we have it, the interrupt lands where it is caught
    const loop = "try:\n    print('started', flush=True)\n    while True:\n        pass\n" +
      "except KeyboardInterrupt:\n    cut = 'interrupted'\n    raise";
    const controller = new AbortController();
    const cell = s.exec(loop, { timeout: 30, signal: controller.signal, onStdout: () => controller.abort() });
    await assert.rejects(cell, { name: "AbortError" });
    assert.equal(s.ended, false);
    // cut by the interrupt (its own handler ran), not by its 30 s limit
    assert.equal((await s.exec("(x, cut)", { timeout: 5 })).value, "(6, 'interrupted')");
  });

  test("interrupt() stops the running cell: its result says cancelled, the state stays", async () => {
    await using s = await Session.create({ client });
    await s.exec("x = 7");
    let running!: () => void;
    const started = new Promise<void>((r) => (running = r));
    const cell = s.exec("print('started', flush=True)\nwhile True:\n    pass", { timeout: 30, onStdout: () => running() });
    await started;
    assert.equal(await s.interrupt(), true);
    const r = await cell;
    assert.equal(r.status, "interrupted");
    assert.equal(r.error?.type, "cancelled");
    assert.equal(r.exception?.type, "KeyboardInterrupt");
    assert.equal(await s.interrupt(), false);
    assert.equal((await s.exec("x")).value, "7");
  });

  test("JavaScript and Bash sessions keep theirs", async () => {
    {
      await using js = await Session.create({ client, language: "javascript" });
      await js.exec("let a = 2");
      assert.equal((await js.exec("a * 21")).value, "42");
    }
    await using sh = await Session.create({ client, language: "bash" });
    await sh.exec("cd /tmp; V=7");
    assert.equal((await sh.exec("echo $V $PWD")).stdout, "7 /tmp\n");
  });
});

describe("files", () => {
  test("written, read back, listed; a cell sees them; a missing file or a bad path is refused", async () => {
    await using s = await Session.create({ client, files: { "start.txt": "from the creation" } });
    assert.deepEqual(await s.writeFile("dir/a.txt", "hello"), { path: "dir/a.txt", size: 5 });
    await s.writeFile("bin.dat", new Uint8Array([0, 1, 255]));
    await s.writeFile("blob.txt", new Blob(["from a blob"]));
    assert.equal(Buffer.from(await s.readFile("dir/a.txt")).toString(), "hello");
    assert.deepEqual([...await s.readFile("bin.dat")], [0, 1, 255]);
    assert.deepEqual(await s.listFiles("dir"), [{ path: "dir/a.txt", type: "file", size: 5 }]);
    const names = (await s.listFiles()).map((f) => f.path);
    for (const name of ["bin.dat", "blob.txt", "dir", "start.txt"]) assert.ok(names.includes(name), names.join(", "));
    const r = await s.exec("print(open('start.txt').read(), open('blob.txt').read())\nopen('out.txt', 'w').write('made')");
    assert.equal(r.stdout, "from the creation from a blob\n");
    assert.equal(Buffer.from(await s.readFile("out.txt")).toString(), "made");
    await assert.rejects(s.readFile("nope"), (err: unknown) =>
      err instanceof SandboxRequestError && !(err instanceof SessionEndedError) && err.status === 404);
    await assert.rejects(s.readFile("../x"), (err: unknown) => err instanceof SandboxRequestError && err.status === 400);
    assert.equal(s.ended, false);
  });
});

describe("ending", () => {
  test("close() and await using DELETE the session: its id is gone, later calls throw SessionEndedError", async () => {
    let id: string;
    {
      await using s = await Session.create({ client });
      id = s.id;
      assert.equal((await rawRequest(svc.url, "GET", `/api/v1/sessions/${id}`)).status, 200);
    }
    assert.equal((await rawRequest(svc.url, "GET", `/api/v1/sessions/${id}`)).status, 404);
    const s = await Session.create({ client });
    await s.close();
    await s.close();
    await assert.rejects(s.exec("1"), (err: unknown) => err instanceof SessionEndedError && err.reason === "deleted");
  });

  test("idle past its timeout: ended by the service, with the reason", async () => {
    const s = await Session.create({ client, idleTimeout: 1 });
    const other = await Session.create({ client, idleTimeout: 1 });
    await waitFor(async () => (await s.info()).state === "ended", 60, "the idle session to end");
    assert.equal(s.last.endedReason, "idle_timeout");
    assert.equal(s.ended, true, "info() saying ended ends it here too");
    await assert.rejects(s.exec("1"), (err: unknown) => {
      assert.ok(err instanceof SessionEndedError, String(err));
      assert.equal(err.reason, "idle_timeout");
      assert.equal(err.sessionId, s.id);
      return true;
    });
    await s.close();
    // Asked without looking first: the service's 410 says it
    await waitFor(async () => (await rawRequest(svc.url, "GET", `/api/v1/sessions/${other.id}`)).text.includes('"ended"'),
      60, "the other idle session to end");
    await assert.rejects(other.exec("1"), (err: unknown) =>
      err instanceof SessionEndedError && err.status === 410 && err.reason === "idle_timeout");
    await other.close();
  });

  test("killed at its memory limit: the cell's result says so, then SessionEndedError", async () => {
    await using s = await Session.create({ client, memoryMb: 64 });
    const r = await s.exec("x = bytearray(200 * 1024 * 1024)");
    assert.equal(r.status, "session_ended");
    assert.equal(r.session?.endedReason, "memory_limit");
    assert.equal(s.ended, true);
    await assert.rejects(s.exec("1"), (err: unknown) => err instanceof SessionEndedError && err.reason === "memory_limit");
  });

  test("past MAX_SESSIONS: 429 with Retry-After", async () => {
    const held = [await Session.create({ client }), await Session.create({ client }), await Session.create({ client })];
    try {
      await assert.rejects(Session.create({ client }), (err: unknown) => {
        assert.ok(err instanceof SandboxOverloadedError, String(err));
        assert.match(err.message, /MAX_SESSIONS/);
        assert.ok(err.retryAfter !== null && err.retryAfter > 0);
        return true;
      });
    } finally {
      await Promise.all(held.map((s) => s.close()));
    }
    await (await Session.create({ client })).close();
  });
});
