"""An answer someone waits for goes before the layers' background work on a model that runs one
call at a time: the PriorityLock's order, the LocalModel's lock with a fake runtime (no model),
and who marks calls as background (the layers' write jobs) or leaves them foreground (the proxy)."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from memstack import Memory
from memstack.llm.local import LocalModel
from memstack.llm.priority import Priority, PriorityLock, background, current_priority
from memstack.testing import ScriptedModel

BG, FG = Priority.BACKGROUND, Priority.FOREGROUND


def wait_until(condition, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_waiting_foreground_calls_go_before_waiting_background_ones_each_in_arrival_order():
    lock = PriorityLock()
    order: list[str] = []

    def call(name: str, priority: Priority) -> None:
        with lock.hold(priority):
            order.append(name)

    lock.acquire(BG)  # a background call is running
    threads = []
    for n, (name, priority) in enumerate([("bg1", BG), ("bg2", BG), ("fg1", FG), ("bg3", BG), ("fg2", FG)], 1):
        threads.append(threading.Thread(target=call, args=(name, priority)))
        threads[-1].start()
        wait_until(lambda n=n: lock.waiting() == n)  # each arrives before the next
    lock.release()
    for t in threads:
        t.join(10)
    assert order == ["fg1", "fg2", "bg1", "bg2", "bg3"]
    assert lock.waiting() == 0
    with pytest.raises(RuntimeError):
        lock.release()


def test_an_idle_lock_is_taken_at_once_whatever_the_priority():
    lock = PriorityLock()
    with lock.hold(BG):
        pass
    with lock.hold(FG):
        pass
    assert lock.waiting() == 0


def test_background_marks_the_calls_of_its_block_only():
    assert current_priority() is FG
    with background():
        assert current_priority() is BG
        seen: list[Priority] = []
        other = threading.Thread(target=lambda: seen.append(current_priority()))
        other.start()
        other.join()
        assert seen == [FG]  # another thread's calls are its own (a request's answer)
    assert current_priority() is FG


class FakeRuntime:
    """xllamacpp's Server as the LocalModel drives it: each call waits for the test to let it finish."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.go = threading.Semaphore(0)

    def handle_chat_completions(self, request: dict) -> dict:
        self.started.append(request["messages"][-1]["content"])
        assert self.go.acquire(timeout=10)
        return {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}


def test_the_local_model_serves_a_waiting_answer_before_the_waiting_extraction_jobs():
    model = LocalModel()
    model._server = runtime = FakeRuntime()  # the runtime, not the 1.1 GB model: the order is under test

    def job(name: str) -> None:
        with background():
            model.complete([{"role": "user", "content": name}])

    def answer() -> None:
        model.complete([{"role": "user", "content": "answer"}])

    threads = [threading.Thread(target=job, args=("job1",))]
    threads[0].start()
    wait_until(lambda: runtime.started == ["job1"])  # a job runs
    for n, (target, args) in enumerate([(job, ("job2",)), (job, ("job3",)), (answer, ())], 1):
        threads.append(threading.Thread(target=target, args=args))
        threads[-1].start()
        wait_until(lambda n=n: model._call_lock.waiting() == n)
    for _ in range(4):
        runtime.go.release()
    for t in threads:
        t.join(10)
    assert runtime.started == ["job1", "answer", "job2", "job3"]


def recording(priorities: list[Priority], answer: str) -> ScriptedModel:
    def output(messages, schema):
        priorities.append(current_priority())
        return answer if schema is None else json.dumps({"memories": []})

    return ScriptedModel(default=output, native_schema=True)


def test_the_layers_write_jobs_call_the_model_as_background_and_a_direct_call_is_foreground():
    priorities: list[Priority] = []
    model = recording(priorities, "好的")
    memory = Memory("memory://", layers="window,entities", options={"model": model, "batch_messages": 2})
    memory.add([{"role": "user", "content": "我在杭州做知识中台"}, {"role": "assistant", "content": "好的。"}], user_id="u", thread_id="t")
    assert memory.flush().failed == 0
    assert priorities and set(priorities) == {BG}
    model.complete([{"role": "user", "content": "你好"}])
    assert priorities[-1] is FG


def test_the_proxy_s_answer_is_a_foreground_call():
    pytest.importorskip("fastapi", reason="the service needs: pip install 'memstack[server]'")
    from memstack.server import ServerConfig, create_app
    from memstack.server.run import BackgroundServer

    priorities: list[Priority] = []
    app = create_app(Memory("memory://", layers="window"), ServerConfig(model=recording(priorities, "你好！"), worker=False))
    with BackgroundServer(app) as server:
        r = httpx.post(
            f"{server.url}/v1/chat/completions", json={"messages": [{"role": "user", "content": "你好"}], "user": "u"}, timeout=30
        )
    assert r.status_code == 200, r.text
    assert priorities == [FG]
