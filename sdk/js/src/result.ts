/**
 * The {@link ExecResult} of every execution the service ran, with the returned files'
 * metadata ({@link FileInfo}) and why the sandbox ended the program ({@link ExecError}).
 *
 * @module
 */

import { SandboxInternalError } from "./errors.js";

/** The service's JSON reply to an execution (snake_case, as on the wire). */
export interface ExecResponse {
  stdout: string;
  stderr: string;
  exit_code: number;
  execution_time_ms: number;
  memory_used_mb: number;
  timed_out: boolean;
  oom_killed: boolean;
  signal: number | null;
  stdout_truncated: boolean;
  stderr_truncated: boolean;
  id?: string;
  files?: FileResponse[];
  error?: { type: string; message: string } | null;
  stdout_omitted_bytes?: number;
  stderr_omitted_bytes?: number;
}

/** One returned file as the service sends it. */
export interface FileResponse {
  path: string;
  size: number;
  mime: string;
  encoding: "utf-8" | "base64";
  content: string;
  truncated: boolean;
}

/** Why the sandbox ended the program (`result.error`); not an exception. */
export interface ExecError {
  /** `timeout`, `memory_limit`, `output_limit`, `signal` or `killed`. */
  readonly type: string;
  /** The same in words, e.g. `killed: time limit of 30 s exceeded` (also stderr's last line). */
  readonly message: string;
}

/** One file the program left for the caller (`result.fileInfo`). */
export interface FileInfo {
  /** Path relative to the working directory, e.g. `output/figure-1.png`. */
  readonly path: string;
  /** Its size in the sandbox, in bytes. */
  readonly size: number;
  /** Media type the service guessed from the extension. */
  readonly mime: string;
  /** True when it did not fit in the return budget: its bytes were not sent. */
  readonly truncated: boolean;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * Decodes one file object of the service into its metadata and its bytes.
 *
 * @throws SandboxInternalError (`bad_response`) for a malformed object.
 */
export function decodeFile(data: unknown, where = "files[]"): { info: FileInfo; content: Uint8Array } {
  if (typeof data !== "object" || data === null || Array.isArray(data)) throw bad(`'${where}' is not an object`);
  const doc = data as Record<string, unknown>;
  const path = doc["path"];
  if (typeof path !== "string" || path === "") throw bad(`'${where}.path' is not a non-empty string`);
  const text = stringField(doc, "content");
  const encoding = doc["encoding"] ?? "utf-8";
  let content: Uint8Array;
  if (encoding === "utf-8") {
    content = Buffer.from(text, "utf8");
  } else if (encoding === "base64") {
    if (text.length % 4 !== 0 || !BASE64.test(text)) throw bad(`'${where}.content' is not valid base64`);
    content = Buffer.from(text, "base64");
  } else {
    throw bad(`'${where}.encoding' is ${JSON.stringify(encoding)}, not 'utf-8' or 'base64'`);
  }
  const size = doc["size"] ?? content.byteLength;
  if (!Number.isInteger(size) || (size as number) < 0) throw bad(`'${where}.size' is not a size`);
  const mime = doc["mime"] ?? "application/octet-stream";
  if (typeof mime !== "string") throw bad(`'${where}.mime' is not a string`);
  const info: FileInfo = { path, size: size as number, mime: mime || "application/octet-stream", truncated: boolField(doc, "truncated") };
  return { info, content };
}

/** @internal A returned file in the service's shape (toJSON). */
export function encodeFile(info: FileInfo, content: Uint8Array): FileResponse {
  const bytes = Buffer.from(content.buffer, content.byteOffset, content.byteLength);
  let text: string | null = null;
  if (info.mime.startsWith("text/")) {
    try {
      text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
    } catch {
      text = null;
    }
  }
  return {
    path: info.path,
    size: info.size,
    mime: info.mime,
    encoding: text !== null ? "utf-8" : "base64",
    content: text !== null ? text : bytes.toString("base64"),
    truncated: info.truncated,
  };
}

/**
 * Outcome of one execution in a sandbox.
 *
 * A program that exits with a non-zero status, runs out of time or memory, or is
 * killed by a signal still produces an `ExecResult`: check {@link ok},
 * {@link exitCode}, {@link timedOut} and {@link oomKilled}.
 *
 * Fields are the Python SDK's, in camelCase; the wire names are in each comment.
 */
export class ExecResult {
  /** Everything the program wrote to standard output (`stdout`). */
  readonly stdout: string;
  /** Everything the program wrote to standard error (`stderr`). */
  readonly stderr: string;
  /**
   * The program's exit status (`exit_code`); `128 + N` when killed by signal `N`;
   * `124` when the time limit was reached; `137` when the memory limit was reached.
   */
  readonly exitCode: number;
  /** Wall-clock execution time in milliseconds (`execution_time_ms`). */
  readonly durationMs: number;
  /** Peak memory use in MiB (`memory_used_mb`). */
  readonly memoryUsedMb: number;
  /** True when the time limit killed the program (`timed_out`). */
  readonly timedOut: boolean;
  /** True when the memory limit killed the program (`oom_killed`). */
  readonly oomKilled: boolean;
  /** Number of the signal that killed the program, or `null` (`signal`). */
  readonly signal: number | null;
  /** True when stdout exceeded the service's output cap; the rest was dropped. */
  readonly stdoutTruncated: boolean;
  /** The same for stderr (`stderr_truncated`). */
  readonly stderrTruncated: boolean;
  /** The service's identifier of this execution (`id`, also `X-Request-Id`), or `null`. */
  readonly id: string | null;
  /**
   * The files the program left (under `output/` or matching `returnFiles`), path to
   * bytes, in path order; those over the return budget are not in it (see `fileInfo`).
   */
  readonly files: ReadonlyMap<string, Uint8Array>;
  /** Metadata of every returned file, those left out (`truncated`) included. */
  readonly fileInfo: readonly FileInfo[];
  /** `null` when the program ended by itself; else why the sandbox ended it (`error`). */
  readonly error: ExecError | null;
  /** Bytes left out of the middle of stdout (head and tail kept; `stdout_omitted_bytes`). */
  readonly stdoutOmittedBytes: number;
  /** The same for stderr (`stderr_omitted_bytes`). */
  readonly stderrOmittedBytes: number;

