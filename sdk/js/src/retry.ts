/**
 * Bounded retries of what is safe to retry: the Python SDK's rules.
 *
 * An execution is retried only when the service certainly did not run it:
 * - the connection could not be made (refused, no route, connect timeout, TLS
 *   handshake): the request was never sent (error code `connection_failed`);
 * - HTTP 503: the service is draining (or a proxy in front has no instance to send it
 *   to) and took no new execution;
 * - HTTP 429 *with* `Retry-After`: the service (or the caller's quota) is at capacity
 *   and said when to come back; the SDK waits that long.
 *
 * Never retried: a connection lost or timed out after the request was sent (the code
 * may be running), 429 without `Retry-After`, 502/504 from a proxy (the request may
 * have reached an instance), and every other status.
 *
 * Bounds: at most `retries` further attempts (default 2, from `HEXR_SANDBOX_RETRIES`
 * read at every call; 0 turns retries off; at most 10), and at most `retryWaitMax`
 * seconds of waiting in all (default 10): a wait beyond what is left is not waited
 * for, the error is thrown at once. Waits after a connection failure or a 503 start at
 * `retryBackoff` (0.25 s) and double, with jitter (between half and all of it), so
 * clients that lost the same instance do not come back together.
 *
 * @module
 */

import { SandboxError, SandboxOverloadedError, SandboxUnavailableError } from "./errors.js";

/** Environment variable with the number of retries, read at every call. */
export const RETRIES_ENV = "HEXR_SANDBOX_RETRIES";
/** Retries when neither `retries` nor `HEXR_SANDBOX_RETRIES` says. */
export const DEFAULT_RETRIES = 2;
/** The most retries a client may ask for. */
export const MAX_RETRIES = 10;
/** Seconds of waiting between attempts, in all, by default. */
export const DEFAULT_RETRY_WAIT_MAX = 10;
/** First wait after a failed connection or a 503, in seconds, by default. */
export const DEFAULT_RETRY_BACKOFF = 0.25;

/** What a client's `onRetry` is told before each wait. */
export interface RetryEvent {
  /** The attempt that failed, from 1. */
  attempt: number;
  /** Seconds the SDK waits before the next attempt. */
  delay: number;
  /** Why: the error that attempt would have thrown. */
  error: SandboxError;
}

/**
 * `value` as a number of retries (an integer from 0 to {@link MAX_RETRIES}; a string as
 * the environment gives it).
 *
 * @throws TypeError for anything else, naming `what`.
 */
export function checkRetries(value: unknown, what = "retries"): number {
  let n = Number.NaN;
  if (typeof value === "number") n = value;
  else if (typeof value === "string" && /^[+-]?[0-9]+$/.test(value.trim())) n = Number(value.trim());
  if (!Number.isInteger(n) || n < 0 || n > MAX_RETRIES) {
    throw new TypeError(`${what} must be an integer from 0 to ${MAX_RETRIES}, not ${JSON.stringify(value)}`);
  }
  return n === 0 ? 0 : n; // no -0
}

/** `HEXR_SANDBOX_RETRIES` (read at every call), or the default 2. */
export function retriesFromEnv(): number {
  const text = process.env[RETRIES_ENV];
  if (text === undefined || text.trim() === "") return DEFAULT_RETRIES;
  return checkRetries(text, RETRIES_ENV);
}

/**
 * Seconds to wait before trying again after `error` (`attempt` 0 was the first try),
 * or `null` when it must not be retried.
 */
export function delayFor(
  error: SandboxError,
  attempt: number,
  backoff: number,
  random: () => number = Math.random,
): number | null {
  if (error instanceof SandboxOverloadedError) return error.retryAfter; // null: not retried
  if (error instanceof SandboxUnavailableError && (error.code === "connection_failed" || error.status === 503)) {
    return backoff * 2 ** attempt * (0.5 + random() / 2);
  }
  return null;
}

/** The retry bounds of one call (internal). */
export class RetryPolicy {
  constructor(
    readonly retries: number,
    readonly waitMax: number,
    readonly backoff: number,
  ) {}

  /**
   * The wait before the next attempt after `error` (`attempt` from 0, `waited` seconds
   * so far), or `null` to throw it.
   */
  nextWait(error: SandboxError, attempt: number, waited: number): number | null {
    if (attempt >= this.retries) return null;
    const delay = delayFor(error, attempt, this.backoff);
    if (delay === null || waited + delay > this.waitMax) return null;
    return delay;
  }
}
