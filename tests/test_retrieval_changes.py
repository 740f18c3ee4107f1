"""A question about now finds the round that says the fact changed (issue 27 §3): "我现在住在哪个
城市？" is answered by "我上个月从上海搬到深圳了" although the question says 住在 and the round 搬到,
with window,retrieval (no model calls)."""

from __future__ import annotations

import pytest

from memstack import Memory
from memstack.retrieval.changes import change_words
from memstack.retrieval.search import SearchSettings

LONG_REPLY = (
    "搬家辛苦了！新城市充满活力，科技氛围浓厚，生活节奏也比较快。你住在哪个区呢？适应新环境需要一些时间，有什么需要帮忙的可以随时告诉我。"
)


def conversation(memory: Memory) -> None:
    def add(said: str, reply: str, thread: str, at: str) -> None:
        memory.add(
            [{"role": "user", "content": said, "timestamp": at}, {"role": "assistant", "content": reply, "timestamp": at}],
            user_id="u",
            thread_id=thread,
        )

    add(
        "我叫王磊，住在上海，在招商银行做数据分析师。",
        "你好王磊！数据分析是个很有前景的方向，你平时用Python还是SQL？",
        "s1",
        "2026-03-01T10:00:00+08:00",
    )
    for i, (q, a) in enumerate(
        [
            ("推荐一部电影吧。", "可以看看《肖申克的救赎》。"),
            ("番茄炒蛋怎么做？", "先炒蛋，再炒番茄。"),
            ("怎么提高睡眠质量？", "睡前少看手机。"),
        ]
    ):
        add(q, a, "s1", f"2026-03-0{2 + i}T10:00:00+08:00")
    add("我上个月从上海搬到深圳了。", LONG_REPLY, "s2", "2026-05-10T10:00:00+08:00")
    add(
        "I switched my whole backend from Java to Go last week.",
        "Nice, Go is great for services. How is the migration going so far, any problems with the libraries?",
        "s2",
        "2026-05-11T10:00:00+08:00",
    )
    memory.flush()


def test_the_words_of_a_change_follow_the_kind_of_fact_asked():
    assert "搬到" in change_words("我现在住在哪个城市？") and "跳槽" in change_words("我现在在哪个公司上班？")
    assert "switched" in change_words("What language do I use now?") and change_words("我叫什么名字？") == ""


@pytest.mark.parametrize(
    ("question", "said"), [("我现在住在哪个城市？", "搬到深圳"), ("What language does my backend use now?", "Java to Go")]
)
def test_a_question_about_now_finds_the_round_that_says_it_changed(question, said):
    memory = Memory("memory://", layers="window,retrieval")
    conversation(memory)
    hits = memory.search(question, user_id="u", k=3)
    assert hits and said in hits[0].unit.text, [h.unit.text for h in hits]
    off = Memory("memory://", layers="window,retrieval", options={"search": SearchSettings(change_words=False)})
    conversation(off)
    assert off.search(question, user_id="u", k=3)  # (the same search without the change words still finds something)
