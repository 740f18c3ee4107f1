"""ChromaVectorIndex: each tenant's unit vectors in a Chroma collection, searched with the user in the filter.

``ChromaVectorIndex(path)`` opens Chroma's embedded client on a folder (``chromadb.PersistentClient``,
one process per folder); ``ChromaVectorIndex(host=..., port=...)`` a Chroma server (``chroma run``);
``ChromaVectorIndex.from_url("chroma://...")`` takes the URL form (``url.py``). ``collection``
names the index: a pointer onto the generation that holds the vectors, one collection per tenant
(``collections.py``), made by the first upsert with that upsert's model and dimension. A collection
of that name that memstack did not make is refused (``ForeignCollection``), never written to or
dropped. Rows: id (a hash of tenant, user, agent and unit id), the vector, and metadata tenant,
user_id, agent_id, thread_id, unit_id, kind, category, ts (epoch microseconds), which every search
filters on (``filters.py``); Chroma's HNSW index with cosine distance.
The contract's steps around each call (empty input, the held model, a staged index) are
``rules.indexes.GenerationIndex``'s; this class does the calls, in its hooks.

Decisions:
- No embedding function, ever: memstack always passes its own vectors, so no collection is opened
  with one, and Chroma never loads or downloads a model. Chroma's anonymized telemetry is off.
- HNSW is approximate: the contract's exactness holds at its sizes, and ``bench/vector_indexes.py``
  measures recall at 100k vectors per user (BENCHMARKS.md).
- A reindex builds beside the live index: ``stage()`` is an empty index on a new generation that
  nothing searches, ``switch(staged)`` rewrites the pointer (``Rebuildable`` in ``stores.py``).
- Every Chroma failure (an unreachable server, a timeout, an error answer) is a ``StoreError``
  naming what was being done; a request to a server gives up after ``timeout`` seconds.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

import numpy as np

from ...errors import InvalidInput, MemstackError, StoreError, require
from ...types import Scope, Scored, SearchFilter, Unit
from ..rules.index_rows import delete_filter, fetch_filter, row_fields, row_id
from ..rules.indexes import GenerationIndex, Held, reindex_advice
from ..rules.vectors import best_first, check_model, score
from . import collections
from .filters import WHERE, search_where
from .url import DEFAULT_COLLECTION, DEFAULT_PORT, DEFAULT_TIMEOUT, parse

TIE_MARGIN = 16
REINDEX = reindex_advice("chroma")


def _open(path: str | None, host: str | None, port: int, ssl: bool, timeout: float) -> Any:
    chromadb = require("chromadb", extra="chroma")
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False)
    if path is not None:
        return chromadb.PersistentClient(path=path, settings=settings)
    _heartbeat(host or "127.0.0.1", port, ssl, timeout)
    client = chromadb.HttpClient(host=host or "127.0.0.1", port=port, ssl=ssl, settings=settings)
    _set_timeout(client, timeout)
    return client


def _heartbeat(host: str, port: int, ssl: bool, timeout: float) -> None:
    """Ask the server's heartbeat within ``timeout`` before chromadb's client makes its first
    request, which no timeout bounds (a hung server would hang the process)."""
    import httpx

    netloc = f"[{host}]" if ":" in host else host
    httpx.get(f"{'https' if ssl else 'http'}://{netloc}:{port}/api/v2/heartbeat", timeout=timeout).raise_for_status()


def _set_timeout(client: Any, timeout: float) -> None:
    """chromadb's HTTP client waits forever (httpx ``timeout=None``) and has no setting for it;
    its session is reached through the client's private ``_server`` (the server tests check that it is set)."""
    import httpx

    session = getattr(getattr(client, "_server", None), "_session", None)
    if isinstance(session, httpx.Client):
        session.timeout = httpx.Timeout(timeout)


