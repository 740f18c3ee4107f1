"""The write side shared by the model-backed layers (summary, entities, graph, state).

Turns are batched per thread (every ``batch_messages`` messages or ``batch_tokens`` tokens;
``flush()`` takes what is waiting) and each batch costs ONE model call whose schema holds only
the parts the stack's layers need. The output is grounded in the turns (``grounding``), turned
into Changes, and applied to the RecordStore in one transaction with its audit events; the
batch's facts are also indexed for retrieval as keys pointing to their source turns.

Failure never loses a turn: when the model's output stays invalid the job fails, its usage is
recorded with the error, and the queue retries the same batch later (the cursor did not move).
Reruns are idempotent: a put of the value already current is a no-op.

This module is the batching job; what a batch's entities and relations change is decided in
``resolve`` (the resolver and the merge, attribute values over time in ``attributes``), and how
things are named in ``names``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from ..budget import split_text
from ..errors import InvalidInput, JobError, ModelOutputError, UsageError
from ..llm.base import ChatModel
from ..llm.custom import check_schema, entities_of, entity_items, extract_schema, relation_items, relations_of, to_entity
from ..llm.extract import Batch, Extracted, extract, language, merge_notes, unpack
from ..llm.extract import sentence as note_text
from ..llm.grounding import normalize, sentence_sources
from ..llm.metered import Metered
from ..llm.priority import background
from ..stores import Store, records_of
from ..tokens import TokenCounter, get_counter
from ..types import Change, Message, Scope, Unit
from . import register_layer
from .attributes import attribute_values
from .base import LayerOutput, ReadRequest, Waiting, WriteRequest

# re-exported: the entity and graph layers import these from here (their home: names)
from .moves import missed_moves
from .names import SELF_KEY, self_introduced
from .names import entity_key as entity_key
from .names import first_person as first_person
from .names import stem as stem
from .notes import apply_updates, end_ceased, grounded_note, said_notes
from .resolve import ended_changes, entity_changes, relation_changes
from .verify import clause_for_name, kin_word, verify

#: entity types that name a person (or a pet): who may be the subject of the user's sentences
_PERSON_TYPE = re.compile(
    r"^(?:人物|人|人名|家人|亲人|亲属|朋友|同事|孩子|儿童|宠物|person|people|human|family|family member|relative|friend|colleague|child|kid|pet)$",
    re.IGNORECASE,
)


def _clauses_for_names(batch: Batch) -> bool:
    """Whether half or more of the model's statements (one at least) have a clause for their
    subject (a batch of two long English rounds gave one statement only, "I remember writing a
    short email to my manager asking to move our one-to-ones to|Wednesday|from Mondays")."""
    statements = getattr(batch.result.value, "memories", None) or []
    clauses = sum(1 for s in statements if clause_for_name(s.subject))
    return clauses >= 1 and clauses * 2 >= len(statements)


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
    #: its jobs call the chat model: the tenant's cost ceiling applies to them (``memstack.ceiling``)
    spends_tokens: ClassVar[bool] = True
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
        users = [i for i, m in enumerate(turns) if m.role == "user"]
        if len(users) > 1 and _clauses_for_names(batch):
            # a small model given several long rounds may write their sentences where names go
            # ("Anand Iyer is a test lead in Pune with two kids…|=needs|=walking daily"); one round
            # at a time it writes statements: split at the round nearest the middle
            metered.commit(getattr(self.store, "usage", None), scope, self.name, error="the model wrote clauses for names")
            half = min(users[1:], key=lambda i: abs(i - len(turns) / 2))
            self._run(scope, turns[:half])
            self._run(scope, turns[half:])
            return
        metered.commit(getattr(self.store, "usage", None), scope, self.name)
        batch = self._verified(scope, batch)
        value = batch.extracted
        if "facts" in self.parts:
            records.apply(scope, self._summary_changes(scope, batch, value.facts), layer="summary")
            self._index_facts(scope, batch, value.facts)
        user_changes: list[Change] = []
        if "entities" in self.parts:
            user_changes += entity_changes(records, scope.user(), batch, value.entities, value.relations)
        if "relations" in self.parts:
            user_changes += relation_changes(records, scope.user(), batch, value.relations, pending=user_changes)
        if "state" in self.parts and self.state_per_thread:
            records.apply(scope, self._state_changes(batch, value.state), layer=self.name)
        elif "state" in self.parts:
            user_changes += self._state_changes(batch, value.state)
        if "entities" in self.parts or "relations" in self.parts:
            user_changes = ended_changes(records, scope.user(), batch, user_changes)
        user_changes += self._rejected_changes(batch)
        if user_changes:
            records.apply(scope.user(), user_changes, layer=self.name)

    def _verified(self, scope: Scope, batch: Batch) -> Batch:
        """The batch with only the statements the user's own words support (``verify``), with
        the moves the words say that the model left out (``moves``); the others go to the audit
        trail as ``rejected`` records with their reasons."""
        statements = getattr(batch.result.value, "memories", None)
        if statements is None:
            return batch
        # a move the words say and the model left out (moves.py): checked like the model's statements;
        # only where the model's answer is statements (a structured answer of its own entities is
        # left as it is: rebuilding it from statements would lose them)
        said = list(statements)
        structured = not said and bool(batch.extracted.entities or batch.extracted.relations)
        statements = said if structured else [*said, *missed_moves(said, batch.messages, batch.lang)]
        if not statements:
            return batch
        entities = records_of(self.store).current(scope.user(), "entity")  # read once: the user's names and the people
        me = [r for r in entities if r.key == SELF_KEY]
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
        people = [
            str(r.value.get("name") or "")
            for r in entities
            if r.key != SELF_KEY and _PERSON_TYPE.match(str(r.value.get("type") or "").strip())
        ]
        kin = [
            (key, str(v.get("value", "")))
            for key, attribute in ((me[0].value.get("attributes") or {}).items() if me else ())
            if kin_word(key)
            for v in attribute_values(attribute)[0]
        ]
        checked = verify(statements, batch.messages, self_names=self_names, context=context, people=people, kin=kin)
        if not checked.rejected and checked.kept == said:
            return batch
        value = batch.result.value.model_copy(update={"memories": checked.kept})
        kept = unpack(value, batch.lang)
        extracted = (
            replace(kept, entities=[*kept.entities, *[e for e in batch.extracted.entities if e.fields]])
            if any(e.fields for e in batch.extracted.entities)
            else kept
        )
        # the result holds the statements as verified (tidied, split, moved to their owner), so that
        # each fact's note keeps the statement it says ("用户|后端使用|SpringBoot" is 用户|使用|SpringBoot)
        return replace(
            batch,
            result=replace(batch.result, value=value),
            extracted=replace(extracted, state=batch.extracted.state),
            rejected=tuple(checked.rejected),
        )

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
        items = end_ceased(apply_updates(items, fresh, batch.messages), batch.messages)
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


register_layer("extract", Extractor)
