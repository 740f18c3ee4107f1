"""Copies of one chat completion (``memstack.server.copies``): with an Idempotency-Key, and
without one (a double submit, told from a regenerate), on one server and on several over one
store (SQLite, PostgreSQL). Every interleaving is forced: the upstream holds the first copy's
call until the test has seen the other copies wait on its claim, so no test depends on timing."""

from __future__ import annotations

import concurrent.futures
import json
import threading
import time

import httpx
import pytest
from openai_stub import CannedOpenAI
from pgsupport import require_dsn, schema  # noqa: F401  (the fixture)

from memstack import Memory
from memstack.server import ServerConfig, create_app
from memstack.server.copies import UNKEYED, Held, Replay, settle
from memstack.server.run import BackgroundServer


class Gate:
    """An upstream answer function that answers ``回答N`` for its N-th call, each held until
    ``open()``; ``fail``: the calls that answer with an error instead."""

    def __init__(self) -> None:
        self.calls = 0
        self.released = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, body: dict) -> str:
        with self._lock:
            n = self.calls
            self.calls += 1
        assert self.released.wait(30), "never released"
        return f"回答{n}"


def waited(*apps) -> float:
    return sum(app.state.proxy.metrics.registry.get_sample_value("memstack_proxy_copies_total", {"outcome": "waited"}) or 0 for app in apps)


