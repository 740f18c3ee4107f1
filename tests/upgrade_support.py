"""What the upgrade fixtures hold and how a store is read back whole (tests/test_upgrade_store.py).

``populate`` writes every kind of row a store keeps, through the stores' own APIs: messages (text,
content parts, tool calls, a regenerated answer naming the one it replaces, offsets other than
UTC), threads of several agents and tenants, state documents (a thread's, a user's, an
idempotency key's answer), checkpoints beyond ``keep``, job rows (pending, failed, done and
waiting), profiles, versioned records of every kind with their audit trail, model usage, units
(conversation rounds and saved memories) with vectors and cached embeddings, deletion notes of a
user, a thread and a saved memory, and LangGraph checkpoints (``lg_*``). ``dump`` reads all of it
back through the APIs as plain JSON-ready data, plus each table's row count: a fixture made by
one version of memstack and opened by another must dump the same.

The fixtures are made by ``tests/fixtures/upgrade/make.py`` (see there) and never regenerated
by a later version: they stand for stores made by the code of the commit that made them.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any, TypedDict

import numpy as np

from memstack.types import Change, Message, Scope, SearchFilter, ToolCall, Unit, UsageRecord

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=timezone.utc)
CST = timezone(timedelta(hours=8))
MODEL = "fixture-embed"
DIMENSION = 8
TENANTS = ("default", "acme")

ALICE = Scope(user_id="alice")
ALICE_T1 = Scope(user_id="alice", thread_id="t1")
ALICE_COACH = Scope(user_id="alice", thread_id="t2", agent_id="coach")
ALICE_NOTES = Scope(user_id="alice", thread_id="memstack-notes")
BOB_B1 = Scope(user_id="bob", thread_id="b1")
BOB_B2 = Scope(user_id="bob", thread_id="b2")
CAROL = Scope(user_id="carol", thread_id="c1")
DAVE = Scope(user_id="dave", thread_id="d1", tenant="acme")

#: the scopes whose rows ``dump`` reads (the deleted ones too: they must stay empty)
THREADS = (ALICE_T1, ALICE_COACH, ALICE_NOTES, BOB_B1, BOB_B2, CAROL, DAVE)
USERS = (
    ALICE,
    Scope(user_id="alice", agent_id="coach"),
    Scope(user_id="bob"),
    Scope(user_id="carol"),
    Scope(user_id="dave", tenant="acme"),
)
RECORD_SCOPES = (ALICE, ALICE_T1, Scope(user_id="alice", agent_id="coach"), Scope(user_id="bob"), Scope(user_id="dave", tenant="acme"))
STATE_NAMES = ("state", "idempotency:req-1", "user-notes", "missing")
LG_THREADS = ("lg-alice", "lg-bob", "lg-carol")
QUERIES = ("Hangzhou tea", "北京 咖啡", "running shoes", "note memory")


def at(minutes: int, tz: timezone = timezone.utc) -> datetime:
    return (T0 + timedelta(minutes=minutes)).astimezone(tz)


def vector(seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(x) for x in rng.standard_normal(DIMENSION).astype(np.float32)]


# ---- writing -------------------------------------------------------------------------------------


def populate(store: Any) -> None:
    """Fill ``store`` with every kind of row (see the module docstring)."""
    _messages(store)
    _state_and_checkpoints(store)
    _jobs(store)
    _records(store)
    _usage(store)
    _units_and_vectors(store)
    _langgraph(store)
    _deletions(store)


def _messages(store: Any) -> None:
    h = store.history
    call = ToolCall(id="call-1", name="weather", arguments='{"city": "Hangzhou"}')
    h.append(
        ALICE_T1,
        [
            Message("system", "You are helpful.", id="m-sys", timestamp=at(0)),
            Message("user", "I moved to Hangzhou and I love Longjing tea.", id="m-1", timestamp=at(1)),
            Message("assistant", "", tool_calls=(call,), id="m-2", timestamp=at(2)),
            Message("tool", '{"temp": 21}', name="weather", tool_call_id="call-1", id="m-3", timestamp=at(3)),
            Message("assistant", "It is 21 degrees in Hangzhou.", id="m-4", timestamp=at(4), metadata={"model": "scripted"}),
        ],
        enqueue=["summary", "entities"],
    )
    h.append(
        ALICE_T1,
        [
            Message("assistant", "Hangzhou is 21 degrees today; enjoy the tea.", id="m-5", timestamp=at(5), metadata={"replaces": ["m-4"]}),
            Message(
                "user",
                (
                    {"type": "text", "text": "我周末去北京喝咖啡。"},
                    {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                ),
                id="m-6",
                timestamp=at(6, CST),
            ),
        ],
        enqueue=["summary", "entities", "summary"],
        expect_last=h.read(ALICE_T1, last=1)[0].seq,
    )
    h.append(
        ALICE_COACH,
        [
            Message("user", "Plan my running shoes budget.", id="c-1", timestamp=at(10, CST)),
            Message("assistant", "Budget 800 yuan.", id="c-2", timestamp=at(11, CST)),
        ],
        enqueue=["state"],
    )
    h.append(
        BOB_B1,
        [Message("user", "Bob likes coffee.", id="b-1", timestamp=at(20)), Message("assistant", "Noted.", id="b-2", timestamp=at(21))],
    )
    h.append(BOB_B2, [Message("user", "A thread to forget.", id="b-3", timestamp=at(22))], enqueue=["summary"])
    h.append(CAROL, [Message("user", "Carol will be forgotten.", id="k-1", timestamp=at(30))], enqueue=["summary"])
    h.append(DAVE, [Message("user", "Dave at Acme.", id="d-1", timestamp=at(40))], enqueue=["summary"])
    h.append(ALICE_T1, [Message("user", "I moved to Hangzhou and I love Longjing tea.", id="m-1", timestamp=at(1))])  # a resent id: skipped


def _state_and_checkpoints(store: Any) -> None:
    s = store.state
    s.put(ALICE_T1, {"mood": "curious", "城市": "杭州", "n": 1.5, "nested": {"list": [1, "two", None, True]}})
    s.put(ALICE_T1, {"response": {"messages": [{"id": "m-1"}], "status": 200}}, name="idempotency:req-1")
    s.put(ALICE, {"likes": ["tea"]}, name="user-notes")
    assert s.swap(ALICE, {"likes": ["tea", "coffee"]}, expect={"likes": ["tea"]}, name="user-notes")
    s.put(BOB_B2, {"gone": True})
    s.put(CAROL, {"gone": True})
    store.profiles.put("default", {"layers": ["summary", "entities"], "budget": 2000})
    store.profiles.put("acme", {"preset": "standard"})
    for i in range(3):
        store.checkpoints.save(ALICE_T1, {"step": i, "text": f"第{i}步"}, keep=2, at=at(50 + i, CST))
    store.checkpoints.save(ALICE_COACH, {"step": 0}, at=at(55))
    store.checkpoints.save(BOB_B2, {"step": 0}, at=at(56))


def _jobs(store: Any) -> None:
    """One job failed (an error, an attempt), one done and waiting for more, the others pending."""
    jobs = store.jobs
    failed = jobs.claim(worker="w-1", scope=Scope(user_id="dave", tenant="acme"))
    jobs.fail(failed, "model timed out", retry_in=0)
    done = jobs.claim(worker="w-2", scope=Scope(user_id="alice"))
    assert jobs.complete(done, cursor=3, waiting=True)


def _records(store: Any) -> None:
    r = store.records
    r.apply(
        ALICE,
        [
            Change("put", "entity", "Alice", {"name": "Alice", "attributes": {"city": "Beijing"}}, ("m-1",), at(1)),
            Change("put", "relation", "Alice|likes|tea", {"subject": "Alice", "predicate": "likes", "object": "tea"}, ("m-1",)),
            Change("put", "state", "mood", {"value": "curious"}, ("m-1",), at(1)),
            Change("put", "rejected", "Alice|owns|car", {"reason": "not said"}, ("m-2",)),
        ],
        layer="entities",
    )
    r.apply(
        ALICE,
        [
            Change("put", "entity", "Alice", {"name": "Alice", "attributes": {"city": "Hangzhou"}}, ("m-1", "m-5"), at(5, CST)),
            Change("put", "relation", "Alice|likes|tea", {"subject": "Alice", "predicate": "likes", "object": "tea"}, ("m-6",)),
            Change("delete", "state", "mood", at=at(6)),
            Change("put", "entity", "李四", {"name": "李四", "attributes": {"城市": "北京"}}, ("m-6",), at(6, CST)),
        ],
        layer="entities",
    )
    r.apply(ALICE, [Change("put", "state", "mood", {"value": "happy"}, ("m-6",))], layer="ui")
    r.apply(ALICE_T1, [Change("put", "summary", "summary", {"text": "Alice moved to Hangzhou."}, ("m-1", "m-4"), at(4))], layer="summary")
    r.apply(
        ALICE_T1, [Change("put", "summary", "summary", {"text": "Alice lives in Hangzhou, likes tea."}, ("m-5",), at(6))], layer="summary"
    )
    r.apply(Scope(user_id="alice", agent_id="coach"), [Change("put", "state", "budget", {"value": 800}, ("c-2",))], layer="state")
    r.apply(Scope(user_id="bob"), [Change("put", "entity", "Bob", {"name": "Bob"}, ("b-1",))], layer="entities")
    r.apply(BOB_B2, [Change("put", "summary", "summary", {"text": "to forget"}, ("b-3",))], layer="summary")
    r.apply(Scope(user_id="carol"), [Change("put", "entity", "Carol", {"name": "Carol"}, ("k-1",))], layer="entities")
    r.apply(Scope(user_id="dave", tenant="acme"), [Change("put", "entity", "Dave", {"name": "Dave"}, ("d-1",))], layer="entities")


def _usage(store: Any) -> None:
    store.usage.record(
        [
            UsageRecord(ALICE_T1, "summary", "scripted", 120, 30, 12.5, at=at(7)),
            UsageRecord(ALICE_T1, "entities", "scripted", 200, 40, 20.25, ok=False, error="bad JSON", at=at(8, CST)),
            UsageRecord(ALICE_COACH, "state", "scripted", 80, 10, 5.0, at=at(12)),
            UsageRecord(BOB_B2, "summary", "scripted", 10, 1, 1.0, at=at(23)),
            UsageRecord(CAROL, "summary", "scripted", 10, 1, 1.0, at=at(31)),
        ]
    )


def _units_and_vectors(store: Any) -> None:
    units = [
        Unit("u-1", ALICE_T1, "I moved to Hangzhou and I love Longjing tea.", at(1), "round", 1, "fact", ("m-1",), {"lang": "en"}),
        Unit("u-2", ALICE_T1, "It is 21 degrees in Hangzhou.", at(4), "round", 2, None, ("m-3", "m-4")),
        Unit("u-3", ALICE_T1, "我周末去北京喝咖啡。", at(6, CST), "round", 3, "plan", ("m-6",), {"lang": "zh"}),
        Unit("u-1", ALICE_COACH, "Plan my running shoes budget.", at(10, CST), "round", 1, None, ("c-1",)),
        Unit("note-abc", ALICE_NOTES, "note memory: Alice's tea is Longjing", at(9), "note", None, "preference", (), {"saved": True}),
        Unit("note-gone", ALICE_NOTES, "note memory: to be forgotten", at(9), "note", None, None, ()),
        Unit("u-b1", BOB_B1, "Bob likes coffee.", at(20), "round", 1),
        Unit("u-b2", BOB_B2, "A thread to forget.", at(22), "round", 1),
        Unit("u-k1", CAROL, "Carol will be forgotten.", at(30), "round", 1),
        Unit("u-d1", DAVE, "Dave at Acme drinks coffee.", at(40), "round", 1),
    ]
    store.units.put(units)
    store.vectors.upsert(units, [vector(i) for i in range(len(units))], model=MODEL)
    store.embeddings.put(ALICE_T1, MODEL, {"h-1": vector(100), "h-2": vector(101)})
    store.embeddings.put(BOB_B2, MODEL, {"h-3": vector(102)})
    store.embeddings.put(CAROL, MODEL, {"h-4": vector(103)})


class _State(TypedDict):
    items: Annotated[list[str], operator.add]


def _langgraph(store: Any) -> None:
    """Checkpoints, blobs and writes of three LangGraph threads, each tagged with its user."""
    from langgraph.graph import END, START, StateGraph

    from memstack.integrations.langgraph import MemstackSaver

    graph = StateGraph(_State)
    graph.add_node("step", lambda state: {"items": [f"step-{len(state['items'])}"]})
    graph.add_edge(START, "step")
    graph.add_edge("step", END)
    app = graph.compile(checkpointer=MemstackSaver(store, tenant="default"))
    for thread, user, runs in (("lg-alice", "alice", 2), ("lg-bob", "bob", 1), ("lg-carol", "carol", 1)):
        for run in range(runs):
            app.invoke({"items": [f"{user}-{run}"]}, {"configurable": {"thread_id": thread, "user_id": user}})


def _deletions(store: Any) -> None:
    store.history.delete_thread(BOB_B2, layer="ui")
    store.delete_user(CAROL, layer="api")
    store.units.delete(ALICE_NOTES, ["note-gone"])
    store.vectors.delete(ALICE_NOTES, ["note-gone"])
    store.note_deletion(ALICE_NOTES, "note", {"units": 1, "vectors": 1}, layer="tool", name="note-gone")


# ---- reading -------------------------------------------------------------------------------------


def plain(value: Any) -> Any:
    """``value`` as JSON-ready data: dataclasses as dicts, times as ISO text, arrays as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, np.ndarray):
        return [float(x) for x in value.tolist()]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [plain(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, bytes):
        return value.hex()
    return repr(value)


def dump(store: Any, table_counts: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Everything ``populate`` wrote, read back through the store's APIs (jobs last: reading them
    claims them), with ``table_counts()``: each table's rows."""
    out: dict[str, Any] = {"tables": table_counts()}
    h = store.history
    out["users"] = {t: h.users(t) for t in TENANTS}
    out["threads"] = {_name(s): plain(h.threads(s)) for s in USERS}
    out["messages"] = {_name(s): plain(h.read(s)) for s in THREADS}
    out["messages_by_time"] = {_name(s): plain(h.read(s, order="time", last=3)) for s in THREADS}
    out["messages_filtered"] = plain(h.read(ALICE_T1, after=2, until=at(5), roles=["assistant", "tool"]))
    out["state"] = {f"{_name(s)}/{n}": store.state.get(s, n) for s in (*THREADS, ALICE) for n in STATE_NAMES}
    out["profiles"] = {t: store.profiles.get(t) for t in TENANTS}
    out["checkpoints"] = {_name(s): plain(store.checkpoints.list(s)) for s in THREADS}
    out["records"] = _records_dump(store)
    out["usage"] = {_name(s): plain(store.usage.read(s)) for s in USERS}
    out["usage_since"] = plain(store.usage.read(ALICE, since=at(8)))
    out["units"] = _units_dump(store)
    out["vectors"] = _vectors_dump(store)
    out["deletions"] = {f"{t}/{u}": plain(store.deletions(t, user_id=u)) for t in TENANTS for u in (None, "alice", "bob", "carol", "dave")}
    out["langgraph"] = _langgraph_dump(store)
    out["jobs"] = _jobs_dump(store)
    return out


def sqlite_counts(store: Any) -> Callable[[], dict[str, Any]]:
    """Each table's rows in a SQLite store's file, and the migrations applied, in order."""

    def counts() -> dict[str, Any]:
        names = [
            r[0] for r in store.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        ]
        out: dict[str, Any] = {name: store.query(f'SELECT count(*) FROM "{name}"')[0][0] for name in names}
        out["migration names"] = [r[0] for r in store.query("SELECT name FROM _migrations ORDER BY rowid")]
        return out

    return counts


def postgres_counts(dsn: str, schema: str) -> Callable[[], dict[str, Any]]:
    """Each table's rows in a PostgreSQL schema, and the migrations applied."""

    def counts() -> dict[str, Any]:
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            names = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename", (schema,))]
            out: dict[str, Any] = {name: conn.execute(f'SELECT count(*) FROM "{schema}"."{name}"').fetchone()[0] for name in names}
            out["migration names"] = [r[0] for r in conn.execute(f'SELECT name FROM "{schema}".memstack_migrations ORDER BY name')]
            return out

    return counts


def _name(scope: Scope) -> str:
    return "/".join(part or "-" for part in scope.key)


def _records_dump(store: Any) -> dict[str, Any]:
    r = store.records
    kinds = ("summary", "entity", "relation", "state", "rejected")
    out: dict[str, Any] = {"users": {t: r.users(t) for t in TENANTS}}
    for scope in RECORD_SCOPES:
        name = _name(scope)
        out[f"current {name}"] = {k: plain(r.current(scope, k)) for k in kinds}
        audit = r.audit(scope)
        out[f"audit {name}"] = plain(audit)
        out[f"audit entity {name}"] = plain(r.audit(scope, kind="entity", limit=2))
        keys = sorted({(e.kind, e.key, e.scope) for e in audit}, key=repr)
        out[f"history {name}"] = {f"{kind}/{key}/{_name(s)}": plain(r.history(s, kind, key)) for kind, key, s in keys}
    out["current by key"] = plain(r.current(ALICE, "entity", ["Alice", "nobody"]))
    out["carol"] = plain(r.history(Scope(user_id="carol"), "entity", "Carol"))
    return out


def _units_dump(store: Any) -> dict[str, Any]:
    u = store.units
    everything = sorted((plain(x) for batch in u.iterate(batch=3) for x in batch), key=lambda d: (d["scope"]["tenant"], repr(d)))
    out: dict[str, Any] = {"all": everything, "users": {t: u.users(t) for t in TENANTS}}
    out["alice batches"] = [[x.id for x in batch] for batch in u.iterate(ALICE, batch=2)]
    out["get"] = plain(u.get(ALICE, ["u-3", "u-1", "note-abc", "note-gone", "none"]))
    out["rounds"] = plain(u.in_rounds(ALICE_T1, [1, 3]))
    for scope in USERS:
        for q in QUERIES:
            out[f"search {_name(scope)} {q}"] = plain(u.keyword_search(scope, q, k=5))
    out["search filtered"] = plain(u.keyword_search(ALICE, "Hangzhou tea 北京", k=5, where=SearchFilter(kinds=("round",), since=at(2))))
    return out


def _vectors_dump(store: Any) -> dict[str, Any]:
    v = store.vectors
    out: dict[str, Any] = {"info": list(v.info())}
    for scope in USERS:
        out[f"search {_name(scope)}"] = plain(v.search(scope, vector(1), k=10))
        out[f"fetch {_name(scope)}"] = plain(v.fetch(scope, ["u-1", "u-2", "u-3", "note-abc", "note-gone", "u-b1", "u-k1", "u-d1"]))
    out["search filtered"] = plain(v.search(ALICE, vector(2), k=3, where=SearchFilter(thread_ids=("t1",), categories=("fact", "plan"))))
    out["embeddings"] = {_name(s): plain(store.embeddings.get(s, MODEL, ["h-1", "h-2", "h-3", "h-4"])) for s in THREADS}
    return out


def _langgraph_dump(store: Any) -> dict[str, Any]:
    from memstack.integrations.langgraph import MemstackSaver

    saver = MemstackSaver(store, tenant="default")
    out = {}
    for thread in LG_THREADS:
        tuples = list(saver.list({"configurable": {"thread_id": thread}}))
        out[thread] = [
            {
                "config": plain(t.config),
                "parent": plain(t.parent_config),
                "metadata": plain(t.metadata),
                "values": plain(t.checkpoint["channel_values"]),
                "versions": plain(t.checkpoint["channel_versions"]),
                "writes": plain(t.pending_writes),
            }
            for t in tuples
        ]
    return out


def _jobs_dump(store: Any) -> dict[str, Any]:
    """The pending counts, then every claimable job (pending ones, then waiting ones), claimed."""
    jobs = store.jobs
    out: dict[str, Any] = {"pending": jobs.pending(), "pending per user": {_name(s): jobs.pending(s) for s in USERS}}
    for waiting in (False, True):
        claimed = []
        while (job := jobs.claim(worker="upgrade-test", waiting=waiting)) is not None:
            row = plain(job)
            # ``final`` (a job taken with no request pending) is read from the rows, not stored: a
            # waiting job is final, a pending one is not; the fixtures' dumps predate the field
            if "final" in row:
                assert row.pop("final") is waiting, job
            claimed.append(row)
        out["waiting" if waiting else "claimable"] = sorted(claimed, key=repr)
    return out
