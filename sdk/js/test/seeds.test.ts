/**
 * The SDK examples of the three product pages, in TypeScript, against the real service.
 *
 * Each example is the page's Python turned into this SDK's calls (`await exec(code,
 * { ... })`, camelCase options and fields); the code strings sent to the sandbox are
 * the pages' own. What the pages print is printed here too (`print` below writes it to
 * stdout and keeps it for the assertions), and each result is compared with running the
 * same code directly on the host (/usr/bin/python3, /usr/bin/node, /bin/bash): the
 * sandbox uses the host's runtimes, so stdout must be byte-identical, except where a
 * test says why not (random numbers, `uname -a`, the sandbox's own /tmp and user).
 *
 * The pages' `hexr_agent` / `hexr_llm` are not part of this project: decorated
 * functions become plain functions, and the LLM's code is a fixed Fibonacci program.
 *
 * Last, the files and charts flow the pages lead to (this SDK's README): a CSV from disk
 * in, its describe() and a chart out, followed as a stream.
 */

import assert from "node:assert/strict";
import { mkdtempSync, openAsBlob, readFileSync, rmSync, writeFileSync } from "node:fs";
import { arch, tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, beforeEach, test } from "node:test";

import * as hexr from "../src/index.js";
import { exec, ExecResult, SandboxRequestError } from "../src/index.js";
import { hostRun, type Service, startService } from "./service.js";

let svc: Service;
let printed: string[] = [];

/** Python's print(): writes the line and records it. */
function print(...values: unknown[]): void {
  const line = values.map(String).join(" ") + "\n";
  process.stdout.write(line);
  printed.push(line);
}

before(async () => {
  svc = await startService();
  process.env["HEXR_SANDBOX_URL"] = svc.url;
});

after(async () => {
  assert.equal(await svc.stop(), 0, "the service did not stop cleanly:\n" + svc.log().slice(-3000));
});

beforeEach(() => {
  printed = [];
});

function assertSameAsHost(
  result: ExecResult,
  code: string,
  language: "python" | "javascript" | "bash" = "python",
  envVars: Record<string, string> = {},
) {
  const host = hostRun(code, language, envVars);
  assert.equal(result.stdout, host.stdout);
  assert.equal(result.exitCode, host.status);
  return host;
}

/** A printed DataFrame.describe() as {row: {column: value}}. */
function describeTable(text: string): Record<string, Record<string, number>> {
  const lines = text.split("\n").filter((l) => l.trim());
  const columns = lines[0]!.trim().split(/\s+/);
  const table: Record<string, Record<string, number>> = {};
  for (const line of lines.slice(1)) {
    const parts = line.trim().split(/\s+/);
    if (!["count", "mean", "std", "min", "25%", "50%", "75%", "max"].includes(parts[0]!)) continue;
    assert.equal(parts.length, columns.length + 1, line);
    table[parts[0]!] = Object.fromEntries(columns.map((c, i) => [c, Number(parts[i + 1])]));
  }
  return table;
}

// ---- the SDK page (hexr.sandbox) -------------------------------------------------------

const QUICK_START = `
import pandas as pd
df = pd.DataFrame({'x': [1, 2, 3], 'y': [4, 5, 6]})
print(df.describe())
`;

test("quick start: pandas describe()", async () => {
  const result = await hexr.exec(QUICK_START);

  print(result.stdout);

  assert.deepEqual(printed, [result.stdout + "\n"]);
  assert.ok(result.ok, result.stderr);
  // The page shows six decimals; pandas decides the layout (the host's pandas here),
  // so the values are checked, and the bytes against a host run.
  assert.deepEqual(describeTable(result.stdout), {
    count: { x: 3, y: 3 },
    mean: { x: 2, y: 5 },
    std: { x: 1, y: 1 },
    min: { x: 1, y: 4 },
    "25%": { x: 1.5, y: 4.5 },
    "50%": { x: 2, y: 5 },
    "75%": { x: 2.5, y: 5.5 },
    max: { x: 3, y: 6 },
  });
  assertSameAsHost(result, QUICK_START);
});

