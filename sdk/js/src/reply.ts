/**
 * Interpreting the service's replies (internal): error documents to error classes,
 * `Retry-After`, JSON bodies. The same rules as the Python SDK.
 *
 * @module
 */

import type { Address } from "./address.js";
import {
  SandboxError,
  SandboxInternalError,
  SandboxOverloadedError,
  SandboxRequestError,
  SandboxUnavailableError,
  SessionEndedError,
} from "./errors.js";
import type { Response } from "./transport.js";

const DECIMAL = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

/**
 * Seconds to wait from a `Retry-After` value (a delay in seconds or an HTTP date), or
 * `null` when absent or unparsable. Never negative.
 */
export function parseRetryAfter(value: string | undefined | null, now: number = Date.now()): number | null {
  if (value === undefined || value === null) return null;
  const text = value.trim();
  if (!text) return null;
  let seconds: number;
  if (DECIMAL.test(text)) {
    seconds = Number(text);
  } else {
    const when = Date.parse(text);
    if (Number.isNaN(when)) return null;
    seconds = (when - now) / 1000;
  }
  if (!Number.isFinite(seconds)) return null;
  return Math.max(0, seconds);
}

/**
 * Maps a non-200 reply to the matching {@link SandboxError} subclass.
 *
 * `{"error": {"code", "message"}}` bodies give the error's `code` and `message`
 * verbatim; other bodies produce a message naming the status.
 */
export function errorFromResponse(address: Address, response: Response): SandboxError {
  const status = response.status;
  let code: string | null = null;
  let message: string | null = null;
  let doc: unknown = null;
  try {
    doc = JSON.parse(response.body.toString("utf8"));
  } catch {
    doc = null;
  }
  if (typeof doc === "object" && doc !== null && !Array.isArray(doc)) {
    const err = (doc as Record<string, unknown>)["error"];
    if (typeof err === "object" && err !== null && !Array.isArray(err)) {
      const e = err as Record<string, unknown>;
      if (typeof e["message"] === "string") message = e["message"];
      if (typeof e["code"] === "string") code = e["code"];
    } else if (typeof err === "string") {
      message = err;
    }
  }
  if (message === null) {
    let text = `HTTP ${status} ${response.reason}`.trimEnd();
    const snippet = response.body.subarray(0, 200).toString("utf8").trim();
    if (snippet) text += ": " + snippet;
    message = `sandbox service at ${address.url} replied ${text}`;
  }
  if (code === null) code = `http_${status}`;

  if (status === 429) {
    return new SandboxOverloadedError(message, {
      status,
      code,
      retryAfter: parseRetryAfter(response.headers["retry-after"]),
    });
  }
  if (status === 410) {
    // Only session routes answer 410: the session is over (its message says why).
    return new SessionEndedError(message, { status, code, reason: endedReason(doc) });
  }
  if (status === 502 || status === 503 || status === 504) {
    return new SandboxUnavailableError(message, { status, code });
  }
  if (status >= 400 && status < 500) return new SandboxRequestError(message, { status, code });
  return new SandboxInternalError(message, { status, code });
}

// A 410's error document may carry the session object or its ended_reason.
function endedReason(doc: unknown): string | null {
  if (typeof doc !== "object" || doc === null) return null;
  const d = doc as Record<string, unknown>;
  const err = d["error"] as Record<string, unknown> | undefined;
  const session = (d["session"] ?? err?.["session"]) as Record<string, unknown> | undefined;
  const reason = err?.["reason"] ?? err?.["ended_reason"] ?? session?.["ended_reason"];
  if (typeof reason === "string") return reason;
  // "the session has ended (idle_timeout): ..." as the service words it
  const m = /\bended \(([a-z_]+)\)/.exec(typeof err?.["message"] === "string" ? err["message"] : "");
  return m ? m[1]! : null;
}

/**
 * Decodes a JSON body.
 *
 * @throws SandboxInternalError (`bad_response`) when it is not valid JSON.
 */
export function decodeJson(address: Address, response: Response): unknown {
  try {
    return JSON.parse(response.body.toString("utf8"));
  } catch (err) {
    throw new SandboxInternalError(
      `unexpected reply from the sandbox service at ${address.url}: ` +
        `the body is not valid JSON (${err instanceof Error ? err.message : String(err)})`,
      { status: response.status, code: "bad_response", cause: err },
    );
  }
}
