"""Entity memory: the people, projects and things of a user's conversations, merged across turns
and threads under one canonical name (aliases kept; "星图"/"星图项目" and "一个知识中台"/"知识中台" are
one), each attribute with its sources and the time it became true. Attributes that accumulate
(uses, likes, knows) keep every value; a value that replaces another (a move, a new employer, a
moved date, a change cue: ``supersede``) supersedes it, and the old one stays, dated, in the
attribute's ``past`` and the record's history; the rendering says which is current. The user's own
entity (key ``user``) carries the name they introduced themself with, and a question in the first
person ("我的…", "my …") names it.

The write side is the shared extractor's job; the read side shows the entities the query names
first, then the user's own profile, then the most recently updated, within its share of the budget.
What is stored is read as the supersession rule says it stands (``settled_attributes``: spellings
of one predicate are one attribute, of a single-valued one only the newest said value is current),
and as the graph's relations say it (a value whose relation is past is past), so the entity and
graph sections agree. Every value carries the day it was said, and a short quote of the words it
came from where one is stored (the attribute's ``evidence``, else its relation's), dropped before
the line when the budget is short; quoted on the lines of the entities the question names (the
others are dated only). Entities known by name only ("张三（人物）") share one line,
so a layer that holds entities never shows nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..llm.grounding import normalize
from ..types import Message, Record
from . import register_layer
from .attributes import attribute_values, settled_attributes
from .base import ExtractedLayer, LayerOutput, ReadRequest, current_records, dated_quote, record_lines
from .extractor import SELF_KEY, first_person
from .fulfil import DONE
from .graph import cite, past, reconcile, same_value
from .names import names_of
from .relevance import (
    IDENTITY,
    IDENTITY_KEY_CHARS,
    asks_about_before,
    asks_about_change,
    asks_about_now_only,
    asks_for_a_day,
    asks_own_name,
    asks_what_you_said,
    query_terms,
    shared_terms,
)
from .supersede import kind

#: the dates beside attributes are when the user said them, not when a thing happened ("去了=膝盖的
#: 核磁共振（2026-01-27）" was said on 01-27 of a scan "上周六"): the titles say so, and a lone
#: value's date reads "说于" / "said"; with quotes shown, they say what the quotes are
TITLES = {"zh": "已知的实体（日期是说起的日子）", "en": "Known entities (dates: when it was said)"}
PROFILE_TITLES = {"zh": "用户画像（日期是说起的日子）", "en": "User profile (dates: when it was said)"}
QUOTED_TITLES = {
    "zh": "已知的实体（日期是说起的日子，引号内是原话）",
    "en": "Known entities (dates: when it was said; quotes: the words it came from)",
}
QUOTED_PROFILE_TITLES = {
    "zh": "用户画像（日期是说起的日子，引号内是原话）",
    "en": "User profile (dates: when it was said; quotes: the words it came from)",
}
#: the titles for a question about a day (``relevance.asks_for_a_day``): the lines carry no said-on dates
UNDATED = {False: {"zh": "已知的实体", "en": "Known entities"}, True: {"zh": "用户画像", "en": "User profile"}}
UNDATED_QUOTES = {"zh": "（引号内是原话）", "en": " (quotes: the words it came from)"}
#: the line of the entities known by name (and type) only
BARE = {"zh": "- 还提到：", "en": "- Also mentioned: "}
#: the model-made sections yield to the retrieval's raw turns (40) when the budget is short
PRIORITY = 45


@dataclass
class Entities(ExtractedLayer):
    share: float = 0.25
    #: only the user's own entity (their attributes and preferences): the profile view
    profile_only: bool = False
    #: cite each attribute's source message (short id) beside its date
    provenance: bool = False
    name: str = "entities"

    def read(self, request: ReadRequest, messages: list[Message]) -> LayerOutput:
        if asks_what_you_said(request.query):  # the assistant's words answer it: retrieval's
            return LayerOutput(messages)
        user = request.scope.user()
        everyone = current_records(self.store, user, "entity")
        records = [r for r in everyone if r.key == SELF_KEY] if self.profile_only else everyone
        if not records:
            return LayerOutput(messages)
        relations = self.store.records.current(user, "relation") if any(r.value.get("attributes") for r in records) else []
        if relations:
            relations = reconcile(relations, everyone)
        records = [as_read(r, relations) for r in records]
        # a bare name (a value that names a thing: "SpringBoot", "张三（人物）") is a node for the
        # graph's paths; a line of its own would cost tokens for little, so they share one line
        rich = [r for r in records if r.value.get("attributes") or r.value.get("description") or r.key == SELF_KEY]
        bare = [r for r in records if r not in rich]
        lang = (
            "zh"
            if any("\u4e00" <= c <= "\u9fff" for c in (request.query or "") + "".join(r.value.get("name", "") for r in records[:5]))
            else "en"
        )
        ordered = rank(rich, request.query or "")
        if request.query:  # the user's own attributes: those the question needs (see ``relevant_attributes``)
            ordered = [
                with_attributes(r, relevant_attributes(r.value.get("attributes") or {}, request.query)) if r.key == SELF_KEY else r
                for r in ordered
            ]
            # left with nothing to say (no attribute or description), the user's line goes; their
            # other names only for a question about a name ("我叫什么？"): "- 用户，又名贺晓岚" alone
            # above the turns was answered "柴犬" for "我养的那只柴犬叫什么名字？" where the same
            # turns alone were answered 豆豉 (LifeAssist-CN, BENCHMARKS.md)
            asks_name = asks_own_name(request.query)
            if not asks_name:  # "是=钟一鸣", "叫=钟一鸣": a name said as an attribute is a name too
                ordered = [with_attributes(r, _not_names(r)) if r.key == SELF_KEY else r for r in ordered]
            ordered = [
                r
                for r in ordered
                if r.key != SELF_KEY
                or r.value.get("attributes")
                or r.value.get("description")
                or (asks_name and [a for a in r.value.get("aliases", []) if a != r.value.get("name")])
            ]
            ordered = _about_the_question(ordered, request.query, relations)
        budget = None if request.budget is None else int(request.budget * self.share)
        # a name that is a value of a shown attribute ("住在=深圳") is said there already
        stated = {normalize(str(v.get("value", ""))) for r in rich for a in (r.value.get("attributes") or {}).values() for v in _values(a)}
        named = rank([r for r in bare if not any(normalize(n) in stated for n in names_of(r))], request.query or "")
        # the quotes of the entities the question names (the others' lines are dated, not quoted:
        # a quote costs a dozen tokens, and the graph and retrieval sections hold the turns)
        q, me = normalize(request.query or ""), first_person(request.query or "")
        day = asks_for_a_day(request.query or "")
        quoted = any(asked_about(r, q, me) and _quotes(r) for r in ordered)
        title = ((QUOTED_TITLES if quoted else TITLES) if not self.profile_only else (QUOTED_PROFILE_TITLES if quoted else PROFILE_TITLES))[
            lang
        ]
        if day:  # no said-on dates on the lines: the title names none
            title = UNDATED[self.profile_only][lang] + (UNDATED_QUOTES[lang] if quoted else "")
        out = record_lines(
            self.name,
            title,
            ordered,
            lambda r: entity_forms(r, lang, provenance=self.provenance, quotes=asked_about(r, q, me), dated=not day),
            budget,
            request.counter,
            what="entities",
            priority=PRIORITY,
            tail=(lambda fits: bare_line(named, lang, fits)) if named else None,
        )
        return LayerOutput(messages, out.sections, out.dropped)


def _quotes(record: Record) -> bool:
    """Whether some current value of the entity has a quote to show."""
    return any(
        c.get("evidence")
        for a in (record.value.get("attributes") or {}).values()
        for c in attribute_values(a if isinstance(a, dict) else {})[0]
    )


def bare_line(records: list[Record], lang: str, fits: Any) -> str:
    """One line naming entities known by name (and type, aliases) only, in the given order, as many
    as ``fits`` lets the line hold: "- 还提到：张三（人物）、知识中台（项目）"; "" when none fits."""
    zh = lang == "zh"
    line = ""
    for r in records:
        v = r.value
        head = v.get("name") or r.key
        extra = [x for x in [v.get("type") or "", *(a for a in v.get("aliases", []) if a != head)] if x]
        item = head + ((f"（{'，'.join(extra)}）" if zh else f" ({', '.join(extra)})") if extra else "")
        candidate = (line + ("、" if zh else ", ") + item) if line else BARE[lang] + item
        if not fits(candidate):
            break
        line = candidate
    return line


def _not_names(record: Record) -> dict[str, Any]:
    """The record's attributes but those whose every value is one of its own names."""
    own = {normalize(n) for n in names_of(record)}
    attributes = record.value.get("attributes") or {}
    return {k: a for k, a in attributes.items() if not _values(a) or not all(normalize(str(v.get("value", ""))) in own for v in _values(a))}


