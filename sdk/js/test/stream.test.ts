/**
 * Streamed executions against a scripted service (issue 14): the SSE parser (lines
 * split across reads, CR/LF/CRLF, comments as heartbeats, multi-line data), the events
 * (text and base64 chunks, files, the result, an error event thrown as the error its
 * HTTP status would give), `onStdout` / `onStderr`, `stream()`, the JSON answer of a
 * service that does not stream, and retries: a stream is opened again after a 503,
 * never once the service began it.
 */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import * as hexr from "../src/index.js";
import {
  Client,
  ExecResult,
  SandboxInternalError,
  SandboxOverloadedError,
  SandboxRequestError,
  SandboxUnavailableError,
  type StreamEvent,
  URL_ENV,
} from "../src/index.js";
import { type RawEvent, SseParser } from "../src/sse.js";
import { closedWithin, errorDoc, json, resultDoc, type Handler, type Scripted, scripted, sse, startEvents } from "./scripted.js";

let svc: Scripted;

before(async () => {
  svc = await scripted((_seen, res) => json(res, resultDoc()));
});

after(async () => {
  await svc.stop();
});

const RESULT = resultDoc({ stdout: "one\ntwo\n", stderr: "warn\n" });
const EVENTS = [
  sse("stdout", { text: "one\n" }),
  ": keep-alive\n\n",
  sse("stderr", { text: "warn\n" }),
  sse("stdout", { text: "two\n" }),
  sse("result", RESULT),
];

/** Writes `pieces` as an event stream, one write each; a function piece is awaited. */
function streamOf(pieces: (string | (() => Promise<void>))[]): Handler {
  return async (_seen, res) => {
    startEvents(res);
    for (const piece of pieces) {
      if (typeof piece === "function") await piece();
      else res.write(piece);
    }
    res.end();
  };
}

async function withHandler<T>(handler: Handler, fn: () => Promise<T>): Promise<T> {
  svc.handle = handler;
  try {
    return await fn();
  } finally {
    svc.handle = (_seen, res) => json(res, resultDoc());
  }
}

async function collect(client: Client, code = "x"): Promise<{ result: ExecResult; got: [string, string][] }> {
  const got: [string, string][] = [];
  const result = await client.exec(code, {
    onStdout: (t) => void got.push(["out", t]),
    onStderr: (t) => void got.push(["err", t]),
  });
  return { result, got };
}

const noRetries = () => new Client({ url: svc.url, retries: 0 });
const retrying = () => new Client({ url: svc.url, retries: 2, retryBackoff: 0.01 });

describe("parser", () => {
  const STREAM = Buffer.from(": hello\r\n\r\nevent: stdout\r\ndata: {\"text\": \"a\"}\r\n\r\n" +
    "event: multi\rdata: one\rdata:two\r\rdata: plain\n\n" +
    "event: no-data\n\n: keep-alive\n\nevent: stderr\nid: 7\nretry: 10\ndata: {\"text\": \"é\"}\n\n", "utf8");
  const PARSED: RawEvent[] = [
    { type: "stdout", data: '{"text": "a"}' },
    { type: "multi", data: "one\ntwo" },
    { type: "message", data: "plain" },
    { type: "stderr", data: '{"text": "é"}' },
  ];

  test("the same events whatever the reads", () => {
    for (const step of [1, 2, 3, 5, 7, 64, 100000]) {
      const parser = new SseParser();
      const events: RawEvent[] = [];
      for (let i = 0; i < STREAM.length; i += step) events.push(...parser.feed(STREAM.subarray(i, i + step)));
      assert.deepEqual(events, PARSED, `step ${step}`);
      assert.equal(parser.comments, 2);
    }
  });

  test("a CR at the end of a read may start a CRLF", () => {
    const parser = new SseParser();
    assert.deepEqual(parser.feed(Buffer.from("data: x\r")), []);
    assert.deepEqual(parser.feed(Buffer.from("\n")), []);
    assert.deepEqual(parser.feed(Buffer.from("\r\n")), [{ type: "message", data: "x" }]);
  });

  test("an event is bounded; a large one in many reads is whole", () => {
    const small = new SseParser(100);
    small.feed(Buffer.from("data: " + "x".repeat(50) + "\n"));
    assert.throws(() => small.feed(Buffer.from("data: " + "x".repeat(60))));
    const payload = "y".repeat(3 << 20);
    const data = Buffer.from(`event: result\ndata: ${payload}\n\n`);
    const parser = new SseParser();
    const events: RawEvent[] = [];
    for (let i = 0; i < data.length; i += 65536) events.push(...parser.feed(data.subarray(i, i + 65536)));
    assert.deepEqual(events, [{ type: "result", data: payload }]);
  });
});

