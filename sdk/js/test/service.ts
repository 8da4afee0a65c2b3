/**
 * Starts the real `hexr-sandbox serve` for the tests, on a free loopback port or a unix
 * socket in a temporary directory, and helpers that talk to it without the SDK.
 *
 * The binary is $HEXR_SANDBOX_BIN (default: build/hexr-sandbox of the source tree).
 * Every process started here is stopped when its test file ends (SIGTERM, then
 * SIGKILL), and killed if the test process exits first; every wait has a timeout.
 */

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, openSync, closeSync, readFileSync, rmSync } from "node:fs";
import * as http from "node:http";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** sdk/js (the tests run from sdk/js/build-test/test). */
export const SDK_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const ROOT = resolve(SDK_DIR, "..", "..");
export const BIN = process.env["HEXR_SANDBOX_BIN"] || join(ROOT, "build", "hexr-sandbox");

const START_TIMEOUT = 30_000;
const STOP_TIMEOUT = 45_000;
const LISTEN_RE = /^hexr-sandbox: listening on (\S+)/m;

const running = new Set<ChildProcess>();
process.on("exit", () => {
  for (const proc of running) {
    try {
      process.kill(-proc.pid!, "SIGKILL");
    } catch {
      // already gone
    }
  }
});

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Polls `check` until it returns a truthy value; fails after `seconds`. */
export async function waitFor<T>(check: () => T | Promise<T>, seconds: number, what: string): Promise<NonNullable<T>> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    let value: T | undefined;
    try {
      value = await check();
    } catch {
      value = undefined;
    }
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${seconds}s waiting for ${what}`);
    await sleep(20);
  }
}

export function freePort(): Promise<number> {
  return new Promise((resolveP, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolveP(port));
    });
  });
}

/** Mount points at or below `path` (a leaked mount must never be emptied by cleanup). */
function mountsUnder(path: string): string[] {
  try {
    return readFileSync("/proc/self/mountinfo", "utf8")
      .split("\n")
      .map((line) => line.split(" ")[4] ?? "")
      .filter((mp) => mp === path || mp.startsWith(path + "/"));
  } catch {
    return [];
  }
}

export class Service {
  address = "";
  url = "";
  returnCode: number | null = null;
  readonly #exited: Promise<number | null>;

  constructor(
    readonly proc: ChildProcess,
    readonly logPath: string,
    readonly workdir: string,
    readonly listen: string,
  ) {
    running.add(proc);
    this.#exited = new Promise((r) => {
      proc.once("exit", (code, signal) => {
        running.delete(proc);
        this.returnCode = code ?? (signal ? -1 : null);
        r(this.returnCode);
      });
    });
  }

  log(): string {
    try {
      return readFileSync(this.logPath, "utf8");
    } catch {
      return "";
    }
  }

  jsonLog(): Record<string, unknown>[] {
    const out: Record<string, unknown>[] = [];
    for (const line of this.log().split("\n")) {
      if (!line.startsWith("{")) continue;
      try {
        out.push(JSON.parse(line));
      } catch {
        // a line being written
      }
    }
    return out;
  }

  get alive(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  async waitStarted(): Promise<void> {
    const deadline = Date.now() + START_TIMEOUT;
    while (Date.now() < deadline) {
      const m = LISTEN_RE.exec(this.log());
      if (m) {
        this.address = m[1]!;
        this.url = this.address.startsWith("unix:") ? this.address : "http://" + this.address;
        return;
      }
      if (!this.alive) throw new Error(`hexr-sandbox serve exited with ${this.proc.exitCode}:\n${this.log()}`);
      await sleep(20);
    }
    throw new Error(`hexr-sandbox serve did not start within ${START_TIMEOUT / 1000}s:\n${this.log()}`);
  }

  signal(sig: NodeJS.Signals): void {
    if (this.alive) this.proc.kill(sig);
  }

  /** Waits for the process to end (it must end within `seconds`). */
  async wait(seconds: number): Promise<number | null> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`service ${this.listen} still running after ${seconds}s`)), seconds * 1000);
    });
    try {
      return await Promise.race([this.#exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** SIGTERM, then SIGKILL after the timeout. Returns the exit status. */
  async stop(): Promise<number | null> {
    if (this.alive) {
      this.proc.kill("SIGTERM");
      try {
        await this.wait(STOP_TIMEOUT / 1000);
      } catch {
        this.proc.kill("SIGKILL");
        await this.wait(30);
      }
    } else {
      await this.#exited;
    }
    if (!mountsUnder(this.workdir).length) rmSync(this.workdir, { recursive: true, force: true });
    return this.returnCode;
  }
}

export interface StartOptions {
  /** Settings for the service (on top of this process's environment). */
  env?: Record<string, string>;
  /** LISTEN_ADDRESS (default: a free 127.0.0.1 port). */
  listen?: string;
  /** STATE_DIR to use (default: one in the service's own temporary directory). */
  stateDir?: string;
}

/** Starts `hexr-sandbox serve` and waits for it to listen. */
export async function startService(options: StartOptions = {}): Promise<Service> {
  if (!existsSync(BIN)) throw new Error(`no hexr-sandbox binary at ${BIN} (set HEXR_SANDBOX_BIN)`);
  const attempts = options.listen ? 1 : 3; // a free port may be taken before we bind it
  let last: unknown;
  for (let i = 0; i < attempts; i++) {
    const workdir = mkdtempSync(join(tmpdir(), "hxs-js-"));
    // The sandbox's root (an unprivileged uid on the host) must reach STATE_DIR.
    chmodSync(workdir, 0o755);
    const state = options.stateDir ?? join(workdir, "state");
    if (!options.stateDir) mkdirSync(state, { mode: 0o755 });
    const listen = options.listen ?? `127.0.0.1:${await freePort()}`;
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
    delete env["LISTEN_ADDRESS"];
    env["STATE_DIR"] = state;
    if (env["DRAIN_QUIET"] === undefined) env["DRAIN_QUIET"] = "0"; // no load balancer: exit once drained
    Object.assign(env, options.env ?? {});
    const logPath = join(workdir, "serve.log");
    const fd = openSync(logPath, "w");
    let proc: ChildProcess;
    try {
      proc = spawn(BIN, ["serve", "--listen", listen], {
        env,
        stdio: ["ignore", fd, fd],
        detached: true, // its own session, as the Python fixtures start it
      });
    } finally {
      closeSync(fd);
    }
    const svc = new Service(proc, logPath, workdir, listen);
    try {
      await svc.waitStarted();
      return svc;
    } catch (err) {
      last = err;
      await svc.stop();
      if (!/in use|Address already/.test(String(err))) break;
    }
  }
  throw last instanceof Error ? last : new Error(String(last));
}

/** One plain HTTP request (TCP or unix: URL), without the SDK. */
export function rawRequest(
  url: string,
  method: string,
  path: string,
  body?: string,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  return new Promise((resolveP, reject) => {
    const options: http.RequestOptions = { method, path, agent: false, timeout: 30_000 };
    if (url.startsWith("unix:")) {
      options.socketPath = url.slice("unix:".length);
    } else {
      const u = new URL(url);
      options.host = u.hostname;
      options.port = Number(u.port);
    }
    if (body !== undefined) options.headers = { "Content-Type": "application/json" };
    const req = http.request(options, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () =>
        resolveP({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString("utf8") }),
      );
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error("no reply within 30 s")));
    req.on("error", reject);
    req.end(body);
  });
}

/** The service's /metrics as {"name{labels}": value}. */
export async function metrics(url: string): Promise<Record<string, number>> {
  const { status, text } = await rawRequest(url, "GET", "/metrics");
  if (status !== 200) throw new Error(`/metrics answered ${status}`);
  const out: Record<string, number> = {};
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    out[line.slice(0, at)] = Number(line.slice(at + 1));
  }
  return out;
}

export async function gauge(url: string, name: string): Promise<number> {
  return (await metrics(url))[name] ?? -1;
}

/** Runs `code` directly on the host with a small, clean environment. */
export function hostRun(
  code: string,
  language: "python" | "javascript" | "bash" = "python",
  envVars: Record<string, string> = {},
): { stdout: string; stderr: string; status: number | null } {
  const command = { python: ["/usr/bin/python3", "-c"], javascript: ["/usr/bin/node", "-e"], bash: ["/bin/bash", "-c"] }[language];
  const cwd = mkdtempSync(join(tmpdir(), "hexr-host-"));
  try {
    const r = spawnSync(command[0]!, [command[1]!, code], {
      cwd,
      env: { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: cwd, LANG: "C.UTF-8", ...envVars },
      encoding: "utf8",
      timeout: 120_000,
    });
    return { stdout: r.stdout, stderr: r.stderr, status: r.status };
  } finally {
    rmSync(cwd, { recursive: true, force: true });
  }
}
