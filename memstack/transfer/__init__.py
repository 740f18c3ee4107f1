"""Moving a store's whole record: read every kind a user has, write it verbatim elsewhere, compare.

    items.py     the kinds, in the order they are copied, and an item's JSON form (``codec``)
    codec.py     Record, AuditEvent, UsageRecord, Unit, Checkpoint and Message <-> JSON-ready dicts
    source.py    read one user's items from a store, batch by batch
    sink.py      write a batch of items to a store, idempotently (ids kept, nothing doubled)
    digest.py    per user and kind: a count and a content digest; the differences of two stores
    copying.py   ``copy_store``: source -> sink for every user of a tenant, resumable, then verify;
                 ``copy_tenants``/``verify_tenants``: every tenant of a store
    notes.py     the tenant's deletion notes, carried with the key their hashes were made under
    langgraph.py LangGraph's own ``lg_*`` tables, row for row, when the source has them
    portable.py  the versioned JSON-lines export of a user's full record (``memstack export --all``)
    progress.py  what a copy says while it runs (a bar on a terminal, plain lines when piped)

One representation travels: JSON-ready dicts (``codec``), so a copy, an export and a verify read
and compare the same thing. The format is written down in docs/moving.md.
"""

from __future__ import annotations

from .copying import CopyReport, copy_store, copy_tenants, verify_tenants
from .digest import Difference, compare, digests
from .portable import FORMAT, VERSION, read_export, write_export

__all__ = [
    "FORMAT",
    "VERSION",
    "CopyReport",
    "Difference",
    "compare",
    "copy_store",
    "copy_tenants",
    "digests",
    "read_export",
    "verify_tenants",
    "write_export",
]
