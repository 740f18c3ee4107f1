"""The rows of a vector index outside the store (Milvus, Chroma), and the filters on them, built
through the index's own filter syntax.

A row is a unit's vector with its id (a hash of tenant, user, agent and unit id) and the fields
every search filters on: tenant, user_id, agent_id, thread_id, unit_id, kind, category and ts
(epoch microseconds). No agent or thread is stored as ``""``; a category as ``"#" + category``
and none as ``""`` (Milvus 2.3 servers have no nullable fields, and the prefix keeps a category
``""`` apart from none). Which terms a search, fetch or delete has is decided here once; a
``Syntax`` writes each term as its index takes it (a quoted expression, a ``where`` dict).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from ...types import Scope, SearchFilter, Unit
from .time import epoch_us

CATEGORY_MARK = "#"
T = TypeVar("T")


def stored_category(category: str | None) -> str:
    """The category of a row: ``""`` for none, else the category behind ``CATEGORY_MARK``."""
    return "" if category is None else CATEGORY_MARK + category


def row_fields(unit: Unit) -> dict[str, Any]:
    """The fields of the unit's row that filters read (all but its id and vector)."""
    return {
        "tenant": unit.scope.tenant,
        "user_id": unit.scope.user_id,
        "agent_id": unit.scope.agent_id or "",
        "thread_id": unit.scope.thread_id or "",
        "unit_id": unit.id,
        "kind": unit.kind,
        "category": stored_category(unit.category),
        "ts": epoch_us(unit.timestamp),
    }


def row_id(unit: Unit) -> str:
    """A fixed-length id for (tenant, user, agent, unit id); ids cannot hold the separator."""
    return hashlib.sha256("\x1f".join((*unit.scope.key[:3], unit.id)).encode()).hexdigest()


class Syntax(Protocol[T]):
    """How an index writes a filter's terms. ``tenant``: whether filters name the tenant (false
    where each tenant has a collection of its own)."""

    tenant: bool

    def equal(self, field: str, value: str) -> T: ...

    def one_of(self, field: str, values: Sequence[str]) -> T: ...

    def at_least(self, field: str, value: int) -> T: ...

    def below(self, field: str, value: int) -> T: ...

    def all(self, terms: list[T]) -> T: ...


def _user(s: Syntax[T], scope: Scope, agent: str | None) -> list[T]:
    terms = [s.equal("tenant", scope.tenant)] if s.tenant else []
    terms.append(s.equal("user_id", scope.user_id))
    if agent is not None:
        terms.append(s.equal("agent_id", agent))
    return terms


def _one_of(s: Syntax[T], field: str, values: Sequence[str]) -> T:
    return s.one_of(field, list(dict.fromkeys(values)))


def search_filter(s: Syntax[T], scope: Scope, where: SearchFilter | None) -> T:
    """The scope's user (and agent) and the search filter, as one filter."""
    terms = _user(s, scope, scope.agent_id)
    if where is not None:
        if where.thread_ids:
            terms.append(_one_of(s, "thread_id", where.thread_ids))
        if where.categories:
            terms.append(_one_of(s, "category", [stored_category(c) for c in where.categories]))
        if where.kinds:
            terms.append(_one_of(s, "kind", where.kinds))
        if where.since is not None:
            terms.append(s.at_least("ts", epoch_us(where.since)))
        if where.until is not None:
            terms.append(s.below("ts", epoch_us(where.until)))
    return s.all(terms)


def fetch_filter(s: Syntax[T], scope: Scope, ids: Sequence[str]) -> T:
    """The units ``ids`` of the scope's user (and agent)."""
    return s.all([*_user(s, scope, scope.agent_id), _one_of(s, "unit_id", ids)])


def delete_filter(s: Syntax[T], scope: Scope, ids: Sequence[str] | None) -> T:
    """Ids in the user (and agent), else the scope's exact thread, else the whole user."""
    exact_thread = ids is None and scope.thread_id is not None
    terms = _user(s, scope, (scope.agent_id or "") if scope.agent_id is not None or exact_thread else None)
    if ids is not None:
        terms.append(_one_of(s, "unit_id", ids))
    elif scope.thread_id is not None:
        terms.append(s.equal("thread_id", scope.thread_id))
    return s.all(terms)
