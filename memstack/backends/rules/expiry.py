"""What a retention pass (``Store.expire``) deletes besides the expired rows themselves: the rule
every backend applies to its model-made memories, written once.

A memory (a record version, a retrieval unit) *stood on* the expired messages when it names source
messages, at least one of them expired in this pass, and none of them is still stored: its every
source is gone. One that names none (a saved memory, a note the user made) is never derived; one
with a source still stored is kept (a summary that also covers newer turns). Requiring one source
among this pass's expired messages keeps a pass from deleting memories whose sources went in an
earlier ``forget`` of a thread (that was a user's decision, with its own note).
"""

from __future__ import annotations

from collections.abc import Iterable, Set

from ...errors import InvalidInput
from ...types import Expiry, Scope


def stood_on(sources: Iterable[str], expired: Set[str], kept: Set[str]) -> bool:
    """Whether a memory with these source message ids goes with the ``expired`` messages, the
    user's ``kept`` messages being all that is still stored."""
    ids = set(sources)
    return bool(ids) and not ids.isdisjoint(expired) and ids.isdisjoint(kept)


def check(tenant: str, expiry: Expiry) -> Expiry:
    """``expiry``, after checking the tenant's name (``Scope``'s rules) and that it is an Expiry
    (InvalidInput otherwise). A cutoff in the future is allowed: the caller decides them."""
    Scope(user_id="probe", tenant=tenant)
    if not isinstance(expiry, Expiry):
        raise InvalidInput(f"expire takes an Expiry, not {type(expiry).__name__}", field="expiry")
    return expiry
