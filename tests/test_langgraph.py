"""MemstackSaver against LangGraph's own checkpointer conformance suite (langgraph-checkpoint-conformance),
on a SQLite file, memory:// and PostgreSQL (with MEMSTACK_TEST_PG_DSN), capability by capability;
then real graphs on it.

The suite is a package of async test functions run by ``validate()`` against a registered factory
(``@checkpointer_test``); each capability gets a fresh saver. Base capabilities (put, put_writes,
get_tuple, list, delete_thread) are required; the extended ones (delete_for_runs, copy_thread,
prune) are run because the saver implements them.
"""

from __future__ import annotations

import asyncio
import operator
import subprocess
import sys
import uuid
from typing import Annotated, TypedDict

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from langgraph.checkpoint.conformance import checkpointer_test, validate  # noqa: E402
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from pgsupport import drop_schema, require_dsn  # noqa: E402

from memstack import Memory  # noqa: E402
from memstack.backends import open_store  # noqa: E402
from memstack.errors import SchemaError, UsageError  # noqa: E402
from memstack.integrations import tables  # noqa: E402
from memstack.integrations.langgraph import MemstackSaver, MemstackStore  # noqa: E402
from memstack.integrations.tables import MIGRATIONS, open_tables  # noqa: E402

CAPABILITIES = sorted(c.value for c in ALL_CAPABILITIES)


@pytest.fixture
def postgres():
    """A PostgresStore in a fresh schema (dropped afterwards); skips without MEMSTACK_TEST_PG_DSN."""
    from memstack.backends.postgres import PostgresStore

    dsn = require_dsn("LangGraph adapter")
    schema = f"memstack_test_{uuid.uuid4().hex[:12]}"
    store = PostgresStore(dsn, schema=schema)
    yield store
    store.close()
    drop_schema(dsn, schema)


@pytest.fixture(params=["sqlite", "memory", "postgresql"])
def backend(request, tmp_path):
    """Opens a fresh store of one kind on each call."""
    if request.param == "postgresql":
        store = request.getfixturevalue("postgres")
        return lambda: store  # one schema per test; each saver gets its own tenant below
    if request.param == "sqlite":
        return lambda: f"sqlite:///{tmp_path / uuid.uuid4().hex}.db"
    return lambda: open_store("memory://")


def _registered(backend):
    @checkpointer_test(name="MemstackSaver")
    async def factory():
        yield MemstackSaver(backend(), tenant=uuid.uuid4().hex)

    return factory


@pytest.mark.parametrize("capability", CAPABILITIES)
def test_conformance(backend, capability):
    report = asyncio.run(validate(_registered(backend), capabilities={capability}))
    result = report.results[capability]
    assert result.detected, f"{capability} is not implemented"
    assert result.passed, "\n".join(result.failures)
    assert result.tests_passed > 0 and result.tests_failed == 0


# ---- a graph on the saver --------------------------------------------------------------------


class State(TypedDict):
    notes: Annotated[list[str], operator.add]


def _graph(saver):
    builder = StateGraph(State)
    builder.add_node("note", lambda state: {"notes": [f"note {len(state['notes']) + 1}"]})
    builder.add_edge(START, "note")
    builder.add_edge("note", END)
    return builder.compile(checkpointer=saver)


def test_a_graph_resumes_its_thread_after_a_restart(tmp_path):
    url = f"sqlite:///{tmp_path / 'agent.db'}"
    config = {"configurable": {"thread_id": "t1", "user_id": "u1"}}
    assert _graph(MemstackSaver(url)).invoke({"notes": ["start"]}, config) == {"notes": ["start", "note 2"]}
    reopened = MemstackSaver(url)  # a new process: a new connection to the same file
    assert _graph(reopened).invoke({"notes": []}, config) == {"notes": ["start", "note 2", "note 3"]}
    history = list(reopened.list(config))
    assert len(history) >= 4 and history[0].checkpoint["channel_values"]["notes"][-1] == "note 3"
    assert history[0].metadata["user_id"] == "u1"


def test_async_graph_on_memory_store():
    saver = MemstackSaver(open_store("memory://"))
    graph = _graph(saver)
    config = {"configurable": {"thread_id": "t1"}}

    async def run():
        await graph.ainvoke({"notes": ["a"]}, config)
        return await graph.ainvoke({"notes": ["b"]}, config)

    assert asyncio.run(run()) == {"notes": ["a", "note 2", "b", "note 4"]}


