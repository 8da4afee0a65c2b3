// Starts the real `hexr-sandbox serve` for the HTTP tests on a free loopback port, and
// stops it (SIGTERM, then SIGKILL) when asked or when the test process exits.

import { spawn } from "node:child_process";
import * as net from "node:net";

import { BIN, waitFor } from "./shared.mjs";

const running = new Set();
process.on("exit", () => {
  for (const p of running) {
    try {
      p.kill("SIGKILL");
    } catch {
      // gone
    }
  }
});

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** {url, stop(), log()}: a service with env added to a small clean environment. */
export async function startService(env = {}) {
  const port = await freePort();
  const proc = spawn(BIN, ["serve"], {
    env: {
      PATH: process.env.PATH || "/usr/bin:/bin",
      SANDBOX_BACKEND: process.env.SANDBOX_BACKEND || "namespaces",
      LISTEN_ADDRESS: `127.0.0.1:${port}`,
      DRAIN_QUIET: "0", // no load balancer: exit once drained
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.add(proc);
  let log = "";
  proc.stdout.on("data", (d) => (log += d));
  proc.stderr.on("data", (d) => (log += d));
  const exited = new Promise((r) => proc.on("exit", (code, sig) => r(code ?? sig)));
  await waitFor(() => /listening on/.test(log) || proc.exitCode !== null, 30, "the service to listen");
  if (proc.exitCode !== null) throw new Error(`the service did not start: ${log}`);
  return {
    url: `http://127.0.0.1:${port}`,
    log: () => log,
    async stop() {
      proc.kill("SIGTERM");
      const t = setTimeout(() => proc.kill("SIGKILL"), 30_000);
      const code = await exited;
      clearTimeout(t);
      running.delete(proc);
      return code;
    },
  };
}
