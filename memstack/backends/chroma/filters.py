"""Chroma ``where`` filters built as data, and the row metadata they filter on.

A Chroma filter is a dict, so no value can change it (``x" or user_id != "`` is a user name like
any other). The tenant is not in the filters: each tenant has its own collection (``collections.py``
checks a part's tenant before it is used), and each term costs Chroma a pass over its metadata, so
a filter starts with the user (and the agent). A unit's category is stored as ``"#" + category`` and no category as ``""``, as in the
Milvus rows, which keeps a category ``""`` apart from none; no agent or thread is ``""`` too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from ...types import Scope, SearchFilter, Unit
from ..rules.time import epoch_us

CATEGORY_MARK = "#"
Where = dict[str, Any]


def stored_category(category: str | None) -> str:
    """The category of a row: ``""`` for none, else the category behind ``CATEGORY_MARK``."""
    return "" if category is None else CATEGORY_MARK + category


def row_metadata(unit: Unit) -> dict[str, Any]:
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


def _eq(field: str, value: str | int) -> Where:
    return {field: {"$eq": value}}


def _in(field: str, values: Sequence[str]) -> Where:
    return {field: {"$in": list(dict.fromkeys(values))}}


def _all(terms: list[Where]) -> Where:
    return terms[0] if len(terms) == 1 else {"$and": terms}


def user_terms(scope: Scope) -> list[Where]:
    terms = [_eq("user_id", scope.user_id)]
    if scope.agent_id is not None:
        terms.append(_eq("agent_id", scope.agent_id))
    return terms


def search_where(scope: Scope, where: SearchFilter | None) -> Where:
    """The scope's user (and agent) and the filter, as one Chroma ``where`` on the tenant's collection."""
    terms = user_terms(scope)
    if where is not None:
        if where.thread_ids:
            terms.append(_in("thread_id", where.thread_ids))
        if where.categories:
            terms.append(_in("category", [stored_category(c) for c in where.categories]))
        if where.kinds:
            terms.append(_in("kind", where.kinds))
        if where.since is not None:
            terms.append({"ts": {"$gte": epoch_us(where.since)}})
        if where.until is not None:
            terms.append({"ts": {"$lt": epoch_us(where.until)}})
    return _all(terms)


def fetch_where(scope: Scope, ids: Sequence[str]) -> Where:
    return _all([*user_terms(scope), _in("unit_id", ids)])


def delete_where(scope: Scope, ids: Sequence[str] | None) -> Where:
    """Ids in the user (and agent), else the scope's exact thread, else the whole user."""
    terms = [_eq("user_id", scope.user_id)]
    if scope.agent_id is not None or (ids is None and scope.thread_id is not None):
        terms.append(_eq("agent_id", scope.agent_id or ""))
    if ids is not None:
        terms.append(_in("unit_id", ids))
    elif scope.thread_id is not None:
        terms.append(_eq("thread_id", scope.thread_id))
    return _all(terms)