describe("callbacks", () => {
  test("they get the chunks in order; the request asks for events", async () => {
    const { result, got } = await withHandler(streamOf(EVENTS), () => collect(noRetries()));
    assert.deepEqual(got, [["out", "one\n"], ["err", "warn\n"], ["out", "two\n"]]);
    assert.deepEqual(result, ExecResult.fromResponse(RESULT));
    const seen = svc.seen[svc.seen.length - 1]!;
    assert.equal(seen.headers["accept"], "text/event-stream");
    assert.deepEqual(JSON.parse(seen.body.toString()), { code: "x", language: "python" });
  });

  test("chunks arrive before the program ends", async () => {
    let release!: () => void;
    const seenFirst = new Promise<void>((r) => (release = r));
    let waited: boolean | undefined;
    const gate = async () => {
      waited = await Promise.race([seenFirst.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 5000))]);
    };
    const result = await withHandler(streamOf([sse("stdout", { text: "early\n" }), gate, sse("result", RESULT)]),
      () => noRetries().exec("x", { onStdout: () => release() }));
    assert.equal(waited, true);
    assert.equal(result.exitCode, 0);
  });

  test("a returned promise is awaited before the next chunk", async () => {
    const got: string[] = [];
    await withHandler(streamOf(EVENTS), () => noRetries().exec("x", {
      onStdout: async (t) => {
        await new Promise((r) => setTimeout(r, 10));
        got.push(t);
      },
    }));
    assert.deepEqual(got, ["one\n", "two\n"]);
  });

  test("base64 chunks are decoded; chunked framing works", async () => {
    const raw = Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x20, 0xff, 0x0a]);
    const blob = sse("stdout", { base64: raw.toString("base64") }) + sse("result", RESULT);
    const chunked: Handler = async (_seen, res) => {
      res.writeHead(200, { "Content-Type": "text/event-stream" }); // node frames it chunked
      for (let i = 0; i < blob.length; i += 9) {
        res.write(blob.slice(i, i + 9));
        await new Promise((r) => setImmediate(r));
      }
      res.end();
    };
    const { got } = await withHandler(chunked, () => collect(noRetries()));
    assert.deepEqual(got, [["out", raw.toString("utf8")]]);
  });

  test("a callback that throws ends the execution", async () => {
    let closed: Promise<boolean> | undefined;
    const handler: Handler = (_seen, res, req) => {
      startEvents(res);
      res.write(sse("stdout", { text: "a" }));
      closed = closedWithin(req, res, 5000);
    };
    await withHandler(handler, () => assert.rejects(noRetries().exec("x", {
      onStdout: () => {
        throw new RangeError("stop");
      },
    }), RangeError));
    assert.equal(await closed, true);
  });
});

describe("errors", () => {
  const cases: [Record<string, unknown>, new (...a: never[]) => Error, number][] = [
    [errorDoc("draining", "shutting down"), SandboxUnavailableError, 503],
    [errorDoc("too_large", "output too large"), SandboxRequestError, 413],
    [errorDoc("internal", "the sandbox failed"), SandboxInternalError, 500],
    [errorDoc("whatever", "new code"), SandboxInternalError, 500],
    [{ ...errorDoc("x", "explicit status"), status: 429 }, SandboxOverloadedError, 429],
  ];
  for (const [doc, cls, status] of cases) {
    test(`an error event ${JSON.stringify(doc)} is the ${status} error, and is never retried`, async () => {
      const before = svc.seen.length;
      await withHandler(streamOf([sse("stdout", { text: "a" }), sse("error", doc)]), () =>
        assert.rejects(collect(retrying()), (err: unknown) => {
          assert.ok(err instanceof cls, String(err));
          const e = err as SandboxUnavailableError;
          const inner = doc["error"] as { code: string; message: string };
          assert.equal(e.status, status);
          assert.equal(e.code, inner.code);
          assert.equal(e.message, inner.message);
          return true;
        }));
      assert.equal(svc.seen.length - before, 1);
    });
  }

  test("an error event before any output is not retried either", async () => {
    const before = svc.seen.length;
    await withHandler(streamOf([sse("error", errorDoc("draining", "d"))]), () =>
      assert.rejects(collect(retrying()), SandboxUnavailableError));
    assert.equal(svc.seen.length - before, 1);
  });

  test("a 503 before the stream is retried", async () => {
    let n = 0;
    const stream = streamOf(EVENTS);
    const handler: Handler = (seen, res, req) =>
      n++ === 0 ? json(res, errorDoc("draining", "d"), 503) : stream(seen, res, req);
    const before = svc.seen.length;
    const { result, got } = await withHandler(handler, () => collect(retrying()));
    assert.equal(svc.seen.length - before, 2);
    assert.equal(result.stdout, "one\ntwo\n");
    assert.equal(got.length, 3);
  });

  test("a refusal before the stream is its status's error", async () => {
    await withHandler((_s, res) => json(res, errorDoc("invalid_request", "files[0].path: must be relative"), 400), () =>
      assert.rejects(collect(noRetries()), (err: unknown) => err instanceof SandboxRequestError && /files\[0\]/.test(err.message)));
  });

  test("a stream that ends without its result", async () => {
    for (const pieces of [[sse("stdout", { text: "a" })], [sse("stdout", { text: "a" }), 'event: result\ndata: {"exit']]) {
      const before = svc.seen.length;
      await withHandler(streamOf(pieces), () => assert.rejects(collect(retrying()),
        (err: unknown) => err instanceof SandboxUnavailableError && err.code === "connection_closed"));
      assert.equal(svc.seen.length - before, 1);
    }
  });

  test("unusable events are SandboxInternalErrors; unknown ones are ignored", async () => {
    for (const piece of [
      "event: stdout\ndata: not json\n\n", sse("stdout", { nothing: 1 }), sse("stdout", { base64: "!!" }),
      sse("result", { stdout: "no exit code" }), sse("file", { size: 3 }),
    ]) {
      await withHandler(streamOf([piece, sse("result", RESULT)]), () => assert.rejects(collect(noRetries()),
        (err: unknown) => err instanceof SandboxInternalError && err.code === "bad_response", piece));
    }
    const { got } = await withHandler(streamOf([sse("progress", { pct: 5 }), "data: {}\n\n", ...EVENTS]),
      () => collect(noRetries()));
    assert.equal(got.length, 3);
  });
});

