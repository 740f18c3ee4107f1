"""Time expressions in Chinese and English questions, as spans of whole days relative to ``at``."""

from datetime import date, datetime, timedelta, timezone

import pytest

from memstack.errors import InvalidInput
from memstack.timeparse import TimeRange, parse_time_range, zh_number

CST = timezone(timedelta(hours=8))
WED = datetime(2024, 5, 15, 14, 30, tzinfo=CST)  # a Wednesday
SUN = datetime(2024, 5, 19, 22, 0, tzinfo=CST)  # a Sunday
NEW_YEAR = datetime(2024, 1, 1, 9, 0, tzinfo=CST)  # a Monday, the first day of a year
LEAP = datetime(2024, 3, 31, 12, 0, tzinfo=CST)


def days(query: str, at: datetime) -> tuple[date, date] | None:
    span = parse_time_range(query, at)
    return None if span is None else (span.since.date(), span.until.date())


def d(text: str) -> date:
    return date.fromisoformat(text)


CASES = [
    # ---- Chinese, relative to Wednesday 2024-05-15 ----
    ("今天吃了什么？", WED, "2024-05-15", "2024-05-16"),
    ("我昨天去了哪里", WED, "2024-05-14", "2024-05-15"),
    ("昨晚", WED, "2024-05-14", "2024-05-15"),
    ("前天", WED, "2024-05-13", "2024-05-14"),
    ("大前天我做了什么", WED, "2024-05-12", "2024-05-13"),
    ("三天前", WED, "2024-05-12", "2024-05-13"),
    ("3天前", WED, "2024-05-12", "2024-05-13"),
    ("十天以前", WED, "2024-05-05", "2024-05-06"),
    ("两周前", WED, "2024-04-29", "2024-05-06"),
    ("一个星期前", WED, "2024-05-06", "2024-05-13"),
    ("3个月前", WED, "2024-02-01", "2024-03-01"),
    ("两个月之前", WED, "2024-03-01", "2024-04-01"),
    ("两年前", WED, "2022-01-01", "2023-01-01"),
    ("上周", WED, "2024-05-06", "2024-05-13"),
    ("上个星期", WED, "2024-05-06", "2024-05-13"),
    ("上礼拜", WED, "2024-05-06", "2024-05-13"),
    ("上上周", WED, "2024-04-29", "2024-05-06"),
    ("这周", WED, "2024-05-13", "2024-05-20"),
    ("本周", WED, "2024-05-13", "2024-05-20"),
    ("这个星期", WED, "2024-05-13", "2024-05-20"),
    ("我上周三去了哪里？", WED, "2024-05-08", "2024-05-09"),
    ("上星期日", WED, "2024-05-12", "2024-05-13"),
    ("上个礼拜天", WED, "2024-05-12", "2024-05-13"),
    ("这周五", WED, "2024-05-17", "2024-05-18"),
    ("周三", WED, "2024-05-15", "2024-05-16"),
    ("星期一", WED, "2024-05-13", "2024-05-14"),
    ("周四", WED, "2024-05-09", "2024-05-10"),
    ("上个月", WED, "2024-04-01", "2024-05-01"),
    ("上月", WED, "2024-04-01", "2024-05-01"),
    ("上上个月", WED, "2024-03-01", "2024-04-01"),
    ("这个月", WED, "2024-05-01", "2024-06-01"),
    ("本月", WED, "2024-05-01", "2024-06-01"),
    ("去年", WED, "2023-01-01", "2024-01-01"),
    ("今年", WED, "2024-01-01", "2025-01-01"),
    ("前年", WED, "2022-01-01", "2023-01-01"),
    ("大前年", WED, "2021-01-01", "2022-01-01"),
    ("5月", WED, "2024-05-01", "2024-06-01"),
    ("五月份", WED, "2024-05-01", "2024-06-01"),
    ("6月", WED, "2023-06-01", "2023-07-01"),
    ("十二月", WED, "2023-12-01", "2024-01-01"),
    ("2023年5月", WED, "2023-05-01", "2023-06-01"),
    ("2023年", WED, "2023-01-01", "2024-01-01"),
    ("5月3日", WED, "2024-05-03", "2024-05-04"),
    ("五月三号", WED, "2024-05-03", "2024-05-04"),
    ("５月１６日", WED, "2023-05-16", "2023-05-17"),  # full-width digits; May 16 is still to come
    ("2023年5月3日", WED, "2023-05-03", "2023-05-04"),
    ("上周末", WED, "2024-05-11", "2024-05-13"),
    ("周末去哪了", WED, "2024-05-11", "2024-05-13"),
    ("这周末", WED, "2024-05-18", "2024-05-20"),
    ("最近三天", WED, "2024-05-12", "2024-05-16"),
    ("过去两周", WED, "2024-05-01", "2024-05-16"),
    ("最近一个月", WED, "2024-04-15", "2024-05-16"),
    ("我曾经在5月2日提到过我去了博物馆", WED, "2024-05-02", "2024-05-03"),
    ("昨天晚上月亮很圆", WED, "2024-05-14", "2024-05-15"),  # 晚上月 is not 上月
    ("5月3日和5月10日", WED, "2024-05-03", "2024-05-11"),  # several: the span covering them
    # ---- English, relative to Wednesday 2024-05-15 ----
    ("what did I eat today?", WED, "2024-05-15", "2024-05-16"),
    ("Yesterday", WED, "2024-05-14", "2024-05-15"),
    ("last night", WED, "2024-05-14", "2024-05-15"),
    ("the day before yesterday", WED, "2024-05-13", "2024-05-14"),
    ("3 days ago", WED, "2024-05-12", "2024-05-13"),
    ("three days ago", WED, "2024-05-12", "2024-05-13"),
    ("a week ago", WED, "2024-05-06", "2024-05-13"),
    ("two weeks ago", WED, "2024-04-29", "2024-05-06"),
    ("a couple of months ago", WED, "2024-03-01", "2024-04-01"),
    ("a year ago", WED, "2023-01-01", "2024-01-01"),
    ("last week", WED, "2024-05-06", "2024-05-13"),
    ("this week", WED, "2024-05-13", "2024-05-20"),
    ("the week before last", WED, "2024-04-29", "2024-05-06"),
    ("last month", WED, "2024-04-01", "2024-05-01"),
    ("this month", WED, "2024-05-01", "2024-06-01"),
    ("last year", WED, "2023-01-01", "2024-01-01"),
    ("this year", WED, "2024-01-01", "2025-01-01"),
    ("What did I do last Monday?", WED, "2024-05-13", "2024-05-14"),
    ("last Wednesday", WED, "2024-05-08", "2024-05-09"),
    ("on Wednesday", WED, "2024-05-15", "2024-05-16"),
    ("on Friday", WED, "2024-05-10", "2024-05-11"),
    ("this Friday", WED, "2024-05-17", "2024-05-18"),
    ("last weekend", WED, "2024-05-11", "2024-05-13"),
    ("over the weekend", WED, "2024-05-11", "2024-05-13"),
    ("this weekend", WED, "2024-05-18", "2024-05-20"),
    ("in May", WED, "2024-05-01", "2024-06-01"),
    ("in June", WED, "2023-06-01", "2023-07-01"),
    ("in April", WED, "2024-04-01", "2024-05-01"),
    ("last May", WED, "2023-05-01", "2023-06-01"),
    ("last April", WED, "2024-04-01", "2024-05-01"),
    ("May 2023", WED, "2023-05-01", "2023-06-01"),
    ("May 7th", WED, "2024-05-07", "2024-05-08"),
    ("May 20", WED, "2023-05-20", "2023-05-21"),
    ("the 7th of May", WED, "2024-05-07", "2024-05-08"),
    ("When did Caroline go to the support group on 7 May 2023?", WED, "2023-05-07", "2023-05-08"),
    ("May 7, 2023", WED, "2023-05-07", "2023-05-08"),
    ("Sept. 3rd, 2022", WED, "2022-09-03", "2022-09-04"),
    ("2023-05-07", WED, "2023-05-07", "2023-05-08"),
    ("2023/5/7", WED, "2023-05-07", "2023-05-08"),
    ("2023-05", WED, "2023-05-01", "2023-06-01"),
    ("in 2023", WED, "2023-01-01", "2024-01-01"),
    ("the past 3 days", WED, "2024-05-12", "2024-05-16"),
    ("in the last two weeks", WED, "2024-05-01", "2024-05-16"),
    ("over the past week", WED, "2024-05-08", "2024-05-16"),
    ("in the last month", WED, "2024-04-15", "2024-05-16"),
    # ---- anchored on a date (not on the reference day) ----
    ("What did Maria do last weekend before April 10, 2023?", WED, "2023-04-08", "2023-04-11"),
    ("What did John do the week before August 3, 2023?", WED, "2023-07-27", "2023-08-04"),
    ("the day after May 7, 2023", WED, "2023-05-07", "2023-05-09"),
    ("the Sunday before 25 May 2023", WED, "2023-05-21", "2023-05-26"),
    ("the weekend after 2023-05-03", WED, "2023-05-03", "2023-05-08"),
    ("5月3日之前的那个周末我去了哪？", WED, "2024-04-27", "2024-05-04"),
    ("2023年5月3日前一周", WED, "2023-04-26", "2023-05-04"),
    ("5月3日后一天", WED, "2024-05-03", "2024-05-05"),
    ("5月3日前的周三", WED, "2024-05-01", "2024-05-04"),
    # ---- the year wraps: Monday 2024-01-01 ----
    ("昨天", NEW_YEAR, "2023-12-31", "2024-01-01"),
    ("三天前", NEW_YEAR, "2023-12-29", "2023-12-30"),
    ("上周", NEW_YEAR, "2023-12-25", "2024-01-01"),
    ("两周前", NEW_YEAR, "2023-12-18", "2023-12-25"),
    ("上周日", NEW_YEAR, "2023-12-31", "2024-01-01"),
    ("周末", NEW_YEAR, "2023-12-30", "2024-01-01"),
    ("上个月", NEW_YEAR, "2023-12-01", "2024-01-01"),
    ("两个月前", NEW_YEAR, "2023-11-01", "2023-12-01"),
    ("去年", NEW_YEAR, "2023-01-01", "2024-01-01"),
    ("12月", NEW_YEAR, "2023-12-01", "2024-01-01"),
    ("1月", NEW_YEAR, "2024-01-01", "2024-02-01"),
    ("12月31日", NEW_YEAR, "2023-12-31", "2024-01-01"),
    ("this week", NEW_YEAR, "2024-01-01", "2024-01-08"),
    ("last Monday", NEW_YEAR, "2023-12-25", "2023-12-26"),
    ("on Monday", NEW_YEAR, "2024-01-01", "2024-01-02"),
    ("last December", NEW_YEAR, "2023-12-01", "2024-01-01"),
    ("last January", NEW_YEAR, "2023-01-01", "2023-02-01"),
    ("in January", NEW_YEAR, "2024-01-01", "2024-02-01"),
    ("the past 3 days", NEW_YEAR, "2023-12-29", "2024-01-02"),
    # ---- a Sunday: the week ends today ----
    ("周末", SUN, "2024-05-18", "2024-05-20"),
    ("上周末", SUN, "2024-05-11", "2024-05-13"),
    ("这周日", SUN, "2024-05-19", "2024-05-20"),
    ("周日", SUN, "2024-05-19", "2024-05-20"),
    ("this week", SUN, "2024-05-13", "2024-05-20"),
    ("last Sunday", SUN, "2024-05-12", "2024-05-13"),
    ("the weekend", SUN, "2024-05-18", "2024-05-20"),
    # ---- month lengths and leap days: 2024-03-31 ----
    ("一个月前", LEAP, "2024-02-01", "2024-03-01"),
    ("最近一个月", LEAP, "2024-02-29", "2024-04-01"),
    ("2月29日", LEAP, "2024-02-29", "2024-03-01"),
    ("2月29日", datetime(2025, 3, 1, tzinfo=CST), "2024-02-29", "2024-03-01"),
]


