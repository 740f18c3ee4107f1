"""Whether a unit speaks of a period: what the user said at one time about a day at another ("上个月
我把球鞋洗了" said in May is about April; "下周三发布" said on Monday is about the next week). Pure
functions over units and the time ranges ``timeparse`` finds in questions.
"""

from __future__ import annotations

from ..reldates import relative_dates, resolved_days
from ..timeparse import TimeRange
from ..types import Unit
from .asked import ASSISTANT_LABELS
from .units import own_spans


def said_in(unit: Unit, span: TimeRange) -> bool:
    """Whether the unit was said within the span."""
    return span.since <= unit.timestamp < span.until


def not_the_assistants(unit: Unit) -> str:
    """The unit's own words (its lead-in left out) that are not the assistant's; a unit without
    spans, its text."""
    if not unit.metadata.get("spans"):
        return unit.text
    return "\n".join(unit.text[start:end] for _mid, _seq, label, _off, start, end in own_spans(unit) if label not in ASSISTANT_LABELS)


def speaks_of(unit: Unit, span: TimeRange) -> bool:
    """Whether the user's words in the unit name a day, weekend, month or year relative to when
    they were said that falls within the span ("last month" said on 2023-05-24 and April 2023).
    The assistant's words do not count: "enjoy your weekend!" is not about the user's weekend."""
    since, until = span.since.date(), span.until.date()
    said = unit.timestamp.astimezone(span.since.tzinfo)
    for _start, _end, value in relative_dates(not_the_assistants(unit), said):
        first, end = resolved_days(value)
        if end > since and first < until:
            return True
    return False
