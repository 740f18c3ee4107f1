"""window_messages: the window layer's rule (the last k whole turns) for a list of LangChain
messages, as the articles' get_recent_messages(messages, k) means it."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from memstack import Memory
from memstack.errors import InvalidInput
from memstack.integrations.langchain import MemstackChatMessageHistory, window_messages

SHOP = [
    SystemMessage("你是一个电商客服助手。"),
    HumanMessage("我昨天买了一副蓝牙耳机"),
    AIMessage("好的，请问有什么可以帮您？"),
    HumanMessage("能改收货地址吗？"),
    HumanMessage("改成杭州市西湖区文三路100号"),
    HumanMessage("发票抬头写公司名"),
]


def test_k_counts_turns_when_the_user_sends_several_messages_in_a_row():
    kept = window_messages(SHOP, k=2)
    assert [m.content for m in kept] == ["你是一个电商客服助手。", "改成杭州市西湖区文三路100号", "发票抬头写公司名"]
    assert all(any(m is original for original in SHOP) for m in kept)  # the caller's objects, not copies


def test_it_never_starts_on_a_reply_and_keeps_each_turn_whole():
    chat = [
        HumanMessage("我叫李四"),
        AIMessage("你好李四！"),
        HumanMessage("我喜欢打网球"),
        AIMessage("很棒的运动！"),
        AIMessage("你常打吗？"),
    ]
    assert [m.content for m in window_messages(chat, k=1)] == ["我喜欢打网球", "很棒的运动！", "你常打吗？"]
    assert [m.content for m in window_messages(chat, k=5)] == [m.content for m in chat]
    assert window_messages(chat, k=0) == [] and [m.content for m in window_messages(SHOP, k=0)] == ["你是一个电商客服助手。"]


def test_a_tool_call_stays_with_its_result():
    call = AIMessage("", tool_calls=[{"name": "recall_memory", "args": {"query": "地址"}, "id": "c1", "type": "tool_call"}])
    chat = [
        HumanMessage("我的地址是什么？"),
        call,
        ToolMessage("杭州市西湖区文三路100号", tool_call_id="c1"),
        AIMessage("您的地址是文三路100号。"),
    ]
    assert window_messages([HumanMessage("你好"), AIMessage("你好！"), *chat], k=1) == chat


def test_it_is_the_window_layers_rule_on_a_stored_thread():
    memory = Memory("memory://", layers=["window"])
    MemstackChatMessageHistory(memory, user_id="u1", thread_id="t1").add_messages(SHOP)
    stored = memory.context(user_id="u1", thread_id="t1", strategy="window", k=2)
    assert [m.text for m in stored.messages] == [m.content for m in window_messages(SHOP, k=2)]


def test_bad_input_is_refused_naming_it():
    with pytest.raises(InvalidInput, match="k must be >= 0"):
        window_messages(SHOP, k=-1)
    with pytest.raises(InvalidInput, match="integer"):
        window_messages(SHOP, k="2")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput) as caught:
        window_messages([HumanMessage("你好"), HumanMessage("")], k=1)
    assert caught.value.field.startswith("messages[1]")
