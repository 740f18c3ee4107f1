"""A LangGraph long-term store (``BaseStore``) over a memstack store, with semantic search through
memstack's embedders (the local multilingual e5 by default, or any provider or LangChain model).

Items are JSON values under a namespace (a tuple of labels, kept joined by "." since a label may
not contain one) and a key, in ``lg_items`` beside the store's data (see ``tables``); each
indexed text of an item has a unit vector in ``lg_item_vectors``, tagged with the embedder's
name. A batch runs in one transaction, in order (a get after a put in the same batch sees it);
the texts to embed and the queries are embedded first, in one call each, outside it.

Search reads the items under the namespace prefix, keeps those matching ``filter`` (exact
values, nested objects, and the operators $eq $ne $gt $gte $lt $lte), and orders them by the
query's best cosine similarity to any of the item's vectors (score in [-1, 1]); items without a
vector of the current embedder come after, and without a query everything is newest first.
Filtering happens in Python over the prefix's items: fine for agent memories, not for millions.
TTLs are not supported (``supports_ttl`` is False).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np

from ..errors import InvalidInput, importing
from ..providers.embeddings import Embedder
from .embedders import aembed_documents, aembed_query, as_embedder
from .tables import Tables, open_tables

with importing("langgraph", "langgraph"):
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        validate_op_namespace,
    )
    from langgraph.store.base.embed import ensure_embeddings, get_text_at_path, tokenize_path

Execute = Callable[[str, Sequence[Any]], list[tuple]]


@dataclass
class _Plan:
    """What a batch must embed before it runs: each put's texts by field, and the queries."""

    texts: dict[int, list[tuple[str, str]]] = field(default_factory=dict)  # op index -> [(field, text)]
    queries: list[str] = field(default_factory=list)

    def documents(self) -> list[str]:
        return [text for pairs in self.texts.values() for _, text in pairs]


