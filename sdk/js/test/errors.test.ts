/**
 * Every error class from a real service's answer: 413 (small and large bodies), 422,
 * 429 with Retry-After, 500, 503 while draining, an unreachable service, a reply that
 * does not come in time, and a call cancelled by its AbortSignal. Each service is
 * started with the settings that make it give that answer.
 */

import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";

import {
  Client,
  SandboxError,
  SandboxInternalError,
  SandboxOverloadedError,
  SandboxRequestError,
  SandboxUnavailableError,
} from "../src/index.js";
import { freePort, gauge, metrics, rawRequest, type Service, startService, waitFor } from "./service.js";

/** Runs `body` with a service started with `env`, which must then stop cleanly. */
async function withService(env: Record<string, string>, body: (svc: Service) => Promise<void>): Promise<void> {
  const svc = await startService({ env });
  let failed = true;
  try {
    await body(svc);
    failed = false;
  } finally {
    const rc = await svc.stop();
    if (!failed) assert.equal(rc, 0, "the service did not stop cleanly:\n" + svc.log().slice(-3000));
  }
}

function expectError<T extends SandboxError>(
  cls: new (...args: never[]) => T,
  check: (err: T) => void,
): (err: unknown) => boolean {
  return (err: unknown) => {
    assert.ok(err instanceof cls, `expected ${cls.name}, got ${String(err)}`);
    assert.ok(err instanceof SandboxError);
    check(err);
    return true;
  };
}

