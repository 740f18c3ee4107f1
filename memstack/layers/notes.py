"""The summary's notes: what each one carries, and which newer note supersedes an older one.

A note is a dict ``{"text", "at", "source_ids"}`` (plus ``subject``/``predicate``/``object`` when it
comes from a statement). Two promises the read side relies on:

- **What the summary covers, it carries.** A note's ``source_ids`` are the turns it is grounded in
  (empty when none is: it then claims no turn). A user turn of the batch that the notes do not
  carry (under half of its words/characters occur in them) gets a note of its own quoting it
  ("用户说：「我叫李四」"), so no turn leaves the context as "covered" while nothing says it.
- **A correction supersedes.** A newer statement about the same subject in the same single-valued
  slot (where one lives or works, a name, an age, a job, a date, a budget) with another object
  marks the older note superseded: it is rendered as past, the newer one as current. Slots that
  accumulate (uses, likes, knows, plans) are never superseded here: both notes stay, newest first.

Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from ..llm.extract import trivial
from ..llm.grounding import normalize, sentence_sources
from ..types import Message

#: the share of a user turn's words (Chinese: characters) the notes must hold to carry it
CARRIED = 0.5
#: words that carry nothing of a turn's content (the notes say 用户 where the turn said 我)
_FILLER = frozenset("我你他她的了吗呢啊吧呀嗯哦么") | {"i", "my", "me", "a", "an", "the", "is", "am", "are", "was", "to", "of", "and", "you"}

#: single-valued slots: the predicates that name them, change verbs included ("搬到" sets where one lives)
SLOTS: dict[str, tuple[str, ...]] = {
    "residence": ("住在", "住", "居住在", "居住于", "生活在", "搬到", "搬去", "搬家到", "搬回", "移居", "移居到", "定居在", "定居", "常住在", "lives in", "live in", "living in", "moved to", "relocated to", "resides in"),
    "workplace": ("工作于", "就职于", "任职于", "供职于", "在职于", "入职", "跳槽到", "工作单位是", "公司是", "工作地点是", "works at", "works for", "work at", "employed at", "employed by"),
    "name": ("叫", "名叫", "名字是", "名字叫", "改名为", "改名叫", "is named", "name is", "named", "is called"),
    "age": ("年龄是", "今年", "age is", "is aged"),
    "profession": ("职业是", "担任", "职位是", "岗位是", "转行做", "works as", "job is", "position is", "title is"),
    "schedule": ("定在", "定于", "安排在", "改到", "改在", "推迟到", "延期到", "提前到", "挪到", "时间是", "日期是", "截止日期是", "截止到", "scheduled for", "postponed to", "rescheduled to", "is due", "due date is", "deadline is"),
    "budget": ("预算是", "预算", "预算为", "budget is"),
}
_SLOT_OF = {normalize(p): slot for slot, names in SLOTS.items() for p in names}
#: adverbs small models leave in a predicate ("已经搬到"): stripped before the slot is looked up
_ADVERBS = ("已经", "现在", "目前", "如今", "刚刚", "刚", "已", "正在", "还", "又", "currently ", "now ", "already ", "recently ", "has ", "have ")
_SELF = frozenset(normalize(n) for n in ("用户", "我", "本人", "user", "the user", "i", "me"))

_WORD = re.compile(r"[a-z0-9]+|[\u3400-\u9fff]")

SAID = {"zh": ("用户说：「{}」", "用户问：「{}」"), "en": ('User said: "{}"', 'User asked: "{}"')}


def grounded_note(text: str, messages: Sequence[Message], statement: Any = None) -> dict[str, Any]:
    """A note for ``text`` with the turns it draws on (overlap 0.2 or more; none: an empty list,
    dated at the batch's last turn). ``statement`` (subject, predicate, object) is kept for superseding."""
    sources, _ = sentence_sources(text, messages, threshold=0.2)
    stamps = [m.timestamp for m in messages if m.id in sources] or [messages[-1].timestamp]
    note: dict[str, Any] = {"text": text, "at": max(stamps).isoformat(), "source_ids": list(sources)}
    if statement is not None:
        note.update(subject=statement.subject.strip(), predicate=statement.predicate.strip(), object=statement.object.strip())
    return note


def _tokens(text: str) -> list[str]:
    return _WORD.findall(normalize(text))


def carried(turn: Message, notes: Iterable[dict[str, Any]]) -> bool:
    """Whether the notes hold at least half of what the turn says (its words or characters)."""
    words = [w for w in _tokens(turn.text) if w not in _FILLER]
    if not words:
        return True
    have = {w for n in notes for w in _tokens(n["text"])}
    return sum(1 for w in words if w in have) / len(words) >= CARRIED


def said_notes(messages: Sequence[Message], notes: Sequence[dict[str, Any]], lang: str) -> list[dict[str, Any]]:
    """Notes quoting the user turns that ``notes`` do not carry (acknowledgements left out)."""
    said, asked = SAID.get(lang, SAID["en"])
    out = []
    for m in messages:
        if m.role != "user" or not m.text.strip() or trivial(m) or carried(m, notes):
            continue
        text = " ".join(m.text.split())
        template = asked if text.endswith(("?", "？")) else said
        out.append({"text": template.format(text), "at": m.timestamp.isoformat(), "source_ids": [m.id], "said": True})
    return out


def slot(predicate: str) -> str | None:
    """The single-valued slot a predicate names, or None (it may accumulate values)."""
    p = normalize(predicate)
    stripped = True
    while stripped:
        stripped = False
        for adverb in _ADVERBS:
            if p.startswith(adverb) and len(p) > len(adverb):
                p, stripped = p[len(adverb) :].strip(), True
    return _SLOT_OF.get(p)


def _subject(note: dict[str, Any]) -> str:
    s = normalize(note.get("subject", ""))
    return "user" if s in _SELF else s


def supersedes(new: dict[str, Any], old: dict[str, Any]) -> bool:
    """``new`` replaces ``old``: same subject, same single-valued slot, another object (one object
    containing the other, "上海" / "上海浦东", is a refinement, not a change)."""
    if not (new.get("subject") and old.get("subject")) or _subject(new) != _subject(old):
        return False
    kind = slot(new.get("predicate", ""))
    if kind is None or kind != slot(old.get("predicate", "")):
        return False
    a, b = normalize(new.get("object", "")), normalize(old.get("object", ""))
    return bool(a and b) and a not in b and b not in a


def apply_updates(items: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``items`` followed by ``new``, each earlier note that a note of ``new`` supersedes marked past
    (``superseded_at``, ``superseded_by``: the newer note's date and text) and the newer note naming
    what it replaced (``replaces``). Notes already superseded stay as they were."""
    out = [dict(i) for i in (*items, *new)]
    for j in range(len(items), len(out)):
        n = out[j]
        for old in out[:j]:
            if old.get("superseded_at") or old.get("at", "") > n["at"] or not supersedes(n, old):
                continue
            old["superseded_at"], old["superseded_by"] = n["at"], n["text"]
            n["replaces"] = [*n.get("replaces", []), old.get("object") or old["text"]]
    return out
