"""The ``jsonl://`` backend: a directory tree of human-readable JSON lines and JSON documents.

store.py       JsonlStore: the layout, the lock, history, state, checkpoints, jobs, profiles
names.py       ids as safe file names
files.py       atomic documents, appended lines, synced directories
logs.py        a thread's message log
jobs.py        a user's job rows
deletions.py   the deletion notes and their key
"""

from __future__ import annotations

from .names import decode_name, encode_name
from .store import JsonlStore

__all__ = ["JsonlStore", "decode_name", "encode_name"]
