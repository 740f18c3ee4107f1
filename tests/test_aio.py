"""AsyncMemory itself: the same methods as Memory, the event loop free while the work runs, the
executor's cap, closing, and the PostgreSQL pool across event loops. (Its behaviour is the
Memory contract's: test_memory_contract.py.)"""

from __future__ import annotations

import asyncio
import inspect
import sqlite3
import time
from dataclasses import dataclass

import pytest

from memstack import AsyncMemory, InvalidInput, Memory, StoreError
from memstack.layers import register_layer
from memstack.layers.base import LayerOutput, ReadRequest
from memstack.types import Message, Section


@dataclass(frozen=True)
class SlowRead:
    """A layer whose read side blocks its thread for ``delay`` seconds (a slow store, a model)."""

    delay: float = 0.3
    name: str = "slow-read"
    scope: str = "thread"
    history: str = "none"

    def read(self, request: ReadRequest, messages: list[Message]) -> LayerOutput:
        time.sleep(self.delay)
        return LayerOutput(messages, sections=[Section("slow", "慢慢想")])


register_layer("slow-read", SlowRead)


def test_every_public_method_of_memory_is_there_with_the_same_parameters():
    blocking = {"scope", "start_worker", "worker_running"}  # pure or non-blocking: not awaited
    for name, member in inspect.getmembers(Memory):
        if name.startswith("_") or not (callable(member) or isinstance(member, property)):
            continue
        mine = getattr(AsyncMemory, name, None)
        assert mine is not None, f"AsyncMemory lacks {name}"
        if isinstance(member, property):
            continue
        assert inspect.signature(mine).parameters.keys() == inspect.signature(member).parameters.keys(), name
        awaited = inspect.iscoroutinefunction(mine) or inspect.isasyncgenfunction(mine)
        assert awaited == (name not in blocking), name


def test_the_loop_runs_while_a_context_blocks_and_the_cap_bounds_the_threads(tmp_path):
    async def scenario(max_threads: int) -> tuple[float, int]:
        async with AsyncMemory(f"sqlite:///{tmp_path}/slow{max_threads}.db", layers="slow-read,window", max_threads=max_threads) as memory:
            await memory.add("你好", user_id="u", thread_id="t")
            ticks = 0
            done = asyncio.Event()

            async def tick() -> None:
                nonlocal ticks
                while not done.is_set():
                    ticks += 1
                    await asyncio.sleep(0.01)

            ticker = asyncio.create_task(tick())
            started = time.perf_counter()
            contexts = await asyncio.gather(*(memory.context(user_id="u", thread_id="t", query="在吗") for _ in range(2)))
            elapsed = time.perf_counter() - started
            done.set()
            await ticker
            assert all("慢慢想" in c.messages[0].text for c in contexts)
            return elapsed, ticks

    one, ticks = asyncio.run(scenario(1))
    assert one >= 0.6  # one thread: the two contexts' 0.3 s reads ran one after the other
    assert ticks >= 20  # ... while the loop kept running (a blocked loop would tick about twice)
    two, _ = asyncio.run(scenario(2))
    assert two < 0.55  # two threads: side by side


def test_async_with_closes_the_memory_it_opened(tmp_path):
    async def scenario() -> AsyncMemory:
        async with AsyncMemory(tmp_path / "c.db", layers="window") as memory:
            await memory.add("我叫李四", user_id="u", thread_id="t")
        return memory

    memory = asyncio.run(scenario())
    with pytest.raises((sqlite3.ProgrammingError, StoreError), match="closed"):
        memory.store.history.read(memory.scope("u", "t"))
    with Memory(tmp_path / "c.db") as again:  # what it stored is there
        assert [m.text for m in again.history(user_id="u", thread_id="t")] == ["我叫李四"]


def test_a_memory_passed_in_stays_open_and_the_worker_is_its_own():
    with Memory("memory://", layers="window,retrieval") as memory:

        async def scenario() -> None:
            async with AsyncMemory(memory) as amem:
                await amem.add("我喜欢喝龙井茶", user_id="u", thread_id="t")
                assert await amem.pending(user_id="u") == 1
                assert (await amem.flush()).ran == 1

        asyncio.run(scenario())
        assert memory.history(user_id="u", thread_id="t")[0].text == "我喜欢喝龙井茶"  # not closed
        assert memory.search("龙井", user_id="u")


def test_bad_construction_is_refused():
    with Memory("memory://") as memory, pytest.raises(InvalidInput, match="options"):
        AsyncMemory(memory, layers="window")
    for bad in (0, -1, 1.5, True):
        with pytest.raises(InvalidInput, match="max_threads"):
            AsyncMemory("memory://", max_threads=bad)


@pytest.fixture
def dsn():
    from pgsupport import require_dsn

    return require_dsn("AsyncMemory")


@pytest.mark.postgres
def test_postgres_is_native_and_its_pool_follows_the_event_loop(dsn, schema):
    from memstack.backends.postgres import PostgresStore

    memory = AsyncMemory(PostgresStore(dsn, schema=schema, max_size=2), layers="window")
    assert memory.native

    async def write(n: int) -> int:
        await asyncio.gather(*(memory.add(f"第{n}轮第{i}条", user_id="u", thread_id="t") for i in range(10)))
        return len(await memory.history(user_id="u", thread_id="t"))

    try:
        assert asyncio.run(write(1)) == 10  # a loop of its own, then gone (an app restarted, a new test client)
        assert asyncio.run(write(2)) == 20  # a fresh pool on the next loop
    finally:
        asyncio.run(memory.close())


def test_configure_is_memory_configure_awaited(tmp_path):
    profile, queued = asyncio.run(AsyncMemory.configure(tmp_path / "p.db", layers="window"))
    assert list(profile.layers) == ["window"] and queued == 0
    with Memory(tmp_path / "p.db") as memory:
        assert memory.layers == ["window"]
