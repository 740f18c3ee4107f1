"""Is a statement the model wrote what the user said? Checked against the user's own words before
anything is stored; a statement that fails is dropped with its reason (``Rejected``), one that
only needs its predicate tidied is corrected. A wrong memory is worse than none: when in doubt,
drop.

A statement ``subject|predicate|object`` passes when a sentence of the user's own turns (never
the assistant's: its suggestions and questions are not the user's facts)

- says the object (its words or characters, in the clause that says it);
- says it of the subject: the subject (or a pronoun after it, in the same turn) is the nearest
  name before the object; for the user, the nearest is "我/I/my…" or no name at all (Chinese
  drops the subject), never someone else ("我妹妹住在杭州" is not the user's city, "星图项目使用
  Kafka" is not the user's stack);
- with the predicate's polarity: a negation before the object ("不再做数据分析", "no longer uses")
  that the predicate lacks ends the value (``past``) when it is a cessation, and drops the
  statement otherwise ("不喜欢香菜" written as 喜欢); a negation, like or dislike in the predicate
  that the sentence does not say drops it ("不再做数据分析" written "用户|不喜欢|数据分析", a real one);
- not as a question ("要不要用Redis？") nor a hypothetical ("如果搬到杭州…"); a plan ("打算明年
  搬到杭州") is kept as a plan: its predicate carries the plan word, so it never stands as the
  current value ("打算搬到=杭州", not "住在=杭州").

Predicates are tidied: time words are not part of a relation ("上个月（2026年4月）搬到" -> "搬到";
"以前住" -> "住", past); a predicate that swallowed its own value ("住在上海|招商银行", a real one)
is split back ("住在|上海") and the object it was given dropped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..budget import split_text
from ..llm.extract import Statement
from ..llm.grounding import normalize, overlap
from ..types import Message
from .supersede import SYNONYMS

#: words that name the speaker
_SELF = re.compile(r"我|咱|本人|\b(?:i|i'm|i've|i'd|me|my|mine|myself|we|our|us)\b")
#: people a user speaks of as theirs: "我妹妹", "my wife": what follows is theirs, not the user's
_KIN = (
    "妹妹|姐姐|哥哥|弟弟|老婆|妻子|太太|爱人|丈夫|老公|女朋友|男朋友|女友|男友|爸爸|妈妈|父亲|母亲|爸|妈|儿子|女儿|孩子|老板|上司|领导|经理|同事|朋友|室友|"
    "邻居|老师|同学|表妹|表姐|表哥|表弟|堂妹|堂姐|堂哥|堂弟|爷爷|奶奶|外公|外婆|叔叔|阿姨|舅舅|姑姑|"
    r"\b(?:wife|husband|sister|brother|mom|mum|mother|dad|father|son|daughter|kid|kids|boss|manager|friend|colleague|coworker|partner|girlfriend|boyfriend|roommate|neighbou?r|teacher)\b"
)
_OTHER_PERSON = re.compile(rf"(?:我的?|咱的?|\bmy\s+|\bour\s+)(?:{_KIN})|(?:他|她|它|他们|她们|\bhe\b|\bshe\b|\bthey\b|\bhis\b|\bher\b|\btheir\b)")
_PRONOUN = re.compile(r"他|她|它|\bhe\b|\bshe\b|\bit\b|\bthey\b|\bhis\b|\bher\b|\bits\b|\btheir\b")
_CLAUSE = re.compile(r"[，,；;：:。！？!?\n]")

_NEG_ZH = r"不再|已经不|再也不|从不|从来不|并不|不|没有|没|别"
_NEG_EN = r"\b(?:no longer|not|never|don't|doesn't|didn't|isn't|aren't|wasn't|won't|can't|cannot|haven't|hasn't)\b|n't\b"
#: "不" that negates nothing ("不错", "不仅…还…")
_NOT_NEGATION = re.compile(r"不(?:错|少|同|久|过|断|仅|但|管|论|然|光|只|止|得不|停|是吗|用谢)")
_NEGATION = re.compile(rf"{_NEG_ZH}|{_NEG_EN}", re.IGNORECASE)
#: a negation that ends a state (cessation), and verbs that end what follows them
_CESSATION = re.compile(
    r"不再|已经不|再也不|戒掉|戒了|辞掉|辞去|辞了|离开|退出|放弃|停掉|停了|卸载|退掉|不干了|不做了"
    r"|\b(?:no longer|any ?more|quit|quitted|left|stopped|gave up|give up|dropped|cancel(?:l)?ed|sold)\b",
    re.IGNORECASE,
)
#: what says the clause is a supposition, not a fact
_HYPOTHETICAL = re.compile(r"如果|要是|假如|假设|万一|若是|\b(?:if|suppose|supposing|whether|unless)\b", re.IGNORECASE)
#: what says the clause is a plan or a wish: kept, as a plan
_PLAN = re.compile(r"打算|计划|准备|考虑|想要|想|希望|可能|也许|或许|将要|\b(?:plan(?:s|ning)? to|thinking (?:about|of)|considering|might|maybe|going to|hope to|want to|would like to|intend to)\b", re.IGNORECASE)
_PLAN_IN_PREDICATE = re.compile(r"打算|计划|准备|考虑|想|希望|可能|也许|或许|将要|将|要|plan|consider|might|maybe|going to|hope|want|would like|intend", re.IGNORECASE)
#: predicate words of liking or disliking that the sentence must say itself
_SENTIMENT = re.compile(r"不喜欢|喜欢|讨厌|厌恶|热爱|爱|恨|偏爱|偏好|\b(?:likes?|loves?|hates?|dislikes?|enjoys?|prefers?)\b", re.IGNORECASE)
#: time words that qualify a predicate ("以前住", "上个月搬到", "now lives in"): not part of it
_PAST_WORDS = re.compile(r"^(?:以前|之前|原来|原先|曾经|过去|从前|早先)|^(?:used to|previously|formerly|once)\s+", re.IGNORECASE)
_TIME_WORDS = re.compile(
    r"^(?:上个?月|下个?月|这个?月|本月|去年|今年|明年|前年|上周|下周|这周|本周|昨天|今天|明天|前天|后天|"
    r"\d{1,4}年(?:\d{1,2}月)?(?:\d{1,2}[日号])?|\d{1,2}月(?:\d{1,2}[日号])?)|"
    r"^(?:last (?:month|week|year)|this (?:month|week|year)|next (?:month|week|year)|yesterday|today|tomorrow)\s+",
    re.IGNORECASE,
)
_DATE_NOTE = re.compile(r"（\d{4}[^（）]{0,16}）|\(\d{4}[^()]{0,16}\)")
#: canonical predicate spellings that take a place or thing right after them ("住在上海")
_HEADS = sorted((k for k in SYNONYMS if not k.isascii() and len(k) >= 2), key=len, reverse=True)
#: of the object's words (Chinese: characters), the share a clause must say
OBJECT_OVERLAP = 0.8


@dataclass(frozen=True, slots=True)
class Rejected:
    """A statement not stored, and why (shown in the audit trail)."""

    statement: Statement
    reason: str
    quote: str = ""


@dataclass(frozen=True, slots=True)
class Verified:
    kept: list[Statement]
    rejected: list[Rejected]


def verify(statements: Sequence[Statement], messages: Sequence[Message], *, self_names: Sequence[str] = (), context: Sequence[Message] = ()) -> Verified:
    """The statements the user's words support (tidied, ``past`` set where the words end them),
    and those they do not, each with its reason. ``self_names``: the user's own names ("王磊");
    ``context``: the thread's turns just before these, whose topic a sentence that names no one
    goes on with ("我正在开发知识中台。" … a batch later "缓存改用Memcached了。")."""
    # what may be the subject of a sentence: the batch's subjects (an object only is a place, a
    # thing, a value: "从上海搬到深圳" says nothing of 上海)
    names = {normalize(s.subject) for s in statements if len(normalize(s.subject)) >= 2}
    kept: list[Statement] = []
    rejected: list[Rejected] = []
    for s in statements:
        result = check(s, messages, names=names, self_names=self_names, context=context)
        if isinstance(result, Rejected):
            rejected.append(result)
        else:
            kept.append(result)
    return Verified(kept, rejected)


def check(s: Statement, messages: Sequence[Message], *, names: set[str] = frozenset(), self_names: Sequence[str] = (), context: Sequence[Message] = ()) -> Statement | Rejected:  # type: ignore[assignment]
    """One statement, tidied, or why it is rejected."""
    s, past = _tidy(s)
    s = _split_swallowed(s, messages)
    obj = normalize(_DATE_NOTE.sub("", s.object))
    if not obj:
        return Rejected(s, "empty object")
    if _is_self(s.object, ()):  # "李四|是|用户": the user says it of themself ("我叫李四")
        said = any(m.role == "user" and _SELF.search(normalize(m.text)) and normalize(s.subject) in normalize(m.text) for m in messages)
        return s if said else Rejected(s, "the user did not say it of themself")
    found = _clauses_saying(obj, messages, " ".join(normalize(m.text) for m in context if m.role == "user"))
    if not found:
        return Rejected(s, "not in the user's own words")
    is_self = _is_self(s.subject, self_names)
    reasons: list[str] = []
    for _sentence, clause, before, earlier in found:
        if not is_self and _names_own(s.subject, clause):
            reason = None  # said of it in the same clause ("缓存使用Redis", "redis（雷迪斯）只做缓存")
        else:
            reason = _about_subject(s.subject, is_self, earlier, before, names - {obj, normalize(s.subject)}, self_names)
        reason = reason or _asked(clause) or _polarity(s.predicate, clause, before)
        if reason == "past":
            return s.model_copy(update={"past": True})
        if reason is None:
            reason, plan = _mood(clause, before, s.predicate)
            if reason is None:
                if plan:
                    return s.model_copy(update={"predicate": (plan + s.predicate)[:60], "past": past})
                return s.model_copy(update={"past": past}) if past else s
        reasons.append(reason)
    return Rejected(s, reasons[0], found[0][0].strip()[:120])


def _tidy(s: Statement) -> tuple[Statement, bool]:
    """Time words out of the predicate; whether one said the value is past ("以前住")."""
    predicate = _DATE_NOTE.sub("", s.predicate).strip()
    past = False
    for _ in range(3):
        if _PAST_WORDS.search(predicate):
            past = True
            predicate = _PAST_WORDS.sub("", predicate).strip()
        stripped = _TIME_WORDS.sub("", predicate).strip()
        if stripped == predicate or not stripped:
            break
        predicate = stripped
    obj = s.object.strip()
    if obj and normalize(obj) in normalize(predicate) and normalize(predicate) != normalize(obj):
        predicate = predicate.replace(obj, "").strip(" ：:，,的") or predicate  # "喜欢Python|Python"
    return (s.model_copy(update={"predicate": predicate}) if predicate != s.predicate else s), past


def _split_swallowed(s: Statement, messages: Sequence[Message]) -> Statement:
    """A predicate that is a relation word plus its own value, as the user said them together
    ("住在上海" of "我叫王磊，住在上海，在招商银行…", given the object 招商银行): the relation and that
    value; the object it was given belongs to another relation, unknown here."""
    predicate = normalize(s.predicate)
    for head in _HEADS:
        rest = predicate[len(head) :]
        if predicate.startswith(head) and len(rest) >= 2 and any(predicate in normalize(m.text) for m in messages if m.role == "user"):
            return s.model_copy(update={"predicate": s.predicate.strip()[: len(head)], "object": s.predicate.strip()[len(head) :]})
    return s


def _clauses_saying(obj: str, messages: Sequence[Message], before: str = "") -> list[tuple[str, str, str, str]]:
    """(sentence, clause, the turn's text before the object, the user's earlier turns) for each
    clause of the user's turns that says the object: whole, or most of its words (Chinese:
    characters)."""
    out = []
    said = before
    for m in messages:
        if m.role != "user":
            continue
        said += " " + normalize(m.text)
        for sentence in split_text(m.text):
            text = normalize(sentence)
            at = text.find(obj)
            if at < 0:
                clauses = [c for c in _CLAUSE.split(text) if c.strip()]
                best = max(clauses, key=lambda c: overlap(obj, c), default="")
                if not best or overlap(obj, best) < OBJECT_OVERLAP:
                    continue
                at = text.find(best)
            start = max((i.end() for i in _CLAUSE.finditer(text, 0, at)), default=0)
            end = next((i.start() for i in _CLAUSE.finditer(text, at)), len(text))
            # the turn so far: a pronoun or a dropped subject in this sentence refers back into it
            earlier = normalize(m.text)[: max(0, normalize(m.text).find(text))]
            out.append((sentence, text[start : end + 1], earlier + " " + text[:at], said[: -len(normalize(m.text)) - 1]))
    return out


def _is_self(subject: str, self_names: Sequence[str]) -> bool:
    from .extractor import SELF_KEY, entity_key

    return entity_key(subject) == SELF_KEY or normalize(subject) in {normalize(n) for n in self_names}


def _about_subject(subject: str, is_self: bool, earlier: str, before: str, names: set[str], self_names: Sequence[str]) -> str | None:
    """None when the words before the object say it of the subject; else why not. The subject
    is the last anchor before the object: its name (or a pronoun after its name), or for the user
    "我/I" or none at all (a dropped subject); another name or another person ("我妹妹", "他")
    after it means the words speak of them. A sentence that names no one goes on with what the
    user spoke of before (``earlier``): "我正在开发一个知识中台" … "后端使用SpringBoot"."""
    subject_n = normalize(subject)
    own = {subject_n, *(n for n in (_bare(subject_n),) if n)} | ({normalize(n) for n in self_names} if is_self else set())
    own.discard("")
    others: list[tuple[int, str]] = []  # (end, text) of what names someone or something else
    for m in _OTHER_PERSON.finditer(before):
        others.append((m.end(), m.group(0)))
    for m in _NAMED.finditer(before):
        if not any(o in m.group(0) or m.group(0) in o for o in own):
            others.append((m.end(), m.group(0)))
    for name in names - own:
        if not any(name in o or o in name for o in own):
            others.extend((m.end(), name) for m in re.finditer(re.escape(name), before))
    mine = [m.end() for o in own for m in re.finditer(re.escape(o), before)]
    if is_self:
        mine += [m.end() for m in _SELF.finditer(before) if not _possessive(before, m.start())]
    elif mine:  # a pronoun after the subject's own name refers back to it
        first = min(mine)
        pronouns = [(m.end(), m.group(0)) for m in _PRONOUN.finditer(before) if m.start() >= first]
        mine += [end for end, _ in pronouns]
        others = [(end, text) for end, text in others if not _PRONOUN.fullmatch(text) or end < first]
    topic = is_self or not others and any(o in earlier for o in own)
    anchor = max(mine, default=0 if topic else None)
    if anchor is None:
        return "the words do not name the subject"
    later = [text for end, text in sorted(others) if end > anchor]
    return f"the words say it of {later[-1]}" if later else None


def _names_own(subject: str, clause: str) -> bool:
    n = normalize(subject)
    return any(x and x in clause for x in (n, _bare(n)))


def _possessive(text: str, at: int) -> bool:
    """Whether the "我" at ``at`` is part of what the sentence says of someone ("张伟是我们部门的…",
    "…给我的建议"), not its subject."""
    return at > 0 and text[at - 1] in "是的为给和跟与对被把让"


#: names a sentence gives things without capitals: "星图项目", "天枢系统", "the Atlas project"
_NAMED = re.compile(r"[\u3400-\u9fffA-Za-z0-9]{2,6}(?:项目|系统|平台|公司|集团)|\bthe \w+ (?:project|system|platform|company)\b")


def _bare(name: str) -> str:
    from .extractor import entity_key, stem

    key = entity_key(name)
    bare = stem(key)
    return bare if bare != name else ""


def _polarity(predicate: str, clause: str, before: str) -> str | None:
    """None when the predicate and the words agree on yes or no; "past" when the words end the
    value (a cessation the predicate does not carry); else why they disagree."""
    tail = _clause_tail(before)
    words_negate = bool(_NEGATION.search(_NOT_NEGATION.sub("", tail)))
    ends = bool(_CESSATION.search(tail)) or bool(re.search(r"\b(?:any ?more)\b", clause))
    p = normalize(predicate)
    predicate_negates = bool(_NEGATION.search(_NOT_NEGATION.sub("", p)))
    sentiment = _SENTIMENT.search(p)
    if sentiment and normalize(sentiment.group(0)) not in normalize(clause):
        return f"the words do not say {sentiment.group(0)}"
    if predicate_negates and not words_negate and not ends:
        return "the words do not negate it"
    if (words_negate or ends) and not predicate_negates:
        return "past" if ends else "negated in the user's words"
    return None


def _clause_tail(before: str) -> str:
    """The words of the object's own clause before it."""
    cut = max((m.end() for m in _CLAUSE.finditer(before)), default=0)
    return before[cut:]


def _asked(clause: str) -> str | None:
    if clause.rstrip().endswith(("?", "？")) or re.search(r"吗[？?。]?$|呢[？?]?$", clause.strip()):
        return "asked, not said"
    return None


def _mood(clause: str, before: str, predicate: str) -> tuple[str | None, str]:
    """(why the clause states no fact, or None; the plan word the predicate must carry, or "")."""
    tail = _clause_tail(before)
    if _HYPOTHETICAL.search(tail):
        return "a supposition, not a fact", ""
    plan = _PLAN.search(tail)
    if plan and not _PLAN_IN_PREDICATE.search(predicate):
        return None, plan.group(0) + ("" if not plan.group(0).isascii() else " ")
    return None, ""
