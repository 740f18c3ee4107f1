"""A chat loop in which the model uses memory tools itself: each step it answers with one JSON
action (a tool call or the answer), the tool runs, and its result goes back to the model.

    result = run_tool_chat(get_chat_model("local"), MemoryTools(memory, "u1", "s1"),
                           [{"role": "user", "content": "请记住：我的后端使用SpringBoot"}])
    result.answer, result.steps

Two ways to call tools. A model whose ``complete`` takes ``tools=`` and that says it calls
functions (``native_tools``: the hosted OpenAI-compatible APIs) gets native function calling: the tools as OpenAI functions, its ``tool_calls`` run,
their results sent back as ``tool`` messages. Every other model (the in-process local model
among them) answers with JSON actions: an action schema built from the tools' own argument
models (one variant per tool, told apart by ``action``) through ``complete(messages,
schema=...)``, which every provider implements; a grammar-constrained model cannot even produce
arguments that do not fit. ``native=`` chooses: True for a self-hosted server started with tool
calling (vLLM's ``--enable-auto-tool-choice``, an Ollama model with tools), False to keep JSON
actions on a hosted API. The loop stores nothing:
keeping the conversation is the caller's ``Memory.add``.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, RootModel, create_model

from .errors import InvalidInput
from .llm import get_chat_model
from .llm.base import ChatModel, Completion
from .llm.structured import generate
from .retrieval.units import language
from .tools import MemoryTools, ToolSpec, parameters_schema

ANSWER = "answer"

PROMPTS = {
    "zh": {
        "intro": "你是一个有长期记忆的助手。你可以调用以下工具来管理用户的记忆：",
        "format": '每一步只输出一个 JSON 对象：调用工具时输出 {"action": "工具名", "arguments": {参数}}；'
        '回答用户时输出 {"action": "answer", "answer": "你的回答"}。\n'
        "你不知道用户的任何情况（用户说的“我”指用户本人），不要编造：用户问到自己的事情时必须先调用 recall_memory。例如：\n"
        '用户：请记住我喜欢跑步 -> {"action": "save_memory", "arguments": {"content": "我喜欢跑步"}}\n'
        '用户：我的项目用什么数据库？ -> {"action": "recall_memory", "arguments": {"query": "我的项目用什么数据库？"}}\n'
        "拿到工具结果后，用 answer 根据结果回答用户。",
        "result": "工具 {name} 的结果：\n{result}",
        "final": "请现在根据以上信息直接回答用户。",
    },
    "en": {
        "intro": "You are an assistant with long-term memory. You can call these tools to manage the user's memory:",
        "format": 'At each step output exactly one JSON object: {"action": "TOOL", "arguments": {...}} to call a tool, '
        'or {"action": "answer", "answer": "YOUR REPLY"} to reply to the user.\n'
        'You know nothing about the user ("I" and "my" mean the user), never guess: when the user asks about '
        "themselves, call recall_memory first. For example:\n"
        'User: remember that I like running -> {"action": "save_memory", "arguments": {"content": "I like running"}}\n'
        'User: which database does my project use? -> {"action": "recall_memory", "arguments": {"query": "which database does my project use?"}}\n'
        "Once a tool has answered, reply to the user from its result with answer.",
        "result": "Result of {name}:\n{result}",
        "final": "Now answer the user directly from the information above.",
    },
}


@dataclass(frozen=True, slots=True)
class ToolStep:
    """One tool call the model made: the tool, its arguments, and what it returned (text)."""

    name: str
    arguments: Mapping[str, Any]
    result: str


@dataclass(frozen=True, slots=True)
class ToolChatResult:
    """The model's answer, the tool calls it made on the way, the whole exchange (OpenAI-shaped
    messages, the loop's system message first) and every model call (for token accounting)."""

    answer: str
    steps: tuple[ToolStep, ...]
    messages: tuple[Mapping[str, Any], ...]
    completions: tuple[Completion, ...]


