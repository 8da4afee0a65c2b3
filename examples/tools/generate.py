#!/usr/bin/python3
"""Writes the run_code tool in the formats LLM APIs take, from its one source.

run_code.json (name, description, JSON Schema of the arguments; the same arguments, with
the same schema, as the MCP server's run_code tool at the default MAX_EXECUTION_TIME) is
the source; this writes:

    openai.json            Chat Completions: {"type": "function", "function": {...}}
    openai-responses.json  Responses API:    {"type": "function", "name", ...}
    anthropic.json         Messages API:     {"name", "description", "input_schema"}

`generate.py --check` writes nothing and fails when a file differs from what it would
write (tests/examples runs it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict

HERE = Path(__file__).resolve().parent


def openai_chat(tool: Dict[str, Any]) -> Dict[str, Any]:
    return {"type": "function",
            "function": {"name": tool["name"], "description": tool["description"], "parameters": tool["parameters"]}}


def openai_responses(tool: Dict[str, Any]) -> Dict[str, Any]:
    return {"type": "function", "name": tool["name"], "description": tool["description"],
            "parameters": tool["parameters"]}


def anthropic(tool: Dict[str, Any]) -> Dict[str, Any]:
    return {"name": tool["name"], "description": tool["description"], "input_schema": tool["parameters"]}


FORMATS = {"openai.json": openai_chat, "openai-responses.json": openai_responses, "anthropic.json": anthropic}


def rendered() -> Dict[str, str]:
    tool = json.loads((HERE / "run_code.json").read_text(encoding="utf-8"))
    return {name: json.dumps(fn(tool), indent=2, ensure_ascii=False) + "\n" for name, fn in FORMATS.items()}


def main(argv: list) -> int:
    check = argv[1:] == ["--check"]
    stale = []
    for name, text in rendered().items():
        path = HERE / name
        if check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print("examples/tools: %s differ from run_code.json; run examples/tools/generate.py" % ", ".join(stale),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
