/**
 * Errors thrown by the SDK.
 *
 * A program that fails inside the sandbox (non-zero exit, timeout, out of memory) is
 * *not* an error: it is an {@link ExecResult}. These errors mean the execution could
 * not happen or its result could not be read. They are the Python SDK's exceptions,
 * for the same HTTP statuses.
 *
 * @module
 */

/** Fields every {@link SandboxError} constructor takes besides its message. */
export interface SandboxErrorInit {
  /** HTTP status of the service's reply, or `null` when no reply was received. */
  status?: number | null;
  /** The server's `error.code`, or an SDK code (`connection_failed`, `timeout`, ...). */
  code?: string | null;
  /** Requests sent (or tried) before this error, retries included; 1 without retries. */
  attempts?: number;
  /** The underlying error (a socket error, a JSON syntax error), when there is one. */
  cause?: unknown;
}

/**
 * Base class of every error the SDK throws.
 *
 * `message` is the server's `error.message`, verbatim, when the service answered with
 * an error document; otherwise the SDK's own explanation naming the address.
 */
export class SandboxError extends Error {
  /** HTTP status of the service's reply, or `null` when no reply was received. */
  readonly status: number | null;
  /**
   * Machine-readable code: the server's `error.code` (`invalid_request`, `too_large`,
   * `overloaded`, `draining`, `forbidden`, ...) when the service sent an error
   * document, `http_<status>` for another reply, or an SDK code: `connection_failed`,
   * `connection_closed`, `timeout`, `bad_response`, `invalid_url`.
   */
  readonly code: string | null;
  /** Requests sent (or tried) before this error was thrown, retries included. */
  attempts: number;

  constructor(message: string, init: SandboxErrorInit = {}) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.status = init.status ?? null;
    this.code = init.code ?? null;
    this.attempts = init.attempts ?? 1;
    // The subclass's name in stack traces and messages, not an enumerable field.
    Object.defineProperty(this, "name", {
      value: new.target.name,
      enumerable: false,
      configurable: true,
      writable: true,
    });
  }
}

/**
 * The service cannot be reached or says it cannot run sandboxes now.
 *
 * Thrown when the connection is refused, the address does not resolve or does not
 * answer in time, the connection is dropped before any reply, or the service answers
 * 503 (draining or unhealthy); also for 502/504 from a proxy in front of it. Retrying
 * later, or elsewhere, may succeed.
 */
export class SandboxUnavailableError extends SandboxError {}

/**
 * The service rejected the request (HTTP 4xx other than 429).
 *
 * Typical statuses: 400 invalid request (the message names the field and the rule),
 * 403 caller not allowed (`forbidden`), 413 body too large, 415 not JSON, 422 e.g. a
 * package that cannot be found. Sending the same request again fails the same way.
 */
export class SandboxRequestError extends SandboxError {}

/** Fields of a {@link SandboxOverloadedError}. */
export interface SandboxOverloadedErrorInit extends SandboxErrorInit {
  /** Seconds the service asked to wait (its `Retry-After` header), or `null`. */
  retryAfter?: number | null;
}

/**
 * The service is at capacity, or the caller is over its quota (HTTP 429; `code`
 * `overloaded` or `quota_exceeded`).
 */
export class SandboxOverloadedError extends SandboxError {
  /**
   * Seconds the service asked the client to wait before retrying (from the
   * `Retry-After` header), or `null` if absent or unparsable.
   */
  readonly retryAfter: number | null;

  constructor(message: string, init: SandboxOverloadedErrorInit = {}) {
    super(message, { status: 429, ...init });
    this.retryAfter = init.retryAfter ?? null;
  }
}

/**
 * The service failed (HTTP 500: the sandbox could not be set up; the message says
 * why) or replied with something the SDK cannot understand: invalid JSON, a malformed
 * HTTP response, or a status the contract does not define.
 */
export class SandboxInternalError extends SandboxError {}

/** Fields of a {@link SessionEndedError}. */
export interface SessionEndedErrorInit extends SandboxErrorInit {
  /**
   * Why the session ended (the session object's `ended_reason`): `deleted`,
   * `idle_timeout`, `lifetime`, `cell_timeout`, `memory_limit`, `crashed`, `protocol`,
   * `shutdown`; `null` when the service did not say.
   */
  reason?: string | null;
  /** The session's id, when known. */
  sessionId?: string | null;
}

/**
 * The session is over: closed by the caller, or ended by the service (idle timeout,
 * lifetime, a cell that would not stop, memory limit, crash, service shutdown). Thrown
 * on a 410, on a 404 once the service has forgotten the session, and by every call on
 * a session from then on, without a request. The Python SDK's `SessionEndedError`: a
 * {@link SandboxRequestError} (`status` 410 unless the reply said otherwise, `code`
 * `session_ended`).
 */
export class SessionEndedError extends SandboxRequestError {
  /** The session's `ended_reason`, or `null` when the service did not say. */
  readonly reason: string | null;
  /** The session's id, or `null`. */
  readonly sessionId: string | null;

  constructor(message: string, init: SessionEndedErrorInit = {}) {
    super(message, { status: 410, code: "session_ended", ...init });
    this.reason = init.reason ?? null;
    this.sessionId = init.sessionId ?? null;
  }
}
