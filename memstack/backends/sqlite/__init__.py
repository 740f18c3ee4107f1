"""The ``sqlite://`` backend, the embedded default: every store in one SQLite file.

store.py        SQLiteStore: the parts over one connection; deleting a user or a thread
database.py     the connection (WAL), its lock, write transactions and reads
migrations.py   the schema: ONE ordered list of migrations, and the tables a deletion clears
history.py      messages;  documents.py  state, profiles, checkpoints;  jobs.py  the job queue
records.py      versioned records, their audit trail, model usage
deletions.py    the deletion notes and their key
units.py        units with per-user postings for BM25
vectors.py      vectors as BLOB rows, searched from a per-user matrix cached in the process
"""

from __future__ import annotations

from ..sql.transaction import write_transaction
from .migrations import MIGRATIONS, apply_migrations
from .store import SQLiteStore

__all__ = ["MIGRATIONS", "SQLiteStore", "apply_migrations", "write_transaction"]
