"""One model call per batch of turns extracts everything the model-backed layers keep.

The summary, entity, graph and state layers read the same turns; asking the model once per batch
with a schema holding only the enabled parts costs a fraction of one call per layer (the prompt is
paid once). Output is schema-constrained JSON (see ``structured``): small local models keep facts
in structured lists that free-form summaries drop.

The prompt is in the conversation's language, so Chinese conversations give Chinese memories, and
shows each turn with its date: dates come from the messages, never from the clock.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field, create_model

from ..types import Message
from .base import ChatModel
from .structured import Structured, generate

PARTS: tuple[str, ...] = ("facts", "relations", "entities", "state")


class Attribute(BaseModel):
    key: str = Field(max_length=60)
    value: str = Field(max_length=200)


class Entity(BaseModel):
    name: str = Field(max_length=80)
    type: str = Field(max_length=40)
    description: str = Field(max_length=300)
    aliases: list[str] = Field(default_factory=list, max_length=5)
    attributes: list[Attribute] = Field(default_factory=list, max_length=8)


class Relation(BaseModel):
    source: str = Field(max_length=80)
    relation: str = Field(max_length=60)
    target: str = Field(max_length=80)
    evidence: str = Field(max_length=300)


class StateItem(BaseModel):
    key: str = Field(max_length=60)
    value: str = Field(max_length=300)


_PART_TYPES = {
    "facts": (list[str], Field(default_factory=list, max_length=20)),
    "entities": (list[Entity], Field(default_factory=list, max_length=12)),
    "relations": (list[Relation], Field(default_factory=list, max_length=16)),
    "state": (list[StateItem], Field(default_factory=list, max_length=12)),
}


def schema_for(parts: Sequence[str]) -> type[BaseModel]:
    """A pydantic model with only the requested parts, in the order of PARTS."""
    chosen = [p for p in PARTS if p in parts]
    return create_model("Extraction", **{p: _PART_TYPES[p] for p in chosen})  # type: ignore[call-overload]


_RULES = {
    "zh": {
        "head": "你从对话中提取要长期记住的信息。只提取对话里明确说到的内容，不要编造，不要翻译，用对话的语言写。忽略寒暄、客套和确认（如“好的”“明白”“收到”）；助手本身不是实体。",
        "facts": "facts：每条一句完整的话，写清是谁（用户说的用“用户”）、做了什么或是什么；保留所有人名、数字、日期、否定和偏好；有日期时写上日期。",
        "entities": "entities：对话中提到的每个具体事物：人、项目、产品、系统、技术、组织、地点、物品；name 用原文的名字；type 如 人物/项目/技术/组织/地点；description 一句话；aliases 写别名、笔名；attributes 写明确说到的属性。",
        "relations": "relations：实体之间、实体与其身份或属性之间的关系（身份、职业、开发、使用、属于、喜欢、别名或笔名等），每个陈述句至少一条；source 和 target 用原文名字，relation 用原文的词，evidence 原文摘一句作为依据。",
        "state": "state：用户当前的状态和偏好（如 当前任务、项目进度、偏好、决定），key 简短，value 为当前值。",
        "turns": "对话：",
    },
    "en": {
        "head": "Extract what should be remembered long-term from the conversation. Only what is explicitly said; invent nothing; write in the conversation's language. Skip greetings, thanks and acknowledgements; the assistant itself is not an entity.",
        "facts": "facts: one full sentence each saying who (the user is 'User') did or is what; keep every name, number, date, negation and preference; include dates where known.",
        "entities": "entities: every specific thing named in the conversation: people, projects, products, systems, technologies, organisations, places, objects; name as written; type like person/project/technology/organisation/place; description one sentence; aliases for other names or pen names; attributes only as stated.",
        "relations": "relations between entities, and between an entity and its role or attributes (identity, job, develops, uses, belongs to, likes, alias or pen name...), at least one per statement; source and target as named, relation in the conversation's words, evidence a quoted sentence from the conversation.",
        "state": "state: the user's current status and preferences (current task, progress, preferences, decisions); short key, current value.",
        "turns": "Conversation:",
    },
}


def language(messages: Sequence[Message]) -> str:
    """'zh' when the batch is mostly Chinese (a tenth of its characters or more)."""
    text = "".join(m.text for m in messages)
    cjk = sum(1 for c in text if "\u3400" <= c <= "\u9fff")
    return "zh" if text and cjk * 10 >= len(text) else "en"


_CONTENT = re.compile(r"[\u3400-\u9fff]|[A-Za-z0-9]+")


def trivial(message: Message) -> bool:
    """An acknowledgement with nothing to remember ("好的。", "OK, thanks!"): at most four Chinese
    characters or two words. Left out of the prompt: small models echo them as facts."""
    return len(_CONTENT.findall(message.text)) <= (4 if language([message]) == "zh" else 2)


def render_turns(messages: Sequence[Message], lang: str) -> str:
    """Turns as "[date] speaker: text" lines, one date line per day change (dates from messages);
    trivial acknowledgements left out."""
    labels = {"zh": {"user": "用户", "assistant": "助手"}, "en": {"user": "User", "assistant": "Assistant"}}[lang]
    lines: list[str] = []
    day = None
    for m in messages:
        if m.role not in ("user", "assistant") or not m.text.strip() or trivial(m):
            continue
        stamp = m.timestamp.date().isoformat() if m.timestamp else None
        if stamp and stamp != day:
            lines.append(f"[{stamp}]")
            day = stamp
        lines.append(f"{m.name or labels.get(m.role, m.role)}: {m.text.strip()}")
    return "\n".join(lines)


def prompt(messages: Sequence[Message], parts: Sequence[str], lang: str, *, known: Sequence[str] = ()) -> list[dict[str, str]]:
    """The extraction prompt: the rules for the enabled parts, then the turns."""
    rules = _RULES[lang]
    system = "\n".join([rules["head"], *(rules[p] for p in PARTS if p in parts)])
    if known and ("entities" in parts or "relations" in parts):
        system += ("\n已知实体（同一实体用同一名字）：" if lang == "zh" else "\nKnown entities (reuse these names): ") + "、".join(known)
    return [{"role": "system", "content": system}, {"role": "user", "content": rules["turns"] + "\n" + render_turns(messages, lang)}]


class Notes(BaseModel):
    facts: list[str] = Field(default_factory=list, max_length=40)


_MERGE = {
    "zh": "把下面按日期排列的笔记合并成更少、更短的笔记。必须保留：用户的身份、偏好、决定、任务状态，以及每一个数字、日期、人名和否定。同一件事前后不一致时两条都保留，写明日期，新的在前并说明是现在的情况。不要添加笔记里没有的内容，用原来的语言。",
    "en": "Merge the dated notes below into fewer, shorter notes. Keep the user's identity, preferences, decisions and task state, and every number, date, name and negation. When two notes conflict keep both with their dates, newest first, saying which is current. Add nothing that is not in the notes; keep their language.",
}


def merge_notes(model: ChatModel, items: Sequence[dict], lang: str, *, max_tokens: int = 768) -> list[dict]:
    """Merge summary notes with the model; each merged note takes the date and sources of the old
    notes it overlaps most (so the summary still records which turns it covers)."""
    from .grounding import overlap

    lines = "\n".join(f"[{str(i.get('at', ''))[:10]}] {i['text']}" for i in items)
    messages = [{"role": "system", "content": _MERGE[lang]}, {"role": "user", "content": lines}]
    result = generate(model, messages, Notes, max_tokens=max_tokens, language=lang)
    out = []
    for fact in result.value.facts:
        if not fact.strip():
            continue
        scores = [(overlap(fact, i["text"]), n) for n, i in enumerate(items)]
        best = max(s for s, _ in scores)
        near = [items[n] for s, n in scores if s >= best - 0.1 and s > 0] or list(items)
        out.append({"text": fact.strip(), "at": max(str(i.get("at", "")) for i in near), "source_ids": sorted({x for i in near for x in i.get("source_ids", [])})})
    return out or list(items)


@dataclass(frozen=True, slots=True)
class Batch:
    """What one extraction call saw and returned."""

    messages: tuple[Message, ...]
    lang: str
    result: Structured


def extract(model: ChatModel, messages: Sequence[Message], parts: Sequence[str], *, known: Sequence[str] = (), max_tokens: int = 768) -> Batch:
    """Run one extraction over ``messages``; raises ModelOutputError when the output stays invalid."""
    lang = language(messages)
    result = generate(model, prompt(messages, parts, lang, known=known), schema_for(parts), max_tokens=max_tokens, language=lang)
    return Batch(tuple(messages), lang, result)
