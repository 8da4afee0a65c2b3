/**
 * The {@link ExecResult} of every execution the service ran.
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
    });
  }
}

function bad(detail: string): SandboxInternalError {
  return new SandboxInternalError("unexpected response from the sandbox service: " + detail, {
    status: 200,
    code: "bad_response",
  });
}

function stringField(doc: Record<string, unknown>, name: string): string {
  const value = doc[name] ?? "";
  if (typeof value !== "string") throw bad(`'${name}' is not a string`);
  return value;
}

function numberField(doc: Record<string, unknown>, name: string): number {
  const value = doc[name] ?? 0;
  if (typeof value !== "number" || !Number.isFinite(value)) throw bad(`'${name}' is not a number`);
  return value;
}

function boolField(doc: Record<string, unknown>, name: string): boolean {
  const value = doc[name] ?? false;
  if (typeof value !== "boolean") throw bad(`'${name}' is not a boolean`);
  return value;
}

function optionalIntField(doc: Record<string, unknown>, name: string): number | null {
  const value = doc[name] ?? null;
  if (value !== null && !Number.isInteger(value)) throw bad(`'${name}' is not an integer`);
  return value as number | null;
}

function idField(doc: Record<string, unknown>, name: string): string | null {
  const value = doc[name] ?? null;
  if (value === null) return null;
  if (Number.isInteger(value)) return String(value); // informational only
  if (typeof value !== "string") throw bad(`'${name}' is not a string`);
  return value;
}
