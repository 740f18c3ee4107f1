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
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..budget import split_text
from ..errors import JobError, ModelOutputError, UsageError
from ..llm.base import ChatModel
from ..llm.extract import Batch, extract, merge_notes, sentence
from ..llm.grounding import name_sources, normalize, overlap, sentence_sources
from ..llm.metered import Metered
from ..stores import Store, records_of
from ..tokens import TokenCounter, get_counter
from ..types import Change, Message, Record, Scope, Unit
from . import register_layer
from .base import LayerOutput, ReadRequest, Waiting, WriteRequest
from .notes import apply_updates, grounded_note, said_notes

#: which extraction parts each model-backed layer needs
NEEDS: dict[str, tuple[str, ...]] = {
    "summary": ("facts",),
    "summary-buffer": ("facts",),
    "entities": ("entities",),
    "profile": ("entities",),
    "graph": ("entities", "relations"),
    "state": ("state",),
}

#: relation names that say two names are one entity: kept as relations, traversed at no hop cost
ALIAS_RELATIONS = frozenset(
    normalize(r)
    for r in ("笔名", "别名", "又名", "又称", "外号", "昵称", "也叫", "化名", "英文名", "叫", "名叫", "名字是", "名字叫", "alias", "aka", "also known as", "pen name", "nickname", "known as", "a.k.a.", "is called", "is named", "name is", "named")
)
#: words that, in a relation's evidence naming both ends, say the two names are one entity
ALIAS_WORDS = ("笔名", "别名", "又名", "又称", "外号", "昵称", "化名", "pen name", "also known as", "nickname", "alias", "a.k.a")
#: what a speaker calls themself: stored under one key so the profile has one entry
SELF_NAMES = frozenset(normalize(n) for n in ("用户", "我", "本人", "user", "the user", "i", "me"))
SELF_KEY = "user"
#: the assistant is not an entity of the user's memory
ASSISTANT_NAMES = frozenset(normalize(n) for n in ("助手", "assistant", "the assistant", "ai", "ai助手", "chatgpt"))


def is_alias(relation: str, evidence: str = "", source: str = "", target: str = "") -> bool:
    """An alias relation by its name ("笔名", "是…的笔名", "pen name of"), or by evidence that names
    both ends and an alias word."""
    label = normalize(relation)
    if label in ALIAS_RELATIONS or any(w in label for w in ALIAS_WORDS):
        return True
    ev = normalize(evidence)
    return bool(source and target and normalize(source) in ev and normalize(target) in ev and any(w in ev for w in ALIAS_WORDS))


def entity_key(name: str) -> str:
    key = normalize(name)
    return SELF_KEY if key in SELF_NAMES else key


