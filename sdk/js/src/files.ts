/**
 * Files sent with an execution (internal): the `files` option, and the multipart body.
 *
 * `files` maps paths (relative to the sandbox's working directory) to content: a
 * `string` (UTF-8 text), bytes (`Uint8Array`, `Buffer`, `ArrayBuffer`) or a `Blob`
 * (e.g. `await fs.openAsBlob(localPath)`, a file on disk read as it is sent). Small
 * in-memory files go inline in the JSON request (`{"path", "content", "encoding"}`).
 * The request becomes `multipart/form-data` (a part `request` with the JSON, then a
 * part `files` per file, its filename the path) when a Blob is given or the in-memory
 * files total more than {@link INLINE_LIMIT}; Blobs are streamed, never read whole,
 * and read again on a retry. The paths are the service's to judge (its 400 names
 * `files[i].path`).
 *
 * @module
 */

import { randomBytes } from "node:crypto";

/** Content of one file to send. */
export type FileContent = string | Uint8Array | ArrayBuffer | Blob;

/** The `files` option: a record, a Map, or `[path, content]` pairs. */
export type FilesOption =
  | Record<string, FileContent>
  | ReadonlyMap<string, FileContent>
  | Iterable<readonly [string, FileContent]>;

/** In-memory files totalling more than this go multipart instead of inline JSON. */
export const INLINE_LIMIT = 1 << 20;

interface FileSpec {
  path: string;
  text?: string;
  bytes?: Uint8Array;
  blob?: Blob;
  size: number;
}

/** A request body of known length written in pieces (the transport streams it). */
export interface StreamBody {
  readonly contentType: string;
  readonly length: number;
  /** The body's bytes, in order; called once per attempt. */
  chunks(): AsyncIterable<Uint8Array>;
}

/**
 * Checks the shape of `files`.
 *
 * @throws TypeError it is not a record, Map or pairs of a path and a content.
 */
export function normaliseFiles(files: unknown): FileSpec[] {
  if (files === undefined || files === null) return [];
  let pairs: unknown[];
  if (files instanceof Map) pairs = [...files.entries()];
  else if (typeof files === "object" && Symbol.iterator in files) pairs = [...(files as Iterable<unknown>)];
  else if (typeof files === "object" && !(files instanceof Blob)) pairs = Object.entries(files);
  else throw new TypeError("files must be a record, a Map or [path, content] pairs");
  return pairs.map((pair, i) => spec(i, pair));
}

function spec(index: number, pair: unknown): FileSpec {
  if (!Array.isArray(pair) || pair.length !== 2) throw new TypeError(`files[${index}] must be a [path, content] pair`);
  const [path, content] = pair as [unknown, unknown];
  if (typeof path !== "string") throw new TypeError(`files[${index}]: the path must be a string, not ${typeof path}`);
  if (typeof content === "string") return { path, text: content, size: Buffer.byteLength(content, "utf8") };
  if (content instanceof Uint8Array) return { path, bytes: content, size: content.byteLength };
  if (content instanceof ArrayBuffer) return { path, bytes: new Uint8Array(content), size: content.byteLength };
  if (content instanceof Blob) return { path, blob: content, size: content.size };
  throw new TypeError(`files[${index}]: content must be a string, bytes or a Blob, not ${
    content === null ? "null" : typeof content}`);
}

/** True when a Blob is given or the in-memory files are large. */
export function needsMultipart(specs: FileSpec[]): boolean {
  if (specs.some((s) => s.blob !== undefined)) return true;
  return specs.reduce((n, s) => n + s.size, 0) > INLINE_LIMIT;
}

/** The JSON request's object for an in-memory file. */
export function inlineEntry(s: FileSpec): { path: string; content: string; encoding: string } {
  if (s.text !== undefined) return { path: s.path, content: s.text, encoding: "utf-8" };
  const bytes = s.bytes!;
  return {
    path: s.path,
    content: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64"),
    encoding: "base64",
  };
}

