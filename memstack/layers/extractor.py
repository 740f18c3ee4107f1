"""The write side shared by the model-backed layers (summary, entities, graph, state).

Turns are batched per thread (every ``batch_messages`` messages or ``batch_tokens`` tokens;
``flush()`` takes what is waiting) and each batch costs ONE model call whose schema holds only
the parts the stack's layers need. The output is grounded in the turns (``grounding``), turned
into Changes, and applied to the RecordStore in one transaction with its audit events; the
batch's facts are also indexed for retrieval as keys pointing to their source turns.

Failure never loses a turn: when the model's output stays invalid the job fails, its usage is
recorded with the error, and the queue retries the same batch later (the cursor did not move).
Reruns are idempotent: a put of the value already current is a no-op.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..budget import split_text
from ..errors import InvalidInput, JobError, ModelOutputError, UsageError
from ..llm.base import ChatModel
from ..llm.custom import check_schema, entities_of, entity_items, extract_schema, relation_items, relations_of, to_entity
from ..llm.extract import Batch, Extracted, extract, language, merge_notes, unpack
from ..llm.extract import sentence as note_text
from ..llm.grounding import name_sources, normalize, overlap, sentence_sources
from ..llm.metered import Metered
from ..llm.priority import background
from ..stores import Store, records_of
from ..tokens import TokenCounter, get_counter
from ..types import Change, Message, Record, Scope, Unit
from . import register_layer
from .base import LayerOutput, ReadRequest, Waiting, WriteRequest

# the name rules, re-exported: the layers and tests import them from here
from .names import (  # noqa: F401
    _FIRST_PERSON,
    _NAME_PREFIX,
    _SELF_INTRO,
    _TYPE_SUFFIX,
    ALIAS_RELATIONS,
    ALIAS_WORDS,
    ASSISTANT_NAMES,
    SELF_KEY,
    SELF_NAMES,
    display_name,
    entity_key,
    first_person,
    is_alias,
    relation_label,
    stem,
)
from .notes import apply_updates, grounded_note, said_notes
from .supersede import canonical, instant, replaced, said_as_old, says_change
from .verify import cessations, ends_value, verify

#: which extraction parts each model-backed layer needs
NEEDS: dict[str, tuple[str, ...]] = {
    "summary": ("facts",),
    "summary-buffer": ("facts",),
    "entities": ("entities",),
    "profile": ("entities",),
    "graph": ("entities", "relations"),
    "state": ("state",),
}


@dataclass
class Extractor:
    """The shared write side. ``model``: a provider string or ChatModel (default: the local one)."""

    store: Store
    model: str | ChatModel | None = None
    #: the stack it serves: decides which parts are extracted and whether facts are indexed
    stack: tuple[str, ...] = ()
    batch_messages: int = 24
    batch_tokens: int = 1500
    #: the model's answer is capped at this many tokens per batch
    output_tokens: int = 768
    #: the summary's notes are merged by the model when they grow past this many tokens
    summary_tokens: int = 1200
    #: names of the user's known entities shown to the model so it reuses them
    known_entities: int = 20
    #: keys the state may have, with their meaning: a JSON schema object's "properties"
    state_schema: dict[str, Any] | None = None
    #: the developer's pydantic model of the entities (``llm.custom``): asked for in a call of its
    #: own, mapped onto entity records and grounded as memstack's are (not kept in the profile:
    #: each process that runs the jobs passes it, as it passes a model object)
    entity_schema: Any = None
    #: keep the JSON state per thread instead of per user
    state_per_thread: bool = False
    embedder: Any = None
    #: the vector index of the facts' retrieval keys: the retrieval layer's (an index outside
    #: the store, e.g. Milvus), else the store's own
    vectors: Any = None
    #: the parts to extract, as a job name carries them ("facts,entities"); default: from ``stack``
    variant: str | None = None
    counter: TokenCounter | str | None = None
    name: str = "extract"
    scope: str = "thread"
    history: str = "none"
    _model: ChatModel | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.variant and not set(self.variant.split(",")) <= {"facts", "entities", "relations", "state", "keys"}:
            raise UsageError(f"unknown extraction parts {self.variant!r}; known: facts, entities, relations, state, keys")
        records_of(self.store)  # fails now, with the reason, on a backend without records
        if self.batch_messages < 1 or self.batch_tokens < 1:
            raise UsageError("batch_messages and batch_tokens must be positive")
        self.counter = get_counter(self.counter)
        if self.entity_schema is not None:
            entity_items(check_schema(self.entity_schema, "entity_schema"))  # a schema without entities fails now

    @property
    def parts(self) -> tuple[str, ...]:
        if self.variant:
            wanted = set(self.variant.split(","))
        else:
            wanted = {p for layer in self.stack for p in NEEDS.get(layer, ())} or {p for ps in NEEDS.values() for p in ps}
        return tuple(p for p in ("facts", "entities", "relations", "state") if p in wanted)

    @property
    def index_facts(self) -> bool:
        """Whether facts become retrieval keys: when the stack retrieves (or the job name says so)."""
        return "keys" in (self.variant or "").split(",") if self.variant else "retrieval" in self.stack

    @property
    def job_name(self) -> str:
        """The queue's name for this job: it carries the parts, so any worker extracts the same."""
        return f"{self.name}:{','.join(self.parts + (('keys',) if self.index_facts and 'facts' in self.parts else ()))}"

    @property
    def chat(self) -> ChatModel:
        if self._model is None:
            from ..llm import get_chat_model

            self._model = get_chat_model(self.model)
        return self._model

    def read(self, request: ReadRequest, messages: list[Message]) -> LayerOutput:
        return LayerOutput(messages)

    # ---- write side --------------------------------------------------------------------------

    def write(self, request: WriteRequest) -> int | Waiting | None:
        turns = [m for m in request.messages if m.role in ("user", "assistant") and m.text.strip()]
        if not turns:
            return None
        pending = sum(self.counter.count(m.text) for m in turns)
        if not request.final and len(turns) < self.batch_messages and pending < self.batch_tokens:
            return Waiting(request.cursor)  # the turns stay queued until the batch fills or a flush
        # queued work: an answer someone waits for goes before these calls on a one-call-at-a-time model
        with background():
            for chunk in self._chunks(turns):
                self._run(request.scope, chunk)
        return None

    def _chunks(self, turns: list[Message]) -> list[list[Message]]:
        """Batches that fit the model: its window minus the answer and the instructions."""
        room = max(256, min(self.batch_tokens * 2, self.chat.context_window - self.output_tokens - 700))
        out: list[list[Message]] = [[]]
        used = 0
        for m in (piece for t in turns for piece in _pieces(t, room, self.chat.count_tokens)):
            cost = self.chat.count_tokens(m.text) + 8
            if out[-1] and used + cost > room:
                out.append([])
                used = 0
            out[-1].append(m)
            used += cost
        return out

    def _run(self, scope: Scope, turns: list[Message]) -> None:
        metered = Metered(self.chat)
        records = self.store.records
        known = (
            [r.value.get("name", r.key) for r in records.current(scope.user(), "entity")][-self.known_entities :]
            if "entities" in self.parts
            else []
        )
        try:
            batch = self._extract(metered, turns, known)
        except ModelOutputError as exc:
            metered.commit(getattr(self.store, "usage", None), scope, self.name, error=str(exc))
            if len(turns) > 1:  # a smaller batch asks for less output: halve it rather than stall the thread
                half = len(turns) // 2
                self._run(scope, turns[:half])
                self._run(scope, turns[half:])
                return
            raise JobError(f"the model's extraction stayed invalid; the batch stays queued: {exc}") from exc
        metered.commit(getattr(self.store, "usage", None), scope, self.name)
        batch = self._verified(scope, batch)
        value = batch.extracted
        if "facts" in self.parts:
            records.apply(scope, self._summary_changes(scope, batch, value.facts), layer="summary")
            self._index_facts(scope, batch, value.facts)
        user_changes: list[Change] = []
        if "entities" in self.parts:
            user_changes += self._entity_changes(scope.user(), batch, value.entities, value.relations)
        if "relations" in self.parts:
            user_changes += self._relation_changes(scope.user(), batch, value.relations, pending=user_changes)
        if "state" in self.parts and self.state_per_thread:
            records.apply(scope, self._state_changes(batch, value.state), layer=self.name)
        elif "state" in self.parts:
            user_changes += self._state_changes(batch, value.state)
        if "entities" in self.parts or "relations" in self.parts:
            user_changes = self._ended(scope.user(), batch, user_changes)
        user_changes += self._rejected_changes(batch)
        if user_changes:
            records.apply(scope.user(), user_changes, layer=self.name)

    def _verified(self, scope: Scope, batch: Batch) -> Batch:
        """The batch with only the statements the user's own words support (``verify``); the
        others go to the audit trail as ``rejected`` records with their reasons."""
        statements = getattr(batch.result.value, "memories", None)
        if not statements:
            return batch
        me = self.store.records.current(scope.user(), "entity", [SELF_KEY])
        known = [n for s in statements for n in (s.subject, s.object)]
        self_names = [
            *(me[0].value.get("aliases", []) if me else []),
            *self_introduced(batch.messages, known, subjects=[x.subject for x in statements]),
        ]
        first = batch.messages[0]
        earlier = (
            self.store.history.read(scope, until=first.timestamp, last=len(batch.messages) + 6, roles=("user",))
            if first.seq is not None
            else []
        )
        context = [m for m in earlier if m.seq is not None and m.seq < first.seq][-4:]
        checked = verify(statements, batch.messages, self_names=self_names, context=context)
        if not checked.rejected and checked.kept == list(statements):
            return batch
        kept = unpack(batch.result.value.model_copy(update={"memories": checked.kept}), batch.lang)
        extracted = (
            replace(kept, entities=[*kept.entities, *[e for e in batch.extracted.entities if e.fields]])
            if any(e.fields for e in batch.extracted.entities)
            else kept
        )
        return replace(batch, extracted=replace(extracted, state=batch.extracted.state), rejected=tuple(checked.rejected))

    def _ended(self, user: Scope, batch: Batch, pending: list[Change]) -> list[Change]:
        """``pending`` with what the batch's user turns end ended (``verify.cessations``): after
        "已经不去健身房了", "I quit smoking", "卡罗拉卖给了我表弟" or "从MySQL迁移到了TiDB", every
        current value of its owner (the user, or the one the words name) that the cessation names,
        in any attribute or relation, is past from when it was said, whether or not the model wrote
        a statement for it. Values said after the cessation stay as they are."""
        ended = cessations(batch.messages)
        if not ended:
            return pending
        changes = {(c.kind, c.key): c for c in pending}
        entities = {
            r.key: Change("put", "entity", r.key, dict(r.value), tuple(r.source_ids), r.valid_from)
            for r in self.store.records.current(user, "entity")
        }
        entities.update({c.key: c for c in pending if c.kind == "entity" and c.value is not None})
        relations = {
            r.key: Change("put", "relation", r.key, dict(r.value), tuple(r.source_ids), r.valid_from)
            for r in self.store.records.current(user, "relation")
        }
        relations.update({c.key: c for c in pending if c.kind == "relation" and c.value is not None})
        for c in ended:
            at = c.message.timestamp
            owners = _owners(c.whose, entities)
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
                        if ends_value(c, name, str(x.get("value", ""))) and not _later(x.get("valid_from"), at.isoformat())
                    ]
                    if gone:
                        touched = True
                        attributes[name] = _attribute(
                            [x for x in current if x not in gone], past + [{**x, "until": at.isoformat()} for x in gone], batch.lang
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
                forward = v.get("source_key") in owners and ends_value(c, str(v.get("relation", "")), str(v.get("target", "")))
                backward = v.get("target_key") in owners and ends_value(c, str(v.get("relation", "")), str(v.get("source", "")))
                if forward or backward:
                    relations[key] = changes[("relation", key)] = Change(
                        "put", "relation", key, {**v, "invalid_at": at.isoformat()}, r.source_ids, r.at
                    )
        return list(changes.values())

    def _rejected_changes(self, batch: Batch) -> list[Change]:
        out = []
        when = batch.messages[-1].timestamp
        users = tuple(m.id for m in batch.messages if m.role == "user") or tuple(m.id for m in batch.messages)
        for r in batch.rejected:
            said = f"{r.statement.subject}|{r.statement.predicate}|{r.statement.object}"
            key = hashlib.sha256(f"{said}\x1f{users[0]}".encode()).hexdigest()[:24]
            out.append(Change("put", "rejected", key, {"statement": said, "reason": r.reason, "quote": r.quote}, users, when))
        return out

    def _extract(self, model: ChatModel, turns: list[Message], known: list[str]) -> Batch:
        """One call for the parts of memstack's schema; with an entity schema, the entities (and
        the relations, when that schema has them, as a ``KnowledgeGraph`` does) come from a second
        call in the developer's schema (its items mapped onto memstack's Entity and Relation)."""
        custom = self.entity_schema is not None and "entities" in self.parts
        own_relations = custom and "relations" in self.parts and relation_items(self.entity_schema) is not None
        theirs = ({"entities", "relations"} if own_relations else {"entities"}) if custom else set()
        parts = tuple(p for p in self.parts if p not in theirs)
        batch = extract(model, turns, parts, known=known, max_tokens=self.output_tokens, state_keys=self._state_keys()) if parts else None
        if not custom:
            assert batch is not None
            return batch
        result = extract_schema(
            model, turns, self.entity_schema, task="graph" if own_relations else "entities", known=known, max_tokens=self.output_tokens
        )
        entities = [to_entity(item) for item in entities_of(result.value)]
        if batch is None:
            return Batch(
                tuple(turns), language(turns), result, Extracted([], entities, relations_of(result.value) if own_relations else [], [])
            )
        relations = relations_of(result.value) if own_relations else batch.extracted.relations
        return replace(batch, extracted=replace(batch.extracted, entities=entities, relations=relations))

    # ---- summary -----------------------------------------------------------------------------

    def _summary_changes(self, scope: Scope, batch: Batch, facts: Sequence[str]) -> list[Change]:
        current = self.store.records.current(scope, "summary", ["summary"])
        old = dict(current[0].value) if current else {"items": []}
        items = list(old.get("items", []))
        seen = {normalize(i["text"]) for i in items}
        statements = {note_text(s, batch.lang): s for s in getattr(batch.result.value, "memories", [])}
        fresh = []
        for fact in facts:
            text = fact.strip()
            if not text or normalize(text) in seen:
                continue
            seen.add(normalize(text))
            fresh.append(grounded_note(text, batch.messages, statements.get(text)))
        # what the notes do not carry of a user turn is quoted, so no covered turn goes unsaid
        fresh += [n for n in said_notes(batch.messages, items + fresh, batch.lang) if normalize(n["text"]) not in seen]
        items = apply_updates(items, fresh, batch.messages)
        if sum(self.counter.count(i["text"]) for i in items) > self.summary_tokens:
            items = self._compress(scope, items, batch.lang)
        last = batch.messages[-1]
        value = {**old, "items": items, "covers_until": max(int(old.get("covers_until", 0)), last.seq or 0), "lang": batch.lang}
        return [Change("put", "summary", "summary", value, tuple(m.id for m in batch.messages), last.timestamp)]

    def _compress(self, scope: Scope, items: list[dict[str, Any]], lang: str) -> list[dict[str, Any]]:
        """Merge the notes with the model, in chunks that fit its window; each merged note keeps
        the date and sources of the notes it draws on. A failed merge keeps the notes as they are."""
        room = max(256, self.chat.context_window - self.output_tokens - 500)
        chunks: list[list[dict[str, Any]]] = [[]]
        used = 0
        for item in items:
            cost = self.chat.count_tokens(item["text"]) + 12
            if chunks[-1] and used + cost > room:
                chunks.append([])
                used = 0
            chunks[-1].append(item)
            used += cost
        merged: list[dict[str, Any]] = []
        for chunk in chunks:
            metered = Metered(self.chat)
            try:
                notes = merge_notes(metered, chunk, lang, max_tokens=self.output_tokens)
            except ModelOutputError as exc:
                metered.commit(getattr(self.store, "usage", None), scope, "summary", error=str(exc))
                merged += chunk
                continue
            metered.commit(getattr(self.store, "usage", None), scope, "summary")
            merged += notes
        return merged

    def _index_facts(self, scope: Scope, batch: Batch, facts: Sequence[str]) -> None:
        """Facts as retrieval keys pointing to their turns (only when the stack retrieves)."""
        if not self.index_facts or not hasattr(self.store, "units"):
            return
        units = []
        for fact in facts:
            text = fact.strip()
            if not text:
                continue
            sources, _ = sentence_sources(text, batch.messages, threshold=0.2)
            sources = sources or tuple(m.id for m in batch.messages)
            when = max(m.timestamp for m in batch.messages if m.id in sources)
            uid = "f-" + hashlib.sha256(f"{scope.thread_id}\x1f{normalize(text)}".encode()).hexdigest()[:24]
            units.append(Unit(uid, scope, text, when, kind="fact", source_ids=sources, metadata={"layer": self.name}))
        if not units:
            return
        self.store.units.put(units)
        from ..providers.embeddings import CachedEmbedder, get_embedder

        model = get_embedder(self.embedder)
        vectors = CachedEmbedder(model, self.store.embeddings).embed_documents(scope, [u.text for u in units])
        (self.vectors if self.vectors is not None else self.store.vectors).upsert(units, vectors, model=model.name)

    # ---- entities ----------------------------------------------------------------------------

    def _entity_changes(self, user: Scope, batch: Batch, entities: Sequence[Any], relations: Sequence[Any]) -> list[Change]:
        current = {r.key: r for r in self.store.records.current(user, "entity")}
        resolve = _Resolver(current)
        resolve.add_ends(self.store.records.current(user, "relation"))
        aliases = self._aliases(batch, entities, relations, resolve)
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
            base = changed.get(key) or (
                dict(current[key].value) if key in current else (_new_entity(canonical) if key == SELF_KEY else None)
            )
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

    @staticmethod
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

    def _relation_changes(self, user: Scope, batch: Batch, relations: Sequence[Any], pending: Sequence[Change] = ()) -> list[Change]:
        """Grounded relations as puts; ``pending``: this batch's entity changes, so a name resolves to
        the entity it joins in this same batch ("小李" to the user after "我叫小李"). A relation that
        another replaces (``supersede``) is kept with ``invalid_at`` set in its value."""
        entities: dict[str, Any] = {r.key: r for r in self.store.records.current(user, "entity")}
        entities.update({c.key: c.value for c in pending if c.kind == "entity" and c.value is not None})
        resolve = _Resolver(entities)
        known = {r.key: r for r in self.store.records.current(user, "relation")}
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

    # ---- state -------------------------------------------------------------------------------

    def _state_keys(self) -> dict[str, str] | None:
        """The state schema's keys with their descriptions (None without a schema)."""
        if not self.state_schema:
            return None
        return {
            k: str((v or {}).get("description", "")) if isinstance(v, dict) else ""
            for k, v in self.state_schema.get("properties", {}).items()
        } or None

    def _state_changes(self, batch: Batch, items: Sequence[Any]) -> list[Change]:
        allowed = set((self.state_schema or {}).get("properties", {})) if self.state_schema else None
        out = []
        for item in items:
            key = item.key.strip()
            if not key or not item.value.strip() or (allowed is not None and key not in allowed):
                continue
            sources, _ = sentence_sources(item.value, batch.messages)
            if not sources:
                continue  # a value nobody said
            try:
                out.append(Change("put", "state", key, {"value": item.value.strip()}, sources, batch.messages[-1].timestamp))
            except InvalidInput:  # a key the state may not have (over 128 characters, a control character)
                continue
        return out


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
            or normalize(canonical(v.get("relation", ""))) != normalize(predicate)
        ):
            continue
        if v.get("target_key") != value["target_key"]:
            same[o.key] = o
    gone = set(
        map(
            normalize,
            replaced(
                predicate,
                sentence,
                [o.value.get("target", "") for o in same.values()],
                value["target"],
                cue=cue,
                evidence={o.value.get("target", ""): str(o.value.get("evidence") or "") for o in same.values()},
            ),
        )
    )
    return [o for o in same.values() if normalize(o.value.get("target", "")) in gone]


