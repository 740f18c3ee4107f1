"""Chroma ``where`` filters built as data, their terms as ``rules.index_rows`` decides them.

A Chroma filter is a dict, so no value can change it (``x" or user_id != "`` is a user name like
any other). The tenant is not in the filters: each tenant has its own collection (``collections.py``
checks a part's tenant before it is used), and each term costs Chroma a pass over its metadata, so
a filter starts with the user (and the agent). Categories, agents and threads are stored as
``rules.index_rows`` says, as in the Milvus rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...types import Scope, SearchFilter
from ..rules.index_rows import search_filter

Where = dict[str, Any]


class _Where:
    """Chroma's ``where`` syntax: one dict per term, ``$and`` over more than one."""

    tenant = False

    def equal(self, field: str, value: str) -> Where:
        return {field: {"$eq": value}}

    def one_of(self, field: str, values: Sequence[str]) -> Where:
        return {field: {"$in": list(values)}}

    def at_least(self, field: str, value: int) -> Where:
        return {field: {"$gte": value}}

    def below(self, field: str, value: int) -> Where:
        return {field: {"$lt": value}}

    def all(self, terms: list[Where]) -> Where:
        return terms[0] if len(terms) == 1 else {"$and": terms}


WHERE = _Where()


def search_where(scope: Scope, where: SearchFilter | None) -> Where:
    """The scope's user (and agent) and the filter, as one Chroma ``where`` on the tenant's collection."""
    return search_filter(WHERE, scope, where)