// The services are independent: the cases run at once.
describe("errors from a real service", { concurrency: true }, () => {
  test("413: a body above MAX_BODY_BYTES, small or large, is a SandboxRequestError", async () => {
    await withService({ MAX_BODY_BYTES: "1024" }, async (svc) => {
      const client = new Client({ url: svc.url });
      // 4 MB: the service answers from the headers and closes; without waiting for
      // "100 Continue" the client would still be writing and see EPIPE, not the 413.
      for (const size of [2000, 4_000_000]) {
        await assert.rejects(client.exec("#".repeat(size)), expectError(SandboxRequestError, (err) => {
          assert.equal(err.status, 413);
          assert.equal(err.code, "too_large");
          assert.match(err.message, /exceeds the maximum 1024/);
          assert.equal(err.attempts, 1);
        }), `size ${size}`);
      }
      const m = await metrics(svc.url);
      assert.equal(m['hexr_sandbox_rejected_requests_total{reason="too_large"}'], 2);
    });
  });

  test("422: a package no source has is a SandboxRequestError naming it", async () => {
    const wheelhouse = mkdtempSync(join(tmpdir(), "hxs-js-wheels-"));
    chmodSync(wheelhouse, 0o755); // the installer's sandbox reads it
    try {
      await withService({ PACKAGES_WHEELHOUSE: wheelhouse }, async (svc) => {
        const client = new Client({ url: svc.url });
        await assert.rejects(client.exec("import hxs_absent", { packages: ["hxs-absent-package"] }),
          expectError(SandboxRequestError, (err) => {
            assert.equal(err.status, 422);
            assert.equal(err.code, "not_found");
            assert.match(err.message, /hxs-absent-package/);
          }));
      });
    } finally {
      rmSync(wheelhouse, { recursive: true, force: true });
    }
  });

  test("429: over capacity is a SandboxOverloadedError with retryAfter", async () => {
    await withService({ MAX_CONCURRENT: "1", MAX_QUEUE: "0" }, async (svc) => {
      const client = new Client({ url: svc.url, retries: 0 });
      const holder = client.exec("sleep 3; echo held", { language: "bash" });
      await waitFor(async () => (await gauge(svc.url, "hexr_sandbox_active_executions")) === 1, 30, "the slot to be taken");
      await assert.rejects(client.exec("echo never", { language: "bash" }), expectError(SandboxOverloadedError, (err) => {
        assert.equal(err.status, 429);
        assert.equal(err.code, "overloaded");
        assert.ok(err.retryAfter !== null && err.retryAfter >= 1, String(err.retryAfter));
        assert.match(err.message, /execution slots are busy/);
        assert.equal(err.attempts, 1);
      }));
      assert.equal((await holder).stdout, "held\n");
    });
  });

  test("500: a sandbox that cannot be set up is a SandboxInternalError saying why; /health is 503", async () => {
    await withService({ SANDBOX_ROOTFS: "/nonexistent-hxs-js-rootfs" }, async (svc) => {
      const client = new Client({ url: svc.url });
      await assert.rejects(client.exec("print(1)"), expectError(SandboxInternalError, (err) => {
        assert.equal(err.status, 500);
        assert.equal(err.code, "sandbox_setup_failed");
        assert.match(err.message, /\/nonexistent-hxs-js-rootfs/);
        assert.equal(err.attempts, 1); // a 500 is not retried
      }));
      assert.equal(await client.isEnabled(), false);
      await assert.rejects(client.health(), expectError(SandboxUnavailableError, (err) => {
        assert.equal(err.status, 503);
      }));
    });
  });

  test("503: a draining service is a SandboxUnavailableError (code draining)", async () => {
    const svc = await startService({ env: { DRAIN_TIMEOUT: "60s" } });
    try {
      const client = new Client({ url: svc.url, retries: 0 });
      const running = client.exec("sleep 3; echo finished", { language: "bash" });
      await waitFor(async () => (await gauge(svc.url, "hexr_sandbox_active_executions")) === 1, 30, "the execution to start");
      svc.signal("SIGTERM");
      await waitFor(async () => (await rawRequest(svc.url, "GET", "/health")).status === 503, 10, "/health to say draining");
      await assert.rejects(client.exec("echo late", { language: "bash" }), expectError(SandboxUnavailableError, (err) => {
        assert.equal(err.status, 503);
        assert.equal(err.code, "draining");
        assert.match(err.message, /shutting down/);
      }));
      assert.equal(await client.isEnabled(), false);
      await assert.rejects(client.health(), expectError(SandboxUnavailableError, (err) => assert.equal(err.status, 503)));
      assert.equal((await running).stdout, "finished\n");
      assert.equal(await svc.wait(30), 0);
    } finally {
      await svc.stop();
    }
  });

  test("an unreachable service is a SandboxUnavailableError, after the bounded retries", async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const retries: number[] = [];
    const client = new Client({ url, retryBackoff: 0.01, onRetry: (e) => retries.push(e.attempt) });
    await assert.rejects(client.exec("print(1)"), expectError(SandboxUnavailableError, (err) => {
      assert.equal(err.status, null);
      assert.equal(err.code, "connection_failed");
      assert.match(err.message, new RegExp(`sandbox service at ${url} is unavailable: .*ECONNREFUSED`));
      assert.equal(err.attempts, 3);
    }));
    assert.deepEqual(retries, [1, 2]);
    assert.equal(await client.isEnabled(), false);
    const sockdir = mkdtempSync(join(tmpdir(), "hxs-js-none-"));
    try {
      const absent = new Client({ url: `unix:${sockdir}/absent.sock`, retries: 0 });
      await assert.rejects(absent.exec("print(1)"), expectError(SandboxUnavailableError, (err) => {
        assert.equal(err.code, "connection_failed");
        assert.match(err.message, /ENOENT/);
      }));
      assert.equal(await absent.isEnabled(), false);
    } finally {
      rmSync(sockdir, { recursive: true, force: true });
    }
  });

  test("no reply in time is a SandboxUnavailableError (timeout), never retried; abort cancels", async () => {
    await withService({ MAX_CONCURRENT: "1", MAX_QUEUE: "4", QUEUE_TIMEOUT: "1m" }, async (svc) => {
      const client = new Client({ url: svc.url });
      // The holder runs until it is aborted below.
      const controller = new AbortController();
      const holder = client.exec("sleep 30", { language: "bash", signal: controller.signal });
      await waitFor(async () => (await gauge(svc.url, "hexr_sandbox_active_executions")) === 1, 30, "the slot to be taken");

      // Queued behind the holder, the reply cannot come within timeout + margin = 1 s.
      const impatient = new Client({ url: svc.url, timeoutMargin: 0 });
      await assert.rejects(impatient.exec("echo late", { language: "bash", timeout: 1 }),
        expectError(SandboxUnavailableError, (err) => {
          assert.equal(err.code, "timeout");
          assert.match(err.message, /no reply within 1 s/);
          assert.equal(err.attempts, 1); // the request was sent: not retried
        }));
      await waitFor(async () => (await gauge(svc.url, "hexr_sandbox_queued_executions")) === 0, 15,
        "the service to drop the request whose client left");

      // A call aborted while its code runs rejects with the signal's reason; the service
      // kills the sandbox when the connection closes.
      controller.abort();
      await assert.rejects(holder, (err: unknown) => err instanceof Error && err.name === "AbortError");
      await waitFor(async () => (await gauge(svc.url, "hexr_sandbox_active_executions")) === 0, 15, "the sandbox to be killed");
      const m = await metrics(svc.url);
      assert.equal(m['hexr_sandbox_executions_total{language="bash",outcome="killed"}'], 1);

      const already = AbortSignal.abort();
      await assert.rejects(client.exec("echo 1", { language: "bash", signal: already }),
        (err: unknown) => err instanceof Error && err.name === "AbortError");
    });
  });
});
