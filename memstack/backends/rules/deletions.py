"""The notes deletions leave (``types.Deletion``): what was forgotten, never its content nor its id.

``delete_user``, ``delete_thread`` and the forgetting of a saved memory (``Store.note_deletion``)
each leave a note, in the same transaction where the backend has one: the tenant, the kind
("user", "thread", "note"), when, by whom (the layer: "ui", "api", ...) and how many rows went,
by what they were (``COUNTED``), without keeping who or what: the note holds ``user_hash``,
HMAC-SHA256 of the tenant and the id's sha256, keyed by a secret of the store's own (32 random
bytes, made on the first deletion and kept in the store: the ``deletion_key`` table in SQLite,
``memstack_deletion_key`` in PostgreSQL, the ``_deletion_key`` file of a JSON lines root, the
MemoryStore's object). A bare sha256 of a
guessable id (``user_001``, an email address, a phone number) is recovered by hashing guesses; the
keyed hash is not, without the store itself. One user has one hash within a store (so "was this
user deleted?" can still be answered by whoever holds the store), and the same id has another
hash in another tenant or another store.

A thread or a saved memory is named the same way (``target_hash``: the HMAC of the tenant and
the sha256 of the user id, the kind and its name), so that the user's own deletions can be shown
in their audit timeline (``Store.deletions(tenant, user_id=...)``) while the note says nothing to
whoever lacks the store.

A copy (``memstack.transfer``) carries the notes with the key they were made under
(``Store.deletion_key``, ``Store.restore_deletions``): a keyed hash cannot be re-keyed, so the
destination adopts the source's key when it holds no note of its own (``adopts``), and refuses
otherwise. Notes have no id: a note's identity is the whole of it (``identity``), and restoring
stores only what the destination lacks, counted (``missing``), so a rerun stores nothing twice.

Notes written before the key existed held the bare sha256; the migration that adds the key
rehashes them in place (the HMAC is taken over that digest), so none is left behind.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ...errors import InvalidInput, UsageError
from ...types import DELETION_KINDS, Deletion, Scope, user_digest, utcnow

SECRET_BYTES = 32


def new_secret() -> bytes:
    return secrets.token_bytes(SECRET_BYTES)


def keyed(secret: bytes, tenant: str, digest: str) -> str:
    """The keyed hash of a tenant's user, from the user id's sha256 (hex): what a deletion note keeps."""
    return hmac.new(secret, f"{tenant}\x1f{digest}".encode(), hashlib.sha256).hexdigest()


def user_hash(secret: bytes, tenant: str, user_id: str) -> str:
    """The keyed hash of the tenant's ``user_id`` under a store's ``secret``."""
    return keyed(secret, tenant, user_digest(user_id))


#: what a deletion note counts its rows as: messages, model-made memories (every version), their
#: audit events, model calls, retrieval units (saved memories among them), vectors and cached
#: embeddings, and everything else (state documents, checkpoints, job rows)
COUNTED: tuple[str, ...] = ("messages", "memories", "audit", "usage", "units", "vectors", "other")

#: each table's rows as COUNTED names them (SQLite's names; PostgreSQL's with "memstack_" before)
_TABLES = {
    "messages": "messages",
    "records": "memories",
    "record_audit": "audit",
    "model_usage": "usage",
    "units": "units",
    "vectors": "vectors",
    "embedding_cache": "vectors",
}


def counted_as(table: str) -> str:
    """What the rows of a backend's table count as in a deletion note."""
    return _TABLES.get(table.removeprefix("memstack_"), "other")


def tally(rows: Iterable[tuple[str, int]]) -> dict[str, int]:
    """``{what: rows}`` summed from ``(what, rows)`` pairs, in ``COUNTED`` order, nothing left at 0."""
    totals = dict.fromkeys(COUNTED, 0)
    for what, n in rows:
        if what not in totals:
            raise InvalidInput(f"a deletion counts {', '.join(COUNTED)}, not {what!r}", field="counts")
        totals[what] += n
    return {k: v for k, v in totals.items() if v}


def target_hash(secret: bytes, scope: Scope, kind: str, name: str | None) -> str | None:
    """The keyed hash of what a note of ``kind`` forgot: a thread (its agent and id) or a saved
    memory (its id) of the scope's user; None for the user itself and for what expired (a
    retention pass's note stands for the user's expired rows, whatever thread they were in)."""
    if kind in ("user", "expired"):
        return None
    if kind == "thread":
        name = f"{scope.agent_id or ''}\x1f{scope.thread_id}"
    digest = hashlib.sha256(f"{scope.user_id}\x1f{kind}\x1f{name}".encode()).hexdigest()
    return keyed(secret, scope.tenant, digest)


