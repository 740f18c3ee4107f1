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
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from ..llm.grounding import normalize
from ..text import segment
from ..types import Message, Record
from . import register_layer
from .base import LayerOutput, ReadRequest, record_lines
from .extractor import SELF_KEY, attribute_values, first_person

#: the dates beside attributes are when the user said them, not when a thing happened ("去了=膝盖的
#: 核磁共振（2026-01-27）" was said on 01-27 of a scan "上周六"): the titles say so
TITLES = {"zh": "已知的实体（日期是说起的日子）", "en": "Known entities (dates: when it was said)"}
PROFILE_TITLES = {"zh": "用户画像（日期是说起的日子）", "en": "User profile (dates: when it was said)"}


@dataclass
class Entities:
    store: Any
    share: float = 0.25
    #: only the user's own entity (their attributes and preferences): the profile view
    profile_only: bool = False
    #: cite each attribute's source message (short id) beside its date
    provenance: bool = False
    name: str = "entities"
    scope: str = "user"
    history: str = "none"
    job: str = "extract"

    def read(self, request: ReadRequest, messages: list[Message]) -> LayerOutput:
        records = self.store.records.current(request.scope.user(), "entity") if hasattr(self.store, "records") else []
        if self.profile_only:
            records = [r for r in records if r.key == SELF_KEY]
        # a bare name (a value that names a thing: "SpringBoot", "缓存") is a node for the graph's
        # paths; as a line of its own ("- 缓存") it tells the model nothing and costs tokens
        records = [r for r in records if r.value.get("attributes") or r.value.get("description") or r.key == SELF_KEY]
        if not records:
            return LayerOutput(messages)
        lang = "zh" if any("\u4e00" <= c <= "\u9fff" for c in (request.query or "") + "".join(r.value.get("name", "") for r in records[:5])) else "en"
        ordered = rank(records, request.query or "")
        if self.profile_only and request.query:
            ordered = [with_attributes(r, relevant_attributes(r.value.get("attributes") or {}, request.query)) for r in ordered]
        budget = None if request.budget is None else int(request.budget * self.share)
        title = TITLES[lang] if not self.profile_only else PROFILE_TITLES[lang]
        out = record_lines(self.name, title, ordered, lambda r: render_entity(r, lang, provenance=self.provenance), budget, request.counter, what="entities", priority=35)
        return LayerOutput(messages, out.sections, out.dropped)


def names(record: Record) -> list[str]:
    return [n for n in [record.value.get("name", ""), *record.value.get("aliases", [])] if n]


def rank(records: list[Record], query: str) -> list[Record]:
    """Named in the query first (the user's own entity when it speaks in the first person), then
    the user's own entity, then the most recently changed."""
    q = normalize(query)
    me = first_person(query)

    def key(r: Record) -> tuple:
        named = (me and r.key == SELF_KEY) or (any(normalize(n) in q for n in names(r)) if q else False)
        return (not named, r.key != SELF_KEY, -(r.valid_from or r.created_at).timestamp())

    return sorted(records, key=key)


#: attributes that say who the user is (a short key): shown in the profile whatever the question
IDENTITY = re.compile(r"名|叫|姓|职业|工作|上班|职位|身份|住|家乡|老家|城市|年龄|生日|出生|^是$|\b(?:name|called|job|work|works|occupation|role|lives?|home|city|age|born|birthday|is)\b", re.IGNORECASE)
IDENTITY_KEY_CHARS = 6
#: question words that name no subject ("我现在住在哪里？": 现在)
_UNSPECIFIC = frozenset({"现在", "目前", "如今", "以前", "之前", "最近", "时候", "now", "currently", "still"})
#: the profile's other attributes shown beside those above, the most recently changed
OTHER_ATTRIBUTES = 6


