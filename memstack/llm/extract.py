"""One model call per batch of turns extracts everything the model-backed layers keep.

The summary, entity, graph and state layers read the same turns; asking the model once per batch
with a schema holding only the enabled parts costs a fraction of one call per layer (the prompt is
paid once). Output is schema-constrained JSON (see ``structured``): small local models keep facts
in structured lists that free-form summaries drop.

The prompt is in the conversation's language, so Chinese conversations give Chinese memories, and
shows each turn with its date: dates come from the messages, never from the clock.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, create_model

from .. import prompts
from ..reldates import annotate, relative_dates
from ..types import Message
from .base import ChatModel
from .structured import Structured, generate

PARTS: tuple[str, ...] = ("facts", "entities", "relations", "state")


class Attribute(BaseModel):
    key: str = Field(max_length=60)
    value: str = Field(max_length=200)
    #: the user's words end this value ("不再做数据分析了", "以前住在上海"): stored as past, never current
    past: bool = False


class Entity(BaseModel):
    name: str = Field(max_length=80)
    type: str = Field(default="", max_length=40)
    description: str = Field(default="", max_length=300)
    aliases: list[str] = Field(default_factory=list, max_length=5)
    attributes: list[Attribute] = Field(default_factory=list, max_length=8)
    #: the fields of a developer's entity schema that have no place above (``llm.custom``), as given
    fields: dict[str, Any] = Field(default_factory=dict)


class Relation(BaseModel):
    source: str = Field(max_length=80)
    relation: str = Field(max_length=60)
    target: str = Field(max_length=200)
    #: filled from the turns by the extractor (the sentence naming both ends): not asked of the
    #: model, whose quotes cost output tokens and drift from the text
    evidence: str = Field(default="", max_length=300)
    #: the user's words end this relation (see Attribute.past)
    past: bool = False


class StateItem(BaseModel):
    key: str = Field(max_length=60)
    value: str = Field(max_length=300)


class Statement(BaseModel):
    """What the model writes for each statement: subject, predicate, object (a subject type when
    the answer has one)."""

    subject: str = Field(max_length=80)
    subject_type: str = Field(default="", max_length=40)
    predicate: str = Field(max_length=60)
    object: str = Field(max_length=200)
    #: set by the checks against the user's words (``layers.verify``), never asked of the model
    past: bool = False


#: one statement as the model writes it: "主体|谓词|宾语" in one JSON string. Keyed objects cost ~26
#: tokens a statement in keys, quotes and indentation for ~4 tokens of content (compact or
#: indented, the model's own choice, ~33); the string costs ~10, and ~8 without the subject's type
#: that a fourth field used to carry ("|人物": the entities' type, mostly "用户类型" or empty of
#: meaning): 24% fewer decoded tokens on LifeAssist-CN, 0.9 s of model time per turn where four
#: fields took 1.05-1.08 (BENCHMARKS.md). A fourth field is still read (another model's answer).
#: Decoding is what the write side spends its time on, and one string a line also lets a loop be
#: cut at its first repeat (``llm.loops``). Fields hold no "|", quote, backslash, newline,
#: bracket, brace or "。": a statement is a phrase, and a model that tries to close the list early
#: ("做贝果|用户类型']}。这些信息是……", a real answer) would otherwise go on inside a field until its
#: length runs out. Nor Chinese quotes: a model kept from closing its string writes them instead
#: and runs several statements into one ("…不再做数据分析了”，“用户|works as a nurse there", a
#: real answer on a mixed Chinese and English batch).
_FIELD = r'[^|"\\\n\[\]{}。“”]'
STATEMENT_PATTERN = rf"^{_FIELD}{{1,80}}\|{_FIELD}{{1,60}}\|{_FIELD}{{1,100}}$"


def _split_statement(value: Any) -> Any:
    if not isinstance(value, str):
        return value  # a statement object (another model's answer, or a value built in code)
    fields = [f.strip() for f in value.split("|")]
    if len(fields) not in (3, 4):
        raise ValueError("a statement is 'subject|predicate|object' (a fourth field, the subject's type, may follow)")
    return dict(zip(("subject", "predicate", "object", "subject_type"), fields, strict=False))


StatementLine = Annotated[Statement, BeforeValidator(_split_statement), WithJsonSchema({"type": "string", "pattern": STATEMENT_PATTERN})]


def _all_required(schema: dict) -> None:
    # the model is asked for every part: with optional keys a grammar-constrained model may close
    # the object after the first one and skip the rest. Validation still accepts a part left out,
    # so a cut-off answer keeps what it finished.
    schema["required"] = list(schema.get("properties", {}))


class MemoriesOnly(BaseModel):
    model_config = ConfigDict(json_schema_extra=_all_required)
    memories: list[StatementLine] = Field(default_factory=list, max_length=16)


class StateOnly(BaseModel):
    model_config = ConfigDict(json_schema_extra=_all_required)
    state: list[StateItem] = Field(default_factory=list, max_length=8)


class MemoriesAndState(BaseModel):
    model_config = ConfigDict(json_schema_extra=_all_required)
    memories: list[StatementLine] = Field(default_factory=list, max_length=16)
    state: list[StateItem] = Field(default_factory=list, max_length=8)


def schema_for(parts: Sequence[str], state_keys: Sequence[str] = ()) -> type[BaseModel]:
    """What the model is asked for. Facts, entities and relations all come from one list of
    subject/predicate/object statements: a small model asked for several lists fills the first
    and leaves the rest empty, and one list costs far fewer output tokens. ``state_keys`` (a
    state schema's properties) constrain the state items' keys to those names."""
    memories = any(p in parts for p in ("facts", "entities", "relations"))
    if "state" in parts and state_keys:
        return _keyed(tuple(state_keys), memories)
    if memories and "state" in parts:
        return MemoriesAndState
    return MemoriesOnly if memories else StateOnly


@functools.cache
def _keyed(keys: tuple[str, ...], memories: bool) -> type[BaseModel]:
    """The state part with its keys as an enum in the JSON schema (a grammar-constrained model can
    write no other); validation takes any key, so one stray key does not cost the whole answer
    (the extractor leaves keys outside the schema out)."""
    item = create_model(
        "StateItem", key=(str, Field(max_length=60, json_schema_extra={"enum": list(keys)})), value=(str, Field(max_length=300))
    )
    fields: dict[str, Any] = {"state": (list[item], Field(default_factory=list, max_length=max(8, len(keys))))}
    if memories:
        fields = {"memories": (list[StatementLine], Field(default_factory=list, max_length=16)), **fields}
    return create_model("MemoriesAndState" if memories else "StateOnly", __config__=ConfigDict(json_schema_extra=_all_required), **fields)


@dataclass(frozen=True, slots=True)
class Extracted:
    """The parts the layers use, unpacked from the model's statements."""

    facts: list[str]
    entities: list[Entity]
    relations: list[Relation]
    state: list[StateItem]


#: characters of Chinese verbs, copulas and prepositions: a predicate with none is a noun ("老板")
_ZH_VERBISH = set(
    "是为于在有用做开喜爱住去来学养会要想计划负责参加入希望需打讨厌不没叫姓属毕担认买吃喝看读写玩跑支持采部署依包含括位出搬改换定推延提使练教管创建造设订约报考选收发送给帮让请找带陪遇见听说知道觉得决准备完成变租借投擅长懂到和与跟对把被将正已曾"
)
#: English predicates that are verbs although they look like nouns
_EN_VERBS = frozenset(
    (
        "is",
        "are",
        "was",
        "were",
        "be",
        "has",
        "have",
        "had",
        "use",
        "like",
        "love",
        "hate",
        "want",
        "need",
        "plan",
        "live",
        "work",
        "know",
        "own",
        "prefer",
        "speak",
        "study",
        "learn",
        "visit",
        "develop",
        "build",
        "call",
        "enjoy",
        "play",
        "read",
        "write",
        "run",
        "lead",
        "manage",
        "make",
        "do",
        "go",
        "attend",
    )
)


def _noun_predicate(predicate: str, lang: str) -> bool:
    """Whether the predicate names a property or a role ("老板", "职业", "boss", "job") rather than
    an action: such a statement reads "林晓的老板是陈刚", not "林晓老板陈刚"."""
    if lang == "zh":
        return bool(predicate) and not any(c in _ZH_VERBISH for c in predicate) and not predicate.isascii()
    words = predicate.casefold().split()
    return (
        0 < len(words) <= 2
        and predicate.isascii()
        and not any(w in _EN_VERBS or w.endswith(("ed", "ing")) or (w.endswith("s") and not w.endswith("ss")) for w in words)
        and words[-1] not in {"in", "at", "to", "of", "for", "with", "on", "from", "by", "as"}
    )


def sentence(s: Statement, lang: str) -> str:
    """A statement as a readable note in the conversation's language: "用户开发知识中台", and for a
    predicate that is a noun "林晓的老板是陈刚" / "User develops the platform", "Lin's boss is Chen"."""
    subject, predicate, obj = s.subject.strip(), s.predicate.strip(), s.object.strip()
    ended = ("（已不再）" if lang == "zh" else " (no longer)") if s.past else ""
    if subject and obj and _noun_predicate(predicate, lang):
        return (f"{subject}的{predicate}是{obj}" if lang == "zh" else f"{subject}'s {predicate} is {obj}") + ended
    return ("" if lang == "zh" else " ").join(p for p in (subject, predicate, obj) if p) + ended


_OF_ZH = re.compile(r"^(.{1,30}?)的(.{1,8})$")
_OF_EN = re.compile(r"^(.{1,30}?)'s (.{1,30})$")
_COPULAS = frozenset(("是", "为", "就是", "is", "was", "is the", "are"))


def _anchored(statements: list[Statement]) -> list[Statement]:
    """Statements re-anchored on the names they are about, so the graph's paths connect:
    "莫尔索|是|小李的笔名" reads "小李|笔名|莫尔索" (and "Morsor|is|Li's pen name" "Li|pen name|Morsor"),
    and a subject that is a name of the batch plus a short part ("知识中台后端|使用|SpringBoot")
    reads "知识中台|后端使用|SpringBoot". Only names the batch's statements use elsewhere are
    anchors: a subject that merely begins like one stays as written."""
    names = {x.strip() for s in statements for x in (s.subject, s.object) if x.strip()}
    out: list[Statement] = []
    for s in statements:
        subject, predicate, obj = s.subject.strip(), s.predicate.strip(), s.object.strip()
        match = (_OF_ZH.match(obj) or _OF_EN.match(obj)) if predicate.casefold() in _COPULAS else None
        if match and match.group(1).strip() in names - {subject}:
            s = s.model_copy(update={"subject": match.group(1).strip(), "predicate": match.group(2).strip(), "object": subject})
        else:
            anchor = max((n for n in names if n != subject and subject.startswith(n) and _part(subject[len(n) :])), key=len, default=None)
            if anchor:
                s = s.model_copy(update={"subject": anchor, "predicate": subject[len(anchor) :] + predicate})
        out.append(s)
    return out


def _part(suffix: str) -> bool:
    """A short Chinese part noun after a name ("后端", "的猫"); one character ("小李子") is more likely a longer name."""
    core = suffix.removeprefix("的")
    return 2 <= len(suffix) <= 4 and 1 <= len(core) <= 3 and all("\u3400" <= c <= "\u9fff" for c in core)


#: subjects that name the assistant itself, as the prompt's speaker labels do
ASSISTANT_NAMES = frozenset(("助手", "assistant", "ai", "ai助手", "the assistant"))


def unpack(value: BaseModel, lang: str) -> Extracted:
    """Facts (each statement as a note), relations (subject -predicate-> object), entities (each
    subject, typed, with its predicates as attributes; no description: the attributes say it)."""
    # a small model at temperature 0 may repeat one statement until the list is full: once each
    seen: dict[tuple[str, str, str], Statement] = {}
    for s in getattr(value, "memories", []):
        key = (s.subject.strip().casefold(), s.predicate.strip().casefold(), s.object.strip().casefold())
        if key[0] in ASSISTANT_NAMES:
            continue  # the assistant is not something to remember (the prompt says so; small models mirror the speaker labels)
        if all(key) and key not in seen and not malformed(s):
            seen[key] = s
    statements = _anchored(_without_fans(list(seen.values())))
    facts = list(dict.fromkeys(sentence(s, lang) for s in statements))
    relations = [Relation(source=s.subject.strip(), relation=s.predicate.strip(), target=s.object.strip(), past=s.past) for s in statements]
    entities: dict[str, Entity] = {}
    for s in statements:
        key = s.subject.strip().casefold()
        e = entities.setdefault(key, Entity(name=s.subject.strip(), type=s.subject_type.strip()))
        if len(e.attributes) < 8:
            e.attributes.append(Attribute(key=s.predicate.strip(), value=s.object.strip(), past=s.past))
    return Extracted(facts, list(entities.values()), relations, list(getattr(value, "state", [])))


#: statements of one batch that give one subject the same object under this many predicates or more
FAN = 3

#: the subject types the prompts name (extract.*.json): an object that is one, or opens with one
#: and goes on after a comma, is a statement whose fields slid by one
TYPE_WORDS = (
    "人物",
    "项目",
    "技术",
    "组织",
    "地点",
    "物品",
    "活动",
    "person",
    "project",
    "technology",
    "organisation",
    "organization",
    "place",
    "object",
    "activity",
)
_AFTER_TYPE = "，,、；;：:"
_CLAUSE_BREAK = re.compile(r"[，,；;！!？?]")


def malformed(s: Statement) -> bool:
    """Whether the model's statement is broken rather than wrong: it loops (``runs_on``), its
    fields slid by one (``shifted``), or its predicate is a sentence ("推迟一周，对你来说其实是好事，……",
    a real one: a predicate is a verb or a relation, never two clauses)."""
    return runs_on(f"{s.subject} {s.predicate} {s.object}") or shifted(s) or bool(_CLAUSE_BREAK.search(s.predicate))


def shifted(s: Statement) -> bool:
    """Whether the model wrote the subject type where the object goes ("用户|每周跑五次|人物，膝盖基本
    没事|...", a real statement, rendered "用户每周跑五次人物，膝盖基本没事"): the object is a type word,
    or opens with one and a comma. A real object that names a kind of thing ("社区活动", "前端技术")
    does not open that way."""
    obj = s.object.strip().casefold()
    return any(obj.startswith(t) and (len(obj) == len(t) or obj[len(t)] in _AFTER_TYPE) for t in TYPE_WORDS)


#: a field in which a stretch of this many characters comes back is a decoding loop
LOOP_CHARS = 16


def runs_on(text: str) -> bool:
    """Whether the text repeats a stretch of ``LOOP_CHARS`` characters or more: a small model that
    loops inside a field ("星城马拉松从4月19号推迟到4月26号，对欧阳医生来说是好事，……，星城马拉松从4月19号推迟到
    4月26号，对欧阳医生来说是好事，……", a real object, cut at its 100 characters) writes one clause
    twice, mixing the batch's turns into a statement that none of them says. A real object names
    a thing or a short fact and says it once."""
    text = " ".join(text.split())
    return any(text[i : i + LOOP_CHARS] in text[i + LOOP_CHARS :] for i in range(len(text) - 2 * LOOP_CHARS + 1))


def _without_fans(statements: list[Statement]) -> list[Statement]:
    """The statements less the fans: a small model that loses the thread maps a word of every turn
    to one object ("用户|紧张|赛前", "用户|手术室|赛前", "用户|顾屿|赛前"... nine in a real batch).
    A subject given one object under ``FAN`` or more predicates in one batch is that failure far
    more often than a fact ("lives in, works in, was born in Beijing"); the turns stay whole in
    retrieval and in the summary's quotes of the turns no note carries."""

    def ends(s: Statement) -> tuple[str, str]:
        return s.subject.strip().casefold(), s.object.strip().casefold()

    fans = Counter(map(ends, statements))
    return [s for s in statements if fans[ends(s)] < FAN]


def language(messages: Sequence[Message]) -> str:
    """'zh' when the batch is mostly Chinese (a tenth of its characters or more)."""
    text = "".join(m.text for m in messages)
    cjk = sum(1 for c in text if "\u3400" <= c <= "\u9fff")
    return "zh" if text and cjk * 10 >= len(text) else "en"


#: what acknowledgements are made of; a turn of nothing else carries nothing to remember
_ACKS = re.compile(
    r"好的|好吧|好|嗯嗯|嗯|哦|噢|收到|明白了|明白|了解了|了解|知道了|懂了|谢谢你|谢谢|多谢|感谢|没问题|可以|行|对|是的|哈哈|太棒了|不错|"
    r"\b(?:ok|okay|sure|thanks|thank you|thx|got it|great|cool|nice|yes|yeah|yep|right|noted|alright|understood|will do)\b"
)
_LEFT = re.compile(r"[\u3400-\u9fff]|[a-z0-9]+")


def trivial(message: Message) -> bool:
    """An acknowledgement with nothing to remember ("好的。", "OK, thanks!", "明白，谢谢！"): nothing is
    left once acknowledgement words and punctuation are taken out. Left out of the prompt: small
    models echo them as facts. A short statement ("我叫李四", "I'm 28") is not one."""
    return not _LEFT.search(_ACKS.sub(" ", message.text.casefold()))


#: how much of an assistant's question the memories prompt shows (``render_turns(assistant="gist")``)
LEAD_CHARS = 40
_SENTENCE_END = re.compile(r"(?<=[。！？!?；;\n])|(?<=[.](?=\s))")
_ASKS = re.compile(r"[？?][\s\"'”’）)～~]*$")


#: an assistant's first sentence this short is shown (a reaction: "恭喜！", "Sorry to hear that."):
#: it tells the model what the user's words did ("我已经从上海搬到深圳了" read as a plan without it)
REACTION_CHARS = 12


def gist(text: str, limit: int = LEAD_CHARS) -> str | None:
    """What the memories prompt shows of an assistant's message: its first sentence when that is a
    short reaction, and the question it ends with (at most ``limit`` characters from its end,
    "…" marking a cut), joined by " … "; None when it has neither."""
    sentences = [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]
    if not sentences:
        return None
    first = sentences[0] if len(sentences[0]) <= REACTION_CHARS else None
    last = sentences[-1] if _ASKS.search(sentences[-1]) else None
    if last is not None and len(last) > limit:
        last = "…" + last[-limit:].lstrip()
    shown = [x for x in dict.fromkeys((first, last)) if x]
    return " … ".join(shown) if shown else None


def render_turns(messages: Sequence[Message], lang: str, *, assistant: str = "full") -> str:
    """Turns as "[date] speaker: text" lines, one date line per day change (dates from messages);
    trivial acknowledgements left out. ``assistant="gist"`` shows of an assistant's message only
    its ``gist``: a short reaction ("恭喜！") and the question it ends with, which the user's next
    message may answer ("你喜欢哪种菜系？" before "川菜"). The memories are the user's, the
    assistant's words are kept whole by retrieval, and its advice and explanations were a third
    of the prompt's tokens (its first sentence, shown before, was as often "排除了半月板和韧带损伤，
    这是好消息。" or "第一次全马定在4小时30分以内，是个有挑战但可以实现的目标……")."""
    labels = {"zh": {"user": "用户", "assistant": "助手"}, "en": {"user": "User", "assistant": "Assistant"}}[lang]
    lines: list[str] = []
    day = None
    for m in messages:
        if m.role not in ("user", "assistant") or not m.text.strip() or trivial(m):
            continue
        text = gist(m.text) if assistant == "gist" and m.role == "assistant" else m.text.strip()
        if text is None:
            continue
        stamp = m.timestamp.date().isoformat() if m.timestamp else None
        if stamp and stamp != day:
            lines.append(f"[{stamp}]")
            day = stamp
        lines.append(f"{m.name or labels.get(m.role, m.role)}: {text}")
    return "\n".join(lines)


def prompt(
    messages: Sequence[Message], parts: Sequence[str], lang: str, *, known: Sequence[str] = (), state_keys: Mapping[str, str] | None = None
) -> list[dict[str, str]]:
    """The extraction prompt (``prompts/extract.*.json``): the rules for what is asked, then the
    turns. ``state_keys``: the state's keys with their meaning, listed for the model to fill."""
    rules = prompts.load("extract", lang)
    schema = schema_for(parts, tuple(state_keys or ()))
    system = "\n".join([rules["head"], *(rules[f] for f in ("memories", "state") if f in schema.model_fields)])
    if state_keys and "state" in schema.model_fields:
        sep = "、" if lang == "zh" else ", "
        system += (
            "\n"
            + rules["state_keys"]
            + sep.join(f"{k}（{d}）" if d and lang == "zh" else f"{k} ({d})" if d else k for k, d in state_keys.items())
        )
    if known and "memories" in schema.model_fields:
        system += "\n" + rules["known"] + ("、" if lang == "zh" else ", ").join(known)
    # the state is often confirmed by the assistant ("已为您订好…"): its turns stay whole for it
    shown = "full" if "state" in schema.model_fields else "gist"
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": rules["turns"] + "\n" + render_turns(messages, lang, assistant=shown)},
    ]


