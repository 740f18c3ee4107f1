"""Token counters per model family, and a fast CJK-aware estimator (the default).

Models count tokens differently (the articles' point): a budget is only exact under the counter of
the model that will read the prompt. Every counter here is additive over messages: the cost of a
list is the sum of ``count_message`` over it, so budgets can be fitted in one pass.

- ``estimate``: a calibrated estimator, no dependencies, no tables (see BENCHMARKS.md for its error)
- ``cl100k_base`` / ``o200k_base``: OpenAI encodings, offline (``bpe-openai`` carries both)
- model names map to their encoding (``gpt-4o`` -> o200k_base, ``gpt-4`` -> cl100k_base, ...)
- Qwen, DeepSeek and GLM names map to their family (``memstack.token_families``): provider strings
  too (``ollama:qwen3:8b`` -> qwen, ``deepseek:deepseek-chat`` -> deepseek, ``zhipu:glm-4`` -> glm)
- ``register_counter(name, factory)`` adds more (the local GGUF model's tokenizer registers here)
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from typing import Protocol, runtime_checkable

from .errors import UnknownName
from .types import Message

#: Tokens every message costs beyond its text (role and separators, as OpenAI's chat format).
MESSAGE_OVERHEAD = 3
#: Tokens a non-text content part (an image) is counted as: OpenAI's low-detail image cost.
IMAGE_PART_TOKENS = 85


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of text and of messages; ``count_message`` is what budgets add up."""

    name: str

    def count(self, text: str) -> int: ...

    def count_message(self, message: Message) -> int: ...

    def count_messages(self, messages: Iterable[Message]) -> int:
        """The sum of ``count_message`` over the messages (``BaseCounter`` has it)."""
        ...


class BaseCounter:
    """Message accounting shared by every counter; subclasses implement ``count(text)``."""

    name = "base"
    cache_size = 65536

    def __init__(self) -> None:
        self._cache: dict[tuple[object, ...], int] = {}
        self._lock = threading.Lock()

    def count(self, text: str) -> int:
        raise NotImplementedError

    def count_message(self, message: Message) -> int:
        parts = sum(1 for p in message.content if p.get("type") != "text") if isinstance(message.content, tuple) else 0
        key = (message.id, message.text, message.name, message.tool_calls, message.tool_call_id, parts)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        n = self._count_message(message)
        with self._lock:
            if len(self._cache) >= self.cache_size:
                self._cache.clear()
            self._cache[key] = n
        return n

    def _count_message(self, message: Message) -> int:
        n = MESSAGE_OVERHEAD + self.count(message.text)
        if message.name:
            n += 1 + self.count(message.name)
        for call in message.tool_calls:
            n += 3 + self.count(call.name) + self.count(call.arguments)
        if message.tool_call_id:
            n += 1
        if isinstance(message.content, tuple):
            n += IMAGE_PART_TOKENS * sum(1 for p in message.content if p.get("type") != "text")
        return n

    def count_messages(self, messages: Iterable[Message]) -> int:
        return sum(self.count_message(m) for m in messages)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\U00020000-\U0002ffff"


class Estimator(BaseCounter):
    """A CJK-aware token estimate without tables: one regex pass, a fixed cost per shape.

    Each match of ``SHAPES`` is one shape, and its named group names the class constant it costs:
    a CJK character, a CJK punctuation mark, an ASCII word by length (1-6, 7-10, 11+ letters, its
    leading space included), an English contraction, a group of up to three digits, the space
    before a number, a run of ASCII symbols, a line break, a run of spaces, an emoji, anything else.
    Single spaces cost nothing (they ride on the next word, as in the BPE encodings).

    The costs were fitted by least squares against ``cl100k_base`` on real chat messages (English
    dialogues, long assistant answers with lists and code, Chinese chats), then scaled by ``SCALE``
    so that whole conversations are slightly over-estimated rather than under-estimated (budgets
    must not overflow). On held-out conversations it is +2.5% off cl100k_base on average (3.9% mean
    absolute error, 9% at the 95th percentile, Chinese and English alike); single messages are 5%
    off on average. ``o200k_base`` spends ~40% fewer tokens on Chinese, so for gpt-4o-class models
    this overstates Chinese by ~70% (English by ~5%): use ``get_counter(model)`` when the model is
    known. Refit with ``bench/calibrate_tokens.py``; the full table is in BENCHMARKS.md.
    Subclasses may override any constant; weights are read once, when a counter is built.
    """

    name = "estimate"
    #: A multiplier on every cost below: the safety margin over the unbiased fit.
    SCALE = 1.03
    WORD = 0.972
    WORD_MEDIUM = 1.217
    WORD_LONG = 1.569
    CJK = 1.173
    CONTRACTION = 1.422
    ASCII_SYMBOL = 0.903
    NEWLINE = 0.961
    DIGITS = 1.167
    SPACE_DIGITS = 1.025
    SPACES = 1.120
    CJK_PUNCT = 1.441
    EMOJI = 4.883
    OTHER = 1.031

    SHAPES = re.compile(
        r"(?P<WORD>[A-Za-z]{1,6}+(?![A-Za-z]))"
        r"|(?P<WORD_MEDIUM>[A-Za-z]{7,10}+(?![A-Za-z]))"
        r"|(?P<WORD_LONG>[A-Za-z]++)"
        rf"|(?P<CJK>[{_CJK}])"
        r"|(?P<CONTRACTION>['\u2019](?:s|t|re|ve|m|ll|d)(?![A-Za-z]))"
        r"|(?P<ASCII_SYMBOL>[!-/:-@\[-`{-~]++[\r\n]*+)"
        r"|(?P<NEWLINE>\s*\n)"
        r"|(?P<DIGITS>[0-9]{1,3})"
        r"|(?P<SPACE_DIGITS> (?=[0-9]))"
        r"|(?P<SPACES>[ \t]{2,}+)"
        r"|(?P<CJK_PUNCT>[\u3000-\u303f\uff00-\uffef])"
        r"|(?P<EMOJI>[\U00010000-\U0010ffff])"
        r"|(?P<OTHER>\S)"
    )

    def __init__(self) -> None:
        super().__init__()
        weights = [0.0] * (self.SHAPES.groups + 1)
        for shape, index in self.SHAPES.groupindex.items():
            weights[index] = float(getattr(self, shape)) * self.SCALE
        self._weights = tuple(weights)

    def count(self, text: str) -> int:
        if not text:
            return 0
        weights = self._weights
        total = 0.0
        for m in self.SHAPES.finditer(text):
            total += weights[m.lastindex or 0]  # every shape is a group: never 0
        return max(1, round(total))


