/**
 * Sessions against a scripted service that keeps the routes of the sessions HTTP API
 * (POST /api/v1/sessions, .../exec as JSON or an event stream, the files routes,
 * DELETE): what is sent, what is decoded (value, valueData, outputs, exception,
 * status, files), SessionEndedError on a 410, on a 404 of the session, and at once on
 * every call after a cell the session ended with, `close()` and `await using`.
 */

import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";

import {
  CellResult,
  Client,
  type MimeBundle,
  SandboxInternalError,
  SandboxOverloadedError,
  SandboxRequestError,
  Session,
  SessionEndedError,
} from "../src/index.js";
import { errorDoc, json, type Scripted, scripted, type Seen, sse, startEvents } from "./scripted.js";

let svc: Scripted;

/** What the scripted service keeps of each session. */
interface Kept {
  files: Map<string, Buffer>;
  cells: number;
  ended: string | null;
}
let sessions: Map<string, Kept>;
/** The next cell's result (overrides), and whether it is streamed with these events first. */
let nextCell: Record<string, unknown> = {};
let nextEvents: string[] = [];

function sessionDoc(id: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const kept = sessions.get(id);
  return {
    id, language: "python", state: kept?.ended ? "ended" : "idle", created_at: "2026-12-01T15:00:00Z",
    expires_at: "2026-12-01T16:00:00Z", idle_expires_at: "2026-12-01T15:10:00Z", memory_mb: 512,
    cells: kept?.cells ?? 0, ended_reason: kept?.ended ?? null, ended_message: kept?.ended ? `ended: ${kept.ended}` : null,
    ...extra,
  };
}

function cellDoc(id: string, overrides: Record<string, unknown>): Record<string, unknown> {
  return {
    id: "c1", status: "ok", stdout: "", stderr: "", stdout_truncated: false, stderr_truncated: false,
    stdout_omitted_bytes: 0, stderr_omitted_bytes: 0, execution_time_ms: 3, value: null, value_data: null,
    outputs: [], exception: null, error: null, files: [], session: sessionDoc(id), ...overrides,
  };
}

// The sessions routes, as the design contract writes them.
async function routes(seen: Seen, res: import("node:http").ServerResponse): Promise<void> {
  const url = new URL(seen.path, "http://x");
  const m = /^\/api\/v1\/sessions(?:\/([^/]+)(\/exec|\/files(?:\/(.*))?)?)?$/.exec(url.pathname);
  if (!m) return json(res, errorDoc("not_found", "no such path"), 404);
  const [, id, tail, file] = m;
  if (!id) {
    if (seen.method !== "POST") return json(res, errorDoc("method_not_allowed", "no"), 405);
    const newId = `s${sessions.size + 1}`;
    sessions.set(newId, { files: new Map(), cells: 0, ended: null });
    return json(res, sessionDoc(newId), 201);
  }
  const kept = sessions.get(id);
  if (!kept) return json(res, errorDoc("session_not_found", `no session ${id}`), 404);
  if (kept.ended && seen.method !== "GET") {
    const doc = errorDoc("session_ended", `session ${id} ended: its idle timeout (${kept.ended})`);
    (doc["error"] as Record<string, unknown>)["reason"] = kept.ended;
    return json(res, doc, 410);
  }
  if (!tail) {
    if (seen.method === "DELETE") {
      sessions.delete(id);
      res.writeHead(204, { Connection: "close" });
      return void res.end();
    }
    return json(res, sessionDoc(id));
  }
  if (tail === "/exec") {
    kept.cells++;
    const doc = cellDoc(id, nextCell);
    if (doc["status"] === "session_ended") {
      kept.ended = "memory_limit";
      doc["session"] = sessionDoc(id);
    }
    if (String(seen.headers["accept"]).includes("text/event-stream")) {
      startEvents(res);
      for (const e of nextEvents) res.write(e);
      res.end(sse("result", doc));
      return;
    }
    return json(res, doc);
  }
  const path = decodeURIComponent(file ?? "");
  if (seen.method === "PUT") {
    kept.files.set(path, seen.body);
    return json(res, { path, size: seen.body.length }, 201);
  }
  if (file === undefined) {
    const dir = url.searchParams.get("path") ?? "";
    const files = [...kept.files].filter(([p]) => p.startsWith(dir)).map(([p, b]) => ({ path: p, type: "file", size: b.length }));
    return json(res, { files });
  }
  const content = kept.files.get(path);
  if (!content) return json(res, errorDoc("invalid_request", `path: ${path} does not exist`), 404);
  res.writeHead(200, { "Content-Type": "application/octet-stream", "Content-Length": content.length, Connection: "close" });
  res.end(content);
}

