"""``Store.tenants`` as both SQL backends answer it: the tenants that hold anything a copy or an
export carries (messages, state, records and their audit, units, model calls, a profile), as one
UNION of the tables' tenant columns (each led by ``tenant`` in its key, so each part is an index
scan)."""

from __future__ import annotations

from .dialect import Dialect

#: the tables whose rows belong to a tenant's users, and the profiles
TABLES = ("messages", "state", "records", "record_audit", "units", "model_usage", "profiles")


def tenants_query(d: Dialect) -> str:
    """Every tenant with a row in ``TABLES``, sorted."""
    return " UNION ".join(f"SELECT DISTINCT tenant FROM {d.table(t)}" for t in TABLES) + " ORDER BY 1"
