"""The one place that turns a chat model's answer into a validated pydantic object.

Models that do not enforce a schema answer with prose around the JSON, code fences, ``<think>``
blocks, trailing commas, single quotes, or an object cut off by ``max_tokens``. Losing a whole
extraction to one stray comma loses facts (mem0's users report exactly that), and letting a
``JSONDecodeError`` or pydantic ``ValidationError`` escape crashes the write side. So:

    generate(model, messages, Extraction)   ask, parse, repair, validate; retry with the error shown
    parse_output(text, Extraction)          the parsing half alone: (value, repaired) or ModelOutputError
    json_schema_for(Extraction)             the JSON schema with ``$defs`` inlined, for grammar engines

Whatever a model answers, the only error that leaves this module for it is ``ModelOutputError``
(``raw`` keeps the last answer); the provider's own errors (ProviderUnavailable, ProviderRejected)
pass through unchanged. ``Structured.repaired`` says when the value came from a repaired or
truncated answer, so that information that may be missing is never missing silently.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import json_repair
from pydantic import BaseModel, ValidationError

from ..errors import InvalidInput, ModelOutputError
from .base import ChatModel, Completion

__all__ = ["MAX_OUTPUT_CHARS", "MAX_REPAIR_CHARS", "Structured", "generate", "json_schema_for", "parse_output"]

T = TypeVar("T", bound=BaseModel)

#: Answers longer than this are refused unread: no real answer is this long, and parsing is not free.
MAX_OUTPUT_CHARS = 1_000_000
#: json_repair takes ~1 µs a character on real malformed JSON but up to ~120 µs on adversarial junk
#: (``{{{{}}}}`` runs): longer answers are not repaired (a cut-off answer of any length still is).
MAX_REPAIR_CHARS = 32_000
#: How much of a bad answer is shown back to the model when asking it to correct itself.
ECHO_CHARS = 400
#: How much of an error message is kept (errors quote model output, which can be anything).
ERROR_CHARS = 300

_PROMPTS = {
    "en": {
        "instruction": "Answer with one JSON {kind} only: no prose, no code fence, nothing before or after it. "
        "It must match this JSON schema:\n{schema}",
        "correction": "That answer was invalid ({error}). Reply again with the corrected JSON {kind} only.",
        "object": "object",
        "array": "array",
        "value": "value",
    },
    "zh": {
        "instruction": "只输出一个 JSON {kind}，不要任何说明文字或代码块标记，前后不要有其他内容。它必须符合以下 JSON Schema：\n{schema}",
        "correction": "上面的回答无效（{error}）。请只重新输出修正后的 JSON {kind}。",
        "object": "对象",
        "array": "数组",
        "value": "值",
    },
}


@dataclass(frozen=True)
class Structured(Generic[T]):
    """A validated value and every model call it took (failed attempts included, for token accounting).

    ``repaired`` is True when the accepted answer was not valid JSON as given (json_repair fixed it)
    or was cut off by ``max_tokens``: the value validates, but parts of the answer may be missing.
    """

    value: T
    calls: tuple[Completion, ...]
    repaired: bool


def generate(
    model: ChatModel,
    messages: Sequence[Mapping[str, Any]],
    schema: type[T],
    *,
    retries: int = 1,
    max_tokens: int | None = None,
    temperature: float = 0.0,
    language: str = "en",
) -> Structured[T]:
    """Ask ``model`` for an instance of ``schema``; repair what can be repaired, retry what cannot.

    The schema goes to the provider when it enforces schemas natively (``model.native_schema``),
    otherwise into the system message as an instruction (Chinese when ``language`` starts with
    "zh"). A failed answer is retried up to ``retries`` times, with the bad answer (shortened) and
    the error shown to the model. Raises ModelOutputError when every attempt failed;
    ProviderUnavailable and ProviderRejected from the model propagate unchanged.
    """
    if retries < 0:
        raise InvalidInput(f"retries must be >= 0, got {retries}", field="retries")
    prompts = _prompts(language)
    json_schema = json_schema_for(schema)
    native = bool(model.native_schema)
    conversation = [dict(m) for m in messages] if native else _with_instruction(messages, _instruction(json_schema, prompts))
    calls: list[Completion] = []
    error = "no attempt made"
    for _attempt in range(retries + 1):
        completion = model.complete(conversation, schema=json_schema if native else None, temperature=temperature, max_tokens=max_tokens)
        calls.append(completion)
        try:
            # "repeat": the model (llm.loops) stopped a list that began to loop; what came before is whole
            cut = completion.finish_reason in ("length", "repeat")
            value, repaired = parse_output(completion.text, schema, truncated=cut)
        except ModelOutputError as exc:
            error = _with_cutoff_hint(str(exc), completion)
            conversation = [*conversation, *_correction(completion.text, error, _kind(json_schema), prompts)]
            continue
        if completion.finish_reason == "repeat" and _closed_cleanly(completion.text, schema):
            repaired = False
        return Structured(value=value, calls=tuple(calls), repaired=repaired or completion.finish_reason == "length")
    attempts = f"{len(calls)} attempt" + ("s" if len(calls) > 1 else "")
    raise ModelOutputError(f"{schema.__name__}: {error} (after {attempts})", raw=_raw(calls[-1].text))


def parse_output(text: str, schema: type[T], *, truncated: bool = False) -> tuple[T, bool]:
    """Parse one model answer into ``schema``: ``(value, repaired)``, or ModelOutputError saying why not.

    Steps: drop ``<think>`` blocks, unwrap a code fence, take the first JSON value of the schema's
    kind (an object or an array; prose around it is ignored), parse it strictly; if that fails,
    repair it with json_repair (``repaired=True``); refuse lone surrogates (not storable as UTF-8);
    validate with pydantic.

    ``truncated`` (the provider said the answer was cut off by ``max_tokens``) keeps only what the
    model finished: the text is cut back to its last comma or bracket and its open brackets are
    closed, so that no half-written string or number ("Ber" for "Berlin") becomes a value, and a
    trailing list element left incomplete is dropped when it is what fails validation. Without
    that signal an unclosed answer is repaired as json_repair sees fit (and flagged ``repaired``).
    """
    if not isinstance(text, str):
        raise ModelOutputError(f"the output is not text but {type(text).__name__}")
    if len(text) > MAX_OUTPUT_CHARS:
        raise ModelOutputError(f"the output is {len(text)} characters long, over the {MAX_OUTPUT_CHARS} limit")
    body = _unwrap_fence(_strip_thinking(text))
    start = _first_opener(body, _schema_kind(schema))
    if start is None:
        raise ModelOutputError("no JSON found in the output" if body.strip() else "the output is empty")
    data, repaired = _load(body[start:], truncated=truncated)
    _check_encodable(data)
    return _validate(data, schema, salvage=truncated and repaired), repaired


def _closed_cleanly(text: str, schema: type[BaseModel]) -> bool:
    """Whether a text cut at a line boundary is whole once its brackets are closed (nothing of it
    lost: no half-written value before the cut)."""
    body = _unwrap_fence(_strip_thinking(text))
    start = _first_opener(body, _schema_kind(schema))
    if start is None:
        return False
    cut, closers = _cut_back(body[start:])
    return cut.rstrip().removesuffix(",").rstrip() == body[start:].rstrip().removesuffix(",").rstrip() and bool(closers)


def json_schema_for(model_cls: type[BaseModel]) -> dict[str, Any]:
    """``model_cls``'s JSON schema with every ``$ref`` to ``$defs`` inlined.

    Simple grammar engines (llama.cpp's json-schema-to-grammar, some OpenAI-compatible servers)
    do not follow references. Recursive models cannot be inlined; their schema keeps its ``$defs``.
    """
    schema = model_cls.model_json_schema()
    defs = schema.get("$defs")
    if not defs:
        return schema
    try:
        return _inline({k: v for k, v in schema.items() if k != "$defs"}, defs, ())
    except _CannotInline:
        return schema


# -- the prompt side ----------------------------------------------------------------------------


def _prompts(language: str) -> dict[str, str]:
    return _PROMPTS["zh" if language.lower().startswith("zh") else "en"]


@functools.cache
def _schema_kind(schema: type[BaseModel]) -> str:
    return _kind(json_schema_for(schema))


def _kind(json_schema: Mapping[str, Any]) -> str:
    """What the answer's top level must be: "object", "array" or (anything else) "value"."""
    kind = json_schema.get("type")
    return kind if kind in ("object", "array") else "value"


def _instruction(json_schema: Mapping[str, Any], prompts: Mapping[str, str]) -> str:
    compact = json.dumps(json_schema, ensure_ascii=False, separators=(",", ":"))
    return prompts["instruction"].format(kind=prompts[_kind(json_schema)], schema=compact)


def _with_instruction(messages: Sequence[Mapping[str, Any]], instruction: str) -> list[dict[str, Any]]:
    """The messages with ``instruction`` appended to the system message (one is added if none leads).

    Appending keeps a single system message first, which some chat templates require.
    """
    out = [dict(m) for m in messages]
    content = out[0].get("content") if out and out[0].get("role") == "system" else None
    if isinstance(content, str):
        out[0]["content"] = f"{content}\n\n{instruction}" if content.strip() else instruction
    elif isinstance(content, list):
        out[0]["content"] = [*content, {"type": "text", "text": instruction}]
    else:
        out.insert(0, {"role": "system", "content": instruction})
    return out


def _correction(bad: Any, error: str, kind: str, prompts: Mapping[str, str]) -> list[dict[str, Any]]:
    """The two messages that show the model its bad answer (shortened) and what was wrong with it."""
    echo = bad if isinstance(bad, str) else ""
    echo = echo[:ECHO_CHARS] + " …" if len(echo) > ECHO_CHARS else echo
    return [
        {"role": "assistant", "content": echo or "(empty)"},
        {"role": "user", "content": prompts["correction"].format(error=error, kind=prompts[kind])},
    ]


def _with_cutoff_hint(error: str, completion: Completion) -> str:
    if completion.finish_reason == "length":
        return f"{error}; the answer was cut off by the token limit, answer more concisely"
    return error


def _raw(text: Any) -> str:
    return text if isinstance(text, str) else ""


# -- the parsing side ---------------------------------------------------------------------------

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[^\n`]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_OPENERS = {"object": "{", "array": "[", "value": "{["}


def _strip_thinking(text: str) -> str:
    """Drop reasoning: closed ``<think>`` blocks, text before a lone ``</think>``, an unclosed ``<think>``."""
    text = _THINK.sub("", text)
    lower = text.lower()
    if "</think>" in lower:  # the opening tag was in the prompt (Qwen3-style templates)
        text = text[lower.rindex("</think>") + len("</think>") :]
        lower = text.lower()
    if "<think>" in lower:  # cut off while thinking: nothing after it is an answer
        text = text[: lower.index("<think>")]
    return text


def _unwrap_fence(text: str) -> str:
    """The inside of the first code fence, if one opens before any JSON (JSON strings may quote fences)."""
    fence = text.find("```")
    if fence < 0:
        return text
    opener = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=len(text))
    if opener < fence:
        return text
    match = _FENCE.search(text, fence)
    return match.group(1) if match else text


def _first_opener(text: str, kind: str) -> int | None:
    positions = [i for i in (text.find(c) for c in _OPENERS[kind]) if i >= 0]
    return min(positions) if positions else None


def _load(text: str, *, truncated: bool) -> tuple[Any, bool]:
    """The first JSON value at the start of ``text``: ``(data, repaired)``.

    Strictly parsed if it can be (what follows the value, such as trailing prose, is ignored);
    if ``truncated``, cut back to its last finished value and closed; else repaired by json_repair.
    The repair gets the whole rest of the text: cutting at a naive bracket match would drop the
    keys after a ``}`` inside a single-quoted string.
    """
    try:
        return json.JSONDecoder().raw_decode(text)[0], False
    except (ValueError, RecursionError):
        pass
    if truncated:
        text, closers = _cut_back(text)
        try:
            return json.loads(text.rstrip().removesuffix(",") + closers), True
        except (ValueError, RecursionError):
            pass  # it was malformed before the cut as well
    return _repair(text), True


def _repair(text: str) -> Any:
    if len(text) > MAX_REPAIR_CHARS:
        raise ModelOutputError(f"the output is not valid JSON and too long ({len(text)} characters) to repair")
    try:
        data = json_repair.loads(text)
    except Exception as exc:  # a foreign parser fed arbitrary junk: any failure is the output's fault
        raise ModelOutputError(f"the output is not valid JSON and could not be repaired ({type(exc).__name__})") from exc
    if not isinstance(data, dict | list):
        raise ModelOutputError("the output is not valid JSON and could not be repaired")
    return data


def _check_encodable(data: Any) -> None:
    """Refuse lone UTF-16 surrogates (``"\\ud800"``): pydantic accepts them, but no store can write them."""
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ModelOutputError("the output contains an invalid character (a lone UTF-16 surrogate)") from exc
    except (ValueError, TypeError, RecursionError) as exc:
        raise ModelOutputError(f"the output could not be read back ({type(exc).__name__})") from exc


_STRUCTURE = re.compile(r'[\\"{}\[\],]')


def _cut_back(text: str) -> tuple[str, str]:
    """What a cut-off answer finished, and the brackets that close it.

    The text is cut after its last comma or bracket outside a string, so that no half-written
    string, number or key survives. No bracket follows the cut, so the brackets still open at the
    end of the text are the ones open at the cut.
    """
    in_string, escaped_until, end = False, -1, 0
    opened: list[str] = []
    for match in _STRUCTURE.finditer(text):
        i, char = match.start(), match.group()
        if i < escaped_until:
            continue
        if in_string:
            if char == "\\":
                escaped_until = i + 2
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in "{[":
            opened.append("}" if char == "{" else "]")
        elif char in "}]" and opened:
            opened.pop()
        if char not in '"\\':
            end = i + 1
    return text[:end], "".join(reversed(opened))


def _validate(data: Any, schema: type[T], *, salvage: bool) -> T:
    """``schema.model_validate(data)``; with ``salvage``, retried without an incomplete last element."""
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        error = exc
    except (ValueError, TypeError, RecursionError) as exc:
        raise ModelOutputError(f"the output does not fit the schema ({type(exc).__name__})") from exc
    trimmed = _without_incomplete_tail(data, error) if salvage else None
    if trimmed is not None:
        try:
            return schema.model_validate(trimmed)
        except (ValueError, TypeError, RecursionError):
            pass
    raise ModelOutputError(_describe(error)) from error


def _without_incomplete_tail(data: Any, error: ValidationError) -> Any | None:
    """``data`` without the element a cut-off answer was writing, if every error lies inside it.

    That element is at the end of the document: the last element of the last list on the path of
    last keys and last elements. The deepest such list element that contains every error goes.
    """
    locs = [tuple(e["loc"]) for e in error.errors(include_url=False, include_input=False, include_context=False)]
    path: list[Any] = []
    node, cut = data, 0
    while isinstance(node, dict | list) and node:
        key = next(reversed(node)) if isinstance(node, dict) else len(node) - 1
        path.append(key)
        if isinstance(node, list) and all(loc[: len(path)] == tuple(path) for loc in locs):
            cut = len(path)
        node = node[key]
    if not cut:
        return None
    parent = data
    for key in path[: cut - 1]:
        parent = parent[key]
    del parent[path[cut - 1]]
    return data


def _describe(exc: ValidationError) -> str:
    """The first few validation errors on one short line: ``facts.0.subject: Field required; ...``."""
    shown = 3
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    parts = [f"{'.'.join(str(p) for p in e['loc']) or 'the value'}: {e['msg']}" for e in errors[:shown]]
    if len(errors) > shown:
        parts.append(f"and {len(errors) - shown} more")
    return _one_line("; ".join(parts))


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text[:ERROR_CHARS] + "…" if len(text) > ERROR_CHARS else text


class _CannotInline(Exception):
    """A ``$ref`` that refers to itself (or to nothing): the schema keeps its ``$defs``."""


def _inline(node: Any, defs: Mapping[str, Any], seen: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_inline(item, defs, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref.removeprefix("#/$defs/")
        if name in seen or name not in defs:
            raise _CannotInline(name)
        target = _inline(defs[name], defs, (*seen, name))
        siblings = {k: _inline(v, defs, seen) for k, v in node.items() if k != "$ref"}
        return {**target, **siblings}
    return {k: _inline(v, defs, seen) for k, v in node.items()}
