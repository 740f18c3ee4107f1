"""Vector retrieval memory across sessions: every round is embedded and indexed after it is added,
and the rounds most relevant to the next question come back into the context, with their dates.

Write side (a job after every add): cut the new messages into units (a round each, or sentence
chunks of a long round), embed them through the store's embedding cache, store the units (with
their BM25 terms) and their vectors. The last round is re-read by the next job, so a reply that
arrives later joins its question's unit (same ids: an upsert). Read side: hybrid search for the
query, minus what the context already shows, fitted into the layer's share of the budget; when
nothing is relevant the section is left out and the bare question goes to the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, ClassVar

from ..errors import UsageError
from ..providers.embeddings import CachedEmbedder, Embedder, get_embedder
from ..retrieval.asked import speaks_to_assistant, without_derived_answers
from ..retrieval.render import fit_hits, render_hits
from ..retrieval.search import KEY_MARK, Searcher, SearchSettings
from ..retrieval.units import dense_text, head, rounds, units_for_round
from ..stores import Rebuildable, Store, VectorIndex
from ..tokens import TokenCounter, get_counter
from ..types import Dropped, Hit, IndexSwitch, Message, Scope, SearchFilter, Section, Unit
from . import register_layer
from .base import LayerOutput, ReadRequest, WriteRequest


@dataclass
class Retrieval:
    """Hybrid (BM25 + dense) retrieval over all of a user's threads.

    ``top_k`` units at most, within ``share`` of the context budget; ``embedder`` is a provider
    string or an Embedder (default: the local multilingual e5); ``method`` hybrid, bm25 or dense.
    """

    store: Store
    embedder: str | Embedder | None = None
    #: a vector index outside the store (e.g. MilvusVectorIndex); default: the store's own
    vectors: VectorIndex | None = None
    top_k: int = 8
    method: str = "hybrid"
    share: float = 0.4
    #: its section's priority: raw evidence, kept before the model-made facts (45), which give
    #: it their room in the second pass (``memstack.stack``)
    priority: ClassVar[int] = 40
    #: a round longer than this is cut into chunks of at most this many tokens (sentence
    #: boundaries; applies to rounds indexed from now on). A chunk keeps a request with more of
    #: its answer, so ten hits cover more of what was said. LongMemEval dev (58 questions), R@10 at
    #: tokens@10: 200 -> .875 at 1,942 (and .915 when filled to 3,000 tokens), 280 -> .921 at
    #: 2,665, 300 -> .904 at 2,841; fewer units also index faster
    chunk_tokens: int = 280
    #: tokens of a unit that the dense index embeds (its opening; BM25 indexes all of it): the
    #: embedding model's cost grows with every token, and a long chunk's topic shows early
    dense_tokens: int = 128
    #: tokens of the previous reply that lead a round in (0: none)
    lead_tokens: int = 40
    #: embed each sentence the user said as its own key to its unit (finds facts said in passing),
    #: in units longer than ``key_min_tokens`` (LongMemEval sample R@10 .63 -> .83). Short units
    #: get none: their own vector is about what their sentences say, and keys for them cost
    #: recall on LoCoMo's short turns (.753 vs .774) and MemoryBank-CN (R@1 .686 vs .700). The
    #: threshold (about 1.4x the 128 tokens the unit's own vector embeds) was chosen on those
    #: development sets: 150 and 180 tie on LongMemEval, 200 loses there.
    sentence_keys: bool = True
    key_min_tokens: int = 180
    #: a retrieved unit shorter than ``neighbour_below`` tokens comes into the context with the
    #: ``neighbours`` units before and after it in its thread (budget allowing, after the hit
    #: itself and before the next hit): a short turn ("Yes, since 2019!") means little without
    #: them. LoCoMo: 5 hits so expanded give R .759 at 471 tokens where plain hits give ~.746;
    #: longer units (MemoryBank-CN pairs, LongMemEval chunks) are left alone, where neighbours
    #: only cost tokens (see BENCHMARKS.md).
    neighbours: int = 1
    neighbour_below: int = 80
    #: pseudo-relevance feedback: the first ``feedback`` relevant results' vectors move the query,
    #: which re-scores the vector search's pool (0: off; see SearchSettings.feedback)
    feedback: int = 3
    #: plain ranking without relevance floor, time handling, sentence keys or feedback (the
    #: benchmark's baselines)
    baseline: bool = False
    #: topic memory: search only the units of one category (``topic``, else the category of the
    #: thread's latest message that has one, set at write time in the message's metadata)
    by_topic: bool = False
    topic: str | None = None
    counter: TokenCounter | str | None = None
    name: str = "retrieval"
    scope: str = "user"
    history: str = "none"
    _searcher: Searcher | None = field(default=None, init=False, repr=False)
    #: what the last ``reindex`` of a Rebuildable index switched (None: nothing switched)
    switched: IndexSwitch | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        for attr in ("units", "vectors", "embeddings"):
            if not hasattr(self.store, attr):
                raise UsageError(
                    f"the {type(self.store).__name__} backend has no {attr} index; retrieval needs sqlite, postgresql or memory"
                )
        if not 0 < self.share <= 1:
            raise UsageError("share must be in (0, 1]")
        self.counter = get_counter(self.counter)
        self.index: VectorIndex = self.vectors if self.vectors is not None else self.store.vectors

    @property
    def searcher(self) -> Searcher:
        if self._searcher is None:
            model = get_embedder(self.embedder)
            self._searcher = Searcher(
                self.store.units,
                self.index,
                model,
                SearchSettings(
                    method=self.method,
                    relevance_floor=not self.baseline,
                    use_time=not self.baseline,
                    keys=self.sentence_keys and not self.baseline,
                    feedback=0 if self.baseline else self.feedback,
                    **({"assistant_weight": 1.0, "answer_share": 0.0} if self.baseline else {}),
                ),
            )
        return self._searcher

    # ---- read side ---------------------------------------------------------------------------

    def search(
        self, scope: Scope, query: str, *, k: int | None = None, at: datetime | None = None, where: SearchFilter | None = None
    ) -> list[Hit]:
        return self.searcher.search(scope, query, k=k or self.top_k, at=at, where=where)

    def read(self, request: ReadRequest, messages: list[Message]) -> LayerOutput:
        if not request.query:
            return LayerOutput(messages)
        where = None
        if self.by_topic:
            topic = self.topic or self._current_topic(request, messages)
            if not topic:
                return LayerOutput(messages)  # no topic named: topic memory has nothing to add
            where = SearchFilter(categories=(str(topic),))
        shown = {m.id for m in messages} | set(request.exclude_ids)
        hits = [h for h in self._found(request, where) if not set(h.unit.source_ids) <= shown]
        if not speaks_to_assistant(request.query):
            hits = without_derived_answers(hits)
        budget = None if request.budget is None else int(request.budget * self.share)
        lang = "zh" if any("\u4e00" <= c <= "\u9fff" for c in request.query) else "en"
        kept = fit_hits(hits, budget, request.counter, lang)
        left = [h for h in hits if h not in kept]
        dropped = (
            [
                Dropped(
                    self.name,
                    f"{len(left)} retrieved memories over its share of the budget",
                    tuple(i for h in left for i in h.unit.source_ids),
                    sum(request.counter.count(h.unit.text) for h in left),
                )
            ]
            if left
            else []
        )
        if not kept:
            return LayerOutput(messages, dropped=dropped)
        sources = tuple(i for h in kept for i in h.unit.source_ids)
        section = Section(self.name, render_hits(kept, lang), priority=self.priority, source_ids=sources)
        return LayerOutput(messages, [section], dropped)

    def _found(self, request: ReadRequest, where: SearchFilter | None) -> list[Hit]:
        """The hits for the request with their neighbours, searched once per context() call (a
        second read with a larger budget fits them again without embedding the query again)."""
        key = (self.name, id(self), request.query, where)
        if key not in request.memo:
            hits = self.search(request.scope, request.query, at=request.at, where=where)
            request.memo[key] = self.with_neighbours(self.turns_of_facts(request.scope.user(), hits), where)
        return request.memo[key]

    def turns_of_facts(self, user: Scope, hits: list[Hit]) -> list[Hit]:
        """Each extracted fact among the hits replaced by the round its turns begin (a fact is a key
        pointing to its turns: its sentence is the model's paraphrase, and a wrong one, "用户的生日
        是顾屿" of "大后天是我生日，我男朋友说要给我一个惊喜", was read as the answer); a fact whose round is
        not found, or not a round a user message begins, stays."""
        wanted = [f"{i}:0" for h in hits if h.unit.kind == "fact" for i in h.unit.source_ids]
        if not wanted:
            return hits
        rounds = {u.id: u for u in self.store.units.get(user, list(dict.fromkeys(wanted)))}
        out: list[Hit] = []
        seen: set[str] = set()
        for h in hits:
            found = [rounds[f"{i}:0"] for i in h.unit.source_ids if f"{i}:0" in rounds] if h.unit.kind == "fact" else [h.unit]
            for unit in found or [h.unit]:
                if unit.id not in seen:
                    seen.add(unit.id)
                    out.append(Hit(unit, h.score, h.ranks) if unit is not h.unit else h)
        return out

    def with_neighbours(self, hits: list[Hit], where: SearchFilter | None = None) -> list[Hit]:
        """Each hit, followed by the neighbours of a short one that ``where`` admits (the next unit
        first, then the one before; each unit once, at its first place)."""
        n = self.neighbours
        short = [h for h in hits if n > 0 and h.unit.round is not None and self.counter.count(h.unit.text) < self.neighbour_below]
        if not short:
            return hits
        wanted: dict[Scope, set[int]] = {}
        for h in short:
            wanted.setdefault(h.unit.scope, set()).update(range(h.unit.round - n, h.unit.round + n + 1))
        short_ids = {h.unit.id for h in short}
        threads = {
            scope: sorted(
                (u for u in self.store.units.in_rounds(scope, sorted(rounds)) if where is None or u.id in short_ids or where.matches(u)),
                key=thread_order,
            )
            for scope, rounds in wanted.items()
        }
        out: dict[str, Hit] = {}
        for h in hits:
            out.setdefault(h.unit.id, h)
            if h.unit.id not in short_ids:
                continue
            line = threads[h.unit.scope]
            at = next((i for i, u in enumerate(line) if u.id == h.unit.id), None)
            if at is None:
                continue
            for u in [*line[at + 1 : at + 1 + n], *reversed(line[max(0, at - n) : at])]:
                out.setdefault(u.id, Hit(u, h.score, {}))
        return list(out.values())

    def _current_topic(self, request: ReadRequest, messages: list[Message]) -> str | None:
        """The category of the thread's latest message that has one (the layers before may have
        left it out of ``messages``, so the stored thread is asked)."""
        recent = [*self.store.history.read(request.scope, until=request.at, last=50), *messages]
        return next((str(m.metadata["category"]) for m in reversed(recent) if m.metadata.get("category")), None)

    # ---- write side --------------------------------------------------------------------------

    def write(self, request: WriteRequest) -> int | None:
        units, cursor = self._cut(request)
        if units:
            request.store.units.put(units)
            self._embed(request.scope, units)
        return cursor

    def _cut(self, request: WriteRequest) -> tuple[list[Unit], int | None]:
        """The units of the request's rounds, and the cursor for the next job."""
        groups = rounds(request.messages)
        if not groups:
            return [], None
        scope = request.scope
        # After the thread's start the batch begins with the round before the last one written:
        # it leads in the next round and is already indexed with its own lead-in.
        context_only = 1 if request.cursor > 0 and len(groups) > 1 else 0
        round_no = self._rounds_before(request.store, scope, groups[context_only][0].seq or 0)
        units = []
        for i in range(context_only, len(groups)):
            if groups[i][0].role == "user":
                round_no += 1
            previous = groups[i - 1] if i > 0 else ()
            units += units_for_round(
                scope,
                groups[i],
                round_no,
                self.counter,
                chunk_tokens=self.chunk_tokens,
                previous=previous,
                lead_tokens=self.lead_tokens,
                key_min_tokens=self.key_min_tokens if self.sentence_keys else None,
            )
        # the next job re-reads the last two rounds: the last may still be answered, and the one
        # before leads it in
        keep = groups[-2][0].seq if len(groups) > 1 else groups[-1][0].seq
        return units, (keep - 1) if keep else None

    def rechunk(self, *, batch: int = 500, progress: Any = None) -> int:
        """Cut every thread's messages into units again with this layer's settings (after a change
        of ``chunk_tokens``, ``lead_tokens`` or the key settings) and embed them; the thread's old
        units and their vectors are replaced only once the new ones are stored, so a failure
        loses nothing. Other units (extracted facts, documents) stay. Returns units written."""
        old: dict[Scope, list[Unit]] = {}
        for units in self.store.units.iterate(batch=batch):
            for u in units:
                if u.kind in ("round", "chunk"):
                    old.setdefault(u.scope, []).append(u)
        done = 0
        for scope, before in old.items():
            messages = self.store.history.read(scope)
            if not messages:
                continue  # nothing to cut them from again: the units stay as they are
            units, _ = self._cut(WriteRequest(scope, messages, final=True, store=self.store))
            if units:
                self.store.units.put(units)
                self._embed(scope, units)
            kept = {i for u in units for i in vector_ids(u)}
            stale = [i for u in before for i in vector_ids(u) if i not in kept]
            if stale:
                self.index.delete(scope, stale)
                self.store.units.delete(scope, [u.id for u in before if u.id not in kept])
            done += len(units)
            if progress:
                progress(done)
        return done

    def _embed(self, scope: Scope, units: list, index: VectorIndex | None = None) -> None:
        """Embed each unit's opening, and (``sentence_keys``) each sentence the user said in it as
        an extra key pointing to the unit: "unit id~kN" in the same vector index (``index``, by
        default the layer's)."""
        model = self.searcher.embedder
        keys = [key_unit(u, n, text) for u in units for n, text in enumerate(u.metadata.get("keys", ()))] if self.sentence_keys else []
        texts = [dense_text(u, self.dense_tokens, self.counter) for u in units] + [
            head(k.text, self.dense_tokens, self.counter) for k in keys
        ]
        vectors = CachedEmbedder(model, self.store.embeddings).embed_documents(scope, texts)
        (index or self.index).upsert([*units, *keys], vectors, model=model.name)

    def reindex(self, *, batch: int = 256, progress: Any = None) -> int:
        """Embed every unit of the store again (after a change of embedder: a new model or
        dimension is refused until this runs). Returns units embedded.

        An index that rebuilds beside itself (``Rebuildable``: Milvus) is filled in a new
        collection while searches read the old one, then switched to in one step (``switched``
        says what was kept and dropped), and units stored meanwhile are embedded into it after
        the switch. Any other index is emptied first and refilled."""
        staged = self.index.stage() if isinstance(self.index, Rebuildable) else None
        if staged is None:
            self.index.reset()
        done = self._embed_all(staged or self.index, batch, progress)
        if staged is not None:
            self.switched = self.index.switch(staged)  # type: ignore[attr-defined]
            done += self._embed_all(self.index, batch, None, missing_only=True)
        return done

    def _embed_all(self, index: VectorIndex, batch: int, progress: Any, *, missing_only: bool = False) -> int:
        """Embed every unit of the store into ``index`` (``missing_only``: those it lacks)."""
        done = 0
        for units in self.store.units.iterate(batch=batch):
            by_scope: dict[Scope, list] = {}
            for u in units:
                by_scope.setdefault(u.scope, []).append(u)
            for scope, group in by_scope.items():
                if missing_only:
                    held = index.fetch(scope, [u.id for u in group])
                    group = [u for u in group if u.id not in held]
                if group:
                    self._embed(scope, group, index)
                    done += len(group)
            if progress:
                progress(done)
        return done

    @staticmethod
    def _rounds_before(store: Store, scope: Scope, seq: int) -> int:
        return sum(1 for m in store.history.read(scope, roles=("user",)) if (m.seq or 0) < seq)

    def forget(self, scope: Scope) -> int:
        """Erase the scope's thread (or user) from a vector index kept outside the store."""
        return self.index.delete(scope) if self.index is not self.store.vectors else 0


