/**
 * The package itself: `tsc --noEmit` type-checks it; `npm pack` produces a tarball with
 * the built JavaScript, its declarations, package.json and README and nothing else;
 * installed from that tarball into an empty project, it is importable by name as ESM,
 * and a TypeScript consumer type-checks against its declarations.
 */

import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { VERSION } from "../src/index.js";
import { SDK_DIR } from "./service.js";

const TSC = join(SDK_DIR, "node_modules", "typescript", "bin", "tsc");
const pkg = JSON.parse(readFileSync(join(SDK_DIR, "package.json"), "utf8")) as {
  name: string;
  version: string;
  dependencies?: Record<string, string>;
};
const SOURCES = readdirSync(join(SDK_DIR, "src")).filter((f) => f.endsWith(".ts")).map((f) => f.slice(0, -3));

let work: string;

before(() => {
  work = mkdtempSync(join(tmpdir(), "hxs-js-pack-"));
});

after(() => {
  rmSync(work, { recursive: true, force: true });
});

function run(cmd: string, args: string[], cwd: string): string {
  const r = spawnSync(cmd, args, { cwd, encoding: "utf8", timeout: 180_000, env: { ...process.env, npm_config_update_notifier: "false" } });
  assert.equal(r.status, 0, `${cmd} ${args.join(" ")} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

test("tsc --noEmit type-checks the package", () => {
  run(process.execPath, [TSC, "--noEmit", "-p", join(SDK_DIR, "tsconfig.json")], SDK_DIR);
});

test("no runtime dependencies; VERSION is package.json's", () => {
  assert.equal(pkg.dependencies, undefined);
  assert.equal(VERSION, pkg.version);
});

test("npm pack: the built JS and .d.ts, and nothing surprising; installable and importable by name", () => {
  const out = run("npm", ["pack", "--json", "--pack-destination", work], SDK_DIR);
  const [info] = JSON.parse(out) as [{ filename: string; files: { path: string }[] }];
  const files = info.files.map((f) => f.path).sort();
  const expected = [
    "README.md",
    "package.json",
    ...SOURCES.flatMap((s) => [`dist/${s}.d.ts`, `dist/${s}.js`]),
  ].sort();
  assert.deepEqual(files, expected);
  const tarball = join(work, info.filename);
  const listing = execFileSync("tar", ["tzf", tarball], { encoding: "utf8" }).trim().split("\n").sort();
  assert.deepEqual(listing, expected.map((f) => `package/${f}`).sort());

  // An empty project installs it from the tarball alone (no registry: it has no
  // dependencies) and imports it by name.
  const project = join(work, "consumer");
  run("mkdir", ["-p", project], work);
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
  run("npm", ["install", "--offline", "--no-audit", "--no-fund", "--no-package-lock", tarball], project);
  const probe = `
    import * as sdk from "${pkg.name}";
    const names = ["exec", "isEnabled", "Client", "ExecResult", "SandboxError", "SandboxUnavailableError",
      "SandboxRequestError", "SandboxOverloadedError", "SandboxInternalError", "parseUrl", "VERSION",
      "Session", "SessionEndedError", "CellResult"];
    for (const n of names) if (!(n in sdk)) throw new Error("missing export " + n);
    const r = sdk.ExecResult.fromResponse({ exit_code: 0, stdout: "x" });
    console.log(JSON.stringify({ version: sdk.VERSION, ok: r.ok, url: new sdk.Client("unix:/s").url }));
  `;
  const printed = run(process.execPath, ["--input-type=module", "-e", probe], project);
  assert.deepEqual(JSON.parse(printed), { version: pkg.version, ok: true, url: "unix:/s" });

  // A TypeScript consumer type-checks against the packed declarations, found through
  // the package's "exports".
  writeFileSync(join(project, "consumer.ts"), `
    import { type CellResult, Client, exec, type ExecOptions, type ExecResult, SandboxOverloadedError, Session,
      SessionEndedError } from "${pkg.name}";
    const options: ExecOptions = { language: "bash", timeout: 5, envVars: { A: "1" } };
    export async function run(): Promise<number> {
      const r: ExecResult = await exec("echo $A", options);
      const c = new Client({ url: "unix:/run/x.sock", retries: 1, retryWaitMax: 5 });
      try { await c.exec("print(1)"); } catch (e) { if (e instanceof SandboxOverloadedError) return e.retryAfter ?? 0; }
      // @ts-expect-error: unknown option names are type errors too
      await exec("x", { memory_mb: 1 });
      return r.exitCode + r.durationMs;
    }
    export async function cells(): Promise<string | null> {
      await using s = await Session.create({ language: "python", idleTimeout: 60 });
      await s.writeFile("a.txt", "x");
      const c: CellResult = await s.exec("1 + 1", { onDisplay: (d) => void d["image/png"] });
      try { await s.exec("x"); } catch (e) { if (e instanceof SessionEndedError) return e.reason; }
      return c.value ?? c.exception?.type ?? null;
    }
  `);
  writeFileSync(join(project, "tsconfig.json"), JSON.stringify({
    compilerOptions: {
      module: "NodeNext", moduleResolution: "NodeNext", target: "ES2022", strict: true, noEmit: true,
      types: ["node"], typeRoots: [join(SDK_DIR, "node_modules", "@types")], skipLibCheck: true,
    },
    files: ["consumer.ts"],
  }));
  run(process.execPath, [TSC, "-p", join(project, "tsconfig.json")], project);
});
