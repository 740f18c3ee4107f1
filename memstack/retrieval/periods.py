"""Whether a unit speaks of a period: what the user said at one time about a day at another ("上个月
我把球鞋洗了" said in May is about April; "下周三发布" said on Monday is about the next week). Pure
functions over units and the time ranges ``timeparse`` finds in questions.
"""

from __future__ import annotations

from ..reldates import relative_dates, resolved_days
from ..timeparse import TimeRange
from ..types import Unit
from .asked import ASSISTANT_LABELS
from .units import own_text


def said_in(unit: Unit, span: TimeRange) -> bool:
    """Whether the unit was said within the span."""
    return span.since <= unit.timestamp < span.until


def speaks_of(unit: Unit, span: TimeRange) -> bool:
    """Whether the user's words in the unit name a day, weekend, month or year relative to when
    they were said that falls within the span ("last month" said on 2023-05-24 and April 2023).
    The assistant's words do not count: "enjoy your weekend!" is not about the user's weekend."""
    since, until = span.since.date(), span.until.date()
    said = unit.timestamp.astimezone(span.since.tzinfo)
    days = (resolved_days(value) for _start, _end, value in relative_dates(own_text(unit, without=ASSISTANT_LABELS), said))
    return any(end > since and first < until for first, end in days)
