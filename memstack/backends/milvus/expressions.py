"""Milvus boolean expressions built from quoted values, their terms as ``rules.index_rows`` decides them.

Every string goes through ``quote``, so no value can change the expression (``x" or user_id !=
"`` stays a string). One collection holds every tenant, so each expression names the tenant.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...types import Scope, SearchFilter
from ..rules.index_rows import search_filter


def quote(value: str) -> str:
    """``value`` as a Milvus string literal: backslashes, double quotes and line breaks escaped."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return f'"{escaped}"'


class _Expression:
    """Milvus's boolean expressions: quoted literals, terms joined by ``and``."""

    tenant = True

    def equal(self, field: str, value: str) -> str:
        return f"{field} == {quote(value)}"

    def one_of(self, field: str, values: Sequence[str]) -> str:
        return f"{field} in [{', '.join(quote(v) for v in values)}]"

    def at_least(self, field: str, value: int) -> str:
        return f"{field} >= {value}"

    def below(self, field: str, value: int) -> str:
        return f"{field} < {value}"

    def all(self, terms: list[str]) -> str:
        return " and ".join(terms)


EXPRESSION = _Expression()


def search_expression(scope: Scope, where: SearchFilter | None) -> str:
    """The scope's tenant, user (and agent) and the filter, as one Milvus boolean expression."""
    return search_filter(EXPRESSION, scope, where)
