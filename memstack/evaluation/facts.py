"""The fact benchmark (``memstack bench facts``): is what the model-backed layers store right?

A development set of conversations written for the project (``bench/data/facts/``, CC0), each
with the gold statements a careful annotator keeps: subject, predicate, object, a status at the
end of the conversation (current, past, plan, negated) and whose fact it is (the user's or
another's), in a category (plain facts, changes, negation and cessation, other people's facts,
plans, dates, multi-valued attributes). The traps (the assistant's suggestions, the user's
questions: never the user's facts) are gold too, with status ``not_a_fact``: anything stored for
them is a wrong memory.

Each conversation is ingested into a fresh store as one user (``Memory.add`` with the turns'
timestamps, one thread per day, the write queue drained after each day as a running worker would),
then what the store holds as model-made memory is read back and normalised to items (subject,
predicate, object, current or past):

- the entities' attributes, current values and past ones (``layers.attributes.attribute_values``); those
  of the user's own entity (key ``user``) are the profile the ``profile`` layer shows;
- the entities' aliases (a name that contains or is contained in the entity's own is left out);
- the relations, superseded ones (``invalid_at`` in their value) as past;
- the state records;
- the summary's statement notes (thread-scoped, scored but reported apart: not in the totals).

Each item is matched against the conversation's gold: the object decides (normalised equality or
containment either way, or an alias), then the subject (the user's entity or a self name against
用户/user, else names and aliases by containment; a statement on the user whose predicate names
the person, "用户 | 妹妹的专业 | 临床医学", is that person's), and the predicate only breaks ties. A
stored value carries a status of its own (past when superseded; negated, planned or past when its
predicate or object says so: "不再做", "打算去", "used to"), which must agree with the gold's.
Verdicts: **correct**; **wrong current** (a value the store holds as current that reads as true or
still planned while its gold is past, negated or not a fact, or as done while it is only planned;
also a right value stored beside an old one it claims as current, in its object or in an
attribute's name that swallowed it, "住在上海=喜欢打网球" after the move: the worst error, counted
apart); wrong status (the other disagreements); misattributed (the object is another subject's,
or an alias joins two people); unmatched (nothing in the gold: a false positive). An object of a
trap under any subject is the trap's. Precision = correct / stored items; recall = gold statements
(traps left out) that some correct item carries. The matcher is this module's own (it does not
reuse ``supersede``'s rules) so that the measure does not move with the code it measures.
"""

from __future__ import annotations

import json
import re
import time
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..errors import InvalidInput
from ..llm import ChatModel, get_chat_model

STATUSES = ("current", "past", "plan", "negated", "not_a_fact")
CATEGORIES = ("plain", "change", "negation", "other_person", "plan", "not_a_fact", "multi_value", "date")
WHOSE = ("user", "other")
LANGS = ("zh", "en")
VERDICTS = ("correct", "wrong_current", "wrong_status", "misattributed", "unmatched")
#: item sources counted in the totals; "note" (the summary's statements) is reported apart
SCORED_SOURCES = ("profile", "entity", "alias", "relation", "state")
#: a conversation has this many user turns
MIN_TURNS, MAX_TURNS = 2, 6

#: the checkout's bundled development set (``bench/`` is not part of the installed package)
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "bench" / "data" / "facts"


def default_data() -> Path:
    """The bundled set of a source checkout; InvalidInput when this memstack is installed without one."""
    if DEFAULT_DATA.is_dir() and any(DEFAULT_DATA.glob("*.jsonl")):
        return DEFAULT_DATA
    raise InvalidInput(
        f"the fact set is not installed with the package (looked in {DEFAULT_DATA}): run from a memstack checkout or pass --data DIR",
        field="data",
    )


# ---- the data ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Gold:
    subject: str
    predicate: str
    object: str
    status: str
    whose: str
    category: str
    aliases: tuple[str, ...] = ()
    subject_aliases: tuple[str, ...] = ()
    #: the object is worked out (a relative date's calendar date), not said as written
    derived: bool = False

    def describe(self) -> str:
        return f"{self.subject} | {self.predicate} | {self.object} ({self.status})"


@dataclass(frozen=True, slots=True)
class Turn:
    at: datetime
    user: str
    assistant: str


@dataclass(frozen=True, slots=True)
class FactQuestion:
    """A question a later session asks about the conversation (``bench qa --dataset facts``)."""

    text: str
    #: the same question in the other language (``--translated``: cross-lingual search)
    translation: str
    #: knowledge-update, past, negation, other-person, plan, single-hop, multi-value, multi-hop, temporal
    type: str
    #: each entry a "|"-separated set of alternatives in both languages, one of which a right answer holds
    keywords: tuple[str, ...]
    answer: str
    #: the indices of the user turns (with their replies) that hold the answer
    evidence: tuple[int, ...]


QUESTION_TYPES = ("knowledge-update", "past", "negation", "other-person", "plan", "single-hop", "multi-value", "multi-hop", "temporal")


@dataclass(frozen=True, slots=True)
class FactConversation:
    id: str
    lang: str
    turns: tuple[Turn, ...]
    gold: tuple[Gold, ...]
    #: the names the user gives themself ("我叫王磊"): a stored subject with one of them is the user
    user_names: tuple[str, ...] = ()
    note: str = ""
    questions: tuple[FactQuestion, ...] = ()

    def sessions(self) -> list[tuple[str, list[Turn]]]:
        """The turns by day, in order: one thread each (``d1-2026-03-01``, ...)."""
        out: list[tuple[str, list[Turn]]] = []
        for t in self.turns:
            day = t.at.date().isoformat()
            if not out or not out[-1][0].endswith(day):
                out.append((f"d{len(out) + 1}-{day}", []))
            out[-1][1].append(t)
        return out


