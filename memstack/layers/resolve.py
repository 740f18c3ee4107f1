"""From one batch's extraction to entity and relation changes: which stored entity a name refers
to (``_Resolver``: by key, alias or stem), how a said entity merges into the stored one (grounded
aliases, attributes by ``attributes.update_attribute``), which alias relations join two names into
one entity, which relations a new one supersedes, and what a cessation the user said ends. Only
what the user's own turns ground is kept. Pure functions over the records read from the store:
the extractor (``extractor.Extractor``) applies the changes they return.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from ..budget import split_text
from ..llm.extract import Batch
from ..llm.grounding import name_sources, normalize, overlap, sentence_sources
from ..stores import RecordStore
from ..types import Change, Message, Record, Scope
from .attributes import attribute_values, later, stored, update_attribute
from .fulfil import DONE, completes, completions
from .moves import said_moves
from .names import ASSISTANT_NAMES, SELF_KEY, display_name, entity_key, is_alias, relation_label, self_introduced, stem
from .supersede import canonical, instant, kind, replaced_items, said_as_old, says_change
from .switched import switches
from .verify import RESIGNED, cessations, ends_value, goes_with

# ---- entities ----------------------------------------------------------------------------


def entity_changes(records: RecordStore, user: Scope, batch: Batch, entities: Sequence[Any], relations: Sequence[Any]) -> list[Change]:
    """The batch's entities the turns ground, as puts: each resolved to the stored entity its name
    (or an alias the batch says) refers to and merged into it; a name never said is not stored."""
    current = {r.key: r for r in records.current(user, "entity")}
    resolve = _Resolver(current)
    resolve.add_ends(records.current(user, "relation"))
    aliases = _aliases(batch, entities, relations, resolve)
    changed: dict[str, dict[str, Any]] = {}
    sources_of: dict[str, set[str]] = {}
    for e in [*entities, *_named_values(entities, batch.messages)]:
        if entity_key(e.name) in ASSISTANT_NAMES:
            continue
        names = [e.name, *e.aliases]
        grounded = {n: name_sources(n, batch.messages) for n in names}
        self_named = entity_key(e.name) == SELF_KEY
        if not self_named and not any(grounded.values()):
            continue  # not said: not stored
        canonical = aliases[entity_key(e.name)][1] if entity_key(e.name) in aliases else None
        key = resolve.key([canonical] if canonical else names)
        base = changed.get(key) or (dict(current[key].value) if key in current else _new_entity(canonical or e.name))
        # a name that resolved to another entity ("星图" to 星图项目, "小李" to the user) is its alias
        other_name = key != entity_key(e.name) and not self_named
        e = e.model_copy(
            update={
                "attributes": [a for a in e.attributes if not is_alias(a.key)],
                "aliases": [*e.aliases, *([e.name] if other_name else [])],
            }
        )
        value = _merge_entity(base, e, batch, grounded, self_named, user_said=_said_by_user(grounded, batch.messages))
        changed[key] = value
        resolve.add(key, value)
        sources_of.setdefault(key, set()).update(i for ids in grounded.values() for i in ids)
    for alias_key, (alias, canonical) in aliases.items():  # an alias named only in the alias relation
        key = resolve.key([canonical])
        base = changed.get(key) or (dict(current[key].value) if key in current else (_new_entity(canonical) if key == SELF_KEY else None))
        ids = name_sources(alias, batch.messages)
        if base is None or not ids:
            continue
        if alias_key not in {entity_key(n) for n in [key, base.get("name", ""), *base.get("aliases", [])]}:
            changed[key] = {**base, "aliases": [*base.get("aliases", []), display_name(alias)]}
            resolve.add(key, changed[key])
            sources_of.setdefault(key, set()).update(ids)
    when = batch.messages[-1].timestamp
    out = []
    for key, value in changed.items():
        ids = tuple(sorted(sources_of.get(key, set()))) or tuple(m.id for m in batch.messages)
        out.append(Change("put", "entity", key, value, ids, when))
    return out


def _aliases(batch: Batch, entities: Sequence[Any], relations: Sequence[Any], resolve: _Resolver) -> dict[str, tuple[str, str]]:
    """alias key -> (alias, canonical name), from alias relations ("莫尔索是小李的笔名") and the
    user's self-introductions ("我叫小李": 小李 is the user). The canonical end is the user,
    else the one already known, else the one with more statements, else the target."""
    subjects: dict[str, int] = {}
    for e in entities:
        subjects[entity_key(e.name)] = subjects.get(entity_key(e.name), 0) + len(e.attributes)
    out: dict[str, tuple[str, str]] = {}
    for r in relations:
        found = evidence_for(r, batch.messages)
        if found is None or not is_alias(r.relation, found[0], r.source, r.target):
            continue
        a, b = r.source.strip(), r.target.strip()
        if entity_key(a) == entity_key(b):
            continue
        known_a, known_b = resolve.find(a) is not None, resolve.find(b) is not None
        if SELF_KEY in (entity_key(a), entity_key(b)):
            canonical, alias = (a, b) if entity_key(a) == SELF_KEY else (b, a)
        elif known_a != known_b:
            canonical, alias = (a, b) if known_a else (b, a)
        elif subjects.get(entity_key(a), 0) != subjects.get(entity_key(b), 0):
            canonical, alias = (a, b) if subjects.get(entity_key(a), 0) > subjects.get(entity_key(b), 0) else (b, a)
        else:
            canonical, alias = b, a
        out[entity_key(alias)] = (alias, canonical)
        resolve.add(resolve.key([canonical]), {"name": canonical, "aliases": [alias]})
    for name in self_introduced(
        batch.messages,
        [n for e in entities for n in (e.name, *e.aliases)] + [x for r in relations for x in (r.source, r.target)],
        subjects=[e.name for e in entities],
    ):
        if entity_key(name) != SELF_KEY and resolve.find(name) in (None, SELF_KEY):
            out[entity_key(name)] = (name, "用户")
            resolve.add(SELF_KEY, {"name": "用户", "aliases": [name]})
    return out


# ---- relations ---------------------------------------------------------------------------


def relation_changes(
    records: RecordStore, user: Scope, batch: Batch, relations: Sequence[Any], pending: Sequence[Change] = ()
) -> list[Change]:
    """Grounded relations as puts; ``pending``: this batch's entity changes, so a name resolves to
    the entity it joins in this same batch ("小李" to the user after "我叫小李"). A relation that
    another replaces (``supersede``) is kept with ``invalid_at`` set in its value."""
    entities: dict[str, Any] = {r.key: r for r in records.current(user, "entity")}
    entities.update({c.key: c.value for c in pending if c.kind == "entity" and c.value is not None})
    resolve = _Resolver(entities)
    known = {r.key: r for r in records.current(user, "relation")}
    resolve.add_ends(known.values())
    out: dict[str, Change] = {}
    for r in relations:
        if not (r.source.strip() and r.target.strip() and r.relation.strip()):
            continue
        found = evidence_for(r, batch.messages)
        if found is None:
            continue  # no turn supports it: not stored
        evidence, sources, confidence = found
        r = r.model_copy(update={"evidence": evidence})
        src, dst = resolve.find(r.source) or entity_key(r.source), resolve.find(r.target) or entity_key(r.target)
        resolve.add(src, {"name": r.source})
        resolve.add(dst, {"name": r.target})
        label = relation_label(r.relation, r.source, r.target)
        key = f"{src}\x1f{normalize(label)}\x1f{dst}"
        when = max(m.timestamp for m in batch.messages if m.id in sources)
        value = {
            "source": r.source.strip(),
            "relation": label,
            "target": r.target.strip(),
            "source_key": src,
            "target_key": dst,
            "evidence": (r.evidence or "").strip(),
            "confidence": confidence,
            "alias": is_alias(r.relation, r.evidence, r.source, r.target),
        }
        earlier = out[key].value if key in out else (known[key].value if key in known else None)
        if earlier is not None:
            # said again: the first evidence and date stand (the fact was true since then);
            # the new turns join its sources, and a higher confidence is kept
            first = dict(earlier)
            value = first if confidence <= float(first.get("confidence", 0)) else {**first, "confidence": confidence}
            when = (known[key].valid_from if key in known else out[key].at) or when
            if first.get("invalid_at") and not said_as_old(r.target, evidence) and not getattr(r, "past", False):
                value = {k: v for k, v in value.items() if k != "invalid_at"}  # true again
        if getattr(r, "past", False) or said_as_old(r.target, evidence):
            value = {**value, "invalid_at": value.get("invalid_at") or when.isoformat()}  # "从上海搬到深圳": 上海 is past
        elif not value["alias"]:
            for other in _superseded(value, evidence, [*known.values(), *out.values()], skip=key, cue=says_change(r.relation)):
                since = getattr(other, "valid_from", None) or getattr(other, "at", None)
                if since is not None and instant(since) and instant(since) > instant(when):
                    # said after this one (batches applied out of order): it stays current
                    value = {**value, "invalid_at": min(value.get("invalid_at") or since.isoformat(), since.isoformat())}
                    continue
                out[other.key] = Change(
                    "put",
                    "relation",
                    other.key,
                    {**other.value, "invalid_at": when.isoformat()},
                    tuple(getattr(other, "source_ids", ())),
                    since,
                )
        out[key] = Change("put", "relation", key, value, sources, when)
    return list(out.values())


# ---- what a cessation ends -------------------------------------------------------------


def ended_changes(records: RecordStore, user: Scope, batch: Batch, pending: list[Change]) -> list[Change]:
    """``pending`` with what the batch's user turns end ended (``verify.cessations``): after
    "已经不去健身房了", "I quit smoking", "卡罗拉卖给了我表弟" or "从MySQL迁移到了TiDB", every
    current value of its owner (the user, or the one the words name) that the cessation names,
    in any attribute or relation, is past from when it was said, whether or not the model wrote
    a statement for it. Values said after the cessation stay as they are. So does what was said as
    a part of an ended value, in the sentence that said it ("…游泳馆的卡，每周去两次，主要练蛙泳":
    练=蛙泳 ends with 游泳馆, ``verify.goes_with``); a clause with a subject or a setting of its own
    stays. A change of job or home said without its new value ("我又换工作了", "we've moved") ends
    the user's values of that kind said before it (``switched``)."""
    ended = cessations(batch.messages)
    came_true = completions(batch.messages)
    switched = switches(batch.messages)
    if not ended and not came_true and not switched:
        return pending
    changes = {(c.kind, c.key): c for c in pending}
    entities = {
        r.key: Change("put", "entity", r.key, dict(r.value), tuple(r.source_ids), r.valid_from) for r in records.current(user, "entity")
    }
    entities.update({c.key: c for c in pending if c.kind == "entity" and c.value is not None})
    relations = {
        r.key: Change("put", "relation", r.key, dict(r.value), tuple(r.source_ids), r.valid_from) for r in records.current(user, "relation")
    }
    relations.update({c.key: c for c in pending if c.kind == "relation" and c.value is not None})
    for c in ended:
        parts = _end(c, batch, entities, relations, changes, lambda name, value, evidence, c=c: ends_value(c, name, value))
        # what was said as a part of an ended value, or of the thing the words end, in its sentence
        # (not the cessation's own sentence), ends with it (goes_with)
        role = bool(RESIGNED.search(c.quote))
        # an inference, so a value the batch's user says again after the cessation stays ("从字节辞职了",
        # then "下周一入职美团，还是做前端": 前端开发 said at 字节 is still the job)
        again = [m.text for m in batch.messages if m.role == "user" and m.timestamp > c.message.timestamp]
        _end(
            c,
            batch,
            entities,
            relations,
            changes,
            lambda name, value, evidence, parts=parts, c=c, role=role, again=again: (
                normalize(evidence) != normalize(c.quote)
                and not any(overlap(value, text) >= 0.5 for text in again)
                and (
                    goes_with(evidence, c.object, value, role=role)
                    or any(normalize(evidence) == normalize(said) and goes_with(said, old, value, role=role) for said, old in parts)
                )
            ),
        )
    for s in switched:  # "我又换工作了": the job said before ends, whether or not the new one was written
        _end(s, batch, entities, relations, changes, lambda name, value, evidence, s=s: s.ends(name, value, evidence))
    for done in came_true:  # a plan that came true ends, done ("搬好啦": fulfil)
        plans = _end(
            done, batch, entities, relations, changes, lambda name, value, evidence, d=done: completes(d, name, value, evidence), True
        )
        if done.kind == "move" and not done.whose:
            _moved(done, plans, batch, entities, changes)
    return list(changes.values())


