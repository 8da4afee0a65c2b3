/**
 * `@hexr/sandbox`: run untrusted code in a throwaway, isolated sandbox.
 *
 * TypeScript SDK of the hexr-sandbox service (no runtime dependencies):
 *
 * ```ts
 * import { exec } from "@hexr/sandbox";
 *
 * const result = await exec("print('hello')");
 * result.stdout;    // "hello\n"
 * result.exitCode;  // 0
 * result.ok;        // true
 * ```
 *
 * Files go in and come back, and output can be followed as it is printed:
 *
 * ```ts
 * const result = await exec("import pandas as pd; pd.read_csv('d.csv').plot(); import matplotlib.pyplot as plt; plt.show()", {
 *   files: { "d.csv": "a,b\n1,2\n" },
 *   onStdout: (text) => process.stdout.write(text),
 * });
 * result.files.get("output/figure-1.png");  // Uint8Array
 * for await (const event of stream("print(1)")) { ... }  // stdout, stderr, file, then result
 * ```
 *
 * The service address comes from `HEXR_SANDBOX_URL` (read at every call; default
 * `http://127.0.0.1:8080`; `unix:/path/to.sock` for a unix socket), or use a
 * {@link Client} with an explicit `url`.
 *
 * A program that fails (non-zero exit, timeout, out of memory) gives an
 * {@link ExecResult}; a service that cannot be reached or rejects the request throws a
 * {@link SandboxError} subclass.
 *
 * A {@link Session} keeps one sandbox across calls (state, files), for notebooks and
 * agents: `await using s = await Session.create(); (await s.exec("1 + 1")).value`.
 *
 * @module
 */

import { Client, type ExecOptions, type HealthOptions, type StreamOptions } from "./client.js";
import type { ExecResult } from "./result.js";
import type { StreamEvent } from "./stream.js";

export {
  CA_FILE_ENV,
  CERT_FILE_ENV,
  Client,
  DEFAULT_TIMEOUT,
  DEFAULT_URL,
  KEY_FILE_ENV,
  URL_ENV,
} from "./client.js";
export type { ClientOptions, ExecOptions, HealthOptions, Language, StreamOptions } from "./client.js";
export { type FileContent, type FilesOption, INLINE_LIMIT } from "./files.js";
export type { StreamEvent } from "./stream.js";
export { type Address, parseUrl } from "./address.js";
export {
  SandboxError,
  SandboxInternalError,
  SandboxOverloadedError,
  SandboxRequestError,
  SandboxUnavailableError,
  SessionEndedError,
} from "./errors.js";
export type { SandboxErrorInit, SandboxOverloadedErrorInit, SessionEndedErrorInit } from "./errors.js";
export { type CellEvent, type CellOptions, Session, type SessionCallOptions, type SessionOptions } from "./session.js";
export {
  type CellException,
  type CellOutput,
  type CellResponse,
  CellResult,
  type CellStatus,
  type MimeBundle,
  type SessionFile,
  type SessionInfo,
  type SessionState,
} from "./cell.js";
export { type ExecError, ExecResult, type ExecResponse, type FileInfo, type FileResponse } from "./result.js";
export {
  DEFAULT_RETRIES,
  DEFAULT_RETRY_BACKOFF,
  DEFAULT_RETRY_WAIT_MAX,
  MAX_RETRIES,
  RETRIES_ENV,
  type RetryEvent,
} from "./retry.js";
export { VERSION } from "./version.js";

// The client of the module-level functions. Its url is unset, so it reads
// HEXR_SANDBOX_URL at every call.
const defaultClient = new Client();

/**
 * Runs `code` in a fresh sandbox and returns its {@link ExecResult}, whatever the
 * program's outcome: check `result.ok`. See {@link Client.exec}.
 *
 * @param code source code (or shell script) to run.
 * @param options language, timeout (seconds), memoryMb, envVars, packages, stdin, files,
 *   returnFiles, onStdout, onStderr, signal.
 */
export function exec(code: string, options?: ExecOptions): Promise<ExecResult> {
  return defaultClient.exec(code, options);
}

/**
 * Runs `code` and iterates over its {@link StreamEvent}s as they happen (`stdout`,
 * `stderr`, `file`, then `result`). See {@link Client.stream}.
 */
export function stream(code: string, options?: StreamOptions): AsyncIterable<StreamEvent> {
  return defaultClient.stream(code, options);
}

/**
 * True when the sandbox service at `HEXR_SANDBOX_URL` answers its health check (200
 * within `timeout` seconds, default 2). Never throws.
 */
export function isEnabled(options?: HealthOptions): Promise<boolean> {
  return defaultClient.isEnabled(options);
}