def load_facts(path: str | Path | None = None) -> list[FactConversation]:
    """The conversations of a directory of ``*.jsonl`` files (one conversation a line) or of one
    file, every field checked; InvalidInput naming the file and line of the first bad one."""
    where = Path(path) if path is not None else default_data()
    files = sorted(where.glob("*.jsonl")) if where.is_dir() else [where]
    if not files or not all(f.is_file() for f in files):
        raise InvalidInput(f"no fact conversations (*.jsonl) at {where}", field="data")
    out: list[FactConversation] = []
    seen: set[str] = set()
    for f in files:
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                conv = _conversation(json.loads(line))
            except (json.JSONDecodeError, InvalidInput, KeyError, TypeError, ValueError) as exc:
                raise InvalidInput(f"{f.name}:{n}: {exc}", field="data") from exc
            if conv.id in seen:
                raise InvalidInput(f"{f.name}:{n}: conversation id {conv.id!r} given twice", field="data")
            seen.add(conv.id)
            out.append(conv)
    if not out:
        raise InvalidInput(f"no fact conversations in {where}", field="data")
    return out


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(x, str) and x.strip() for x in value):
        raise InvalidInput(f"{what} must be a list of non-empty strings")
    return tuple(x.strip() for x in value)


def _text(obj: dict[str, Any], key: str, what: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{what}: {key} must be a non-empty string")
    return value.strip()


def _conversation(obj: Any) -> FactConversation:
    if not isinstance(obj, dict):
        raise InvalidInput("a conversation is a JSON object")
    cid = _text(obj, "id", "conversation")
    lang = obj.get("lang")
    if lang not in LANGS:
        raise InvalidInput(f"{cid}: lang must be one of {', '.join(LANGS)}")
    raw_turns = obj.get("turns")
    if not isinstance(raw_turns, list) or not MIN_TURNS <= len(raw_turns) <= MAX_TURNS:
        raise InvalidInput(f"{cid}: turns must be a list of {MIN_TURNS} to {MAX_TURNS} user turns")
    turns = []
    for i, t in enumerate(raw_turns):
        if not isinstance(t, dict):
            raise InvalidInput(f"{cid}: turn {i} is not an object")
        at = datetime.fromisoformat(_text(t, "at", f"{cid} turn {i}"))
        if at.tzinfo is None:
            raise InvalidInput(f"{cid}: turn {i}: at needs a UTC offset")
        if turns and at <= turns[-1].at:
            raise InvalidInput(f"{cid}: turn {i} is not later than the one before")
        turns.append(Turn(at, _text(t, "user", f"{cid} turn {i}"), _text(t, "assistant", f"{cid} turn {i}")))
    raw_gold = obj.get("gold")
    if not isinstance(raw_gold, list) or not raw_gold:
        raise InvalidInput(f"{cid}: gold must be a non-empty list")
    said = _light(" ".join(f"{t.user} {t.assistant}" for t in turns))
    gold = [_gold(g, f"{cid} gold {i}", said) for i, g in enumerate(raw_gold)]
    keys = [(_light(g.subject), _light(g.predicate), _light(g.object)) for g in gold]
    if len(set(keys)) != len(keys):
        raise InvalidInput(f"{cid}: a gold statement is given twice")
    note = obj.get("note", "")
    if not isinstance(note, str):
        raise InvalidInput(f"{cid}: note must be a string")
    raw_questions = obj.get("questions", [])
    if not isinstance(raw_questions, list):
        raise InvalidInput(f"{cid}: questions must be a list")
    questions = tuple(_question(q, f"{cid} question {i}", len(turns)) for i, q in enumerate(raw_questions))
    return FactConversation(
        cid, lang, tuple(turns), tuple(gold), _strings(obj.get("user_names", []), f"{cid}: user_names"), note, questions
    )


def _question(q: Any, what: str, turns: int) -> FactQuestion:
    if not isinstance(q, dict):
        raise InvalidInput(f"{what} is not an object")
    unknown = set(q) - {"question", "translation", "type", "keywords", "answer", "evidence"}
    if unknown:
        raise InvalidInput(f"{what}: unknown fields {', '.join(sorted(unknown))}")
    kind = q.get("type")
    if kind not in QUESTION_TYPES:
        raise InvalidInput(f"{what}: type must be one of {', '.join(QUESTION_TYPES)}")
    evidence = q.get("evidence")
    if (
        not isinstance(evidence, list)
        or not evidence
        or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < turns for i in evidence)
    ):
        raise InvalidInput(f"{what}: evidence must be a non-empty list of turn indices below {turns}")
    keywords = _strings(q.get("keywords"), f"{what}: keywords")
    if not keywords or any(not all(alt.strip() for alt in k.split("|")) for k in keywords):
        raise InvalidInput(f"{what}: keywords must be non-empty '|'-separated alternatives")
    return FactQuestion(
        _text(q, "question", what), _text(q, "translation", what), kind, keywords, _text(q, "answer", what), tuple(sorted(set(evidence)))
    )


