"""LlamaIndex chat messages and memstack messages, both ways, and which messages of a list a
thread does not hold yet.

Mapping: system (and developer), user, assistant (and chatbot, model) and tool (and function)
messages keep their role; text blocks become the text (joined by newlines, as
``ChatMessage.content`` joins them); an assistant's ``ToolCallBlock``s become OpenAI-style tool
calls (arguments as JSON text) and come back as ``ToolCallBlock``s (arguments that are a JSON
object as a dict, others as the text); a tool message's ``additional_kwargs["tool_call_id"]``
becomes memstack's ``tool_call_id``; an image given by URL becomes an ``image_url`` part and
comes back as an ``ImageBlock``. The message's other ``additional_kwargs`` are kept as JSON in
its metadata (values JSON cannot hold become their text) and come back unchanged: OpenAI-style
LLM classes send them as fields of the message, so nothing of memstack's is added to them.

Not kept, by decision: a model's reasoning (``ThinkingBlock``: how it got to an answer, not what
was said) and cache markers (``CachePoint``). Other blocks (audio, video, documents, images
given as bytes or a path) are refused with InvalidInput naming the block: memstack stores what
it can give back, and would rather refuse than lose part of a message unsaid.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..errors import InvalidInput, importing
from ..types import Message, ToolCall, new_id, utcnow

with importing("llama-index-core", "llamaindex"):
    from llama_index.core.base.llms.types import (
        CachePoint,
        ChatMessage,
        ImageBlock,
        MessageRole,
        TextBlock,
        ThinkingBlock,
        ToolCallBlock,
    )

#: the key of memstack Message.metadata under which LlamaIndex-only fields are kept
KEPT = "llamaindex"
_ROLE = {
    MessageRole.SYSTEM: "system",
    MessageRole.DEVELOPER: "system",
    MessageRole.USER: "user",
    MessageRole.ASSISTANT: "assistant",
    MessageRole.CHATBOT: "assistant",
    MessageRole.MODEL: "assistant",
    MessageRole.TOOL: "tool",
    MessageRole.FUNCTION: "tool",
}
#: additional_kwargs that are not the message's own: set by LlamaIndex's Memory on the way to a block
_NOT_KEPT = ("session_id",)


# ---- LlamaIndex -> memstack ------------------------------------------------------------------


def to_memstack(message: ChatMessage, *, at: datetime | None = None) -> Message:
    """The memstack Message for a LlamaIndex ChatMessage, dated ``at`` (default: now)."""
    role = _ROLE[MessageRole(message.role)]
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    calls: list[ToolCall] = []
    for i, block in enumerate(message.blocks):
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ToolCallBlock):
            calls.append(_tool_call(block))
        elif isinstance(block, ImageBlock) and block.url is not None:
            images.append({"type": "image_url", "image_url": {"url": str(block.url)}})
        elif not isinstance(block, (ThinkingBlock, CachePoint)):
            raise InvalidInput(
                f"memstack cannot store a LlamaIndex {type(block).__name__} (only text, tool calls and images given by URL)",
                field=f"blocks[{i}]",
            )
    text = "\n".join(texts)
    kwargs: dict[str, Any] = {
        "role": role,
        "content": text if not images else tuple([*([{"type": "text", "text": text}] if text else []), *images]),
        "id": new_id(),
        "timestamp": at or utcnow(),
    }
    if calls:
        if role != "assistant":
            raise InvalidInput(f"only assistant messages carry tool calls, not a {message.role.value} message", field="blocks")
        kwargs["tool_calls"] = tuple(calls)
    extra = {k: v for k, v in message.additional_kwargs.items() if k not in _NOT_KEPT}
    if role == "tool":
        call_id = extra.pop("tool_call_id", None)
        if not isinstance(call_id, str) or not call_id:
            raise InvalidInput("a tool message needs additional_kwargs['tool_call_id']", field="additional_kwargs.tool_call_id")
        kwargs["tool_call_id"] = call_id
    if extra:
        kwargs["metadata"] = {KEPT: {"additional_kwargs": json.loads(json.dumps(extra, ensure_ascii=False, default=str))}}
    return Message(**kwargs)


def _tool_call(block: ToolCallBlock) -> ToolCall:
    args = block.tool_kwargs
    return ToolCall(
        id=block.tool_call_id or new_id(),
        name=block.tool_name,
        arguments=args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, default=str),
    )


def is_empty_reply(message: ChatMessage) -> bool:
    """An assistant message with no text and no tool call (a model that answered ""): memstack
    keeps only messages with content, and such a reply is not stored (the LangChain history's rule)."""
    role = _ROLE[MessageRole(message.role)]
    has_calls = any(isinstance(b, ToolCallBlock) for b in message.blocks)
    has_other = any(not isinstance(b, (TextBlock, ThinkingBlock, CachePoint, ToolCallBlock)) for b in message.blocks)
    return role == "assistant" and not has_calls and not has_other and not (message.content or "").strip()


# ---- memstack -> LlamaIndex ------------------------------------------------------------------


def to_llamaindex(message: Message) -> ChatMessage:
    """The LlamaIndex ChatMessage for a stored memstack Message."""
    blocks: list[Any] = []
    if isinstance(message.content, str):
        if message.content:
            blocks.append(TextBlock(text=message.content))
    else:
        for part in message.content:
            if part.get("type") == "text":
                blocks.append(TextBlock(text=str(part.get("text", ""))))
            elif part.get("type") == "image_url":
                blocks.append(ImageBlock(url=str((part.get("image_url") or {}).get("url", ""))))
    blocks.extend(
        ToolCallBlock(tool_call_id=call.id, tool_name=call.name, tool_kwargs=_arguments(call.arguments)) for call in message.tool_calls
    )
    kept = message.metadata.get(KEPT)
    extra = dict(kept.get("additional_kwargs") or {}) if isinstance(kept, dict) else {}
    if message.tool_call_id:
        extra["tool_call_id"] = message.tool_call_id
    return ChatMessage(role=message.role, blocks=blocks, additional_kwargs=extra)


def _arguments(text: str) -> dict[str, Any] | str:
    try:
        parsed = json.loads(text) if text.strip() else {}
    except ValueError:
        return text
    return parsed if isinstance(parsed, dict) else text


# ---- what a thread does not hold yet ---------------------------------------------------------


def _fingerprint(m: Message) -> tuple[Any, ...]:
    return (m.role, m.text.strip(), tuple((c.name, c.arguments) for c in m.tool_calls), m.tool_call_id)


def unseen(stored_tail: Sequence[Message], incoming: Sequence[Message]) -> list[Message]:
    """The messages of ``incoming`` (a list LlamaIndex holds, in order) that the thread's stored
    tail does not: none when the whole list is a run of the tail (messages already stored, such
    as those LlamaIndex's Memory flushes out of its queue), else what follows the longest start of
    the list that the tail ends with (a resent history: ``u1 a1 u2`` over a stored ``u1 a1`` adds
    ``u2``; nothing in common: all of it). Messages match by role, text and tool calls, so a
    list of the same words said again later, and still stored, is taken as already there."""
    s = [_fingerprint(m) for m in stored_tail]
    c = [_fingerprint(m) for m in incoming]
    if not c:
        return []
    if any(s[i : i + len(c)] == c for i in range(len(s) - len(c) + 1)):
        return []
    for k in range(min(len(s), len(c)), 0, -1):
        if s[len(s) - k :] == c[:k]:
            return list(incoming[k:])
    return list(incoming)
