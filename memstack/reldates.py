"""Relative dates in what was said, resolved against when it was said: "上周六" said on 2026-03-18
is 2026-03-14, "next Tuesday" said on 2023-05-03 is 2023-05-09. Pure functions.

A model reading a memory weeks later cannot do this arithmetic reliably (a 1.5B model answers
"上周六" to "面试是几月几号？" even when the turn's date is shown), so the rendered memory carries
the date beside the expression: ``annotate("上周六去面试了", said_at, "zh")`` gives
"上周六（2026-03-14）去面试了". Only expressions that name one day, weekend, month or year relative
to the moment of speaking are resolved, past and future alike (in a statement "下周三" is a plan
with a date, unlike in a question); a bare weekday ("周三") or a vague word ("最近") is left as said.
Weeks start on Monday, as in ``timeparse``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime, timedelta

from .timeparse import _NOT_LAST, ZH_NUM, en_number, zh_number

#: what one expression resolves to: a day, the Saturday of a weekend, a month or a year
Resolved = tuple[str, date]
Rule = tuple[re.Pattern[str], Callable[[re.Match[str], date], Resolved | None]]

_ZH_WEEKDAY = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_ZH_WEEKS = {"上上": -2, "上": -1, "这": 0, "本": 0, "下": 1, "下下": 2}
_EN_WEEKDAY = {name: i for i, name in enumerate(("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))}
_WEEK = r"(?:周|星期|礼拜)"


def _weekday(today: date, weeks: int, weekday: int) -> date:
    return today - timedelta(days=today.weekday()) + timedelta(days=7 * weeks + weekday)


def _months(today: date, n: int) -> date:
    index = today.year * 12 + today.month - 1 + n
    return date(index // 12, index % 12 + 1, 1)


def _last_weekday(today: date, weekday: int) -> date:
    """ "last Friday": the latest Friday before today."""
    back = (today.weekday() - weekday) % 7 or 7
    return today - timedelta(days=back)


def _days(n: int) -> Callable[[re.Match[str], date], Resolved]:
    return lambda m, t: ("day", t + timedelta(days=n))


ZH: list[tuple[str, Callable[[re.Match[str], date], Resolved | None]]] = [
    (r"大前天", _days(-3)),
    (r"前天", _days(-2)),
    (r"昨天|昨晚|昨日", _days(-1)),
    (r"今天|今晚|今早|今日", _days(0)),
    (r"大后天", _days(3)),
    (r"(?<![先落])后天(?![性生])", _days(2)),
    (r"明天|明晚|明早", _days(1)),
    (rf"({ZH_NUM})\s*天\s*[之以]?前", lambda m, t: ("day", t - timedelta(days=zh_number(m[1])))),
    (rf"({ZH_NUM})\s*天\s*[之以]?后", lambda m, t: ("day", t + timedelta(days=zh_number(m[1])))),
    (
        rf"{_NOT_LAST}(上上|上|这|本|下下|下)\s*个?\s*{_WEEK}\s*([一二三四五六日天])",
        lambda m, t: ("day", _weekday(t, _ZH_WEEKS[m[1]], _ZH_WEEKDAY[m[2]])),
    ),
    (rf"{_NOT_LAST}(上上|上|这|本|下下|下)\s*个?\s*(?:周末|礼拜末)", lambda m, t: ("weekend", _weekday(t, _ZH_WEEKS[m[1]], 5))),
    (rf"{_NOT_LAST}(上|这|本|下)\s*个\s*月", lambda m, t: ("month", _months(t, _ZH_WEEKS[m[1]]))),
    (r"去年", lambda m, t: ("year", date(t.year - 1, 1, 1))),
    (r"前年", lambda m, t: ("year", date(t.year - 2, 1, 1))),
    (r"明年", lambda m, t: ("year", date(t.year + 1, 1, 1))),
]

EN: list[tuple[str, Callable[[re.Match[str], date], Resolved | None]]] = [
    (r"\bthe day before yesterday\b", _days(-2)),
    (r"\bthe day after tomorrow\b", _days(2)),
    (r"\byesterday\b|\blast night\b", _days(-1)),
    (r"\btoday\b|\btonight\b", _days(0)),
    (r"\btomorrow\b", _days(1)),
    (r"\b(\d+|a|one|two|three|four|five|six|seven|eight|nine|ten)\s+days?\s+ago\b", lambda m, t: ("day", t - timedelta(days=_en(m[1])))),
    (r"\bin\s+(\d+|two|three|four|five|six|seven|eight|nine|ten)\s+days\b", lambda m, t: ("day", t + timedelta(days=_en(m[1])))),
    (
        r"\blast\s+(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
        lambda m, t: ("day", _last_weekday(t, _EN_WEEKDAY[m[1].lower()])),
    ),
    (
        r"\bthis\s+(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
        lambda m, t: ("day", _weekday(t, 0, _EN_WEEKDAY[m[1].lower()])),
    ),
    (
        r"\bnext\s+(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
        lambda m, t: ("day", _weekday(t, 1, _EN_WEEKDAY[m[1].lower()])),
    ),
    (r"\blast\s+weekend\b", lambda m, t: ("weekend", _weekday(t, -1, 5))),
    (r"\bthis\s+weekend\b", lambda m, t: ("weekend", _weekday(t, 0, 5))),
    (r"\bnext\s+weekend\b", lambda m, t: ("weekend", _weekday(t, 1, 5))),
    (r"\blast\s+month\b", lambda m, t: ("month", _months(t, -1))),
    (r"\bnext\s+month\b", lambda m, t: ("month", _months(t, 1))),
    (r"\blast\s+year\b", lambda m, t: ("year", date(t.year - 1, 1, 1))),
    (r"\bnext\s+year\b", lambda m, t: ("year", date(t.year + 1, 1, 1))),
]

_RULES: list[Rule] = [(re.compile(p, re.IGNORECASE), f) for p, f in ZH + EN]
#: an expression already followed by a date (annotated before, or said with one) is left alone
_DATED_AFTER = re.compile(r"\s*[（(]?\s*(?:\d{4}[-/年]|\d{1,2}\s*月\s*\d{1,2}|\d{1,2}[-/]\d{1,2})")


def _en(word: str) -> int:
    return 1 if word.lower() in ("a", "one") else en_number(word.lower())


def relative_dates(text: str, said_at: datetime | date) -> list[tuple[int, int, Resolved]]:
    """(start, end, resolved) of each relative expression in ``text``, longest first where they
    overlap, in text order."""
    today = said_at.date() if isinstance(said_at, datetime) else said_at
    found = []
    for pattern, resolve in _RULES:
        for m in pattern.finditer(text):
            try:
                value = resolve(m, today)
            except (ValueError, OverflowError, KeyError):  # 九千天前, a date past the calendar
                value = None
            if value is not None and m.end() > m.start():
                found.append((m.start(), m.end(), value))
    taken: list[tuple[int, int, Resolved]] = []
    for start, end, value in sorted(found, key=lambda f: (f[0] - f[1], f[0])):
        if not any(start < e and s < end for s, e, _ in taken):
            taken.append((start, end, value))
    return sorted(taken)


def resolved_days(value: Resolved) -> tuple[date, date]:
    """The days a resolved expression covers, as [first, end): one day, a weekend's Saturday and
    Sunday, a month or a year."""
    kind, day = value
    if kind == "year":
        return day, date(day.year + 1, 1, 1)
    if kind == "month":
        return day, _months(day, 1)
    return day, day + timedelta(days=2 if kind == "weekend" else 1)


def render_resolved(value: Resolved, lang: str) -> str:
    kind, day = value
    if kind == "year":
        return f"{day.year}年" if lang == "zh" else str(day.year)
    if kind == "month":
        return f"{day.year}年{day.month}月" if lang == "zh" else f"{day.year}-{day.month:02d}"
    if kind == "weekend":
        sunday = day + timedelta(days=1)
        return f"{day.isoformat()}～{sunday.isoformat()[5:]}" if lang == "zh" else f"{day.isoformat()} to {sunday.isoformat()[5:]}"
    return day.isoformat()


def annotate(text: str, said_at: datetime | date, lang: str) -> str:
    """``text`` with the date of each relative expression after it: "上周六（2026-03-14）". The day it
    was said ("今天", "today") is left as said: what is annotated is shown under its own date, so
    that date would only repeat it."""
    out: list[str] = []
    last = 0
    said_day = said_at.date() if isinstance(said_at, datetime) else said_at
    for _start, end, value in relative_dates(text, said_at):
        if _DATED_AFTER.match(text, end) or value == ("day", said_day):
            continue
        out.append(text[last:end])
        note = render_resolved(value, lang)
        out.append(f"（{note}）" if lang == "zh" else f" ({note})")
        last = end
    out.append(text[last:])
    return "".join(out)
