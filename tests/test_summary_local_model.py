"""The articles' summary and state examples on the real local model (temperature 0, schema-
constrained output): what a correct extraction must keep, not exact strings. Marked ``local_model``."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memstack import Memory
from memstack.layers.state import current_state

pytestmark = [pytest.mark.local_model, pytest.mark.timeout(300)]

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)
FLIGHT = [
    ("user", "帮我订一张机票：下周五从北京飞上海，经济舱，预算1000元以内"),
    ("assistant", "好的，我来帮你查询下周五北京到上海的经济舱机票。"),
]


@pytest.fixture(scope="module")
def model():
    pytest.importorskip("xllamacpp", reason="the local model needs: pip install 'memstack[local]'")
    from memstack.llm import shared_local_model

    return shared_local_model()


def add(mem, turns):
    mem.add(
        [{"role": r, "content": t, "timestamp": (T0 + timedelta(minutes=i)).isoformat()} for i, (r, t) in enumerate(turns)],
        user_id="u",
        thread_id="t",
    )


@pytest.mark.timeout(120)
def test_summary_of_six_messages_keeps_the_name_and_the_job(model):
    # the articles' configuration: a batch of 6 messages summarised, the 2 most recent kept raw
    texts = [
        "我叫李四，是一名软件工程师",
        "你好李四！很高兴认识你。",
        "我正在开发一个知识中台",
        "好的，听起来不错。",
        "后端使用SpringBoot",
        "明白。",
        "文档检索使用Elasticsearch",
        "好的。",
    ]
    mem = Memory("memory://", layers=["summary-buffer"], options={"model": model, "batch_messages": 6, "buffer_tokens": 40})
    for i, text in enumerate(texts):  # one message at a time, as an app adds them
        mem.add(
            [{"role": "user" if i % 2 == 0 else "assistant", "content": text, "timestamp": (T0 + timedelta(minutes=i)).isoformat()}],
            user_id="u",
            thread_id="t",
        )
        mem.run_jobs()
    ctx = mem.context(user_id="u", thread_id="t", strategy="summary-buffer", query="我叫什么，做什么工作？", max_tokens=1000)
    text = "\n".join(m.text for m in ctx.messages)
    assert "李四" in text and "软件工程师" in text and "SpringBoot" in text


@pytest.mark.timeout(90)
def test_state_keeps_every_detail_of_the_trip(model):
    mem = Memory("memory://", layers=["state"], options={"model": model, "batch_messages": 2})
    add(mem, FLIGHT)
    assert mem.flush().failed == 0
    state = current_state(mem.store, mem.scope("u"))
    said = " ".join(str(v) for v in state.values())
    assert all(w in said for w in ("北京", "上海", "下周五", "经济舱", "1000")), state
    assert len(state) >= 3, state  # one item per detail, not the whole request under one key


@pytest.mark.timeout(90)
def test_state_fills_the_keys_of_its_schema(model):
    keys = {"出发地": "出发城市", "目的地": "到达城市", "日期": "出发日期", "舱位": "经济舱/商务舱", "预算": "票价上限"}
    schema = {"type": "object", "properties": {k: {"type": "string", "description": d} for k, d in keys.items()}}
    mem = Memory("memory://", layers=["state"], options={"model": model, "batch_messages": 2, "state_schema": schema})
    add(mem, FLIGHT)
    assert mem.flush().failed == 0
    state = current_state(mem.store, mem.scope("u"))
    assert "北京" in state.get("出发地", "") and "上海" in state.get("目的地", ""), state
    assert "下周五" in state.get("日期", "") and "经济舱" in state.get("舱位", "") and "1000" in state.get("预算", ""), state
