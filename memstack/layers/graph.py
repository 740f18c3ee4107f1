"""Knowledge-graph memory: relations between a user's entities, each with its evidence quote,
confidence, source turns and the time it became true; at read time the entities the query names and
their neighbourhood up to ``hops`` relations away are rendered as facts, so a question that needs a
chain ("莫尔索开发的项目用什么后端？": 莫尔索 is 小李's pen name, 小李 develops 知识中台, 知识中台
uses SpringBoot) gets the whole path. Alias relations (a pen name, "also known as") join two names
of one entity and cost no hop. A relation that a newer one replaces (same source, a single-valued
predicate or a change cue: ``supersede``) is kept with ``invalid_at`` in its value, rendered as past
("此前" / "before") with its dates, and never followed further. "我/my" in the query names the user.

What is stored is read as the rule says it stands (``reconcile``): of two current relations from
one source under one single-valued predicate (its spellings: "住在", "搬到", "现居"), the newer is
current and the older past from then; a relation an older statement superseded is current again;
and where the entity layer holds the attribute ("李四: 住在=深圳, 此前 上海"), the relation agrees with
it, so the graph and entity sections never say two things. Each line carries its date (when it
was said) and a short quote of the words it came from, dropped before the line when the budget
is short.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..llm.grounding import normalize
from ..types import Message, Record
from . import register_layer
from .attributes import settled_attributes
from .base import ExtractedLayer, LayerOutput, ReadRequest, current_records, dated_quote, record_lines
from .extractor import SELF_KEY, entity_key, first_person, stem
from .fulfil import DONE
from .names import names_of
from .relevance import IDENTITY, asks_about_change, asks_about_now_only, asks_for_a_day, asks_own_name, asks_what_you_said, mentions_terms
from .supersede import canonical, instant, kind, settle, single_valued

#: the dates are when a thing was said, the quotes the words it came from (the titles say so)
TITLES = {
    "zh": "相关的事实（知识图谱；日期是说起的日子，引号内是原话）",
    "en": "Related facts (knowledge graph; dates: when it was said; quotes: the words it came from)",
}
#: the model-made sections yield to the retrieval's raw turns (40) when the budget is short
PRIORITY = 45


@dataclass
class Graph(ExtractedLayer):
    hops: int = 3
    share: float = 0.25
    #: cite each relation's source message (short id) beside its evidence and date
    provenance: bool = False
    name: str = "graph"

    def read(self, request: ReadRequest, messages: list[Message]) -> LayerOutput:
        if not request.query or asks_what_you_said(request.query):  # the assistant's words: retrieval's
            return LayerOutput(messages)
        user = request.scope.user()
        relations = current_records(self.store, user, "relation")
        if not relations:
            return LayerOutput(messages)
        entities = self.store.records.current(user, "entity")
        relations = reconcile(relations, entities)
        seeds = named_in(request.query, relations, entities)
        found = pertinent(
            neighbourhood(seeds, relations, self.hops), request.query, seeds - {SELF_KEY} if first_person(request.query) else seeds
        )
        if not asks_own_name(request.query):  # "用户 —是→ 钟一鸣": the user's name, for a question about it only
            own = {normalize(n) for e in entities if e.key == SELF_KEY for n in names_of(e)}
            found = [r for r in found if not (r.value.get("source_key") == SELF_KEY and normalize(str(r.value.get("target", ""))) in own)]
        if not found:
            return LayerOutput(messages)
        lang = "zh" if any("\u4e00" <= c <= "\u9fff" for c in request.query) else "en"
        budget = None if request.budget is None else int(request.budget * self.share)
        out = record_lines(
            self.name,
            TITLES[lang],
            found,
            lambda r: relation_forms(r, lang, provenance=self.provenance, dated=not asks_for_a_day(request.query or "")),
            budget,
            request.counter,
            what="relations",
            priority=PRIORITY,
        )
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


def pertinent(found: list[Record], query: str, named: set[str]) -> list[Record]:
    """Of the relations reached, those the question needs: every relation when the question names
    its entities (``named``, the seeds other than the user's own entity); for what is reached
    from the user alone (a question in the first person), those that share a term with the
    question, say who the user is (``IDENTITY``: name, job, home...) or, for a question about now
    or before, changed (a superseded one and its successors: the same relation, said the day it
    ended), and the relations that lead to them. The user's other relations ("用户
    —计划→ 聚会" for "我表姐的婚礼是哪一天？") drew the small model to their sentences and dates;
    the retrieval section holds what the question needs of them (``entities.relevant_attributes``
    decides the same for the profile). For a question about now only, a past relation stays only
    beside a current one of the same source and relation."""
    if named or not found:
        return found
    # a superseded relation's successors: the same source's relations said the day it ended
    change = asks_about_change(query)
    # (of the same relation: "用户 —住在→ 深圳" succeeds "用户 —住在→ 上海", not everything else the
    # user said that day, which put "用户 —四→ 老婆生日" before a question about a price)
    ended = (
        {
            (r.value.get("source_key"), str(r.value["invalid_at"])[:10], canonical(str(r.value.get("relation", ""))))
            for r in found
            if past(r)
        }
        if change
        else set()
    )
    moved = {
        r.id
        for r in found
        if (r.value.get("source_key"), (r.valid_from or r.created_at).date().isoformat(), canonical(str(r.value.get("relation", ""))))
        in ended
    }
    keep = {
        r.id
        for r in found
        if (change and past(r))
        or r.id in moved
        or any(IDENTITY.search(x) for x in (str(r.value.get("relation", "")), canonical(str(r.value.get("relation", "")))))
        or mentions_terms(query, f"{r.value.get('source', '')} {r.value.get('relation', '')} {r.value.get('target', '')}")
    }
    if asks_about_now_only(query):
        # a relation that ended with nothing current in its place says nothing about now ("用户 —练→
        # 力量（此前…已不成立）" was read as the answer to "我现在怎么锻炼？"; see ``entities``)
        held = {(r.value.get("source_key"), canonical(str(r.value.get("relation", "")))) for r in found if not past(r)}
        keep = {
            r.id
            for r in found
            if r.id in keep
            and (not past(r) or r.value.get(DONE) or (r.value.get("source_key"), canonical(str(r.value.get("relation", "")))) in held)
        }
    ends = {k for r in found if r.id in keep for k in (r.value.get("source_key"), r.value.get("target_key")) if k and k != SELF_KEY}
    while True:  # the paths from the user to what is kept
        more = [r for r in found if r.id not in keep and {r.value.get("source_key"), r.value.get("target_key")} & ends]
        if not more:
            break
        keep |= {r.id for r in more}
        ends |= {k for r in more for k in (r.value.get("source_key"), r.value.get("target_key")) if k and k != SELF_KEY}
    return [r for r in found if r.id in keep]


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
    return sorted(
        (by_id[i] for i in reached),
        key=lambda r: (reached[r.id], past(r), -float(r.value.get("confidence", 0)), -(r.valid_from or r.created_at).timestamp()),
    )


def cite(ids: Sequence[str], lang: str) -> str:
    """Source messages as short ids: "消息 1a2b3c4d" / "message 1a2b3c4d"."""
    short = ", ".join(i[:8] for i in ids[:3])
    return ("消息 " if lang == "zh" else "message ") + short if short else ""


def past(r: Record) -> bool:
    """Whether a relation was superseded by a newer one (it is kept, with the time it ended)."""
    return bool(r.value.get("invalid_at"))


def render_relation(r: Record, lang: str, *, provenance: bool = False, quote: bool = True, dated: bool = True) -> str:
    """One relation as "- 源 —关系→ 目标（2026-03-01：“原话”）"; a superseded one says it is past and
    when it held ("（此前：2026-03-01 至 2026-05-01，已不成立；“原话”）" / " (before: 2026-03-01 to
    2026-05-01, no longer true; "words")"). ``quote``: with the short quote of its evidence.
    ``dated`` False: without the days it was said (a question about the day a thing happened,
    ``relevance.asks_for_a_day``); a past one still says it no longer holds."""
    v = r.value
    zh = lang == "zh"
    date = (r.valid_from or r.created_at).date().isoformat()
    if past(r) and v.get(DONE):  # a plan carried out: done, not called off
        until = str(v["invalid_at"])[:10]
        date = ("已实现" if zh else "done") if not dated else (f"{date}说，{until}已实现" if zh else f"said {date}, done {until}")
    elif not dated:
        date = ("此前，已不成立" if zh else "before, no longer true") if past(r) else ""
    elif past(r):
        until = str(v["invalid_at"])[:10]
        if until == date:
            date = f"此前，已不成立，截至{until}" if zh else f"before, no longer true as of {until}"
        else:
            date = f"此前：{date} 至 {until}，已不成立" if zh else f"before: {date} to {until}, no longer true"
    if provenance and r.source_ids:
        date = (
            (f"{date}，{cite(r.source_ids, lang)}" if zh else f"{date}, {cite(r.source_ids, lang)}") if date else cite(r.source_ids, lang)
        )
    line = f"- {v.get('source')} —{v.get('relation')}→ {v.get('target')}"
    said = dated_quote(v.get("evidence") or "", str(v.get("target") or ""), r.valid_from or r.created_at, lang) if quote else ""
    if not said:
        return line + ((f"（{date}）" if zh else f" ({date})") if date else "")
    sep = (("；" if past(r) else "：") if zh else ("; " if past(r) else ": ")) if date else ""
    return line + (f"（{date}{sep}“{said}”）" if zh else f' ({date}{sep}"{said}")')


def relation_forms(r: Record, lang: str, *, provenance: bool = False, dated: bool = True) -> list[str]:
    """The relation's line with its quote, then without (for a budget too short for the quote)."""
    full = render_relation(r, lang, provenance=provenance, dated=dated)
    bare = render_relation(r, lang, provenance=provenance, quote=False, dated=dated)
    return [full, bare] if bare != full else [full]


def same_value(a: str, b: str) -> bool:
    """Whether two values name one thing: equal as keys or stems, or one a refinement of the other
    ("上海" / "上海市", "星图" / "星图项目", "Atlas" / "Atlas v2"; "Go" is not "MongoDB")."""
    x, y = entity_key(a), entity_key(b)
    if not (x and y):
        return False
    if x == y or stem(x) == stem(y):
        return True
    short, longer = sorted((x, y), key=len)
    if short.isascii():
        return re.search(rf"(?<![a-z0-9]){re.escape(short)}(?![a-z0-9])", longer) is not None
    return len(short) >= 2 and longer.startswith(short)


def reconcile(relations: Sequence[Record], entities: Sequence[Record] = ()) -> list[Record]:
    """The relations as the supersession rule says they stand, whatever order they were written in:
    per source and canonical predicate (``supersede.canonical``: "搬到" is "住在"), ``supersede.settle``
    (of a single-valued predicate, only the newest said is current; one an older statement
    superseded is current again); then, where the source entity holds the attribute, what it says:
    a target it holds only as past is past (from when it ended), and for a single-valued
    predicate a target it does not hold, said before its current value, is past from then. A
    relation ``invalid_at`` marks as past is never made current by the entity. Returns the
    relations, in their order, with ``invalid_at`` set or cleared in their values."""
    groups: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in relations:
        v = r.value
        if not v.get("alias") and v.get("relation"):
            groups[(v.get("source_key", ""), normalize(kind(str(v["relation"]))))].append(r)
    attributes = {e.key: settled_attributes(e.value.get("attributes") or {}) for e in entities}
    until: dict[str, str | None] = {}
    for (source, predicate), members in groups.items():
        members = sorted(members, key=lambda r: ((r.valid_from or r.created_at), r.created_at))
        now = [
            {
                "value": str(r.value.get("target", "")),
                "valid_from": (r.valid_from or r.created_at).isoformat(),
                "id": r.id,
                "evidence": str(r.value.get("evidence") or ""),
            }
            for r in members
            if not past(r)
        ]
        gone = [
            {
                "value": str(r.value.get("target", "")),
                "valid_from": (r.valid_from or r.created_at).isoformat(),
                "until": str(r.value["invalid_at"]),
                "id": r.id,
            }
            for r in members
            if past(r)
        ]
        now, gone = settle(predicate, now, gone) if len(members) > 1 else (now, gone)
        held = attributes.get(source, {}).get(predicate)
        if held is not None:
            now, gone = _agree(predicate, now, gone, held[1], held[2])
        until.update({c["id"]: None for c in now})
        until.update({p["id"]: p.get("until") or p.get("valid_from") for p in gone})
    out = []
    for r in relations:
        if r.id not in until:
            out.append(r)
            continue
        value = {k: x for k, x in r.value.items() if k != "invalid_at"}
        if until[r.id] is not None:
            value["invalid_at"] = until[r.id]
        out.append(r if value == dict(r.value) else replace(r, value=value))
    return out


def _agree(
    predicate: str, now: list[dict[str, Any]], gone: list[dict[str, Any]], current: list[dict[str, Any]], before: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The current relation targets (``now``) that the entity's attribute (``current``, ``before``:
    its settled values) holds as past, or (single-valued) does not hold and were said before its
    current value, moved to ``gone``."""
    latest = max((instant(c.get("valid_from")) for c in current if instant(c.get("valid_from"))), default=None)
    keep = []
    for c in now:
        if any(same_value(c["value"], str(v.get("value", ""))) for v in current):
            keep.append(c)
            continue
        ended = next((p for p in before if same_value(c["value"], str(p.get("value", "")))), None)
        if ended is not None:
            gone.append({**c, "until": ended.get("until") or (latest.isoformat() if latest else c["valid_from"])})
        elif single_valued(predicate) and latest is not None and (instant(c["valid_from"]) or latest) < latest:
            gone.append({**c, "until": latest.isoformat()})
        else:
            keep.append(c)
    return keep, gone


register_layer("graph", Graph)