def relevant_attributes(attributes: dict[str, Any], query: str, others: int = OTHER_ATTRIBUTES) -> dict[str, Any]:
    """The profile's attributes for ``query``: those whose key or values share a term with it (the
    most shared first), then those that say who the user is (``IDENTITY``), then the ``others``
    most recently changed. The rest are left out: a small model's profile holds every verb the
    user used ("跑=18公里、3月15号、3公里"), and all of it put "3月15号" before the model that was
    asked for a birthday; the retrieval section holds what the question needs of them."""
    terms = [t for t in dict.fromkeys(segment(query)) if t not in _UNSPECIFIC]

    def shared(key: str, attribute: Any) -> int:
        text = key + " " + " ".join(str(v.get("value", "")) for v in _values(attribute))
        have = set(segment(text))
        have |= {c for t in have for c in t if "\u3400" <= c <= "\u9fff"}
        return sum(1 for t in terms if t in have or (len(t) > 1 and t in text))

    def changed(key: str) -> str:
        return max((str(v.get("valid_from", "")) for v in _values(attributes[key])), default="")

    scored = [(shared(k, a), i, k) for i, (k, a) in enumerate(attributes.items())]
    named = [k for n, _i, k in sorted(scored, key=lambda x: (-x[0], x[1])) if n > 0]
    who = [k for n, _i, k in scored if n == 0 and len(k) <= IDENTITY_KEY_CHARS and IDENTITY.search(k)]
    rest = sorted((k for k in attributes if k not in named and k not in who), key=changed, reverse=True)[:others]
    return {k: attributes[k] for k in [*named, *who, *(k for k in attributes if k in rest)]}


def _values(attribute: Any) -> list[dict[str, Any]]:
    current, before = attribute_values(attribute)
    return [*current, *before]


def with_attributes(record: Record, attributes: dict[str, Any]) -> Record:
    """The record with only these attributes (in this order)."""
    return replace(record, value={**record.value, "attributes": attributes})


def render_entity(record: Record, lang: str, *, provenance: bool = False) -> str:
    v = record.value
    head = v.get("name") or record.key
    if v.get("type"):
        head += f"（{v['type']}）" if lang == "zh" else f" ({v['type']})"
    aliases = [a for a in v.get("aliases", []) if a != v.get("name")]
    if aliases:
        head += ("，又名" if lang == "zh" else ", also ") + "、".join(aliases)
    attrs = v.get("attributes", {})
    details = [v["description"]] if v.get("description") else []
    if attrs:
        details.append(("；" if lang == "zh" else "; ").join(render_attribute(k, a, lang, provenance=provenance) for k, a in attrs.items()))
    if not details:
        return f"- {head}"
    return f"- {head}" + ("：" if lang == "zh" else ": ") + ("；" if lang == "zh" else "; ").join(details)


def render_attribute(key: str, attribute: dict[str, Any], lang: str, *, provenance: bool = False) -> str:
    """One attribute as "key=value": several current values joined, each dated when their dates
    differ; superseded values after the current one, as past, the current one dated from then:
    "住在=深圳（自2026-05-01；此前：上海，2026-03-01起）" / "lives in=Shenzhen (since 2026-05-01; before: Shanghai, from 2026-03-01)"."""
    current, before = attribute_values(attribute)
    current = [c for c in current if c.get("value")]
    zh = lang == "zh"
    dates = {str(c.get("valid_from", ""))[:10] for c in current}
    if len(dates) > 1:
        shown = ("、" if zh else ", ").join(c["value"] + _paren([str(c.get("valid_from", ""))[:10]], lang) for c in current)
        notes = []
    else:
        shown = ("、" if zh else ", ").join(c["value"] for c in current)
        day = next(iter(dates), "")
        # a lone value is not dated: the date is when it was said, and a small model gave it as
        # when the thing happened ("生日=…（2026-02-10）" of a birthday said to be 大后天)
        notes = [f"自{day}" if zh else f"since {day}"] if day and before else []
    if provenance and attribute.get("source_ids"):
        from .graph import cite

        notes.append(cite(attribute["source_ids"], lang))
    if before:
        old = ("、" if zh else ", ").join(p["value"] + (("，" if zh else ", ") + (f"{p['valid_from'][:10]}起" if zh else f"from {p['valid_from'][:10]}") if p.get("valid_from") else "") for p in before)
        notes.append(("此前：" if zh else "before: ") + old)
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
