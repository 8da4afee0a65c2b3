"""The run_code tool as LLM APIs take it (examples/tools): the generated files are what
generate.py writes from run_code.json, they say the same thing as each other, and their
arguments and schema are those of the MCP server's run_code tool (`hexr-sandbox mcp`,
tools/list) at the default settings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import EXAMPLES
from hxstest.paths import sandbox_bin

TOOLS = EXAMPLES / "tools"


def load(name: str) -> dict:
    return json.loads((TOOLS / name).read_text(encoding="utf-8"))


def test_generated_files_are_up_to_date() -> None:
    r = subprocess.run([sys.executable, str(TOOLS / "generate.py"), "--check"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr


def test_every_format_says_the_same() -> None:
    source = load("run_code.json")
    chat = load("openai.json")
    responses = load("openai-responses.json")
    claude = load("anthropic.json")
    assert chat["type"] == "function" and responses["type"] == "function"
    assert set(chat) == {"type", "function"}
    assert set(claude) == {"name", "description", "input_schema"}
    for name, description, schema in ((chat["function"]["name"], chat["function"]["description"],
                                       chat["function"]["parameters"]),
                                      (responses["name"], responses["description"], responses["parameters"]),
                                      (claude["name"], claude["description"], claude["input_schema"])):
        assert name == source["name"] == "run_code"
        assert description == source["description"]
        assert schema == source["parameters"]
    assert list(source["parameters"]["properties"]) == [
        "language", "code", "timeout", "files", "packages", "return_files"]
    assert source["parameters"]["required"] == ["code"]


def _mcp_tools() -> list:
    env = {k: v for k, v in os.environ.items() if k != "MAX_EXECUTION_TIME"}  # the default maximum
    env.setdefault("SANDBOX_BACKEND", "namespaces")
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    r = subprocess.run([sandbox_bin(), "mcp"], input="".join(json.dumps(m) + "\n" for m in lines),
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    replies = {m.get("id"): m for m in map(json.loads, r.stdout.splitlines()) if "id" in m}
    return replies[2]["result"]["tools"]


def test_the_same_arguments_and_schema_as_the_mcp_tool() -> None:
    tools = {t["name"]: t for t in _mcp_tools()}
    assert tools["run_code"]["inputSchema"] == load("run_code.json")["parameters"]
