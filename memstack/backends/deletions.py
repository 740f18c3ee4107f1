"""The user id in the record of a deletion: a keyed hash, never the id, nor a bare digest of it.

``delete_user`` notes that a user was deleted (tenant, when, how many rows) without keeping who:
the note holds ``user_hash``, HMAC-SHA256 of the tenant and the id's sha256, keyed by a secret of
the store's own (32 random bytes, made on the first deletion and kept in the store: the
``deletion_key`` table in SQLite, ``memstack_deletion_key`` in PostgreSQL). A bare sha256 of a
guessable id (``user_001``, an email address, a phone number) is recovered by hashing guesses; the
keyed hash is not, without the store itself. One user has one hash within a store (so "was this
user deleted?" can still be answered by whoever holds the store), and the same id has another
hash in another tenant or another store.

Notes written before the key existed held the bare sha256; the migration that adds the key
rehashes them in place (the HMAC is taken over that digest), so none is left behind.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from ..types import user_digest

SECRET_BYTES = 32


def new_secret() -> bytes:
    return secrets.token_bytes(SECRET_BYTES)


def keyed(secret: bytes, tenant: str, digest: str) -> str:
    """The keyed hash of a tenant's user, from the user id's sha256 (hex): what a deletion note keeps."""
    return hmac.new(secret, f"{tenant}\x1f{digest}".encode(), hashlib.sha256).hexdigest()


def user_hash(secret: bytes, tenant: str, user_id: str) -> str:
    """The keyed hash of the tenant's ``user_id`` under a store's ``secret``."""
    return keyed(secret, tenant, user_digest(user_id))