def _moved(
    done: Any, plans: list[tuple[str, str]], batch: Batch, entities: dict[str, Change], changes: dict[tuple[str, str], Change]
) -> None:
    """A planned move that came true is where the user lives from then ("下个月搬到雨花区", then
    "搬好啦": 住在=雨花区 from that day, the old place past): the place the move rule reads in the
    plan's own words (``moves.said_moves``), one place only."""
    places = {m.object for evidence, _value in plans for m in said_moves([Message(role="user", content=evidence)], batch.lang) if evidence}
    me = entities.get(SELF_KEY)
    if len(places) != 1 or me is None:
        return
    value = dict(me.value or {})
    attributes = dict(value.get("attributes", {}))
    key = "住在" if batch.lang == "zh" else "lives in"
    key = next((k for k in attributes if kind(k) == kind(key)), key)
    new = {"value": places.pop(), "source_ids": [done.message.id], "valid_from": done.message.timestamp.isoformat(), "evidence": done.quote}
    attributes[key] = update_attribute(attributes.get(key), key, new, done.quote, batch.lang, cue=True)
    value["attributes"] = attributes
    entities[SELF_KEY] = changes[("entity", SELF_KEY)] = Change(
        "put", "entity", SELF_KEY, value, tuple(sorted({*me.source_ids, done.message.id})), batch.messages[-1].timestamp
    )