def note(
    secret: bytes, scope: Scope, kind: str, counts: Mapping[str, int], *, layer: str, name: str | None = None, at: datetime | None = None
) -> Deletion:
    """The note of a deletion in ``scope`` (a user, a thread, or with ``name`` a saved memory)."""
    if kind not in DELETION_KINDS:
        raise InvalidInput(f"a deletion is of one of {', '.join(DELETION_KINDS)}, not {kind!r}", field="kind")
    if not isinstance(layer, str) or not layer.strip():
        raise InvalidInput("a deletion names who made it (layer)", field="layer")
    if kind == "thread":
        scope.require_thread()
    if kind == "note" and not name:
        raise InvalidInput("a saved memory's deletion names it", field="name")
    totals = tally(counts.items())
    return Deletion(
        tenant=scope.tenant,
        kind=kind,
        user_hash=user_hash(secret, scope.tenant, scope.user_id),
        target_hash=target_hash(secret, scope, kind, name),
        at=at or utcnow(),
        rows=sum(totals.values()),
        counts=totals,
        layer=layer,
    )


def of_user(notes: Iterable[Deletion], secret: bytes | None, tenant: str, user_id: str | None) -> list[Deletion]:
    """The notes of one user (all, when ``user_id`` is None); none without a secret (nothing was deleted)."""
    if user_id is None:
        return list(notes)
    if secret is None:
        return []
    mine = user_hash(secret, tenant, user_id)
    return [d for d in notes if d.user_hash == mine]


def as_row(d: Deletion) -> dict[str, Any]:
    """A note as JSON-ready data (the JSON lines backend's line, the views' answer)."""
    return {
        "tenant": d.tenant,
        "kind": d.kind,
        "user_hash": d.user_hash,
        "target_hash": d.target_hash,
        "at": d.at.isoformat(),
        "rows": d.rows,
        "counts": dict(d.counts),
        "layer": d.layer,
    }


def from_row(row: Mapping[str, Any]) -> Deletion:
    return Deletion(
        tenant=row["tenant"],
        kind=row.get("kind", "user"),
        user_hash=row["user_hash"],
        target_hash=row.get("target_hash"),
        at=datetime.fromisoformat(row["at"]) if isinstance(row["at"], str) else row["at"],
        rows=int(row["rows"]),
        counts=dict(row.get("counts") or {}),
        layer=row.get("layer"),
    )


def identity(d: Deletion) -> str:
    """What tells one note from another: all of it (tenant, kind, both hashes, the time in UTC to
    the microsecond, rows, counts, layer), since a note has no id. Two notes alike in all of that
    are told apart by how many there are (``missing``)."""
    row = as_row(d) | {"at": d.at.astimezone(UTC).isoformat()}
    return json.dumps(row, sort_keys=True, ensure_ascii=False)


def missing(held: Iterable[Deletion], notes: Sequence[Deletion]) -> list[Deletion]:
    """The ``notes`` a store holding ``held`` lacks, in their order: each identity as many times
    as ``notes`` has it more than ``held`` (restoring twice stores nothing the second time)."""
    have = Counter(identity(d) for d in held)
    out = []
    for d in notes:
        key = identity(d)
        if have[key]:
            have[key] -= 1
        else:
            out.append(d)
    return out


def adopts(held_key: bytes | None, key: bytes, *, holds_notes: bool) -> bool:
    """Whether a store whose key is ``held_key`` takes ``key`` as its own before restoring notes
    made under it: yes when it has no key or holds no note (no hash of its own to keep valid), no
    when the keys are the same. UsageError when it holds notes under another key.

    A demanding user wants every note to keep answering "was this user deleted?" on the store
    that holds it. Neither store's notes can be re-keyed (an HMAC is one-way, and a thread's or
    saved memory's name is not kept), so merging two keyed sets would leave one of them mute:
    refused, before anything is written, rather than carried unreadable or dropped in silence."""
    if held_key == key:
        return False
    if held_key is None or not holds_notes:
        return True
    raise UsageError(
        "the destination keeps deletion notes under a key of its own, and the source's notes were made under another: "
        "a keyed hash cannot be re-keyed, so they cannot be carried into it; copy into a store without deletion notes "
        "(a fresh one), or leave the notes in the source with --no-deletions"
    )
