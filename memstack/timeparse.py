"""Time expressions in questions, Chinese and English, as a span of whole days relative to a reference time.

``parse_time_range("我上周三去了哪里？", at)`` gives the Wednesday of the week before ``at``'s, from
its midnight to the next, in ``at``'s time zone. Every span is half-open, [since, until), and made
of whole calendar days; weeks start on Monday. What each expression means:

- days: 今天/today, 昨天/yesterday (last night), 前天/the day before yesterday, 大前天;
  N天前/N days ago is that one day.
- weeks: 这周/本周/this week and 上周/上个星期/last week are calendar weeks (上上周, the week
  before last: two back); N周前/N weeks ago is the week that held the day 7N days back.
  上周三 is the Wednesday of last week, 这周三/this Wednesday that of this week, a bare 周三/
  on Wednesday the latest Wednesday up to today, and "last Wednesday" the latest before today.
  周末/the weekend is the latest Saturday and Sunday (this one on a weekend day), 上周末/last
  weekend those of last week, 这周末/this weekend those of this week.
- months and years: 这个月/this month, 上个月/last month, 去年/last year, 今年/this year, 前年,
  大前年, the month before last; N个月前/N months ago and N年前/N years ago are that month or year.
- dates: 5月/五月/in May is May of ``at``'s year unless that is still to come, then the year before;
  "last May" is the latest May before ``at``'s month; 5月3日/5月3号/May 3(rd)/3 May is that day of
  the latest such date up to today; 2023年5月/May 2023, 2023年5月3日/7 May 2023/May 7, 2023/
  2023-05-07, 2023年/in 2023 are what they say.
- anchored on a date: "the week before August 3, 2023" is the 7 days before it, "the day/weekend/
  Sunday/month before (after) DATE" the one right before (after) it, "last weekend before April 10,
  2023" that weekend; 5月3日前一周/之前的那个周末/前一天/后的周三 likewise. Each with the date's own
  day, on which what happened just before is often told.
- the past N days/weeks/months/years (最近三天, 过去两周, in the last 3 days, the past week, over
  the last month) run from the start of the day that far back to the end of today.

Vague words (最近, 前几天, recently) name no span. Future expressions (明天, 下周, next week,
tomorrow) and habits (每周一, every Monday) name none either: in a question about memory they refer
to plans made earlier, so filtering by their dates would hide the answer. When a question names
several spans, the result covers them all (from the earliest start to the latest end).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from .types import aware

Days = tuple[date, date]  # [first day, day after the last)
Resolver = Callable[[re.Match[str], date], Days | None]


@dataclass(frozen=True, slots=True)
class TimeRange:
    """A half-open span [since, until) of whole days, in the time zone of the reference time."""

    since: datetime
    until: datetime


# ---- calendar arithmetic ---------------------------------------------------------------------


def _day(d: date) -> Days:
    return d, d + timedelta(days=1)


def _week(d: date, weeks_back: int = 0) -> Days:
    monday = d - timedelta(days=d.weekday() + 7 * weeks_back)
    return monday, monday + timedelta(days=7)


def _month(year: int, month: int) -> Days:
    return date(year, month, 1), date(year + month // 12, month % 12 + 1, 1)


def _months_back(today: date, n: int) -> tuple[int, int]:
    index = today.year * 12 + today.month - 1 - n
    return index // 12, index % 12 + 1


def _year(year: int) -> Days:
    return date(year, 1, 1), date(year + 1, 1, 1)


def _weekday_in_week(today: date, weekday: int, weeks_back: int) -> Days:
    return _day(_week(today, weeks_back)[0] + timedelta(days=weekday))


def _latest_weekday(today: date, weekday: int, *, before_today: bool = False) -> Days:
    back = (today.weekday() - weekday - 1) % 7 + 1 if before_today else (today.weekday() - weekday) % 7
    return _day(today - timedelta(days=back))


def _weekend(today: date, weeks_back: int | None) -> Days:
    """Saturday and Sunday of a week; ``None``: the latest weekend, this one on a weekend day."""
    if weeks_back is None:
        weeks_back = 0 if today.weekday() >= 5 else 1
    monday = _week(today, weeks_back)[0]
    return monday + timedelta(days=5), monday + timedelta(days=7)


def _latest_month(today: date, month: int, *, before_this_month: bool = False) -> Days:
    year = today.year if (month < today.month or (month == today.month and not before_this_month)) else today.year - 1
    return _month(year, month)


def _latest_date(today: date, month: int, day: int) -> Days | None:
    for year in (today.year, today.year - 1):
        try:
            d = date(year, month, day)
        except ValueError:
            continue
        if d <= today:
            return _day(d)
    return None


def _date(year: int, month: int, day: int) -> Days | None:
    try:
        return _day(date(year, month, day))
    except ValueError:
        return None


def _past(today: date, n: int, unit: str) -> Days:
    """From the start of the day ``n`` units back to the end of today."""
    if unit == "day":
        start = today - timedelta(days=n)
    elif unit == "week":
        start = today - timedelta(weeks=n)
    else:
        months = n * (12 if unit == "year" else 1)
        year, month = _months_back(today, months)
        start = _clipped(year, month, today.day)
    return start, today + timedelta(days=1)


def _clipped(year: int, month: int, day: int) -> date:
    last = (_month(year, month)[1] - timedelta(days=1)).day
    return date(year, month, min(day, last))


def _ago(today: date, n: int, unit: str) -> Days:
    """The day, calendar week, month or year ``n`` units before today's."""
    if unit == "day":
        return _day(today - timedelta(days=n))
    if unit == "week":
        return _week(today, n)
    if unit == "month":
        return _month(*_months_back(today, n))
    return _year(today.year - n)