def thread_order(unit: Unit) -> tuple:
    """Units of one thread in the order they were said: round, time, then chunk number."""
    tail = unit.id.rsplit(":", 1)[-1]
    return (unit.round or 0, unit.timestamp, int(tail) if tail.isdigit() else 0, unit.id)


def key_unit(unit: Unit, n: int, text: str) -> Unit:
    """A sentence key of ``unit`` for the vector index only (never stored as a unit)."""
    return replace(unit, id=key_id(unit.id, n), text=text, metadata={"parent": unit.id})


def key_id(unit_id: str, n: int) -> str:
    return f"{unit_id}{KEY_MARK}{n}"


def vector_ids(unit: Unit) -> list[str]:
    """The ids ``unit`` has in the vector index: its own and its sentence keys' (see ``_embed``)."""
    return [unit.id, *(key_id(unit.id, n) for n in range(len(unit.metadata.get("keys", ()))))]


def reindex(
    store: Store,
    embedder: str | Embedder | None = None,
    *,
    progress: Any = None,
    rechunk: bool = False,
    on_switch: Any = None,
    **options: Any,
) -> int:
    """Re-embed every unit of the store with ``embedder`` (after a change of model); with
    ``rechunk``, cut the threads into units again with ``options`` (``chunk_tokens``...) instead.
    ``options`` may name ``vectors``, an index outside the store; ``on_switch(IndexSwitch)`` hears
    what a rebuilt index (Milvus) now serves, kept and dropped."""
    layer = Retrieval(store=store, embedder=embedder, **options)
    done = layer.rechunk(progress=progress) if rechunk else layer.reindex(progress=progress)
    if on_switch is not None and layer.switched is not None:
        on_switch(layer.switched)
    return done


def topic_memory(
    store: Store,
    embedder: str | Embedder | None = None,
    topic: str | None = None,
    top_k: int = 6,
    share: float = 0.3,
    counter: TokenCounter | str | None = None,
    vectors: VectorIndex | None = None,
) -> Retrieval:
    """Project topic memory: retrieval within the current topic (a message's ``category``)."""
    layer = Retrieval(
        store=store, embedder=embedder, vectors=vectors, top_k=top_k, share=share, counter=counter, by_topic=True, topic=topic, name="topic"
    )
    layer.job = "retrieval"  # the units are the retrieval layer's: indexed once, by its job
    return layer


register_layer("retrieval", Retrieval)
register_layer("topic", topic_memory)
