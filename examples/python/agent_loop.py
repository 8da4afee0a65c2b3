#!/usr/bin/python3
"""A small agent loop: a model that may call run_code, and the sandbox that runs it.

The loop sends the conversation to a model client; each run_code call the model makes
is run with hexr.sandbox.exec (a fresh sandbox per call) and its result goes back to the
model as the tool's result; the loop stops at the model's first reply without a tool
call, its final answer.

The model client is an interface (ModelClient: complete(messages, tool) -> Reply) over
a provider-neutral conversation. AnthropicModel (Messages API) and OpenAIModel (Chat
Completions) are adapters by shape: they build the provider's request body and read its
reply, and leave sending it to a `post(body) -> dict` the caller supplies (an HTTP
client or the provider's SDK), so this file needs nothing but the sandbox's SDK.
ScriptedModel stands in for a model in tests and in the offline demo:

    HEXR_SANDBOX_URL=http://127.0.0.1:8080 python3 examples/python/agent_loop.py

The tool's definition is examples/tools/run_code.json, the one source of
examples/tools/{openai,anthropic}.json.
"""

from __future__ import annotations

import base64
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Protocol, Tuple

try:
    import hexr.sandbox as sandbox
except ImportError:  # run from a checkout: the SDK next door
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sdk" / "python"))
    import hexr.sandbox as sandbox

TOOL_FILE = Path(__file__).resolve().parents[1] / "tools" / "run_code.json"
ARGUMENTS = ("language", "code", "timeout", "files", "packages", "return_files")


def load_tool() -> Dict[str, Any]:
    """run_code's neutral definition: name, description, parameters (a JSON Schema)."""
    return json.loads(TOOL_FILE.read_text(encoding="utf-8"))


# ---- the conversation, provider-neutral --------------------------------------------------

@dataclass
class ToolCall:
    id: str
    name: str
    arguments: Dict[str, Any]


@dataclass
class Reply:
    """One model turn: its text and the tools it asks to call (none: the final answer)."""
    text: str
    tool_calls: List[ToolCall] = field(default_factory=list)


# A message is {"role": "user", "content": str}, {"role": "assistant", "content": str,
# "tool_calls": [ToolCall]} or {"role": "tool", "tool_call_id": str, "content": str,
# "is_error": bool}.
Message = Dict[str, Any]


class ModelClient(Protocol):
    def complete(self, messages: List[Message], tool: Dict[str, Any]) -> Reply:
        """The model's next turn given the conversation so far and the tool it may call."""


# ---- the tool ---------------------------------------------------------------------------

def run_code(arguments: Dict[str, Any], client: Optional[sandbox.Client] = None) -> Tuple[str, bool]:
    """Runs one run_code call; returns (the tool result as JSON text, is_error).

    A program that fails is a result the model reads (is_error when its exit code is not
    0); arguments the service refuses (its message names the field) are an error result
    too, so the model can correct itself. The service being unreachable raises.
    """
    unknown = sorted(set(arguments) - set(ARGUMENTS))
    if unknown:
        return json.dumps({"error": "%s: unknown argument (run_code takes %s)" % (unknown[0], ", ".join(ARGUMENTS))}), True
    if not isinstance(arguments.get("code"), str):
        return json.dumps({"error": "code: required, a string"}), True
    files: Dict[str, bytes] = {}
    for f in arguments.get("files") or []:
        if not isinstance(f, dict) or not isinstance(f.get("path"), str) or not isinstance(f.get("content"), str):
            return json.dumps({"error": "files: each is {path, content, encoding}"}), True
        raw = f["content"]
        files[f["path"]] = base64.b64decode(raw) if f.get("encoding") == "base64" else raw.encode("utf-8")
    options: Dict[str, Any] = {"language": arguments.get("language", "python")}
    if arguments.get("timeout") is not None:
        options["timeout"] = arguments["timeout"]
    if arguments.get("packages"):
        options["packages"] = list(arguments["packages"])
    if arguments.get("return_files"):
        options["return_files"] = list(arguments["return_files"])
    if files:
        options["files"] = files
    try:
        result = (client or sandbox).exec(arguments["code"], **options)
    except sandbox.SandboxRequestError as exc:
        return json.dumps({"error": str(exc)}), True
    return json.dumps({
        "exit_code": result.exit_code,
        "stdout": result.stdout,
        "stderr": result.stderr,
        "error": None if result.error is None else {"type": result.error.type, "message": result.error.message},
        "files": [{"path": f.path, "size": f.size, "mime": f.mime} for f in result.file_info],
    }), not result.ok


# ---- the loop ---------------------------------------------------------------------------