/**
 * `multipart/form-data`: the JSON request, then one part per file. Its length is
 * known before anything is sent, so it goes with a `Content-Length`.
 *
 * @throws TypeError a path cannot be carried in a quoted filename.
 */
export function multipartBody(requestJson: Uint8Array, specs: FileSpec[]): StreamBody {
  const boundary = "hexr-sandbox-" + randomBytes(16).toString("hex");
  const head = (disposition: string, type: string) =>
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; ${disposition}\r\nContent-Type: ${type}\r\n\r\n`, "utf8");
  const pieces: (Uint8Array | Blob)[] = [head('name="request"', "application/json"), requestJson];
  for (const s of specs) {
    pieces.push(Buffer.from("\r\n"), head(`name="files"; filename="${quoted(s.path)}"`, "application/octet-stream"));
    if (s.text !== undefined) pieces.push(Buffer.from(s.text, "utf8"));
    else pieces.push(s.bytes ?? s.blob!);
  }
  pieces.push(Buffer.from(`\r\n--${boundary}--\r\n`, "ascii"));
  const length = pieces.reduce((n, p) => n + (p instanceof Blob ? p.size : p.byteLength), 0);
  return {
    contentType: `multipart/form-data; boundary=${boundary}`,
    length,
    async *chunks() {
      for (const piece of pieces) {
        if (!(piece instanceof Blob)) {
          yield piece;
          continue;
        }
        for await (const chunk of piece.stream() as unknown as AsyncIterable<Uint8Array>) yield chunk;
      }
    },
  };
}

function quoted(path: string): string {
  for (const c of path) {
    const code = c.codePointAt(0)!;
    if (c === '"' || c === "\\" || code < 0x20 || code === 0x7f) {
      throw new TypeError(`file path ${JSON.stringify(path)} cannot be sent in a multipart upload: it contains ${JSON.stringify(c)}`);
    }
  }
  return path;
}

/**
 * A request body: `body` as JSON with `files` inline, or multipart (the JSON part
 * first) when a Blob is given or the in-memory files are large. The same rule for
 * every route that takes files (exec, sessions, cells).
 *
 * @throws TypeError `files` has the wrong shape.
 */
export function encodeBody(body: Record<string, unknown>, files: unknown): Uint8Array | StreamBody {
  const specs = normaliseFiles(files);
  if (needsMultipart(specs)) return multipartBody(jsonBytes(body), specs);
  if (files !== undefined && files !== null) body["files"] = specs.map(inlineEntry);
  return jsonBytes(body);
}

// Lone surrogates come out escaped (\udxxx): the service judges them.
function jsonBytes(body: Record<string, unknown>): Uint8Array {
  return Buffer.from(JSON.stringify(body), "utf8");
}

/**
 * One file's content as a raw request body (a session's `PUT .../files/{path}`): a
 * Blob is streamed as it is sent, and read again on a retry.
 *
 * @throws TypeError content is not a string, bytes or a Blob.
 */
export function rawBody(content: unknown): Uint8Array | StreamBody {
  const s = spec(0, ["content", content]);
  if (s.text !== undefined) return Buffer.from(s.text, "utf8");
  if (s.bytes !== undefined) return s.bytes;
  const blob = s.blob!;
  return {
    contentType: "application/octet-stream",
    length: blob.size,
    async *chunks() {
      for await (const chunk of blob.stream() as unknown as AsyncIterable<Uint8Array>) yield chunk;
    },
  };
}

/**
 * A JSON body with every file inline, Blobs read whole (a route that takes JSON only:
 * a session's creation; its cells take multipart as exec does).
 *
 * @throws TypeError `files` has the wrong shape.
 */
export async function inlineBody(body: Record<string, unknown>, files: unknown): Promise<Uint8Array> {
  const specs = normaliseFiles(files);
  for (const s of specs) {
    if (s.blob !== undefined) {
      s.bytes = new Uint8Array(await s.blob.arrayBuffer());
      delete s.blob;
    }
  }
  if (files !== undefined && files !== null) body["files"] = specs.map(inlineEntry);
  return jsonBytes(body);
}
