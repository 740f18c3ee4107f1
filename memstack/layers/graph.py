"""Knowledge-graph memory: relations between a user's entities, each with its evidence quote,
confidence, source turns and the time it became true; at read time the entities the query names and
their neighbourhood up to ``hops`` relations away are rendered as facts, so a question that needs a
chain ("莫尔索开发的项目用什么后端？": 莫尔索 is 小李's pen name, 小李 develops 知识中台, 知识中台
uses SpringBoot) gets the whole path. Alias relations (a pen name, "also known as") join two names
of one entity and cost no hop. A relation that a newer one replaces (same source, a single-valued
predicate or a change cue: ``supersede``) is kept with ``invalid_at`` in its value, rendered as no
longer true with its dates, and never followed further. "我/my" in the query names the user.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..llm.grounding import normalize
from ..types import Message, Record
from . import register_layer
from .base import LayerOutput, ReadRequest, record_lines
from .extractor import SELF_KEY, entity_key, first_person, stem

TITLES = {"zh": "相关的事实（知识图谱）", "en": "Related facts (knowledge graph)"}


@dataclass
class Graph:
    store: Any
    hops: int = 3
    share: float = 0.25
    #: cite each relation's source message (short id) beside its evidence and date
    provenance: bool = False
    name: str = "graph"
    scope: str = "user"
    history: str = "none"
    job: str = "extract"

    def read(self, request: ReadRequest, messages: list[Message]) -> LayerOutput:
        if not request.query or not hasattr(self.store, "records"):
            return LayerOutput(messages)
        user = request.scope.user()
        relations = self.store.records.current(user, "relation")
        if not relations:
            return LayerOutput(messages)
        entities = self.store.records.current(user, "entity")
        seeds = named_in(request.query, relations, entities)
        found = neighbourhood(seeds, relations, self.hops)
        if not found:
            return LayerOutput(messages)
        lang = "zh" if any("\u4e00" <= c <= "\u9fff" for c in request.query) else "en"
        budget = None if request.budget is None else int(request.budget * self.share)
        out = record_lines(self.name, TITLES[lang], found, lambda r: render_relation(r, lang, provenance=self.provenance), budget, request.counter, what="relations", priority=35)
        return LayerOutput(messages, out.sections, out.dropped)


def named_in(query: str, relations: Iterable[Record], entities: Iterable[Record]) -> set[str]:
    """Entity keys whose name, alias or stem ("星图" for 星图项目) occurs in the query, and the
    user's own entity when the query speaks in the first person ("我的后端…", "my backend")."""
    q = normalize(query)
    seeds: set[str] = {SELF_KEY} if first_person(query) else set()
    for e in entities:
        if any(_mentions(q, n) for n in [e.value.get("name", ""), e.key, *e.value.get("aliases", [])]):
            seeds.add(e.key)
    for r in relations:
        for name, key in ((r.value.get("source", ""), r.value.get("source_key")), (r.value.get("target", ""), r.value.get("target_key"))):
            if key and _mentions(q, name):
                seeds.add(key)
    return seeds


def _mentions(query: str, name: str) -> bool:
    """Whether the (normalised) query names ``name``: whole, without its determiner, or by its stem."""
    return bool(name) and any(n and n in query for n in {normalize(name), entity_key(name), stem(entity_key(name))})


def neighbourhood(seeds: set[str], relations: list[Record], hops: int) -> list[Record]:
    """Relations reachable from the seeds within ``hops`` (alias relations cost 0), nearest
    first, current before superseded ones, then by confidence and recency. A superseded relation
    (``invalid_at`` in its value) is shown where it is reached but never leads further: a path
    follows what is true now."""
    edges: dict[str, list[Record]] = defaultdict(list)
    for r in relations:
        edges[r.value.get("source_key", "")].append(r)
        edges[r.value.get("target_key", "")].append(r)
    dist = {s: 0 for s in seeds}
    frontier = list(seeds)
    reached: dict[str, int] = {}
    # 0-1 BFS: alias edges keep the distance, others add one
    while frontier:
        node = frontier.pop(0)
        for r in edges.get(node, []):
            cost = 0 if r.value.get("alias") else 1
            if dist[node] + cost > hops:
                continue
            reached[r.id] = min(reached.get(r.id, hops + 1), dist[node] + cost)
            other = r.value.get("target_key") if r.value.get("source_key") == node else r.value.get("source_key")
            if other is not None and not past(r) and dist[node] + cost < dist.get(other, hops + 1):
                dist[other] = dist[node] + cost
                if cost == 0:
                    frontier.insert(0, other)
                else:
                    frontier.append(other)
    by_id = {r.id: r for r in relations}
    return sorted((by_id[i] for i in reached), key=lambda r: (reached[r.id], past(r), -float(r.value.get("confidence", 0)), -(r.valid_from or r.created_at).timestamp()))


def cite(ids: Sequence[str], lang: str) -> str:
    """Source messages as short ids: "消息 1a2b3c4d" / "message 1a2b3c4d"."""
    short = ", ".join(i[:8] for i in ids[:3])
    return ("消息 " if lang == "zh" else "message ") + short if short else ""


def past(r: Record) -> bool:
    """Whether a relation was superseded by a newer one (it is kept, with the time it ended)."""
    return bool(r.value.get("invalid_at"))


def render_relation(r: Record, lang: str, *, provenance: bool = False) -> str:
    """One relation as "- 源 —关系→ 目标（依据：“…”，日期）"; a superseded one says it is past and
    since when ("已不成立：2026-03-01 至 2026-05-01" / "no longer true: 2026-03-01 to 2026-05-01")."""
    v = r.value
    date = (r.valid_from or r.created_at).date().isoformat()
    if past(r):
        until = str(v["invalid_at"])[:10]
        if until == date:
            date = f"已不成立，截至{until}" if lang == "zh" else f"no longer true as of {until}"
        else:
            date = f"已不成立：{date} 至 {until}" if lang == "zh" else f"no longer true: {date} to {until}"
    if provenance and r.source_ids:
        date = f"{date}，{cite(r.source_ids, lang)}" if lang == "zh" else f"{date}, {cite(r.source_ids, lang)}"
    line = f"- {v.get('source')} —{v.get('relation')}→ {v.get('target')}"
    evidence = (v.get("evidence") or "").strip()
    if lang == "zh":
        return line + (f"（依据：“{evidence}”，{date}）" if evidence else f"（{date}）")
    return line + (f' (evidence: "{evidence}", {date})' if evidence else f" ({date})")


register_layer("graph", Graph)
