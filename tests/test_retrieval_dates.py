"""Dates in retrieval: a unit is dated by its own round (a lead-in from the round before is
context only, dated by its own time), and the retrieved section has one date line per day, days
ascending, even when threads overlap in time."""

from datetime import datetime, timedelta, timezone

from memstack import Memory
from memstack.retrieval.render import render_hits
from memstack.retrieval.units import units_for_round
from memstack.tokens import get_counter
from memstack.types import Hit, Message, Scope, SearchFilter, Unit

TZ = timezone(timedelta(hours=8))
NOV1 = datetime(2026, 11, 1, 20, 0, tzinfo=TZ)
NOV20 = datetime(2026, 11, 20, 9, 0, tzinfo=TZ)
S = Scope(user_id="u", thread_id="t")
EST = get_counter()


def msg(role, text, at, seq, id=None):
    return Message(role=role, content=text, timestamp=at, seq=seq, **({"id": id} if id else {}))


def two_rounds():
    before = [msg("user", "我想学做菜", NOV1, 1), msg("assistant", "好主意！你喜欢哪种菜系呢？", NOV1 + timedelta(minutes=1), 2)]
    after = [msg("user", "我比较喜欢川菜和粤菜", NOV20, 3), msg("assistant", "川菜和粤菜都很经典。", NOV20 + timedelta(minutes=1), 4)]
    return before, after


def test_a_unit_is_dated_by_its_own_round_not_by_its_lead_in():
    before, after = two_rounds()
    (unit,) = units_for_round(S, after, 2, EST, previous=before)
    assert "你喜欢哪种菜系呢？" in unit.text  # the lead-in is there, as context
    assert unit.timestamp == NOV20
    assert unit.metadata["lead"]["id"] == before[1].id


def test_a_chunked_round_dates_every_chunk_by_its_own_messages():
    before, _ = two_rounds()
    long = [msg("user", "我比较喜欢川菜。" * 60, NOV20, 3), msg("assistant", "好的。" * 40, NOV20 + timedelta(minutes=1), 4)]
    units = units_for_round(S, long, 2, EST, previous=before, chunk_tokens=80)
    assert len(units) > 1 and all(u.timestamp >= NOV20 for u in units)


def test_a_lead_in_is_rendered_under_its_own_date():
    before, after = two_rounds()
    (unit,) = units_for_round(S, after, 2, EST, previous=before)
    lines = render_hits([Hit(unit, 1.0)]).splitlines()
    assert lines[1:] == [
        "[2026-11-01 周日]",
        "助手: 好主意！你喜欢哪种菜系呢？",
        "[2026-11-20 周五]",
        "用户: 我比较喜欢川菜和粤菜",
        "助手: 川菜和粤菜都很经典。",
    ]


def test_since_finds_a_round_said_after_it_and_the_section_shows_its_date(tmp_path):
    before, after = two_rounds()
    with Memory(tmp_path / "d.db", layers=["retrieval"]) as mem:
        for m in (*before, *after):
            mem.add({"role": m.role, "content": m.text}, user_id="u", thread_id="t", at=m.timestamp)
        mem.flush()
        late = mem.search(
            "我喜欢什么菜系？", user_id="u", at=NOV20 + timedelta(days=1), where=SearchFilter(since=NOV1 + timedelta(days=14))
        )
        assert [h.unit.timestamp for h in late] == [NOV20]
        assert "川菜" in late[0].unit.text
        ctx = mem.context(user_id="u", thread_id="new", query="我喜欢什么菜系？", at=NOV20 + timedelta(days=1))
        memory = "\n".join(m.text for m in ctx.messages if m.role == "system")
        assert memory.index("[2026-11-20 周五]") < memory.index("我比较喜欢川菜和粤菜")


def said(thread, day, seq, text, hour=12):
    when = datetime(2026, 10, day, hour, tzinfo=TZ)
    span = [f"{thread}-{seq}", seq, "用户", 0, 4, 4 + len(text)]
    unit = Unit(
        id=f"{thread}-{seq}:0", scope=Scope(user_id="u", thread_id=thread), text=f"用户: {text}", timestamp=when, metadata={"spans": [span]}
    )
    return Hit(unit, 1.0)


def test_each_day_has_one_date_line_in_ascending_order_when_threads_interleave():
    # thread a started first (10-10, then 10-12); thread b also speaks on 10-10 and on 10-11
    hits = [
        said("a", 12, 5, "甲的第三句"),
        said("b", 11, 2, "乙的第二句"),
        said("a", 10, 1, "甲的第一句", 9),
        said("b", 10, 1, "乙的第一句", 10),
        said("a", 10, 2, "甲的第二句", 11),
    ]
    lines = render_hits(hits).splitlines()[1:]
    assert lines == [
        "[2026-10-10 周六]",
        "用户: 甲的第一句",
        "用户: 甲的第二句",
        "用户: 乙的第一句",
        "[2026-10-11 周日]",
        "用户: 乙的第二句",
        "[2026-10-12 周一]",
        "用户: 甲的第三句",
    ]


def test_a_message_shown_by_rounds_of_both_languages_is_labelled_in_the_sections_language():
    # the Chinese answer leads in an English round: the English section says "Assistant:" for it
    zh = [msg("user", "我现在住在哪个城市？", NOV1, 1, "q1"), msg("assistant", "你住在深圳。", NOV1, 2, "a1")]
    en = [msg("user", "What language does my backend use now?", NOV1, 3, "q2"), msg("assistant", "Go.", NOV1, 4, "a2")]
    (first,) = units_for_round(S, zh, 1, EST)
    (second,) = units_for_round(S, en, 2, EST, previous=zh)
    assert render_hits([Hit(first, 1.0), Hit(second, 0.9)], "en").splitlines()[2:] == [
        "User: 我现在住在哪个城市？",
        "Assistant: 你住在深圳。",
        "User: What language does my backend use now?",
        "Assistant: Go.",
    ]
    assert render_hits([Hit(second, 1.0), Hit(first, 0.9)], "zh").splitlines()[2:] == [
        "用户: 我现在住在哪个城市？",
        "助手: 你住在深圳。",
        "用户: What language does my backend use now?",
        "助手: Go.",
    ]
