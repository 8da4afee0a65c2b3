/**
 * The {@link Client} behind the module-level `exec` and `isEnabled`.
 *
 * @module
 */

import { type Address, parseUrl } from "./address.js";
import { SandboxError, SandboxInternalError, SandboxUnavailableError } from "./errors.js";
import { encodeBody, type FilesOption, type StreamBody } from "./files.js";
import { decodeJson, errorFromResponse } from "./reply.js";
import { ExecResult } from "./result.js";
import {
  checkRetries,
  DEFAULT_RETRY_BACKOFF,
  DEFAULT_RETRY_WAIT_MAX,
  type RetryEvent,
  RetryPolicy,
  retriesFromEnv,
} from "./retry.js";
import { events, type StreamEvent } from "./stream.js";
import { type OpenResponse, open, readAll, type RequestSpec, type TlsFiles, send, sleep } from "./transport.js";

/** Environment variable naming the service address, read at every call. */
export const URL_ENV = "HEXR_SANDBOX_URL";
/** Address used when neither `url` nor `HEXR_SANDBOX_URL` is set. */
export const DEFAULT_URL = "http://127.0.0.1:8080";
/** CA bundle that verifies an https:// service (default: Node's CA store). */
export const CA_FILE_ENV = "HEXR_SANDBOX_CA_FILE";
/** Client certificate for mTLS (e.g. the agent's X.509-SVID). */
export const CERT_FILE_ENV = "HEXR_SANDBOX_CERT_FILE";
/** Private key of the client certificate (default: in the certificate file). */
export const KEY_FILE_ENV = "HEXR_SANDBOX_KEY_FILE";
/** The execution timeout the service applies when a call names none, in seconds. */
export const DEFAULT_TIMEOUT = 30;

const EXEC_PATH = "/api/v1/exec";
const HEALTH_PATH = "/health";

/**
 * A language the service runs. Other strings are sent as given (the service's 400
 * names the ones it knows).
 */
export type Language =
  | "python"
  | "javascript"
  | "js"
  | "node"
  | "bash"
  | "shell"
  | "sh"
  | (string & Record<never, never>);

/**
 * Options of one execution. Durations are in seconds, as in the HTTP API. Options
 * left out are not sent, so the service's own defaults apply.
 */
export interface ExecOptions {
  /** `python` (default), `javascript` (`js`, `node`) or `bash` (`shell`, `sh`). */
  language?: Language;
  /**
   * Wall-clock limit in seconds; the program is killed after it (`timedOut`, exit code
   * 124). Not sent when left out: the service's default (30 s) applies.
   */
  timeout?: number;
  /** Memory limit in MiB (`memory_mb`; the service's default when left out). */
  memoryMb?: number;
  /** Environment variables to set inside the sandbox (`env_vars`). */
  envVars?: Record<string, string> | Map<string, string>;
  /** Python packages the program needs; those the image has cost nothing. */
  packages?: Iterable<string>;
  /** Standard input of the program (`stdin`; empty when left out). */
  stdin?: string;
  /**
   * Files written into the working directory before the program starts: a record, a
   * Map or `[path, content]` pairs; content a string (UTF-8 text), bytes or a Blob
   * (e.g. `await fs.openAsBlob(localPath)`: uploaded from disk as it is sent,
   * multipart). Paths are relative to the working directory.
   */
  files?: FilesOption;
  /**
   * Globs (relative to the working directory, `**` across directories) of files to
   * return besides those under `output/` (`return_files`); see `result.files`.
   */
  returnFiles?: Iterable<string> | string;
  /**
   * Called with each chunk of standard output as the program prints it (the request
   * is then streamed); the result still holds the whole (capped) output. A returned
   * promise is awaited before the next chunk.
   */
  onStdout?: (text: string) => unknown;
  /** The same for standard error. */
  onStderr?: (text: string) => unknown;
  /**
   * Cancels the call: the connection is closed (the service then kills the sandbox)
   * and the promise rejects with the signal's reason.
   */
  signal?: AbortSignal;
}

/** Options of {@link Client.isEnabled}. */
export interface HealthOptions {
  /** Seconds to wait for the answer (default: the client's `healthTimeout`, 2). */
  timeout?: number;
  /** Cancels the check (`isEnabled` then answers false). */
  signal?: AbortSignal;
}