def test_delete_user_erases_only_that_users_threads():
    saver = MemstackSaver(open_store("memory://"))
    graph = _graph(saver)
    graph.invoke({"notes": ["x"]}, {"configurable": {"thread_id": "a", "user_id": "u1"}})
    graph.invoke({"notes": ["y"]}, {"configurable": {"thread_id": "b", "user_id": "u2"}})
    assert saver.delete_user("u1") == 1
    assert saver.get_tuple({"configurable": {"thread_id": "a"}}) is None
    assert saver.get_tuple({"configurable": {"thread_id": "b"}}) is not None


def test_tenants_do_not_see_each_other():
    store = open_store("memory://")
    one, two = MemstackSaver(store, tenant="one"), MemstackSaver(store, tenant="two")
    _graph(one).invoke({"notes": ["x"]}, {"configurable": {"thread_id": "t"}})
    assert two.get_tuple({"configurable": {"thread_id": "t"}}) is None
    assert list(two.list(None)) == []
    two.delete_thread("t")
    assert one.get_tuple({"configurable": {"thread_id": "t"}}) is not None


def test_shares_the_file_with_memory_and_leaves_its_schema_alone(tmp_path):
    db = tmp_path / "m.db"
    with Memory(f"sqlite:///{db}") as memory:
        memory.add("hello", user_id="u1", thread_id="s1")
        _graph(MemstackSaver(memory)).invoke({"notes": []}, {"configurable": {"thread_id": "t"}})
    with Memory(f"sqlite:///{db}") as memory:  # memstack's own migrations know nothing of lg_*
        assert [m.text for m in memory.history(user_id="u1", thread_id="s1")] == ["hello"]
        assert MemstackSaver(memory).get_tuple({"configurable": {"thread_id": "t"}}) is not None


def test_migrates_from_every_older_adapter_schema(tmp_path, monkeypatch):
    for n in range(len(MIGRATIONS)):
        url = f"sqlite:///{tmp_path / f'v{n}.db'}"
        monkeypatch.setattr(tables, "MIGRATIONS", MIGRATIONS[:n])
        old = open_tables(url)  # the schema as of the first n migrations
        if n:
            _graph(MemstackSaver(url)).invoke({"notes": ["kept"]}, {"configurable": {"thread_id": "t"}})
        monkeypatch.setattr(tables, "MIGRATIONS", MIGRATIONS)
        saver, store = MemstackSaver(url), MemstackStore(url)
        assert [r[0] for r in old.query("SELECT name FROM lg_migrations")] == [name for name, _ in MIGRATIONS]
        assert (saver.get_tuple({"configurable": {"thread_id": "t"}}) is not None) == bool(n)
        store.put(("u1",), "k", {"v": 1})
        assert store.get(("u1",), "k").value == {"v": 1}


def test_a_newer_adapter_schema_is_refused(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'x.db'}")
    tables = open_tables(store)
    assert [r[0] for r in tables.query("SELECT name FROM lg_migrations")] == [name for name, _ in MIGRATIONS]
    with tables.write() as tx:
        tx.execute("INSERT INTO lg_migrations VALUES ('lg_999_future', 'x')")
    with pytest.raises(SchemaError, match="lg_999_future"):
        MemstackSaver(store)


def test_a_graph_on_postgres(postgres):
    saver = MemstackSaver(postgres)
    config = {"configurable": {"thread_id": "t1"}}
    _graph(saver).invoke({"notes": ["a"]}, config)
    assert _graph(MemstackSaver(postgres)).invoke({"notes": []}, config) == {"notes": ["a", "note 2", "note 3"]}


def test_other_backends_are_refused(tmp_path):
    with pytest.raises(UsageError, match="sqlite"):
        MemstackSaver(f"jsonl://{tmp_path}")


@pytest.mark.parametrize(
    ("blocked", "module", "extra"), [("langgraph", "langgraph", "langgraph"), ("langchain_core", "langchain", "langchain")]
)
def test_a_missing_framework_names_the_extra(blocked, module, extra):
    code = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "from memstack.errors import MissingDependency\n"
        "try:\n"
        f"    import memstack.integrations.{module}\n"
        "except MissingDependency as exc:\n"
        "    print(exc.install)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == f'pip install "memstack[{extra}]"', out.stderr
    loaded = subprocess.run(
        [sys.executable, "-c", "import memstack, sys; print(sorted(sys.modules))"], capture_output=True, text=True, timeout=120
    ).stdout
    assert "langchain" not in loaded and "langgraph" not in loaded  # the core never imports the frameworks