def _gold(g: Any, what: str, said: str) -> Gold:
    if not isinstance(g, dict):
        raise InvalidInput(f"{what} is not an object")
    unknown = set(g) - {"subject", "predicate", "object", "status", "whose", "category", "aliases", "subject_aliases", "derived"}
    if unknown:
        raise InvalidInput(f"{what}: unknown fields {', '.join(sorted(unknown))}")
    out = Gold(
        _text(g, "subject", what),
        _text(g, "predicate", what),
        _text(g, "object", what),
        g.get("status"),
        g.get("whose"),
        g.get("category"),
        _strings(g.get("aliases", []), f"{what}: aliases"),
        _strings(g.get("subject_aliases", []), f"{what}: subject_aliases"),
        g.get("derived", False),
    )
    if out.status not in STATUSES:
        raise InvalidInput(f"{what}: status must be one of {', '.join(STATUSES)}")
    if out.whose not in WHOSE:
        raise InvalidInput(f"{what}: whose must be one of {', '.join(WHOSE)}")
    if out.category not in CATEGORIES:
        raise InvalidInput(f"{what}: category must be one of {', '.join(CATEGORIES)}")
    if not isinstance(out.derived, bool):
        raise InvalidInput(f"{what}: derived must be true or false")
    if (out.category == "not_a_fact") != (out.status == "not_a_fact") and not (out.category == "not_a_fact" and out.status == "negated"):
        raise InvalidInput(f"{what}: the not_a_fact category goes with the status not_a_fact (or negated), and only there")
    if _is_self(out.subject) and out.whose != "user":
        raise InvalidInput(f"{what}: a statement about the user is whose=user")
    if not out.derived and not any(_inside(_light(form), said) for form in (out.object, *out.aliases)):
        raise InvalidInput(
            f"{what}: neither the object {out.object!r} nor an alias is said in the turns (mark a worked-out object derived)"
        )
    return out


# ---- normalising ---------------------------------------------------------------------------------

_SELF = {"用户", "我", "我的", "本人", "我自己", "用户本人", "user", "the user", "i", "me", "my", "myself", "用户自己"}
_ASCII_WORD = re.compile(r"[a-z0-9 ]+")