before(async () => {
  svc = await scripted(routes);
});

after(async () => {
  await svc.stop();
});

beforeEach(() => {
  sessions = new Map();
  nextCell = {};
  nextEvents = [];
  svc.seen.length = 0;
  svc.handle = routes;
});

const client = () => new Client({ url: svc.url, retries: 0 });
const body = (s: Seen) => JSON.parse(s.body.toString("utf8")) as Record<string, unknown>;

describe("creating", () => {
  test("POST /api/v1/sessions with the options in their wire names; 201 gives the session", async () => {
    const s = await Session.create({
      client: client(), language: "python", memoryMb: 256, envVars: new Map([["A", "1"]]), packages: new Set(["numpy"]),
      idleTimeout: 60, lifetime: 600, files: { "data.csv": "a\n1\n" },
    });
    assert.equal(s.id, "s1");
    assert.equal(s.language, "python");
    assert.equal(s.last.state, "idle");
    assert.equal(s.last.idleExpiresAt, "2026-12-01T15:10:00Z");
    assert.equal(s.ended, false);
    const [seen] = svc.seen;
    assert.equal(seen!.method, "POST");
    assert.equal(seen!.path, "/api/v1/sessions");
    assert.deepEqual(body(seen!), {
      language: "python", memory_mb: 256, env_vars: { A: "1" }, packages: ["numpy"], idle_timeout: 60, lifetime: 600,
      files: [{ path: "data.csv", content: "a\n1\n", encoding: "utf-8" }],
    });
  });

  test("the creation is JSON: a Blob's content goes inline too", async () => {
    await Session.create({ client: client(), files: [["b.bin", new Blob([new Uint8Array([0, 255])])]] });
    const [seen] = svc.seen;
    assert.equal(seen!.headers["content-type"], "application/json");
    assert.deepEqual(body(seen!)["files"], [{ path: "b.bin", content: "AP8=", encoding: "base64" }]);
  });

  test("an unknown option is a TypeError and nothing is sent", async () => {
    // @ts-expect-error: not an option
    await assert.rejects(Session.create({ client: client(), idle_timeout: 5 }), /unknown option "idle_timeout"/);
    assert.equal(svc.seen.length, 0);
  });

  test("past the session limits: 429 is SandboxOverloadedError, retried when Retry-After says so", async () => {
    let refusals = 1;
    svc.handle = (seen, res) => {
      if (seen.method === "POST" && refusals-- > 0) {
        res.setHeader("Retry-After", "0");
        return json(res, errorDoc("overloaded", "MAX_SESSIONS (4) sessions are live"), 429);
      }
      return routes(seen, res);
    };
    const s = await Session.create({ client: new Client({ url: svc.url, retries: 1 }) });
    assert.equal(s.id, "s1");
    refusals = 5;
    await assert.rejects(Session.create({ client: client() }), (err: unknown) => {
      assert.ok(err instanceof SandboxOverloadedError);
      assert.equal(err.retryAfter, 0);
      assert.match(err.message, /MAX_SESSIONS/);
      return true;
    });
  });

  test("a refused field is a SandboxRequestError with the service's message", async () => {
    svc.handle = (_seen, res) => json(res, errorDoc("invalid_request", "idle_timeout: 99999 exceeds the maximum (3600)"), 400);
    await assert.rejects(Session.create({ client: client(), idleTimeout: 99999 }), SandboxRequestError);
  });

  test("a reply without an id is a bad_response", async () => {
    svc.handle = (_seen, res) => json(res, { language: "python" }, 201);
    await assert.rejects(Session.create({ client: client() }), (err: unknown) =>
      err instanceof SandboxInternalError && err.code === "bad_response");
  });
});

