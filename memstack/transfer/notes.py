"""The deletion notes a copy carries (``Store.deletions``), with the key their hashes were made
under (``Store.deletion_key``): the destination restores them verbatim (``Store.restore_deletions``)
and then answers ``deletions(tenant, user_id=...)`` for a forgotten user or thread as the source did.

Notes travel per tenant, not per user: a note names its user by a keyed hash only, and the users
it names are mostly gone. A whole-tenant copy carries every note of the tenant; a copy of some
users (``--user``) carries the notes of those users (found by the source's key).

A keyed hash cannot be re-keyed, so the destination must take the source's key: it does when it
has no key or no note (a fresh store); a destination holding notes under a key of its own is
refused before anything is written (``backends.rules.deletions.adopts`` says why), unless the
copy leaves the notes in the source (``deletions=False``, ``--no-deletions``).

The JSON-lines export (``portable``) does not carry them: it is handed to a person, and the key
must never leave the store (with it, whoever holds the file could test guesses against every
note); without the key an importing store could not read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..backends.rules.deletions import as_row
from ..stores import Store
from ..types import Deletion


def carried(src: Store, tenant: str, users: Sequence[str] | None) -> list[Deletion]:
    """The notes a copy of ``users`` (None: the whole tenant) carries, oldest first."""
    if users is None:
        return src.deletions(tenant)
    return sorted((d for user in users for d in src.deletions(tenant, user_id=user)), key=lambda d: d.at)


def check(src: Store, dst: Store, tenant: str, users: Sequence[str] | None) -> None:
    """Before anything is written: make the destination take the source's key, or refuse
    (UsageError) when it holds notes under its own. Nothing to do when the source has no note."""
    key = src.deletion_key()
    if key is not None and carried(src, tenant, users):
        dst.restore_deletions(key, [])


def copy(src: Store, dst: Store, tenant: str, users: Sequence[str] | None) -> int:
    """Restore the carried notes in the destination (skipping those it holds); returns the notes read."""
    notes = carried(src, tenant, users)
    key = src.deletion_key()
    if notes and key is not None:
        dst.restore_deletions(key, notes)
    return len(notes)


def items(store: Store, tenant: str, users: Sequence[str] | None) -> list[dict[str, Any]]:
    """The notes as digest items (``digest``): each note's JSON form (``as_row``)."""
    return [as_row(d) for d in carried(store, tenant, users)]