def _light(text: str) -> str:
    """Case-folded, NFKC, every run of punctuation or space one space: "Model 3" -> "model 3",
    "《星际穿越》" -> "星际穿越"."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[\W_]+", " ", text).split())


def _compact(text: str) -> str:
    return text.replace(" ", "")


def _is_self(name: str) -> bool:
    return _light(name) in _SELF


def _inside(part: str, whole: str) -> bool:
    """Whether the light ``part`` occurs in the light ``whole``; an all-ASCII part only as whole
    words ("go" is not in "google"), spaces optional ("model3" is "model 3")."""
    if not part or not whole:
        return False
    if _ASCII_WORD.fullmatch(part):
        pattern = r"(?<![a-z0-9])" + r"\s*".join(map(re.escape, _compact(part))) + r"(?![a-z0-9])"
        return re.search(pattern, whole) is not None
    return _compact(part) in _compact(whole)


def _size(text: str) -> int:
    """Length in characters, an ASCII word counted as 2 (so "go" is as long as "深圳")."""
    return sum(2 if w.isascii() else len(w) for w in re.findall(r"[a-z0-9]+|[^a-z0-9 ]", text))


def object_score(stored: str, gold: Gold) -> int:
    """3: the same as the object or an alias; 2: one of them is inside the stored object; 1: the
    stored object is inside one of them and not a small part of it; 0: no match."""
    s = _light(stored)
    if not s:
        return 0
    forms = [_light(f) for f in (gold.object, *gold.aliases)]
    if any(_compact(s) == _compact(f) for f in forms):
        return 3
    if any(_size(f) >= 2 and _inside(f, s) for f in forms):
        return 2
    if _size(s) >= 2 and any(_inside(s, f) and 2 * len(_compact(s)) >= len(_compact(f)) for f in forms):
        return 1  # "数据分析" of 数据分析师; not "dentist" of "dentist appointment"
    return 0


#: predicates that mean one thing, for breaking ties between gold statements with the same object
_PREDICATE_GROUPS = [
    {
        "住在",
        "住",
        "居住",
        "居住在",
        "搬到",
        "搬家到",
        "搬去",
        "搬来",
        "定居",
        "现居",
        "所在城市",
        "城市",
        "居住地",
        "住址",
        "live",
        "lives",
        "lives in",
        "live in",
        "living in",
        "moved to",
        "moved",
        "based in",
        "location",
        "city",
        "resides in",
    },
    {
        "工作",
        "工作于",
        "在工作",
        "就职",
        "就职于",
        "任职",
        "任职于",
        "入职",
        "公司",
        "雇主",
        "单位",
        "供职",
        "上班",
        "works at",
        "work at",
        "employer",
        "company",
        "works for",
        "joined",
        "job at",
    },
    {
        "职业",
        "工作是",
        "职位",
        "岗位",
        "身份",
        "是",
        "做",
        "担任",
        "从事",
        "是一名",
        "job",
        "occupation",
        "role",
        "profession",
        "position",
        "works as",
        "is",
        "is a",
    },
    {
        "使用",
        "用",
        "采用",
        "改用",
        "换成",
        "技术栈",
        "依赖",
        "基于",
        "后端",
        "后端使用",
        "uses",
        "use",
        "built with",
        "using",
        "stack",
        "backend",
        "framework",
    },
    {
        "喜欢",
        "爱",
        "爱好",
        "兴趣",
        "热爱",
        "偏好",
        "最喜欢",
        "迷上",
        "likes",
        "like",
        "loves",
        "love",
        "enjoys",
        "prefers",
        "hobby",
        "favorite",
        "favourite",
    },
    {
        "叫",
        "名字",
        "姓名",
        "名叫",
        "名字是",
        "又名",
        "别名",
        "笔名",
        "昵称",
        "姓",
        "name",
        "called",
        "named",
        "alias",
        "nickname",
        "pen name",
        "also known as",
    },
    {
        "日期",
        "时间",
        "定在",
        "推迟到",
        "提前到",
        "改到",
        "生日",
        "date",
        "time",
        "on",
        "scheduled",
        "postponed to",
        "rescheduled to",
        "birthday",
    },
]
#: the name group: an alias is a name, and only a name statement is right for it
_NAME_PREDICATES = _PREDICATE_GROUPS[5]
#: words that say a statement's value no longer holds or never did ("不再", "戒掉", "no longer")
_NEGATION = re.compile(
    r"不再|已经不|已不|再也不|不(?:吃|喝|抽|用|做|去|想|玩|跑|打|养|会|喜欢|爱|能|太能|是|看|听|要|参加|住)|没(?:有|再|去|看|吃)|戒|停止|停用|放弃|辞职|辞掉|辞去|离职|离开|退出|退了|退掉|取消|卖掉|卖给|卖了|搬离|别再|"
    r"\bno longer\b|\bnot\b|n't\b|\b(?:do|does|did|is|are|was|were|ca|wo|have|has|had|would|could|should)n t\b|\bnever\b|\bquit\b|\bquits\b|\bstopped\b|\bgave up\b|\bgive up\b|\bleft\b|\bsold\b|\bdislikes?\b|\bhates?\b|\bcan ?t stand\b|\bavoids?\b|\bcancell?ed\b"
)
_PAST = re.compile(r"以前|之前|曾经|曾|原来|过去|此前|从前|前任|\bused to\b|\bformerly\b|\bpreviously\b|\bformer\b|\bex\b|\bbefore\b")
_PLAN = re.compile(
    r"打算|计划|考虑|想|希望|可能|也许|如果|要去|将要|将会|预计|即将|\bplans?\b|\bplanning\b|\bthinking about\b|\bconsidering\b|\bconsider\b|\bmaybe\b|\bmight\b|\bwants?\b|\bwish\b|\bhopes?\b|\bintends?\b|\bgoing to\b|\bgonna\b|\bwill\b|\bwould like\b|\bif\b"
)


def _group(predicate: str) -> int | None:
    p = _light(predicate)
    for i, g in enumerate(_PREDICATE_GROUPS):
        if p in g:
            return i
    return None


def _bare_predicate(predicate: str) -> str:
    return _light(_PLAN.sub(" ", _PAST.sub(" ", _NEGATION.sub(" ", _light(predicate)))))


def predicate_score(stored: str, gold: str) -> int:
    """2: the same predicate or one meaning (a group above, markers of negation, plans and the
    past left out); 1: sharing a third of their characters (words, in English); 0: otherwise."""
    a, b = _bare_predicate(stored), _bare_predicate(gold)
    if not a or not b:
        return 0
    if _compact(a) == _compact(b) or (_group(a) is not None and _group(a) == _group(b)):
        return 2
    ta = set(a.split()) if a.isascii() else set(_compact(a))
    tb = set(b.split()) if b.isascii() else set(_compact(b))
    return 1 if ta and tb and 3 * len(ta & tb) >= len(ta | tb) else 0


def item_status(status: str, predicate: str, obj: str) -> str:
    """What a stored value says: past when superseded; current when it is a plan that came true
    (``done``: what was planned holds now); otherwise negated, planned or past when its predicate
    (or, for a negation, its object) says so ("不再做", "打算去", "used to"); else current."""
    if status == "past":
        return "past"
    if status == "done":
        return "current"
    p, o = _light(predicate), _light(obj)
    if _NEGATION.search(p):
        return "negated"
    if _PLAN.search(p):  # a plan to end something is a plan ("计划|辞职回合肥")
        return "plan"
    if _NEGATION.search(o):
        return "negated"
    if _PAST.search(p):
        return "past"
    return "current"


#: which stored statuses agree with a gold status
COMPATIBLE = {"current": {"current"}, "past": {"past", "negated"}, "negated": {"negated", "past"}, "plan": {"plan"}, "not_a_fact": set()}
#: words that say a value is the old one in a change ("从上海搬到深圳", "switched from soda"): a
#: stored value naming an old value beside them does not claim it is current
_CHANGE = re.compile(
    r"从|搬|换|改|转|迁移|推迟|提前|不再|已经不|以前|原来|之前|曾|离开|辞|退出|戒|卖|→|->|\bfrom\b|\bswitched\b|\bmoved\b|\bchanged\b|\breplaced\b|\binstead\b|\bused to\b|\bno longer\b|\bformerly\b|\bpreviously\b|\bleft\b|\bquit\b|\bgave up\b|\bmigrated\b|\bpushed back\b|\bpostponed\b"
)
_DATE = re.compile(
    r"\d\s*(?:年|月|日|号)|\d{4}-\d{2}|\b(?:january|february|march|april|may|june|july|august|september|october|november|december)\b|五一|国庆|周[一二三四五六日]|\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b"
)


def agrees(reads: str, gold: Gold) -> bool:
    """Whether a stored value's own status (``item_status``) agrees with the gold's. Besides
    ``COMPATIBLE``: a planned date of something current ("计划 7月5日" for an exam set on 7月5日), and
    a marker the gold's own predicate holds ("quit smoking | February" for "quit smoking in")."""
    if reads in COMPATIBLE[gold.status]:
        return True
    if gold.status != "current" or reads == "current":
        return False
    if reads == "plan" and (gold.category == "date" or _DATE.search(_light(gold.object))):
        return True
    return item_status("current", gold.predicate, "") == reads


def _shown_as_current(reads: str, gold: Gold) -> bool:
    """A value the store holds as current that reads as true now (or as a plan still on) while
    the gold says it is over, never was, or is only planned: a wrong current value."""
    if gold.status in ("past", "negated", "not_a_fact"):
        return reads in ("current", "plan")
    return gold.status == "plan" and reads == "current"


# ---- what the store holds -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Item:
    """One stored statement, normalised: ``status`` is current or past as the store holds it, or
    done (a plan that came true, ``layers.fulfil``)."""

    subject: str
    predicate: str
    object: str
    status: str
    source: str
    subject_key: str = ""
    since: str = ""
    until: str = ""
    said: str = ""
    thread: str = ""

    def describe(self) -> str:
        return f"{self.subject} | {self.predicate} | {self.object} ({self.status}, {self.source})"


