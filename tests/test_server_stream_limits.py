"""Streams have a total limit, and an answer the client did not receive whole is not stored: a
real proxy over a real trickling OpenAI-compatible upstream on loopback."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

pytest.importorskip("fastapi")

from memstack import Memory  # noqa: E402
from memstack.server import ServerConfig, create_app  # noqa: E402
from memstack.server.run import BackgroundServer  # noqa: E402


class Trickle:
    """An upstream that streams one chunk every ``gap`` seconds, ``n`` of them, then [DONE]."""

    def __init__(self, n: int = 20, gap: float = 0.2):
        outer = self
        self.closed = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                try:
                    for i in range(n):
                        chunk = {
                            "id": "c",
                            "object": "chat.completion.chunk",
                            "created": 0,
                            "model": "m",
                            "choices": [{"index": 0, "delta": {"content": f"片{i}"}, "finish_reason": None}],
                        }
                        self.wfile.write(f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode())
                        self.wfile.flush()
                        time.sleep(gap)
                    self.wfile.write(b"data: [DONE]\n\n")
                except (BrokenPipeError, ConnectionResetError):
                    outer.closed.set()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def proxy(tmp_path, trickle, **config):
    memory = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers="window")
    return memory, create_app(memory, ServerConfig(model=f"vllm:m@{trickle.url}", worker=False, **config))


def ask(url, thread):
    return {"model": "m", "stream": True, "user": "u", "messages": [{"role": "user", "content": f"讲个故事{thread}"}]}


def test_a_stream_longer_than_the_total_limit_ends_with_a_timeout_event_and_stores_no_answer(tmp_path):
    trickle = Trickle(n=30, gap=0.2)  # 6 s in all, each gap well under the per-wait limit
    memory, app = proxy(tmp_path, trickle, upstream_timeout=5, upstream_total_timeout=1.0)
    try:
        with BackgroundServer(app) as server, httpx.Client(timeout=30) as client:
            started = time.monotonic()
            events = [
                line
                for line in client.post(f"{server.url}/v1/chat/completions", json=ask(server.url, "a")).text.splitlines()
                if line.startswith("data:")
            ]
            assert time.monotonic() - started < 4
        assert "片0" in events[0] and "upstream_timeout" in events[-1] and "[DONE]" not in events[-1]
        assert [m.role for m in memory.history(user_id="u", thread_id=_thread(memory))] == ["user"]
    finally:
        trickle.close()


def test_a_client_that_hangs_up_mid_stream_leaves_the_question_stored_and_no_partial_answer(tmp_path):
    trickle = Trickle(n=40, gap=0.1)
    memory, app = proxy(tmp_path, trickle, upstream_timeout=5)
    try:
        with BackgroundServer(app) as server:
            with (
                httpx.Client(timeout=30) as client,
                client.stream("POST", f"{server.url}/v1/chat/completions", json=ask(server.url, "b")) as response,
            ):
                for line in response.iter_lines():
                    if "片1" in line:
                        break  # the user closes the tab
            assert trickle.closed.wait(10)  # the upstream call is abandoned, not run to its end
            time.sleep(0.3)
        assert [m.role for m in memory.history(user_id="u", thread_id=_thread(memory))] == ["user"]
    finally:
        trickle.close()


def _thread(memory):
    (info,) = memory.threads(user_id="u")
    return info.thread_id


def test_a_half_sent_body_gets_408_and_its_connection_closed(tmp_path):
    import socket

    memory = Memory(f"sqlite:///{tmp_path / 'h.db'}", layers="window")
    app = create_app(memory, ServerConfig(model="vllm:m@http://127.0.0.1:9/v1", worker=False, body_timeout=0.5))
    with BackgroundServer(app) as server:
        host, port = server.url.removeprefix("http://").split(":")
        stalled = [socket.create_connection((host, int(port)), timeout=10) for _ in range(20)]
        for conn in stalled:  # headers whole, the body promised but never sent
            conn.sendall(
                b'POST /v1/users/u/threads/t/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"messages"'
            )
        started = time.monotonic()
        answers = [_until_closed(conn) for conn in stalled]  # the server answers and closes
        assert time.monotonic() - started < 5
        assert all(a.startswith("HTTP/1.1 408") and "request_timeout" in a for a in answers)
        with httpx.Client(base_url=server.url, timeout=10) as client:  # the server still serves
            assert (
                client.post("/v1/users/u/threads/t/messages", json={"messages": [{"role": "user", "content": "你好"}]}).status_code == 201
            )
    assert len(memory.history(user_id="u", thread_id="t")) == 1


def _until_closed(conn) -> str:
    data = b""
    while chunk := conn.recv(4096):
        data += chunk
    return data.decode()


class Throttled:
    """An in-process model that decodes one piece every ``gap`` seconds, ``n`` pieces, like the
    local model on two busy cores; ``stall_after`` pieces in, it stops decoding for ``stall``
    seconds (a model that hangs)."""

    name = "throttled"
    context_window = 4096
    native_schema = False

    def __init__(self, n: int, gap: float, *, stall_after: int | None = None, stall: float = 0.0):
        self.n, self.gap, self.stall_after, self.stall = n, gap, stall_after, stall

    def stream(self, messages, *, temperature=0.0, max_tokens=None, stop=None, tools=None, tool_choice=None):
        from memstack.llm.base import Delta

        for i in range(self.n):
            time.sleep(self.stall if i == self.stall_after else self.gap)
            yield Delta(text=f"字{i}")
        yield Delta(finish_reason="stop", prompt_tokens=7, completion_tokens=self.n)

    def complete(self, messages, **kwargs):  # the whole answer at once: what the limit must not time
        from memstack.llm.base import Completion

        text = "".join(d.text for d in self.stream(messages))
        return Completion(text=text, model=self.name, prompt_tokens=7, completion_tokens=self.n, latency_ms=0.0)


def _answer(model, tmp_path, **config):
    memory = Memory(f"sqlite:///{tmp_path / 'throttled.db'}", layers="window")
    app = create_app(memory, ServerConfig(model=model, worker=False, **config))
    body = {"model": "throttled", "user": "u", "messages": [{"role": "user", "content": "写一篇长文"}]}
    with BackgroundServer(app) as server, httpx.Client(timeout=60) as client:
        started = time.monotonic()
        response = client.post(f"{server.url}/v1/chat/completions", json=body)
        return response, time.monotonic() - started, memory


def test_a_slow_but_steady_in_process_model_answers_whole_past_the_upstream_timeout(tmp_path):
    # the README's tour on two busy cores, scaled down 60 times: a 3-minute answer under a
    # 60-second limit is a 3-second answer under a 1-second limit, one piece every 0.1 s
    response, took, memory = _answer(Throttled(n=30, gap=0.1), tmp_path, upstream_timeout=1.0)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["choices"][0]["message"]["content"] == "".join(f"字{i}" for i in range(30))
    assert answer["choices"][0]["finish_reason"] == "stop" and answer["usage"]["completion_tokens"] == 30
    assert took > 3.0  # three times the limit, and still answered
    assert [m.role for m in memory.history(user_id="u", thread_id=_thread(memory))] == ["user", "assistant"]


def test_an_in_process_model_that_stalls_ends_in_a_504_after_the_limit(tmp_path):
    response, took, memory = _answer(Throttled(n=30, gap=0.05, stall_after=5, stall=6.0), tmp_path, upstream_timeout=1.0)
    error = response.json()["error"]
    assert response.status_code == 504 and error["code"] == "upstream_timeout" and "sent nothing for 1 s" in error["message"]
    assert took < 5  # the stall's limit, not the answer's length
    assert [m.role for m in memory.history(user_id="u", thread_id=_thread(memory))] == ["user"]


def test_the_total_limit_still_bounds_a_steady_in_process_answer(tmp_path):
    response, took, _ = _answer(Throttled(n=100, gap=0.1), tmp_path, upstream_timeout=1.0, upstream_total_timeout=1.5)
    assert response.status_code == 504 and "within 1.5 s" in response.json()["error"]["message"]
    assert took < 4
