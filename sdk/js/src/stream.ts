/**
 * Streamed executions (internal): the one interpreter of an event-stream reply, and
 * the {@link StreamEvent}s it produces. The Python SDK's rules.
 *
 * The service answers `Accept: text/event-stream` with `stdout` / `stderr` chunks
 * (`{"text"}`, or `{"base64"}` when the bytes are not UTF-8), `file` events, then one
 * `result` (the JSON answer's object); an `error` event (`{"error": {"code",
 * "message"}}`) when it fails after the stream began is thrown as the
 * {@link SandboxError} subclass its HTTP status would have given.
 *
 * Retrying is decided when the stream is opened (a 503 or a 429 before the program
 * started), never once a 200 stream has begun. A service that answers with plain JSON
 * (it does not stream) still gives the events: its stdout and stderr each as one
 * chunk, its files, then the result.
 *
 * @module
 */

import type { Address } from "./address.js";
import { SandboxError, SandboxInternalError, SandboxUnavailableError } from "./errors.js";
import { decodeJson, errorFromResponse } from "./reply.js";
import { decodeFile, ExecResult, type FileInfo } from "./result.js";
import { EventTooLarge, type RawEvent, SseParser } from "./sse.js";
import { type OpenResponse, readAll } from "./transport.js";

/** One event of a streamed execution (see {@link Client.stream}). */
export type StreamEvent =
  | {
    /** A chunk of the program's standard output or error, as it printed it. */
    readonly type: "stdout" | "stderr";
    /** The chunk as text (bytes that are not UTF-8 replaced by U+FFFD). */
    readonly text: string;
    /** The chunk's bytes. */
    readonly data: Uint8Array;
  }
  | {
    /** A file the program left, as the service sends it. */
    readonly type: "file";
    readonly file: FileInfo;
    /** The file's bytes (empty when `file.truncated`). */
    readonly data: Uint8Array;
  }
  | {
    /** The last event: the result `exec` would have given. */
    readonly type: "result";
    readonly result: ExecResult;
  };

const EVENT_TYPES = new Set(["stdout", "stderr", "file", "result", "error"]);
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

// The HTTP status the service gives each error code, for an `error` event, which
// carries no status of its own (unless it has a "status" member).
const STATUS_OF_CODE: Record<string, number> = {
  invalid_request: 400,
  forbidden: 403,
  method_not_allowed: 405,
  too_large: 413,
  unsupported_media_type: 415,
  not_found: 422,
  session_ended: 410,
  overloaded: 429,
  quota_exceeded: 429,
  draining: 503,
  shutdown: 503,
};

/** A `bad_response` error for a malformed event. */
export function bad(address: Address, detail: string): SandboxInternalError {
  return new SandboxInternalError(`unexpected reply from the sandbox service at ${address.url}: ${detail}`, {
    status: 200,
    code: "bad_response",
  });
}

/** One parsed event as a {@link StreamEvent}; `null` for types we do not know. */
export function interpret(address: Address, raw: RawEvent): StreamEvent | null {
  if (!EVENT_TYPES.has(raw.type)) return null;
  let doc: unknown;
  try {
    doc = JSON.parse(raw.data);
  } catch {
    throw bad(address, `the ${raw.type} event's data is not JSON`);
  }
  const rec = typeof doc === "object" && doc !== null && !Array.isArray(doc) ? (doc as Record<string, unknown>) : null;
  switch (raw.type) {
    case "error":
      throw errorEvent(address, raw.data, rec);
    case "result":
      return { type: "result", result: rethrown(address, "result event", () => ExecResult.fromResponse(doc)) };
    case "file": {
      const { info, content } = rethrown(address, "file event", () => decodeFile(doc, "file"));
      return { type: "file", file: info, data: content };
    }
    default:
      return output(address, raw.type as "stdout" | "stderr", rec);
  }
}

/** Runs `fn`, giving its SandboxError as a `bad_response` about `what`. */
export function rethrown<T>(address: Address, what: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof SandboxError) throw bad(address, `${what}: ${err.message}`);
    throw err;
  }
}

