"""A real OpenAI-compatible chat server on 127.0.0.1 for tests: every POST is recorded and answered
with ``answer(body)`` (a completion, or server-sent chunks when the request streams), optionally
after ``delay`` seconds. An answer that is a dict is the assistant message itself (e.g. with
``tool_calls``), sent whole or, streamed, as one chunk. Used by the CLI, chat and proxy tests instead of patching any SDK."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class CannedOpenAI:
    def __init__(self, answer: Callable[[dict], str], *, delay: float = 0.0, usage: tuple[int, int] = (10, 5)) -> None:
        self.answer = answer
        self.delay = delay
        self.usage = usage
        self.requests: list[dict] = []

    def __enter__(self) -> CannedOpenAI:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                time.sleep(outer.delay)
                text = outer.answer(body)
                if isinstance(text, dict):
                    self._message(body, text)
                elif body.get("stream"):
                    self._stream(body, text)
                else:
                    prompt, completion = outer.usage
                    reply = {
                        "id": "c1",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
                    }
                    self._send(json.dumps(reply).encode(), "application/json")

            def _stream(self, body, text):
                chunks = [
                    {
                        "id": "c1",
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": body["model"],
                        "choices": [{"index": 0, "delta": {"content": text[i : i + 5]}, "finish_reason": None}],
                    }
                    for i in range(0, len(text), 5)
                ]
                chunks.append(
                    {
                        "id": "c1",
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": body["model"],
                        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                    }
                )
                data = "".join(f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks) + (
                    "data: {not json\n\n" if "BROKEN" in text else "data: [DONE]\n\n"
                )
                self._send(data.encode(), "text/event-stream")

            def _message(self, body, message):
                finish = "tool_calls" if message.get("tool_calls") else "stop"
                if body.get("stream"):
                    calls = [{"index": i, **c} for i, c in enumerate(message.get("tool_calls") or ())]
                    chunks = [
                        {
                            "id": "c1",
                            "object": "chat.completion.chunk",
                            "created": 0,
                            "model": body["model"],
                            "choices": [
                                {
                                    "index": 0,
                                    "delta": {"role": "assistant", "content": message.get("content"), "tool_calls": calls},
                                    "finish_reason": finish,
                                }
                            ],
                        }
                    ]
                    self._send(
                        ("".join(f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode(),
                        "text/event-stream",
                    )
                    return
                prompt, completion = outer.usage
                reply = {
                    "id": "c1",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", **message}}],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
                }
                self._send(json.dumps(reply).encode(), "application/json")

            def _send(self, data, content_type):
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.model = f"vllm:qwen@{self.url}"
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