describe("cells", () => {
  test("value, valueData, outputs, exception and status are decoded", async () => {
    const s = await Session.create({ client: client() });
    nextCell = {
      stdout: "hi\n", value: "42", value_data: { "text/plain": "42", "application/json": 42 },
      outputs: [{ type: "display", data: { "image/png": "iVBORw0KGgo=" } }],
      files: [{ path: "output/figure-1.png", size: 3, mime: "image/png", encoding: "base64", content: "AAEC", truncated: false }],
    };
    const r = await s.exec("x + 1", { timeout: 5, returnFiles: "*.csv", files: { "in.txt": "t" } });
    assert.ok(r instanceof CellResult);
    assert.equal(r.status, "ok");
    assert.equal(r.ok, true);
    assert.equal(r.value, "42");
    assert.deepEqual(r.valueData, { "text/plain": "42", "application/json": 42 });
    assert.deepEqual(r.outputs, [{ type: "display", data: { "image/png": "iVBORw0KGgo=" } }]);
    assert.equal(r.exception, null);
    assert.equal(r.output, "hi\n");
    assert.deepEqual([...r.files.get("output/figure-1.png")!], [0, 1, 2]);
    assert.equal(r.session?.cells, 1);
    assert.equal(s.last.cells, 1);
    assert.equal(r.png, null);
    // toJSON is the service's shape (without the session): decoded again, the same result
    const again = CellResult.fromResponse(JSON.parse(JSON.stringify(r)));
    assert.deepEqual({ ...again, session: null }, { ...r, session: null });
    assert.deepEqual([...again.files.get("output/figure-1.png")!], [0, 1, 2]);
    assert.equal(JSON.parse(JSON.stringify(r))["exit_code"], undefined);
    const fig = CellResult.fromResponse({ status: "ok", value: "<Figure>", value_data: { "image/png": "AAEC" } });
    assert.deepEqual([...fig.png!], [0, 1, 2]);
    const seen = svc.seen.at(-1)!;
    assert.equal(seen.path, "/api/v1/sessions/s1/exec");
    assert.deepEqual(body(seen), {
      code: "x + 1", timeout: 5, return_files: ["*.csv"], files: [{ path: "in.txt", content: "t", encoding: "utf-8" }],
    });
  });

  test("a cell that raises is a result with its exception", async () => {
    const s = await Session.create({ client: client() });
    nextCell = {
      status: "exception", stderr: "Traceback ...",
      exception: { type: "ZeroDivisionError", message: "division by zero", traceback: "Traceback ...\nZeroDivisionError: division by zero" },
    };
    const r = await s.exec("1/0");
    assert.equal(r.ok, false);
    assert.equal(r.status, "exception");
    assert.equal(r.exception?.type, "ZeroDivisionError");
    assert.equal(r.exception?.message, "division by zero");
    assert.equal(s.ended, false);
  });

  test("callbacks stream the cell: output, displays, then the result", async () => {
    const s = await Session.create({ client: client() });
    nextEvents = [
      sse("stdout", { text: "one\n" }), sse("display", { id: "c1", data: { "text/plain": "<Figure>", "image/png": "AA==" } }),
      sse("stderr", { text: "warn\n" }), sse("stdout", { base64: Buffer.from([0xff, 0x41]).toString("base64") }),
      sse("file", { path: "output/a.txt", size: 1, mime: "text/plain", encoding: "utf-8", content: "a", truncated: false }),
      sse("some_future_event", { x: 1 }),
    ];
    nextCell = { stdout: "one\n\ufffdA", stderr: "warn\n" };
    const got: [string, unknown][] = [];
    const r = await s.exec("plot()", {
      onStdout: (t) => void got.push(["out", t]),
      onStderr: (t) => void got.push(["err", t]),
      onDisplay: async (d: MimeBundle) => {
        await new Promise((resolve) => setTimeout(resolve, 5));
        got.push(["display", d["text/plain"]]);
      },
    });
    assert.deepEqual(got, [["out", "one\n"], ["display", "<Figure>"], ["err", "warn\n"], ["out", "\ufffdA"]]);
    assert.equal(r.stdout, "one\n\ufffdA");
    assert.equal(svc.seen.at(-1)!.headers["accept"], "text/event-stream");
  });

  test("a service that answers JSON to a streamed cell gives the same callbacks at the end", async () => {
    const s = await Session.create({ client: client() });
    svc.handle = (seen, res) => {
      if (seen.path.endsWith("/exec")) return json(res, cellDoc("s1", { stdout: "x\n", outputs: [{ type: "display", data: { "text/plain": "d" } }] }));
      return routes(seen, res);
    };
    const got: string[] = [];
    await s.exec("x", { onStdout: (t) => void got.push(t), onDisplay: (d) => void got.push(String(d["text/plain"])) });
    assert.deepEqual(got, ["x\n", "d"]);
  });

  test("a malformed cell result is a bad_response", async () => {
    const s = await Session.create({ client: client() });
    nextCell = { status: 7 };
    await assert.rejects(s.exec("x"), (err: unknown) => err instanceof SandboxInternalError && err.code === "bad_response");
    nextCell = { outputs: "no" };
    await assert.rejects(s.exec("x"), SandboxInternalError);
  });

  test("code and callbacks are checked before anything is sent", async () => {
    const s = await Session.create({ client: client() });
    const n = svc.seen.length;
    // @ts-expect-error: code must be a string
    await assert.rejects(s.exec(42), TypeError);
    // @ts-expect-error: a callback must be a function
    await assert.rejects(s.exec("x", { onDisplay: 1 }), TypeError);
    // @ts-expect-error: not an option of a cell
    await assert.rejects(s.exec("x", { language: "bash" }), /unknown option "language"/);
    assert.equal(svc.seen.length, n);
  });
});