class Notes(BaseModel):
    facts: list[str] = Field(default_factory=list, max_length=40)


def merge_notes(model: ChatModel, items: Sequence[dict], lang: str, *, max_tokens: int = 768) -> list[dict]:
    """Merge summary notes with the model; each merged note takes the date and sources of the old
    notes it overlaps most (so the summary still records which turns it covers). A note a newer
    one superseded is shown to the model marked outdated, so the merge keeps it as past."""
    from .grounding import overlap

    past = "（已过时）" if lang == "zh" else " (outdated)"
    lines = "\n".join(f"[{str(i.get('at', ''))[:10]}] {i['text']}{past if i.get('superseded_at') else ''}" for i in items)
    messages = [{"role": "system", "content": prompts.load("merge", lang)["system"]}, {"role": "user", "content": lines}]
    result = generate(model, messages, Notes, max_tokens=max_tokens, language=lang)
    out = []
    for fact in result.value.facts:
        if not fact.strip():
            continue
        scores = [(overlap(fact, i["text"]), n) for n, i in enumerate(items)]
        best = max(s for s, _ in scores)
        near = [items[n] for s, n in scores if s >= best - 0.1 and s > 0] or list(items)
        out.append(
            {
                "text": fact.strip(),
                "at": max(str(i.get("at", "")) for i in near),
                "source_ids": sorted({x for i in near for x in i.get("source_ids", [])}),
            }
        )
    return out or list(items)