/** Settings of a {@link Client}. Durations are in seconds. */
export interface ClientOptions {
  /**
   * Service address: `http://host:port`, `https://host:port` or `unix:/path/to.sock`
   * (see {@link parseUrl}). Left out, `HEXR_SANDBOX_URL` is read at every call, with
   * `http://127.0.0.1:8080` when it is unset or empty.
   */
  url?: string;
  /** Seconds added to an execution's `timeout` to get how long to wait for the reply (30). */
  timeoutMargin?: number;
  /** Further seconds of waiting when `packages` is not empty (60). */
  packagesMargin?: number;
  /** Seconds allowed to connect, TLS handshake included (10). */
  connectTimeout?: number;
  /** Default time limit of {@link Client.isEnabled} (2). */
  healthTimeout?: number;
  /** CA bundle (PEM file) for https://; default `HEXR_SANDBOX_CA_FILE`, else Node's CA store. */
  caFile?: string;
  /** Client certificate (PEM file) for mTLS; default `HEXR_SANDBOX_CERT_FILE`. */
  certFile?: string;
  /** Its private key (PEM file); default `HEXR_SANDBOX_KEY_FILE`, else in `certFile`. */
  keyFile?: string;
  /**
   * Further attempts of an execution the service certainly did not run (a connection
   * that could not be made, 503, 429 with `Retry-After`): an integer from 0 (none) to
   * 10. Left out, `HEXR_SANDBOX_RETRIES` is read at every call (default 2).
   */
  retries?: number;
  /** Seconds of waiting between attempts, in all, at most (10). */
  retryWaitMax?: number;
  /** First wait after a failed connection or a 503 (0.25), doubling, with jitter. */
  retryBackoff?: number;
  /** Called before each wait between attempts (for logging). */
  onRetry?: (event: RetryEvent) => void;
}

const CLIENT_OPTIONS = new Set([
  "url", "timeoutMargin", "packagesMargin", "connectTimeout", "healthTimeout",
  "caFile", "certFile", "keyFile", "retries", "retryWaitMax", "retryBackoff", "onRetry",
]);
const EXEC_OPTIONS = new Set([
  "language", "timeout", "memoryMb", "envVars", "packages", "stdin", "signal",
  "files", "returnFiles", "onStdout", "onStderr",
]);
const STREAM_OPTIONS = new Set([...EXEC_OPTIONS].filter((k) => k !== "onStdout" && k !== "onStderr"));

/** Options of {@link Client.stream}: those of `exec` without the callbacks. */
export type StreamOptions = Omit<ExecOptions, "onStdout" | "onStderr">;
const HEALTH_OPTIONS = new Set(["timeout", "signal"]);

function checkKeys(what: string, options: object, known: Set<string>): void {
  if (typeof options !== "object" || options === null) throw new TypeError(`${what} must be an object`);
  for (const key of Object.keys(options)) {
    if (!known.has(key)) {
      throw new TypeError(`${what}: unknown option ${JSON.stringify(key)} (known: ${[...known].join(", ")})`);
    }
  }
}

function seconds(name: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || Number.isNaN(value) || value < 0) {
    throw new TypeError(`${name} must be a number of seconds >= 0`);
  }
  return value;
}

function env(name: string): string | undefined {
  return process.env[name] || undefined;
}

/** What a {@link Session} uses of its client (not part of the package's exports). */
export interface ClientInternals {
  /** The address of the next request. */
  address(client: Client): Address;
  /** Sends with the client's retries and TLS; resolves with the first reply in `ok`. */
  open(client: Client, address: Address, spec: Omit<RequestSpec, "tls">, ok: readonly number[]): Promise<OpenResponse>;
  /** How long to wait for the reply of a run of `timeout` seconds. */
  readTimeout(client: Client, timeout: number | undefined, packages: Iterable<string> | undefined): number;
}

/** Set by {@link Client}'s static block, so that only this package reaches its private parts. */
export let internals: ClientInternals;

/**
 * A connection profile for one sandbox service.
 *
 * It holds no connection between calls (each request uses its own), so one instance
 * may serve any number of concurrent calls.
 *
 * ```ts
 * const client = new Client({ url: "unix:/run/hexr-sandbox.sock" });
 * const result = await client.exec("print(6 * 7)");
 * ```
 */
export class Client {
  static {
    internals = {
      address: (c) => c.#resolve(),
      open: (c, address, spec, ok) => c.#withRetries(address, spec, ok),
      readTimeout: (c, timeout, packages) => c.#readTimeout({ timeout, packages }),
    };
  }