class ChromaVectorIndex(GenerationIndex):
    """VectorIndex in Chroma (embedded or a server): one collection per tenant and embedder."""

    kind = "chroma"
    parse_url = staticmethod(parse)

    def __init__(
        self,
        path: str | None = None,
        collection: str = DEFAULT_COLLECTION,
        *,
        host: str | None = None,
        port: int = DEFAULT_PORT,
        ssl: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
        _client: Any = None,
        _staged: bool = False,
    ) -> None:
        if (path is None) == (host is None) and _client is None:
            raise InvalidInput("ChromaVectorIndex takes a folder (path=) or a server (host=), one of them", field="vectors")
        self.server = host is not None
        self.collection = collections.check_name(collection)
        self.where = f"{'https' if ssl else 'http'}://{host}:{port}" if host is not None else f"the embedded Chroma at {path}"
        self._staged = _staged  # addresses one generation, made by the first upsert
        self._generation: Held | None = None
        #: heads and parts already opened (by head and nonce: never stale, see collections.Heads),
        #: so that a search reads the pointer and then queries; emptied on any failure
        self._heads: collections.Heads = {}
        self._parts: dict[tuple[str, str, str], Any] = {}
        doing = f"connecting to Chroma at {self.where}" if self.server else "opening the embedded Chroma"
        self._start(_client, doing, partial(_open, path, host, port, ssl, timeout))

    @contextmanager
    def _translated(self, doing: str) -> Iterator[None]:
        try:
            yield
        except MemstackError:
            raise
        except Exception as exc:  # chromadb raises ChromaError, httpx's errors, ValueError and bare Exception
            self._parts.clear()  # a collection dropped behind this process's back is opened again
            raise StoreError(f"Chroma failed while {doing} (collection {self.collection!r} at {self.where}): {exc}") from exc

    # ---- which collections -----------------------------------------------------------------

    def _held(self) -> Held | None:
        if self._staged:
            return self._generation
        with self._translated("reading the collection"):
            return collections.resolve(self._client, self.collection, self._heads)

    def _part(self, held: Held, tenant: str, *, create: bool = False) -> Any:
        """The tenant's collection in ``held`` (None when it has none and ``create`` is false)."""
        key = (held.collection, held.made, tenant)
        found = self._parts.get(key)
        if found is None:
            found = collections.part(self._client, self.collection, held, tenant, create=create)
            if found is not None and held.made:
                self._parts[key] = found
        return found

    def _create(self, model: str, dimension: int) -> Held:
        made = collections.create_generation(self._client, self.collection, model, dimension)
        if self._staged:
            self._generation = made
            return made
        if collections.point(self._client, self.collection, made, create_only=True):
            return made
        collections.drop_generation(self._client, [made.collection])  # another process made the index first: ours is empty
        held = collections.resolve(self._client, self.collection)
        check_model(held.model if held else None, held.dimension if held else None, model, dimension, advice=self.reindex)
        if held is None:
            raise StoreError(f"Chroma collection {self.collection!r} was emptied while this process made it; try again")
        return held

    # ---- the hooks of GenerationIndex (rules.indexes): its steps around them -----------------

    def _upsert(self, held: Held | None, units: Sequence[Unit], rows: Any, model: str) -> None:
        by_tenant: dict[str, list[int]] = {}
        for i, u in enumerate(units):
            by_tenant.setdefault(u.scope.tenant, []).append(i)
        if held is None:
            held = self._create(model, rows.shape[1])
        batch = self._client.get_max_batch_size()
        for tenant, rows_of in by_tenant.items():
            part = self._part(held, tenant, create=True)
            for start in range(0, len(rows_of), batch):
                chunk = rows_of[start : start + batch]
                part.upsert(
                    ids=[row_id(units[i]) for i in chunk],
                    embeddings=rows[chunk],
                    metadatas=[row_fields(units[i]) for i in chunk],  # type: ignore[misc]
                )

    def _search(self, held: Held, scope: Scope, query: Any, k: int, where: SearchFilter | None) -> list[Scored]:
        part = self._part(held, scope.tenant)
        if part is None:
            return []
        found = part.query(
            query_embeddings=[query], n_results=k + TIE_MARGIN, where=search_where(scope, where), include=["metadatas", "distances"]
        )
        metadatas, distances = found["metadatas"][0], found["distances"][0]
        return best_first(((m["unit_id"], score(1.0 - d)) for m, d in zip(metadatas, distances, strict=True)), k)

    def _fetch(self, held: Held, scope: Scope, ids: Sequence[str]) -> dict[str, Any]:
        part = self._part(held, scope.tenant)
        if part is None:
            return {}
        found = part.get(where=fetch_filter(WHERE, scope, ids), include=["metadatas", "embeddings"])
        return {m["unit_id"]: np.asarray(e, dtype=np.float32) for m, e in zip(found["metadatas"], found["embeddings"], strict=True)}

    def _delete(self, held: Held, scope: Scope, ids: Sequence[str] | None) -> int:
        part = self._part(held, scope.tenant)
        if part is None:
            return 0
        found = part.get(where=delete_filter(WHERE, scope, ids), include=[])["ids"]
        if found:
            part.delete(ids=found)
        return len(found)

    def _count(self, held: Held) -> int:
        return sum(p.count() for p in collections.parts(self._client, self.collection, held.generation))

    def _drop_all(self) -> None:
        collections.drop_all(self._client, self.collection)
        self._heads.clear()
        self._parts.clear()

    # ---- Rebuildable -----------------------------------------------------------------------

    def _unpoint(self, old: Held | None) -> None:
        collections.unpoint(self._client, self.collection)

    def _point(self, staged: Held) -> str:
        """One write of the pointer's metadata."""
        collections.point(self._client, self.collection, staged)
        return staged.collection

    def _retire(self, old: Held) -> list[str]:
        return collections.drop_older(self._client, self.collection, old.generation)

    def close(self) -> None:
        if self._owns_client:
            close = getattr(self._client, "close", None)
            if close is not None:
                close()