def _end(
    c: Any,
    batch: Batch,
    entities: dict[str, Change],
    relations: dict[str, Change],
    changes: dict[tuple[str, str], Change],
    hit: Any,
    done: bool = False,
) -> list[tuple[str, str]]:
    """Ends, from when ``c`` was said, the current values of its owners that ``hit(name, value,
    evidence)`` picks (said no later than it), in ``entities``, ``relations`` and ``changes``;
    returns the (evidence, value) of each one ended. ``done``: they ended because they came true
    (a plan carried out), marked ``fulfil.DONE``."""
    mark = {DONE: True} if done else {}
    at = c.message.timestamp
    owners = _owners(c.whose, entities)
    ended: list[tuple[str, str]] = []
    for key in owners:
        e = entities.get(key)
        if e is None:
            continue
        value = dict(e.value or {})
        attributes = dict(value.get("attributes", {}))
        touched = False
        for name, attribute in attributes.items():
            current, past = attribute_values(attribute)
            gone = [
                x
                for x in current
                if not later(x.get("valid_from"), at.isoformat()) and hit(name, str(x.get("value", "")), str(x.get("evidence", "")))
            ]
            if gone:
                touched = True
                ended += [(str(x.get("evidence", "")), str(x.get("value", ""))) for x in gone]
                attributes[name] = stored(
                    [x for x in current if x not in gone], past + [{**x, "until": at.isoformat(), **mark} for x in gone], batch.lang
                )
        if touched:
            value["attributes"] = attributes
            entities[key] = changes[("entity", key)] = Change(
                "put", "entity", key, value, tuple(sorted({*e.source_ids, c.message.id})), batch.messages[-1].timestamp
            )
    for key, r in relations.items():
        v = dict(r.value or {})
        if v.get("invalid_at") or v.get("alias") or (r.at and instant(r.at) and instant(r.at) > instant(at)):
            continue
        relation, evidence = str(v.get("relation", "")), str(v.get("evidence", ""))
        forward = v.get("source_key") in owners and hit(relation, str(v.get("target", "")), evidence)
        backward = not forward and v.get("target_key") in owners and hit(relation, str(v.get("source", "")), evidence)
        if forward or backward:
            ended.append((evidence, str(v.get("target" if forward else "source", ""))))
            relations[key] = changes[("relation", key)] = Change(
                "put", "relation", key, {**v, "invalid_at": at.isoformat(), **mark}, r.source_ids, r.at
            )
    return ended


