/**
 * HTTP transport (internal): one request per connection over TCP, TLS or a unix
 * socket, with node:http and node:https (Node's `fetch` can do neither unix sockets nor
 * client certificates without a dependency).
 *
 * {@link open} resolves once the status line and headers are in and hands the body
 * over as a stream, so a caller can read a reply as it comes; {@link send} reads it
 * whole. A body is bytes, or a {@link StreamBody} written piece by piece with the
 * socket's back-pressure (a multipart upload read from Blobs as it is sent). Every failure becomes a {@link SandboxError} subclass; `connection_failed`
 * means that no byte of the request left (the retry policy relies on it).
 *
 * @module
 */

import { readFile } from "node:fs/promises";
import * as http from "node:http";
import * as https from "node:https";
import type { Socket } from "node:net";
import type { Readable } from "node:stream";

import { type Address, hostHeader } from "./address.js";
import type { StreamBody } from "./files.js";
import { SandboxInternalError, SandboxUnavailableError } from "./errors.js";
import { VERSION } from "./version.js";

/** Value of the `User-Agent` header. */
export const USER_AGENT = `hexr-sandbox-js/${VERSION}`;

/** Files for https:// addresses (paths; read at every connection, so rotation works). */
export interface TlsFiles {
  /** CA bundle that verifies the service (default: Node's own CA store). */
  caFile?: string | undefined;
  /** Client certificate (PEM) for mTLS; may hold the key too. */
  certFile?: string | undefined;
  /** Private key of `certFile` (default: read from `certFile`). */
  keyFile?: string | undefined;
}

/** One request. Durations are in seconds. */
export interface RequestSpec {
  method: string;
  /** API path (the address's base path is put before it). */
  path: string;
  body?: Uint8Array | StreamBody | undefined;
  /** `Content-Type` of `body` (default: a StreamBody's own, else `application/json`). */
  contentType?: string | undefined;
  /** `Accept` (default `application/json`). */
  accept?: string | undefined;
  /** Time allowed to connect (and, for TLS, to finish the handshake). */
  connectTimeout: number;
  /** Time allowed for the whole exchange once connected. */
  readTimeout: number;
  tls?: TlsFiles | undefined;
  signal?: AbortSignal | undefined;
}

/** A reply whose body is still to be read. */
export interface OpenResponse {
  status: number;
  reason: string;
  /** Header values by lower-case name. */
  headers: Record<string, string>;
  /** The body; `readTimeout` still applies while it is read. */
  body: Readable;
  /** Ends the exchange (and its timer) whether or not the body was read. */
  close(): void;
}

/** A reply read whole. */
export interface Response {
  status: number;
  reason: string;
  headers: Record<string, string>;
  body: Buffer;
}

// A unix socket whose listen queue is full refuses a connect with EAGAIN at once
// (nothing to wait on): retry with a short back-off until the connect timeout, as the
// Python SDK does.
const UNIX_RETRY_FIRST = 0.005;
const UNIX_RETRY_MAX = 0.1;

// A body above this size is sent only after the service said "100 Continue" (or after
// EXPECT_WAIT without an answer): a service that refuses it from the headers alone
// (413) answers at once and closes, and a client still writing megabytes would see
// its write fail (EPIPE) instead of the answer.
const EXPECT_THRESHOLD = 64 * 1024;
const EXPECT_WAIT = 1;

function describe(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}

function errnoOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

function unavailable(address: Address, detail: string, code: string, cause?: unknown) {
  return new SandboxUnavailableError(
    `sandbox service at ${address.url} is unavailable: ${detail}`,
    { code, cause },
  );
}

function badResponse(address: Address, detail: string, status: number | null, cause?: unknown) {
  return new SandboxInternalError(
    `unexpected reply from the sandbox service at ${address.url}: ${detail}`,
    { status, code: "bad_response", cause },
  );
}

function timedOut(address: Address, seconds: number) {
  return unavailable(address, `no reply within ${formatSeconds(seconds)} s`, "timeout");
}

/** Seconds as the Python SDK prints them (`{:g}`): `30`, `0.5`, `2.25`. */
export function formatSeconds(seconds: number): string {
  return String(Number(seconds.toPrecision(6)));
}

function toMs(seconds: number): number {
  if (!Number.isFinite(seconds)) return 2 ** 31 - 1;
  return Math.min(2 ** 31 - 1, Math.max(0, Math.round(seconds * 1000)));
}

