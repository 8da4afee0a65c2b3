/**
 * examples/ts/agent-loop.ts against the real service, with scripted models (as
 * tests/examples does for the Python loop): the tool's result reaches the model and the
 * final answer holds the computed value; a failing program and refused arguments are
 * error results; files go in and a chart comes back listed; the Anthropic and OpenAI
 * adapters, driven through a stand-in for the provider's HTTP call, send the tool as
 * examples/tools/*.json write it. `tsc --noEmit` type-checks examples/ts.
 *
 * The example imports `@hexr/sandbox`; here it is transpiled with that import pointed at
 * this build of the package (build-test/src), so no packing is needed.
 */

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { pathToFileURL } from "node:url";

import ts from "typescript";

import { ROOT, SDK_DIR, type Service, startService } from "./service.js";

const EXAMPLES = join(ROOT, "examples");
const PROMPT = "What is the sum of the squares of the integers from 1 to 100?";
const VALUE = "338350";

type Json = Record<string, unknown>;
interface Message { role: string; content: string; toolCallId?: string; isError?: boolean; toolCalls?: unknown[] }
interface Reply { text: string; toolCalls: { id: string; name: string; arguments: Json }[] }
interface Model { complete(messages: readonly Message[], tool: Json): Promise<Reply> }
interface Example {
  SUM_OF_SQUARES: string;
  loadTool(file?: string | URL): Json;
  agentLoop(prompt: string, model: Model, options?: { tool?: Json }): Promise<{ answer: string; messages: Message[] }>;
  runCode(args: Json): Promise<{ content: string; isError: boolean }>;
  ScriptedModel: new (code: string, language?: string, answer?: string) => Model & { seen: Message[][]; tools: Json[] };
  AnthropicModel: new (post: (body: Json) => Promise<unknown>, model: string) => Model;
  OpenAIModel: new (post: (body: Json) => Promise<unknown>, model: string) => Model;
}

let svc: Service;
let ex: Example;
let tool: Json;

function toolFile(name: string): Json {
  return JSON.parse(readFileSync(join(EXAMPLES, "tools", name), "utf8")) as Json;
}

before(async () => {
  const source = readFileSync(join(EXAMPLES, "ts", "agent-loop.ts"), "utf8");
  const sdk = pathToFileURL(join(SDK_DIR, "build-test", "src", "index.js")).href;
  const { outputText } = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 },
  });
  const js = outputText.replace(/from "@hexr\/sandbox"/g, `from ${JSON.stringify(sdk)}`);
  assert.ok(js.includes(sdk), "the example imports @hexr/sandbox");
  const dir = join(SDK_DIR, "build-test", "examples");
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "agent-loop.js"), js);
  ex = (await import(pathToFileURL(join(dir, "agent-loop.js")).href)) as Example;
  tool = ex.loadTool(join(EXAMPLES, "tools", "run_code.json"));
  svc = await startService();
  process.env["HEXR_SANDBOX_URL"] = svc.url;
});

after(async () => {
  assert.equal(await svc.stop(), 0, "the service did not stop cleanly:\n" + svc.log().slice(-3000));
});

test("tsc --noEmit type-checks examples/ts", () => {
  const tsc = join(SDK_DIR, "node_modules", "typescript", "bin", "tsc");
  const r = spawnSync(process.execPath, [tsc, "--noEmit", "-p", join(EXAMPLES, "ts", "tsconfig.json")], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stdout + r.stderr);
});