# ---- resolving names, grounding, merging ---------------------------------------------------


class _Resolver:
    """Finds the entity a name refers to: by canonical key, then by alias, then by stem: a name that
    is a known name plus a type word ("星图项目" for 星图), or a known name's stem ("星图" for 星图项目)."""

    def __init__(self, current: dict[str, Any]) -> None:
        self._names: dict[str, str] = {}
        self._stems: dict[str, str] = {}
        for key, record in current.items():
            self.add(key, record.value if isinstance(record, Record) else record)

    def add(self, key: str, value: Any) -> None:
        if not key:
            return
        for n in [key, value.get("name", ""), *value.get("aliases", [])]:
            if n:
                k = entity_key(n)
                self._names.setdefault(k, key)
                if stem(k) != k:
                    self._stems.setdefault(stem(k), key)

    def add_ends(self, relations: Iterable[Record]) -> None:
        """The ends of stored relations, after the entities: a name that is no entity still joins
        its near-duplicates ("atlas" and "the atlas project")."""
        for v in (r.value for r in relations):
            self.add(v.get("source_key", ""), {"name": v.get("source", "")})
            self.add(v.get("target_key", ""), {"name": v.get("target", "")})

    def find(self, name: str) -> str | None:
        k = entity_key(name)
        return self._names.get(k) or self._names.get(stem(k)) or self._stems.get(k)

    def key(self, names: Sequence[str]) -> str:
        for n in names:
            found = self.find(n)
            if found:
                return found
        return entity_key(names[0])


