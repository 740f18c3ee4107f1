"""MemstackSaver(memory=...): a LangGraph app's MessagesState conversation mirrored into memstack's
history, once each, with no Memory.add in its nodes; and forgetting a user (Memory.forget, the
CLI in another process, the REST DELETE) reaching the user's checkpoints.

Real StateGraphs with MessagesState; the chat model is a deterministic function node (the point
is the memory, not the model); real SQLite files, memory:// and PostgreSQL (MEMSTACK_TEST_PG_DSN).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import operator
import os
import subprocess
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, TypedDict

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402
from pgsupport import drop_schema, require_dsn  # noqa: E402

from memstack import Memory  # noqa: E402
from memstack.backends import open_store  # noqa: E402
from memstack.errors import StoreError, UsageError  # noqa: E402
from memstack.integrations.langgraph import MemstackSaver  # noqa: E402

FACTS = [
    "Hi! I am planning a trip for next spring.",
    "My dog is called Mochi, a small shiba inu.",
    "I live in Hangzhou, near the West Lake.",
]


def config(thread: str, user: str | None = "u1") -> dict:
    return {"configurable": {"thread_id": thread, **({"user_id": user} if user is not None else {})}}


def chat_graph(saver: MemstackSaver, memory: Memory | None = None):
    """One chat node: a scripted model that echoes the user and, given a memory, answers with what
    the memory's context (retrieval) recalls for the user's message. It never calls Memory.add."""

    def chat(state: MessagesState, config) -> dict:
        said = state["messages"][-1].content
        if memory is None:
            return {"messages": [AIMessage(f"Noted: {said}")]}
        who = config["configurable"]
        ctx = memory.context(user_id=who["user_id"], thread_id=who["thread_id"], query=said)
        recalled = " ".join(m.text for m in ctx.messages[:-1])  # the context before the query itself
        return {"messages": [AIMessage(f"Recalled: {recalled}" if recalled else f"Noted: {said}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("chat", chat)
    builder.add_edge(START, "chat")
    builder.add_edge("chat", END)
    return builder.compile(checkpointer=saver)


def history(memory: Memory, thread: str, user: str = "u1") -> list[tuple[str, str, str]]:
    return [(m.id, m.role, m.text) for m in memory.history(user_id=user, thread_id=thread, order="append")]


def state_ids(graph, thread: str) -> list[str]:
    return [m.id for m in graph.get_state(config(thread)).values["messages"]]


@functools.cache
def _embedder_warm() -> bool:
    """Loads the local embedder once per session (a few seconds), so tests time what they test."""
    Memory("memory://", layers="window,retrieval")
    return True


# ---- the acceptance scenario -----------------------------------------------------------------


@pytest.mark.parametrize("mirrored", [True, False])
def test_a_new_thread_recalls_a_fact_from_another_thread(tmp_path, mirrored):
    """Three turns in thread A, no Memory.add anywhere: thread B's retrieval holds the dog's name.
    The control (a saver without memory=) recalls nothing: the mirror is what makes the difference."""
    _embedder_warm()
    memory = Memory(f"sqlite:///{tmp_path / 'app.db'}", layers="window,retrieval")
    saver = MemstackSaver(memory=memory) if mirrored else MemstackSaver(memory)
    graph = chat_graph(saver, memory)
    for text in FACTS:
        graph.invoke({"messages": [("user", text)]}, config("A"))
    memory.flush()  # the retrieval layer's indexing (or Memory(background=True), memstack worker)
    answer = graph.invoke({"messages": [("user", "What is my dog's name?")]}, config("B"))["messages"][-1].content
    ctx = memory.context(user_id="u1", thread_id="B", query="What is my dog's name?")
    if mirrored:
        assert "Mochi" in answer and ctx.sections.get("memory:retrieval", 0) > 0
        assert [role for _, role, _ in history(memory, "A")] == ["user", "assistant"] * 3
    else:
        assert "Mochi" not in answer and answer.startswith("Noted:")
        assert history(memory, "A") == []


# ---- once each -------------------------------------------------------------------------------


def test_each_message_is_mirrored_once_across_invocations_resumes_and_updates(tmp_path):
    memory = Memory(f"sqlite:///{tmp_path / 'app.db'}", layers="window")
    saver = MemstackSaver(memory=memory)
    builder = StateGraph(MessagesState)
    builder.add_node("think", lambda s: {"messages": [AIMessage("thinking")]})
    builder.add_node("answer", lambda s: {"messages": [AIMessage(f"answer {len(s['messages'])}")]})
    builder.add_edge(START, "think")
    builder.add_edge("think", "answer")
    builder.add_edge("answer", END)
    graph = builder.compile(checkpointer=saver, interrupt_before=["answer"])
    for text in ["one", "two"]:
        graph.invoke({"messages": [("user", text)]}, config("t"))  # stops before "answer"
        graph.invoke(None, config("t"))  # resumes
    graph.update_state(config("t"), {"messages": [HumanMessage("added by update_state")]})
    graph.invoke(None, config("t"))  # nothing to run: a no-op
    reopened = MemstackSaver(memory=Memory(f"sqlite:///{tmp_path / 'app.db'}"))  # another process
    builder.compile(checkpointer=reopened).invoke({"messages": [("user", "three")]}, config("t"))
    ids = state_ids(graph, "t")
    stored = history(memory, "t")
    assert [i for i, _, _ in stored] == ids and len(set(ids)) == len(ids)
    assert [text for _, _, text in stored] == [
        "one",
        "thinking",
        "answer 2",
        "two",
        "thinking",
        "answer 5",
        "added by update_state",
        "three",
        "thinking",
        "answer 9",
    ]


def test_tool_calls_and_tool_results_are_kept():
    memory = Memory("memory://", layers="window")
    call = {"name": "weather", "args": {"city": "Hangzhou"}, "id": "call_1", "type": "tool_call"}
    builder = StateGraph(MessagesState)
    builder.add_node("model", lambda s: {"messages": [AIMessage("", tool_calls=[call])]})
    builder.add_node("tools", lambda s: {"messages": [ToolMessage("sunny, 22°C", tool_call_id="call_1", name="weather")]})
    builder.add_edge(START, "model")
    builder.add_edge("model", "tools")
    builder.add_edge("tools", END)
    builder.compile(checkpointer=MemstackSaver(memory=memory)).invoke({"messages": [("user", "天气怎么样？")]}, config("t"))
    user, ai, tool = memory.history(user_id="u1", thread_id="t", order="append")
    assert (user.role, user.text) == ("user", "天气怎么样？")
    assert ai.role == "assistant" and [(c.id, c.name, c.arguments) for c in ai.tool_calls] == [
        ("call_1", "weather", '{"city": "Hangzhou"}')
    ]
    assert (tool.role, tool.tool_call_id, tool.text) == ("tool", "call_1", "sunny, 22°C")


def test_times_are_the_messages_own_or_their_first_checkpoints():
    memory = Memory("memory://", layers="window")
    saver = MemstackSaver(memory=memory)
    graph = chat_graph(saver)
    dated = HumanMessage("imported from last year", response_metadata={"timestamp": "2025-03-01T09:00:00+08:00"})
    graph.invoke({"messages": [dated]}, config("t"))
    first, reply = memory.history(user_id="u1", thread_id="t", order="append")
    assert first.timestamp == datetime(2025, 3, 1, 1, 0, tzinfo=timezone.utc)
    checkpoint_times = {datetime.fromisoformat(t.checkpoint["ts"]) for t in saver.list(config("t"))}
    assert reply.timestamp in checkpoint_times


class Notes(TypedDict):
    """A state without add_messages: its messages carry no ids."""

    chat: Annotated[list, operator.add]


def test_messages_without_ids_get_stable_ones_from_their_place():
    memory = Memory("memory://", layers="window")
    builder = StateGraph(Notes)
    builder.add_node("reply", lambda s: {"chat": [AIMessage(f"reply {len(s['chat'])}")]})
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    graph = builder.compile(checkpointer=MemstackSaver(memory=memory, messages_key="chat"))
    graph.invoke({"chat": [("user", "hello")]}, config("t"))
    graph.invoke({"chat": [("user", "hello")]}, config("t"))  # the same text again: a new message
    stored = history(memory, "t")
    assert [text for _, _, text in stored] == ["hello", "reply 1", "hello", "reply 3"]
    assert len({i for i, _, _ in stored}) == 4 and all(i.startswith("lg-") for i, _, _ in stored)


def test_edits_and_removals_change_the_state_not_the_history(caplog):
    memory = Memory("memory://", layers="window")
    saver = MemstackSaver(memory=memory)
    graph = chat_graph(saver)
    graph.invoke({"messages": [HumanMessage("first version", id="m1")]}, config("t"))
    graph.update_state(config("t"), {"messages": [HumanMessage("edited version", id="m1")]})  # same id: replaced in the state
    graph.update_state(config("t"), {"messages": [RemoveMessage(id=state_ids(graph, "t")[1])]})  # the reply: removed from the state
    with caplog.at_level(logging.WARNING, "memstack.integrations.langgraph"):
        graph.update_state(config("t"), {"messages": [AIMessage("", id="empty")]})  # memstack refuses an empty reply
    assert [m.content for m in graph.get_state(config("t")).values["messages"]] == ["edited version", ""]
    assert [text for _, _, text in history(memory, "t")] == ["first version", "Noted: first version"]
    assert "empty" in caplog.text


def test_only_the_root_namespace_is_mirrored():
    """A subgraph's own messages (checkpointed under its namespace) stay out of the history; what
    it returns into the parent's messages is mirrored."""
    memory = Memory("memory://", layers="window")
    inner = StateGraph(MessagesState)
    inner.add_node("draft", lambda s: {"messages": [AIMessage("scratch draft")]})
    inner.add_node("final", lambda s: {"messages": [AIMessage("final answer")]})
    inner.add_edge(START, "draft")
    inner.add_edge("draft", "final")
    inner.add_edge("final", END)
    sub = inner.compile()

    def delegate(state: MessagesState) -> dict:
        out = sub.invoke({"messages": [HumanMessage("subtask: " + state["messages"][-1].content)]})
        return {"messages": [out["messages"][-1]]}

    outer = StateGraph(MessagesState)
    outer.add_node("delegate", delegate)
    outer.add_edge(START, "delegate")
    outer.add_edge("delegate", END)
    saver = MemstackSaver(memory=memory)
    outer.compile(checkpointer=saver).invoke({"messages": [("user", "plan my trip")]}, config("t"))
    assert any(t.config["configurable"]["checkpoint_ns"] for t in saver.list(None))  # the subgraph was checkpointed
    assert [text for _, _, text in history(memory, "t")] == ["plan my trip", "final answer"]