test("the tool result reaches the model and the answer holds the value", async () => {
  const model = new ex.ScriptedModel(ex.SUM_OF_SQUARES, "python", "The sum is {stdout}.");
  const { answer, messages } = await ex.agentLoop(PROMPT, model, { tool });
  assert.equal(answer, `The sum is ${VALUE}.`);
  assert.deepEqual(messages.map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
  assert.deepEqual(model.tools[0], toolFile("run_code.json"));
  const toolMessage = model.seen[1]!.at(-1)!;
  assert.equal(toolMessage.role, "tool");
  assert.equal(toolMessage.toolCallId, "call_1");
  assert.equal(toolMessage.isError, false);
  const result = JSON.parse(toolMessage.content) as Json;
  assert.equal(result["stdout"], VALUE + "\n");
  assert.equal(result["exit_code"], 0);
  assert.equal(result["error"], null);
});

test("javascript and bash calls", async () => {
  for (const [language, code] of [
    ["javascript", "console.log([...Array(101).keys()].reduce((a, i) => a + i * i, 0))"],
    ["bash", "s=0; for i in $(seq 1 100); do s=$((s + i * i)); done; echo $s"],
  ] as const) {
    const { answer } = await ex.agentLoop(PROMPT, new ex.ScriptedModel(code, language), { tool });
    assert.ok(answer.includes(VALUE), `${language}: ${answer}`);
  }
});

test("a failing program is an error result the model reads", async () => {
  const { answer, messages } = await ex.agentLoop("divide", new ex.ScriptedModel("1/0"), { tool });
  assert.equal(messages[2]!.isError, true);
  assert.equal((JSON.parse(messages[2]!.content) as Json)["exit_code"], 1);
  assert.match(answer, /ZeroDivisionError/);
});

test("refused arguments are error results", async () => {
  let r = await ex.runCode({ code: "print(1)", timeout: 10_000 });
  assert.ok(r.isError);
  assert.match(String((JSON.parse(r.content) as Json)["error"]), /timeout/);
  r = await ex.runCode({ code: "print(1)", memory: 5 });
  assert.ok(r.isError);
  assert.match(String((JSON.parse(r.content) as Json)["error"]), /^memory: unknown argument/);
  const oneCall: Model = {
    async complete(messages) {
      const last = messages.at(-1)!;
      if (last.role === "tool") return { text: last.content, toolCalls: [] };
      return { text: "", toolCalls: [{ id: "c9", name: "no_such_tool", arguments: {} }] };
    },
  };
  const { messages } = await ex.agentLoop("x", oneCall, { tool });
  assert.equal(messages[2]!.isError, true);
  assert.match(messages[2]!.content, /no_such_tool/);
});

test("files in and a chart out", async () => {
  const csv = "x,y\n1,2\n2,4\n3,9\n";
  const code = "import pandas as pd, matplotlib.pyplot as plt\n" +
    "df = pd.read_csv('data.csv'); print(int(df.y.sum())); df.plot(x='x', y='y'); plt.show()\n";
  const r = await ex.runCode({ code, files: [{ path: "data.csv", content: Buffer.from(csv).toString("base64"), encoding: "base64" }] });
  const result = JSON.parse(r.content) as { stdout: string; files: { path: string; mime: string; size: number }[] };
  assert.equal(r.isError, false, r.content);
  assert.equal(result.stdout, "15\n");
  assert.deepEqual(result.files.map((f) => [f.path, f.mime]), [["output/figure-1.png", "image/png"]]);
  assert.ok(result.files[0]!.size > 1000);
});

/** Stands in for a provider's HTTP endpoint: scripted replies, recorded bodies. */
function provider(replies: unknown[]): { post: (body: Json) => Promise<unknown>; bodies: Json[] } {
  const bodies: Json[] = [];
  return {
    bodies,
    post: async (body) => {
      bodies.push(JSON.parse(JSON.stringify(body)) as Json); // what would go on the wire
      return replies[bodies.length - 1];
    },
  };
}

test("the Anthropic adapter, by shape", async () => {
  const use = { type: "tool_use", id: "toolu_1", name: "run_code", input: { code: ex.SUM_OF_SQUARES } };
  const p = provider([
    { role: "assistant", stop_reason: "tool_use", content: [{ type: "text", text: "Let me compute it." }, use] },
    { role: "assistant", stop_reason: "end_turn", content: [{ type: "text", text: `It is ${VALUE}.` }] },
  ]);
  const { answer } = await ex.agentLoop(PROMPT, new ex.AnthropicModel(p.post, "claude-model"), { tool });
  assert.equal(answer, `It is ${VALUE}.`);
  const [first, second] = p.bodies as [Json, Json];
  assert.deepEqual(first["tools"], [toolFile("anthropic.json")]);
  assert.deepEqual(first["messages"], [{ role: "user", content: PROMPT }]);
  const wire = second["messages"] as Json[];
  assert.deepEqual(wire[1], { role: "assistant", content: [{ type: "text", text: "Let me compute it." }, use] });
  assert.equal(wire[2]!["role"], "user");
  const [block] = wire[2]!["content"] as Json[];
  assert.equal(block!["type"], "tool_result");
  assert.equal(block!["tool_use_id"], "toolu_1");
  assert.equal(block!["is_error"], false);
  assert.equal((JSON.parse(String(block!["content"])) as Json)["stdout"], VALUE + "\n");
});

test("the OpenAI adapter, by shape", async () => {
  const args = JSON.stringify({ code: ex.SUM_OF_SQUARES });
  const call = { id: "call_a", type: "function", function: { name: "run_code", arguments: args } };
  const p = provider([
    { choices: [{ message: { role: "assistant", content: null, tool_calls: [call] } }] },
    { choices: [{ message: { role: "assistant", content: `It is ${VALUE}.` } }] },
  ]);
  const { answer } = await ex.agentLoop(PROMPT, new ex.OpenAIModel(p.post, "gpt-model"), { tool });
  assert.equal(answer, `It is ${VALUE}.`);
  const [first, second] = p.bodies as [Json, Json];
  assert.deepEqual(first["tools"], [toolFile("openai.json")]);
  const [, assistant, toolMessage] = second["messages"] as Json[];
  assert.deepEqual(assistant!["tool_calls"], [call]);
  assert.equal(toolMessage!["role"], "tool");
  assert.equal(toolMessage!["tool_call_id"], "call_a");
  assert.equal((JSON.parse(String(toolMessage!["content"])) as Json)["stdout"], VALUE + "\n");
});
