"""A test layer with a write side, registered through the real registry (used by memory and CLI tests).

Its write side records each new message's length in the scope's state under the message id (an
upsert: rerunning is harmless), sleeping ``delay`` seconds per message so a test can kill it
mid-job, and failing on messages that contain FAIL_MARK until the mark is cleared.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from memstack.layers import register_layer
from memstack.layers.base import LayerOutput, ReadRequest, WriteRequest
from memstack.types import Message, Section

FAIL_MARK = "💥"


@dataclass(frozen=True)
class Probe:
    delay: float = 0.0
    name: str = "probe"
    scope: str = "thread"
    history: str = "none"

    def read(self, request: ReadRequest, messages: list[Message]) -> LayerOutput:
        return LayerOutput(messages, sections=[Section("probe", f"probe saw {request.query}")])

    def write(self, request: WriteRequest) -> int | None:
        for m in request.messages:
            if FAIL_MARK in m.text and not os.environ.get("PROBE_HEALED"):
                raise RuntimeError("probe cannot digest this message")
            seen = request.store.state.get(request.scope, "probe") or {}
            seen[m.id] = len(m.text)
            request.store.state.put(request.scope, seen, "probe")
            log = request.store.state.get(request.scope, "probe-calls") or {"n": 0}
            request.store.state.put(request.scope, {"n": log["n"] + 1}, "probe-calls")
            time.sleep(self.delay)
        return None


register_layer("probe", Probe)