def test_a_checkpoint_without_its_user_is_refused_before_anything_is_written():
    memory = Memory("memory://", layers="window")
    saver = MemstackSaver(memory=memory)
    with pytest.raises(UsageError, match="user_id"):
        chat_graph(saver).invoke({"messages": [("user", "hi")]}, config("t", user=None))
    assert list(saver.list(None)) == [] and memory.store.history.users("default") == []
    chat_graph(saver).invoke({"messages": [("user", "mine")]}, config("t", user="u1"))
    with pytest.raises(UsageError, match="another user"):  # u1's thread: u2's history would get u1's messages
        chat_graph(saver).invoke({"messages": [("user", "not yours")]}, config("t", user="u2"))
    assert memory.store.history.users("default") == ["u1"]
    assert [m.content for m in chat_graph(saver).get_state(config("t")).values["messages"]] == ["mine", "Noted: mine"]
    with pytest.raises(UsageError, match="target"):
        MemstackSaver("memory://", memory=memory)  # the checkpoints must live beside the memory


def test_a_failed_history_write_keeps_the_checkpoint_and_is_caught_up(monkeypatch, tmp_path):
    memory = Memory(f"sqlite:///{tmp_path / 'app.db'}", layers="window")
    graph = chat_graph(MemstackSaver(memory=memory))
    real_add = memory.add

    def failing_add(*args, **kwargs):
        raise StoreError("the history is unavailable")

    monkeypatch.setattr(memory, "add", failing_add)
    with pytest.raises(StoreError, match="unavailable"):
        graph.invoke({"messages": [("user", "turn one")]}, config("t"))
    # the run stopped at the failed put; its checkpoint and the step's writes are saved
    assert [m.content for m in graph.get_state(config("t")).values["messages"]] == ["turn one", "Noted: turn one"]
    assert history(memory, "t") == []
    monkeypatch.setattr(memory, "add", real_add)
    graph.invoke(None, config("t"))  # LangGraph's recovery: resume the failed run from its checkpoint
    assert [text for _, _, text in history(memory, "t")] == ["turn one", "Noted: turn one"]
    graph.invoke({"messages": [("user", "turn two")]}, config("t"))
    assert [text for _, _, text in history(memory, "t")] == ["turn one", "Noted: turn one", "turn two", "Noted: turn two"]
    assert [i for i, _, _ in history(memory, "t")] == state_ids(graph, "t")