test("env_vars", async () => {
  const result = await hexr.exec(
    "import os; print(os.environ['MY_VAR'])",
    { envVars: { MY_VAR: "hello" } },
  );
  assert.equal(result.stdout, "hello\n");
  assert.ok(result.ok);
  assertSameAsHost(result, "import os; print(os.environ['MY_VAR'])", "python", { MY_VAR: "hello" });
});

test("packages", async () => {
  const result = await hexr.exec(
    "import numpy; print(numpy.random.rand(3))",
    { packages: ["numpy"] },
  );
  assert.ok(result.ok, result.stderr);
  // Random numbers differ from run to run: the shape is compared.
  const float = String.raw`[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?`;
  const triple = new RegExp(String.raw`^\[\s*(${float})\s+(${float})\s+(${float})\s*\]\n$`);
  const m = triple.exec(result.stdout);
  assert.ok(m, JSON.stringify(result.stdout));
  for (const v of m.slice(1)) assert.ok(Number(v) >= 0 && Number(v) < 1);
  assert.match(hostRun("import numpy; print(numpy.random.rand(3))").stdout, triple);
  assert.equal(result.stderr, "");
});

test("ExecResult", async () => {
  const result = await hexr.exec("print('hello')");

  assert.equal(result.stdout, "hello\n"); // "hello\n"
  assert.equal(result.stderr, ""); // ""
  assert.equal(result.exitCode, 0); // 0
  assert.ok(Number.isInteger(result.durationMs) && result.durationMs >= 0); // 1234
  assert.equal(result.ok, true); // True (exit_code == 0)
  assert.equal(result.output, result.stdout); // Alias for stdout
  assert.ok(result.id && /^[0-9a-f]{32}$/.test(result.id), String(result.id));
  assert.deepEqual(Object.keys(result.toJSON()).sort(), [
    "execution_time_ms", "exit_code", "id", "memory_used_mb", "oom_killed", "signal",
    "stderr", "stderr_truncated", "stdout", "stdout_truncated", "timed_out",
  ]);
  assertSameAsHost(result, "print('hello')");
});

test("async version (every call is async here)", async () => {
  const result = await exec("print('hello')");
  assert.equal(result.stdout, "hello\n");
  assert.ok(result.ok);
});

test("check availability", async () => {
  let result: ExecResult | undefined;
  if (await hexr.isEnabled()) {
    result = await hexr.exec("print('sandbox available')");
  } else {
    print("Sandbox not available in this environment");
  }
  assert.deepEqual(printed, []);
  assert.equal(result?.stdout, "sandbox available\n");
});

const DATA_ANALYSIS = `
import pandas as pd
import json

data = [
    {"name": "Alice", "score": 92},
    {"name": "Bob", "score": 85},
    {"name": "Charlie", "score": 78}
]
df = pd.DataFrame(data)
print(json.dumps({
    "mean": df['score'].mean(),
    "median": df['score'].median(),
    "std": df['score'].std()
}))
`;

test("data analysis", async () => {
  const result = await hexr.exec(DATA_ANALYSIS, { packages: ["pandas"] });

  const stats = JSON.parse(result.stdout);

  assert.deepEqual(stats, { mean: 85, median: 85, std: 7 });
  assert.ok(result.ok, result.stderr);
  assertSameAsHost(result, DATA_ANALYSIS);
});

test("shell commands", async () => {
  const result = await hexr.exec(
    "ls -la /tmp && whoami && cat /etc/os-release",
    { language: "shell" },
  );
  print(result.stdout);

  assert.deepEqual(printed, [result.stdout + "\n"]);
  assert.ok(result.ok, result.stderr);
  // Not the host's byte for byte: the sandbox has its own empty /tmp and runs as the
  // `sandbox` user; its /etc/os-release is the host's (the runtimes are the host's).
  const tail = "sandbox\n" + readFileSync("/etc/os-release", "utf8");
  assert.ok(result.stdout.endsWith(tail), result.stdout);
  const listing = result.stdout.slice(0, result.stdout.length - tail.length).split("\n").filter(Boolean);
  assert.match(listing[0]!, /^total /);
  assert.deepEqual(listing.slice(1).map((l) => l.split(/\s+/).pop()).sort(), [".", ".."]);
  assert.ok(listing.slice(1).every((l) => l.startsWith("d")), listing.join("\n"));
});

