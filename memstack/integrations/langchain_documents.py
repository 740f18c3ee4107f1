"""LangChain documents in a user's memory: a VectorStore over memstack's units and vector index,
and a retriever over ``Memory.search`` (hybrid BM25 + dense, time-aware, with a relevance floor).

``MemstackVectorStore`` keeps each Document as a unit of kind "note" in one thread of one user
(``thread_id``, default "documents"): its text is BM25-indexed like every unit and its vector
goes to the store's vector index, so ``Memory.search`` for that user finds the documents next to
the user's conversations. The metadata is kept as JSON (in the unit's metadata under
"langchain"). The store embeds with memstack's local model by default; any LangChain
``Embeddings`` works too (wrapped, see ``embedders``), but the index holds one model at a time,
so use a store whose retrieval layer uses the same embedder (or a store of its own).
Scores of ``similarity_search_with_score`` are the index's: (1 + cosine) / 2 in [0, 1], higher
is closer; they are also the relevance scores. Ids are unit ids, unique per user: an id a unit
of another thread holds is refused.

``MemstackRetriever`` is a BaseRetriever over ``Memory.search``: it returns the user's most
relevant memories (conversation rounds and documents alike), nothing when nothing is relevant.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from ..backends import open_store
from ..errors import InvalidInput, UsageError, importing
from ..memory import Memory
from ..providers.embeddings import CachedEmbedder, Embedder
from ..stores import VectorIndex
from ..types import Hit, Scope, SearchFilter, Unit, utcnow
from .embedders import MemstackEmbeddings, as_embedder

with importing("langchain-core", "langchain"):
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.vectorstores import VectorStore

#: the key of a unit's metadata under which a Document's metadata is kept
KEPT = "langchain"


class MemstackVectorStore(VectorStore):
    """A LangChain VectorStore over one user's units (one thread of them) in a memstack store.

    ``target``: a Memory (its store and tenant), a Store, a URL or path (sqlite, postgresql,
    memory), or None for the default SQLite file. ``embedding``: a LangChain Embeddings, a
    memstack provider string or Embedder (default "local"). ``vectors``: a vector index outside
    the store (e.g. Milvus), as the retrieval layer's option of that name; default: the Memory's
    (``Memory(vectors=...)``), else the store's own.
    """

    def __init__(
        self,
        target: Memory | Any = None,
        *,
        user_id: str,
        embedding: Embeddings | Embedder | str | None = None,
        thread_id: str = "documents",
        tenant: str | None = None,
        agent_id: str | None = None,
        category: str | None = None,
        vectors: VectorIndex | None = None,
    ) -> None:
        memory = target if isinstance(target, Memory) else None
        self.store = memory.store if memory else open_store(target) if target is None or isinstance(target, (str, os.PathLike)) else target
        for attr in ("units", "vectors", "embeddings"):
            if not hasattr(self.store, attr):
                raise UsageError(f"the {type(self.store).__name__} backend has no {attr} index; use sqlite, postgresql or memory")
        self.scope = Scope(
            user_id=user_id, thread_id=thread_id, tenant=tenant or (memory.tenant if memory else "default"), agent_id=agent_id
        )
        self.embedder = as_embedder(embedding)
        self._embeddings = embedding if isinstance(embedding, Embeddings) else MemstackEmbeddings(self.embedder)
        # a Memory's own index outside the store (Milvus, Chroma) unless another is named
        outside = memory.vectors if memory is not None else None
        self.index: VectorIndex = vectors if vectors is not None else outside if outside is not None else self.store.vectors
        self.category = category

    @property
    def embeddings(self) -> Embeddings:
        return self._embeddings

    # ---- writing -----------------------------------------------------------------------------

    def add_documents(self, documents: list[Document], *, ids: Sequence[str | None] | None = None, **kwargs: Any) -> list[str]:
        """Add or replace documents (by id: ``ids``, else each document's own, else a new uuid)."""
        if ids is not None and len(ids) != len(documents):
            raise InvalidInput(f"got {len(ids)} ids for {len(documents)} documents", field="ids")
        chosen = [str((ids[i] if ids is not None else None) or doc.id or uuid.uuid4().hex) for i, doc in enumerate(documents)]
        if not documents:
            return []
        self._refuse_foreign(chosen)
        now = utcnow()
        units = [
            Unit(
                id=id_,
                scope=self.scope,
                text=doc.page_content,
                timestamp=now,
                kind="note",
                category=self.category,
                metadata={KEPT: _json(doc.metadata)},
            )
            for id_, doc in zip(chosen, documents, strict=True)
        ]
        vectors = CachedEmbedder(self.embedder, self.store.embeddings).embed_documents(self.scope, [u.text for u in units])
        self.store.units.put(units)
        self.index.upsert(units, vectors, model=self.embedder.name)
        return chosen

    def add_texts(
        self, texts: Iterable[str], metadatas: list[dict] | None = None, *, ids: list[str] | None = None, **kwargs: Any
    ) -> list[str]:
        texts = list(texts)
        if metadatas is not None and len(metadatas) != len(texts):
            raise InvalidInput(f"got {len(metadatas)} metadatas for {len(texts)} texts", field="metadatas")
        documents = [Document(page_content=text, metadata=(metadatas[i] if metadatas else {})) for i, text in enumerate(texts)]
        return self.add_documents(documents, ids=ids)

    def _refuse_foreign(self, ids: Sequence[str]) -> None:
        foreign = [u.id for u in self.store.units.get(self.scope, list(ids)) if not self._owns(u)]
        if foreign:
            raise InvalidInput(f"ids already used by the user's other memories: {', '.join(sorted(set(foreign))[:5])}", field="ids")

    def _owns(self, unit: Unit) -> bool:
        return unit.scope.thread_id == self.scope.thread_id and unit.scope.agent_id == self.scope.agent_id

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool:
        """Delete these documents (ids that are not this store's are ignored), or all of them."""
        if ids is None:
            self.store.units.delete(self.scope)
            self.index.delete(self.scope)
            self.store.embeddings.delete(self.scope)
            return True
        owned = [u.id for u in self.store.units.get(self.scope, list(ids)) if self._owns(u)]
        if owned:
            self.store.units.delete(self.scope, owned)
            self.index.delete(self.scope, owned)
        return True

    # ---- reading -----------------------------------------------------------------------------

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        return [_document(u) for u in self.store.units.get(self.scope, list(ids)) if self._owns(u)]

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k, **kwargs)]

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """The ``k`` closest documents with scores in [0, 1]; ``filter`` keeps documents whose
        metadata has each given key with the given value."""
        return self._nearest(self.embedder.embed_query(query), k, filter)

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        return [doc for doc, _ in self._nearest(embedding, k, filter)]

    def _select_relevance_score_fn(self):
        return lambda score: score  # the index's scores are relevance scores in [0, 1] already

    def _nearest(self, vector: Any, k: int, filter: dict[str, Any] | None) -> list[tuple[Document, float]]:
        if k <= 0:
            return []
        where = SearchFilter(thread_ids=(self.scope.thread_id,))  # type: ignore[arg-type]
        user = self.scope.user()
        wanted = k if not filter else k * 4
        while True:
            found = self.index.search(user, vector, k=wanted, where=where)
            units = {u.id: u for u in self.store.units.get(self.scope, [s.id for s in found]) if self._owns(u)}
            pairs = [(_document(units[s.id]), s.score) for s in found if s.id in units]
            if filter:
                pairs = [(doc, score) for doc, score in pairs if all(doc.metadata.get(key) == value for key, value in filter.items())]
            if len(pairs) >= k or len(found) < wanted:
                return pairs[:k]
            wanted *= 4

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings | None = None,
        metadatas: list[dict] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> MemstackVectorStore:
        """A store (``target``, ``user_id`` and the other constructor arguments in ``kwargs``) with these texts added."""
        store = cls(embedding=embedding, **kwargs)
        store.add_texts(texts, metadatas, ids=ids)
        return store


