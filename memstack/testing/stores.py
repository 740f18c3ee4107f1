"""The Store contract: history, state, checkpoints, jobs and deletion, for every backend.

Subclass ``StoreContract`` in a pytest module and implement ``new_store`` (a fresh, empty store);
durable backends also set ``durable = True`` and implement ``reopen`` (close, then open the same
location, as a restarted process would)::

    class TestMyStore(StoreContract):
        durable = True
        def new_store(self): ...
        def reopen(self, store): ...
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol, TypeVar, cast

import pytest

from ..errors import Conflict, InvalidInput, UsageError
from ..stores import EmbeddingCache, RecordStore, Store, UnitStore, UsageLog, VectorIndex
from ..types import JobCursor, Message, Scope, StateDocument, ToolCall

V = TypeVar("V")

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=timezone(timedelta(hours=8)))


def msg(role: str, text: str, minutes: int = 0, **kw: Any) -> Message:
    return Message(role=role, content=text, timestamp=T0 + timedelta(minutes=minutes), **kw)  # type: ignore[arg-type]


def present(value: V | None) -> V:
    """``value``, which the contract expects to be there (a claimed job, a saved checkpoint)."""
    assert value is not None
    return value


class FullStore(Store, Protocol):
    """A Store with the parts the retrieval and model-backed backends add (see ``stores.Store``),
    as the contracts of those parts reach them."""

    @property
    def records(self) -> RecordStore: ...

    @property
    def usage(self) -> UsageLog: ...

    @property
    def units(self) -> UnitStore: ...

    @property
    def vectors(self) -> VectorIndex: ...

    @property
    def embeddings(self) -> EmbeddingCache: ...


def full(store: Store) -> FullStore:
    """``store`` as the contract of one of its optional parts reaches it (``FullStore``)."""
    return cast(FullStore, store)


A = Scope(user_id="user_001", thread_id="t1")
A2 = Scope(user_id="user_001", thread_id="t2")
B = Scope(user_id="user_002", thread_id="t1")
OTHER_TENANT = Scope(user_id="user_001", thread_id="t1", tenant="acme")
AGENT = Scope(user_id="user_001", thread_id="t1", agent_id="planner")


class StoreFixture:
    """What a contract suite's subclass provides: ``new_store`` (an empty store) and, for a
    ``durable`` backend, ``reopen`` (the same data through a new store object); the ``store``
    fixture opens one per test and closes it after."""

    durable = False

    def new_store(self) -> Store:
        raise NotImplementedError

    def reopen(self, store: Store) -> Store:
        raise NotImplementedError

    @pytest.fixture
    def store(self) -> Iterator[Store]:
        s = self.new_store()
        yield s
        s.close()


class StoreContract(StoreFixture):
    """Behaviour every Store (history, state, checkpoints, jobs, delete_user) must show."""

    #: claims take the longest-waiting job first (the SQL and memory backends)
    fair_claims = True

    # ---- history ---------------------------------------------------------------------------

    def test_append_then_read_in_order(self, store: Store) -> None:
        stored = store.history.append(A, [msg("user", "我叫李四"), msg("assistant", "你好李四！", 1)])
        assert [m.seq is not None for m in stored] == [True, True]
        assert present(stored[0].seq) < present(stored[1].seq)
        got = store.history.read(A)
        assert [m.text for m in got] == ["我叫李四", "你好李四！"]
        assert [m.id for m in got] == [m.id for m in stored]

    def test_unknown_thread_reads_empty(self, store: Store) -> None:
        assert store.history.read(Scope(user_id="nobody", thread_id="none")) == []
        assert store.history.threads(Scope(user_id="nobody")) == []

    def test_message_fields_round_trip(self, store: Store) -> None:
        call = ToolCall(id="call_1", name="get_weather", arguments='{"city": "北京"}')
        original = [
            Message(role="system", content="你是助手", timestamp=T0),
            Message(
                role="user",
                content=({"type": "text", "text": "看图"}, {"type": "image_url", "image_url": {"url": "http://x/a.png"}}),
                name="li",
                timestamp=T0,
                metadata={"source": "app", "n": 1},
            ),
            Message(role="assistant", content="", tool_calls=(call,), timestamp=T0 + timedelta(seconds=1)),
            Message(role="tool", content='{"temp": 21}', tool_call_id="call_1", timestamp=T0 + timedelta(seconds=2)),
            Message(role="assistant", content="北京21度 🌤 " + "长" * 5000, timestamp=T0 + timedelta(seconds=3)),
        ]
        store.history.append(A, original)
        got = store.history.read(A)
        for a, b in zip(original, got, strict=True):
            # the instant is kept; a backend may normalise the offset (PostgreSQL returns UTC)
            assert {**b.to_dict(), "timestamp": b.timestamp} == {**a.to_dict(), "timestamp": a.timestamp}
            assert b.timestamp.utcoffset() is not None

    def test_append_is_idempotent_by_id(self, store: Store) -> None:
        m = msg("user", "你好")
        assert len(store.history.append(A, [m])) == 1
        assert store.history.append(A, [m]) == []
        assert len(store.history.read(A)) == 1

    def test_read_after_until_last(self, store: Store) -> None:
        stored = store.history.append(A, [msg("user", f"第{i}条", i) for i in range(6)])
        assert [m.text for m in store.history.read(A, last=2)] == ["第4条", "第5条"]
        assert store.history.read(A, last=0) == []
        assert [m.text for m in store.history.read(A, after=stored[3].seq)] == ["第4条", "第5条"]
        assert [m.text for m in store.history.read(A, until=T0 + timedelta(minutes=1))] == ["第0条", "第1条"]
        assert [m.text for m in store.history.read(A, until=T0 + timedelta(minutes=4), last=1)] == ["第4条"]

    def test_read_by_role(self, store: Store) -> None:
        store.history.append(A, [msg("system", "规则", 0), msg("user", "问", 1), msg("assistant", "答", 2), msg("system", "新规则", 3)])
        assert [m.text for m in store.history.read(A, roles=["system"])] == ["规则", "新规则"]
        assert [m.text for m in store.history.read(A, roles=["system"], last=1)] == ["新规则"]
        assert [m.text for m in store.history.read(A, roles=["user", "assistant"], until=T0 + timedelta(minutes=1))] == ["问"]
        assert store.history.read(A, roles=[]) == []

    def test_read_in_time_order(self, store: Store) -> None:
        # a back-dated message (an import, `memstack add --at`) reads in its place with
        # order="time", ties in append order; append order stays the default (job cursors are seqs)
        store.history.append(A, [msg("user", "二", 2), msg("assistant", "三", 3)])
        early = Message(role="user", content="零", timestamp=(T0 - timedelta(minutes=1)).astimezone(timezone.utc))
        store.history.append(A, [msg("user", "一", 1), msg("user", "也二", 2), early])
        assert [m.text for m in store.history.read(A)] == ["二", "三", "一", "也二", "零"]
        assert [m.text for m in store.history.read(A, order="time")] == ["零", "一", "二", "也二", "三"]
        assert [m.text for m in store.history.read(A, order="time", last=2)] == ["也二", "三"]
        assert [m.text for m in store.history.read(A, order="time", until=T0 + timedelta(minutes=2), last=2)] == ["二", "也二"]
        assert [m.text for m in store.history.read(A, order="time", roles=["assistant"])] == ["三"]
        assert store.history.read(A, order="time", last=0) == []
        with pytest.raises(InvalidInput, match="order"):
            store.history.read(A, order="newest")

    def test_thread_required_for_history(self, store: Store) -> None:
        with pytest.raises(InvalidInput):
            store.history.append(Scope(user_id="user_001"), [msg("user", "x")])

    def test_threads_of_a_user(self, store: Store) -> None:
        store.history.append(A, [msg("user", "a", 0), msg("assistant", "b", 1)])
        store.history.append(A2, [msg("user", "c", 5)])
        store.history.append(B, [msg("user", "d", 9)])
        store.history.append(OTHER_TENANT, [msg("user", "e", 9)])
        infos = store.history.threads(Scope(user_id="user_001"))
        assert [(t.thread_id, t.messages) for t in infos] == [("t2", 1), ("t1", 2)]
        assert infos[1].first_at == T0 and infos[1].last_at == T0 + timedelta(minutes=1)

    def test_isolation_between_users_tenants_agents(self, store: Store) -> None:
        for i, sc in enumerate([A, B, OTHER_TENANT, AGENT]):
            store.history.append(sc, [msg("user", f"secret {i}")])
        assert [m.text for m in store.history.read(A)] == ["secret 0"]
        assert [m.text for m in store.history.read(B)] == ["secret 1"]
        assert [m.text for m in store.history.read(OTHER_TENANT)] == ["secret 2"]
        assert [m.text for m in store.history.read(AGENT)] == ["secret 3"]
        assert [t.agent_id for t in store.history.threads(Scope(user_id="user_001", agent_id="planner"))] == ["planner"]

    def test_delete_thread(self, store: Store) -> None:
        store.history.append(A, [msg("user", "x")], enqueue=["probe"])
        store.history.append(A2, [msg("user", "y")])
        store.state.put(A, {"k": 1})
        store.checkpoints.save(A, {"step": 1})
        assert store.history.delete_thread(A) == 1
        assert store.history.read(A) == []
        assert store.state.get(A) is None and store.checkpoints.latest(A) is None
        assert store.jobs.pending(A) == 0
        assert [m.text for m in store.history.read(A2)] == ["y"]

    def test_concurrent_appends_lose_nothing(self, store: Store) -> None:
        def writer(w: int) -> None:
            for i in range(25):
                store.history.append(A, [msg("user", f"w{w}-{i}")])

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        texts = [m.text for m in store.history.read(A)]
        assert len(texts) == 100
        for w in range(4):
            mine = [t for t in texts if t.startswith(f"w{w}-")]
            assert mine == [f"w{w}-{i}" for i in range(25)]

    # ---- state -----------------------------------------------------------------------------

    def test_state_get_put_delete(self, store: Store) -> None:
        user = Scope(user_id="user_001")
        assert store.state.get(user) is None
        store.state.put(user, {"name": "李四", "prefs": {"sport": ["跑步"]}})
        store.state.put(A, {"step": 2})
        store.state.put(user, {"n": 1}, name="profile")
        assert store.state.get(user) == {"name": "李四", "prefs": {"sport": ["跑步"]}}
        assert store.state.get(A) == {"step": 2}
        assert store.state.get(user, "profile") == {"n": 1}
        store.state.put(user, {"name": "王五"})
        assert store.state.get(user) == {"name": "王五"}
        assert store.state.get(Scope(user_id="user_001", tenant="acme")) is None
        assert store.state.delete(user) is True
        assert store.state.delete(user) is False
        assert store.state.get(user) is None and store.state.get(user, "profile") == {"n": 1}

    def test_state_dump_lists_every_document_of_the_user(self, store: Store) -> None:
        user = Scope(user_id="user_001")
        store.state.put(user, {"name": "李四"})
        store.state.put(A, {"step": 2}, name="idem:请求/1")
        store.state.put(AGENT, {"plan": ["写", "测"]})
        store.state.put(B, {"other": True})
        store.state.put(OTHER_TENANT, {"other": True})
        got = sorted(store.state.dump(user), key=lambda d: (d.scope.agent_id or "", d.scope.thread_id or "", d.name))
        assert got == [
            StateDocument(user, "state", {"name": "李四"}),
            StateDocument(A, "idem:请求/1", {"step": 2}),
            StateDocument(AGENT, "state", {"plan": ["写", "测"]}),
        ]
        store.state.delete(A, name="idem:请求/1")
        store.state.put(got[1].scope, got[1].value, got[1].name)  # put writes a dumped document back
        assert store.state.get(A, "idem:请求/1") == {"step": 2} and len(store.state.dump(user)) == 3

    def test_state_swap_writes_only_over_the_expected_value(self, store: Store) -> None:
        other = Scope(user_id="user_002", thread_id="t1")
        assert store.state.swap(A, {"by": "w1", "n": 1}, expect=None, name="claim") is True
        assert store.state.swap(A, {"by": "w2"}, expect=None, name="claim") is False  # taken
        assert store.state.swap(A, {"by": "w2"}, expect={"by": "w9", "n": 1}, name="claim") is False
        assert store.state.get(A, "claim") == {"by": "w1", "n": 1}
        assert store.state.swap(A, {"by": "w2", "n": 2}, expect={"n": 1, "by": "w1"}, name="claim") is True  # key order is no matter
        assert store.state.get(A, "claim") == {"by": "w2", "n": 2}
        assert store.state.swap(other, {"by": "w3"}, expect=None, name="claim") is True  # another user's is another value
        assert store.state.swap(A, None, expect={"by": "w1", "n": 1}, name="claim") is False
        assert store.state.swap(A, None, expect={"by": "w2", "n": 2}, name="claim") is True  # deleted
        assert store.state.get(A, "claim") is None and store.state.get(other, "claim") == {"by": "w3"}
        assert store.state.swap(A, None, expect=None, name="claim") is True  # absent, as expected
        assert store.state.swap(other, None, expect=None, name="claim") is False

    def test_state_swap_lets_one_of_many_threads_win(self, store: Store) -> None:
        def claim(i: int) -> bool:
            return store.state.swap(A, {"by": i}, expect=None, name="race")

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            won = [i for i, ok in enumerate(pool.map(claim, range(16))) if ok]
        assert len(won) == 1 and store.state.get(A, "race") == {"by": won[0]}

    def test_state_rejects_non_json(self, store: Store) -> None:
        with pytest.raises(InvalidInput):
            store.state.put(A, {"when": object()})
        assert store.state.get(A) is None

    def test_state_returns_a_copy(self, store: Store) -> None:
        store.state.put(A, {"list": [1]})
        got = present(store.state.get(A))
        got["list"].append(2)
        assert store.state.get(A) == {"list": [1]}

    # ---- checkpoints -----------------------------------------------------------------------

    def test_checkpoints_latest_and_retention(self, store: Store) -> None:
        assert store.checkpoints.latest(A) is None
        for i in range(5):
            store.checkpoints.save(A, {"step": i}, keep=3, at=T0 + timedelta(seconds=i))
        store.checkpoints.save(B, {"step": 99})
        assert present(store.checkpoints.latest(A)).data == {"step": 4}
        assert [c.data["step"] for c in store.checkpoints.list(A)] == [4, 3, 2]
        assert present(store.checkpoints.latest(A)).created_at == T0 + timedelta(seconds=4)
        assert present(store.checkpoints.latest(B)).data == {"step": 99}

    # ---- jobs ------------------------------------------------------------------------------

    def test_append_enqueues_in_the_same_call(self, store: Store) -> None:
        assert store.jobs.pending() == 0
        store.history.append(A, [msg("user", "x")], enqueue=["probe", "other"])
        assert store.jobs.pending(A) == 2
        assert store.jobs.pending(B) == 0

    def test_jobs_coalesce_and_lease(self, store: Store) -> None:
        for i in range(3):
            store.history.append(A, [msg("user", f"x{i}")], enqueue=["probe"])
        job = present(store.jobs.claim(worker="w1"))
        assert job is not None and job.layer == "probe" and job.scope.key == A.key
        assert job.version == 3 and job.cursor == 0
        assert store.jobs.claim(worker="w2") is None  # leased
        last = present(store.history.read(A)[-1].seq)
        store.jobs.complete(job, cursor=last)
        assert store.jobs.pending() == 0 and store.jobs.claim(worker="w2") is None
        store.history.append(A, [msg("user", "y")], enqueue=["probe"])
        again = present(store.jobs.claim(worker="w2"))
        assert again.cursor == last and again.version == 4

    def test_a_waiting_job_is_taken_only_by_a_flush_or_a_new_request(self, store: Store) -> None:
        store.history.append(A, [msg("user", "x")], enqueue=["probe"])
        job = present(store.jobs.claim(worker="w1"))
        store.jobs.complete(job, cursor=0, waiting=True)  # the layer holds the turn for a fuller batch
        assert store.jobs.pending() == 0 and store.jobs.claim(worker="w1") is None
        flushed = present(store.jobs.claim(worker="w1", waiting=True))
        assert flushed.cursor == 0 and flushed.final
        store.jobs.complete(flushed, cursor=1)
        assert store.jobs.claim(worker="w1", waiting=True) is None  # done: no longer waiting
        store.history.append(A, [msg("user", "y")], enqueue=["probe"])
        job = present(store.jobs.claim(worker="w1"))
        store.jobs.complete(job, cursor=1, waiting=True)
        store.history.append(A, [msg("user", "z")], enqueue=["probe"])
        assert present(store.jobs.claim(worker="w1")).cursor == 1  # a new request takes it as usual

    def test_a_waiting_job_of_a_quiet_thread_is_taken_as_a_flush(self, store: Store) -> None:
        store.history.append(A, [msg("user", "x")], enqueue=["probe"])
        job = present(store.jobs.claim(worker="w1", idle_seconds=0))
        assert not job.final  # a request pending: an ordinary run
        store.jobs.complete(job, cursor=0, waiting=True)  # the layer holds the turn for a fuller batch
        assert store.jobs.claim(worker="w1", idle_seconds=3600) is None  # not quiet for an hour yet
        quiet = present(store.jobs.claim(worker="w1", idle_seconds=0))
        assert quiet.final and quiet.cursor == 0  # its layer runs what it held back
        assert store.jobs.claim(worker="w2", idle_seconds=0) is None  # leased
        store.jobs.complete(quiet, cursor=1)
        assert store.jobs.claim(worker="w1", idle_seconds=0) is None  # done: no longer waiting
        assert store.jobs.claim(worker="w1", waiting=True) is None  # nothing left to flush

    def test_job_cursors_are_read_and_restored(self, store: Store) -> None:
        store.history.append(A, [msg("user", "你好"), msg("assistant", "你好！")], enqueue=["probe"])
        store.history.append(AGENT, [msg("user", "计划")], enqueue=["probe"])
        store.history.append(B, [msg("user", "别人")], enqueue=["probe"])
        job = present(store.jobs.claim(worker="w1", scope=A))
        while job.scope != A:  # the user's other job first, maybe
            job = present(store.jobs.claim(worker="w1", scope=A))
        assert store.jobs.complete(job, cursor=7, waiting=True)
        got = sorted(store.jobs.cursors(A.user()), key=lambda c: c.scope.agent_id or "")
        assert got == [JobCursor(A, "probe", 7, False, True), JobCursor(AGENT, "probe", 0, True, False)]
        store.jobs.restore([JobCursor(A, "probe", 3, True, False), JobCursor(A2, "probe", 9, False, True)])
        got = sorted(store.jobs.cursors(A.user()), key=lambda c: (c.scope.agent_id or "", c.scope.thread_id or ""))
        assert got == [
            JobCursor(A, "probe", 3, True, False),
            JobCursor(A2, "probe", 9, False, True),
            JobCursor(AGENT, "probe", 0, True, False),
        ]
        assert present(store.jobs.claim(worker="w2", scope=B)).scope == B  # another user's row untouched
        assert store.jobs.pending(A.user()) == 2 and {c.layer for c in store.jobs.cursors(B.user())} == {"probe"}
        job = present(store.jobs.claim(worker="w2", scope=A))
        while job.scope != A:
            job = present(store.jobs.claim(worker="w2", scope=A))
        assert job.cursor == 3

    def test_a_waiting_job_that_failed_waits_for_its_retry_even_in_a_flush(self, store: Store) -> None:
        store.history.append(A, [msg("user", "x")], enqueue=["probe"])
        job = present(store.jobs.claim(worker="w1"))
        store.jobs.complete(job, cursor=0, waiting=True)
        flushed = present(store.jobs.claim(worker="w1", waiting=True))
        store.jobs.fail(flushed, "the model's output stayed invalid", retry_in=60)
        assert store.jobs.claim(worker="w1", waiting=True) is None  # not again at once: no busy loop

    def test_request_during_run_stays_pending(self, store: Store) -> None:
        store.history.append(A, [msg("user", "x")], enqueue=["probe"])
        job = present(store.jobs.claim(worker="w1"))
        store.history.append(A, [msg("user", "y")], enqueue=["probe"])
        store.jobs.complete(job, cursor=1)
        assert store.jobs.pending() == 1
        assert present(store.jobs.claim(worker="w1")).version == 2

    def test_expired_lease_is_reclaimed(self, store: Store) -> None:
        store.history.append(A, [msg("user", "x")], enqueue=["probe"])
        first = present(store.jobs.claim(worker="dead", lease_seconds=0.0))
        assert first is not None
        second = present(store.jobs.claim(worker="alive"))
        assert second is not None and second.worker == "alive" and second.version == first.version

    def test_only_the_worker_holding_a_job_completes_it(self, store: Store) -> None:
        store.history.append(A, [msg("user", "x")], enqueue=["probe"])
        slow = present(store.jobs.claim(worker="slow", lease_seconds=0.0))  # its lease runs out mid-job
        taken = present(store.jobs.claim(worker="other"))
        assert taken is not None and taken.worker == "other"
        assert store.jobs.renew(slow, lease_seconds=60) is False  # the job is no longer its own
        assert store.jobs.complete(slow, cursor=1) is False
        store.jobs.fail(slow, "late failure", retry_in=3600)  # ignored: another worker holds it
        assert store.jobs.pending() == 1 and store.jobs.claim(worker="third") is None  # still other's
        assert store.jobs.complete(taken, cursor=1) is True
        assert store.jobs.pending() == 0
        assert store.jobs.complete(taken, cursor=1) is False  # done once; its lease is gone
        store.history.append(A, [msg("user", "y")], enqueue=["probe"])
        again = present(store.jobs.claim(worker="third"))
        assert again.attempts == 0 and again.last_error is None and again.cursor == 1

    def test_a_renewed_lease_keeps_the_job_from_other_workers(self, store: Store) -> None:
        store.history.append(A, [msg("user", "x")], enqueue=["probe"])
        job = present(store.jobs.claim(worker="w1", lease_seconds=0.0))
        assert store.jobs.renew(job, lease_seconds=60) is True
        assert store.jobs.claim(worker="w2") is None
        assert store.jobs.complete(job, cursor=1) is True
        assert store.jobs.renew(job, lease_seconds=60) is False  # completed: nothing to renew

    def test_failed_job_waits_and_counts_attempts(self, store: Store) -> None:
        store.history.append(A, [msg("user", "x")], enqueue=["probe"])
        job = present(store.jobs.claim(worker="w1"))
        store.jobs.fail(job, "model returned malformed JSON", retry_in=3600)
        assert store.jobs.claim(worker="w1") is None
        assert store.jobs.pending() == 1
        store.jobs.fail(job, "again", retry_in=0)
        retry = present(store.jobs.claim(worker="w1"))
        assert retry.attempts == 2 and retry.last_error == "again"

    def test_longest_waiting_job_first(self, store: Store) -> None:
        if not self.fair_claims:
            pytest.skip("this backend does not order claims")
        store.history.append(A, [msg("user", "x")], enqueue=["probe"])
        store.history.append(B, [msg("user", "y")], enqueue=["probe"])
        first = present(store.jobs.claim(worker="w"))
        store.jobs.complete(first, cursor=1)
        store.history.append(A, [msg("user", "z")], enqueue=["probe"])
        assert first.scope.key == A.key
        assert present(store.jobs.claim(worker="w")).scope.key == B.key

    def test_claim_filtered_by_user(self, store: Store) -> None:
        store.history.append(A, [msg("user", "x")], enqueue=["probe"])
        assert store.jobs.claim(worker="w", scope=B) is None
        assert store.jobs.claim(worker="w", scope=A) is not None

    # ---- deletion --------------------------------------------------------------------------

    def populate(self, store: Store, scope: Scope) -> None:
        store.history.append(scope, [msg("user", "我叫李四"), msg("assistant", "你好李四！", 1)], enqueue=["probe"])
        store.history.append(scope.thread("t9"), [msg("user", "another thread")])
        store.state.put(scope.user(), {"name": "李四"})
        store.state.put(scope, {"step": 1})
        store.checkpoints.save(scope, {"step": 1})

    def test_delete_user_removes_everything_and_nothing_else(self, store: Store) -> None:
        victims = [A, Scope(user_id="user_001", thread_id="t1", agent_id="planner")]
        survivors = [B, OTHER_TENANT, Scope(user_id="user_0011", thread_id="t1"), Scope(user_id="user_00", thread_id="t1")]
        for sc in victims + survivors:
            self.populate(store, sc)
        assert store.delete_user(A) > 0
        for sc in victims:
            assert store.history.read(sc) == [] and store.history.read(sc.thread("t9")) == []
            assert store.history.threads(sc.user()) == []
            assert store.state.get(sc.user()) is None and store.state.get(sc) is None
            assert store.checkpoints.latest(sc) is None and store.jobs.pending(sc) == 0
        for sc in survivors:
            assert [m.text for m in store.history.read(sc)] == ["我叫李四", "你好李四！"]
            assert store.state.get(sc.user()) == {"name": "李四"}
            assert present(store.checkpoints.latest(sc)).data == {"step": 1}
            assert store.jobs.pending(sc) == 1
        assert store.delete_user(A) == 0

    def test_tenants_lists_every_tenant_holding_anything_and_only_those(self, store: Store) -> None:
        assert store.tenants() == []
        store.history.append(OTHER_TENANT, [msg("user", "另一家公司")])
        store.state.put(Scope(user_id="u", tenant="状态"), {"k": 1})
        store.profiles.put("配置", {"layers": ["window"]})
        store.history.append(A, [msg("user", "我叫李四")])
        assert store.tenants() == sorted({OTHER_TENANT.tenant, "状态", "配置", A.tenant})
        store.delete_user(OTHER_TENANT)  # a forgotten user leaves no tenant behind (a note is no content)
        assert OTHER_TENANT.tenant not in store.tenants()

    # ---- deletion notes: what forgetting leaves (backends.deletions) -------------------------

    def test_forgetting_a_thread_leaves_a_note_without_its_content(self, store: Store) -> None:
        store.history.append(A, [msg("user", "我的病历号是 A-7731"), msg("assistant", "好的", 1)], enqueue=["probe"])
        store.state.put(A, {"病历": "A-7731"})
        store.history.append(A2, [msg("user", "另一个会话")])
        assert store.history.delete_thread(A, layer="ui") == 2
        (note,) = store.deletions("default")
        assert (note.tenant, note.kind, note.layer, note.rows) == ("default", "thread", "ui", sum(note.counts.values()))
        assert note.counts["messages"] == 2 and note.counts.get("other", 0) >= 2  # the state document and the job row
        assert set(note.counts) <= {"messages", "memories", "audit", "usage", "units", "vectors", "other"}
        assert all(len(h) == 64 and int(h, 16) >= 0 for h in (note.user_hash, present(note.target_hash)))
        for secret in ("user_001", "t1", "病历", "A-7731"):
            assert secret not in repr(note), secret  # no id, no content
        assert note.at.utcoffset() is not None
        assert store.deletions("default", user_id="user_001") == [note]
        assert store.deletions("default", user_id="user_002") == [] and store.deletions("acme") == []
        assert store.deletions("acme", user_id="user_001") == []  # the same id in another tenant

    def test_the_notes_of_a_user_outlive_the_user(self, store: Store) -> None:
        for scope in (A, A2, B, OTHER_TENANT):
            store.history.append(scope, [msg("user", "你好")])
        store.history.delete_thread(A2, layer="api")
        store.history.append(A2, [msg("user", "又来了")])
        store.history.delete_thread(A2)
        thread, again = store.deletions("default")
        assert thread.target_hash == again.target_hash and again.layer == "library"  # one thread, one hash
        assert store.delete_user(A, layer="ui") == 1
        store.delete_user(B, layer="cli")
        mine = store.deletions("default", user_id="user_001")
        assert [(d.kind, d.layer, d.rows) for d in mine] == [("thread", "api", 1), ("thread", "library", 1), ("user", "ui", 1)]
        assert mine[-1].counts == {"messages": 1} and mine[-1].target_hash is None
        assert mine[0].user_hash == mine[-1].user_hash != store.deletions("default", user_id="user_002")[0].user_hash
        assert [d.kind for d in store.deletions("default")] == ["thread", "thread", "user", "user"]  # oldest first
        assert store.deletions("acme") == [] and store.history.read(OTHER_TENANT) != []

    def test_a_saved_memorys_deletion_is_noted_by_name(self, store: Store) -> None:
        user = A.user()
        one = store.note_deletion(user, "note", {"units": 1, "vectors": 1}, layer="ui", name="note-0123456789abcdef")
        two = store.note_deletion(user, "note", {"units": 1}, layer="tool", name="note-fedcba9876543210")
        assert (one.kind, one.rows, one.counts, one.layer) == ("note", 2, {"units": 1, "vectors": 1}, "ui")
        assert one.target_hash != two.target_hash and "note-0123" not in repr(one)
        assert store.deletions("default", user_id="user_001") == [one, two]
        with pytest.raises(InvalidInput):
            store.note_deletion(user, "everything", {"units": 1}, layer="ui", name="x")
        with pytest.raises(InvalidInput):
            store.note_deletion(user, "note", {"secrets": 1}, layer="ui", name="x")
        with pytest.raises(InvalidInput):
            store.note_deletion(user, "note", {"units": 1}, layer=" ", name="x")
        assert len(store.deletions("default")) == 2

    def test_reopen_keeps_the_deletion_notes(self, store: Store) -> None:
        if not self.durable:
            pytest.skip("not a durable backend")
        store.history.append(A, [msg("user", "你好")])
        store.history.delete_thread(A, layer="ui")
        store.delete_user(B, layer="api")
        notes = store.deletions("default")
        reopened = self.reopen(store)
        try:
            assert reopened.deletions("default") == notes
            assert reopened.deletions("default", user_id="user_001") == notes[:1]  # the store's key is kept in the store
        finally:
            reopened.close()

    def test_deletion_notes_travel_with_their_key(self, store: Store) -> None:
        """What a copy relies on (``memstack.transfer``): notes restored verbatim under their key,
        adopted by a store without notes, never twice, refused by a store with notes of its own;
        and the store's own notes and key carried out (into a MemoryStore, the reference)."""
        from ..backends.memory import MemoryStore

        chinese = Scope(user_id="李四", thread_id="会话一")
        source, foreign, out = MemoryStore(), MemoryStore(), MemoryStore()
        for scope in (A, B, chinese):
            source.history.append(scope, [msg("user", "你好")])
        source.history.delete_thread(chinese, layer="ui")
        source.delete_user(A, layer="api")
        source.delete_user(B, layer="cli")
        notes, key = source.deletions("default"), source.deletion_key()
        assert key is not None and len(notes) == 3
        assert store.deletion_key() is None and store.deletions("default") == [] and store.noted_tenants() == []
        assert store.restore_deletions(key, notes) == 3 and store.deletion_key() == key
        assert store.restore_deletions(key, notes) == 0  # a rerun stores nothing twice
        assert store.deletions("default") == notes and store.deletions("acme") == []
        assert store.noted_tenants() == ["default"] and store.tenants() == []  # notes only: no tenant holds data
        for user in ("user_001", "user_002", "李四", "nobody"):
            assert store.deletions("default", user_id=user) == source.deletions("default", user_id=user), user
        assert store.restore_deletions(key, [*notes, notes[0]]) == 1  # alike notes are counted, not merged
        store.history.append(chinese, [msg("user", "又来了")])
        store.delete_user(chinese, layer="ui")  # later notes use the adopted key
        assert [d.kind for d in store.deletions("default", user_id="李四")] == ["thread", "thread", "user"]
        foreign.history.append(A, [msg("user", "别的库")])
        foreign.delete_user(A)
        held = store.deletions("default")
        with pytest.raises(UsageError, match="cannot be re-keyed"):
            store.restore_deletions(present(foreign.deletion_key()), foreign.deletions("default"))
        assert store.deletions("default") == held and store.deletion_key() == key
        assert out.restore_deletions(present(store.deletion_key()), held) == 5  # and out of this store
        assert out.deletions("default", user_id="李四") == store.deletions("default", user_id="李四")

    # ---- profiles and users ----------------------------------------------------------------

    def test_profile_is_written_once_unless_replaced(self, store: Store) -> None:
        assert store.profiles.get("default") is None
        first = {"version": 1, "layers": ["window", "retrieval"], "options": {"embedder": "local"}}
        assert store.profiles.put("default", first) == first
        assert store.profiles.put("default", {"version": 1, "layers": ["full"]}) == first  # the first writer wins
        assert store.profiles.get("acme") is None  # one per tenant
        replaced = store.profiles.put("default", {"version": 1, "layers": ["summary", "retrieval"]}, replace=True)
        assert replaced["layers"] == ["summary", "retrieval"] and store.profiles.get("default") == replaced
        assert store.profiles.put("acme", {"version": 1, "layers": ["模型"]})["layers"] == ["模型"]

    def test_users_of_a_tenant_are_those_with_messages(self, store: Store) -> None:
        for sc in (A, A2, B, OTHER_TENANT, AGENT):
            store.history.append(sc, [msg("user", "我叫李四")])
        assert store.history.users("default") == ["user_001", "user_002"]
        assert store.history.users("acme") == ["user_001"]
        assert store.history.users("nobody") == []

    def test_a_conditional_append_stores_only_on_the_tail_it_read(self, store: Store) -> None:
        with pytest.raises(Conflict):  # an empty thread's last seq is None
            store.history.append(A, [msg("user", "x")], expect_last=12345)
        first = store.history.append(A, [msg("user", "我叫李四")], expect_last=None)
        with pytest.raises(Conflict):
            store.history.append(A, [msg("assistant", "你好！", 1)], expect_last=None)
        assert [m.text for m in store.history.read(A)] == ["我叫李四"]  # the refused write stored nothing
        store.history.append(A, [msg("assistant", "你好李四！", 1)], expect_last=first[0].seq, enqueue=["probe"])
        assert [m.text for m in store.history.read(A)] == ["我叫李四", "你好李四！"] and store.jobs.pending(A) == 1
        assert store.history.append(A2, [msg("user", "另一个线程")], expect_last=None)  # per thread

    def test_concurrent_conditional_appends_on_one_tail_store_one(self, store: Store) -> None:
        first = store.history.append(A, [msg("user", "我叫李四")])
        won: list[list[Message]] = []
        lost: list[int] = []

        def answer(n: int) -> None:
            try:
                won.append(store.history.append(A, [msg("assistant", f"回答{n}", 1)], expect_last=first[0].seq))
            except Conflict:
                lost.append(n)

        threads = [threading.Thread(target=answer, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(won) == 1 and len(lost) == 7 and len(store.history.read(A)) == 2

    def test_append_of_no_messages_only_queues_jobs(self, store: Store) -> None:
        store.history.append(A, [msg("user", "我叫李四")])
        assert store.history.append(A, [], enqueue=["probe"]) == []
        job = present(store.jobs.claim(worker="w"))
        assert job is not None and job.layer == "probe" and job.cursor == 0
        assert len(store.history.read(A)) == 1

    # ---- durability ------------------------------------------------------------------------

    def test_reopen_keeps_everything(self, store: Store) -> None:
        if not self.durable:
            pytest.skip("not a durable backend")
        first = store.history.append(A, [msg("user", "我叫李四"), msg("assistant", "你好李四！", 1)], enqueue=["probe"])
        store.state.put(A.user(), {"name": "李四"})
        store.checkpoints.save(A, {"step": 7})
        store.profiles.put("default", {"version": 1, "layers": ["window", "retrieval"]})
        job = present(store.jobs.claim(worker="w"))
        store.jobs.complete(job, cursor=present(first[-1].seq))
        store.history.append(A, [msg("user", "我叫什么？", 2)], enqueue=["probe"])
        reopened = self.reopen(store)
        try:
            texts = [m.text for m in reopened.history.read(A)]
            assert texts == ["我叫李四", "你好李四！", "我叫什么？"]
            assert reopened.state.get(A.user()) == {"name": "李四"}
            assert present(reopened.checkpoints.latest(A)).data == {"step": 7}
            assert reopened.profiles.get("default") == {"version": 1, "layers": ["window", "retrieval"]}
            again = present(reopened.jobs.claim(worker="w2"))
            assert again is not None and again.cursor == first[-1].seq
            more = reopened.history.append(A, [msg("assistant", "你叫李四", 3)])
            assert present(more[0].seq) > max(present(m.seq) for m in first)
        finally:
            reopened.close()
