/**
 * What a session's service sends back: the {@link SessionInfo} of a session, the
 * {@link CellResult} of one cell, and the file entries of a listing. Decoded strictly
 * (a field of the wrong type is a `bad_response`), unknown fields ignored.
 *
 * @module
 */

import {
  bad,
  boolField,
  encodeFile,
  errorField,
  type ExecError,
  type FileInfo,
  type FileResponse,
  filesField,
  idField,
  numberField,
  stringField,
} from "./result.js";

/** A mime bundle: `text/plain`, `text/html`, `image/png` (base64), `application/json`, ... */
export type MimeBundle = Readonly<Record<string, unknown>>;

/** What a cell displayed (`display()`, a figure left open, `plt.show()`). */
export interface CellOutput {
  readonly type: "display";
  readonly data: MimeBundle;
}

/** The exception a cell raised (Python), without the driver's frames. */
export interface CellException {
  /** e.g. `ZeroDivisionError`. */
  readonly type: string;
  /** e.g. `division by zero`. */
  readonly message: string;
  /** The traceback as the language prints it. */
  readonly traceback: string;
}

/** The state of a session (`state`). */
export type SessionState = "starting" | "idle" | "busy" | "ended" | (string & Record<never, never>);

/** A session as the service describes it (the session object, in camelCase). */
export interface SessionInfo {
  readonly id: string;
  readonly language: string;
  readonly state: SessionState;
  /** RFC 3339 UTC times (`created_at`, `expires_at`, `idle_expires_at`), or `null`. */
  readonly createdAt: string | null;
  readonly expiresAt: string | null;
  readonly idleExpiresAt: string | null;
  readonly memoryMb: number | null;
  /** Cells run so far. */
  readonly cells: number;
  /**
   * Why it ended (`ended_reason`): `deleted`, `idle_timeout`, `lifetime`,
   * `cell_timeout`, `memory_limit`, `crashed`, `protocol`, `shutdown`; `null` while live.
   */
  readonly endedReason: string | null;
  /** The same in words (`ended_message`), or `null`. */
  readonly endedMessage: string | null;
}

/** One entry of a session's file listing. */
export interface SessionFile {
  /** Relative to the session's working directory. */
  readonly path: string;
  readonly type: "file" | "dir" | "other" | (string & Record<never, never>);
  readonly size: number;
}

/** A cell result in the service's shape (snake_case, as on the wire). */
export interface CellResponse {
  id?: string;
  status: string;
  stdout: string;
  stderr: string;
  stdout_truncated: boolean;
  stderr_truncated: boolean;
  stdout_omitted_bytes?: number;
  stderr_omitted_bytes?: number;
  execution_time_ms: number;
  value: string | null;
  value_data: MimeBundle | null;
  outputs: { type: string; data: MimeBundle }[];
  exception: { type: string; message: string; traceback: string } | null;
  error: { type: string; message: string } | null;
  files?: FileResponse[];
}

/** How a cell ended (`status`). */
export type CellStatus = "ok" | "exception" | "interrupted" | "session_ended" | (string & Record<never, never>);

function record(data: unknown, what: string): Record<string, unknown> {
  if (typeof data !== "object" || data === null || Array.isArray(data)) throw bad(`${what} is not a JSON object`);
  return data as Record<string, unknown>;
}

function nullableString(doc: Record<string, unknown>, name: string): string | null {
  const value = doc[name] ?? null;
  if (value !== null && typeof value !== "string") throw bad(`'${name}' is neither null nor a string`);
  return value;
}

function bundle(value: unknown, what: string): MimeBundle | null {
  if (value === undefined || value === null) return null;
  return record(value, what);
}

/**
 * Decodes a session object.
 *
 * @throws SandboxInternalError (`bad_response`) without a string `id`, or with a field
 *   of the wrong type.
 */
export function sessionInfo(data: unknown, what = "the session"): SessionInfo {
  const doc = record(data, what);
  const id = doc["id"];
  if (typeof id !== "string" || id === "") throw bad(`${what} has no string 'id'`);
  const memory = doc["memory_mb"] ?? null;
  if (memory !== null && typeof memory !== "number") throw bad(`${what}: 'memory_mb' is not a number`);
  return {
    id,
    language: stringField(doc, "language"),
    state: stringField(doc, "state"),
    createdAt: nullableString(doc, "created_at"),
    expiresAt: nullableString(doc, "expires_at"),
    idleExpiresAt: nullableString(doc, "idle_expires_at"),
    memoryMb: memory,
    cells: Math.round(numberField(doc, "cells")),
    endedReason: nullableString(doc, "ended_reason"),
    endedMessage: nullableString(doc, "ended_message"),
  };
}

/** Decodes `{"files": [{"path", "type", "size"}]}`. */
export function fileList(data: unknown): SessionFile[] {
  const doc = record(data, "the listing");
  const files = doc["files"];
  if (!Array.isArray(files)) throw bad("the listing has no 'files' array");
  return files.map((item, i) => {
    const entry = record(item, `files[${i}]`);
    const path = entry["path"];
    if (typeof path !== "string") throw bad(`files[${i}].path is not a string`);
    return { path, type: stringField(entry, "type") || "file", size: Math.round(numberField(entry, "size")) };
  });
}

function exceptionField(doc: Record<string, unknown>): CellException | null {
  const value = doc["exception"] ?? null;
  if (value === null) return null;
  const e = record(value, "'exception'");
  return { type: stringField(e, "type"), message: stringField(e, "message"), traceback: stringField(e, "traceback") };
}

