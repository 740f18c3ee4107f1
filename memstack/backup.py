"""A backup of a store as it is at one instant, taken while other processes keep writing.

``backup(url, target)`` per backend, decided here:

- SQLite: SQLite's online backup API (``sqlite3.Connection.backup``) copies every page in one step
  under one read transaction, so the copy is the file as it was at that instant (WAL mode lets
  writers go on meanwhile; one step, not a paced copy, because a paced one restarts whenever
  another process writes). The source is opened as a plain file, not as a store: a backup is what
  one takes before an upgrade, so it never migrates. The copy is written beside ``target`` under a
  temporary name, checked (``PRAGMA integrity_check``) and renamed into place: ``target`` is either
  the whole copy or untouched.
- JSON lines: a copy of the directory taken while holding the store's lock (every operation of the
  store holds it, so no write is half in the copy).
- PostgreSQL: refused (UsageError) with the ``pg_dump`` line to run instead. pg_dump is the
  database's own consistent backup (one snapshot), its version must match the server's, and it
  needs credentials and options memstack should not guess; docs/backups.md shows the commands.
- memory://: refused, nothing outlives the process.

An existing ``target`` is refused unless ``overwrite`` (its directory is made if missing); a
missing source is NotFound (opening it as a store would create an empty one). Vectors kept
outside the store (``--vectors milvus://...``) are not in it: Milvus has its own backups, or
``memstack reindex`` rebuilds them from the units.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from .backends import DB_FILENAME, default_home
from .errors import NotFound, StoreError, UsageError


@dataclass(frozen=True)
class Backup:
    """What a backup wrote: the backend's kind (``sqlite``, ``jsonl``), the source and the copy,
    and its size in bytes."""

    kind: str
    source: str
    target: str
    bytes: int


def backup(
    url: str | None, target: str | os.PathLike[str], *, home: str | os.PathLike[str] | None = None, overwrite: bool = False
) -> Backup:
    """Copy the store ``url`` names (None: the SQLite file under ``home`` or MEMSTACK_HOME, as
    ``open_store``) to ``target``, consistent at one instant (see the module docstring)."""
    kind, source = _source(url, home)
    out = Path(target).expanduser()
    if out.exists() and not overwrite:
        raise UsageError(f"{out} exists; choose another file or pass --overwrite")
    out.parent.mkdir(parents=True, exist_ok=True)  # as the stores make their own file's directory
    if kind == "sqlite":
        return _sqlite(Path(source), out)
    return _jsonl(Path(source), out, overwrite)


def _source(url: str | None, home: str | os.PathLike[str] | None) -> tuple[str, str]:
    """The backend and the file or directory of the store, or UsageError for one not backed up here."""
    if url is None:
        return "sqlite", str((Path(home).expanduser() if home else default_home()) / DB_FILENAME)
    scheme, sep, rest = url.partition("://")
    if not sep and url.endswith((".db", ".sqlite", ".sqlite3")):
        scheme, rest = "sqlite", url
    if scheme == "sqlite" and rest not in (":memory:", "/:memory:"):
        return "sqlite", rest
    if scheme == "jsonl":
        return "jsonl", rest
    if scheme in ("postgresql", "postgres"):
        raise UsageError(
            "memstack backup does not back up PostgreSQL: use pg_dump on memstack's schema, e.g. "
            "pg_dump --format=custom --schema=public --file=memstack.dump 'DSN' (the schema the store uses; "
            "restore with pg_restore): see docs/backups.md"
        )
    raise UsageError(f"cannot back up {url!r}: memstack backup takes a sqlite:/// file or a jsonl:/// directory (see docs/backups.md)")


def _sqlite(source: Path, target: Path) -> Backup:
    if not source.is_file():
        raise NotFound(f"no SQLite store at {source}")
    partial = target.with_name(f".{target.name}.partial")
    partial.unlink(missing_ok=True)
    try:
        src = sqlite3.connect(source, timeout=30.0)
        try:
            dst = sqlite3.connect(partial)
            try:
                src.backup(dst)  # all pages in one step: one read transaction, one instant
                (check,) = dst.execute("PRAGMA integrity_check").fetchone()
                if check != "ok":
                    raise StoreError(f"the backup of {source} failed its integrity check: {check}")
            finally:
                dst.close()
        finally:
            src.close()
        os.replace(partial, target)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot back up {source}: {exc}") from exc
    finally:
        partial.unlink(missing_ok=True)
    return Backup("sqlite", str(source), str(target), target.stat().st_size)


def _jsonl(source: Path, target: Path, overwrite: bool) -> Backup:
    from .backends.jsonl import JsonlStore

    if not source.is_dir():
        raise NotFound(f"no JSON lines store at {source}")
    store = JsonlStore(source)
    partial = target.with_name(f".{target.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    with store.locked():
        shutil.copytree(source, partial, ignore=shutil.ignore_patterns(".lock"))
    if overwrite and target.exists():
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    os.replace(partial, target)
    size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    return Backup("jsonl", str(source), str(target), size)
