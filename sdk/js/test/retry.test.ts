/**
 * Retries against real services: a service restarted under a waiting call (503 while
 * it drains, refused while it is down, then the new instance answers), over TCP and
 * over a unix socket; 429 with Retry-After waited out; and the bounds (the retry
 * count, the total wait), counted by the service itself.
 */

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";

import { Client, type RetryEvent, SandboxOverloadedError } from "../src/index.js";
import { freePort, gauge, metrics, rawRequest, type Service, startService, waitFor } from "./service.js";

const active = (svc: Service) => gauge(svc.url, "hexr_sandbox_active_executions");

describe("retries", { concurrency: true }, () => {
  for (const transport of ["tcp", "unix"] as const) {
    test(`a restarted service (${transport}): 503 while draining, refused while down, then the new one`, async () => {
      const sockdir = mkdtempSync(join(tmpdir(), "hxs-js-restart-"));
      const listen = transport === "unix" ? `unix:${sockdir}/sock` : `127.0.0.1:${await freePort()}`;
      let old: Service | undefined;
      let fresh: Service | undefined;
      try {
        // The drain ends after 1 s, killing what still runs. SIGTERM is sent once the
        // holder has printed (an event, not a time): a holder still starting when the
        // drain's second is over would be killed before its echo, under load.
        old = await startService({ listen, env: { DRAIN_TIMEOUT: "1s" } });
        const url = old.url;
        let begun!: () => void;
        const printed = new Promise<void>((resolve) => { begun = resolve; });
        const holder = new Client({ url, retries: 0 }).exec("echo begun; sleep 30", {
          language: "bash",
          onStdout: (text) => { if (text.includes("begun")) begun(); },
        });
        await Promise.race([printed, holder]);
        assert.equal(await active(old), 1, "the old service's execution runs");
        old.signal("SIGTERM");
        await waitFor(async () => (await rawRequest(url, "GET", "/health")).status === 503, 10, "/health to say draining");

        const events: RetryEvent[] = [];
        const client = new Client({
          url, retries: 10, retryBackoff: 0.1, retryWaitMax: 30, onRetry: (e) => events.push(e),
        });
        const call = client.exec("echo new", { language: "bash" });
        call.catch(() => undefined); // awaited below; a failed assertion before must not leave it unhandled

        const killed = await holder; // at the drain's deadline
        assert.equal(killed.stdout, "begun\n");
        assert.equal(killed.signal, 9);
        assert.equal(await old.wait(30), 0);
        await waitFor(() => events.some((e) => e.error.code === "connection_failed"), 15, "a refused retry");
        fresh = await startService({ listen });

        const result = await call;
        assert.equal(result.stdout, "new\n");
        assert.equal(events[0]!.error.status, 503);
        assert.equal(events[0]!.error.code, "draining");
        for (const e of events) {
          assert.ok(e.error.code === "draining" || e.error.code === "connection_failed", e.error.message);
          assert.ok(e.delay > 0, String(e.delay));
        }
        assert.match(events.find((e) => e.error.code === "connection_failed")!.error.message,
          transport === "unix" ? /ENOENT|ECONNREFUSED/ : /ECONNREFUSED/);
        // The old instance ran nothing of it (it counted its refusals as draining).
        const drained = events.filter((e) => e.error.code === "draining").length;
        assert.ok(old.jsonLog().filter((r) => r["event"] === "exec" && r["error"] === "draining").length >= drained);
        assert.equal(fresh.jsonLog().filter((r) => r["event"] === "exec" && r["status"] === 200).length, 1);
      } finally {
        const codes = await Promise.all([old?.stop(), fresh?.stop()]);
        rmSync(sockdir, { recursive: true, force: true });
        assert.ok(codes.every((c) => c === undefined || c === 0), `exit codes ${codes}`);
      }
    });
  }

  test("429 with Retry-After: waited out, bounded by the retry count and by the total wait", async () => {
    const svc = await startService({ env: { MAX_CONCURRENT: "1", MAX_QUEUE: "0" } });
    try {
      const overloaded = async () =>
        (await metrics(svc.url))['hexr_sandbox_rejected_requests_total{reason="overloaded"}'];
      const plain = new Client({ url: svc.url, retries: 0 });

      // Waited out: the call gets through once the holder's slot is free.
      let holder = plain.exec("sleep 2; echo held", { language: "bash" });
      await waitFor(async () => (await active(svc)) === 1, 30, "the slot to be taken");
      const events: RetryEvent[] = [];
      const patient = new Client({ url: svc.url, retries: 10, onRetry: (e) => events.push(e) });
      const result = await patient.exec("echo through", { language: "bash" });
      assert.equal(result.stdout, "through\n");
      assert.equal((await holder).stdout, "held\n");
      assert.ok(events.length >= 1);
      for (const e of events) {
        assert.ok(e.error instanceof SandboxOverloadedError);
        assert.equal(e.error.status, 429);
        assert.ok(e.error.retryAfter !== null && e.error.retryAfter >= 1);
        assert.equal(e.delay, e.error.retryAfter, "waits as long as the service asked");
      }
      assert.equal(await overloaded(), events.length, "one 429 per retry, no more");

      // Bounded: one retry means two requests, then the last 429 is thrown. The holder
      // keeps the slot until it is aborted.
      const controller = new AbortController();
      const blocker = plain.exec("sleep 30", { language: "bash", signal: controller.signal });
      await waitFor(async () => (await active(svc)) === 1, 30, "the slot to be taken again");
      const before = await overloaded();
      await assert.rejects(new Client({ url: svc.url, retries: 1 }).exec("echo x", { language: "bash" }),
        (err: unknown) => err instanceof SandboxOverloadedError && err.attempts === 2);
      assert.equal(await overloaded(), before! + 2);
      // A Retry-After beyond the wait left (retryWaitMax) is not waited for: thrown at once.
      await assert.rejects(new Client({ url: svc.url, retryWaitMax: 0.5 }).exec("echo x", { language: "bash" }),
        (err: unknown) => err instanceof SandboxOverloadedError && err.attempts === 1 && err.retryAfter! >= 1);
      assert.equal(await overloaded(), before! + 3);
      controller.abort();
      await assert.rejects(blocker, { name: "AbortError" });
      await waitFor(async () => (await active(svc)) === 0, 15, "the blocker's sandbox to be killed");
    } finally {
      assert.equal(await svc.stop(), 0);
    }
  });
});