function output(address: Address, type: "stdout" | "stderr", doc: Record<string, unknown> | null): StreamEvent {
  if (typeof doc?.["text"] === "string") {
    const text = doc["text"] as string;
    return { type, text, data: Buffer.from(text, "utf8") };
  }
  if (typeof doc?.["base64"] === "string") {
    const b64 = doc["base64"] as string;
    if (b64.length % 4 !== 0 || !BASE64.test(b64)) throw bad(address, `the ${type} event's base64 is not valid`);
    const data = Buffer.from(b64, "base64");
    return { type, text: data.toString("utf8"), data };
  }
  throw bad(address, `the ${type} event has neither 'text' nor 'base64'`);
}

function errorEvent(address: Address, data: string, doc: Record<string, unknown> | null): SandboxError {
  let status = doc?.["status"];
  if (!Number.isInteger(status) || (status as number) < 400 || (status as number) > 599) {
    const err = doc?.["error"];
    const code = typeof err === "object" && err !== null ? (err as Record<string, unknown>)["code"] : undefined;
    status = typeof code === "string" ? STATUS_OF_CODE[code] ?? 500 : 500;
  }
  return errorFromResponse(address, { status: status as number, reason: "", headers: {}, body: Buffer.from(data, "utf8") });
}

function isEventStream(headers: Record<string, string>): boolean {
  return (headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase() === "text/event-stream";
}

/** The events of a service that answered the whole result as JSON. */
function fromJson(result: ExecResult): StreamEvent[] {
  const events: StreamEvent[] = [];
  if (result.stdout) events.push({ type: "stdout", text: result.stdout, data: Buffer.from(result.stdout, "utf8") });
  if (result.stderr) events.push({ type: "stderr", text: result.stderr, data: Buffer.from(result.stderr, "utf8") });
  for (const file of result.fileInfo) {
    events.push({ type: "file", file, data: result.files.get(file.path) ?? new Uint8Array() });
  }
  events.push({ type: "result", result });
  return events;
}

/**
 * The events of an opened 200 reply, ending with the result; the reply is closed when
 * the iteration ends, however it ends.
 */
export function events(address: Address, reply: OpenResponse): AsyncGenerator<StreamEvent, void, undefined> {
  return eventsOf(address, reply, interpret, (doc) => fromJson(ExecResult.fromResponse(doc)));
}

/**
 * The one reader of a streamed reply, for any kind of result: `one` turns each raw
 * event into an event (`null`: ignored; one of type `result` is the last), `whole`
 * gives the events of a service that answered with JSON instead.
 */
export async function* eventsOf<E extends { readonly type: string }>(
  address: Address,
  reply: OpenResponse,
  one: (address: Address, raw: RawEvent) => E | null,
  whole: (doc: unknown) => E[],
): AsyncGenerator<E, void, undefined> {
  try {
    if (!isEventStream(reply.headers)) {
      const body = await readAll(address, reply.body);
      const response = { status: reply.status, reason: reply.reason, headers: reply.headers, body };
      yield* whole(decodeJson(address, response));
      return;
    }
    const parser = new SseParser();
    try {
      for await (const chunk of reply.body) {
        let raws: RawEvent[];
        try {
          raws = parser.feed(chunk as Buffer);
        } catch (err) {
          if (err instanceof EventTooLarge) throw bad(address, err.message);
          throw err;
        }
        for (const raw of raws) {
          const event = one(address, raw);
          if (event === null) continue;
          yield event;
          if (event.type === "result") return;
        }
      }
    } catch (err) {
      if (err instanceof SandboxError) throw err;
      if (typeof err === "object" && err !== null && (err as Error).name === "AbortError") throw err;
      throw new SandboxUnavailableError(
        `sandbox service at ${address.url} is unavailable: connection lost while reading the reply (${
          err instanceof Error ? err.message : String(err)})`,
        { code: "connection_closed", cause: err },
      );
    }
    throw new SandboxUnavailableError(`sandbox service at ${address.url} ended the stream before the result`, {
      status: 200,
      code: "connection_closed",
    });
  } finally {
    reply.close();
  }
}