  constructor(fields: {
    stdout: string;
    stderr: string;
    exitCode: number;
    durationMs?: number;
    memoryUsedMb?: number;
    timedOut?: boolean;
    oomKilled?: boolean;
    signal?: number | null;
    stdoutTruncated?: boolean;
    stderrTruncated?: boolean;
    id?: string | null;
    files?: ReadonlyMap<string, Uint8Array>;
    fileInfo?: readonly FileInfo[];
    error?: ExecError | null;
    stdoutOmittedBytes?: number;
    stderrOmittedBytes?: number;
  }) {
    this.stdout = fields.stdout;
    this.stderr = fields.stderr;
    this.exitCode = fields.exitCode;
    this.durationMs = fields.durationMs ?? 0;
    this.memoryUsedMb = fields.memoryUsedMb ?? 0;
    this.timedOut = fields.timedOut ?? false;
    this.oomKilled = fields.oomKilled ?? false;
    this.signal = fields.signal ?? null;
    this.stdoutTruncated = fields.stdoutTruncated ?? false;
    this.stderrTruncated = fields.stderrTruncated ?? false;
    this.id = fields.id ?? null;
    this.files = fields.files ?? new Map();
    this.fileInfo = fields.fileInfo ?? [];
    this.error = fields.error ?? null;
    this.stdoutOmittedBytes = fields.stdoutOmittedBytes ?? 0;
    this.stderrOmittedBytes = fields.stderrOmittedBytes ?? 0;
  }

  /** True when the program exited with status 0. */
  get ok(): boolean {
    return this.exitCode === 0;
  }

  /** Alias of {@link stdout}. */
  get output(): string {
    return this.stdout;
  }

  /**
   * The result in the shape of the service's JSON reply (what `JSON.stringify`
   * gives, and what `hexr-sandbox exec --json` prints); `id` only when the service
   * sent one. The Python SDK's `to_dict()`.
   */
  toJSON(): ExecResponse {
    const data: ExecResponse = {
      stdout: this.stdout,
      stderr: this.stderr,
      exit_code: this.exitCode,
      execution_time_ms: this.durationMs,
      memory_used_mb: this.memoryUsedMb,
      timed_out: this.timedOut,
      oom_killed: this.oomKilled,
      signal: this.signal,
      stdout_truncated: this.stdoutTruncated,
      stderr_truncated: this.stderrTruncated,
    };
    if (this.id !== null) data.id = this.id;
    if (this.fileInfo.length > 0) {
      data.files = this.fileInfo.map((f) => encodeFile(f, this.files.get(f.path) ?? new Uint8Array()));
    }
    if (this.error !== null) data.error = { type: this.error.type, message: this.error.message };
    if (this.stdoutOmittedBytes || this.stderrOmittedBytes) {
      data.stdout_omitted_bytes = this.stdoutOmittedBytes;
      data.stderr_omitted_bytes = this.stderrOmittedBytes;
    }
    return data;
  }

