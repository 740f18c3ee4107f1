"""The ``memory://`` backend: every store in process memory, the reference for the others.

store.py     MemoryStore: history, state, checkpoints, jobs, profiles, deletion notes
records.py   the record store and usage log
units.py     the unit store (BM25 over an inverted index per user and agent)
vectors.py   the vector index (one matrix per user) and the embedding cache
side.py      the side database where the framework adapters keep their tables
"""

from __future__ import annotations

from .store import MemoryStore

__all__ = ["MemoryStore"]
