/**
 * Which failures are retried, and how long to wait before each retry.
 *
 * Only what cannot have run the code twice is retried, and only a bounded number of
 * times:
 * - the connection was refused before any byte of the request was sent (nobody
 *   listens on the port or the unix socket: an instance restarting, or one a load
 *   balancer still routes to after it stopped);
 * - 503 from a service that is draining (`code` `draining`: it took nothing) or that
 *   sent `Retry-After`;
 * - 429 with `Retry-After`, after waiting that long, when it is at most
 *   `maxRetryAfter`.
 *
 * Everything else is thrown at once: a timeout or a connection lost after the request
 * was sent (the code may be running), 4xx, 500, TLS failures.
 *
 * @module
 */

import { SandboxError } from "./errors.js";
import { parseRetryAfter } from "./reply.js";
import { wasNotSent } from "./transport.js";

/** What {@link RetryOptions.onRetry} is told before each wait. */
export interface RetryEvent {
  /** The attempt that failed, from 1. */
  attempt: number;
  /** Seconds the SDK waits before the next attempt. */
  delay: number;
  /** Why: the error that attempt would have thrown. */
  error: SandboxError;
}

/** Retry settings of a {@link Client}. Durations are in seconds. */
export interface RetryOptions {
  /** Retries after the first attempt (default 3); 0 turns retrying off. */
  retries?: number;
  /**
   * First wait after a refused connection or a draining service (default 0.25); it
   * doubles at each retry, up to `maxBackoff`, with up to half of it taken off at
   * random so that many clients do not come back at once.
   */
  backoff?: number;
  /** Longest such wait (default 2). */
  maxBackoff?: number;
  /**
   * Longest `Retry-After` the SDK waits for (default 10); a 429 or 503 asking for
   * more is thrown at once, with its `retryAfter`, for the caller to decide.
   */
  maxRetryAfter?: number;
  /** Called before each wait (for logging). */
  onRetry?: (event: RetryEvent) => void;
}

/** The defaults of {@link RetryOptions}. */
export const DEFAULT_RETRY = Object.freeze({
  retries: 3,
  backoff: 0.25,
  maxBackoff: 2,
  maxRetryAfter: 10,
});

/** {@link RetryOptions} with every default filled in (internal). */
export interface RetryPolicy {
  retries: number;
  backoff: number;
  maxBackoff: number;
  maxRetryAfter: number;
  onRetry: ((event: RetryEvent) => void) | undefined;
}

const KNOWN = new Set(["retries", "backoff", "maxBackoff", "maxRetryAfter", "onRetry"]);

function nonNegative(name: string, value: unknown, fallback: number, integer = false): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || Number.isNaN(value) || value < 0 || (integer && !Number.isInteger(value))) {
    throw new TypeError(`retry.${name} must be a ${integer ? "non-negative integer" : "number >= 0"}`);
  }
  return value;
}

/** Fills in the defaults; `false` means no retries. @throws TypeError on a bad option. */
export function retryPolicy(options: RetryOptions | false | undefined): RetryPolicy {
  if (options === false) return { ...DEFAULT_RETRY, retries: 0, onRetry: undefined };
  const o = options ?? {};
  if (typeof o !== "object" || o === null) throw new TypeError("retry must be an object or false");
  for (const key of Object.keys(o)) {
    if (!KNOWN.has(key)) throw new TypeError(`retry: unknown option ${JSON.stringify(key)}`);
  }
  if (o.onRetry !== undefined && typeof o.onRetry !== "function") {
    throw new TypeError("retry.onRetry must be a function");
  }
  return {
    retries: nonNegative("retries", o.retries, DEFAULT_RETRY.retries, true),
    backoff: nonNegative("backoff", o.backoff, DEFAULT_RETRY.backoff),
    maxBackoff: nonNegative("maxBackoff", o.maxBackoff, DEFAULT_RETRY.maxBackoff),
    maxRetryAfter: nonNegative("maxRetryAfter", o.maxRetryAfter, DEFAULT_RETRY.maxRetryAfter),
    onRetry: o.onRetry,
  };
}

/** The back-off before retry number `n` (from 1): doubling, capped, jittered. */
export function backoffDelay(policy: RetryPolicy, n: number, random: () => number = Math.random): number {
  const full = Math.min(policy.maxBackoff, policy.backoff * 2 ** (n - 1));
  return full * (0.5 + 0.5 * random());
}

/**
 * Seconds to wait before retrying after `error` (attempt number `attempt` failed),
 * or `null` when it must not be retried. `retryAfterHeader` is the reply's
 * `Retry-After`, when there was a reply.
 */
export function retryDelay(
  policy: RetryPolicy,
  error: SandboxError,
  attempt: number,
  retryAfterHeader: string | undefined,
): number | null {
  if (attempt > policy.retries) return null;
  if (wasNotSent(error)) return backoffDelay(policy, attempt);
  const retryAfter = parseRetryAfter(retryAfterHeader);
  if (error.status === 429) {
    if (retryAfter === null || retryAfter > policy.maxRetryAfter) return null;
    return retryAfter;
  }
  if (error.status === 503) {
    if (retryAfter !== null) return retryAfter > policy.maxRetryAfter ? null : retryAfter;
    if (error.code === "draining") return backoffDelay(policy, attempt);
  }
  return null;
}
