/**
 * {@link Session}: one long-lived sandbox whose state (variables, imports, files)
 * persists from cell to cell, over the service's `/api/v1/sessions` routes.
 *
 * ```ts
 * await using s = await Session.create({ language: "python" });
 * await s.exec("x = 41");
 * (await s.exec("x + 1")).value;  // "42"
 * ```
 *
 * @module
 */

import type { Address } from "./address.js";
import { CellResult, fileList, type MimeBundle, type SessionFile, type SessionInfo, sessionInfo } from "./cell.js";
import { checkCode, checkKeys, Client, type Language, seconds, wireFields, internals } from "./client.js";
import { SandboxError, SessionEndedError } from "./errors.js";
import { encodeBody, type FileContent, type FilesOption, inlineBody, rawBody } from "./files.js";
import { decodeJson } from "./reply.js";
import { bad, eventsOf, interpret, rethrown, type StreamEvent } from "./stream.js";
import type { RawEvent } from "./sse.js";
import { type OpenResponse, readAll, type RequestSpec } from "./transport.js";

const SESSIONS_PATH = "/api/v1/sessions";

/** Options of {@link Session.create}. Durations are in seconds; left out, not sent. */
export interface SessionOptions {
  /** `python` (default), `javascript` or `bash`. */
  language?: Language;
  /** Memory limit of the whole session in MiB (`memory_mb`). */
  memoryMb?: number;
  /** Environment variables of the session (`env_vars`). */
  envVars?: Record<string, string> | Map<string, string>;
  /** Python packages installed when the session starts. */
  packages?: Iterable<string>;
  /** Files written into the working directory before the first cell (as exec's `files`). */
  files?: FilesOption;
  /** Seconds without a cell after which the service ends the session (`idle_timeout`). */
  idleTimeout?: number;
  /** Seconds the session may live in all (`lifetime`). */
  lifetime?: number;
  /** The service to use (default: a `Client` reading `HEXR_SANDBOX_URL`). */
  client?: Client;
  /** Cancels the creation. */
  signal?: AbortSignal;
}

/** Options of {@link Session.exec}. */
export interface CellOptions {
  /** The cell's time limit in seconds: past it the cell is interrupted (state kept). */
  timeout?: number;
  /** Files written into the working directory before the cell runs. */
  files?: FilesOption;
  /** Globs of files to return besides `output/`'s (`return_files`). */
  returnFiles?: Iterable<string> | string;
  /** Called with each chunk of standard output as the cell prints it (streams the cell). */
  onStdout?: (text: string) => unknown;
  /** The same for standard error. */
  onStderr?: (text: string) => unknown;
  /** Called with each mime bundle the cell displays (a chart as `image/png`). */
  onDisplay?: (data: MimeBundle) => unknown;
  /**
   * Stops waiting: the connection is closed and the call rejects with the signal's
   * reason. The service then interrupts the cell, as {@link Session.interrupt} does (the
   * session and its state stay; the next cell runs once it has stopped).
   */
  signal?: AbortSignal;
}

/** Options of the file calls. */
export interface SessionCallOptions {
  signal?: AbortSignal;
}

/** One event of a streamed cell: output, a display, a file, then the result. */
export type CellEvent =
  | Exclude<StreamEvent, { type: "result" }>
  | { readonly type: "display"; readonly data: MimeBundle }
  | { readonly type: "result"; readonly result: CellResult };

const CREATE_OPTIONS = new Set([
  "language", "memoryMb", "envVars", "packages", "files", "idleTimeout", "lifetime", "client", "signal",
]);
const CELL_OPTIONS = new Set(["timeout", "files", "returnFiles", "onStdout", "onStderr", "onDisplay", "signal"]);
const CALL_OPTIONS = new Set(["signal"]);

// The client a session uses when none is given: its url is unset, so it reads
// HEXR_SANDBOX_URL when the session is created.
let defaultClient: Client | undefined;

/**
 * A session: create it with {@link Session.create}, run cells with {@link exec}, move
 * files with {@link writeFile} / {@link readFile} / {@link listFiles}, and end it with
 * {@link close} (or `await using`, which closes it when the block ends).
 *
 * A session the service ended (its idle timeout or lifetime, its memory limit, a
 * crash) makes every call throw {@link SessionEndedError} saying why. One session runs
 * its cells one at a time, in the order they were sent.
 */
