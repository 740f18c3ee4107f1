"""Token counters for LangChain messages: ``trim_messages(token_counter=token_counter("qwen"))``.

    from langchain_core.messages import trim_messages
    from memstack.integrations.langchain import token_counter

    trim_messages(history, max_tokens=2000, strategy="last", token_counter=token_counter("ollama:qwen3:8b"))

``token_counter(name)`` takes what ``memstack.tokens.get_counter`` takes: an encoding
("cl100k_base", "o200k_base"), "estimate", "local" (the local model's own tokenizer), a model name
("gpt-4o", "qwen-max", "deepseek-chat", "glm-4") or a provider string ("ollama:qwen3:8b"), and
returns a callable from a list of LangChain messages to their tokens, each message counted as
memstack's budgets count it (its text, name and tool calls, plus ``MESSAGE_OVERHEAD``). A name of no
known family raises UnknownName; a family whose tokenizer package is missing, MissingDependency
with its pip line.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..tokens import TokenCounter, get_counter
from .langchain_history import to_memstack

__all__ = ["LangChainTokenCounter", "count_messages", "token_counter"]


@dataclass(frozen=True)
class LangChainTokenCounter:
    """A callable ``(messages) -> tokens`` over one memstack TokenCounter (``counter``)."""

    counter: TokenCounter

    @property
    def name(self) -> str:
        return self.counter.name

    def __call__(self, messages: Iterable[Any]) -> int:
        return count_messages(self.counter, messages)


def token_counter(name: str | TokenCounter = "estimate") -> LangChainTokenCounter:
    """The counter ``name`` resolves to (see the module docstring), as a LangChain token counter."""
    return LangChainTokenCounter(get_counter(name))


def count_messages(counter: TokenCounter, messages: Iterable[Any]) -> int:
    """Tokens of LangChain messages (a BaseMessage, or what ``convert_to_messages`` takes) under ``counter``."""
    from langchain_core.messages import BaseMessage, convert_to_messages

    items = list(messages)
    converted = items if all(isinstance(m, BaseMessage) for m in items) else convert_to_messages(items)
    return sum(counter.count_message(to_memstack(m)) for m in converted)