describe("files", () => {
  test("writeFile PUTs the raw bytes at the encoded path; readFile and listFiles read them back", async () => {
    const s = await Session.create({ client: client() });
    assert.deepEqual(await s.writeFile("dir one/a#b.txt", "hello"), { path: "dir one/a#b.txt", size: 5 });
    const put = svc.seen.at(-1)!;
    assert.equal(put.method, "PUT");
    assert.equal(put.path, "/api/v1/sessions/s1/files/dir%20one/a%23b.txt");
    assert.equal(put.headers["content-type"], "application/octet-stream");
    assert.equal(put.body.toString(), "hello");
    await s.writeFile("bin.dat", new Uint8Array([0, 1, 255]));
    await s.writeFile("blob.txt", new Blob(["from a blob"]));
    assert.deepEqual([...await s.readFile("bin.dat")], [0, 1, 255]);
    assert.equal(Buffer.from(await s.readFile("blob.txt")).toString(), "from a blob");
    assert.equal(Buffer.from(await s.readFile("dir one/a#b.txt")).toString(), "hello");
    assert.deepEqual(await s.listFiles(), [
      { path: "dir one/a#b.txt", type: "file", size: 5 }, { path: "bin.dat", type: "file", size: 3 },
      { path: "blob.txt", type: "file", size: 11 },
    ]);
    assert.deepEqual((await s.listFiles("dir one")).map((f) => f.path), ["dir one/a#b.txt"]);
    assert.equal(svc.seen.at(-1)!.path, "/api/v1/sessions/s1/files?path=dir%20one");
  });

  test("a missing file is the service's error; a bad path or content is a TypeError", async () => {
    const s = await Session.create({ client: client() });
    await assert.rejects(s.readFile("nope"), (err: unknown) => err instanceof SandboxRequestError && err.status === 404);
    assert.equal(s.ended, false);
    await assert.rejects(s.readFile(""), TypeError);
    // @ts-expect-error: content must be text, bytes or a Blob
    await assert.rejects(s.writeFile("x", 5), TypeError);
  });
});