def evidence_for(r: Any, messages: Sequence[Message]) -> tuple[str, tuple[str, ...], float] | None:
    """The quote, source turns and confidence that ground a relation, taken from the turns: the
    sentence naming both ends (0.9), a turn naming both (0.7), the model's own quote where the
    turns contain it (its overlap), or None. "用户"/"I" as an end matches the user's own turns."""

    def names(name: str, text: str, m: Message) -> bool:
        return (entity_key(name) == SELF_KEY and m.role == "user") or normalize(name) in normalize(text)

    messages = [m for m in messages if m.role == "user"]  # the user's own words, never the assistant's

    for m in messages:
        for part in split_text(m.text):
            if names(r.source, part, m) and names(r.target, part, m):
                return part.strip(), (m.id,), 0.9
    for m in messages:
        if names(r.source, m.text, m) and names(r.target, m.text, m):
            return m.text.strip()[:300], (m.id,), 0.7
    # the subject named earlier in the batch, the object in this sentence ("我在开发知识中台" ...
    # "后端使用SpringBoot"): the batch is the context that resolves it
    if any(names(r.source, m.text, m) for m in messages):
        for m in messages:
            for part in split_text(m.text):
                if normalize(r.target) in normalize(part) and overlap(r.relation, part) >= 0.5:
                    return part.strip(), (m.id,), 0.6
    if r.evidence:
        sources, score = sentence_sources(r.evidence, messages)
        if sources:
            return r.evidence.strip(), sources, round(score * 0.8, 2)
    return None


def _owners(whose: str, entities: dict[str, Any]) -> set[str]:
    """The entity keys a cessation's owner words name: the user's for none ("" : "我", a dropped
    subject), else the entities whose name or alias those words hold ("我妹妹" for 妹妹, "订单服务");
    a bare pronoun ("他") names no entity it could be told apart by, so nothing."""
    if not whose:
        return {SELF_KEY}
    words = re.sub(r"^(?:我的?|咱的?|我们的?|\bmy\s+|\bour\s+)", "", normalize(whose)).strip()
    out = set()
    for key, change in entities.items():
        value = change.value or {}
        for name in (key, value.get("name", ""), *value.get("aliases", [])):
            n = normalize(name)
            if len(n) >= 2 and len(words) >= 2 and (n in words or words in n):
                out.add(key)
    return out


def _superseded(value: dict[str, Any], sentence: str, others: Sequence[Any], *, skip: str, cue: bool = False) -> list[Any]:
    """The current relations (Records, or Changes of this batch) a new relation replaces: from the
    same source, with the same canonical predicate, to another target, as ``supersede.replaced``
    decides (a single-valued predicate, or a change cue in the new one's evidence)."""
    predicate = canonical(value["relation"])
    same = {}
    for o in others:
        v = o.value or {}
        if (
            o.key == skip
            or v.get("invalid_at")
            or v.get("alias")
            or v.get("source_key") != value["source_key"]
            or normalize(kind(v.get("relation", ""))) != normalize(kind(predicate))
        ):
            continue
        if v.get("target_key") != value["target_key"]:
            same[o.key] = o
    return replaced_items(
        predicate,
        sentence,
        list(same.values()),
        value["target"],
        lambda o: str(o.value.get("target", "")),
        lambda o: str(o.value.get("evidence") or ""),
        cue=cue,
    )


