"""The articles' scenario presets: each builds a context on the demo conversation within its budget,
with the sections its layers promise (a scripted model stands in for the extraction)."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from memstack import Memory
from memstack.errors import UnknownName
from memstack.presets import PRESETS
from memstack.testing import ScriptedModel

EXTRACTION = json.dumps(
    {
        "memories": [
            {"subject": "用户", "subject_type": "人物", "predicate": "叫", "object": "李四"},
            {"subject": "用户", "subject_type": "人物", "predicate": "职业", "object": "软件工程师"},
            {"subject": "用户", "subject_type": "人物", "predicate": "正在开发", "object": "知识中台"},
            {"subject": "知识中台", "subject_type": "项目", "predicate": "后端使用", "object": "SpringBoot"},
            {"subject": "知识中台", "subject_type": "项目", "predicate": "预算", "object": "30万元"},
        ],
        "state": [{"key": "当前任务", "value": "给老板汇报进度"}],
    },
    ensure_ascii=False,
)


def demo(mem: Memory) -> None:
    for line in resources.files("memstack").joinpath("data/demo_zh.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        thread = record.pop("thread_id")
        if thread == "s2" and record["role"] == "user" and "Milvus" in record["content"]:
            record.setdefault("metadata", {})["category"] = "知识中台"
        mem.add(record, user_id="user_001", thread_id=thread)


EXPECTED_SECTIONS = {
    "customer-service": set(),
    "personal-assistant": {"summary-buffer", "profile", "retrieval"},
    "enterprise-knowledge": {"entities", "graph", "retrieval"},
    "project-agent": {"summary-buffer", "entities", "topic"},
    "medical": {"entities", "graph", "retrieval"},
    "task-agent": {"summary-buffer", "state", "retrieval"},
}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_each_preset_builds_a_context_within_its_budget(name):
    # a small buffer, so that the demo's short threads are partly summarised
    mem = Memory(
        "memory://", preset=name, options={"model": ScriptedModel([], default=EXTRACTION), "batch_messages": 4, "buffer_tokens": 60}
    )
    demo(mem)
    assert mem.flush().failed == 0
    for budget in (400, 900):
        ctx = mem.context(user_id="user_001", thread_id="s2", query="知识中台的后端用什么？预算多少？", max_tokens=budget)
        assert ctx.tokens <= budget
    shown = {k.split(":", 1)[1] for k, v in ctx.sections.items() if v and k.startswith("memory:")}
    assert EXPECTED_SECTIONS[name] <= shown, (name, ctx.sections)
    if name == "customer-service":
        assert [m.role for m in ctx.messages].count("user") >= 2 and not shown
    if name == "medical":
        system = next(m.text for m in ctx.messages if m.role == "system" and "SpringBoot" in m.text)
        assert "消息 " in system  # every fact cites its source message


def test_options_can_reach_one_layer_only_and_explicit_ones_win():
    mem = Memory("memory://", preset="enterprise-knowledge", options={"model": ScriptedModel([]), "k": 2})
    assert mem.layers == ["window", "entities", "graph", "retrieval"]
    assert mem._layer("window", {}).k == 2
    assert mem._layer("graph", {}).share == 0.15 and mem._layer("retrieval", {}).share == 0.2


def test_an_unknown_preset_names_the_known_ones():
    with pytest.raises(UnknownName, match="customer-service"):
        Memory("memory://", preset="nope")


def test_a_preset_by_name_in_a_context_call_and_in_the_service():
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from memstack.server import ServerConfig, create_app

    mem = Memory("memory://", preset="medical", options={"model": ScriptedModel([], default=EXTRACTION), "batch_messages": 4})
    demo(mem)
    mem.flush()
    ctx = mem.context(user_id="user_001", thread_id="s2", query="知识中台的后端用什么？", preset="customer-service", max_tokens=500)
    assert not [k for k in ctx.sections if k.startswith("memory:")]  # the call's preset, not the Memory's
    app = create_app(mem, ServerConfig(preset="medical", model=ScriptedModel([], default="好的"), worker=False))
    with TestClient(app) as http:
        answer = http.post(
            "/v1/users/user_001/threads/s2/context", json={"query": "知识中台的后端用什么？", "preset": "medical", "max_tokens": 800}
        )
        assert answer.status_code == 200, answer.text
        assert "消息 " in answer.json()["messages"][0]["content"]  # provenance: facts cite their messages
        wrong = http.post("/v1/users/user_001/threads/s2/context", json={"preset": "nope"})
        assert wrong.status_code == 422 and wrong.json()["error"]["field"] == "preset"
