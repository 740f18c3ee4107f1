"""Memory: what is not the contract (``memstack.testing.memory``, run by test_memory_contract.py on
every backend for Memory and AsyncMemory): the public API, restarted and killed processes, the
budget property, tail loading, and the write queue with a probe layer."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memstack
from memstack import Memory, Message
from memstack.budget import trim, window
from memstack.tokens import get_counter

T0 = datetime(2026, 11, 2, 20, 0, tzinfo=timezone(timedelta(hours=8)))
LISI = [
    ("user", "我叫李四"),
    ("assistant", "你好李四！"),
    ("user", "我正在开发一个知识中台"),
    ("assistant", "很好，知识中台用什么技术？"),
    ("user", "后端使用SpringBoot"),
    ("assistant", "SpringBoot 是很成熟的后端框架。"),
]


def add_all(mem, pairs, *, user="user_001", thread="s1", start=T0):
    for i, (role, text) in enumerate(pairs):
        mem.add({"role": role, "content": text}, user_id=user, thread_id=thread, at=start + timedelta(minutes=i))


@pytest.fixture
def mem(tmp_path):
    m = Memory(tmp_path / "m.db")
    yield m
    m.close()


def texts(ctx):
    return [m.text for m in ctx.messages]


def test_public_api_is_pinned():
    assert sorted(memstack.__all__) == sorted(
        [
            "AsyncClient",
            "AsyncMemory",
            "Client",
            "Conflict",
            "NotFound",
            "Unauthorized",
            "Unavailable",
            "open_memory",
            "AuditEvent",
            "Change",
            "ChatModel",
            "Completion",
            "Hit",
            "MissingAPIKey",
            "ModelIntegrityError",
            "ModelOutputError",
            "ProviderRejected",
            "ProviderUnavailable",
            "Record",
            "RecordStore",
            "Unit",
            "UsageLog",
            "UsageRecord",
            "get_chat_model",
            "BudgetError",
            "Checkpoint",
            "CheckpointStore",
            "Context",
            "Dropped",
            "HistoryStore",
            "InvalidInput",
            "JobError",
            "JobQueue",
            "JobReport",
            "Memory",
            "MemstackError",
            "Message",
            "MissingDependency",
            "RuntimeFailure",
            "SchemaError",
            "Scope",
            "Section",
            "StateStore",
            "Store",
            "StoreError",
            "ThreadInfo",
            "TokenCounter",
            "ToolCall",
            "Turn",
            "UnknownName",
            "UsageError",
            "__version__",
            "build_layer",
            "get_counter",
            "group_turns",
            "layer_names",
            "open_store",
            "pack",
            "register_counter",
            "register_layer",
            "trim",
            "window",
        ]
    )
    for name in memstack.__all__:
        assert hasattr(memstack, name)


# ---- the articles' examples -------------------------------------------------------------------


def test_a_restarted_process_continues_the_conversation(tmp_path):
    """The articles' history3 check, across real processes on one SQLite file."""
    db = tmp_path / "h.db"
    script = textwrap.dedent(
        f"""
        from datetime import datetime, timezone
        from memstack import Memory
        with Memory({str(db)!r}) as m:
            m.add([{{"role": "user", "content": "我正在开发一个知识中台"}}, {{"role": "assistant", "content": "好的"}},
                   {{"role": "user", "content": "后端使用SpringBoot"}}, {{"role": "assistant", "content": "明白"}}],
                  user_id="user_001", thread_id="session_001")
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    with Memory(db) as m:
        ctx = m.context(user_id="user_001", thread_id="session_001", query="我的后端使用什么技术？", strategy="full")
        assert texts(ctx) == ["我正在开发一个知识中台", "好的", "后端使用SpringBoot", "明白", "我的后端使用什么技术？"]


# ---- context ----------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.integers(30, 400),
    st.sampled_from(["full", "window", "trim", "window,trim", "probe,window"]),
    st.sampled_from(["estimate", "cl100k_base", "o200k_base"]),
)
def test_context_never_exceeds_the_budget(budget, strategy, counter_name):
    import probe_layer  # noqa: F401  (registers "probe")

    with Memory("memory://") as m:
        add_all(m, LISI * 4)
        ctx = m.context(
            user_id="user_001", thread_id="s1", query="我叫什么？", strategy=strategy, max_tokens=budget, counter=counter_name, k=3
        )
        counter = get_counter(counter_name)
        assert ctx.tokens == counter.count_messages(ctx.messages) <= budget
        assert ctx.messages[-1].text == "我叫什么？"
        convo = [x for x in ctx.messages if x.role != "system"]
        assert convo[0].role == "user"
        assert sum(v for k, v in ctx.sections.items() if ":" not in k) == ctx.tokens


def test_tail_loading_equals_reading_everything(tmp_path):
    with Memory(tmp_path / "long.db") as m:
        msgs = [Message(role="system", content="系统提示", timestamp=T0)]
        for i in range(1500):
            msgs.append(Message(role="user", content=f"第{i}个问题" + "细节" * (i % 7), timestamp=T0 + timedelta(seconds=2 * i)))
            if i % 5:
                msgs.append(Message(role="assistant", content=f"第{i}个回答", timestamp=T0 + timedelta(seconds=2 * i + 1)))
        m.add(msgs, user_id="u", thread_id="t")
        c = get_counter()
        for k in (1, 7, 300, 2000):
            ctx = m.context(user_id="u", thread_id="t", strategy="window", k=k, max_tokens=None)
            assert [x.id for x in ctx.messages] == [x.id for x in window(msgs, k)]
        for budget in (50, 3000, 20000):
            ctx = m.context(user_id="u", thread_id="t", strategy="trim", max_tokens=budget)
            assert [x.id for x in ctx.messages] == [x.id for x in trim(msgs, budget, c)]


def test_sections_go_into_one_system_message_after_the_clients(mem):
    import probe_layer  # noqa: F401

    add_all(mem, [("system", "你是助手")] + LISI)
    ctx = mem.context(user_id="user_001", thread_id="s1", query="问题", strategy="probe,full")
    assert [x.role for x in ctx.messages[:2]] == ["system", "system"]
    assert ctx.messages[0].text == "你是助手" and "probe saw 问题" in ctx.messages[1].text
    assert ctx.sections["memory:probe"] > 0


# ---- the write queue --------------------------------------------------------------------------


def test_add_enqueues_and_flush_runs_the_write_side(tmp_path):
    import probe_layer  # noqa: F401

    with Memory(tmp_path / "p.db", layers=["full", "probe"]) as m:
        add_all(m, LISI)
        scope = m.scope("user_001", "s1")
        assert m.store.jobs.pending() == 1  # coalesced into one job
        assert m.store.state.get(scope, "probe") is None  # nothing ran inside add()
        report = m.flush()
        assert report.ran == 1 and report.failed == 0
        assert len(m.store.state.get(scope, "probe")) == 6
        m.add("又一条", user_id="user_001", thread_id="s1")
        m.flush()
        assert len(m.store.state.get(scope, "probe")) == 7
        assert m.store.state.get(scope, "probe-calls") == {"n": 7}  # each message processed once


def test_a_failing_job_is_kept_and_retried(monkeypatch):
    import probe_layer

    with Memory("memory://", layers=["probe"]) as m:
        m.add(["ok", f"boom {probe_layer.FAIL_MARK}"], user_id="u", thread_id="t")
        report = m.flush()
        assert report.failed == 1 and "cannot digest" in report.errors[0]
        assert m.store.jobs.pending() == 1
        monkeypatch.setenv("PROBE_HEALED", "1")
        assert m.flush().ran == 0  # backing off: the first retry waits 2 s
        time.sleep(2.1)
        assert m.flush().ran == 1
        assert len(m.store.state.get(m.scope("u", "t"), "probe")) == 2


def test_background_worker_drains_and_close_finishes(tmp_path):
    import probe_layer  # noqa: F401

    m = Memory(tmp_path / "bg.db", layers=["probe"], background=True)
    for i in range(20):
        m.add(f"消息{i}", user_id="u", thread_id="t")
    m.close()
    with Memory(tmp_path / "bg.db") as again:
        assert again.store.jobs.pending() == 0
        assert len(again.store.state.get(again.scope("u", "t"), "probe")) == 20


def test_a_worker_killed_mid_job_reruns_without_duplicates(tmp_path):
    db = tmp_path / "kill.db"
    with Memory(db, layers=["probe"]) as m:
        import probe_layer  # noqa: F401

        m.add([f"第{i}条" for i in range(30)], user_id="u", thread_id="t")
    child = textwrap.dedent(
        f"""
        import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})
        import probe_layer
        from memstack import Memory
        m = Memory({str(db)!r}, layers=["probe"], options={{"delay": 0.05}}, lease_seconds=1)
        m.run_jobs()
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", child])
    scope_probe = None
    deadline = time.monotonic() + 60
    with Memory(db) as watcher:
        scope = watcher.scope("u", "t")
        while time.monotonic() < deadline:
            scope_probe = watcher.store.state.get(scope, "probe")
            if scope_probe and len(scope_probe) >= 5:
                break
            time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert scope_probe and 5 <= len(scope_probe) < 30, "the worker should have been killed mid-job"
    time.sleep(1.1)  # the dead worker's lease expires
    with Memory(db, layers=["probe"]) as m:
        assert m.store.jobs.pending() == 1
        assert m.flush().ran == 1
        seen = m.store.state.get(m.scope("u", "t"), "probe")
        assert len(seen) == 30 and m.store.jobs.pending() == 0
        assert sorted(seen) == sorted(x.id for x in m.history(user_id="u", thread_id="t"))
