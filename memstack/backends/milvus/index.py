"""MilvusVectorIndex: every user's unit vectors in one Milvus collection, searched with escaped filters.

``MilvusVectorIndex(uri)`` opens a Milvus server (``http://host:19530``, with ``token``) or a
milvus-lite file (one process per file); ``MilvusVectorIndex.from_url("milvus://...")`` takes the
URL form (``url.py``). ``collection`` names the index: an alias onto the generation that holds the
vectors (``collections.py``), made by the first upsert with that upsert's model and dimension. A
collection of that name that memstack did not make is refused (``ForeignCollection``), never
written to or dropped. Rows: id (a hash of tenant, user, agent and unit id), tenant, user_id,
agent_id, thread_id, unit_id, kind, category, ts (epoch microseconds) and vector, with a FLAT
(exact) COSINE index by default.

A reindex builds beside the live index: ``stage()`` is an empty index on a new generation that
nothing searches, ``switch(staged)`` moves the alias to it (``Rebuildable`` in ``stores.py``).

Milvus returns at most 16,384 results per search, so ``k`` is capped there; a few more than
``k`` are fetched so that ties at the k-th place still resolve by unit id. Every pymilvus failure
(an unreachable server included) is a ``StoreError`` naming what was being done; pymilvus's own
console log of the same failure, with its traceback, is turned down when the index opens.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ...errors import InvalidInput, StoreError, require
from ...types import IndexSwitch, Scope, Scored, SearchFilter, Unit
from ..rules.time import epoch_us
from ..rules.vectors import best_first, check_model, query_row, score, upsert_batch
from . import collections
from .collections import Held
from .expressions import delete_expression, one_of, primary_key, search_expression, stored_category, user_expression
from .url import DEFAULT_COLLECTION, DEFAULT_TIMEOUT, parse

MAX_TOP_K = 16_384
TIE_MARGIN = 16
SERVER_SCHEMES = ("http://", "https://", "tcp://", "grpc://", "unix:")
#: what a model or dimension mismatch advises: a new collection, the live one left alone
REINDEX = "run `memstack reindex` to embed every unit with the new model into a new Milvus collection, which then replaces this one (nothing is dropped)"


def _quiet_pymilvus() -> None:
    """pymilvus logs every failed call with a traceback on its own console handler; memstack
    raises StoreError with the same message instead (a CLI prints one line, REST answers 503)."""
    for name in ("pymilvus", "pymilvus.milvus_client"):
        logger = logging.getLogger(name)
        if logger.level < logging.CRITICAL:
            logger.setLevel(logging.CRITICAL)


class MilvusVectorIndex:
    """VectorIndex in a Milvus server or milvus-lite; exact with the default FLAT index."""

    def __init__(
        self,
        uri: str = "./memstack-milvus.db",
        collection: str = DEFAULT_COLLECTION,
        token: str | None = None,
        *,
        index_type: str = "FLAT",
        db_name: str = "",
        timeout: float = DEFAULT_TIMEOUT,
        consistency: str = "Strong",
        _client: Any = None,
        _staged: bool = False,
    ) -> None:
        self._pymilvus = require("pymilvus", extra="milvus")
        self.server = uri.startswith(SERVER_SCHEMES)
        if not self.server:
            require("milvus_lite", extra="milvus", package="milvus-lite")
        self.collection = collections.check_name(collection)
        self.where = f"{uri if self.server else 'milvus-lite ' + uri}{'/' + db_name if db_name else ''}"
        self._index_type = index_type
        #: the reads' consistency level (``url.py``): Strong sees every vector written before
        self._consistency = consistency
        self._staged = _staged  # addresses one generation by its own name, made by the first upsert
        self._generation: str | None = None
        self._owns_client = _client is None
        _quiet_pymilvus()
        if _client is not None:
            self._client = _client
        else:
            with self._translated(f"connecting to Milvus at {self.where}"):
                self._client = self._pymilvus.MilvusClient(uri=uri, token=token or "", db_name=db_name, timeout=timeout)
        if not self._staged:
            self._held()  # a foreign collection is refused now, not at the first search

    @classmethod
    def from_url(cls, url: str) -> MilvusVectorIndex:
        """The index a ``milvus://`` URL names (see ``url.py``)."""
        return cls(**parse(url))

    @property
    def location(self) -> str:
        """What the store's profile records: the kind and the index's name (no host, no secret:
        another process may reach the same server by another address)."""
        return f"milvus:{self.collection}"

    @contextmanager
    def _translated(self, doing: str) -> Iterator[None]:
        try:
            yield
        except self._pymilvus.MilvusException as exc:
            raise StoreError(
                f"Milvus failed while {doing} (collection {self.collection!r} at {self.where}): {getattr(exc, 'message', None) or exc}"
            ) from exc

    # ---- which collection ----------------------------------------------------------------------

    def _held(self) -> Held | None:
        """The generation searched now (None: the index is empty). Resolved on every call: another
        process's reindex moves the alias, and the next call here follows it."""
        with self._translated("reading the collection"):
            if self._staged:
                return collections.held_at(self._client, self._generation) if self._generation else None
            return collections.resolve(self._client, self.collection)

    def _target(self) -> str:
        return self._generation if self._staged and self._generation else self.collection

    def _create(self, model: str, dimension: int) -> None:
        name = collections.create_generation(self._client, self._pymilvus, self.collection, model, dimension, self._index_type)
        if self._staged:
            self._generation = name
        elif not collections.point(self._client, self.collection, name, create_only=True):
            self._client.drop_collection(name)  # another process made the index first: ours is empty, never addressed
            held = collections.resolve(self._client, self.collection)
            check_model(held.model if held else None, held.dimension if held else None, model, dimension, advice=REINDEX)

    # ---- VectorIndex -----------------------------------------------------------------------

    def upsert(self, units: Sequence[Unit], vectors: Any, *, model: str) -> None:
        units, rows = upsert_batch(units, vectors)
        if not units:
            return
        data = [
            {
                "id": primary_key(u),
                "tenant": u.scope.tenant,
                "user_id": u.scope.user_id,
                "agent_id": u.scope.agent_id or "",
                "thread_id": u.scope.thread_id or "",
                "unit_id": u.id,
                "kind": u.kind,
                "category": stored_category(u.category),
                "ts": epoch_us(u.timestamp),
                "vector": row.tolist(),
            }
            for u, row in zip(units, rows, strict=True)
        ]
        held = self._held()
        check_model(held.model if held else None, held.dimension if held else None, model, rows.shape[1], advice=REINDEX)
        with self._translated("storing vectors"):
            if held is None:
                self._create(model, rows.shape[1])
            self._client.upsert(self._target(), data)

    def search(self, scope: Scope, vector: Any, *, k: int, where: SearchFilter | None = None) -> list[Scored]:
        if k <= 0:
            return []
        held = self._held()
        if held is None:
            return []
        query = query_row(vector, held.dimension, advice=REINDEX)
        with self._translated("searching vectors"):
            found = self._client.search(
                self._target(),
                data=[query.tolist()],
                limit=min(k + TIE_MARGIN, MAX_TOP_K),
                filter=search_expression(scope, where),
                output_fields=["unit_id"],
                search_params={"metric_type": "COSINE"},
                consistency_level=self._consistency,
            )
        return best_first(((hit["entity"]["unit_id"], score(hit["distance"])) for hit in found[0]), min(k, MAX_TOP_K))

    def fetch(self, scope: Scope, ids: Sequence[str]) -> dict[str, Any]:
        if not ids or self._held() is None:
            return {}
        expression = " and ".join([*user_expression(scope), one_of("unit_id", list(dict.fromkeys(ids)))])
        with self._translated("reading vectors"):
            rows = self._client.query(
                self._target(), filter=expression, output_fields=["unit_id", "vector"], consistency_level=self._consistency
            )
        return {row["unit_id"]: np.asarray(row["vector"], dtype=np.float32) for row in rows}

    def _count(self, expression: str) -> int:
        rows = self._client.query(self._target(), filter=expression, output_fields=["count(*)"], consistency_level="Strong")
        return int(rows[0]["count(*)"])

    def delete(self, scope: Scope, ids: Sequence[str] | None = None) -> int:
        if ids is not None and not ids:
            return 0
        if self._held() is None:
            return 0
        expression = delete_expression(scope, ids)
        with self._translated("deleting vectors"):
            n = self._count(expression)
            if n:
                self._client.delete(self._target(), filter=expression)
            return n

    def delete_user(self, scope: Scope) -> int:
        """Delete every vector of the scope's tenant and user (every agent and thread)."""
        return self.delete(Scope(user_id=scope.user_id, tenant=scope.tenant))

    def info(self) -> tuple[str | None, int | None, int]:
        held = self._held()
        if held is None:
            return None, None, 0
        with self._translated("counting vectors"):
            return held.model, held.dimension, self._count("")

    def reset(self) -> None:
        """Drop every vector: the alias and the generations memstack made for it (a collection it
        did not make is refused, never dropped). A reindex uses ``stage``/``switch`` instead."""
        if self._staged:
            raise InvalidInput("a staged index is switched to or left, not reset", field="vectors")
        with self._translated("dropping the index's collections"):
            collections.drop_all(self._client, self.collection)

    # ---- Rebuildable -----------------------------------------------------------------------

    def stage(self) -> MilvusVectorIndex:
        """An empty index on the next generation of this one (made by its first upsert, with that
        upsert's model and dimension), which nothing searches until ``switch``."""
        if self._staged:
            raise InvalidInput("a staged index cannot stage another", field="vectors")
        self._held()  # refuses a foreign collection before anything is made
        staged = MilvusVectorIndex.__new__(MilvusVectorIndex)
        staged.__dict__.update(self.__dict__)
        staged._staged, staged._generation, staged._owns_client = True, None, False
        return staged

    def switch(self, staged: Any) -> IndexSwitch:
        """Make every process search ``staged`` (one alias change); the generation it replaces is
        kept but released from memory, and older generations memstack made for the index are
        dropped. A staged index that never got a vector leaves the index empty."""
        if not isinstance(staged, MilvusVectorIndex) or not staged._staged or staged.collection != self.collection:
            raise InvalidInput(f"switch takes an index staged from this one ({self.collection!r})", field="vectors")
        old = self._held()
        with self._translated("switching the index to its new collection"):
            if staged._generation is None:
                if old is not None:
                    self._client.drop_alias(self.collection)
                    self._client.release_collection(old.collection)
                return IndexSwitch(None, old.collection if old else None)
            collections.point(self._client, self.collection, staged._generation)
            if old is None:
                return IndexSwitch(staged._generation)
            self._client.release_collection(old.collection)
            dropped = collections.drop_older(self._client, self.collection, old.generation)
        return IndexSwitch(staged._generation, old.collection, tuple(dropped))

    def close(self) -> None:
        if self._owns_client:
            self._client.close()
