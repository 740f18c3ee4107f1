"""Milvus vector index: every user's unit vectors in one collection, searched with escaped filters.

``MilvusVectorIndex()`` opens a milvus-lite file (one process per file), or pass a server URI
(``http://host:19530``) and ``token``. The collection is made by the first upsert, with that
upsert's dimension and the model name as a collection property; ``reset`` drops it. Fields: id
(primary key: a hash of tenant, user, agent and unit id), tenant, user_id, agent_id, thread_id,
unit_id, kind, category (nullable), ts (epoch microseconds) and vector, with a FLAT (exact) COSINE
index by default. Scope and SearchFilter become a boolean expression whose every string goes
through ``quote``, so no value can change the expression (``x" or user_id != "`` stays a string).

Milvus returns at most 16,384 results per search, so ``k`` is capped there; a few more than
``k`` are fetched so that ties at the k-th place still resolve by unit id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..errors import StoreError, require
from ..types import Scope, Scored, SearchFilter, Unit
from .vector_rules import best_first, check_model, epoch_us, query_row, score, upsert_batch

MAX_TOP_K = 16_384
TIE_MARGIN = 16
ID_BYTES = 1024  # 256 characters of at most 4 UTF-8 bytes
MODEL_PROPERTY = "memstack.model"
SERVER_SCHEMES = ("http://", "https://", "tcp://", "grpc://", "unix:")


def quote(value: str) -> str:
    """``value`` as a Milvus string literal: backslashes, double quotes and line breaks escaped."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return f'"{escaped}"'


def one_of(field: str, values: Sequence[str]) -> str:
    return f"{field} in [{', '.join(quote(v) for v in values)}]"


def user_expression(scope: Scope) -> list[str]:
    terms = [f"tenant == {quote(scope.tenant)}", f"user_id == {quote(scope.user_id)}"]
    if scope.agent_id is not None:
        terms.append(f"agent_id == {quote(scope.agent_id)}")
    return terms


def search_expression(scope: Scope, where: SearchFilter | None) -> str:
    """The scope's tenant, user (and agent) and the filter, as one Milvus boolean expression."""
    terms = user_expression(scope)
    if where is not None:
        for field, values in (("thread_id", where.thread_ids), ("category", where.categories), ("kind", where.kinds)):
            if values:
                terms.append(one_of(field, values))
        if where.since is not None:
            terms.append(f"ts >= {epoch_us(where.since)}")
        if where.until is not None:
            terms.append(f"ts < {epoch_us(where.until)}")
    return " and ".join(terms)


def delete_expression(scope: Scope, ids: Sequence[str] | None) -> str:
    """Ids in the user (and agent), else the scope's exact thread, else the whole user."""
    terms = [f"tenant == {quote(scope.tenant)}", f"user_id == {quote(scope.user_id)}"]
    if scope.agent_id is not None or (ids is None and scope.thread_id is not None):
        terms.append(f"agent_id == {quote(scope.agent_id or '')}")
    if ids is not None:
        terms.append(one_of("unit_id", list(dict.fromkeys(ids))))
    elif scope.thread_id is not None:
        terms.append(f"thread_id == {quote(scope.thread_id)}")
    return " and ".join(terms)


def primary_key(unit: Unit) -> str:
    """A fixed-length key for (tenant, user, agent, unit id); ids cannot hold the separator."""
    return hashlib.sha256("\x1f".join((*unit.scope.key[:3], unit.id)).encode()).hexdigest()


