"""The deletion notes (``rules.deletions``) as both SQL backends write and read them, for a
``Dialect``: the ``deletions`` table and the store's key in ``deletion_key``. How the key is made
on first use (and the transactions) stays each backend's own."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ...types import Deletion
from ..rules import deletions
from .adapter_rows import Run
from .dialect import Dialect, Fetch

COLUMNS = "tenant, user_hash, at, rows_deleted, kind, target_hash, counts, layer"


def insert_note(run: Run, d: Dialect, note: Deletion) -> None:
    """Write a note in ``run``'s transaction."""
    run(
        f"INSERT INTO {d.table('deletions')} ({COLUMNS}) VALUES ({d.marks(6)}, {d.json_mark}, {d.mark})",
        (note.tenant, note.user_hash, d.time_value(note.at), note.rows, note.kind, note.target_hash, json.dumps(note.counts), note.layer),
    )


def read_notes(fetch: Fetch, d: Dialect, tenant: str, user_id: str | None = None) -> list[Deletion]:
    """The tenant's notes (of one user), oldest first."""
    sql, params = f"SELECT {COLUMNS} FROM {d.table('deletions')} WHERE tenant = {d.mark}", [tenant]
    if user_id is not None:
        key = fetch(f"SELECT secret FROM {d.table('deletion_key')} WHERE id = 1", ())
        if not key:
            return []  # no key: nothing was ever deleted
        sql += f" AND user_hash = {d.mark}"
        params.append(deletions.user_hash(bytes(key[0][0]), tenant, user_id))
    rows: Any = fetch(sql + " ORDER BY n", params)
    return [
        Deletion(t, kind, u, target, d.time_of(at), n, dict(d.json_of(counts)), layer) for t, u, at, n, kind, target, counts, layer in rows
    ]


def noted_tenants_query(d: Dialect) -> str:
    """``Store.noted_tenants``: every tenant with a note, sorted."""
    return f"SELECT DISTINCT tenant FROM {d.table('deletions')} ORDER BY 1"


def held_key(run: Run, d: Dialect) -> bytes | None:
    """The store's key (None: no deletion yet), in ``run``'s transaction."""
    row = run(f"SELECT secret FROM {d.table('deletion_key')} WHERE id = 1", ()).fetchone()
    return bytes(row[0]) if row is not None else None


def restore_notes(run: Run, d: Dialect, key: bytes, notes: Sequence[Deletion]) -> int:
    """``Store.restore_deletions`` in ``run``'s transaction: adopt ``key`` (``deletions.adopts``),
    then insert the notes the store lacks, in their order; returns the notes inserted."""
    holds = run(f"SELECT 1 FROM {d.table('deletions')} LIMIT 1", ()).fetchone() is not None
    if deletions.adopts(held_key(run, d), key, holds_notes=holds):
        run(
            f"INSERT INTO {d.table('deletion_key')} (id, secret) VALUES (1, {d.mark}) "
            "ON CONFLICT (id) DO UPDATE SET secret = excluded.secret",
            (key,),
        )
    fetch = lambda sql, params: run(sql, params).fetchall()  # noqa: E731
    held = [n for tenant in sorted({n.tenant for n in notes}) for n in read_notes(fetch, d, tenant)]
    new = deletions.missing(held, notes)
    for note in new:
        insert_note(run, d, note)
    return len(new)
