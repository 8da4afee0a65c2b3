/**
 * A small agent loop: a model that may call run_code, and the sandbox that runs it.
 *
 * The loop sends the conversation to a model client; each run_code call the model makes
 * is run with the TypeScript SDK's `exec` (a fresh sandbox per call) and its result goes
 * back to the model as the tool's result; the loop stops at the model's first reply
 * without a tool call, its final answer.
 *
 * The model client is an interface (`ModelClient.complete(messages, tool)`) over a
 * provider-neutral conversation. `AnthropicModel` (Messages API) and `OpenAIModel` (Chat
 * Completions) are adapters by shape: they build the provider's request body and read
 * its reply, and leave sending it to a `post(body)` the caller supplies (`fetch`, or the
 * provider's SDK), so this file needs nothing but `@hexr/sandbox`. `ScriptedModel`
 * stands in for a model in tests and in the offline demo (`main`).
 *
 * The tool's definition is examples/tools/run_code.json, the one source of
 * examples/tools/{openai,anthropic}.json.
 */

import { readFileSync } from "node:fs";

import { Client, exec, type ExecOptions, type ExecResult, SandboxRequestError } from "@hexr/sandbox";

/** run_code's neutral definition: name, description, parameters (a JSON Schema). */
export interface ToolDefinition {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

export function loadTool(file: string | URL = new URL("../tools/run_code.json", import.meta.url)): ToolDefinition {
  return JSON.parse(readFileSync(file, "utf8")) as ToolDefinition;
}

// ---- the conversation, provider-neutral --------------------------------------------------

export interface ToolCall {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}

/** One model turn: its text and the tools it asks to call (none: the final answer). */
export interface Reply {
  text: string;
  toolCalls: ToolCall[];
}

export type Message =
  | { role: "user"; content: string }
  | { role: "assistant"; content: string; toolCalls: ToolCall[] }
  | { role: "tool"; toolCallId: string; content: string; isError: boolean };

export interface ModelClient {
  /** The model's next turn given the conversation so far and the tool it may call. */
  complete(messages: readonly Message[], tool: ToolDefinition): Promise<Reply>;
}

// ---- the tool ---------------------------------------------------------------------------

const ARGUMENTS = ["language", "code", "timeout", "files", "packages", "return_files"];

/** The tool result the model reads (JSON text). */
export interface ToolResult {
  content: string;
  isError: boolean;
}

/**
 * Runs one run_code call. A program that fails is a result the model reads (`isError`
 * when its exit code is not 0); arguments the service refuses (its message names the
 * field) are an error result too, so the model can correct itself. The service being
 * unreachable throws.
 */
export async function runCode(args: Record<string, unknown>, client?: Client): Promise<ToolResult> {
  const refuse = (error: string): ToolResult => ({ content: JSON.stringify({ error }), isError: true });
  const unknown = Object.keys(args).filter((k) => !ARGUMENTS.includes(k)).sort();
  if (unknown.length) return refuse(`${unknown[0]}: unknown argument (run_code takes ${ARGUMENTS.join(", ")})`);
  if (typeof args["code"] !== "string") return refuse("code: required, a string");
  const files = new Map<string, Uint8Array>();
  for (const f of (args["files"] ?? []) as { path?: unknown; content?: unknown; encoding?: unknown }[]) {
    if (typeof f?.path !== "string" || typeof f.content !== "string") return refuse("files: each is {path, content, encoding}");
    files.set(f.path, Buffer.from(f.content, f.encoding === "base64" ? "base64" : "utf8"));
  }
  const options: ExecOptions = { language: typeof args["language"] === "string" ? args["language"] : "python" };
  if (args["timeout"] !== undefined) options.timeout = args["timeout"] as number;
  if (Array.isArray(args["packages"]) && args["packages"].length) options.packages = args["packages"] as string[];
  if (Array.isArray(args["return_files"]) && args["return_files"].length) options.returnFiles = args["return_files"] as string[];
  if (files.size) options.files = files;
  let result: ExecResult;
  try {
    result = await (client ? client.exec(args["code"], options) : exec(args["code"], options));
  } catch (err) {
    if (err instanceof SandboxRequestError) return refuse(err.message);
    throw err;
  }
  return {
    content: JSON.stringify({
      exit_code: result.exitCode,
      stdout: result.stdout,
      stderr: result.stderr,
      error: result.error,
      files: result.fileInfo.map(({ path, size, mime }) => ({ path, size, mime })),
    }),
    isError: !result.ok,
  };
}

// ---- the loop ---------------------------------------------------------------------------

export interface AgentOptions {
  tool?: ToolDefinition;
  client?: Client;
  maxTurns?: number;
}

/** Runs the conversation to the model's final answer; resolves with it and the messages. */
export async function agentLoop(
  prompt: string,
  model: ModelClient,
  { tool = loadTool(), client, maxTurns = 8 }: AgentOptions = {},
): Promise<{ answer: string; messages: Message[] }> {
  const messages: Message[] = [{ role: "user", content: prompt }];
  for (let turn = 0; turn < maxTurns; turn++) {
    const reply = await model.complete(messages, tool);
    messages.push({ role: "assistant", content: reply.text, toolCalls: reply.toolCalls });
    if (reply.toolCalls.length === 0) return { answer: reply.text, messages };
    for (const call of reply.toolCalls) {
      const result = call.name === tool.name
        ? await runCode(call.arguments, client)
        : { content: JSON.stringify({ error: `no tool named ${JSON.stringify(call.name)}` }), isError: true };
      messages.push({ role: "tool", toolCallId: call.id, ...result });
    }
  }
  throw new Error(`no final answer after ${maxTurns} turns`);
}

// ---- adapters, by shape (the caller's post() sends the body) -----------------------------

/** Sends a request body to the provider and resolves with its decoded reply. */
export type Post = (body: Record<string, unknown>) => Promise<unknown>;

type Json = Record<string, unknown>;

/** Messages API (POST /v1/messages): tools as {name, description, input_schema}. */
export class AnthropicModel implements ModelClient {
  constructor(readonly post: Post, readonly model: string, readonly maxTokens = 1024) {}