function outputsField(doc: Record<string, unknown>): CellOutput[] {
  const value = doc["outputs"] ?? [];
  if (!Array.isArray(value)) throw bad("'outputs' is not an array");
  return value.map((item, i) => {
    const o = record(item, `outputs[${i}]`);
    return { type: "display", data: bundle(o["data"], `outputs[${i}].data`) ?? {} };
  });
}

/**
 * The outcome of one cell of a {@link Session}. A cell that raises is a result too
 * (`status` `exception`, see {@link exception}); only a session that ended throws.
 *
 * Fields are the Python SDK's `CellResult`, in camelCase. Not an `ExecResult`: a cell
 * has no exit status, memory figure or signal of its own (`ok` says how it ended).
 */
export class CellResult {
  /** The cell's identifier (`id`), or `null`. */
  readonly id: string | null;
  /** `ok`, `exception`, `interrupted` (its time limit) or `session_ended`. */
  readonly status: CellStatus;
  /** What the cell wrote to standard output. */
  readonly stdout: string;
  /** What it wrote to standard error. */
  readonly stderr: string;
  readonly stdoutTruncated: boolean;
  readonly stderrTruncated: boolean;
  readonly stdoutOmittedBytes: number;
  readonly stderrOmittedBytes: number;
  /** Wall-clock time of the cell in milliseconds (`execution_time_ms`). */
  readonly durationMs: number;
  /** The `text/plain` of the last expression's value (`value`, e.g. `"42"`), or `null`. */
  readonly value: string | null;
  /** The value's whole mime bundle (`value_data`: `text/html` of a DataFrame, ...), or `null`. */
  readonly valueData: MimeBundle | null;
  /** What the cell displayed, in order (`outputs`). */
  readonly outputs: readonly CellOutput[];
  /** The exception the cell raised, or `null`. */
  readonly exception: CellException | null;
  /** What the sandbox did to the cell (`timeout`, `session_ended`, ...), or `null`. */
  readonly error: ExecError | null;
  /** Files returned (under `output/`, or matching `returnFiles`), path to bytes. */
  readonly files: ReadonlyMap<string, Uint8Array>;
  /** Metadata of every returned file, those over the budget (`truncated`) included. */
  readonly fileInfo: readonly FileInfo[];
  /** The session after the cell, when the service sent it. */
  readonly session: SessionInfo | null;

  private constructor(doc: Record<string, unknown>) {
    const status = doc["status"];
    if (typeof status !== "string" || status === "") throw bad("the cell result has no string 'status'");
    const { fileInfo, files } = filesField(doc);
    this.id = idField(doc, "id");
    this.status = status;
    this.stdout = stringField(doc, "stdout");
    this.stderr = stringField(doc, "stderr");
    this.stdoutTruncated = boolField(doc, "stdout_truncated");
    this.stderrTruncated = boolField(doc, "stderr_truncated");
    this.stdoutOmittedBytes = Math.round(numberField(doc, "stdout_omitted_bytes"));
    this.stderrOmittedBytes = Math.round(numberField(doc, "stderr_omitted_bytes"));
    this.durationMs = Math.round(numberField(doc, "execution_time_ms"));
    this.value = nullableString(doc, "value");
    this.valueData = bundle(doc["value_data"], "'value_data'");
    this.outputs = outputsField(doc);
    this.exception = exceptionField(doc);
    this.error = errorField(doc);
    this.files = files;
    this.fileInfo = fileInfo;
    this.session = doc["session"] === undefined || doc["session"] === null ? null : sessionInfo(doc["session"], "'session'");
  }

  /** True when the cell ran to its end without an exception. */
  get ok(): boolean {
    return this.status === "ok";
  }

  /** Alias of {@link stdout}. */
  get output(): string {
    return this.stdout;
  }

  /** `image/png` of the value as bytes (a matplotlib Figure), or `null`. */
  get png(): Uint8Array | null {
    const b64 = this.valueData?.["image/png"];
    return typeof b64 === "string" ? new Uint8Array(Buffer.from(b64, "base64")) : null;
  }

  /**
   * The result in the service's shape (what `JSON.stringify` gives; the Python SDK's
   * `to_dict()`); `session` is left out.
   */
  toJSON(): CellResponse {
    const data: CellResponse = {
      status: this.status, stdout: this.stdout, stderr: this.stderr,
      stdout_truncated: this.stdoutTruncated, stderr_truncated: this.stderrTruncated,
      execution_time_ms: this.durationMs, value: this.value, value_data: this.valueData,
      outputs: this.outputs.map((o) => ({ type: o.type, data: o.data })),
      exception: this.exception === null ? null : { ...this.exception },
      error: this.error === null ? null : { type: this.error.type, message: this.error.message },
    };
    if (this.id !== null) data.id = this.id;
    if (this.fileInfo.length > 0) {
      data.files = this.fileInfo.map((f) => encodeFile(f, this.files.get(f.path) ?? new Uint8Array()));
    }
    if (this.stdoutOmittedBytes || this.stderrOmittedBytes) {
      data.stdout_omitted_bytes = this.stdoutOmittedBytes;
      data.stderr_omitted_bytes = this.stderrOmittedBytes;
    }
    return data;
  }

  /**
   * Builds a result from the service's decoded cell result.
   *
   * @throws SandboxInternalError (`bad_response`) without a string `status`, or with a
   *   field of the wrong type.
   */
  static fromResponse(data: unknown): CellResult {
    return new CellResult(record(data, "the cell result"));
  }
}