def as_read(record: Record, relations: Sequence[Record] = ()) -> Record:
    """The entity as the rule says it stands (``settled_attributes``), each value the graph holds as
    a past relation of it past too, and each value without a stored quote given its relation's."""
    attributes = record.value.get("attributes") or {}
    if not attributes:
        return record
    mine = [r for r in relations if r.value.get("source_key") == record.key and not r.value.get("alias")]
    out: dict[str, Any] = {}
    for predicate, (key, current, before) in settled_attributes(attributes).items():
        said = [r for r in mine if normalize(kind(str(r.value.get("relation", "")))) == predicate]
        if said:
            current, before = _with_relations(current, before, said)
        out[key] = _attribute(current, before)
    return replace(record, value={**record.value, "attributes": out})


def _with_relations(
    current: list[dict[str, Any]], before: list[dict[str, Any]], relations: list[Record]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Values whose relation is past (and none current) moved to ``before``, ended when it ended;
    the current ones given their relation's quote where they have none of their own."""

    keep = []
    for c in current:
        match = [r for r in relations if same_value(str(r.value.get("target", "")), str(c.get("value", "")))]
        live = [r for r in match if not past(r)]
        if match and not live:
            done = {DONE: True} if all(r.value.get(DONE) for r in match) else {}  # a plan its relation says came true
            before = [*before, {**c, "until": max(str(r.value["invalid_at"]) for r in match), **done}]
            continue
        quote = next((str(r.value["evidence"]) for r in [*live, *match] if r.value.get("evidence")), "")
        if quote and not c.get("evidence"):
            c = {**c, "evidence": quote}
        keep.append(c)
    return keep, before


def _attribute(current: list[dict[str, Any]], before: list[dict[str, Any]]) -> dict[str, Any]:
    """Values in the stored shape of an attribute (``attribute_values`` reads it back)."""
    out: dict[str, Any] = {
        "value": "、".join(str(c["value"]) for c in current),
        "values": current,
        "source_ids": sorted({i for c in current for i in c.get("source_ids", [])}),
    }
    if current:
        out["valid_from"] = max(str(c.get("valid_from", "")) for c in current)
    if before:
        out["past"] = before
    return out


def _about_the_question(records: list[Record], query: str, relations: Sequence[Record]) -> list[Record]:
    """The entities a question can use: the user's own, those it names, and those that share a word
    with it in their names, descriptions, attributes or the relations that reach them ("我女儿在哪
    上学？" keeps 朵朵 of `用户 —女儿→ 朵朵`). Another entity is a line the answer cannot use and a
    small model may read instead: "念念的小青蛙：演出=成功" above "我现在在绍兴是干什么工作的？" was
    answered without the school the retrieved self-introduction named (LifeAssist-CN, BENCHMARKS.md).
    A question with no word that can name anything ("怎么样？") keeps them all, the most recent first."""
    terms = query_terms(query)
    if not terms:
        return records
    q, me = normalize(query), first_person(query)
    around: dict[str, list[str]] = {}
    for r in relations:
        v = r.value or {}
        said = f"{v.get('source', '')} {v.get('relation', '')} {v.get('target', '')}"
        for key in (v.get("source_key"), v.get("target_key")):
            if key:
                around.setdefault(str(key), []).append(said)

    def text(r: Record) -> str:
        v = r.value
        attributes = " ".join(f"{k} {x.get('value', '')}" for k, a in (v.get("attributes") or {}).items() for x in _values(a))
        return " ".join([*names_of(r), str(v.get("description", "")), attributes, *around.get(r.key, [])])

    return [r for r in records if r.key == SELF_KEY or asked_about(r, q, me) or shared_terms(terms, text(r))]


def rank(records: list[Record], query: str) -> list[Record]:
    """Named in the query first (the user's own entity when it speaks in the first person), then
    the user's own entity, then the most recently changed."""
    q = normalize(query)
    me = first_person(query)

    def key(r: Record) -> tuple:
        return (not asked_about(r, q, me), r.key != SELF_KEY, -(r.valid_from or r.created_at).timestamp())

    return sorted(records, key=key)


def asked_about(record: Record, query: str, me: bool) -> bool:
    """Whether the (normalised) query names the entity, or is in the first person (``me``) and the
    entity is the user's own."""
    return (me and record.key == SELF_KEY) or (bool(query) and any(normalize(n) in query for n in names_of(record)))


#: the profile's other attributes shown beside those above: those that changed (a past value
#: beside the current one), the most recently changed first
OTHER_ATTRIBUTES = 6


def relevant_attributes(attributes: dict[str, Any], query: str, others: int = OTHER_ATTRIBUTES) -> dict[str, Any]:
    """The profile's attributes for ``query``: those whose key or values share a term with it (the
    most shared first), then those that say who the user is (``IDENTITY``), then, for a question
    about now or before (``asks_about_change``), up to ``others`` that changed, the most recently
    changed first (what the turns say twice, the old value and the new, and where the raw turns
    mislead most). The rest are left out: a small model's
    profile holds every verb the user used ("跑=18公里、3月15号、3公里"), and all of it put "3月15号"
    before the model that was asked for a birthday; an unrelated line the question does not name
    ("计划=聚会（“…今年想在家里办个小聚会”）" for "我表姐的婚礼是哪一天？") drew the model to the
    sentence beside it and to its date (the fact set's questions: see BENCHMARKS.md). For a question
    about before only (``asks_about_before``), only those with a past value: a value that is only
    current answers nothing there and was answered instead. The retrieval section holds what the
    question needs of the rest. For a question about now only (``asks_about_now_only``), only
    those with a current value."""
    terms = query_terms(query)

    def shared(key: str, attribute: Any) -> int:
        return shared_terms(terms, key + " " + " ".join(str(v.get("value", "")) for v in _values(attribute)))

    def changed(key: str) -> str:
        return max((str(v.get("valid_from", "")) for v in _values(attributes[key])), default="")

    scored = [(shared(k, a), i, k) for i, (k, a) in enumerate(attributes.items())]
    named = [k for n, _i, k in sorted(scored, key=lambda x: (-x[0], x[1])) if n > 0]
    who = [k for n, _i, k in scored if n == 0 and len(k) <= IDENTITY_KEY_CHARS and IDENTITY.search(k)]
    moved = (
        [k for k in attributes if k not in named and k not in who and attribute_values(attributes[k])[1]]
        if asks_about_change(query)
        else []
    )
    rest = sorted(moved, key=changed, reverse=True)[:others]
    keys = [*named, *who, *(k for k in attributes if k in rest)]
    if asks_about_before(query):
        # "我以前在哪家公司做前端？" beside "工作单位=美团" (its earlier value never stored): the small
        # model answered the current value; the retrieval section holds the earlier words
        keys = [k for k in keys if attribute_values(attributes[k])[1]]
    elif asks_about_now_only(query):
        # "我现在怎么锻炼？" beside "练=（目前未知；此前：力量）": the small model answered 力量; a value
        # that ended with nothing known in its place says nothing about now (the turns may)
        keys = [k for k in keys if attribute_values(attributes[k])[0] or any(p.get(DONE) for p in attribute_values(attributes[k])[1])]
    return {k: attributes[k] for k in keys}


def _values(attribute: Any) -> list[dict[str, Any]]:
    current, before = attribute_values(attribute)
    return [*current, *before]


def with_attributes(record: Record, attributes: dict[str, Any]) -> Record:
    """The record with only these attributes (in this order)."""
    return replace(record, value={**record.value, "attributes": attributes})


def entity_forms(record: Record, lang: str, *, provenance: bool = False, quotes: bool = True, dated: bool = True) -> list[str]:
    """The entity's line with the quotes of its values, then without (for a short budget)."""
    full = render_entity(record, lang, provenance=provenance, quotes=quotes, dated=dated)
    bare = render_entity(record, lang, provenance=provenance, quotes=False, dated=dated)
    return [full, bare] if bare != full else [full]


def render_entity(record: Record, lang: str, *, provenance: bool = False, quotes: bool = True, dated: bool = True) -> str:
    """One entity as "- 名（类型，说于D）：键=值（…）；…": the day its unchanged values were said is
    given once beside its name when they were all said that day (each value dated otherwise).
    ``dated`` False: no day it was said anywhere on the line (``relevance.asks_for_a_day``)."""
    v = record.value
    zh = lang == "zh"
    attrs = v.get("attributes", {})
    day = _common_day(attrs) if dated else ""
    head = v.get("name") or record.key
    marks = [x for x in (v.get("type") or "", (f"说于{day}" if zh else f"said {day}") if day else "") if x]
    if marks:
        head += f"（{'，'.join(marks)}）" if zh else f" ({', '.join(marks)})"
    aliases = [a for a in v.get("aliases", []) if a != v.get("name")]
    if aliases:
        head += ("，又名" if zh else ", also ") + "、".join(aliases)
    details = [v["description"]] if v.get("description") else []
    if attrs:
        seen: set[str] = set()  # a sentence that states several attributes is quoted once
        details.append(
            ("；" if zh else "; ").join(
                render_attribute(k, a, lang, provenance=provenance, quotes=quotes, seen=seen, day=day, dated=dated)
                for k, a in attrs.items()
            )
        )
    if not details:
        return f"- {head}"
    return f"- {head}" + ("：" if zh else ": ") + ("；" if zh else "; ").join(details)


def _common_day(attributes: dict[str, Any]) -> str:
    """The day all the unchanged (no past value) attributes were said, when it is one day; else ""."""
    days = set()
    for attribute in attributes.values():
        current, before = attribute_values(attribute if isinstance(attribute, dict) else {"value": str(attribute)})
        if current and not before:
            days |= {str(c.get("valid_from", ""))[:10] for c in current if c.get("value")}
    return next(iter(days)) if len(days) == 1 else ""


def render_attribute(
    key: str,
    attribute: dict[str, Any],
    lang: str,
    *,
    provenance: bool = False,
    quotes: bool = True,
    seen: set[str] | None = None,
    day: str = "",
    dated: bool = True,
) -> str:
    """One attribute as "key=value", every value dated by the day it was said: several current
    values joined, each dated when their dates differ; a lone one "说于D" / "said D" (the day it
    was said, not the day it happened); superseded values after the current one, as past, the
    current one dated from then: "住在=深圳（自2026-05-01；此前：上海，2026-03-01起）" /
    "lives in=Shenzhen (since 2026-05-01; before: Shanghai, from 2026-03-01)". ``quotes``: each
    current value with a short quote of the words it came from, where one is stored."""
    current, before = attribute_values(attribute)
    current = [c for c in current if c.get("value")]
    zh = lang == "zh"
    sep = "：" if zh else ": "

    seen = set() if seen is None else seen
    quoted = []
    for c in current:
        said = dated_quote(str(c.get("evidence") or ""), str(c["value"]), c.get("valid_from"), lang) if quotes else ""
        quoted.append((f"“{said}”" if zh else f'"{said}"') if said and said not in seen else "")
        seen.add(said)

    dates = {str(c.get("valid_from", ""))[:10] for c in current} if dated else set()
    if len(dates) > 1 or (len(current) > 1 and any(quoted)):
        shown = ("、" if zh else ", ").join(
            c["value"] + _paren([sep.join(x for x in ((str(c.get("valid_from", ""))[:10] if dated else ""), q) if x)], lang)
            for c, q in zip(current, quoted, strict=True)
        )
        notes = []
    else:
        shown = ("、" if zh else ", ").join(c["value"] for c in current)
        said_on = next(iter(dates), "")
        said = quoted[0] if len(current) == 1 else ""
        when = (
            ((f"自{said_on}" if zh else f"since {said_on}") if before else (f"说于{said_on}" if zh else f"said {said_on}"))
            if said_on and (before or said_on != day)
            else ""
        )
        notes = [sep.join(x for x in (when, said) if x)]
    if provenance and attribute.get("source_ids"):
        notes.append(cite(attribute["source_ids"], lang))
    done = [p for p in before if p.get(DONE)]  # plans carried out: done, not ended (``fulfil``)
    gone = [p for p in before if not p.get(DONE)]
    if done:
        notes.append(
            ("已实现：" if zh else "done: ")
            + ("、" if zh else ", ").join(
                p["value"]
                + (("，" if zh else ", ") + (f"{str(p.get('until', ''))[:10]}实现" if zh else f"by {str(p.get('until', ''))[:10]}"))
                for p in done
            )
        )
    if gone:
        old = ("、" if zh else ", ").join(
            p["value"]
            + (
                ("，" if zh else ", ") + (f"{p['valid_from'][:10]}起" if zh else f"from {p['valid_from'][:10]}")
                if p.get("valid_from") and dated
                else ""
            )
            for p in gone
        )
        notes.append(("此前：" if zh else "before: ") + old)
    if not shown and done and not gone:
        return f"{key}=" + _paren(notes, lang).strip()
    if not shown:
        return f"{key}=" + _paren(["目前未知" if zh else "unknown now", *notes], lang).strip()
    return f"{key}={shown}" + _paren(notes, lang)


def _paren(notes: list[str], lang: str) -> str:
    notes = [n for n in notes if n]
    if not notes:
        return ""
    return f"（{'；'.join(notes)}）" if lang == "zh" else f" ({'; '.join(notes)})"


def profile(store: Any, share: float = 0.2) -> Entities:
    """The entity layer's view of the user's own attributes and preferences."""
    return Entities(store=store, share=share, profile_only=True, name="profile")


register_layer("entities", Entities)
register_layer("profile", profile)
