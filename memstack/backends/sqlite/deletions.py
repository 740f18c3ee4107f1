"""The SQLite store's deletion notes (``rules.deletions``): the ``deletions`` table, and the store's
key for their hashes in ``deletion_key`` (made on the first deletion)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from ...types import Deletion, Scope
from ..rules import deletions
from ..rules.deletions import new_secret

if TYPE_CHECKING:
    from .database import Database


def deletion_secret(db: sqlite3.Connection) -> bytes:
    """The store's deletion key, made on first use (in the caller's transaction)."""
    row = db.execute("SELECT secret FROM deletion_key WHERE id = 1").fetchone()
    if row is None:
        db.execute("INSERT INTO deletion_key (id, secret) VALUES (1, ?)", (new_secret(),))
        row = db.execute("SELECT secret FROM deletion_key WHERE id = 1").fetchone()
    return bytes(row[0])


def record_deletion(
    db: sqlite3.Connection, scope: Scope, kind: str, counts: Mapping[str, int], *, layer: str, name: str | None = None
) -> Deletion:
    """Note, in the caller's transaction, a deletion in the scope (no content, no id)."""
    d = deletions.note(deletion_secret(db), scope, kind, counts, layer=layer, name=name)
    db.execute(
        "INSERT INTO deletions (tenant, user_hash, at, rows_deleted, kind, target_hash, counts, layer) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (d.tenant, d.user_hash, d.at.isoformat(), d.rows, d.kind, d.target_hash, json.dumps(d.counts), d.layer),
    )
    return d


def read_deletions(store: Database, tenant: str, user_id: str | None = None) -> list[Deletion]:
    """The tenant's notes (of one user), oldest first."""
    sql, params = "SELECT tenant, user_hash, at, rows_deleted, kind, target_hash, counts, layer FROM deletions WHERE tenant = ?", [tenant]
    if user_id is not None:
        key = store.query("SELECT secret FROM deletion_key WHERE id = 1")
        if not key:
            return []  # no key: nothing was ever deleted
        sql += " AND user_hash = ?"
        params.append(deletions.user_hash(bytes(key[0][0]), tenant, user_id))
    rows = store.query(sql + " ORDER BY n", params)
    return [
        Deletion(t, kind, u, target, datetime.fromisoformat(at), n, json.loads(counts), layer)
        for t, u, at, n, kind, target, counts, layer in rows
    ]
