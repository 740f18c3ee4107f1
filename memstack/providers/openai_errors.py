"""OpenAI SDK errors translated into memstack's error tree, once, for every OpenAI-compatible client.

The SDK has already retried what it retries (timeouts, connection errors, 408, 409, 429, 5xx) by the
time an error reaches this boundary. What is left splits the same way for embeddings and chat:

    timeout, connection refused, 408/409/429, 5xx   ProviderUnavailable  (retry later)
    401/403                                         ProviderRejected     (names the key variable)
    404                                             ProviderRejected     (wrong model or base URL)
    any other 4xx                                   ProviderRejected     (the server's message)
"""

from __future__ import annotations

from typing import Any

from ..errors import ProviderRejected, ProviderUnavailable
from .presets import ProviderSpec

#: 4xx statuses that say "later", not "never": the SDK retries them too.
RETRYABLE_4XX = (408, 409, 429)


def translate_openai_error(exc: Exception, spec: ProviderSpec, *, endpoint: str) -> ProviderRejected | ProviderUnavailable:
    """The memstack error for an ``openai.OpenAIError`` raised calling ``endpoint`` ("embeddings", ...)."""
    import openai  # present: it raised ``exc``

    where = where_of(spec)
    if isinstance(exc, openai.APITimeoutError):
        return ProviderUnavailable(f"{where} timed out")
    if isinstance(exc, openai.APIConnectionError):
        return ProviderUnavailable(f"{where} is unreachable: {exc}")
    status = getattr(exc, "status_code", None)
    if status in (401, 403):
        hint = f"check {spec.api_key_env}" if spec.api_key_env else "check the API key"
        return ProviderRejected(f"{where} refused the API key ({status}): {hint}")
    if status == 404:
        return ProviderRejected(f"{where} has no model {spec.model!r} or no {endpoint} endpoint (404): check the model and base URL")
    if status is not None and 400 <= status < 500 and status not in RETRYABLE_4XX:
        return ProviderRejected(f"{where} rejected the request ({status}): {error_message(exc)}")
    return ProviderUnavailable(f"{where} failed ({status or type(exc).__name__}): {error_message(exc)}")


def where_of(spec: ProviderSpec) -> str:
    """How errors name an endpoint: "siliconflow at https://api.siliconflow.cn/v1"."""
    return f"{spec.provider} at {spec.base_url}"


def error_message(exc: Exception) -> str:
    """The server's own message from an OpenAI-style error body, else the exception's text."""
    body: Any = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(exc)