@dataclass(frozen=True, slots=True)
class Batch:
    """What one extraction call saw and returned."""

    messages: tuple[Message, ...]
    lang: str
    result: Structured
    extracted: Extracted
    #: statements the user's words did not support (``layers.verify.Rejected``), for the audit trail
    rejected: tuple[Any, ...] = ()


def extract(
    model: ChatModel,
    messages: Sequence[Message],
    parts: Sequence[str],
    *,
    known: Sequence[str] = (),
    max_tokens: int = 768,
    state_keys: Mapping[str, str] | None = None,
) -> Batch:
    """Run one extraction over ``messages``; raises ModelOutputError when the output stays invalid.
    ``state_keys`` (key -> meaning, from a state schema) are the only keys the state may have."""
    lang = language(messages)
    schema = schema_for(parts, tuple(state_keys or ()))
    result = generate(
        model, prompt(messages, parts, lang, known=known, state_keys=state_keys), schema, max_tokens=max_tokens, language=lang
    )
    if getattr(result.value, "memories", None):
        result = replace(result, value=result.value.model_copy(update={"memories": dated(result.value.memories, messages, lang)}))
    return Batch(tuple(messages), lang, result, unpack(result.value, lang))


_MAX_CHARS = {"predicate": 60, "object": 200}  # Statement's own limits


def dated(statements: Sequence[Statement], messages: Sequence[Message], lang: str) -> list[Statement]:
    """Statements whose relative dates ("生日是大后天", "moved last month") carry the calendar date,
    reckoned from when the turn that says it was said ("大后天（2026-02-13）"): read weeks later,
    a note's own date is when it was written, and a model answers that date instead (``reldates``).
    The turn is the latest one that contains the expression; an expression no turn contains
    (the model's own wording) stays as written."""
    out = []
    for s in statements:
        update = {}
        for field in ("predicate", "object"):
            text = getattr(s, field)
            spans = relative_dates(text, messages[-1].timestamp) if text else []
            if not spans:
                continue
            said = next(
                (m for m in reversed(messages) if m.timestamp and all(text[a:b].casefold() in m.text.casefold() for a, b, _ in spans)), None
            )
            if said is not None:
                update[field] = annotate(text, said.timestamp, lang)[: _MAX_CHARS[field]]
        out.append(s.model_copy(update=update) if update else s)
    return out