  /**
   * Builds a result from the service's decoded 200 reply.
   *
   * Fields the contract marks as always present but a minimal service may omit
   * (`timed_out`, `signal`, ...) get their neutral default; unknown fields are
   * ignored. A document without an integer `exit_code`, or with a field of the wrong
   * type, throws {@link SandboxInternalError} (`code` `bad_response`).
   */
  static fromResponse(data: unknown): ExecResult {
    if (typeof data !== "object" || data === null || Array.isArray(data)) {
      throw bad("the response is not a JSON object");
    }
    const doc = data as Record<string, unknown>;
    const exitCode = doc["exit_code"];
    if (!Number.isInteger(exitCode)) throw bad("the response has no integer 'exit_code'");
    const { fileInfo, files } = filesField(doc);
    return new ExecResult({
      stdout: stringField(doc, "stdout"),
      stderr: stringField(doc, "stderr"),
      exitCode: exitCode as number,
      durationMs: Math.round(numberField(doc, "execution_time_ms")),
      memoryUsedMb: numberField(doc, "memory_used_mb"),
      timedOut: boolField(doc, "timed_out"),
      oomKilled: boolField(doc, "oom_killed"),
      signal: optionalIntField(doc, "signal"),
      stdoutTruncated: boolField(doc, "stdout_truncated"),
      stderrTruncated: boolField(doc, "stderr_truncated"),
      id: idField(doc, "id"),
      files,
      fileInfo,
      error: errorField(doc),
      stdoutOmittedBytes: Math.round(numberField(doc, "stdout_omitted_bytes")),
      stderrOmittedBytes: Math.round(numberField(doc, "stderr_omitted_bytes")),
    });
  }
}

/** @internal (also the cell results'). */
export function filesField(doc: Record<string, unknown>): { fileInfo: FileInfo[]; files: Map<string, Uint8Array> } {
  const value = doc["files"] ?? null;
  const fileInfo: FileInfo[] = [];
  const files = new Map<string, Uint8Array>();
  if (value === null) return { fileInfo, files };
  if (!Array.isArray(value)) throw bad("'files' is not an array");
  value.forEach((item, i) => {
    const { info, content } = decodeFile(item, `files[${i}]`);
    fileInfo.push(info);
    if (!info.truncated) files.set(info.path, content);
  });
  return { fileInfo, files };
}

/** @internal (also the cell results'). */
export function errorField(doc: Record<string, unknown>): ExecError | null {
  const value = doc["error"] ?? null;
  if (value === null) return null;
  if (typeof value !== "object" || Array.isArray(value)) throw bad("'error' is neither null nor an object");
  const e = value as Record<string, unknown>;
  const type = e["type"];
  const message = e["message"] ?? "";
  if (typeof type !== "string" || typeof message !== "string") throw bad("'error' has no string 'type' and 'message'");
  return { type, message };
}

/** @internal (also the cell results'). */
export function bad(detail: string): SandboxInternalError {
  return new SandboxInternalError("unexpected response from the sandbox service: " + detail, {
    status: 200,
    code: "bad_response",
  });
}

/** @internal (also the cell results'). */
export function stringField(doc: Record<string, unknown>, name: string): string {
  const value = doc[name] ?? "";
  if (typeof value !== "string") throw bad(`'${name}' is not a string`);
  return value;
}

/** @internal (also the cell results'). */
export function numberField(doc: Record<string, unknown>, name: string): number {
  const value = doc[name] ?? 0;
  if (typeof value !== "number" || !Number.isFinite(value)) throw bad(`'${name}' is not a number`);
  return value;
}

/** @internal (also the cell results'). */
export function boolField(doc: Record<string, unknown>, name: string): boolean {
  const value = doc[name] ?? false;
  if (typeof value !== "boolean") throw bad(`'${name}' is not a boolean`);
  return value;
}

/** @internal (also the cell results'). */
export function optionalIntField(doc: Record<string, unknown>, name: string): number | null {
  const value = doc[name] ?? null;
  if (value !== null && !Number.isInteger(value)) throw bad(`'${name}' is not an integer`);
  return value as number | null;
}

/** @internal (also the cell results'). */
export function idField(doc: Record<string, unknown>, name: string): string | null {
  const value = doc[name] ?? null;
  if (value === null) return null;
  if (Number.isInteger(value)) return String(value); // informational only
  if (typeof value !== "string") throw bad(`'${name}' is not a string`);
  return value;
}
