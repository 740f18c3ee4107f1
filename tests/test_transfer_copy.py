"""``copy_store`` between every pair of backends that keep model-made memory (memory, SQLite,
PostgreSQL), on a store with every layer populated by the scripted model; and to and from the
JSON-lines backend, which keeps messages and checkpoints only. After a copy, verify is clean and
``Memory.context`` for the same question at the same time gives the same messages on both stores."""

from __future__ import annotations

import json
import uuid

import pytest
from pgsupport import drop_schema
from transfer_support import EXTRACTION, LAYERS, NOW, context_texts, fill, open_memory

from memstack import Memory
from memstack.backends.jsonl import JsonlStore
from memstack.backends.memory import MemoryStore
from memstack.backends.sqlite import SQLiteStore
from memstack.errors import UsageError
from memstack.testing import ScriptedModel
from memstack.transfer import copy_store
from memstack.transfer.copying import verify
from memstack.transfer.source import users
from memstack.types import Scope

BACKENDS = ("memory", "sqlite", "postgres")


class Opener:
    """Fresh stores of a backend by name; PostgreSQL ones in schemas dropped at the end."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self.tmp, self.schemas, self.stores = tmp_path_factory, [], []

    def __call__(self, backend: str):
        if backend == "memory":
            store = MemoryStore()
        elif backend == "sqlite":
            store = SQLiteStore(self.tmp.mktemp("sqlite") / "memstack.db")
        elif backend == "jsonl":
            store = JsonlStore(self.tmp.mktemp("jsonl"))
        else:
            import os

            from pgsupport import require_dsn

            from memstack.backends.postgres import PostgresStore

            dsn = require_dsn("transfer")  # skips (before any schema is named) where no PostgreSQL is
            schema = f"memstack_test_{uuid.uuid4().hex[:12]}"
            self.schemas.append(schema)
            store = PostgresStore(dsn, schema=schema, max_size=2)
            os.environ.setdefault("MEMSTACK_TEST_PG_DSN", dsn)
        self.stores.append(store)
        return store

    def close(self) -> None:
        import os

        for store in self.stores:
            store.close()
        for schema in self.schemas:
            drop_schema(os.environ["MEMSTACK_TEST_PG_DSN"], schema)


@pytest.fixture(scope="module")
def opener(tmp_path_factory):
    opened = Opener(tmp_path_factory)
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def sources(opener):
    """One populated store per backend (filled once), with the Memory that filled it."""
    made: dict[str, tuple] = {}

    def source(backend: str):
        if backend not in made:
            store = opener(backend)
            mem = fill(store)
            fill(store, tenant="other", users=("user_001",))
            made[backend] = (store, mem)
        return made[backend]

    return source


@pytest.mark.parametrize("dst_backend", BACKENDS)
@pytest.mark.parametrize("src_backend", BACKENDS)
def test_a_copy_is_whole_and_gives_the_same_contexts(sources, opener, src_backend, dst_backend):
    src, mem = sources(src_backend)
    dst = opener(dst_backend)
    report = copy_store(src, dst, tenant="acme", src_index=src.vectors, dst_index=dst.vectors, batch=7)
    assert report.differences == () and report.users == 2 and not report.resumed
    assert report.read["state"] == 4 and report.read["job"] > 0
    assert report.read["record"] > 10 and report.read["vector"] == report.read["unit"] > 0 and report.read["checkpoint"] == 2
    assert verify(src, dst, tenant="acme", src_index=src.vectors, dst_index=dst.vectors) == []
    assert users(dst, "other") == []  # the other tenant is not touched
    copied = open_memory(dst)
    for user in ("user_001", "用户二"):  # the whole context, memory sections included (jsonb's key order does not show)
        assert context_texts(copied, user) == context_texts(mem, user)
    u = Scope(user_id="user_001", tenant="acme")
    assert dst.records.audit(u) == src.records.audit(u)  # the audit trail verbatim, newest first
    assert dst.history.read(u.thread("s1")) == [m for m in dst.history.read(u.thread("s1"))]
    assert [m.id for m in dst.history.read(u.thread("s1"))] == [m.id for m in src.history.read(u.thread("s1"))]


def test_a_difference_is_named_by_user_and_kind(sources, opener):
    src, _ = sources("memory")
    dst = opener("memory")
    copy_store(src, dst, tenant="acme", src_index=src.vectors, dst_index=dst.vectors)
    dst.records.delete(Scope(user_id="用户二", tenant="acme"), "state")
    dst.history.append(Scope(user_id="user_001", thread_id="s9", tenant="acme"), [Memory_message("多出来的一条")])
    found = [(d.user, d.kind) for d in verify(src, dst, tenant="acme", src_index=src.vectors, dst_index=dst.vectors)]
    assert found == [("user_001", "message"), ("用户二", "record")]


def Memory_message(text: str):
    from memstack.types import Message

    return Message(role="user", content=text)


def test_plain_stores_go_to_and_from_json_lines(opener):
    src = opener("jsonl")
    plain = Memory(src, tenant="acme")
    for i in range(5):
        plain.add({"role": "user", "content": f"第{i}条消息"}, user_id="小明", thread_id="t1")
    src.checkpoints.save(Scope(user_id="小明", thread_id="t1", tenant="acme"), {"step": 1})
    for backend in ("sqlite", "memory", "jsonl"):
        middle = opener(backend)
        assert copy_store(src, middle, tenant="acme").differences == ()
        back = opener("jsonl")
        assert copy_store(middle, back, tenant="acme").differences == ()
        assert verify(src, back, tenant="acme") == []


def test_json_lines_refuses_model_made_memory_before_writing(sources, opener):
    src, _ = sources("memory")
    dst = opener("jsonl")
    with pytest.raises(UsageError, match="keeps no model-made memory"):
        copy_store(src, dst, tenant="acme")
    assert users(dst, "acme") == []


def test_the_layers_continue_on_the_copy_where_they_stopped(opener):
    """The job cursors travel: a message added to both stores afterwards costs the same model
    calls on each, with the same prompts (no layer reads the copied thread again)."""
    src = MemoryStore()
    fill(src, users=("user_001",))
    dst = opener("sqlite")
    assert copy_store(src, dst, tenant="acme", src_index=src.vectors, dst_index=dst.vectors).differences == ()
    prompts = []
    for store in (src, dst):
        model = ScriptedModel([], default=EXTRACTION)
        mem = Memory(store, tenant="acme", layers=list(LAYERS), options={"model": model, "batch_messages": 4, "buffer_tokens": 60})
        for text in ("预算又加了五万", "好的，记下了", "上线推迟到四月", "明白"):
            mem.add(
                {"role": "user" if "好" not in text and "明白" not in text else "assistant", "content": text},
                user_id="user_001",
                thread_id="s2",
                at=NOW,
            )
        assert mem.flush().failed == 0
        prompts.append([json.dumps(call["messages"], ensure_ascii=False) for call in model.calls])
    assert prompts[0] and prompts[0] == prompts[1]