  static toolFormat(tool: ToolDefinition): Json {
    return { name: tool.name, description: tool.description, input_schema: tool.parameters };
  }

  async complete(messages: readonly Message[], tool: ToolDefinition): Promise<Reply> {
    const wire: { role: string; content: string | Json[] }[] = [];
    for (const m of messages) {
      if (m.role === "user") wire.push({ role: "user", content: m.content });
      else if (m.role === "assistant") {
        const blocks: Json[] = m.content ? [{ type: "text", text: m.content }] : [];
        for (const c of m.toolCalls) blocks.push({ type: "tool_use", id: c.id, name: c.name, input: c.arguments });
        wire.push({ role: "assistant", content: blocks });
      } else {
        // tool results go back in a user turn
        const block = { type: "tool_result", tool_use_id: m.toolCallId, content: m.content, is_error: m.isError };
        const last = wire[wire.length - 1];
        if (last?.role === "user" && Array.isArray(last.content)) last.content.push(block);
        else wire.push({ role: "user", content: [block] });
      }
    }
    const reply = (await this.post({
      model: this.model, max_tokens: this.maxTokens, tools: [AnthropicModel.toolFormat(tool)], messages: wire,
    })) as { content?: Json[] };
    const content = reply.content ?? [];
    return {
      text: content.filter((b) => b["type"] === "text").map((b) => b["text"]).join(""),
      toolCalls: content.filter((b) => b["type"] === "tool_use").map((b) => ({
        id: String(b["id"]), name: String(b["name"]), arguments: (b["input"] ?? {}) as Json,
      })),
    };
  }
}

/** Chat Completions (POST /v1/chat/completions): tools as {type: "function", function}. */
export class OpenAIModel implements ModelClient {
  constructor(readonly post: Post, readonly model: string) {}

  static toolFormat(tool: ToolDefinition): Json {
    return { type: "function", function: { name: tool.name, description: tool.description, parameters: tool.parameters } };
  }

  async complete(messages: readonly Message[], tool: ToolDefinition): Promise<Reply> {
    const wire = messages.map((m): Json => {
      if (m.role === "user") return { role: "user", content: m.content };
      if (m.role === "tool") return { role: "tool", tool_call_id: m.toolCallId, content: m.content };
      const w: Json = { role: "assistant", content: m.content || null };
      if (m.toolCalls.length) {
        w["tool_calls"] = m.toolCalls.map((c) => ({
          id: c.id, type: "function", function: { name: c.name, arguments: JSON.stringify(c.arguments) },
        }));
      }
      return w;
    });
    const reply = (await this.post({ model: this.model, tools: [OpenAIModel.toolFormat(tool)], messages: wire })) as {
      choices: { message: { content?: string | null; tool_calls?: { id: string; function: { name: string; arguments: string } }[] } }[];
    };
    const message = reply.choices[0]!.message;
    return {
      text: message.content ?? "",
      toolCalls: (message.tool_calls ?? []).map((c) => ({
        id: c.id, name: c.function.name, arguments: JSON.parse(c.function.arguments || "{}") as Json,
      })),
    };
  }
}

// ---- a scripted stand-in -----------------------------------------------------------------

/**
 * Asks for one program, then answers with what the program printed. It keeps every
 * conversation it was given (`seen`), so a test can check that the tool's result
 * reached it.
 */
export class ScriptedModel implements ModelClient {
  readonly seen: Message[][] = [];
  readonly tools: ToolDefinition[] = [];

  constructor(readonly code: string, readonly language = "python", readonly answer = "The result is {stdout}.") {}

  async complete(messages: readonly Message[], tool: ToolDefinition): Promise<Reply> {
    this.seen.push([...messages]);
    this.tools.push(tool);
    const results = messages.filter((m): m is Extract<Message, { role: "tool" }> => m.role === "tool");
    const last = results[results.length - 1];
    if (!last) {
      return {
        text: "I will compute it.",
        toolCalls: [{ id: "call_1", name: tool.name, arguments: { language: this.language, code: this.code } }],
      };
    }
    const result = JSON.parse(last.content) as { stdout?: string; stderr?: string; error?: unknown };
    if (last.isError) return { text: "The program failed: " + (result.stderr || JSON.stringify(result.error)), toolCalls: [] };
    return { text: this.answer.replace("{stdout}", (result.stdout ?? "").trim()), toolCalls: [] };
  }
}

export const SUM_OF_SQUARES = "print(sum(i * i for i in range(1, 101)))\n";

/** The offline demo: `HEXR_SANDBOX_URL=... node agent-loop.js`. */
export async function main(): Promise<string> {
  const model = new ScriptedModel(SUM_OF_SQUARES, "python", "The sum of the squares of 1 to 100 is {stdout}.");
  const { answer } = await agentLoop("What is the sum of the squares of the integers from 1 to 100?", model);
  return answer;
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(await main());