class MemstackRetriever(BaseRetriever):
    """The user's most relevant memories for a query, as Documents (``Memory.search``).

    ``k`` results at most (``invoke(query, k=n)`` overrides it); fewer, or none, when fewer are
    relevant. Each Document's metadata says where it came from: thread, time, kind, round,
    category, source message ids, score, and a document's own metadata.
    """

    memory: Memory
    user_id: str
    k: int = 4
    tenant: str | None = None
    agent_id: str | None = None
    where: SearchFilter | None = None

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None) -> list[Document]:
        hits = self.memory.search(query, user_id=self.user_id, k=k or self.k, where=self.where, tenant=self.tenant, agent_id=self.agent_id)
        return [_hit_document(hit) for hit in hits]


# ---- helpers ---------------------------------------------------------------------------------


def _json(metadata: Any) -> dict[str, Any]:
    try:
        return json.loads(json.dumps(dict(metadata or {}), ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"document metadata must be JSON-serialisable: {exc}", field="metadata") from exc


def _document(unit: Unit) -> Document:
    return Document(id=unit.id, page_content=unit.text, metadata=dict(unit.metadata.get(KEPT, {})))


def _hit_document(hit: Hit) -> Document:
    u = hit.unit
    about = {
        "thread_id": u.scope.thread_id,
        "timestamp": u.timestamp.isoformat(),
        "kind": u.kind,
        "round": u.round,
        "category": u.category,
        "source_ids": list(u.source_ids),
        "score": hit.score,
    }
    return Document(
        id=u.id, page_content=u.text, metadata={**dict(u.metadata.get(KEPT, {})), **{k: v for k, v in about.items() if v is not None}}
    )
