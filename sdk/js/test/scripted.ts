/**
 * A scripted HTTP service for the tests of what the real one does not do yet (or not
 * on demand): each request is recorded and answered by the test's own handler.
 */

import * as http from "node:http";
import type { AddressInfo } from "node:net";

/** One request the scripted service received (its body read whole). */
export interface Seen {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export type Handler = (seen: Seen, res: http.ServerResponse, req: http.IncomingMessage) => void | Promise<void>;

export interface Scripted {
  url: string;
  seen: Seen[];
  handle: Handler;
  stop(): Promise<void>;
}

/**
 * Starts a service on a free loopback port. `readBody: false` leaves the body to the
 * handler (to count it without keeping it).
 */
export async function scripted(handle: Handler, { readBody = true } = {}): Promise<Scripted> {
  const state: Scripted = { url: "", seen: [], handle, stop: async () => undefined };
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    if (readBody) for await (const c of req) chunks.push(c as Buffer);
    const seen = { method: req.method ?? "", path: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks) };
    state.seen.push(seen);
    try {
      await state.handle(seen, res, req);
    } catch (err) {
      res.destroy(err instanceof Error ? err : new Error(String(err)));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.stop = () => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
  return state;
}

/** `{"error": {"code", "message"}}`. */
export function errorDoc(code: string, message: string): Record<string, unknown> {
  return { error: { code, message } };
}

/** A result document with neutral values. */
export function resultDoc(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    stdout: "hello\n", stderr: "", exit_code: 0, execution_time_ms: 12, memory_used_mb: 3, timed_out: false,
    oom_killed: false, signal: null, stdout_truncated: false, stderr_truncated: false, id: "ex-1", ...overrides,
  };
}

/** Answers with a JSON document. */
export function json(res: http.ServerResponse, doc: unknown, status = 200): void {
  const body = Buffer.from(JSON.stringify(doc));
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": body.length, Connection: "close" });
  res.end(body);
}

/** One Server-Sent Event. */
export function sse(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** Starts an event-stream reply (close-delimited). */
export function startEvents(res: http.ServerResponse): void {
  res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache", Connection: "close" });
  res.flushHeaders();
}

/** Resolves when the client closed the connection (true), or after `ms` (false). */
export function closedWithin(req: http.IncomingMessage, res: http.ServerResponse, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    const done = () => {
      clearTimeout(timer);
      resolve(true);
    };
    if (req.socket.destroyed) done();
    res.once("close", done);
    req.socket.once("close", done);
  });
}

/** The JSON part and the (filename, bytes) file parts of a multipart request. */
export function parseMultipart(seen: Seen): { request: Record<string, unknown>; files: [string, Buffer][] } {
  const ctype = String(seen.headers["content-type"]);
  const m = /^multipart\/form-data; boundary=(.+)$/.exec(ctype);
  if (!m) throw new Error("not multipart: " + ctype);
  const boundary = m[1]!;
  const close = Buffer.from(`\r\n--${boundary}--\r\n`);
  if (!seen.body.subarray(seen.body.length - close.length).equals(close)) throw new Error("no closing boundary");
  const body = seen.body.subarray(0, seen.body.length - close.length);
  const sep = Buffer.from(`--${boundary}\r\n`);
  const parts: Buffer[] = [];
  let at = body.indexOf(sep);
  if (at !== 0) throw new Error("does not start with the boundary");
  for (;;) {
    const next = body.indexOf(Buffer.from(`\r\n--${boundary}\r\n`), at + sep.length);
    parts.push(body.subarray(at + sep.length, next < 0 ? body.length : next));
    if (next < 0) break;
    at = next + 2;
  }
  let request: Record<string, unknown> = {};
  const files: [string, Buffer][] = [];
  parts.forEach((part, i) => {
    const end = part.indexOf("\r\n\r\n");
    const head = part.subarray(0, end).toString("utf8").split("\r\n");
    const content = part.subarray(end + 4);
    if (i === 0) {
      if (head[0] !== 'Content-Disposition: form-data; name="request"') throw new Error("first part: " + head[0]);
      request = JSON.parse(content.toString("utf8")) as Record<string, unknown>;
      return;
    }
    const fm = /^Content-Disposition: form-data; name="files"; filename="(.*)"$/.exec(head[0] ?? "");
    if (!fm) throw new Error("file part: " + head[0]);
    files.push([fm[1]!, Buffer.from(content)]);
  });
  return { request, files };
}
