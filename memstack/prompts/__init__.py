"""Prompt templates as files, one per task and language (``extract.zh.json``, ``merge.en.json``):
readable and reviewable apart from the code that fills them."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any


@functools.cache
def load(task: str, lang: str) -> dict[str, Any]:
    """The template of ``task`` in ``lang`` ('zh' or 'en'; anything else reads the English one)."""
    name = f"{task}.{'zh' if lang == 'zh' else 'en'}.json"
    return json.loads(resources.files(__package__).joinpath(name).read_text(encoding="utf-8"))