export class Session implements AsyncDisposable {
  readonly #client: Client;
  readonly #address: Address;
  #info: SessionInfo;
  #ended: SessionEndedError | null = null;

  private constructor(client: Client, address: Address, info: SessionInfo) {
    this.#client = client;
    this.#address = address;
    this.#info = info;
  }

  /**
   * Starts a session (`POST /api/v1/sessions`) and resolves once the service has it.
   *
   * @throws TypeError an option is unknown.
   * @throws SandboxOverloadedError past the service's session limits (`retryAfter`).
   * @throws SandboxRequestError a field the service refuses (its message names it).
   * @throws SandboxUnavailableError, SandboxInternalError as for `exec`.
   */
  static async create(options: SessionOptions = {}): Promise<Session> {
    checkKeys("Session options", options, CREATE_OPTIONS);
    const client = options.client ?? (defaultClient ??= new Client());
    if (!(client instanceof Client)) throw new TypeError("client must be a Client");
    const body: Record<string, unknown> = { language: options.language ?? "python" };
    wireFields(body, options);
    if (options.idleTimeout !== undefined) body["idle_timeout"] = seconds("idleTimeout", options.idleTimeout, 0);
    if (options.lifetime !== undefined) body["lifetime"] = seconds("lifetime", options.lifetime, 0);
    const address = internals.address(client);
    const doc = await call(client, address, {
      method: "POST",
      path: SESSIONS_PATH,
      body: await inlineBody(body, options.files),
      signal: options.signal,
    }, [200, 201], internals.readTimeout(client, 0, options.packages));
    return new Session(client, address, rethrown(address, "the new session", () => sessionInfo(doc)));
  }

  /** The session's id. */
  get id(): string {
    return this.#info.id;
  }

  /** Its language. */
  get language(): string {
    return this.#info.language;
  }

  /** The session as last seen (after its creation, a cell or {@link info}). */
  get last(): SessionInfo {
    return this.#info;
  }

  /** True once it was closed, or the service said it ended. */
  get ended(): boolean {
    return this.#ended !== null;
  }