def test_async_graph_mirrors_too():
    memory = Memory("memory://", layers="window", tenant="acme")
    saver = MemstackSaver(memory=memory)
    assert saver.tenant == "acme"
    graph = chat_graph(saver)

    async def run() -> None:
        await graph.ainvoke({"messages": [("user", "async hello")]}, config("t"))

    asyncio.run(run())
    assert [text for _, _, text in history(memory, "t")] == ["async hello", "Noted: async hello"]


# ---- forgetting reaches the checkpoints ------------------------------------------------------


def _two_users(memory: Memory) -> MemstackSaver:
    saver = MemstackSaver(memory=memory)
    graph = chat_graph(saver)
    for user, thread in (("u1", "a1"), ("u1", "a2"), ("u2", "b1")):
        graph.invoke({"messages": [("user", f"hello from {user}")]}, config(thread, user))
    return saver


def _threads(saver: MemstackSaver) -> set[str]:
    return {t.config["configurable"]["thread_id"] for t in saver.list(None)}


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_memory_forget_deletes_the_users_checkpoints_and_only_theirs(tmp_path, kind):
    memory = Memory(f"sqlite:///{tmp_path / 'app.db'}" if kind == "sqlite" else "memory://", layers="window")
    saver = _two_users(memory)
    assert _threads(saver) == {"a1", "a2", "b1"}
    memory.forget(user_id="u1", thread_id="a2")  # one thread: its checkpoints go with it
    assert _threads(saver) == {"a1", "b1"}
    memory.forget(user_id="u2", thread_id="a1")  # not u2's thread: left alone
    assert _threads(saver) == {"a1", "b1"}
    assert memory.forget(user_id="u1") > 2  # messages and checkpoint rows
    assert _threads(saver) == {"b1"}
    assert memory.store.deletions("default")[-1].rows > 2
    assert [text for _, _, text in history(memory, "b1", "u2")] == ["hello from u2", "Noted: hello from u2"]


