"""The SQLite store's deletion notes (``rules.deletions``): the ``deletions`` table, and the store's
key for their hashes in ``deletion_key`` (made on the first deletion)."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ...types import Deletion, Scope
from ..rules import deletions
from ..rules.deletions import new_secret
from ..sql.deletions import insert_note, read_notes
from ..sql.dialect import SQLITE

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
    insert_note(db.execute, SQLITE, d)
    return d


def read_deletions(store: Database, tenant: str, user_id: str | None = None) -> list[Deletion]:
    """The tenant's notes (of one user), oldest first."""
    return read_notes(store.query, SQLITE, tenant, user_id)
