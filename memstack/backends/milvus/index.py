"""MilvusVectorIndex: every user's unit vectors in one Milvus collection, searched with escaped filters.

``MilvusVectorIndex(uri)`` opens a Milvus server (``http://host:19530``, with ``token``) or a
milvus-lite file (one process per file); ``MilvusVectorIndex.from_url("milvus://...")`` takes the
URL form (``url.py``). ``collection`` names the index: an alias onto the generation that holds the
vectors (``collections.py``), made by the first upsert with that upsert's model and dimension. A
collection of that name that memstack did not make is refused (``ForeignCollection``), never
written to or dropped. Rows: id (a hash of tenant, user, agent and unit id), tenant, user_id,
agent_id, thread_id, unit_id, kind, category, ts (epoch microseconds) and vector, with a FLAT
(exact) COSINE index by default.
The contract's steps around each call (empty input, the held model, a staged index) are
``rules.indexes.GenerationIndex``'s; this class does the calls, in its hooks.

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
from functools import partial
from typing import Any

import numpy as np

from ...errors import StoreError, require
from ...types import Scope, Scored, SearchFilter, Unit
from ..rules.index_rows import delete_filter, fetch_filter, row_fields, row_id
from ..rules.indexes import GenerationIndex, Held, reindex_advice
from ..rules.vectors import best_first, check_model, score
from . import collections
from .expressions import EXPRESSION, search_expression
from .url import DEFAULT_COLLECTION, DEFAULT_TIMEOUT, parse

MAX_TOP_K = 16_384
TIE_MARGIN = 16
SERVER_SCHEMES = ("http://", "https://", "tcp://", "grpc://", "unix:")
REINDEX = reindex_advice("milvus")


def _quiet_pymilvus() -> None:
    """pymilvus logs every failed call with a traceback on its own console handler; memstack
    raises StoreError with the same message instead (a CLI prints one line, REST answers 503)."""
    for name in ("pymilvus", "pymilvus.milvus_client"):
        logger = logging.getLogger(name)
        if logger.level < logging.CRITICAL:
            logger.setLevel(logging.CRITICAL)


class MilvusVectorIndex(GenerationIndex):
    """VectorIndex in a Milvus server or milvus-lite; exact with the default FLAT index."""

    kind = "milvus"
    parse_url = staticmethod(parse)

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
        _quiet_pymilvus()
        connect = partial(self._pymilvus.MilvusClient, uri=uri, token=token or "", db_name=db_name, timeout=timeout)
        self._start(_client, f"connecting to Milvus at {self.where}", connect)

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
            check_model(held.model if held else None, held.dimension if held else None, model, dimension, advice=self.reindex)

    # ---- the hooks of GenerationIndex (rules.indexes): its steps around them -----------------

    def _upsert(self, held: Held | None, units: Sequence[Unit], rows: Any, model: str) -> None:
        data = [{"id": row_id(u), **row_fields(u), "vector": row.tolist()} for u, row in zip(units, rows, strict=True)]
        if held is None:
            self._create(model, rows.shape[1])
        self._client.upsert(self._target(), data)

    def _search(self, held: Held, scope: Scope, query: Any, k: int, where: SearchFilter | None) -> list[Scored]:
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

    def _fetch(self, held: Held, scope: Scope, ids: Sequence[str]) -> dict[str, Any]:
        rows = self._client.query(
            self._target(),
            filter=fetch_filter(EXPRESSION, scope, ids),
            output_fields=["unit_id", "vector"],
            consistency_level=self._consistency,
        )
        return {row["unit_id"]: np.asarray(row["vector"], dtype=np.float32) for row in rows}

    def _rows(self, expression: str) -> int:
        rows = self._client.query(self._target(), filter=expression, output_fields=["count(*)"], consistency_level="Strong")
        return int(rows[0]["count(*)"])

    def _delete(self, held: Held, scope: Scope, ids: Sequence[str] | None) -> int:
        expression = delete_filter(EXPRESSION, scope, ids)
        n = self._rows(expression)
        if n:
            self._client.delete(self._target(), filter=expression)
        return n

    def _count(self, held: Held) -> int:
        return self._rows("")

    def _drop_all(self) -> None:
        collections.drop_all(self._client, self.collection)

    # ---- Rebuildable -----------------------------------------------------------------------

    def _unpoint(self, old: Held | None) -> None:
        if old is not None:
            self._client.drop_alias(self.collection)
            self._client.release_collection(old.collection)

    def _point(self, staged: str) -> str:
        """One alias change."""
        collections.point(self._client, self.collection, staged)
        return staged

    def _retire(self, old: Held) -> list[str]:
        """``old`` is released from memory too."""
        self._client.release_collection(old.collection)
        return collections.drop_older(self._client, self.collection, old.generation)

    def close(self) -> None:
        if self._owns_client:
            self._client.close()