  readonly #address: Address | null;
  readonly #tls: TlsFiles;
  readonly #onRetry: ((event: RetryEvent) => void) | undefined;
  /** Retries of each execution (`undefined`: `HEXR_SANDBOX_RETRIES` at every call). */
  readonly retries: number | undefined;
  /** Seconds of waiting between attempts, in all, at most. */
  readonly retryWaitMax: number;
  /** First wait after a failed connection or a 503. */
  readonly retryBackoff: number;
  /** Seconds added to `timeout` to wait for an execution's reply. */
  readonly timeoutMargin: number;
  /** Further seconds when `packages` is given. */
  readonly packagesMargin: number;
  /** Seconds allowed to connect. */
  readonly connectTimeout: number;
  /** Default time limit of {@link isEnabled}. */
  readonly healthTimeout: number;

  /**
   * @param options the settings, or just the service's address.
   * @throws TypeError `url` is not a valid address, or an option is unknown or invalid.
   */
  constructor(options: ClientOptions | string = {}) {
    const o: ClientOptions = typeof options === "string" ? { url: options } : options;
    checkKeys("Client options", o, CLIENT_OPTIONS);
    this.#address = o.url === undefined ? null : parseUrl(o.url);
    this.timeoutMargin = seconds("timeoutMargin", o.timeoutMargin, 30);
    this.packagesMargin = seconds("packagesMargin", o.packagesMargin, 60);
    this.connectTimeout = seconds("connectTimeout", o.connectTimeout, 10);
    this.healthTimeout = seconds("healthTimeout", o.healthTimeout, 2);
    this.#tls = { caFile: o.caFile, certFile: o.certFile, keyFile: o.keyFile };
    this.retries = o.retries === undefined ? undefined : checkRetries(o.retries);
    this.retryWaitMax = seconds("retryWaitMax", o.retryWaitMax, DEFAULT_RETRY_WAIT_MAX);
    this.retryBackoff = seconds("retryBackoff", o.retryBackoff, DEFAULT_RETRY_BACKOFF);
    if (o.onRetry !== undefined && typeof o.onRetry !== "function") {
      throw new TypeError("onRetry must be a function");
    }
    this.#onRetry = o.onRetry;
  }

  /** The address the next call will use (explicit, from the environment, or the default). */
  get url(): string {
    return this.#address?.url ?? env(URL_ENV) ?? DEFAULT_URL;
  }

  #resolve(): Address {
    if (this.#address) return this.#address;
    try {
      return parseUrl(this.url);
    } catch (err) {
      throw new SandboxUnavailableError(
        `${URL_ENV} is not a valid sandbox address: ${err instanceof Error ? err.message : String(err)}`,
        { code: "invalid_url", cause: err },
      );
    }
  }