def test_memory_forget_without_the_adapters_tables_still_works(tmp_path):
    memory = Memory(f"sqlite:///{tmp_path / 'plain.db'}", layers="window")
    memory.add("hello", user_id="u1", thread_id="t")
    assert memory.forget(user_id="u1") == 1
    assert memory.store.query("SELECT name FROM sqlite_master WHERE name LIKE 'lg_%'") == []


def test_the_cli_forget_in_another_process_deletes_the_checkpoints(tmp_path):
    db = tmp_path / "app.db"
    saver = _two_users(Memory(f"sqlite:///{db}", layers="window"))
    env = {**os.environ, "MEMSTACK_HOME": str(tmp_path / "home")}
    out = subprocess.run(
        [sys.executable, "-m", "memstack", "--db", f"sqlite:///{db}", "forget", "--user", "u1", "--yes"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert _threads(saver) == {"b1"}
    assert _threads(MemstackSaver(f"sqlite:///{db}")) == {"b1"}


def test_the_rest_delete_of_a_user_deletes_the_checkpoints():
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from memstack.server import ServerConfig, create_app
    from memstack.testing import ScriptedModel

    memory = Memory("memory://", layers="window")
    saver = _two_users(memory)
    with TestClient(create_app(memory, ServerConfig(model=ScriptedModel(default="ok"), worker=False))) as client:
        response = client.delete("/v1/users/u1")
    assert response.status_code == 200, response.text
    assert _threads(saver) == {"b1"}


def test_forget_on_postgres_deletes_the_users_checkpoints():
    from memstack.backends.postgres import PostgresStore

    dsn = require_dsn("LangGraph memory")
    schema = f"memstack_test_{uuid.uuid4().hex[:12]}"
    store = PostgresStore(dsn, schema=schema)
    try:
        memory = Memory(store, layers="window")
        saver = _two_users(memory)
        assert [text for _, _, text in history(memory, "a1")] == ["hello from u1", "Noted: hello from u1"]
        memory.forget(user_id="u1", thread_id="a2")
        assert _threads(saver) == {"a1", "b1"}
        memory.forget(user_id="u1")
        assert _threads(saver) == {"b1"}
        assert memory.history(user_id="u1", thread_id="a1") == []
    finally:
        store.close()
        drop_schema(dsn, schema)


def test_other_stores_keep_their_checkpoints_when_a_user_is_forgotten_elsewhere(tmp_path):
    """The deletion is per database: a user forgotten in one file leaves another file's checkpoints."""
    one, two = Memory(f"sqlite:///{tmp_path / 'one.db'}", layers="window"), Memory(f"sqlite:///{tmp_path / 'two.db'}", layers="window")
    saver_two = _two_users(two)
    _two_users(one)
    one.forget(user_id="u1")
    assert _threads(saver_two) == {"a1", "a2", "b1"}
    assert open_store(f"sqlite:///{tmp_path / 'one.db'}").query("SELECT DISTINCT thread_id FROM lg_checkpoints") == [("b1",)]


def test_the_readme_example_runs(tmp_path, monkeypatch):
    """The README's LangGraph block (now on docs/langchain.md), executed as written (in a scratch directory: it makes agent.db)."""
    _embedder_warm()
    readme = (Path(__file__).parent.parent / "docs" / "langchain.md").read_text(encoding="utf-8")
    blocks = [b.split("```", 1)[0] for b in readme.split("```python\n")[1:]]
    (block,) = [b for b in blocks if "MemstackSaver(memory=memory)" in b]
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "docs/langchain.md", "exec"), {})
    store = open_store(str(tmp_path / "agent.db"))
    assert store.query("SELECT count(*) FROM lg_checkpoints") == [(0,)] and store.history.users("default") == []  # forgotten
