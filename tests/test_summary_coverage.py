"""What the summary says it covers, it carries: no turn is lost between the notes and the buffer.

A turn the summary "covers" (its seq is at or before ``covers_until``) leaves the context; that is
right only when some note carries what it said. Scripted model, the real Extractor, the SQLite
store and Memory.context.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from chats import statements, turns_from

from memstack import Memory
from memstack.testing import ScriptedModel

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)


turns = turns_from(T0)


out = statements


def context_text(ctx):
    return "\n".join(m.text for m in ctx.messages)


def summarised(tmp_path, answer, texts, batch):
    """A summary memory whose model answers ``answer``, given ``texts`` in thread t; with its notes."""
    mem = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers=["summary"], options={"model": ScriptedModel([answer]), "batch_messages": batch})
    mem.add(turns(texts), user_id="u", thread_id="t")
    assert mem.flush().failed == 0
    return mem, mem.store.records.current(mem.scope("u", "t"), "summary")[0].value["items"]


@pytest.mark.parametrize("buffer_tokens", [0, 30, 45])
def test_a_turn_no_note_carries_is_not_dropped_as_covered(tmp_path, buffer_tokens):
    # the model noted the project but not the name: the name's turn must not vanish, whether the
    # note is shown or hidden because its own turn is in the buffer (45 tokens hold the last two)
    model = ScriptedModel([out(("用户", "人物", "开发", "知识中台"))])
    mem = Memory(
        f"sqlite:///{tmp_path / 'm.db'}",
        layers=["summary-buffer"],
        options={"model": model, "batch_messages": 4, "buffer_tokens": buffer_tokens},
    )
    mem.add(turns(["我叫李四", "你好李四！", "我正在开发一个知识中台", "好的，听起来很有意思，祝你顺利。"]), user_id="u", thread_id="t")
    assert mem.flush().failed == 0
    ctx = mem.context(user_id="u", thread_id="t", strategy="summary-buffer", query="我叫什么？", max_tokens=2000)
    assert "李四" in context_text(ctx)
    assert "知识中台" in context_text(ctx)


def test_a_note_grounded_nowhere_is_not_kept_and_the_turns_stay_carried(tmp_path):
    # a statement the user's words do not support ("enjoys hiking" of a nurse's introduction) is
    # no note at all (layers.verify: a wrong memory is worse than none); the turns stay carried
    mem, items = summarised(
        tmp_path,
        out(("User", "person", "enjoys", "hiking")),
        ["My name is Zhang Wei and I work as a nurse in Chengdu", "Nice to meet you!"],
        2,
    )
    assert not any("hiking" in i["text"] for i in items)
    ctx = mem.context(user_id="u", thread_id="t", strategy="summary", query="Where do I work?", max_tokens=2000)
    text = context_text(ctx)
    assert "Chengdu" in text and "nurse" in text and "hiking" not in text
    assert [e.after["reason"] for e in mem.store.records.audit(mem.scope("u"), kind="rejected")] == ["not in the user's own words"]


def test_turns_the_notes_carry_still_leave_the_context(tmp_path):
    mem, items = summarised(
        tmp_path,
        out(("用户", "人物", "叫", "李四"), ("用户", "人物", "正在开发", "一个知识中台")),
        ["我叫李四", "你好李四！", "我正在开发一个知识中台", "好的，听起来很有意思。"],
        4,
    )
    ctx = mem.context(user_id="u", thread_id="t", strategy="summary", max_tokens=2000)
    assert [m.text for m in ctx.messages if m.role != "system"] == []
    assert [i["text"] for i in items] == ["用户叫李四", "用户正在开发一个知识中台"]  # nothing copied: the notes carry both


def test_short_statements_reach_the_model_and_acknowledgements_do_not():
    model = ScriptedModel([out()])
    mem = Memory("memory://", layers=["summary"], options={"model": model, "batch_messages": 6})
    mem.add(turns(["我叫李四", "好的。", "我28岁", "明白，谢谢！", "I'm Tom", "OK, thanks!"]), user_id="u", thread_id="t")
    assert mem.flush().failed == 0
    prompt = model.calls[0]["messages"][-1]["content"]
    assert "我叫李四" in prompt and "我28岁" in prompt and "I'm Tom" in prompt
    assert "好的。" not in prompt and "明白，谢谢！" not in prompt and "OK, thanks!" not in prompt


def test_a_quoted_turn_carries_the_date_of_its_relative_dates(tmp_path):
    # read weeks later, a bare "大后天" under the note's own date reads as that date: the quote
    # carries the day it means (a real LifeAssist-CN miss, after a batch whose statements failed)
    _, items = summarised(
        tmp_path,
        out(("用户", "人物", "跑了", "18公里")),
        ["最近跑了18公里。告诉你个事，大后天是我生日，男朋友要给我惊喜。", "提前祝你生日快乐！"],
        2,
    )
    quote = next(i for i in items if i.get("said"))
    assert "大后天（2024-03-04）" in quote["text"], quote