class EncodingCounter(BaseCounter):
    """Exact counts under an OpenAI BPE encoding, computed offline with ``bpe-openai``."""

    def __init__(self, encoding: str) -> None:
        super().__init__()
        import bpe_openai

        try:
            self._encoding = bpe_openai.get_encoding(encoding)
        except Exception as exc:  # bpe_openai raises plain exceptions for unknown names
            raise UnknownName(f"unknown encoding {encoding!r}") from exc
        self.name = encoding

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=())) if text else 0


_FACTORIES: dict[str, Callable[[], TokenCounter]] = {
    "estimate": Estimator,
    "cl100k_base": lambda: EncodingCounter("cl100k_base"),
    "o200k_base": lambda: EncodingCounter("o200k_base"),
}
_MODEL_PREFIXES: list[tuple[str, str]] = [
    ("gpt-4o", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4", "o200k_base"),
    ("chatgpt-4o", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("text-embedding-3", "cl100k_base"),
    ("text-embedding-ada", "cl100k_base"),
    ("qwen3.5", "qwen3.5"),
    ("qwen3.6", "qwen3.5"),
    ("qwen", "qwen"),
    ("qwq", "qwen"),
    ("deepseek", "deepseek"),
    ("chatglm", "glm"),
    ("glm", "glm"),
]
_instances: dict[str, TokenCounter] = {}
_instances_lock = threading.Lock()

DEFAULT_COUNTER = "estimate"


def register_counter(name: str, factory: Callable[[], TokenCounter]) -> None:
    """Make ``get_counter(name)`` build counters with ``factory`` (built once, on first use)."""
    _FACTORIES[name] = factory
    _instances.pop(name, None)


def counter_names() -> list[str]:
    return sorted(_FACTORIES)


#: counters registered by a module that is imported only when one of them is asked for
_LAZY_COUNTERS = {
    "local": "memstack.llm.local",
    "qwen2.5-coder-1.5b": "memstack.llm.local",
    "qwen": "memstack.token_families",
    "qwen3.5": "memstack.token_families",
    "deepseek": "memstack.token_families",
    "glm": "memstack.token_families",
}
_URL = re.compile(r"@https?://\S+$")


def resolve_counter_name(name: str) -> str:
    """Map a model name (``gpt-4``, ``Qwen/Qwen2.5-7B-Instruct``), a provider string
    (``openai:gpt-4o-mini``, ``ollama:qwen3:8b``, ``vllm:MODEL@URL``) or an encoding name to a
    registered counter; raises UnknownName for a model of no known family."""
    for candidate in _candidates(name):
        found = _registered(candidate) or next((counter for prefix, counter in _MODEL_PREFIXES if candidate.startswith(prefix)), None)
        if found is not None:
            _load_lazy(found)
            return found
    raise UnknownName(
        f"no token counter for {name!r}; known: {', '.join(counter_names())}, an OpenAI, Qwen, DeepSeek or GLM model name or a provider string"
    )


def _candidates(name: str) -> list[str]:
    """The name as given, then without a provider (``ollama:``), an address (``@http://...``) and a
    vendor (``Qwen/``), lower-cased: the first that names a counter wins."""
    out = [name]
    head, colon, rest = name.partition(":")
    if colon and head not in _FACTORIES:
        out.append(rest)
    for text in list(out):
        bare = _URL.sub("", text).rsplit("/", 1)[-1].strip().lower()
        if bare and bare not in out:
            out.append(bare)
    return out


def _registered(name: str) -> str | None:
    _load_lazy(name)
    return name if name in _FACTORIES else None


def _load_lazy(name: str) -> None:
    if name in _LAZY_COUNTERS and name not in _FACTORIES:
        import importlib

        importlib.import_module(_LAZY_COUNTERS[name])


def get_counter(name: str | TokenCounter | None = None) -> TokenCounter:
    """The shared counter for ``name`` (default: the estimator); counters are cached per name."""
    if name is None:
        name = DEFAULT_COUNTER
    if not isinstance(name, str):
        return name
    key = resolve_counter_name(name)
    with _instances_lock:
        if key not in _instances:
            _instances[key] = _FACTORIES[key]()
        return _instances[key]