def stored_items(memory: Any, user_id: str, threads: Iterable[str] = ()) -> list[Item]:
    """What the store holds as model-made memory for the user: the entities' attributes (current
    and past values) and aliases, the relations (superseded ones past), the state, and the summary
    notes with a statement of the given threads (source "note"), marked as the summary shows them."""
    from ..layers.attributes import attribute_values
    from ..layers.fulfil import DONE
    from ..layers.names import SELF_KEY
    from ..layers.notes import settled_by_profile
    from ..layers.summary import entities_of

    records = memory.store.records
    user = memory.scope(user_id)
    texts = _turn_texts(memory, user_id, threads)

    def quote(ids: Iterable[str]) -> str:
        return " / ".join(texts[i] for i in ids if i in texts)[:200]

    out: list[Item] = []
    for r in records.current(user, "entity"):
        v = r.value
        name = v.get("name") or r.key
        source = "profile" if r.key == SELF_KEY else "entity"
        for key, attribute in (v.get("attributes") or {}).items():
            current, past = attribute_values(attribute)
            for status, values in (("current", current), ("past", past)):
                for x in values:
                    until = str(x.get("until", "")) if status == "past" else ""
                    since = str(x.get("valid_from", ""))
                    held = "done" if status == "past" and x.get(DONE) else status
                    out.append(Item(name, key, str(x.get("value", "")), held, source, r.key, since, until, quote(x.get("source_ids", ()))))
        for alias in v.get("aliases") or ():
            a, n = _light(alias), _light(name)
            if r.key != SELF_KEY and (_inside(a, n) or _inside(n, a) or _inside(a, _light(r.key))):
                continue  # "星图" of 星图项目: one name spelt two ways, not a statement
            out.append(Item(name, "alias", alias, "current", "alias", r.key, said=quote(r.source_ids)))
    for r in records.current(user, "relation"):
        v = r.value
        status = ("done" if v.get(DONE) else "past") if v.get("invalid_at") else "current"
        since = (r.valid_from or r.created_at).isoformat() if (r.valid_from or r.created_at) else ""
        out.append(
            Item(
                str(v.get("source", "")),
                str(v.get("relation", "")),
                str(v.get("target", "")),
                status,
                "relation",
                str(v.get("source_key", "")),
                since,
                str(v.get("invalid_at") or ""),
                str(v.get("evidence", ""))[:200],
            )
        )
    for r in records.current(user, "state"):
        value = r.value.get("value")
        out.append(
            Item(
                "用户",
                r.key,
                value if isinstance(value, str) else json.dumps(value, ensure_ascii=False),
                "current",
                "state",
                SELF_KEY,
                said=quote(r.source_ids),
            )
        )
    me = records.current(user, "entity", [SELF_KEY])
    profile = dict(me[0].value.get("attributes") or {}) if me else {}
    names = [str(n) for n in [me[0].value.get("name", ""), *me[0].value.get("aliases", [])] if n] if me else []
    for thread in threads:
        for r in records.current(memory.scope(user_id, thread), "summary"):
            # as the summary shows them: a change said in a later thread ends a note (``settled_by_profile``)
            items = r.value.get("items", [])
            for note in settled_by_profile(items, profile, r.value.get("lang", "en"), names, entities_of(memory.store, user, items)):
                if note.get("said") or not (note.get("subject") and note.get("object")):
                    continue  # a quote of the user's turn, or a merged note without a statement
                status = ("done" if note.get(DONE) else "past") if note.get("superseded_at") or note.get("past") else "current"
                out.append(
                    Item(
                        note["subject"],
                        note.get("predicate", ""),
                        note["object"],
                        status,
                        "note",
                        "",
                        str(note.get("at", "")),
                        str(note.get("superseded_at") or ""),
                        quote(note.get("source_ids", ())),
                        thread,
                    )
                )
    return [i for i in out if i.object.strip()]


def _turn_texts(memory: Any, user_id: str, threads: Iterable[str]) -> dict[str, str]:
    out = {}
    for thread in threads:
        for m in memory.history(user_id=user_id, thread_id=thread):
            out[m.id] = f"{m.role}: {m.text}"
    return out


# ---- scoring ---------------------------------------------------------------------------------------


def _item_is_user(item: Item, conv: FactConversation) -> bool:
    names = {_light(n) for n in conv.user_names}
    return item.subject_key == "user" or _is_self(item.subject) or _light(item.subject) in names


def _subject_matches(subject: str, is_user: bool, gold: Gold, predicate: str = "") -> bool:
    """Whether a stored subject is the gold's: the user for the user, else a name or alias by
    containment; a statement on the user whose predicate names the gold's subject ("用户 | 妹妹的专业
    | 临床医学", "user | wife's job | pediatrician") is that subject's."""
    names = [gold.subject, *gold.subject_aliases]
    others = [_light(n) for n in names if not _is_self(n)]
    if is_user:
        p = _light(predicate)
        return any(_is_self(n) for n in names) or (bool(p) and any(_size(n) >= 2 and _inside(n, p) for n in others))
    s = _light(subject)
    return bool(s) and any(
        _compact(s) == _compact(n) or (_size(n) >= 2 and _inside(n, s)) or (_size(s) >= 2 and _inside(s, n)) for n in others
    )


