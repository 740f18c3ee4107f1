"""LangGraph's own tables through ``memstack copy`` (``memstack.transfer.langgraph``), with the real
langgraph runtime: a graph paused before its second node on a SQLite store is copied to PostgreSQL
(and memory:// to SQLite), and the same graph compiled with memstack's saver on the destination
resumes the same thread; LangGraph's key-value items travel with a whole tenant; a copy of some
users carries their threads only; a rerun doubles nothing; verify compares the rows."""

from __future__ import annotations

import operator
import os
import uuid
from typing import Annotated, TypedDict

import pytest

pytest.importorskip("langgraph.checkpoint.base")

from langgraph.graph import END, START, StateGraph  # noqa: E402
from pgsupport import drop_schema, require_dsn  # noqa: E402

from memstack.backends.jsonl import JsonlStore  # noqa: E402
from memstack.backends.memory import MemoryStore  # noqa: E402
from memstack.backends.sqlite import SQLiteStore  # noqa: E402
from memstack.errors import UsageError  # noqa: E402
from memstack.integrations.langgraph import MemstackSaver, MemstackStore  # noqa: E402
from memstack.transfer import copy_store  # noqa: E402
from memstack.transfer.copying import MARK_NAME, MARK_USER, verify  # noqa: E402
from memstack.transfer.langgraph import threads  # noqa: E402
from memstack.types import Message, Scope  # noqa: E402

TENANT = "acme"


class State(TypedDict):
    notes: Annotated[list[str], operator.add]


def graph(saver):
    """Two nodes, paused before the second: a thread left half-way, as a human-in-the-loop graph leaves it."""
    builder = StateGraph(State)
    builder.add_node("draft", lambda state: {"notes": [f"草稿 {len(state['notes'])}"]})
    builder.add_node("send", lambda state: {"notes": ["已发送"]})
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "send")
    builder.add_edge("send", END)
    return builder.compile(checkpointer=saver, interrupt_before=["send"])


def config(user: str | None, thread: str) -> dict:
    return {"configurable": {"thread_id": thread} | ({"user_id": user} if user else {})}


LI, BOB, NOBODY = config("李四", "周报"), config("bob", "t1"), config(None, "untagged")


@pytest.fixture
def postgres():
    from memstack.backends.postgres import PostgresStore

    dsn = require_dsn("transfer")
    schema = f"memstack_test_{uuid.uuid4().hex[:12]}"
    store = PostgresStore(dsn, schema=schema, max_size=2)
    yield store
    store.close()
    drop_schema(os.environ["MEMSTACK_TEST_PG_DSN"], schema)


def agent_store(store):
    """李四's and bob's threads paused half-way, one thread of no user, and a key-value item."""
    store.history.append(Scope(user_id="李四", thread_id="周报", tenant=TENANT), [Message(role="user", content="写周报", id="m1")])
    saver = MemstackSaver(store, tenant=TENANT)
    for cfg in (LI, BOB, NOBODY):
        assert graph(saver).invoke({"notes": ["开始"]}, cfg) == {"notes": ["开始", "草稿 1"]}
    MemstackStore(store, tenant=TENANT).put(("李四", "偏好"), "语言", {"value": "中文"})
    return store


def resumes_on(dst) -> None:
    saver = MemstackSaver(dst, tenant=TENANT)
    assert graph(saver).get_state(LI).next == ("send",)  # paused where the source left it
    assert graph(saver).invoke(None, LI) == {"notes": ["开始", "草稿 1", "已发送"]}  # and resumed


def test_a_paused_graph_resumes_on_postgresql_after_a_copy_from_sqlite(tmp_path, postgres):
    src = agent_store(SQLiteStore(tmp_path / "agent.db"))
    try:
        before = [(t.config, t.checkpoint, t.metadata, t.pending_writes) for t in MemstackSaver(src, tenant=TENANT).list(LI)]
        report = copy_store(src, postgres, tenant=TENANT)
        assert report.differences == () and report.read["langgraph"] > 10
        after = [(t.config, t.checkpoint, t.metadata, t.pending_writes) for t in MemstackSaver(postgres, tenant=TENANT).list(LI)]
        assert after == before  # every checkpoint, its metadata and pending writes, as LangGraph reads them
        assert MemstackStore(postgres, tenant=TENANT).get(("李四", "偏好"), "语言").value == {"value": "中文"}
        assert threads(postgres, TENANT, None) == ["t1", "untagged", "周报"]
        postgres.state.put(Scope(user_id=MARK_USER, tenant=TENANT), {"source": src.url}, MARK_NAME)  # as if killed: a rerun
        again = copy_store(src, postgres, tenant=TENANT)
        assert again.resumed and again.differences == () and again.read["langgraph"] == report.read["langgraph"]
        resumes_on(postgres)
        [difference] = verify(src, postgres, tenant=TENANT)  # the destination's thread moved on
        assert str(difference).startswith("the tenant's langgraph:")
    finally:
        src.close()


