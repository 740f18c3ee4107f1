"""Storage backends, one module per technology; ``open_store(url)`` picks one by URL.

    None                      SQLite file under MEMSTACK_HOME (default: the user's data directory)
    memory://                 in-process dicts (tests, throwaway sessions)
    sqlite:///abs/file.db     SQLite file (sqlite://rel.db is relative; a bare path ending .db works)
    jsonl:///path/dir         one JSON-lines file per thread
    postgresql://...          PostgreSQL (pip install "memstack[postgres]")
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import UnknownName
from ..stores import Store

DB_FILENAME = "memstack.db"


def default_home() -> Path:
    """``$MEMSTACK_HOME`` or the platform's user data directory for memstack."""
    env = os.environ.get("MEMSTACK_HOME")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("memstack", appauthor=False))


def open_store(url: str | os.PathLike[str] | None = None, *, home: str | os.PathLike[str] | None = None) -> Store:
    """Open the store a URL names (see the module docstring); the default is SQLite under home."""
    if url is None:
        from .sqlite import SQLiteStore

        return SQLiteStore(Path(home).expanduser() / DB_FILENAME if home else default_home() / DB_FILENAME)
    text = os.fspath(url)
    scheme, _, rest = text.partition("://")
    if not _:
        scheme, rest = ("sqlite", text) if text.endswith((".db", ".sqlite", ".sqlite3")) or text == ":memory:" else ("", text)
    if scheme == "memory":
        from .memory import MemoryStore

        return MemoryStore()
    if scheme == "sqlite":
        from .sqlite import SQLiteStore

        return SQLiteStore(rest)
    if scheme == "jsonl":
        from .jsonl import JsonlStore

        return JsonlStore(rest)
    if scheme in ("postgresql", "postgres"):
        from .postgres import PostgresStore

        return PostgresStore(text)
    raise UnknownName(f"no backend for {text!r}; use memory://, sqlite:///FILE, jsonl:///DIR or postgresql://...")