def relation_label(relation: str, source: str, target: str) -> str:
    """The relation without the names of its ends, which small models repeat in it
    ("后端使用SpringBoot" between 知识中台 and SpringBoot -> "后端使用")."""
    label = relation.strip()
    for name in (target.strip(), source.strip()):
        if name and name in label and label.replace(name, "").strip(" ：:，,"):
            label = label.replace(name, "").strip(" ：:，,")
    return label


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
    #: keep the JSON state per thread instead of per user
    state_per_thread: bool = False
    embedder: Any = None
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
        known = [r.value.get("name", r.key) for r in records.current(scope.user(), "entity")][-self.known_entities :] if "entities" in self.parts else []
        try:
            batch = extract(metered, turns, self.parts, known=known, max_tokens=self.output_tokens)
        except ModelOutputError as exc:
            metered.commit(getattr(self.store, "usage", None), scope, self.name, error=str(exc))
            if len(turns) > 1:  # a smaller batch asks for less output: halve it rather than stall the thread
                half = len(turns) // 2
                self._run(scope, turns[:half])
                self._run(scope, turns[half:])
                return
            raise JobError(f"the model's extraction stayed invalid; the batch stays queued: {exc}") from exc
        metered.commit(getattr(self.store, "usage", None), scope, self.name)
        value = batch.extracted
        if "facts" in self.parts:
            records.apply(scope, self._summary_changes(scope, batch, value.facts), layer="summary")
            self._index_facts(scope, batch, value.facts)
        user_changes: list[Change] = []
        if "entities" in self.parts:
            user_changes += self._entity_changes(scope.user(), batch, value.entities, value.relations)
        if "relations" in self.parts:
            user_changes += self._relation_changes(scope.user(), batch, value.relations)
        if "state" in self.parts and self.state_per_thread:
            records.apply(scope, self._state_changes(batch, value.state), layer=self.name)
        elif "state" in self.parts:
            user_changes += self._state_changes(batch, value.state)
        if user_changes:
            records.apply(scope.user(), user_changes, layer=self.name)

    # ---- summary -----------------------------------------------------------------------------

    def _summary_changes(self, scope: Scope, batch: Batch, facts: Sequence[str]) -> list[Change]:
        current = self.store.records.current(scope, "summary", ["summary"])
        old = dict(current[0].value) if current else {"items": []}
        items = list(old.get("items", []))
        seen = {normalize(i["text"]) for i in items}
        statements = {sentence(s, batch.lang): s for s in getattr(batch.result.value, "memories", [])}
        fresh = []
        for fact in facts:
            text = fact.strip()
            if not text or normalize(text) in seen:
                continue
            seen.add(normalize(text))
            fresh.append(grounded_note(text, batch.messages, statements.get(text)))
        # what the notes do not carry of a user turn is quoted, so no covered turn goes unsaid
        fresh += [n for n in said_notes(batch.messages, items + fresh, batch.lang) if normalize(n["text"]) not in seen]
        items = apply_updates(items, fresh)
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
        self.store.vectors.upsert(units, vectors, model=model.name)

    # ---- entities ----------------------------------------------------------------------------

    def _entity_changes(self, user: Scope, batch: Batch, entities: Sequence[Any], relations: Sequence[Any]) -> list[Change]:
        current = {r.key: r for r in self.store.records.current(user, "entity")}
        resolve = _Resolver(current)
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
            canonical = aliases.get(entity_key(e.name))
            key = resolve.key([canonical] if canonical else names)
            base = changed.get(key) or (dict(current[key].value) if key in current else {"name": canonical or e.name, "type": "", "description": "", "aliases": [], "attributes": {}})
            e = e.model_copy(update={"attributes": [a for a in e.attributes if not is_alias(a.key)], "aliases": [*e.aliases, *([e.name] if canonical else [])]})
            value = _merge_entity(base, e, batch, grounded, self_named, user_said=_said_by_user(grounded, batch.messages))
            changed[key] = value
            resolve.add(key, value)
            sources_of.setdefault(key, set()).update(i for ids in grounded.values() for i in ids)
        for alias_key, canonical in aliases.items():  # an alias named only in the alias relation
            key = resolve.key([canonical])
            base = changed.get(key) or (dict(current[key].value) if key in current else None)
            alias = next((r.source if entity_key(r.source) == alias_key else r.target for r in relations if alias_key in (entity_key(r.source), entity_key(r.target))), None)
            if base is None or alias is None or not name_sources(alias, batch.messages):
                continue
            if entity_key(alias) not in {entity_key(n) for n in [base.get("name", ""), *base.get("aliases", [])]}:
                changed[key] = {**base, "aliases": [*base.get("aliases", []), alias.strip()]}
        when = batch.messages[-1].timestamp
        out = []
        for key, value in changed.items():
            ids = tuple(sorted(sources_of.get(key, set()))) or tuple(m.id for m in batch.messages)
            out.append(Change("put", "entity", key, value, ids, when))
        return out

    @staticmethod
    def _aliases(batch: Batch, entities: Sequence[Any], relations: Sequence[Any], resolve: _Resolver) -> dict[str, str]:
        """alias key -> canonical name, from alias relations ("莫尔索是小李的笔名"): the canonical
        end is the one already known, else the one with more statements, else the target."""
        subjects: dict[str, int] = {}
        for e in entities:
            subjects[entity_key(e.name)] = subjects.get(entity_key(e.name), 0) + len(e.attributes)
        out: dict[str, str] = {}
        for r in relations:
            found = evidence_for(r, batch.messages)
            if found is None or not is_alias(r.relation, found[0], r.source, r.target):
                continue
            a, b = r.source.strip(), r.target.strip()
            known_a, known_b = resolve.find(a) is not None, resolve.find(b) is not None
            if known_a != known_b:
                canonical, alias = (a, b) if known_a else (b, a)
            elif subjects.get(entity_key(a), 0) != subjects.get(entity_key(b), 0):
                canonical, alias = (a, b) if subjects.get(entity_key(a), 0) > subjects.get(entity_key(b), 0) else (b, a)
            else:
                canonical, alias = b, a
            out[entity_key(alias)] = canonical
            resolve.add(resolve.key([canonical]), {"name": canonical, "aliases": [alias]})
        return out

    # ---- relations ---------------------------------------------------------------------------

    def _relation_changes(self, user: Scope, batch: Batch, relations: Sequence[Any]) -> list[Change]:
        resolve = _Resolver({r.key: r for r in self.store.records.current(user, "entity")})
        known = {r.key: r for r in self.store.records.current(user, "relation")}
        out = []
        for r in relations:
            if not (r.source.strip() and r.target.strip() and r.relation.strip()):
                continue
            found = evidence_for(r, batch.messages)
            if found is None:
                continue  # no turn supports it: not stored
            evidence, sources, confidence = found
            r = r.model_copy(update={"evidence": evidence})
            src, dst = resolve.find(r.source) or entity_key(r.source), resolve.find(r.target) or entity_key(r.target)
            key = f"{src}\x1f{normalize(relation_label(r.relation, r.source, r.target))}\x1f{dst}"
            when = max(m.timestamp for m in batch.messages if m.id in sources)
            value = {"source": r.source.strip(), "relation": relation_label(r.relation, r.source, r.target), "target": r.target.strip(), "source_key": src, "target_key": dst, "evidence": (r.evidence or "").strip(), "confidence": confidence, "alias": is_alias(r.relation, r.evidence, r.source, r.target)}
            if key in known:
                # said again: the first evidence and date stand (the fact was true since then);
                # the new turns join its sources, and a higher confidence is kept
                first = dict(known[key].value)
                value = first if confidence <= float(first.get("confidence", 0)) else {**first, "confidence": confidence}
                when = known[key].valid_from or when
            out.append(Change("put", "relation", key, value, sources, when))
        return out

    # ---- state -------------------------------------------------------------------------------

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
            out.append(Change("put", "state", key, {"value": item.value.strip()}, sources, batch.messages[-1].timestamp))
        return out


