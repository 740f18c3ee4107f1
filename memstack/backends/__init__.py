"""Storage backends, one package per technology; ``open_store(url)`` picks one by URL.

    memory/ jsonl/ sqlite/ postgres/ milvus/ chroma/   one backend each, independent of one another
    sql/     what the SQLite and PostgreSQL backends share (a Dialect, the WHERE builders)
    rules/   the rules every backend follows, with no I/O (they import nothing else from here)

    None                      SQLite file under MEMSTACK_HOME (default: the user's data directory)
    memory://                 in-process dicts (tests, throwaway sessions)
    sqlite:///abs/file.db     SQLite file (sqlite://rel.db is relative; a bare path ending .db works)
    jsonl:///path/dir         one JSON-lines file per thread
    postgresql://...          PostgreSQL (pip install "memstack[postgres]")

``open_vectors(url)`` opens a vector index outside the store, for the retrieval layers:

    None                      the store's own index (SQLite, PostgreSQL + pgvector, memory)
    milvus://host:19530       a Milvus server (pip install "memstack[milvus]"; see backends/milvus)
    milvus:///abs/file.db     a milvus-lite file
    chroma://host:8000        a Chroma server (pip install "memstack[chroma]"; see backends/chroma)
    chroma:///abs/dir         Chroma's embedded client on a folder
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import UnknownName
from ..stores import Store, VectorIndex

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

        # sqlite:///:memory: is the in-memory database, as SQLAlchemy reads it (not a file "/:memory:")
        return SQLiteStore(":memory:" if rest in (":memory:", "/:memory:") else rest)
    if scheme == "jsonl":
        from .jsonl import JsonlStore

        return JsonlStore(rest)
    if scheme in ("postgresql", "postgres"):
        from .postgres import PostgresStore

        return PostgresStore(text)
    raise UnknownName(f"no backend for {text!r}; use memory://, sqlite:///FILE, jsonl:///DIR or postgresql://...")


def open_vectors(url: str | None) -> VectorIndex | None:
    """The vector index a URL names (see the module docstring); None for the store's own."""
    if url is None or url == "":
        return None
    text = os.fspath(url)
    if text.startswith("milvus://"):
        from .milvus import MilvusVectorIndex

        return MilvusVectorIndex.from_url(text)
    if text.startswith("chroma://"):
        from .chroma import ChromaVectorIndex

        return ChromaVectorIndex.from_url(text)
    raise UnknownName(
        f"no vector index for {text!r}; use milvus://HOST:PORT (a Milvus server), milvus:///ABSOLUTE/PATH.db (milvus-lite), "
        "chroma://HOST:PORT (a Chroma server) or chroma:///ABSOLUTE/DIR (Chroma's embedded client)"
    )
