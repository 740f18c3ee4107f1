"""Structured state memory: a JSON object per user that the model keeps up to date after each
batch of turns (the shared extractor's "state" part), merged key by key; every change is a
superseding record with its audit event, so the history of each key can be read back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..stores import records_of
from ..types import Message, Record, Scope, Section
from . import register_layer
from .base import ExtractedLayer, LayerOutput, ReadRequest, current_records

TITLES = {"zh": "用户当前状态（JSON）", "en": "The user's current state (JSON)"}


def state_value(record: Record) -> Any:
    """A state record's value itself. A record holds a JSON object, and a state value may be any
    JSON value (a string, a list), so every writer (this layer's extractor, the set_state tool,
    the REST API) stores it as ``{"value": ...}``; every reader unwraps it here."""
    return record.value.get("value")


def current_state(store: Any, scope: Scope, *, per_thread: bool = False) -> dict[str, Any]:
    """The user's (or, ``per_thread``, the scope's thread's) state as one JSON object: key -> value."""
    return {r.key: state_value(r) for r in records_of(store).current(scope if per_thread else scope.user(), "state")}


@dataclass
class State(ExtractedLayer):
    #: the state of the thread rather than the user's (set the same option on the extractor)
    state_per_thread: bool = False
    name: str = "state"

    def read(self, request: ReadRequest, messages: list[Message]) -> LayerOutput:
        records = current_records(self.store, request.scope if self.state_per_thread else request.scope.user(), "state")
        if not records:
            return LayerOutput(messages)
        state = {r.key: state_value(r) for r in records}
        text = json.dumps(state, ensure_ascii=False, indent=1)
        lang = "zh" if any("\u4e00" <= c <= "\u9fff" for c in text) else "en"
        return LayerOutput(
            messages,
            [Section(self.name, f"{TITLES[lang]}\n{text}", priority=25, source_ids=tuple(i for r in records for i in r.source_ids))],
        )


register_layer("state", State)