class MemstackStore(BaseStore):
    """LangGraph's BaseStore in a memstack store (``sqlite:///file.db``, ``postgresql://...``, ``memory://``).

    ``target``: a Memory, a Store, a URL or path, or None for the default SQLite file.
    ``index``: LangGraph's IndexConfig; ``embed`` may be a memstack provider string ("local",
    "openai:text-embedding-3-small", ...), an Embedder, a LangChain Embeddings or an embedding
    function; ``fields`` the JSON paths to embed (default "$", the whole value); ``dims``, when
    given, is checked against the vectors. Without ``index`` search filters but does not rank.
    """

    supports_ttl = False

    def __init__(self, target: Any = None, *, index: dict[str, Any] | None = None, tenant: str = "default") -> None:
        self.tables: Tables = open_tables(target)
        self.tenant = tenant
        self.index_config = dict(index) if index else None
        self.embedder: Embedder | None = _embedder_of(index["embed"] if index and "embed" in index else "local") if index else None
        self.fields: list[str] = list((index or {}).get("fields") or ["$"])
        self.dims: int | None = (index or {}).get("dims")

    # ---- the two methods every BaseStore derives the rest from --------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        plan = self._plan(ops)
        documents = plan.documents()
        vectors = self._checked(self.embedder.embed_documents(documents)) if documents and self.embedder else None
        queries = {q: self.embedder.embed_query(q) for q in plan.queries} if self.embedder else {}
        return self._run(ops, plan, vectors, queries)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        plan = self._plan(ops)
        vectors = None
        queries: dict[str, np.ndarray] = {}
        if self.embedder is not None:
            if documents := plan.documents():
                vectors = self._checked(await aembed_documents(self.embedder, documents))
            for query in plan.queries:
                queries[query] = await aembed_query(self.embedder, query)
        return await asyncio.to_thread(self._run, ops, plan, vectors, queries)

    # ---- planning: validate, and collect what to embed ----------------------------------------

    def _plan(self, ops: list[Op]) -> _Plan:
        plan = _Plan()
        for i, op in enumerate(ops):
            if not isinstance(op, (GetOp, PutOp, SearchOp, ListNamespacesOp)):
                raise InvalidInput(f"unknown store operation {type(op).__name__}")
            validate_op_namespace(op)
            if isinstance(op, PutOp):
                _check_put(op)
                if op.value is not None and op.index is not False and self.embedder is not None:
                    plan.texts[i] = self._texts(op.value, self.fields if op.index is None else op.index)
            elif isinstance(op, SearchOp) and op.query and self.embedder is not None and op.query not in plan.queries:
                plan.queries.append(op.query)
        return plan

    @staticmethod
    def _texts(value: dict[str, Any], paths: Sequence[str]) -> list[tuple[str, str]]:
        out = []
        for path in paths:
            texts = get_text_at_path(value, path if path == "$" else tokenize_path(path))
            out += [(path, texts[0])] if len(texts) == 1 else [(f"{path}.{n}", text) for n, text in enumerate(texts)]
        return [(name, text) for name, text in out if text.strip()]

    def _checked(self, vectors: np.ndarray) -> np.ndarray:
        if self.dims is not None and len(vectors) and vectors.shape[1] != self.dims:
            raise InvalidInput(
                f"the embedder returned {vectors.shape[1]}-dimensional vectors; the index config says dims={self.dims}", field="dims"
            )
        return vectors

    # ---- running: one transaction when anything is written ------------------------------------

    def _run(self, ops: list[Op], plan: _Plan, vectors: np.ndarray | None, queries: dict[str, np.ndarray]) -> list[Result]:
        rows = iter(vectors if vectors is not None else ())
        embedded = {i: [(name, next(rows)) for name, _ in pairs] for i, pairs in plan.texts.items()}
        if not any(isinstance(op, PutOp) for op in ops):
            return [self._one(self.tables.query, op, queries, None) for op in ops]
        with self.tables.write() as tx:
            return [self._one(tx.execute, op, queries, embedded.get(i)) for i, op in enumerate(ops)]

    def _one(self, execute: Execute, op: Op, queries: dict[str, np.ndarray], vectors: list[tuple[str, np.ndarray]] | None) -> Result:
        if isinstance(op, GetOp):
            return self._get(execute, op)
        if isinstance(op, PutOp):
            return self._put(execute, op, vectors)
        if isinstance(op, SearchOp):
            return self._search(execute, op, queries.get(op.query) if op.query else None)
        return self._namespaces(execute, op)

    def _get(self, execute: Execute, op: GetOp) -> Item | None:
        rows = execute(
            "SELECT prefix, key, value, created_at, updated_at FROM lg_items WHERE tenant = ? AND prefix = ? AND key = ?",
            (self.tenant, _joined(op.namespace), str(op.key)),
        )
        return _item(rows[0]) if rows else None

    def _put(self, execute: Execute, op: PutOp, vectors: list[tuple[str, np.ndarray]] | None) -> None:
        key = (self.tenant, _joined(op.namespace), str(op.key))
        execute("DELETE FROM lg_item_vectors WHERE tenant = ? AND prefix = ? AND key = ?", key)
        if op.value is None:
            execute("DELETE FROM lg_items WHERE tenant = ? AND prefix = ? AND key = ?", key)
            return None
        now = datetime.now(timezone.utc).isoformat()
        execute(
            "INSERT INTO lg_items VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, prefix, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            (*key, _json(op.value), now, now),
        )
        for name, vector in vectors or ():
            execute(
                "INSERT INTO lg_item_vectors VALUES (?, ?, ?, ?, ?, ?)",
                (*key, name, self.embedder.name, np.asarray(vector, np.float32).tobytes()),
            )  # type: ignore[union-attr]
        return None

    def _search(self, execute: Execute, op: SearchOp, query: np.ndarray | None) -> list[SearchItem]:
        under, params = _under(op.namespace_prefix)
        rows = execute(
            f"SELECT prefix, key, value, created_at, updated_at FROM lg_items WHERE tenant = ? AND {under} ORDER BY updated_at DESC, prefix, key",
            (self.tenant, *params),
        )
        items = [_item(row) for row in rows]
        if op.filter:
            items = [item for item in items if all(matches(item.value.get(k), v) for k, v in op.filter.items())]
        scores = self._scores(execute, op.namespace_prefix, query) if query is not None and items else {}
        scored = sorted(
            (item for item in items if (item.namespace, item.key) in scores), key=lambda item: -scores[(item.namespace, item.key)]
        )
        ranked = scored + [item for item in items if (item.namespace, item.key) not in scores]
        page = ranked[max(op.offset, 0) : max(op.offset, 0) + max(op.limit, 0)]
        return [
            SearchItem(item.namespace, item.key, item.value, item.created_at, item.updated_at, scores.get((item.namespace, item.key)))
            for item in page
        ]

    def _scores(self, execute: Execute, prefix: tuple[str, ...], query: np.ndarray) -> dict[tuple[tuple[str, ...], str], float]:
        """Each item's best cosine similarity to the query, over its vectors of this embedder."""
        under, params = _under(prefix)
        rows = execute(
            f"SELECT prefix, key, vector FROM lg_item_vectors WHERE tenant = ? AND model = ? AND {under}",
            (self.tenant, self.embedder.name, *params),
        )  # type: ignore[union-attr]
        if not rows:
            return {}
        q = np.asarray(query, np.float32)
        sims = np.stack([np.frombuffer(row[2], np.float32) for row in rows]) @ (q / max(float(np.linalg.norm(q)), 1e-12))
        best: dict[tuple[tuple[str, ...], str], float] = {}
        for (prefix_, key, _), sim in zip(rows, sims.tolist(), strict=True):
            name = (_split(prefix_), key)
            best[name] = max(sim, best.get(name, -1.0))
        return best

    def _namespaces(self, execute: Execute, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found = [_split(row[0]) for row in execute("SELECT DISTINCT prefix FROM lg_items WHERE tenant = ?", (self.tenant,))]
        found = [ns for ns in found if all(namespace_matches(c, ns) for c in op.match_conditions or ())]
        names = sorted({ns[: op.max_depth] for ns in found} if op.max_depth is not None else set(found))
        return names[max(op.offset, 0) : max(op.offset, 0) + max(op.limit, 0)]


# ---- pure helpers ----------------------------------------------------------------------------


def _embedder_of(embed: Any) -> Embedder:
    """A provider string, Embedder or Embeddings as is; a plain function through LangGraph's wrapper."""
    if callable(embed) and not hasattr(embed, "embed_documents"):
        return as_embedder(ensure_embeddings(embed))
    return as_embedder(embed)


def _check_put(op: PutOp) -> None:
    if not op.namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    if op.namespace[0] == "langgraph":
        raise InvalidNamespaceError(f'Root label for namespace cannot be "langgraph". Got: {op.namespace}')


def _joined(namespace: tuple[str, ...]) -> str:
    return ".".join(namespace)


def _split(prefix: str) -> tuple[str, ...]:
    return tuple(prefix.split(".")) if prefix else ()


def _under(prefix: tuple[str, ...]) -> tuple[str, list[Any]]:
    """SQL (and its parameters) for "the namespace is ``prefix`` or below it"."""
    if not prefix:
        return "1 = 1", []
    joined = _joined(prefix)
    return "(prefix = ? OR substr(prefix, 1, CAST(? AS INTEGER)) = ?)", [joined, len(joined) + 1, joined + "."]


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"store values must be JSON-serialisable: {exc}", field="value") from exc


