"""Relative dates in what was said carry their calendar date in the rendered memory."""

from datetime import date, datetime, timezone

from memstack.reldates import annotate, relative_dates, resolved_days
from memstack.retrieval.render import render_hits
from memstack.types import Hit, Scope, Unit

WED = date(2026, 3, 18)  # a Wednesday


def test_chinese_expressions_past_and_future_resolve_against_the_day_they_were_said():
    assert annotate("上周六我去苏州面试了", WED, "zh") == "上周六（2026-03-14）我去苏州面试了"
    assert annotate("下周三交稿，大后天先发初稿", WED, "zh") == "下周三（2026-03-25）交稿，大后天（2026-03-21）先发初稿"
    assert annotate("三天前刚到", WED, "zh") == "三天前（2026-03-15）刚到"
    assert annotate("这周末去爬山", WED, "zh") == "这周末（2026-03-21～03-22）去爬山"
    assert annotate("上个月搬的家，去年买的车", WED, "zh") == "上个月（2026年2月）搬的家，去年（2025年）买的车"
    assert annotate("前天和昨天都下雨", WED, "zh") == "前天（2026-03-16）和昨天（2026-03-17）都下雨"


def test_what_names_no_single_date_is_left_as_said():
    for text in ("周三开会", "最近很忙", "晚上周五再说", "先天不足", "每周一去游泳"):
        assert annotate(text, WED, "zh") == text
    assert annotate("上周六（3月14日）去的", WED, "zh") == "上周六（3月14日）去的"  # already dated
    assert relative_dates("九千九百九十九万天前", WED) == []  # past the calendar: nothing, no error


def test_the_day_it_was_said_is_not_repeated():
    # what is annotated is shown under its own date: "今天（2026-03-18）" would only repeat it
    assert annotate("今天先聊到这里，明天再说", WED, "zh") == "今天先聊到这里，明天（2026-03-19）再说"
    assert annotate("I ran today", datetime(2026, 3, 18, 22, tzinfo=timezone.utc), "en") == "I ran today"


def test_english_expressions():
    may3 = date(2023, 5, 3)  # a Wednesday
    assert annotate("I went there last Saturday", may3, "en") == "I went there last Saturday (2023-04-29)"
    assert annotate("See you next Tuesday", may3, "en") == "See you next Tuesday (2023-05-09)"
    assert (
        annotate("2 days ago it rained; tomorrow is fine", may3, "en") == "2 days ago (2023-05-01) it rained; tomorrow (2023-05-04) is fine"
    )
    assert annotate("Last month I moved", may3, "en") == "Last month (2023-04) I moved"


def test_the_days_an_expression_covers():
    # what search compares with the period a question names (a day, a weekend, a month, a year)
    days = [resolved_days(value) for _s, _e, value in relative_dates("昨天、这周末、上个月、去年", WED)]
    assert days == [
        (date(2026, 3, 17), date(2026, 3, 18)),
        (date(2026, 3, 21), date(2026, 3, 23)),
        (date(2026, 2, 1), date(2026, 3, 1)),
        (date(2025, 1, 1), date(2026, 1, 1)),
    ]
    assert [resolved_days(v) for _s, _e, v in relative_dates("next month", date(2026, 12, 3))] == [(date(2027, 1, 1), date(2027, 2, 1))]


def test_the_retrieved_section_dates_a_relative_expression_by_when_it_was_said():
    said = datetime(2026, 3, 18, 20, 0, tzinfo=timezone.utc)
    text = "用户: 上周六我去苏州那所学校面试了"
    span = ["m1", 1, "用户", 0, 4, len(text)]
    unit = Unit(id="m1:0", scope=Scope(user_id="u", thread_id="s1"), text=text, timestamp=said, metadata={"spans": [span]})
    rendered = render_hits([Hit(unit, 1.0, {})], "zh")
    assert "[2026-03-18 周三]" in rendered and "上周六（2026-03-14）我去苏州" in rendered