async function tlsOptions(address: Address, tls: TlsFiles | undefined): Promise<https.RequestOptions> {
  const options: https.RequestOptions = {};
  const read = async (what: string, file: string): Promise<Buffer> => {
    try {
      return await readFile(file);
    } catch (err) {
      throw unavailable(address, `cannot read the TLS ${what} ${file}: ${describe(err)}`,
        "connection_failed", err);
    }
  };
  if (tls?.caFile) options.ca = await read("CA file", tls.caFile);
  if (tls?.certFile) {
    options.cert = await read("certificate file", tls.certFile);
    options.key = tls.keyFile ? await read("key file", tls.keyFile) : options.cert;
  }
  return options;
}

function headerRecord(message: http.IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(message.headers)) {
    if (value === undefined) continue;
    out[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : value.trim();
  }
  return out;
}

/** Waits `seconds`; rejects with the signal's reason if it aborts first. */
export function sleep(seconds: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, toMs(seconds));
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Sends one request and resolves once the reply's headers are in.
 *
 * @throws SandboxUnavailableError cannot connect (`connection_failed`: nothing was
 *   sent), no reply in time, or the connection closed before a status line.
 * @throws SandboxInternalError the reply is not well-formed HTTP.
 * @throws the signal's reason when `spec.signal` aborts.
 */
export async function open(address: Address, spec: RequestSpec): Promise<OpenResponse> {
  const tls = address.scheme === "https" ? await tlsOptions(address, spec.tls) : {};
  const deadline = Date.now() + toMs(spec.connectTimeout);
  let delay = UNIX_RETRY_FIRST;
  for (;;) {
    try {
      return await attempt(address, spec, tls);
    } catch (err) {
      if (!(address.scheme === "unix" && err instanceof QueueFull)) throw err;
      const remaining = (deadline - Date.now()) / 1000;
      if (remaining <= 0) {
        throw unavailable(address,
          `listen queue of ${address.socketPath} stayed full for ${formatSeconds(spec.connectTimeout)} s`,
          "connection_failed", err.cause);
      }
      await sleep(Math.min(delay, remaining), spec.signal);
      delay = Math.min(delay * 2, UNIX_RETRY_MAX);
    }
  }
}

class QueueFull extends Error {}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