describe("ending", () => {
  test("a 410 is SessionEndedError, and every later call throws it without a request", async () => {
    const s = await Session.create({ client: client() });
    sessions.get("s1")!.ended = "idle_timeout";
    await assert.rejects(s.exec("x"), (err: unknown) => {
      assert.ok(err instanceof SessionEndedError);
      assert.equal(err.status, 410);
      assert.equal(err.code, "session_ended");
      assert.equal(err.reason, "idle_timeout");
      assert.equal(err.sessionId, "s1");
      assert.match(err.message, /idle timeout/);
      return true;
    });
    assert.equal(s.ended, true);
    const n = svc.seen.length;
    await assert.rejects(s.exec("x"), SessionEndedError);
    await assert.rejects(s.writeFile("a", "b"), SessionEndedError);
    await assert.rejects(s.readFile("a"), SessionEndedError);
    await assert.rejects(s.listFiles(), SessionEndedError);
    assert.equal(svc.seen.length, n);
    await s.close(); // already over: nothing to do
    assert.equal(svc.seen.length, n);
  });

  test("a cell the session ended with is a result; every later call throws SessionEndedError with the reason", async () => {
    const s = await Session.create({ client: client() });
    nextCell = {
      status: "session_ended", stdout: "allocating\n",
      error: { type: "session_ended", message: "the session's memory limit (512 MiB) was reached" },
    };
    const r = await s.exec("x = bytearray(1 << 40)");
    assert.equal(r.status, "session_ended");
    assert.equal(r.ok, false);
    assert.equal(r.stdout, "allocating\n");
    assert.equal(s.ended, true);
    assert.equal(s.last.state, "ended");
    const n = svc.seen.length;
    await assert.rejects(s.exec("1"), (err: unknown) => {
      assert.ok(err instanceof SessionEndedError);
      assert.ok(err instanceof SandboxRequestError, "a SandboxRequestError, as in the Python SDK");
      assert.equal(err.reason, "memory_limit");
      assert.equal(err.sessionId, "s1");
      assert.equal(err.message, "session s1 has ended: the session's memory limit (512 MiB) was reached");
      return true;
    });
    assert.equal(svc.seen.length, n);
  });

  test("a 404 of the session (forgotten) ends it; a 404 of a file does not", async () => {
    const s = await Session.create({ client: client() });
    await assert.rejects(s.readFile("nope"), (err: unknown) => err instanceof SandboxRequestError && !(err instanceof SessionEndedError));
    assert.equal(s.ended, false);
    sessions.delete("s1");
    await assert.rejects(s.exec("1"), (err: unknown) =>
      err instanceof SessionEndedError && err.status === 404 && err.sessionId === "s1");
    assert.equal(s.ended, true);
    await assert.rejects(s.info(), SessionEndedError);
  });

  test("close() DELETEs once; later calls throw SessionEndedError", async () => {
    const s = await Session.create({ client: client() });
    await s.close();
    await s.close();
    assert.deepEqual(svc.seen.filter((x) => x.method === "DELETE").map((x) => x.path), ["/api/v1/sessions/s1"]);
    await assert.rejects(s.exec("1"), (err: unknown) => err instanceof SessionEndedError && err.reason === "deleted");
    assert.equal(sessions.size, 0);
  });

  test("close() of a session the service forgot (404) is done", async () => {
    const s = await Session.create({ client: client() });
    sessions.delete("s1");
    await s.close();
    assert.equal(s.ended, true);
  });

  test("await using closes the session at the end of the block, even when it throws", async () => {
    {
      await using s = await Session.create({ client: client() });
      assert.equal((await s.exec("1")).status, "ok");
    }
    assert.equal(sessions.size, 0);
    await assert.rejects(async () => {
      await using s = await Session.create({ client: client() });
      assert.equal(s.id, "s1");
      throw new Error("boom");
    }, /boom/);
    assert.equal(sessions.size, 0);
    assert.equal(svc.seen.filter((x) => x.method === "DELETE").length, 2);
  });

  test("the service's words: a 410's reason from its message, a files route's 404 for the session", async () => {
    const s = await Session.create({ client: client() });
    svc.handle = (_seen, res) => json(res, errorDoc("session_ended", "the session has ended (lifetime): it lived 3600 s"), 410);
    await assert.rejects(s.readFile("a"), (err: unknown) => err instanceof SessionEndedError && err.reason === "lifetime");
    svc.handle = routes;
    const t = await Session.create({ client: client() });
    svc.handle = (_seen, res) => json(res, errorDoc("session_not_found", "no session with this id for this caller"), 404);
    await assert.rejects(t.readFile("a"), (err: unknown) => err instanceof SessionEndedError && err.status === 404);
    assert.equal(t.ended, true);
  });

  test("codes, not words: a missing file is not_found whatever it says; a 410's reason is its own field", async () => {
    const s = await Session.create({ client: client() });
    svc.handle = (_seen, res) => json(res, errorDoc("not_found", "no session file named a"), 404);
    await assert.rejects(s.readFile("a"), (err: unknown) =>
      err instanceof SandboxRequestError && !(err instanceof SessionEndedError) && err.code === "not_found");
    assert.equal(s.ended, false);
    svc.handle = (_seen, res) => json(res, { error: { code: "session_ended", message: "the session has ended (lifetime): words",
      reason: "idle_timeout" } }, 410);
    await assert.rejects(s.exec("1"), (err: unknown) => err instanceof SessionEndedError && err.reason === "idle_timeout");
    svc.handle = routes;
  });

  test("info() asks the service; an ended session it shows ends the object too", async () => {
    const s = await Session.create({ client: client() });
    sessions.get("s1")!.cells = 3;
    const info = await s.info();
    assert.equal(info.cells, 3);
    assert.equal(s.last.cells, 3);
    assert.equal(svc.seen.at(-1)!.method, "GET");
    sessions.get("s1")!.ended = "lifetime";
    assert.equal((await s.info()).state, "ended");
    assert.equal(s.ended, true);
    await assert.rejects(s.exec("1"), (err: unknown) =>
      err instanceof SessionEndedError && err.reason === "lifetime" && err.message === "session s1 has ended: ended: lifetime");
  });
});