def _pieces(message: Message, room: int, count: Any) -> list[Message]:
    """A message longer than the model's room, cut at sentence ends (hard-cut as a last resort)
    into pieces that keep its id, seq and time, so sources still point at it."""
    if count(message.text) + 8 <= room:
        return [message]
    pieces: list[str] = [""]
    for sentence in split_text(message.text):
        while count(sentence) + 8 > room:  # one enormous sentence: cut by characters
            cut = max(1, len(sentence) * room // (2 * count(sentence)))
            pieces += [sentence[:cut], ""]
            sentence = sentence[cut:]
        if pieces[-1] and count(pieces[-1] + sentence) + 8 > room:
            pieces.append("")
        pieces[-1] += sentence
    return [replace(message, content=p) for p in pieces if p.strip()]


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


def self_introduced(messages: Sequence[Message], names: Sequence[str], *, subjects: Sequence[str] = ()) -> list[str]:
    """Names the user gives themself in their own turns ("我叫小李，是一名程序员", "my name is Li
    Lei"): the extracted name the introduction starts with, or a short name standing alone. "I'm
    Daniel." counts when the name stands alone in its sentence and the batch's statements have it
    as a subject (``subjects``): "I'm Canadian." names no one."""
    known = sorted({n.strip() for n in names if n.strip() and entity_key(n) != SELF_KEY}, key=len, reverse=True)
    own = {normalize(n) for n in subjects if n.strip() and entity_key(n) != SELF_KEY}
    out: list[str] = []
    for m in messages:
        if m.role != "user":
            continue
        for match in _SELF_INTRO.finditer(m.text):
            said = match.group(1).strip()
            name = next((n for n in known if normalize(said).startswith(normalize(n))), None)
            if name is None and match.group(0)[:1] in "我本" and _bare_name(said):
                name = said  # "我叫李四。": a short name standing alone
            if name and name not in out:
                out.append(name)
        for match in _I_AM_NAME.finditer(m.text):
            said = match.group(1).strip()
            if normalize(said) in own and said not in out:
                out.append(said)
    return out


#: "I'm Daniel." / "I am Sarah Chen," at a sentence's start: a name that stands alone after it
_I_AM_NAME = re.compile(r"(?:^|(?<=[.!?])\s+)(?:I'm|I am|I’m)\s+([A-Z][a-z]+(?: [A-Z][a-z]+)?)\s*(?=[.,!;]|$)")


def _bare_name(text: str) -> bool:
    """A short Chinese name standing alone after "我叫" (not "什么", not "了外卖")."""
    return (
        2 <= len(text) <= 4
        and all("\u3400" <= c <= "\u9fff" for c in text)
        and text[0] not in "了过着的是个"
        and not re.search("什么|谁|啥|哪|吗|呢", text)
    )


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
        users = [m for m in batch.messages if m.role == "user"]  # the assistant's words are never the user's facts
        sources, _ = sentence_sources(v, users, threshold=0.3)
        if not sources:
            continue  # a value the user did not say
        when = max(m.timestamp for m in users if m.id in sources)
        said = _sentence_naming(v, users, sources)
        attributes[k] = _update_attribute(
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


def attribute_values(attribute: dict[str, Any] | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """An attribute's current values and its past ones (each {"value", "source_ids", "valid_from"},
    past ones with "until"), from either shape the store holds (one value, or "values"/"past")."""
    if not attribute:
        return [], []
    if "values" in attribute:
        current = [dict(x) for x in attribute["values"]]
    else:
        current = [{k: attribute[k] for k in ("value", "source_ids", "valid_from") if k in attribute}] if attribute.get("value") else []
    return current, [dict(x) for x in attribute.get("past", [])]


#: past values kept per attribute (the record's history keeps every version)
PAST_KEPT = 5


def _update_attribute(
    old: dict[str, Any] | None, predicate: str, new: dict[str, Any], sentence: str, lang: str, *, past: bool = False, cue: bool = False
) -> dict[str, Any]:
    """One attribute after a new value was said: accumulated beside the current ones, or superseding
    those it replaces (``supersede.replaced``; ``cue``: the predicate as written said the change,
    "换导师"), or recorded as past when the sentence names it as the old one ("从上海搬到深圳" for
    上海) or ends it (``past``: "不再做数据分析了", ``verify``). Superseded values move to ``past``
    with their dates. A value said before one it would replace (batches applied out of order) does
    not replace it: it is past from when the newer one was said."""
    ended = past
    current, past = attribute_values(old)
    same = [c for c in current if normalize(c["value"]) == normalize(new["value"])]
    if ended or said_as_old(new["value"], sentence):
        if not any(normalize(p["value"]) == normalize(new["value"]) for p in past):
            gone = same[0] if same else {"value": new["value"], "source_ids": new["source_ids"]}
            past.append({**gone, "until": new["valid_from"]})
        current = [c for c in current if c not in same]
    elif same:
        return old or {}
    else:
        gone = set(
            map(
                normalize,
                replaced(
                    predicate,
                    sentence,
                    [c["value"] for c in current],
                    new["value"],
                    cue=cue,
                    evidence={c["value"]: str(c.get("evidence") or "") for c in current},
                ),
            )
        )
        newer = sorted(
            str(c.get("valid_from", ""))
            for c in current
            if normalize(c["value"]) in gone and _later(c.get("valid_from"), new.get("valid_from"))
        )
        if newer:  # said after this one: it stays current, and this one was replaced when it was said
            past.append({**new, "until": newer[0]})
            gone = {
                normalize(c["value"])
                for c in current
                if normalize(c["value"]) in gone and not _later(c.get("valid_from"), new.get("valid_from"))
            }
            past += [{**c, "until": new["valid_from"]} for c in current if normalize(c["value"]) in gone]
            current = [c for c in current if normalize(c["value"]) not in gone]
        else:
            past += [{**c, "until": new["valid_from"]} for c in current if normalize(c["value"]) in gone]
            current = [c for c in current if normalize(c["value"]) not in gone] + [new]
    return _attribute(current, past, lang)


def _later(a: Any, b: Any) -> bool:
    """Whether stored time ``a`` is after ``b`` (False when either is unknown)."""
    x, y = instant(a) if a else None, instant(b) if b else None
    return bool(x and y and x > y)


def _attribute(current: list[dict[str, Any]], past: list[dict[str, Any]], lang: str) -> dict[str, Any]:
    """An attribute's stored shape from its current and past values."""
    past = [p for p in past if all(normalize(p["value"]) != normalize(c["value"]) for c in current)][-PAST_KEPT:]
    if not current:  # only an old value was said: it is past, and nothing is known to be current
        return {"value": "", "source_ids": [], "values": [], "past": past}
    joined = ("、" if lang == "zh" else ", ").join(c["value"] for c in current)
    out = {
        "value": joined,
        "source_ids": sorted({i for c in current for i in c.get("source_ids", [])}),
        "valid_from": max(str(c.get("valid_from", "")) for c in current),
        "values": current,
    }
    return {**out, "past": past} if past else out


register_layer("extract", Extractor)
