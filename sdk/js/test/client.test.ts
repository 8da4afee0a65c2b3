/**
 * The client against the real service, over TCP and over a unix socket: results,
 * options (files in and out, streamed output), 400s naming the field, the address
 * forms; and the pure parts (address parsing, Retry-After, result decoding) on their own.
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, openAsBlob, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import * as hexr from "../src/index.js";
import {
  Client,
  DEFAULT_URL,
  ExecResult,
  parseUrl,
  RETRIES_ENV,
  SandboxInternalError,
  SandboxOverloadedError,
  SandboxRequestError,
  SandboxUnavailableError,
  URL_ENV,
} from "../src/index.js";
import { parseRetryAfter } from "../src/reply.js";
import { checkRetries, delayFor, RetryPolicy } from "../src/retry.js";
import { freePort, type Service, startService } from "./service.js";

let tcp: Service;
let unix: Service;
let sockdir: string;

before(async () => {
  sockdir = mkdtempSync(join(tmpdir(), "hxs-js-sock-"));
  [tcp, unix] = await Promise.all([
    startService(),
    startService({ listen: `unix:${sockdir}/sock` }),
  ]);
  process.env[URL_ENV] = tcp.url;
});

after(async () => {
  const codes = await Promise.all([tcp.stop(), unix.stop()]);
  rmSync(sockdir, { recursive: true, force: true });
  assert.deepEqual(codes, [0, 0], "a service did not stop cleanly");
});

function assertCleanSuccess(result: ExecResult, stdout: string): void {
  assert.equal(result.stdout, stdout);
  assert.equal(result.stderr, "");
  assert.equal(result.exitCode, 0);
  assert.equal(result.ok, true);
  assert.equal(result.output, result.stdout);
  assert.ok(Number.isInteger(result.durationMs) && result.durationMs >= 0);
  assert.ok(typeof result.memoryUsedMb === "number" && result.memoryUsedMb >= 0);
  assert.equal(result.timedOut, false);
  assert.equal(result.oomKilled, false);
  assert.equal(result.signal, null);
  assert.equal(result.stdoutTruncated, false);
  assert.equal(result.stderrTruncated, false);
}

describe("results", () => {
  for (const [language, code] of [
    ["python", "print(6 * 7)"],
    ["javascript", "console.log(6 * 7)"],
    ["js", "console.log(6 * 7)"],
    ["node", "console.log(6 * 7)"],
    ["bash", "echo $((6 * 7))"],
    ["shell", "echo $((6 * 7))"],
    ["sh", "echo $((6 * 7))"],
  ] as const) {
    test(`language ${language}`, async () => {
      assertCleanSuccess(await hexr.exec(code, { language }), "42\n");
    });
  }

  test("a failing program is a result, with its status", async () => {
    const result = await hexr.exec("import sys; print('out'); sys.exit(3)");
    assert.equal(result.ok, false);
    assert.equal(result.exitCode, 3);
    assert.equal(result.stdout, "out\n");
  });

  test("the time limit kills and flags", async () => {
    const result = await hexr.exec("sleep 30", { language: "bash", timeout: 1 });
    assert.equal(result.timedOut, true);
    assert.equal(result.exitCode, 124);
    assert.equal(result.ok, false);
  });

  test("killed by a signal", async () => {
    const result = await hexr.exec("kill -TERM $$", { language: "bash" });
    assert.equal(result.signal, 15);
    assert.equal(result.exitCode, 128 + 15);
  });

  test("the memory limit kills and flags", async () => {
    const result = await hexr.exec("x = bytearray(200 * 1024 * 1024); print(len(x))", { memoryMb: 64 });
    assert.equal(result.oomKilled, true);
    assert.equal(result.exitCode, 137);
  });

  test("why the sandbox ended a program, in words; a program that ended by itself has no error", async () => {
    const timed = await hexr.exec("import time\nprint('before', end='')\ntime.sleep(30)\n", { timeout: 1 });
    assert.deepEqual(timed.error, { type: "timeout", message: "killed: time limit of 1 s exceeded" });
    assert.ok(timed.stderr.endsWith(`hexr-sandbox: ${timed.error.message}\n`), timed.stderr);
    assert.equal(timed.stdout, "before");
    const oom = await hexr.exec("x = bytearray(200 * 1024 * 1024)", { memoryMb: 64 });
    assert.equal(oom.error?.type, "memory_limit");
    assert.equal((await hexr.exec("import sys; sys.exit(3)")).error, null);
  });

  test("a long output keeps its head and tail", async () => {
    const result = await hexr.exec("print('HEAD'); print('x' * 3000000); print('TAIL')");
    assert.ok(result.stdoutTruncated && result.stdoutOmittedBytes > 0);
    assert.ok(result.stdout.startsWith("HEAD\n") && result.stdout.endsWith("TAIL\n"));
    assert.ok(result.stdout.includes(`[hexr-sandbox: ${result.stdoutOmittedBytes} bytes left out]`));
  });

  test("envVars as an object or a Map, stdin, unicode", async () => {
    let result = await hexr.exec("echo \"$A-$B\"", { language: "bash", envVars: { A: "1", B: "é" } });
    assertCleanSuccess(result, "1-é\n");
    result = await hexr.exec("echo \"$A\"", { language: "bash", envVars: new Map([["A", "from a map"]]) });
    assertCleanSuccess(result, "from a map\n");
    result = await hexr.exec("import sys; print(sys.stdin.read().upper())", { stdin: "ünïcode ✓" });
    assertCleanSuccess(result, "ÜNÏCODE ✓\n");
  });

  test("packages the image has cost nothing; a Set is an iterable", async () => {
    const result = await hexr.exec("import numpy, scipy; print('ok')", { packages: new Set(["numpy", "scipy"]) });
    assertCleanSuccess(result, "ok\n");
  });

  test("large code travels in the body (100-continue), not as an argument", async () => {
    const code = "x = 1\n" + "#".repeat(300 * 1024) + "\nprint(x)\n";
    assertCleanSuccess(await hexr.exec(code), "1\n");
  });

  test("lone surrogates are sent escaped for the service to judge", async () => {
    await assert.rejects(hexr.exec("print('\ud800')"), (err: unknown) => {
      assert.ok(err instanceof SandboxRequestError, String(err));
      assert.equal(err.status, 400);
      assert.match(err.message, /code/);
      return true;
    });
  });

  test("onStdout, onStderr and stream() carry the whole output", async () => {
    const code = "import sys, time\nfor i in range(3):\n    print('out', i, flush=True)\n" +
      "    print('err', i, file=sys.stderr, flush=True)\n    time.sleep(0.05)\n";
    const out: string[] = [];
    const err: string[] = [];
    const result = await hexr.exec(code, { onStdout: (t) => void out.push(t), onStderr: (t) => void err.push(t) });
    assert.equal(out.join(""), "out 0\nout 1\nout 2\n");
    assert.equal(result.stdout, out.join(""));
    assert.equal(err.join(""), result.stderr);
    const events: hexr.StreamEvent[] = [];
    for await (const event of hexr.stream("cat; echo done", { language: "bash", stdin: "piped\n" })) events.push(event);
    const last = events[events.length - 1];
    assert.ok(last?.type === "result");
    assert.equal(last.result.stdout, "piped\ndone\n");
    assert.equal(events.map((e) => (e.type === "stdout" ? e.text : "")).join(""), last.result.stdout);
  });

  test("output a second apart comes in separate chunks; bytes that are not UTF-8 stay exact", async () => {
    const chunks: string[] = [];
    await hexr.exec("import time\nprint('first', flush=True)\ntime.sleep(0.5)\nprint('second', flush=True)\n", {
      onStdout: (t) => void chunks.push(t),
    });
    assert.equal(chunks.join(""), "first\nsecond\n");
    assert.ok(chunks.findIndex((c) => c.includes("first")) < chunks.findIndex((c) => c.includes("second")), String(chunks));
    const bytes: number[] = [];
    for await (const event of hexr.stream("import sys\nsys.stdout.buffer.write(b'caf\\xe9\\n')\n")) {
      if (event.type === "stdout") bytes.push(...event.data);
    }
    assert.deepEqual(Buffer.from(bytes), Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]));
  });

  test("files in (inline and a Blob, multipart), files out, returnFiles, a refused path", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hxs-js-up-"));
    try {
      const local = join(dir, "big.bin");
      writeFileSync(local, Buffer.alloc(3 << 20, 7));
      const code = "import hashlib, os, shutil\nos.makedirs('output', exist_ok=True)\n" +
        "shutil.copy('in.bin', 'output/copy.bin')\nopen('a.log', 'w').write('log')\n" +
        "print(hashlib.sha256(open('big.bin', 'rb').read()).hexdigest())\n";
      const blob = new Uint8Array(Array.from({ length: 256 }, (_, i) => i));
      const result = await hexr.exec(code, {
        files: { "in.bin": blob, "big.bin": await openAsBlob(local) }, returnFiles: ["*.log"],
      });
      assert.equal(result.ok, true, result.stderr);
      assert.equal(result.stdout.trim(), createHash("sha256").update(Buffer.alloc(3 << 20, 7)).digest("hex"));
      assert.deepEqual(Buffer.from(result.files.get("output/copy.bin")!), Buffer.from(blob));
      assert.deepEqual(Buffer.from(result.files.get("a.log")!).toString(), "log");
      await assert.rejects(hexr.exec("print(1)", { files: { "../x": "x" } }),
        (err: unknown) => err instanceof SandboxRequestError && err.status === 400 && err.message.includes("files[0].path"));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a chart shown with plt.show() comes back as output/figure-1.png", async () => {
    const code = "import pandas as pd, matplotlib.pyplot as plt\ndf = pd.read_csv('d.csv')\n" +
      "print(df['b'].sum())\ndf.plot()\nplt.show()\n";
    const result = await hexr.exec(code, { files: { "d.csv": "a,b\n1,2\n3,4\n" } });
    assert.equal(result.ok, true, result.stderr);
    assert.equal(result.stdout, "6\n");
    const png = result.files.get("output/figure-1.png");
    assert.ok(png !== undefined, [...result.files.keys()].join(", "));
    assert.deepEqual(Buffer.from(png.subarray(0, 8)), Buffer.from("\x89PNG\r\n\x1a\n", "latin1"));
    assert.equal(result.fileInfo.find((f) => f.path === "output/figure-1.png")?.mime, "image/png");
  });

  test("twenty concurrent calls", async () => {
    const client = new Client({ url: tcp.url });
    const code = "import os\nn = int(os.environ['N'])\nprint(n, n * n)\n";
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => client.exec(code, { envVars: { N: String(i) } })),
    );
    results.forEach((r, i) => assertCleanSuccess(r, `${i} ${i * i}\n`));
  });

  test("a fresh sandbox per call", async () => {
    await hexr.exec("echo leftover > /tmp/mark", { language: "bash" });
    const result = await hexr.exec("cat /tmp/mark 2>/dev/null || echo none", { language: "bash" });
    assertCleanSuccess(result, "none\n");
  });
});

describe("rejected requests", () => {
  test("an unknown language is a 400 naming the field", async () => {
    await assert.rejects(hexr.exec("IDENTIFICATION DIVISION.", { language: "cobol" }), (err: unknown) => {
      assert.ok(err instanceof SandboxRequestError);
      assert.equal(err.status, 400);
      assert.equal(err.code, "invalid_request");
      assert.match(err.message, /language/);
      assert.equal(err.attempts, 1);
      assert.equal(err.name, "SandboxRequestError");
      return true;
    });
  });

  for (const [options, field] of [
    [{ timeout: 10 ** 6 }, "timeout"],
    [{ timeout: 1.5 }, "timeout"],
    [{ memoryMb: 10 ** 7 }, "memory_mb"],
    [{ timeout: -1 }, "timeout"],
    [{ envVars: { A: 1 } as unknown as Record<string, string> }, "env_vars"],
    [{ envVars: { "1A": "x" } }, "env_vars"],
    [{ packages: "numpy" as unknown as string[] }, "packages"],
  ] as const) {
    test(`${JSON.stringify(options)} is a 400 naming ${field}`, async () => {
      await assert.rejects(hexr.exec("print(1)", options), (err: unknown) => {
        assert.ok(err instanceof SandboxRequestError, String(err));
        assert.equal(err.status, 400);
        assert.ok(err.message.includes(field), err.message);
        return true;
      });
    });
  }

  test("an option the SDK does not know is a TypeError naming it, and nothing is sent", async () => {
    const client = new Client({ url: `http://127.0.0.1:${await freePort()}` });
    await assert.rejects(
      client.exec("print(1)", { memory_mb: 64 } as never),
      (err: unknown) => err instanceof TypeError && /"memory_mb"/.test(err.message) && /memoryMb/.test(err.message),
    );
    await assert.rejects(client.exec(42 as never), /code must be a string, not number/);
    assert.throws(() => new Client({ urll: "x" } as never), /unknown option "urll"/);
    assert.throws(() => new Client({ retry: 3 } as never), /unknown option "retry"/);
    assert.throws(() => new Client({ retries: 11 }), /retries must be an integer from 0 to 10, not 11/);
    assert.throws(() => new Client({ retries: 1.5 }), /retries must be an integer/);
  });
});

describe("addresses", () => {
  test("unix:/path, unix:///path and http+unix:// reach a unix socket", async () => {
    const path = unix.url.slice("unix:".length);
    for (const url of [unix.url, `unix://${path}`, `http+unix://${encodeURIComponent(path)}`]) {
      const client = new Client({ url });
      assertCleanSuccess(await client.exec("print('over unix')"), "over unix\n");
      assert.equal(await client.isEnabled(), true, url);
    }
    assert.equal(new Client(unix.url).url, unix.url);
  });

  test("HEXR_SANDBOX_URL is read at every call", async () => {
    const saved = process.env[URL_ENV];
    try {
      process.env[URL_ENV] = unix.url;
      assertCleanSuccess(await hexr.exec("print('env unix')"), "env unix\n");
      assert.equal(await hexr.isEnabled(), true);
      process.env[URL_ENV] = `http://127.0.0.1:${await freePort()}`;
      assert.equal(await hexr.isEnabled(), false);
      process.env[URL_ENV] = "";
      assert.equal(new Client().url, DEFAULT_URL);
      process.env[URL_ENV] = "ftp://nowhere";
      await assert.rejects(hexr.exec("print(1)"), (err: unknown) => {
        assert.ok(err instanceof SandboxUnavailableError);
        assert.equal(err.code, "invalid_url");
        assert.match(err.message, /HEXR_SANDBOX_URL is not a valid sandbox address: .*unsupported scheme "ftp"/);
        return true;
      });
      assert.equal(await hexr.isEnabled(), false);
    } finally {
      process.env[URL_ENV] = saved;
    }
  });

  test("HEXR_SANDBOX_RETRIES is read at every call; an explicit retries wins", async () => {
    const saved = process.env[RETRIES_ENV];
    const url = `http://127.0.0.1:${await freePort()}`; // refused: retried
    const attempts = async (client: Client) => {
      const err = await client.exec("print(1)").then(() => null, (e: unknown) => e);
      assert.ok(err instanceof SandboxUnavailableError && err.code === "connection_failed", String(err));
      return err.attempts;
    };
    try {
      delete process.env[RETRIES_ENV];
      const client = new Client({ url, retryBackoff: 0.001 });
      assert.equal(await attempts(client), 3);
      process.env[RETRIES_ENV] = "0";
      assert.equal(await attempts(client), 1);
      process.env[RETRIES_ENV] = " 4 ";
      assert.equal(await attempts(client), 5);
      assert.equal(await attempts(new Client({ url, retryBackoff: 0.001, retries: 1 })), 2);
      // Waits are bounded in all: the first is 0.05 to 0.1 s, the second 0.1 to 0.2 s.
      assert.equal(await attempts(new Client({ url, retryBackoff: 0.1, retryWaitMax: 0.14 })), 2);
      for (const bad of ["11", "-1", "2.5", "two"]) {
        process.env[RETRIES_ENV] = bad;
        await assert.rejects(client.exec("print(1)"), new RegExp(`HEXR_SANDBOX_RETRIES must be an integer from 0 to 10, not "${bad}"`));
      }
    } finally {
      if (saved === undefined) delete process.env[RETRIES_ENV];
      else process.env[RETRIES_ENV] = saved;
    }
  });

  test("an explicit url wins over the environment", async () => {
    const saved = process.env[URL_ENV];
    process.env[URL_ENV] = `http://127.0.0.1:${await freePort()}`;
    try {
      assertCleanSuccess(await new Client({ url: tcp.url }).exec("print(6 * 7)"), "42\n");
    } finally {
      process.env[URL_ENV] = saved;
    }
  });

  test("host:port and :port are http://, as LISTEN_ADDRESS writes them", async () => {
    const port = tcp.address.split(":").pop()!;
    assertCleanSuccess(await new Client(`127.0.0.1:${port}`).exec("print(1)"), "1\n");
    assertCleanSuccess(await new Client(`:${port}`).exec("print(2)"), "2\n");
  });

  test("health() is the /health document", async () => {
    const health = await new Client(tcp.url).health();
    assert.equal(health["status"], "ok");
    assert.equal(health["backend"], "namespaces");
    assert.ok(Array.isArray(health["languages"]));
  });

  test("parseUrl takes the Python SDK's forms", () => {
    const cases: [string, Partial<ReturnType<typeof parseUrl>>][] = [
      ["http://127.0.0.1:8080", { scheme: "http", host: "127.0.0.1", port: 8080, basePath: "" }],
      ["http://Example.COM", { scheme: "http", host: "example.com", port: 80 }],
      ["HTTPS://h", { scheme: "https", host: "h", port: 443 }],
      ["https://h:8443/sandbox/", { scheme: "https", port: 8443, basePath: "/sandbox" }],
      ["http://h:9/p?q=1#f", { port: 9, basePath: "/p" }],
      ["http://[::1]:8080", { host: "::1", port: 8080 }],
      ["localhost:9000", { scheme: "http", host: "localhost", port: 9000 }],
      [":9000", { scheme: "http", host: "127.0.0.1", port: 9000 }],
      ["http://h:", { port: 80 }],
      ["  http://h:1  ", { host: "h", port: 1 }],
      ["unix:/run/x.sock", { scheme: "unix", socketPath: "/run/x.sock", host: "localhost", port: 0 }],
      ["unix:///run/x.sock", { scheme: "unix", socketPath: "/run/x.sock" }],
      ["unix:rel.sock", { scheme: "unix", socketPath: "rel.sock" }],
      ["unix:/run/with space.sock", { scheme: "unix", socketPath: "/run/with space.sock" }],
      ["http+unix://%2Frun%2Fx.sock/api", { scheme: "unix", socketPath: "/run/x.sock", basePath: "/api" }],
    ];
    for (const [url, expected] of cases) {
      const got = parseUrl(url);
      for (const [k, v] of Object.entries(expected)) {
        assert.equal(got[k as keyof typeof got], v, `${url}: ${k}`);
      }
      assert.equal(got.url, url);
    }
    for (const [url, why] of [
      ["", /empty/],
      ["   ", /empty/],
      ["ftp://h", /unsupported scheme "ftp"/],
      ["http://u:p@h", /user information/],
      ["http://h:port", /invalid port/],
      ["http://h:65536", /invalid port/],
      ["http://h:-1", /invalid port/],
      ["http://[::1", /unclosed IPv6/],
      ["http://h/a b", /space/],
      ["http://h/\r\nX: y", /control characters/],
      ["unix:", /no socket path/],
      ["unix://", /no socket path/],
      ["http+unix://", /no socket path/],
    ] as const) {
      assert.throws(() => parseUrl(url), (err: unknown) => err instanceof TypeError && why.test(err.message), url);
      assert.throws(() => new Client({ url }), TypeError, url);
    }
  });
});

describe("decoding", () => {
  test("Retry-After: seconds, HTTP dates, garbage", () => {
    assert.equal(parseRetryAfter("3"), 3);
    assert.equal(parseRetryAfter(" 1.5 "), 1.5);
    assert.equal(parseRetryAfter("-4"), 0);
    assert.equal(parseRetryAfter(undefined), null);
    assert.equal(parseRetryAfter(""), null);
    assert.equal(parseRetryAfter("soon"), null);
    assert.equal(parseRetryAfter("0x10"), null);
    assert.equal(parseRetryAfter("1e999"), null);
    const now = Date.parse("Tue, 01 Dec 2026 10:00:00 GMT");
    assert.equal(parseRetryAfter("Tue, 01 Dec 2026 10:00:30 GMT", now), 30);
    assert.equal(parseRetryAfter("Tue, 01 Dec 2026 09:00:00 GMT", now), 0);
  });

  test("which errors are retried, and how long the waits are", () => {
    const refused = new SandboxUnavailableError("x", { code: "connection_failed" });
    const draining = new SandboxUnavailableError("x", { status: 503, code: "draining" });
    const proxy = new SandboxUnavailableError("x", { status: 502, code: "http_502" });
    const lost = new SandboxUnavailableError("x", { code: "connection_closed" });
    const late = new SandboxUnavailableError("x", { code: "timeout" });
    const busy = new SandboxOverloadedError("x", { code: "overloaded", retryAfter: 3 });
    const busyNoHint = new SandboxOverloadedError("x", { code: "overloaded" });
    const failed = new SandboxInternalError("x", { status: 500, code: "sandbox_setup_failed" });
    const rejected = new SandboxRequestError("x", { status: 400, code: "invalid_request" });
    assert.equal(delayFor(refused, 0, 0.25, () => 0), 0.125);
    assert.equal(delayFor(refused, 2, 0.25, () => 1), 1);
    assert.equal(delayFor(draining, 1, 0.25, () => 0.5), 0.375);
    assert.equal(delayFor(busy, 0, 0.25), 3);
    for (const e of [proxy, lost, late, busyNoHint, failed, rejected]) assert.equal(delayFor(e, 0, 0.25), null, e.code!);
    const policy = new RetryPolicy(2, 10, 0.25);
    assert.equal(policy.nextWait(busy, 0, 0), 3);
    assert.equal(policy.nextWait(busy, 1, 7), 3);
    assert.equal(policy.nextWait(busy, 1, 7.5), null); // past the total wait
    assert.equal(policy.nextWait(busy, 2, 0), null); // past the count
    assert.equal(checkRetries("+3"), 3);
    assert.throws(() => checkRetries(true), TypeError);
  });

  test("ExecResult.fromResponse fills neutral defaults and refuses wrong types", () => {
    const r = ExecResult.fromResponse({ exit_code: 0, stdout: "x", extra: 1, id: 7 });
    assert.equal(r.stdout, "x");
    assert.equal(r.stderr, "");
    assert.equal(r.signal, null);
    assert.equal(r.timedOut, false);
    assert.equal(r.id, "7");
    assert.equal(JSON.stringify(ExecResult.fromResponse({ exit_code: 1, execution_time_ms: 2.6 })),
      '{"stdout":"","stderr":"","exit_code":1,"execution_time_ms":3,"memory_used_mb":0,"timed_out":false,' +
        '"oom_killed":false,"signal":null,"stdout_truncated":false,"stderr_truncated":false}');
    for (const [doc, why] of [
      [[], /not a JSON object/],
      [null, /not a JSON object/],
      [{ stdout: "" }, /integer 'exit_code'/],
      [{ exit_code: 1.5 }, /integer 'exit_code'/],
      [{ exit_code: 0, stdout: 3 }, /'stdout' is not a string/],
      [{ exit_code: 0, timed_out: 1 }, /'timed_out' is not a boolean/],
      [{ exit_code: 0, signal: "9" }, /'signal' is not an integer/],
      [{ exit_code: 0, memory_used_mb: "1" }, /'memory_used_mb' is not a number/],
    ] as const) {
      assert.throws(() => ExecResult.fromResponse(doc), (err: unknown) => {
        return err instanceof SandboxInternalError && err.code === "bad_response" && err.status === 200 &&
          why.test(err.message);
      }, JSON.stringify(doc));
    }
  });
});
