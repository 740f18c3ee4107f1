"""window(), trim() and pack(): the articles' examples, and trim() against LangChain's trim_messages."""

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage, trim_messages

from memstack.budget import pack, split_text, trim, window
from memstack.errors import BudgetError, InvalidInput
from memstack.tokens import get_counter
from memstack.types import Message, Section, ToolCall

T0 = datetime(2026, 11, 2, 20, 0, tzinfo=timezone.utc)
EST = get_counter("estimate")
CL100K = get_counter("cl100k_base")


def conv(*pairs: tuple[str, str]) -> list[Message]:
    return [Message(role=r, content=t, timestamp=T0 + timedelta(minutes=i)) for i, (r, t) in enumerate(pairs)]  # type: ignore[arg-type]


# the articles' example: "我叫李四" / "你好李四！" and two more turns
LISI = conv(
    ("system", "你是一个能够记住历史对话的AI助手。"),
    ("user", "我叫李四"),
    ("assistant", "你好李四！"),
    ("user", "我正在开发一个知识中台"),
    ("assistant", "很好，知识中台用什么技术？"),
    ("user", "后端使用SpringBoot"),
    ("assistant", "SpringBoot 是很成熟的后端框架。"),
)


def texts(msgs):
    return [m.text for m in msgs]


def never_orphaned(msgs):
    t = texts(msgs)
    return "你好李四！" not in t or "我叫李四" in t


def test_window_keeps_whole_turns_and_the_system_message():
    kept = window(LISI, 2)
    assert texts(kept) == [
        "你是一个能够记住历史对话的AI助手。",
        "我正在开发一个知识中台",
        "很好，知识中台用什么技术？",
        "后端使用SpringBoot",
        "SpringBoot 是很成熟的后端框架。",
    ]
    assert never_orphaned(kept)
    assert texts(window(LISI, 0)) == ["你是一个能够记住历史对话的AI助手。"]
    assert window(LISI, 99) == LISI
    with pytest.raises(InvalidInput):
        window(LISI, -1)


def test_window_never_starts_with_an_assistant_message():
    greeting_first = conv(("assistant", "您好，我是客服小美"), ("user", "我叫李四"), ("assistant", "你好李四！"))
    assert texts(window(greeting_first, 5)) == ["我叫李四", "你好李四！"]


def test_window_keeps_tool_calls_with_their_results():
    call = ToolCall(id="c1", name="get_order", arguments='{"id": 42}')
    msgs = conv(("user", "查订单"), ("assistant", "好的")) + [
        Message(role="user", content="订单42到哪了？", timestamp=T0),
        Message(role="assistant", content="", tool_calls=(call,), timestamp=T0),
        Message(role="tool", content='{"status": "已发货"}', tool_call_id="c1", timestamp=T0),
        Message(role="assistant", content="已发货", timestamp=T0),
    ]
    assert [m.role for m in window(msgs, 1)] == ["user", "assistant", "tool", "assistant"]


@pytest.mark.parametrize("budget", range(0, 120, 5))
def test_trim_100_tokens_never_orphans_the_reply(budget):
    kept = trim(LISI, budget + 30, CL100K) if budget + 30 >= CL100K.count_message(LISI[0]) else []
    assert never_orphaned(kept)
    assert CL100K.count_messages(kept) <= budget + 30
    if kept:
        assert kept[0].role == "system" and (len(kept) == 1 or kept[1].role == "user")


def test_trim_100_tokens_example():
    kept = trim(LISI, 100, CL100K)
    assert CL100K.count_messages(kept) <= 100
    assert kept[0].role == "system" and kept[1].role == "user" and never_orphaned(kept)


def test_trim_system_over_budget_is_a_clear_error():
    with pytest.raises(BudgetError):
        trim(LISI, 3, CL100K)


def test_trim_first_and_end_on():
    kept = trim(LISI, 60, EST, strategy="first", start_on=None, end_on="assistant")
    assert kept[-1].role == "assistant" and texts(kept)[:3] == texts(LISI)[:3]


def test_trim_partial_cuts_at_a_sentence():
    long = conv(("user", "第一句。第二句。第三句很长很长很长。"), ("assistant", "好的。"))
    budget = EST.count_message(long[1]) + EST.count_message(Message(role="user", content="第三句很长很长很长。", timestamp=T0))
    kept = trim(long, budget, EST, allow_partial=True)
    assert texts(kept) == ["第三句很长很长很长。", "好的。"] and kept[0].metadata["partial"] is True
    assert EST.count_messages(kept) <= budget


def test_trim_drops_a_tool_call_without_its_results():
    call = ToolCall(id="c1", name="f")
    msgs = conv(("user", "hi")) + [
        Message(role="assistant", content="", tool_calls=(call,), timestamp=T0),
        Message(role="tool", content="长" * 400, tool_call_id="c1", timestamp=T0),
    ]
    kept = trim(msgs, 40, EST, strategy="first", start_on=None)
    assert [m.role for m in kept] == ["user"]


def test_split_text_keeps_every_character():
    text = "第一句。Second one. 第三句！\n换行后？最后"
    assert "".join(split_text(text)) == text and len(split_text(text)) >= 5


def test_pack_by_priority():
    secs = [Section("a", "甲" * 50, priority=50), Section("b", "乙" * 10, priority=10), Section("c", "丙" * 10, priority=90)]
    kept, dropped = pack(secs, 40, EST)
    assert [s.name for s in kept] == ["b", "c"] and [s.name for s in dropped] == ["a"]


# ---- trim() has LangChain's trim_messages semantics -------------------------------------------

ROLES = st.sampled_from(["user", "assistant"])
WORDS = st.sampled_from(
    ["我叫李四", "你好", "后端使用SpringBoot", "cache with Redis", "预算30万元", "ok", "很长的一段话，" * 8, "line\nbreak"]
)


@st.composite
def conversations(draw):
    n = draw(st.integers(0, 14))
    msgs = []
    if draw(st.booleans()):
        msgs.append(Message(role="system", content=draw(WORDS), timestamp=T0))
    for i in range(n):
        msgs.append(Message(role=draw(ROLES), content=draw(WORDS), timestamp=T0 + timedelta(seconds=i)))
    return msgs


def to_langchain(msgs):
    cls = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage, "tool": ToolMessage}
    return [cls[m.role](content=m.content, id=m.id) for m in msgs]


def lc_counter(by_id):
    return lambda lc_msgs: sum(CL100K.count_message(by_id[m.id]) for m in lc_msgs)


@settings(max_examples=300, deadline=None)
@given(conversations(), st.integers(0, 200), st.sampled_from(["last", "first"]), st.booleans(), st.sampled_from([None, "user"]))
def test_trim_matches_langchain(msgs, budget, strategy, include_system, start_on):
    by_id = {m.id: m for m in msgs}
    if strategy == "first":
        include_system, start_on = False, None
    lc = trim_messages(
        to_langchain(msgs),
        max_tokens=budget,
        token_counter=lc_counter(by_id),
        strategy=strategy,
        include_system=include_system,
        start_on={"user": "human"}.get(start_on),
        allow_partial=False,
    )
    lc_ids = [m.id for m in lc]
    try:
        ours = [m.id for m in trim(msgs, budget, CL100K, strategy=strategy, include_system=include_system, start_on=start_on)]
    except BudgetError:  # LangChain keeps a system message that alone breaks the budget; we refuse
        assert include_system and msgs and msgs[0].role == "system" and CL100K.count_message(msgs[0]) > budget
        return
    assert ours == lc_ids
