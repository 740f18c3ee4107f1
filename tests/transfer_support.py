"""A store with every layer populated by the scripted model, for the transfer tests: the demo's two
Chinese sessions for two users (one under an agent), summaries, entities, relations and state
extracted, retrieval units and vectors indexed, usage recorded, a saved memory, a checkpoint, a
forgotten thread's deletion note, and a second tenant that a copy must not touch."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from importlib import resources

from memstack import Memory
from memstack.testing import ScriptedModel
from memstack.tools import memory_tools
from memstack.types import Scope

EXTRACTION = json.dumps(
    {
        "memories": [
            {"subject": "用户", "subject_type": "人物", "predicate": "叫", "object": "李四"},
            {"subject": "用户", "subject_type": "人物", "predicate": "正在开发", "object": "知识中台"},
            {"subject": "知识中台", "subject_type": "项目", "predicate": "后端使用", "object": "SpringBoot"},
            {"subject": "知识中台", "subject_type": "项目", "predicate": "预算", "object": "30万元"},
        ],
        "state": [{"key": "当前任务", "value": "给老板汇报进度"}],
        "summary": "李四在开发知识中台。",
    },
    ensure_ascii=False,
)
LAYERS = ("summary-buffer", "entities", "graph", "state", "retrieval")
QUESTION = "知识中台的后端用什么？预算多少？"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def open_memory(store, tenant: str = "acme") -> Memory:
    return Memory(
        store,
        tenant=tenant,
        layers=list(LAYERS),
        options={"model": ScriptedModel([], default=EXTRACTION), "batch_messages": 4, "buffer_tokens": 60},
    )


def fill(store, *, tenant: str = "acme", users: tuple[str, ...] = ("user_001", "用户二")) -> Memory:
    """Populate ``store`` (left open) for ``users`` of ``tenant``; returns the Memory used."""
    mem = open_memory(store, tenant)
    lines = resources.files("memstack").joinpath("data/demo_zh.jsonl").read_text(encoding="utf-8").splitlines()
    for n, user in enumerate(users):
        for line in lines:
            record = json.loads(line)
            thread = record.pop("thread_id")
            record.setdefault("metadata", {})["source"] = "demo"
            mem.add(record, user_id=user, thread_id=thread, agent_id="helper" if n == 1 and thread == "s2" else None)
        mem.add({"role": "user", "content": "这个线程稍后删除"}, user_id=user, thread_id="gone", at=NOW - timedelta(days=1))
        mem.forget(user_id=user, thread_id="gone", by="test")
        tools = memory_tools(mem, user, "s1")
        tools.save_memory("我喜欢在早上跑步", "preference")
        tools.set_state("当前任务", "写周报")
        tools.set_state("当前任务", "给老板汇报进度")
        store.state.put(
            Scope(user_id=user, tenant=tenant), {"response": {"answer": "好的"}}, name="idem:key-1"
        )  # as the service keeps them
        store.state.put(Scope(user_id=user, thread_id="s1", tenant=tenant), {"copy": "李四"}, name="copies")
        store.checkpoints.save(Scope(user_id=user, thread_id="s1", tenant=tenant), {"step": 3, "名字": "李四"}, at=NOW - timedelta(hours=1))
    assert mem.flush().failed == 0
    return mem


def context_texts(mem: Memory, user: str = "user_001") -> list[tuple[str, str]]:
    ctx = mem.context(user_id=user, thread_id="s2", query=QUESTION, at=NOW, max_tokens=900)
    return [(m.role, m.text) for m in ctx.messages]