class MilvusVectorIndex:
    """VectorIndex in Milvus or milvus-lite; exact with the default FLAT index."""

    def __init__(
        self, uri: str = "./memstack-milvus.db", collection: str = "memstack_units", token: str | None = None, *, index_type: str = "FLAT"
    ) -> None:
        self._pymilvus = require("pymilvus", extra="milvus")
        if not uri.startswith(SERVER_SCHEMES):
            require("milvus_lite", extra="milvus", package="milvus-lite")
        self.collection = collection
        self._index_type = index_type
        with self._translated(f"opening Milvus at {uri}"):
            self._client = self._pymilvus.MilvusClient(uri=uri, token=token or "")

    @contextmanager
    def _translated(self, doing: str) -> Iterator[None]:
        try:
            yield
        except self._pymilvus.MilvusException as exc:
            raise StoreError(f"Milvus failed while {doing}: {exc}") from exc

    def _held(self) -> tuple[str | None, int | None]:
        """(model, dimension) of the collection, or (None, None) when it does not exist."""
        if not self._client.has_collection(self.collection):
            return None, None
        described = self._client.describe_collection(self.collection)
        dimension = next(f["params"]["dim"] for f in described["fields"] if f["name"] == "vector")
        return described.get("properties", {}).get(MODEL_PROPERTY), int(dimension)

    def _create(self, model: str, dimension: int) -> None:
        DataType = self._pymilvus.DataType
        schema = self._pymilvus.MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
        for name in ("tenant", "user_id", "agent_id", "thread_id", "unit_id"):
            schema.add_field(name, DataType.VARCHAR, max_length=ID_BYTES)
        schema.add_field("kind", DataType.VARCHAR, max_length=64)
        schema.add_field("category", DataType.VARCHAR, max_length=ID_BYTES, nullable=True)
        schema.add_field("ts", DataType.INT64)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dimension)
        index = self._client.prepare_index_params()
        index.add_index(field_name="vector", index_type=self._index_type, metric_type="COSINE")
        self._client.create_collection(
            self.collection, schema=schema, index_params=index, consistency_level="Strong", properties={MODEL_PROPERTY: model}
        )

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
                "category": u.category,
                "ts": epoch_us(u.timestamp),
                "vector": row.tolist(),
            }
            for u, row in zip(units, rows, strict=True)
        ]
        with self._translated("storing vectors"):
            held_model, held_dimension = self._held()
            check_model(held_model, held_dimension, model, rows.shape[1])
            if held_model is None:
                self._create(model, rows.shape[1])
            self._client.upsert(self.collection, data)

    def search(self, scope: Scope, vector: Any, *, k: int, where: SearchFilter | None = None) -> list[Scored]:
        if k <= 0:
            return []
        with self._translated("searching vectors"):
            _, dimension = self._held()
            if dimension is None:
                return []
            query = query_row(vector, dimension)
            found = self._client.search(
                self.collection,
                data=[query.tolist()],
                limit=min(k + TIE_MARGIN, MAX_TOP_K),
                filter=search_expression(scope, where),
                output_fields=["unit_id"],
                search_params={"metric_type": "COSINE"},
            )
        return best_first(((hit["entity"]["unit_id"], score(hit["distance"])) for hit in found[0]), min(k, MAX_TOP_K))

    def fetch(self, scope: Scope, ids: Sequence[str]) -> dict[str, Any]:
        if not ids:
            return {}
        with self._translated("reading vectors"):
            if self._held()[1] is None:
                return {}
            expression = " and ".join([*user_expression(scope), one_of("unit_id", list(dict.fromkeys(ids)))])
            rows = self._client.query(self.collection, filter=expression, output_fields=["unit_id", "vector"])
        return {row["unit_id"]: np.asarray(row["vector"], dtype=np.float32) for row in rows}

    def _count(self, expression: str) -> int:
        rows = self._client.query(self.collection, filter=expression, output_fields=["count(*)"])
        return int(rows[0]["count(*)"])

    def delete(self, scope: Scope, ids: Sequence[str] | None = None) -> int:
        if ids is not None and not ids:
            return 0
        expression = delete_expression(scope, ids)
        with self._translated("deleting vectors"):
            if not self._client.has_collection(self.collection):
                return 0
            n = self._count(expression)
            if n:
                self._client.delete(self.collection, filter=expression)
            return n

    def delete_user(self, scope: Scope) -> int:
        """Delete every vector of the scope's tenant and user (every agent and thread)."""
        return self.delete(Scope(user_id=scope.user_id, tenant=scope.tenant))

    def info(self) -> tuple[str | None, int | None, int]:
        with self._translated("reading index info"):
            model, dimension = self._held()
            return model, dimension, self._count("") if model is not None else 0

    def reset(self) -> None:
        with self._translated("dropping the collection"):
            if self._client.has_collection(self.collection):
                self._client.drop_collection(self.collection)

    def close(self) -> None:
        self._client.close()
