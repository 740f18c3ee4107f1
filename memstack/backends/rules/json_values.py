"""A value as a durable store keeps it: JSON, checked once, in the same way by every backend."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ...errors import InvalidInput


def json_copy(value: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy that also proves the value is JSON-serialisable (as durable stores require)."""
    try:
        return json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"value is not JSON-serialisable: {exc}") from exc


def json_text(value: Any) -> str | None:
    """JSON text for a column (None stays NULL), non-ASCII text kept as is: Chinese is stored as
    Chinese. Values reach here checked (``json_copy``, ``records.prepare``), so NaN cannot."""
    return None if value is None else json.dumps(value, ensure_ascii=False)