@pytest.mark.parametrize(("query", "at", "since", "until"), CASES, ids=[f"{c[0]}@{c[1]:%Y-%m-%d}" for c in CASES])
def test_expressions(query: str, at: datetime, since: str, until: str) -> None:
    assert days(query, at) == (d(since), d(until))


@pytest.mark.parametrize(
    "query",
    [
        "",
        "我喜欢什么运动？",
        "最近怎么样",
        "前几天",
        "几天前",
        "recently",
        "a few days ago",
        "May I ask you something?",
        "the March for Science",
        "明天",
        "后天去哪",
        "下周三",
        "下个月",
        "明年",
        "tomorrow",
        "next week",
        "next Monday",
        "next May",
        "in 3 days",
        "每周一",
        "每天",
        "every Monday",
        "2023年13月",
        "2月30日",
        "十万年前",
        "99999999 days ago",
        "2023年前",
    ],
)
def test_no_span(query: str) -> None:
    assert parse_time_range(query, WED) is None


def test_the_span_is_whole_days_in_the_time_zone_of_at() -> None:
    at = datetime(2024, 5, 15, 23, 30, tzinfo=timezone.utc)  # already the 16th in UTC+8
    span = parse_time_range("今天", at)
    assert span == TimeRange(datetime(2024, 5, 15, tzinfo=timezone.utc), datetime(2024, 5, 16, tzinfo=timezone.utc))
    local = parse_time_range("今天", at.astimezone(CST))
    assert local == TimeRange(datetime(2024, 5, 16, tzinfo=CST), datetime(2024, 5, 17, tzinfo=CST))
    assert local.since.utcoffset() == timedelta(hours=8)


def test_days_across_a_daylight_saving_change_are_wall_clock_days() -> None:
    zoneinfo = pytest.importorskip("zoneinfo")
    new_york = zoneinfo.ZoneInfo("America/New_York")
    span = parse_time_range("yesterday", datetime(2024, 3, 11, 12, 0, tzinfo=new_york))  # clocks went forward on the 10th
    assert span.since == datetime(2024, 3, 10, tzinfo=new_york) and span.until == datetime(2024, 3, 11, tzinfo=new_york)
    assert span.until.astimezone(timezone.utc) - span.since.astimezone(timezone.utc) == timedelta(hours=23)


def test_at_must_be_timezone_aware() -> None:
    with pytest.raises(InvalidInput):
        parse_time_range("今天", datetime(2024, 5, 15))


@pytest.mark.parametrize(
    ("text", "value"), [("三", 3), ("两", 2), ("十", 10), ("十五", 15), ("二十", 20), ("二十三", 23), ("一百零五", 105), ("12", 12)]
)
def test_chinese_numerals(text: str, value: int) -> None:
    assert zh_number(text) == value