test("error handling: 1/0", async () => {
  const result = await hexr.exec("1/0"); // ZeroDivisionError

  if (!result.ok) {
    print(`Exit code: ${result.exitCode}`);
    print(`Error: ${result.stderr}`);
  }

  assert.equal(printed[0], "Exit code: 1\n");
  assert.ok(printed[1]!.startsWith("Error: Traceback"), printed[1]);
  assert.match(result.stderr, /ZeroDivisionError/);
  const host = assertSameAsHost(result, "1/0");
  // Tracebacks name the file (<string> on the host); the last line is the same.
  const last = (s: string) => s.trimEnd().split("\n").pop();
  assert.equal(last(result.stderr), last(host.stderr));
  assert.equal(last(host.stderr), "ZeroDivisionError: division by zero");
});

// ---- the service page: its request body, sent through the SDK -------------------------

test("the service page's request body", async () => {
  const code = "import pandas as pd\nprint(pd.DataFrame({'a': [1,2,3]}).describe())";
  const result = await hexr.exec(code, { language: "python", timeout: 30, memoryMb: 256 });
  assert.ok(result.ok, result.stderr);
  assert.ok(result.stdout.startsWith("         a\ncount  3.0\nmean   2.0\n"), result.stdout); // as the page shows
  assert.ok(Number.isInteger(result.durationMs));
  assert.equal(typeof result.memoryUsedMb, "number");
  assertSameAsHost(result, code);
});

// ---- the guide page ----------------------------------------------------------------------

const BASIC = `
import pandas as pd
import numpy as np

data = pd.DataFrame({
    'revenue': [100, 200, 150, 300, 250],
    'costs': [80, 150, 100, 200, 180],
})
data['profit'] = data['revenue'] - data['costs']
print(data.describe().to_string())
print(f"\\nTotal profit: \${data['profit'].sum()}")
`;

test("basic usage", async () => {
  async function main(): Promise<ExecResult> { // @hexr_agent(name="data-analyst", tenant="acme-corp") on the page
    const result = await exec(`
import pandas as pd
import numpy as np

data = pd.DataFrame({
    'revenue': [100, 200, 150, 300, 250],
    'costs': [80, 150, 100, 200, 180],
})
data['profit'] = data['revenue'] - data['costs']
print(data.describe().to_string())
print(f"\\nTotal profit: \${data['profit'].sum()}")
`);

    print(result.stdout);
    // →         revenue  costs  profit
    //   count     5.00   5.00    5.00
    //   mean    200.00 142.00   58.00
    //   ...
    //   Total profit: $290
    return result;
  }

  const result = await main();
  assert.deepEqual(printed, [result.stdout + "\n"]);
  assert.ok(result.ok, result.stderr);
  assert.ok(result.stdout.endsWith("\n\nTotal profit: $290\n"), result.stdout);
  const table = describeTable(result.stdout.split("\n\nTotal profit")[0]!);
  assert.deepEqual(table["count"], { revenue: 5, costs: 5, profit: 5 });
  assert.deepEqual(table["mean"], { revenue: 200, costs: 142, profit: 58 });
  assertSameAsHost(result, BASIC);
});

// Stands in for hexr_llm(prompt="Write Python code to calculate the first 20 Fibonacci numbers").
const FIBONACCI = `def fibonacci(n):
    numbers = []
    a, b = 0, 1
    for _ in range(n):
        numbers.append(a)
        a, b = b, a + b
    return numbers


print(fibonacci(20))
`;

test("LLM + sandbox pattern", async () => {
  async function main(): Promise<ExecResult> { // @hexr_agent(name="code-agent", tenant="acme-corp")
    // Ask LLM to generate analysis code
    const code = FIBONACCI;

    // Execute safely in a sandbox
    const result = await exec(code, { language: "python", timeout: 10 });

    if (result.exitCode === 0) {
      print(`Output: ${result.stdout}`);
    } else {
      print(`Error: ${result.stderr}`);
    }
    return result;
  }

  const result = await main();
  const expected = "[0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987, 1597, 2584, 4181]\n";
  assert.equal(result.stdout, expected);
  assert.deepEqual(printed, ["Output: " + expected + "\n"]);
  assertSameAsHost(result, FIBONACCI);
});

