"""Read one user's whole record from a store as JSON-ready items (``codec``), kind by kind, in
batches: messages thread by thread, checkpoints of those threads, every record version and audit
event (``RecordStore.dump``), usage rows, retrieval units and their vectors.

Memory: a thread's messages, a user's record versions and usage rows are read at once; units and
vectors stream in ``batch``-sized pieces.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from ..stores import Store, VectorIndex
from ..types import JobCursor, Message, Scope
from . import codec

Batch = tuple[str, list[dict[str, Any]]]


def users(store: Store, tenant: str) -> list[str]:
    """The tenant's users with messages, current records or units, sorted."""
    found = set(store.history.users(tenant))
    for part in ("records", "units"):
        holder = getattr(store, part, None)
        if holder is not None:
            found.update(holder.users(tenant))
    return sorted(found)


def thread_scopes(store: Store, user: Scope) -> list[Scope]:
    """The user's threads, each with its agent, oldest first."""
    infos = sorted(store.history.threads(user), key=lambda t: (t.first_at, t.thread_id, t.agent_id or ""))
    return [replace(user, thread_id=t.thread_id, agent_id=t.agent_id) for t in infos]


def job_item(c: JobCursor, messages: list[Message]) -> dict[str, Any]:
    """A job row as an item: its cursor as the id of the last message at or before it (None: no
    message consumed yet); a row of a thread without messages keeps its cursor as a number."""
    item = codec.encode_scope(c.scope) | {"layer": c.layer, "pending": c.pending, "waiting": c.waiting}
    if not messages:
        return item | {"after_id": None, "cursor": c.cursor}
    consumed = [m.id for m in messages if m.seq is not None and m.seq <= c.cursor]
    return item | {"after_id": consumed[-1] if consumed else None}


def _chunks(items: list[dict[str, Any]], batch: int) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(items), batch):
        yield items[start : start + batch]


def user_items(store: Store, user: Scope, *, index: VectorIndex | None = None, batch: int = 500) -> Iterator[Batch]:
    """Every item of the user (``user``: a user-level scope) as (kind, batch), in ``items.KINDS``
    order; vectors only from ``index`` (None: none)."""
    threads = thread_scopes(store, user)
    cursors: dict[tuple[str, ...], list[JobCursor]] = {}
    for c in store.jobs.cursors(user):
        cursors.setdefault(c.scope.key, []).append(c)
    jobs = []
    for scope in threads:
        read = store.history.read(scope)
        for chunk in _chunks([codec.encode_message(scope, m) for m in read], batch):
            yield "message", chunk
        jobs += [job_item(c, read) for c in cursors.pop(scope.key, [])]
    jobs += [job_item(c, []) for rows in cursors.values() for c in rows]  # rows of no thread with messages
    checkpoints = [codec.encode_checkpoint(c) for scope in threads for c in reversed(store.checkpoints.list(scope))]
    for chunk in _chunks(checkpoints, batch):
        yield "checkpoint", chunk
    for chunk in _chunks(jobs, batch):
        yield "job", chunk
    documents = [codec.encode_scope(d.scope) | {"name": d.name, "value": dict(d.value)} for d in store.state.dump(user)]
    for chunk in _chunks(sorted(documents, key=lambda d: (d["agent_id"] or "", d["thread_id"] or "", d["name"])), batch):
        yield "state", chunk
    records = getattr(store, "records", None)
    if records is not None:
        versions, events = records.dump(user)
        for chunk in _chunks([codec.encode_record(r) for r in versions], batch):
            yield "record", chunk
        for chunk in _chunks([codec.encode_event(e) for e in events], batch):
            yield "audit", chunk
    usage = getattr(store, "usage", None)
    if usage is not None:
        for chunk in _chunks([codec.encode_usage(u) for u in usage.read(user)], batch):
            yield "usage", chunk
    yield from _units(store, user, index, batch)


def _units(store: Store, user: Scope, index: VectorIndex | None, batch: int) -> Iterator[Batch]:
    units = getattr(store, "units", None)
    if units is None:
        return
    model = index.info()[0] if index is not None else None
    for chunk in units.iterate(user, batch=batch):
        yield "unit", [codec.encode_unit(u) for u in chunk]
        if index is None or model is None:
            continue
        found = index.fetch(user, [u.id for u in chunk])
        vectors = [
            codec.encode_scope(u.scope) | {"id": u.id, "model": model, "vector": [float(x) for x in found[u.id]]}
            for u in chunk
            if u.id in found
        ]
        if vectors:
            yield "vector", vectors