describe("errors by status", () => {
  test("the Python SDK's class for each status; 410 is SessionEndedError", async () => {
    const { errorFromResponse } = await import("../src/reply.js");
    const { parseUrl } = await import("../src/address.js");
    const hexr = await import("../src/index.js");
    const address = parseUrl("http://127.0.0.1:1");
    const expected: [number, Function][] = [
      [400, hexr.SandboxRequestError], [403, hexr.SandboxRequestError], [404, hexr.SandboxRequestError],
      [413, hexr.SandboxRequestError], [415, hexr.SandboxRequestError], [422, hexr.SandboxRequestError],
      [410, SessionEndedError], [429, SandboxOverloadedError], [500, SandboxInternalError], [501, SandboxInternalError],
      [502, hexr.SandboxUnavailableError], [503, hexr.SandboxUnavailableError], [504, hexr.SandboxUnavailableError],
    ];
    for (const [status, cls] of expected) {
      const err = errorFromResponse(address, {
        status, reason: "", headers: {}, body: Buffer.from(JSON.stringify(errorDoc("some_code", "why"))),
      });
      assert.equal(err.constructor, cls, `status ${status}`);
      assert.ok(err instanceof hexr.SandboxError);
      assert.equal(err.status, status);
      assert.equal(err.message, "why");
    }
  });

  test("an error event with code session_ended in a streamed cell is SessionEndedError", async () => {
    const s = await Session.create({ client: client() });
    svc.handle = (seen, res) => {
      if (!seen.path.endsWith("/exec")) return routes(seen, res);
      startEvents(res);
      res.write(sse("stdout", { text: "a\n" }));
      res.end(sse("error", errorDoc("session_ended", "the session crashed")));
      return undefined;
    };
    await assert.rejects(s.exec("x", { onStdout: () => undefined }), (err: unknown) =>
      err instanceof SessionEndedError && err.status === 410 && err.message === "the session crashed");
    assert.equal(s.ended, true);
  });
});
