"""Write a batch of items (``codec``'s JSON form) to a store verbatim and idempotently: a rerun
of the same batch adds nothing, so a copy killed anywhere continues where it stopped.

Messages keep their ids (``HistoryStore.append`` skips an id the thread holds) and request no
job (the model-made records travel as they are); records and audit events go through
``RecordStore.restore`` (skips held ids); units are put by id; a vector is upserted beside its
unit; checkpoints and usage rows, which have no id of their own to keep, are skipped when an equal
one is stored.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import groupby
from typing import Any

from ..errors import InvalidInput, UsageError
from ..stores import Store, VectorIndex, records_of, usage_of
from ..types import JobCursor, Scope, Unit, parse_time
from . import codec, langgraph


def _units_of(store: Store) -> Any:
    units = getattr(store, "units", None)
    if units is None:
        raise UsageError(f"the {type(store).__name__} backend has no units index: retrieval units need sqlite, postgresql or memory")
    return units


def _same_scope(item: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(item.get(f) for f in codec.SCOPE_FIELDS)


def _same_user(item: Mapping[str, Any]) -> tuple[Any, ...]:
    return item.get("tenant"), item.get("user_id")


def write(store: Store, kind: str, items: Sequence[Mapping[str, Any]], *, index: VectorIndex | None = None) -> int:
    """Store one batch of ``kind``; returns the items stored (those already held not counted)."""
    if not items:
        return 0
    if kind == "message":
        n = 0
        for _, group in groupby(items, key=_same_scope):
            pairs = [codec.decode_message(item) for item in group]
            n += len(store.history.append(pairs[0][0], [m for _, m in pairs]))
        return n
    if kind == "checkpoint":
        return _checkpoints(store, items)
    if kind == "job":
        return _jobs(store, items)
    if kind == langgraph.KIND:
        return langgraph.restore(store, items)
    if kind == "state":
        return _state(store, items)
    if kind == "record":
        return records_of(store).restore([codec.decode_record(i) for i in items], [])
    if kind == "audit":
        return records_of(store).restore([], [codec.decode_event(i) for i in items])
    if kind in ("usage", "unit", "vector"):  # read back per user to skip what is held
        write_user = {"usage": _usage, "unit": _units, "vector": lambda s, batch: _vectors(s, batch, index)}[kind]
        return sum(write_user(store, list(group)) for _, group in groupby(items, key=_same_user))
    raise UsageError(f"unknown kind of item {kind!r}")


def _canonical(item: Mapping[str, Any], drop: tuple[str, ...] = ()) -> str:
    return json.dumps({k: v for k, v in item.items() if k not in drop}, sort_keys=True, ensure_ascii=False, default=str)


def _checkpoints(store: Store, items: Sequence[Mapping[str, Any]]) -> int:
    n = 0
    for _, group in groupby(items, key=_same_scope):
        batch = list(group)
        scope = codec.decode_scope(batch[0])
        held = store.checkpoints.list(scope)
        have = Counter(_canonical(codec.encode_checkpoint(c), ("id",)) for c in held)
        keep = len(held) + len(batch)
        for item in batch:  # oldest first
            key = _canonical(item, ("id",))
            if have[key]:
                have[key] -= 1
                continue
            store.checkpoints.save(scope, dict(item["data"]), keep=keep, at=parse_time(item["created_at"], field_name="created_at"))
            n += 1
    return n


def _state(store: Store, items: Sequence[Mapping[str, Any]]) -> int:
    """StateStore documents (the service's idempotency records among them), put by scope and name."""
    n = 0
    for item in items:
        scope, name = codec.decode_scope(item), str(item["name"])
        if store.state.get(scope, name) != item["value"]:
            store.state.put(scope, item["value"], name)
            n += 1
    return n


def _jobs(store: Store, items: Sequence[Mapping[str, Any]]) -> int:
    """Each layer's cursor, as the seq this store gave the message the item names."""
    cursors = []
    for _, group in groupby(items, key=_same_scope):
        batch = list(group)
        scope = codec.decode_scope(batch[0])
        seqs = {m.id: m.seq for m in store.history.read(scope)} if scope.thread_id is not None else {}
        for item in batch:
            after = item.get("after_id")
            cursor = int(item.get("cursor") or 0) if after is None else seqs.get(after)
            if cursor is None:
                raise InvalidInput(
                    f"job of layer {item['layer']!r}: message {after!r} is not in thread {scope.thread_id!r}", field="after_id"
                )
            cursors.append(JobCursor(scope, str(item["layer"]), cursor, bool(item["pending"]), bool(item["waiting"])))
    held = {c for user in {c.scope.user() for c in cursors} for c in store.jobs.cursors(user)}
    new = [c for c in cursors if c not in held]
    store.jobs.restore(new)
    return len(new)


def _usage(store: Store, items: Sequence[Mapping[str, Any]]) -> int:
    usage = usage_of(store)
    first = items[0]
    user = Scope(user_id=first["user_id"], tenant=first["tenant"])
    have = Counter(_canonical(codec.encode_usage(u)) for u in usage.read(user))
    rows = []
    for item in items:
        key = _canonical(codec.encode_usage(codec.decode_usage(item)))
        if have[key]:
            have[key] -= 1
        else:
            rows.append(codec.decode_usage(item))
    usage.record(rows)
    return len(rows)


def _units(store: Store, items: Sequence[Mapping[str, Any]]) -> int:
    units = _units_of(store)
    decoded = [codec.decode_unit(i) for i in items]
    held = {u.id: u for u in units.get(decoded[0].scope.user(), [u.id for u in decoded])}
    new = [u for u in decoded if held.get(u.id) != u]
    if new:
        units.put(new)
    return len(new)


def _vectors(store: Store, items: Sequence[Mapping[str, Any]], index: VectorIndex | None) -> int:
    if index is None:
        raise UsageError(f"the {type(store).__name__} backend has no vector index: vectors need sqlite, postgresql, memory or --vectors")
    import numpy as np

    first = items[0]
    user = Scope(user_id=first["user_id"], tenant=first["tenant"])
    found: dict[str, Unit] = {u.id: u for u in _units_of(store).get(user, [i["id"] for i in items])}
    held = index.fetch(user, [i["id"] for i in items])
    wanted = [i for i in items if i["id"] in found and i["id"] not in held]
    if not wanted:
        return 0
    index.upsert([found[i["id"]] for i in wanted], np.asarray([i["vector"] for i in wanted], dtype=np.float32), model=wanted[0]["model"])
    return len(wanted)
