"""The JSON lines store's deletion notes (``rules.deletions``): one line per note in the
tenant's ``<tenant>/_deletions.jsonl`` (the tenant's directory outlives its users'), keyed hashes
under the root's ``_deletion_key`` (32 random bytes, readable by the owner only, made on the first
deletion). Called with the store's lock held."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from ...errors import SchemaError
from ...types import Deletion, Scope
from ..rules import deletions
from .files import append_lines, dump_json, make_directories, read_bytes, sync_directory, write_atomically
from .names import encode_name

KEY_FILE = "_deletion_key"
NOTES_FILE = "_deletions.jsonl"


def secret(root: Path, *, make: bool) -> bytes | None:
    """The root's deletion key; made (``make``) when it has none, else None."""
    path = root / KEY_FILE
    data = read_bytes(path)
    if data or not make:
        return data or None
    data = deletions.new_secret()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    sync_directory(root)
    return data


def notes_path(root: Path, tenant: str) -> Path:
    return root / encode_name(tenant) / NOTES_FILE


def record(root: Path, scope: Scope, kind: str, counts: Mapping[str, int], *, layer: str, name: str | None = None) -> Deletion:
    d = deletions.note(secret(root, make=True), scope, kind, counts, layer=layer, name=name)  # type: ignore[arg-type]
    path = notes_path(root, scope.tenant)
    make_directories(path.parent)
    data = read_bytes(path)
    append_lines(path, dump_json(deletions.as_row(d)) + b"\n", keep=data.rfind(b"\n") + 1)
    return d


def read(root: Path, tenant: str, user_id: str | None) -> list[Deletion]:
    path = notes_path(root, tenant)
    data = read_bytes(path)
    notes = []
    for number, line in enumerate(data[: data.rfind(b"\n") + 1].split(b"\n")[:-1], 1):
        try:
            notes.append(deletions.from_row(json.loads(line)))
        except (ValueError, KeyError, TypeError) as exc:
            raise SchemaError(f"{path}:{number}: not a deletion note: {exc}") from exc
    return deletions.of_user(notes, secret(root, make=False), tenant, user_id)


def holds_notes(root: Path) -> bool:
    """Whether any tenant of the root has a note."""
    return any(path.stat().st_size for path in root.glob(f"*/{NOTES_FILE}"))


def restore(root: Path, key: bytes, notes: Sequence[Deletion]) -> int:
    """``Store.restore_deletions``: adopt ``key`` (``deletions.adopts``; the key file replaced at
    once), then append the notes each tenant lacks; returns the notes appended."""
    if deletions.adopts(secret(root, make=False), key, holds_notes=holds_notes(root)):
        write_atomically(root / KEY_FILE, key)  # a temp file made readable by the owner only
    n = 0
    for tenant in sorted({d.tenant for d in notes}):
        new = deletions.missing(read(root, tenant, None), [d for d in notes if d.tenant == tenant])
        if new:
            path = notes_path(root, tenant)
            make_directories(path.parent)
            data = read_bytes(path)
            append_lines(path, b"".join(dump_json(deletions.as_row(d)) + b"\n" for d in new), keep=data.rfind(b"\n") + 1)
            n += len(new)
    return n