class _Resolver:
    """Finds the entity a name refers to: by canonical key, then by alias."""

    def __init__(self, current: dict[str, Record]) -> None:
        self._names: dict[str, str] = {}
        for key, record in current.items():
            self.add(key, record.value)

    def add(self, key: str, value: Any) -> None:
        for n in [key, value.get("name", ""), *value.get("aliases", [])]:
            if n:
                self._names.setdefault(entity_key(n), key)

    def find(self, name: str) -> str | None:
        return self._names.get(entity_key(name))

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

    for m in messages:
        for sentence in split_text(m.text):
            if names(r.source, sentence, m) and names(r.target, sentence, m):
                return sentence.strip(), (m.id,), 0.9
    for m in messages:
        if names(r.source, m.text, m) and names(r.target, m.text, m):
            return m.text.strip()[:300], (m.id,), 0.7
    # the subject named earlier in the batch, the object in this sentence ("我在开发知识中台" ...
    # "后端使用SpringBoot"): the batch is the context that resolves it
    if any(names(r.source, m.text, m) for m in messages):
        for m in messages:
            for sentence in split_text(m.text):
                if normalize(r.target) in normalize(sentence) and overlap(r.relation, sentence) >= 0.5:
                    return sentence.strip(), (m.id,), 0.6
    if r.evidence:
        sources, score = sentence_sources(r.evidence, messages)
        if sources:
            return r.evidence.strip(), sources, round(score * 0.8, 2)
    return None


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


def _said_by_user(grounded: dict[str, tuple[str, ...]], messages: Sequence[Message]) -> bool:
    users = {m.id for m in messages if m.role == "user"}
    return any(set(ids) & users for ids in grounded.values())


def _merge_entity(base: dict[str, Any], e: Any, batch: Batch, grounded: dict[str, tuple[str, ...]], self_named: bool, *, user_said: bool) -> dict[str, Any]:
    value = dict(base)
    value["type"] = base.get("type") or e.type.strip()
    if not value.get("description") and e.description.strip() and sentence_sources(e.description, batch.messages, threshold=0.3)[0]:
        value["description"] = e.description.strip()  # the first one the turns support; kept after
    aliases = list(base.get("aliases", []))
    for a in e.aliases:
        if a.strip() and grounded.get(a) and normalize(a) not in {normalize(x) for x in aliases} and normalize(a) != normalize(value.get("name", "")):
            aliases.append(a.strip())
    value["aliases"] = aliases
    attributes = dict(base.get("attributes", {}))
    for attr in e.attributes:
        k, v = attr.key.strip(), attr.value.strip()
        if not k or not v:
            continue
        sources, _ = sentence_sources(v, batch.messages, threshold=0.3)
        if not sources:
            continue  # a value nobody said
        old = attributes.get(k)
        if old and normalize(old["value"]) == normalize(v):
            continue
        when = max(m.timestamp for m in batch.messages if m.id in sources)
        attributes[k] = {"value": v, "source_ids": list(sources), "valid_from": when.isoformat()}
    value["attributes"] = attributes
    value["confidence"] = max(float(base.get("confidence", 0.0)), 0.9 if (user_said or self_named) else 0.7)
    return value


register_layer("extract", Extractor)