@dataclass(slots=True)
class Verdict:
    item: Item
    verdict: str
    #: the index of the gold statement the item was matched to (None: unmatched)
    gold: int | None = None
    #: why a wrong item is wrong, in a few words
    why: str = ""
    #: the item's own status, as its predicate and object say it (see ``item_status``)
    reads_as: str = ""
    #: other gold statements a correct item also carries, found for recall ("trip to Portugal in
    #: September" carries the trip and its month): same subject, agreeing status, object inside
    also: tuple[int, ...] = ()

    def row(self, conv: FactConversation) -> dict[str, Any]:
        g = conv.gold[self.gold] if self.gold is not None else None
        out: dict[str, Any] = {
            "conversation": conv.id,
            "verdict": self.verdict,
            "source": self.item.source,
            "stored": {
                "subject": self.item.subject,
                "predicate": self.item.predicate,
                "object": self.item.object,
                "status": self.item.status,
                "reads_as": self.reads_as,
            },
        }
        for k in ("subject_key", "since", "until", "said", "thread"):
            if getattr(self.item, k):
                out["stored"][k] = getattr(self.item, k)
        if g is not None:
            out["gold"] = {
                "subject": g.subject,
                "predicate": g.predicate,
                "object": g.object,
                "status": g.status,
                "whose": g.whose,
                "category": g.category,
            }
        if self.why:
            out["why"] = self.why
        return out


def score_item(item: Item, conv: FactConversation) -> Verdict:
    """The verdict on one stored item against the conversation's gold (see the module's text)."""
    reads = item_status(item.status, item.predicate, item.object)
    is_user = _item_is_user(item, conv)
    candidates = []  # (object score, subject matches, predicate score, status agrees, reversed, index)
    for i, g in enumerate(conv.gold):
        if score := object_score(item.object, g):
            candidates.append(
                (
                    score,
                    _subject_matches(item.subject, is_user, g, item.predicate),
                    predicate_score(item.predicate, g.predicate),
                    agrees(reads, g),
                    False,
                    i,
                )
            )
    if item.source == "relation" and not any(c[1] for c in candidates):
        # a relation written the other way round ("知识中台 —开发者→ 小李" for 小李 开发 知识中台)
        target_is_user = _is_self(item.object) or _light(item.object) in {_light(n) for n in conv.user_names}
        for i, g in enumerate(conv.gold):
            if (score := object_score(item.subject, g)) and _subject_matches(item.object, target_is_user, g):
                candidates.append((score, True, predicate_score(item.predicate, g.predicate), agrees(reads, g), True, i))
    if not candidates:
        return Verdict(item, "unmatched", reads_as=reads, why="in no gold statement")
    own = [c for c in candidates if c[1]]
    if own:
        best = max(own, key=lambda c: (c[0], c[2], c[3]))
        g = conv.gold[best[5]]
        if item.source == "alias" and _light(g.predicate) not in _NAME_PREDICATES:
            return Verdict(item, "misattributed", best[5], f"an alias, but {g.object} is {g.subject}'s {g.predicate}, not a name", reads)
        if best[3]:
            stale = _stale_beside(item, reads, conv, is_user, best[5], [c for c in own if not c[4]])
            if stale is not None:
                return Verdict(item, "wrong_current", stale[0], stale[1], reads)
            also = tuple(c[5] for c in own if c[5] != best[5] and c[3] and c[0] >= 2 and not c[4])
            return Verdict(item, "correct", best[5], reads_as=reads, also=also)
        if item.status in ("current", "done") and _shown_as_current(reads, g):
            return Verdict(
                item,
                "wrong_current",
                best[5],
                f"stored as {'a plan still on' if reads == 'plan' else 'current'}, gold is {g.status}",
                reads,
            )
        return Verdict(item, "wrong_status", best[5], f"stored as {reads}, gold is {g.status}", reads)
    best = max(candidates, key=lambda c: (conv.gold[c[5]].status == "not_a_fact", c[0], c[2]))
    g = conv.gold[best[5]]
    if g.status == "not_a_fact":  # a trap's object under any subject: the assistant's words or a question
        if item.status in ("current", "done") and reads != "negated":
            return Verdict(
                item, "wrong_current", best[5], "not a fact (the assistant's suggestion or a question), stored as current", reads
            )
        return Verdict(item, "wrong_status", best[5], "not a fact, stored", reads)
    return Verdict(item, "misattributed", best[5], f"the value is {g.subject}'s, stored under {item.subject}", reads)


def _stale_beside(item: Item, reads: str, conv: FactConversation, is_user: bool, best: int, own: Sequence[tuple]) -> tuple[int, str] | None:
    """A right value stored beside an old or false one that the item also claims as current: in
    its object ("日常用Spark、Airflow和Hive" after Hive was replaced; "年糕汤圆" after 汤圆 died) or in
    its predicate, an attribute's name that swallowed a value ("住在上海=喜欢打网球" after the move).
    Not when the item's words say which one is old ("从上海搬到深圳")."""
    if item.status not in ("current", "done") or reads != "current" or _CHANGE.search(_light(f"{item.predicate} {item.object}")):
        return None
    for c in own:
        g = conv.gold[c[5]]
        if c[5] != best and c[0] >= 2 and _shown_as_current(reads, g):
            return c[5], f"also states {g.object} as current, gold is {g.status}"
    p = _light(item.predicate)
    for i, g in enumerate(conv.gold):
        named = any(_size(f) >= 2 and _inside(f, p) for f in map(_light, (g.object, *g.aliases)))
        if named and i != best and _shown_as_current(reads, g) and _subject_matches(item.subject, is_user, g, item.predicate):
            return i, f"the attribute's name holds {g.object}, gold is {g.status}"
    return None


def score(conv: FactConversation, items: Sequence[Item]) -> list[Verdict]:
    return [score_item(i, conv) for i in items]


