"""Rendering retrieved units for the prompt: chosen by relevance under a token budget, shown in
time order under one date line per day, each message once (overlapping units are merged, so a
lead-in already shown in full is not repeated). Pure functions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from itertools import groupby

from ..reldates import annotate
from ..tokens import TokenCounter
from ..types import Hit, Unit
from .units import LABELS, language

WEEKDAYS = {"zh": "一二三四五六日", "en": ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]}
HEADERS = {
    "zh": "以下是从历史对话中检索到的相关记忆（按时间排序）：",
    "en": "Relevant memories from earlier conversations (oldest first):",
}
GAP = " … "
#: a generic speaker label in either language, by role (a name is kept as it is)
_ROLE_OF = {label: role for labels in LABELS.values() for role, label in labels.items()}


@dataclass
class _Message:
    """The parts of one message that the hits show: (offset in the message, text) segments."""

    label: str
    when: datetime
    thread: str
    seq: int
    segments: list[tuple[int, str]] = field(default_factory=list)

    def text(self) -> str:
        out, end = "", None
        for offset, text in sorted(self.segments):
            if end is None:
                out = ("…" if offset > 0 else "") + text
            elif offset > end:
                out += GAP + text
            elif offset + len(text) > end:
                out += text[end - offset :]
            end = max(end or 0, offset + len(text))
        return out


def date_line(when: datetime, lang: str) -> str:
    day = WEEKDAYS[lang][when.weekday()]
    return f"[{when.date().isoformat()} 周{day}]" if lang == "zh" else f"[{when.date().isoformat()} {day}]"


def _messages(hits: Sequence[Hit]) -> list[_Message]:
    """The hits as messages, each once (spans of one message merged; units without spans whole),
    each dated by its own time (a lead-in by the time stored with it, else its unit's), in the
    order of the days they were said; on one day, threads in the order they started that day,
    messages of a thread in append order."""
    found: dict[str, _Message] = {}
    for hit in hits:
        u = hit.unit
        thread = u.scope.thread_id or ""
        spans = u.metadata.get("spans")
        if not spans:
            found.setdefault(f"unit:{u.id}", _Message("", u.timestamp, thread, -1, [(0, u.text)]))
            continue
        lead = _lead(u)
        for message_id, seq, label, offset, start, end in spans:
            when = lead[1] if lead is not None and lead[0] == message_id else u.timestamp
            m = found.setdefault(message_id, _Message(label, when, thread, seq or 0))
            m.when = min(m.when, when)
            m.segments.append((offset, u.text[start:end]))
    started: dict[tuple[date, str], datetime] = {}
    for m in found.values():
        key = (m.when.date(), m.thread)
        started[key] = min(started.get(key, m.when), m.when)
    return sorted(found.values(), key=lambda m: (m.when.date(), started[m.when.date(), m.thread], m.thread, m.seq, m.when))


def _lead(unit: Unit) -> tuple[str, datetime] | None:
    """The lead-in message's id and time (see ``units_for_round``), or None."""
    lead = unit.metadata.get("lead")
    if not isinstance(lead, dict) or "id" not in lead or "at" not in lead:
        return None
    return str(lead["id"]), datetime.fromisoformat(str(lead["at"]))


def render_hits(hits: Sequence[Hit], lang: str | None = None) -> str:
    """The hits' messages under one date line per day, days ascending, each day once, after a
    one-line header (see ``_messages`` for the order within a day)."""
    if not hits:
        return ""
    lang = lang or language("".join(h.unit.text for h in hits))
    lines = [HEADERS[lang]]
    for _day, group in groupby(_messages(hits), key=lambda m: m.when.date()):
        messages = list(group)
        lines.append(date_line(messages[0].when, lang))
        # relative dates said then ("上周六") carry their calendar date: the reader is weeks later
        lines.extend(
            f"{_label(m.label, lang)}: {annotate(m.text(), m.when, lang)}" if m.label else annotate(m.text(), m.when, lang)
            for m in messages
        )
    return "\n".join(lines)


def _label(label: str, lang: str) -> str:
    """A generic "用户" / "Assistant" label in the section's language (a message keeps the label of
    the first unit that showed it, which may be a round in the other language); names unchanged."""
    role = _ROLE_OF.get(label)
    return LABELS[lang][role] if role else label


def fit_hits(hits: Sequence[Hit], budget: int | None, counter: TokenCounter, lang: str | None = None) -> list[Hit]:
    """The most relevant hits (in the given order) whose rendering fits ``budget`` tokens."""
    if budget is None:
        return list(hits)
    kept: list[Hit] = []
    for hit in hits:
        if counter.count(render_hits([*kept, hit], lang)) <= budget:
            kept.append(hit)
    return kept