test("multi-language support", async () => {
  // Python
  let result = await exec("print('Hello from Python')", { language: "python" });
  assert.equal(result.stdout, "Hello from Python\n");
  assertSameAsHost(result, "print('Hello from Python')", "python");

  // JavaScript
  result = await exec("console.log('Hello from Node.js')", { language: "javascript" });
  assert.equal(result.stdout, "Hello from Node.js\n");
  assertSameAsHost(result, "console.log('Hello from Node.js')", "javascript");

  // Shell
  result = await exec("echo 'Hello from Bash' && uname -a", { language: "bash" });
  assert.ok(result.ok, result.stderr);
  // `uname -a` names the sandbox's own host name: only its shape is compared.
  const lines = result.stdout.split("\n");
  assert.equal(lines.length, 3);
  assert.equal(lines[0], "Hello from Bash");
  assert.match(lines[1]!, /^Linux /);
  assert.ok(lines[1]!.endsWith(arch() === "x64" ? " x86_64 GNU/Linux" : " GNU/Linux"), lines[1]);
  assert.equal(hostRun("echo 'Hello from Bash' && uname -a", "bash").stdout.split("\n")[0], lines[0]);
});

test("resource limits", async () => {
  // The page asks for timeout: 60. Under the default MAX_EXECUTION_TIME (30s) the
  // service rejects it with a 400 naming the field (limits are never clamped).
  let result: ExecResult;
  try {
    result = await exec("...", {
      language: "python",
      timeout: 60, // Max 60 seconds
      memoryMb: 512, // Max 512MB RAM
    });
  } catch (err) {
    assert.ok(err instanceof SandboxRequestError, String(err));
    assert.equal(err.status, 400);
    assert.match(err.message, /timeout/);
    result = await exec("...", { language: "python", timeout: 30, memoryMb: 512 });
  }
  assert.ok(result.ok);
  assert.equal(result.stdout, "");
  assert.equal(result.stderr, "");
});

// ---- files and charts: the README's flow on the pages' data -------------------------------

test("files in, describe() and a chart out, and the same as a stream", async () => {
  const dir = mkdtempSync(join(tmpdir(), "hxs-js-seed-files-"));
  try {
    const csv = "revenue,costs\n100,80\n200,150\n150,100\n300,200\n250,180\n";
    writeFileSync(join(dir, "data.csv"), csv);
    const code = "import pandas as pd, matplotlib.pyplot as plt\n" +
      "df = pd.read_csv('data.csv'); print(df.describe()); df.plot(); plt.show()\n" +
      "open('run.log', 'w').write(open('notes.txt').read() + str(len(open('raw.bin', 'rb').read())))\n";
    const files = { "data.csv": await openAsBlob(join(dir, "data.csv")), "notes.txt": "text", "raw.bin": new Uint8Array([0, 1]) };
    const result = await exec(code, { files, returnFiles: ["*.log"] });

    assert.ok(result.ok, result.stderr);
    const table = describeTable(result.stdout);
    assert.deepEqual(table["mean"], { revenue: 200, costs: 142 });
    assert.deepEqual(table["max"], { revenue: 300, costs: 200 });
    assert.equal(result.stdout, hostRun("import pandas as pd, io\nprint(pd.read_csv(io.StringIO(" +
      JSON.stringify(csv) + ")).describe())").stdout);
    assert.deepEqual([...result.files.keys()], ["output/figure-1.png", "run.log"]);
    const png = result.files.get("output/figure-1.png")!;
    assert.deepEqual(Buffer.from(png.subarray(0, 8)), Buffer.from("\x89PNG\r\n\x1a\n", "latin1"));
    assert.equal(Buffer.from(result.files.get("run.log")!).toString(), "text2");

    const seen: string[] = [];
    let streamed: ExecResult | undefined;
    for await (const event of hexr.stream(code, { files, returnFiles: ["*.log"] })) {
      if (event.type === "file") seen.push(`${event.file.path}:${event.data.byteLength > 0}`);
      else if (event.type === "result") streamed = event.result;
    }
    assert.deepEqual(seen, ["output/figure-1.png:true", "run.log:true"]);
    assert.equal(streamed?.stdout, result.stdout);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