const FILE = { path: "output/a.txt", size: 2, mime: "text/plain", encoding: "utf-8", content: "hi", truncated: false };

async function all(iter: AsyncIterable<StreamEvent>): Promise<StreamEvent[]> {
  const out: StreamEvent[] = [];
  for await (const event of iter) out.push(event);
  return out;
}

describe("stream()", () => {
  test("every event, then the result", async () => {
    const withFile = { ...RESULT, files: [FILE] };
    const events = await withHandler(streamOf([
      sse("stdout", { text: "one\n" }), sse("file", FILE), sse("stderr", { base64: Buffer.from([0xff]).toString("base64") }),
      sse("result", withFile),
    ]), () => all(noRetries().stream("x", { stdin: "in", files: { a: "b" } })));
    assert.deepEqual(events.map((e) => e.type), ["stdout", "file", "stderr", "result"]);
    const [out, file, err, res] = events;
    assert.ok(out?.type === "stdout" && out.text === "one\n" && Buffer.from(out.data).toString() === "one\n");
    assert.ok(file?.type === "file" && file.file.path === "output/a.txt" && Buffer.from(file.data).toString() === "hi");
    assert.ok(err?.type === "stderr" && err.text === "\ufffd" && err.data[0] === 0xff);
    assert.ok(res?.type === "result");
    assert.deepEqual(res.result, ExecResult.fromResponse(withFile));
    const body = JSON.parse(svc.seen[svc.seen.length - 1]!.body.toString());
    assert.equal(body.stdin, "in");
    assert.deepEqual(body.files, [{ path: "a", content: "b", encoding: "utf-8" }]);
  });

  test("a service that answers JSON gives the same events at the end", async () => {
    const events = await withHandler((_s, res) => json(res, { ...RESULT, files: [FILE] }), () => all(noRetries().stream("x")));
    assert.deepEqual(events.map((e) => e.type), ["stdout", "stderr", "file", "result"]);
    const { got, result } = await withHandler((_s, res) => json(res, RESULT), () => collect(noRetries()));
    assert.deepEqual(got, [["out", "one\ntwo\n"], ["err", "warn\n"]]);
    assert.deepEqual(result, ExecResult.fromResponse(RESULT));
  });

  test("leaving the loop early closes the connection", async () => {
    let closed: Promise<boolean> | undefined;
    const handler: Handler = (_seen, res, req) => {
      startEvents(res);
      res.write(sse("stdout", { text: "a" }));
      closed = closedWithin(req, res, 5000);
    };
    await withHandler(handler, async () => {
      for await (const event of noRetries().stream("x")) {
        assert.equal(event.type, "stdout");
        break;
      }
    });
    assert.equal(await closed, true);
  });

  test("its arguments are checked at once; the module-level one reads the environment", async () => {
    const before = svc.seen.length;
    assert.throws(() => hexr.stream(5 as never), TypeError);
    assert.throws(() => hexr.stream("x", { files: 5 as never }), TypeError);
    assert.throws(() => hexr.stream("x", { onStdout: () => 1 } as never), TypeError);
    assert.equal(svc.seen.length, before);
    const saved = process.env[URL_ENV];
    process.env[URL_ENV] = svc.url;
    try {
      const events = await withHandler(streamOf(EVENTS), () => all(hexr.stream("x")));
      assert.deepEqual(events.map((e) => e.type), ["stdout", "stderr", "stdout", "result"]);
    } finally {
      if (saved === undefined) delete process.env[URL_ENV];
      else process.env[URL_ENV] = saved;
    }
  });
});
