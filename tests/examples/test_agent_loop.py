"""examples/python/agent_loop.py against the real service, with scripted models: the
tool's result reaches the model and the final answer holds the computed value; a
failing program and refused arguments are error results the model reads; files go in
and a chart comes back listed; the Anthropic and OpenAI adapters, driven through a
stand-in for the provider's HTTP call, send the tool as examples/tools/*.json write it
and carry the tool result back in the provider's shape.
"""

from __future__ import annotations

import base64
import json
from typing import Any, Dict, List

import agent_loop
from agent_loop import AnthropicModel, OpenAIModel, ScriptedModel, ToolCall, run_code
from conftest import EXAMPLES

PROMPT = "What is the sum of the squares of the integers from 1 to 100?"
VALUE = str(sum(i * i for i in range(1, 101)))  # 338350


def tool_file(name: str) -> Dict[str, Any]:
    return json.loads((EXAMPLES / "tools" / name).read_text(encoding="utf-8"))


def test_the_tool_result_reaches_the_model_and_the_answer_holds_the_value(sandbox_url: str) -> None:
    model = ScriptedModel(agent_loop.SUM_OF_SQUARES, answer="The sum is {stdout}.")
    answer, messages = agent_loop.agent_loop(PROMPT, model)
    assert answer == "The sum is %s." % VALUE
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert model.tools[0] == tool_file("run_code.json")
    # the second turn saw the sandbox's result of the first turn's call
    tool_message = model.seen[1][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_1"
    assert tool_message["is_error"] is False
    result = json.loads(tool_message["content"])
    assert result["stdout"] == VALUE + "\n" and result["exit_code"] == 0 and result["error"] is None


def test_javascript_and_bash_calls(sandbox_url: str) -> None:
    for language, code in (("javascript", "console.log([...Array(101).keys()].reduce((a, i) => a + i * i, 0))"),
                           ("bash", "s=0; for i in $(seq 1 100); do s=$((s + i * i)); done; echo $s")):
        answer, _ = agent_loop.agent_loop(PROMPT, ScriptedModel(code, language=language))
        assert VALUE in answer, (language, answer)


def test_a_failing_program_is_an_error_result_the_model_reads(sandbox_url: str) -> None:
    model = ScriptedModel("1/0")
    answer, messages = agent_loop.agent_loop("divide", model)
    assert messages[2]["is_error"] is True
    assert json.loads(messages[2]["content"])["exit_code"] == 1
    assert "ZeroDivisionError" in answer


def test_refused_arguments_are_error_results(sandbox_url: str) -> None:
    text, is_error = run_code({"code": "print(1)", "timeout": 10_000})
    assert is_error and "timeout" in json.loads(text)["error"]
    text, is_error = run_code({"code": "print(1)", "memory": 5})
    assert is_error and json.loads(text)["error"].startswith("memory: unknown argument")
    text, is_error = run_code({"language": "python"})
    assert is_error and json.loads(text)["error"].startswith("code:")
    answer, messages = agent_loop.agent_loop("x", _OneCall(ToolCall("c9", "no_such_tool", {})))
    assert messages[2]["is_error"] is True and "no_such_tool" in messages[2]["content"]


class _OneCall:
    """Calls one tool, then answers with the tool result it got."""

    def __init__(self, call: ToolCall) -> None:
        self.call = call

    def complete(self, messages: List[Dict[str, Any]], tool: Dict[str, Any]) -> agent_loop.Reply:
        if messages[-1]["role"] == "tool":
            return agent_loop.Reply(text=messages[-1]["content"])
        return agent_loop.Reply(text="", tool_calls=[self.call])


def test_files_in_and_a_chart_out(sandbox_url: str) -> None:
    csv = "x,y\n1,2\n2,4\n3,9\n"
    code = ("import pandas as pd, matplotlib.pyplot as plt\n"
            "df = pd.read_csv('data.csv'); print(int(df.y.sum())); df.plot(x='x', y='y'); plt.show()\n")
    text, is_error = run_code({"code": code, "files": [
        {"path": "data.csv", "content": base64.b64encode(csv.encode()).decode(), "encoding": "base64"}]})
    result = json.loads(text)
    assert not is_error, result
    assert result["stdout"] == "15\n"
    assert [(f["path"], f["mime"]) for f in result["files"]] == [("output/figure-1.png", "image/png")]
    assert result["files"][0]["size"] > 1000


class _Provider:
    """Stands in for a provider's HTTP endpoint: scripted replies, recorded bodies."""

    def __init__(self, replies: List[Dict[str, Any]]) -> None:
        self.replies, self.bodies = replies, []

    def __call__(self, body: Dict[str, Any]) -> Dict[str, Any]:
        self.bodies.append(json.loads(json.dumps(body)))  # what would go on the wire
        return self.replies[len(self.bodies) - 1]


def test_the_anthropic_adapter_by_shape(sandbox_url: str) -> None:
    post = _Provider([
        {"role": "assistant", "stop_reason": "tool_use", "content": [
            {"type": "text", "text": "Let me compute it."},
            {"type": "tool_use", "id": "toolu_1", "name": "run_code", "input": {"code": agent_loop.SUM_OF_SQUARES}}]},
        {"role": "assistant", "stop_reason": "end_turn", "content": [{"type": "text", "text": "It is %s." % VALUE}]},
    ])
    answer, _ = agent_loop.agent_loop(PROMPT, AnthropicModel(post, model="claude-model"))
    assert answer == "It is %s." % VALUE
    first, second = post.bodies
    assert first["tools"] == [tool_file("anthropic.json")]
    assert first["messages"] == [{"role": "user", "content": PROMPT}]
    assert second["messages"][1] == {"role": "assistant", "content": [
        {"type": "text", "text": "Let me compute it."},
        {"type": "tool_use", "id": "toolu_1", "name": "run_code", "input": {"code": agent_loop.SUM_OF_SQUARES}}]}
    [block] = second["messages"][2]["content"]
    assert second["messages"][2]["role"] == "user"
    assert block["type"] == "tool_result" and block["tool_use_id"] == "toolu_1" and block["is_error"] is False
    assert json.loads(block["content"])["stdout"] == VALUE + "\n"


def test_the_openai_adapter_by_shape(sandbox_url: str) -> None:
    arguments = json.dumps({"code": agent_loop.SUM_OF_SQUARES})
    post = _Provider([
        {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "run_code", "arguments": arguments}}]}}]},
        {"choices": [{"message": {"role": "assistant", "content": "It is %s." % VALUE}}]},
    ])
    answer, _ = agent_loop.agent_loop(PROMPT, OpenAIModel(post, model="gpt-model"))
    assert answer == "It is %s." % VALUE
    first, second = post.bodies
    assert first["tools"] == [tool_file("openai.json")]
    assistant, tool = second["messages"][1:]
    assert assistant["tool_calls"] == [
        {"id": "call_a", "type": "function", "function": {"name": "run_code", "arguments": arguments}}]
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_a"
    assert json.loads(tool["content"])["stdout"] == VALUE + "\n"


def test_the_demo_runs(sandbox_url: str, capsys: Any) -> None:
    assert agent_loop.main() == 0
    assert VALUE in capsys.readouterr().out