function attempt(address: Address, spec: RequestSpec, tls: https.RequestOptions): Promise<OpenResponse> {
  return new Promise<OpenResponse>((resolve, reject) => {
    const signal = spec.signal;
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const headers: Record<string, string> = {
      Host: hostHeader(address),
      "User-Agent": USER_AGENT,
      Accept: spec.accept ?? "application/json",
      Connection: "close",
    };
    const body = spec.body;
    const streamed = body !== undefined && !(body instanceof Uint8Array) ? body : undefined;
    const length = body === undefined ? 0 : body instanceof Uint8Array ? body.byteLength : body.length;
    const expectContinue = body !== undefined && length > EXPECT_THRESHOLD;
    if (body !== undefined) {
      headers["Content-Type"] = spec.contentType ?? streamed?.contentType ?? "application/json";
      headers["Content-Length"] = String(length);
    }
    if (expectContinue) headers["Expect"] = "100-continue";
    const options: https.RequestOptions = {
      method: spec.method,
      path: address.basePath + spec.path,
      headers,
      agent: false,
      setHost: false,
    };
    if (address.scheme === "unix") {
      options.socketPath = address.socketPath;
    } else {
      options.host = address.host;
      options.port = address.port;
    }
    let req: http.ClientRequest;
    try {
      req = address.scheme === "https" ? https.request({ ...options, ...tls }) : http.request(options);
    } catch (err) {
      reject(new SandboxInternalError(
        `cannot send a request to the sandbox service at ${address.url}: ${describe(err)}`,
        { code: "bad_request", cause: err }));
      return;
    }

    // connecting -> waiting (connected, no reply yet) -> body (reply handed over) -> done
    let phase: "connecting" | "waiting" | "body" | "done" = "connecting";
    let reply: http.IncomingMessage | undefined;
    let timer: NodeJS.Timeout | undefined;
    let expectTimer: NodeJS.Timeout | undefined;

    const finish = () => {
      if (phase === "done") return;
      phase = "done";
      clearTimeout(timer);
      clearTimeout(expectTimer);
      signal?.removeEventListener("abort", onAbort);
    };
    // Before the reply, the promise rejects; after it, the body stream fails.
    const fail = (err: unknown) => {
      if (phase === "done") return;
      const inBody = phase === "body";
      finish();
      if (inBody && reply) reply.destroy(asError(err));
      else reject(err);
      req.destroy();
    };
    const onAbort = () => fail(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });

    timer = setTimeout(() => {
      fail(unavailable(address, `no connection within ${formatSeconds(spec.connectTimeout)} s`,
        "connection_failed"));
    }, toMs(spec.connectTimeout));
    // The read timeout bounds the rest of the exchange, body included.
    const onConnected = () => {
      if (phase !== "connecting") return;
      phase = "waiting";
      clearTimeout(timer);
      timer = setTimeout(() => fail(timedOut(address, spec.readTimeout)), toMs(spec.readTimeout));
      if (expectContinue) expectTimer = setTimeout(sendBody, toMs(EXPECT_WAIT));
    };
    let bodySent = false;
    const startBody = () => {
      if (bodySent) return;
      bodySent = true;
      clearTimeout(expectTimer);
      if (streamed === undefined) {
        req.end(body);
        return;
      }
      pump(req, streamed).catch((err: unknown) => {
        // A source that could not be read: the upload is abandoned (unless the service
        // already answered, which stands).
        if (phase !== "body") fail(err);
      });
    };
    const sendBody = () => {
      if (phase === "waiting") startBody();
    };
    req.on("socket", (socket: Socket) => {
      if (address.scheme === "https") socket.once("secureConnect", onConnected);
      else if (socket.connecting) socket.once("connect", onConnected);
      else onConnected();
    });

    req.on("error", (err: Error) => {
      if (phase === "done" || phase === "body") {
        // After the reply, a failed write (the service answered 413 and closed without
        // reading the whole body) changes nothing: the reply stands. Errors while
        // reading the body reach the body stream.
        return;
      }
      const errno = errnoOf(err);
      if (phase === "connecting") {
        if (address.scheme === "unix" && errno === "EAGAIN") {
          finish();
          req.destroy();
          reject(new QueueFull(describe(err), { cause: err }));
          return;
        }
        fail(unavailable(address, describe(err), "connection_failed", err));
        return;
      }
      if (errno?.startsWith("HPE_")) {
        fail(badResponse(address, describe(err), null, err));
        return;
      }
      fail(unavailable(address, `connection closed before a reply (${describe(err)})`,
        "connection_closed", err));
    });

    req.on("response", (message: http.IncomingMessage) => {
      if (phase === "done") {
        message.destroy();
        return;
      }
      onConnected();
      phase = "body";
      reply = message;
      // A body nobody reads yet must not turn a later error into an uncaught one;
      // a reader still sees it.
      message.on("error", () => undefined);
      message.once("end", finish);
      message.once("close", finish);
      resolve({
        status: message.statusCode ?? 0,
        reason: message.statusMessage ?? "",
        headers: headerRecord(message),
        body: message,
        close: () => {
          finish();
          message.destroy();
          req.destroy();
        },
      });
    });

    if (expectContinue) {
      req.once("continue", sendBody);
      req.flushHeaders();
    } else if (streamed !== undefined) {
      startBody(); // small: written as the socket takes it
    } else if (body !== undefined && length > 0) {
      req.end(body);
    } else {
      req.end();
    }
  });
}

/** Writes a streamed body, waiting for the socket to drain; ends the request. */
async function pump(req: http.ClientRequest, body: StreamBody): Promise<void> {
  for await (const chunk of body.chunks()) {
    if (req.destroyed) return;
    if (!req.write(chunk)) {
      await new Promise<void>((resolve) => {
        const done = () => {
          req.off("drain", done);
          req.off("close", done);
          resolve();
        };
        req.on("drain", done);
        req.on("close", done);
      });
    }
  }
  if (!req.destroyed) req.end();
}

/** Reads a body stream whole. Errors are the stream's (already SandboxErrors). */
export async function readAll(address: Address, body: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of body) chunks.push(chunk as Buffer);
  } catch (err) {
    if (err instanceof SandboxUnavailableError || err instanceof SandboxInternalError) throw err;
    if (typeof err === "object" && err !== null && (err as Error).name === "AbortError") throw err;
    throw unavailable(address, `connection lost while reading the reply (${describe(err)})`,
      "connection_closed", err);
  }
  return Buffer.concat(chunks);
}

/** {@link open}, then reads the body whole. */
export async function send(address: Address, spec: RequestSpec): Promise<Response> {
  const reply = await open(address, spec);
  try {
    const body = await readAll(address, reply.body);
    return { status: reply.status, reason: reply.reason, headers: reply.headers, body };
  } finally {
    reply.close();
  }
}
