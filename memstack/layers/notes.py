"""The summary's notes: what each one carries, and which newer note supersedes an older one.

A note is a dict ``{"text", "at", "source_ids"}`` (plus ``subject``/``predicate``/``object`` when it
comes from a statement). Two promises the read side relies on:

- **What the summary covers, it carries.** A note's ``source_ids`` are the turns it is grounded in
  (empty when none is: it then claims no turn). A user turn of the batch that the notes do not
  carry (under half of its words/characters occur in them) gets a note of its own quoting it
  ("用户说：「我叫李四」"), so no turn leaves the context as "covered" while nothing says it; its
  relative dates carry the calendar date ("大后天（2026-02-13）是我生日").
- **A change said in another thread reaches the notes when they are read.** A thread's notes are
  written by its own thread's jobs only (rewriting another thread's summary would race its jobs),
  so the read side weighs each note about the user against the user's profile, which every thread
  writes (``settled_by_profile``): a value the profile holds as past, ended after the note was
  written, is shown as past with what replaced it.
- **A correction supersedes.** A newer statement about the same subject and predicate (in the
  canonical form of ``supersede``: "搬到" is "住在") with another object marks the older note
  superseded when the predicate is single-valued (where one lives or works, a name, an age, a job,
  a date, a budget) or the turn says it changed ("改用Go"): it is rendered as past, the newer one
  as current. Values that accumulate (uses, likes) without a change cue both stay, newest first.

Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..llm.extract import trivial
from ..llm.grounding import normalize, sentence_sources
from ..reldates import annotate
from ..types import Message
from .attributes import later, settled_attributes
from .base import short_quote
from .fulfil import DONE
from .supersede import kind, replaced_items
from .switched import switches
from .verify import cessations, ends_value

#: the share of a user turn's words (Chinese: characters) the notes must hold to carry it
CARRIED = 0.5
#: words that carry nothing of a turn's content (the notes say 用户 where the turn said 我)
_FILLER = frozenset("我你他她的了吗呢啊吧呀嗯哦么") | {
    "i",
    "my",
    "me",
    "a",
    "an",
    "the",
    "is",
    "am",
    "are",
    "was",
    "to",
    "of",
    "and",
    "you",
}

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
        if getattr(statement, "past", False):
            note["past"] = True  # said as ended ("不再做数据分析"): its text says so, and it replaces nothing
        # the words the object was said in, for a later change that names only their topic
        # ("缓存改用Memcached" replaces 使用Redis of "…，缓存使用Redis", see ``superseded``)
        said = short_quote(" ".join(m.text for m in messages if m.id in sources), note["object"])
        if said and normalize(note["object"]) in normalize(said):
            note["words"] = said
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
        # read weeks later, "大后天" means nothing without the day it was said
        text = annotate(" ".join(m.text.split()), m.timestamp, lang)
        template = asked if text.endswith(("?", "？")) else said
        out.append({"text": template.format(text), "at": m.timestamp.isoformat(), "source_ids": [m.id], "said": True})
    return out


def _subject(note: dict[str, Any]) -> str:
    s = normalize(note.get("subject", ""))
    return "user" if s in _SELF else s


def supersedes(new: dict[str, Any], old: dict[str, Any], said: str = "") -> bool:
    """``new`` replaces ``old``: same subject, same canonical predicate, and the rule of
    ``supersede`` (a single-valued predicate, or a change cue in ``said``, the turn the new note
    came from) says the old object is replaced."""
    return bool(superseded(new, [old], said))


def _same_slot(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Same subject and canonical predicate."""
    if not (a.get("subject") and b.get("subject")) or _subject(a) != _subject(b):
        return False
    return kind(a.get("predicate", "")) == kind(b.get("predicate", ""))


def _rival(new: dict[str, Any], old: dict[str, Any]) -> bool:
    """Same subject and canonical predicate, another object (not a refinement: "上海" / "上海浦东")."""
    if not _same_slot(new, old):
        return False
    a, b = normalize(new.get("object", "")), normalize(old.get("object", ""))
    return bool(a and b) and a not in b and b not in a


def superseded(
    new: dict[str, Any], olds: Sequence[dict[str, Any]], said: str = "", words: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """Which of ``olds`` the note ``new`` replaces, all weighed together as ``supersede.replaced``
    does: a change cue that names none of several values ("缓存改用Memcached" beside 使用 SpringBoot
    and 使用 Redis) replaces the one whose own words name what it names (``words``: message id ->
    text, for the turns the old notes came from), else none of them, never all."""
    rivals = [o for o in olds if _rival(new, o)]
    if not rivals:
        return []

    def own_words(o: dict[str, Any]) -> str:
        return " ".join([str(o.get("words", "")), *((words or {}).get(i, "") for i in o.get("source_ids", []))])

    return replaced_items(new["predicate"], said or new["text"], rivals, new["object"], lambda o: str(o["object"]), own_words)


def apply_updates(items: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]], messages: Sequence[Message] = ()) -> list[dict[str, Any]]:
    """``items`` followed by ``new``, each earlier note that a note of ``new`` supersedes marked past
    (``superseded_at``, ``superseded_by``: the newer note's date and text; an empty text when the
    value ended with nothing in its place, see ``summary``'s marks) and the newer note naming
    what it replaced (``replaces``). Notes already superseded stay as they were. ``messages``: the
    batch, whose turns say whether a value changed ("我已经搬到深圳了"). A note said as ended
    (``past``: "用户做数据分析（已不再）") is the old value, not a new one: it replaces nothing, and it
    ends the earlier notes that say the same value as current."""
    text = {m.id: m.text for m in messages}
    out = [dict(i) for i in (*items, *new)]
    for j in range(len(items), len(out)):
        n = out[j]
        said = " ".join(text.get(i, "") for i in n.get("source_ids", []))
        live = [old for old in out[:j] if not old.get("superseded_at") and not old.get("past") and old.get("at", "") <= n["at"]]
        if n.get("past"):
            for old in [o for o in live if _same(n, o)]:
                old["superseded_at"], old["superseded_by"] = n["at"], ""
            continue
        for old in superseded(n, live, said, text):
            old["superseded_at"], old["superseded_by"] = n["at"], n["text"]
            n["replaces"] = [*n.get("replaces", []), old.get("object") or old["text"]]
    return out


