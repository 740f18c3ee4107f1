"""The tool loop with native function calling, for a model whose ``complete`` takes ``tools=``
(the OpenAI-compatible providers), against a real loopback OpenAI-compatible server: the tools
go as OpenAI functions, the model's ``tool_calls`` run, their results go back as ``tool``
messages; models without ``tools=`` keep the JSON actions."""

from __future__ import annotations

import json

import pytest
from openai_stub import CannedOpenAI

from memstack import Memory
from memstack.errors import InvalidInput
from memstack.llm import get_chat_model
from memstack.testing import ScriptedModel
from memstack.tool_chat import run_tool_chat, takes_tools
from memstack.tools import MemoryTools

SAVE = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "save_memory", "arguments": json.dumps({"content": "我的后端使用SpringBoot"}, ensure_ascii=False)},
}


def answer(body: dict):
    if any(m.get("role") == "tool" for m in body["messages"]):
        return "好的，我记住了：你的后端使用SpringBoot。"
    return {"content": None, "tool_calls": [SAVE]}


def test_an_openai_compatible_model_calls_the_tools_natively_and_the_note_is_saved():
    memory = Memory("memory://", layers="window")
    with CannedOpenAI(answer) as server:
        model = get_chat_model(server.model)  # a self-hosted server (vllm:...): native when asked
        assert takes_tools(model) and not model.native_tools
        result = run_tool_chat(
            model, MemoryTools(memory, "u1", "s1"), [{"role": "user", "content": "请记住：我的后端使用SpringBoot"}], native=True
        )
        first, second = server.requests
    assert [f["function"]["name"] for f in first["tools"]] == list(MemoryTools(memory, "u1", "s1").specs())
    assert "response_format" not in first  # no JSON-action schema on the native path
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_1"]
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "save_memory"
    assert [(s.name, s.arguments) for s in result.steps] == [("save_memory", {"content": "我的后端使用SpringBoot"})]
    assert result.answer.startswith("好的") and len(result.completions) == 2
    recalled = MemoryTools(memory, "u1", "s2").call("recall_memory", {"query": "后端"})
    assert "SpringBoot" in recalled


def test_the_last_step_offers_no_tools_so_the_model_must_answer():
    memory = Memory("memory://", layers="window")
    with CannedOpenAI(lambda body: {"content": None, "tool_calls": [SAVE]} if body.get("tools") else "只能回答了") as server:
        result = run_tool_chat(
            get_chat_model(server.model),
            MemoryTools(memory, "u1", "s1"),
            [{"role": "user", "content": "记住这个"}],
            max_steps=2,
            native=True,
        )
        assert "tools" in server.requests[0] and "tools" not in server.requests[1]
    assert result.answer == "只能回答了" and len(result.steps) == 1


def test_a_hosted_api_is_called_natively_by_default_and_a_self_hosted_one_gets_json_actions(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    memory = Memory("memory://", layers="window")
    with CannedOpenAI(answer) as server:
        hosted = get_chat_model(f"openai:gpt-4o-mini@{server.url}")
        assert hosted.native_tools
        run_tool_chat(hosted, MemoryTools(memory, "u1", "s1"), [{"role": "user", "content": "请记住：我的后端使用SpringBoot"}])
        assert "tools" in server.requests[0]
    with CannedOpenAI(lambda body: '{"action": "answer", "answer": "好的"}') as server:
        assert (
            run_tool_chat(get_chat_model(server.model), MemoryTools(memory, "u1", "s1"), [{"role": "user", "content": "你好"}]).answer
            == "好的"
        )
        assert "tools" not in server.requests[0] and "response_format" in server.requests[0]


def test_models_without_tools_keep_json_actions_and_native_cannot_be_forced_on_them():
    model = ScriptedModel(['{"action": "answer", "answer": "你好"}'])
    assert not takes_tools(model)
    memory = Memory("memory://", layers="window")
    assert run_tool_chat(model, MemoryTools(memory, "u1", "s1"), [{"role": "user", "content": "你好"}]).answer == "你好"
    with pytest.raises(InvalidInput, match="native"):
        run_tool_chat(ScriptedModel(), MemoryTools(memory, "u1", "s1"), [{"role": "user", "content": "你好"}], native=True)
