"""Saved memories: what a user (through a model's tool call) asked to remember, as retrieval units.

Two forms, one kind of unit ("note") in the user's thread ``NOTES_THREAD``:

- a note, the text itself (``save_memory(content, category)``): its id is derived from the text,
  so saving the same text again replaces it;
- a key/value memory, the articles' ``save_memory(key, value)``: its id is derived from the key,
  so saving a key again replaces its value; the text is "key: value", so a search finds it too.

Both are embedded and indexed at once (no job queue), exported with the user's messages as
records ``{"type": "note", ...}`` and imported from them (``Memory.export`` / ``Memory.import_``).
This module holds what the tools (``memstack.tools``) and ``Memory`` share; it imports neither.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from .errors import InvalidInput, UsageError
from .retrieval.units import dense_text
from .types import Scope, Unit, parse_time

#: the thread that holds a user's saved memories
NOTES_THREAD = "memstack-notes"
#: every saved memory's id starts with this (other units come from conversations)
NOTE_PREFIX = "note-"
#: a key/value memory's id starts with this
KEY_PREFIX = NOTE_PREFIX + "key-"
#: the ``type`` of a saved memory's export record (a message's record has none)
RECORD_TYPE = "note"


def note_id(text: str) -> str:
    """The id of a note: derived from its text."""
    return NOTE_PREFIX + _digest(text)


def key_id(key: str) -> str:
    """The id of a key/value memory: derived from its key (case and spaces as given)."""
    return KEY_PREFIX + _digest(key)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def index_notes(layer: Any, store: Any, units: Sequence[Unit]) -> None:
    """Embed the units (their opening, as the retrieval layer embeds units), then store them and
    their vectors: searchable by keyword and by meaning as soon as this returns. ``layer`` is the
    Memory's retrieval layer (its embedder, counter and vector index)."""
    from .providers.embeddings import CachedEmbedder

    if not units:
        return
    if getattr(store, "units", None) is None:
        raise UsageError(f"the {type(store).__name__} backend has no units index: saved memories need sqlite, postgresql or memory")
    model = layer.searcher.embedder
    cached = CachedEmbedder(model, store.embeddings)
    for unit in units:  # one scope per call of the cache
        vectors = cached.embed_documents(unit.scope, [dense_text(unit, layer.dense_tokens, layer.counter)])
        store.units.put([unit])
        layer.index.upsert([unit], vectors, model=model.name)


def forget(store: Any, index: Any, user: Scope, memory_id: str, *, by: str) -> Unit:
    """Delete one of the user's saved memories by id: its unit, its vector in ``index`` (the
    Memory's retrieval index), the cached embeddings of the notes' thread (they are keyed by a hash
    of the text), and leave a deletion note by ``by`` (``Store.note_deletion``: no text, no id).
    Returns what was deleted. InvalidInput for an id that is no saved memory of this user."""
    user = user.user()
    found = store.units.get(user, [memory_id]) if isinstance(memory_id, str) and memory_id.strip() else []
    if not found:
        raise InvalidInput(f"no saved memory with id {memory_id!r}", field="memory_id")
    if found[0].kind != "note":
        raise InvalidInput(
            f"{memory_id!r} is part of a conversation, not a saved memory; only saved memories can be forgotten", field="memory_id"
        )
    units = store.units.delete(user, [memory_id])
    vectors = index.delete(user, [memory_id]) + store.embeddings.delete(found[0].scope)
    store.note_deletion(user, "note", {"units": units, "vectors": vectors}, layer=by, name=memory_id)
    return found[0]


def saved_units(store: Any, user: Scope) -> Iterator[Unit]:
    """The user's saved memories (notes and key/value memories), in the order they were stored."""
    if getattr(store, "units", None) is None:
        return
    for batch in store.units.iterate(user, thread_id=NOTES_THREAD):
        yield from (u for u in batch if u.kind == "note")


def to_record(unit: Unit) -> dict[str, Any]:
    """A saved memory as a JSON-ready export record."""
    s = unit.scope
    return {
        "type": RECORD_TYPE,
        "tenant": s.tenant,
        "user_id": s.user_id,
        "agent_id": s.agent_id,
        "thread_id": s.thread_id,
        "id": unit.id,
        "text": unit.text,
        "timestamp": unit.timestamp.isoformat(),
        "category": unit.category,
        "metadata": dict(unit.metadata),
    }


def is_record(rec: Mapping[str, Any]) -> bool:
    """Whether an export record is a saved memory (else it is a message)."""
    return rec.get("type") == RECORD_TYPE


def from_record(rec: Mapping[str, Any], scope: Scope) -> Unit:
    """A saved memory from its export record, in ``scope``'s user (its thread: ``NOTES_THREAD``).
    InvalidInput (naming the field) for a record that is not one."""
    known = {"type", "tenant", "user_id", "agent_id", "thread_id", "id", "text", "timestamp", "category", "metadata"}
    extra = sorted(set(rec) - known)
    if extra:
        raise InvalidInput(f"unknown field {extra[0]!r} in a saved memory", field=extra[0])
    uid, text, metadata = rec.get("id"), rec.get("text"), rec.get("metadata") or {}
    if not isinstance(uid, str) or not uid.startswith(NOTE_PREFIX):
        raise InvalidInput(f"a saved memory's id starts with {NOTE_PREFIX!r}", field="id")
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("a saved memory's text is empty", field="text")
    if not isinstance(metadata, Mapping):
        raise InvalidInput("metadata must be an object", field="metadata")
    category = rec.get("category")
    if category is not None and not isinstance(category, str):
        raise InvalidInput("category must be a string or null", field="category")
    stamp = rec.get("timestamp")
    if not isinstance(stamp, str):
        raise InvalidInput("a saved memory needs its timestamp", field="timestamp")
    when: datetime = parse_time(stamp, field_name="timestamp")
    return Unit(
        id=uid, scope=scope.thread(NOTES_THREAD), text=text, timestamp=when, kind="note", category=category, metadata=dict(metadata)
    )
