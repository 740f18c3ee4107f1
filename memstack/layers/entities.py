"""Entity memory: the people, projects and things of a user's conversations, merged across turns
and threads under one canonical name (aliases kept), each attribute with its sources and the time
it became true. A changed attribute supersedes the old value, which stays in the record's history.

The write side is the shared extractor's job; the read side shows the entities the query names
first, then the user's own profile, then the most recently updated, within its share of the budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..llm.grounding import normalize
from ..types import Message, Record
from . import register_layer
from .base import LayerOutput, ReadRequest, record_lines
from .extractor import SELF_KEY

TITLES = {"zh": "已知的实体", "en": "Known entities"}


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
        if not records:
            return LayerOutput(messages)
        lang = "zh" if any("\u4e00" <= c <= "\u9fff" for c in (request.query or "") + "".join(r.value.get("name", "") for r in records[:5])) else "en"
        ordered = rank(records, request.query or "")
        budget = None if request.budget is None else int(request.budget * self.share)
        title = TITLES[lang] if not self.profile_only else ("用户画像" if lang == "zh" else "User profile")
        out = record_lines(self.name, title, ordered, lambda r: render_entity(r, lang, provenance=self.provenance), budget, request.counter, what="entities", priority=35)
        return LayerOutput(messages, out.sections, out.dropped)


def names(record: Record) -> list[str]:
    return [n for n in [record.value.get("name", ""), *record.value.get("aliases", [])] if n]


def rank(records: list[Record], query: str) -> list[Record]:
    """Named in the query first, then the user's own entity, then the most recently changed."""
    q = normalize(query)

    def key(r: Record) -> tuple:
        named = any(normalize(n) in q for n in names(r)) if q else False
        return (not named, r.key != SELF_KEY, -(r.valid_from or r.created_at).timestamp())

    return sorted(records, key=key)


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
        details.append(("；".join if lang == "zh" else "; ".join)(f"{k}={a['value']}" + _when(a, lang, provenance) for k, a in attrs.items()))
    if not details:
        return f"- {head}"
    return f"- {head}" + ("：" if lang == "zh" else ": ") + ("；" if lang == "zh" else "; ").join(details)


def _when(attribute: dict[str, Any], lang: str, provenance: bool) -> str:
    from .graph import cite

    parts = [attribute["valid_from"][:10]] if attribute.get("valid_from") else []
    if provenance and attribute.get("source_ids"):
        parts.append(cite(attribute["source_ids"], lang))
    return f" ({', '.join(parts)})" if parts else ""


def profile(store: Any, share: float = 0.2) -> Entities:
    """The entity layer's view of the user's own attributes and preferences."""
    return Entities(store=store, share=share, profile_only=True, name="profile")


register_layer("entities", Entities)
register_layer("profile", profile)
