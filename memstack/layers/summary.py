"""Progressive summary, and summary + recent buffer: old turns are replaced by what the model
extracted from them, the newest stay raw.

The summary of a thread is a list of dated notes written by the shared extractor (one model call per
batch of turns, see ``extractor``), each pointing to its source turns; when it grows past
``summary_tokens`` the extractor merges it in chunks. The read side shows the notes (newest day
first, so the current value of something that changed comes first) and the turns the summary
does not cover yet, plus, for ``summary-buffer``, the last ``buffer_tokens`` of turns raw. A note
about the user that a change said in another thread has ended is shown as past, from the user's
profile (``notes.settled_by_profile``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..budget import trim
from ..tokens import TokenCounter, get_counter
from ..types import Dropped, Message, Scope, Section
from . import register_layer
from .base import LayerOutput, ReadRequest, current_records, dropped_between
from .fulfil import DONE
from .names import SELF_KEY, entity_key
from .notes import settled_by_profile

TITLES = {"zh": "对话摘要（较早的对话，按日期，最新在前）", "en": "Summary of the earlier conversation (by date, newest first)"}


@dataclass
class Summary:
    store: Any
    counter: TokenCounter | str | None = None
    #: tokens of the newest turns kept raw even when the summary covers them (0: none)
    buffer_tokens: int = 0
    #: share of the budget the notes may take
    share: float = 0.3
    name: str = "summary"
    scope: str = "thread"
    history: str = "all"
    #: the write side is the shared extractor's job
    job: str = "extract"

    def __post_init__(self) -> None:
        self.counter = get_counter(self.counter)

    def read(self, request: ReadRequest, messages: list[Message]) -> LayerOutput:
        found = current_records(self.store, request.scope, "summary", ["summary"])
        if not found:
            return LayerOutput(messages)
        value = found[0].value
        covered = int(value.get("covers_until", 0))
        recent = (
            {m.id for m in trim([m for m in messages if m.role != "system"], self.buffer_tokens, request.counter)}
            if self.buffer_tokens
            else set()
        )
        kept = [m for m in messages if (m.seq or 0) > covered or m.id in recent or m.seq is None]
        shown = {m.id for m in kept}
        # a note is left out only when every turn it draws on is shown raw (a note grounded in no turn stays)
        notes = value.get("items", [])
        if any(i.get("predicate") and not i.get("superseded_at") for i in notes):  # else no note the profile could end
            attributes, names = _profile(self.store, request)
            others = entities_of(self.store, request.scope.user(), notes)
            notes = settled_by_profile(notes, attributes, value.get("lang", "en"), names, others)
        items = [i for i in notes if not i.get("source_ids") or not set(i["source_ids"]) <= shown]
        budget = None if request.budget is None else int(request.budget * self.share)
        text, left = render_notes(items, value.get("lang", "en"), budget, request.counter)
        dropped = dropped_between(self.name, messages, kept, "covered by the summary", request.counter)
        if left:
            dropped.append(
                Dropped(
                    self.name,
                    f"{len(left)} oldest summary notes over its share of the budget",
                    tuple(i for n in left for i in n.get("source_ids", [])),
                    sum(request.counter.count(n["text"]) for n in left),
                )
            )
        sections = (
            [Section(self.name, text, priority=30, source_ids=tuple(i for n in items if n not in left for i in n.get("source_ids", [])))]
            if text
            else []
        )
        return LayerOutput(kept, sections, dropped)


def _profile(store: Any, request: ReadRequest) -> tuple[dict[str, Any], list[str]]:
    """The user's own attributes as every thread has written them ({} when no layer keeps a
    profile), and the user's names (their name and aliases)."""
    found = current_records(store, request.scope.user(), "entity", [SELF_KEY])
    if not found:
        return {}, []
    v = found[0].value
    return dict(v.get("attributes") or {}), [str(n) for n in [v.get("name", ""), *v.get("aliases", [])] if n]


def entities_of(store: Any, user: Scope, notes: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The attributes of each entity other than the user that a current note is about (its subject
    -> attributes, as every thread has written them), for ``settled_by_profile``."""
    subjects = {str(n["subject"]): entity_key(str(n["subject"])) for n in notes if n.get("subject") and not n.get("superseded_at")}
    keys = sorted({k for k in subjects.values() if k != SELF_KEY})
    if not keys:
        return {}
    found = {r.key: dict(r.value.get("attributes") or {}) for r in current_records(store, user, "entity", keys)}
    return {subject: found[key] for subject, key in subjects.items() if key in found}


def render_notes(items: list[dict[str, Any]], lang: str, budget: int | None, counter: TokenCounter) -> tuple[str, list[dict[str, Any]]]:
    """Notes grouped by day, newest day first, within ``budget`` tokens (the oldest left out);
    returns the text and the notes left out."""
    ordered = sorted(items, key=lambda i: i.get("at", ""), reverse=True)
    lines = [TITLES.get(lang, TITLES["en"])]
    day = None
    left: list[dict[str, Any]] = []
    for item in ordered:
        stamp = _day(item.get("at"))
        extra = ([f"[{stamp}]"] if stamp != day else []) + [f"- {item['text']}{_status(item, lang)}"]
        if budget is not None and counter.count("\n".join(lines + extra)) > budget:
            left.append(item)
            continue
        lines += extra
        day = stamp
    if len(lines) == 1:
        return "", left
    return "\n".join(lines), left


#: how a note that a correction replaced, and the note that replaced it, are marked
PAST = {"zh": "（过去的情况：{day}起改为 {now}）", "en": " (past: since {day}, {now})"}
#: a note whose value ended with nothing in its place ("不再做数据分析了")
GONE = {"zh": "（过去的情况：{day}起已不成立）", "en": " (past: no longer so since {day})"}
CURRENT = {"zh": "（现在的情况；此前：{before}）", "en": " (current; before: {before})"}
#: a plan that came true ("搬好啦": ``fulfil``)
DONE_MARK = {"zh": "（计划已于{day}实现）", "en": " (done: carried out by {day})"}


def _status(item: dict[str, Any], lang: str) -> str:
    """The mark of a superseded note (past, with the date and the note that replaced it) or of
    the note that superseded others (current, with the values it replaced); else nothing."""
    lang = lang if lang in PAST else "en"
    if item.get("superseded_at") and item.get(DONE):
        return DONE_MARK[lang].format(day=_day(item["superseded_at"]))
    if item.get("superseded_at") and not item.get("superseded_by"):
        return GONE[lang].format(day=_day(item["superseded_at"]))
    if item.get("superseded_at"):
        return PAST[lang].format(day=_day(item["superseded_at"]), now=item.get("superseded_by", ""))
    if item.get("replaces"):
        return CURRENT[lang].format(before=("、" if lang == "zh" else ", ").join(item["replaces"]))
    return ""


def _day(at: str | None) -> str:
    if not at:
        return "?"
    try:
        return datetime.fromisoformat(at).date().isoformat()
    except ValueError:
        return at[:10]


def summary_buffer(store: Any, counter: TokenCounter | str | None = None, buffer_tokens: int = 600, share: float = 0.3) -> Summary:
    """The articles' hybrid: the summary of old turns plus the last ``buffer_tokens`` raw."""
    return Summary(store=store, counter=counter, buffer_tokens=buffer_tokens, share=share, name="summary-buffer")


register_layer("summary", Summary)
register_layer("summary-buffer", summary_buffer)