def end_ceased(items: Sequence[dict[str, Any]], messages: Sequence[Message]) -> list[dict[str, Any]]:
    """``items`` with each current note that a cessation in the user's turns of ``messages`` ends
    (``verify.cessations``, ``verify.ends_value``: "数据库也从MySQL迁移到了TiDB" ends 订单服务 使用
    MySQL, "已经不去健身房了" ends 用户 去 健身房) marked past from when it was said, with nothing in
    its place: the profile and the graph end the same values (``resolve.ended_changes``). A note is
    ended only by its owner's cessation (the user's, or the one the words name: "订单服务…"), and
    only when it was written no later than the words that end it. A change of job or home said
    without its new value ends the user's notes of that kind written before it (``switched``)."""
    out = [dict(i) for i in items]
    for c in cessations(messages):
        at = c.message.timestamp.isoformat()
        whose = normalize(c.whose)
        for item in out:
            if item.get("superseded_at") or item.get("past") or not (item.get("predicate") and item.get("object")):
                continue
            subject = _subject(item)
            # the user's when the words name no one else; else the one they name ("订单服务的数据库…")
            owner = subject == whose if whose else subject == "user" or (len(subject) >= 2 and subject in normalize(c.quote))
            if owner and not later(item.get("at"), at) and ends_value(c, str(item["predicate"]), str(item["object"])):
                item["superseded_at"], item["superseded_by"] = at, ""
    for s in switches(messages):  # "我又换工作了": the user's job noted before it ends (``switched``)
        at = s.message.timestamp.isoformat()
        for item in out:
            if item.get("superseded_at") or item.get("past") or not (item.get("predicate") and item.get("object")):
                continue
            if (
                _subject(item) == "user"
                and later(at, item.get("at"))
                and s.ends(str(item["predicate"]), str(item["object"]), str(item.get("text", "")))
            ):
                item["superseded_at"], item["superseded_by"] = at, ""
    return out


def _same(ended: dict[str, Any], old: dict[str, Any]) -> bool:
    """``old`` says the value ``ended`` says has ended: same subject and canonical predicate, the same
    object or one within the other ("数据分析" / "数据分析师")."""
    if not _same_slot(ended, old):
        return False
    a, b = normalize(ended.get("object", "")), normalize(old.get("object", ""))
    return bool(a and b) and (a in b or b in a)


def settled_by_profile(
    items: Sequence[dict[str, Any]],
    attributes: dict[str, Any],
    lang: str,
    self_names: Sequence[str] = (),
    others: Mapping[str, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """``items`` with each current note about the user that the user's profile (``attributes``: the
    user entity's, written by every thread) says has ended since the note was written marked past,
    as ``apply_updates`` marks it: ``superseded_at`` the day it ended, ``superseded_by`` the
    profile's current value of that predicate (empty: it no longer holds). A note stays as it was
    when the profile still holds its value, knows nothing of its predicate, or ended the value
    before the note was written (the note is then the newer word). A note about the user is one
    whose subject is 用户/User or one of ``self_names`` (the user entity's name and aliases: "王磊
    住在上海" of "我叫王磊，住在上海"). A note about something else is settled the same way by that
    entity's attributes, ``others`` (its normalised subject -> attributes: "订单服务 使用 MySQL"
    by 订单服务's, after "数据库从MySQL迁移到了TiDB" in another thread). The notes are not rewritten."""
    mine = {normalize(n) for n in self_names if normalize(n)}
    groups = {"user": settled_attributes(attributes) if attributes else {}}
    groups.update({normalize(k): settled_attributes(v) for k, v in (others or {}).items() if v and normalize(k) not in groups})
    if not any(groups.values()):
        return list(items)
    out = []
    for item in items:
        group = None
        subject = "user" if _subject(item) in mine else _subject(item)
        if item.get("predicate") and item.get("object") and not item.get("superseded_at") and not item.get("past"):
            group = groups.get(subject, {}).get(normalize(kind(item["predicate"])))
        if group is None:
            out.append(item)
            continue
        key, now, then = group
        value = normalize(item["object"])

        def names(v: dict[str, Any], value: str = value) -> bool:
            x = normalize(str(v.get("value", "")))
            return bool(x) and (x in value or value in x)

        ended = [p for p in then if names(p) and later(p.get("until"), item.get("at"))]
        if any(names(v) for v in now) or not ended:
            out.append(item)
            continue
        until = str(ended[-1]["until"])
        shown = ("、" if lang == "zh" else ", ").join(str(v["value"]) for v in now)
        owner = ("用户" if lang == "zh" else "the user") if subject == "user" else str(item["subject"]).strip()
        by = (f"{owner}{key}{shown}" if lang == "zh" else f"{owner} {key} {shown}") if shown else ""
        out.append({**item, "superseded_at": until, "superseded_by": by, **({DONE: True} if ended[-1].get(DONE) else {})})
    return out
