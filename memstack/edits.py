"""Corrections a person makes to a user's model-made memory (the dashboard's actions): set or delete
a state key, an entity's attribute, a summary note, a whole entity or relation.

Each is one ``Change`` through ``RecordStore.apply``, so it is in the audit trail like the layers'
own writes (``editor`` is its layer name: "ui", "api") and the key's history keeps the version it
replaced. An edit that names what is not there is ``NotFound``; a note edited after the summary
changed under it (a job rewrote it since the page was read) is ``Conflict``, and nothing changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .errors import Conflict, InvalidInput, NotFound
from .stores import Store, records_of
from .types import Change, Record, Scope, utcnow


def set_state(store: Store, scope: Scope, key: str, value: Any, *, editor: str) -> Record:
    """Put a state key (the user's, or a thread's for ``state_per_thread``), stored as every writer
    of state stores it (``{"value": ...}``); returns the current record."""
    _text(key, "key")
    return _put(store, scope, "state", key, {"value": value}, editor=editor)


def delete_record(store: Store, scope: Scope, kind: str, key: str, *, editor: str) -> None:
    """Retire the current record of a kind (an entity, a relation, a state key, a thread's summary)."""
    if not records_of(store).apply(scope, [Change("delete", kind, key, at=utcnow())], layer=editor):
        raise NotFound(f"no current {kind} {key!r}", field="key")


def set_attribute(store: Store, user: Scope, entity: str, attribute: str, value: str, *, editor: str, at: datetime | None = None) -> Record:
    """Make ``value`` the attribute's one current value; the values it replaces become past ones
    (dated until now), as a superseding statement makes them."""
    attribute, value = _text(attribute, "attribute"), _text(value, "value")
    record = _current(store, user, "entity", entity)
    when = (at or utcnow()).isoformat()
    attributes = dict(record.value.get("attributes", {}))
    old = dict(attributes.get(attribute) or {})
    current = [dict(v) for v in old.get("values", [])] or (
        [{k: old[k] for k in ("value", "source_ids", "valid_from") if k in old}] if old.get("value") else []
    )
    past = [dict(p) for p in old.get("past", [])] + [{**c, "until": when} for c in current if c.get("value") != value]
    kept = [c for c in current if c.get("value") == value] or [{"value": value, "source_ids": [], "valid_from": when, "edited_by": editor}]
    attributes[attribute] = {
        "value": value,
        "source_ids": kept[0].get("source_ids", []),
        "valid_from": kept[0].get("valid_from", when),
        "values": kept,
        **({"past": past} if past else {}),
    }
    return _put_attributes(store, user, record, attributes, editor=editor)


def delete_attribute(store: Store, user: Scope, entity: str, attribute: str, *, editor: str) -> Record:
    """Remove an attribute from the entity (its values stay in the record's history and the audit)."""
    record = _current(store, user, "entity", entity)
    attributes = dict(record.value.get("attributes", {}))
    if attribute not in attributes:
        raise NotFound(f"entity {entity!r} has no attribute {attribute!r}", field="attribute")
    del attributes[attribute]
    return _put_attributes(store, user, record, attributes, editor=editor)


def edit_note(store: Store, thread: Scope, index: int, text: str, *, expect: str, editor: str) -> Record:
    """Replace the text of the thread summary's note ``index`` (0-based, as stored), which must
    still read ``expect``; its date and sources stay."""
    text = _text(text, "text")
    record, items = _notes(store, thread, index, expect)
    items[index] = {**items[index], "text": text, "edited_by": editor}
    return _put_notes(store, thread, record, items, editor=editor)


def delete_note(store: Store, thread: Scope, index: int, *, expect: str, editor: str) -> Record:
    """Remove the thread summary's note ``index``, which must still read ``expect``."""
    record, items = _notes(store, thread, index, expect)
    del items[index]
    return _put_notes(store, thread, record, items, editor=editor)


def _notes(store: Store, thread: Scope, index: int, expect: str) -> tuple[Record, list[dict[str, Any]]]:
    thread.require_thread()
    record = _current(store, thread, "summary", "summary")
    items = [dict(i) for i in record.value.get("items", [])]
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(items):
        raise NotFound(f"the summary has no note #{index}", field="index")
    if items[index].get("text") != expect:
        raise Conflict("the summary changed since it was read: read it again")
    return record, items


def _put_notes(store: Store, thread: Scope, record: Record, items: list[dict[str, Any]], *, editor: str) -> Record:
    """The summary ``record`` with ``items`` as its notes; its date and sources stay."""
    return _put(
        store,
        thread,
        "summary",
        record.key,
        {**record.value, "items": items},
        editor=editor,
        sources=record.source_ids,
        at=record.valid_from,
    )


def _current(store: Store, scope: Scope, kind: str, key: str) -> Record:
    found = records_of(store).current(scope, kind, [key])
    if not found:
        raise NotFound(f"no current {kind} {key!r}", field="key")
    return found[0]


def _put(
    store: Store,
    scope: Scope,
    kind: str,
    key: str,
    value: Mapping[str, Any],
    *,
    editor: str,
    sources: tuple[str, ...] = (),
    at: datetime | None = None,
) -> Record:
    """Put the value; an edit of an existing record keeps the time it became true (``at``)."""
    records = records_of(store)
    records.apply(scope, [Change("put", kind, key, value, source_ids=sources, at=at or utcnow())], layer=editor)
    return records.current(scope, kind, [key])[0]


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{field} must be a non-empty text", field=field)
    return value.strip()


def _put_attributes(store: Store, user: Scope, record: Record, attributes: dict[str, Any], *, editor: str) -> Record:
    """The entity with these attributes, written as ``editor``'s edit (its sources and date kept)."""
    value = {**record.value, "attributes": attributes}
    return _put(store, user, "entity", record.key, value, editor=editor, sources=record.source_ids, at=record.valid_from)
