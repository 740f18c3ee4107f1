"""The Memory contract: add, context, search, the write queue, export/import and forgetting, for
``Memory`` and ``AsyncMemory`` on every backend.

Subclass ``MemoryContract`` and implement ``new_store`` (a store each test may write to: a fresh
one, or one shared by a class, as every test works in a tenant of its own). ``open_memory`` opens
the Memory under test; ``AsyncMemoryContract`` runs the same tests against ``AsyncMemory``,
through ``Blocking``, a facade that runs each of its coroutines on an event loop thread::

    class TestSqliteMemory(MemoryContract):
        def new_store(self): return SQLiteStore(...)

    class TestSqliteAsyncMemory(AsyncMemoryContract, TestSqliteMemory):
        pass
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from ..aio import AsyncMemory
from ..errors import BudgetError, Conflict, InvalidInput, UnknownName
from ..memory import Memory
from ..stores import Store
from ..types import Message

T0 = datetime(2026, 11, 2, 20, 0, tzinfo=timezone(timedelta(hours=8)))
LISI = [
    ("user", "我叫李四"),
    ("assistant", "你好李四！"),
    ("user", "我正在开发一个知识中台"),
    ("assistant", "很好，知识中台用什么技术？"),
    ("user", "后端使用SpringBoot"),
    ("assistant", "SpringBoot 是很成熟的后端框架。"),
]


def add_all(mem: Any, pairs: list[tuple[str, str]], *, user: str = "user_001", thread: str = "s1", start: datetime = T0) -> None:
    for i, (role, text) in enumerate(pairs):
        mem.add({"role": role, "content": text}, user_id=user, thread_id=thread, at=start + timedelta(minutes=i))


def texts(ctx: Any) -> list[str]:
    return [m.text for m in ctx.messages]


class Blocking:
    """A blocking facade over an AsyncMemory: every coroutine method runs to completion on an
    event loop of the facade's own thread, an async iterator comes back as an iterator, anything
    else is the AsyncMemory's. Calls from several threads at once run concurrently on the loop."""

    def __init__(self, open_async: Callable[[], AsyncMemory]) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="memstack-blocking", daemon=True)
        self._thread.start()
        try:
            self.inner = self._run(self._opened(open_async))
        except BaseException:
            self._stop()
            raise

    @staticmethod
    async def _opened(open_async: Callable[[], AsyncMemory]) -> AsyncMemory:
        return await open_async().open()

    def _run(self, awaitable: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(awaitable, self._loop).result()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if inspect.iscoroutinefunction(attr):
            return lambda *args, **kwargs: self._run(attr(*args, **kwargs))
        if inspect.isasyncgenfunction(attr):
            return lambda *args, **kwargs: iter(self._run(_collect(attr(*args, **kwargs))))
        return attr

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._run(self.inner.close())
        finally:
            self._stop()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> Blocking:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def _collect(items: Any) -> list[Any]:
    return [item async for item in items]


class MemoryContract:
    """Behaviour ``Memory`` shows over any store (and ``AsyncMemory``, see ``AsyncMemoryContract``)."""

    def new_store(self) -> Store:
        raise NotImplementedError

    def open_memory(self, store: Store, **options: Any) -> Any:
        """The Memory under test over ``store``."""
        return Memory(store, **options)

    @pytest.fixture
    def make(self) -> Iterator[Callable[..., Any]]:
        """``make(**options)``: a Memory in this test's own tenant (``tenant=`` another), on a
        new store or ``store=`` one already open; all closed after the test."""
        tenant = f"contract-{uuid.uuid4().hex[:10]}"
        opened: list[Any] = []

        def make(*, store: Store | None = None, tenant: str = tenant, **options: Any) -> Any:
            memory = self.open_memory(store if store is not None else self.new_store(), tenant=tenant, **options)
            opened.append(memory)
            return memory

        yield make
        for memory in reversed(opened):
            memory.close()

    @pytest.fixture
    def mem(self, make: Callable[..., Any]) -> Any:
        return make()

    # ---- the articles' examples ------------------------------------------------------------

    def test_window_and_trim_never_keep_the_reply_without_the_name(self, mem: Any) -> None:
        add_all(mem, LISI)
        ask = "我叫什么名字？"
        for ctx in (
            mem.context(user_id="user_001", thread_id="s1", query=ask, strategy="window", k=2),
            mem.context(user_id="user_001", thread_id="s1", query=ask, strategy="trim", max_tokens=100, counter="cl100k_base"),
            mem.context(user_id="user_001", thread_id="s1", query=ask, strategy="full", max_tokens=40, counter="cl100k_base"),
        ):
            t = texts(ctx)
            assert "你好李四！" not in t or "我叫李四" in t
            assert t[-1] == ask and ctx.messages[0].role == "user"
        window2 = mem.context(user_id="user_001", thread_id="s1", strategy="window", k=2)
        assert texts(window2) == [t for _, t in LISI[2:]]
        assert window2.dropped[0].layer == "window" and len(window2.dropped[0].message_ids) == 2

    # ---- bad input -------------------------------------------------------------------------

    @pytest.mark.parametrize(
        "bad",
        [
            {"role": "user", "content": ""},
            {"role": "user", "content": "   \n\t"},
            {"role": "robot", "content": "hi"},
            {"role": "user", "content": "x" * 1_000_001},
            {"role": "user", "content": "bad \udcff surrogate"},
            {"role": "user", "content": "nul \x00 byte"},
            {"role": "tool", "content": "result without a call id"},
            {"role": "user", "content": "hi", "timestamp": "yesterday"},
            {"role": "user", "content": "hi", "metadata": {"x": float("nan")}},
            42,
        ],
    )
    def test_bad_messages_are_refused_and_nothing_is_written(self, mem: Any, bad: Any) -> None:
        with pytest.raises(InvalidInput):
            mem.add([{"role": "user", "content": "fine"}, bad], user_id="u", thread_id="t")
        assert mem.history(user_id="u", thread_id="t") == []

    @pytest.mark.parametrize("user", ["", "  ", None, "a\x00b", "x" * 300])
    def test_a_missing_or_bad_user_id_is_refused(self, mem: Any, user: Any) -> None:
        with pytest.raises(InvalidInput, match="user_id"):
            mem.add("hi", user_id=user, thread_id="t")

    def test_size_cap_is_configurable(self, make: Callable[..., Any]) -> None:
        m = make(max_message_bytes=10)
        m.add("一二三", user_id="u", thread_id="t")  # 9 bytes
        with pytest.raises(InvalidInput, match="over the limit of 10"):
            m.add("一二三四", user_id="u", thread_id="t")

    def test_naive_datetimes_and_bad_bounds_are_refused(self, mem: Any) -> None:
        with pytest.raises(InvalidInput, match="timezone"):
            mem.add("hi", user_id="u", thread_id="t", at=datetime(2026, 1, 1))
        with pytest.raises(InvalidInput, match="timezone"):
            mem.context(user_id="u", thread_id="t", at=datetime(2026, 1, 1))
        for last in (-1, True, 1.5):
            with pytest.raises(InvalidInput, match="last"):
                mem.history(user_id="u", thread_id="t", last=last)
        with pytest.raises(InvalidInput, match="max_tokens"):
            mem.context(user_id="u", thread_id="t", max_tokens=-1)

    def test_unknown_thread_and_unknown_layer(self, mem: Any) -> None:
        assert mem.history(user_id="nobody", thread_id="none") == []
        assert mem.threads(user_id="nobody") == []
        ctx = mem.context(user_id="nobody", thread_id="none", query="你好")
        assert texts(ctx) == ["你好"]
        with pytest.raises(UnknownName, match="nope"):
            mem.context(user_id="u", thread_id="t", strategy="window,nope")

    # ---- writing and reading ---------------------------------------------------------------

    def test_add_returns_what_it_stored_once_by_id(self, mem: Any) -> None:
        first = mem.add(
            [Message(role="user", content="我叫李四", id="m1"), {"role": "assistant", "content": "你好"}], user_id="u", thread_id="t"
        )
        assert [m.seq is not None for m in first] == [True, True] and first[0].seq < first[1].seq
        assert mem.add(Message(role="user", content="我叫李四", id="m1"), user_id="u", thread_id="t") == []
        assert [m.text for m in mem.history(user_id="u", thread_id="t")] == ["我叫李四", "你好"]

    def test_a_conditional_add_stores_only_on_the_tail_it_read(self, mem: Any) -> None:
        with pytest.raises(Conflict):
            mem.add("不是空的", user_id="u", thread_id="t", expect_last=7)
        first = mem.add("第一条", user_id="u", thread_id="t", expect_last=None)
        with pytest.raises(Conflict):
            mem.add("晚了", user_id="u", thread_id="t", expect_last=None)
        mem.add("第二条", user_id="u", thread_id="t", expect_last=first[0].seq)
        assert [m.text for m in mem.history(user_id="u", thread_id="t")] == ["第一条", "第二条"]

    def test_reference_time_hides_later_messages(self, mem: Any) -> None:
        add_all(mem, LISI)
        ctx = mem.context(user_id="user_001", thread_id="s1", at=T0 + timedelta(minutes=1, seconds=30))
        assert texts(ctx) == ["我叫李四", "你好李四！"]

    def test_history_in_time_order_or_as_appended(self, mem: Any) -> None:
        add_all(mem, LISI[:2])
        mem.add({"role": "user", "content": "补记：昨天说过的话"}, user_id="user_001", thread_id="s1", at=T0 - timedelta(days=1))
        assert [m.text for m in mem.history(user_id="user_001", thread_id="s1")] == ["补记：昨天说过的话", "我叫李四", "你好李四！"]
        assert [m.text for m in mem.history(user_id="user_001", thread_id="s1", order="append")] == [
            "我叫李四",
            "你好李四！",
            "补记：昨天说过的话",
        ]
        assert [m.text for m in mem.history(user_id="user_001", thread_id="s1", last=1)] == ["你好李四！"]
        assert mem.history(user_id="user_001", thread_id="s1", at=T0 - timedelta(days=2)) == []

    def test_imported_dates_are_kept(self, mem: Any) -> None:
        add_all(mem, LISI, start=datetime(2023, 5, 7, 13, 56, tzinfo=timezone.utc))
        first = mem.history(user_id="user_001", thread_id="s1")[0]
        assert first.timestamp == datetime(2023, 5, 7, 13, 56, tzinfo=timezone.utc)

    def test_threads_most_recent_first(self, mem: Any) -> None:
        add_all(mem, LISI[:2], thread="s1")
        add_all(mem, LISI[:4], thread="s2", start=T0 + timedelta(days=7))
        threads = mem.threads(user_id="user_001")
        assert [(t.thread_id, t.messages) for t in threads] == [("s2", 4), ("s1", 2)]

    def test_system_message_budget_error(self, mem: Any) -> None:
        mem.add({"role": "system", "content": "你是助手。" * 50}, user_id="u", thread_id="t")
        with pytest.raises(BudgetError):
            mem.context(user_id="u", thread_id="t", max_tokens=20)

    def test_concurrent_adds_lose_nothing(self, mem: Any) -> None:
        def writer(n: int) -> None:
            for i in range(10):
                mem.add(f"线程{n}的第{i}条", user_id="u", thread_id="t")

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stored = mem.history(user_id="u", thread_id="t", order="append")
        assert len(stored) == 60 and len({m.seq for m in stored}) == 60
        assert [m.seq for m in stored] == sorted(m.seq for m in stored)

    def test_concurrent_conditional_adds_on_one_tail_store_one(self, mem: Any) -> None:
        outcomes: list[str] = []

        def writer(n: int) -> None:
            try:
                mem.add(f"抢先{n}", user_id="u", thread_id="t", expect_last=None)
                outcomes.append("stored")
            except Conflict:
                outcomes.append("conflict")

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcomes) == ["conflict"] * 5 + ["stored"]
        assert len(mem.history(user_id="u", thread_id="t")) == 1

    # ---- the write queue -------------------------------------------------------------------

    def test_add_queues_the_index_and_flush_runs_it(self, make: Callable[..., Any]) -> None:
        m = make(layers="window,retrieval")
        add_all(m, LISI)
        assert m.pending(user_id="user_001") == 1  # coalesced into one job; nothing ran in add()
        assert m.search("知识中台", user_id="user_001") == []
        report = m.flush(user_id="user_001")
        assert (report.ran, report.failed) == (1, 0) and m.pending(user_id="user_001") == 0
        hits = m.search("知识中台用什么后端", user_id="user_001")
        assert hits and "知识中台" in hits[0].unit.text
        m.add("我的数据库是PostgreSQL", user_id="user_001", thread_id="s2")
        assert m.run_jobs(max_jobs=1, user_id="user_001").ran == 1
        assert any("PostgreSQL" in h.unit.text for h in m.search("数据库", user_id="user_001"))

    def test_the_background_worker_drains_the_queue(self, make: Callable[..., Any]) -> None:
        m = make(layers="window,retrieval")
        m.start_worker(poll_seconds=0.05)
        assert m.worker_running
        add_all(m, LISI[:2])
        deadline = datetime.now(timezone.utc) + timedelta(seconds=20)
        while m.pending(user_id="user_001") and datetime.now(timezone.utc) < deadline:
            threading.Event().wait(0.05)
        m.stop_worker()
        assert not m.worker_running and m.pending(user_id="user_001") == 0
        assert m.search("李四", user_id="user_001")

    def test_a_new_user_has_no_model_made_memory(self, mem: Any) -> None:
        for kind in ("entity", "relation", "state"):
            assert mem.memories(kind, user_id="nobody") == []
        assert mem.audit(user_id="nobody") == [] and mem.usage(user_id="nobody") == []

    # ---- export, import, deletion, tenants -------------------------------------------------

    def test_export_import_round_trip(self, make: Callable[..., Any]) -> None:
        a = make()
        b = make(store=a.store, tenant=f"{a.tenant}-copy")
        add_all(a, LISI, thread="s1")
        add_all(a, LISI[:2], thread="s2", start=T0 + timedelta(days=7))
        a.add(
            {
                "role": "user",
                "content": [{"type": "text", "text": "看图"}, {"type": "image_url", "image_url": {"url": "http://x"}}],
                "metadata": {"k": "v"},
            },
            user_id="user_001",
            thread_id="s2",
        )
        records = list(a.export(user_id="user_001"))
        assert len(records) == 9 and all(r["tenant"] == a.tenant for r in records)
        assert b.import_(records, tenant=b.tenant) == 9
        assert b.import_(records, tenant=b.tenant) == 0  # idempotent
        for t in ("s1", "s2"):
            assert [x.to_dict() for x in b.history(user_id="user_001", thread_id=t)] == [
                x.to_dict() for x in a.history(user_id="user_001", thread_id=t)
            ]

    def test_import_validates_everything_first(self, mem: Any) -> None:
        records = [
            {"user_id": "u", "thread_id": "t", "role": "user", "content": "ok"},
            {"user_id": "u", "thread_id": "t", "role": "user", "content": ""},
        ]
        with pytest.raises(InvalidInput, match="record 2"):
            mem.import_(records)
        assert mem.history(user_id="u", thread_id="t") == []

    def test_forget_thread_and_user_across_tenants(self, make: Callable[..., Any]) -> None:
        default = make(layers=["full"])
        acme = make(store=default.store, layers=["full"], tenant=f"{default.tenant}-acme")
        add_all(default, LISI, thread="s1")
        add_all(default, LISI, thread="s2")
        add_all(acme, LISI, thread="s1")
        add_all(default, LISI, user="user_002")
        assert default.forget(user_id="user_001", thread_id="s1") == 6
        assert [t.thread_id for t in default.threads(user_id="user_001")] == ["s2"]
        assert default.forget(user_id="user_001") == 6
        assert default.threads(user_id="user_001") == []
        assert len(acme.history(user_id="user_001", thread_id="s1")) == 6
        assert len(default.history(user_id="user_002", thread_id="s1")) == 6


class AsyncMemoryContract(MemoryContract):
    """The same tests against ``AsyncMemory`` (through ``Blocking``); put it first in the bases:
    ``class TestX(AsyncMemoryContract, TestXMemory)``."""

    def open_memory(self, store: Store, **options: Any) -> Any:
        return Blocking(lambda: AsyncMemory(store, **options))