# ---- numbers -----------------------------------------------------------------------------------

_ZH_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
ZH_NUM = r"\d+|[零〇一二两三四五六七八九十百]+"
_EN_NUMBERS = {
    **{
        w: i
        for i, w in enumerate(("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"))
    },
    **{"thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19},
    **{"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "a": 1, "an": 1, "a couple of": 2, "couple of": 2, "a couple": 2},
}
EN_NUM = r"\d+|" + "|".join(sorted(map(re.escape, _EN_NUMBERS), key=len, reverse=True))


def zh_number(text: str) -> int:
    """Arabic digits or a Chinese numeral up to the hundreds (十五 15, 二十三 23, 两 2, 一百零五 105)."""
    if text.isdigit():
        return int(text)
    total, digit = 0, 0
    for ch in text:
        if ch in _ZH_DIGITS:
            digit = _ZH_DIGITS[ch]
        else:
            total += (digit or 1) * (10 if ch == "十" else 100)
            digit = 0
    return total + digit


def en_number(text: str) -> int:
    return int(text) if text.isdigit() else _EN_NUMBERS[re.sub(r"\s+", " ", text)]


# ---- Chinese ------------------------------------------------------------------------------------

_ZH_WEEKDAY = {
    "一": 0,
    "二": 1,
    "三": 2,
    "四": 3,
    "五": 4,
    "六": 5,
    "日": 6,
    "天": 6,
    "1": 0,
    "2": 1,
    "3": 2,
    "4": 3,
    "5": 4,
    "6": 5,
    "7": 6,
}
_ZH_UNIT = {"天": "day", "日": "day", "周": "week", "星期": "week", "礼拜": "week", "月": "month", "年": "year"}
_ZH_BACK = {"上上": 2, "上": 1, "这": 0, "本": 0}
# 上 also ends place words (晚上, 网上, 路上...): a 上 right after one of these does not mean "last"
_NOT_LAST = r"(?<![晚早马路网身天楼会世线手桌床地街山海班])"
_WEEK = r"(?:周|星期|礼拜)"
_PREFIX = rf"{_NOT_LAST}(上上|上|这|本)\s*个?\s*"

ZH_RULES: list[tuple[str, Resolver | None]] = [
    (r"大前天", lambda m, t: _day(t - timedelta(days=3))),
    (r"前天", lambda m, t: _day(t - timedelta(days=2))),
    (r"昨天|昨日|昨晚|昨儿", lambda m, t: _day(t - timedelta(days=1))),
    (r"今天|今日|今晚|今早|今儿", lambda m, t: _day(t)),
    (rf"({ZH_NUM})\s*(天|日)\s*[之以]?前", lambda m, t: _ago(t, zh_number(m[1]), "day")),
    (rf"({ZH_NUM})\s*个?\s*(周|星期|礼拜)\s*[之以]?前", lambda m, t: _ago(t, zh_number(m[1]), "week")),
    (rf"({ZH_NUM})\s*个\s*月\s*[之以]?前", lambda m, t: _ago(t, zh_number(m[1]), "month")),
    (r"(?<!\d)(\d{1,2}|[零〇一二两三四五六七八九十百]+)\s*年\s*[之以]?前", lambda m, t: _ago(t, zh_number(m[1]), "year")),
    (rf"(?:最近|过去|近)\s*的?\s*({ZH_NUM})\s*个?\s*(天|日|周|星期|礼拜|月|年)", lambda m, t: _past(t, zh_number(m[1]), _ZH_UNIT[m[2]])),
    (rf"{_PREFIX}{_WEEK}\s*([一二三四五六日天1-7])", lambda m, t: _weekday_in_week(t, _ZH_WEEKDAY[m[2]], _ZH_BACK[m[1]])),
    (rf"{_WEEK}\s*([一二三四五六日天1-7])", lambda m, t: _latest_weekday(t, _ZH_WEEKDAY[m[1]])),
    (rf"{_PREFIX}(?:周末|礼拜末)", lambda m, t: _weekend(t, _ZH_BACK[m[1]])),
    (r"周末", lambda m, t: _weekend(t, None)),
    (rf"{_PREFIX}{_WEEK}", lambda m, t: _week(t, _ZH_BACK[m[1]])),
    (rf"{_PREFIX}月", lambda m, t: _month(*_months_back(t, _ZH_BACK[m[1]]))),
    (r"大前年", lambda m, t: _year(t.year - 3)),
    (r"前年", lambda m, t: _year(t.year - 2)),
    (r"去年", lambda m, t: _year(t.year - 1)),
    (r"今年", lambda m, t: _year(t.year)),
    (
        r"(\d{4})\s*年\s*(\d{1,2}|[一二三四五六七八九十]+)\s*月\s*(\d{1,2}|[一二三四五六七八九十]+)\s*[日号]",
        lambda m, t: _date(int(m[1]), zh_number(m[2]), zh_number(m[3])),
    ),
    (r"(\d{4})\s*年\s*(\d{1,2}|[一二三四五六七八九十]+)\s*月份?", lambda m, t: _checked_month(int(m[1]), zh_number(m[2]))),
    (r"(?<!\d)(\d{4})\s*年(?!\s*[之以]?前)", lambda m, t: _year(int(m[1]))),
    (
        r"(?<!\d)(\d{1,2}|[一二三四五六七八九十]+)\s*月\s*(\d{1,2}|[一二三四五六七八九十]+)\s*[日号]",
        lambda m, t: _latest_date(t, zh_number(m[1]), zh_number(m[2])),
    ),
    (r"(?<![\d个])(\d{1,2}|[一二三四五六七八九十]+)\s*月份?", lambda m, t: _in_month(t, zh_number(m[1]))),
    # no span: the future, and habits
    (rf"明天|后天|明年|后年|下\s*个?\s*(?:{_WEEK}[一二三四五六日天1-7末]?|周末|月)", None),
    (rf"每\s*个?\s*(?:{_WEEK}[一二三四五六日天1-7末]?|周末|天|日|月|年)", None),
]


def _checked_month(year: int, month: int) -> Days | None:
    return _month(year, month) if 1 <= month <= 12 else None


def _in_month(today: date, month: int) -> Days | None:
    return _latest_month(today, month) if 1 <= month <= 12 else None


# ---- English ------------------------------------------------------------------------------------

_MONTHS = {
    name: i + 1
    for i, names in enumerate(
        (
            "january jan",
            "february feb",
            "march mar",
            "april apr",
            "may",
            "june jun",
            "july jul",
            "august aug",
            "september sep sept",
            "october oct",
            "november nov",
            "december dec",
        )
    )
    for name in names.split()
}
MONTH_NAMES = "|".join(sorted(_MONTHS, key=len, reverse=True))
MONTH = rf"({MONTH_NAMES})(?![a-z])\.?"
_WEEKDAYS = {name: i for i, name in enumerate(("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))}
WEEKDAY_NAMES = "|".join(_WEEKDAYS)
WEEKDAY = rf"({WEEKDAY_NAMES})"
_EN_UNIT = r"(day|week|month|year)s?"
_ORDINAL = r"(?:st|nd|rd|th)?"

EN_RULES: list[tuple[str, Resolver | None]] = [
    (r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b", lambda m, t: _day(t)),
    (r"\b(?:yesterday|last night)\b", lambda m, t: _day(t - timedelta(days=1))),
    (r"\bthe day before yesterday\b", lambda m, t: _day(t - timedelta(days=2))),
    (rf"\b({EN_NUM})\s+{_EN_UNIT}\s+ago\b", lambda m, t: _ago(t, en_number(m[1]), m[2])),
    (rf"\b(?:the\s+)?(?:past|last)\s+({EN_NUM})\s+{_EN_UNIT}\b", lambda m, t: _past(t, en_number(m[1]), m[2])),
    (rf"\b(?:the\s+)?past\s+{_EN_UNIT}\b", lambda m, t: _past(t, 1, m[1])),
    (rf"\b(?:in|over|during|within)\s+the\s+last\s+{_EN_UNIT}\b", lambda m, t: _past(t, 1, m[1])),
    (r"\bthis week\b", lambda m, t: _week(t)),
    (r"\blast week\b", lambda m, t: _week(t, 1)),
    (r"\bthe week before last\b", lambda m, t: _week(t, 2)),
    (r"\bthis month\b", lambda m, t: _month(t.year, t.month)),
    (r"\blast month\b", lambda m, t: _month(*_months_back(t, 1))),
    (r"\bthe month before last\b", lambda m, t: _month(*_months_back(t, 2))),
    (r"\bthis year\b", lambda m, t: _year(t.year)),
    (r"\blast year\b", lambda m, t: _year(t.year - 1)),
    (r"\bthe year before last\b", lambda m, t: _year(t.year - 2)),
    (r"\bthis weekend\b", lambda m, t: _weekend(t, 0)),
    (r"\blast weekend\b", lambda m, t: _weekend(t, 1)),
    (r"\bthe\s+weekend\b", lambda m, t: _weekend(t, None)),
    (rf"\blast\s+{WEEKDAY}\b", lambda m, t: _latest_weekday(t, _WEEKDAYS[m[1]], before_today=True)),
    (rf"\bthis\s+{WEEKDAY}\b", lambda m, t: _weekday_in_week(t, _WEEKDAYS[m[1]], 0)),
    (rf"\b{WEEKDAY}\b", lambda m, t: _latest_weekday(t, _WEEKDAYS[m[1]])),
    (rf"\blast\s+{MONTH}(?!\s*\d)", lambda m, t: _latest_month(t, _MONTHS[m[1]], before_this_month=True)),
    (rf"\bthis\s+{MONTH}(?!\s*\d)", lambda m, t: _month(t.year, _MONTHS[m[1]])),
    (
        rf"\b(?:in|during|of|early|mid|late)\s+(?:the\s+(?:beginning|start|middle|end)\s+of\s+)?{MONTH}(?!\s*\d)",
        lambda m, t: _latest_month(t, _MONTHS[m[1]]),
    ),
    (rf"\b{MONTH}\s+(\d{{1,2}}){_ORDINAL},?\s+(\d{{4}})\b", lambda m, t: _date(int(m[3]), _MONTHS[m[1]], int(m[2]))),
    (rf"\b(\d{{1,2}}){_ORDINAL}\s+(?:of\s+)?{MONTH},?\s+(\d{{4}})\b", lambda m, t: _date(int(m[3]), _MONTHS[m[2]], int(m[1]))),
    (rf"\b{MONTH}\s+(\d{{1,2}}){_ORDINAL}\b", lambda m, t: _latest_date(t, _MONTHS[m[1]], int(m[2]))),
    (rf"\b(\d{{1,2}}){_ORDINAL}\s+(?:of\s+)?{MONTH}", lambda m, t: _latest_date(t, _MONTHS[m[2]], int(m[1]))),
    (rf"\b{MONTH},?\s+(\d{{4}})\b", lambda m, t: _month(int(m[2]), _MONTHS[m[1]])),
    (r"\b(?:in|during)\s+(\d{4})\b", lambda m, t: _year(int(m[1]))),
    # no span: the future, and habits
    (
        rf"\b(?:tomorrow|next\s+(?:week|weekend|month|year|{WEEKDAY_NAMES}|{MONTH_NAMES})|in\s+(?:{EN_NUM})\s+{_EN_UNIT}|every\s+\w+)\b",
        None,
    ),
]

# ---- a span anchored on a date: "the week before August 3, 2023", "5月3日之前的那个周末" ----------

_MONTH_NC = rf"(?:{MONTH_NAMES})(?![a-z])\.?"
_EN_DATE = (
    rf"(?:{_MONTH_NC}\s+\d{{1,2}}(?!\d){_ORDINAL}(?:,?\s+\d{{4}})?|\d{{1,2}}{_ORDINAL}\s+(?:of\s+)?{_MONTH_NC}(?:,?\s+\d{{4}})?"
    r"|\d{4}[-/.]\d{1,2}[-/.]\d{1,2})"
)
_ZH_DATE = r"(?:\d{4}\s*年\s*)?(?:\d{1,2}|[一二三四五六七八九十]+)\s*月\s*(?:\d{1,2}|[一二三四五六七八九十]+)\s*[日号]|\d{4}[-/.]\d{1,2}[-/.]\d{1,2}"
_ZH_ANCHORED_UNITS = {
    "一天": "day",
    "天": "day",
    "一周": "week",
    "周": "week",
    "一个星期": "week",
    "一星期": "week",
    "星期": "week",
    "周末": "weekend",
    "一个月": "month",
    "月": "month",
}


def _anchor(text: str, today: date) -> date | None:
    """The one day a date expression names (the latest such date up to today when it has no year)."""
    spans = _matches(text, today)
    return spans[0][0] if len(spans) == 1 and spans[0][1] - spans[0][0] == timedelta(days=1) else None


def _beside(anchor: date, unit: str, after: bool) -> Days:
    """The day, 7 days, weekend, month or weekday right before (or after) ``anchor``."""
    if unit == "day":
        return _day(anchor + timedelta(days=1 if after else -1))
    if unit == "week":
        return (anchor + timedelta(days=1), anchor + timedelta(days=8)) if after else (anchor - timedelta(days=7), anchor)
    if unit == "month":
        return _month(*_months_back(anchor, -1 if after else 1))
    if unit == "weekend":
        saturday = anchor + timedelta(days=(5 - anchor.weekday()) % 7 or 7) if after else _weekend(anchor - timedelta(days=1), None)[0]
        return saturday, saturday + timedelta(days=2)
    weekday = _WEEKDAYS[unit] if unit in _WEEKDAYS else _ZH_WEEKDAY[unit[-1]]
    step = (weekday - anchor.weekday() - 1) % 7 + 1 if after else -((anchor.weekday() - weekday - 1) % 7 + 1)
    return _day(anchor + timedelta(days=step))


def _with_anchor(anchor: date, unit: str, after: bool) -> Days:
    """The span beside ``anchor`` and the anchor's own day: what happened the week before a day
    is often told on that day ("Last week, we went to ...", said on August 3)."""
    first, last = _beside(anchor, unit, after)
    return (anchor, last) if after else (first, anchor + timedelta(days=1))


def _en_anchored(m: re.Match[str], today: date) -> Days | None:
    anchor = _anchor(m["date"], today)
    return None if anchor is None else _with_anchor(anchor, m["unit"], m["dir"] == "after")


def _zh_anchored(m: re.Match[str], today: date) -> Days | None:
    anchor = _anchor(m["date"], today)
    unit = m["unit"]
    unit = _ZH_ANCHORED_UNITS.get(unit, unit)
    return None if anchor is None else _with_anchor(anchor, unit, m["dir"] == "后")


ANCHORED_RULES: list[tuple[str, Resolver | None]] = [
    (
        rf"\b(?:the\s+|last\s+|that\s+)?(?P<unit>day|week|weekend|month|{WEEKDAY_NAMES})\s+(?P<dir>before|after|prior\s+to)\s+(?:the\s+)?(?P<date>{_EN_DATE})",
        _en_anchored,
    ),
    (
        rf"(?P<date>{_ZH_DATE})\s*[之以]?(?P<dir>前|后)\s*的?\s*(?:那|这)?\s*个?\s*(?P<unit>一个星期|一星期|星期[一二三四五六日天]|周[一二三四五六日天]|一个月|一周|一天|周末|星期|周|天|月)",
        _zh_anchored,
    ),
]

# ---- both ----------------------------------------------------------------------------------------

DATE_RULES: list[tuple[str, Resolver | None]] = [
    (r"(?<!\d)(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?!\d)", lambda m, t: _date(int(m[1]), int(m[2]), int(m[3]))),
    (r"(?<![\d-])(\d{4})-(\d{1,2})(?![\d-])", lambda m, t: _checked_month(int(m[1]), int(m[2]))),
]

_RULES = [(re.compile(pattern), resolve) for pattern, resolve in ZH_RULES + EN_RULES + DATE_RULES + ANCHORED_RULES]


def _matches(text: str, today: date) -> list[Days]:
    """The spans of the longest non-overlapping expressions (an earlier one first on equal length)."""
    found = [(m.start(), m.end(), resolve, m) for pattern, resolve in _RULES for m in pattern.finditer(text) if m.end() > m.start()]
    taken: list[tuple[int, int]] = []
    spans: list[Days] = []
    for start, end, resolve, match in sorted(found, key=lambda f: (f[0] - f[1], f[0])):
        if any(start < e and s < end for s, e in taken):
            continue
        taken.append((start, end))
        span = _resolve(resolve, match, today)
        if span is not None:
            spans.append(span)
    return spans


def _resolve(resolve: Resolver | None, match: re.Match[str], today: date) -> Days | None:
    """The span of one expression; None for those naming none or a date beyond the calendar."""
    if resolve is None:
        return None
    try:
        return resolve(match, today)
    except (ValueError, OverflowError):  # 十万年前, 99999 days ago
        return None


def parse_time_range(query: str, at: datetime) -> TimeRange | None:
    """The span of days the question's time expressions name, relative to ``at``; None if none."""
    at = aware(at, field_name="at")
    spans = _matches(unicodedata.normalize("NFKC", query).lower(), at.date())
    if not spans:
        return None
    first, last = min(s for s, _ in spans), max(e for _, e in spans)
    return TimeRange(datetime.combine(first, time(), at.tzinfo), datetime.combine(last, time(), at.tzinfo))