  // Files named by the options win; the environment is read at every call.
  #tlsFiles(): TlsFiles {
    return {
      caFile: this.#tls.caFile ?? env(CA_FILE_ENV),
      certFile: this.#tls.certFile ?? env(CERT_FILE_ENV),
      keyFile: this.#tls.keyFile ?? (this.#tls.certFile ? undefined : env(KEY_FILE_ENV)),
    };
  }

  /**
   * Runs `code` in a fresh sandbox and returns its result, whatever the program's
   * outcome (check `result.ok`).
   *
   * @throws TypeError `code` is not a string, or an option is unknown.
   * @throws SandboxRequestError the service rejected the request (its message names
   *   the field), e.g. an unknown language or a limit above the service's maximum.
   * @throws SandboxOverloadedError the service is at capacity; see `retryAfter`.
   * @throws SandboxUnavailableError the service cannot be reached or is draining.
   * @throws SandboxInternalError the service failed or replied unexpectedly.
   *
   * What is safe to retry (a connection that could not be made, 503, 429 with
   * `Retry-After`) is retried first, within the client's bounds (`retries`,
   * `retryWaitMax`); the error thrown then carries `attempts`. A streamed execution
   * (`onStdout`, `onStderr`) is never sent again once the service has begun its
   * stream; a callback that throws ends the execution (the connection is closed) and
   * its error is the call's.
   */
  async exec(code: string, options: ExecOptions = {}): Promise<ExecResult> {
    checkKeys("exec options", options, EXEC_OPTIONS);
    const { onStdout, onStderr } = options;
    for (const [name, fn] of [["onStdout", onStdout], ["onStderr", onStderr]] as const) {
      if (fn !== undefined && typeof fn !== "function") throw new TypeError(`${name} must be a function`);
    }
    if (onStdout === undefined && onStderr === undefined) return this.#execAt(EXEC_PATH, code, options);
    for await (const event of this.#stream(code, options)) {
      if (event.type === "result") return event.result;
      if (event.type === "file") continue;
      const callback = event.type === "stdout" ? onStdout : onStderr;
      if (callback !== undefined) await callback(event.text);
    }
    throw new Error("unreachable: a stream ends with its result or an error");
  }

  /**
   * Runs `code` and iterates over its events as they happen:
   *
   * ```ts
   * for await (const event of client.stream("print(1)")) {
   *   if (event.type === "stdout") process.stdout.write(event.text);
   *   else if (event.type === "result") console.log(event.result.exitCode);
   * }
   * ```
   *
   * Options as for {@link exec} without the callbacks. Events: `stdout` / `stderr`
   * chunks (`text`, `data`), `file` (`file`, `data`), and last `result` (the
   * {@link ExecResult}). Leaving the loop early closes the connection, which ends the
   * execution. Errors as for {@link exec}, thrown from the iteration (one the service
   * reports in the stream too).
   *
   * @throws TypeError at once: `code` is not a string, or an option is unknown.
   */
  stream(code: string, options: StreamOptions = {}): AsyncIterable<StreamEvent> {
    checkKeys("stream options", options, STREAM_OPTIONS);
    return this.#stream(code, options);
  }

  #stream(code: string, options: ExecOptions): AsyncGenerator<StreamEvent, void, undefined> {
    const request = encodeRequest(code, options);
    const open = async () => {
      const address = this.#resolve();
      const reply = await this.#withRetries(address, {
        method: "POST",
        path: EXEC_PATH,
        body: request,
        accept: "text/event-stream",
        connectTimeout: this.connectTimeout,
        readTimeout: this.#readTimeout(options),
        signal: options.signal,
      });
      return { address, reply };
    };
    return (async function* () {
      const { address, reply } = await open();
      yield* events(address, reply);
    })();
  }

  /** Runs `code` with `POST path` (the exec route, or another that takes the same body). */
  async #execAt(path: string, code: string, options: ExecOptions): Promise<ExecResult> {
    const body = encodeRequest(code, options);
    const address = this.#resolve();
    const reply = await this.#withRetries(address, {
      method: "POST",
      path,
      body,
      connectTimeout: this.connectTimeout,
      readTimeout: this.#readTimeout(options),
      signal: options.signal,
    });
    let data: Buffer;
    try {
      data = await readAll(address, reply.body);
    } finally {
      reply.close();
    }
    const response = { status: reply.status, reason: reply.reason, headers: reply.headers, body: data };
    return ExecResult.fromResponse(decodeJson(address, response));
  }

  /**
   * True when the service answers `GET /health` with 200 within `timeout` seconds.
   * Never throws (and never retries): an invalid address, a refused connection, a
   * slow or unhealthy (503) service all give false.
   */
  async isEnabled(options: HealthOptions = {}): Promise<boolean> {
    try {
      checkKeys("isEnabled options", options, HEALTH_OPTIONS);
      const limit = seconds("timeout", options.timeout, this.healthTimeout);
      const address = this.#resolve();
      const response = await send(address, {
        method: "GET",
        path: HEALTH_PATH,
        connectTimeout: limit,
        readTimeout: limit,
        tls: this.#tlsFiles(),
        signal: options.signal,
      });
      return response.status === 200;
    } catch {
      return false;
    }
  }

  /**
   * The service's `/health` document (`status`, `backend`, `languages`, ...).
   *
   * @throws SandboxError as for {@link exec}; a 503 (draining, unhealthy) throws
   *   {@link SandboxUnavailableError}.
   */
  async health(options: { signal?: AbortSignal } = {}): Promise<Record<string, unknown>> {
    checkKeys("health options", options, new Set(["signal"]));
    const address = this.#resolve();
    const response = await send(address, {
      method: "GET",
      path: HEALTH_PATH,
      connectTimeout: this.connectTimeout,
      readTimeout: this.connectTimeout + this.healthTimeout,
      tls: this.#tlsFiles(),
      signal: options.signal,
    });
    if (response.status !== 200) throw errorFromResponse(address, response);
    const doc = decodeJson(address, response);
    if (typeof doc !== "object" || doc === null || Array.isArray(doc)) {
      throw new SandboxInternalError(
        `unexpected reply from the sandbox service at ${address.url}: /health is not a JSON object`,
        { status: response.status, code: "bad_response" },
      );
    }
    return doc as Record<string, unknown>;
  }

  /** How long to wait for an execution's reply, in seconds. */
  #readTimeout(options: ExecOptions): number {
    let t = typeof options.timeout === "number" ? options.timeout : DEFAULT_TIMEOUT;
    if (Number.isNaN(t) || t < 0) t = DEFAULT_TIMEOUT;
    if (!Number.isFinite(t)) t = 24 * 3600;
    t += this.timeoutMargin;
    if (options.packages !== undefined && hasAny(options.packages)) t += this.packagesMargin;
    return t;
  }

  /**
   * Sends `spec` until a 200, a failure that must not be retried, or the retries are
   * used up; throws the last failure (with `attempts` set). The 200's body is the
   * caller's to read (whole, or as it comes).
   */
  async #withRetries(address: Address, spec: Omit<RequestSpec, "tls">, ok: readonly number[] = [200]): Promise<OpenResponse> {
    const policy = new RetryPolicy(this.retries ?? retriesFromEnv(), this.retryWaitMax, this.retryBackoff);
    let waited = 0;
    for (let attempt = 0; ; attempt++) {
      let error: SandboxError;
      try {
        const reply = await open(address, { ...spec, tls: this.#tlsFiles() });
        if (ok.includes(reply.status)) return reply;
        let body: Buffer;
        try {
          body = await readAll(address, reply.body);
        } finally {
          reply.close();
        }
        error = errorFromResponse(address, { status: reply.status, reason: reply.reason, headers: reply.headers, body });
      } catch (err) {
        if (!(err instanceof SandboxError)) throw err;
        error = err;
      }
      error.attempts = attempt + 1;
      const delay = policy.nextWait(error, attempt, waited);
      if (delay === null) throw error;
      this.#onRetry?.({ attempt: attempt + 1, delay, error });
      await sleep(delay, spec.signal);
      waited += delay;
    }
  }
}

