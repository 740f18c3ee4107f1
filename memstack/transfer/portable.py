"""The full record of users as JSON lines: ``memstack export --all`` writes it, ``memstack import``
reads it (docs/moving.md describes the format).

The first line is the header ``{"format": "memstack-export", "version": 2, "tenant": ...,
"users": [...]}``; then the tenant's profile (``{"type": "profile", "value": {...}}``) if it has
one; then every item of each user as ``{"type": KIND, ...}`` in ``items.KINDS`` order, the item's
fields as ``codec`` writes them, and the rows of the user's LangGraph threads (``{"type":
"langgraph", "table": ..., columns...}``, bytes in base64; version 2). A reader refuses a newer
version, never guessing at it.

Deletion notes do not travel in an export (``notes`` says why): it is handed to a person, and the
key of the notes' hashes never leaves the store.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, Any

from ..errors import InvalidInput
from ..stores import Store, VectorIndex
from ..types import Scope
from . import langgraph, sink
from .items import KINDS, PROFILE
from .source import user_items

FORMAT = "memstack-export"
#: 2: LangGraph rows (``langgraph`` items) after each user's items; a version-1 export reads as it always did
VERSION = 2


def is_header(record: Any) -> bool:
    """Whether a parsed first line is this format's header (an old export's first line is a message)."""
    return isinstance(record, Mapping) and record.get("format") == FORMAT


def export_lines(store: Store, tenant: str, users: Iterable[str], *, index: VectorIndex | None = None) -> Iterator[str]:
    """The export's lines, without their newlines."""
    chosen = list(users)
    yield json.dumps({"format": FORMAT, "version": VERSION, "tenant": tenant, "users": chosen}, ensure_ascii=False)
    profile = store.profiles.get(tenant)
    if profile is not None:
        yield json.dumps({"type": PROFILE, "tenant": tenant, "value": profile}, ensure_ascii=False)
    for user in chosen:
        for kind, batch in user_items(store, Scope(user_id=user, tenant=tenant), index=index):
            for item in batch:
                yield json.dumps({"type": kind} | item, ensure_ascii=False)
        for item in langgraph.user_items(store, tenant, user):
            yield json.dumps({"type": langgraph.KIND} | item, ensure_ascii=False)


def write_export(store: Store, tenant: str, users: Iterable[str], out: IO[str], *, index: VectorIndex | None = None) -> int:
    """Write the export to ``out``; returns the lines written."""
    n = 0
    for line in export_lines(store, tenant, users, index=index):
        out.write(line + "\n")
        n += 1
    return n


def read_export(
    lines: Iterable[tuple[int, Mapping[str, Any]]], store: Store, *, index: VectorIndex | None = None, batch: int = 500
) -> dict[str, int]:
    """Store the parsed lines (their numbers, for errors) of an export; {kind: items stored}.
    Idempotent like a copy: importing twice stores nothing the second time."""
    stored: dict[str, int] = {}
    pending: list[Mapping[str, Any]] = []
    kind, first = "", True

    def flush() -> None:
        if pending:
            stored[kind] = stored.get(kind, 0) + sink.write(store, kind, pending, index=index)
            pending.clear()

    for number, record in lines:
        if first or is_header(record):
            _check_header(record, number)
            first = False
            continue
        item_type = record.get("type")
        if item_type == PROFILE:
            tenant = str(record["tenant"])
            held = store.profiles.get(tenant)
            store.profiles.put(tenant, record["value"])  # a tenant's own profile is kept
            stored[PROFILE] = stored.get(PROFILE, 0) + int(held is None)
            continue
        if item_type not in (*KINDS, langgraph.KIND):
            raise InvalidInput(
                f"line {number}: unknown type {item_type!r}; expected one of {', '.join((PROFILE, *KINDS, langgraph.KIND))}", field="type"
            )
        if item_type != kind or len(pending) >= batch:
            flush()
            kind = str(item_type)
        pending.append({k: v for k, v in record.items() if k != "type"})
    flush()
    return stored


def _check_header(record: Mapping[str, Any], number: int) -> None:
    if not is_header(record):
        raise InvalidInput(f"line {number}: not a {FORMAT} header", field="format")
    version = record.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise InvalidInput(f"line {number}: {FORMAT} version {version!r} is newer than this memstack reads ({VERSION}); upgrade memstack")
