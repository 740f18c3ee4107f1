"""``CheckpointStore.save``'s rules: how many a thread keeps, and what a new checkpoint is."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ...errors import InvalidInput
from ...types import Checkpoint, Scope, aware, utcnow
from .json_values import json_copy


def check_keep(keep: int) -> None:
    """A thread keeps at least its newest checkpoint."""
    if keep < 1:
        raise InvalidInput("keep must be at least 1", field="keep")


def new_checkpoint(scope: Scope, data: Mapping[str, Any], at: datetime | None) -> Checkpoint:
    """A checkpoint of the scope's thread with a new id, made ``at`` (or now), its data a JSON copy."""
    return Checkpoint(uuid.uuid4().hex, scope.require_thread(), aware(at) if at else utcnow(), json_copy(data))
