"""The OpenAI Agents SDK's session items as memstack messages and back: pure functions.

A run's items are Responses-API input items: the user's message (``{"role": "user", "content":
...}``), the model's output message (``{"type": "message", "role": "assistant", "content":
[{"type": "output_text", ...}]}``), tool calls (``function_call``), their outputs
(``function_call_output``), reasoning, handoffs, and more. Each item becomes one memstack
Message, so memstack's layers see the conversation as a chat:

    user / system / developer message   user / system message, its text
    assistant message                    assistant message, its output text (refusals included)
    function_call                        assistant message with one tool call (call_id, name, arguments)
    function_call_output                 tool message (tool_call_id = call_id), the output's text
    anything else (reasoning, ...)       assistant message without text: one content part
                                         ``{"type": "openai_agents_item", "item_type": ...}``

and every message keeps the item itself, as given, in its metadata (``metadata["openai_agents"]
["item"]``): ``to_items`` returns exactly what the SDK stored, ids and fields memstack has no
column for included. A message another door wrote into the thread (``Memory.add``, the proxy, the
REST API) has no kept item and reads as the items its chat form says: a user, system or assistant
message as ``{"role", "content"}``, each tool call as a ``function_call``, a tool message as a
``function_call_output``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..errors import InvalidInput
from ..types import Message, Role, ToolCall, new_id

#: the key of a memstack Message's metadata under which the SDK's item is kept
KEPT = "openai_agents"
#: the content part of a message whose item has no text for memstack's layers
OPAQUE_PART = "openai_agents_item"

_TEXT_PARTS = ("input_text", "output_text", "text")


def to_message(item: Mapping[str, Any], *, at: datetime, field: str = "items[0]") -> Message:
    """The memstack Message for one SDK item (the item kept whole in its metadata); InvalidInput
    naming ``field`` for what is no item (not a JSON object, or a value JSON cannot hold)."""
    if not isinstance(item, Mapping):
        raise InvalidInput(f"{field}: a session item is a JSON object, not {type(item).__name__}", field=field)
    kept = _json_copy(item, field)
    kind = item.get("type")
    role = item.get("role")
    common: dict[str, Any] = {"id": new_id(), "timestamp": at, "metadata": {KEPT: {"item": kept}}}
    if kind in (None, "message") and role in ("user", "system", "developer", "assistant"):
        text = content_text(item.get("content"))
        stored_role: Role = "system" if role == "developer" else role
        return Message(role=stored_role, content=text if text.strip() else _opaque(item), **common)
    if kind == "function_call" and _ids(item, "call_id", "name"):
        call = ToolCall(id=item["call_id"], name=item["name"], arguments=_arguments(item.get("arguments")))
        return Message(role="assistant", content="", tool_calls=(call,), **common)
    if kind == "function_call_output" and _ids(item, "call_id"):
        text = output_text(item.get("output"))
        return Message(role="tool", content=text if text.strip() else _opaque(item), tool_call_id=item["call_id"], **common)
    return Message(role="assistant", content=_opaque(item), **common)


def to_items(message: Message) -> list[dict[str, Any]]:
    """The SDK items a stored message reads as: its kept item, else its chat form's items."""
    kept = message.metadata.get(KEPT) if message.metadata else None
    if isinstance(kept, Mapping) and isinstance(kept.get("item"), Mapping):
        return [json.loads(json.dumps(kept["item"]))]  # a fresh copy: the SDK may change what it gets
    return chat_items(message)


def chat_items(message: Message) -> list[dict[str, Any]]:
    """The items of a message written without the SDK (its chat form)."""
    text = message.text
    if message.role == "tool":
        return [{"type": "function_call_output", "call_id": message.tool_call_id or "", "output": text}]
    items: list[dict[str, Any]] = [{"role": message.role, "content": text}] if text.strip() else []
    items += [{"type": "function_call", "call_id": call.id, "name": call.name, "arguments": call.arguments} for call in message.tool_calls]
    return items


def last_user_text(items: Iterable[Any]) -> str | None:
    """The text of the last user message among SDK items (the run's question), if any."""
    found = None
    for item in items:
        if isinstance(item, Mapping) and item.get("role") == "user" and item.get("type") in (None, "message"):
            text = content_text(item.get("content"))
            if text.strip():
                found = text
    return found


def content_text(content: Any) -> str:
    """The text of an item's content: a string, or its text parts (refusals too) joined by newlines."""
    if isinstance(content, str):
        return content
    if not isinstance(content, Sequence):
        return ""
    texts = []
    for part in content:
        if isinstance(part, Mapping):
            if part.get("type") in _TEXT_PARTS and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
                texts.append(part["refusal"])
    return "\n".join(texts)


def output_text(output: Any) -> str:
    """A tool output's text: the string, its text parts, or its JSON."""
    if isinstance(output, str):
        return output
    text = content_text(output)
    return text if text or output is None else json.dumps(output, ensure_ascii=False, default=str)


def _opaque(item: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    kind = item.get("type") or item.get("role") or "item"
    return ({"type": OPAQUE_PART, "item_type": str(kind)},)


def _ids(item: Mapping[str, Any], *keys: str) -> bool:
    return all(isinstance(item.get(k), str) and item[k].strip() for k in keys)


def _arguments(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)


def _json_copy(item: Mapping[str, Any], field: str) -> dict[str, Any]:
    try:
        copied = json.loads(json.dumps(dict(item), ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{field}: a session item must be JSON: {exc}", field=field) from exc
    return copied