function hasAny(values: Iterable<string>): boolean {
  if (typeof values === "string") return values.length > 0;
  for (const _ of values) return true;
  return false;
}

/**
 * The one builder of `POST /api/v1/exec` bodies: JSON, or multipart when files are
 * large or Blobs. Only `code` and the shape of `files` are checked here; everything
 * else is the service's to validate (its 400 names the field and the rule).
 */
function encodeRequest(code: unknown, options: ExecOptions): Uint8Array | StreamBody {
  checkCode(code);
  const body: Record<string, unknown> = { code, language: options.language ?? "python" };
  if (options.timeout !== undefined) body["timeout"] = options.timeout;
  wireFields(body, options);
  if (options.stdin !== undefined) body["stdin"] = options.stdin;
  return encodeBody(body, options.files);
}

/** @throws TypeError `code` is not a string. */
export function checkCode(code: unknown): asserts code is string {
  if (typeof code !== "string") {
    throw new TypeError(`code must be a string, not ${code === null ? "null" : typeof code}`);
  }
}

/**
 * The options exec and sessions share, in their wire names: `memory_mb`, `env_vars`
 * (an object or a Map), `packages` and `return_files` (any iterable; one string is
 * one glob). Left out, they are not sent.
 */
export function wireFields(
  body: Record<string, unknown>,
  options: Pick<ExecOptions, "memoryMb" | "envVars" | "packages" | "returnFiles">,
): void {
  if (options.memoryMb !== undefined) body["memory_mb"] = options.memoryMb;
  if (options.envVars !== undefined) {
    body["env_vars"] = options.envVars instanceof Map ? Object.fromEntries(options.envVars) : options.envVars;
  }
  if (options.packages !== undefined) {
    const p: unknown = options.packages;
    body["packages"] = typeof p === "object" && p !== null && Symbol.iterator in p && !(p instanceof Map)
      ? Array.from(p as Iterable<unknown>)
      : p;
  }
  if (options.returnFiles !== undefined) {
    const r: unknown = options.returnFiles;
    body["return_files"] = typeof r === "string" ? [r]
      : typeof r === "object" && r !== null && Symbol.iterator in r ? Array.from(r as Iterable<unknown>) : r;
  }
}

/** Checks option names (a typo is a TypeError naming it, never dropped). */
export { checkKeys, seconds };