def run_tool_chat(
    model: ChatModel | str | None,
    tools: MemoryTools,
    messages: Sequence[Mapping[str, Any]],
    *,
    max_steps: int = 4,
    max_tokens: int = 256,
    temperature: float = 0.0,
    native: bool | None = None,
) -> ToolChatResult:
    """Let ``model`` call ``tools`` until it answers: at most ``max_steps`` model calls, the last
    of which may only answer (as may the call after a repeated identical tool call).

    ``messages`` are the conversation so far (OpenAI-shaped; a leading system message is kept and
    the tools' instructions appended to it). Tool mistakes go back to the model as error text;
    a model whose output stays invalid raises ModelOutputError (see ``structured.generate``).
    """
    if max_steps < 1:
        raise InvalidInput("max_steps must be >= 1", field="max_steps")
    chat_model = get_chat_model(model)
    lang = "zh" if any(language(_text(m)) == "zh" for m in messages) else "en"
    specs = list(tools.specs().values())
    if native is None:
        native = takes_tools(chat_model) and bool(getattr(chat_model, "native_tools", False))
    elif native and not takes_tools(chat_model):
        raise InvalidInput(
            f"the model {chat_model.name} has no native tool calling (its complete() takes no tools=); leave native unset for JSON actions",
            field="native",
        )
    if native:
        return _native(chat_model, tools, specs, messages, lang, max_steps=max_steps, max_tokens=max_tokens, temperature=temperature)
    loop = _Loop(with_tool_prompt(messages, specs, lang))
    any_step, answer_only = step_schema(specs), step_schema([])
    for step in range(max_steps):
        final = loop.final(step, max_steps)
        if final and loop.steps:
            loop.conversation.append({"role": "user", "content": PROMPTS[lang]["final"]})
        out = generate(
            chat_model, loop.conversation, answer_only if final else any_step, max_tokens=max_tokens, temperature=temperature, language=lang
        )
        loop.completions += out.calls
        action = out.value.root
        if action.action == ANSWER:
            return loop.answer(action.answer)
        arguments = action.arguments.model_dump()
        result = tools.call(action.action, arguments)
        loop.steps.append(ToolStep(action.action, arguments, result))
        call_text = json.dumps({"action": action.action, "arguments": arguments}, ensure_ascii=False)
        loop.conversation.append({"role": "assistant", "content": call_text})
        loop.conversation.append({"role": "user", "content": PROMPTS[lang]["result"].format(name=action.action, result=result)})
        loop.called(call_text)
    raise AssertionError("unreachable: the last step may only answer")


def takes_tools(model: ChatModel) -> bool:
    """Whether the model's ``complete`` takes OpenAI's ``tools=`` (native function calling)."""
    try:
        return "tools" in inspect.signature(model.complete).parameters
    except (TypeError, ValueError):
        return False


def _native(
    chat_model: ChatModel,
    tools: MemoryTools,
    specs: Sequence[ToolSpec],
    messages: Sequence[Mapping[str, Any]],
    lang: str,
    *,
    max_steps: int,
    max_tokens: int,
    temperature: float,
) -> ToolChatResult:
    """The loop with OpenAI function calling: the last step (or the one after a repeated
    identical call) is sent without tools, so it can only answer."""
    functions = [spec.openai() for spec in specs]
    loop = _Loop(_with_system(messages, PROMPTS[lang]["intro"] + "\n" + "\n".join(f"- {s.name}: {s.description}" for s in specs)))
    for step in range(max_steps):
        final = loop.final(step, max_steps)
        offered = {} if final else {"tools": functions}
        completion = chat_model.complete(loop.conversation, temperature=temperature, max_tokens=max_tokens, **offered)  # type: ignore[call-arg]
        loop.completions.append(completion)
        if not completion.tool_calls or final:
            return loop.answer(completion.text)
        loop.conversation.append(
            {"role": "assistant", "content": completion.text or None, "tool_calls": [c.to_openai() for c in completion.tool_calls]}
        )
        for call in completion.tool_calls:
            result = tools.call(call.name, call.arguments)
            try:
                arguments = json.loads(call.arguments or "{}")
            except ValueError:
                arguments = {"raw": call.arguments}
            loop.steps.append(ToolStep(call.name, arguments if isinstance(arguments, dict) else {"value": arguments}, result))
            loop.conversation.append({"role": "tool", "tool_call_id": call.id, "content": result})
            loop.called(json.dumps([call.name, arguments], ensure_ascii=False, sort_keys=True))
    raise AssertionError("unreachable: the last step may only answer")