def wait_for(condition, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def text_of(r: httpx.Response) -> str:
    assert r.status_code == 200, r.text
    if r.headers["content-type"].startswith("text/event-stream"):
        events = [line.removeprefix("data: ") for line in r.text.splitlines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        return "".join(c["delta"].get("content") or "" for e in events[:-1] for c in json.loads(e)["choices"])
    return r.json()["choices"][0]["message"]["content"]


def at_once(urls: list[str], body: dict, headers: dict, gate: Gate, apps: list, copies: int) -> list[httpx.Response]:
    """Send ``body`` to each url at once; release the upstream when the other ``copies - 1``
    copies wait on the first one's claim."""
    before = waited(*apps)
    with concurrent.futures.ThreadPoolExecutor(len(urls)) as pool:
        sent = [pool.submit(httpx.post, f"{url}/v1/chat/completions", json=body, headers=headers, timeout=60) for url in urls]
        wait_for(lambda: waited(*apps) >= before + copies - 1, "the other copies to wait on the first")
        gate.released.set()
        return [f.result() for f in sent]


def thread_of(url: str, thread: str, user: str = "u") -> list[tuple[str, str]]:
    r = httpx.get(f"{url}/v1/users/{user}/threads/{thread}/messages", params={"replaced": "include"})  # the stored thread
    return [(m["role"], m["content"]) for m in r.json()]


def servers(db, upstream: CannedOpenAI, n: int, **config) -> list:
    """``n`` servers on one store (``db``: a URL, or a function that opens a Store: one each)."""
    return [
        create_app(config=ServerConfig(db=db() if callable(db) else db, strategy="window", model=upstream.model, worker=False, **config))
        for _ in range(n)
    ]


@pytest.mark.parametrize("stream", [False, True])
def test_keyed_copies_at_once_on_two_servers_store_one_answer_that_every_copy_answers(tmp_path, stream):
    gate = Gate()
    with CannedOpenAI(gate) as upstream:
        apps = servers(f"sqlite:///{tmp_path / 'm.db'}", upstream, 2)
        with BackgroundServer(apps[0]) as one, BackgroundServer(apps[1]) as two:
            body = {"model": "m", "user": "u", "messages": [{"role": "user", "content": "问题"}], "stream": stream}
            headers = {"X-Memstack-Thread": "t", "Idempotency-Key": "k1"}
            answers = [text_of(r) for r in at_once([one.url, two.url, one.url], body, headers, gate, apps, 3)]
            assert answers == ["回答0"] * 3 and gate.calls == 1
            assert thread_of(one.url, "t") == [("user", "问题"), ("assistant", "回答0")]
            retry = httpx.post(f"{two.url}/v1/chat/completions", json={**body, "stream": not stream}, headers=headers)
            assert text_of(retry) == "回答0" and retry.headers["Idempotent-Replayed"] == "true" and gate.calls == 1
            other = httpx.post(f"{two.url}/v1/chat/completions", json=body, headers={**headers, "Idempotency-Key": "k2"})
            assert text_of(other) == "回答1"  # another key is another request: here a regenerate
            assert thread_of(one.url, "t") == [
                ("user", "问题"),
                ("assistant", "回答0"),
                ("assistant", "回答1"),
            ]  # (the last replaces the first)


def test_a_copy_whose_first_failed_upstream_answers_itself(tmp_path):
    """The first copy's model call fails (502): it gives its claim up, and the copy waiting on
    it calls the model and answers; the thread holds the question and that one answer."""
    calls = []
    released = threading.Event()

    def answer(body):
        calls.append(body)
        if len(calls) == 1:
            assert released.wait(30)
            raise ConnectionResetError("the upstream died")  # the stub drops the connection
        return "第二次的回答"

    with CannedOpenAI(answer) as upstream:
        apps = servers(f"sqlite:///{tmp_path / 'm.db'}", upstream, 2, upstream_timeout=10)
        with BackgroundServer(apps[0]) as one, BackgroundServer(apps[1]) as two:
            body = {"model": "m", "user": "u", "messages": [{"role": "user", "content": "问题"}]}
            gate = type("G", (), {"released": released})()
            first, second = at_once([one.url, two.url], body, {"X-Memstack-Thread": "t", "Idempotency-Key": "k"}, gate, apps, 2)
            statuses = sorted([first.status_code, second.status_code])
            assert statuses == [200, 502], (first.text, second.text)
            ok = first if first.status_code == 200 else second
            assert text_of(ok) == "第二次的回答" and len(calls) == 2
            assert thread_of(one.url, "t") == [("user", "问题"), ("assistant", "第二次的回答")]


def test_an_unkeyed_double_submit_answers_once_and_a_later_same_request_regenerates(tmp_path):
    """Without a key: an identical request while the first is answered, or within the window
    after its answer, is a double submit (one model call, one stored answer, the same answer
    twice); the same request after the window is a regenerate (its answer replaces the first)."""
    gate = Gate()
    with CannedOpenAI(gate) as upstream:
        apps = servers(f"sqlite:///{tmp_path / 'm.db'}", upstream, 2, double_submit_window=1.0)
        with BackgroundServer(apps[0]) as one, BackgroundServer(apps[1]) as two:
            body = {"model": "m", "user": "u", "messages": [{"role": "user", "content": "问题"}]}
            headers = {"X-Memstack-Thread": "t"}
            first, second = at_once([one.url, two.url], body, headers, gate, apps, 2)
            assert text_of(first) == text_of(second) == "回答0" and gate.calls == 1
            assert "true" in (first.headers.get("X-Memstack-Double-Submit"), second.headers.get("X-Memstack-Double-Submit"))
            soon = httpx.post(f"{two.url}/v1/chat/completions", json=body, headers=headers)
            assert text_of(soon) == "回答0" and soon.headers["X-Memstack-Double-Submit"] == "true" and gate.calls == 1
            other = {**body, "messages": [{"role": "user", "content": "另一个问题"}]}  # another request in the thread
            assert text_of(httpx.post(f"{one.url}/v1/chat/completions", json=other, headers={"X-Memstack-Thread": "t2"})) == "回答1"
            time.sleep(1.1)  # past the window: the same request again is the user's regenerate
            later = httpx.post(f"{one.url}/v1/chat/completions", json=body, headers=headers)
            assert text_of(later) == "回答2" and "X-Memstack-Double-Submit" not in later.headers
            assert thread_of(one.url, "t") == [
                ("user", "问题"),
                ("assistant", "回答0"),
                ("assistant", "回答2"),
            ]  # (the last replaces the first)
            with Memory(f"sqlite:///{tmp_path / 'm.db'}") as memory:  # the replaced answer stays in the history
                assert [m.text for m in memory.history(user_id="u", thread_id="t", order="append", replaced="include")] == [
                    "问题",
                    "回答0",
                    "回答2",
                ]


def test_a_claim_whose_copy_died_is_taken_over_after_its_lease(tmp_path):
    """A claim left by a killed process (its lease not renewed) holds the request back until its
    lease ends, then the next copy claims it and answers; a live claim is renewed and waited on
    until its answer comes. Nothing here depends on how fast the machine is: the live claim's
    lease is far longer than the test, and the order of events is awaited, not timed."""
    import asyncio

    from memstack.aio import AsyncMemory

    async def run():
        async with AsyncMemory(f"sqlite:///{tmp_path / 'm.db'}", layers="window") as memory:
            scope = memory.scope("u", "t", tenant="default")
            body = {"model": "m", "messages": [{"role": "user", "content": "问题"}]}
            dead = await settle(memory, scope, body, "k", lease=0.3)
            assert isinstance(dead, Held)
            dead._stop()  # the process died: no renewal, no release
            expired = dead.record["until"]
            taker = await settle(memory, scope, body, "k", lease=60)
            assert isinstance(taker, Held) and taker.record["claim"] != dead.record["claim"]
            assert taker.record["until"] - 60 >= expired  # taken only once the dead claim's lease had ended
            await taker.finish({"choices": [{"message": {"role": "assistant", "content": "答"}}]})
            replay = await settle(memory, scope, {**body, "stream": True}, "k")
            assert isinstance(replay, Replay) and replay.response["choices"][0]["message"]["content"] == "答"
            # a live claim: renewing it moves its lease on; a copy waits on it and answers its answer
            live = await settle(memory, scope, body, None, lease=60)
            before = live.record["until"]
            assert await live.renew() and live.record["until"] >= before
            assert memory.memory.store.state.get(scope, UNKEYED) == live.record
            waits = asyncio.Event()
            waiter = asyncio.create_task(settle(memory, scope, body, None, waiting=waits.set))
            await asyncio.wait_for(waits.wait(), 30)
            assert not waiter.done()
            await live.finish({"choices": [{"message": {"role": "assistant", "content": "答2"}}]})
            assert isinstance(replay := await waiter, Replay) and replay.response["choices"][0]["message"]["content"] == "答2"
            # a claim another copy took over is lost: renewing it says so, and its answer does not overwrite
            stale = await settle(memory, scope, {**body, "messages": [{"role": "user", "content": "新问题"}]}, None, lease=60)
            memory.memory.store.state.put(scope, {**stale.record, "claim": "someone else"}, UNKEYED)
            assert not await stale.renew() and stale.record is None

    asyncio.run(run())


@pytest.mark.postgres
def test_keyed_and_unkeyed_copies_on_three_servers_over_postgresql(schema):  # noqa: F811
    dsn = require_dsn("proxy copies")
    gate = Gate()
    with CannedOpenAI(gate) as upstream:
        from memstack.backends.postgres import PostgresStore

        apps = servers(lambda: PostgresStore(dsn, schema=schema), upstream, 3)
        with BackgroundServer(apps[0]) as a, BackgroundServer(apps[1]) as b, BackgroundServer(apps[2]) as c:
            urls = [a.url, b.url, c.url]
            body = {"model": "m", "user": "u", "messages": [{"role": "user", "content": "问题"}]}
            answers = [text_of(r) for r in at_once(urls, body, {"X-Memstack-Thread": "t", "Idempotency-Key": "k"}, gate, apps, 3)]
            assert answers == ["回答0"] * 3 and gate.calls == 1
            gate.released.clear()
            answers = [text_of(r) for r in at_once(urls, {**body, "stream": True}, {"X-Memstack-Thread": "t2"}, gate, apps, 3)]
            assert answers == ["回答1"] * 3 and gate.calls == 2
            for thread, answer in (("t", "回答0"), ("t2", "回答1")):
                assert thread_of(a.url, thread) == [("user", "问题"), ("assistant", answer)]
