"""Durable file operations: JSON documents replaced atomically, lines appended and fsynced, new
directories' entries synced; a missing file reads as empty."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import suppress
from pathlib import Path
from typing import Any

from ...errors import InvalidInput, SchemaError


def dump_json(value: Any, *, indent: int | None = None) -> bytes:
    """``value`` as UTF-8 JSON with non-ASCII text left readable; InvalidInput if it is not JSON."""
    try:
        return json.dumps(value, ensure_ascii=False, indent=indent).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"value is not JSON-serialisable: {exc}") from exc


def read_bytes(path: Path) -> bytes:
    """The file's contents; a missing file reads as empty."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def read_document(path: Path) -> Any:
    """The JSON document in ``path``, or None if there is none."""
    data = read_bytes(path)
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError as exc:
        raise SchemaError(f"{path}: not valid JSON: {exc}") from exc


def write_document(path: Path, value: Any) -> None:
    write_atomically(path, dump_json(value, indent=2) + b"\n")


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` all at once: write a temp file beside it, fsync, os.replace."""
    make_directories(path.parent)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    sync_directory(path.parent)


def append_lines(path: Path, data: bytes, *, keep: int) -> None:
    """Cut the file to its first ``keep`` bytes (dropping a torn line), append ``data`` and fsync."""
    created = not path.exists()
    make_directories(path.parent)
    with open(path, "ab", opener=private_opener) as file:
        file.truncate(keep)
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    if created:
        sync_directory(path.parent)


def private_opener(path: str, flags: int) -> int:
    """Create files readable by their owner only, as mkstemp does for the JSON documents."""
    return os.open(path, flags, 0o600)


def make_directories(path: Path) -> None:
    """Create ``path`` and its missing parents, syncing each new directory's entry."""
    if path.is_dir():
        return
    make_directories(path.parent)
    with suppress(FileExistsError):
        path.mkdir()
    sync_directory(path.parent)


def sync_directory(path: Path) -> None:
    """Make the directory's entries durable (Windows cannot open a directory; NTFS journals them)."""
    if os.name == "nt":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_file(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    sync_directory(path.parent)
    return True


def remove_tree(path: Path) -> None:
    with suppress(FileNotFoundError):
        shutil.rmtree(path)
        sync_directory(path.parent)


def subdirectories(path: Path) -> list[Path]:
    try:
        return sorted(p for p in path.iterdir() if p.is_dir())
    except FileNotFoundError:
        return []
