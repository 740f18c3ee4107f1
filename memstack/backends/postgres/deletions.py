"""The PostgreSQL store's deletion notes (``rules.deletions``): ``memstack_deletions``, and the
store's key for their hashes in ``memstack_deletion_key`` (made on the first deletion)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...types import Deletion, Scope
from ..rules import deletions
from ..rules.deletions import new_secret
from ..sql.deletions import insert_note, read_notes
from ..sql.dialect import POSTGRES

if TYPE_CHECKING:
    from psycopg import Cursor

    from .database import Database


def deletion_secret(cur: Cursor[Any]) -> bytes:
    """The store's deletion key, made on first use (in the caller's transaction; of two
    processes making it at once, the second waits for the first and reads its key)."""
    cur.execute("INSERT INTO memstack_deletion_key (id, secret) VALUES (1, %s) ON CONFLICT (id) DO NOTHING", (new_secret(),))
    cur.execute("SELECT secret FROM memstack_deletion_key WHERE id = 1")
    return bytes(cur.fetchone()[0])


def record_deletion(
    cur: Cursor[Any], scope: Scope, kind: str, counts: Mapping[str, int], *, layer: str, name: str | None = None
) -> Deletion:
    """Note, in the caller's transaction, a deletion in the scope (no content, no id)."""
    d = deletions.note(deletion_secret(cur), scope, kind, counts, layer=layer, name=name)
    insert_note(cur.execute, POSTGRES, d)
    return d


def read_deletions(db: Database, tenant: str, user_id: str | None = None) -> list[Deletion]:
    """The tenant's notes (of one user), oldest first, in one transaction."""
    with db.transaction("reading deletions") as cur:
        return read_notes(lambda sql, params: cur.execute(sql, params).fetchall(), POSTGRES, tenant, user_id)