def test_memory_to_sqlite_and_a_copy_of_one_user(tmp_path):
    src = agent_store(MemoryStore())
    whole, one = SQLiteStore(tmp_path / "whole.db"), SQLiteStore(tmp_path / "one.db")
    try:
        assert copy_store(src, whole, tenant=TENANT).differences == ()
        resumes_on(whole)
        report = copy_store(src, one, tenant=TENANT, users=["李四"])
        assert report.differences == () and threads(one, TENANT, None) == ["周报"]  # bob's and the untagged stay
        assert MemstackStore(one, tenant=TENANT).get(("李四", "偏好"), "语言") is None  # items name no user
        resumes_on(one)
    finally:
        whole.close()
        one.close()


def test_without_langgraph_tables_none_are_made_and_jsonl_is_refused_when_there_are(tmp_path):
    plain, dst = SQLiteStore(tmp_path / "plain.db"), SQLiteStore(tmp_path / "dst.db")
    try:
        plain.history.append(Scope(user_id="u1", thread_id="t", tenant=TENANT), [Message(role="user", content="你好", id="m1")])
        report = copy_store(plain, dst, tenant=TENANT)
        assert report.differences == () and "langgraph" not in report.read
        assert threads(dst, TENANT, None) is None  # no lg_* table made
        with pytest.raises(UsageError, match="keeps no LangGraph tables"):
            copy_store(agent_store(MemoryStore()), JsonlStore(tmp_path / "lines"), tenant=TENANT)
    finally:
        plain.close()
        dst.close()


def test_a_users_export_carries_their_langgraph_threads(tmp_path):
    import json

    from memstack.errors import InvalidInput
    from memstack.transfer import read_export
    from memstack.transfer.portable import export_lines

    src, dst = agent_store(SQLiteStore(tmp_path / "src.db")), SQLiteStore(tmp_path / "dst.db")
    try:
        lines = [json.loads(line) for line in export_lines(src, TENANT, ["李四"])]
        assert lines[0]["version"] == 2
        rows = [line for line in lines if line.get("type") == "langgraph"]
        assert {r["table"] for r in rows} == {"lg_checkpoints", "lg_blobs", "lg_writes"} and {r["row"]["thread_id"] for r in rows} == {
            "周报"
        }
        stored = read_export(enumerate(lines, 1), dst)
        assert stored["langgraph"] == len(rows) and read_export(enumerate(lines, 1), dst)["langgraph"] == 0  # twice: nothing doubled
        resumes_on(dst)
        header = lines[0]
        bad = dict(rows[0], row=dict(rows[0]["row"], checkpoint="不是base64"))
        with pytest.raises(InvalidInput, match="not base64") as caught:
            read_export(enumerate([header, bad], 1), dst)
        assert caught.value.field == "checkpoint"
        with pytest.raises(InvalidInput, match="names one of") as caught:
            read_export(enumerate([header, dict(rows[0], table="users")], 1), dst)
        assert caught.value.field == "table"
        with pytest.raises(InvalidInput, match="has 'user_id'"):
            read_export(enumerate([header, dict(rows[0], row={k: v for k, v in rows[0]["row"].items() if k != "user_id"})], 1), dst)
        with pytest.raises(UsageError, match="keeps no LangGraph tables"):
            read_export(enumerate(lines, 1), JsonlStore(tmp_path / "lines"))
    finally:
        src.close()
        dst.close()


def test_a_store_used_as_a_checkpointer_only_is_copied_whole(tmp_path, postgres):
    from memstack.transfer import copy_tenants, verify_tenants

    src = SQLiteStore(tmp_path / "saver-only.db")
    try:
        saver = MemstackSaver(src, tenant=TENANT)  # no Memory, no message: LangGraph's rows only
        graph(saver).invoke({"notes": ["开始"]}, LI)
        assert src.tenants() == []
        reports = copy_tenants(src, postgres)
        assert sorted(reports) == [TENANT] and reports[TENANT].read["langgraph"] > 0
        assert verify_tenants(src, postgres) == []
        resumes_on(postgres)
    finally:
        src.close()