def tally(
    conversations: Sequence[FactConversation], verdicts: dict[str, list[Verdict]], *, sources: Sequence[str] = SCORED_SOURCES
) -> dict[str, Any]:
    """Overall and per-category counts of the verdicts of ``sources``' items: stored, correct,
    precision, gold (traps left out), found, recall, and each kind of error."""
    cats: dict[str, Counter[str]] = defaultdict(Counter)
    total: Counter[str] = Counter()
    found: set[tuple[str, int]] = set()
    for conv in conversations:
        for v in verdicts.get(conv.id, []):
            if v.item.source not in sources:
                continue
            cat = conv.gold[v.gold].category if v.gold is not None else "unmatched"
            for c in (cats[cat], total):
                c["stored"] += 1
                c[v.verdict] += 1
            if v.verdict == "correct" and v.gold is not None:
                found.update((conv.id, i) for i in (v.gold, *v.also))
    for conv in conversations:
        for i, g in enumerate(conv.gold):
            if g.status == "not_a_fact":
                cats[g.category]["traps"] += 1
                total["traps"] += 1
                continue
            hit = (conv.id, i) in found
            for c in (cats[g.category], total):
                c["gold"] += 1
                c["found"] += hit

    def row(c: Counter[str]) -> dict[str, Any]:
        out = {
            "stored": c["stored"],
            "correct": c["correct"],
            "precision": round(c["correct"] / c["stored"], 3) if c["stored"] else None,
            "gold": c["gold"],
            "found": c["found"],
            "recall": round(c["found"] / c["gold"], 3) if c["gold"] else None,
        }
        out.update({k: c[k] for k in VERDICTS[1:]})
        if c["traps"]:
            out["traps"] = c["traps"]
        return out

    order = [*CATEGORIES, "unmatched"]
    return {"overall": row(total), "by_category": {k: row(cats[k]) for k in order if k in cats}}


# ---- the run ---------------------------------------------------------------------------------------


@dataclass
class _Cost:
    turns: int = 0
    user_turns: int = 0
    seconds: float = 0.0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_ms: float = 0.0
    failed_jobs: int = 0
    errors: list[str] = field(default_factory=list)