def agent_loop(prompt: str, model: ModelClient, *, client: Optional[sandbox.Client] = None,
               max_turns: int = 8) -> Tuple[str, List[Message]]:
    """Runs the conversation to the model's final answer; returns it and the messages."""
    tool = load_tool()
    messages: List[Message] = [{"role": "user", "content": prompt}]
    for _ in range(max_turns):
        reply = model.complete(messages, tool)
        messages.append({"role": "assistant", "content": reply.text, "tool_calls": reply.tool_calls})
        if not reply.tool_calls:
            return reply.text, messages
        for call in reply.tool_calls:
            if call.name == tool["name"]:
                content, is_error = run_code(call.arguments, client)
            else:
                content, is_error = json.dumps({"error": "no tool named %r" % call.name}), True
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content, "is_error": is_error})
    raise RuntimeError("no final answer after %d turns" % max_turns)


# ---- adapters, by shape (the caller's post() sends the body) -----------------------------

Post = Callable[[Dict[str, Any]], Dict[str, Any]]


class AnthropicModel:
    """Messages API (POST /v1/messages): tools as {name, description, input_schema}."""

    def __init__(self, post: Post, model: str, max_tokens: int = 1024) -> None:
        self.post, self.model, self.max_tokens = post, model, max_tokens

    @staticmethod
    def tool_format(tool: Dict[str, Any]) -> Dict[str, Any]:
        return {"name": tool["name"], "description": tool["description"], "input_schema": tool["parameters"]}

    def complete(self, messages: List[Message], tool: Dict[str, Any]) -> Reply:
        wire: List[Dict[str, Any]] = []
        for m in messages:
            if m["role"] == "user":
                wire.append({"role": "user", "content": m["content"]})
            elif m["role"] == "assistant":
                blocks: List[Dict[str, Any]] = [{"type": "text", "text": m["content"]}] if m["content"] else []
                blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in m["tool_calls"]]
                wire.append({"role": "assistant", "content": blocks})
            else:  # tool results go back in a user turn
                block = {"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"],
                         "is_error": m["is_error"]}
                if wire and wire[-1]["role"] == "user" and isinstance(wire[-1]["content"], list):
                    wire[-1]["content"].append(block)
                else:
                    wire.append({"role": "user", "content": [block]})
        reply = self.post({"model": self.model, "max_tokens": self.max_tokens, "tools": [self.tool_format(tool)],
                           "messages": wire})
        content = reply.get("content", [])
        return Reply(text="".join(b["text"] for b in content if b.get("type") == "text"),
                     tool_calls=[ToolCall(b["id"], b["name"], b.get("input") or {})
                                 for b in content if b.get("type") == "tool_use"])


class OpenAIModel:
    """Chat Completions (POST /v1/chat/completions): tools as {type: function, function}."""

    def __init__(self, post: Post, model: str) -> None:
        self.post, self.model = post, model

    @staticmethod
    def tool_format(tool: Dict[str, Any]) -> Dict[str, Any]:
        return {"type": "function",
                "function": {"name": tool["name"], "description": tool["description"], "parameters": tool["parameters"]}}

    def complete(self, messages: List[Message], tool: Dict[str, Any]) -> Reply:
        wire: List[Dict[str, Any]] = []
        for m in messages:
            if m["role"] == "assistant":
                w: Dict[str, Any] = {"role": "assistant", "content": m["content"] or None}
                if m["tool_calls"]:
                    w["tool_calls"] = [{"id": c.id, "type": "function",
                                        "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                                       for c in m["tool_calls"]]
                wire.append(w)
            elif m["role"] == "tool":
                wire.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]})
            else:
                wire.append({"role": m["role"], "content": m["content"]})
        reply = self.post({"model": self.model, "tools": [self.tool_format(tool)], "messages": wire})
        message = reply["choices"][0]["message"]
        return Reply(text=message.get("content") or "",
                     tool_calls=[ToolCall(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
                                 for c in message.get("tool_calls") or []])


# ---- a scripted stand-in -----------------------------------------------------------------

class ScriptedModel:
    """Asks for one program, then answers with what the program printed.

    It keeps every conversation it was given (`seen`), so a test can check that the
    tool's result reached it.
    """

    def __init__(self, code: str, language: str = "python", answer: str = "The result is {stdout}.") -> None:
        self.code, self.language, self.answer = code, language, answer
        self.seen: List[List[Message]] = []
        self.tools: List[Dict[str, Any]] = []

    def complete(self, messages: List[Message], tool: Dict[str, Any]) -> Reply:
        self.seen.append(list(messages))
        self.tools.append(tool)
        results = [m for m in messages if m["role"] == "tool"]
        if not results:
            return Reply(text="I will compute it.",
                         tool_calls=[ToolCall("call_1", tool["name"], {"language": self.language, "code": self.code})])
        result = json.loads(results[-1]["content"])
        if results[-1]["is_error"]:
            return Reply(text="The program failed: " + (result.get("stderr") or str(result.get("error"))))
        return Reply(text=self.answer.format(stdout=result["stdout"].strip()))


SUM_OF_SQUARES = "print(sum(i * i for i in range(1, 101)))\n"


def main() -> int:
    model = ScriptedModel(SUM_OF_SQUARES, answer="The sum of the squares of 1 to 100 is {stdout}.")
    answer, _ = agent_loop("What is the sum of the squares of the integers from 1 to 100?", model)
    print(answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
