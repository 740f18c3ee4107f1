"""Milvus boolean expressions built from quoted values, and the row fields that they filter on.

Every string goes through ``quote``, so no value can change the expression (``x" or user_id !=
"`` stays a string). A unit's category is stored as ``"#" + category`` and no category as ``""``:
Milvus 2.3 servers have no nullable fields, and the prefix keeps a category ``""`` apart from none.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from ...types import Scope, SearchFilter, Unit
from ..rules.time import epoch_us

CATEGORY_MARK = "#"


def quote(value: str) -> str:
    """``value`` as a Milvus string literal: backslashes, double quotes and line breaks escaped."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return f'"{escaped}"'


def one_of(field: str, values: Sequence[str]) -> str:
    return f"{field} in [{', '.join(quote(v) for v in values)}]"


def stored_category(category: str | None) -> str:
    """The category field of a row: ``""`` for none, else the category behind ``CATEGORY_MARK``."""
    return "" if category is None else CATEGORY_MARK + category


def user_expression(scope: Scope) -> list[str]:
    terms = [f"tenant == {quote(scope.tenant)}", f"user_id == {quote(scope.user_id)}"]
    if scope.agent_id is not None:
        terms.append(f"agent_id == {quote(scope.agent_id)}")
    return terms


def search_expression(scope: Scope, where: SearchFilter | None) -> str:
    """The scope's tenant, user (and agent) and the filter, as one Milvus boolean expression."""
    terms = user_expression(scope)
    if where is not None:
        if where.thread_ids:
            terms.append(one_of("thread_id", where.thread_ids))
        if where.categories:
            terms.append(one_of("category", [stored_category(c) for c in where.categories]))
        if where.kinds:
            terms.append(one_of("kind", where.kinds))
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
