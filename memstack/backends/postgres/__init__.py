"""The ``postgresql://`` backend: the stores as tables in one PostgreSQL schema, vectors in pgvector.

    store.py        PostgresStore: the parts over one pool; deleting a user or a thread
    database.py     the driver, the pool, one transaction per call, errors translated, locks
    migrations.py   the schema: ONE ordered list of migrations, and the tables a deletion clears
    steps.py        statements as sans-IO steps, driven by a blocking or an async cursor
    history.py      messages (as steps);  aio.py  the same steps on psycopg's async pool
    documents.py    state, profiles, checkpoints;  jobs.py  the job queue (SKIP LOCKED)
    records.py      versioned records, their audit trail, model usage
    deletions.py    the deletion notes and their key
    units.py        units with per-user postings for BM25, kept by triggers
    vectors.py      pgvector: hash partitions by user, HNSW above a few thousand matching rows

``pip install "memstack[postgres]"`` (psycopg and psycopg-pool), imported when a store opens.
"""

from __future__ import annotations

from .database import quote_identifier
from .migrations import MIGRATIONS
from .store import PostgresStore

__all__ = ["MIGRATIONS", "PostgresStore", "quote_identifier"]
