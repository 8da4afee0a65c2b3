/**
 * Files in and out against a scripted service (issue 14): `files` inline in the JSON
 * request (text as utf-8, bytes as base64) or multipart when a Blob is given or the
 * files are large, Blobs streamed (memory stays far below the file's size) and sent
 * again on a retry; `returnFiles` and `stdin`; the result's `files` decoded, their
 * metadata, `error` and the omitted-byte counts.
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, openAsBlob, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { ReadableStream } from "node:stream/web";

import { Client, ExecResult, SandboxInternalError, SandboxRequestError } from "../src/index.js";
import { errorDoc, json, parseMultipart, resultDoc, type Scripted, scripted } from "./scripted.js";

let svc: Scripted;
let dir: string;

before(async () => {
  svc = await scripted((_seen, res) => json(res, resultDoc()));
  dir = mkdtempSync(join(tmpdir(), "hxs-js-files-"));
});

after(async () => {
  await svc.stop();
  rmSync(dir, { recursive: true, force: true });
});

const client = () => new Client({ url: svc.url, retries: 0 });
const last = () => svc.seen[svc.seen.length - 1]!;
const lastJson = () => JSON.parse(last().body.toString("utf8")) as Record<string, unknown>;

describe("files in", () => {
  test("small files go inline: text as utf-8, bytes as base64", async () => {
    await client().exec("x", { files: { "data.csv": "a,b\n1,2\n", "bin/x.bin": new Uint8Array([0, 255, 128]) } });
    assert.equal(last().headers["content-type"], "application/json");
    assert.deepEqual(lastJson(), {
      code: "x", language: "python",
      files: [
        { path: "data.csv", content: "a,b\n1,2\n", encoding: "utf-8" },
        { path: "bin/x.bin", content: Buffer.from([0, 255, 128]).toString("base64"), encoding: "base64" },
      ],
    });
  });

  test("a Map or pairs keep their order; duplicates are the service's to judge", async () => {
    await client().exec("x", { files: new Map([["b", "1"], ["a", "2"]]) });
    assert.deepEqual((lastJson()["files"] as { path: string }[]).map((f) => f.path), ["b", "a"]);
    svc.handle = (_s, res) => json(res, errorDoc("invalid_request", "files[1].path: collides with files[0]"), 400);
    try {
      await assert.rejects(client().exec("x", { files: [["a", "1"], ["a", Buffer.from("2")]] }),
        (err: unknown) => err instanceof SandboxRequestError && /files\[1\]\.path/.test(err.message));
    } finally {
      svc.handle = (_s, res) => json(res, resultDoc());
    }
  });

  test("returnFiles and stdin are sent as given", async () => {
    await client().exec("x", { returnFiles: new Set(["*.csv", "out/**"]), stdin: "line\n" });
    assert.deepEqual(lastJson(), { code: "x", language: "python", stdin: "line\n", return_files: ["*.csv", "out/**"] });
    await client().exec("x", { returnFiles: "*.png", files: {} });
    assert.deepEqual(lastJson(), { code: "x", language: "python", return_files: ["*.png"], files: [] });
  });

  test("wrong shapes are TypeErrors and nothing is sent", async () => {
    const before = svc.seen.length;
    for (const files of [5, "a.txt", [["a.txt"]], { "a.txt": 3 }, [[5, "x"]], { a: null }]) {
      await assert.rejects(client().exec("x", { files: files as never }), TypeError, JSON.stringify(files));
    }
    await assert.rejects(client().exec("x", { onStdout: "no" as never }), TypeError);
    assert.equal(svc.seen.length, before);
  });

  test("a Blob goes multipart, with the other files", async () => {
    const local = join(dir, "big.csv");
    writeFileSync(local, "a,b\n" + "1,2\n".repeat(1000));
    const blob = await openAsBlob(local);
    await client().exec("x", { timeout: 5, files: [["data/big.csv", blob], ["note.txt", "héllo"], ["b", new Uint8Array([0])]] });
    assert.equal(Number(last().headers["content-length"]), last().body.length);
    const { request, files } = parseMultipart(last());
    assert.deepEqual(request, { code: "x", language: "python", timeout: 5 });
    assert.deepEqual(files, [
      ["data/big.csv", Buffer.from("a,b\n" + "1,2\n".repeat(1000))],
      ["note.txt", Buffer.from("héllo")],
      ["b", Buffer.from([0])],
    ]);
  });

  test("in-memory files over 1 MiB in all go multipart; up to it they stay inline", async () => {
    const big = Buffer.alloc((1 << 20) + 1, 7);
    await client().exec("x", { files: { "a.bin": big } });
    assert.deepEqual(parseMultipart(last()).files, [["a.bin", big]]);
    await client().exec("x", { files: { "a.bin": big.subarray(1) } });
    assert.equal(last().headers["content-type"], "application/json");
  });

  test("a path a quoted filename cannot carry is a TypeError", async () => {
    await assert.rejects(client().exec("x", { files: { 'a"b': new Blob(["x"]) } }), TypeError);
  });

  test("a retry sends the upload again, read from the Blob again", async () => {
    const local = join(dir, "f.bin");
    writeFileSync(local, Buffer.alloc(200_000, 7));
    let n = 0;
    svc.handle = (_s, res) => (n++ === 0 ? json(res, errorDoc("draining", "d"), 503) : json(res, resultDoc()));
    const before = svc.seen.length;
    try {
      await new Client({ url: svc.url, retries: 1, retryBackoff: 0.01 }).exec("x", { files: { "f.bin": await openAsBlob(local) } });
    } finally {
      svc.handle = (_s, res) => json(res, resultDoc());
    }
    const seen = svc.seen.slice(before);
    assert.equal(seen.length, 2);
    for (const s of seen) assert.deepEqual(parseMultipart(s).files, [["f.bin", Buffer.alloc(200_000, 7)]]);
  });

  test("a large file is streamed as the service takes it, not read whole into memory", async () => {
    const size = 48 << 20;
    const local = join(dir, "large.bin");
    writeFileSync(local, Buffer.alloc(size, 3));
    // The service reads 1 MiB, then pauses: what the SDK has read from the file by then
    // is bounded by the socket buffers, not by the file's size.
    let pulled = 0;
    let pulledAtPause = -1;
    const counting = await scripted(async (_seen, res, req) => {
      const hash = createHash("sha256");
      let length = 0;
      for await (const chunk of req) {
        length += (chunk as Buffer).length;
        hash.update(chunk as Buffer);
        if (pulledAtPause < 0 && length >= 1 << 20) {
          req.pause();
          await new Promise((r) => setTimeout(r, 300));
          pulledAtPause = pulled;
        }
      }
      json(res, resultDoc({ stdout: String(length) }));
    }, { readBody: false });
    const inner = await openAsBlob(local);
    class CountingBlob extends Blob {
      override stream(): ReadableStream<Uint8Array> {
        const reader = inner.stream().getReader();
        return new ReadableStream<Uint8Array>({
          async pull(controller) {
            const { done, value } = await reader.read();
            if (done) controller.close();
            else {
              pulled += value.byteLength;
              controller.enqueue(value);
            }
          },
        }, { highWaterMark: 0 });
      }
    }
    const blob = new CountingBlob([]);
    Object.defineProperty(blob, "size", { value: inner.size });
    try {
      const result = await new Client({ url: counting.url, retries: 0 }).exec("x", { files: { "large.bin": blob } });
      const sent = Number(result.stdout);
      assert.ok(sent > size && sent < size + 2048, String(sent));
      assert.equal(pulled, size);
      assert.ok(pulledAtPause > 0 && pulledAtPause < 24 << 20, `${pulledAtPause} bytes read ahead of a paused service`);
    } finally {
      await counting.stop();
    }
  });
});

const PNG = Buffer.concat([Buffer.from("\x89PNG\r\n\x1a\n", "latin1"), Buffer.from(Array.from({ length: 256 }, (_, i) => i))]);
const FILES = [
  { path: "output/figure-1.png", size: PNG.length, mime: "image/png", encoding: "base64", content: PNG.toString("base64"), truncated: false },
  { path: "output/summary.csv", size: 8, mime: "text/csv", encoding: "utf-8", content: "a,b\n1,2\n", truncated: false },
  { path: "output/huge.bin", size: 2 ** 30, mime: "application/octet-stream", encoding: "base64", content: "", truncated: true },
];

describe("files out", () => {
  test("returned files are decoded, in order; truncated ones only in fileInfo", async () => {
    svc.handle = (_s, res) => json(res, resultDoc({ files: FILES }));
    let result: ExecResult;
    try {
      result = await client().exec("x");
    } finally {
      svc.handle = (_s, res) => json(res, resultDoc());
    }
    assert.deepEqual([...result.files.keys()], ["output/figure-1.png", "output/summary.csv"]);
    assert.deepEqual(Buffer.from(result.files.get("output/figure-1.png")!), PNG);
    assert.equal(Buffer.from(result.files.get("output/summary.csv")!).toString(), "a,b\n1,2\n");
    assert.deepEqual(result.fileInfo, [
      { path: "output/figure-1.png", size: PNG.length, mime: "image/png", truncated: false },
      { path: "output/summary.csv", size: 8, mime: "text/csv", truncated: false },
      { path: "output/huge.bin", size: 2 ** 30, mime: "application/octet-stream", truncated: true },
    ]);
    assert.equal(result.error, null);
  });

  test("error, omitted bytes, and toJSON round-trips", () => {
    const message = "killed: time limit of 1 s exceeded";
    const doc = resultDoc({
      exit_code: 124, timed_out: true, files: FILES, error: { type: "timeout", message },
      stdout_omitted_bytes: 999, stderr_omitted_bytes: 7,
    });
    const result = ExecResult.fromResponse(doc);
    assert.deepEqual(result.error, { type: "timeout", message });
    assert.equal(result.stdoutOmittedBytes, 999);
    assert.equal(result.stderrOmittedBytes, 7);
    assert.deepEqual(JSON.parse(JSON.stringify(result)), doc);
    assert.deepEqual(ExecResult.fromResponse(JSON.parse(JSON.stringify(result))), result);
  });

  test("a result without the new fields has neutral values", () => {
    const result = ExecResult.fromResponse(resultDoc({ files: null, error: null }));
    assert.equal(result.files.size, 0);
    assert.deepEqual(result.fileInfo, []);
    assert.equal(result.error, null);
    assert.equal(result.stdoutOmittedBytes, 0);
    const out = result.toJSON() as unknown as Record<string, unknown>;
    assert.ok(!("files" in out) && !("error" in out));
  });

  test("unusable files or error are SandboxInternalErrors", () => {
    for (const overrides of [
      { files: {} }, { files: ["x"] }, { files: [{ size: 1 }] },
      { files: [{ path: "a", encoding: "base64", content: "!!" }] },
      { files: [{ path: "a", encoding: "gzip", content: "" }] },
      { files: [{ path: "a", size: -1 }] }, { files: [{ path: "a", truncated: "no" }] },
      { error: "timeout" }, { error: { type: 5 } },
    ]) {
      assert.throws(() => ExecResult.fromResponse(resultDoc(overrides)),
        (err: unknown) => err instanceof SandboxInternalError && err.code === "bad_response", JSON.stringify(overrides));
    }
  });
});