def run(
    path: str | Path | None,
    systems: Sequence[Any],
    *,
    model: str | ChatModel | None = None,
    limit: int | None = None,
    only: Sequence[str] = (),
    embedder: str | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> dict[str, Any]:
    """Ingest every conversation into a fresh store per system (``evaluation.qa.System``: a preset
    or layers), read back what the layers stored and score it; returns the report."""
    conversations = [c for c in load_facts(path) if not only or c.id in only]
    if not conversations:
        raise InvalidInput(f"no conversation matches {', '.join(only)}", field="only")
    if limit is not None:
        if limit < 1:
            raise InvalidInput("limit must be positive", field="limit")
        conversations = conversations[:limit]
    chat = get_chat_model(model)
    report: dict[str, Any] = {
        "dataset": "facts",
        "data": str(Path(path) if path is not None else default_data()),
        "model": chat.name,
        "conversations": len(conversations),
        "languages": dict(Counter(c.lang for c in conversations)),
        "gold": sum(1 for c in conversations for g in c.gold if g.status != "not_a_fact"),
        "traps": sum(1 for c in conversations for g in c.gold if g.status == "not_a_fact"),
        "turns": sum(2 * len(c.turns) for c in conversations),
        "systems": {},
    }
    done, total = 0, len(conversations) * len(systems)
    for system in systems:
        verdicts: dict[str, list[Verdict]] = {}
        cost = _Cost()
        for conv in conversations:
            items = _ingest(system, conv, chat, embedder, cost)
            verdicts[conv.id] = score(conv, items)
            done += 1
            if progress:
                right = sum(v.verdict == "correct" for vs in verdicts.values() for v in vs if v.item.source in SCORED_SOURCES)
                stored = sum(1 for vs in verdicts.values() for v in vs if v.item.source in SCORED_SOURCES)
                progress(done, total, f"facts {system.name}: {conv.id}, {right}/{stored} stored items right")
        report["systems"][system.name] = _system_report(system, conversations, verdicts, cost)
    return report


def _ingest(system: Any, conv: FactConversation, chat: ChatModel, embedder: str | None, cost: _Cost) -> list[Item]:
    from ..memory import Memory

    options: dict[str, Any] = {"model": chat}
    if embedder:
        options["embedder"] = embedder
    stack = {"preset": system.preset} if system.preset else {"layers": list(system.layers)}
    with Memory("memory://", options=options, max_tokens=None, **stack) as memory:
        started = time.perf_counter()
        threads = []
        for thread, turns in conv.sessions():
            batch = []
            for t in turns:
                batch.append({"role": "user", "content": t.user, "timestamp": t.at.isoformat()})
                batch.append({"role": "assistant", "content": t.assistant, "timestamp": (t.at + timedelta(seconds=30)).isoformat()})
            memory.add(batch, user_id=conv.id, thread_id=thread)
            threads.append(thread)
            done = memory.flush(user_id=conv.id)  # the day's jobs run before the next day, as a worker's would
            cost.failed_jobs += done.failed
            cost.errors += list(done.errors)
        cost.seconds += time.perf_counter() - started
        cost.turns += 2 * len(conv.turns)
        cost.user_turns += len(conv.turns)
        for u in memory.usage(user_id=conv.id):
            cost.calls += 1
            cost.prompt_tokens += u.prompt_tokens
            cost.completion_tokens += u.completion_tokens
            cost.model_ms += u.latency_ms
        return stored_items(memory, conv.id, threads)


def _system_report(
    system: Any, conversations: Sequence[FactConversation], verdicts: dict[str, list[Verdict]], cost: _Cost
) -> dict[str, Any]:
    scored = tally(conversations, verdicts)
    by_source = {}
    for source in (*SCORED_SOURCES, "note"):
        n = sum(1 for vs in verdicts.values() for v in vs if v.item.source == source)
        if n:
            by_source[source] = tally(conversations, verdicts, sources=(source,))["overall"]
    found = {
        (c.id, i)
        for c in conversations
        for v in verdicts[c.id]
        if v.verdict == "correct" and v.item.source in SCORED_SOURCES
        for i in (v.gold, *v.also)
    }
    rows = [v.row(c) for c in conversations for v in verdicts[c.id]]
    turns = max(1, cost.turns)
    return {
        "layers": list(system.layers),
        "preset": system.preset,
        **scored,
        "by_source": by_source,
        "notes": by_source.get("note"),
        "cost": {
            "turns": cost.turns,
            "user_turns": cost.user_turns,
            "model_calls": cost.calls,
            "prompt_tokens": cost.prompt_tokens,
            "completion_tokens": cost.completion_tokens,
            "tokens_per_turn": round((cost.prompt_tokens + cost.completion_tokens) / turns, 1),
            "seconds_per_turn": round(cost.seconds / turns, 2),
            "model_seconds_per_turn": round(cost.model_ms / 1000 / turns, 2),
            "ingest_seconds": round(cost.seconds, 1),
        },
        "failed_jobs": cost.failed_jobs,
        "errors": cost.errors[:20],
        "items": rows,
        "missed": [
            {"conversation": c.id, "category": g.category, "gold": g.describe()}
            for c in conversations
            for i, g in enumerate(c.gold)
            if g.status != "not_a_fact" and (c.id, i) not in found
        ],
    }


def rescore(report: dict[str, Any], path: str | Path | None = None) -> dict[str, Any]:
    """A saved report (``--json OUT``) scored again from its stored items against the set at
    ``path`` as it is now (after the gold or the scorer changed), without ingesting anything."""
    saved = {r["conversation"] for s in report["systems"].values() for r in (*s["items"], *s["missed"])}
    conversations = [c for c in load_facts(path) if c.id in saved]
    known = {c.id: c for c in conversations}
    out = {
        **report,
        "gold": sum(1 for c in conversations for g in c.gold if g.status != "not_a_fact"),
        "traps": sum(1 for c in conversations for g in c.gold if g.status == "not_a_fact"),
        "systems": {},
    }
    for name, s in report["systems"].items():
        verdicts: dict[str, list[Verdict]] = {c.id: [] for c in conversations}
        for r in s["items"]:
            st = r["stored"]
            item = Item(
                st["subject"],
                st["predicate"],
                st["object"],
                st["status"],
                r["source"],
                st.get("subject_key", ""),
                st.get("since", ""),
                st.get("until", ""),
                st.get("said", ""),
                st.get("thread", ""),
            )
            verdicts[r["conversation"]].append(score_item(item, known[r["conversation"]]))
        system = _Saved(tuple(s.get("layers", ())), s.get("preset"))
        out["systems"][name] = {
            **_system_report(system, conversations, verdicts, _Cost()),
            "cost": s["cost"],
            "failed_jobs": s["failed_jobs"],
            "errors": s.get("errors", []),
        }
    return out


@dataclass(frozen=True)
class _Saved:
    """The system a saved report names: its layers and preset."""

    layers: tuple[str, ...]
    preset: str | None


# ---- the report ------------------------------------------------------------------------------------


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def format_report(report: dict[str, Any], *, examples: int = 8) -> str:
    """Markdown: per system, a table by category (and the totals, then the summary's notes apart),
    the cost per turn, and the first wrong current values with their gold."""
    langs = ", ".join(f"{n} {k}" for k, n in sorted(report["languages"].items()))
    lines = [
        f"facts: {report['conversations']} conversations ({langs}), {report['gold']} gold statements and {report['traps']} traps, {report['turns']} turns; model {report['model']}"
    ]
    head = [
        "category",
        "stored",
        "correct",
        "precision",
        "gold",
        "found",
        "recall",
        "wrong current",
        "wrong status",
        "misattributed",
        "unmatched",
    ]
    for name, s in report["systems"].items():
        lines += ["", f"**{name}** ({', '.join(s['layers'])})", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        rows = [*s["by_category"].items(), ("**all**", s["overall"])]
        if s.get("notes"):
            rows.append(("summary notes (apart)", s["notes"]))
        for label, r in rows:
            cells = [
                label,
                r["stored"],
                r["correct"],
                r["precision"],
                r["gold"] or "–",
                r["found"] if r["gold"] else "–",
                r["recall"],
                r["wrong_current"],
                r["wrong_status"],
                r["misattributed"],
                r["unmatched"],
            ]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        c = s["cost"]
        lines.append("")
        lines.append(
            f"cost: {c['model_calls']} model calls, {c['prompt_tokens']:,} prompt + {c['completion_tokens']:,} completion tokens for {c['turns']} turns ({c['tokens_per_turn']} per turn); {c['seconds_per_turn']} s per turn ingest, {c['model_seconds_per_turn']} s of it the model"
            + (f"; {s['failed_jobs']} failed write jobs" if s["failed_jobs"] else "")
        )
        sources = ", ".join(f"{k} {v['correct']}/{v['stored']}" for k, v in s["by_source"].items())
        if sources:
            lines.append(f"by source (correct/stored): {sources}")
        wrong = [r for r in s["items"] if r["verdict"] == "wrong_current" and r["source"] in SCORED_SOURCES]
        if wrong and examples:
            lines.append(f"wrong current values ({len(wrong)}), the first {min(examples, len(wrong))}:")
            for r in wrong[:examples]:
                st, g = r["stored"], r.get("gold", {})
                lines.append(
                    f"- {r['conversation']} [{r['source']}] stored `{st['subject']} | {st['predicate']} | {st['object']}` as current; gold `{g.get('subject')} | {g.get('predicate')} | {g.get('object')}` is {g.get('status')}"
                )
    return "\n".join(lines)