@dataclass
class _Loop:
    """One tool loop's running state: the conversation, the tool steps and model calls so far,
    and whether a repeated identical call means the next step may only answer."""

    conversation: list[dict[str, Any]]
    steps: list[ToolStep] = field(default_factory=list)
    completions: list[Completion] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    must_answer: bool = False

    def final(self, step: int, max_steps: int) -> bool:
        """Whether this step may only answer: the last one, or the one after a repeated call."""
        return self.must_answer or step == max_steps - 1

    def called(self, key: str) -> None:
        """Note a tool call by ``key``; the second identical one makes the next step answer."""
        self.must_answer = self.must_answer or key in self.seen
        self.seen.add(key)

    def answer(self, text: str) -> ToolChatResult:
        self.conversation.append({"role": "assistant", "content": text})
        return ToolChatResult(text, tuple(self.steps), tuple(self.conversation), tuple(self.completions))


def _with_system(messages: Sequence[Mapping[str, Any]], prompt: str) -> list[dict[str, Any]]:
    out = [dict(m) for m in messages]
    if out and out[0].get("role") == "system" and isinstance(out[0].get("content"), str):
        out[0]["content"] = f"{out[0]['content']}\n\n{prompt}"
    else:
        out.insert(0, {"role": "system", "content": prompt})
    return out


def with_tool_prompt(messages: Sequence[Mapping[str, Any]], specs: Sequence[ToolSpec], lang: str) -> list[dict[str, Any]]:
    """The conversation with the tools' instructions in its (first) system message."""
    return _with_system(messages, tool_prompt(specs, lang))


def tool_prompt(specs: Sequence[ToolSpec], lang: str) -> str:
    """The instructions: one line per tool (its parameters and description), then the format."""
    lines = [PROMPTS[lang]["intro"]]
    for spec in specs:
        props = parameters_schema(spec.arguments).get("properties", {})
        required = set(spec.arguments.model_json_schema().get("required", ()))
        params = ", ".join(f"{name}{'' if name in required else '?'}" for name in props)
        lines.append(f"- {spec.name}({params}): {spec.description}")
    lines.append(PROMPTS[lang]["format"])
    return "\n".join(lines)


def step_schema(specs: Sequence[ToolSpec]) -> type[RootModel]:
    """The model of one step: ``{"action": TOOL, "arguments": {...}}`` for each tool in ``specs``,
    or ``{"action": "answer", "answer": TEXT}``, told apart by ``action``.

    Its JSON schema is a ``oneOf`` whose root also says ``"type": "object"``: grammar engines
    follow the ``oneOf``, and providers that want an object at the root get one.
    """
    variants: list[type[BaseModel]] = [
        create_model(f"call_{s.name}", __config__=ConfigDict(extra="forbid"), action=(Literal[s.name], ...), arguments=(s.arguments, ...))
        for s in specs  # type: ignore[valid-type]
    ]
    variants.append(create_model("answer", __config__=ConfigDict(extra="forbid"), action=(Literal[ANSWER], ...), answer=(str, ...)))  # type: ignore[valid-type]
    choice = Annotated[Union[tuple(variants)], Field(discriminator="action")] if len(variants) > 1 else variants[0]  # noqa: UP007

    class Step(RootModel[choice]):  # type: ignore[valid-type]
        model_config = ConfigDict(json_schema_extra=_object_root)

    return Step


def _object_root(schema: dict[str, Any]) -> None:
    # the discriminator's mapping points into $defs, which structured.json_schema_for inlines away
    schema.pop("discriminator", None)
    schema.setdefault("type", "object")


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""