def _named_values(entities: Sequence[Any], messages: Sequence[Message]) -> list[Any]:
    """Attribute values that name things said in the turns ("后端使用: SpringBoot", "开发: 知识中台"):
    things in their own right, so they become entities too: a capitalised name, or a short
    all-Chinese noun phrase (Chinese has no capitals; no digits, so amounts and dates stay values)."""
    from ..llm.extract import Entity

    named = {entity_key(n) for e in entities for n in [e.name, *e.aliases]}
    out = []
    for e in entities:
        for attr in e.attributes:
            value = attr.value.strip()
            if not value or entity_key(value) in named or len(value) > 40 or len(value.split()) > 3 or not name_sources(value, messages):
                continue
            chinese = all("\u3400" <= c <= "\u9fff" for c in value)
            if not any(c.isupper() for c in value) and not (chinese and len(value) <= 12):
                continue  # a plain English phrase or a number is a value, not a thing
            named.add(entity_key(value))
            out.append(Entity(name=value))
    return out


def _new_entity(name: str) -> dict[str, Any]:
    shown = display_name(name)
    if entity_key(shown) == SELF_KEY:
        shown = "User" if shown.isascii() else "用户"
    return {"name": shown, "type": "", "description": "", "aliases": [], "attributes": {}}


def _said_by_user(grounded: dict[str, tuple[str, ...]], messages: Sequence[Message]) -> bool:
    users = {m.id for m in messages if m.role == "user"}
    return any(set(ids) & users for ids in grounded.values())


def _merge_entity(
    base: dict[str, Any], e: Any, batch: Batch, grounded: dict[str, tuple[str, ...]], self_named: bool, *, user_said: bool
) -> dict[str, Any]:
    value = dict(base)
    value["type"] = base.get("type") or e.type.strip()
    if not value.get("description") and e.description.strip() and sentence_sources(e.description, batch.messages, threshold=0.3)[0]:
        value["description"] = e.description.strip()  # the first one the turns support; kept after
    aliases = list(base.get("aliases", []))
    for a in e.aliases:
        if (
            a.strip()
            and grounded.get(a)
            and normalize(a) not in {normalize(x) for x in aliases}
            and normalize(a) != normalize(value.get("name", ""))
        ):
            aliases.append(a.strip())
    value["aliases"] = aliases
    attributes = dict(base.get("attributes", {}))
    for attr in e.attributes:
        k, v = canonical(attr.key), attr.value.strip()
        if not k or not v:
            continue
        k = next((x for x in attributes if kind(x) == kind(k)), k)  # "lives in" of a user with 住在
        users = [m for m in batch.messages if m.role == "user"]  # the assistant's words are never the user's facts
        sources, _ = sentence_sources(v, users, threshold=0.3)
        if not sources:
            continue  # a value the user did not say
        when = max(m.timestamp for m in users if m.id in sources)
        said = _sentence_naming(v, users, sources)
        attributes[k] = update_attribute(
            attributes.get(k),
            k,
            {"value": v, "source_ids": list(sources), "valid_from": when.isoformat(), "evidence": said.strip()[:300]},
            said,
            batch.lang,
            past=getattr(attr, "past", False),
            cue=says_change(attr.key),
        )
    value["attributes"] = attributes
    value["confidence"] = max(float(base.get("confidence", 0.0)), 0.9 if (user_said or self_named) else 0.7)
    if e.fields:  # a developer's entity schema: its other fields as the model gave them, newest wins
        value["fields"] = {**base.get("fields", {}), **e.fields}
    return value


def _sentence_naming(value: str, messages: Sequence[Message], ids: Sequence[str]) -> str:
    """The sentence of the source turns that names the value (the whole first turn otherwise)."""
    chosen = [m for m in messages if m.id in ids]
    for m in chosen:
        for part in split_text(m.text):
            if normalize(value) in normalize(part):
                return part
    return chosen[0].text if chosen else ""
