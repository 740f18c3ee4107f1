"""A model that streams (``stream()``: the local model, the OpenAI-compatible providers) reaches a
streaming proxy client token by token; before, the proxy waited for the whole answer and cut it
into chunks, so the first word came when the last was written."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

pytest.importorskip("fastapi", reason="the service needs: pip install 'memstack[server]'")

from memstack import Memory  # noqa: E402
from memstack.llm.base import Delta  # noqa: E402
from memstack.server import ServerConfig, create_app  # noqa: E402
from memstack.server.run import BackgroundServer  # noqa: E402
from memstack.testing import ScriptedModel  # noqa: E402


class Gated(ScriptedModel):
    """Streams "杭州" and then waits (up to 10 s) for the test to say the client has it."""

    def __init__(self) -> None:
        super().__init__(default="杭州是个好地方", name="gated")
        self.gate = threading.Event()
        self.client_had_the_first_piece: bool | None = None

    def stream(self, messages, *, temperature=0.0, max_tokens=None, stop=None, tools=None, tool_choice=None):
        yield Delta(text="杭州")
        self.client_had_the_first_piece = self.gate.wait(10)
        yield Delta(text="是个好地方")
        yield Delta(finish_reason="stop")
        yield Delta(prompt_tokens=12, completion_tokens=4)


def test_the_first_piece_reaches_the_client_before_the_model_writes_the_next():
    model = Gated()
    memory = Memory("memory://", layers="window")
    with BackgroundServer(create_app(memory, ServerConfig(model=model, worker=False))) as server:
        body = {
            "model": "gated",
            "messages": [{"role": "user", "content": "杭州怎么样？"}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        pieces, usage = [], None
        with httpx.stream(
            "POST", f"{server.url}/v1/chat/completions", json=body, headers={"X-Memstack-User": "u", "X-Memstack-Thread": "t"}, timeout=30
        ) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if chunk.get("usage"):
                    usage = chunk["usage"]
                for choice in chunk["choices"]:
                    if choice["delta"].get("content"):
                        pieces.append(choice["delta"]["content"])
                        model.gate.set()
    assert model.client_had_the_first_piece is True
    assert pieces == ["杭州", "是个好地方"] and usage == {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}
    assert [(m.role, m.text) for m in memory.history(user_id="u", thread_id="t")] == [
        ("user", "杭州怎么样？"),
        ("assistant", "杭州是个好地方"),
    ]