def _item(row: tuple) -> Item:
    prefix, key, value, created_at, updated_at = row
    return Item(
        value=json.loads(value),
        key=key,
        namespace=_split(prefix),
        created_at=datetime.fromisoformat(created_at),
        updated_at=datetime.fromisoformat(updated_at),
    )


def matches(value: Any, wanted: Any) -> bool:
    """``filter`` semantics (as LangGraph's stores): operators, nested objects, lists item by item."""
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_compare(value, op, operand) for op, operand in wanted.items())
        return isinstance(value, dict) and all(matches(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(wanted)
            and all(matches(a, b) for a, b in zip(value, wanted, strict=True))
        )
    return value == wanted


def _compare(value: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return value == operand
    if op == "$ne":
        return value != operand
    if op not in _ORDER:
        raise InvalidInput(f"unsupported filter operator {op!r}; expected $eq, $ne, $gt, $gte, $lt or $lte", field="filter")
    try:
        return _ORDER[op](float(value), float(operand))
    except (TypeError, ValueError):
        return False  # a missing or non-numeric value is not greater or less than anything


_ORDER: dict[str, Callable[[float, float], bool]] = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


def namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """A prefix or suffix condition, "*" matching any one label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        part = namespace[: len(path)]
    elif condition.match_type == "suffix":
        part = namespace[len(namespace) - len(path) :]
    else:
        raise InvalidInput(f"unsupported namespace match type {condition.match_type!r}; expected prefix or suffix")
    return all(p == "*" or p == label for p, label in zip(path, part, strict=True))