  /**
   * Runs one cell and resolves with its {@link CellResult}, whatever the cell did;
   * state persists between cells. A cell that raises is a result (`status`
   * `exception`); so is one the session ended with (`status` `session_ended`, its
   * output so far), after which every call throws {@link SessionEndedError}.
   *
   * @throws SessionEndedError the session is over (410, 404, or ended before).
   * @throws SandboxOverloadedError too many cells queued on this session.
   */
  async exec(code: string, options: CellOptions = {}): Promise<CellResult> {
    checkKeys("exec options", options, CELL_OPTIONS);
    checkCode(code);
    const { onStdout, onStderr, onDisplay } = options;
    for (const [name, fn] of [["onStdout", onStdout], ["onStderr", onStderr], ["onDisplay", onDisplay]] as const) {
      if (fn !== undefined && typeof fn !== "function") throw new TypeError(`${name} must be a function`);
    }
    this.#check();
    const body: Record<string, unknown> = { code };
    if (options.timeout !== undefined) body["timeout"] = options.timeout;
    wireFields(body, options);
    const spec = {
      method: "POST",
      path: this.#path("/exec"),
      body: encodeBody(body, options.files),
      signal: options.signal,
      accept: onStdout || onStderr || onDisplay ? "text/event-stream" : undefined,
    };
    const wait = internals.readTimeout(this.#client, options.timeout, undefined);
    const result = await this.#guard(async () => {
      if (spec.accept === undefined) return CellResult.fromResponse(await this.#call(spec, [200], wait));
      const reply = await this.#open(spec, [200], wait);
      for await (const event of cellEvents(this.#address, reply)) {
        if (event.type === "result") return event.result;
        if (event.type === "stdout") await onStdout?.(event.text);
        else if (event.type === "stderr") await onStderr?.(event.text);
        else if (event.type === "display") await onDisplay?.(event.data);
      }
      throw new Error("unreachable: a stream ends with its result or an error");
    });
    if (result.session) this.#info = result.session;
    if (result.status === "session_ended") {
      // The cell's result is returned; every later call says the session is over.
      const why = result.error?.message ?? "the session ended";
      this.#end(`session ${this.id} has ended: ${why}`, result.session?.endedReason ?? result.error?.type ?? null, 410);
    }
    return result;
  }

  /** Writes `content` (text, bytes or a Blob) to `path` in the working directory. */
  async writeFile(path: string, content: FileContent, options: SessionCallOptions = {}): Promise<{ path: string; size: number }> {
    checkKeys("writeFile options", options, CALL_OPTIONS);
    const body = rawBody(content);
    this.#check();
    const doc = await this.#guard(() => this.#call({
      method: "PUT",
      path: this.#path("/files/" + filePath(path)),
      body,
      contentType: "application/octet-stream",
      signal: options.signal,
    }, [200, 201]), true);
    const rec = (doc ?? {}) as Record<string, unknown>;
    return { path: typeof rec["path"] === "string" ? rec["path"] : path, size: typeof rec["size"] === "number" ? rec["size"] : 0 };
  }

  /** The bytes of `path` in the working directory. */
  async readFile(path: string, options: SessionCallOptions = {}): Promise<Uint8Array> {
    checkKeys("readFile options", options, CALL_OPTIONS);
    const p = filePath(path);
    this.#check();
    return this.#guard(async () => {
      const reply = await this.#open({ method: "GET", path: this.#path("/files/" + p), accept: "*/*", signal: options.signal }, [200]);
      try {
        return new Uint8Array(await readAll(this.#address, reply.body));
      } finally {
        reply.close();
      }
    }, true);
  }

  /** The entries of a directory of the session (`""`: the working directory). */
  async listFiles(path = "", options: SessionCallOptions = {}): Promise<SessionFile[]> {
    checkKeys("listFiles options", options, CALL_OPTIONS);
    if (typeof path !== "string") throw new TypeError("path must be a string");
    this.#check();
    const query = path ? "?path=" + encodeURIComponent(path) : "";
    const doc = await this.#guard(() => this.#call({ method: "GET", path: this.#path("/files") + query, signal: options.signal }, [200]), true);
    return rethrown(this.#address, "the listing", () => fileList(doc));
  }

  /** The session as the service sees it now (`GET /api/v1/sessions/{id}`). */
  async info(options: SessionCallOptions = {}): Promise<SessionInfo> {
    checkKeys("info options", options, CALL_OPTIONS);
    const doc = await this.#guard(() => this.#call({ method: "GET", path: this.#path(""), signal: options.signal }, [200]));
    this.#info = rethrown(this.#address, "the session", () => sessionInfo(doc));
    if (this.#info.state === "ended") {
      // Ended sessions stay visible for a while: what it says is the next calls' error.
      const why = this.#info.endedMessage ?? this.#info.endedReason ?? "ended";
      this.#end(`session ${this.id} has ended: ${why}`, this.#info.endedReason, 410);
    }
    return this.#info;
  }

  /**
   * Interrupts the running cell, as Jupyter's "interrupt kernel" does (Python:
   * `KeyboardInterrupt`; bash and javascript: SIGINT); the session and its state stay.
   * The cell's own `exec` resolves with status `interrupted` and error type `cancelled`;
   * a cell that does not stop within 2 s ends the session (`cell_timeout`).
   * @returns whether a cell was running.
   */
  async interrupt(options: SessionCallOptions = {}): Promise<boolean> {
    checkKeys("interrupt options", options, CALL_OPTIONS);
    this.#check();
    const doc = await this.#guard(() => this.#call({ method: "POST", path: this.#path("/interrupt"), signal: options.signal }, [202]));
    return (doc as Record<string, unknown> | null)?.["interrupted"] === true;
  }

  /**
   * Ends the session (`DELETE`); the service frees its sandbox. Calling it again, or
   * on a session the service already ended, does nothing.
   */
  async close(): Promise<void> {
    if (this.#ended !== null) return;
    try {
      await this.#guard(() => this.#call({ method: "DELETE", path: this.#path("") }, [200, 204]));
    } catch (err) {
      // Gone already (ended, or forgotten since): closed all the same.
      if (!(err instanceof SessionEndedError)) throw err;
    }
    this.#end(`session ${this.id} is closed`, "deleted", 410);
  }

  /** `await using s = await Session.create()` closes it at the end of the block. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  #path(tail: string): string {
    return `${SESSIONS_PATH}/${encodeURIComponent(this.id)}${tail}`;
  }

  #check(): void {
    if (this.#ended !== null) throw this.#ended;
  }

  /** Marks the session over; the error every later call throws. */
  #end(message: string, reason: string | null, status: number | null): SessionEndedError {
    this.#ended ??= new SessionEndedError(message, { status, reason, sessionId: this.id });
    return this.#ended;
  }

  // A 410, or a 404 for the session itself (any 404 outside the files routes; there,
  // the one whose code is session_not_found), means the session is over: this call and every later one
  // say so, as the Python SDK does.
  async #guard<T>(fn: () => Promise<T>, files = false): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof SessionEndedError || (err instanceof SandboxError && err.status === 404 && (!files || forgotten(err)))) {
        const reason = err instanceof SessionEndedError ? err.reason : null;
        throw this.#end(err.message, reason, err.status);
      }
      throw err;
    }
  }

  #call(spec: Omit<RequestSpec, "tls" | "connectTimeout" | "readTimeout">, ok: number[], wait?: number): Promise<unknown> {
    return call(this.#client, this.#address, spec, ok, wait ?? this.#client.timeoutMargin);
  }

  #open(spec: Omit<RequestSpec, "tls" | "connectTimeout" | "readTimeout">, ok: number[], wait?: number): Promise<OpenResponse> {
    return internals.open(this.#client, this.#address, {
      ...spec,
      connectTimeout: this.#client.connectTimeout,
      readTimeout: wait ?? this.#client.timeoutMargin,
    }, ok);
  }
}

