"""The kinds of item a transfer carries, in the order they are copied for each user.

A job (a layer's cursor on a thread) comes after the thread's messages, since its cursor is
carried as the id of the last message the layer consumed (seqs are each store's own); a unit
comes before its vector (a vector is written beside the unit it indexes); the tenant's
memory profile travels once, before any user; the tenant's deletion notes once, after them (a note
names its user by a keyed hash only, so the notes travel per tenant, with their key). Kinds a store does not keep (the JSON-lines backend
has no records, usage or units) read as empty and are refused on write.
"""

from __future__ import annotations

#: per user, in copy order
KINDS = ("message", "checkpoint", "job", "state", "record", "audit", "usage", "unit", "vector")
#: once per tenant: the memory profile before any user
PROFILE = "profile"
#: once per tenant, after every user: the deletion notes (``notes``), which name no user
DELETION = "deletion"