/** Sends one request with the client's retries; its JSON body (`null` when empty). */
async function call(
  client: Client,
  address: Address,
  spec: Omit<RequestSpec, "tls" | "connectTimeout" | "readTimeout">,
  ok: number[],
  wait: number,
): Promise<unknown> {
  const reply = await internals.open(client, address, { ...spec, connectTimeout: client.connectTimeout, readTimeout: wait }, ok);
  let body: Buffer;
  try {
    body = await readAll(address, reply.body);
  } finally {
    reply.close();
  }
  if (body.length === 0) return null;
  return decodeJson(address, { status: reply.status, reason: reply.reason, headers: reply.headers, body });
}

/** A files route's 404 about the session, not the file: told by its code (a file
 * missing in a live session is `not_found`, whatever its message says). */
function forgotten(err: SandboxError): boolean {
  return err.code === "session_not_found";
}

/** A path in the session, as a URL path: each segment encoded, the slashes kept. */
function filePath(path: unknown): string {
  if (typeof path !== "string" || path === "") throw new TypeError("path must be a non-empty string");
  return path.split("/").map(encodeURIComponent).join("/");
}

/** The events of a streamed cell. */
function cellEvents(address: Address, reply: OpenResponse): AsyncGenerator<CellEvent, void, undefined> {
  return eventsOf<CellEvent>(address, reply, cellEvent, (doc) => {
    const result = rethrown(address, "the cell result", () => CellResult.fromResponse(doc));
    const events: CellEvent[] = [];
    if (result.stdout) events.push({ type: "stdout", text: result.stdout, data: Buffer.from(result.stdout, "utf8") });
    if (result.stderr) events.push({ type: "stderr", text: result.stderr, data: Buffer.from(result.stderr, "utf8") });
    for (const output of result.outputs) events.push({ type: "display", data: output.data });
    events.push({ type: "result", result });
    return events;
  });
}

function cellEvent(address: Address, raw: RawEvent): CellEvent | null {
  if (raw.type !== "result" && raw.type !== "display") return interpret(address, raw) as CellEvent | null;
  let doc: unknown;
  try {
    doc = JSON.parse(raw.data);
  } catch {
    throw bad(address, `the ${raw.type} event's data is not JSON`);
  }
  if (raw.type === "result") return { type: "result", result: rethrown(address, "result event", () => CellResult.fromResponse(doc)) };
  const data = typeof doc === "object" && doc !== null && !Array.isArray(doc) ? (doc as Record<string, unknown>)["data"] : null;
  if (typeof data !== "object" || data === null || Array.isArray(data)) throw bad(address, "the display event has no 'data' object");
  return { type: "display", data: data as MimeBundle };
}
